//! `ngauge matrix`: every ordered pair's latency and bandwidth
//! ([`ngauge::experiment::matrix`]).

use super::common::{
    check_outputs, job_spec, measure, setup_hint, spec_usage, Exports, UsageError,
};
use crate::cli::{GlobalArgs, MatrixArgs};
use ngauge::report::document::Export;
use ngauge::report::matrix::MatrixWarning;
use ngauge::spec::MatrixSpec;
use std::path::Path;

impl MatrixArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> MatrixSpec {
        MatrixSpec {
            latency_size: self.latency_size,
            bandwidth_size: self.bandwidth_size,
            window: self.window,
            reps: self.reps,
            warmup: self.warmup,
            check: self.check,
            one_at_a_time: self.one_at_a_time,
            seed: self.seed,
            outlier_factor: self.outlier_factor,
        }
    }
}

pub fn run(global: &GlobalArgs, args: &MatrixArgs) -> anyhow::Result<()> {
    // The global --csv is matrix's own table (one row per ordered pair with both
    // figures), not the generic rows of its -o records.
    let csv = global.csv.clone();
    let global = GlobalArgs {
        csv: None,
        ..global.clone()
    };
    let files = [
        ("--svg", Export::Plot, args.svg.as_deref()),
        ("--csv", Export::Csv, csv.as_deref()),
    ];
    run_spec(&global, &args.spec(), &files)
}

/// Runs `spec` and writes the document to `files` (`(flag, export, path)`).
pub fn run_spec(
    global: &GlobalArgs,
    spec: &MatrixSpec,
    files: &[(&str, Export, Option<&Path>)],
) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    if global.size.map_or(global.np < 2, |s| s < 2) {
        return Err(UsageError("matrix needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    let job = job_spec(global);
    if job.transports.len() > 1 {
        return Err(UsageError("--transport: matrix measures one transport per run".into()).into());
    }
    let flags: Vec<_> = files.iter().map(|&(flag, _, p)| (flag, p)).collect();
    check_outputs(global, &flags)?;
    let exports = files
        .iter()
        .filter_map(|&(_, e, p)| Some((e, p?)))
        .collect();
    measure(
        global,
        Exports(exports),
        |world, ctx| ngauge::experiment::matrix::run(world, &job, spec, ctx),
        |w| match w {
            MatrixWarning::Setup(s) => setup_hint(s),
        },
    )
}
