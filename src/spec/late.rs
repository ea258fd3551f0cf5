//! [`LateCmdSpec`]: what `ngauge late` measures (late arrivals and the delay
//! overlap benefit of Niethammer et al., [`crate::patterns::late`]).

use super::coll::{by_name, display, WindowColl};
use super::{SizeList, SpecError};
use crate::patterns::late::{CallMode, DelayedRanks};
use crate::patterns::noise::NoiseInjection;
use serde::{Deserialize, Serialize};

/// Longest delay a spec may ask for, ns.
pub const MAX_DELAY_NS: f64 = 10e9;

/// The parameters of the late-arrival benchmark (the flags of `ngauge late`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LateCmdSpec {
    /// The collective and its window timing.
    pub coll: WindowColl,
    /// Bytes per rank.
    pub sizes: SizeList,
    /// The delays `d` to sweep, ns (the undelayed calls, `t0`, are measured in
    /// any case).
    pub delay_ns: Vec<f64>,
    /// The ranks that enter late: a list (`"0,3"`), `"last"`, `"random"` or
    /// `"random:SEED"`.
    #[serde(serialize_with = "display", deserialize_with = "by_name")]
    pub delayed_ranks: DelayedRanks,
    /// How each call is made: `blocking`, `nonblocking` (start, then wait at once).
    pub mode: Vec<CallMode>,
    /// Noise injected into `inject_rank`'s schedules while it measures.
    pub inject: Option<NoiseInjection>,
    /// The rank `inject` disturbs.
    pub inject_rank: usize,
}

impl Default for LateCmdSpec {
    fn default() -> Self {
        LateCmdSpec {
            coll: WindowColl::default(),
            sizes: SizeList(vec![8]),
            delay_ns: vec![0.0, 50e3, 500e3],
            delayed_ranks: DelayedRanks::List(vec![0]),
            mode: vec![CallMode::Blocking],
            inject: None,
            inject_rank: 0,
        }
    }
}

impl LateCmdSpec {
    /// Rejects what no run can do: the collective's faults, delays outside
    /// `[0, 10 s]`, no call mode, an injection whose detours do not fit their
    /// period.
    ///
    /// # Errors
    /// The first field that is wrong (the collective's as `coll.FIELD`'s own name).
    pub fn validate(&self) -> Result<(), SpecError> {
        self.coll.validate()?;
        if let Some(d) = self
            .delay_ns
            .iter()
            .find(|d| !(0.0..=MAX_DELAY_NS).contains(*d))
        {
            return Err(SpecError::new(
                "delay_ns",
                format!("{d} ns is not between 0 and 10 s"),
            ));
        }
        if self.mode.is_empty() {
            return Err(SpecError::new("mode", "give at least one call mode"));
        }
        if let Some(inject) = &self.inject {
            inject
                .validate()
                .map_err(|e| SpecError::new("inject", e.to_string()))?;
        }
        Ok(())
    }

    /// Rejects what the job over `transports` (of `np` ranks, when known) cannot
    /// run ([`WindowColl::validate_for_job`]; noise reaches inside ngauge's
    /// schedules only; the delayed and the injected rank must be ranks of it).
    /// Returns the delayed ranks (none without `np`).
    ///
    /// # Errors
    /// The first field that is wrong.
    pub fn validate_for_job(
        &self,
        transports: &[crate::job::TransportName],
        np: Option<usize>,
    ) -> Result<Vec<usize>, SpecError> {
        let (_, imp) = self.coll.validate_for_job(transports, np, &self.sizes.0)?;
        if self.inject.is_some() && imp == super::coll::CollImpl::Mpi {
            return Err(SpecError::new(
                "inject",
                "noise reaches inside ngauge's own schedules only; MPI's collectives are \
                 opaque (use algo with one of ours)",
            ));
        }
        let Some(np) = np else {
            return Ok(Vec::new());
        };
        if self.inject_rank >= np {
            return Err(SpecError::new(
                "inject_rank",
                format!("{} is not a rank of a job of {np} ranks", self.inject_rank),
            ));
        }
        (self.delayed_ranks.resolve(np)).map_err(|e| SpecError::new("delayed_ranks", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::TransportName;

    #[test]
    fn defaults_are_the_commands_and_fields_are_checked() {
        let s: LateCmdSpec = toml::from_str(
            "delay_ns = [0, 5e4]\ndelayed_ranks = \"random:7\"\nmode = [\"nonblocking\"]\n\
             [coll]\nop = \"barrier\"\nreps = 5\n",
        )
        .unwrap();
        assert_eq!(s.delayed_ranks, DelayedRanks::Random { seed: 7 });
        assert_eq!((s.coll.reps, s.coll.warmup), (5, 10));
        assert_eq!(s.sizes.0, [8]);
        assert!(s.validate().is_ok());
        let back: LateCmdSpec = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let tcp = [TransportName::Tcp];
        assert_eq!(s.validate_for_job(&tcp, Some(3)).unwrap().len(), 1);
        let field = |s: LateCmdSpec, np| s.validate().and(s.validate_for_job(&tcp, np).map(|_| ()));
        let bad = |f: fn(&mut LateCmdSpec)| {
            let mut s = LateCmdSpec::default();
            f(&mut s);
            field(s, Some(2)).unwrap_err().field
        };
        assert_eq!(bad(|s| s.delay_ns = vec![11e9]), "delay_ns");
        assert_eq!(bad(|s| s.mode.clear()), "mode");
        assert_eq!(bad(|s| s.coll.reps = 0), "reps");
        assert_eq!(
            bad(|s| s.delayed_ranks = DelayedRanks::List(vec![5])),
            "delayed_ranks"
        );
        assert_eq!(bad(|s| s.coll.root = 2), "root");
        assert_eq!(
            bad(|s| {
                s.inject = Some(NoiseInjection {
                    period_ns: 1e6,
                    duration_ns: 1e4,
                });
                s.inject_rank = 4;
            }),
            "inject_rank"
        );
        // Without --inject too: a rank the job does not have is a mistake either way.
        assert_eq!(bad(|s| s.inject_rank = 4), "inject_rank");
        assert_eq!(bad(|s| s.coll.algo = Some("mpi".into())), "algo");
        let two = [TransportName::Tcp, TransportName::Udp];
        let e = LateCmdSpec::default().validate_for_job(&two, None);
        assert_eq!(e.unwrap_err().field, "transport");
        assert!(toml::from_str::<LateCmdSpec>("delay = [0]\n").is_err());
        assert!(toml::from_str::<LateCmdSpec>("[coll]\nrepz = 3\n").is_err());
    }
}
