//! Outliers by the median and the median absolute deviation (MAD): a value is
//! an outlier when its modified z-score `|x - median| / (1.4826 MAD)` exceeds
//! 3.5 (Iglewicz & Hoaglin, "How to Detect and Handle Outliers", 1993, sec. 3.2,
//! with the MAD scaled to a standard deviation under Gaussian noise) **and** it
//! is `factor` times worse than the median: the MAD of equal links is near zero,
//! and the second condition keeps a few per cent of noise from naming one.

use super::order::median;

/// The z-score beyond which a value is an outlier (Iglewicz & Hoaglin).
pub const MODIFIED_Z: f64 = 3.5;

/// The median and the scaled MAD (1.4826 MAD) of `values`; `None` when empty.
pub fn median_mad(values: &[f64]) -> Option<(f64, f64)> {
    let m = median(values)?;
    let dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    Some((m, 1.4826 * median(&dev)?))
}

/// Which way a value is worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worse {
    /// Larger is worse (a latency).
    Higher,
    /// Smaller is worse (a bandwidth).
    Lower,
}

/// The outliers of `values` on the `worse` side: `(index, how many times worse
/// than the median)`, in index order. Fewer than 3 values have none.
pub fn outliers(values: &[f64], worse: Worse, factor: f64) -> Vec<(usize, f64)> {
    let Some((m, scale)) = median_mad(values).filter(|_| values.len() >= 3) else {
        return Vec::new();
    };
    values
        .iter()
        .enumerate()
        .filter_map(|(i, &x)| {
            let (beyond, ratio) = match worse {
                Worse::Higher => (x - m, x / m),
                Worse::Lower => (m - x, m / x),
            };
            (beyond > MODIFIED_Z * scale && ratio >= factor && ratio.is_finite())
                .then_some((i, ratio))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slow_value_among_equal_ones_is_named_and_noise_is_not() {
        let bw = [100.0, 101.0, 99.0, 100.0, 25.0, 102.0];
        assert_eq!(outliers(&bw, Worse::Lower, 2.0), vec![(4, 4.0)]);
        // MAD 0: any value off the median is beyond it; the factor decides.
        let lat = [1.0, 1.0, 1.0, 1.3, 5.0];
        assert_eq!(outliers(&lat, Worse::Higher, 2.0), vec![(4, 5.0)]);
        assert!(outliers(&lat, Worse::Lower, 2.0).is_empty());
        assert!(outliers(&[1.0, 9.0], Worse::Higher, 2.0).is_empty());
        assert_eq!(median_mad(&[1.0, 2.0, 3.0]), Some((2.0, 1.4826)));
    }
}
