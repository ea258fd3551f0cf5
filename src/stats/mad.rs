//! Outliers by the median and the median absolute deviation (MAD): a value is
//! an outlier when its modified z-score `|x - median| / (1.4826 MAD)` exceeds
//! 3.5 (Iglewicz & Hoaglin, "How to Detect and Handle Outliers", 1993, sec. 3.2,
//! with the MAD scaled to a standard deviation under Gaussian noise) **and** it
//! is `factor` times worse than the median: the MAD of equal links is near zero,
//! and the second condition keeps a few per cent of noise from naming one.
//!
//! [`outliers`] judges the low side (a bandwidth) on the logarithms of the
//! values: on the linear scale a value cannot fall further below its median than
//! the median itself, so a link 400x slower than links spread over 600-3000 MB/s
//! scores a z of about 1.7 and goes unnamed; on the log scale it scores about 10.
//! The high side (a latency) has no such bound and keeps the linear scale.

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
/// On the low side, values that are not positive have no logarithm and are
/// never named.
pub fn outliers(values: &[f64], worse: Worse, factor: f64) -> Vec<(usize, f64)> {
    let scaled = |x: f64| if worse == Worse::Lower { x.ln() } else { x };
    let judged: Vec<f64> = values
        .iter()
        .filter(|&&x| x > 0.0 || worse == Worse::Higher)
        .map(|&x| scaled(x))
        .collect();
    let Some((m, scale)) = median_mad(&judged).filter(|_| judged.len() >= 3) else {
        return Vec::new();
    };
    let kept: Vec<f64> = values
        .iter()
        .copied()
        .filter(|&x| x > 0.0 || worse == Worse::Higher)
        .collect();
    let median = median(&kept).unwrap_or(f64::NAN);
    values
        .iter()
        .enumerate()
        .filter(|&(_, &x)| x > 0.0 || worse == Worse::Higher)
        .filter_map(|(i, &x)| {
            let (beyond, ratio) = match worse {
                Worse::Higher => (x - m, x / median),
                Worse::Lower => (m - x.ln(), median / x),
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

    #[test]
    fn a_slow_link_among_widely_spread_fast_ones_is_named() {
        // A shaped link (2.4 MB/s) among loopback links spread over 600-3000 MB/s
        // on a loaded host: its linear z-score is about 1.7, its log z-score 10.
        let bw = [
            3091.0, 1859.0, 1186.0, 1780.0, 733.0, 1012.0, 933.0, 1877.0, 1368.0, 1822.0, 2.4,
            930.0,
        ];
        assert_eq!(outliers(&bw, Worse::Lower, 5.0).len(), 1);
        assert_eq!(outliers(&bw, Worse::Lower, 5.0)[0].0, 10);
        assert!(outliers(&[0.0, -1.0, 5.0], Worse::Lower, 2.0).is_empty());
    }
}
