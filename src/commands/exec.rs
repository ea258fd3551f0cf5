//! `ngauge exec SPEC.json` (hidden): one run of a suite's experiment, from the spec
//! `ngauge run` wrote into the run directory. The spec's job replaces the transport
//! flags and `--np`; the command runs through the same code as its command line.

use super::common::{with_job, UsageError};
use crate::cli::{ExecArgs, GlobalArgs};
use ngauge::spec::CommandSpec;
use ngauge::suite::file::Experiment;

pub fn run(global: &GlobalArgs, args: &ExecArgs) -> anyhow::Result<()> {
    ngauge::suite::runner::die_with_runner();
    let path = &args.spec;
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    let e: Experiment =
        serde_json::from_str(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
    e.job.validate().map_err(super::common::job_error)?;
    let g = with_job(global, &e.job, e.np);
    match &e.kind {
        CommandSpec::Timer(s) => super::timer::run_spec(&g, s),
        CommandSpec::Pingpong(s) => super::pingpong::run_spec(&g, s),
        CommandSpec::Loggp(s) => super::loggp::run_spec(&g, s, &[]),
        CommandSpec::Sync(s) => super::sync::run_spec(&g, s),
        CommandSpec::Coll(s) => super::coll::run_spec(&g, s, None),
        CommandSpec::Simulate(s) => super::simulate::run_spec(&g, s, None),
        CommandSpec::Noise(s) => super::noise::run_spec(&g, s, None),
        CommandSpec::Late(s) => super::late::run_spec(&g, s, None),
        CommandSpec::Nbc(s) => super::nbc::run_spec(&g, s),
        CommandSpec::Matrix(s) => super::matrix::run_spec(&g, s, &[]),
        CommandSpec::Ebb(s) => super::ebb::run_spec(&g, s),
        CommandSpec::Rma(s) => super::rma::run_spec(&g, s),
    }
}
