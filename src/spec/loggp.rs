//! [`LoggpSpec`]: what `ngauge loggp` measures and how it fits (Hoefler et al.,
//! "LogGP in theory and practice", sec. 2: PRTT sweep and protocol-change
//! detection), and [`LoggpPlan`], the pattern's parameters and the assessment's
//! options that follow from it.

use super::{SizeList, SpecError};
use crate::model::changepoint::LookaheadOptions;
use crate::model::loggp::{AssessOptions, Detector, DetectorKind};
use crate::model::refine::RefineOptions;
use crate::model::segment::SegmentOptions;
use crate::model::sensitivity;
use crate::patterns::loggp::{default_sizes, DelayChoice, PairsMode, Params};
use crate::units::Nanos;
use serde::{Deserialize, Serialize};

/// The parameters of a LogGP measurement (the measuring flags of `ngauge loggp`;
/// its output files stay on the command line).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct LoggpSpec {
    /// Message sizes in bytes (at least 3, each at least 1); absent: powers of two
    /// below 1 KiB, then every 1 KiB up to 72 KiB (cut to the largest message every
    /// transport carries).
    pub sizes: Option<SizeList>,
    /// Messages per PRTT(n,.,s).
    pub n: u64,
    /// Timed repetitions of each PRTT per size, over all passes.
    pub reps: u64,
    /// Untimed round trips before each size (before the first at least
    /// `patterns::FIRST_SIZE_WARMUP`).
    pub warmup: u64,
    /// Measurements of a size at most.
    pub attempts: u64,
    /// Sweeps over all sizes, each in its own shuffled order when more than one,
    /// sharing `reps` between them (at most `reps` passes).
    pub passes: u64,
    /// Delay d of PRTT(n,d,s).
    pub dg: DelayChoice,
    /// With more than 2 ranks: pairs in turn or at once.
    pub pairs: PairsMode,
    /// Protocol-change detector.
    pub detector: DetectorKind,
    /// Look-ahead detector: points looked ahead.
    pub lookahead: u64,
    /// Look-ahead detector: factor every look-ahead deviation must exceed.
    pub pfact: f64,
    /// Noise floor of the look-ahead detector and the robust fits, us.
    pub floor_us: f64,
    /// Multiplier on the joint criterion's per-segment penalty.
    pub penalty: f64,
    /// Measure each candidate protocol change again in fresh interleaved passes
    /// before reporting it (lookahead and segmented detectors).
    pub confirm: bool,
    /// Bisect confirmed changes to the first byte of the new protocol.
    pub refine: bool,
    /// Keep every timed repetition of each point in the document
    /// (`points[].samples`).
    pub samples: bool,
    /// A stretch of sizes is decided when no step of `PRTT(1,0,s)` above this
    /// percentage of it fits the run's data ([`crate::model::sensitivity`]).
    pub decide_target_pct: f64,
    /// Time to spend, per transport, re-measuring the boundaries of stretches
    /// whose floor is above the target, seconds (0: none). Absent:
    /// [`DEFAULT_DOUBT_BUDGET_S`], and at most as long as the run took until then
    /// (a short sweep keeps a short run) but at least [`MIN_CAPPED_DOUBT_BUDGET_S`];
    /// a time given is spent whole.
    pub doubt_budget_s: Option<f64>,
}

impl Default for LoggpSpec {
    fn default() -> Self {
        LoggpSpec {
            sizes: None,
            n: 10,
            reps: 50,
            warmup: 5,
            attempts: 3,
            passes: DEFAULT_PASSES,
            dg: DelayChoice::OneRtt,
            pairs: PairsMode::InTurn,
            detector: DetectorKind::Lookahead,
            lookahead: 5,
            pfact: 2.0,
            floor_us: 0.15,
            penalty: 2.0,
            confirm: true,
            refine: true,
            samples: false,
            decide_target_pct: sensitivity::DEFAULT_TARGET * 100.0,
            doubt_budget_s: None,
        }
    }
}

/// Default of [`LoggpSpec::passes`]: four shuffled passes of a quarter of the
/// repetitions each found every switch of `scripts/bench-detect` more often than
/// one ascending pass of them all, in the same time
/// (docs/findings/2026-12-01-tcp-segment-misses.md).
pub const DEFAULT_PASSES: u64 = 4;

/// Default of [`LoggpSpec::doubt_budget_s`], seconds (then at most as long as
/// the run took until then).
pub const DEFAULT_DOUBT_BUDGET_S: f64 = 3.0;

/// The least the default doubt budget is cut to, seconds: a sweep of small
/// messages takes 0.05-0.3 s, and a switch that only the doubt rounds find
/// needs its boundary judged and then opened again for more passes, beside
/// the other boundaries in doubt, before the budget is spent
/// (docs/findings/2026-12-02-round-reps.md).
pub const MIN_CAPPED_DOUBT_BUDGET_S: f64 = 1.5;

/// What a [`LoggpSpec`] asks of the pattern and the model.
#[derive(Clone, Debug)]
pub struct LoggpPlan {
    /// The PRTT sweep.
    pub params: Params,
    /// Sweeps over all sizes, pooled per size ([`crate::patterns::order`]).
    pub passes: usize,
    /// How the LogGP parameters are assessed.
    pub assess: AssessOptions,
    /// How candidate changes are measured again; `None`: reported as detected.
    pub refine: Option<RefineOptions>,
    /// Fraction of `PRTT(1,0,s)` below which a stretch must exclude steps to be
    /// decided ([`crate::model::sensitivity`]).
    pub decide_target: f64,
    /// Time to spend re-measuring doubtful boundaries, ns (0: none; without
    /// confirmation, none).
    pub doubt_budget: Nanos,
    /// Whether `doubt_budget` is the default, which the run's time so far caps
    /// (a budget the spec gives is spent whole).
    pub doubt_budget_capped: bool,
}

impl LoggpSpec {
    /// Checks the spec and derives the plan.
    ///
    /// # Errors
    /// The first field no measurement can use.
    pub fn plan(&self) -> Result<LoggpPlan, SpecError> {
        let sizes = match &self.sizes {
            None => default_sizes(),
            Some(SizeList(sizes)) => {
                let mut sizes = sizes.clone();
                sizes.sort_unstable();
                sizes.dedup();
                if sizes.first() == Some(&0) {
                    return Err(SpecError::new(
                        "sizes",
                        "message sizes must be at least 1 byte",
                    ));
                }
                if sizes.len() < 3 {
                    return Err(SpecError::new(
                        "sizes",
                        format!(
                            "LogGP fits need at least 3 distinct sizes, got {}",
                            sizes.len()
                        ),
                    ));
                }
                sizes
            }
        };
        SpecError::range("n", self.n, 2, 100_000)?;
        SpecError::range("reps", self.reps, 1, 1_000_000)?;
        SpecError::range("attempts", self.attempts, 1, 100)?;
        SpecError::range("passes", self.passes, 1, 100)?;
        SpecError::range("lookahead", self.lookahead, 1, 1000)?;
        for (field, v) in [
            ("pfact", self.pfact),
            ("floor_us", self.floor_us),
            ("penalty", self.penalty),
            ("decide_target_pct", self.decide_target_pct),
            (
                "doubt_budget_s",
                self.doubt_budget_s.unwrap_or(DEFAULT_DOUBT_BUDGET_S),
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SpecError::new(
                    field,
                    format!("must be a non-negative number, got {v}"),
                ));
            }
        }
        let lookahead = LookaheadOptions {
            lookahead: self.lookahead as usize,
            pfact: self.pfact,
            floor: self.floor_us,
            ..LookaheadOptions::default()
        };
        let detector = match self.detector {
            DetectorKind::Lookahead => Detector::Lookahead(
                lookahead,
                SegmentOptions {
                    penalty_factor: self.penalty,
                    ..SegmentOptions::default()
                },
            ),
            DetectorKind::Paper => Detector::Paper(lookahead),
            DetectorKind::Segmented => Detector::Segmented(SegmentOptions {
                penalty_factor: self.penalty,
                noise_floor: self.floor_us,
            }),
            DetectorKind::None => Detector::None,
        };
        Ok(LoggpPlan {
            params: Params {
                sizes,
                n: self.n as usize,
                reps: self.reps as usize,
                warmup: self.warmup as usize,
                warm: false,
                delay: self.dg,
                pairs: self.pairs,
                attempts: self.attempts as usize,
            },
            passes: self.passes.min(self.reps) as usize,
            decide_target: self.decide_target_pct / 100.0,
            doubt_budget: Nanos(self.doubt_budget_s.unwrap_or(DEFAULT_DOUBT_BUDGET_S) * 1e9),
            doubt_budget_capped: self.doubt_budget_s.is_none(),
            // The paper's detector stays as Netgauge runs it; no detector, no changes.
            refine: match self.detector {
                DetectorKind::Lookahead | DetectorKind::Segmented if self.confirm => {
                    Some(RefineOptions {
                        locate: self.refine,
                        ..RefineOptions::default()
                    })
                }
                _ => None,
            },
            assess: AssessOptions {
                n: self.n as usize,
                detector,
                noise_floor_us: self.floor_us.max(1e-6),
                ..AssessOptions::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_plans_the_sweep_and_names_the_field_it_refuses() {
        let s: LoggpSpec = serde_json::from_str(
            r#"{"sizes": "1-24K:2K", "reps": 15, "dg": "2rtt", "detector": "segmented"}"#,
        )
        .unwrap();
        let p = s.plan().unwrap();
        assert_eq!(p.params.sizes.len(), 13);
        assert_eq!((p.params.reps, p.params.n), (15, 10));
        assert_eq!(p.params.delay, DelayChoice::TwoRtt);
        assert_eq!(p.assess.detector.kind(), DetectorKind::Segmented);
        assert_eq!(
            LoggpSpec::default().plan().unwrap().params.sizes,
            default_sizes()
        );
        let err = |s: LoggpSpec| s.plan().unwrap_err().field;
        let two = LoggpSpec {
            sizes: Some(SizeList(vec![1, 2])),
            ..LoggpSpec::default()
        };
        assert_eq!(err(two), "sizes");
        assert_eq!(
            err(LoggpSpec {
                floor_us: -1.0,
                ..LoggpSpec::default()
            }),
            "floor_us"
        );
        assert_eq!(
            err(LoggpSpec {
                n: 1,
                ..LoggpSpec::default()
            }),
            "n"
        );
        assert_eq!(
            err(LoggpSpec {
                doubt_budget_s: Some(-1.0),
                ..LoggpSpec::default()
            }),
            "doubt_budget_s"
        );
    }

    /// Without a budget the plan has the default one, capped by the run's time
    /// so far; a budget given is the plan's, uncapped.
    #[test]
    fn a_given_doubt_budget_is_spent_whole_and_the_default_is_capped() {
        let p = LoggpSpec::default().plan().unwrap();
        assert_eq!(p.doubt_budget, Nanos(DEFAULT_DOUBT_BUDGET_S * 1e9));
        assert!(p.doubt_budget_capped);
        let s: LoggpSpec = serde_json::from_str(r#"{"doubt_budget_s": 20}"#).unwrap();
        let p = s.plan().unwrap();
        assert_eq!(p.doubt_budget, Nanos(20e9));
        assert!(!p.doubt_budget_capped);
    }
}
