//! [`SyncSpec`]: what `ngauge sync` measures.

use super::SpecError;
use crate::sync::{Algorithm, Estimator, SyncOptions};
use serde::{Deserialize, Serialize};

/// Latest residual check a spec may ask for, seconds after the sync.
pub const MAX_CHECK_AFTER_S: f64 = 3600.0;

/// The parameters of a clock synchronization and its checks (the flags of
/// `ngauge sync`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct SyncSpec {
    /// The algorithm.
    pub sync: Algorithm,
    /// Fit points per drift model (jk, hca).
    pub fitpoints: u32,
    /// Ping-pongs per fit point (jk, hca); absent: the algorithm's default.
    pub exchanges: Option<u32>,
    /// Offset estimator; absent: the algorithm's own.
    pub estimator: Option<Estimator>,
    /// When to measure the residuals, seconds after the sync ends.
    pub check_after_s: Vec<f64>,
    /// Synchronizations, each with its checks, one after the other in the same
    /// job (the repetitions of a launch).
    pub reps: u32,
    /// Keep every repetition's duration and largest residual in the document
    /// (`samples`), for the statistics across launches (`ngauge run` sets it).
    pub samples: bool,
}

/// Most repetitions of a sync in one run.
pub const MAX_REPS: u32 = 1000;

impl Default for SyncSpec {
    fn default() -> Self {
        SyncSpec {
            sync: Algorithm::Hca,
            fitpoints: 1000,
            exchanges: None,
            estimator: None,
            check_after_s: vec![0.0, 1.0, 5.0],
            reps: 1,
            samples: false,
        }
    }
}

impl SyncSpec {
    /// The library's options for this spec.
    pub fn options(&self) -> SyncOptions {
        let defaults = SyncOptions::new(self.sync);
        SyncOptions {
            estimator: self.estimator,
            fitpoints: self.fitpoints as usize,
            exchanges: self.exchanges.map_or(defaults.exchanges, |e| e as usize),
            ..defaults
        }
    }

    /// Rejects options no sync can run with and check times outside
    /// `[0, 3600]` s.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        SpecError::range("reps", self.reps, 1, MAX_REPS.into())?;
        SpecError::range("fitpoints", self.fitpoints, 2, 1_000_000)?;
        if let Some(e) = self.exchanges {
            SpecError::range("exchanges", e, 1, 1_000_000)?;
        }
        if let Some(t) = self
            .check_after_s
            .iter()
            .find(|t| !(0.0..=MAX_CHECK_AFTER_S).contains(*t))
        {
            return Err(SpecError::new(
                "check_after_s",
                format!("{t} is not between 0 and {MAX_CHECK_AFTER_S} seconds"),
            ));
        }
        self.options()
            .validate()
            .map_err(|e| SpecError::new("sync", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_maps_to_options_with_the_algorithms_defaults() {
        let s: SyncSpec =
            serde_json::from_str(r#"{"sync": "jk", "check_after_s": [0.5]}"#).unwrap();
        let o = s.options();
        assert_eq!(o.algorithm, Algorithm::Jk);
        assert_eq!(o.exchanges, SyncOptions::new(Algorithm::Jk).exchanges);
        assert!(s.validate().is_ok());
        let s = SyncSpec {
            exchanges: Some(7),
            ..SyncSpec::default()
        };
        assert_eq!(s.options().exchanges, 7);
        let bad = SyncSpec {
            check_after_s: vec![0.0, -1.0],
            ..SyncSpec::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "check_after_s");
        let bad = SyncSpec {
            reps: 0,
            ..SyncSpec::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "reps");
        assert!(serde_json::from_str::<SyncSpec>(r#"{"sync": "ntp"}"#).is_err());
    }
}
