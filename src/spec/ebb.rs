//! [`EbbSpec`]: what `ngauge ebb` measures (the effective bisection bandwidth,
//! [`crate::patterns::pairs::schedule::bisections`]).

use super::SpecError;
use crate::patterns::pingpong::Params;
use serde::{Deserialize, Serialize};

/// The parameters of an effective-bisection-bandwidth run (the flags of
/// `ngauge ebb`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct EbbSpec {
    /// Random bisections measured, one after the other.
    pub bisections: u64,
    /// Message size every pair streams, bytes.
    pub message_size: u64,
    /// Messages in flight per timed round.
    pub window: u64,
    /// Timed rounds per pair and bisection: every pair streams the same
    /// `reps * window * message_size` bytes.
    pub reps: u64,
    /// Untimed rounds before them.
    pub warmup: u64,
    /// Both ranks of a pair stream at once (Netgauge's ebb exchange).
    pub bidirectional: bool,
    /// Verify the payloads (outside the timed regions).
    pub check: bool,
    /// Seed of the bisections.
    pub seed: u64,
}

impl Default for EbbSpec {
    fn default() -> Self {
        EbbSpec {
            bisections: 20,
            message_size: 64 * 1024,
            window: 16,
            reps: 20,
            warmup: 2,
            bidirectional: false,
            check: false,
            seed: 1,
        }
    }
}

impl EbbSpec {
    /// Rejects what no run can measure.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        SpecError::range("bisections", self.bisections, 1, 100_000)?;
        SpecError::range("message_size", self.message_size, 1, 1 << 30)?;
        SpecError::range("window", self.window, 1, super::pingpong::MAX_WINDOW)?;
        SpecError::range("reps", self.reps, 1, 1_000_000)?;
        SpecError::range("warmup", self.warmup, 0, 1_000_000)
    }

    /// The parameters every pair streams with.
    pub fn params(&self) -> Params {
        Params {
            sizes: vec![self.message_size as usize],
            reps: self.reps as usize,
            warmup: self.warmup as usize,
            check: self.check,
            native_loop: false,
            samples: false,
            window: self.window as usize,
            stream: 0,
            bidirectional: self.bidirectional,
            precision: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_ranges() {
        let s: EbbSpec = serde_json::from_str(r#"{"bisections": 3}"#).unwrap();
        assert_eq!((s.bisections, s.window, s.message_size), (3, 16, 65536));
        assert!(s.validate().is_ok());
        assert!(serde_json::from_str::<EbbSpec>(r#"{"bisection": 3}"#).is_err());
        let bad = EbbSpec {
            bisections: 0,
            ..EbbSpec::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "bisections");
        assert_eq!(s.params().sizes, vec![65536]);
    }
}
