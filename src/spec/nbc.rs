//! [`NbcCmdSpec`]: what `ngauge nbc` measures (nonblocking-collective overhead and
//! overlap, [`crate::patterns::nbc`]).

use super::coll::WindowColl;
use super::{SizeList, SpecError};
use crate::patterns::nbc::Compute;
use serde::{Deserialize, Serialize};

/// Longest progress interval a spec may ask for, ns.
pub const MAX_TEST_EVERY_NS: f64 = 1e9;

/// The parameters of the nonblocking-collective benchmark (the flags of `ngauge
/// nbc`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NbcCmdSpec {
    /// The collective and its window timing.
    pub coll: WindowColl,
    /// Bytes per rank.
    pub sizes: SizeList,
    /// How the computation is measured out: `time` (until `t_pure` has passed),
    /// `work` (a workload calibrated to take `t_pure`); each is measured.
    pub compute: Vec<Compute>,
    /// Progress calls during the computation every this many ns, 0 for none; each
    /// is measured.
    pub test_every_ns: Vec<f64>,
}

impl Default for NbcCmdSpec {
    fn default() -> Self {
        NbcCmdSpec {
            coll: WindowColl::default(),
            sizes: SizeList(crate::sizes::parse_sizes("8-64K").expect("a valid spec")),
            compute: vec![Compute::Time],
            test_every_ns: vec![0.0],
        }
    }
}

impl NbcCmdSpec {
    /// Rejects what no run can do: the collective's faults, no computation
    /// scheme, no progress interval or one outside `[0, 1 s]`.
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.coll.validate()?;
        if self.compute.is_empty() {
            return Err(SpecError::new("compute", "give at least one scheme"));
        }
        let bad = self
            .test_every_ns
            .iter()
            .find(|t| !(0.0..=MAX_TEST_EVERY_NS).contains(*t));
        match (self.test_every_ns.is_empty(), bad) {
            (true, _) => Err(SpecError::new(
                "test_every_ns",
                "give at least one interval",
            )),
            (_, Some(t)) => Err(SpecError::new(
                "test_every_ns",
                format!("{t} ns is not between 0 (none) and 1 s"),
            )),
            _ => Ok(()),
        }
    }

    /// The points measured per size: every scheme with every progress interval
    /// (`None`: no progress calls).
    pub fn points(&self) -> Vec<(Compute, Option<f64>)> {
        let every = |t: f64| (t > 0.0).then_some(t);
        self.compute
            .iter()
            .flat_map(|&c| self.test_every_ns.iter().map(move |&t| (c, every(t))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_commands_and_fields_are_checked() {
        let s: NbcCmdSpec = toml::from_str(
            "sizes = \"8,4K\"\ncompute = [\"time\", \"work\"]\ntest_every_ns = [0, 1e4]\n\
             [coll]\nop = \"bcast\"\nalgo = \"chain\"\n",
        )
        .unwrap();
        assert!(s.validate().is_ok());
        assert_eq!(
            s.points(),
            [
                (Compute::Time, None),
                (Compute::Time, Some(1e4)),
                (Compute::Work, None),
                (Compute::Work, Some(1e4))
            ]
        );
        let d = NbcCmdSpec::default();
        assert_eq!((d.sizes.0.len(), d.points().len()), (14, 1));
        let field = |s: NbcCmdSpec| s.validate().unwrap_err().field;
        let mut s = d.clone();
        s.test_every_ns = vec![2e9];
        assert_eq!(field(s), "test_every_ns");
        let mut s = d.clone();
        s.compute.clear();
        assert_eq!(field(s), "compute");
        let mut s = d.clone();
        s.coll.algo = Some("ring".into());
        s.coll.op = crate::coll::Collective::Bcast;
        assert_eq!(field(s), "algo");
        assert!(toml::from_str::<NbcCmdSpec>("test_every = [0]\n").is_err());
    }
}
