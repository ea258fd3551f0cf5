//! `ngauge pingpong`: latency and bandwidth per message size between ranks 0 and 1
//! ([`ngauge::experiment::pingpong`]).

use super::common::{check_outputs, job_spec, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{GlobalArgs, PingpongArgs};
use ngauge::report::pingpong::PingpongWarning;
use ngauge::spec::PingpongSpec;

impl PingpongArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<PingpongSpec, UsageError> {
        Ok(PingpongSpec {
            sizes: super::coll::sizes(&self.sizes)?,
            reps: self.reps,
            warmup: self.warmup,
            check: self.check,
            native_loop: self.native_loop,
            samples: self.samples,
            histogram: self.histogram,
            gbps: self.gbps,
            window: self.window,
            stream: self.stream,
            bidirectional: self.bidirectional,
            pairs: self.pairs,
            precision: self.precision,
            max_reps: self.max_reps,
            pattern: self.pattern,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &PingpongArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?)
}

pub fn run_spec(global: &GlobalArgs, spec: &PingpongSpec) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    if global.size.map_or(global.np < 2, |s| s < 2) {
        return Err(UsageError("pingpong needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    let job = job_spec(global);
    spec.validate_for_job(&job.transports).map_err(spec_usage)?;
    check_outputs(global, &[])?;
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::pingpong::run(world, &job, spec, ctx),
        |w| match w {
            PingpongWarning::Setup(s) => setup_hint(s),
            PingpongWarning::PrecisionNotMet { .. } => {
                Some("raise --max-reps, or relax --precision".into())
            }
            PingpongWarning::LevelMoved { .. } => Some(
                "compare figures measured in one run (`-t a,b` interleaves transports), \
                 not across runs"
                    .into(),
            ),
            _ => None,
        },
    )
}
