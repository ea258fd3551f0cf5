//! [`TimerSpec`]: what `ngauge timer` measures.

use super::SpecError;
use serde::{Deserialize, Serialize};

/// The parameters of the timer check (the flags of `ngauge timer`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct TimerSpec {
    /// Back-to-back reads timed for the read cost.
    pub reads: u64,
    /// Keep every read's cost in the document (`samples.overhead_ns`), for the
    /// statistics across launches (`ngauge run` sets it); at most
    /// [`MAX_SAMPLED_READS`] reads.
    pub samples: bool,
}

/// Most reads whose costs a document keeps (8 MB of memory, about 2 MB of JSON).
pub const MAX_SAMPLED_READS: u64 = 1_000_000;

impl Default for TimerSpec {
    fn default() -> Self {
        TimerSpec {
            reads: 1_000_000,
            samples: false,
        }
    }
}

impl TimerSpec {
    /// Rejects a read count outside `10..=10^8`, or over [`MAX_SAMPLED_READS`]
    /// with `samples`.
    ///
    /// # Errors
    /// `reads` out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        SpecError::range("reads", self.reads, 10, 100_000_000)?;
        self.validate_sampled(self.samples)
    }

    /// Rejects more reads than [`MAX_SAMPLED_READS`] when every read is to be kept
    /// (a suite keeps them whatever its file says).
    ///
    /// # Errors
    /// `reads` over the limit.
    pub fn validate_sampled(&self, samples: bool) -> Result<(), SpecError> {
        if samples && self.reads > MAX_SAMPLED_READS {
            return Err(SpecError::new(
                "reads",
                format!(
                    "at most {MAX_SAMPLED_READS} when every read's cost is kept (samples), \
                     got {}",
                    self.reads
                ),
            ));
        }
        Ok(())
    }
}
