//! Robust straight-line fit: Huber M-estimation by iteratively reweighted least
//! squares (Huber 1964; the fitting Nuriyev et al. use for their collective models).
//!
//! The paper fits eq. (5) by plain least squares (Hoefler et al., sec. 2.4). Real
//! PRTT medians carry outliers (a size that hit a scheduler tick, latency that flips
//! between two levels), and one such point tilts a plain fit. Huber's loss is
//! quadratic for residuals within `k` robust standard deviations and linear beyond,
//! so an outlier keeps a weight `k / |r/scale|` instead of being dropped silently:
//! the caller reports which points weighed little.

use super::lsq::{fit_weighted_level_nonneg, fit_weighted_line, fit_weighted_line_nonneg, Line};
use crate::stats::median;

pub use crate::stats::huber::{huber_weight, HUBER_K};

/// A line fitted by Huber IRLS, with the weight each point ended up with.
#[derive(Clone, Debug, PartialEq)]
pub struct RobustLine {
    /// The fitted line (its standard errors and residual come from the final
    /// weighted least-squares step).
    pub line: Line,
    /// Final weight per point, in `(0, 1]`; 1 means the point was fitted as in plain
    /// least squares.
    pub weights: Vec<f64>,
    /// Robust scale of the residuals used for the weights (1.4826 MAD, floored).
    pub scale: f64,
    /// IRLS iterations run.
    pub iterations: usize,
}

/// Normalised median absolute deviation about zero of `residuals` (consistent with
/// the standard deviation under Gaussian noise).
pub fn mad_scale(residuals: &[f64]) -> f64 {
    let abs: Vec<f64> = residuals.iter().map(|r| r.abs()).collect();
    1.4826 * median(&abs).unwrap_or(0.0)
}

/// Huber loss `rho(u)` of a standardised residual `u` (`u^2/2` inside `k`).
pub fn huber_rho(u: f64, k: f64) -> f64 {
    let a = u.abs();
    if a <= k {
        0.5 * a * a
    } else {
        k * a - 0.5 * k * k
    }
}

/// Fits `ys` against `xs` with Huber's loss, re-estimating the scale from the
/// residuals each iteration, never below `scale_floor` (which keeps an exact line
/// with one outlier from dividing by zero).
///
/// `None` under the same conditions as [`fit_weighted_line`].
pub fn huber_line(xs: &[f64], ys: &[f64], scale_floor: f64) -> Option<RobustLine> {
    huber_with(xs, ys, scale_floor, fit_weighted_line)
}

/// [`huber_line`] with every step held to `intercept >= 0, slope >= 0`
/// ([`fit_weighted_line_nonneg`]).
pub fn huber_line_nonneg(xs: &[f64], ys: &[f64], scale_floor: f64) -> Option<RobustLine> {
    huber_with(xs, ys, scale_floor, fit_weighted_line_nonneg)
}

/// A weighted line fit, free or held to the non-negative quadrant.
type Fit = fn(&[f64], &[f64], &[f64]) -> Option<Line>;

fn huber_with(xs: &[f64], ys: &[f64], scale_floor: f64, fit: Fit) -> Option<RobustLine> {
    let mut scale = scale_floor;
    let (line, weights, iterations) = irls(
        xs,
        ys,
        &vec![1.0; xs.len()],
        |residuals| {
            scale = mad_scale(residuals).max(scale_floor).max(f64::MIN_POSITIVE);
            vec![scale; residuals.len()]
        },
        fit,
    )?;
    Some(RobustLine {
        line,
        weights,
        scale,
        iterations,
    })
}

/// Huber fit with a known noise level per point (`sigma[i]`, fixed): weighted least
/// squares with weights `huber(r_i / sigma_i) / sigma_i^2`, so noisier points count
/// less and outliers are judged against the noise where they are (PRTT noise grows
/// with the message size). The reported weights are the Huber factors alone, in
/// `(0, 1]`; `scale` is the median of `sigma`.
pub fn huber_line_scaled(xs: &[f64], ys: &[f64], sigma: &[f64]) -> Option<RobustLine> {
    huber_scaled_with(xs, ys, sigma, fit_weighted_line)
}

/// [`huber_line_scaled`] with every step held to `intercept >= 0, slope >= 0`
/// ([`fit_weighted_line_nonneg`]): the gap `g + (s-1)G` of LogGP's domain.
pub fn huber_line_scaled_nonneg(xs: &[f64], ys: &[f64], sigma: &[f64]) -> Option<RobustLine> {
    huber_scaled_with(xs, ys, sigma, fit_weighted_line_nonneg)
}

/// [`huber_line_scaled`] with the slope held at 0 and the level at least 0
/// ([`fit_weighted_level_nonneg`]): the robust level of `ys`.
pub fn huber_level_scaled_nonneg(xs: &[f64], ys: &[f64], sigma: &[f64]) -> Option<RobustLine> {
    huber_scaled_with(xs, ys, sigma, fit_weighted_level_nonneg)
}

fn huber_scaled_with(xs: &[f64], ys: &[f64], sigma: &[f64], fit: Fit) -> Option<RobustLine> {
    if sigma.len() != xs.len() || sigma.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return None;
    }
    let base: Vec<f64> = sigma.iter().map(|s| 1.0 / (s * s)).collect();
    let (line, weights, iterations) = irls(xs, ys, &base, |_| sigma.to_vec(), fit)?;
    Some(RobustLine {
        line,
        weights,
        scale: median(sigma).unwrap_or(0.0),
        iterations,
    })
}

/// Iteratively reweighted least squares on Huber's loss, from the fit with weights
/// `base`: each step weighs point `i` by `base[i]` times its Huber factor at the
/// `i`-th of the scales `scales(residuals)`, for at most 50 steps or until the line
/// stops moving. Returns the line, the last Huber factors and the
/// steps run.
fn irls(
    xs: &[f64],
    ys: &[f64],
    base: &[f64],
    mut scales: impl FnMut(&[f64]) -> Vec<f64>,
    fit: Fit,
) -> Option<(Line, Vec<f64>, usize)> {
    let mut huber = vec![1.0; xs.len()];
    let mut line = fit(xs, ys, base)?;
    let mut iterations = 0;
    for _ in 0..50 {
        iterations += 1;
        let residuals: Vec<f64> = (0..xs.len()).map(|i| ys[i] - line.at(xs[i])).collect();
        for ((h, r), s) in huber.iter_mut().zip(&residuals).zip(scales(&residuals)) {
            *h = huber_weight(*r, s, HUBER_K);
        }
        let weights: Vec<f64> = base.iter().zip(&huber).map(|(b, h)| b * h).collect();
        let next = fit(xs, ys, &weights)?;
        let done = (next.slope - line.slope).abs() <= 1e-10 * (1.0 + line.slope.abs())
            && (next.intercept - line.intercept).abs() <= 1e-10 * (1.0 + line.intercept.abs());
        line = next;
        if done {
            break;
        }
    }
    Some((line, huber, iterations))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_outlier_gets_low_weight_and_does_not_tilt_the_line() {
        let xs: Vec<f64> = (0..20).map(f64::from).collect();
        let mut ys: Vec<f64> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| 2.0 + 0.5 * x + if i % 2 == 0 { 0.01 } else { -0.01 })
            .collect();
        ys[17] += 50.0;
        let fit = huber_line(&xs, &ys, 1e-9).unwrap();
        assert!((fit.line.slope - 0.5).abs() < 0.01, "{fit:?}");
        assert!((fit.line.intercept - 2.0).abs() < 0.05, "{fit:?}");
        assert!(fit.weights[17] < 0.01);
        assert!(fit
            .weights
            .iter()
            .enumerate()
            .all(|(i, &w)| i == 17 || w > 0.9));
        // Plain least squares is tilted by the same point.
        let plain = super::super::lsq::fit_line(&xs, &ys).unwrap();
        assert!((plain.slope - 0.5).abs() > 0.1);
    }

    #[test]
    fn exact_line_keeps_unit_weights() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys = [1.0, 2.0, 3.0, 4.0];
        let fit = huber_line(&xs, &ys, 1e-9).unwrap();
        assert_eq!(fit.weights, vec![1.0; 4]);
        assert!((fit.line.slope - 1.0).abs() < 1e-12);
    }

    #[test]
    fn mad_and_rho() {
        assert!((mad_scale(&[-1.0, 1.0, -1.0, 1.0]) - 1.4826).abs() < 1e-12);
        assert_eq!(huber_rho(1.0, HUBER_K), 0.5);
        assert!((huber_rho(3.0, 1.0) - 2.5).abs() < 1e-12);
    }
}
