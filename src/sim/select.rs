//! Models beside measurements (`ngauge coll --predict`, `simulate --measure`), and
//! model-based algorithm selection judged against the measured best, as Nuriyev's
//! thesis evaluates it
//! (`nuriyev-model-based-collective-selection.txt`, sec. 6.3, tables 6.5 to 6.11:
//! per message size the best performing algorithm, the model's choice, and the
//! choice's "performance degradation against the optimal one").
//!
//! Two models: the LogGP simulation of the very schedule that was measured
//! ([`crate::sim::collective::per_call`], the scheme's view of it), and the
//! traditional Hockney formula of the algorithm ([`crate::sim::hockney`]), the
//! baseline the thesis argues is not accurate enough to select with.

use crate::coll::CollSpec;
use crate::job::TransportName;
use crate::sim::collective::{per_call, Calls};
use crate::sim::{hockney, Network, SimError};
use serde::Serialize;

/// One measured point as the selection sees it: a `coll` record's identity, its
/// measured median and its predictions (kept apart from the record type so that
/// the record can carry [`Predicted`] without an import circle).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The transport.
    pub transport: TransportName,
    /// The algorithm.
    pub algo: String,
    /// Its segment size, bytes (0: none).
    pub segment: usize,
    /// Bytes per rank.
    pub size: usize,
    /// The measured median run-time, us (`None`: no valid call).
    pub median_us: Option<f64>,
    /// The models' times (`None`: not predicted).
    pub predicted: Option<Predicted>,
}

/// The models' times of one measured point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    /// The Hockney formula's coefficients of `alpha` and `beta` at this point
    /// ([`crate::sim::hockney::terms`]): the row of the linear system from which
    /// the algorithm-specific parameters are fitted.
    pub hockney_terms: [f64; 2],
}

impl Choice {
    /// The algorithm with its segment size when it has one (`chain/8192`).
    pub fn label(&self) -> String {
        if self.segment > 0 {
            format!("{}/{}", self.algo, self.segment)
        } else {
            self.algo.clone()
        }
    }
}

impl Predicted {
    /// The models' times of `spec` on `net`, `calls` as the timing scheme makes
    /// them (the LogGP simulation of the schedule; Hockney's formula of one
    /// call), with the ratios of `median_us`.
    ///
    /// # Errors
    /// When the simulation fails.
    pub fn of(
        spec: &CollSpec,
        net: &Network,
        calls: Calls,
        median_us: Option<f64>,
    ) -> Result<Predicted, SimError> {
        let loggp = per_call(spec, net, calls)?;
        let hockney_us = hockney::predict_us(spec, net);
        let terms = hockney::terms(spec);
        Ok(Predicted::new(
            loggp.0 as f64 * 1e-6,
            hockney_us,
            terms,
            median_us,
        ))
    }

    /// The models' times with the ratios of `median_us`.
    pub fn new(
        loggp_us: f64,
        hockney_us: f64,
        hockney_terms: [f64; 2],
        median_us: Option<f64>,
    ) -> Predicted {
        let ratio = |p: f64| median_us.filter(|_| p > 0.0).map(|m| m / p);
        Predicted {
            loggp_us,
            measured_over_loggp: ratio(loggp_us),
            hockney_us,
            measured_over_hockney: ratio(hockney_us),
            hockney_terms,
        }
    }
}

/// One algorithm chosen for a size, with what it measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Choice {
    /// The algorithm.
    pub algo: String,
    /// Its segment size, bytes (0: one segment, or an algorithm that does not
    /// segment).
    pub segment: usize,
    /// Its measured median, us.
    pub median_us: f64,
    /// `median_us` over the best's minus 1 (0: the best; 0.25: 25% slower): the
    /// thesis's degradation.
    pub loss: f64,
}

/// The selection at one transport and size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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
    /// The smallest prediction of the algorithm-specific Hockney models fitted to
    /// the measurements ([`Selection::fits`]); absent unless every candidate here
    /// has a fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hockney_fitted: Option<Choice>,
}

/// One algorithm's Hockney parameters fitted to its measured medians over the
/// sizes of the run (Nuriyev, sec. 5.2.2, Huber regression).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct AlgorithmFit {
    /// The transport.
    pub transport: TransportName,
    /// The algorithm.
    pub algo: String,
    /// Its segment size, bytes (0: none).
    pub segment: usize,
    /// Sizes in the fit.
    pub sizes: usize,
    /// The fitted parameters.
    pub params: hockney::FittedHockney,
}

/// How one model selected over all sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SelectionScore {
    /// Sizes where it chose the measured best.
    pub best_chosen: usize,
    /// Mean loss over the sizes.
    pub mean_loss: f64,
    /// Largest loss.
    pub max_loss: f64,
}

/// Model-based selection against measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Selection {
    /// One row per transport and size with at least two candidates.
    pub rows: Vec<SelectionRow>,
    /// The LogGP simulation's choices.
    pub loggp: SelectionScore,
    /// Hockney's choices.
    pub hockney: SelectionScore,
    /// The fitted algorithm-specific Hockney models' choices, over the rows that
    /// have one; absent when none has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hockney_fitted: Option<SelectionScore>,
    /// The algorithm-specific fits: one per transport, algorithm and segment with
    /// at least [`MIN_FIT_SIZES`] measured sizes whose system determines both
    /// parameters.
    pub fits: Vec<AlgorithmFit>,
}

/// Fewest measured sizes an algorithm-specific fit rests on (the thesis uses 5 to
/// 10); with fewer, Huber's regression has nothing to downweight against.
pub const MIN_FIT_SIZES: usize = 4;

/// The algorithm-specific Hockney fits of `records` (Nuriyev, sec. 5.2.2).
///
/// The thesis fits on separate experiments and then selects; here the fit and
/// the selection use the same run's medians, so the fitted model's score is an
/// in-sample one: it says how well Hockney's formula *can* rank the algorithms
/// with the best per-algorithm parameters, an upper bound on that approach.
fn fits(records: &[Point]) -> Vec<AlgorithmFit> {
    let mut keys: Vec<(TransportName, &str, usize)> = Vec::new();
    for r in records {
        let key = (r.transport, r.algo.as_str(), r.segment);
        if r.predicted.is_some() && !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.into_iter()
        .filter_map(|(transport, algo, segment)| {
            let points: Vec<([f64; 2], f64)> = records
                .iter()
                .filter(|r| r.transport == transport && r.algo == algo && r.segment == segment)
                .filter_map(|r| Some((r.predicted?.hockney_terms, r.median_us?)))
                .collect();
            if points.len() < MIN_FIT_SIZES {
                return None;
            }
            Some(AlgorithmFit {
                transport,
                algo: algo.to_string(),
                segment,
                sizes: points.len(),
                params: hockney::fit(&points)?,
            })
        })
        .collect()
}

/// The selection of `records` (those with a measured median and a prediction);
/// `None` when no transport and size has two such algorithms.
pub fn select(records: &[Point]) -> Option<Selection> {
    let mut keys: Vec<(TransportName, usize)> = Vec::new();
    for r in records {
        if r.predicted.is_some() && !keys.contains(&(r.transport, r.size)) {
            keys.push((r.transport, r.size));
        }
    }
    let fits = fits(records);
    let fitted_us = |r: &Point, p: &Predicted| {
        fits.iter()
            .find(|f| f.transport == r.transport && f.algo == r.algo && f.segment == r.segment)
            .map(|f| f.params.predict_us(p.hockney_terms))
    };
    let mut rows = Vec::new();
    for (transport, size) in keys {
        let here: Vec<(&Point, f64, Predicted)> = records
            .iter()
            .filter(|r| r.transport == transport && r.size == size)
            .filter_map(|r| Some((r, r.median_us?, r.predicted?)))
            .collect();
        if here.len() < 2 {
            continue;
        }
        let argmin = |key: &dyn Fn(&(&Point, f64, Predicted)) -> f64| {
            here.iter()
                .min_by(|a, b| key(a).total_cmp(&key(b)))
                .expect("two candidates")
        };
        let best = argmin(&|c| c.1);
        let choice = |c: &(&Point, f64, Predicted)| Choice {
            algo: c.0.algo.clone(),
            segment: c.0.segment,
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
            hockney_fitted: here
                .iter()
                .map(|c| fitted_us(c.0, &c.2).map(|t| (t, c)))
                .collect::<Option<Vec<_>>>()
                .and_then(|all| {
                    all.into_iter()
                        .min_by(|a, b| a.0.total_cmp(&b.0))
                        .map(|(_, c)| choice(c))
                }),
        });
    }
    if rows.is_empty() {
        return None;
    }
    let score = |pick: &dyn Fn(&SelectionRow) -> Option<&Choice>| {
        let losses: Vec<f64> = rows.iter().filter_map(|r| Some(pick(r)?.loss)).collect();
        if losses.is_empty() {
            return None;
        }
        Some(SelectionScore {
            best_chosen: losses.iter().filter(|l| **l == 0.0).count(),
            mean_loss: losses.iter().sum::<f64>() / losses.len() as f64,
            max_loss: losses.iter().copied().fold(0.0, f64::max),
        })
    };
    Some(Selection {
        loggp: score(&|r| Some(&r.loggp))?,
        hockney: score(&|r| Some(&r.hockney))?,
        hockney_fitted: score(&|r| r.hockney_fitted.as_ref()),
        rows,
        fits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(algo: &str, size: usize, median: f64, loggp: f64, hockney: f64) -> Point {
        Point {
            transport: TransportName::Tcp,
            algo: algo.into(),
            segment: 0,
            size,
            median_us: Some(median),
            predicted: Some(Predicted::new(
                loggp,
                hockney,
                [1.0, size as f64],
                Some(median),
            )),
        }
    }

    #[test]
    fn ratios_are_measured_over_predicted() {
        let p = Predicted::new(10.0, 4.0, [1.0, 0.0], Some(15.0));
        assert_eq!(p.measured_over_loggp, Some(1.5));
        assert_eq!(p.measured_over_hockney, Some(3.75));
        assert_eq!(
            Predicted::new(10.0, 0.0, [1.0, 0.0], None).measured_over_loggp,
            None
        );
        assert_eq!(
            Predicted::new(10.0, 0.0, [1.0, 0.0], Some(1.0)).measured_over_hockney,
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

    /// A record whose Hockney terms are those of a formula `n` alphas and `n m`
    /// bytes, measuring `median`.
    fn shaped(algo: &str, size: usize, n: f64, median: f64) -> Point {
        let mut r = record(algo, size, median, 1.0, 1.0);
        r.predicted = Some(Predicted::new(1.0, 1.0, [n, n * size as f64], Some(median)));
        r
    }

    #[test]
    fn fitted_models_select_with_each_algorithms_own_alpha_and_beta() {
        // "few" sends 2 messages with alpha 10 us and beta 0.001 us/B, "many" 6
        // with alpha 1 us and beta 0.01 us/B: "many" wins below 14 / 0.058 = 241 B,
        // "few" above. The records' fixed-parameter predictions say nothing (1 us
        // each); the measurements follow the two models, with one point of each
        // algorithm disturbed 30-fold.
        let sizes = [1, 100, 1000, 10000, 100000];
        let mut records = Vec::new();
        for (i, &m) in sizes.iter().enumerate() {
            let mf = m as f64;
            let disturb = |k| if i == k { 30.0 } else { 1.0 };
            records.push(shaped(
                "few",
                m,
                2.0,
                2.0 * (10.0 + 0.001 * mf) * disturb(1),
            ));
            records.push(shaped("many", m, 6.0, 6.0 * (1.0 + 0.01 * mf) * disturb(3)));
        }
        let s = select(&records).unwrap();
        assert_eq!(s.fits.len(), 2);
        let few = s.fits.iter().find(|f| f.algo == "few").unwrap();
        assert!((few.params.alpha_us - 10.0).abs() < 1e-6, "{few:?}");
        assert!(
            (few.params.beta_us_per_byte - 0.001).abs() < 1e-9,
            "{few:?}"
        );
        for r in &s.rows {
            let want = if r.size < 241 { "many" } else { "few" };
            assert_eq!(r.hockney_fitted.as_ref().unwrap().algo, want, "{r:?}");
        }
        let fitted = s.hockney_fitted.unwrap();
        assert_eq!((fitted.best_chosen, fitted.max_loss), (5, 0.0));
    }

    #[test]
    fn fewer_sizes_than_a_fit_needs_give_no_fitted_choice() {
        let records = vec![
            shaped("a", 1, 1.0, 10.0),
            shaped("b", 1, 2.0, 12.0),
            shaped("a", 2, 1.0, 11.0),
            shaped("b", 2, 2.0, 13.0),
        ];
        let s = select(&records).unwrap();
        assert!(s.fits.is_empty());
        assert!(s.rows.iter().all(|r| r.hockney_fitted.is_none()));
        assert_eq!(s.hockney_fitted, None);
    }

    #[test]
    fn records_without_prediction_or_median_select_nothing() {
        let mut a = record("linear", 1, 40.0, 10.0, 30.0);
        let mut b = record("binomial", 1, 50.0, 12.0, 20.0);
        a.predicted = None;
        b.median_us = None;
        assert_eq!(select(&[a, b]), None);
    }
}
