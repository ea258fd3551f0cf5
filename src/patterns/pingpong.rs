//! Ping-pong (Netgauge's `one_one` pattern): latency and bandwidth per message size.
//!
//! Rank 0 sends a message of `s` bytes to rank 1, which sends one of `s` bytes back.
//! Each round trip is timed on its own with the rank's clock (RDTSCP on x86-64), never a
//! loop of n round trips divided by n: a loop average hides the distribution and lets
//! the send of one iteration overlap the receive of the previous one (Hoefler et al.,
//! "LogGP in theory and practice", sec. 2 on loop-benchmark errors; Hunold &
//! Carpen-Amarie, sec. 3 on reporting distributions). The half round-trip time
//! RTT/2 is Netgauge's latency; it is PRTT(1,0,s)/2 in the LogGP paper's notation.
//!
//! Per size: `warmup` untimed round trips (before the run's first size at least
//! [`super::FIRST_SIZE_WARMUP`]), then `reps` timed ones; the result holds the
//! min/median/mean/p99/max of RTT/2 in microseconds and the bandwidth
//! `size / median(RTT/2)` in MB/s with MB = 10^6 bytes (bytes per microsecond).
//!
//! Timing loop: the generic loop above calls [`Transport::send`] and
//! [`Transport::recv`] between two readings of the clock, so each round trip also
//! holds the trait's per-message work (MPI: ~130 instructions per message and side
//! for the wait-mode, peer, bounds and busy checks and the call into the C shim,
//! about 3% of a 0.26 us shared-memory latency). With `native_loop` set, a clock
//! whose ticks are the raw TSC ([`Clock::tsc_read`]) and a transport that has one
//! ([`Transport::native_round_trips`]: MPI and UCX in poll mode), the transport runs
//! the warmup and timed round trips itself, checking everything once before the
//! loop, with the clock's own reading (`rdtscp; lfence`, or a plain `rdtsc` under
//! `--timer rdtsc`), so the timed region holds what a C benchmark's does. Both ranks choose by the same rule; the result records which
//! loop measured ([`TimingLoop`]).
//!
//! Pairs: with more than two ranks, only ranks 0 and 1 measure; the others only take
//! part in the control-plane calls between sizes.
//!
//! Data check (`check`): before each size every rank fills its send buffer with a
//! pattern that depends on the size and the rank, and poisons its receive buffer;
//! after the timed round trips it verifies that the last message received carries the
//! peer's pattern. This costs nothing inside the timed region.
//!
//! Streaming (`window` > 1, the pattern of perftest's `ib_send_bw`): a timed round
//! is rank 0 posting `window` sends of `s` bytes back to back (all in flight at
//! once, as far as the transport's queues allow) and waiting for them and for a
//! one-byte reply, which rank 1 sends once all `window` messages have arrived in
//! distinct parts of its receive buffer. `half_rtt_us` is then half of such a
//! round, and the bandwidth `window * size / median(round)`: the bytes delivered
//! per unit of time, the reply's latency included (amortized over the window).
//! With a window, the data check covers every message rank 1 received.
//!
//! Stream runs (`stream` = N > 0, the pattern of `ucx_perftest -t tag_bw`, UCX's
//! `src/tools/perf/lib/ucp_tests.cc`, `run_stream_uni`: the sender keeps at most
//! `max_outstanding` sends in flight for the whole run, `wait_send_window`, and
//! one acknowledgement ends the run): a timed round is rank 0 streaming N
//! messages with `window` in flight at a time, a new send posted as soon as the
//! oldest one completed, and the one-byte reply rank 1 sends after the N-th
//! arrived. Rank 1 keeps `window` receives posted in `window` parts of its
//! buffer, reposting each as it completes. The bandwidth is `N * size /
//! median(round)`; the reply is amortized over N messages, not over a window.
//! With `native_loop` set, a transport that has its own run
//! ([`Transport::native_stream`]: UCX's tag path in poll mode) does it, the same
//! messages in the same timed region; the clock stays the pattern's.
//!
//! Bidirectional (`bidirectional`, as osu_bibw and perftest's `ib_send_bw -b`):
//! in each round both ranks post `window` receives and `window` sends of `s`
//! bytes at once and wait for all of them; no reply is needed, since a rank's
//! round ends only once the peer's whole window has arrived. `half_rtt_us` is
//! half of rank 0's round and the bandwidth counts both directions:
//! `2 * window * size / median(round)`. Every message both ranks received is
//! checked.
//!
//! Precision (`precision`, SKaMPI's and ReproMPI's stopping rule): the timed
//! rounds of a size come in batches of `reps`, the warmup before the first;
//! after each batch rank 0 judges every repetition so far
//! ([`crate::stats::precision`]) and tells the other ranks over the control
//! plane whether another batch is due, until the target or `max_reps`. The
//! tick buffer holds `max_reps` from the start: nothing is allocated between
//! batches.
//!
//! Between sizes (outside every timed region) the ranks gather the data-check verdicts
//! and the transport's counters (UDP loss counters of both ends) at rank 0.

use super::counters::{self, CounterMap};
use crate::clock::Clock;
use crate::stats::level::{level_move, LevelMove};
use crate::stats::precision::{Precision, Target};
use crate::stats::Summary;
use crate::transport::{
    BufferId, Control, ControlError, NativeRole, Rank, Region, RequestId, Transport, TransportError,
};
use serde::Serialize;

/// The rank that pings and reports.
pub const PINGER: Rank = 0;
/// The rank that answers.
pub const PONGER: Rank = 1;

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Message sizes in bytes, measured in this order.
    pub sizes: Vec<usize>,
    /// Timed round trips per size.
    pub reps: usize,
    /// Untimed round trips before the timed ones, per size (at least
    /// [`super::FIRST_SIZE_WARMUP`] before the first).
    pub warmup: usize,
    /// Verify payloads (outside the timed region).
    pub check: bool,
    /// Let the transport run the round trips itself when it can (see the module
    /// docs); `false` always uses the generic loop (for comparison).
    pub native_loop: bool,
    /// Keep every repetition in the result ([`SizeResult::samples`]), for the
    /// statistics across launches and `ngauge compare`.
    pub samples: bool,
    /// Messages in flight per timed round: 1 is the ping-pong, more streams
    /// (see the module docs).
    pub window: usize,
    /// Messages per timed round of a stream run, `window` of them in flight at
    /// a time; 0 ends every window with the reply (see the module docs).
    pub stream: usize,
    /// Both ranks stream `window` messages to each other at once (see the
    /// module docs).
    pub bidirectional: bool,
    /// Repeat batches of `reps` until the median is this precise (see the
    /// module docs); `None` measures `reps` once.
    pub precision: Option<Target>,
}

crate::names::named_enum! {
    /// Which loop timed the round trips of a size.
    pub enum TimingLoop("timing loop") {
        /// The transport's own loop ([`Transport::native_round_trips`], or
        /// [`Transport::native_stream`] for a stream run).
        Native = "native",
        /// [`Transport::send`] and [`Transport::recv`] between clock readings.
        Generic = "generic",
    }
}

/// The measurement of one message size (one JSON record).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SizeResult {
    /// Message size in bytes.
    pub size: usize,
    /// Timed round trips.
    pub reps: usize,
    /// Half round-trip time in microseconds.
    pub half_rtt_us: Summary,
    /// `size / median half-RTT` in MB/s (MB = 10^6 bytes); with a window,
    /// `window * size / median round` (see the module docs).
    #[serde(rename = "bandwidth_MBps")]
    pub bandwidth_mbps: f64,
    /// Messages in flight per timed round (1: ping-pong; more: streaming, and
    /// `half_rtt_us` is half of a round of `window` messages and the reply).
    pub window: usize,
    /// Messages per timed round of a stream run ([`Params::stream`]), absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_messages: Option<usize>,
    /// Whether both ranks streamed at once (`bandwidth_MBps` then counts the
    /// bytes of both directions).
    pub bidirectional: bool,
    /// Whether the payloads were verified and found intact (`None` when not checked).
    pub data_check: Option<bool>,
    /// The loop that timed the round trips (rank 0's).
    pub timing_loop: TimingLoop,
    /// Transport counters accumulated during this size, summed over the two ranks
    /// (UDP: lost/duplicated/reordered datagrams, retransmissions).
    pub counters: CounterMap,
    /// The repetitions behind `half_rtt_us`, in the order measured (with
    /// [`Params::samples`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<Samples>,
    /// Whether the median met the precision target, and after how many
    /// repetitions (`reps`), with [`Params::precision`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// The half round trips in log-spaced bins (with `--histogram`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<crate::stats::Histogram>,
    /// Where the half round trips, in the order measured, did not hold one level
    /// ([`crate::stats::level`]): the slowest and the fastest of their consecutive
    /// chunks, us. The median then mixes the host's states.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level_moved: Option<LevelMove>,
    /// With several pairs measured at once (`pairs` > 1): every pair's result
    /// and the totals; the fields above are then the first pair's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<super::pairs::result::MultiPair>,
}

/// The repetitions of one size, us, named like the summary they are behind.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Samples {
    /// Every timed round trip's half, in the order measured.
    pub half_rtt_us: Vec<f64>,
}

/// Why a ping-pong sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum PingPongError {
    /// The data plane failed (a lost peer is named in the message).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The control plane failed between sizes.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Fewer than two ranks.
    #[error("ping-pong needs at least 2 ranks, the job has {0}")]
    TooFewRanks(usize),
    /// A size the transport cannot carry in one message.
    #[error("{transport} carries at most {max_bytes} bytes per message; size {size} is too large (use a smaller --sizes)")]
    TooLarge {
        /// Transport name.
        transport: &'static str,
        /// The size asked for.
        size: usize,
        /// The transport's limit.
        max_bytes: usize,
    },
    /// `reps` is zero.
    #[error("reps must be at least 1")]
    NoReps,
    /// A payload arrived damaged.
    #[error("data check failed at size {size} bytes: the message rank {rank} received does not carry rank {peer}'s pattern")]
    DataCheck {
        /// Size of the damaged message.
        size: usize,
        /// The receiving rank.
        rank: Rank,
        /// The sending rank.
        peer: Rank,
    },
    /// The per-size callback failed (writing a record, say).
    #[error("{0}")]
    Sink(String),
}

/// The payload pattern rank `rank` sends at size `size`: never constant, and different
/// for each rank and size so that a stale or misrouted message fails the check.
pub fn payload_byte(size: usize, rank: Rank, index: usize) -> u8 {
    // splitmix64-style mixing of (index, size, rank).
    let mut x = (index as u64)
        ^ (size as u64).wrapping_mul(0xff51_afd7_ed55_8ccd)
        ^ ((rank as u64 + 1) << 56);
    x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (x >> 40) as u8
}

pub(super) fn fill(buf: &mut [u8], size: usize, rank: Rank) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = payload_byte(size, rank, i);
    }
}

pub(super) fn carries(buf: &[u8], size: usize, rank: Rank) -> bool {
    buf.iter()
        .enumerate()
        .all(|(i, &b)| b == payload_byte(size, rank, i))
}

/// One streaming round of rank 0: `window` sends of `s` in flight, then their
/// completions and rank 1's reply (posted first, so it may land at any time).
/// `ids` is the caller's, allocated once outside the timed rounds.
pub(super) fn stream_round<T: Transport + ?Sized>(
    transport: &mut T,
    peer: Rank,
    s: Region,
    reply: Region,
    window: usize,
    ids: &mut Vec<RequestId>,
) -> Result<(), TransportError> {
    ids.clear();
    ids.push(transport.irecv(peer, reply)?);
    for _ in 0..window {
        ids.push(transport.isend(peer, s)?);
    }
    transport.wait_all(ids)
}

/// One streaming round of rank 1: `window` receives of `size` bytes side by side
/// in `rbuf`, then the one-byte reply.
pub(super) fn sink_round<T: Transport + ?Sized>(
    transport: &mut T,
    peer: Rank,
    rbuf: BufferId,
    size: usize,
    reply: Region,
    window: usize,
    ids: &mut Vec<RequestId>,
) -> Result<(), TransportError> {
    ids.clear();
    for k in 0..window {
        let region = Region {
            buffer: rbuf,
            offset: k * size,
            len: size,
        };
        ids.push(transport.irecv(peer, region)?);
    }
    transport.wait_all(ids)?;
    transport.send(peer, reply)
}

/// One stream run of rank `role` (see the module docs): rank 0 streams
/// `messages` sends of `s` with at most `window` in flight and waits for the
/// reply into `r`; rank 1 keeps `window` receives of `s.len` bytes posted side
/// by side in `r.buffer`, then sends the reply from `s`. With `native`, the
/// transport's own run when it has one ([`Transport::native_stream`]; the same
/// messages, so either rank may run either loop). `ids` is the caller's.
#[allow(clippy::too_many_arguments)]
fn stream_run<T: Transport + ?Sized>(
    transport: &mut T,
    role: Rank,
    native: bool,
    peer: Rank,
    s: Region,
    r: Region,
    window: usize,
    messages: usize,
    ids: &mut Vec<RequestId>,
) -> Result<TimingLoop, TransportError> {
    if native {
        let send = if role == PINGER {
            s
        } else {
            s.buffer.prefix(1)
        };
        let sender = role == PINGER;
        if let Some(outcome) = transport.native_stream(peer, send, r, window, messages, sender) {
            return outcome.map(|()| TimingLoop::Native);
        }
    }
    ids.clear();
    let slot = |k: usize| Region {
        buffer: r.buffer,
        offset: k * s.len,
        len: s.len,
    };
    if role == PINGER {
        let reply = transport.irecv(peer, r)?;
        for i in 0..messages {
            if i < window {
                ids.push(transport.isend(peer, s)?);
            } else {
                transport.wait(ids[i % window])?;
                ids[i % window] = transport.isend(peer, s)?;
            }
        }
        transport.wait_all(ids)?;
        return transport.wait(reply).map(|()| TimingLoop::Generic);
    }
    for k in 0..window.min(messages) {
        ids.push(transport.irecv(peer, slot(k))?);
    }
    for i in 0..messages {
        transport.wait(ids[i % window])?;
        if i + window < messages {
            ids[i % window] = transport.irecv(peer, slot(i % window))?;
        }
    }
    transport.send(peer, s.buffer.prefix(1))?;
    Ok(TimingLoop::Generic)
}

/// One bidirectional round of either rank: `window` receives side by side in
/// `rbuf` and `window` sends of `s`, all in flight at once.
fn exchange_round<T: Transport + ?Sized>(
    transport: &mut T,
    peer: Rank,
    s: Region,
    rbuf: BufferId,
    window: usize,
    ids: &mut Vec<RequestId>,
) -> Result<(), TransportError> {
    ids.clear();
    for k in 0..window {
        let region = Region {
            buffer: rbuf,
            offset: k * s.len,
            len: s.len,
        };
        ids.push(transport.irecv(peer, region)?);
    }
    for _ in 0..window {
        ids.push(transport.isend(peer, s)?);
    }
    transport.wait_all(ids)
}

/// The send and receive buffers of one measuring rank, sized by [`buffer_lens`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairBuffers {
    /// What this rank sends from.
    pub send: BufferId,
    /// Where it receives (a window's messages side by side).
    pub recv: BufferId,
}

/// The send and receive buffer lengths for sizes up to `max` bytes and `window`
/// messages per round: a window receives its messages side by side, and the reply
/// needs a byte.
pub(crate) fn buffer_lens(max: usize, window: usize) -> (usize, usize) {
    if window > 1 {
        (max.max(1), (max * window).max(1))
    } else {
        (max, max)
    }
}

/// One size between this rank and `peer`, as the pinger (`pinger`: times
/// `ticks.len()` rounds into `ticks`) or as the ponger: the warmup and timed round
/// trips, or streaming rounds with a window (see the module docs), and the data
/// check of what this rank received. Returns the loop that ran and whether the
/// payloads were intact (`true` when not checked). The one pair measurement every
/// pattern of pairs shares ([`super::pairs`] runs it on many pairs at once).
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_size<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    peer: Rank,
    pinger: bool,
    bufs: PairBuffers,
    size: usize,
    params: &Params,
    ticks: &mut [u64],
) -> Result<(TimingLoop, bool), TransportError> {
    let window = params.window.max(1);
    let (sbuf, rbuf) = (bufs.send, bufs.recv);
    let rank = transport.rank();
    let mut timing_loop = TimingLoop::Generic;
    if params.check {
        fill(&mut transport.buffer_mut(sbuf)?[..size], size, rank);
        transport.buffer_mut(rbuf)?[..size * window].fill(0xa5);
    }
    let (s, r) = (sbuf.prefix(size), rbuf.prefix(size));
    // The transport's own loop reads the raw TSC: only for a clock that
    // reads the same (see the module docs).
    let native = if window > 1 || params.bidirectional {
        None
    } else if let Some(read) = clock.tsc_read().filter(|_| params.native_loop) {
        let role = if pinger {
            NativeRole::Initiator {
                warmup: params.warmup,
                ticks: &mut *ticks,
                read,
            }
        } else {
            NativeRole::Responder {
                round_trips: params.warmup + params.reps,
            }
        };
        transport.native_round_trips(peer, s, r, role)
    } else {
        None
    };
    if let Some(outcome) = native {
        outcome?;
        timing_loop = TimingLoop::Native;
    } else if params.bidirectional {
        let mut ids = Vec::with_capacity(2 * window);
        for _ in 0..params.warmup + if pinger { 0 } else { params.reps } {
            exchange_round(transport, peer, s, rbuf, window, &mut ids)?;
        }
        for slot in ticks.iter_mut().filter(|_| pinger) {
            // Timed region: both windows and nothing else.
            let t0 = clock.now();
            exchange_round(transport, peer, s, rbuf, window, &mut ids)?;
            let t1 = clock.now();
            *slot = t1.since(t0);
        }
    } else if window > 1 && pinger {
        let reply = rbuf.prefix(1);
        let mut ids = Vec::with_capacity(window + 1);
        let native = params.native_loop;
        let round = |t: &mut T, ids: &mut Vec<RequestId>| match params.stream {
            0 => stream_round(t, peer, s, reply, window, ids).map(|()| TimingLoop::Generic),
            n => stream_run(t, PINGER, native, peer, s, reply, window, n, ids),
        };
        for _ in 0..params.warmup {
            round(transport, &mut ids)?;
        }
        for slot in ticks.iter_mut() {
            // Timed region: the window (or run), its reply and nothing else.
            let t0 = clock.now();
            let ran = round(transport, &mut ids);
            let t1 = clock.now();
            timing_loop = ran?;
            *slot = t1.since(t0);
        }
    } else if window > 1 && params.stream > 0 {
        let mut ids = Vec::with_capacity(window);
        for _ in 0..params.warmup + params.reps {
            let (n, r, native) = (params.stream, rbuf.prefix(size), params.native_loop);
            timing_loop = stream_run(transport, PONGER, native, peer, s, r, window, n, &mut ids)?;
        }
    } else if window > 1 {
        let reply = sbuf.prefix(1);
        let mut ids = Vec::with_capacity(window);
        for _ in 0..params.warmup + params.reps {
            sink_round(transport, peer, rbuf, size, reply, window, &mut ids)?;
        }
    } else if pinger {
        for _ in 0..params.warmup {
            transport.send(peer, s)?;
            transport.recv(peer, r)?;
        }
        for slot in ticks.iter_mut() {
            // Timed region: the round trip and nothing else.
            let t0 = clock.now();
            transport.send(peer, s)?;
            transport.recv(peer, r)?;
            let t1 = clock.now();
            *slot = t1.since(t0);
        }
    } else {
        for _ in 0..params.warmup + params.reps {
            transport.recv(peer, r)?;
            transport.send(peer, s)?;
        }
    }
    let intact = if params.check && window == 1 {
        carries(&transport.buffer(rbuf)?[..size], size, peer)
    } else if params.check && (!pinger || params.bidirectional) {
        let got = &transport.buffer(rbuf)?[..size * window];
        (0..window).all(|k| carries(&got[k * size..(k + 1) * size], size, peer))
    } else {
        true
    };
    Ok((timing_loop, intact))
}

/// The per-size callback of [`run`]: `(size, rank 0's result)`; an `Err` stops the
/// sweep with [`PingPongError::Sink`].
pub type OnSize<'a> = dyn FnMut(usize, Option<&SizeResult>) -> Result<(), String> + 'a;

/// Runs the sweep. Every rank calls it with the same `params`. After each size every
/// rank calls `on_size(size, result)`; rank 0 passes its [`SizeResult`] (as soon as the
/// size is finished, so a later failure keeps it), the others `None`. Rank 0 gets
/// every result back at the end; other ranks get an empty vector.
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    params: &Params,
    on_size: &mut OnSize<'_>,
) -> Result<Vec<SizeResult>, PingPongError> {
    let rank = transport.rank();
    let np = transport.size();
    if np < 2 {
        return Err(PingPongError::TooFewRanks(np));
    }
    if params.reps == 0 {
        return Err(PingPongError::NoReps);
    }
    let window = params.window.max(1);
    if let Some(max_bytes) = transport.capabilities().max_message_bytes {
        if let Some(&size) = params.sizes.iter().find(|&&s| s > max_bytes) {
            return Err(PingPongError::TooLarge {
                transport: transport.name(),
                size,
                max_bytes,
            });
        }
    }
    let max = params.sizes.iter().copied().max().unwrap_or(0);
    let active = rank == PINGER || rank == PONGER;
    let (slen, rlen) = buffer_lens(max, window);
    let (sbuf, rbuf) = if active {
        (
            Some(transport.alloc_buffer(slen)?),
            Some(transport.alloc_buffer(rlen)?),
        )
    } else {
        (None, None)
    };
    let rate = clock.rate();
    let cap = params
        .precision
        .map_or(params.reps, |p| p.max_reps.max(params.reps));
    let mut ticks: Vec<u64> = vec![0; cap];
    // Every batch after the first: no warmup; the sorted repetitions judged.
    let mut batch = params.clone();
    let mut sorted: Vec<f64> = Vec::with_capacity(cap);
    let mut more = Vec::with_capacity(1);
    let mut results = Vec::new();

    for (i, &size) in params.sizes.iter().enumerate() {
        let before = transport.counters();
        let (mut timing_loop, mut intact) = (TimingLoop::Generic, true);
        let (mut measured, mut verdict) = (0, None);
        loop {
            batch.warmup = if measured == 0 {
                super::warmup_rounds(params.warmup, i == 0)
            } else {
                0
            };
            batch.reps = params.reps.min(cap - measured);
            let these = &mut ticks[measured..measured + batch.reps];
            if let (Some(sbuf), Some(rbuf)) = (sbuf, rbuf) {
                let peer = if rank == PINGER { PONGER } else { PINGER };
                let bufs = PairBuffers {
                    send: sbuf,
                    recv: rbuf,
                };
                let (lp, ok) = measure_size(
                    clock,
                    transport,
                    peer,
                    rank == PINGER,
                    bufs,
                    size,
                    &batch,
                    these,
                )?;
                (timing_loop, intact) = (lp, intact && ok);
            }
            measured += batch.reps;
            let Some(target) = params.precision else {
                break;
            };
            more.clear();
            if rank == PINGER {
                sorted.clear();
                sorted.extend(ticks[..measured].iter().map(|&t| t as f64));
                sorted.sort_by(f64::total_cmp);
                let v = target.judge(&sorted);
                more.push(u8::from(target.more(&v, measured)));
                verdict = Some(v);
            }
            control.broadcast(PINGER, &mut more)?;
            if more.first() != Some(&1) {
                break;
            }
        }
        // Between sizes: verdicts and counters to rank 0, once the exchange has
        // settled (see `Transport::settle`).
        transport.settle()?;
        let mut report = vec![u8::from(intact)];
        counters::encode(&transport.counters().since(&before), &mut report);
        let gathered = control.gather(PINGER, &report)?;
        if rank != PINGER {
            on_size(size, None).map_err(PingPongError::Sink)?;
            continue;
        }
        let mut sum = CounterMap::new();
        for (from, bytes) in gathered.iter().enumerate() {
            let Some((&ok, rest)) = bytes.split_first() else {
                return Err(ControlError::Protocol {
                    rank: from,
                    detail: "empty ping-pong report".into(),
                }
                .into());
            };
            if params.check && ok == 0 {
                let peer = if from == PINGER { PONGER } else { PINGER };
                return Err(PingPongError::DataCheck {
                    size,
                    rank: from,
                    peer,
                });
            }
            let entries = counters::decode(rest).ok_or_else(|| ControlError::Protocol {
                rank: from,
                detail: "malformed counters in the ping-pong report".into(),
            })?;
            counters::add(&mut sum, entries);
        }
        let half_rtt_us: Vec<f64> = ticks[..measured]
            .iter()
            .map(|&t| rate.to_nanos(t).as_us() / 2.0)
            .collect();
        let summary = Summary::of(&half_rtt_us).expect("reps >= 1 and finite values");
        let level_moved = level_move(&half_rtt_us);
        let samples = params.samples.then_some(Samples { half_rtt_us });
        let half_rtt_us = summary;
        let result = SizeResult {
            size,
            reps: measured,
            bandwidth_mbps: if half_rtt_us.median <= 0.0 {
                0.0
            } else if params.bidirectional {
                (2 * window * size) as f64 / (2.0 * half_rtt_us.median)
            } else if window > 1 {
                (params.stream.max(window) * size) as f64 / (2.0 * half_rtt_us.median)
            } else {
                size as f64 / half_rtt_us.median
            },
            window,
            stream_messages: (window > 1 && params.stream > 0).then_some(params.stream),
            bidirectional: params.bidirectional,
            half_rtt_us,
            data_check: params.check.then_some(true),
            timing_loop,
            counters: sum,
            samples,
            precision: verdict,
            histogram: None,
            level_moved,
            pairs: None,
        };
        on_size(size, Some(&result)).map_err(PingPongError::Sink)?;
        results.push(result);
    }
    if let (Some(s), Some(r)) = (sbuf, rbuf) {
        transport.free_buffer(s)?;
        transport.free_buffer(r)?;
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{TickRate, Ticks};
    use crate::transport::{inproc, Region, WaitMode};
    use ngauge_transport::TscRead;
    use std::cell::Cell;

    /// The parameters of most tests here: checked, the native loop, samples
    /// kept, one message per round, no precision target.
    fn params(sizes: Vec<usize>, reps: usize, warmup: usize) -> Params {
        Params {
            sizes,
            reps,
            warmup,
            check: true,
            native_loop: true,
            samples: true,
            window: 1,
            stream: 0,
            bidirectional: false,
            precision: None,
        }
    }

    /// A clock that advances by `step` ticks per reading at 1 GHz: every round trip
    /// measures exactly `step` ns, whatever the machine does.
    struct SteppingClock {
        next: Cell<u64>,
        step: u64,
    }

    impl Clock for SteppingClock {
        fn now(&self) -> Ticks {
            let t = self.next.get();
            self.next.set(t + self.step);
            Ticks(t)
        }
        fn rate(&self) -> TickRate {
            TickRate::new(1e9)
        }
    }

    fn sweep(np: usize, params: Params) -> Vec<Result<Vec<SizeResult>, String>> {
        let handles: Vec<_> = inproc::world(np)
            .into_iter()
            .map(|(mut t, mut c)| {
                let params = params.clone();
                std::thread::spawn(move || {
                    let c_rank = c.rank();
                    let clock = SteppingClock {
                        next: Cell::new(0),
                        step: 3000,
                    };
                    let mut seen = Vec::new();
                    let out = run(&clock, &mut t, &mut c, &params, &mut |size, r| {
                        assert_eq!(r.is_some(), c_rank == 0);
                        seen.push(size);
                        Ok(())
                    });
                    let seen: Vec<usize> = if c_rank == 0 { seen } else { Vec::new() };
                    out.inspect(|v| {
                        assert_eq!(seen, v.iter().map(|r| r.size).collect::<Vec<_>>());
                    })
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn each_round_trip_is_timed_by_two_readings() {
        let out = sweep(2, params(vec![0, 1, 3000, 65536], 5, 2));
        let r0 = out[0].as_ref().unwrap();
        assert_eq!(out[1].as_ref().unwrap(), &Vec::new());
        assert_eq!(r0.len(), 4);
        for r in r0 {
            // 3000 ns per round trip: RTT/2 is exactly 1.5 us, every time.
            assert_eq!(r.half_rtt_us.n, 5);
            assert_eq!(r.half_rtt_us.min, 1.5);
            assert_eq!(r.half_rtt_us.max, 1.5);
            assert_eq!(r.bandwidth_mbps, r.size as f64 / 1.5);
            assert_eq!(r.data_check, Some(true));
            assert_eq!(r.samples.as_ref().unwrap().half_rtt_us, vec![1.5; 5]);
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(json["samples"]["half_rtt_us"].as_array().unwrap().len(), 5);
        }
    }

    #[test]
    fn a_window_is_timed_as_one_round_and_every_message_is_checked() {
        let out = sweep(
            2,
            Params {
                samples: false,
                window: 5,
                ..params(vec![0, 1, 3000], 4, 1)
            },
        );
        let r0 = out[0].as_ref().unwrap();
        assert_eq!(r0.len(), 3);
        for r in r0 {
            // a round of 5 messages and the reply between two readings, 3000 ns
            assert_eq!(r.half_rtt_us.min, 1.5);
            assert_eq!(r.half_rtt_us.max, 1.5);
            assert_eq!(r.window, 5);
            assert_eq!(r.bandwidth_mbps, (5 * r.size) as f64 / 3.0);
            assert_eq!(r.data_check, Some(true));
            assert_eq!(r.timing_loop, TimingLoop::Generic);
            assert!(serde_json::to_value(r)
                .unwrap()
                .get("stream_messages")
                .is_none());
        }
    }

    #[test]
    fn a_stream_run_is_timed_as_one_round_and_every_slot_is_checked() {
        let out = sweep(
            2,
            Params {
                samples: false,
                window: 4,
                stream: 10,
                ..params(vec![0, 1, 3000], 3, 1)
            },
        );
        assert!(out[1].as_ref().unwrap().is_empty());
        let r0 = out[0].as_ref().unwrap();
        assert_eq!(r0.len(), 3);
        for r in r0 {
            // 10 messages, 4 in flight, and the reply between two readings
            assert_eq!(r.half_rtt_us.median, 1.5);
            assert_eq!(r.bandwidth_mbps, (10 * r.size) as f64 / 3.0);
            assert_eq!((r.window, r.stream_messages), (4, Some(10)));
            assert_eq!(r.data_check, Some(true));
        }
        let json = serde_json::to_value(&r0[0]).unwrap();
        assert_eq!(json["stream_messages"], 10);
    }

    #[test]
    fn a_bidirectional_round_counts_both_directions_and_checks_both_ranks() {
        for window in [1, 4] {
            let out = sweep(
                2,
                Params {
                    sizes: vec![1, 3000],
                    reps: 3,
                    warmup: 1,
                    check: true,
                    native_loop: true,
                    samples: false,
                    window,
                    stream: 0,
                    bidirectional: true,
                    precision: None,
                },
            );
            for r in out[0].as_ref().unwrap() {
                // both windows between two readings, 3000 ns
                assert_eq!(r.half_rtt_us.median, 1.5);
                assert!(r.bidirectional);
                assert_eq!(r.bandwidth_mbps, (2 * window * r.size) as f64 / 3.0);
                assert_eq!(r.data_check, Some(true));
                assert_eq!(r.timing_loop, TimingLoop::Generic);
            }
        }
    }

    #[test]
    fn extra_ranks_stay_idle() {
        let out = sweep(
            4,
            Params {
                samples: false,
                ..params(vec![8, 16], 3, 0)
            },
        );
        assert_eq!(out[0].as_ref().unwrap().len(), 2);
        let r = &out[0].as_ref().unwrap()[0];
        assert!(r.samples.is_none(), "not asked for");
        assert!(serde_json::to_value(r).unwrap().get("samples").is_none());
        for o in &out[1..] {
            assert!(o.as_ref().unwrap().is_empty());
        }
    }

    /// A clock whose every round trip takes 1 us longer than the one before
    /// (readings 1000 ns apart, then 2000, 3000, ...): the sample spreads as it
    /// grows, so no median is ever within 1%.
    struct SlowingClock {
        next: Cell<u64>,
        step: Cell<u64>,
    }

    impl Clock for SlowingClock {
        fn now(&self) -> Ticks {
            let t = self.next.get();
            self.step.set(self.step.get() + 1000);
            self.next.set(t + self.step.get());
            Ticks(t)
        }
        fn rate(&self) -> TickRate {
            TickRate::new(1e9)
        }
    }

    /// Rank 0's results of one size with `--precision 1%`, batches of 3 and at
    /// most 12, three ranks (the idle one follows every batch decision).
    fn precise(slowing: bool) -> Vec<SizeResult> {
        let handles: Vec<_> = inproc::world(3)
            .into_iter()
            .map(|(mut t, mut c)| {
                std::thread::spawn(move || {
                    let params = Params {
                        precision: Some(Target {
                            rel_half_width: 0.01,
                            max_reps: 12,
                        }),
                        ..params(vec![8, 64], 3, 1)
                    };
                    let on = &mut |_, _: Option<&SizeResult>| Ok(());
                    if slowing {
                        let clock = SlowingClock {
                            next: Cell::new(0),
                            step: Cell::new(0),
                        };
                        run(&clock, &mut t, &mut c, &params, on).unwrap()
                    } else {
                        let clock = SteppingClock {
                            next: Cell::new(0),
                            step: 3000,
                        };
                        run(&clock, &mut t, &mut c, &params, on).unwrap()
                    }
                })
            })
            .collect();
        let mut out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(out[1].is_empty() && out[2].is_empty());
        out.swap_remove(0)
    }

    /// Issue 37, `--precision`: equal round trips meet the target as soon as
    /// there is an interval (6 repetitions: two batches of 3); round trips that
    /// keep slowing never do and stop at `max_reps`, every one kept.
    #[test]
    fn issue_37_precision_repeats_batches_until_the_target_or_the_cap() {
        for r in precise(false) {
            assert_eq!(r.reps, 6, "no interval below 6 repetitions");
            assert_eq!(r.half_rtt_us.n, 6);
            let p = r.precision.unwrap();
            assert_eq!((p.met, p.rel_half_width, p.max_reps), (true, Some(0.0), 12));
            assert_eq!(r.data_check, Some(true));
        }
        for r in precise(true) {
            assert_eq!(r.reps, 12);
            let s = &r.samples.as_ref().unwrap().half_rtt_us;
            assert_eq!(s.len(), 12);
            assert!(s.windows(2).all(|w| w[1] > w[0]), "{s:?}");
            let p = r.precision.unwrap();
            assert!(!p.met && p.rel_half_width.unwrap() > 0.01, "{p:?}");
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["precision"]["met"], false);
        }
    }

    #[test]
    fn zero_reps_and_one_rank_are_errors() {
        let out = sweep(
            2,
            Params {
                check: false,
                samples: false,
                ..params(vec![8], 0, 0)
            },
        );
        assert_eq!(out[0].as_ref().unwrap_err(), "reps must be at least 1");
        let out = sweep(
            1,
            Params {
                check: false,
                samples: false,
                ..params(vec![8], 1, 0)
            },
        );
        assert!(out[0].as_ref().unwrap_err().contains("at least 2 ranks"));
    }

    /// An in-process transport that counts its sends into `sent`, which the
    /// rank's [`SettingUpClock`] reads.
    struct CountingSends {
        inner: inproc::InprocTransport,
        sent: std::rc::Rc<Cell<u64>>,
    }

    impl Transport for CountingSends {
        ngauge_transport::forward_transport!(inner, except name, send);
        fn name(&self) -> &'static str {
            "counting"
        }
        fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
            self.sent.set(self.sent.get() + 1);
            self.inner.send(peer, region)
        }
    }

    /// A clock of 1 GHz whose readings advance by 1 ms while its rank has sent
    /// at most `setup` messages and by 3 us after: a transport that sets itself
    /// up on its first messages (UCX wires up its lanes).
    struct SettingUpClock {
        next: Cell<u64>,
        sent: std::rc::Rc<Cell<u64>>,
        setup: u64,
    }

    impl Clock for SettingUpClock {
        fn now(&self) -> Ticks {
            let step = if self.sent.get() <= self.setup {
                1_000_000
            } else {
                3000
            };
            let t = self.next.get() + step;
            self.next.set(t);
            Ticks(t)
        }
        fn rate(&self) -> TickRate {
            TickRate::new(1e9)
        }
    }

    /// The first 60 round trips of a run are slow (the transport's setup): the
    /// first size's warmup takes them all, even with `--warmup 1`, and its
    /// median is the network's, as the second size's is.
    #[test]
    fn the_first_size_warms_up_past_the_transports_setup() {
        assert!(crate::patterns::warmup_rounds(1, true) > 60);
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(t, mut c)| {
                std::thread::spawn(move || {
                    let sent = std::rc::Rc::new(Cell::new(0));
                    let clock = SettingUpClock {
                        next: Cell::new(0),
                        sent: sent.clone(),
                        setup: 60,
                    };
                    let mut t = CountingSends { inner: t, sent };
                    let params = Params {
                        native_loop: false,
                        samples: false,
                        ..params(vec![64, 128], 20, 1)
                    };
                    run(&clock, &mut t, &mut c, &params, &mut |_, _| Ok(())).unwrap()
                })
            })
            .collect();
        let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        for r in &out[0] {
            assert_eq!(r.half_rtt_us.median, 1.5, "{r:?}");
        }
    }

    /// An in-process transport that damages the first byte of every message rank 1
    /// receives.
    struct Corrupting(inproc::InprocTransport);

    impl Transport for Corrupting {
        ngauge_transport::forward_transport!(0, except name, recv);
        fn name(&self) -> &'static str {
            "corrupting"
        }
        fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
            self.0.recv(peer, region)?;
            if self.0.rank() == 1 && region.len > 0 {
                self.0.buffer_mut(region.buffer)?[region.offset] ^= 1;
            }
            Ok(())
        }
    }

    /// An in-process transport with a native loop: it runs the round trips with
    /// its own send and recv, records every timed one as `NATIVE_TICKS`, and
    /// counts its calls (and keeps the reading each initiator's call asked for).
    struct WithNativeLoop {
        inner: inproc::InprocTransport,
        calls: usize,
        reads: Vec<TscRead>,
    }

    const NATIVE_TICKS: u64 = 4000;

    impl Transport for WithNativeLoop {
        ngauge_transport::forward_transport!(inner, except name, native_round_trips);
        fn name(&self) -> &'static str {
            "native"
        }
        fn native_round_trips(
            &mut self,
            peer: Rank,
            send: Region,
            recv: Region,
            role: NativeRole<'_>,
        ) -> Option<Result<(), TransportError>> {
            self.calls += 1;
            let run = || -> Result<(), TransportError> {
                match role {
                    NativeRole::Initiator {
                        warmup,
                        ticks,
                        read,
                    } => {
                        self.reads.push(read);
                        for i in 0..warmup + ticks.len() {
                            self.inner.send(peer, send)?;
                            self.inner.recv(peer, recv)?;
                            if i >= warmup {
                                ticks[i - warmup] = NATIVE_TICKS;
                            }
                        }
                    }
                    NativeRole::Responder { round_trips } => {
                        for _ in 0..round_trips {
                            self.inner.recv(peer, recv)?;
                            self.inner.send(peer, send)?;
                        }
                    }
                }
                Ok(())
            };
            Some(run())
        }
    }

    /// [`SteppingClock`] (3000 ticks per round trip) that claims, or not, to be the
    /// raw TSC read one way.
    struct MaybeTsc {
        clock: SteppingClock,
        tsc_read: Option<TscRead>,
    }

    impl Clock for MaybeTsc {
        fn now(&self) -> Ticks {
            self.clock.now()
        }
        fn rate(&self) -> TickRate {
            self.clock.rate()
        }
        fn tsc_read(&self) -> Option<TscRead> {
            self.tsc_read
        }
    }

    /// Rank 0's results, every rank's count of native-loop calls, and the
    /// readings rank 0's calls asked for.
    fn sweep_with_native_loop(
        tsc_read: Option<TscRead>,
        native_loop: bool,
    ) -> (Vec<SizeResult>, Vec<usize>, Vec<TscRead>) {
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(t, mut c)| {
                std::thread::spawn(move || {
                    let clock = MaybeTsc {
                        clock: SteppingClock {
                            next: Cell::new(0),
                            step: 3000,
                        },
                        tsc_read,
                    };
                    let mut t = WithNativeLoop {
                        inner: t,
                        calls: 0,
                        reads: Vec::new(),
                    };
                    let params = Params {
                        sizes: vec![1, 4096],
                        reps: 4,
                        warmup: 2,
                        check: true,
                        native_loop,
                        samples: false,
                        window: 1,
                        stream: 0,
                        bidirectional: false,
                        precision: None,
                    };
                    let r = run(&clock, &mut t, &mut c, &params, &mut |_, _| Ok(())).unwrap();
                    (r, t.calls, t.reads)
                })
            })
            .collect();
        let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let calls = out.iter().map(|o| o.1).collect();
        let (r, _, reads) = out.into_iter().next().unwrap();
        (r, calls, reads)
    }

    #[test]
    fn a_clock_that_is_not_the_raw_tsc_gets_the_generic_loop() {
        let (r, calls, _) = sweep_with_native_loop(None, true);
        assert_eq!(calls, [0, 0], "the transport's loop reads another clock");
        for r in &r {
            assert_eq!(r.timing_loop, TimingLoop::Generic);
            assert_eq!(r.half_rtt_us.median, 1.5, "the stepping clock's 3000 ns");
            assert_eq!(r.data_check, Some(true));
        }
    }

    #[test]
    fn the_native_loop_times_with_a_raw_tsc_clock_unless_turned_off() {
        let (r, calls, reads) = sweep_with_native_loop(Some(TscRead::Rdtscp), true);
        assert_eq!(calls, [2, 2], "one call per size on both ranks");
        assert_eq!(reads, [TscRead::Rdtscp; 2], "the clock's own reading");
        for r in &r {
            assert_eq!(r.timing_loop, TimingLoop::Native);
            assert_eq!(r.half_rtt_us.n, 4);
            assert_eq!(r.half_rtt_us.min, 2.0, "the transport's 4000 ticks");
            assert_eq!(r.half_rtt_us.max, 2.0);
            assert_eq!(r.data_check, Some(true));
        }
        let (r, calls, _) = sweep_with_native_loop(Some(TscRead::Rdtscp), false);
        assert_eq!(calls, [0, 0]);
        assert!(r
            .iter()
            .all(|r| r.timing_loop == TimingLoop::Generic && r.half_rtt_us.median == 1.5));
    }

    #[test]
    fn the_native_loop_reads_the_counter_as_the_clock_does() {
        // `--timer rdtsc`: the transport's loop is asked for the plain reading.
        let (r, calls, reads) = sweep_with_native_loop(Some(TscRead::Rdtsc), true);
        assert_eq!(calls, [2, 2]);
        assert_eq!(reads, [TscRead::Rdtsc; 2]);
        assert!(r.iter().all(|r| r.timing_loop == TimingLoop::Native));
    }

    #[test]
    fn a_transport_without_a_native_loop_gets_the_generic_one() {
        // The in-process transport keeps the trait's default (`None`), so a raw-TSC
        // clock still times the generic loop.
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(mut t, mut c)| {
                std::thread::spawn(move || {
                    let clock = MaybeTsc {
                        clock: SteppingClock {
                            next: Cell::new(0),
                            step: 3000,
                        },
                        tsc_read: Some(TscRead::Rdtscp),
                    };
                    let params = Params {
                        samples: false,
                        ..params(vec![8], 3, 1)
                    };
                    run(&clock, &mut t, &mut c, &params, &mut |_, _| Ok(())).unwrap()
                })
            })
            .collect();
        let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(out[0][0].timing_loop, TimingLoop::Generic);
        assert_eq!(out[0][0].half_rtt_us.median, 1.5);
    }

    #[test]
    fn damaged_payload_fails_the_check_naming_size_and_rank() {
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(t, mut c)| {
                std::thread::spawn(move || {
                    let clock = SteppingClock {
                        next: Cell::new(0),
                        step: 10,
                    };
                    let params = Params {
                        samples: false,
                        ..params(vec![16], 2, 1)
                    };
                    run(&clock, &mut Corrupting(t), &mut c, &params, &mut |_, _| {
                        Ok(())
                    })
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            out[0].as_ref().unwrap_err(),
            "data check failed at size 16 bytes: the message rank 1 received does not carry rank 0's pattern"
        );
    }

    /// The pattern over the real socket transports, ranks as threads.
    fn over_sockets(udp: bool, wait: WaitMode) -> Vec<SizeResult> {
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(_, mut c)| {
                std::thread::spawn(move || {
                    let lo = std::net::IpAddr::from([127, 0, 0, 1]);
                    let mut t: Box<dyn Transport> = if udp {
                        let o = ngauge_udp::UdpOptions {
                            wait,
                            drop_one_in: Some(7),
                            retransmit_after: std::time::Duration::from_millis(5),
                            ..Default::default()
                        };
                        Box::new(ngauge_udp::UdpTransport::connect(&mut c, lo, &o).unwrap())
                    } else {
                        let o = ngauge_tcp::TcpOptions {
                            wait,
                            ..Default::default()
                        };
                        Box::new(ngauge_tcp::TcpTransport::connect(&mut c, lo, &o).unwrap())
                    };
                    let clock = crate::clock::SystemClock::new(
                        crate::clock::TimerSource::detect(),
                        TickRate::new(1e9),
                    );
                    let params = Params {
                        samples: false,
                        ..params(vec![1, 1024, 32768], 20, 2)
                    };
                    run(&clock, t.as_mut(), &mut c, &params, &mut |_, _| Ok(())).unwrap()
                })
            })
            .collect();
        let mut out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        out.swap_remove(0)
    }

    #[test]
    fn runs_over_tcp_in_both_wait_modes() {
        for wait in [WaitMode::Poll, WaitMode::Block] {
            let r = over_sockets(false, wait);
            assert_eq!(r.len(), 3);
            assert!(r
                .iter()
                .all(|r| r.half_rtt_us.min > 0.0 && r.data_check == Some(true)));
        }
    }

    #[test]
    fn runs_over_lossy_udp_and_reports_both_ends_counters() {
        for wait in [WaitMode::Poll, WaitMode::Block] {
            let r = over_sockets(true, wait);
            assert!(r.iter().all(|r| r.data_check == Some(true)));
            let dropped: u64 = r.iter().map(|r| r.counters["test_dropped_datagrams"]).sum();
            let lost: u64 = r.iter().map(|r| r.counters["lost_datagrams"]).sum();
            // 2 ranks x 3 sizes x 22 round trips, one datagram in 7 dropped.
            assert!(dropped >= 15, "{r:?}");
            assert!(lost >= 1 && lost <= dropped, "{r:?}");
        }
    }

    /// The ponger vanishes after the third size: the pinger's sweep fails naming it,
    /// and the JSON-lines file written by the per-size callback holds exactly the
    /// three finished sizes, each a valid record.
    #[test]
    fn records_of_finished_sizes_survive_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.jsonl");
        let handles: Vec<_> = inproc::world(2)
            .into_iter()
            .map(|(mut t, mut c)| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let rank = c.rank();
                    let clock = SteppingClock {
                        next: Cell::new(0),
                        step: 100,
                    };
                    let params = Params {
                        samples: false,
                        ..params(vec![1, 2, 4, 8, 16], 3, 1)
                    };
                    let mut writer = (rank == 0)
                        .then(|| crate::report::jsonl::JsonlWriter::create(&path).unwrap());
                    let out = run(&clock, &mut t, &mut c, &params, &mut |size, r| {
                        if let (Some(w), Some(r)) = (writer.as_mut(), r) {
                            w.write(r).map_err(|e| e.to_string())?;
                        }
                        if rank == 1 && size == 4 {
                            return Err("crash".into());
                        }
                        Ok(())
                    });
                    // The writer is never closed properly.
                    std::mem::forget(writer);
                    out.map(|_| ()).map_err(|e| e.to_string())
                })
            })
            .collect();
        let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(out[0].as_ref().unwrap_err().contains("rank 1"), "{out:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        let sizes: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["size"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(sizes, vec![1, 2, 4]);
    }

    #[test]
    fn payload_patterns_differ_by_rank_and_size() {
        let a: Vec<u8> = (0..64).map(|i| payload_byte(64, 0, i)).collect();
        let b: Vec<u8> = (0..64).map(|i| payload_byte(64, 1, i)).collect();
        let c: Vec<u8> = (0..64).map(|i| payload_byte(128, 0, i)).collect();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().any(|&x| x != a[0]));
        assert!(carries(&a, 64, 0) && !carries(&a, 64, 1));
    }
}
