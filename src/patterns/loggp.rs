//! Parametrized round-trip times PRTT(n,d,s) and the receive overhead o_r(s)
//! (Hoefler, Schneider, Lumsdaine, "LogGP in theory and practice", sec. 2.2-2.3, 3).
//!
//! Ranks are paired `(0,1), (2,3), ...`; the even rank is the client. Per message
//! size `s`, every measurement repeated `reps` times after `warmup` untimed rounds
//! (at least [`super::FIRST_SIZE_WARMUP`] before the first size of a sweep, and
//! before every size the run meets for the first time: [`Params::warm`]):
//!
//! - `PRTT(1,0,s)`: the client sends one message of `s` bytes, the server answers with
//!   one of `s` bytes; the client times send to the end of the answer.
//! - `d_G`: the median `PRTT(1,0,s)` (sec. 2.3 and 3), or with [`DelayChoice::TwoRtt`]
//!   the median `PRTT(2,0,s)`, which the paper guarantees to exceed `G_all`.
//! - `PRTT(n,0,s)`: the client sends `n` messages back to back; the server answers
//!   once after the `n`-th.
//! - `PRTT(n,d_G,s)`: as above with a busy-wait of `d_G` (RDTSCP-timed spin,
//!   [`crate::clock::spin_until`]) after each of the first `n - 1` sends, so the
//!   client's cycle is `o_s + d_G` (eq. 3). Eq. (4) subtracts `d_G` from the cycle
//!   to leave `o_s`, but a spin lasts longer than `d_G`: it starts with a timer read
//!   (to know when the send returned) and ends at the first read past its deadline,
//!   so a cycle holds `o_s + d_G` plus a read and the overshoot, and `o_s` would read
//!   high by both. The client therefore records the delay it actually spent after
//!   each send (the spin from the read after the send to the read that ended it,
//!   plus the cost of one read, [`read_cost`]) and eq. (4) subtracts that
//!   ([`Point::d_spent_us`]; exact in the simulated world of `sim.rs`, whose reads
//!   cost time). A spin the scheduler interrupted is then subtracted whole too.
//! - `o_r(s)` (Kielmann's method, as Netgauge): the server busy-waits before each
//!   receive long enough for the whole message to have arrived, then times the
//!   receive call alone; it answers with one byte so the client sends the next
//!   message. The wait is `2 d_G`, counted from the server's previous answer (one
//!   `PRTT(1,0,s)` is about what the answer and the next message need, so twice that
//!   leaves margin). The times travel to rank 0 over the control channel between
//!   sizes: no MPI and no side messages in a timed region. Every rank converts its
//!   own ticks to microseconds before sending them (and `d` travels in
//!   nanoseconds), since ranks on other hosts count ticks at other rates.
//!   Under a rendezvous protocol the message cannot arrive before the receive is
//!   posted, so the timed receive also holds the handshake and the transfer
//!   (`o_r + 2L + (s-1)G` in LogGP terms, exactly so in the simulated world of
//!   `sim.rs`): such a range's `o_r` grows with `s`, and its `o_s` from eq. (4) is
//!   the whole blocking send call, handshake included (`o_s + 2L`).
//! - The send with a late receiver (not in the paper; a protocol probe): in the same
//!   `o_r` rounds the client times its send call, which starts while the server is
//!   still spinning (about `1.5 d_G` before it posts the receive). A buffered
//!   (eager) send returns after `o_s`; a synchronous one (rendezvous: the sender
//!   waits for the receiver to match before the data moves) returns only once the
//!   receiver is there, so the series jumps by about the receiver's lateness where
//!   a stack switches protocol. The paper finds switches in the gap (sec. 2.6),
//!   where an eager-to-rendezvous switch on shared memory moves by less than the
//!   noise; here it moves by several round trips.
//!
//! A size whose PRTT median exceeds 1.5 times its minimum plus 50 us (most
//! repetitions slowed by another process, not by the network) is measured again,
//! up to [`Params::attempts`] times; the clients' verdicts travel over the control
//! channel between attempts so every rank makes the same control calls.
//!
//! Every rank runs [`run`] with the same [`Params`]; control-plane calls are the same
//! on all ranks (ranks without a pair, or whose pair is not measuring in
//! [`PairsMode::InTurn`], take part with empty data). Rank 0 receives every pair's
//! points; it can stream them as they finish through the `on_point` callback.

use crate::clock::{spin_until, Clock, Nanos, Ticks};
use crate::model::loggp::Sample;
use crate::patterns::counters::{self, CounterMap};
use crate::stats::{self, Summary};
use ngauge_transport::{BufferId, Control, ControlError, Rank, Transport, TransportError};
use serde::Serialize;

mod pool;
#[cfg(test)]
pub(crate) mod sim;
pub mod verify;

pub use pool::{pool, Samples};

crate::names::named_enum! {
    /// Which delay `d` to use for `PRTT(n,d,s)` (sec. 2.3).
    pub enum DelayChoice("delay") {
        /// `d_G = PRTT(1,0,s)`, the paper's and Netgauge's default.
        OneRtt = "rtt",
        /// `d_G = PRTT(2,0,s)`, the paper's fallback when `d_G <= g + (s-1)G`.
        TwoRtt = "2rtt",
    }
}

crate::names::named_enum! {
    /// How pairs of ranks take turns when there are more than two ranks.
    pub enum PairsMode("pairs mode") {
        /// One pair at a time (no interference between pairs).
        InTurn = "in-turn",
        /// All pairs at once (the network under load from every pair).
        Concurrent = "concurrent",
    }
}

/// Parameters of a PRTT sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Message sizes in bytes, each at least 1, in the order they are measured
    /// (ascending for the paper's sweep, shuffled by [`super::order`] for passes).
    pub sizes: Vec<u64>,
    /// Messages per `PRTT(n, ., s)` (at least 2).
    pub n: usize,
    /// Timed repetitions per PRTT and size.
    pub reps: usize,
    /// Untimed `PRTT(1,0,s)` rounds before each size.
    pub warmup: usize,
    /// Whether the run has measured these sizes before (a later pass, a
    /// confirmation round): then each size gets `warmup` rounds. Otherwise each
    /// size's first attempt gets at least [`super::FIRST_SIZE_WARMUP`], since the
    /// first messages a stack sends on a path can be slow for tens of round trips
    /// (docs/findings/2026-12-01-first-contact-warmup.md).
    pub warm: bool,
    /// The delay for `PRTT(n,d,s)`.
    pub delay: DelayChoice,
    /// How pairs take turns.
    pub pairs: PairsMode,
    /// Measurements of a size at most (at least 1): a size is measured again when
    /// a PRTT's median exceeds 1.5 times its minimum plus 50 us, i.e. when most of
    /// its repetitions were disturbed by the host and the median no longer
    /// describes the network. The last attempt is kept.
    pub attempts: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            sizes: default_sizes(),
            n: 10,
            reps: 50,
            warmup: 5,
            warm: false,
            delay: DelayChoice::OneRtt,
            pairs: PairsMode::InTurn,
            attempts: 3,
        }
    }
}

/// The default sweep: every power of two below 1 KiB, then every 1 KiB up to 64 KiB,
/// dense enough to place a protocol switch within 1 KiB, and [`PAST_64K`] steps
/// more (82 sizes): a switch just below 64 KiB (TCP's segment over loopback ends
/// at 65483 B) then leaves the range that holds 64 KiB sizes to fit its line on,
/// where a lone last point would be predicted by the range before the switch.
pub fn default_sizes() -> Vec<u64> {
    let mut sizes: Vec<u64> = (0..10).map(|k| 1u64 << k).collect();
    sizes.extend((1..=64 + PAST_64K).map(|k| k * 1024));
    sizes
}

/// 1 KiB steps of the default sweep past 64 KiB: a range starting at 64 KiB then
/// holds nine sizes, about the fewest the segmentation finds at a sweep's end
/// ([`crate::model::segment`]), more than the three a side the confirmation
/// measures.
pub const PAST_64K: u64 = 8;

/// The measurements of one size between one pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Message size `s`, bytes.
    pub size: u64,
    /// Messages per PRTT.
    pub n: usize,
    /// Delay `d_G` used, us.
    pub d_us: f64,
    /// `PRTT(1,0,s)`, us.
    pub prtt_1_0_us: Summary,
    /// `PRTT(2,0,s)` (only with [`DelayChoice::TwoRtt`]), us.
    pub prtt_2_0_us: Option<Summary>,
    /// `PRTT(n,0,s)`, us.
    pub prtt_n_0_us: Summary,
    /// `PRTT(n,d_G,s)`, us.
    pub prtt_n_d_us: Summary,
    /// Receive overhead `o_r(s)` timed at the server, us.
    pub or_us: Summary,
    /// The client's send call while the server is late (about `1.5 d_G`), us:
    /// `o_s` for a buffered (eager) send, about the lateness for a synchronous one.
    pub send_late_us: Summary,
    /// The delay actually spent after each of the first `n - 1` sends of
    /// `PRTT(n,d_G,s)`, per repetition the mean over its spins, us: `d_G`, plus the
    /// timer read that starts a spin and the overshoot past its deadline (and any
    /// time the scheduler took during the spin). Eq. (4) subtracts this, not `d_G`.
    pub d_spent_us: Summary,
    /// How often this size was measured, over all pooled passes (more than
    /// `passes` when most repetitions of an attempt were disturbed, see
    /// [`Params::attempts`]).
    pub attempts: usize,
    /// Timed PRTT repetitions at this size (all PRTT kinds, last attempt of each
    /// pass).
    pub timed_reps: usize,
    /// Of those, the ones slower than [`DISTURBED_FACTOR`] times their median.
    pub disturbed_reps: usize,
    /// Sweeps this point pools (see [`pool`]); 1 for one measurement.
    pub passes: usize,
    /// Transport counters accumulated while this size was measured (every
    /// attempt and pass), summed over the pair's two ranks (UDP: lost, duplicated
    /// and reordered datagrams, retransmissions; empty for transports that count
    /// nothing).
    pub counters: CounterMap,
    /// The repetitions behind the summaries, us, kept so that passes can be pooled.
    #[serde(skip)]
    pub samples: Samples,
}

impl Point {
    /// The medians the model works on.
    pub fn sample(&self) -> Sample {
        Sample {
            size: self.size,
            prtt_1_0_us: self.prtt_1_0_us.median,
            prtt_n_0_us: self.prtt_n_0_us.median,
            prtt_n_d_us: self.prtt_n_d_us.median,
            // Eq. (4) subtracts the delay the client actually spent.
            d_us: self.d_spent_us.median,
            or_us: self.or_us.median,
            send_late_us: Some(self.send_late_us.median),
        }
    }
}

/// A repetition slower than this many medians of its PRTT was disturbed by the host
/// (another process took the core, an interrupt storm).
pub const DISTURBED_FACTOR: f64 = 3.0;

/// Absolute slack of the "mostly disturbed" test, us (timer and wake-up jitter on a
/// microsecond round trip is not a disturbance).
pub(crate) const DISTURBED_SLACK_US: f64 = 50.0;

/// `true` when the median of `ticks` exceeds 1.5 times their minimum plus `slack`:
/// more than half of the repetitions were slowed by something other than the network.
fn mostly_disturbed(ticks: &[u64], slack: u64) -> bool {
    let Some(&min) = ticks.iter().min() else {
        return false;
    };
    let median = stats::median(ticks).expect("not empty: it has a minimum");
    median as f64 > 1.5 * min as f64 + slack as f64
}

/// The fraction of all timed PRTT repetitions of `points` that were disturbed
/// (slower than [`DISTURBED_FACTOR`] times their median). Medians survive a minority
/// of such repetitions; a large fraction means the host was too busy to trust the
/// figures.
pub fn disturbed_fraction(points: &[Point]) -> f64 {
    let (disturbed, total) = points
        .iter()
        .fold((0, 0), |(d, t), p| (d + p.disturbed_reps, t + p.timed_reps));
    if total == 0 {
        0.0
    } else {
        disturbed as f64 / total as f64
    }
}

/// Everything one pair measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairResult {
    /// The rank that sent and timed the PRTTs.
    pub client: Rank,
    /// The rank that answered and timed its receives.
    pub server: Rank,
    /// One entry per size, in the order of [`Params::sizes`].
    pub points: Vec<Point>,
}

/// What can go wrong during a sweep.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// A data-plane operation failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A control-plane operation failed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The parameters cannot be measured.
    #[error("invalid loggp parameters: {0}")]
    Invalid(String),
    /// A peer sent control data that does not parse.
    #[error("loggp: malformed control data from rank {rank}")]
    Malformed {
        /// The sender.
        rank: Rank,
    },
}

/// This rank's role in a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Client { server: Rank },
    Server { client: Rank },
    Idle,
}

fn role(rank: Rank, size: usize) -> Role {
    let peer = rank ^ 1;
    if peer >= size {
        Role::Idle
    } else if rank % 2 == 0 {
        Role::Client { server: peer }
    } else {
        Role::Server { client: peer }
    }
}

/// Runs the sweep on this rank. Returns every pair's results on rank 0 (ascending
/// client rank) and an empty vector elsewhere. `on_point` is called on rank 0 for
/// every finished `(pair index, point)`.
pub fn run<C: Clock, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    params: &Params,
    mut on_point: impl FnMut(usize, &Point),
) -> Result<Vec<PairResult>, PatternError> {
    validate(params, transport.size())?;
    let size = control.size();
    let rank = control.rank();
    let my_role = role(rank, size);
    let pairs = size / 2;
    let max = *params.sizes.iter().max().unwrap_or(&1) as usize;
    let buffers = match my_role {
        Role::Idle => None,
        _ => Some((transport.alloc_buffer(max)?, transport.alloc_buffer(max)?)),
    };
    let mut results: Vec<PairResult> = (0..pairs)
        .map(|p| PairResult {
            client: 2 * p,
            server: 2 * p + 1,
            points: Vec::new(),
        })
        .collect();
    let turns = match params.pairs {
        PairsMode::InTurn => pairs,
        PairsMode::Concurrent => 1,
    };
    for turn in 0..turns {
        let active = match params.pairs {
            PairsMode::InTurn => rank / 2 == turn && my_role != Role::Idle,
            PairsMode::Concurrent => my_role != Role::Idle,
        };
        control.barrier()?;
        for (index, &s) in params.sizes.iter().enumerate() {
            let before = transport.counters();
            let mut report = Vec::new();
            let mut pending = active;
            for attempt in 1..=params.attempts.max(1) {
                let mut exp = Exchange {
                    clock,
                    transport: &mut *transport,
                    params,
                    size: s as usize,
                    warmup: warmup_rounds(params, attempt == 1 && (index == 0 || !params.warm)),
                };
                let mut disturbed = false;
                match (pending, my_role, buffers) {
                    (true, Role::Client { server }, Some((tx, rx))) => {
                        let first = exp.client_first(server, tx, rx)?;
                        // Before blocking on the control channel (an unreliable
                        // transport recovers a lost last message only while both
                        // ranks still read it; see `Transport::settle`).
                        exp.transport.settle()?;
                        share_delay(control, Some(clock.rate().to_nanos(first.d_ticks)))?;
                        let second = exp.client_second(server, tx, rx, first.d_ticks)?;
                        let late = exp.client_or(server, tx, rx)?;
                        let slack = clock.rate().to_ticks(Nanos(DISTURBED_SLACK_US * 1e3));
                        disturbed = [&first.prtt_1_0, &second.n0, &second.nd]
                            .iter()
                            .any(|t| mostly_disturbed(t, slack));
                        report = encode_client(clock, attempt as u64, &first, &second, &late);
                    }
                    (true, Role::Server { client }, Some((tx, rx))) => {
                        exp.server_first(client, tx, rx)?;
                        exp.transport.settle()?;
                        let d = share_delay(control, None)?[client]
                            .ok_or(PatternError::Malformed { rank: client })?;
                        exp.server_second(client, tx, rx)?;
                        // The client's d, in this rank's ticks (the hosts' clocks
                        // may run at other rates).
                        let wait = clock.rate().to_ticks(Nanos(2.0 * d.0));
                        let or = exp.server_or(client, tx, rx, wait)?;
                        report = encode_us(clock, &or);
                    }
                    _ => {
                        share_delay(control, None)?;
                    }
                }
                // Every rank learns which clients measure this size again, so the
                // control calls stay collective.
                transport.settle()?;
                let again = disturbed && attempt < params.attempts;
                let flags = control.allgather(&[u8::from(again)])?;
                if flags.iter().all(|f| f.as_slice() != [1]) {
                    break;
                }
                pending = match my_role {
                    Role::Client { .. } => again,
                    Role::Server { client } => flags[client].as_slice() == [1],
                    Role::Idle => false,
                };
            }
            if !report.is_empty() {
                // Last in the report (see `decode_point`).
                counters::encode(&transport.counters().since(&before), &mut report);
            }
            let gathered = control.gather(0, &report)?;
            if rank == 0 {
                let measured: Vec<usize> = match params.pairs {
                    PairsMode::InTurn => vec![turn],
                    PairsMode::Concurrent => (0..pairs).collect(),
                };
                for p in measured {
                    let point =
                        decode_point(s, params, &gathered[2 * p], &gathered[2 * p + 1], 2 * p)?;
                    on_point(p, &point);
                    results[p].points.push(point);
                }
            }
        }
    }
    if let Some((tx, rx)) = buffers {
        transport.free_buffer(tx)?;
        transport.free_buffer(rx)?;
    }
    Ok(if rank == 0 { results } else { Vec::new() })
}

fn validate(params: &Params, transport_size: usize) -> Result<(), PatternError> {
    if params.n < 2 {
        return Err(PatternError::Invalid(format!(
            "n must be at least 2, got {}",
            params.n
        )));
    }
    if params.reps == 0 {
        return Err(PatternError::Invalid("reps must be at least 1".into()));
    }
    if params.sizes.is_empty() || params.sizes.contains(&0) {
        return Err(PatternError::Invalid(
            "sizes must be a non-empty list of sizes of at least 1 byte".into(),
        ));
    }
    if transport_size < 2 {
        return Err(PatternError::Invalid(format!(
            "PRTT needs at least 2 ranks, the job has {transport_size}"
        )));
    }
    Ok(())
}

/// Client's first phase: `PRTT(1,0,s)` (and `PRTT(2,0,s)`), giving `d_G`.
struct First {
    prtt_1_0: Vec<u64>,
    prtt_2_0: Option<Vec<u64>>,
    d_ticks: u64,
}

/// Client's second phase, in ticks per repetition.
struct Second {
    /// `PRTT(n,0,s)`.
    n0: Vec<u64>,
    /// `PRTT(n,d_G,s)`.
    nd: Vec<u64>,
    /// The delay spent after the first `n - 1` sends of each `PRTT(n,d_G,s)`, all
    /// spins together.
    spent: Vec<u64>,
}

/// Reads `clock` back to back this many times to find what one read costs.
const READ_COST_READS: usize = 32;

/// What one read of `clock` costs, in its ticks: the smallest difference of
/// back-to-back readings (what separates the reading that starts a spin from the
/// moment the send before it returned, and the end of a spin from the next send).
pub fn read_cost<C: Clock + ?Sized>(clock: &C) -> u64 {
    let mut last = clock.now();
    let mut least = u64::MAX;
    for _ in 0..READ_COST_READS {
        let now = clock.now();
        least = least.min(now.since(last));
        last = now;
    }
    least
}

struct Exchange<'a, C: Clock, T: Transport + ?Sized> {
    clock: &'a C,
    transport: &'a mut T,
    params: &'a Params,
    size: usize,
    /// Untimed `PRTT(1,0,s)` rounds before this size ([`warmup_rounds`]).
    warmup: usize,
}

/// The untimed rounds before a size: `params.warmup`, and at least
/// [`super::FIRST_SIZE_WARMUP`] before a first contact (the first size of a
/// sweep, every size of a cold one: [`Params::warm`]). Client and server count
/// alike.
pub(crate) fn warmup_rounds(params: &Params, first_contact: bool) -> usize {
    super::warmup_rounds(params.warmup, first_contact)
}

/// One timed `PRTT(k, d, s)` at the client, in ticks.
struct Timed {
    /// Send of the first message to the end of the answer.
    prtt: u64,
    /// The delay spent after the first `k - 1` sends (0 without a delay): each spin
    /// from the reading after the send to the reading that ended it, plus `read`
    /// for the reading that started it.
    spent: u64,
}

impl<C: Clock, T: Transport + ?Sized> Exchange<'_, C, T> {
    /// One `PRTT(k, d, s)` at the client: `k` sends with a spin of `d_ticks` after
    /// each but the last, then the answer. `read` is what a timer read costs
    /// ([`read_cost`]), counted into the spent delay.
    fn prtt(
        &mut self,
        server: Rank,
        tx: BufferId,
        rx: BufferId,
        k: usize,
        d_ticks: u64,
        read: u64,
    ) -> Result<Timed, TransportError> {
        let msg = tx.prefix(self.size);
        let mut spent = 0;
        let t0 = self.clock.now();
        for i in 0..k {
            self.transport.send(server, msg)?;
            if d_ticks > 0 && i + 1 < k {
                let start = self.clock.now();
                let end = spin_until(self.clock, start.plus(d_ticks));
                spent += end.since(start) + read;
            }
        }
        self.transport.recv(server, rx.prefix(self.size))?;
        Ok(Timed {
            prtt: self.clock.now().since(t0),
            spent,
        })
    }

    /// The server's side of `rounds` PRTTs of `k` messages.
    fn serve(
        &mut self,
        client: Rank,
        tx: BufferId,
        rx: BufferId,
        k: usize,
        rounds: usize,
    ) -> Result<(), TransportError> {
        for _ in 0..rounds {
            for _ in 0..k {
                self.transport.recv(client, rx.prefix(self.size))?;
            }
            self.transport.send(client, tx.prefix(self.size))?;
        }
        Ok(())
    }

    fn repeat(
        &mut self,
        server: Rank,
        tx: BufferId,
        rx: BufferId,
        k: usize,
        d: u64,
    ) -> Result<Vec<u64>, TransportError> {
        (0..self.params.reps)
            .map(|_| self.prtt(server, tx, rx, k, d, 0).map(|t| t.prtt))
            .collect()
    }

    fn client_first(
        &mut self,
        server: Rank,
        tx: BufferId,
        rx: BufferId,
    ) -> Result<First, TransportError> {
        for _ in 0..self.warmup {
            self.prtt(server, tx, rx, 1, 0, 0)?;
        }
        let prtt_1_0 = self.repeat(server, tx, rx, 1, 0)?;
        let prtt_2_0 = match self.params.delay {
            DelayChoice::OneRtt => None,
            DelayChoice::TwoRtt => Some(self.repeat(server, tx, rx, 2, 0)?),
        };
        let d_ticks =
            stats::median(prtt_2_0.as_ref().unwrap_or(&prtt_1_0)).expect("run() refuses reps = 0");
        Ok(First {
            prtt_1_0,
            prtt_2_0,
            d_ticks,
        })
    }

    fn server_first(
        &mut self,
        client: Rank,
        tx: BufferId,
        rx: BufferId,
    ) -> Result<(), TransportError> {
        self.serve(client, tx, rx, 1, self.warmup + self.params.reps)?;
        if self.params.delay == DelayChoice::TwoRtt {
            self.serve(client, tx, rx, 2, self.params.reps)?;
        }
        Ok(())
    }

    fn client_second(
        &mut self,
        server: Rank,
        tx: BufferId,
        rx: BufferId,
        d: u64,
    ) -> Result<Second, TransportError> {
        let n = self.params.n;
        let n0 = self.repeat(server, tx, rx, n, 0)?;
        let read = read_cost(self.clock);
        let (mut nd, mut spent) = (Vec::new(), Vec::new());
        for _ in 0..self.params.reps {
            let t = self.prtt(server, tx, rx, n, d, read)?;
            nd.push(t.prtt);
            spent.push(t.spent);
        }
        Ok(Second { n0, nd, spent })
    }

    fn server_second(
        &mut self,
        client: Rank,
        tx: BufferId,
        rx: BufferId,
    ) -> Result<(), TransportError> {
        self.serve(client, tx, rx, self.params.n, 2 * self.params.reps)
    }

    /// Client side of the `o_r` phase: one message, then wait for a 1-byte answer;
    /// `reps + 1` rounds (the server discards the first, which it did not wait for).
    /// Returns the `reps` send calls of the later rounds, made while the server was
    /// late, in ticks.
    fn client_or(
        &mut self,
        server: Rank,
        tx: BufferId,
        rx: BufferId,
    ) -> Result<Vec<u64>, TransportError> {
        let mut late_sends = Vec::with_capacity(self.params.reps);
        for round in 0..=self.params.reps {
            let t0 = self.clock.now();
            self.transport.send(server, tx.prefix(self.size))?;
            let t1 = self.clock.now();
            if round > 0 {
                late_sends.push(t1.since(t0));
            }
            self.transport.recv(server, rx.prefix(1))?;
        }
        Ok(late_sends)
    }

    /// Server side of the `o_r` phase: spin `wait` ticks after each answer, then
    /// time the receive alone. Returns `reps` times in ticks.
    fn server_or(
        &mut self,
        client: Rank,
        tx: BufferId,
        rx: BufferId,
        wait: u64,
    ) -> Result<Vec<u64>, TransportError> {
        let mut times = Vec::with_capacity(self.params.reps);
        for round in 0..=self.params.reps {
            if round > 0 {
                let start = self.clock.now();
                spin_until(self.clock, start.plus(wait));
            }
            let t0: Ticks = self.clock.now();
            self.transport.recv(client, rx.prefix(self.size))?;
            let t1 = self.clock.now();
            if round > 0 {
                times.push(t1.since(t0));
            }
            self.transport.send(client, tx.prefix(1))?;
        }
        Ok(times)
    }
}

/// Allgathers each client's `d`; `None` for ranks that did not send one. In
/// nanoseconds, not ticks: each rank converts with its own clock's rate.
fn share_delay(
    control: &mut dyn Control,
    mine: Option<Nanos>,
) -> Result<Vec<Option<Nanos>>, PatternError> {
    let bytes = mine.map(|d| d.0.to_le_bytes().to_vec()).unwrap_or_default();
    let all = control.allgather(&bytes)?;
    Ok(all
        .iter()
        .map(|b| {
            <[u8; 8]>::try_from(b.as_slice())
                .ok()
                .map(|d| Nanos(f64::from_le_bytes(d)))
        })
        .collect())
}

/// Times measured on this rank, as microseconds (converted with this rank's clock
/// rate: ranks on other hosts may count ticks at other rates), framed as a count and
/// the values' bits.
fn encode_us<C: Clock>(clock: &C, ticks: &[u64]) -> Vec<u8> {
    let rate = clock.rate();
    let mut out = Vec::with_capacity(8 + 8 * ticks.len());
    out.extend_from_slice(&(ticks.len() as u64).to_le_bytes());
    for &t in ticks {
        out.extend_from_slice(&rate.to_nanos(t).as_us().to_bits().to_le_bytes());
    }
    out
}

fn decode_us(bytes: &mut &[u8]) -> Option<Vec<f64>> {
    let take = |bytes: &mut &[u8]| -> Option<u64> {
        let (head, tail) = bytes.split_first_chunk::<8>()?;
        *bytes = tail;
        Some(u64::from_le_bytes(*head))
    };
    let len = take(bytes)? as usize;
    if bytes.len() < 8 * len {
        return None;
    }
    (0..len)
        .map(|_| take(bytes).map(f64::from_bits).filter(|v| v.is_finite()))
        .collect()
}

fn encode_client<C: Clock>(
    clock: &C,
    attempts: u64,
    first: &First,
    second: &Second,
    late: &[u64],
) -> Vec<u8> {
    let mut out = attempts.to_le_bytes().to_vec();
    out.extend(encode_us(clock, &[first.d_ticks]));
    out.extend(encode_us(clock, &first.prtt_1_0));
    out.extend(encode_us(clock, first.prtt_2_0.as_deref().unwrap_or(&[])));
    out.extend(encode_us(clock, &second.n0));
    out.extend(encode_us(clock, &second.nd));
    out.extend(encode_us(clock, late));
    out.extend(encode_us(clock, &second.spent));
    out
}

fn decode_point(
    size: u64,
    params: &Params,
    client_bytes: &[u8],
    server_bytes: &[u8],
    client: Rank,
) -> Result<Point, PatternError> {
    let bad = |rank| PatternError::Malformed { rank };
    let mut c = client_bytes;
    let (attempts, rest) = c.split_first_chunk::<8>().ok_or(bad(client))?;
    let attempts = u64::from_le_bytes(*attempts) as usize;
    c = rest;
    let d_us = match decode_us(&mut c).ok_or(bad(client))?.as_slice() {
        [d] => *d,
        _ => return Err(bad(client)),
    };
    let p1 = decode_us(&mut c).ok_or(bad(client))?;
    let p2 = decode_us(&mut c).ok_or(bad(client))?;
    let n0 = decode_us(&mut c).ok_or(bad(client))?;
    let nd = decode_us(&mut c).ok_or(bad(client))?;
    let late = decode_us(&mut c).ok_or(bad(client))?;
    // All spins of a repetition together, per spin.
    let spins = (params.n - 1) as f64;
    let spent: Vec<f64> = decode_us(&mut c)
        .ok_or(bad(client))?
        .iter()
        .map(|t| t / spins)
        .collect();
    let mut s = server_bytes;
    let or = decode_us(&mut s)
        .filter(|or| !or.is_empty())
        .ok_or(bad(client + 1))?;
    // What remains of each report is the rank's counters.
    let mut sum = CounterMap::new();
    counters::add(&mut sum, counters::decode(c).ok_or(bad(client))?);
    counters::add(&mut sum, counters::decode(s).ok_or(bad(client + 1))?);
    let samples = Samples {
        d_us: vec![d_us],
        prtt_1_0_us: p1,
        prtt_2_0_us: p2,
        prtt_n_0_us: n0,
        prtt_n_d_us: nd,
        or_us: or,
        send_late_us: late,
        d_spent_us: spent,
    };
    // decode_us admits finite values only, so only an empty series fails here.
    let mut point = samples
        .point(size, params.n, attempts, 1)
        .ok_or(bad(client))?;
    point.counters = sum;
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{SystemClock, TickRate, TimerSource};
    use ngauge_transport::inproc;

    fn run_world(np: usize, params: Params) -> Vec<PairResult> {
        let handles: Vec<_> = inproc::world(np)
            .into_iter()
            .map(|(mut t, mut c)| {
                let params = params.clone();
                std::thread::spawn(move || {
                    let clock = SystemClock::new(TimerSource::detect(), TickRate::new(1e9));
                    run(&clock, &mut t, &mut c, &params, |_, _| {})
                })
            })
            .collect();
        let mut out: Vec<Vec<PairResult>> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        assert!(out[1..].iter().all(Vec::is_empty));
        out.swap_remove(0)
    }

    fn small(sizes: Vec<u64>, delay: DelayChoice, pairs: PairsMode) -> Params {
        Params {
            sizes,
            n: 4,
            reps: 5,
            warmup: 1,
            warm: true,
            delay,
            pairs,
            attempts: 2,
        }
    }

    #[test]
    fn two_ranks_measure_every_size_with_consistent_prtts() {
        let sizes = vec![1, 64, 4096];
        let res = run_world(
            2,
            small(sizes.clone(), DelayChoice::OneRtt, PairsMode::InTurn),
        );
        assert_eq!(res.len(), 1);
        assert_eq!((res[0].client, res[0].server), (0, 1));
        let got: Vec<u64> = res[0].points.iter().map(|p| p.size).collect();
        assert_eq!(got, sizes);
        for p in &res[0].points {
            assert_eq!(p.prtt_1_0_us.n, 5);
            assert_eq!(p.or_us.n, 5);
            assert!(p.prtt_2_0_us.is_none());
            // d_G is the median PRTT(1,0,s); PRTT(n,d,s) contains (n-1) spins of it.
            assert!((p.d_us - p.prtt_1_0_us.median).abs() < 1e-6);
            assert!(p.prtt_n_d_us.min >= 3.0 * p.d_us);
            assert!(p.prtt_1_0_us.min > 0.0 && p.or_us.min > 0.0);
            assert_eq!(p.sample().size, p.size);
        }
    }

    /// Each rank converts its own ticks: a rank whose clock counts 2 GHz sends
    /// 2000 ticks as 1 us, whatever rank 0's clock rate is.
    #[test]
    fn times_travel_in_microseconds_of_the_measuring_rank() {
        let fast = SystemClock::new(TimerSource::detect(), TickRate::new(2e9));
        let bytes = encode_us(&fast, &[2000, 5000]);
        assert_eq!(decode_us(&mut bytes.as_slice()), Some(vec![1.0, 2.5]));
        let mut short = &bytes[..bytes.len() - 1];
        assert_eq!(decode_us(&mut short), None);
    }

    #[test]
    fn two_rtt_delay_uses_prtt_2_0() {
        let res = run_world(
            2,
            small(vec![8, 16], DelayChoice::TwoRtt, PairsMode::InTurn),
        );
        for p in &res[0].points {
            let p2 = p.prtt_2_0_us.expect("PRTT(2,0,s) measured");
            assert!((p.d_us - p2.median).abs() < 1e-6);
        }
    }

    #[test]
    fn five_ranks_make_two_pairs_in_turn_and_concurrently() {
        for mode in [PairsMode::InTurn, PairsMode::Concurrent] {
            let res = run_world(5, small(vec![1, 2], DelayChoice::OneRtt, mode));
            assert_eq!(res.len(), 2, "{mode:?}");
            assert_eq!((res[1].client, res[1].server), (2, 3));
            assert!(res.iter().all(|r| r.points.len() == 2));
        }
    }

    #[test]
    fn bad_parameters_are_refused_on_every_rank() {
        let mut world = inproc::world(2);
        let (mut t, mut c) = world.remove(0);
        let clock = SystemClock::new(TimerSource::detect(), TickRate::new(1e9));
        let mut p = small(vec![1], DelayChoice::OneRtt, PairsMode::InTurn);
        p.n = 1;
        let err = run(&clock, &mut t, &mut c, &p, |_, _| {}).unwrap_err();
        assert!(err.to_string().contains("n must be at least 2"));
        p.n = 2;
        p.sizes = vec![0];
        assert!(run(&clock, &mut t, &mut c, &p, |_, _| {}).is_err());
    }

    #[test]
    fn disturbed_fraction_counts_slow_repetitions() {
        let quiet = Summary::of(&[10.0]).unwrap();
        let point = |timed_reps, disturbed_reps| Point {
            size: 1,
            n: 10,
            d_us: 10.0,
            prtt_1_0_us: quiet,
            prtt_2_0_us: None,
            prtt_n_0_us: quiet,
            prtt_n_d_us: quiet,
            or_us: quiet,
            send_late_us: quiet,
            d_spent_us: quiet,
            attempts: 1,
            timed_reps,
            disturbed_reps,
            passes: 1,
            counters: Default::default(),
            samples: Samples::default(),
        };
        assert_eq!(disturbed_fraction(&[point(30, 3), point(30, 0)]), 0.05);
        assert_eq!(disturbed_fraction(&[]), 0.0);
    }

    /// A clock whose readings numbered in `disturbed` (from 0) make three of
    /// every five round trips (pairs of readings) look 1 ms longer.
    struct DisturbedClock<C> {
        inner: C,
        calls: std::sync::atomic::AtomicU64,
        disturbed: std::ops::Range<u64>,
    }

    impl<C: Clock> Clock for DisturbedClock<C> {
        fn now(&self) -> Ticks {
            let i = self
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let t = self.inner.now();
            let j = i.wrapping_sub(self.disturbed.start);
            if self.disturbed.contains(&i) && j % 2 == 1 && (j / 2) % 5 < 3 {
                t.plus(self.rate().to_ticks(crate::clock::Nanos(1e6)))
            } else {
                t
            }
        }
        fn rate(&self) -> TickRate {
            self.inner.rate()
        }
        fn spin_until(&self, deadline: Ticks) -> Ticks {
            self.inner.spin_until(deadline)
        }
    }

    /// Runs `params` in virtual time (`super::sim`) with rank 0's first
    /// `disturbed_calls` clock readings disturbed as [`DisturbedClock`] does;
    /// rank 0's results.
    fn run_disturbed(params: &Params, disturbed_calls: u64) -> Vec<PairResult> {
        run_disturbed_in(params, 0..disturbed_calls).0
    }

    /// [`run_disturbed`] with rank 0's clock readings numbered in `disturbed`
    /// disturbed; rank 0's results and how many readings it took.
    fn run_disturbed_in(
        params: &Params,
        disturbed: std::ops::Range<u64>,
    ) -> (Vec<PairResult>, u64) {
        let net = sim::Network::uniform(sim::LogGp {
            l_ps: 5_000_000,
            os_ps: 1_500_000,
            or_ps: 2_000_000,
            g_ps: 4_000_000,
            big_g_fs: 800_000,
            rendezvous: false,
            send_overlap_ps: 0,
            recv_overlap_ps: 0,
            big_o_fs: 0,
        });
        let mut world = sim::world(&net);
        let mut one = world.pop().unwrap();
        let p1 = params.clone();
        let server = std::thread::spawn(move || {
            run(
                &one.clock,
                &mut one.transport,
                &mut one.control,
                &p1,
                |_, _| {},
            )
        });
        let mut zero = world.pop().unwrap();
        let clock = DisturbedClock {
            inner: zero.clock,
            calls: Default::default(),
            disturbed,
        };
        let res = run(
            &clock,
            &mut zero.transport,
            &mut zero.control,
            params,
            |_, _| {},
        )
        .unwrap();
        server.join().unwrap().unwrap();
        (res, clock.calls.into_inner())
    }

    /// PRTT(1,0,s) of the simulated network of [`run_disturbed`] at 64 bytes:
    /// 2 (o_s + L + (s-1)G + o_r), eq. (1) with n = 1, us.
    const RTT_64_US: f64 = 2.0 * (1.5 + 5.0 + 63.0 * 0.0008 + 2.0);

    /// In virtual time (`super::sim`), so that only the injected disturbance can
    /// make a repetition slow: on real threads a loaded machine disturbed the
    /// second attempt too, and its median exceeded 1 ms.
    #[test]
    fn a_mostly_disturbed_size_is_measured_again() {
        let params = small(vec![64], DelayChoice::OneRtt, PairsMode::InTurn);
        // Exactly the readings of the first attempt's warmup and PRTT(1,0,s) phase.
        let disturbed_calls = 2 * (warmup_rounds(&params, true) + params.reps) as u64;
        let res = run_disturbed(&params, disturbed_calls);
        let point = &res[0].points[0];
        assert_eq!(point.attempts, 2);
        assert!(
            (point.prtt_1_0_us.median - RTT_64_US).abs() < 1e-6,
            "{point:?}"
        );
    }

    /// A transport that sets itself up on its first messages (UCX wires up its
    /// lanes), seen as three in five of the run's first 60 round trips taking
    /// 1 ms longer: the first size's warmup takes them all, and its PRTT(1,0,s)
    /// is the network's in its one attempt. With `warmup` rounds only, its
    /// median would be disturbed.
    #[test]
    fn the_first_size_warms_up_past_the_transports_setup() {
        let params = Params {
            attempts: 1,
            warmup: 5,
            reps: 20,
            ..small(vec![64, 128], DelayChoice::OneRtt, PairsMode::InTurn)
        };
        assert!(2 * (params.warmup + params.reps) < 2 * 60);
        assert!(warmup_rounds(&params, true) >= 60);
        assert_eq!(warmup_rounds(&params, false), 5);
        let res = run_disturbed(&params, 2 * 60);
        let point = &res[0].points[0];
        assert_eq!(point.attempts, 1);
        assert!(
            (point.prtt_1_0_us.median - RTT_64_US).abs() < 1e-6,
            "{point:?}"
        );
    }

    /// A stack whose path for larger messages is slow for its first 60 round
    /// trips (UCX's `egr/bcopy`), met at the second size: in a cold sweep (a
    /// run's first pass) that size warms up past it and reads as the network;
    /// in a warm one (a later pass, whose sizes the first pass met) it would not,
    /// which is what the first pass prevents.
    #[test]
    fn every_size_of_a_cold_sweep_warms_up_past_a_new_path() {
        let params = |warm| Params {
            attempts: 1,
            warmup: 5,
            reps: 20,
            warm,
            ..small(vec![64, 128], DelayChoice::OneRtt, PairsMode::InTurn)
        };
        let first_size_calls = |warm| {
            let one_size = Params {
                sizes: vec![64],
                ..params(warm)
            };
            run_disturbed_in(&one_size, 0..0).1
        };
        for warm in [false, true] {
            let from = first_size_calls(warm);
            let (res, _) = run_disturbed_in(&params(warm), from..from + 2 * 60);
            let second = &res[0].points[1];
            assert_eq!(second.size, 128);
            let undisturbed = 2.0 * (1.5 + 5.0 + 127.0 * 0.0008 + 2.0);
            let off_us = (second.prtt_1_0_us.median - undisturbed).abs();
            if warm {
                assert!(
                    off_us > 100.0,
                    "a warm sweep's 5 rounds cover it: {second:?}"
                );
            } else {
                assert!(off_us < 1e-6, "{second:?}");
            }
        }
    }

    #[test]
    fn mostly_disturbed_needs_a_disturbed_median() {
        assert!(!mostly_disturbed(&[100, 101, 5000], 10));
        assert!(mostly_disturbed(&[100, 5000, 5001], 10));
        assert!(!mostly_disturbed(&[100, 150, 160], 10));
        assert!(!mostly_disturbed(&[], 10));
    }

    #[test]
    fn role_assignment() {
        assert_eq!(role(0, 2), Role::Client { server: 1 });
        assert_eq!(role(1, 2), Role::Server { client: 0 });
        assert_eq!(role(4, 5), Role::Idle);
    }
}
