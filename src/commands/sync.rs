//! `ngauge sync`: synchronize the clocks, then measure how far each rank's global time
//! is off at each `--check-after` time ([`ngauge::experiment::sync`]).

use super::common::{check_outputs, job_spec, measure, setup_hint, spec_usage};
use crate::cli::{GlobalArgs, SyncArgs, SyncFlags};
use ngauge::report::sync::SyncWarning;
use ngauge::spec::SyncSpec;

impl SyncFlags {
    /// The spec of these flags, with the residual checks at `check_after_s`.
    pub fn spec(&self, check_after_s: Vec<f64>) -> SyncSpec {
        SyncSpec {
            sync: self.algorithm,
            fitpoints: self.fitpoints,
            exchanges: self.exchanges,
            estimator: self.estimator,
            check_after_s,
            reps: 1,
            samples: false,
        }
    }
}

pub fn run(global: &GlobalArgs, args: &SyncArgs) -> anyhow::Result<()> {
    let spec = SyncSpec {
        reps: args.reps,
        samples: args.samples,
        ..args.sync.spec(args.check_after.clone())
    };
    run_spec(global, &spec)
}

pub fn run_spec(global: &GlobalArgs, spec: &SyncSpec) -> anyhow::Result<()> {
    spec.validate().map_err(spec_usage)?;
    check_outputs(global, &[])?;
    let job = job_spec(global);
    measure(
        global,
        None,
        |world, ctx| ngauge::experiment::sync::run(world, &job, spec, ctx),
        hint,
    )
}

/// The command line's hint for a warning.
fn hint(w: &SyncWarning) -> Option<String> {
    match w {
        SyncWarning::LargeResidual { algo, .. } if !algo.models_drift() => {
            Some("try --sync hca or jk".into())
        }
        SyncWarning::LargeResidual { .. } => {
            Some("more --fitpoints spread the fit over a longer time".into())
        }
        SyncWarning::Setup(s) => setup_hint(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge::sync::{Algorithm, Estimator};

    #[test]
    fn flags_map_to_options() {
        let flags = SyncFlags {
            algorithm: Algorithm::Jk,
            fitpoints: 7,
            exchanges: Some(3),
            estimator: Some(Estimator::MinRtt),
        };
        let o = flags.spec(vec![]).options();
        assert_eq!(o.algorithm, Algorithm::Jk);
        assert_eq!((o.fitpoints, o.exchanges), (7, 3));
        assert_eq!(o.estimator, Some(Estimator::MinRtt));
        // Without --exchanges each algorithm has its papers' default.
        let default_for = |algorithm| {
            SyncFlags {
                algorithm,
                exchanges: None,
                ..flags.clone()
            }
            .spec(vec![])
            .options()
            .exchanges
        };
        assert_eq!(default_for(Algorithm::Jk), 100);
        assert_eq!(default_for(Algorithm::Hca), 100);
    }

    #[test]
    fn residual_hints_name_what_helps() {
        let w = |algo| SyncWarning::LargeResidual {
            max_abs_ns: 2e4,
            after_s: 5.0,
            algo,
        };
        assert!(hint(&w(Algorithm::Linear)).unwrap().contains("--sync hca"));
        assert!(hint(&w(Algorithm::Hca)).unwrap().contains("--fitpoints"));
        assert!(!w(Algorithm::Linear).to_string().contains("--"));
        assert_eq!(
            w(Algorithm::Linear).to_string(),
            "residuals reach 20.0 us after 5s: linear models no drift"
        );
    }
}
