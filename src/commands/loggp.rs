//! `ngauge loggp`: PRTT sweep between rank pairs, LogGP parameters per protocol range
//! ([`ngauge::experiment::loggp`]), as a table, JSON, Netgauge columns, a parameter
//! file and a plot; with several transports (`-t mpi,tcp`) side by side, and each
//! file once per transport.

use super::common::{
    check_outputs, job_error, job_spec, measure, part_path, setup_hint, spec_usage, Exports,
    UsageError,
};
use crate::cli::{GlobalArgs, LoggpArgs};
use ngauge::model::loggp::ModelWarning;
use ngauge::patterns::loggp::DelayChoice;
use ngauge::report::document::Export;
use ngauge::report::loggp::LoggpWarning;
use ngauge::spec::LoggpSpec;
use ngauge::transport::WaitMode;
use std::path::Path;

impl LoggpArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<LoggpSpec, UsageError> {
        Ok(LoggpSpec {
            sizes: self.sizes.as_deref().map(super::coll::sizes).transpose()?,
            n: self.n,
            reps: self.reps,
            warmup: self.warmup,
            attempts: self.attempts,
            passes: self.passes,
            dg: self.dg,
            pairs: self.pairs,
            detector: self.detector,
            lookahead: self.lookahead,
            pfact: self.pfact,
            floor_us: self.floor_us,
            penalty: self.penalty,
            confirm: !self.no_confirm,
            refine: !self.no_refine,
            samples: self.samples,
            decide_target_pct: self.decide_target,
            doubt_budget_s: self.doubt_budget,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &LoggpArgs) -> anyhow::Result<()> {
    let files = [
        ("--params-out", Export::Params, args.params_out.as_deref()),
        ("--plot", Export::Plot, args.plot.as_deref()),
        (
            "--netgauge-out",
            Export::Netgauge,
            args.netgauge_out.as_deref(),
        ),
    ];
    run_spec(global, &args.spec()?, &files)
}

/// Runs `spec` and writes the document to `files` (`(flag, export, path)`).
pub fn run_spec(
    global: &GlobalArgs,
    spec: &LoggpSpec,
    files: &[(&str, Export, Option<&Path>)],
) -> anyhow::Result<()> {
    spec.plan().map_err(spec_usage)?;
    let job = job_spec(global);
    job.validate().map_err(job_error)?;
    // Every file the document will be written to (one per transport with several),
    // checked before the sweep.
    let several = job.transports.len() > 1;
    let parts: Vec<Option<&str>> = match several {
        true => job.transports.iter().map(|t| Some(t.as_str())).collect(),
        false => vec![None],
    };
    let paths: Vec<(&str, std::path::PathBuf)> = files
        .iter()
        .filter_map(|&(flag, _, path)| Some((flag, path?)))
        .flat_map(|(flag, path)| parts.iter().map(move |&p| (flag, part_path(path, p))))
        .collect();
    let outputs: Vec<(&str, Option<&Path>)> =
        paths.iter().map(|(f, p)| (*f, Some(p.as_path()))).collect();
    check_outputs(global, &outputs)?;
    let exports = files
        .iter()
        .filter_map(|&(_, export, path)| Some((export, path?)))
        .collect();
    measure(
        global,
        Exports(exports),
        |world, ctx| ngauge::experiment::loggp::run(world, &job, spec, ctx),
        |w| hint(w, spec),
    )
}

/// The command line's hint for a warning about a pair, given the options used.
fn hint(w: &LoggpWarning, spec: &LoggpSpec) -> Option<String> {
    match w {
        LoggpWarning::Model(ModelWarning::DelayTooShort { .. }) => match spec.dg {
            DelayChoice::OneRtt => Some("try --dg 2rtt".into()),
            DelayChoice::TwoRtt => None,
        },
        LoggpWarning::Disturbed { wait, .. } => {
            let other = match wait {
                WaitMode::Poll => "block",
                WaitMode::Block => "poll",
            };
            Some(format!(
                "try --wait {other}, more --reps, or a quieter host"
            ))
        }
        LoggpWarning::Setup(s) => setup_hint(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use ngauge::model::changepoint::LookaheadOptions;
    use ngauge::model::loggp::Detector;
    use ngauge::model::segment::SegmentOptions;

    fn args(extra: &[&str]) -> LoggpArgs {
        let mut argv = vec!["ngauge", "loggp"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Loggp(a) => a,
            _ => unreachable!(),
        }
    }

    fn spec(extra: &[&str]) -> LoggpSpec {
        args(extra).spec().unwrap()
    }

    /// The plan of `spec`, its errors as the command line says them.
    fn plan(spec: &LoggpSpec) -> Result<ngauge::spec::loggp::LoggpPlan, UsageError> {
        spec.plan().map_err(spec_usage)
    }

    #[test]
    fn defaults_are_the_papers() {
        let p = plan(&spec(&[])).unwrap();
        assert_eq!(p.params.n, 10);
        assert_eq!(p.params.sizes.len(), 82);
        assert_eq!(p.params.delay, DelayChoice::OneRtt);
        assert_eq!(
            p.assess.detector,
            Detector::Lookahead(LookaheadOptions::default(), SegmentOptions::default())
        );
    }

    #[test]
    fn options_reach_the_plan() {
        let p = plan(&spec(&[
            "--dg",
            "2rtt",
            "--pairs",
            "concurrent",
            "--detector",
            "segmented",
            "--penalty",
            "3",
            "--sizes",
            "1K-8K:1K",
            "--n",
            "4",
        ]))
        .unwrap();
        assert_eq!(p.params.delay, DelayChoice::TwoRtt);
        assert_eq!(
            p.params.pairs,
            ngauge::patterns::loggp::PairsMode::Concurrent
        );
        assert_eq!(p.params.sizes.len(), 8);
        assert_eq!(p.assess.n, 4);
        assert!(matches!(p.assess.detector, Detector::Segmented(o) if o.penalty_factor == 3.0));
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        assert!(plan(&spec(&["--sizes", "1,2"]))
            .unwrap_err()
            .0
            .contains("at least 3"));
        assert!(plan(&spec(&["--sizes", "0,1,2"])).is_err());
        assert!(plan(&spec(&["--pfact=-1"]))
            .unwrap_err()
            .0
            .contains("--pfact"));
        let mut argv = vec!["ngauge", "loggp", "--n", "1"];
        assert!(Cli::try_parse_from(&argv).is_err());
        argv = vec!["ngauge", "loggp", "--dg", "3rtt"];
        assert!(Cli::try_parse_from(&argv).is_err());
    }

    #[test]
    fn hints_depend_on_the_options_used() {
        let short = LoggpWarning::Model(ModelWarning::DelayTooShort { sizes: vec![1024] });
        assert_eq!(hint(&short, &spec(&[])).as_deref(), Some("try --dg 2rtt"));
        assert_eq!(hint(&short, &spec(&["--dg", "2rtt"])), None);
        let busy = |wait| LoggpWarning::Disturbed {
            fraction: 0.5,
            factor: 3.0,
            wait,
        };
        assert!(hint(&busy(WaitMode::Poll), &spec(&[]))
            .unwrap()
            .contains("--wait block"));
        assert!(hint(&busy(WaitMode::Block), &spec(&[]))
            .unwrap()
            .contains("--wait poll"));
        // The library's own words name no flag.
        let busy = busy(WaitMode::Poll);
        assert!(!short.to_string().contains("--") && !busy.to_string().contains("--"));
    }
}
