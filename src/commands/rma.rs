//! `ngauge rma`: one-sided latency and bandwidth between ranks 0 and 1
//! ([`ngauge::experiment::rma`]).
//!
//! A command of its own rather than `pingpong --one-sided`: its points are
//! (operation, synchronization, size), not sizes, its timed regions end at a
//! completion rather than a reply, and only some transports have it; folding it
//! into pingpong would make most of pingpong's flags and fields mean nothing half
//! the time.

use super::common::{check_outputs, job_spec, measure, setup_hint, UsageError};
use crate::cli::{GlobalArgs, RmaArgs};
use ngauge::patterns::rma::{Op, Params, RmaSync};
use ngauge::report::rma::RmaWarning;

impl RmaArgs {
    /// The pattern's parameters these flags ask for.
    pub fn params(&self) -> Result<Params, UsageError> {
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
        let syncs = list(&self.sync)
            .iter()
            .map(|name| match name.as_str() {
                "flush" => Ok(RmaSync::Flush),
                "fence" => Ok(RmaSync::Fence),
                other => Err(UsageError(format!(
                    "--sync: unknown synchronization `{other}` (flush, fence)"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ops.is_empty() || syncs.is_empty() {
            return Err(UsageError(
                "--ops and --sync need at least one name each".into(),
            ));
        }
        let sizes: Vec<usize> = super::coll::sizes(&self.sizes)?
            .0
            .iter()
            .map(|&s| s as usize)
            .collect();
        if sizes.iter().any(|&s| s > i32::MAX as usize) {
            return Err(UsageError(
                "--sizes: at most 2G-1 bytes per operation".into(),
            ));
        }
        let mut ordered = syncs;
        ordered.sort();
        ordered.dedup();
        Ok(Params {
            ops,
            syncs: ordered,
            sizes,
            reps: self.reps as usize,
            warmup: self.warmup as usize,
            window: self.window as usize,
            check: self.check,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &RmaArgs) -> anyhow::Result<()> {
    let params = args.params()?;
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
             ucx and ofi (mpirun -np 2 ngauge -t mpi rma, ngauge -t ucx rma)",
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
