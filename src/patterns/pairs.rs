//! Many pairs at once: the ping-pong of [`super::pingpong`] (latency; with a
//! window, streaming bandwidth) run on a set of disjoint pairs of ranks at the
//! same time, step after step, with a per-pair result for every ordered pair
//! measured. `matrix` (all pairs, mpiGraph's p x p picture; Netgauge's all-pairs
//! pattern) and `pingpong --pairs N` (osu_multi_lat, osu_mbw_mr) run it.
//!
//! A step is a list of disjoint ordered pairs `(initiator, responder)`; the
//! initiator times the rounds. Every step and size starts with a control-plane
//! barrier (outside every timed region), so the pairs of a step measure at the
//! same time; after it, every initiator's repetitions and every rank's data-check
//! verdict go to rank 0 (also outside the timed regions). Ranks in no pair of a
//! step only take part in the barrier and the gather.
//!
//! Schedules ([`schedule`]): a round-robin tournament (the circle method: p-1
//! rounds of p/2 disjoint pairs, every unordered pair once; with odd p, p rounds
//! in which one rank idles), each round measured in both directions (two steps);
//! or every ordered pair alone, for a quiet reference (`--one-at-a-time`). The
//! order of the ranks on the circle and of the rounds is drawn from a seed, so
//! the same seed gives the same pairing on every rank and in every run.

pub mod result;
pub mod schedule;

pub use result::{MultiPair, PairResult};

use super::pingpong::{
    buffer_lens, measure_size, PairBuffers, Params, PingPongError, SizeResult, TimingLoop,
};
use crate::clock::Clock;
use crate::stats::Summary;
use crate::transport::{Control, ControlError, Rank, Transport};
use serde::{Deserialize, Serialize};

/// One ordered pair of a step: the initiator times, the responder answers.
pub type Pair = (Rank, Rank);

/// One size's results of pairs measured at once as a ping-pong size result:
/// the first pair's figures, and all of them with the totals in `pairs`.
/// `None` without a result.
pub fn size_result(
    per_pair: Vec<PairResult>,
    reps: usize,
    bidirectional: bool,
) -> Option<SizeResult> {
    let first = per_pair.first()?.clone();
    Some(SizeResult {
        size: first.size,
        reps,
        half_rtt_us: first.half_rtt_us,
        bandwidth_mbps: first.bandwidth_mbps,
        window: first.window,
        stream_messages: None,
        bidirectional,
        data_check: first.data_check,
        // The engine times every pair with the generic loop.
        timing_loop: TimingLoop::Generic,
        counters: Default::default(),
        samples: None,
        precision: None,
        histogram: None,
        level_moved: None,
        pairs: Some(MultiPair {
            total_bandwidth_mbps: per_pair.iter().map(|r| r.bandwidth_mbps).sum(),
            total_msgs_per_s: per_pair.iter().map(|r| r.msgs_per_s).sum(),
            per_pair,
            congestion: None,
        }),
    })
}

/// What one rank reports to rank 0 after a step and size.
#[derive(Serialize, Deserialize)]
struct Report {
    intact: bool,
    half_rtt_us: Vec<f64>,
}

/// Runs `steps` (each a list of disjoint ordered pairs) at every size of
/// `params`, collectively: every rank calls it with the same arguments. Rank 0
/// gets a result per pair, step and size, in that order; the others get an
/// empty vector. `on_result` sees each of rank 0's results as soon as its step
/// is done.
///
/// # Errors
/// A rank in two pairs of one step or out of range, no repetitions, a failed
/// transport or control channel, damaged payloads.
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    steps: &[Vec<Pair>],
    params: &Params,
    on_result: &mut dyn FnMut(&PairResult) -> Result<(), String>,
) -> Result<Vec<PairResult>, PingPongError> {
    let rank = transport.rank();
    let np = transport.size();
    if np < 2 {
        return Err(PingPongError::TooFewRanks(np));
    }
    if params.reps == 0 {
        return Err(PingPongError::NoReps);
    }
    schedule::check(steps, np).map_err(PingPongError::Sink)?;
    // Every pair times with the generic loop, so that concurrent pairs compare.
    let params = &Params {
        native_loop: false,
        ..params.clone()
    };
    let window = params.window.max(1);
    let directions = if params.bidirectional { 2 } else { 1 };
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
    let (slen, rlen) = buffer_lens(max, window);
    let bufs = PairBuffers {
        send: transport.alloc_buffer(slen)?,
        recv: transport.alloc_buffer(rlen)?,
    };
    let rate = clock.rate();
    let mut ticks = vec![0u64; params.reps];
    let mut results = Vec::new();
    for (step, pairs) in steps.iter().enumerate() {
        let mine = pairs.iter().find_map(|&(a, b)| {
            (a == rank)
                .then_some((b, true))
                .or((b == rank).then_some((a, false)))
        });
        for &size in &params.sizes {
            control.barrier()?;
            let mut report = Report {
                intact: true,
                half_rtt_us: Vec::new(),
            };
            if let Some((peer, initiator)) = mine {
                let (_, intact) = measure_size(
                    clock, transport, peer, initiator, bufs, size, params, &mut ticks,
                )?;
                report.intact = intact;
                if initiator {
                    report.half_rtt_us = ticks
                        .iter()
                        .map(|&t| rate.to_nanos(t).as_us() / 2.0)
                        .collect();
                }
            }
            transport.settle()?;
            let bytes = serde_json::to_vec(&report).expect("plain data serializes");
            let gathered = control.gather(0, &bytes)?;
            if rank != 0 {
                continue;
            }
            let reports: Vec<Report> = decode(&gathered)?;
            for &(from, to) in pairs {
                for (who, peer) in [(from, to), (to, from)] {
                    if params.check && !reports[who].intact {
                        return Err(PingPongError::DataCheck {
                            size,
                            rank: who,
                            peer,
                        });
                    }
                }
                let half_rtt_us = Summary::of(&reports[from].half_rtt_us).ok_or_else(|| {
                    ControlError::Protocol {
                        rank: from,
                        detail: "no finite repetitions in the pair report".into(),
                    }
                })?;
                let round_us = 2.0 * half_rtt_us.median;
                let per_s = |amount: f64| {
                    if round_us > 0.0 {
                        amount / round_us
                    } else {
                        0.0
                    }
                };
                let result = PairResult {
                    from,
                    to,
                    step,
                    concurrent_pairs: pairs.len(),
                    size,
                    window,
                    half_rtt_us,
                    bandwidth_mbps: if window > 1 || params.bidirectional {
                        per_s((directions * window * size) as f64)
                    } else {
                        per_s(2.0 * size as f64)
                    },
                    msgs_per_s: per_s((directions * window) as f64) * 1e6,
                    data_check: params.check.then_some(true),
                };
                on_result(&result).map_err(PingPongError::Sink)?;
                results.push(result);
            }
        }
    }
    transport.free_buffer(bufs.send)?;
    transport.free_buffer(bufs.recv)?;
    Ok(results)
}

/// Every rank's report, decoded; a malformed one names its rank.
pub(super) fn decode<R: serde::de::DeserializeOwned>(
    gathered: &[Vec<u8>],
) -> Result<Vec<R>, ControlError> {
    gathered
        .iter()
        .enumerate()
        .map(|(rank, bytes)| {
            serde_json::from_slice(bytes).map_err(|e| ControlError::Protocol {
                rank,
                detail: format!("malformed report: {e}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
