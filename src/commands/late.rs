//! `ngauge late`: late arrivals and the delay overlap benefit
//! ([`ngauge::experiment::late`]).

use super::coll::{job_for, sizes};
use super::common::{check_outputs, few_valid_hint, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{GlobalArgs, LateArgs};
use ngauge::patterns::late::DelayedRanks;
use ngauge::report::late::LateWarning;
use ngauge::spec::LateCmdSpec;
use std::path::Path;

impl LateArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<LateCmdSpec, UsageError> {
        let delayed_ranks = match (&self.delayed_ranks, self.seed) {
            (DelayedRanks::Random { .. }, Some(seed)) => DelayedRanks::Random { seed },
            (_, Some(_)) => {
                return Err(UsageError(
                    "--seed applies to --delayed-ranks random".into(),
                ))
            }
            (d, None) => d.clone(),
        };
        Ok(LateCmdSpec {
            coll: self.coll.spec(),
            sizes: sizes(&self.sizes)?,
            delay_ns: self.delay.iter().map(|d| d.0).collect(),
            delayed_ranks,
            mode: self.mode.clone(),
            inject: self.inject,
            inject_rank: self.inject_rank,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &LateArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?, args.plot.as_deref())
}

/// Runs `spec`, drawing `b` to `plot` if given.
pub fn run_spec(
    global: &GlobalArgs,
    spec: &LateCmdSpec,
    plot: Option<&Path>,
) -> anyhow::Result<()> {
    let job = job_for(global, spec.coll.algo.iter())?;
    let np = super::common::known_size(global);
    (spec.validate())
        .and(spec.validate_for_job(&job.transports, np).map(drop))
        .map_err(spec_usage)?;
    check_outputs(global, &[("--plot", plot)])?;
    measure(
        global,
        plot,
        |world, ctx| ngauge::experiment::late::run(world, &job, spec, ctx),
        |w| match w {
            LateWarning::Setup(s) => setup_hint(s),
            LateWarning::FewValidCalls { .. } => Some(few_valid_hint(global)),
            LateWarning::Undecided { .. } => Some(
                "the ranks did not start d apart: run on an idle host, with a core per \
                 rank, or raise --max-rounds"
                    .into(),
            ),
        },
    )
}
