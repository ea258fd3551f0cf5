//! `late`: late arrivals and the delay overlap benefit per size, call mode and
//! delay ([`crate::patterns::late`]), optionally under noise injected into one
//! rank's schedules.

use super::collective::{coll_op, finish, windowed};
use super::{Context, ExperimentError};
use crate::coll::{Interrupts, Uninterrupted};
use crate::job::JobSpec;
use crate::launch::World;
use crate::patterns::late::{self, LateSpec};
use crate::patterns::noise::Injector;
use crate::report::late::{self as doc, Injected, LateDoc, LateWarning};
use crate::spec::LateCmdSpec;

/// Synchronizes the clocks over the job's one transport and sweeps the sizes,
/// modes and delays; rank 0 gets the document, and the context gets the rows of
/// every size and mode as they finish. Collective: every rank calls it.
///
/// # Errors
/// A spec out of range or that the job cannot run, a transport that may lose
/// messages, a failed sync, a lost peer, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &LateCmdSpec,
    ctx: &mut Context,
) -> Result<Option<LateDoc>, ExperimentError> {
    spec.validate()?;
    let delayed = spec.validate_for_job(&job.transports, Some(world.size))?;
    let (mut setup, imp, specs, plan) = windowed(world, job, ctx.timer, &spec.coll, &spec.sizes.0)?;
    let rank = world.rank;
    let clock = setup.clock;
    let base = LateSpec {
        delays_ns: spec.delay_ns.clone(),
        delayed,
        mode: late::CallMode::Blocking,
        plan,
    };
    let mut progress = ctx.progress_line();
    let (mut rows, mut found, mut label) = (Vec::new(), Vec::new(), String::new());
    let total = specs.len() * spec.mode.len();
    for (i, coll) in specs.iter().enumerate() {
        for (j, &mode) in spec.mode.iter().enumerate() {
            let mut op = coll_op(setup.transports[0].transport.as_mut(), imp, *coll)?;
            label = op.label();
            let this = LateSpec {
                mode,
                ..base.clone()
            };
            let mut injector = match &spec.inject {
                Some(inject) if rank == spec.inject_rank => Some(Injector::new(&clock, *inject)?),
                _ => None,
            };
            let interrupts: &mut dyn Interrupts = match injector.as_mut() {
                Some(i) => i,
                None => &mut Uninterrupted,
            };
            let control = world.control.as_mut();
            let times = late::measure(
                &clock,
                op.as_mut(),
                control,
                &setup.model,
                &this,
                interrupts,
            )?;
            op.release().map_err(crate::patterns::PatternError::from)?;
            let size = coll.size_bytes;
            let point = i * spec.mode.len() + j + 1;
            progress.update(&format!("late: {point}/{total} points ({size} B, {mode})"));
            if rank == 0 {
                let these = doc::rows(size, mode, &times);
                for row in &these {
                    ctx.record(row)?;
                }
                found.extend(doc::warnings(size, mode, &times, this.plan.reps));
                rows.extend(these);
            }
        }
    }
    progress.finish();
    if rank != 0 {
        return Ok(None);
    }
    let what = (spec.coll.op, imp, label);
    let (run, warnings, sync, meta) = finish(setup, (world, ctx), what, LateWarning::Setup, found);
    Ok(Some(LateDoc {
        run,
        inject: spec.inject.map(|i| Injected {
            rank: spec.inject_rank,
            period_us: i.period_ns / 1e3,
            duration_us: i.duration_ns / 1e3,
        }),
        results: rows,
        sync,
        warnings,
        meta,
    }))
}
