//! The summary every timing result carries: min, median, mean, p99, p99.9, max and
//! the sample standard deviation.

use super::order::{median_of_sorted, quantile_of_sorted};
use serde::Serialize;

/// Summary of a sample of measurements (all in the caller's unit; the field that
/// holds it names the unit, as `half_rtt_us`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Median (mean of the two middle values for even `n`; see [`super::order`]).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// 99th percentile (definition 7: linear interpolation between closest ranks).
    pub p99: f64,
    /// 99.9th percentile (the same definition; with fewer than 1000 values it
    /// interpolates between the largest two).
    pub p99_9: f64,
    /// Largest value.
    pub max: f64,
    /// Sample standard deviation (`n - 1` in the denominator; 0 for one value).
    pub stdev: f64,
}

impl Summary {
    /// Summarises `values`; `None` when empty or when any value is not finite.
    pub fn of(values: &[f64]) -> Option<Self> {
        super::Sorted::new(values).ok().map(|s| s.summary())
    }

    /// Summarises values already sorted ascending (not checked beyond debug builds).
    ///
    /// # Panics
    /// If `sorted` is empty.
    pub fn of_sorted(sorted: &[f64]) -> Self {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let squares: f64 = sorted.iter().map(|x| (x - mean).powi(2)).sum();
        Summary {
            n: sorted.len(),
            min: sorted[0],
            median: median_of_sorted(sorted).expect("a summary needs a value"),
            mean,
            p99: quantile_of_sorted(sorted, 0.99),
            p99_9: quantile_of_sorted(sorted, 0.999),
            max: sorted[sorted.len() - 1],
            stdev: (squares / (n - 1.0).max(1.0)).sqrt(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_and_even_medians() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).unwrap().median, 2.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
    }

    #[test]
    fn p99_interpolates() {
        let values: Vec<f64> = (0..=100).map(f64::from).collect();
        let s = Summary::of(&values).unwrap();
        assert_eq!(s.p99, 99.0);
        assert_eq!((s.min, s.max, s.mean, s.n), (0.0, 100.0, 50.0, 101));
        assert_eq!(Summary::of(&[1.0, 2.0]).unwrap().p99, 1.99);
    }

    /// Issue 37: p99.9 and the standard deviation.
    #[test]
    fn issue_37_p99_9_and_stdev() {
        let values: Vec<f64> = (0..=1000).map(f64::from).collect();
        let s = Summary::of(&values).unwrap();
        assert_eq!(s.p99_9, 999.0);
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert!((s.stdev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{s:?}");
        assert_eq!(Summary::of(&[7.0]).unwrap().stdev, 0.0);
    }

    #[test]
    fn single_value_and_bad_input() {
        let s = Summary::of(&[7.0]).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.max), (7.0, 7.0, 7.0, 7.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }
}
