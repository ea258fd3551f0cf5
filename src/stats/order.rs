//! Order statistics: the one median and the one quantile of the crate.
//!
//! Definitions (`x_(1) <= ... <= x_(n)` the sorted sample):
//!
//! - **median**: `x_((n+1)/2)` for odd `n`; for even `n` the midpoint of the two
//!   middle values, `(x_(n/2) + x_(n/2+1)) / 2`. For `f64` the sum is rounded once
//!   and halved exactly, so the result is the correctly rounded midpoint
//!   ([`f64::midpoint`], which halves first only where the sum would overflow);
//!   for integers (ticks) it is rounded down ([`u64::midpoint`], no overflow).
//! - **quantile** `q` in `[0, 1]`: Hyndman & Fan's definition 7 (R's default
//!   `quantile(type = 7)`, NumPy's `linear`, spreadsheets' `PERCENTILE`): the rank
//!   `h = q (n - 1)` counted from 0, and linear interpolation between the order
//!   statistics around it, `x_lo + (h - lo) (x_hi - x_lo)`. In exact arithmetic
//!   `quantile(0.5)` is the median; in `f64` the two agree bit for bit whenever the
//!   difference of the two middle values is exact (same sign and within a factor
//!   of 2 of each other, Sterbenz's lemma: always the case for the two middle
//!   values of a timing sample that is not split into two modes), and within one
//!   unit in the last place otherwise.
//! - **lower median**: `x_(floor((n+1)/2))`, an element of the sample (for
//!   estimators that need an actual observation, such as the fit point of a clock
//!   offset).
//!
//! Hyndman, R. J., Fan, Y. (1996), "Sample quantiles in statistical packages", The
//! American Statistician 50(4).

use crate::units::{Nanos, Ticks};
use std::cmp::Ordering;

/// A value a sample can hold: totally ordered, with a midpoint. Implemented for
/// plain `f64` and `u64` and for the unit types [`Ticks`] and [`Nanos`], so a sample
/// keeps its unit through its statistics.
pub trait Value: Copy {
    /// The order samples are sorted in (`f64`: IEEE total order).
    fn order(&self, other: &Self) -> Ordering;
    /// The midpoint of `lo <= hi` (see the module doc for its rounding).
    fn midpoint(lo: Self, hi: Self) -> Self;
    /// Whether the value can enter a statistic (`f64`: finite).
    fn is_usable(&self) -> bool {
        true
    }
}

impl Value for f64 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
    fn midpoint(lo: Self, hi: Self) -> Self {
        f64::midpoint(lo, hi)
    }
    fn is_usable(&self) -> bool {
        self.is_finite()
    }
}

impl Value for u64 {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
    fn midpoint(lo: Self, hi: Self) -> Self {
        u64::midpoint(lo, hi)
    }
}

impl Value for Ticks {
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
    fn midpoint(lo: Self, hi: Self) -> Self {
        Ticks(u64::midpoint(lo.0, hi.0))
    }
}

impl Value for Nanos {
    fn order(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
    fn midpoint(lo: Self, hi: Self) -> Self {
        Nanos(f64::midpoint(lo.0, hi.0))
    }
    fn is_usable(&self) -> bool {
        self.0.is_finite()
    }
}

/// `values` sorted ascending by [`Value::order`] (a copy).
pub fn sorted<T: Value>(values: &[T]) -> Vec<T> {
    let mut v = values.to_vec();
    v.sort_by(T::order);
    v
}

/// The median of `values` (any order); `None` when empty.
pub fn median<T: Value>(values: &[T]) -> Option<T> {
    median_of_sorted(&sorted(values))
}

/// The median of ascending `sorted` values; `None` when empty.
pub fn median_of_sorted<T: Value>(sorted: &[T]) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let mid = n / 2;
    Some(if n % 2 == 1 {
        sorted[mid]
    } else {
        T::midpoint(sorted[mid - 1], sorted[mid])
    })
}

/// The quantile `q` (clamped to `[0, 1]`) of ascending `sorted` values, definition 7
/// of Hyndman & Fan (see the module doc).
///
/// # Panics
/// If `sorted` is empty.
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// The lower median of `items` ordered by `cmp`: the element at index
/// `(n - 1) / 2` after a stable sort, so among equal keys the earliest wins.
/// `None` when empty.
pub fn lower_median_by<T: Copy>(items: &[T], cmp: impl FnMut(&T, &T) -> Ordering) -> Option<T> {
    if items.is_empty() {
        return None;
    }
    let mut v = items.to_vec();
    v.sort_by(cmp);
    Some(v[(v.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values of every sign and many magnitudes.
    fn random(seed: u64, n: usize) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mantissa = (x >> 11) as f64 / (1u64 << 53) as f64;
                let exponent = ((x >> 3) % 40) as i32 - 20;
                let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
                sign * mantissa * 2f64.powi(exponent)
            })
            .collect()
    }

    // The three medians this module replaces, frozen as they were
    // (`model/robust.rs`, `patterns/loggp.rs`, `stats/summary.rs`).
    fn old_robust_median(values: &[f64]) -> Option<f64> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        })
    }

    fn old_median_ticks(values: &[u64]) -> u64 {
        let mut v = values.to_vec();
        v.sort_unstable();
        let mid = v.len() / 2;
        if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2
        }
    }

    fn old_percentile_of_sorted(sorted: &[f64], p: f64) -> f64 {
        let rank = (p.clamp(0.0, 100.0) / 100.0) * (sorted.len() - 1) as f64;
        let lo = rank.floor() as usize;
        let hi = rank.ceil() as usize;
        sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
    }

    #[test]
    fn the_median_is_the_old_model_median_bit_for_bit() {
        for seed in 0..300 {
            let v = random(seed, 1 + seed as usize % 17);
            let (new, old) = (median(&v).unwrap(), old_robust_median(&v).unwrap());
            assert_eq!(new.to_bits(), old.to_bits(), "{v:?}");
        }
        assert_eq!(median::<f64>(&[]), None);
    }

    #[test]
    fn the_median_of_ticks_is_the_old_integer_median() {
        for seed in 0..300 {
            let v: Vec<u64> = random(seed, 1 + seed as usize % 16)
                .iter()
                .map(|x| (x.abs() * 1e12) as u64 >> (seed % 8))
                .collect();
            assert_eq!(median(&v).unwrap(), old_median_ticks(&v), "{v:?}");
        }
        // Rounded down; no overflow where the old sum would have wrapped.
        assert_eq!(median(&[3u64, 4]), Some(3));
        assert_eq!(median(&[u64::MAX, u64::MAX - 2]), Some(u64::MAX - 1));
        assert_eq!(median(&[Ticks(10), Ticks(1), Ticks(7)]), Some(Ticks(7)));
    }

    #[test]
    fn quantiles_are_the_old_percentiles_bit_for_bit() {
        for seed in 0..300 {
            let v = sorted(&random(seed, 1 + seed as usize % 23));
            for p in [0.0, 1.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0] {
                let (new, old) = (
                    quantile_of_sorted(&v, p / 100.0),
                    old_percentile_of_sorted(&v, p),
                );
                assert_eq!(new.to_bits(), old.to_bits(), "p{p} of {v:?}");
            }
        }
    }

    /// The old summary median was the 50th percentile; it is now the median, which
    /// differs only where the two middle values' difference is not exact.
    #[test]
    fn the_summary_median_keeps_its_bits_on_timing_samples() {
        for seed in 0..300 {
            // Positive values within a factor of 2 of each other, like repetitions.
            let v: Vec<f64> = random(seed, 2 + 2 * (seed as usize % 9))
                .iter()
                .map(|x| 6.0 + x.abs().fract() * 5.0)
                .collect();
            let s = sorted(&v);
            let old = old_percentile_of_sorted(&s, 50.0);
            assert_eq!(median_of_sorted(&s).unwrap().to_bits(), old.to_bits());
        }
        // Two modes far apart: the correctly rounded midpoint vs the interpolation.
        let (a, b) = (9.014274576114836e-06, 2232.2111021323867);
        let interpolated = old_percentile_of_sorted(&[a, b], 50.0);
        let mid = median_of_sorted(&[a, b]).unwrap();
        assert_eq!(
            (mid, interpolated),
            (1116.1055555733305, 1116.1055555733308)
        );
    }

    #[test]
    fn definitions_on_small_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[Nanos(2.0), Nanos(1.0)]), Some(Nanos(1.5)));
        // R: quantile(c(1, 2, 3, 4), c(0.25, 0.75)) = 1.75, 3.25.
        assert_eq!(quantile_of_sorted(&[1.0, 2.0, 3.0, 4.0], 0.25), 1.75);
        assert_eq!(quantile_of_sorted(&[1.0, 2.0, 3.0, 4.0], 0.75), 3.25);
        assert_eq!(quantile_of_sorted(&[1.0, 2.0], 0.99), 1.99);
        assert_eq!(quantile_of_sorted(&[5.0], 0.3), 5.0);
        assert_eq!(quantile_of_sorted(&[1.0, 2.0], 7.0), 2.0, "clamped");
    }

    #[test]
    fn the_lower_median_is_an_element_and_ties_keep_their_order() {
        let items = [(3, 'a'), (1, 'b'), (2, 'c'), (2, 'd')];
        assert_eq!(
            lower_median_by(&items, |x, y| x.0.cmp(&y.0)),
            Some((2, 'c'))
        );
        assert_eq!(
            lower_median_by(&items[..3], |x, y| x.0.cmp(&y.0)),
            Some((2, 'c'))
        );
        assert_eq!(
            lower_median_by(&[] as &[(u8, char)], |x, y| x.0.cmp(&y.0)),
            None
        );
    }
}
