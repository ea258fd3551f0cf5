//! The confidence interval of the mean from Student's t: `mean ± t(1 - (1 -
//! level)/2, n - 1) * s / sqrt(n)`, with `s` the sample standard deviation
//! (Bessel's correction). Hunold & Carpen-Amarie (sec. 3.5) report the mean with
//! its 95% interval after the Tukey filter ([`super::tukey`]); it assumes
//! independent, roughly normal values, which the filter makes more plausible and
//! the median's interval ([`super::median_ci`]) does not need.

use super::StatsError;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A confidence interval of the mean.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MeanInterval {
    /// The sample mean.
    pub mean: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// The interval of the mean of `values` at `level`; `None` for fewer than 2 values
/// (no spread to estimate).
///
/// # Errors
/// [`StatsError::Level`] unless `0 < level < 1`; [`StatsError::NotFinite`] for a
/// NaN or infinite value.
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
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .expect("n - 1 >= 1 degrees of freedom")
        .inverse_cdf(1.0 - (1.0 - level) / 2.0);
    let half = t * (var / n as f64).sqrt();
    Ok(Some(MeanInterval {
        mean,
        lo: mean - half,
        hi: mean + half,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_r_t_test() {
        // R: t.test(c(1, 2, 3, 4, 5))$conf.int = 1.036757 4.963243
        let i = mean_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95)
            .unwrap()
            .unwrap();
        assert_eq!(i.mean, 3.0);
        assert!((i.lo - 1.036757).abs() < 1e-5, "{i:?}");
        assert!((i.hi - 4.963243).abs() < 1e-5, "{i:?}");
    }

    #[test]
    fn constant_sample_has_zero_width() {
        let i = mean_interval(&[7.0; 4], 0.95).unwrap().unwrap();
        assert_eq!((i.lo, i.mean, i.hi), (7.0, 7.0, 7.0));
    }

    #[test]
    fn too_few_or_bad_input() {
        assert_eq!(mean_interval(&[1.0], 0.95), Ok(None));
        assert_eq!(
            mean_interval(&[1.0, f64::NAN], 0.95),
            Err(StatsError::NotFinite { index: 1 })
        );
        assert!(mean_interval(&[1.0, 2.0], 1.0).is_err());
    }
}
