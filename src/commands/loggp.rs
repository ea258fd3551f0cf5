//! `ngauge loggp`: PRTT sweep between rank pairs, LogGP parameters per protocol range
//! (Hoefler et al., "LogGP in theory and practice", sec. 2-3), as a table, JSON,
//! Netgauge columns, a parameter file and a plot. Several transports (`-t mpi,tcp`)
//! are measured interleaved, size by size, fitted separately and compared side by
//! side ([`ngauge::report::loggp_compare`]; issue 6, "MPI versus raw").

use super::common::UsageError;
use crate::cli::{GlobalArgs, LoggpArgs};
use anyhow::Context;
use ngauge::clock::Clock;
use ngauge::job::{interleave, TransportName};
use ngauge::launch::binding::BindingWarning;
use ngauge::model::confirm::Verdict;
use ngauge::model::loggp::{assess, assess_with_changes, AssessOptions, ModelWarning};
use ngauge::model::refine::{Change, Plan, RefineOptions};
use ngauge::patterns::loggp::{self as pattern, DelayChoice, PairResult, PairsMode, Params};
use ngauge::patterns::order;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::loggp::{self as export, LoggpWarning, PairAnalysis, StreamRecord};
use ngauge::report::loggp_compare as compare;
use ngauge::report::loggp_doc::{LoggpBody, LoggpDoc, TransportFit};
use ngauge::report::progress::Progress;
use ngauge::report::Meta;
use ngauge::spec::{LoggpSpec, SizeList};
use ngauge::transport::WaitMode;
use std::path::{Path, PathBuf};

/// Everything checked before any rank starts.
#[derive(Debug)]
struct Setup {
    params: Params,
    /// Sweeps over all sizes, pooled per size ([`ngauge::patterns::order`]).
    passes: usize,
    assess: AssessOptions,
    /// How candidate changes are measured again; `None`: reported as detected.
    refine: Option<RefineOptions>,
    /// Why the default sweep was cut short (a transport's message limit), for the
    /// warnings of every pair's document.
    sweep_warning: Option<LoggpWarning>,
}

/// What `ngauge loggp` runs: the spec, and the files only the command line writes.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub spec: LoggpSpec,
    pub netgauge_out: Option<PathBuf>,
    pub params_out: Option<PathBuf>,
    pub plot: Option<PathBuf>,
}

impl LoggpArgs {
    /// The spec and files these flags ask for.
    pub fn request(&self) -> Result<Request, UsageError> {
        let sizes = match &self.sizes {
            None => None,
            Some(text) => Some(
                text.parse::<SizeList>()
                    .map_err(|e| UsageError(format!("--sizes: {e}")))?,
            ),
        };
        Ok(Request {
            spec: LoggpSpec {
                sizes,
                n: self.n,
                reps: self.reps,
                warmup: self.warmup,
                attempts: self.attempts,
                passes: self.passes,
                dg: self.dg,
                pairs: self.pairs,
                detector: self.detector,
                lookahead: self.lookahead,
                pfact: self.pfact,
                floor_us: self.floor_us,
                penalty: self.penalty,
                confirm: !self.no_confirm,
                refine: !self.no_refine,
                samples: self.samples,
            },
            netgauge_out: self.netgauge_out.clone(),
            params_out: self.params_out.clone(),
            plot: self.plot.clone(),
        })
    }
}

fn plan(spec: &LoggpSpec) -> Result<Setup, UsageError> {
    let p = spec.plan().map_err(super::common::spec_usage)?;
    Ok(Setup {
        params: p.params,
        passes: p.passes,
        assess: p.assess,
        refine: p.refine,
        sweep_warning: None,
    })
}

pub fn run(global: &GlobalArgs, args: &LoggpArgs) -> anyhow::Result<()> {
    run_request(global, &args.request()?)
}

pub fn run_request(global: &GlobalArgs, args: &Request) -> anyhow::Result<()> {
    let plan = plan(&args.spec)?;
    // Every file the analysis will write, checked before the sweep.
    let several = global.transport.len() > 1;
    let mut outputs: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, path) in [
        ("--params-out", &args.params_out),
        ("--plot", &args.plot),
        ("--netgauge-out", &args.netgauge_out),
    ] {
        let Some(path) = path else { continue };
        if several {
            for &t in &global.transport {
                outputs.push((flag, per_transport(path, t, true)));
            }
        } else {
            outputs.push((flag, path.clone()));
        }
    }
    let outputs: Vec<(&str, Option<&Path>)> = outputs
        .iter()
        .map(|(f, p)| (*f, Some(p.as_path())))
        .collect();
    super::common::check_outputs(global, &outputs)?;
    super::common::job_spec(global)
        .validate()
        .map_err(super::common::job_error)?;
    super::common::with_world(global, |world| {
        super::common::need_two_ranks(world, "loggp")?;
        let clock = super::common::rank_clock(world)?;
        let largest = *plan.params.sizes.last().unwrap_or(&1) as usize;
        let job = super::common::open_job(global, world, |name, opts| {
            if name == TransportName::Udp && opts.recv_buffer_bytes.is_none() {
                // PRTT(n,0,s) sends n datagrams back to back; a default-sized receive
                // buffer overflows at tens of KiB, and a datagram lost inside a stream
                // stalls it. Ask for room for two streams (the kernel caps it at
                // net.core.rmem_max).
                opts.recv_buffer_bytes = Some((2 * plan.params.n * (largest + 64)).max(1 << 18));
            }
        })?;
        let warnings = job.warnings;
        let mut open = job.transports;
        let limit = open
            .iter()
            .filter_map(|o| o.transport.capabilities().max_message_bytes)
            .min();
        let mut plan = plan;
        if let Some(limit) = limit.filter(|&l| args.spec.sizes.is_none() && largest > l) {
            // The default sweep ends at the largest message every transport carries
            // (UDP: the last 1 KiB step below its datagram limit).
            plan.params.sizes.retain(|&s| s as usize <= limit);
            plan.sweep_warning = Some(LoggpWarning::SweepCut {
                last_bytes: plan.params.sizes.last().copied().unwrap_or(0),
                limit_bytes: limit,
            });
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
            Progress::line(world.rank == 0 && ngauge::launch::local::stderr_is_terminal());
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
            let name = open[i].name;
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
                        let record = StreamRecord {
                            pair,
                            pass,
                            point,
                            transport: several.then_some(name),
                        };
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
        // Issue 13: every candidate change measured again, and located, before it
        // is reported. Every rank takes part; rank 0 plans.
        let mut changes: Vec<Option<Vec<Vec<Change>>>> = vec![None; open.len()];
        if let Some(opts) = plan.refine {
            for (i, o) in open.iter_mut().enumerate() {
                let mut plans: Option<Vec<Plan>> = (world.rank == 0).then(|| {
                    results[i]
                        .iter()
                        .map(|r| plan_for(&plan, r, opts))
                        .collect()
                });
                pattern::verify::verify(
                    &clock,
                    o.transport.as_mut(),
                    world.control.as_mut(),
                    &plan.params,
                    plans.as_deref_mut(),
                )?;
                changes[i] = plans.map(|p| p.into_iter().map(Plan::finish).collect());
            }
        }
        let measured: Vec<Measured> = open
            .iter()
            .zip(results)
            .zip(changes)
            .map(|((o, results), changes)| Measured {
                transport: o.name,
                wait: o.wait,
                results,
                changes,
            })
            .collect();
        // Dropping the transports before anything else lets a UDP peer stop
        // lingering for retransmissions.
        drop(open);
        let pinning = world.gather_pinning()?;
        if world.rank != 0 {
            return Ok(());
        }
        // Issue 20: ranks measured together must not share a core: each pair on its
        // own, or all pairs at once with `--pairs concurrent` (reported with the
        // first pair).
        let (peers, launcher) = (world.peers.clone(), world.env.kind);
        let binding = |client: usize, server: usize| {
            let group: Vec<usize> = match plan.params.pairs {
                PairsMode::InTurn => vec![client, server],
                PairsMode::Concurrent if client == 0 => (0..world.size / 2 * 2).collect(),
                PairsMode::Concurrent => return Vec::new(),
            };
            ngauge::launch::binding::check_groups(&peers, &pinning, launcher, [group])
        };
        let waits: Vec<_> = measured.iter().map(|m| (m.transport, m.wait)).collect();
        let meta = super::common::meta(clock.source(), clock.rate().hz)
            .transports(&waits)
            .job(world, pinning.clone())
            .build();
        report(global, args, &plan, meta, &measured, &warnings, &binding)
    })
}

/// One transport's sweep.
struct Measured {
    transport: TransportName,
    wait: WaitMode,
    /// Every pair's points (rank 0).
    results: Vec<PairResult>,
    /// Every pair's changes after confirmation; `None` without.
    changes: Option<Vec<Vec<Change>>>,
}

/// The confirmation plan of one pair's sweep: the detector's changes as
/// candidates (none when the sweep cannot be assessed; the analysis reports why).
fn plan_for(plan: &Setup, r: &PairResult, opts: RefineOptions) -> Plan {
    let samples: Vec<_> = r.points.iter().map(|p| p.sample()).collect();
    let readings: Vec<_> = r.points.iter().map(pattern::verify::reading).collect();
    let steps = assess(&samples, &plan.assess)
        .map(|a| a.changes)
        .unwrap_or_default();
    Plan::new(&readings, &steps, opts)
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

fn analyse(
    plan: &Setup,
    results: &[PairResult],
    changes: Option<&[Vec<Change>]>,
) -> anyhow::Result<Vec<PairAnalysis>> {
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let samples: Vec<_> = r.points.iter().map(|p| p.sample()).collect();
            let context = || format!("pair {}-{}", r.client, r.server);
            let Some(changes) = changes.and_then(|c| c.get(i)) else {
                let assessment = assess(&samples, &plan.assess).with_context(context)?;
                return Ok(PairAnalysis::unconfirmed(
                    r.client,
                    r.server,
                    r.points.clone(),
                    assessment,
                ));
            };
            // Ranges start at the confirmed changes only.
            let confirmed: Vec<u64> = changes
                .iter()
                .filter(|c| c.verdict == Verdict::Confirmed)
                .map(|c| c.bytes)
                .collect();
            let assessment =
                assess_with_changes(&samples, &plan.assess, &confirmed).with_context(context)?;
            Ok(PairAnalysis {
                client: r.client,
                server: r.server,
                points: r.points.clone(),
                assessment,
                changes: changes.clone(),
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
fn per_transport(path: &Path, transport: TransportName, several: bool) -> PathBuf {
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
    transport: TransportName,
    analyses: Vec<PairAnalysis>,
    /// Measurement warnings per pair.
    extra: Vec<Vec<LoggpWarning>>,
}

fn analyse_transport(
    args: &Request,
    plan: &Setup,
    m: &Measured,
    several: bool,
    binding: &dyn Fn(usize, usize) -> Vec<BindingWarning>,
) -> anyhow::Result<Analysed> {
    let transport = m.transport;
    let analyses =
        analyse(plan, &m.results, m.changes.as_deref()).with_context(|| transport.to_string())?;
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
            export::params_file(first, transport.as_str()).to_json() + "\n",
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
            plan.sweep_warning
                .iter()
                .cloned()
                .chain(LoggpWarning::undecided(&a.changes))
                .chain(LoggpWarning::disturbed(&a.points))
                .chain(
                    binding(a.client, a.server)
                        .into_iter()
                        .map(|w| LoggpWarning::Setup(w.into())),
                )
                .collect()
        })
        .collect();
    Ok(Analysed {
        transport,
        analyses,
        extra,
    })
}

impl Analysed {
    /// The transport's fit in the document.
    fn fit(&self, low_weight: f64, wait: Option<WaitMode>, samples: bool) -> TransportFit {
        let pairs = self
            .analyses
            .iter()
            .zip(&self.extra)
            .map(|(a, extra)| export::pair_doc(a, low_weight, extra, samples))
            .collect();
        TransportFit::new(self.transport, wait, pairs)
    }
}

/// The command line's hint for a warning about a pair, given the options used.
fn hint(w: &LoggpWarning, args: &Request, wait: WaitMode) -> Option<String> {
    match w {
        LoggpWarning::Model(ModelWarning::DelayTooShort { .. }) => match args.spec.dg {
            DelayChoice::OneRtt => Some("try --dg 2rtt".into()),
            DelayChoice::TwoRtt => None,
        },
        LoggpWarning::Disturbed { .. } => {
            let other = match wait {
                WaitMode::Poll => "block",
                WaitMode::Block => "poll",
            };
            Some(format!(
                "try --wait {other}, more --reps, or a quieter host"
            ))
        }
        LoggpWarning::Setup(s) => super::common::setup_hint(s),
        _ => None,
    }
}

fn report(
    global: &GlobalArgs,
    args: &Request,
    plan: &Setup,
    meta: Meta,
    measured: &[Measured],
    warnings: &[ngauge::job::JobWarning],
    binding: &dyn Fn(usize, usize) -> Vec<BindingWarning>,
) -> anyhow::Result<()> {
    let several = measured.len() > 1;
    let analysed = measured
        .iter()
        .map(|m| analyse_transport(args, plan, m, several, binding))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let firsts: Vec<(&str, &PairAnalysis)> = analysed
        .iter()
        .map(|a| (a.transport.as_str(), &a.analyses[0]))
        .collect();
    let comparison = compare::compare(&firsts);
    let low_weight = plan.assess.low_weight;
    if global.json {
        let body = if several {
            LoggpBody::Several {
                transports: analysed
                    .iter()
                    .zip(measured)
                    .map(|(a, m)| a.fit(low_weight, Some(m.wait), args.spec.samples))
                    .collect(),
                comparison,
            }
        } else {
            LoggpBody::One(analysed[0].fit(low_weight, None, args.spec.samples))
        };
        super::common::print_json(&LoggpDoc {
            body,
            detector: plan.assess.detector.kind(),
            n: plan.params.n,
            reps: plan.params.reps,
            passes: plan.passes,
            dg: plan.params.delay,
            meta,
        })?;
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
        super::common::warn(w, super::common::job_hint(w));
    }
    for (a, m) in analysed.iter().zip(measured) {
        let prefix = if several {
            format!("{}: ", a.transport)
        } else {
            String::new()
        };
        for (pa, extra) in a.analyses.iter().zip(&a.extra) {
            let model = pa
                .assessment
                .warnings
                .iter()
                .cloned()
                .map(LoggpWarning::Model);
            for w in model.chain(extra.iter().cloned()) {
                let text = format!("{prefix}pair {}-{}: {w}", pa.client, pa.server);
                super::common::warn(text, hint(&w, args, m.wait));
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
    use ngauge::model::changepoint::LookaheadOptions;
    use ngauge::model::loggp::Detector;
    use ngauge::model::segment::SegmentOptions;

    fn args(extra: &[&str]) -> LoggpArgs {
        let mut argv = vec!["ngauge", "loggp"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Loggp(a) => a,
            _ => unreachable!(),
        }
    }

    fn request(extra: &[&str]) -> Request {
        args(extra).request().unwrap()
    }

    fn spec(extra: &[&str]) -> LoggpSpec {
        request(extra).spec
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = plan(&spec(&[])).unwrap();
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
        let p = plan(&spec(&[
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
        assert_eq!(
            p.params.pairs,
            ngauge::patterns::loggp::PairsMode::Concurrent
        );
        assert_eq!(p.params.sizes.len(), 8);
        assert_eq!(p.assess.n, 4);
        assert!(matches!(p.assess.detector, Detector::Segmented(o) if o.penalty_factor == 3.0));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        assert!(plan(&spec(&["--sizes", "1,2"]))
            .unwrap_err()
            .0
            .contains("at least 3"));
        assert!(plan(&spec(&["--sizes", "0,1,2"])).is_err());
        assert!(plan(&spec(&["--pfact=-1"]))
            .unwrap_err()
            .0
            .contains("--pfact"));
        let mut argv = vec!["ngauge", "loggp", "--n", "1"];
        assert!(Cli::try_parse_from(&argv).is_err());
        argv = vec!["ngauge", "loggp", "--dg", "3rtt"];
        assert!(Cli::try_parse_from(&argv).is_err());
    }

    #[test]
    fn hints_depend_on_the_options_used() {
        let short = LoggpWarning::Model(ModelWarning::DelayTooShort { sizes: vec![1024] });
        assert_eq!(
            hint(&short, &request(&[]), WaitMode::Poll).as_deref(),
            Some("try --dg 2rtt")
        );
        assert_eq!(
            hint(&short, &request(&["--dg", "2rtt"]), WaitMode::Poll),
            None
        );
        let busy = LoggpWarning::Disturbed {
            fraction: 0.5,
            factor: 3.0,
        };
        assert!(hint(&busy, &request(&[]), WaitMode::Poll)
            .unwrap()
            .contains("--wait block"));
        assert!(hint(&busy, &request(&[]), WaitMode::Block)
            .unwrap()
            .contains("--wait poll"));
        // The library's own words name no flag.
        assert!(!short.to_string().contains("--") && !busy.to_string().contains("--"));
    }
}
