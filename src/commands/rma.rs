//! `ngauge rma`: one-sided latency and bandwidth between ranks 0 and 1
//! ([`ngauge::experiment::rma`]).
//!
//! A command of its own rather than `pingpong --one-sided`: its points are
//! (operation, synchronization, size), not sizes, its timed regions end at a
//! completion rather than a reply, and only some transports have it; folding it
//! into pingpong would make most of pingpong's flags and fields mean nothing half
//! the time.

use super::common::{check_outputs, job_spec, measure, setup_hint, spec_usage, UsageError};
use crate::cli::{GlobalArgs, RmaArgs};
use ngauge::patterns::rma::{Op, RmaSync};
use ngauge::report::rma::RmaWarning;
use ngauge::spec::RmaSpec;

impl RmaArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<RmaSpec, UsageError> {
        let list = |text: &str| -> Vec<String> {
            let names = text.split(',').map(|s| s.trim().to_string());
            names.filter(|s| !s.is_empty()).collect()
        };
        let ops = list(&self.ops)
            .iter()
            .map(|name| {
                Op::parse(name).ok_or_else(|| {
                    UsageError(format!(
                        "--ops: unknown operation `{name}` (put, get, put-bw, put-notify, \
                         accumulate, fetch-add)"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sync = list(&self.sync)
            .iter()
            .map(|name| match name.as_str() {
                "flush" => Ok(RmaSync::Flush),
                "fence" => Ok(RmaSync::Fence),
                other => Err(UsageError(format!(
                    "--sync: unknown synchronization `{other}` (flush, fence)"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RmaSpec {
            sizes: super::coll::sizes(&self.sizes)?,
            ops,
            sync,
            reps: self.reps,
            warmup: self.warmup,
            window: self.window,
            check: self.check,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &RmaArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?)
}

/// Runs `spec` over the job of `global` (the command line's, or a suite's).
pub fn run_spec(global: &GlobalArgs, spec: &RmaSpec) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    let params = spec.params();
    if global.size.map_or(global.np < 2, |s| s < 2) {
        return Err(UsageError("rma needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    let job = job_spec(global);
    if !job
        .transports
        .iter()
        .any(|&t| ngauge::job::one_sided::offers(t))
    {
        // Refused before any rank starts (the experiment refuses it too).
        let names: Vec<String> = job.transports.iter().map(|t| t.to_string()).collect();
        return Err(UsageError(format!(
            "-t {}: no transport with one-sided operations; rma runs over mpi, \
             ucx, verbs and ofi (mpirun -np 2 ngauge -t mpi rma, ngauge -t ucx rma)",
            names.join(",")
        ))
        .into());
    }
    check_outputs(global, &[])?;
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::rma::run(world, &job, &params, ctx),
        |w| match w {
            RmaWarning::Setup(s) => setup_hint(s),
            _ => None,
        },
    )
}
