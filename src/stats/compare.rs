//! Two sides' launches at one point, compared (Hunold & Carpen-Amarie, sec. 6.2,
//! Fig. 26): each launch reduced to one value (Algorithm 6: the median of its
//! repetitions after the outlier filter when they were recorded, else the median
//! its document reported), the median of those values per side, their ratio, and
//! the two-sided rank-sum test ([`super::ranksum`]) on the per-launch values when
//! both sides have at least two launches (the launch is the unit of replication),
//! else on the repetitions when both sides recorded them, else none.

use super::{launch_summary, median, rank_sum, tukey_filter, Outliers, RankSum, Sorted};
use serde::Serialize;

/// What the test of a point was computed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The per-launch medians (both sides have two launches or more).
    LaunchMedians,
    /// The repetitions of the launches (a side has a single launch).
    Repetitions,
    /// Nothing to test: a single launch without recorded repetitions.
    None,
}

/// One launch of a side at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaunchValues<'a> {
    /// Its recorded repetitions (empty: none recorded).
    pub samples: &'a [f64],
    /// The median its document reported.
    pub median: f64,
}

/// Side B against side A at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TwoSides {
    /// A's median of per-launch values.
    pub median_a: f64,
    /// B's median of per-launch values.
    pub median_b: f64,
    /// `median_b / median_a`; `None` when `median_a` is 0.
    pub ratio: Option<f64>,
    /// What was tested.
    pub basis: Basis,
    /// The test, when there was something to test.
    pub test: Option<RankSum>,
    /// Values tested on A's side (launches or repetitions; 0 untested).
    pub n_a: usize,
    /// Values tested on B's side.
    pub n_b: usize,
}

/// One side's values: per launch the reduced value, and every launch's
/// repetitions after the filter (`None` when a launch has none recorded).
fn side(launches: &[LaunchValues], outliers: Outliers) -> (Vec<f64>, Option<Vec<f64>>) {
    let mut per_launch = Vec::new();
    let mut repetitions = Some(Vec::new());
    for p in launches {
        match launch_summary(p.samples, outliers, 0.95) {
            Ok(s) => {
                per_launch.push(s.median);
                if let Some(r) = repetitions.as_mut() {
                    match outliers {
                        Outliers::Keep => r.extend_from_slice(p.samples),
                        Outliers::Tukey => {
                            r.extend(tukey_filter(p.samples).map(|f| f.kept).unwrap_or_default())
                        }
                    }
                }
            }
            Err(_) => {
                per_launch.push(p.median);
                repetitions = None;
            }
        }
    }
    (per_launch, repetitions)
}

/// Compares B's launches against A's (see the module doc).
///
/// # Panics
/// When a side has no launch.
pub fn compare_launches(a: &[LaunchValues], b: &[LaunchValues], outliers: Outliers) -> TwoSides {
    let ((la, ra), (lb, rb)) = (side(a, outliers), side(b, outliers));
    let median_a = median(&la).expect("a side has a launch");
    let median_b = median(&lb).expect("a side has a launch");
    let tested = if a.len() >= 2 && b.len() >= 2 {
        Some((Basis::LaunchMedians, la, lb))
    } else {
        match (ra, rb) {
            (Some(ra), Some(rb)) if !ra.is_empty() && !rb.is_empty() => {
                Some((Basis::Repetitions, ra, rb))
            }
            _ => None,
        }
    };
    let (basis, test, n_a, n_b) = match tested {
        Some((basis, va, vb)) => {
            let test = match (Sorted::new(&va), Sorted::new(&vb)) {
                (Ok(sa), Ok(sb)) => Some(rank_sum(&sa, &sb)),
                _ => None,
            };
            (basis, test, va.len(), vb.len())
        }
        None => (Basis::None, None, 0, 0),
    };
    TwoSides {
        median_a,
        median_b,
        ratio: (median_a != 0.0).then(|| median_b / median_a),
        basis,
        test,
        n_a,
        n_b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_tested_as_launches_and_single_ones_by_their_repetitions() {
        let launch = |median: f64| LaunchValues {
            samples: &[],
            median,
        };
        let a: Vec<_> = (0..5).map(|i| launch(10.0 + i as f64 * 0.1)).collect();
        let b: Vec<_> = (0..5).map(|i| launch(12.0 + i as f64 * 0.1)).collect();
        let t = compare_launches(&a, &b, Outliers::Tukey);
        assert_eq!((t.basis, t.n_a, t.n_b), (Basis::LaunchMedians, 5, 5));
        assert!((t.test.unwrap().p_value - 2.0 / 252.0).abs() < 1e-12);
        let none = compare_launches(&a[..1], &b[..1], Outliers::Keep);
        assert_eq!((none.basis, none.test, none.n_a), (Basis::None, None, 0));
        let reps = [1.0, 2.0, 3.0];
        let one = [LaunchValues {
            samples: &reps,
            median: 0.0,
        }];
        let r = compare_launches(&one, &one, Outliers::Keep);
        assert_eq!(
            (r.basis, r.median_a, r.ratio),
            (Basis::Repetitions, 2.0, Some(1.0))
        );
    }
}
