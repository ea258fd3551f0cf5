//! The document of `ngauge sync`: how long the synchronization took and how far
//! each rank's global time was off at each check, and its table.

use super::effort::{effort_warnings, EffortReport};
use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::sync::{Algorithm, Estimator};
use ngauge_transport::WaitMode;
use serde::{Deserialize, Serialize};

/// One rank's findings, gathered at rank 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SyncSamples {
    /// Rank 0's time from the opening to the closing barrier of each sync.
    pub duration_us: Vec<f64>,
    /// Per repetition, the largest measured residual of any rank at any check.
    pub max_abs_residual_ns: Vec<f64>,
}

/// What `sync` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SyncWarning {
    /// The residuals at the last check exceed [`LARGE_RESIDUAL_NS`].
    #[error(
        "residuals reach {:.1} us after {}{}",
        .max_abs_ns / 1e3,
        seconds_label(*.after_s),
        if .algo.models_drift() { String::new() } else { format!(": {} models no drift", .algo) }
    )]
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
    #[error("{0}")]
    Setup(SetupWarning),
}

/// A residual worth a warning, ns.
pub const LARGE_RESIDUAL_NS: f64 = 10_000.0;

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

impl super::Document for SyncDoc {
    type Warning = SyncWarning;

    /// The header line, then per rank its offset, drift and residuals.
    fn render(&self) -> String {
        let mut out = format!(
            "clock sync: {} over {} ({}), {} ranks",
            self.algo.as_str(),
            self.transport,
            self.wait,
            self.np
        );
        if let (Some(f), Some(e)) = (self.fitpoints, self.exchanges) {
            out += &format!(", {f} fit points x {e} exchanges");
        }
        if let Some(e) = self.estimator {
            out += &format!(", offsets by {}", e.as_str());
        }
        out += &format!(": {:.1} ms at rank 0\n\n", self.duration_us / 1e3);
        let mut header = vec![
            "rank".to_string(),
            "offset [us]".into(),
            "drift [ppm]".into(),
        ];
        for &c in &self.check_after_s {
            header.push(format!("residual @{} [ns]", seconds_label(c)));
        }
        if self.truth.is_some() {
            for &c in &self.check_after_s {
                header.push(format!("true @{} [ns]", seconds_label(c)));
            }
        }
        let mut table = Table::new(header);
        for r in &self.ranks {
            let mut row = vec![
                r.rank.to_string(),
                format!("{:.3}", r.offset_ns / 1e3),
                format!("{:.3}", r.drift_ppm),
            ];
            row.extend(r.residual_ns.iter().map(|v| format!("{v:.0}")));
            if let Some(t) = &r.true_residual_ns {
                row.extend(t.iter().map(|v| format!("{v:.0}")));
            }
            table.row(row);
        }
        out += &table.render();
        if let Some(t) = &self.truth {
            out += &format!("\ntruth: {t}\n");
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &SyncWarning)> {
        super::document::unwarned(&self.warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::effort::{ClockSync, Crossed, DroppedDriftReport, EffortWarning, RankSync};
    use crate::report::table::significant;
    use crate::sync::pairwise::DriftRejection;
    use crate::sync::Effort;

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
        assert_eq!(significant(25343.9, 3), "25344");
        assert_eq!(significant(-1.7234, 3), "-1.72");
        assert_eq!(significant(0.0, 3), "0");
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
