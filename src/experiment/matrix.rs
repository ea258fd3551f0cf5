//! `matrix`: every ordered pair's latency and bandwidth over the job's first
//! transport, measured by [`crate::patterns::pairs`] in the steps of a seeded
//! round-robin tournament (or one pair at a time); rank 0 builds the document
//! with the placement classes and the outliers ([`crate::report::matrix`]).

use super::{need_ranks, Context, ExperimentError};
use crate::clock::SystemClock;
use crate::job::{Job, JobSpec};
use crate::launch::World;
use crate::patterns::pairs::{self, schedule};
use crate::report::matrix::{MatrixDoc, MatrixWarning, ScheduleFacts};
use crate::spec::MatrixSpec;

/// Opens the job's transports and measures the latency matrix, then the
/// bandwidth matrix, over the first; rank 0 gets the document, the context a
/// record per ordered pair and matrix as its step finishes. Collective: every
/// rank calls it.
///
/// # Errors
/// A spec out of range, a job of one rank, a transport that fails to open or
/// cannot carry the sizes, a lost peer, damaged payloads, a record that cannot
/// be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &MatrixSpec,
    ctx: &mut Context,
) -> Result<Option<MatrixDoc>, ExperimentError> {
    spec.validate()?;
    need_ranks(world, "matrix", 2)?;
    let np = world.size;
    let (clock, calibration) = SystemClock::calibrated();
    let cores = world.gather_pinning()?;
    let opened = Job::open(job, world, |_, _| {})?;
    let mut warnings: Vec<MatrixWarning> = opened
        .warnings
        .into_iter()
        .map(|w| MatrixWarning::Setup(w.into()))
        .collect();
    let mut open = opened.transports;
    let o = open.first_mut().ok_or(crate::job::JobError::NoTransport)?;
    let (name, wait) = (o.name, o.wait);
    let (kind, steps) = if spec.one_at_a_time {
        ("one-at-a-time", schedule::one_at_a_time(np, spec.seed))
    } else {
        (
            "tournament",
            schedule::both_directions(&schedule::tournament(np, spec.seed)),
        )
    };
    let mut progress = ctx.progress_line();
    let total = 2 * np * (np - 1);
    let mut done = 0usize;
    let mut measured = Vec::new();
    for bandwidth in [false, true] {
        let results = pairs::run(
            &clock,
            o.transport.as_mut(),
            world.control.as_mut(),
            &steps,
            &spec.params(bandwidth),
            &mut |r| {
                ctx.record(r).map_err(|e| e.to_string())?;
                done += 1;
                progress.update(&format!("{name}: {done}/{total} links"));
                Ok(())
            },
        );
        progress.finish();
        measured.push(results?);
    }
    drop(open);
    if world.rank != 0 {
        return Ok(None);
    }
    let hosts: Vec<String> = world.peers.iter().map(|p| p.host.clone()).collect();
    // The pairs of a tournament step run at once: every rank needs a core.
    warnings.extend(
        super::binding_warnings(world, &cores, [(0..np).collect()]).map(MatrixWarning::Setup),
    );
    let meta = ctx
        .meta(clock.source(), calibration.rate.hz)
        .transports(&[(name, wait)])
        .job(world, cores)
        .build();
    let facts = ScheduleFacts {
        kind: kind.into(),
        seed: spec.seed,
        steps: steps.len(),
    };
    Ok(Some(MatrixDoc::new(
        meta,
        hosts,
        facts,
        &measured[0],
        &measured[1],
        spec.outlier_factor,
        &warnings,
    )))
}
