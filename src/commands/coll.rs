//! `ngauge coll`: one collective, timed correctly (`ngauge::patterns::coll`), per
//! size, over every transport of `-t` and every implementation of `--algo`: our
//! schedules over any transport, MPI's own collective (`--algo mpi`) on `-t mpi`.
//! The points are measured interleaved, size by size, so that "our binomial over
//! TCP" and "MPI's broadcast over its BTL" see the same machine; with several, the
//! medians are compared with the last one measured.
//!
//! **Clocks.** As in `ngauge sync`, every rank uses rank 0's tick rate. The window
//! scheme synchronizes the clocks once, before the first point, over the first
//! transport of `-t` that never loses a message; with none (`-t udp`), over a TCP
//! transport opened for that alone (a warning says so).
//!
//! **Open MPI's algorithms.** `--mpi-algo N` sets
//! `OMPI_MCA_coll_tuned_use_dynamic_rules=1` and
//! `OMPI_MCA_coll_tuned_<op>_algorithm=N` in the environment before MPI starts, so
//! the `mpi` rows time that algorithm of Open MPI's tuned component; for a
//! broadcast, `--segment` sets `OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize`
//! too, so our chain and Open MPI's cut the message alike.

use super::collective::{default_algorithm, largest_message, Implementation as Imp};
use super::common::UsageError;
use crate::cli::{CollCmdArgs, GlobalArgs};
use anyhow::Context;
use ngauge::clock::{Clock, SystemClock};
use ngauge::coll::{Algorithm, CollSpec, Collective};
use ngauge::job::{JobSpec, TransportName};
use ngauge::launch::World;
use ngauge::patterns::coll::{self, CollTiming, Implementation, Scheme};
use ngauge::report::coll::{self as doc, CollDoc, CollRecord, CollWarning, Point};
use ngauge::report::coll_predict::{self, select, Predicted, Selection};
use ngauge::report::effort::ClockSync;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::progress::Progress;
use ngauge::report::table::Table;
use ngauge::spec::coll::RootChoice;
use ngauge::spec::{CollCmdSpec, SizeList};
use ngauge::sync::model::ClockModel;
use ngauge::transport::{Transport, WaitMode};

/// The implementations `--algo` names, in order, without repeats.
fn implementations(args: &CollCmdSpec) -> Result<Vec<Imp>, UsageError> {
    let op = args.op;
    let mut out: Vec<Imp> = Vec::new();
    let names: Vec<&str> = if args.algo.is_empty() {
        vec![default_algorithm(op).base_name()]
    } else {
        args.algo.iter().map(|s| s.trim()).collect()
    };
    for name in names {
        let these = match name {
            "mpi" => vec![Imp::Mpi],
            "all" => op.algorithms().into_iter().map(Imp::Ours).collect(),
            _ => vec![Algorithm::parse(op, name)
                .map(Imp::Ours)
                .map_err(|e| UsageError(format!("--algo: {e}")))?],
        };
        for imp in these {
            if !out.contains(&imp) {
                out.push(imp);
            }
        }
    }
    Ok(out)
}

impl CollCmdArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<CollCmdSpec, UsageError> {
        Ok(CollCmdSpec {
            op: self.op,
            algo: self.algo.clone(),
            segment: self.segment,
            root: self.root,
            scheme: self.scheme,
            sizes: self
                .sizes
                .parse::<SizeList>()
                .map_err(|e| UsageError(format!("--sizes: {e}")))?,
            reps: self.reps,
            warmup: self.warmup,
            max_rounds: self.max_rounds,
            no_check: self.no_check,
            mpi_algo: self.mpi_algo,
            per_rank: self.per_rank,
            samples: self.samples,
            predict: self.predict.clone(),
            sync: self.sync.algorithm,
            fitpoints: self.sync.fitpoints,
            exchanges: self.sync.exchanges,
            estimator: self.sync.estimator,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &CollCmdArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?, args.plot.as_deref())
}

/// Runs `args`, drawing the plot to `plot` if given.
pub fn run_spec(
    global: &GlobalArgs,
    args: &CollCmdSpec,
    plot: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    args.validate().map_err(super::common::spec_usage)?;
    let imps = implementations(args)?;
    super::common::check_outputs(global, &[("--plot", plot)])?;
    let sizes: Vec<usize> = if args.op == Collective::Barrier {
        vec![0]
    } else {
        args.sizes.0.iter().map(|&s| s as usize).collect()
    };
    let has_mpi = global.transport.contains(&TransportName::Mpi);
    if imps.contains(&Imp::Mpi) {
        if !has_mpi {
            return Err(UsageError(
                "--algo mpi: MPI's own collectives run on the MPI transport; add -t mpi \
                 (under mpirun, with a build that has the `mpi` feature)"
                    .into(),
            )
            .into());
        }
        if args.op == Collective::Allreduce {
            if let Some(s) = sizes.iter().find(|s| *s % 8 != 0) {
                return Err(UsageError(format!(
                    "--sizes: MPI's allreduce sums 8-byte words, and {s} bytes is not a \
                     multiple of 8"
                ))
                .into());
            }
        }
    }
    if let Some(n) = args.mpi_algo {
        // Read by Open MPI's tuned component when MPI starts (in `with_world`);
        // single-threaded here.
        std::env::set_var("OMPI_MCA_coll_tuned_use_dynamic_rules", "1");
        std::env::set_var(
            format!("OMPI_MCA_coll_tuned_{}_algorithm", args.op),
            n.to_string(),
        );
        if args.op == Collective::Bcast && args.segment > 0 {
            std::env::set_var(
                "OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize",
                args.segment.to_string(),
            );
        }
    }
    let np = global.size.unwrap_or(global.np) as usize;
    if let RootChoice::Rank(r) = args.root {
        if r >= np && global.size.is_some() {
            return Err(
                UsageError(format!("--root {r}: not a rank of a job of {np} ranks")).into(),
            );
        }
    }
    let params = match &args.predict {
        Some(path) => Some(load_params(path)?),
        None => None,
    };
    let candidates = candidates(args, &imps);
    super::common::with_world(global, |world| {
        run_rank(
            global,
            args,
            plot,
            &candidates,
            &sizes,
            params.as_ref(),
            world,
        )
    })
}

/// One implementation with one segment size: what a table's rows measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The implementation.
    pub imp: Imp,
    /// Its segment size, bytes (0: one segment, or an algorithm that does not
    /// segment).
    pub segment: usize,
}

/// `coll`'s candidates: each implementation with `--segment` where it segments.
fn candidates(args: &CollCmdSpec, imps: &[Imp]) -> Vec<Candidate> {
    imps.iter()
        .map(|&imp| Candidate {
            imp,
            segment: match imp {
                Imp::Ours(a) if a.is_segmented() => args.segment,
                // Open MPI's forced broadcast is cut into --segment bytes too.
                Imp::Mpi if args.mpi_algo.is_some() && args.op == Collective::Bcast => args.segment,
                _ => 0,
            },
        })
        .collect()
}

/// The `--predict` file as the simulator's network; a file that is missing or
/// not a parameter file is bad input.
pub fn load_params(path: &std::path::Path) -> anyhow::Result<ngauge::sim::params::Loaded> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("--predict: cannot read {}: {e}", path.display())))?;
    ngauge::sim::params::parse(&text)
        .map_err(|e| UsageError(format!("--predict {}: {e}", path.display())).into())
}

/// The models' times of `spec` timed with `timing`'s scheme: the LogGP simulation
/// of the schedule (the loop scheme: `reps` calls back to back, the root rotating
/// if it does) and Hockney's formula of one call.
fn predict(
    spec: &CollSpec,
    timing: &CollTiming,
    net: &ngauge::sim::Network,
    median_us: Option<f64>,
) -> anyhow::Result<Predicted> {
    use ngauge::sim::collective::{per_call, Calls};
    let reps = u32::try_from(timing.reps).unwrap_or(u32::MAX);
    let calls = match (timing.scheme, timing.rotate_root) {
        (Scheme::Loop, true) => Calls::RotateRoot(reps),
        (Scheme::Loop, false) => Calls::Loop(reps),
        _ => Calls::Single,
    };
    let loggp = per_call(spec, net, calls).context("--predict: simulating")?;
    let hockney = ngauge::sim::hockney::predict_us(spec, net);
    let terms = ngauge::sim::hockney::terms(spec);
    Ok(Predicted::new(
        loggp.0 as f64 * 1e-6,
        hockney,
        terms,
        median_us,
    ))
}

/// One row: a transport and a candidate.
struct Row {
    transport: usize,
    imp: Imp,
    segment: usize,
}

/// What [`measure`] gives back.
pub struct Measured {
    /// Every point, in the order measured (rank 0 only; empty on the others).
    pub records: Vec<CollRecord>,
    /// What threatens the figures (rank 0's are the job's).
    pub warnings: Vec<CollWarning>,
    /// The document's metadata (rank 0 only).
    pub meta: Option<ngauge::report::Meta>,
    /// The window scheme's clock synchronization, per rank (rank 0 only).
    pub sync: Option<ClockSync>,
}

fn run_rank(
    global: &GlobalArgs,
    args: &CollCmdSpec,
    plot: Option<&std::path::Path>,
    candidates: &[Candidate],
    sizes: &[usize],
    params: Option<&ngauge::sim::params::Loaded>,
    world: &mut World,
) -> anyhow::Result<()> {
    let np = world.size;
    let Measured {
        records,
        warnings,
        meta,
        sync,
    } = measure(global, args, candidates, sizes, params, world)?;
    let Some(meta) = meta else {
        return Ok(());
    };
    let comparison = doc::compare(&records);
    let selection = select(&points(&records));
    if let Some(path) = plot {
        let title = format!("{} on {np} ranks, {} scheme", args.op, args.scheme.as_str());
        let svg = doc::plot_svg(&records, &title).map_err(|e| anyhow::anyhow!("plot: {e}"))?;
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if global.json {
        super::common::print_json(&CollDoc {
            meta,
            results: records,
            comparison,
            selection,
            sync,
            warnings: ngauge::report::warning::warned(warnings.iter().cloned()),
        })?;
    } else {
        let mut out = String::new();
        render(&mut out, args, np, &records, comparison.as_ref())?;
        if let Some(s) = &selection {
            render_selection(&mut out, s)?;
        }
        super::common::print_text(&out)?;
    }
    print_warnings(&warnings);
    Ok(())
}

/// The records as the model-based selection sees them.
pub fn points(records: &[CollRecord]) -> Vec<coll_predict::Point> {
    records
        .iter()
        .map(|r| coll_predict::Point {
            transport: r.transport,
            algo: r.algo.clone(),
            segment: r.segment,
            size: r.size,
            median_us: r.runtime_us.map(|t| t.median),
            predicted: r.predicted,
        })
        .collect()
}

/// Prints `coll`'s warnings on stderr, each with the flag to try.
pub fn print_warnings(warnings: &[CollWarning]) {
    for w in warnings {
        let hint = match w {
            CollWarning::Setup(s) => super::common::setup_hint(s),
            CollWarning::FewValid { .. } => {
                Some("raise --max-rounds, or try --scheme barrier on a loaded machine".into())
            }
            CollWarning::SyncedOver { .. } | CollWarning::Params(_) => None,
            CollWarning::PredictTransport { .. } => {
                Some("measure the parameters with loggp -t on the same transport".into())
            }
            CollWarning::SizeSkipped { .. } => {
                Some("use --segment for a broadcast, or a transport without the limit".into())
            }
        };
        super::common::warn(w, hint);
    }
}

/// Measures every candidate at every size over every transport of `-t`,
/// interleaved size by size, on this rank of the job (`coll`'s executor; `simulate
/// --select --measure` measures its candidates with it too). With `params`, every
/// record of our schedules carries the models' times.
pub fn measure(
    global: &GlobalArgs,
    args: &CollCmdSpec,
    candidates: &[Candidate],
    sizes: &[usize],
    params: Option<&ngauge::sim::params::Loaded>,
    world: &mut World,
) -> anyhow::Result<Measured> {
    let np = world.size;
    let rank = world.rank;
    let root = match args.root {
        RootChoice::Rank(r) if r >= np => {
            return Err(UsageError(format!("--root {r}: not a rank of a job of {np} ranks")).into())
        }
        RootChoice::Rank(r) => r,
        RootChoice::Rotate(_) => 0,
    };
    let own = super::common::rank_clock(world)?;
    let rate = super::sync::rank0_rate(world.control.as_mut(), own.rate())?;
    let clock = SystemClock::new(own.source(), rate).with_skew(
        own.skew()
            .map(|s| super::sync::rescale_skew(s, own.rate(), rate)),
    );
    let cores = world.gather_pinning()?;
    let job = super::common::open_job(global, world, |_, _| {})?;
    let mut warnings: Vec<CollWarning> = job
        .warnings
        .into_iter()
        .map(|w| CollWarning::Setup(w.into()))
        .collect();
    if rank == 0 {
        warnings.extend(
            ngauge::launch::binding::check_groups(
                &world.peers,
                &cores,
                world.env.kind,
                [(0..np).collect()],
            )
            .into_iter()
            .map(|w| CollWarning::Setup(w.into())),
        );
    }
    let mut open: Vec<(TransportName, Box<dyn Transport>, WaitMode)> = job
        .transports
        .into_iter()
        .map(|o| (o.name, o.transport, o.wait))
        .collect();

    // The clock model of the window scheme.
    let mut sync_algorithm = None;
    let mut sync = None;
    let model = if args.scheme == Scheme::Window {
        let options = args.sync_options();
        let outcome = match open.iter_mut().find(|(_, t, _)| t.capabilities().reliable) {
            Some((_, t, _)) => {
                ngauge::sync::synchronize(&clock, t.as_mut(), world.control.as_mut(), &options)?
            }
            None => {
                let spec = JobSpec {
                    transports: vec![TransportName::Tcp],
                    ..super::common::job_spec(global)
                };
                let mut tcp = ngauge::job::Job::open(&spec, world, |_, _| {})
                    .map_err(super::common::job_error)?;
                warnings.push(CollWarning::SyncedOver {
                    transport: TransportName::Tcp,
                });
                let t = &mut tcp.transports[0].transport;
                ngauge::sync::synchronize(&clock, t.as_mut(), world.control.as_mut(), &options)?
            }
        };
        sync_algorithm = Some(options.algorithm);
        sync = super::sync::gather_effort(world, options.algorithm, &outcome.effort, rate.hz)?;
        if let Some(s) = &sync {
            warnings.extend(
                s.warnings()
                    .into_iter()
                    .map(|w| CollWarning::Setup(w.into())),
            );
        }
        outcome.model
    } else {
        ClockModel::offset_only(0.0)
    };

    let rows: Vec<Row> = open
        .iter()
        .enumerate()
        .flat_map(|(i, (name, _, _))| {
            candidates
                .iter()
                .filter(move |c| c.imp != Imp::Mpi || *name == TransportName::Mpi)
                .map(move |c| Row {
                    transport: i,
                    imp: c.imp,
                    segment: c.segment,
                })
        })
        .collect();
    let mut writer = match (&global.output, rank) {
        (Some(path), 0) => Some(
            JsonlWriter::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        _ => None,
    };
    let mut progress = Progress::line(rank == 0 && ngauge::launch::local::stderr_is_terminal());
    let total = sizes.len() * rows.len();
    let mut done = 0usize;
    let mut records: Vec<CollRecord> = Vec::new();
    for &size in sizes {
        for row in &rows {
            let (name, t, wait) = &mut open[row.transport];
            let (algorithm, implementation) = match row.imp {
                Imp::Ours(a) => (a, Implementation::Schedule),
                Imp::Mpi => (default_algorithm(args.op), Implementation::Native),
            };
            let segment = row.segment;
            if let Some(max) = t.capabilities().max_message_bytes {
                let largest = largest_message(args.op, size, np, segment);
                if largest > max {
                    if rank == 0 {
                        warnings.push(CollWarning::SizeSkipped {
                            label: format!("{name}/{}", row.imp.name()),
                            size,
                            largest_bytes: largest,
                            max_bytes: max,
                        });
                    }
                    continue;
                }
            }
            let spec = CollSpec {
                algorithm,
                np,
                size_bytes: size,
                segment_bytes: segment,
                root,
            };
            spec.validate().map_err(|e| UsageError(e.to_string()))?;
            let timing = CollTiming {
                spec,
                scheme: args.scheme,
                rotate_root: matches!(args.root, RootChoice::Rotate(_)),
                reps: args.reps as usize,
                warmup: args.warmup as usize,
                check_data: !args.no_check,
                window_wait: *wait,
                max_rounds: args.max_rounds as usize,
            };
            let times = coll::measure_with(
                &clock,
                t.as_mut(),
                world.control.as_mut(),
                &model,
                &timing,
                implementation,
            )
            .with_context(|| format!("{name}/{} at {size} B", row.imp.name()))?;
            done += 1;
            progress.update(&format!(
                "{done}/{total} points ({name}/{} {size} B done)",
                row.imp.name()
            ));
            if rank != 0 {
                continue;
            }
            let mut record = doc::record(
                Point {
                    transport: *name,
                    wait: *wait,
                    op: args.op.to_string(),
                    algo: row.imp.name(),
                    mpi_algo: args.mpi_algo.filter(|_| row.imp == Imp::Mpi),
                    segment,
                    size,
                    np,
                    root: args.root,
                },
                &times,
                rate.hz,
                args.per_rank,
            );
            if args.samples {
                record.samples = Some(doc::CollSamples {
                    runtime_us: times
                        .valid_runtimes_ticks()
                        .into_iter()
                        .map(|t| t / rate.hz * 1e6)
                        .collect(),
                });
            }
            if let (Some(p), Imp::Ours(_)) = (params, row.imp) {
                let median = record.runtime_us.map(|t| t.median);
                record.predicted = Some(predict(&spec, &timing, &p.network, median)?);
                let measured = name.to_string();
                if !p.transport.is_empty()
                    && p.transport != measured
                    && !warnings.iter().any(|w| {
                        matches!(w, CollWarning::PredictTransport { measured: m, .. } if *m == *name)
                    })
                {
                    warnings.push(CollWarning::PredictTransport {
                        params: p.transport.clone(),
                        measured: *name,
                    });
                }
            }
            if args.scheme == Scheme::Window && record.valid < timing.reps {
                warnings.push(CollWarning::FewValid {
                    label: record.label(),
                    size,
                    valid: record.valid,
                    wanted: timing.reps,
                });
            }
            if let Some(w) = writer.as_mut() {
                w.write(&record).context("writing the output file")?;
            }
            records.push(record);
        }
    }
    progress.finish();
    let waits: Vec<(TransportName, WaitMode)> = open.iter().map(|(n, _, w)| (*n, *w)).collect();
    drop(open);
    if rank != 0 {
        return Ok(Measured {
            records,
            warnings,
            meta: None,
            sync: None,
        });
    }
    if let Some(p) = params {
        warnings.extend(p.warnings.iter().cloned().map(CollWarning::Params));
    }
    let mut meta = super::common::meta(clock.source(), rate.hz)
        .transports_named(&waits)
        .job(world, cores);
    if let Some(a) = sync_algorithm {
        meta = meta.sync(a);
    }
    Ok(Measured {
        records,
        warnings,
        meta: Some(meta.build()),
        sync,
    })
}

/// The human tables: one per transport and algorithm, then the comparison.
fn render(
    out: &mut String,
    args: &CollCmdSpec,
    np: usize,
    records: &[CollRecord],
    comparison: Option<&doc::CollComparison>,
) -> std::fmt::Result {
    use std::fmt::Write as _;
    let mut labels: Vec<String> = Vec::new();
    for r in records {
        if !labels.contains(&r.label()) {
            labels.push(r.label());
        }
    }
    for label in &labels {
        let these: Vec<&CollRecord> = records.iter().filter(|r| r.label() == *label).collect();
        let first = these[0];
        writeln!(
            out,
            "{} {label} on {np} ranks, root {}, segment {}, {} scheme, wait {}; one call's \
             run-time after Tukey's filter",
            args.op,
            first.root,
            first.segment,
            first.scheme.as_str(),
            first.wait
        )?;
        let predicted = these.iter().any(|r| r.predicted.is_some());
        let mut header: Vec<&str> = vec![
            "size [B]",
            "valid",
            "invalid",
            "min [us]",
            "median [us]",
            "mean [us]",
            "ci95 of mean [us]",
            "max [us]",
        ];
        if predicted {
            header.extend([
                "LogGP [us]",
                "median / LogGP",
                "Hockney [us]",
                "median / Hockney",
            ]);
        }
        let mut table = Table::new(header);
        for r in these {
            let cells = match r.runtime_us {
                Some(t) => vec![
                    format!("{:.2}", t.min),
                    format!("{:.2}", t.median),
                    format!("{:.2}", t.mean),
                    t.ci95
                        .map_or("-".into(), |[lo, hi]| format!("{lo:.2}..{hi:.2}")),
                    format!("{:.2}", t.max),
                ],
                None => vec!["-".to_string(); 5],
            };
            let mut row = vec![
                r.size.to_string(),
                r.valid.to_string(),
                r.invalid.to_string(),
            ];
            row.extend(cells);
            if predicted {
                let ratio = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
                match r.predicted {
                    Some(p) => row.extend([
                        format!("{:.2}", p.loggp_us),
                        ratio(p.measured_over_loggp),
                        format!("{:.2}", p.hockney_us),
                        ratio(p.measured_over_hockney),
                    ]),
                    None => row.extend(vec!["-".to_string(); 4]),
                }
            }
            table.row(row);
        }
        out.push_str(&table.render());
    }
    if let Some(c) = comparison {
        writeln!(
            out,
            "side by side (measured interleaved, size by size): median run-time, ratio to {}",
            c.baseline
        )?;
        let others: Vec<&String> = c.labels.iter().filter(|l| **l != c.baseline).collect();
        let mut header = vec!["size [B]".to_string()];
        header.extend(c.labels.iter().map(|l| format!("{l} [us]")));
        header.extend(others.iter().map(|l| format!("{l} / {}", c.baseline)));
        let mut table = Table::new(header);
        for row in &c.rows {
            let mut cells = vec![row.size.to_string()];
            cells.extend(c.labels.iter().map(|l| {
                row.median_us
                    .get(l)
                    .map_or("-".into(), |m| format!("{m:.2}"))
            }));
            cells.extend(
                others
                    .iter()
                    .map(|l| row.ratio.get(*l).map_or("-".into(), |r| format!("{r:.3}"))),
            );
            table.row(cells);
        }
        out.push_str(&table.render());
    }
    Ok(())
}

/// The selection table: per size the measured best, each model's choice and the
/// time its choice loses (Nuriyev, tables 6.5 to 6.11).
pub fn render_selection(out: &mut String, s: &Selection) -> std::fmt::Result {
    use std::fmt::Write as _;
    writeln!(
        out,
        "model-based selection against measurement: per size the measured best, each \
         model's choice and its loss (its measured median over the best's - 1)"
    )?;
    let mut table = Table::new([
        "transport",
        "size [B]",
        "best",
        "best [us]",
        "LogGP's choice",
        "loss",
        "Hockney's choice",
        "loss",
        "fitted Hockney's choice",
        "loss",
    ]);
    let pct = |l: f64| format!("{:.1}%", l * 100.0);
    for r in &s.rows {
        table.row(vec![
            r.transport.to_string(),
            r.size.to_string(),
            r.best.label(),
            format!("{:.2}", r.best.median_us),
            r.loggp.label(),
            pct(r.loggp.loss),
            r.hockney.label(),
            pct(r.hockney.loss),
            r.hockney_fitted.as_ref().map_or("-".into(), |c| c.label()),
            r.hockney_fitted
                .as_ref()
                .map_or("-".into(), |c| pct(c.loss)),
        ]);
    }
    out.push_str(&table.render());
    let mut scores = vec![("LogGP", &s.loggp), ("Hockney", &s.hockney)];
    if let Some(f) = &s.hockney_fitted {
        scores.push(("fitted Hockney (in-sample)", f));
    }
    for (name, score) in scores {
        writeln!(
            out,
            "{name}: the best in {} of {} sizes, mean loss {}, largest {}",
            score.best_chosen,
            s.rows.len(),
            pct(score.mean_loss),
            pct(score.max_loss)
        )?;
    }
    if !s.fits.is_empty() {
        writeln!(
            out,
            "algorithm-specific Hockney parameters (Huber regression over the measured sizes, Nuriyev sec. 5.2.2):"
        )?;
        for f in &s.fits {
            writeln!(
                out,
                "  {} {}{}: alpha {:.3} us, beta {:.6} us/B ({} sizes)",
                f.transport,
                f.algo,
                if f.segment > 0 {
                    format!(" (segment {} B)", f.segment)
                } else {
                    String::new()
                },
                f.params.alpha_us,
                f.params.beta_us_per_byte,
                f.sizes
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_message_of_each_op() {
        assert_eq!(largest_message(Collective::Gather, 8, 4, 0), 32);
        assert_eq!(largest_message(Collective::Bcast, 8192, 4, 1024), 1024);
        assert_eq!(largest_message(Collective::Bcast, 100, 4, 1024), 100);
        assert_eq!(largest_message(Collective::Barrier, 0, 4, 0), 1);
        assert_eq!(largest_message(Collective::Alltoall, 64, 4, 0), 64);
    }
}
