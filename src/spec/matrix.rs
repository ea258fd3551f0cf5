//! [`MatrixSpec`]: what `ngauge matrix` measures (every ordered pair's latency
//! and bandwidth, [`crate::patterns::pairs`]).

use super::SpecError;
use crate::patterns::pingpong::Params;
use serde::{Deserialize, Serialize};

/// The parameters of an all-pairs matrix (the flags of `ngauge matrix`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct MatrixSpec {
    /// Message size of the latency matrix (ping-pong), bytes.
    pub latency_size: u64,
    /// Message size of the bandwidth matrix (streamed with `window`), bytes.
    pub bandwidth_size: u64,
    /// Messages in flight per timed bandwidth round.
    pub window: u64,
    /// Timed rounds per ordered pair and matrix.
    pub reps: u64,
    /// Untimed rounds before them.
    pub warmup: u64,
    /// Verify the payloads (outside the timed regions).
    pub check: bool,
    /// Measure one ordered pair at a time instead of rounds of disjoint pairs.
    pub one_at_a_time: bool,
    /// Seed of the pairing order.
    pub seed: u64,
    /// A link is named an outlier when it is this many times worse than the
    /// median of its placement class (and beyond 3.5 scaled MADs of it).
    pub outlier_factor: f64,
}

impl Default for MatrixSpec {
    fn default() -> Self {
        MatrixSpec {
            latency_size: 8,
            bandwidth_size: 64 * 1024,
            window: 16,
            reps: 50,
            warmup: 5,
            check: false,
            one_at_a_time: false,
            seed: 1,
            outlier_factor: 2.0,
        }
    }
}

impl MatrixSpec {
    /// Rejects what no matrix can measure.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        SpecError::range("latency_size", self.latency_size, 1, 1 << 30)?;
        SpecError::range("bandwidth_size", self.bandwidth_size, 1, 1 << 30)?;
        SpecError::range("window", self.window, 1, super::pingpong::MAX_WINDOW)?;
        SpecError::range("reps", self.reps, 1, 1_000_000)?;
        SpecError::range("warmup", self.warmup, 0, 1_000_000)?;
        if !(self.outlier_factor >= 1.0 && self.outlier_factor <= 1e6) {
            return Err(SpecError::new(
                "outlier_factor",
                format!("must be between 1 and 1000000, got {}", self.outlier_factor),
            ));
        }
        Ok(())
    }

    /// The pattern's parameters of the latency matrix (`bandwidth`: false) or
    /// of the bandwidth matrix.
    pub fn params(&self, bandwidth: bool) -> Params {
        let (size, window) = if bandwidth {
            (self.bandwidth_size, self.window)
        } else {
            (self.latency_size, 1)
        };
        Params {
            sizes: vec![size as usize],
            reps: self.reps as usize,
            warmup: self.warmup as usize,
            check: self.check,
            native_loop: false,
            samples: false,
            window: window as usize,
            stream: 0,
            bidirectional: false,
            precision: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_ranges() {
        let s: MatrixSpec = serde_json::from_str(r#"{"reps": 3}"#).unwrap();
        assert_eq!((s.reps, s.window, s.latency_size), (3, 16, 8));
        assert!(s.validate().is_ok());
        assert!(serde_json::from_str::<MatrixSpec>(r#"{"rep": 3}"#).is_err());
        let bad = MatrixSpec {
            outlier_factor: 0.5,
            ..MatrixSpec::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "outlier_factor");
        assert_eq!(s.params(true).window, 16);
        assert_eq!(s.params(false).window, 1);
    }
}
