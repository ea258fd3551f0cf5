//! `noise`: the selfish-detour loop on every rank's core at once
//! ([`crate::patterns::noise`]), optionally under injected noise.

use super::{binding_warnings, rank_clock, Context, ExperimentError};
use crate::clock::Clock;
use crate::coll::{Interrupts, Uninterrupted};
use crate::launch::World;
use crate::patterns::noise::{self, Injector};
use crate::report::noise::{warnings, CoreRow, InjectedNoise, NoiseDoc, NoiseWarning};
use crate::report::warning::warned;
use crate::spec::NoiseSpec;

/// Every rank spins for the spec's duration; rank 0 gathers every core's
/// detours into the document, and the context gets one record per core.
/// Collective: every rank calls it.
///
/// # Errors
/// A spec out of range, a malformed test clock, a lost peer, a record that cannot
/// be kept.
pub fn run(
    world: &mut World,
    spec: &NoiseSpec,
    ctx: &mut Context,
) -> Result<Option<NoiseDoc>, ExperimentError> {
    spec.validate()?;
    let selfish = spec.selfish();
    let clock = rank_clock(world, ctx.timer)?;
    let cores = world.gather_pinning()?;
    let mut none = Uninterrupted;
    let mut injector = spec.inject.map(|i| Injector::new(&clock, i)).transpose()?;
    let interrupts: &mut dyn Interrupts = match injector.as_mut() {
        Some(i) => i,
        None => &mut none,
    };
    let results = noise::measure(
        &clock,
        world.control.as_mut(),
        &selfish,
        world.pinned_core,
        interrupts,
    )?;
    if world.rank != 0 {
        return Ok(None);
    }
    let rows: Vec<CoreRow> = results.iter().map(CoreRow::new).collect();
    for row in &rows {
        ctx.record(row)?;
    }
    let mut found = warnings(&rows);
    found.extend(
        binding_warnings(world, &cores, [(0..world.size).collect()]).map(NoiseWarning::Setup),
    );
    Ok(Some(NoiseDoc {
        spec: selfish,
        inject: spec.inject.map(|i| InjectedNoise {
            period_us: i.period_ns / 1e3,
            duration_us: i.duration_ns / 1e3,
        }),
        cores: rows,
        warnings: warned(found),
        meta: ctx
            .meta(clock.source(), clock.rate().hz)
            .job(world, cores)
            .build(),
    }))
}
