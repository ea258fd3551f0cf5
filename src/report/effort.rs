//! A clock synchronization's effort as documents report it: per rank what it did
//! and what went wrong on the way ([`EffortReport`]), in `sync`'s `ranks[]` and in
//! the `sync` of every document timed with synchronized clocks ([`ClockSync`]:
//! `coll`'s window scheme, `late`, `nbc`), and the warnings it calls for
//! ([`EffortWarning`]), with the same kind, fields and words everywhere.

use super::table::{joined, significant};
use crate::sync::pairwise::DriftRejection;
use crate::sync::{Algorithm, Effort};
use serde::{Deserialize, Serialize};

/// A fitted drift that a rank's model does not use
/// ([`crate::sync::pairwise::fit_model`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Crossed {
    /// The rank.
    pub rank: usize,
    /// Its crossed brackets.
    pub brackets: usize,
}

/// What a synchronization's effort finds worth a warning: in `sync`'s document and
/// in every document whose timings rest on a synchronization (`coll`, `late`,
/// `nbc`), with the same kind, fields and words.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffortWarning {
    /// SKaMPI brackets crossed (the clock jumped or drifted fast during the
    /// measurement); min-RTT measured those offsets instead.
    #[error(
        "SKaMPI brackets crossed (the clock jumped or drifted fast during the measurement) on \
         {}; min-RTT measured those offsets instead",
        joined(.ranks.iter().map(|c| format!("rank {} ({})", c.rank, c.brackets)))
    )]
    CrossedBrackets {
        /// Where.
        ranks: Vec<Crossed>,
    },
    /// Drift fits whose slope was not kept: those ranks' models keep the offset
    /// only, so their error grows with any real drift.
    #[error("drift fits kept no drift: {}", joined(.ranks))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DroppedDriftAt {
    /// The rank.
    pub rank: usize,
    /// What its fit saw.
    #[serde(flatten)]
    pub drift: DroppedDriftReport,
}

impl std::fmt::Display for DroppedDriftAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.drift;
        let why = match d.reason {
            DriftRejection::Unresolved => "not resolved: within its error",
            DriftRejection::Implausible => "beyond 1100 ppm: no clock drifts so fast",
        };
        write!(
            f,
            "rank {} against rank {} ({} +- {} ppm from {} points over {}; {why})",
            self.rank,
            d.peer,
            significant(d.fitted_ppm, 3),
            significant(d.stderr_ppm, 3),
            d.fitpoints,
            duration_label(d.fit_span_us)
        )
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
