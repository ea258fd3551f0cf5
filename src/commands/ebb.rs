//! `ngauge ebb`: the effective bisection bandwidth ([`ngauge::experiment::ebb`]).

use super::common::{check_outputs, job_spec, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{EbbArgs, GlobalArgs};
use ngauge::spec::EbbSpec;

impl EbbArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> EbbSpec {
        EbbSpec {
            bisections: self.bisections,
            message_size: self.message_size,
            window: self.window,
            reps: self.reps,
            warmup: self.warmup,
            bidirectional: self.bidirectional,
            check: self.check,
            seed: self.seed,
        }
    }
}

pub fn run(global: &GlobalArgs, args: &EbbArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec())
}

/// Runs `spec`; `--csv` gets the `-o` records (a row per pair and bisection).
pub fn run_spec(global: &GlobalArgs, spec: &EbbSpec) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    if global.size.map_or(global.np < 2, |s| s < 2) {
        return Err(UsageError("ebb needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    let job = job_spec(global);
    if job.transports.len() > 1 {
        return Err(UsageError("--transport: ebb measures one transport per run".into()).into());
    }
    check_outputs(global, &[])?;
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::ebb::run(world, &job, spec, ctx),
        setup_hint,
    )
}
