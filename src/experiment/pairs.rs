//! What `matrix` and `ebb` share: the job's first transport opened, steps of
//! disjoint pairs measured by [`crate::patterns::pairs`] (one list of steps and
//! one set of parameters per run), an `-o` record per pair as its step
//! finishes, and rank 0's hosts, metadata and setup warnings.

use super::{need_ranks, Context, ExperimentError};
use crate::clock::SystemClock;
use crate::job::{Job, JobError, JobSpec};
use crate::launch::World;
use crate::patterns::pairs::{self, Pair, PairResult};
use crate::patterns::pingpong::Params;
use crate::report::matrix::PairRecord;
use crate::report::{Meta, SetupWarning};
use crate::spec::SpecError;

/// One run of [`run`]: its steps at every size of its parameters.
pub struct Steps {
    /// Each step's disjoint ordered pairs.
    pub steps: Vec<Vec<Pair>>,
    /// What every pair measures.
    pub params: Params,
    /// The spec field that set the sizes, named when the transport cannot
    /// carry one.
    pub size_field: &'static str,
}

/// Rank 0's results of [`run`].
pub struct Measured {
    /// Each run's pair results, in the order of the runs.
    pub runs: Vec<Vec<PairResult>>,
    /// Every rank's host, indexed by rank.
    pub hosts: Vec<String>,
    /// The metadata, with the transport measured.
    pub meta: Meta,
    /// The job's and the binding's warnings.
    pub warnings: Vec<SetupWarning>,
}

/// Opens the job's transports and measures `runs` over the first, one after
/// the other; rank 0 gets [`Measured`]. Collective: every rank calls it.
///
/// # Errors
/// A job of one rank, a transport that fails to open, a size the transport
/// cannot carry ([`ExperimentError::Spec`] naming the run's `size_field`), a
/// lost peer, damaged payloads, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    ctx: &mut Context,
    command: &'static str,
    runs: &[Steps],
) -> Result<Option<Measured>, ExperimentError> {
    need_ranks(world, command, 2)?;
    let np = world.size;
    let (clock, calibration) = SystemClock::calibrated_on(ctx.timer);
    let cores = world.gather_pinning()?;
    let opened = Job::open(job, world, |_, _| {})?;
    let mut warnings: Vec<SetupWarning> = opened.warnings.into_iter().map(Into::into).collect();
    let mut open = opened.transports;
    let o = open.first_mut().ok_or(JobError::NoTransport)?;
    let (name, wait) = (o.name, o.wait);
    if let Some(max) = o.transport.capabilities().max_message_bytes {
        for run in runs {
            if let Some(&size) = run.params.sizes.iter().find(|&&s| s > max) {
                let message = format!("{name} carries at most {max} bytes per message, got {size}");
                return Err(SpecError::new(run.size_field, message).into());
            }
        }
    }
    let mut progress = ctx.progress_line();
    let total: usize = runs
        .iter()
        .map(|r| r.params.sizes.len() * r.steps.iter().map(Vec::len).sum::<usize>())
        .sum();
    let mut done = 0usize;
    let mut measured = Vec::new();
    for run in runs {
        let results = pairs::run(
            &clock,
            o.transport.as_mut(),
            world.control.as_mut(),
            &run.steps,
            &run.params,
            &mut |r| {
                let record = PairRecord {
                    transport: name,
                    wait,
                    result: r.clone(),
                };
                ctx.record(&record).map_err(|e| e.to_string())?;
                done += 1;
                progress.update(&format!("{name}: {done}/{total} pairs"));
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
    // The pairs of a step run at once: every rank needs a core.
    warnings.extend(super::binding_warnings(world, &cores, [(0..np).collect()]));
    let meta = ctx
        .meta(clock.source(), calibration.rate.hz)
        .transports(&[(name, wait)])
        .job(world, cores)
        .build();
    Ok(Some(Measured {
        runs: measured,
        hosts: world.peers.iter().map(|p| p.host.clone()).collect(),
        meta,
        warnings,
    }))
}
