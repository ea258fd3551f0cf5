//! Congestion at one endpoint (Netgauge 2.4.6's `1toN` and `Nto1` patterns,
//! `ptrn_1toN.cpp` / `ptrn_Nto1.cpp`): rank 0 streams to, or receives from,
//! every other rank at once, and each flow's bandwidth is set against the one
//! pair's, measured alone in the same run (`pingpong --pattern`).
//!
//! `1toN`: in a timed round rank 0 posts a one-byte reply receive from every
//! peer, then `window` sends of `s` bytes to each, interleaved (one to every
//! peer, then the next), and polls the replies with [`Transport::test`]: a
//! peer's round ends when its reply has arrived, all of them on rank 0's clock
//! from the same start. Every peer runs pingpong's streaming sink (`window`
//! receives, then the reply).
//!
//! `Nto1`: every peer runs pingpong's streaming round towards rank 0 and times
//! its own rounds; rank 0 posts every peer's `window` receives (interleaved, in
//! distinct parts of its buffer) and, as soon as a peer's window has arrived,
//! posts that peer's next window and replies. Each peer's rounds run free of
//! the others', so a slow flow does not hold the fast ones to its pace (as
//! 1toN's flows, each timed to its own reply).
//!
//! A flow's bandwidth is `window * size` over its median round, as pingpong's
//! streaming bandwidth; the total is the flows' sum (osu_mbw_mr's aggregate).
//! The reference is the same stream on the pair (0,1) alone ((1,0) for Nto1),
//! measured by [`super::pairs`] right after the fan at every size. Every size
//! starts with a control-plane barrier and ends with a gather of the rounds and
//! the data-check verdicts at rank 0, both outside the timed regions.

use super::pairs::{self, PairResult};
use super::pingpong::{carries, fill, sink_round, stream_round, Params, PingPongError};
use crate::clock::Clock;
use crate::stats::Summary;
use crate::transport::{Control, ControlError, Rank, Region, RequestId, Transport, WaitMode};
use serde::{Deserialize, Serialize};

/// The rank every flow starts or ends at.
pub const ROOT: Rank = 0;

pub use super::pairs::result::{Congestion, Fan};

impl Congestion {
    /// The pair the reference measures (the initiator streams).
    pub fn reference(pattern: Fan) -> pairs::Pair {
        match pattern {
            Fan::OneToN => (ROOT, 1),
            Fan::NToOne => (1, ROOT),
        }
    }
}

/// Request lists and counters of rank 0's rounds, allocated once per run so
/// that no round allocates (a 1toN round is timed at rank 0; an Nto1 round is
/// timed by the peers, whose replies rank 0 sends).
struct Scratch {
    sends: Vec<RequestId>,
    replies: Vec<RequestId>,
    times: Vec<Option<u64>>,
    pending: Vec<Vec<RequestId>>,
    /// Nto1: the rounds each peer has yet to stream.
    left: Vec<usize>,
}

impl Scratch {
    fn new(peers: usize, window: usize) -> Self {
        Scratch {
            sends: Vec::with_capacity(peers * window.max(1)),
            replies: Vec::with_capacity(peers),
            times: Vec::with_capacity(peers),
            pending: vec![Vec::with_capacity(window); peers],
            left: Vec::with_capacity(peers),
        }
    }
}

/// What one rank reports to rank 0 after a size.
#[derive(Serialize, Deserialize)]
struct Report {
    intact: bool,
    /// Round times, us, per flow this rank timed (rank 0 in 1toN: every
    /// peer's, in rank order; a peer in Nto1: its own).
    round_us: Vec<Vec<f64>>,
}

/// Measures the fan at every size of `params` (`window` messages per flow and
/// round), collectively: every rank calls it with the same arguments. Rank 0
/// gets one result per peer and size (`from` streamed to `to`), the others an
/// empty vector.
///
/// # Errors
/// Fewer than two ranks, no repetitions, a failed transport or control
/// channel, damaged payloads.
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    pattern: Fan,
    params: &Params,
) -> Result<Vec<PairResult>, PingPongError> {
    let (rank, np) = (transport.rank(), transport.size());
    if np < 2 {
        return Err(PingPongError::TooFewRanks(np));
    }
    if params.reps == 0 {
        return Err(PingPongError::NoReps);
    }
    let window = params.window.max(1);
    let peers = np - 1;
    let max = params.sizes.iter().copied().max().unwrap_or(0).max(1);
    // Rank 0 receives every peer's window (Nto1) or a reply byte from each.
    let rlen = if rank == ROOT {
        peers * window * max
    } else {
        window * max
    }
    .max(peers);
    let (sbuf, rbuf) = (transport.alloc_buffer(max)?, transport.alloc_buffer(rlen)?);
    let rate = clock.rate();
    let us = |t: u64| rate.to_nanos(t).as_us();
    let mut results = Vec::new();
    let mut scratch = Scratch::new(peers, window);
    for &size in &params.sizes {
        if params.check {
            fill(&mut transport.buffer_mut(sbuf)?[..size], size, rank);
            transport.buffer_mut(rbuf)?.fill(0xa5);
        }
        let slot = |k: usize| Region {
            buffer: rbuf,
            offset: k * size,
            len: size,
        };
        control.barrier()?;
        let mut report = Report {
            intact: true,
            round_us: Vec::new(),
        };
        let mut ids = Vec::with_capacity(peers * window + peers);
        match (pattern, rank == ROOT) {
            (Fan::OneToN, true) => {
                report.round_us = vec![Vec::with_capacity(params.reps); peers];
                for round in 0..params.warmup + params.reps {
                    fan_out(
                        clock,
                        transport,
                        sbuf.prefix(size),
                        rbuf,
                        window,
                        &mut scratch,
                    )?;
                    if round >= params.warmup {
                        for (flow, t) in report.round_us.iter_mut().zip(&scratch.times) {
                            flow.push(us(t.unwrap_or(0)));
                        }
                    }
                }
            }
            (Fan::OneToN, false) => {
                for _ in 0..params.warmup + params.reps {
                    sink_round(
                        transport,
                        ROOT,
                        rbuf,
                        size,
                        sbuf.prefix(1),
                        window,
                        &mut ids,
                    )?;
                }
                let got = &transport.buffer(rbuf)?[..size * window];
                report.intact = !params.check
                    || (0..window).all(|k| carries(&got[k * size..(k + 1) * size], size, ROOT));
            }
            (Fan::NToOne, true) => {
                let rounds = params.warmup + params.reps;
                fan_in(
                    transport,
                    sbuf.prefix(1),
                    slot,
                    window,
                    rounds,
                    &mut scratch,
                )?;
                let got = &transport.buffer(rbuf)?[..peers * window * size];
                report.intact = !params.check
                    || (0..peers * window)
                        .all(|k| carries(&got[k * size..(k + 1) * size], size, 1 + k % peers));
            }
            (Fan::NToOne, false) => {
                let (s, reply) = (sbuf.prefix(size), rbuf.prefix(1));
                let mut mine = Vec::with_capacity(params.reps);
                for round in 0..params.warmup + params.reps {
                    // Timed region: the window, its reply and nothing else.
                    let t0 = clock.now();
                    stream_round(transport, ROOT, s, reply, window, &mut ids)?;
                    let t1 = clock.now();
                    if round >= params.warmup {
                        mine.push(us(t1.since(t0)));
                    }
                }
                report.round_us.push(mine);
            }
        }
        transport.settle()?;
        let bytes = serde_json::to_vec(&report).expect("plain data serializes");
        let gathered = control.gather(ROOT, &bytes)?;
        if rank != ROOT {
            continue;
        }
        let reports: Vec<Report> = pairs::decode(&gathered)?;
        for (who, r) in reports.iter().enumerate() {
            if params.check && !r.intact {
                let peer = if who == ROOT { 1 } else { ROOT };
                return Err(PingPongError::DataCheck {
                    size,
                    rank: who,
                    peer,
                });
            }
        }
        for peer in 1..np {
            let (from, to, rounds) = match pattern {
                Fan::OneToN => (ROOT, peer, reports[ROOT].round_us.get(peer - 1)),
                Fan::NToOne => (peer, ROOT, reports[peer].round_us.first()),
            };
            let half: Vec<f64> = rounds.into_iter().flatten().map(|t| t / 2.0).collect();
            let half_rtt_us = Summary::of(&half).ok_or_else(|| ControlError::Protocol {
                rank: from,
                detail: "no finite rounds in the flow report".into(),
            })?;
            let round_us = 2.0 * half_rtt_us.median;
            let per_us = |n: f64| if round_us > 0.0 { n / round_us } else { 0.0 };
            results.push(PairResult {
                from,
                to,
                step: 0,
                concurrent_pairs: peers,
                size,
                window,
                half_rtt_us,
                bandwidth_mbps: per_us((window * size) as f64),
                msgs_per_s: per_us(window as f64) * 1e6,
                data_check: params.check.then_some(true),
            });
        }
    }
    transport.free_buffer(sbuf)?;
    transport.free_buffer(rbuf)?;
    Ok(results)
}

/// One timed 1toN round of rank 0: a reply receive from every peer (byte
/// `peer - 1` of `rbuf`), `window` sends of `s` to each, interleaved, then the
/// replies polled; leaves each peer's round in `scratch.times`, ticks from the
/// same start.
fn fan_out<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    s: Region,
    rbuf: crate::transport::BufferId,
    window: usize,
    scratch: &mut Scratch,
) -> Result<(), PingPongError> {
    let peers = transport.size() - 1;
    let Scratch {
        sends,
        replies,
        times,
        ..
    } = scratch;
    sends.clear();
    replies.clear();
    times.clear();
    times.resize(peers, None);
    // Timed region: the windows, the replies and the polling, nothing else.
    let t0 = clock.now();
    for p in 0..peers {
        let byte = Region {
            buffer: rbuf,
            offset: p,
            len: 1,
        };
        replies.push(transport.irecv(p + 1, byte)?);
    }
    for _ in 0..window {
        for p in 0..peers {
            sends.push(transport.isend(p + 1, s)?);
        }
    }
    while times.iter().any(Option::is_none) {
        for p in 0..peers {
            if times[p].is_none() && transport.test(replies[p])? {
                times[p] = Some(clock.now().since(t0));
            }
        }
        retire(transport, sends)?;
        polite(transport);
    }
    transport.wait_all(sends)?;
    Ok(())
}

/// Rank 0's side of `rounds` Nto1 rounds of every peer: `window` receives
/// from each peer into `slot(k * peers + peer - 1)` (posted interleaved at the
/// start), and as soon as a peer's window has arrived, its next window posted
/// (before the reply that starts that round) and the reply `reply` sent.
fn fan_in<T: Transport + ?Sized>(
    transport: &mut T,
    reply: Region,
    slot: impl Fn(usize) -> Region,
    window: usize,
    rounds: usize,
    scratch: &mut Scratch,
) -> Result<(), PingPongError> {
    let peers = transport.size() - 1;
    let Scratch {
        sends,
        pending,
        left,
        ..
    } = scratch;
    sends.clear();
    left.clear();
    left.resize(peers, rounds);
    for k in 0..window {
        for (p, ids) in pending.iter_mut().enumerate() {
            ids.push(transport.irecv(p + 1, slot(k * peers + p))?);
        }
    }
    while left.iter().any(|&n| n > 0) {
        for p in 0..peers {
            if left[p] == 0 || !retire(transport, &mut pending[p])? {
                continue;
            }
            left[p] -= 1;
            if left[p] > 0 {
                for k in 0..window {
                    pending[p].push(transport.irecv(p + 1, slot(k * peers + p))?);
                }
            }
            sends.push(transport.isend(p + 1, reply)?);
        }
        retire(transport, sends)?;
        polite(transport);
    }
    transport.wait_all(sends)?;
    Ok(())
}

/// Tests every request of `ids` once, dropping the completed ones; `true`
/// when none is left.
fn retire<T: Transport + ?Sized>(
    transport: &mut T,
    ids: &mut Vec<RequestId>,
) -> Result<bool, PingPongError> {
    let mut i = 0;
    while i < ids.len() {
        if transport.test(ids[i])? {
            ids.swap_remove(i);
        } else {
            i += 1;
        }
    }
    Ok(ids.is_empty())
}

/// Between two polling sweeps: a transport told to block (ranks sharing
/// cores) lets a co-located rank run.
fn polite<T: Transport + ?Sized>(transport: &T) {
    if transport.wait_mode() == WaitMode::Block {
        std::thread::yield_now();
    }
}
