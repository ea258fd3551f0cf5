//! Huber's robust regression of a linear model with two coefficients and no
//! intercept, `y = w0 x0 + w1 x1`: what Nuriyev's thesis uses to fit the
//! algorithm-specific Hockney parameters `alpha` and `beta` of each collective
//! algorithm from its measured times (`nuriyev-model-based-collective-selection.txt`,
//! sec. 5.2.2 and 6.2: "We use the Huber regressor to find their values from the
//! system. It is less sensitive to outliers in data than the squared error loss").
//!
//! Method: iteratively reweighted least squares on Huber's loss (Huber 1964), with
//! the tuning constant `k = 1.345` (95% efficiency under normal errors) and the
//! residuals' scale re-estimated each iteration as their median absolute value
//! over 0.6745 (the MAD of a normal sample), starting from ordinary least squares.
//! The thesis uses scikit-learn's `HuberRegressor`, which estimates the scale
//! jointly with the coefficients; the MAD scale gives the same downweighting of
//! large residuals without the joint optimisation. Hand-written (about forty
//! lines) because no maintained crate offers a Huber regressor without pulling in
//! a linear-algebra stack for a 2-by-2 system.

/// Huber's tuning constant (95% efficiency under Gaussian noise): residuals beyond
/// `k` scales get weight `k / |r|`.
pub const HUBER_K: f64 = 1.345;

/// Huber weight of a residual `r` at scale `scale`.
pub fn huber_weight(r: f64, scale: f64, k: f64) -> f64 {
    let u = (r / scale).abs();
    if u <= k {
        1.0
    } else {
        k / u
    }
}

/// Normal consistency of the median absolute deviation.
const MAD_NORMAL: f64 = 0.6745;

/// A fitted two-coefficient model.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct HuberFit {
    /// The coefficients `w0`, `w1`.
    pub coef: [f64; 2],
    /// The robust scale of the residuals at the end (0: the points lie on the model).
    pub scale: f64,
    /// Reweighting iterations run.
    pub iterations: usize,
}

/// Fits `y = w0 x0 + w1 x1` to `points` (`([x0, x1], y)`); `None` with fewer than
/// two points, non-finite values, or when the two columns cannot be told apart
/// (the weighted normal equations are singular, e.g. a column of zeros).
pub fn fit(points: &[([f64; 2], f64)]) -> Option<HuberFit> {
    if points.len() < 2
        || points
            .iter()
            .any(|(x, y)| !(x[0].is_finite() && x[1].is_finite() && y.is_finite()))
    {
        return None;
    }
    let mut weights = vec![1.0; points.len()];
    let mut coef = weighted_least_squares(points, &weights)?;
    let mut scale = 0.0;
    let mut iterations = 0;
    for _ in 0..100 {
        let residuals: Vec<f64> = points
            .iter()
            .map(|(x, y)| y - coef[0] * x[0] - coef[1] * x[1])
            .collect();
        let mut abs: Vec<f64> = residuals.iter().map(|r| r.abs()).collect();
        abs.sort_by(f64::total_cmp);
        scale = super::order::median_of_sorted(&abs).unwrap_or(0.0) / MAD_NORMAL;
        if scale <= f64::EPSILON * abs.last().copied().unwrap_or(0.0).max(1.0) {
            // At least half the points lie on the model: that is the fit.
            break;
        }
        for (w, r) in weights.iter_mut().zip(&residuals) {
            *w = huber_weight(*r, scale, HUBER_K);
        }
        iterations += 1;
        let next = weighted_least_squares(points, &weights)?;
        let moved = (next[0] - coef[0]).abs() + (next[1] - coef[1]).abs();
        let size = coef[0].abs() + coef[1].abs();
        coef = next;
        if moved <= 1e-12 * size.max(f64::MIN_POSITIVE) {
            break;
        }
    }
    Some(HuberFit {
        coef,
        scale,
        iterations,
    })
}

/// The weighted least-squares solution of the 2-by-2 normal equations.
fn weighted_least_squares(points: &[([f64; 2], f64)], weights: &[f64]) -> Option<[f64; 2]> {
    let (mut a00, mut a01, mut a11, mut b0, mut b1) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for ((x, y), w) in points.iter().zip(weights) {
        a00 += w * x[0] * x[0];
        a01 += w * x[0] * x[1];
        a11 += w * x[1] * x[1];
        b0 += w * x[0] * y;
        b1 += w * x[1] * y;
    }
    let det = a00 * a11 - a01 * a01;
    if det == 0.0 || det.abs() <= 1e-12 * (a00 * a11).abs() {
        return None;
    }
    Some([(b0 * a11 - b1 * a01) / det, (a00 * b1 - a01 * b0) / det])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t = 3 n + 0.5 m`: points of a Hockney-like model, n messages of m bytes.
    fn line(n: f64, m: f64) -> ([f64; 2], f64) {
        ([n, m], 3.0 * n + 0.5 * m)
    }

    #[test]
    fn points_on_the_model_give_it_exactly() {
        let pts: Vec<_> = [(1.0, 1.0), (2.0, 8.0), (3.0, 64.0), (3.0, 512.0)]
            .iter()
            .map(|&(n, m)| line(n, m))
            .collect();
        let f = fit(&pts).unwrap();
        assert!((f.coef[0] - 3.0).abs() < 1e-9 && (f.coef[1] - 0.5).abs() < 1e-9);
    }

    #[test]
    fn one_disturbed_point_does_not_pull_the_fit_as_least_squares_does() {
        let mut pts: Vec<_> = (0..9)
            .map(|i| line(1.0 + (i % 3) as f64, f64::from(1 << i)))
            .collect();
        // A measurement a host disturbance made 40 times too slow.
        pts[2].1 *= 40.0;
        let ols = weighted_least_squares(&pts, &vec![1.0; pts.len()]).unwrap();
        let f = fit(&pts).unwrap();
        assert!(
            (ols[0] - 3.0).abs() > 10.0,
            "least squares is pulled: {ols:?}"
        );
        assert!((f.coef[0] - 3.0).abs() < 0.05, "{f:?}");
        assert!((f.coef[1] - 0.5).abs() < 1e-3, "{f:?}");
        assert!(f.iterations > 0);
    }

    #[test]
    fn noise_on_every_point_is_averaged() {
        // Alternating +-0.2 on every point: the fit stays close to the model.
        let pts: Vec<_> = (0..10)
            .map(|i| {
                let (x, y) = line(1.0 + (i % 4) as f64, f64::from(1 << i));
                (x, y + if i % 2 == 0 { 0.2 } else { -0.2 })
            })
            .collect();
        let f = fit(&pts).unwrap();
        assert!(
            (f.coef[0] - 3.0).abs() < 0.2 && (f.coef[1] - 0.5).abs() < 0.01,
            "{f:?}"
        );
    }

    #[test]
    fn columns_that_cannot_be_told_apart_give_no_fit() {
        // Every point has no bytes (a barrier): beta is not identifiable.
        assert_eq!(fit(&[([1.0, 0.0], 3.0), ([2.0, 0.0], 6.0)]), None);
        // Proportional columns.
        assert_eq!(fit(&[([1.0, 2.0], 3.0), ([2.0, 4.0], 6.0)]), None);
        assert_eq!(fit(&[([1.0, 1.0], 3.0)]), None);
        assert_eq!(fit(&[([1.0, 1.0], f64::NAN), ([2.0, 1.0], 1.0)]), None);
    }
}
