//! `sync`: synchronize the clocks, then measure how far each rank's global time is
//! off at each `check_after_s` time; and what every experiment timed with
//! synchronized clocks shares ([`rank0_clock`], [`gather_effort`]).
//!
//! The residual of rank `r` at a check is measured afresh with Hoefler's min-RTT
//! ping-pong (accurately measuring collectives, sec. 3.1) between rank `r`, reading
//! its clock through its model (global time), and rank 0: Hunold & Carpen-Amarie's
//! Algorithm 20 / Appendix C.3 (clock offset after synchronization) with the min-RTT
//! estimator. When all ranks share one host (one invariant TSC) the truth is known
//! too: zero offset and drift, plus whatever `NGAUGE_TEST_CLOCK_SKEW` injected; each
//! rank then also reports the true error of its global time at the check.
//!
//! **One rate for every rank: rank 0's.** Each rank calibrates its timer on its own,
//! and the calibrations differ a little; converting each rank's ticks with its own
//! rate would turn that difference into a drift of the reported times (see
//! [`crate::sync::model`]). So rank 0 broadcasts its rate, and every rank uses it for
//! its clock, for the injected skew's offset in ticks and for every conversion to
//! time ([`rank0_clock`]).

use super::{binding_warnings, rank_clock, Context, ExperimentError};
use crate::clock::{Clock, Skew, SystemClock, TickRate, Ticks, TimerSource};
use crate::job::{Job, JobSpec, TransportName};
use crate::launch::World;
use crate::report::effort::{ClockSync, EffortReport, RankSync};
use crate::report::sync::{RankReport, SyncDoc, SyncSamples, SyncWarning};
use crate::report::warning::warned;
use crate::spec::SyncSpec;
use crate::sync::spin::{SpinThenSleep, SPIN_BEFORE_SLEEP};
use crate::sync::{self, pairwise, skew, Algorithm, Effort, GlobalClock, SyncOptions};
use ngauge_transport::{Control, ControlError, Transport, WaitMode};
use std::time::{Duration, Instant};

/// Synchronizes the clocks `spec.reps` times over the job's first transport (TCP
/// when it names none), each time followed by the residual checks; rank 0 gets the
/// document of the first, and the context gets each one's document as it finishes
/// (numbered by `rep`). Collective: every rank calls it.
///
/// # Errors
/// A spec out of range, a transport that fails to open or may lose messages, a
/// lost peer, a sync that fails, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &SyncSpec,
    ctx: &mut Context,
) -> Result<Option<SyncDoc>, ExperimentError> {
    spec.validate()?;
    let options = spec.options();
    let clock = rank0_clock(world, ctx.timer)?;
    let transport_name = job
        .transports
        .first()
        .copied()
        .unwrap_or(TransportName::Tcp);
    let data = JobSpec {
        transports: vec![transport_name],
        ..job.clone()
    };
    let opened = Job::open(&data, world, |_, _| {})?.transports.remove(0);
    let wait = opened.wait;
    // Ranks outnumber cores: the pair that exchanges spins, the others sleep
    // (`sync::spin`), unless the two share a core.
    let same_core = ranks_on_my_core(world)?;
    let mut transport: Box<dyn Transport> = match wait {
        WaitMode::Block => Box::new(SpinThenSleep::new(
            opened.transport,
            SPIN_BEFORE_SLEEP,
            &same_core,
        )),
        WaitMode::Poll => opened.transport,
    };

    // The truth needs one shared timer (one host) and rank 0's own skew.
    let one_host = world.peers.iter().all(|p| p.host == world.peers[0].host);
    let mut rank0_skew = encode_skew(clock.skew());
    world.control.broadcast(0, &mut rank0_skew)?;
    let rank0_skew = decode_skew(&rank0_skew);

    // Each repetition: a synchronization and its checks (Hunold & Carpen-Amarie,
    // Algorithm 20), recorded as it finishes. The document shows the first;
    // `samples` every one's duration and largest residual.
    let checks = spec.check_after_s.len();
    let about = About {
        spec,
        options: &options,
        transport: (transport_name, wait),
        clock: &clock,
        one_host,
    };
    let mut first: Option<SyncDoc> = None;
    let mut durations_us = Vec::new();
    let mut worst_residuals_ns = Vec::new();
    for rep in 0..spec.reps {
        let (duration_us, ranks) = one_repetition(
            world,
            &clock,
            transport.as_mut(),
            &options,
            &spec.check_after_s,
            one_host,
            rank0_skew,
        )?;
        if world.rank != 0 {
            continue;
        }
        durations_us.push(duration_us);
        worst_residuals_ns.push(
            max_abs(&ranks, |r| Some(&r.residual_ns), checks)
                .into_iter()
                .fold(0.0, f64::max),
        );
        let doc = about.document(world, ctx, duration_us, ranks);
        ctx.record(&RepRecord { rep, doc: &doc })?;
        first.get_or_insert(doc);
    }
    let mut doc = first;
    if let Some(doc) = doc.as_mut() {
        doc.samples = spec.samples.then_some(SyncSamples {
            duration_us: durations_us,
            max_abs_residual_ns: worst_residuals_ns,
        });
    }
    Ok(doc)
}

/// One synchronization's record in the `-o` stream: its document, numbered.
#[derive(serde::Serialize)]
struct RepRecord<'a> {
    /// The repetition, from 0.
    rep: u32,
    #[serde(flatten)]
    doc: &'a SyncDoc,
}

/// What the document of every repetition shares.
struct About<'a> {
    spec: &'a SyncSpec,
    options: &'a SyncOptions,
    transport: (TransportName, WaitMode),
    clock: &'a SystemClock,
    one_host: bool,
}

impl About<'_> {
    /// The document of one synchronization that took `duration_us` at rank 0 and
    /// left `ranks` (without `samples`).
    fn document(
        &self,
        world: &World,
        ctx: &Context,
        duration_us: f64,
        ranks: Vec<RankReport>,
    ) -> SyncDoc {
        let (options, checks) = (self.options, self.spec.check_after_s.len());
        let (transport_name, wait) = self.transport;
        let pinning: Vec<Option<usize>> = ranks.iter().map(|r| r.pinned_core).collect();
        let injected = std::env::var(skew::SKEW_ENV).ok();
        let drift = options.algorithm.models_drift();
        let mut doc = SyncDoc {
            algo: options.algorithm,
            np: world.size,
            transport: transport_name,
            wait,
            estimator: (options.algorithm != Algorithm::Jk).then(|| options.offset_estimator()),
            fitpoints: drift.then_some(options.fitpoints),
            exchanges: drift.then_some(options.exchanges),
            duration_us,
            check_after_s: self.spec.check_after_s.clone(),
            truth: self.one_host.then(|| match injected {
                Some(_) => "one host: shared TSC plus the injected skew".into(),
                None => "one host: shared TSC (zero offset, zero drift)".into(),
            }),
            injected_skew: injected,
            max_abs_residual_ns: max_abs(&ranks, |r| Some(&r.residual_ns), checks),
            max_abs_true_residual_ns: self
                .one_host
                .then(|| max_abs(&ranks, |r| r.true_residual_ns.as_ref(), checks)),
            ranks,
            reps: self.spec.reps,
            samples: None,
            warnings: Vec::new(),
            meta: ctx
                .meta(self.clock.source(), self.clock.rate().hz)
                .transports(&[(transport_name, wait)])
                .job(world, pinning.clone())
                .sync(options.algorithm)
                .build(),
        };
        let mut warnings = doc.find_warnings();
        // Every rank takes part in the sync, so all must have cores of their own.
        warnings.extend(
            binding_warnings(world, &pinning, [(0..world.size).collect()]).map(SyncWarning::Setup),
        );
        doc.warnings = warned(warnings);
        doc
    }
}

/// One synchronization and its residual checks (collective): its duration at
/// rank 0 and, at rank 0, every rank's report (empty elsewhere).
fn one_repetition(
    world: &mut World,
    clock: &SystemClock,
    transport: &mut dyn Transport,
    options: &SyncOptions,
    check_after_s: &[f64],
    one_host: bool,
    rank0_skew: Option<Skew>,
) -> Result<(f64, Vec<RankReport>), ExperimentError> {
    let rate = clock.rate();
    let ns = |ticks: f64| ticks * 1e9 / rate.hz;
    let outcome = sync::synchronize(clock, transport, world.control.as_mut(), options)?;
    let model = outcome.model;
    let after_sync = Instant::now();
    let truth = |raw: Ticks| {
        one_host.then(|| {
            ns(skew::true_error_ticks(
                &model,
                clock.skew().as_ref(),
                rank0_skew.as_ref(),
                raw,
            ))
        })
    };
    let mut report = RankReport {
        rank: world.rank,
        offset_ns: ns(model.offset_at(outcome.finished)),
        drift_ppm: model.drift_ppm(),
        residual_ns: Vec::new(),
        residual_rtt_ns: Vec::new(),
        true_residual_ns: one_host.then(Vec::new),
        true_offset_ns: one_host.then(|| {
            let raw = clock.raw();
            let own = clock.skew().map_or(raw, |s| s.apply(raw));
            let reference = rank0_skew.map_or(raw, |s| s.apply(raw));
            ns((own.0 as i128 - reference.0 as i128) as f64)
        }),
        true_drift_ppm: one_host.then(|| {
            let d = |s: Option<Skew>| s.map_or(0.0, |s| s.drift);
            ((1.0 + d(clock.skew())) / (1.0 + d(rank0_skew)) - 1.0) * 1e6
        }),
        effort: EffortReport::new(&outcome.effort, rate.hz),
        pinned_core: world.pinned_core,
    };
    let wire = pairwise::Wire::new(transport, 0)?;
    for &after in check_after_s {
        // Every rank sleeps on its own (ranks left the closing barrier together), so
        // no control call waits longer than a moment; then rank 0 measures with
        // each rank in turn, the others waiting on the control plane.
        let due = after_sync + Duration::from_secs_f64(after);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let global_clock = GlobalClock::new(clock, model);
        let turn = sync::in_turn(
            &global_clock,
            transport,
            world.control.as_mut(),
            &wire,
            |clock, transport, wire| {
                pairwise::min_rtt(
                    clock,
                    transport,
                    wire,
                    0,
                    options.stop_after,
                    options.max_exchanges,
                )
            },
        )?;
        match turn {
            sync::Turn::Served(_) => {
                report.residual_ns.push(0.0);
                report.residual_rtt_ns.push(0.0);
            }
            sync::Turn::Measured(m) => {
                report.residual_ns.push(ns(m.best.offset()));
                report.residual_rtt_ns.push(ns(m.best.rtt() as f64));
            }
        }
        if let (Some(t), Some(v)) = (truth(clock.raw()), report.true_residual_ns.as_mut()) {
            v.push(t);
        }
    }
    wire.free(transport)?;
    let ranks = world.gather_json(&report, "sync report")?;
    Ok((rate.to_nanos(outcome.duration_ticks()).as_us(), ranks))
}

/// Per check, the largest `column` value of any rank in size.
fn max_abs<'a>(
    ranks: &'a [RankReport],
    column: impl Fn(&'a RankReport) -> Option<&'a Vec<f64>>,
    checks: usize,
) -> Vec<f64> {
    (0..checks)
        .map(|i| {
            ranks
                .iter()
                .filter_map(|r| column(r).and_then(|v| v.get(i)))
                .fold(0.0f64, |m, v| m.max(v.abs()))
        })
        .collect()
}

/// Every rank's `effort` of a synchronization with `algo`, at rank 0 (`None`
/// elsewhere), for the documents timed with synchronized clocks. Collective: every
/// rank calls it, `hz` its clock's rate.
///
/// # Errors
/// A lost rank, or one that sent something else.
pub fn gather_effort(
    world: &mut World,
    algo: Algorithm,
    effort: &Effort,
    hz: f64,
) -> Result<Option<ClockSync>, ExperimentError> {
    let efforts = world.gather_json(&EffortReport::new(effort, hz), "sync effort")?;
    Ok((world.rank == 0).then(|| ClockSync {
        algo,
        ranks: efforts
            .into_iter()
            .enumerate()
            .map(|(rank, effort)| RankSync { rank, effort })
            .collect(),
    }))
}

/// This rank's clock ([`rank_clock`]) at rank 0's calibrated rate, its injected
/// skew rescaled to that rate (see the module doc). Collective.
///
/// # Errors
/// A malformed test-clock variable, a lost rank 0.
pub fn rank0_clock(world: &mut World, timer: TimerSource) -> Result<SystemClock, ExperimentError> {
    let own = rank_clock(world, timer)?;
    let rate = rank0_rate(world.control.as_mut(), own.rate())?;
    Ok(SystemClock::new(own.source(), rate)
        .with_skew(own.skew().map(|s| rescale_skew(s, own.rate(), rate))))
}

/// Rank 0's calibrated rate, on every rank (collective).
///
/// # Errors
/// A lost rank 0, or a rate that is not one.
pub fn rank0_rate(control: &mut dyn Control, own: TickRate) -> Result<TickRate, ExperimentError> {
    let mut bytes = if control.rank() == 0 {
        own.hz.to_le_bytes().to_vec()
    } else {
        Vec::new()
    };
    control.broadcast(0, &mut bytes)?;
    let hz = bytes
        .as_slice()
        .try_into()
        .map(f64::from_le_bytes)
        .ok()
        .filter(|hz| hz.is_finite() && *hz > 0.0)
        .ok_or_else(|| ControlError::Protocol {
            rank: 0,
            detail: "a malformed tick rate".into(),
        })?;
    Ok(TickRate::new(hz))
}

/// An injected skew whose offset was converted to ticks at `from`, converted at `to`
/// instead (the drift is a fraction, the epoch a raw reading: both stay).
pub fn rescale_skew(skew: Skew, from: TickRate, to: TickRate) -> Skew {
    Skew {
        offset_ticks: skew.offset_ticks * to.hz / from.hz,
        ..skew
    }
}

/// Rank 0's skew as it broadcasts it (JSON: its floats come back exact).
fn encode_skew(skew: Option<Skew>) -> Vec<u8> {
    serde_json::to_vec(&skew).expect("plain data serializes")
}

/// The skew rank 0 broadcast; none when it sent none, or something else.
fn decode_skew(bytes: &[u8]) -> Option<Skew> {
    serde_json::from_slice(bytes).ok().flatten()
}

/// The other ranks pinned to this rank's core on this host (a collective call).
fn ranks_on_my_core(world: &mut World) -> Result<Vec<usize>, ExperimentError> {
    let mine = world.pinned_core;
    let cores = world.allgather_json(&mine, "pinned core")?;
    let host = |rank: usize| world.peers.get(rank).map(|p| &p.host);
    Ok((0..world.size)
        .filter(|&r| {
            r != world.rank && mine.is_some() && cores[r] == mine && host(r) == host(world.rank)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zeros_skew_survives_the_broadcast_encoding() {
        let skew = Skew {
            offset_ticks: -7.5e6,
            drift: 40e-6,
            epoch: Ticks(1 << 40),
        };
        assert_eq!(decode_skew(&encode_skew(Some(skew))), Some(skew));
        assert_eq!(decode_skew(&encode_skew(None)), None);
        assert_eq!(decode_skew(&[1, 2, 3]), None);
    }

    #[test]
    fn every_rank_gets_rank_zeros_rate() {
        use crate::sync::sim::{self, NetModel};
        let rates = sim::run(&[None, None, None], NetModel::default(), |mut r| {
            let own = TickRate::new(2.5e9 + r.control.rank() as f64 * 1e6);
            rank0_rate(&mut r.control, own).unwrap().hz
        });
        assert_eq!(rates, vec![2.5e9; 3]);
    }

    #[test]
    fn a_rescaled_skew_is_the_one_the_spec_gives_at_the_new_rate() {
        use crate::sync::skew::SkewSpec;
        let spec: SkewSpec = "1:+3ms:+40ppm".parse().unwrap();
        let (own, rank0) = (TickRate::new(2.4e9), TickRate::new(2.5e9));
        let epoch = Ticks(1 << 40);
        let at_own = spec.skew_for(1, own, epoch).unwrap();
        let expected = spec.skew_for(1, rank0, epoch).unwrap();
        let got = rescale_skew(at_own, own, rank0);
        assert!((got.offset_ticks - expected.offset_ticks).abs() < 1e-6);
        assert_eq!((got.drift, got.epoch), (expected.drift, expected.epoch));
    }
}
