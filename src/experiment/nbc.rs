//! `nbc`: nonblocking-collective overhead and overlap per size, computation
//! scheme and progress interval ([`crate::patterns::nbc`]).

use super::collective::{coll_op, finish, windowed};
use super::{Context, ExperimentError};
use crate::job::JobSpec;
use crate::launch::World;
use crate::patterns::nbc::{self, Arithmetic, NbcSpec};
use crate::patterns::PatternError;
use crate::report::nbc::{self as doc, NbcDoc, NbcRow, NbcWarning};
use crate::spec::NbcCmdSpec;

/// Synchronizes the clocks over the job's one transport and measures every size
/// with every scheme and progress interval; rank 0 gets the document, and the
/// context gets one record per point as it finishes. Collective: every rank
/// calls it.
///
/// # Errors
/// A spec out of range or that the job cannot run, a transport that may lose
/// messages, a failed sync, a lost peer, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &NbcCmdSpec,
    ctx: &mut Context,
) -> Result<Option<NbcDoc>, ExperimentError> {
    spec.validate()?;
    let (mut setup, imp, specs, plan) = windowed(world, job, ctx.timer, &spec.coll, &spec.sizes.0)?;
    let rank = world.rank;
    let (op_name, algo) = (spec.coll.op.to_string(), imp.name());
    let mut work = Arithmetic::default();
    let mut progress = ctx.progress_line();
    let (mut rows, mut found, mut label) = (Vec::new(), Vec::new(), String::new());
    let points: Vec<_> = (specs.iter())
        .flat_map(|s| spec.points().into_iter().map(move |(c, t)| (*s, c, t)))
        .collect();
    let total = points.len();
    for (k, (coll, compute, test_every_ns)) in points.into_iter().enumerate() {
        let this = NbcSpec {
            compute,
            test_every_ns,
            plan,
        };
        let mut op = coll_op(setup.transports[0].transport.as_mut(), imp, coll)?;
        label = op.label();
        let control = world.control.as_mut();
        let times = nbc::measure(
            &setup.clock,
            op.as_mut(),
            control,
            &setup.model,
            &this,
            &mut work,
        )?;
        op.release().map_err(PatternError::from)?;
        let size = coll.size_bytes;
        progress.update(&format!(
            "nbc: {}/{total} points ({size} B, {compute})",
            k + 1
        ));
        if rank != 0 {
            continue;
        }
        if let Some(row) = NbcRow::new(&op_name, &algo, size, compute, test_every_ns, &times) {
            ctx.record(&row)?;
            found.extend(doc::warnings(&row, &times, this.plan.reps));
            rows.push(row);
        }
    }
    progress.finish();
    if rank != 0 {
        return Ok(None);
    }
    let what = (spec.coll.op, imp, label);
    let (run, warnings, sync, meta) = finish(setup, (world, ctx), what, NbcWarning::Setup, found);
    Ok(Some(NbcDoc {
        run,
        results: rows,
        sync,
        warnings,
        meta,
    }))
}
