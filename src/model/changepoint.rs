//! Protocol-change detection by look-ahead (Hoefler, Schneider, Lumsdaine, "LogGP in
//! theory and practice", sec. 2.6, eq. (6)).
//!
//! The mean least-squares deviation of the fit over points `k..=l` is
//!
//! ```text
//! lsq(k, l) = sum_{i=k..=l} (G * size(i) + g - val(i))^2 / (points - 2)     (6)
//! ```
//!
//! (we divide by the degrees of freedom `points - 2`; the paper writes `l - k - 2`).
//! Starting at `lastchange = 0`, the detector declares a protocol change after
//! `current` when `lsq(lastchange, current + j) > pfact * lsq(lastchange, current)`
//! for *every* `1 <= j <= x`, and then restarts with `lastchange = current + 1`.
//! Defaults are the paper's: `x = 5`, `pfact = 2.0` applied to eq. (6) as the paper
//! writes it, and a floor under the reference deviation (0.15 us as a
//! root-mean-square residual, i.e. 0.0225 us^2 in eq. (6)'s unit) so that a nearly
//! perfect fit does not flap on noise. Netgauge differs in two ways: it compares
//! root-mean-square deviations (its `pfact` of 2 is 4 in eq. (6)'s unit), and it
//! does not raise the reference to the floor but refuses any change while the
//! current deviation is below 0.15 us. Raising the reference keeps a clean fit
//! able to detect a large step, which Netgauge's rule hides.

use super::lsq::fit_line;
use super::segment::local_noise;

/// Options of the look-ahead detector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LookaheadOptions {
    /// Points looked ahead (`x` in the paper).
    pub lookahead: usize,
    /// Factor by which every look-ahead deviation must exceed the current one.
    pub pfact: f64,
    /// Floor under the current fit's RMS residual, in the unit of the values (us).
    pub floor: f64,
    /// The robust look-ahead, one switch for three departures from the paper (off:
    /// the paper's detector as written, [`super::loggp::Detector::Paper`]):
    ///
    /// - ignore the worst `min(j - 1, x / 2)` look-ahead points of the interval
    ///   `[lastchange : current + j]`, so that outliers right after `current` (up to
    ///   `x / 2` in a row) cannot fake a change: the paper's look-ahead is meant "to
    ///   reduce the effect of single outliers", but every such interval contains the
    ///   point `current + 1`;
    /// - raise the floor to the data's own noise level (the mean of the squared local
    ///   robust noise estimates of [`local_noise`] over `[lastchange : current]`), so
    ///   that noise above Netgauge's fixed 0.15 us (latency flipping between levels)
    ///   does not flap either;
    /// - keep only the changes that pay for themselves under the joint segmentation
    ///   criterion of [`super::segment::best_subset_joint`] (BIC with outliers
    ///   capped, over the gap, `PRTT(1,0,s)`, `o_s` and `o_r`), adding the joint
    ///   segmentation's own changes as candidates: a run of a few disturbed sizes is
    ///   not a protocol, and a switch small in each series is one. Applied by
    ///   [`super::loggp::assess`].
    pub robust: bool,
}

impl Default for LookaheadOptions {
    fn default() -> Self {
        LookaheadOptions {
            lookahead: 5,
            pfact: 2.0,
            floor: 0.15,
            robust: true,
        }
    }
}

/// Points a range needs before a change after it is considered: 3, so that eq. (6)
/// has a degree of freedom.
const MIN_POINTS: usize = 3;

/// Eq. (6) over `xs[k..=l]`, `ys[k..=l]` (`None` with fewer than 3 points).
pub fn lsq(xs: &[f64], ys: &[f64], k: usize, l: usize) -> Option<f64> {
    if l < k + 2 || l >= xs.len() {
        return None;
    }
    let line = fit_line(&xs[k..=l], &ys[k..=l])?;
    let sse: f64 = (k..=l).map(|i| (ys[i] - line.at(xs[i])).powi(2)).sum();
    Some(sse / (l - k + 1 - 2) as f64)
}

/// Eq. (6) over `k..=l` without the `trim` look-ahead points (indices in
/// `current+1..=l`) that lie farthest from the line through `k..=current`.
fn lsq_trimmed(
    xs: &[f64],
    ys: &[f64],
    k: usize,
    current: usize,
    l: usize,
    trim: usize,
) -> Option<f64> {
    let base = fit_line(&xs[k..=current], &ys[k..=current])?;
    let mut ahead: Vec<usize> = (current + 1..=l).collect();
    ahead.sort_by(|&a, &b| {
        let ra = (ys[a] - base.at(xs[a])).abs();
        let rb = (ys[b] - base.at(xs[b])).abs();
        rb.total_cmp(&ra)
    });
    let dropped = &ahead[..trim.min(ahead.len())];
    let (kx, ky): (Vec<f64>, Vec<f64>) = (k..=l)
        .filter(|i| !dropped.contains(i))
        .map(|i| (xs[i], ys[i]))
        .unzip();
    lsq(&kx, &ky, 0, kx.len().checked_sub(1)?)
}

/// The indices at which a new range starts (the first point after each detected
/// change), ascending; empty when the data are one straight line.
///
/// `xs` must be ascending. Changes within the last `lookahead` points cannot be
/// seen (the method needs points after a change to notice it).
pub fn detect(xs: &[f64], ys: &[f64], opts: &LookaheadOptions) -> Vec<usize> {
    let n = xs.len().min(ys.len());
    let x = opts.lookahead.max(1);
    let floor_lsq = opts.floor * opts.floor;
    let sigma = opts
        .robust
        .then(|| local_noise(&xs[..n], &ys[..n], opts.floor));
    let mut starts = Vec::new();
    let mut last = 0;
    let mut current = last + MIN_POINTS - 1;
    while current + x < n {
        let Some(here) = lsq(xs, ys, last, current) else {
            current += 1;
            continue;
        };
        let noise = sigma.as_ref().map_or(0.0, |s| {
            s[last..=current].iter().map(|v| v * v).sum::<f64>() / (current - last + 1) as f64
        });
        let reference = here.max(floor_lsq).max(noise) * opts.pfact;
        let rises = (1..=x).all(|j| {
            // Robust: ignore the worst min(j - 1, x / 2) look-ahead points, so up to
            // x / 2 outliers in a row cannot fake a change, while a real change
            // (every look-ahead point off the line) still shows for every j.
            let trim = (j - 1).min(x / 2);
            let v = if opts.robust && trim > 0 {
                lsq_trimmed(xs, ys, last, current, current + j, trim)
            } else {
                lsq(xs, ys, last, current + j)
            };
            v.is_some_and(|v| v > reference)
        });
        if rises {
            starts.push(current + 1);
            last = current + 1;
            current = last + MIN_POINTS - 1;
        } else {
            current += 1;
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq6_divides_by_degrees_of_freedom() {
        let xs = [0.0, 1.0, 2.0, 3.0];
        let ys = [1.0, 0.0, 1.0, 4.0];
        // Residuals of the fit y = x are (1, -1, -1, 1): 4 / (4 - 2).
        assert!((lsq(&xs, &ys, 0, 3).unwrap() - 2.0).abs() < 1e-12);
        assert!(lsq(&xs, &ys, 0, 1).is_none());
    }

    #[test]
    fn a_kink_is_found_at_the_kink() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let ys: Vec<f64> = xs
            .iter()
            .map(|&x| if x < 12.0 { 1.0 + x } else { 20.0 + 3.0 * x })
            .collect();
        assert_eq!(detect(&xs, &ys, &LookaheadOptions::default()), vec![12]);
    }

    #[test]
    fn one_outlier_is_not_a_change_unless_robustness_is_off() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|&x| 1.0 + 2.0 * x).collect();
        ys[15] += 30.0;
        assert!(detect(&xs, &ys, &LookaheadOptions::default()).is_empty());
        let paper = LookaheadOptions {
            robust: false,
            ..LookaheadOptions::default()
        };
        assert_eq!(detect(&xs, &ys, &paper), vec![15]);
    }

    #[test]
    fn two_outliers_in_a_row_are_not_a_change() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|&x| 1.0 + 2.0 * x).collect();
        ys[15] += 30.0;
        ys[16] += 25.0;
        assert!(detect(&xs, &ys, &LookaheadOptions::default()).is_empty());
    }

    #[test]
    fn a_straight_line_has_no_change() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let ys: Vec<f64> = xs.iter().map(|&x| 1.0 + 2.0 * x).collect();
        assert!(detect(&xs, &ys, &LookaheadOptions::default()).is_empty());
    }
}
