//! Ordinary least squares for a straight line `y = intercept + slope * x`.

/// A fitted line and its quality.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Line {
    /// Value at `x = 0`.
    pub intercept: f64,
    /// Change of `y` per unit of `x`.
    pub slope: f64,
    /// Standard error of `slope`.
    pub slope_stderr: f64,
    /// Standard error of `intercept`.
    pub intercept_stderr: f64,
    /// Root mean square of the residuals `y - fit(x)`.
    pub rms_residual: f64,
}

impl Line {
    /// The fitted value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// The count, means and centred sums of squares and products of points `(x, y)`:
/// what a straight line's least squares needs (slope `sxy / sxx`), kept apart so
/// fits with a slope common to several groups (a step between two sides) can add
/// the groups' sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Moments {
    /// Points.
    pub n: f64,
    /// Mean of `x`.
    pub mean_x: f64,
    /// Mean of `y`.
    pub mean_y: f64,
    /// `sum (x - mean_x)^2`.
    pub sxx: f64,
    /// `sum (x - mean_x)(y - mean_y)`.
    pub sxy: f64,
}

/// The [`Moments`] of `points` (means NaN without a point).
pub fn moments(points: impl Iterator<Item = (f64, f64)> + Clone) -> Moments {
    let n = points.clone().count() as f64;
    let mean_x = points.clone().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.clone().map(|p| p.1).sum::<f64>() / n;
    let (sxx, sxy) = points.fold((0.0, 0.0), |(sxx, sxy), (x, y)| {
        let dx = x - mean_x;
        (sxx + dx * dx, sxy + dx * (y - mean_y))
    });
    Moments {
        n,
        mean_x,
        mean_y,
        sxx,
        sxy,
    }
}

/// Fits `ys` against `xs` by ordinary least squares.
///
/// `None` when there are fewer than two points, the lengths differ, all `xs` are equal,
/// or any value is not finite. With exactly two points the standard errors are zero.
pub fn fit_line(xs: &[f64], ys: &[f64]) -> Option<Line> {
    fit_weighted_line(xs, ys, &vec![1.0; xs.len()])
}

/// Weighted least squares: minimises `sum w_i (y_i - a - b x_i)^2`. Weights must be
/// non-negative with at least two distinct `x` carrying positive weight.
pub fn fit_weighted_line(xs: &[f64], ys: &[f64], weights: &[f64]) -> Option<Line> {
    let n = xs.len();
    if n < 2 || ys.len() != n || weights.len() != n {
        return None;
    }
    if xs.iter().chain(ys).chain(weights).any(|v| !v.is_finite())
        || weights.iter().any(|&w| w < 0.0)
    {
        return None;
    }
    let w_sum: f64 = weights.iter().sum();
    if w_sum <= 0.0 {
        return None;
    }
    let mean_x = xs.iter().zip(weights).map(|(x, w)| x * w).sum::<f64>() / w_sum;
    let mean_y = ys.iter().zip(weights).map(|(y, w)| y * w).sum::<f64>() / w_sum;
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for i in 0..n {
        let dx = xs[i] - mean_x;
        sxx += weights[i] * dx * dx;
        sxy += weights[i] * dx * (ys[i] - mean_y);
    }
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let sse: f64 = (0..n)
        .map(|i| weights[i] * (ys[i] - intercept - slope * xs[i]).powi(2))
        .sum();
    let effective = weights.iter().filter(|&&w| w > 0.0).count();
    let dof = effective.saturating_sub(2);
    let sigma2 = if dof > 0 {
        sse / dof as f64 * effective as f64 / w_sum
    } else {
        0.0
    };
    let slope_stderr = (sigma2 / sxx * w_sum / effective as f64).sqrt();
    let intercept_stderr = (sigma2
        * (1.0 / effective as f64 + mean_x * mean_x / sxx * w_sum / effective as f64))
        .sqrt();
    Some(Line {
        intercept,
        slope,
        slope_stderr,
        intercept_stderr,
        rms_residual: (sse / w_sum).sqrt(),
    })
}

/// [`fit_weighted_line`] over the non-negative quadrant: the minimiser of the same
/// weighted sum subject to `intercept >= 0` and `slope >= 0` (LogGP's domain: `g`,
/// `G`, and the latencies of eq. (1) are never negative). A constrained least
/// squares, not a clamp: the sum is convex, so when the free minimiser lies outside
/// the quadrant the constrained one lies on its boundary, and on each edge (slope
/// 0: the weighted mean; intercept 0: the line through the origin) it is that
/// edge's one-parameter minimiser projected onto `>= 0`; the better edge wins.
/// Standard errors are the free fit's (a bound coefficient reads as `0 +- stderr`).
///
/// `None` as [`fit_weighted_line`].
pub fn fit_weighted_line_nonneg(xs: &[f64], ys: &[f64], weights: &[f64]) -> Option<Line> {
    let free = fit_weighted_line(xs, ys, weights)?;
    if free.intercept >= 0.0 && free.slope >= 0.0 {
        return Some(free);
    }
    let sum = |f: &dyn Fn(usize) -> f64| (0..xs.len()).map(|i| weights[i] * f(i)).sum::<f64>();
    let w_sum = sum(&|_| 1.0);
    let sxx = sum(&|i| xs[i] * xs[i]);
    let edges = [
        ((sum(&|i| ys[i]) / w_sum).max(0.0), 0.0),
        (
            0.0,
            if sxx > 0.0 {
                (sum(&|i| xs[i] * ys[i]) / sxx).max(0.0)
            } else {
                0.0
            },
        ),
    ];
    let sse = |(a, b): (f64, f64)| sum(&|i| (ys[i] - a - b * xs[i]).powi(2));
    let best = edges
        .into_iter()
        .min_by(|p, q| sse(*p).total_cmp(&sse(*q)))
        .unwrap_or_default();
    Some(Line {
        intercept: best.0,
        slope: best.1,
        rms_residual: (sse(best) / w_sum).sqrt(),
        ..free
    })
}

/// A weighted level over the non-negative half-line: the line of slope 0 through
/// the weighted mean of `ys`, what a slope its data cannot tell from 0 leaves
/// ([`fit_weighted_line`]'s minimiser with the slope held at 0), or through 0
/// where that mean is negative (a gap is never negative; data that pull below 0
/// are noise). The intercept's standard error is the weighted mean's; the
/// slope's is the free fit's, so the held slope reads `0 +- stderr`.
///
/// `None` as [`fit_weighted_line`].
pub fn fit_weighted_level_nonneg(xs: &[f64], ys: &[f64], weights: &[f64]) -> Option<Line> {
    let free = fit_weighted_line(xs, ys, weights)?;
    let w_sum: f64 = weights.iter().sum();
    let mean = ys.iter().zip(weights).map(|(y, w)| y * w).sum::<f64>() / w_sum;
    let level = mean.max(0.0);
    let sse_about = |at: f64| -> f64 {
        ys.iter()
            .zip(weights)
            .map(|(y, w)| w * (y - at).powi(2))
            .sum()
    };
    let effective = weights.iter().filter(|&&w| w > 0.0).count();
    let sigma2 = if effective > 1 {
        sse_about(mean) / (effective - 1) as f64 * effective as f64 / w_sum
    } else {
        0.0
    };
    Some(Line {
        intercept: level,
        slope: 0.0,
        slope_stderr: free.slope_stderr,
        intercept_stderr: (sigma2 / effective as f64).sqrt(),
        rms_residual: (sse_about(level) / w_sum).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_is_the_weighted_mean_with_its_standard_error() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys = [2.0, 4.0, 2.0, 4.0];
        let level = fit_weighted_level_nonneg(&xs, &ys, &[1.0; 4]).unwrap();
        assert_eq!((level.intercept, level.slope), (3.0, 0.0));
        // sample variance 4/3 over 4 points: stderr of the mean sqrt(1/3)
        assert!((level.intercept_stderr - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((level.rms_residual - 1.0).abs() < 1e-12);
        let free = fit_weighted_line(&xs, &ys, &[1.0; 4]).unwrap();
        assert_eq!(level.slope_stderr, free.slope_stderr);
        // a weight of 3 on the low points pulls the level to 2.5
        let weighted = fit_weighted_level_nonneg(&xs, &ys, &[3.0, 1.0, 3.0, 1.0]).unwrap();
        assert!((weighted.intercept - 2.5).abs() < 1e-12);
    }

    /// Gaps whose mean is negative (noise of a loaded host about a gap near 0)
    /// give the level 0, with the residuals about it and the mean's standard
    /// error: a parameter file never carries a negative g.
    #[test]
    fn a_negative_mean_gives_the_level_0() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys = [-2.0, -4.0, -2.0, -4.0];
        let level = fit_weighted_level_nonneg(&xs, &ys, &[1.0; 4]).unwrap();
        assert_eq!((level.intercept, level.slope), (0.0, 0.0));
        assert!((level.intercept_stderr - (1.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((level.rms_residual - 10.0f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn exact_line_is_recovered_with_zero_error() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys: Vec<f64> = xs.iter().map(|x| 3.0 + 0.5 * x).collect();
        let line = fit_line(&xs, &ys).unwrap();
        assert!((line.slope - 0.5).abs() < 1e-12);
        assert!((line.intercept - 3.0).abs() < 1e-12);
        assert!(line.slope_stderr < 1e-12 && line.rms_residual < 1e-12);
        assert_eq!(line.at(10.0), line.intercept + 10.0 * line.slope);
    }

    #[test]
    fn standard_error_matches_textbook_example() {
        // Fit: y = x, residuals (1, -1, -1, 1): sse 4, s^2 = 4 / 2, sxx = 5, so
        // stderr = sqrt(2 / 5).
        let xs = [0.0, 1.0, 2.0, 3.0];
        let ys = [1.0, 0.0, 1.0, 4.0];
        let line = fit_line(&xs, &ys).unwrap();
        assert!((line.slope - 1.0).abs() < 1e-12);
        assert!(line.intercept.abs() < 1e-12, "{line:?}");
        assert!((line.slope_stderr - 0.4f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn weights_of_zero_ignore_points() {
        let xs = [0.0, 1.0, 2.0, 3.0];
        let ys = [0.0, 1.0, 2.0, 100.0];
        let line = fit_weighted_line(&xs, &ys, &[1.0, 1.0, 1.0, 0.0]).unwrap();
        assert!((line.slope - 1.0).abs() < 1e-12);
    }

    #[test]
    fn degenerate_inputs_are_refused() {
        assert!(fit_line(&[1.0], &[1.0]).is_none());
        assert!(fit_line(&[1.0, 1.0], &[1.0, 2.0]).is_none());
        assert!(fit_line(&[1.0, 2.0], &[1.0]).is_none());
        assert!(fit_line(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
    }

    /// Issue 37: a fall after a protocol switch fits a negative slope; held at 0
    /// the best line is the weighted mean (checked against a grid search).
    #[test]
    fn the_nonneg_fit_minimises_over_the_quadrant() {
        let xs = [0.0, 1.0, 2.0, 3.0];
        let falling = [4.0, 3.0, 2.5, 1.0];
        let free = fit_line(&xs, &falling).unwrap();
        assert!(free.slope < 0.0);
        let w = [1.0; 4];
        let line = fit_weighted_line_nonneg(&xs, &falling, &w).unwrap();
        assert_eq!((line.intercept, line.slope), (2.625, 0.0));
        assert_eq!(line.slope_stderr, free.slope_stderr);
        // A negative intercept: the line through the origin.
        let through = [-1.0, 1.0, 3.0, 5.0];
        let line = fit_weighted_line_nonneg(&xs, &through, &w).unwrap();
        assert_eq!(line.intercept, 0.0);
        assert!((line.slope - 22.0 / 14.0).abs() < 1e-12, "{line:?}");
        // Both negative: the origin.
        let line = fit_weighted_line_nonneg(&xs, &[-1.0, -2.0, -3.0, -4.0], &w).unwrap();
        assert_eq!((line.intercept, line.slope), (0.0, 0.0));
        // Inside the quadrant the free fit stands.
        let up = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(
            fit_weighted_line_nonneg(&xs, &up, &w),
            fit_weighted_line(&xs, &up, &w)
        );
        // No point of a grid over the quadrant does better.
        for ys in [&falling, &through] {
            let best = fit_weighted_line_nonneg(&xs, ys, &w).unwrap();
            let sse = |a: f64, b: f64| -> f64 {
                xs.iter()
                    .zip(ys.iter())
                    .map(|(x, y)| (y - a - b * x).powi(2))
                    .sum()
            };
            for i in 0..200 {
                for j in 0..200 {
                    let (a, b) = (i as f64 * 0.05, j as f64 * 0.05);
                    assert!(sse(a, b) >= sse(best.intercept, best.slope) - 1e-9);
                }
            }
        }
    }

    #[test]
    fn moments_give_the_least_squares_slope_and_means() {
        let pts = [(1.0, 3.0), (2.0, 5.0), (3.0, 7.0), (4.0, 9.0)];
        let m = moments(pts.iter().copied());
        assert_eq!((m.n, m.mean_x, m.mean_y), (4.0, 2.5, 6.0));
        assert_eq!((m.sxx, m.sxy), (5.0, 10.0));
        assert_eq!(
            m.sxy / m.sxx,
            fit_line(&[1.0, 2.0, 3.0, 4.0], &[3.0, 5.0, 7.0, 9.0])
                .unwrap()
                .slope
        );
        assert!(moments(std::iter::empty()).mean_x.is_nan());
    }
}
