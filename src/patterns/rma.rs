//! One-sided communication (remote memory access): what OSU's `osu_put_latency`,
//! `osu_get_latency`, `osu_put_bw`, `osu_acc_latency` and `osu_fop_latency`
//! measure, written once against [`OneSided`] so that MPI's windows and a raw
//! interconnect's RDMA are timed by one procedure (the comparison of Hoefler et
//! al., "LogGP in theory and practice": the library against the transport under
//! it, measured alike).
//!
//! Rank 0 (the origin) starts operations on rank 1's window (the target); every
//! operation is timed on its own with the rank's clock, from its start to its
//! completion as the API defines it:
//!
//! | op | sync | timed region (origin) |
//! |---|---|---|
//! | `put`, `get` | `flush` | the operation, then `flush(target)` (MPI: passive target, `MPI_Win_lock_all` held) |
//! | `put`, `get` | `fence` | the operation, then the fence that ends the epoch (MPI: active target, `MPI_Win_fence`; the target calls the fence too) |
//! | `put-bw` | `flush` | `window` puts of the size back to back, then one flush: bandwidth `window * size / median` |
//! | `put-notify` | `flush` | put, flush, fetch-and-add on the target's flag, flush; the target polls the flag and answers alike: half the round trip (the `--verbs-op write-poll` latency) |
//! | `accumulate` | `flush` | an accumulate (sum) of size/8 doubles, then the flush (where the transport has one) |
//! | `fetch-add` | `flush` | a fetch-and-add of one 64-bit integer, then the flush (one point, 8 bytes) |
//!
//! Notification: MPI orders a put before a later operation only through a
//! completion, so the flag follows the payload's flush; the flag is a counter
//! raised by an atomic fetch-and-add, which needs no origin buffer of its own.
//!
//! Per point: `warmup` untimed operations, then `reps` timed ones; the result
//! holds the min/median/mean/p99/max latency in microseconds (never a loop
//! divided by n, as in [`super::pingpong`]). Window layout: bytes 0..8 hold the
//! notification counter, the payload starts at [`DATA_OFFSET`].
//!
//! Data check (`check`, outside the timed regions): after a put point the target
//! compares its window with the origin's fill byte; after a fetch-add point the
//! origin checks that each operation fetched one more than the one before.

use crate::clock::Clock;
use crate::stats::Summary;
use crate::transport::{Control, ControlError, OneSided, Rank, TransportError};
use serde::{Deserialize, Serialize};

/// The rank that starts the operations and reports.
pub const ORIGIN: Rank = 0;
/// The rank whose window they address.
pub const TARGET: Rank = 1;
/// Where the payload starts in the window (bytes 0..8: the notification counter).
pub const DATA_OFFSET: usize = 8;

/// A one-sided operation as timed (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Put latency.
    Put,
    /// Get latency.
    Get,
    /// Put bandwidth: a window of puts, then one completion.
    PutBw,
    /// Put with notification: the target polls a flag and answers alike.
    PutNotify,
    /// Accumulate (sum of doubles) latency.
    Accumulate,
    /// Fetch-and-add (one 64-bit integer) latency.
    FetchAdd,
}

impl Op {
    /// Every op, in the order measured.
    pub const ALL: [Op; 6] = [
        Op::Put,
        Op::Get,
        Op::PutBw,
        Op::PutNotify,
        Op::Accumulate,
        Op::FetchAdd,
    ];

    /// Its name on the command line and in documents.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::PutBw => "put-bw",
            Op::PutNotify => "put-notify",
            Op::Accumulate => "accumulate",
            Op::FetchAdd => "fetch-add",
        }
    }

    /// The op named `name`.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Whether it is timed under `sync`: only put and get have an active-target
    /// (fence) variant.
    pub fn under(self, sync: RmaSync) -> bool {
        sync == RmaSync::Flush || matches!(self, Op::Put | Op::Get)
    }

    /// The sizes it is timed at, of `sizes`: accumulate needs whole doubles,
    /// fetch-add has one size (8 bytes).
    pub fn sizes(self, sizes: &[usize]) -> Vec<usize> {
        match self {
            Op::Accumulate => sizes
                .iter()
                .copied()
                .filter(|s| s % 8 == 0 && *s > 0)
                .collect(),
            Op::FetchAdd => vec![8],
            _ => sizes.to_vec(),
        }
    }
}

/// How operations complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum RmaSync {
    /// Passive target: the origin's flush (MPI: `MPI_Win_lock_all` +
    /// `MPI_Win_flush`).
    Flush,
    /// Active target: the collective fence (MPI: `MPI_Win_fence`).
    Fence,
}

impl RmaSync {
    /// Its name on the command line and in documents.
    pub fn as_str(self) -> &'static str {
        match self {
            RmaSync::Flush => "flush",
            RmaSync::Fence => "fence",
        }
    }
}

/// What to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Operations, measured in this order (per sync).
    pub ops: Vec<Op>,
    /// Synchronizations, in this order (the fence points after the flush ones).
    pub syncs: Vec<RmaSync>,
    /// Payload sizes in bytes.
    pub sizes: Vec<usize>,
    /// Timed operations per point.
    pub reps: usize,
    /// Untimed operations first, per point.
    pub warmup: usize,
    /// Puts per timed round of `put-bw`.
    pub window: usize,
    /// Verify the data (outside the timed regions).
    pub check: bool,
}

impl Params {
    /// The window bytes the points need: the counter and the largest payload.
    pub fn window_bytes(&self) -> usize {
        DATA_OFFSET + self.sizes.iter().copied().max().unwrap_or(0).max(8)
    }

    /// The points, in the order measured.
    pub fn points(&self) -> Vec<(Op, RmaSync, usize)> {
        let mut points = Vec::new();
        for &sync in &self.syncs {
            for &op in self.ops.iter().filter(|o| o.under(sync)) {
                points.extend(op.sizes(&self.sizes).into_iter().map(|s| (op, sync, s)));
            }
        }
        points
    }
}

/// One point's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PointResult {
    /// The operation.
    pub op: Op,
    /// How it completed.
    pub sync: RmaSync,
    /// Payload bytes (`put-bw`: per put).
    pub size: usize,
    /// Timed operations (`put-bw`: timed rounds of `window` puts).
    pub reps: usize,
    /// Puts per round (`put-bw` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    /// Latency per operation, microseconds (`put-notify`: half the round trip;
    /// `put-bw`: the whole round).
    pub latency_us: Summary,
    /// `put-bw`: `window * size / median`, MB/s with MB = 10^6 bytes.
    #[serde(rename = "bandwidth_MBps", skip_serializing_if = "Option::is_none")]
    pub bandwidth_mbps: Option<f64>,
    /// Whether the data were verified (and found right).
    pub checked: bool,
}

/// Why the pattern stopped.
#[derive(Debug, thiserror::Error)]
pub enum RmaError {
    /// A one-sided operation failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control plane failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The data check found wrong bytes.
    #[error("{op} {sync} at {size} B: rank {rank} found wrong data after the operations")]
    DataCheck {
        /// The operation.
        op: &'static str,
        /// Its synchronization.
        sync: &'static str,
        /// The size.
        size: usize,
        /// The rank that checked.
        rank: Rank,
    },
}

/// Runs every point of `params` over `win` between [`ORIGIN`] and [`TARGET`]
/// (other ranks take part in the fences and the control calls only), calling
/// `done` at the origin after each point. Collective over `control`; returns the
/// results at the origin (empty elsewhere).
///
/// # Errors
/// [`RmaError`].
pub fn run<C: Clock + ?Sized>(
    clock: &C,
    win: &mut dyn OneSided,
    control: &mut dyn Control,
    params: &Params,
    done: &mut dyn FnMut(&PointResult),
) -> Result<Vec<PointResult>, RmaError> {
    let rank = control.rank();
    let mut results = Vec::new();
    // Notifications this rank received (its counter's value) and sent.
    let mut counter = Counter::default();
    for &sync in &params.syncs {
        if sync == RmaSync::Fence && !win.has_fence() {
            continue;
        }
        if sync == RmaSync::Flush {
            win.begin_passive()?;
        } else {
            win.fence()?;
        }
        let accumulates = win.has_accumulate();
        let offered = |o: &&Op| o.under(sync) && (**o != Op::Accumulate || accumulates);
        for &op in params.ops.iter().filter(offered) {
            for size in op.sizes(&params.sizes) {
                control.barrier()?;
                let fill = fill_byte(size);
                win.fill_origin(fill)?;
                if op == Op::Accumulate {
                    win.fill_origin_f64(1.0)?;
                }
                let timed = point(win, clock, rank, op, sync, size, params, &mut counter)?;
                let ok = check(win, control, rank, op, sync, size, fill, params, &timed)?;
                if let Some(ticks) = timed.ticks {
                    let r = result(clock, op, sync, size, params, &ticks, ok);
                    done(&r);
                    results.push(r);
                }
            }
        }
        if sync == RmaSync::Flush {
            win.end_passive()?;
        } else {
            win.fence()?;
        }
    }
    control.barrier()?;
    Ok(results)
}

/// The byte a put of `size` bytes carries (the data check's pattern).
fn fill_byte(size: usize) -> u8 {
    (size % 251) as u8 + 1
}

/// This rank's notification counter: the value it waits for next.
#[derive(Default)]
struct Counter {
    received: u64,
}

impl Counter {
    /// Spins until the counter in this rank's window shows one more notification.
    fn wait(&mut self, win: &mut dyn OneSided) -> Result<(), TransportError> {
        self.received += 1;
        let want = self.received as u8;
        while win.poll_byte(0)? != want {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

/// Puts `size` bytes to `peer` and raises its counter, each completed.
fn notify(win: &mut dyn OneSided, peer: Rank, size: usize) -> Result<(), TransportError> {
    win.put(peer, DATA_OFFSET, size)?;
    win.flush(peer)?;
    win.fetch_add_u64(peer, 0)?;
    win.flush(peer)
}

/// What one point leaves at the origin.
struct Timed {
    /// The ticks of each timed operation (`None` off the origin).
    ticks: Option<Vec<u64>>,
    /// With `check`, the old value each fetch-and-add returned, in order.
    fetched: Vec<u64>,
}

/// The warmup and the timed operations of one point.
#[allow(clippy::too_many_arguments)]
fn point<C: Clock + ?Sized>(
    win: &mut dyn OneSided,
    clock: &C,
    rank: Rank,
    op: Op,
    sync: RmaSync,
    size: usize,
    params: &Params,
    counter: &mut Counter,
) -> Result<Timed, RmaError> {
    let total = params.warmup + params.reps;
    let mut ticks = Vec::with_capacity(if rank == ORIGIN { params.reps } else { 0 });
    let fetching = params.check && rank == ORIGIN && op == Op::FetchAdd;
    let mut fetched = Vec::with_capacity(if fetching { total } else { 0 });
    for i in 0..total {
        let t0 = clock.now();
        match (rank, op, sync) {
            (ORIGIN, Op::Put, RmaSync::Flush) => {
                win.put(TARGET, DATA_OFFSET, size)?;
                win.flush(TARGET)?;
            }
            (ORIGIN, Op::Get, RmaSync::Flush) => {
                win.get(TARGET, DATA_OFFSET, size)?;
                win.flush(TARGET)?;
            }
            (ORIGIN, Op::Put, RmaSync::Fence) => {
                win.put(TARGET, DATA_OFFSET, size)?;
                win.fence()?;
            }
            (ORIGIN, Op::Get, RmaSync::Fence) => {
                win.get(TARGET, DATA_OFFSET, size)?;
                win.fence()?;
            }
            (_, _, RmaSync::Fence) => win.fence()?,
            (ORIGIN, Op::PutBw, _) => {
                for _ in 0..params.window {
                    win.put(TARGET, DATA_OFFSET, size)?;
                }
                win.flush(TARGET)?;
            }
            (ORIGIN, Op::PutNotify, _) => {
                notify(win, TARGET, size)?;
                counter.wait(win)?;
            }
            (TARGET, Op::PutNotify, _) => {
                counter.wait(win)?;
                notify(win, ORIGIN, size)?;
            }
            (ORIGIN, Op::Accumulate, _) => {
                win.accumulate_sum_f64(TARGET, DATA_OFFSET, size / 8)?;
                win.flush(TARGET)?;
            }
            (ORIGIN, Op::FetchAdd, _) => {
                win.fetch_add_u64(TARGET, DATA_OFFSET)?;
                win.flush(TARGET)?;
            }
            // Passive target: nothing to do but let the origin work.
            _ => {}
        }
        let t1 = clock.now();
        if rank == ORIGIN && i >= params.warmup {
            ticks.push(t1.since(t0));
        }
        if fetching {
            fetched.push(win.result_u64()?);
        }
    }
    Ok(Timed {
        ticks: (rank == ORIGIN).then_some(ticks),
        fetched,
    })
}

/// The data check of a point (see the module docs), after a barrier; the verdict
/// of every rank reaches the origin.
#[allow(clippy::too_many_arguments)]
fn check(
    win: &mut dyn OneSided,
    control: &mut dyn Control,
    rank: Rank,
    op: Op,
    sync: RmaSync,
    size: usize,
    fill: u8,
    params: &Params,
    timed: &Timed,
) -> Result<bool, RmaError> {
    let checked = params.check && matches!(op, Op::Put | Op::FetchAdd);
    if !checked {
        return Ok(false);
    }
    control.barrier()?;
    let ok = match (rank, op) {
        (TARGET, Op::Put) => {
            // Passive: the poll makes the completed puts visible here
            // (`MPI_Win_sync`, which MPICH refuses outside a passive epoch); the
            // fence did already.
            if sync == RmaSync::Flush {
                win.poll_byte(0)?;
            }
            win.local_copy(DATA_OFFSET, size).iter().all(|&b| b == fill)
        }
        // The counter starts where earlier points left the payload bytes; each
        // add fetched one more than the add before it.
        (ORIGIN, Op::FetchAdd) => {
            timed.fetched.len() == params.warmup + params.reps
                && timed
                    .fetched
                    .windows(2)
                    .all(|w| w[1] == w[0].wrapping_add(1))
        }
        _ => true,
    };
    let verdicts = control.gather(ORIGIN, &[u8::from(ok)])?;
    if rank == ORIGIN {
        if let Some(bad) = verdicts.iter().position(|v| v.first() != Some(&1)) {
            return Err(RmaError::DataCheck {
                op: op.as_str(),
                sync: sync.as_str(),
                size,
                rank: bad,
            });
        }
    }
    Ok(true)
}

/// A point's result from the origin's ticks.
fn result<C: Clock + ?Sized>(
    clock: &C,
    op: Op,
    sync: RmaSync,
    size: usize,
    params: &Params,
    ticks: &[u64],
    checked: bool,
) -> PointResult {
    let rate = clock.rate();
    let halve = if op == Op::PutNotify { 2.0 } else { 1.0 };
    let us: Vec<f64> = ticks
        .iter()
        .map(|&t| rate.to_nanos(t).as_us() / halve)
        .collect();
    let latency_us = Summary::of(&us).expect("reps >= 1 and finite values");
    let bandwidth_mbps = (op == Op::PutBw && latency_us.median > 0.0)
        .then(|| (params.window * size) as f64 / latency_us.median);
    PointResult {
        op,
        sync,
        size,
        reps: params.reps,
        window: (op == Op::PutBw).then_some(params.window),
        latency_us,
        bandwidth_mbps,
        checked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            ops: Op::ALL.to_vec(),
            syncs: vec![RmaSync::Flush, RmaSync::Fence],
            sizes: vec![1, 8, 64],
            reps: 1,
            warmup: 0,
            window: 4,
            check: false,
        }
    }

    #[test]
    fn points_cover_both_syncs_for_put_and_get_only() {
        let points = params().points();
        let fence: Vec<_> = points.iter().filter(|p| p.1 == RmaSync::Fence).collect();
        assert_eq!(fence.len(), 6, "{fence:?}");
        assert!(fence.iter().all(|p| matches!(p.0, Op::Put | Op::Get)));
        // Accumulate skips 1 B (no whole double); fetch-add is one 8-byte point.
        let acc: Vec<_> = points
            .iter()
            .filter(|p| p.0 == Op::Accumulate)
            .map(|p| p.2)
            .collect();
        assert_eq!(acc, [8, 64]);
        let fop: Vec<_> = points
            .iter()
            .filter(|p| p.0 == Op::FetchAdd)
            .map(|p| p.2)
            .collect();
        assert_eq!(fop, [8]);
    }

    #[test]
    fn window_holds_the_counter_and_the_largest_payload() {
        assert_eq!(params().window_bytes(), DATA_OFFSET + 64);
        let tiny = Params {
            sizes: vec![0],
            ..params()
        };
        assert_eq!(tiny.window_bytes(), DATA_OFFSET + 8);
    }

    #[test]
    fn op_names_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
        assert_eq!(Op::parse("write"), None);
    }
}
