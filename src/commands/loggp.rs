//! `ngauge loggp`: PRTT sweep between rank pairs, LogGP parameters per protocol range
//! (Hoefler et al., "LogGP in theory and practice", sec. 2-3), as a table, JSON,
//! Netgauge columns, a parameter file and a plot. Several transports (`-t mpi,tcp`)
//! are measured interleaved, size by size, fitted separately and compared side by
//! side ([`ngauge::report::loggp_compare`]; issue 6, "MPI versus raw").

use super::interleave;
use crate::cli::{DelayArg, DetectorArg, GlobalArgs, LoggpArgs, PairsArg, TransportName};
use crate::UsageError;
use anyhow::Context;
use ngauge::clock::Clock;
use ngauge::model::changepoint::LookaheadOptions;
use ngauge::model::loggp::{assess, AssessOptions, Detector};
use ngauge::model::segment::SegmentOptions;
use ngauge::patterns::loggp::{self as pattern, DelayChoice, PairResult, PairsMode, Params};
use ngauge::patterns::order;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::loggp::{self as export, PairAnalysis};
use ngauge::report::loggp_compare as compare;
use ngauge::report::progress::Progress;
use ngauge::report::Meta;
use ngauge::sizes::parse_sizes;
use std::path::{Path, PathBuf};

/// Warn when more than this fraction of repetitions was disturbed by the host.
const DISTURBED_WARN: f64 = 0.10;

/// Everything checked before any rank starts.
#[derive(Debug)]
struct Plan {
    params: Params,
    /// Sweeps over all sizes, pooled per size ([`ngauge::patterns::order`]).
    passes: usize,
    assess: AssessOptions,
    /// Why the default sweep was cut short (a transport's message limit), for the
    /// warnings of every pair's document.
    sweep_warning: Option<String>,
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
        DetectorArg::Lookahead => Detector::Lookahead(
            LookaheadOptions {
                lookahead: args.lookahead as usize,
                pfact: args.pfact,
                floor: args.floor_us,
                ..LookaheadOptions::default()
            },
            SegmentOptions {
                penalty_factor: args.penalty,
                ..SegmentOptions::default()
            },
        ),
        DetectorArg::Paper => Detector::Paper(LookaheadOptions {
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
        passes: args.passes as usize,
        sweep_warning: None,
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
    interleave::check_distinct(&global.transport)?;
    super::with_world(global, |world| {
        if world.size < 2 {
            return Err(UsageError("loggp needs at least 2 ranks (--np 2)".into()).into());
        }
        let clock = super::rank_clock(world)?;
        let largest = *plan.params.sizes.last().unwrap_or(&1) as usize;
        let mut warnings = Vec::new();
        let mut open = interleave::open_all(global, world, &mut warnings, |name, opts| {
            if name == TransportName::Udp && opts.recv_buffer_bytes.is_none() {
                // PRTT(n,0,s) sends n datagrams back to back; a default-sized receive
                // buffer overflows at tens of KiB, and a datagram lost inside a stream
                // stalls it. Ask for room for two streams (the kernel caps it at
                // net.core.rmem_max).
                opts.recv_buffer_bytes = Some((2 * plan.params.n * (largest + 64)).max(1 << 18));
            }
        })?;
        let limit = open
            .iter()
            .filter_map(|o| o.transport.capabilities().max_message_bytes)
            .min();
        let mut plan = plan;
        if let Some(limit) = limit.filter(|&l| args.sizes.is_none() && largest > l) {
            // The default sweep ends at the largest message every transport carries
            // (UDP: the last 1 KiB step below its datagram limit).
            plan.params.sizes.retain(|&s| s as usize <= limit);
            plan.sweep_warning = Some(format!(
                "the default sweep ends at {} bytes, the largest of its sizes within the \
                 {limit}-byte message limit",
                plan.params.sizes.last().copied().unwrap_or(0)
            ));
        }
        let largest = *plan.params.sizes.last().unwrap_or(&1) as usize;
        for o in &open {
            if let Some(limit) = o.transport.capabilities().max_message_bytes {
                if largest > limit {
                    return Err(UsageError(format!(
                        "--sizes: {largest} bytes exceeds the {} message limit of {limit} bytes; \
                         give sizes up to {limit} (e.g. --sizes 1K-{}K:1K)",
                        o.name.as_str(),
                        limit / 1024
                    ))
                    .into());
                }
            }
        }
        let several = open.len() > 1;
        let mut jsonl = match (&global.output, world.rank) {
            (Some(path), 0) => Some(
                JsonlWriter::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            _ => None,
        };
        let mut stream_error = None;
        // Progress on a terminal only, never into data (rank 0 only).
        let mut progress =
            Progress::new(world.rank == 0 && ngauge::launch::local::stderr_is_terminal());
        // Every pass visits the sizes in its own order (one pass: ascending). One
        // transport: one sweep per pass. Several: interleaved, size by size,
        // alternating transports (see `interleave`).
        let chunks: Vec<(usize, Vec<u64>, usize)> = order::passes(&plan.params.sizes, plan.passes)
            .into_iter()
            .enumerate()
            .flat_map(|(pass, sizes)| -> Vec<(usize, Vec<u64>, usize)> {
                if several {
                    let all = vec![sizes.clone(); open.len()];
                    interleave::schedule(&sizes, &all)
                        .into_iter()
                        .map(|(s, i)| (pass, vec![s], i))
                        .collect()
                } else {
                    vec![(pass, sizes, 0)]
                }
            })
            .collect();
        let total = chunks.iter().map(|c| c.1.len()).sum::<usize>() * (world.size / 2);
        let mut done = 0;
        let mut results: Vec<Vec<PairResult>> = vec![Vec::new(); open.len()];
        for (pass, sizes, i) in chunks {
            let params = Params {
                sizes,
                ..plan.params.clone()
            };
            let name = open[i].name.as_str();
            let got = pattern::run(
                &clock,
                open[i].transport.as_mut(),
                world.control.as_mut(),
                &params,
                |pair, point| {
                    done += 1;
                    progress.update(&format!(
                        "loggp: {name}, pair {pair}, {} bytes, pass {} ({done}/{total} points)",
                        point.size,
                        pass + 1
                    ));
                    if let Some(w) = jsonl.as_mut() {
                        let mut record =
                            serde_json::json!({"pair": pair, "pass": pass, "point": point});
                        if several {
                            record["transport"] = name.into();
                        }
                        if let Err(e) = w.write(&record) {
                            stream_error.get_or_insert(e);
                        }
                    }
                },
            )?;
            merge(&mut results[i], got);
        }
        progress.finish();
        let results = results.into_iter().map(pool_passes).collect::<Vec<_>>();
        if let Some(e) = stream_error {
            return Err(anyhow::Error::new(e).context("writing --output"));
        }
        let measured: Vec<Measured> = open
            .iter()
            .zip(results)
            .map(|(o, results)| Measured {
                transport: o.name.as_str(),
                wait: o.wait,
                results,
            })
            .collect();
        // Dropping the transports before anything else lets a UDP peer stop
        // lingering for retransmissions.
        drop(open);
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
        meta.transport = measured.iter().map(|m| m.transport.to_string()).collect();
        meta.wait = Some(if several {
            measured
                .iter()
                .map(|m| format!("{}={}", m.transport, m.wait))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            measured[0].wait.to_string()
        });
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
        let pairs = world.size / 2;
        warnings.extend(super::binding_warnings(
            world,
            &meta.pinning,
            match args.pairs {
                PairsArg::InTurn => (0..pairs).map(|p| vec![2 * p, 2 * p + 1]).collect(),
                PairsArg::Concurrent => vec![(0..2 * pairs).collect()],
            },
        ));
        report(global, args, &plan, meta, &measured, &warnings)
    })
}

/// One transport's sweep.
struct Measured {
    transport: &'static str,
    wait: &'static str,
    /// Every pair's points (rank 0).
    results: Vec<PairResult>,
}

/// Appends the points of a sweep over more sizes to the pairs measured so far.
fn merge(into: &mut Vec<PairResult>, got: Vec<PairResult>) {
    if into.is_empty() {
        *into = got;
        return;
    }
    for (pair, more) in into.iter_mut().zip(got) {
        pair.points.extend(more.points);
    }
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

/// Pools every pair's passes over each size into one point per size, ascending.
fn pool_passes(pairs: Vec<PairResult>) -> Vec<PairResult> {
    pairs
        .into_iter()
        .map(|mut pair| {
            pair.points.sort_by_key(|p| p.size);
            let pooled = pair
                .points
                .chunk_by(|a, b| a.size == b.size)
                .map(|same| pattern::pool(same).expect("points of one size and n"))
                .collect();
            pair.points = pooled;
            pair
        })
        .collect()
}

/// `gap.svg` becomes `gap.mpi.svg` when several transports write files.
fn per_transport(path: &Path, transport: &str, several: bool) -> PathBuf {
    if !several {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{transport}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{transport}"),
    };
    path.with_file_name(name)
}

/// One transport's analyses, output files and JSON body (its first pair, with every
/// pair under `pairs` when there are several).
struct Analysed {
    transport: &'static str,
    analyses: Vec<PairAnalysis>,
    /// Host warnings per pair.
    extra: Vec<Vec<String>>,
}

fn analyse_transport(
    args: &LoggpArgs,
    plan: &Plan,
    m: &Measured,
    several: bool,
) -> anyhow::Result<Analysed> {
    let transport = m.transport;
    let analyses = analyse(plan, &m.results).with_context(|| transport.to_string())?;
    let first = analyses.first().context("no pair was measured")?;
    let title = format!(
        "LogGP over {transport}: gap per message, rank {} -> {} (n = {})",
        first.client, first.server, plan.params.n
    );
    if let Some(path) = &args.netgauge_out {
        let path = per_transport(path, transport, several);
        std::fs::write(&path, export::netgauge_columns(first))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.params_out {
        let path = per_transport(path, transport, several);
        std::fs::write(
            &path,
            export::params_file(first, transport).to_json() + "\n",
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let path = per_transport(path, transport, several);
        let svg = export::plot_svg(first, &title).map_err(|e| anyhow::anyhow!("plot: {e}"))?;
        std::fs::write(&path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let extra = analyses
        .iter()
        .map(|a| {
            let fraction = pattern::disturbed_fraction(&a.points);
            let mut extra: Vec<String> = plan.sweep_warning.iter().cloned().collect();
            if fraction > DISTURBED_WARN {
                extra.push(format!(
                    "{:.0}% of the timed repetitions took more than {}x their median: other \
                     processes competed for the cores; medians are robust to a few such \
                     repetitions, not to many (try the other --wait mode, more --reps, or a quieter host)",
                    fraction * 100.0,
                    pattern::DISTURBED_FACTOR
                ));
            }
            extra
        })
        .collect();
    Ok(Analysed {
        transport,
        analyses,
        extra,
    })
}

impl Analysed {
    /// The JSON body: the first pair's document, every pair under `pairs` when there
    /// are several.
    fn doc(&self, low_weight: f64) -> anyhow::Result<serde_json::Value> {
        let with_extra = |i: usize| -> anyhow::Result<serde_json::Value> {
            let mut doc = export::pair_doc(&self.analyses[i], low_weight);
            doc.warnings.extend(self.extra[i].iter().cloned());
            Ok(serde_json::to_value(doc)?)
        };
        let mut doc = with_extra(0)?;
        if self.analyses.len() > 1 {
            doc["pairs"] = serde_json::Value::Array(
                (0..self.analyses.len())
                    .map(with_extra)
                    .collect::<anyhow::Result<Vec<_>>>()?,
            );
        }
        Ok(doc)
    }
}

fn report(
    global: &GlobalArgs,
    args: &LoggpArgs,
    plan: &Plan,
    meta: Meta,
    measured: &[Measured],
    warnings: &[String],
) -> anyhow::Result<()> {
    let several = measured.len() > 1;
    let analysed = measured
        .iter()
        .map(|m| analyse_transport(args, plan, m, several))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let firsts: Vec<(&str, &PairAnalysis)> = analysed
        .iter()
        .map(|a| (a.transport, &a.analyses[0]))
        .collect();
    let comparison = compare::compare(&firsts);
    let low_weight = plan.assess.low_weight;
    if global.json {
        let mut doc = if several {
            let transports = analysed
                .iter()
                .zip(measured)
                .map(|(a, m)| {
                    let mut doc = a.doc(low_weight)?;
                    doc["transport"] = a.transport.into();
                    doc["wait"] = m.wait.into();
                    Ok(doc)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut doc = serde_json::json!({ "transports": transports });
            doc["comparison"] = serde_json::to_value(&comparison)?;
            doc
        } else {
            let mut doc = analysed[0].doc(low_weight)?;
            doc["transport"] = analysed[0].transport.into();
            doc
        };
        doc["detector"] = plan.assess.detector.name().into();
        doc["n"] = plan.params.n.into();
        doc["reps"] = plan.params.reps.into();
        doc["passes"] = plan.passes.into();
        doc["dg"] = match plan.params.delay {
            DelayChoice::OneRtt => "rtt",
            DelayChoice::TwoRtt => "2rtt",
        }
        .into();
        doc["meta"] = serde_json::to_value(&meta)?;
        super::print_json(&doc)?;
    } else {
        for (a, m) in analysed.iter().zip(measured) {
            if several {
                println!("LogGP over {} (wait {})", a.transport, m.wait);
            }
            for pa in &a.analyses {
                print!("{}", export::table(pa));
            }
        }
        if let Some(c) = &comparison {
            print!("{}", compare::table(c));
        }
    }
    for w in warnings {
        eprintln!("ngauge: warning: {w}");
    }
    for a in &analysed {
        let prefix = if several {
            format!("{}: ", a.transport)
        } else {
            String::new()
        };
        for (pa, extra) in a.analyses.iter().zip(&a.extra) {
            let model = pa.assessment.warnings.iter().map(ToString::to_string);
            for w in model.chain(extra.iter().cloned()) {
                eprintln!(
                    "ngauge: warning: {prefix}pair {}-{}: {w}",
                    pa.client, pa.server
                );
            }
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
            Detector::Lookahead(LookaheadOptions::default(), SegmentOptions::default())
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
