//! `ngauge info`: transports compiled and usable, the launcher, timer facts
//! ([`ngauge::experiment::info`]).

use super::common::{check_outputs, job_spec, measure};
use crate::cli::GlobalArgs;
use ngauge::spec::InfoSpec;

pub fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    check_outputs(global, &[])?;
    let job = job_spec(global);
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::info::run(world, &job, &InfoSpec::default(), ctx),
        |_| None,
    )
}
