//! The document of `ngauge sync`: how long the synchronization took and how far
//! each rank's global time was off at each check.

use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::sync::pairwise::DriftRejection;
use crate::sync::{Algorithm, Effort, Estimator};
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
    /// What its synchronization did: `sync_exchanges`, `crossed_brackets`,
    /// `dropped_drift`.
    #[serde(flatten)]
    pub effort: EffortReport,
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
    /// The rank the fit was against (rank 0 for `jk`, a tree neighbour for `hca`).
    pub peer: usize,
    /// Why this one was dropped.
    pub reason: DriftRejection,
}

/// What one rank's synchronization did, and what went wrong on the way
/// ([`Effort`] in a document's units): in `sync`'s `ranks[]`, and in the
/// `sync.ranks[]` of every document timed with synchronized clocks ([`ClockSync`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EffortReport {
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
}

impl EffortReport {
    /// `effort` of a rank whose clock ticks at `hz` per second.
    pub fn new(effort: &Effort, hz: f64) -> Self {
        EffortReport {
            sync_exchanges: effort.exchanges,
            crossed_brackets: effort.crossed_brackets,
            dropped_drift: effort.dropped_drift.map(|d| DroppedDriftReport {
                fitted_ppm: d.fitted * 1e6,
                stderr_ppm: d.stderr * 1e6,
                fit_span_us: d.span_ticks as f64 / hz * 1e6,
                fitpoints: d.points,
                fits_dropped: effort.drifts_dropped,
                peer: d.peer,
                reason: d.reason,
            }),
        }
    }
}

/// One rank's synchronization in a document timed with synchronized clocks.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RankSync {
    /// The rank.
    pub rank: usize,
    /// What its synchronization did: `sync_exchanges`, `crossed_brackets`,
    /// `dropped_drift`, as in `sync`'s `ranks[]`.
    #[serde(flatten)]
    pub effort: EffortReport,
}

/// The clock synchronization the timings of a document rest on (`coll`'s window
/// scheme, `late`, `nbc`): per rank what `sync` reports of its effort, so that a
/// reader sees which ranks' models kept no drift.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ClockSync {
    /// The algorithm.
    pub algo: Algorithm,
    /// Every rank, in rank order.
    pub ranks: Vec<RankSync>,
}

impl ClockSync {
    /// The warnings its effort calls for: the same as `sync`'s.
    pub fn warnings(&self) -> Vec<EffortWarning> {
        effort_warnings(self.ranks.iter().map(|r| (r.rank, &r.effort)))
    }
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
    /// The residuals at the last check exceed [`LARGE_RESIDUAL_NS`].
    LargeResidual {
        /// The largest residual, ns.
        max_abs_ns: f64,
        /// When it was measured, seconds after the sync.
        after_s: f64,
        /// The algorithm.
        algo: Algorithm,
    },
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    Setup(SetupWarning),
}

/// What a synchronization's effort finds worth a warning: in `sync`'s document and
/// in every document whose timings rest on a synchronization (`coll`, `late`,
/// `nbc`), with the same kind, fields and words.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffortWarning {
    /// SKaMPI brackets crossed (the clock jumped or drifted fast during the
    /// measurement); min-RTT measured those offsets instead.
    CrossedBrackets {
        /// Where.
        ranks: Vec<Crossed>,
    },
    /// Drift fits whose slope was not kept: those ranks' models keep the offset
    /// only, so their error grows with any real drift.
    DroppedDrift {
        /// The ranks, with what their fit saw.
        ranks: Vec<DroppedDriftAt>,
    },
}

/// The warnings of every rank's effort, `(rank, effort)`: the ranks whose
/// brackets crossed, then the ranks whose drift fits were dropped.
pub fn effort_warnings<'a>(
    ranks: impl IntoIterator<Item = (usize, &'a EffortReport)>,
) -> Vec<EffortWarning> {
    let mut crossed = Vec::new();
    let mut dropped = Vec::new();
    for (rank, effort) in ranks {
        if effort.crossed_brackets > 0 {
            crossed.push(Crossed {
                rank,
                brackets: effort.crossed_brackets,
            });
        }
        if let Some(drift) = &effort.dropped_drift {
            dropped.push(DroppedDriftAt {
                rank,
                drift: drift.clone(),
            });
        }
    }
    let mut w = Vec::new();
    if !crossed.is_empty() {
        w.push(EffortWarning::CrossedBrackets { ranks: crossed });
    }
    if !dropped.is_empty() {
        w.push(EffortWarning::DroppedDrift { ranks: dropped });
    }
    w
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

impl std::fmt::Display for EffortWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EffortWarning::CrossedBrackets { ranks } => write!(
                f,
                "SKaMPI brackets crossed (the clock jumped or drifted fast during the \
                 measurement) on {}; min-RTT measured those offsets instead",
                ranks
                    .iter()
                    .map(|c| format!("rank {} ({})", c.rank, c.brackets))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            EffortWarning::DroppedDrift { ranks } => write!(
                f,
                "drift fits kept no drift: {}",
                ranks
                    .iter()
                    .map(|r| {
                        let d = &r.drift;
                        let why = match d.reason {
                            DriftRejection::Unresolved => "not resolved: within its error",
                            DriftRejection::Implausible => {
                                "beyond 1100 ppm: no clock drifts so fast"
                            }
                        };
                        format!(
                            "rank {} against rank {} ({} +- {} ppm from {} points over {}; {why})",
                            r.rank,
                            d.peer,
                            significant(d.fitted_ppm),
                            significant(d.stderr_ppm),
                            d.fitpoints,
                            duration_label(d.fit_span_us)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl std::fmt::Display for SyncWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncWarning::Setup(w) => w.fmt(f),
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

/// `x` with three significant digits: `25300`, `1.72`, `0.0172`.
fn significant(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
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
        let mut w: Vec<SyncWarning> =
            effort_warnings(self.ranks.iter().map(|r| (r.rank, &r.effort)))
                .into_iter()
                .map(|w| SyncWarning::Setup(w.into()))
                .collect();
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
            effort: EffortReport {
                sync_exchanges: 1,
                crossed_brackets,
                dropped_drift: None,
            },
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
                SyncWarning::Setup(SetupWarning::Sync(EffortWarning::CrossedBrackets {
                    ranks: vec![Crossed {
                        rank: 1,
                        brackets: 3
                    }]
                })),
                SyncWarning::LargeResidual {
                    max_abs_ns: 2e4,
                    after_s: 5.0,
                    algo: Algorithm::Linear
                }
            ]
        );
        assert!(w[0].to_string().contains("on rank 1 (3)"), "{}", w[0]);
    }

    /// A dropped drift is named on the rank that ran the fit, with its peer, the
    /// slope to three significant digits (a default fit's unresolved slope is a
    /// fraction of a ppm) and the reason.
    #[test]
    fn a_dropped_drift_is_a_warning_naming_rank_peer_and_reason() {
        let mut r2 = report(2, 0);
        r2.effort.dropped_drift = Some(DroppedDriftReport {
            fitted_ppm: 0.0172,
            stderr_ppm: 0.03,
            fit_span_us: 4700.0,
            fitpoints: 10,
            fits_dropped: 1,
            reason: DriftRejection::Unresolved,
            peer: 1,
        });
        let w = doc(Algorithm::Hca, 100.0, vec![report(0, 0), report(1, 0), r2]).find_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        let text = w[0].to_string();
        assert!(
            text.contains("rank 2 against rank 1 (0.0172 +- 0.0300 ppm from 10 points over 4.7ms; not resolved"),
            "{text}"
        );
        assert_eq!(significant(25343.9), "25344");
        assert_eq!(significant(-1.7234), "-1.72");
        assert_eq!(significant(0.0), "0");
    }

    /// A rank's effort of 10 fit points over 2.6 million ticks at 2.6 GHz whose
    /// slope of 20 ppm was not resolved: the report has it in ppm and us.
    fn dropped_effort() -> Effort {
        Effort {
            exchanges: 20,
            crossed_brackets: 2,
            drifts_dropped: 1,
            dropped_drift: Some(crate::sync::pairwise::DroppedDrift {
                fitted: 20e-6,
                stderr: 15e-6,
                span_ticks: 2_600_000,
                points: 10,
                reason: DriftRejection::Unresolved,
                peer: 0,
            }),
        }
    }

    #[test]
    fn an_effort_is_reported_in_ppm_and_us() {
        let r = EffortReport::new(&dropped_effort(), 2.6e9);
        assert_eq!(r.sync_exchanges, 20);
        assert_eq!(r.crossed_brackets, 2);
        let d = r.dropped_drift.unwrap();
        assert!((d.fitted_ppm - 20.0).abs() < 1e-9, "{d:?}");
        assert!((d.stderr_ppm - 15.0).abs() < 1e-9, "{d:?}");
        assert!((d.fit_span_us - 1000.0).abs() < 1e-9, "{d:?}");
        assert_eq!((d.fitpoints, d.fits_dropped, d.peer), (10, 1, 0));
        assert_eq!(
            EffortReport::new(&Effort::exchanges(7), 1e9).dropped_drift,
            None
        );
    }

    /// The documents timed with synchronized clocks warn about a dropped drift
    /// and crossed brackets in `sync`'s words, per rank.
    #[test]
    fn a_clock_sync_warns_as_sync_does() {
        let quiet = EffortReport::new(&Effort::exchanges(20), 2.6e9);
        let dropped = EffortReport::new(&dropped_effort(), 2.6e9);
        let clock_sync = ClockSync {
            algo: Algorithm::Hca,
            ranks: vec![
                RankSync {
                    rank: 0,
                    effort: quiet.clone(),
                },
                RankSync {
                    rank: 1,
                    effort: dropped.clone(),
                },
            ],
        };
        let w = clock_sync.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            matches!(&w[1], EffortWarning::DroppedDrift { ranks } if ranks.len() == 1 && ranks[0].rank == 1),
            "{w:?}"
        );
        let mut r1 = report(1, 0);
        r1.effort = dropped;
        let sync = doc(Algorithm::Hca, 100.0, vec![report(0, 0), r1]).find_warnings();
        let words = |w: &[EffortWarning]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let sync_words: Vec<String> = sync.iter().map(|w| w.to_string()).collect();
        assert_eq!(words(&w), sync_words);
        assert!(
            sync_words[1].contains(
                "rank 1 against rank 0 (20.0 +- 15.0 ppm from 10 points over 1.0ms; not resolved"
            ),
            "{}",
            sync_words[1]
        );
        // In JSON a rank's effort is flat, as in `sync`'s `ranks[]`.
        let v = serde_json::to_value(&clock_sync).unwrap();
        assert_eq!(v["ranks"][1]["dropped_drift"]["fitted_ppm"], 20.0, "{v}");
        assert_eq!(v["ranks"][1]["crossed_brackets"], 2, "{v}");
        assert!(v["ranks"][0].get("dropped_drift").is_none(), "{v}");
        let w = serde_json::to_value(crate::report::Warned::from(w[1].clone())).unwrap();
        assert_eq!(w["kind"], "dropped_drift", "{w}");
        assert_eq!(w["ranks"][0]["rank"], 1, "{w}");
        assert_eq!(w["ranks"][0]["reason"], "unresolved", "{w}");
    }

    /// `sync`'s `ranks[]` keep their effort flat through the gather (JSON both ways).
    #[test]
    fn a_rank_report_keeps_its_effort_fields_flat() {
        let mut r = report(1, 3);
        r.effort = EffortReport::new(&dropped_effort(), 2.6e9);
        let v = serde_json::to_value(&r).unwrap();
        assert!(v.get("effort").is_none(), "{v}");
        assert_eq!(v["sync_exchanges"], 20, "{v}");
        assert_eq!(v["dropped_drift"]["peer"], 0, "{v}");
        let back: RankReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn check_time_labels() {
        assert_eq!(seconds_label(0.0), "0s");
        assert_eq!(seconds_label(0.25), "250ms");
        assert_eq!(seconds_label(5.0), "5s");
    }
}
