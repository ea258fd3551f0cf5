//! `ngauge noise`: the selfish-detour benchmark on every rank's core
//! ([`ngauge::experiment::noise`]).

use super::common::{check_outputs, measure, setup_hint, spec_usage};
use crate::cli::{GlobalArgs, NoiseArgs};
use ngauge::report::noise::NoiseWarning;
use ngauge::spec::NoiseSpec;
use std::path::Path;

pub fn run(global: &GlobalArgs, args: &NoiseArgs) -> anyhow::Result<()> {
    let spec = NoiseSpec {
        duration_ns: args.duration.0,
        threshold: args.threshold,
        max_detours: args.max_detours,
        inject: args.inject,
    };
    run_spec(global, &spec, args.plot.as_deref())
}

pub fn run_spec(global: &GlobalArgs, spec: &NoiseSpec, plot: Option<&Path>) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    check_outputs(global, &[("--plot", plot)])?;
    measure(
        global,
        plot,
        |world, ctx| ngauge::experiment::noise::run(world, spec, ctx),
        |w| match w {
            NoiseWarning::ShortMeasurement { .. } => Some("measure longer: --duration 5s".into()),
            NoiseWarning::DetoursDropped { .. } => {
                Some("raise --max-detours, or --threshold to count fewer".into())
            }
            NoiseWarning::Setup(s) => setup_hint(s),
        },
    )
}
