//! [`TimerSpec`]: what `ngauge timer` measures.

use super::SpecError;
use serde::{Deserialize, Serialize};

/// The parameters of the timer check (the flags of `ngauge timer`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimerSpec {
    /// Back-to-back reads timed for the read cost.
    pub reads: u64,
}

impl Default for TimerSpec {
    fn default() -> Self {
        TimerSpec { reads: 1_000_000 }
    }
}

impl TimerSpec {
    /// Rejects a read count outside `10..=10^8`.
    ///
    /// # Errors
    /// `reads` out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !(10..=100_000_000).contains(&self.reads) {
            return Err(SpecError::new(
                "reads",
                format!("must be between 10 and 100000000, got {}", self.reads),
            ));
        }
        Ok(())
    }
}
