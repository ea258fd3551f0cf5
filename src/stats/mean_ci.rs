//! The confidence interval of the mean from Student's t distribution:
//! `mean +- t_{n-1, (1+level)/2} s / sqrt(n)`, `s` the sample standard deviation
//! (divisor `n - 1`); R's `t.test(x, conf.level = level)$conf.int`.
//!
//! It assumes the values are independent and their mean is normally distributed.
//! Single run times rarely are (Hunold & Carpen-Amarie, sec. 5: skewed, with
//! outliers), so the reports lead with the median and its distribution-free
//! interval ([`super::median_ci`]); the t interval fits the per-launch means, which
//! the paper finds normal in most cases (sec. 6.2, Fig. 27) and which the central
//! limit theorem favours.

use super::StatsError;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A confidence interval of the mean.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MeanInterval {
    /// The sample mean.
    pub mean: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// Sample standard deviation (divisor `n - 1`).
    pub std_dev: f64,
}

/// The interval of the mean of `values` at `level` (0.95 for 95%); `Ok(None)` for
/// fewer than two values (no spread to estimate).
///
/// # Errors
/// [`StatsError::Level`] unless `0 < level < 1`; [`StatsError::NotFinite`] naming
/// the first value that is not finite.
pub fn mean_interval(values: &[f64], level: f64) -> Result<Option<MeanInterval>, StatsError> {
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::Level { level });
    }
    if let Some(index) = values.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::NotFinite { index });
    }
    let n = values.len();
    if n < 2 {
        return Ok(None);
    }
    let nf = n as f64;
    let mean = values.iter().sum::<f64>() / nf;
    // Two passes: no cancellation for values far from 0 with a small spread.
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let std_dev = variance.sqrt();
    let t = StudentsT::new(0.0, 1.0, nf - 1.0)
        .expect("n - 1 >= 1 degrees of freedom")
        .inverse_cdf(0.5 + level / 2.0);
    let half = t * std_dev / nf.sqrt();
    Ok(Some(MeanInterval {
        mean,
        lo: mean - half,
        hi: mean + half,
        std_dev,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{got} vs {want} (relative {:e})",
            (got - want).abs() / want.abs()
        );
    }

    /// Two values: the 97.5% quantile of t with 1 degree of freedom, 12.706 in
    /// every printed t table (SciPy: 12.706204736174694); mean 2, s = sqrt(2),
    /// half-width 12.7062 * sqrt(2) / sqrt(2).
    #[test]
    fn two_values_use_the_table_quantile() {
        let ci = mean_interval(&[1.0, 3.0], 0.95).unwrap().unwrap();
        assert_eq!(ci.mean, 2.0);
        assert_close(ci.std_dev, 2f64.sqrt(), 1e-15);
        assert_close(ci.hi - ci.mean, 12.706204736174694, 1e-9);
        assert_close(ci.mean - ci.lo, 12.706204736174694, 1e-9);
    }

    /// R's `t.test(x)$conf.int` on the Hollander & Wolfe `x` of R's
    /// `?wilcox.test`; values from `scripts/stats-reference.py` (SciPy's
    /// `t.interval`), t quantile 2.262157 (df 9) as in the tables.
    #[test]
    fn reference_interval_from_scipy() {
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let ci = mean_interval(&x, 0.95).unwrap().unwrap();
        assert_close(ci.mean, 1.313, 1e-14);
        assert_close(ci.lo, 0.9973761524164961, 1e-10);
        assert_close(ci.hi, 1.6286238475835038, 1e-10);
    }

    #[test]
    fn too_few_values_and_bad_input() {
        assert_eq!(mean_interval(&[], 0.95).unwrap(), None);
        assert_eq!(mean_interval(&[4.0], 0.95).unwrap(), None);
        assert_eq!(
            mean_interval(&[1.0, f64::NAN], 0.95),
            Err(StatsError::NotFinite { index: 1 })
        );
        assert!(matches!(
            mean_interval(&[1.0, 2.0], 1.0),
            Err(StatsError::Level { .. })
        ));
        // No spread: a zero-width interval.
        let ci = mean_interval(&[5.0; 4], 0.95).unwrap().unwrap();
        assert_eq!((ci.lo, ci.hi), (5.0, 5.0));
    }

    /// Coverage by simulation on data whose truth is known: uniform values on
    /// [0, 1) (mean 1/2), samples of 30, 4000 intervals; 95% +- 4 standard errors
    /// (sd of the hit rate sqrt(0.95 * 0.05 / 4000) = 0.0034).
    #[test]
    fn the_interval_covers_the_true_mean_as_often_as_promised() {
        let mut x = 42u64;
        let mut uniform = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let trials = 4000;
        let hits = (0..trials)
            .filter(|_| {
                let v: Vec<f64> = (0..30).map(|_| uniform()).collect();
                let ci = mean_interval(&v, 0.95).unwrap().unwrap();
                ci.lo <= 0.5 && 0.5 <= ci.hi
            })
            .count();
        let rate = hits as f64 / trials as f64;
        assert!((rate - 0.95).abs() < 4.0 * 0.0034, "coverage {rate}");
    }
}
