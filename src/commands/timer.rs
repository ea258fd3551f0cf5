//! `ngauge timer`: the timer's facts ([`ngauge::experiment::timer`]), as a table or
//! JSON.

use super::common::{check_outputs, context, end, experiment_error, records, spec_usage, timer};
use crate::cli::{GlobalArgs, TimerArgs};
use ngauge::spec::TimerSpec;

pub fn run(global: &GlobalArgs, args: &TimerArgs) -> anyhow::Result<()> {
    run_spec(
        global,
        &TimerSpec {
            reads: args.reads,
            samples: args.samples,
        },
    )
}

pub fn run_spec(global: &GlobalArgs, spec: &TimerSpec) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    check_outputs(global, &[])?;
    let timer = timer(global)?;
    let mut writer = records(global, true)?;
    let doc = ngauge::experiment::timer::run(spec, &mut context(true, timer, writer.as_mut()))
        .map_err(experiment_error)?;
    end(global, &doc, None, |_| None)
}
