//! `ngauge noise`: the selfish-detour benchmark on every rank's core
//! ([`ngauge::patterns::noise`]).

use super::common::UsageError;
use crate::cli::{GlobalArgs, NoiseArgs};
use anyhow::Context;
use ngauge::clock::Clock;
use ngauge::coll::{Interrupts, Uninterrupted};
use ngauge::patterns::noise::{self, Injector, SelfishSpec};
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::noise::{self as doc, CoreRow, InjectedNoise, NoiseDoc, NoiseWarning};

pub fn run(global: &GlobalArgs, args: &NoiseArgs) -> anyhow::Result<()> {
    let spec = SelfishSpec {
        duration_ns: args.duration.0,
        threshold: args.threshold,
        max_detours: args.max_detours as usize,
        ..SelfishSpec::default()
    };
    spec.validate().map_err(|e| UsageError(e.to_string()))?;
    if let Some(inject) = &args.inject {
        inject.validate().map_err(|e| UsageError(e.to_string()))?;
    }
    super::common::with_world(global, |world| {
        let clock = super::common::rank_clock(world)?;
        let cores = world.gather_pinning()?;
        let mut none = Uninterrupted;
        let mut injector = match &args.inject {
            Some(i) => Some(Injector::new(&clock, *i)?),
            None => None,
        };
        let interrupts: &mut dyn Interrupts = match injector.as_mut() {
            Some(i) => i,
            None => &mut none,
        };
        let results = noise::measure(
            &clock,
            world.control.as_mut(),
            &spec,
            world.pinned_core,
            interrupts,
        )?;
        if world.rank != 0 {
            return Ok(());
        }
        let rows: Vec<CoreRow> = results.iter().map(CoreRow::new).collect();
        if let Some(path) = &global.output {
            let mut w = JsonlWriter::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            for row in &rows {
                w.write(row).context("writing the output file")?;
            }
        }
        let mut warnings = doc::warnings(&rows);
        warnings.extend(
            ngauge::launch::binding::check_groups(
                &world.peers,
                &cores,
                world.env.kind,
                [(0..world.size).collect()],
            )
            .into_iter()
            .map(NoiseWarning::Binding),
        );
        let document = NoiseDoc {
            spec,
            inject: args.inject.map(|i| InjectedNoise {
                period_us: i.period_ns / 1e3,
                duration_us: i.duration_ns / 1e3,
            }),
            cores: rows,
            warnings: ngauge::report::warning::warned(warnings.iter().cloned()),
            meta: super::common::meta(clock.source(), clock.rate().hz)
                .job(world, cores)
                .build(),
        };
        if let Some(path) = &args.plot {
            let title = format!(
                "selfish detours, {} ranks, threshold {} x the fastest loop",
                document.cores.len(),
                spec.threshold
            );
            let svg = doc::plot_detours_svg(&doc::series(&document.cores), &title)
                .map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
            std::fs::write(path, svg)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if global.json {
            super::common::print_json(&document)?;
        } else {
            super::common::print_text(&doc::render(&document))?;
        }
        for w in &warnings {
            let hint = match w {
                NoiseWarning::ShortMeasurement { .. } => {
                    Some("measure longer: --duration 5s".into())
                }
                NoiseWarning::DetoursDropped { .. } => {
                    Some("raise --max-detours, or --threshold to count fewer".into())
                }
                NoiseWarning::Binding(b) => Some(b.hint().into()),
            };
            super::common::warn(w, hint);
        }
        Ok(())
    })
}
