//! `ngauge late`: late arrivals and the delay overlap benefit
//! ([`ngauge::patterns::late`]).

use super::collective::{self, Implementation};
use super::common::UsageError;
use crate::cli::{GlobalArgs, LateArgs};
use anyhow::Context;
use ngauge::coll::{Interrupts, Uninterrupted};
use ngauge::patterns::late::{self, DelayedRanks, LateSpec};
use ngauge::patterns::noise::Injector;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::late::{self as doc, Injected, LateDoc, LateWarning};
use ngauge::report::progress::Progress;
use ngauge::sizes::parse_sizes;

pub fn run(global: &GlobalArgs, args: &LateArgs) -> anyhow::Result<()> {
    let sizes: Vec<usize> = parse_sizes(&args.sizes)
        .map_err(|e| UsageError(format!("--sizes: {e}")))?
        .into_iter()
        .map(|s| s as usize)
        .collect();
    let transport = collective::transport_name(global, "late")?;
    let imp = collective::implementation(args.coll.op, args.coll.algo.as_deref(), transport)?;
    collective::check_sizes(args.coll.op, imp, &sizes)?;
    let delayed = match (&args.delayed_ranks, args.seed) {
        (DelayedRanks::Random { .. }, Some(seed)) => DelayedRanks::Random { seed },
        (_, Some(_)) => {
            return Err(UsageError("--seed applies to --delayed-ranks random".into()).into())
        }
        (d, None) => d.clone(),
    };
    if let Some(inject) = &args.inject {
        if imp == Implementation::Mpi {
            return Err(UsageError(
                "--inject: noise reaches inside ngauge's own schedules only; MPI's \
                 collectives are opaque (use --algo with one of ours)"
                    .into(),
            )
            .into());
        }
        inject.validate().map_err(|e| UsageError(e.to_string()))?;
    }
    super::common::with_world(global, |world| {
        let np = world.size;
        let delayed = delayed
            .resolve(np)
            .map_err(|e| UsageError(format!("--delayed-ranks: {e}")))?;
        if args.inject.is_some() && args.inject_rank >= np {
            return Err(UsageError(format!(
                "--inject-rank {}: not a rank of a job of {np} ranks",
                args.inject_rank
            ))
            .into());
        }
        let (specs, largest) = collective::size_specs(&args.coll, imp, np, &sizes)?;
        let mut setup =
            collective::setup(global, args.coll.sync.options(), transport, largest, world)?;
        let rank = world.rank;
        let mut writer = match (&global.output, rank) {
            (Some(path), 0) => Some(
                JsonlWriter::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            _ => None,
        };
        let mut progress = Progress::line(rank == 0 && ngauge::launch::local::stderr_is_terminal());
        let spec = LateSpec {
            delays_ns: args.delay.iter().map(|d| d.0).collect(),
            delayed: delayed.clone(),
            mode: ngauge::patterns::late::CallMode::Blocking,
            reps: args.coll.reps as usize,
            warmup: args.coll.warmup as usize,
            check_data: !args.coll.no_check,
            window_wait: setup.wait,
            max_rounds: args.coll.max_rounds as usize,
        };
        let mut rows = Vec::new();
        let mut warnings: Vec<LateWarning> = Vec::new();
        let mut label = String::new();
        let total = specs.len() * args.mode.len();
        for (i, coll) in specs.iter().enumerate() {
            for (j, &mode) in args.mode.iter().enumerate() {
                let clock = setup.clock;
                let model = setup.model;
                let mut op = setup.data.op(imp, *coll)?;
                label = op.label();
                let spec = LateSpec {
                    mode,
                    ..spec.clone()
                };
                let mut none = Uninterrupted;
                let mut injector = match &args.inject {
                    Some(inject) if rank == args.inject_rank => Some(
                        Injector::new(&clock, *inject).map_err(|e| UsageError(e.to_string()))?,
                    ),
                    _ => None,
                };
                let interrupts: &mut dyn Interrupts = match injector.as_mut() {
                    Some(i) => i,
                    None => &mut none,
                };
                let times = late::measure(
                    &clock,
                    op.as_mut(),
                    world.control.as_mut(),
                    &model,
                    &spec,
                    interrupts,
                )?;
                op.release()?;
                progress.update(&format!(
                    "late: {}/{total} points ({} B, {mode})",
                    i * args.mode.len() + j + 1,
                    coll.size_bytes
                ));
                if rank == 0 {
                    let these = doc::rows(coll.size_bytes, mode, &times);
                    if let Some(w) = writer.as_mut() {
                        for row in &these {
                            w.write(row).context("writing the output file")?;
                        }
                    }
                    warnings.extend(doc::warnings(coll.size_bytes, mode, &times, spec.reps));
                    rows.extend(these);
                }
            }
        }
        progress.finish();
        if rank != 0 {
            return Ok(());
        }
        let mut all: Vec<LateWarning> = setup
            .job_warnings
            .iter()
            .cloned()
            .map(|w| LateWarning::Setup(w.into()))
            .chain(
                setup
                    .binding_warnings
                    .iter()
                    .cloned()
                    .map(|w| LateWarning::Setup(w.into())),
            )
            .collect();
        let sync = setup
            .sync_report
            .take()
            .ok_or_else(|| anyhow::anyhow!("internal error: rank 0 lacks the sync's effort"))?;
        all.extend(
            sync.warnings()
                .into_iter()
                .map(|w| LateWarning::Setup(w.into())),
        );
        all.extend(warnings);
        let document = LateDoc {
            op: args.coll.op.to_string(),
            algo: imp.name(),
            implementation: label,
            transport: setup.transport,
            wait: setup.wait,
            np,
            inject: args.inject.map(|i| Injected {
                rank: args.inject_rank,
                period_us: i.period_ns / 1e3,
                duration_us: i.duration_ns / 1e3,
            }),
            results: rows,
            sync,
            warnings: ngauge::report::warning::warned(all.iter().cloned()),
            meta: collective::meta(&setup, world),
        };
        if let Some(path) = &args.plot {
            let title = format!(
                "delay overlap benefit: {}, {} ranks, delayed {:?}",
                document.implementation, np, delayed
            );
            let svg = doc::plot_benefit_svg(&doc::curves(&document.results), &title)
                .map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
            std::fs::write(path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if global.json {
            super::common::print_json(&document)?;
        } else {
            super::common::print_text(&doc::render(&document))?;
        }
        for w in &all {
            let hint = match w {
                LateWarning::Setup(s) => super::common::setup_hint(s),
                LateWarning::FewValidCalls { .. } => {
                    Some("raise --max-rounds, or --wait block when ranks share cores".into())
                }
                LateWarning::Undecided { .. } => Some(
                    "the ranks did not start d apart: run on an idle host, with a core per \
                     rank, or raise --max-rounds"
                        .into(),
                ),
            };
            super::common::warn(w, hint);
        }
        Ok(())
    })
}
