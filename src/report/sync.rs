//! The document of `ngauge sync`: how long the synchronization took and how far
//! each rank's global time was off at each check.

use super::warning::Warned;
use super::Meta;
use crate::job::TransportName;
use crate::sync::pairwise::DriftRejection;
use crate::sync::{Algorithm, Estimator};
use ngauge_transport::WaitMode;
use serde::{Deserialize, Serialize};

/// One rank's findings, gathered at rank 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankReport {
    /// The rank.
    pub rank: usize,
    /// Estimated `local - global` at the end of the sync.
    pub offset_ns: f64,
    /// Estimated rate error relative to rank 0.
    pub drift_ppm: f64,
    /// Measured global-time error at each check (`global_r - global_0`).
    pub residual_ns: Vec<f64>,
    /// Round trip of the exchange each residual comes from (its error bound is half).
    pub residual_rtt_ns: Vec<f64>,
    /// True global-time error at each check, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_residual_ns: Option<Vec<f64>>,
    /// True `local - global` at the end of the sync, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_offset_ns: Option<f64>,
    /// True rate error relative to rank 0, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub true_drift_ppm: Option<f64>,
    /// Ping-pongs this rank took part in during the sync.
    pub sync_exchanges: usize,
    /// SKaMPI brackets whose bounds crossed (drift or a clock jump during the
    /// measurement), replaced by min-RTT measurements.
    #[serde(default)]
    pub crossed_brackets: usize,
    /// A drift this rank fitted and did not keep (the largest, if several): its
    /// model keeps the offset only (`jk`, `hca`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_drift: Option<DroppedDriftReport>,
    /// The rank's pinned core, if pinned.
    pub pinned_core: Option<usize>,
}

/// `ngauge sync --json`.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct SyncDoc {
    /// The algorithm.
    pub algo: Algorithm,
    /// Number of ranks.
    pub np: usize,
    /// The data transport of the exchanges.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// The offset estimator (all but `jk`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimator: Option<Estimator>,
    /// Fit points per drift model (`jk`, `hca`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitpoints: Option<usize>,
    /// Ping-pongs per fit point (`jk`, `hca`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchanges: Option<usize>,
    /// Rank 0's time from the opening to the closing barrier of the sync.
    pub duration_us: f64,
    /// When the residuals were measured, seconds after the sync.
    pub check_after_s: Vec<f64>,
    /// The injected test skew (`NGAUGE_TEST_CLOCK_SKEW`), if any.
    pub injected_skew: Option<String>,
    /// How the true residuals are known (absent when they are not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth: Option<String>,
    /// Per check, the largest measured residual of any rank.
    pub max_abs_residual_ns: Vec<f64>,
    /// Per check, the largest true residual of any rank, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_abs_true_residual_ns: Option<Vec<f64>>,
    /// Every rank.
    pub ranks: Vec<RankReport>,
    /// Synchronizations run one after the other, each with its checks; the
    /// fields above are the first one's.
    pub reps: u32,
    /// Every repetition's duration and largest residual (`--samples`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<SyncSamples>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<SyncWarning>>,
    /// How the result came about.
    pub meta: Meta,
}

/// The repetitions of a sync, in the order run.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SyncSamples {
    /// Rank 0's time from the opening to the closing barrier of each sync.
    pub duration_us: Vec<f64>,
    /// Per repetition, the largest measured residual of any rank at any check.
    pub max_abs_residual_ns: Vec<f64>,
}

/// A fitted drift that a rank's model does not use
/// ([`crate::sync::pairwise::fit_model`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DroppedDriftReport {
    /// The slope the fit returned.
    pub fitted_ppm: f64,
    /// Its standard error.
    pub stderr_ppm: f64,
    /// Time from the first to the last fit point.
    pub fit_span_us: f64,
    /// Fit points.
    pub fitpoints: usize,
    /// Drift fits on this rank that were dropped.
    pub fits_dropped: usize,
    /// Why this one was dropped.
    pub reason: DriftRejection,
}

/// Brackets that crossed on one rank.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Crossed {
    /// The rank.
    pub rank: usize,
    /// Its crossed brackets.
    pub brackets: usize,
}

/// What `sync` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SyncWarning {
    /// SKaMPI brackets crossed (the clock jumped or drifted fast during the
    /// measurement); min-RTT measured those offsets instead.
    CrossedBrackets {
        /// Where.
        ranks: Vec<Crossed>,
    },
    /// The residuals at the last check exceed [`LARGE_RESIDUAL_NS`].
    LargeResidual {
        /// The largest residual, ns.
        max_abs_ns: f64,
        /// When it was measured, seconds after the sync.
        after_s: f64,
        /// The algorithm.
        algo: Algorithm,
    },
    /// Drift fits whose slope was not kept: those ranks' models keep the offset
    /// only, so their error grows with any real drift.
    DroppedDrift {
        /// The ranks, with what their fit saw.
        ranks: Vec<DroppedDriftAt>,
    },
    /// Two measured ranks share a core, or some are pinned and some not.
    #[serde(untagged)]
    Binding(crate::launch::binding::BindingWarning),
}

/// A dropped drift on one rank.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DroppedDriftAt {
    /// The rank.
    pub rank: usize,
    /// What its fit saw.
    #[serde(flatten)]
    pub drift: DroppedDriftReport,
}

/// A residual worth a warning, ns.
pub const LARGE_RESIDUAL_NS: f64 = 10_000.0;

impl std::fmt::Display for SyncWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncWarning::Binding(w) => w.fmt(f),
            SyncWarning::CrossedBrackets { ranks } => write!(
                f,
                "SKaMPI brackets crossed (the clock jumped or drifted fast during the \
                 measurement) on {}; min-RTT measured those offsets instead",
                ranks
                    .iter()
                    .map(|c| format!("rank {} ({})", c.rank, c.brackets))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SyncWarning::DroppedDrift { ranks } => write!(
                f,
                "drift fits too noisy to keep, models use offsets only: {}",
                ranks
                    .iter()
                    .map(|r| {
                        let d = &r.drift;
                        let why = match d.reason {
                            DriftRejection::Unresolved => "not resolved",
                            DriftRejection::Implausible => "beyond 1000 ppm",
                        };
                        format!(
                            "rank {} ({:.0} +- {:.0} ppm from {} points over {}, {why})",
                            r.rank,
                            d.fitted_ppm,
                            d.stderr_ppm,
                            d.fitpoints,
                            duration_label(d.fit_span_us)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SyncWarning::LargeResidual {
                max_abs_ns,
                after_s,
                algo,
            } => {
                write!(
                    f,
                    "residuals reach {:.1} us after {}",
                    max_abs_ns / 1e3,
                    seconds_label(*after_s)
                )?;
                if !algo.models_drift() {
                    write!(f, ": {algo} models no drift")?;
                }
                Ok(())
            }
        }
    }
}

/// `850us`, `4.7ms`, `1.25s`.
fn duration_label(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0}us")
    } else if us < 1e6 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// `0s`, `250ms`, `5s`.
pub fn seconds_label(s: f64) -> String {
    if s == 0.0 || s >= 1.0 {
        format!("{s}s")
    } else {
        format!("{}ms", s * 1e3)
    }
}

impl SyncDoc {
    /// The warnings about this document's figures.
    pub fn find_warnings(&self) -> Vec<SyncWarning> {
        let mut w = Vec::new();
        let crossed: Vec<Crossed> = self
            .ranks
            .iter()
            .filter(|r| r.crossed_brackets > 0)
            .map(|r| Crossed {
                rank: r.rank,
                brackets: r.crossed_brackets,
            })
            .collect();
        if !crossed.is_empty() {
            w.push(SyncWarning::CrossedBrackets { ranks: crossed });
        }
        let dropped: Vec<DroppedDriftAt> = self
            .ranks
            .iter()
            .filter_map(|r| {
                r.dropped_drift.clone().map(|drift| DroppedDriftAt {
                    rank: r.rank,
                    drift,
                })
            })
            .collect();
        if !dropped.is_empty() {
            w.push(SyncWarning::DroppedDrift { ranks: dropped });
        }
        if let Some(&last) = self.max_abs_residual_ns.last() {
            if last > LARGE_RESIDUAL_NS {
                w.push(SyncWarning::LargeResidual {
                    max_abs_ns: last,
                    after_s: *self.check_after_s.last().unwrap_or(&0.0),
                    algo: self.algo,
                });
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rank: usize, crossed_brackets: usize) -> RankReport {
        RankReport {
            rank,
            offset_ns: 0.0,
            drift_ppm: 0.0,
            residual_ns: vec![0.0],
            residual_rtt_ns: vec![0.0],
            true_residual_ns: None,
            true_offset_ns: None,
            true_drift_ppm: None,
            sync_exchanges: 1,
            crossed_brackets,
            dropped_drift: None,
            pinned_core: None,
        }
    }

    fn doc(algo: Algorithm, last_residual_ns: f64, ranks: Vec<RankReport>) -> SyncDoc {
        SyncDoc {
            algo,
            np: ranks.len(),
            transport: TransportName::Tcp,
            wait: WaitMode::Block,
            estimator: None,
            fitpoints: None,
            exchanges: None,
            duration_us: 1.0,
            check_after_s: vec![0.0, 5.0],
            injected_skew: None,
            truth: None,
            max_abs_residual_ns: vec![10.0, last_residual_ns],
            max_abs_true_residual_ns: None,
            ranks,
            reps: 1,
            samples: None,
            warnings: Vec::new(),
            meta: Meta::builder(Vec::new(), crate::clock::TimerSource::Rdtscp, 1e9)
                .frequency_control("test")
                .build(),
        }
    }

    #[test]
    fn warnings_follow_the_figures() {
        let quiet = doc(Algorithm::Hca, 100.0, vec![report(0, 0), report(1, 0)]);
        assert!(quiet.find_warnings().is_empty());
        let bad = doc(Algorithm::Linear, 2e4, vec![report(0, 0), report(1, 3)]);
        let w = bad.find_warnings();
        assert_eq!(
            w,
            [
                SyncWarning::CrossedBrackets {
                    ranks: vec![Crossed {
                        rank: 1,
                        brackets: 3
                    }]
                },
                SyncWarning::LargeResidual {
                    max_abs_ns: 2e4,
                    after_s: 5.0,
                    algo: Algorithm::Linear
                }
            ]
        );
        assert!(w[0].to_string().contains("on rank 1 (3)"), "{}", w[0]);
    }

    #[test]
    fn check_time_labels() {
        assert_eq!(seconds_label(0.0), "0s");
        assert_eq!(seconds_label(0.25), "250ms");
        assert_eq!(seconds_label(5.0), "5s");
    }
}
