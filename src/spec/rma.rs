//! [`RmaSpec`]: what `ngauge rma` measures (one-sided latency and bandwidth,
//! [`crate::patterns::rma`]).

use super::{SizeList, SpecError};
use crate::patterns::rma::{Op, Params, RmaSync};
use serde::{Deserialize, Serialize};

/// Most timed (or untimed) operations per point.
pub const MAX_REPS: u64 = 100_000_000;
/// Most puts per `put-bw` round.
pub const MAX_WINDOW: u64 = 4096;

/// The parameters of the one-sided benchmark (the flags of `ngauge rma`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RmaSpec {
    /// Payload sizes in bytes (accumulate takes the multiples of 8 among them;
    /// fetch-add is 8 bytes).
    pub sizes: SizeList,
    /// Operations: `put`, `get`, `put-bw`, `put-notify`, `accumulate`, `fetch-add`.
    pub ops: Vec<Op>,
    /// Synchronizations: `flush` (passive target), `fence` (active target; put and
    /// get only).
    pub sync: Vec<RmaSync>,
    /// Timed operations per point.
    pub reps: u64,
    /// Untimed operations first, per point.
    pub warmup: u64,
    /// Puts per timed round of `put-bw`.
    pub window: u64,
    /// Verify the data of put and fetch-add (outside the timed regions).
    pub check: bool,
}

impl Default for RmaSpec {
    fn default() -> Self {
        RmaSpec {
            sizes: SizeList(crate::sizes::parse_sizes("1-1M").expect("a valid spec")),
            ops: Op::ALL.to_vec(),
            sync: vec![RmaSync::Flush, RmaSync::Fence],
            reps: 1000,
            warmup: 100,
            window: 64,
            check: false,
        }
    }
}

impl RmaSpec {
    /// Rejects what no run can do: no operation or synchronization, a size of
    /// 2 GiB or more, repetitions or a window out of range.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.ops.is_empty() {
            return Err(SpecError::new("ops", "give at least one operation"));
        }
        if self.sync.is_empty() {
            return Err(SpecError::new("sync", "give at least one synchronization"));
        }
        if self.sizes.0.iter().any(|&s| s > i32::MAX as u64) {
            return Err(SpecError::new("sizes", "at most 2G-1 bytes per operation"));
        }
        if !(1..=MAX_REPS).contains(&self.reps) {
            return Err(SpecError::new("reps", format!("between 1 and {MAX_REPS}")));
        }
        if self.warmup > MAX_REPS {
            return Err(SpecError::new("warmup", format!("at most {MAX_REPS}")));
        }
        if !(1..=MAX_WINDOW).contains(&self.window) {
            return Err(SpecError::new(
                "window",
                format!("between 1 and {MAX_WINDOW}"),
            ));
        }
        Ok(())
    }

    /// The pattern's parameters (synchronizations in the order measured: the
    /// flush points first).
    pub fn params(&self) -> Params {
        let mut syncs = self.sync.clone();
        syncs.sort();
        syncs.dedup();
        Params {
            ops: self.ops.clone(),
            syncs,
            sizes: self.sizes.0.iter().map(|&s| s as usize).collect(),
            reps: self.reps as usize,
            warmup: self.warmup as usize,
            window: self.window as usize,
            check: self.check,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_table_gives_the_params_and_the_defaults_are_the_flags() {
        let s: RmaSpec = toml::from_str(
            "sizes = \"8,1K\"\nops = [\"put\", \"fetch-add\"]\nsync = [\"fence\", \"flush\"]\n\
             reps = 20\ncheck = true\n",
        )
        .unwrap();
        s.validate().unwrap();
        let p = s.params();
        assert_eq!(p.ops, [Op::Put, Op::FetchAdd]);
        assert_eq!(p.syncs, [RmaSync::Flush, RmaSync::Fence]);
        assert_eq!(p.sizes, [8, 1024]);
        assert_eq!((p.reps, p.warmup, p.window, p.check), (20, 100, 64, true));
        let d = RmaSpec::default();
        assert_eq!(d.sizes.0.first(), Some(&1));
        assert_eq!(d.sizes.0.last(), Some(&(1 << 20)));
        assert_eq!(d.ops.len(), 6);
    }

    #[test]
    fn empty_lists_and_ranges_name_their_field() {
        let field = |s: RmaSpec| s.validate().unwrap_err().field;
        let d = RmaSpec::default();
        assert_eq!(
            field(RmaSpec {
                ops: vec![],
                ..d.clone()
            }),
            "ops"
        );
        assert_eq!(
            field(RmaSpec {
                sync: vec![],
                ..d.clone()
            }),
            "sync"
        );
        assert_eq!(
            field(RmaSpec {
                reps: 0,
                ..d.clone()
            }),
            "reps"
        );
        assert_eq!(
            field(RmaSpec {
                window: 0,
                ..d.clone()
            }),
            "window"
        );
        let big = SizeList(vec![1 << 31]);
        assert_eq!(field(RmaSpec { sizes: big, ..d }), "sizes");
        assert!(toml::from_str::<RmaSpec>("ops = [\"putt\"]\n").is_err());
        assert!(toml::from_str::<RmaSpec>("windows = 3\n").is_err());
    }
}
