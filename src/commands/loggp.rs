//! `ngauge loggp`: PRTT sweep between rank pairs, LogGP parameters per protocol range
//! (Hoefler et al., "LogGP in theory and practice", sec. 2-3), as a table, JSON,
//! Netgauge columns, a parameter file and a plot.

use crate::cli::{DelayArg, DetectorArg, GlobalArgs, LoggpArgs, PairsArg, TransportName};
use crate::UsageError;
use anyhow::Context;
use ngauge::clock::Clock;
use ngauge::model::changepoint::LookaheadOptions;
use ngauge::model::loggp::{assess, AssessOptions, Detector};
use ngauge::model::segment::SegmentOptions;
use ngauge::patterns::loggp::{self as pattern, DelayChoice, PairResult, PairsMode, Params};
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::loggp::{self as export, PairAnalysis};
use ngauge::report::Meta;
use ngauge::sizes::parse_sizes;
use std::io::IsTerminal;

/// Warn when more than this fraction of repetitions was disturbed by the host.
const DISTURBED_WARN: f64 = 0.10;

/// Everything checked before any rank starts.
#[derive(Debug)]
struct Plan {
    params: Params,
    assess: AssessOptions,
}

fn plan(args: &LoggpArgs) -> Result<Plan, UsageError> {
    let sizes = match &args.sizes {
        None => pattern::default_sizes(),
        Some(spec) => {
            let mut sizes = parse_sizes(spec).map_err(|e| UsageError(format!("--sizes: {e}")))?;
            sizes.sort_unstable();
            sizes.dedup();
            if sizes.first() == Some(&0) {
                return Err(UsageError(
                    "--sizes: message sizes must be at least 1 byte".into(),
                ));
            }
            if sizes.len() < 3 {
                return Err(UsageError(format!(
                    "--sizes: LogGP fits need at least 3 distinct sizes, got {}",
                    sizes.len()
                )));
            }
            sizes
        }
    };
    for (flag, v) in [
        ("--pfact", args.pfact),
        ("--floor-us", args.floor_us),
        ("--penalty", args.penalty),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(UsageError(format!(
                "{flag}: must be a non-negative number, got {v}"
            )));
        }
    }
    let detector = match args.detector {
        DetectorArg::Lookahead => Detector::Lookahead(LookaheadOptions {
            lookahead: args.lookahead as usize,
            pfact: args.pfact,
            floor: args.floor_us,
            ..LookaheadOptions::default()
        }),
        DetectorArg::Segmented => Detector::Segmented(SegmentOptions {
            penalty_factor: args.penalty,
            noise_floor: args.floor_us,
            ..SegmentOptions::default()
        }),
        DetectorArg::None => Detector::None,
    };
    Ok(Plan {
        params: Params {
            sizes,
            n: args.n as usize,
            reps: args.reps as usize,
            warmup: args.warmup as usize,
            delay: match args.dg {
                DelayArg::Rtt => DelayChoice::OneRtt,
                DelayArg::TwoRtt => DelayChoice::TwoRtt,
            },
            pairs: match args.pairs {
                PairsArg::InTurn => PairsMode::InTurn,
                PairsArg::Concurrent => PairsMode::Concurrent,
            },
            attempts: args.attempts as usize,
        },
        assess: AssessOptions {
            n: args.n as usize,
            detector,
            noise_floor_us: args.floor_us.max(1e-6),
            ..AssessOptions::default()
        },
    })
}

pub fn run(global: &GlobalArgs, args: &LoggpArgs) -> anyhow::Result<()> {
    let plan = plan(args)?;
    if global.transport.len() != 1 {
        return Err(UsageError(
            "loggp measures one transport at a time: give a single --transport".into(),
        )
        .into());
    }
    let name = global.transport[0];
    super::with_world(global, |world| {
        if world.size < 2 {
            return Err(UsageError("loggp needs at least 2 ranks (--np 2)".into()).into());
        }
        let clock = super::rank_clock(world)?;
        let mut opts = super::transports::TransportOptions::new(global, world);
        let largest = *plan.params.sizes.last().unwrap_or(&1) as usize;
        if name == TransportName::Udp && opts.recv_buffer_bytes.is_none() {
            // PRTT(n,0,s) sends n datagrams back to back; a default-sized receive
            // buffer overflows at tens of KiB, and a datagram lost inside a stream
            // stalls it. Ask for room for two streams (the kernel caps it at
            // net.core.rmem_max).
            opts.recv_buffer_bytes = Some((2 * plan.params.n * (largest + 64)).max(1 << 18));
        }
        let mut transport = super::transports::open(name, world, &opts)?;
        if let Some(limit) = transport.capabilities().max_message_bytes {
            if largest > limit {
                return Err(UsageError(format!(
                    "--sizes: {largest} bytes exceeds the {} message limit of {limit} bytes; \
                     give sizes up to {limit} (e.g. --sizes 1K-{}K:1K)",
                    name.as_str(),
                    limit / 1024
                ))
                .into());
            }
        }
        let mut jsonl = match (&global.output, world.rank) {
            (Some(path), 0) => Some(
                JsonlWriter::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            _ => None,
        };
        let mut stream_error = None;
        // Progress on a terminal only, never into data (rank 0 only).
        let progress = world.rank == 0 && std::io::stderr().is_terminal();
        let total = plan.params.sizes.len() * (world.size / 2);
        let mut done = 0;
        let results = pattern::run(
            &clock,
            transport.as_mut(),
            world.control.as_mut(),
            &plan.params,
            |pair, point| {
                if progress {
                    done += 1;
                    eprint!(
                        "\rloggp: pair {pair}, {} bytes ({done}/{total} points)   ",
                        point.size
                    );
                }
                if let Some(w) = jsonl.as_mut() {
                    let record = serde_json::json!({"pair": pair, "point": point});
                    if let Err(e) = w.write(&record) {
                        stream_error.get_or_insert(e);
                    }
                }
            },
        )?;
        if progress {
            eprint!("\r{:60}\r", "");
        }
        if let Some(e) = stream_error {
            return Err(anyhow::Error::new(e).context("writing --output"));
        }
        let pinned = world.control.gather(
            0,
            &world
                .pinned_core
                .map_or(u64::MAX, |c| c as u64)
                .to_le_bytes(),
        )?;
        if world.rank != 0 {
            return Ok(());
        }
        let mut meta = Meta::for_this_host(
            clock.source().as_str(),
            clock.rate().hz,
            &ngauge::clock::FrequencyControl::read().description,
        );
        meta.transport = vec![name.as_str().to_string()];
        meta.wait = Some(transport.wait_mode().as_str().to_string());
        meta.launcher = world.env.kind.describe().into();
        meta.np = world.size;
        meta.pinning = pinned
            .iter()
            .map(|b| {
                <[u8; 8]>::try_from(b.as_slice())
                    .ok()
                    .map(u64::from_le_bytes)
                    .filter(|&c| c != u64::MAX)
                    .map(|c| c as usize)
            })
            .collect();
        report(global, args, &plan, name.as_str(), meta, &results)
    })
}

fn analyse(plan: &Plan, results: &[PairResult]) -> anyhow::Result<Vec<PairAnalysis>> {
    results
        .iter()
        .map(|r| {
            let samples: Vec<_> = r.points.iter().map(|p| p.sample()).collect();
            let assessment = assess(&samples, &plan.assess)
                .with_context(|| format!("pair {}-{}", r.client, r.server))?;
            Ok(PairAnalysis {
                client: r.client,
                server: r.server,
                points: r.points.clone(),
                assessment,
            })
        })
        .collect()
}

fn report(
    global: &GlobalArgs,
    args: &LoggpArgs,
    plan: &Plan,
    transport: &str,
    meta: Meta,
    results: &[PairResult],
) -> anyhow::Result<()> {
    let analyses = analyse(plan, results)?;
    let first = analyses.first().context("no pair was measured")?;
    let title = format!(
        "LogGP over {transport}: gap per message, rank {} -> {} (n = {})",
        first.client, first.server, plan.params.n
    );
    if let Some(path) = &args.netgauge_out {
        std::fs::write(path, export::netgauge_columns(first))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.params_out {
        std::fs::write(path, export::params_file(first, transport).to_json() + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let svg = export::plot_svg(first, &title).map_err(|e| anyhow::anyhow!("plot: {e}"))?;
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let low_weight = plan.assess.low_weight;
    let extra: Vec<Vec<String>> = analyses
        .iter()
        .map(|a| {
            let fraction = pattern::disturbed_fraction(&a.points);
            if fraction > DISTURBED_WARN {
                vec![format!(
                    "{:.0}% of the timed repetitions took more than {}x their median: other \
                     processes competed for the cores; medians are robust to a few such \
                     repetitions, not to many (try the other --wait mode, more --reps, or a quieter host)",
                    fraction * 100.0,
                    pattern::DISTURBED_FACTOR
                )]
            } else {
                Vec::new()
            }
        })
        .collect();
    if global.json {
        let with_extra = |i: usize, a: &PairAnalysis| -> anyhow::Result<serde_json::Value> {
            let mut doc = export::pair_doc(a, low_weight);
            doc.warnings.extend(extra[i].iter().cloned());
            Ok(serde_json::to_value(doc)?)
        };
        let mut doc = with_extra(0, first)?;
        doc["transport"] = transport.into();
        doc["detector"] = plan.assess.detector.name().into();
        doc["n"] = plan.params.n.into();
        doc["reps"] = plan.params.reps.into();
        doc["dg"] = match plan.params.delay {
            DelayChoice::OneRtt => "rtt",
            DelayChoice::TwoRtt => "2rtt",
        }
        .into();
        if analyses.len() > 1 {
            doc["pairs"] = serde_json::Value::Array(
                analyses
                    .iter()
                    .enumerate()
                    .map(|(i, a)| with_extra(i, a))
                    .collect::<anyhow::Result<Vec<_>>>()?,
            );
        }
        doc["meta"] = serde_json::to_value(&meta)?;
        super::print_json(&doc)?;
    } else {
        for a in &analyses {
            print!("{}", export::table(a));
        }
    }
    for (a, extra) in analyses.iter().zip(&extra) {
        let model = a.assessment.warnings.iter().map(ToString::to_string);
        for w in model.chain(extra.iter().cloned()) {
            eprintln!("ngauge: warning: pair {}-{}: {w}", a.client, a.server);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(extra: &[&str]) -> LoggpArgs {
        let mut argv = vec!["ngauge", "loggp"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Loggp(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = plan(&args(&[])).unwrap();
        assert_eq!(p.params.n, 10);
        assert_eq!(p.params.sizes.len(), 74);
        assert_eq!(p.params.delay, DelayChoice::OneRtt);
        assert_eq!(
            p.assess.detector,
            Detector::Lookahead(LookaheadOptions::default())
        );
    }

    #[test]
    fn options_reach_the_plan() {
        let p = plan(&args(&[
            "--dg",
            "2rtt",
            "--pairs",
            "concurrent",
            "--detector",
            "segmented",
            "--penalty",
            "3",
            "--sizes",
            "1K-8K:1K",
            "--n",
            "4",
        ]))
        .unwrap();
        assert_eq!(p.params.delay, DelayChoice::TwoRtt);
        assert_eq!(p.params.pairs, PairsMode::Concurrent);
        assert_eq!(p.params.sizes.len(), 8);
        assert_eq!(p.assess.n, 4);
        assert!(matches!(p.assess.detector, Detector::Segmented(o) if o.penalty_factor == 3.0));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        assert!(plan(&args(&["--sizes", "1,2"]))
            .unwrap_err()
            .0
            .contains("at least 3"));
        assert!(plan(&args(&["--sizes", "0,1,2"])).is_err());
        assert!(plan(&args(&["--pfact=-1"]))
            .unwrap_err()
            .0
            .contains("--pfact"));
        let mut argv = vec!["ngauge", "loggp", "--n", "1"];
        assert!(Cli::try_parse_from(&argv).is_err());
        argv = vec!["ngauge", "loggp", "--dg", "3rtt"];
        assert!(Cli::try_parse_from(&argv).is_err());
    }
}
