//! Tukey's outlier filter as Hunold & Carpen-Amarie apply it to run times (sec. 3.5):
//! after all measurements are recorded, remove every value below
//! `Q1 - 1.5 IQR` or above `Q3 + 1.5 IQR`, `IQR = Q3 - Q1`.
//!
//! The quartiles are definition 7 quantiles ([`super::quantile_of_sorted`], R's
//! `quantile()` default); R's `boxplot` uses Tukey's hinges (`fivenum`) instead,
//! which differ from these for some `n`, so a filter checked against R must use
//! `quantile(x, c(.25, .75))`. Values on a fence are kept.
//!
//! A weakness the paper does not discuss: on coarse data (a timer with few distinct
//! readings) most values can be equal, `IQR = 0`, and every value that differs from
//! the mode by a single tick is "an outlier". `q3 - q1` shows this; a caller
//! that reports the number removed lets the reader judge.

use super::order::quantile_of_sorted;

/// Tukey's fence factor (Hunold & Carpen-Amarie, sec. 3.5).
pub const TUKEY_K: f64 = 1.5;

/// The fences of one sample: values in `[lo, hi]` are kept.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Fences {
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// `Q1 - 1.5 IQR`.
    pub lo: f64,
    /// `Q3 + 1.5 IQR`.
    pub hi: f64,
}

impl Fences {
    /// The fences of ascending `sorted` values.
    ///
    /// # Panics
    /// If `sorted` is empty.
    pub fn of_sorted(sorted: &[f64]) -> Self {
        let q1 = quantile_of_sorted(sorted, 0.25);
        let q3 = quantile_of_sorted(sorted, 0.75);
        let iqr = q3 - q1;
        Fences {
            q1,
            q3,
            lo: q1 - TUKEY_K * iqr,
            hi: q3 + TUKEY_K * iqr,
        }
    }

    /// Whether `value` is kept.
    pub fn keeps(&self, value: f64) -> bool {
        value >= self.lo && value <= self.hi
    }
}

/// What the filter kept of a sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Filtered {
    /// The values kept, in their original order.
    pub kept: Vec<f64>,
    /// How many values were removed.
    pub removed: usize,
    /// The fences used.
    pub fences: Fences,
}

/// Applies the filter to `values` (any order); `None` when empty.
pub fn tukey_filter(values: &[f64]) -> Option<Filtered> {
    if values.is_empty() {
        return None;
    }
    let fences = Fences::of_sorted(&super::order::sorted(values));
    let kept: Vec<f64> = values
        .iter()
        .copied()
        .filter(|&v| fences.keeps(v))
        .collect();
    Some(Filtered {
        removed: values.len() - kept.len(),
        kept,
        fences,
    })
}

#[cfg(test)]
impl Fences {
    /// The interquartile range.
    fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_far_value_is_removed_by_hand() {
        // 1..10 and 100: Q1 at rank 2.5 = 3.5, Q3 at rank 7.5 = 8.5, IQR 5, fences
        // -4 and 16 (R: quantile(c(1:10, 100), c(.25, .75)) = 3.5, 8.5).
        let mut values: Vec<f64> = (1..=10).map(f64::from).collect();
        values.insert(3, 100.0);
        let f = tukey_filter(&values).unwrap();
        assert_eq!(
            f.fences,
            Fences {
                q1: 3.5,
                q3: 8.5,
                lo: -4.0,
                hi: 16.0
            }
        );
        assert_eq!(f.removed, 1);
        assert_eq!(f.kept, (1..=10).map(f64::from).collect::<Vec<_>>());
    }

    #[test]
    fn values_on_a_fence_are_kept() {
        let f = tukey_filter(&[0.0, 1.0, 2.0, 3.0, 6.0]).unwrap();
        // Q1 = 1, Q3 = 3, fences -2 and 6.
        assert_eq!((f.fences.lo, f.fences.hi), (-2.0, 6.0));
        assert_eq!(f.removed, 0);
        let f = tukey_filter(&[0.0, 1.0, 2.0, 3.0, 6.5]).unwrap();
        // Q3 = 3 still; 6.5 is beyond 6.
        assert_eq!(f.removed, 1);
    }

    #[test]
    fn a_constant_sample_keeps_everything_and_one_tick_off_is_out() {
        let f = tukey_filter(&[5.0; 8]).unwrap();
        assert_eq!((f.removed, f.fences.iqr()), (0, 0.0));
        let f = tukey_filter(&[5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 6.0]).unwrap();
        assert_eq!(f.removed, 1, "the IQR = 0 weakness the module doc names");
        assert!(tukey_filter(&[]).is_none());
    }
}
