//! `rma`: one-sided latency and bandwidth between ranks 0 and 1, over every
//! transport of the job that has one-sided operations, one after the other
//! ([`crate::patterns::rma`], windows from [`crate::job::one_sided`]). The others
//! (TCP, UDP) get one warning each and are not opened.

use super::{binding_warnings, need_ranks, Context, ExperimentError};
use crate::clock::SystemClock;
use crate::job::{one_sided, JobSpec};
use crate::launch::World;
use crate::patterns::rma::{self, Params, ORIGIN, TARGET};
use crate::report::rma::{Record, RmaDoc, RmaWarning};
// One-sided completion is polled: the flush, the fence and the flag all spin.
use ngauge_transport::WaitMode;

/// Opens each one-sided transport's window in turn and runs every point over it;
/// rank 0 gets the document, the context one record per point as it finishes.
/// Collective: every rank calls it.
///
/// # Errors
/// A job of one rank, no transport with one-sided operations, a window that
/// cannot be opened, a failed operation or data check, a lost peer.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    params: &Params,
    ctx: &mut Context,
) -> Result<Option<RmaDoc>, ExperimentError> {
    need_ranks(world, "rma", 2)?;
    let (clock, calibration) = SystemClock::calibrated_on(ctx.timer);
    let cores = world.gather_pinning()?;
    let mut warnings: Vec<RmaWarning> = binding_warnings(world, &cores, [vec![ORIGIN, TARGET]])
        .map(RmaWarning::Setup)
        .collect();
    let mut records = Vec::new();
    let mut measured = Vec::new();
    for &name in &job.transports {
        let Some(mut window) = one_sided::open(name, world, job, params.window_bytes())? else {
            warnings.push(RmaWarning::NoOneSided { transport: name });
            continue;
        };
        measured.push(name);
        let mut kept = Ok(());
        let results = rma::run(
            &clock,
            window.as_mut(),
            world.control.as_mut(),
            params,
            &mut |r| {
                if kept.is_ok() {
                    kept = ctx.record(&Record {
                        transport: name,
                        result: r.clone(),
                    });
                }
            },
        )?;
        kept?;
        window.close().map_err(|error| crate::job::JobError::Open {
            transport: name,
            error,
        })?;
        records.extend(results.into_iter().map(|result| Record {
            transport: name,
            result,
        }));
    }
    if measured.is_empty() {
        return Err(ExperimentError::NoOneSided(
            job.transports
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ));
    }
    if world.rank != 0 {
        return Ok(None);
    }
    let meta = ctx
        .meta(clock.source(), calibration.rate.hz)
        .transports(
            &measured
                .iter()
                .map(|&t| (t, WaitMode::Poll))
                .collect::<Vec<_>>(),
        )
        .job(world, cores)
        .build();
    Ok(Some(RmaDoc::new(
        meta,
        [ORIGIN, TARGET],
        records,
        &warnings,
    )))
}
