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

use crate::cli::{GlobalArgs, SyncAlgorithm, SyncArgs, SyncEstimator, SyncFlags, TransportName};
use crate::UsageError;
use ngauge::clock::{Clock, Skew, SystemClock, TickRate, Ticks};
use ngauge::launch::World;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::table::Table;
use ngauge::report::Meta;
use ngauge::sync::skew;
use ngauge::sync::{self, pairwise, Algorithm, Estimator, GlobalClock, SyncOptions};
use ngauge::transport::{Control, Transport, WaitMode};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

impl SyncFlags {
    /// The library's options for these flags.
    pub fn options(&self) -> SyncOptions {
        let algorithm = match self.algorithm {
            SyncAlgorithm::Linear => Algorithm::Linear,
            SyncAlgorithm::Logp => Algorithm::Logp,
            SyncAlgorithm::Jk => Algorithm::Jk,
            SyncAlgorithm::Hca => Algorithm::Hca,
        };
        let defaults = SyncOptions::new(algorithm);
        SyncOptions {
            estimator: self.estimator.map(|e| match e {
                SyncEstimator::Minrtt => Estimator::MinRtt,
                SyncEstimator::Skampi => Estimator::Skampi,
            }),
            fitpoints: self.fitpoints as usize,
            exchanges: self.exchanges.map_or(defaults.exchanges, |e| e as usize),
            ..defaults
        }
    }
}

/// One rank's findings, gathered at rank 0.
#[derive(Debug, Serialize, Deserialize)]
struct RankReport {
    rank: usize,
    /// Estimated `local - global` at the end of the sync.
    offset_ns: f64,
    /// Estimated rate error relative to rank 0.
    drift_ppm: f64,
    /// Measured global-time error at each check (`global_r - global_0`).
    residual_ns: Vec<f64>,
    /// Round trip of the exchange each residual comes from (its error bound is half).
    residual_rtt_ns: Vec<f64>,
    /// True global-time error at each check, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    true_residual_ns: Option<Vec<f64>>,
    /// True `local - global` at the end of the sync, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    true_offset_ns: Option<f64>,
    /// True rate error relative to rank 0, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    true_drift_ppm: Option<f64>,
    /// Ping-pongs this rank took part in during the sync.
    sync_exchanges: usize,
    /// SKaMPI brackets whose bounds crossed (drift or a clock jump during the
    /// measurement), replaced by min-RTT measurements.
    #[serde(default)]
    crossed_brackets: usize,
    pinned_core: Option<usize>,
}

pub fn run(global: &GlobalArgs, args: &SyncArgs) -> anyhow::Result<()> {
    let options = args.sync.options();
    options.validate().map_err(|e| UsageError(e.to_string()))?;
    super::with_world(global, |world| run_rank(global, args, &options, world))
}

fn run_rank(
    global: &GlobalArgs,
    args: &SyncArgs,
    options: &SyncOptions,
    world: &mut World,
) -> anyhow::Result<()> {
    let own = super::rank_clock(world)?;
    let rate = rank0_rate(world.control.as_mut(), own.rate())?;
    let clock = SystemClock::new(own.source(), rate)
        .with_skew(own.skew().map(|s| rescale_skew(s, own.rate(), rate)));
    let (mut transport, wait) = open_data(global, world)?;
    if !transport.capabilities().reliable {
        return Err(UsageError(format!(
            "ngauge sync needs a transport that never loses a message, and {} may; use -t tcp",
            transport.name()
        ))
        .into());
    }
    let outcome = sync::synchronize(&clock, transport.as_mut(), world.control.as_mut(), options)?;
    let model = outcome.model;
    let after_sync = Instant::now();
    let ns = |ticks: f64| ticks * 1e9 / rate.hz;

    // The truth needs one shared timer (one host) and rank 0's own skew.
    let one_host = world.peers.iter().all(|p| p.host == world.peers[0].host);
    let mut rank0_skew = encode_skew(clock.skew());
    world.control.broadcast(0, &mut rank0_skew)?;
    let rank0_skew = decode_skew(&rank0_skew);
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
        sync_exchanges: outcome.exchanges,
        crossed_brackets: outcome.crossed_brackets,
        pinned_core: world.pinned_core,
    };

    let wire = pairwise::Wire::new(transport.as_mut(), 0)?;
    for &after in &args.check_after {
        // Every rank sleeps on its own (ranks left the closing barrier together), so
        // no control call waits longer than a moment.
        let due = after_sync + Duration::from_secs_f64(after);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        world.control.barrier()?;
        if world.rank == 0 {
            for peer in 1..world.size {
                pairwise::respond(&clock, transport.as_mut(), &wire, peer)?;
            }
            report.residual_ns.push(0.0);
            report.residual_rtt_ns.push(0.0);
        } else {
            let global_clock = GlobalClock::new(&clock, model);
            let m = pairwise::min_rtt(
                &global_clock,
                transport.as_mut(),
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
    wire.free(transport.as_mut())?;

    let gathered = world.control.gather(0, &serde_json::to_vec(&report)?)?;
    if world.rank != 0 {
        return Ok(());
    }
    let ranks = gathered
        .iter()
        .map(|b| serde_json::from_slice::<RankReport>(b))
        .collect::<Result<Vec<_>, _>>()?;
    let summary = Summary {
        algo: options.algorithm,
        np: world.size,
        transport: transport.name(),
        wait: wait.as_str(),
        estimator: (options.algorithm != Algorithm::Jk).then(|| options.offset_estimator()),
        fitpoints: options
            .algorithm
            .models_drift()
            .then_some(options.fitpoints),
        exchanges: options
            .algorithm
            .models_drift()
            .then_some(options.exchanges),
        duration_us: rate.to_nanos(outcome.duration_ticks()).as_us(),
        check_after_s: args.check_after.clone(),
        injected_skew: std::env::var(skew::SKEW_ENV).ok(),
        truth: one_host.then_some(if std::env::var(skew::SKEW_ENV).is_ok() {
            "one host: shared TSC plus the injected skew"
        } else {
            "one host: shared TSC (zero offset, zero drift)"
        }),
        max_abs_residual_ns: max_abs(&ranks, |r| Some(&r.residual_ns), args.check_after.len()),
        max_abs_true_residual_ns: one_host.then(|| {
            max_abs(
                &ranks,
                |r| r.true_residual_ns.as_ref(),
                args.check_after.len(),
            )
        }),
        ranks,
    };
    let mut doc = serde_json::to_value(&summary)?;
    {
        let facts_hz = rate.hz;
        let mut meta = Meta::for_this_host(
            clock.source().as_str(),
            facts_hz,
            &ngauge::clock::FrequencyControl::read().description,
        );
        meta.transport = vec![summary.transport.to_string()];
        meta.wait = Some(summary.wait.to_string());
        meta.launcher = world.env.kind.describe().into();
        meta.np = world.size;
        meta.pinning = summary.ranks.iter().map(|r| r.pinned_core).collect();
        meta.sync = Some(options.algorithm.as_str().into());
        doc["meta"] = serde_json::to_value(&meta)?;
    }
    if let Some(path) = &global.output {
        // One synchronization is one measurement point: one record.
        JsonlWriter::create(path)
            .and_then(|mut w| w.write(&doc))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if global.json {
        super::print_json(&doc)?;
    } else {
        print!("{}", render(&summary));
    }
    let cores: Vec<Option<usize>> = summary.ranks.iter().map(|r| r.pinned_core).collect();
    let binding = super::binding_warnings(world, &cores, [(0..world.size).collect()]);
    for w in warnings(&summary).into_iter().chain(binding) {
        eprintln!("ngauge: warning: {w}");
    }
    Ok(())
}

/// What rank 0 prints.
#[derive(Debug, Serialize)]
struct Summary {
    algo: Algorithm,
    np: usize,
    transport: &'static str,
    wait: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    estimator: Option<Estimator>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fitpoints: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exchanges: Option<usize>,
    /// Rank 0's time from the opening to the closing barrier of the sync.
    duration_us: f64,
    check_after_s: Vec<f64>,
    injected_skew: Option<String>,
    /// How the true residuals are known (absent when they are not).
    #[serde(skip_serializing_if = "Option::is_none")]
    truth: Option<&'static str>,
    max_abs_residual_ns: Vec<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_abs_true_residual_ns: Option<Vec<f64>>,
    ranks: Vec<RankReport>,
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

fn seconds_label(s: f64) -> String {
    if s == 0.0 || s >= 1.0 {
        format!("{s}s")
    } else {
        format!("{}ms", s * 1e3)
    }
}

fn render(s: &Summary) -> String {
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
    if let Some(t) = s.truth {
        out += &format!("\ntruth: {t}\n");
    }
    out
}

fn warnings(s: &Summary) -> Vec<String> {
    let mut w = Vec::new();
    let crossed: Vec<String> = s
        .ranks
        .iter()
        .filter(|r| r.crossed_brackets > 0)
        .map(|r| format!("rank {} ({})", r.rank, r.crossed_brackets))
        .collect();
    if !crossed.is_empty() {
        w.push(format!(
            "SKaMPI brackets crossed (the clock jumped or drifted fast during the measurement) on {}; min-RTT measured those offsets instead",
            crossed.join(", ")
        ));
    }
    if let Some(&last) = s.max_abs_residual_ns.last() {
        if last > 10_000.0 && !s.algo.models_drift() {
            w.push(format!(
                "residuals reach {:.1} us after {}: {} models no drift; try --sync hca or jk",
                last / 1e3,
                seconds_label(*s.check_after_s.last().unwrap_or(&0.0)),
                s.algo.as_str()
            ));
        } else if last > 10_000.0 {
            w.push(format!(
                "residuals reach {:.1} us; more --fitpoints spread the fit over a longer time",
                last / 1e3
            ));
        }
    }
    w
}

/// Rank 0's calibrated rate, on every rank (collective).
fn rank0_rate(control: &mut dyn Control, own: TickRate) -> anyhow::Result<TickRate> {
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
fn rescale_skew(skew: Skew, from: TickRate, to: TickRate) -> Skew {
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

/// The data transport for the exchanges: the first `--transport` (tcp by default),
/// with the common transport options (`--wait` etc.).
fn open_data(
    global: &GlobalArgs,
    world: &mut World,
) -> anyhow::Result<(Box<dyn Transport>, WaitMode)> {
    let opts = super::transports::TransportOptions::new(global, world);
    let name = global
        .transport
        .first()
        .copied()
        .unwrap_or(TransportName::Tcp);
    let transport = super::transports::open(name, world, &opts)?;
    Ok((transport, opts.wait))
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
            algorithm: SyncAlgorithm::Jk,
            fitpoints: 7,
            exchanges: Some(3),
            estimator: Some(SyncEstimator::Minrtt),
        };
        let o = flags.options();
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
            .options()
            .exchanges
        };
        assert_eq!(default_for(SyncAlgorithm::Jk), 100);
        assert_eq!(default_for(SyncAlgorithm::Hca), 100);
    }

    #[test]
    fn check_time_labels() {
        assert_eq!(seconds_label(0.0), "0s");
        assert_eq!(seconds_label(0.25), "250ms");
        assert_eq!(seconds_label(5.0), "5s");
    }
}
