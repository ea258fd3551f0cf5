//! `ngauge coll --predict`: models beside measurements, and model-based algorithm
//! selection judged against the measured best, as Nuriyev's thesis evaluates it
//! (`nuriyev-model-based-collective-selection.txt`, sec. 6.3, tables 6.5 to 6.11:
//! per message size the best performing algorithm, the model's choice, and the
//! choice's "performance degradation against the optimal one").
//!
//! Two models: the LogGP simulation of the very schedule that was measured
//! ([`crate::sim::collective::per_call`], the scheme's view of it), and the
//! traditional Hockney formula of the algorithm ([`crate::sim::hockney`]), the
//! baseline the thesis argues is not accurate enough to select with.

use crate::job::TransportName;
use serde::Serialize;

use super::coll::CollRecord;

/// The models' times of one measured point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Predicted {
    /// The LogGP simulation of the same schedule under the same scheme (window and
    /// barrier: one call; loop: calls back to back over their number), us.
    pub loggp_us: f64,
    /// The measured median over `loggp_us`; absent without a measured median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_over_loggp: Option<f64>,
    /// Hockney's formula of the algorithm, one call, us.
    pub hockney_us: f64,
    /// The measured median over `hockney_us`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_over_hockney: Option<f64>,
}

impl Predicted {
    /// The models' times with the ratios of `median_us`.
    pub fn new(loggp_us: f64, hockney_us: f64, median_us: Option<f64>) -> Predicted {
        let ratio = |p: f64| median_us.filter(|_| p > 0.0).map(|m| m / p);
        Predicted {
            loggp_us,
            measured_over_loggp: ratio(loggp_us),
            hockney_us,
            measured_over_hockney: ratio(hockney_us),
        }
    }
}

/// One algorithm chosen for a size, with what it measured.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Choice {
    /// The algorithm.
    pub algo: String,
    /// Its measured median, us.
    pub median_us: f64,
    /// `median_us` over the best's minus 1 (0: the best; 0.25: 25% slower): the
    /// thesis's degradation.
    pub loss: f64,
}

/// The selection at one transport and size.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SelectionRow {
    /// The transport.
    pub transport: TransportName,
    /// Bytes per rank.
    pub size: usize,
    /// Algorithms measured and predicted at this size.
    pub candidates: usize,
    /// The smallest measured median.
    pub best: Choice,
    /// The smallest LogGP prediction.
    pub loggp: Choice,
    /// The smallest Hockney prediction.
    pub hockney: Choice,
}

/// How one model selected over all sizes.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SelectionScore {
    /// Sizes where it chose the measured best.
    pub best_chosen: usize,
    /// Mean loss over the sizes.
    pub mean_loss: f64,
    /// Largest loss.
    pub max_loss: f64,
}

/// Model-based selection against measurement.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Selection {
    /// One row per transport and size with at least two candidates.
    pub rows: Vec<SelectionRow>,
    /// The LogGP simulation's choices.
    pub loggp: SelectionScore,
    /// Hockney's choices.
    pub hockney: SelectionScore,
}

/// The selection of `records` (those with a measured median and a prediction);
/// `None` when no transport and size has two such algorithms.
pub fn select(records: &[CollRecord]) -> Option<Selection> {
    let mut keys: Vec<(TransportName, usize)> = Vec::new();
    for r in records {
        if r.predicted.is_some() && !keys.contains(&(r.transport, r.size)) {
            keys.push((r.transport, r.size));
        }
    }
    let mut rows = Vec::new();
    for (transport, size) in keys {
        let here: Vec<(&CollRecord, f64, Predicted)> = records
            .iter()
            .filter(|r| r.transport == transport && r.size == size)
            .filter_map(|r| Some((r, r.runtime_us?.median, r.predicted?)))
            .collect();
        if here.len() < 2 {
            continue;
        }
        let argmin = |key: &dyn Fn(&(&CollRecord, f64, Predicted)) -> f64| {
            here.iter()
                .min_by(|a, b| key(a).total_cmp(&key(b)))
                .expect("two candidates")
        };
        let best = argmin(&|c| c.1);
        let choice = |c: &(&CollRecord, f64, Predicted)| Choice {
            algo: c.0.algo.clone(),
            median_us: c.1,
            loss: if best.1 > 0.0 {
                c.1 / best.1 - 1.0
            } else {
                0.0
            },
        };
        rows.push(SelectionRow {
            transport,
            size,
            candidates: here.len(),
            best: choice(best),
            loggp: choice(argmin(&|c| c.2.loggp_us)),
            hockney: choice(argmin(&|c| c.2.hockney_us)),
        });
    }
    if rows.is_empty() {
        return None;
    }
    let score = |pick: &dyn Fn(&SelectionRow) -> &Choice| {
        let losses: Vec<f64> = rows.iter().map(|r| pick(r).loss).collect();
        SelectionScore {
            best_chosen: losses.iter().filter(|l| **l == 0.0).count(),
            mean_loss: losses.iter().sum::<f64>() / losses.len() as f64,
            max_loss: losses.iter().copied().fold(0.0, f64::max),
        }
    };
    Some(Selection {
        loggp: score(&|r| &r.loggp),
        hockney: score(&|r| &r.hockney),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::coll::Scheme;
    use crate::report::coll::{RootChoice, Runtime};
    use ngauge_transport::WaitMode;

    fn record(algo: &str, size: usize, median: f64, loggp: f64, hockney: f64) -> CollRecord {
        CollRecord {
            transport: TransportName::Tcp,
            wait: WaitMode::Block,
            op: "bcast".into(),
            algo: algo.into(),
            mpi_algo: None,
            segment: 0,
            size,
            np: 4,
            scheme: Scheme::Window,
            root: RootChoice::Rank(0),
            valid: 10,
            invalid: 0,
            started_late: 0,
            overran: 0,
            outliers: 0,
            rounds: 1,
            window_us: None,
            calls_per_loop: None,
            runtime_us: Some(Runtime {
                min: median,
                median,
                mean: median,
                ci95: None,
                max: median,
            }),
            predicted: Some(Predicted::new(loggp, hockney, Some(median))),
            ranks: None,
        }
    }

    #[test]
    fn ratios_are_measured_over_predicted() {
        let p = Predicted::new(10.0, 4.0, Some(15.0));
        assert_eq!(p.measured_over_loggp, Some(1.5));
        assert_eq!(p.measured_over_hockney, Some(3.75));
        assert_eq!(Predicted::new(10.0, 0.0, None).measured_over_loggp, None);
        assert_eq!(
            Predicted::new(10.0, 0.0, Some(1.0)).measured_over_hockney,
            None
        );
    }

    #[test]
    fn each_model_is_charged_the_measured_time_of_its_choice() {
        let records = vec![
            // 1 B: LogGP picks linear (the best), Hockney binomial (25% slower).
            record("linear", 1, 40.0, 10.0, 30.0),
            record("binomial", 1, 50.0, 12.0, 20.0),
            // 1 KiB: both pick chain, 100% slower than binomial.
            record("linear", 1024, 90.0, 50.0, 50.0),
            record("chain", 1024, 60.0, 10.0, 10.0),
            record("binomial", 1024, 30.0, 20.0, 20.0),
            // One candidate: no row.
            record("linear", 4096, 1.0, 1.0, 1.0),
        ];
        let s = select(&records).unwrap();
        assert_eq!(s.rows.len(), 2);
        let r = &s.rows[0];
        assert_eq!(
            (r.best.algo.as_str(), r.loggp.algo.as_str()),
            ("linear", "linear")
        );
        assert_eq!(r.hockney.algo, "binomial");
        assert!((r.hockney.loss - 0.25).abs() < 1e-12);
        let r = &s.rows[1];
        assert_eq!(r.candidates, 3);
        assert_eq!(r.best.algo, "binomial");
        assert_eq!(r.loggp.algo, "chain");
        assert!((r.loggp.loss - 1.0).abs() < 1e-12);
        assert_eq!(s.loggp.best_chosen, 1);
        assert_eq!(s.hockney.best_chosen, 0);
        assert!((s.loggp.mean_loss - 0.5).abs() < 1e-12);
        assert!((s.hockney.max_loss - 1.0).abs() < 1e-12);
    }

    #[test]
    fn records_without_prediction_or_median_select_nothing() {
        let mut a = record("linear", 1, 40.0, 10.0, 30.0);
        let mut b = record("binomial", 1, 50.0, 12.0, 20.0);
        a.predicted = None;
        b.runtime_us = None;
        assert_eq!(select(&[a, b]), None);
    }
}
