//! `ebb`: the effective bisection bandwidth over the job's first transport:
//! `spec.bisections` random bisections
//! ([`crate::patterns::pairs::schedule::bisections`]), the pairs of each
//! streaming at once ([`super::pairs`]); rank 0 builds the distribution
//! ([`crate::report::ebb`]).

use super::pairs::Steps;
use super::{Context, ExperimentError};
use crate::job::JobSpec;
use crate::launch::World;
use crate::patterns::pairs::schedule;
use crate::report::ebb::EbbDoc;
use crate::spec::EbbSpec;

/// Measures the bisections; rank 0 gets the document, the context a record per
/// pair as its bisection finishes. Collective: every rank calls it.
///
/// # Errors
/// As [`super::pairs::run`], and a spec out of range.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &EbbSpec,
    ctx: &mut Context,
) -> Result<Option<EbbDoc>, ExperimentError> {
    spec.validate()?;
    let steps = schedule::bisections(world.size, spec.bisections as usize, spec.seed);
    let run = Steps {
        steps,
        params: spec.params(),
        size_field: "message_size",
    };
    let Some(mut m) = super::pairs::run(world, job, ctx, "ebb", &[run])? else {
        return Ok(None);
    };
    let results = m.runs.pop().unwrap_or_default();
    Ok(Some(EbbDoc::new(m.meta, spec, results, &m.warnings)))
}
