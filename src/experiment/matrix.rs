//! `matrix`: every ordered pair's latency and bandwidth over the job's first
//! transport, measured ([`super::pairs`]) in the steps of a seeded round-robin
//! tournament (or one pair at a time); rank 0 builds the document with the
//! placement classes and the outliers ([`crate::report::matrix`]).

use super::pairs::Steps;
use super::{Context, ExperimentError};
use crate::job::JobSpec;
use crate::launch::World;
use crate::patterns::pairs::schedule;
use crate::report::matrix::{MatrixDoc, MatrixWarning, ScheduleFacts};
use crate::spec::MatrixSpec;

/// Measures the latency matrix, then the bandwidth matrix; rank 0 gets the
/// document, the context a record per ordered pair and matrix as its step
/// finishes. Collective: every rank calls it.
///
/// # Errors
/// As [`super::pairs::run`], and a spec out of range.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &MatrixSpec,
    ctx: &mut Context,
) -> Result<Option<MatrixDoc>, ExperimentError> {
    spec.validate()?;
    let np = world.size;
    let (kind, steps) = if spec.one_at_a_time {
        ("one-at-a-time", schedule::one_at_a_time(np, spec.seed))
    } else {
        (
            "tournament",
            schedule::both_directions(&schedule::tournament(np, spec.seed)),
        )
    };
    let facts = ScheduleFacts {
        kind: kind.into(),
        seed: spec.seed,
        steps: steps.len(),
    };
    let runs = [
        Steps {
            steps: steps.clone(),
            params: spec.params(false),
            size_field: "latency_size",
        },
        Steps {
            steps,
            params: spec.params(true),
            size_field: "bandwidth_size",
        },
    ];
    let Some(m) = super::pairs::run(world, job, ctx, "matrix", &runs)? else {
        return Ok(None);
    };
    let warnings: Vec<MatrixWarning> = m.warnings.into_iter().map(MatrixWarning::Setup).collect();
    Ok(Some(MatrixDoc::new(
        m.meta,
        m.hosts,
        facts,
        &m.runs[0],
        &m.runs[1],
        spec.outlier_factor,
        &warnings,
    )))
}
