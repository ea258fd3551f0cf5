//! `simulate`: the LogGP simulation of a collective ([`crate::sim::spec`]), in one
//! process; with [`measure`], in a job whose size is simulated, the candidates
//! measured by `coll`'s executor and the models' choices judged against the
//! measured best ([`crate::sim::select`]).

use super::coll::{self, points, Candidate};
use super::{Context, ExperimentError};
use crate::clock::TimerSource;
use crate::job::JobSpec;
use crate::launch::World;
use crate::report::simulate::{Measurement, SimulateDoc};
use crate::report::warning::warned;
use crate::report::Meta;
use crate::sim::params::Loaded;
use crate::sim::select::select;
use crate::sim::spec::{self as sim_spec, NetworkSpec, SimulateSpec};
use crate::spec::coll::CollImpl;
use crate::spec::CollCmdSpec;

/// Simulates `spec`; the context gets each prediction as a record.
///
/// # Errors
/// A spec the simulator cannot run, an unreadable parameter file, a record that
/// cannot be kept.
pub fn run(spec: &SimulateSpec, ctx: &mut Context) -> Result<SimulateDoc, ExperimentError> {
    sim_spec::validate(spec)?;
    let loaded = spec.network.load()?;
    let meta = ctx
        .meta(TimerSource::detect(), 0.0)
        .simulated(spec.np)
        .build();
    let doc = document(spec, loaded, meta)?;
    for prediction in &doc.results {
        ctx.record(prediction)?;
    }
    Ok(doc)
}

/// Simulates `spec` at the job's size and measures its candidates with `coll`'s
/// executor as `how` times them (its scheme and counts); rank 0 gets the document.
/// Collective: every rank calls it.
///
/// # Errors
/// As [`run`] and [`coll::run`].
pub fn measure(
    world: &mut World,
    job: &JobSpec,
    spec: &SimulateSpec,
    how: &CollCmdSpec,
    ctx: &mut Context,
) -> Result<Option<SimulateDoc>, ExperimentError> {
    let spec = SimulateSpec {
        np: world.size,
        ..spec.clone()
    };
    let candidates: Vec<Candidate> = sim_spec::validate(&spec)?
        .into_iter()
        .map(|(a, segment)| Candidate {
            imp: CollImpl::Ours(a),
            segment: segment as usize,
        })
        .collect();
    let loaded = spec.network.load()?;
    let sizes: Vec<usize> = spec.sizes_bytes.iter().map(|&s| s as usize).collect();
    let m = coll::measure(world, job, how, &candidates, &sizes, Some(&loaded), ctx)?;
    let Some(meta) = m.meta else {
        return Ok(None);
    };
    let mut doc = document(&spec, loaded, meta)?;
    doc.measurement = Some(Measurement {
        scheme: how.scheme,
        reps: how.reps,
        selection: select(&points(&m.records)),
        results: m.records,
        sync: m.sync,
        warnings: warned(m.warnings),
    });
    Ok(Some(doc))
}

/// The document of `spec`'s predictions on `loaded`.
fn document(
    spec: &SimulateSpec,
    loaded: Loaded,
    meta: Meta,
) -> Result<SimulateDoc, ExperimentError> {
    let results = sim_spec::run(spec, &loaded.network)?;
    let warnings = loaded.warnings_at(&spec.sizes_bytes);
    let params = match &spec.network {
        NetworkSpec::ParamsFile(p) => p.display().to_string(),
        NetworkSpec::Loggp(_) => "flags".into(),
    };
    Ok(SimulateDoc::new(
        params,
        loaded.transport,
        &loaded.network,
        spec.receive_gap,
        results,
        warnings,
        meta,
    ))
}
