//! `ngauge sync`: synchronize the clocks, then measure how far each rank's global time
//! is off at each `--check-after` time.
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
//! `ngauge::sync::model`). So rank 0 broadcasts its rate, and every rank uses it for
//! its clock, for the injected skew's offset in ticks and for every conversion to
//! time in this command.

use super::common::UsageError;
use crate::cli::{GlobalArgs, SyncArgs, SyncFlags};
use ngauge::clock::{Clock, Skew, SystemClock, TickRate, Ticks};
use ngauge::job::{Job, TransportName};
use ngauge::launch::World;
use ngauge::report::effort::EffortReport;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::sync::{seconds_label, RankReport, SyncDoc, SyncSamples, SyncWarning};
use ngauge::report::table::Table;
use ngauge::spec::SyncSpec;
use ngauge::sync::skew;
use ngauge::sync::spin::{SpinThenSleep, SPIN_BEFORE_SLEEP};
use ngauge::sync::{self, pairwise, Algorithm, GlobalClock, SyncOptions};
use ngauge::transport::{Control, Transport, WaitMode};
use std::time::{Duration, Instant};

impl SyncFlags {
    /// The spec of these flags, with the residual checks at `check_after_s`.
    pub fn spec(&self, check_after_s: Vec<f64>) -> SyncSpec {
        SyncSpec {
            sync: self.algorithm,
            fitpoints: self.fitpoints,
            exchanges: self.exchanges,
            estimator: self.estimator,
            check_after_s,
            reps: 1,
            samples: false,
        }
    }
}

pub fn run(global: &GlobalArgs, args: &SyncArgs) -> anyhow::Result<()> {
    let spec = SyncSpec {
        reps: args.reps,
        samples: args.samples,
        ..args.sync.spec(args.check_after.clone())
    };
    run_spec(global, &spec)
}

pub fn run_spec(global: &GlobalArgs, args: &SyncSpec) -> anyhow::Result<()> {
    args.validate().map_err(super::common::spec_usage)?;
    let options = args.options();
    super::common::check_outputs(global, &[])?;
    super::common::with_world(global, |world| run_rank(global, args, &options, world))
}

fn run_rank(
    global: &GlobalArgs,
    args: &SyncSpec,
    options: &SyncOptions,
    world: &mut World,
) -> anyhow::Result<()> {
    let own = super::common::rank_clock(world)?;
    let rate = rank0_rate(world.control.as_mut(), own.rate())?;
    let clock = SystemClock::new(own.source(), rate)
        .with_skew(own.skew().map(|s| rescale_skew(s, own.rate(), rate)));
    let (transport, wait) = open_data(global, world)?;
    // Ranks outnumber cores: the pair that exchanges spins, the others sleep
    // (`sync::spin`, issue 13), unless the two share a core.
    let same_core = ranks_on_my_core(world)?;
    let mut transport: Box<dyn Transport> = match wait {
        WaitMode::Block => Box::new(SpinThenSleep::new(transport, SPIN_BEFORE_SLEEP, &same_core)),
        WaitMode::Poll => transport,
    };
    let transport_name = transport_name(global);
    if !transport.capabilities().reliable {
        return Err(UsageError(format!(
            "ngauge sync needs a transport that never loses a message, and {} may; use -t tcp",
            transport.name()
        ))
        .into());
    }

    // The truth needs one shared timer (one host) and rank 0's own skew.
    let one_host = world.peers.iter().all(|p| p.host == world.peers[0].host);
    let mut rank0_skew = encode_skew(clock.skew());
    world.control.broadcast(0, &mut rank0_skew)?;
    let rank0_skew = decode_skew(&rank0_skew);

    // Each repetition: a synchronization and its checks (Hunold & Carpen-Amarie,
    // Algorithm 20). The document shows the first; `samples` every one's duration
    // and largest residual.
    let mut first: Option<(f64, Vec<RankReport>)> = None;
    let mut durations_us = Vec::new();
    let mut worst_residuals_ns = Vec::new();
    for _ in 0..args.reps {
        let (duration_us, ranks) = one_repetition(
            world,
            &clock,
            transport.as_mut(),
            options,
            &args.check_after_s,
            one_host,
            rank0_skew,
        )?;
        if world.rank != 0 {
            continue;
        }
        durations_us.push(duration_us);
        worst_residuals_ns.push(
            max_abs(&ranks, |r| Some(&r.residual_ns), args.check_after_s.len())
                .into_iter()
                .fold(0.0, f64::max),
        );
        first.get_or_insert((duration_us, ranks));
    }
    let Some((duration_us, ranks)) = first else {
        return Ok(());
    };
    let pinning: Vec<Option<usize>> = ranks.iter().map(|r| r.pinned_core).collect();
    // Issue 20: every rank takes part in the sync, so all must have cores of their own.
    let binding = ngauge::launch::binding::check_groups(
        &world.peers,
        &pinning,
        world.env.kind,
        [(0..world.size).collect()],
    );
    let mut doc = SyncDoc {
        algo: options.algorithm,
        np: world.size,
        transport: transport_name,
        wait,
        estimator: (options.algorithm != Algorithm::Jk).then(|| options.offset_estimator()),
        fitpoints: options
            .algorithm
            .models_drift()
            .then_some(options.fitpoints),
        exchanges: options
            .algorithm
            .models_drift()
            .then_some(options.exchanges),
        duration_us,
        check_after_s: args.check_after_s.clone(),
        injected_skew: std::env::var(skew::SKEW_ENV).ok(),
        truth: one_host.then(|| {
            if std::env::var(skew::SKEW_ENV).is_ok() {
                "one host: shared TSC plus the injected skew".into()
            } else {
                "one host: shared TSC (zero offset, zero drift)".into()
            }
        }),
        max_abs_residual_ns: max_abs(&ranks, |r| Some(&r.residual_ns), args.check_after_s.len()),
        max_abs_true_residual_ns: one_host.then(|| {
            max_abs(
                &ranks,
                |r| r.true_residual_ns.as_ref(),
                args.check_after_s.len(),
            )
        }),
        ranks,
        reps: args.reps,
        samples: args.samples.then_some(SyncSamples {
            duration_us: durations_us,
            max_abs_residual_ns: worst_residuals_ns,
        }),
        warnings: Vec::new(),
        meta: super::common::meta(clock.source(), rate.hz)
            .transports(&[(transport_name, wait)])
            .job(world, pinning)
            .sync(options.algorithm)
            .build(),
    };
    let mut warnings = doc.find_warnings();
    warnings.extend(binding.into_iter().map(|w| SyncWarning::Setup(w.into())));
    doc.warnings = ngauge::report::warning::warned(warnings.iter().cloned());
    if let Some(path) = &global.output {
        // One synchronization is one measurement point: one record.
        JsonlWriter::create(path)
            .and_then(|mut w| w.write(&doc))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if global.json {
        super::common::print_json(&doc)?;
    } else {
        super::common::print_text(&render(&doc))?;
    }
    for w in &warnings {
        super::common::warn(w, hint(w));
    }
    Ok(())
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
) -> anyhow::Result<(f64, Vec<RankReport>)> {
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
        // no control call waits longer than a moment.
        let due = after_sync + Duration::from_secs_f64(after);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        world.control.barrier()?;
        if world.rank == 0 {
            for peer in 1..world.size {
                pairwise::respond(clock, transport, &wire, peer)?;
            }
            report.residual_ns.push(0.0);
            report.residual_rtt_ns.push(0.0);
        } else {
            let global_clock = GlobalClock::new(clock, model);
            let m = pairwise::min_rtt(
                &global_clock,
                transport,
                &wire,
                0,
                options.stop_after,
                options.max_exchanges,
            )?;
            report.residual_ns.push(ns(m.best.offset()));
            report.residual_rtt_ns.push(ns(m.best.rtt() as f64));
        }
        if let (Some(t), Some(v)) = (truth(clock.raw()), report.true_residual_ns.as_mut()) {
            v.push(t);
        }
    }
    wire.free(transport)?;

    let gathered = world.control.gather(0, &serde_json::to_vec(&report)?)?;
    if world.rank != 0 {
        return Ok((0.0, Vec::new()));
    }
    let ranks = gathered
        .iter()
        .map(|b| serde_json::from_slice::<RankReport>(b))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((rate.to_nanos(outcome.duration_ticks()).as_us(), ranks))
}

/// The command line's hint for a warning.
fn hint(w: &SyncWarning) -> Option<String> {
    match w {
        SyncWarning::LargeResidual { algo, .. } if !algo.models_drift() => {
            Some("try --sync hca or jk".into())
        }
        SyncWarning::LargeResidual { .. } => {
            Some("more --fitpoints spread the fit over a longer time".into())
        }
        SyncWarning::Setup(s) => super::common::setup_hint(s),
    }
}

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

fn render(s: &SyncDoc) -> String {
    let mut out = format!(
        "clock sync: {} over {} ({}), {} ranks",
        s.algo.as_str(),
        s.transport,
        s.wait,
        s.np
    );
    if let (Some(f), Some(e)) = (s.fitpoints, s.exchanges) {
        out += &format!(", {f} fit points x {e} exchanges");
    }
    if let Some(e) = s.estimator {
        out += &format!(", offsets by {}", e.as_str());
    }
    out += &format!(": {:.1} ms at rank 0\n\n", s.duration_us / 1e3);
    let mut header = vec![
        "rank".to_string(),
        "offset [us]".into(),
        "drift [ppm]".into(),
    ];
    for &c in &s.check_after_s {
        header.push(format!("residual @{} [ns]", seconds_label(c)));
    }
    if s.truth.is_some() {
        for &c in &s.check_after_s {
            header.push(format!("true @{} [ns]", seconds_label(c)));
        }
    }
    let mut table = Table::new(header);
    for r in &s.ranks {
        let mut row = vec![
            r.rank.to_string(),
            format!("{:.3}", r.offset_ns / 1e3),
            format!("{:.3}", r.drift_ppm),
        ];
        row.extend(r.residual_ns.iter().map(|v| format!("{v:.0}")));
        if let Some(t) = &r.true_residual_ns {
            row.extend(t.iter().map(|v| format!("{v:.0}")));
        }
        table.row(row);
    }
    out += &table.render();
    if let Some(t) = &s.truth {
        out += &format!("\ntruth: {t}\n");
    }
    out
}

/// Rank 0's calibrated rate, on every rank (collective).
pub(super) fn rank0_rate(control: &mut dyn Control, own: TickRate) -> anyhow::Result<TickRate> {
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
        .ok_or_else(|| anyhow::anyhow!("rank 0 sent a malformed tick rate"))?;
    Ok(TickRate::new(hz))
}

/// An injected skew whose offset was converted to ticks at `from`, converted at `to`
/// instead (the drift is a fraction, the epoch a raw reading: both stay).
pub(super) fn rescale_skew(skew: Skew, from: TickRate, to: TickRate) -> Skew {
    Skew {
        offset_ticks: skew.offset_ticks * to.hz / from.hz,
        ..skew
    }
}

fn encode_skew(skew: Option<Skew>) -> Vec<u8> {
    skew.map_or_else(Vec::new, |s| {
        let mut v = Vec::with_capacity(24);
        v.extend_from_slice(&s.offset_ticks.to_le_bytes());
        v.extend_from_slice(&s.drift.to_le_bytes());
        v.extend_from_slice(&s.epoch.0.to_le_bytes());
        v
    })
}

fn decode_skew(bytes: &[u8]) -> Option<Skew> {
    let f = |i: usize| -> Option<[u8; 8]> { bytes.get(i * 8..i * 8 + 8)?.try_into().ok() };
    Some(Skew {
        offset_ticks: f64::from_le_bytes(f(0)?),
        drift: f64::from_le_bytes(f(1)?),
        epoch: Ticks(u64::from_le_bytes(f(2)?)),
    })
}

/// The other ranks pinned to this rank's core on this host (a collective call).
fn ranks_on_my_core(world: &mut World) -> anyhow::Result<Vec<usize>> {
    let mine = serde_json::to_vec(&world.pinned_core)?;
    let all = world.control.allgather(&mine)?;
    let mut same = Vec::new();
    for (rank, bytes) in all.iter().enumerate() {
        let core: Option<usize> = serde_json::from_slice(bytes)?;
        let shares = rank != world.rank
            && core.is_some()
            && core == world.pinned_core
            && world.peers.get(rank).map(|p| &p.host)
                == world.peers.get(world.rank).map(|p| &p.host);
        if shares {
            same.push(rank);
        }
    }
    Ok(same)
}

/// The transport of the exchanges: the first `--transport` (tcp by default).
fn transport_name(global: &GlobalArgs) -> TransportName {
    global
        .transport
        .first()
        .copied()
        .unwrap_or(TransportName::Tcp)
}

/// The data transport for the exchanges, with the common transport options
/// (`--wait` etc.).
fn open_data(
    global: &GlobalArgs,
    world: &mut World,
) -> anyhow::Result<(Box<dyn Transport>, WaitMode)> {
    let spec = ngauge::job::JobSpec {
        transports: vec![transport_name(global)],
        ..super::common::job_spec(global)
    };
    let mut job = Job::open(&spec, world, |_, _| {}).map_err(super::common::job_error)?;
    let opened = job.transports.remove(0);
    Ok((opened.transport, opened.wait))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge::sync::Estimator;

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
        use ngauge::sync::sim::{self, NetModel};
        let rates = sim::run(&[None, None, None], NetModel::default(), |mut r| {
            let own = TickRate::new(2.5e9 + r.control.rank() as f64 * 1e6);
            rank0_rate(&mut r.control, own).unwrap().hz
        });
        assert_eq!(rates, vec![2.5e9; 3]);
    }

    #[test]
    fn a_rescaled_skew_is_the_one_the_spec_gives_at_the_new_rate() {
        use ngauge::sync::skew::SkewSpec;
        let spec: SkewSpec = "1:+3ms:+40ppm".parse().unwrap();
        let (own, rank0) = (TickRate::new(2.4e9), TickRate::new(2.5e9));
        let epoch = Ticks(1 << 40);
        let at_own = spec.skew_for(1, own, epoch).unwrap();
        let expected = spec.skew_for(1, rank0, epoch).unwrap();
        let got = rescale_skew(at_own, own, rank0);
        assert!((got.offset_ticks - expected.offset_ticks).abs() < 1e-6);
        assert_eq!((got.drift, got.epoch), (expected.drift, expected.epoch));
    }

    #[test]
    fn flags_map_to_options() {
        let flags = SyncFlags {
            algorithm: Algorithm::Jk,
            fitpoints: 7,
            exchanges: Some(3),
            estimator: Some(Estimator::MinRtt),
        };
        let o = flags.spec(vec![]).options();
        assert_eq!(o.algorithm, Algorithm::Jk);
        assert_eq!((o.fitpoints, o.exchanges), (7, 3));
        assert_eq!(o.estimator, Some(Estimator::MinRtt));
        // Without --exchanges each algorithm has its papers' default.
        let default_for = |algorithm| {
            SyncFlags {
                algorithm,
                exchanges: None,
                ..flags.clone()
            }
            .spec(vec![])
            .options()
            .exchanges
        };
        assert_eq!(default_for(Algorithm::Jk), 100);
        assert_eq!(default_for(Algorithm::Hca), 100);
    }

    #[test]
    fn residual_hints_name_what_helps() {
        let w = |algo| SyncWarning::LargeResidual {
            max_abs_ns: 2e4,
            after_s: 5.0,
            algo,
        };
        assert!(hint(&w(Algorithm::Linear)).unwrap().contains("--sync hca"));
        assert!(hint(&w(Algorithm::Hca)).unwrap().contains("--fitpoints"));
        assert!(!w(Algorithm::Linear).to_string().contains("--"));
        assert_eq!(
            w(Algorithm::Linear).to_string(),
            "residuals reach 20.0 us after 5s: linear models no drift"
        );
    }
}
