//! [`NoiseSpec`]: what `ngauge noise` measures (the selfish-detour loop of
//! [`crate::patterns::noise`] on every rank's core).

use super::SpecError;
use crate::patterns::noise::{NoiseInjection, SelfishSpec};
use serde::{Deserialize, Serialize};

/// The parameters of the selfish-detour benchmark (the flags of `ngauge noise`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NoiseSpec {
    /// How long every rank spins, ns (`--duration`).
    pub duration_ns: f64,
    /// An iteration longer than this many times the fastest is a detour.
    pub threshold: f64,
    /// Detours kept per rank; more are only counted.
    pub max_detours: u64,
    /// Noise injected into every rank's loop (a self-test: the loop must find one
    /// detour of its duration per period).
    pub inject: Option<NoiseInjection>,
}

impl Default for NoiseSpec {
    fn default() -> Self {
        let loop_spec = SelfishSpec::default();
        NoiseSpec {
            duration_ns: loop_spec.duration_ns,
            threshold: loop_spec.threshold,
            max_detours: loop_spec.max_detours as u64,
            inject: None,
        }
    }
}

impl NoiseSpec {
    /// Rejects a duration outside 1 ms..=3600 s, a threshold outside (1, 10^6], a
    /// detour list outside 1..=10^8, an injection whose detours do not fit their
    /// period.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !(1e6..=3600e9).contains(&self.duration_ns) {
            return Err(SpecError::new(
                "duration_ns",
                format!("must be between 1ms and 3600s, got {} ns", self.duration_ns),
            ));
        }
        if !(self.threshold > 1.0 && self.threshold <= 1e6) {
            return Err(SpecError::new(
                "threshold",
                format!(
                    "must be above 1 and at most 1000000, got {}",
                    self.threshold
                ),
            ));
        }
        SpecError::range("max_detours", self.max_detours, 1, 100_000_000)?;
        if let Some(inject) = &self.inject {
            inject
                .validate()
                .map_err(|e| SpecError::new("inject", e.to_string()))?;
        }
        Ok(())
    }

    /// The loop's parameters.
    pub fn selfish(&self) -> SelfishSpec {
        SelfishSpec {
            duration_ns: self.duration_ns,
            threshold: self.threshold,
            max_detours: self.max_detours as usize,
            ..SelfishSpec::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_commands_and_fields_are_checked() {
        let s: NoiseSpec = toml::from_str("duration_ns = 1e7\n").unwrap();
        assert_eq!(
            (s.threshold, s.max_detours, s.inject),
            (10.0, 100_000, None)
        );
        assert_eq!(s.selfish().duration_ns, 1e7);
        assert!(s.validate().is_ok());
        let short = NoiseSpec {
            duration_ns: 1e3,
            ..s
        };
        assert_eq!(short.validate().unwrap_err().field, "duration_ns");
        let low = NoiseSpec {
            threshold: 1.0,
            ..s
        };
        assert_eq!(low.validate().unwrap_err().field, "threshold");
        let long_detours = NoiseSpec {
            inject: Some(NoiseInjection {
                period_ns: 1e6,
                duration_ns: 2e6,
            }),
            ..s
        };
        assert_eq!(long_detours.validate().unwrap_err().field, "inject");
        assert!(toml::from_str::<NoiseSpec>("treshold = 2.0\n").is_err());
    }
}
