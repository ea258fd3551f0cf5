//! `ngauge nbc`: nonblocking-collective overhead and overlap
//! ([`ngauge::experiment::nbc`]).

use super::coll::{job_for, sizes};
use super::common::{check_outputs, few_valid_hint, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{GlobalArgs, NbcArgs};
use ngauge::report::nbc::NbcWarning;
use ngauge::spec::NbcCmdSpec;

impl NbcArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<NbcCmdSpec, UsageError> {
        Ok(NbcCmdSpec {
            coll: self.coll.spec(),
            sizes: sizes(&self.sizes)?,
            compute: self.compute.clone(),
            test_every_ns: self.test_every.iter().map(|t| t.0).collect(),
        })
    }
}

pub fn run(global: &GlobalArgs, args: &NbcArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?)
}

pub fn run_spec(global: &GlobalArgs, spec: &NbcCmdSpec) -> anyhow::Result<()> {
    let job = job_for(global, spec.coll.algo.iter())?;
    let np = super::common::known_size(global);
    (spec.validate())
        .and(
            spec.coll
                .validate_for_job(&job.transports, np, &spec.sizes.0)
                .map(drop),
        )
        .map_err(spec_usage)?;
    check_outputs(global, &[])?;
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::nbc::run(world, &job, spec, ctx),
        |w| match w {
            NbcWarning::Setup(s) => setup_hint(s),
            NbcWarning::FewValidCalls { .. } | NbcWarning::Undecided { .. } => {
                Some(few_valid_hint(global))
            }
            NbcWarning::ComputeOverran { .. } => {
                Some("give every rank a core of its own (fewer --np)".into())
            }
        },
    )
}
