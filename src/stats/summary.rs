//! Order statistics of one sample: min, median, mean, p99, max.

use serde::Serialize;

/// Summary of a sample of measurements (all in the caller's unit).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Median (mean of the two middle values for even `n`).
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// 99th percentile (linear interpolation between closest ranks).
    pub p99: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; `None` when empty or when any value is not finite.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self::of_sorted(&sorted))
    }

    /// Summarises values already sorted ascending (not checked beyond debug builds).
    ///
    /// # Panics
    /// If `sorted` is empty.
    pub fn of_sorted(sorted: &[f64]) -> Self {
        debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        Summary {
            n: sorted.len(),
            min: sorted[0],
            median: percentile_of_sorted(sorted, 50.0),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p99: percentile_of_sorted(sorted, 99.0),
            max: sorted[sorted.len() - 1],
        }
    }
}

/// The `p`-th percentile (0..=100) of ascending `sorted` values, interpolating
/// linearly between closest ranks (R-7, the spreadsheet definition).
///
/// # Panics
/// If `sorted` is empty.
pub fn percentile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
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
        assert_eq!(percentile_of_sorted(&[1.0, 2.0], 99.0), 1.99);
    }

    #[test]
    fn single_value_and_bad_input() {
        let s = Summary::of(&[7.0]).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.max), (7.0, 7.0, 7.0, 7.0));
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }
}
