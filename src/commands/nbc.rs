//! `ngauge nbc`: nonblocking-collective overhead and overlap
//! ([`ngauge::patterns::nbc`]).

use super::collective;
use super::common::UsageError;
use crate::cli::{GlobalArgs, NbcArgs};
use anyhow::Context;
use ngauge::patterns::nbc::{self, Arithmetic, NbcSpec};
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::nbc::{self as doc, NbcDoc, NbcRow, NbcWarning};
use ngauge::report::progress::Progress;
use ngauge::sizes::parse_sizes;

pub fn run(global: &GlobalArgs, args: &NbcArgs) -> anyhow::Result<()> {
    let sizes: Vec<usize> = parse_sizes(&args.sizes)
        .map_err(|e| UsageError(format!("--sizes: {e}")))?
        .into_iter()
        .map(|s| s as usize)
        .collect();
    let transport = collective::transport_name(global, "nbc")?;
    let imp = collective::implementation(args.coll.op, args.coll.algo.as_deref(), transport)?;
    collective::check_sizes(args.coll.op, imp, &sizes)?;
    super::common::with_world(global, |world| {
        let np = world.size;
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
        let mut work = Arithmetic::default();
        let mut rows: Vec<NbcRow> = Vec::new();
        let mut warnings: Vec<NbcWarning> = Vec::new();
        let mut label = String::new();
        let points: Vec<_> = specs
            .iter()
            .flat_map(|s| {
                args.compute.iter().flat_map(move |&c| {
                    args.test_every
                        .iter()
                        .map(move |&t| (*s, c, t.0.map(|n| n.0)))
                })
            })
            .collect();
        let total = points.len();
        for (k, (coll, compute, test_every_ns)) in points.into_iter().enumerate() {
            let clock = setup.clock;
            let model = setup.model;
            let mut op = setup.data.op(imp, coll)?;
            label = op.label();
            let spec = NbcSpec {
                compute,
                test_every_ns,
                reps: args.coll.reps as usize,
                warmup: args.coll.warmup as usize,
                check_data: !args.coll.no_check,
                window_wait: setup.wait,
                max_rounds: args.coll.max_rounds as usize,
            };
            let times = nbc::measure(
                &clock,
                op.as_mut(),
                world.control.as_mut(),
                &model,
                &spec,
                &mut work,
            )?;
            op.release()?;
            progress.update(&format!(
                "nbc: {}/{total} points ({} B, {compute})",
                k + 1,
                coll.size_bytes
            ));
            if rank == 0 {
                let op_name = args.coll.op.to_string();
                if let Some(row) = NbcRow::new(
                    &op_name,
                    &imp.name(),
                    coll.size_bytes,
                    compute,
                    test_every_ns,
                    &times,
                ) {
                    if let Some(w) = writer.as_mut() {
                        w.write(&row).context("writing the output file")?;
                    }
                    warnings.extend(doc::warnings(&row, &times, spec.reps));
                    rows.push(row);
                }
            }
        }
        progress.finish();
        if rank != 0 {
            return Ok(());
        }
        let mut all: Vec<NbcWarning> = setup
            .job_warnings
            .iter()
            .cloned()
            .map(|w| NbcWarning::Setup(w.into()))
            .chain(
                setup
                    .binding_warnings
                    .iter()
                    .cloned()
                    .map(|w| NbcWarning::Setup(w.into())),
            )
            .collect();
        let sync = setup
            .sync_report
            .take()
            .ok_or_else(|| anyhow::anyhow!("internal error: rank 0 lacks the sync's effort"))?;
        all.extend(
            sync.warnings()
                .into_iter()
                .map(|w| NbcWarning::Setup(w.into())),
        );
        all.extend(warnings);
        let document = NbcDoc {
            op: args.coll.op.to_string(),
            algo: imp.name(),
            implementation: label,
            transport: setup.transport,
            wait: setup.wait,
            np,
            results: rows,
            sync,
            warnings: ngauge::report::warning::warned(all.iter().cloned()),
            meta: collective::meta(&setup, world),
        };
        if global.json {
            super::common::print_json(&document)?;
        } else {
            super::common::print_text(&doc::render(&document))?;
        }
        for w in &all {
            let hint = match w {
                NbcWarning::Setup(s) => super::common::setup_hint(s),
                NbcWarning::FewValidCalls { .. } | NbcWarning::Undecided { .. } => {
                    Some("raise --max-rounds, or --wait block when ranks share cores".into())
                }
                NbcWarning::ComputeOverran { .. } => {
                    Some("give every rank a core of its own (fewer --np)".into())
                }
            };
            super::common::warn(w, hint);
        }
        Ok(())
    })
}
