//! Optimal piecewise-linear segmentation by dynamic programming, with a penalty per
//! segment from the Bayesian information criterion: the second protocol-change
//! detector (`--detector segmented`), an alternative to the greedy look-ahead of
//! Hoefler et al., sec. 2.6.
//!
//! # Method
//!
//! The points `(s - 1, g + G(s - 1))` of eq. (5) are cut into consecutive segments,
//! each fitted by its own line. The cut minimises
//!
//! ```text
//! sum over segments of sum_i min(2 rho(r_i / sigma_i), cap)  +  segments * 3 * ln(N) * factor
//! ```
//!
//! where `rho` is Huber's loss (so the first term is the chi-square of Gaussian noise)
//! capped per point (an outlier costs no more than a 3-sigma residual, so isolating
//! it in a segment of its own never pays), `sigma_i` is the noise level at point `i`,
//! and `3 ln N` is BIC's price for a segment's three parameters (intercept, slope,
//! where it starts). Both terms add up over segments, so the optimum is exact by
//! dynamic programming over "best cost of the first `j` points" (Bellman 1961,
//! "On the approximation of curves by line segments").
//!
//! # Noise level
//!
//! BIC needs the noise level, and PRTT noise is neither Gaussian nor constant: small
//! sizes flip between latency levels, large sizes have noise proportional to their
//! time. `sigma_i` is therefore estimated locally and robustly: the deviation of each
//! point from the straight line through its two neighbours (exactly zero on a line,
//! large only at a kink or an outlier, which the median ignores), scaled to a standard
//! deviation, median-absolute-deviation over a window of 15 points, floored at
//! `noise_floor` (the timer/scheduler noise below which differences mean nothing)
//! and at [`RELATIVE_FLOOR`] (5%) of the value: measured gap curves bend smoothly
//! (caches), and BIC must not pay for following every bend. Whether a cut is a
//! protocol is decided on its step, floored at [`STEP_FLOOR`] (10%, see
//! [`keep_steps`]). (With one 10% floor for both, a vader switch that stepped 24%
//! in the round trip was not even proposed, the series' real noise being 2-3%.)
//!
//! # Several series at once
//!
//! A protocol switch does not always show in eq. (5). Open MPI's shared-memory and
//! MPICH's UCX switches (eager to rendezvous) show as a 20-25% drop of the round
//! trip `PRTT(1,0,s)` and as steps in `o_s` and `o_r`, while the gap per message
//! hardly moves or moves by less than its noise. [`detect_joint`] therefore cuts
//! several series measured at the same sizes at once (in [`super::loggp`]: the gap,
//! `PRTT(1,0,s)`, `o_s`, `o_r` and the send with a late receiver): multiple
//! change-point detection with a shared set of change points over a multivariate
//! cost (the "segment neighbourhood" /
//! optimal partitioning recursion of Jackson et al. 2005, "An algorithm for optimal
//! partitioning of data on an interval", with a BIC penalty as in Yao 1988,
//! "Estimating the number of change-points via Schwarz' criterion"). Each series is
//! scaled by its own robust noise level, so none dominates by its unit or its
//! noise. Guards keep it robust on this machine's bimodal, loaded timings:
//!
//! - the outlier cap applies to each size's cost summed over the series (the
//!   joint cost of a segment): a disturbed size disturbs every series at once and
//!   still costs no more than one 3-sigma residual;
//! - except in a run of [`SYSTEMATIC_RUN`] or more consecutive misfits on the same
//!   side of the fit that lie on a line of their own: that is the shape of a short
//!   protocol range (Open MPI's shared-memory eager range 2-8 KiB bends away from
//!   one line through 2-16 KiB in its last four sizes), and it costs in full; a
//!   burst of load that slows consecutive sizes by different amounts stays capped;
//! - a segment whose two neighbours lie on one line is a detour of disturbed
//!   sizes, not a protocol (a stack does not switch back), and is merged
//!   ([`without_detours`]);
//! - each boundary is then moved by up to two sizes to where the two segments fit
//!   best without the cap ([`refine`]), since the cap cannot tell on which side of a
//!   step its first points belong;
//! - a change is kept only if the two lines are apart at the boundary by
//!   [`MIN_STEP`] (2) noise levels in at least one series ([`keep_steps`]), the
//!   noise level there being the fits' residual scale floored at [`STEP_FLOOR`]
//!   (10%) of the value and at [`STEP_NOISE_FLOOR_US`] (0.05 us) (not the local
//!   estimate, which the kink itself inflates): a switch changes
//!   the time of a message at once, a cache bend or a drifting load does not.
//!   [`shown_by`] names the series in which each kept change shows.
//!
//! A final range of fewer than about 9 sizes of the default sweep is still not
//! found: its misfits do not outweigh the price of a segment over five series.

use super::lsq::Line;
use super::robust::{huber_line_scaled, huber_rho, huber_weight, HUBER_K};
use crate::stats::median;

/// Options of the segmentation detector: what `--penalty` and `--floor-us` set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentOptions {
    /// Multiplier on BIC's per-segment penalty `3 ln N` (larger: fewer segments).
    /// The default 2 pays for searching the break positions (BIC alone assumes they
    /// are given): on 200 synthetic noisy straight lines of the default sweep (before
    /// the outlier cap and the relative floor were added), factor 1 split 15, 1.5
    /// split 1, 2 split none; with all defaults none splits and a switch at 16 KiB
    /// is found in all 200.
    pub penalty_factor: f64,
    /// Floor under the estimated noise level, in the unit of the values (us).
    pub noise_floor: f64,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            penalty_factor: 2.0,
            noise_floor: 0.15,
        }
    }
}

/// Fewest points in a segment.
pub const MIN_POINTS: usize = 3;

/// Floor under the noise level as a fraction of each value, for the cost of a
/// segmentation: real gap curves are not exact lines (TCP loopback bends by ~10%
/// between 16 and 40 KiB from cache effects); with 5% the optimum may cut at such a
/// bend, and [`keep_steps`] then drops it (no step).
pub const RELATIVE_FLOOR: f64 = 0.05;

/// Floor under the noise level of a step ([`steps`]) as a fraction of the lines'
/// value there: a change smaller than [`MIN_STEP`] times this is not a protocol,
/// however quiet the data.
pub const STEP_FLOOR: f64 = 0.10;

/// Absolute floor under the noise level of a step, us: a few timer readings. Lower
/// than [`SegmentOptions::noise_floor`] (Netgauge's 0.15 us, meant for single
/// points; `--floor-us` sets that one, not this), since a step is measured between
/// two fitted lines: at Open MPI's 4 KiB shared-memory eager limit the receive
/// overhead's lines step by 0.26 us (the points from 0.72 to 1.07 us) with residual
/// scales of 0.02-0.04 us; the 0.15 us floor made that 1.7 noise levels, while the
/// 10% [`STEP_FLOOR`] (0.09 us there) makes it 2.8.
pub const STEP_NOISE_FLOOR_US: f64 = 0.05;

/// Largest cost one point can add (in units of squared standard deviations): an
/// outlier costs at most this, so cutting it into a segment of its own never pays
/// BIC's price, while a real change, off the line at every later point, still does.
/// 9 is a residual of 3 sigma.
pub const OUTLIER_CAP: f64 = 9.0;

/// Smallest step, in noise levels, that the lines of two neighbouring segments must
/// show at their boundary in at least one series for a change found by
/// [`detect_joint`] to be kept (see [`keep_steps`]). 2 noise levels with the 10%
/// relative floor: a 20% step.
pub const MIN_STEP: f64 = 2.0;

/// Local robust noise level per point (see the module docs).
pub fn local_noise(xs: &[f64], ys: &[f64], floor: f64) -> Vec<f64> {
    let n = xs.len();
    let mut dev = Vec::with_capacity(n.saturating_sub(2));
    for i in 1..n.saturating_sub(1) {
        let span = xs[i + 1] - xs[i - 1];
        let w = if span > 0.0 {
            (xs[i] - xs[i - 1]) / span
        } else {
            0.5
        };
        let predicted = (1.0 - w) * ys[i - 1] + w * ys[i + 1];
        let norm = (1.0 + (1.0 - w).powi(2) + w * w).sqrt();
        dev.push((ys[i] - predicted).abs() / norm);
    }
    if dev.is_empty() {
        return vec![floor.max(f64::MIN_POSITIVE); n];
    }
    const HALF: usize = 7;
    (0..n)
        .map(|i| {
            // dev[j] belongs to point j + 1.
            let centre = i.saturating_sub(1).min(dev.len() - 1);
            let lo = centre.saturating_sub(HALF);
            let hi = (centre + HALF + 1).min(dev.len());
            let local = 1.4826 * median(&dev[lo..hi]).unwrap_or(0.0);
            local.max(floor).max(f64::MIN_POSITIVE)
        })
        .collect()
}

/// Huber fit of `xs`/`ys` with per-point noise `sigma` (fixed); returns the line and
/// `sum min(2 rho(r / sigma), cap)`.
pub fn segment_cost(xs: &[f64], ys: &[f64], sigma: &[f64], cap: f64) -> Option<(Line, f64)> {
    let fit = huber_line_scaled(xs, ys, sigma)?;
    let residuals: Vec<f64> = (0..xs.len())
        .map(|i| (ys[i] - fit.line.at(xs[i])) / sigma[i])
        .collect();
    let costs: Vec<f64> = residuals
        .iter()
        .map(|&r| 2.0 * huber_rho(r, HUBER_K))
        .collect();
    let smooth = |from: usize, to: usize| smooth_run(xs, &[ys], &[sigma], from, to, cap);
    Some((fit.line, capped_sum(&costs, &residuals, cap, smooth)))
}

/// Whether points `from..to` lie on a line of their own (every point's cost from
/// that line, summed over the series, within `cap`): a protocol range does, a
/// burst of load that slowed a few sizes by different amounts does not.
fn smooth_run(
    xs: &[f64],
    series: &[&[f64]],
    sigmas: &[&[f64]],
    from: usize,
    to: usize,
    cap: f64,
) -> bool {
    let mut per_point = vec![0.0; to - from];
    for (ys, sigma) in series.iter().zip(sigmas) {
        let Some(fit) = huber_line_scaled(&xs[from..to], &ys[from..to], &sigma[from..to]) else {
            return false;
        };
        for (p, cost) in per_point.iter_mut().enumerate() {
            let i = from + p;
            *cost += 2.0 * huber_rho((ys[i] - fit.line.at(xs[i])) / sigma[i], HUBER_K);
        }
    }
    per_point.iter().all(|&c| c <= cap)
}

/// Consecutive points beyond the cap on the same side of the fit that make a run
/// of at least this many are not outliers: a protocol range too short to pay for
/// its segment looks exactly like that (a few sizes bending away before the
/// switch), while a disturbed size is one point on its own, or two.
pub const SYSTEMATIC_RUN: usize = 3;

/// The sum of per-point costs (Huber's, robust to outliers), each capped at `cap`
/// (an outlier costs no more than a 3-sigma residual), except in runs of
/// [`SYSTEMATIC_RUN`] or more consecutive points that exceed the cap on the same
/// side of the fit (`side`: the signed residual, or for several series their sum):
/// when it also lies on a line of its own (`smooth(from, to)`), such a run is not a
/// set of outliers but a misfit, and costs in full.
fn capped_sum(costs: &[f64], side: &[f64], cap: f64, smooth: impl Fn(usize, usize) -> bool) -> f64 {
    let mut total = 0.0;
    let mut i = 0;
    while i < costs.len() {
        if costs[i] <= cap {
            total += costs[i];
            i += 1;
            continue;
        }
        let up = side[i] > 0.0;
        let run = costs[i..]
            .iter()
            .zip(&side[i..])
            .take_while(|(&c, &r)| c > cap && (r > 0.0) == up)
            .count();
        total += if run >= SYSTEMATIC_RUN && smooth(i, i + run) {
            costs[i..i + run].iter().sum::<f64>()
        } else {
            cap * run as f64
        };
        i += run;
    }
    total
}

/// [`local_noise`] floored by [`RELATIVE_FLOOR`]` * |y|`.
fn noise(xs: &[f64], ys: &[f64], opts: &SegmentOptions) -> Vec<f64> {
    local_noise(xs, ys, opts.noise_floor)
        .into_iter()
        .zip(ys)
        .map(|(s, y)| s.max(RELATIVE_FLOOR * y.abs()))
        .collect()
}

/// [`noise`] of each of `series` over its first `n` points.
fn noise_levels(xs: &[f64], series: &[&[f64]], n: usize, opts: &SegmentOptions) -> Vec<Vec<f64>> {
    series
        .iter()
        .map(|ys| noise(&xs[..n], &ys[..n], opts))
        .collect()
}

/// The segment starts (after the first) of the optimum whose last segment for the
/// first `j` points starts at `from[j]`, read back from the end.
fn starts_from(from: &[usize]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut j = from.len() - 1;
    while j > 0 {
        let i = from[j];
        if i > 0 {
            starts.push(i);
        }
        j = i;
    }
    starts.reverse();
    starts
}

/// The optimal segmentation of several series measured at the same `xs` jointly:
/// one set of cuts, each segment fitted by its own line in every series, the cost of
/// a segment the sum of the series' costs (each series scaled by its own noise
/// level, so a series with larger noise counts for no more), and BIC's price per
/// segment for `k` series (a start plus an intercept and a slope per series, see
/// `joint_penalty`; `3 ln N * factor` for one series).
///
/// A protocol switch shows in different series on different paths: a switch to
/// rendezvous adds a handshake to the round-trip time `PRTT(1,0,s)` while the gap
/// per message (eq. 5) may hardly move, and a step can go down as well as up. With
/// several series, a change small in each but present in all still pays.
pub fn detect_joint(xs: &[f64], series: &[&[f64]], opts: &SegmentOptions) -> Vec<usize> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let sigmas = noise_levels(xs, series, n, opts);
    let m = MIN_POINTS;
    if n < 2 * m || series.is_empty() {
        return Vec::new();
    }
    let penalty = joint_penalty(n, series.len(), opts);
    let margin = PRUNE_MARGIN * penalty;
    let mut fits = JointFits::new(xs, series, &sigmas, OUTLIER_CAP);
    // best[j]: minimal criterion for the first j points; from[j]: where its last
    // segment starts.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0.0;
    // The starts still in the running (ascending), each with the end `t + m` from
    // which it is pruned (see `PRUNE_MARGIN`), `usize::MAX` if not (yet).
    let mut alive: Vec<(usize, usize)> = Vec::new();
    let mut totals: Vec<f64> = Vec::new();
    for j in m..=n {
        if best[j - m].is_finite() {
            alive.push((j - m, usize::MAX));
        }
        alive.retain(|&(_, dies)| dies > j);
        totals.clear();
        for &(i, _) in &alive {
            // A cost is never negative: a start that cannot beat the best so far
            // even at no cost (or only tie it, later) is not fitted.
            if best[i] + penalty >= best[j] {
                totals.push(f64::NAN);
                continue;
            }
            let Some(c) = fits.cost(i, j) else {
                totals.push(f64::NAN);
                continue;
            };
            let total = best[i] + c + penalty;
            totals.push(total);
            if total < best[j] {
                best[j] = total;
                from[j] = i;
            }
        }
        // PELT: a start whose segment to `j` already costs more than the best
        // criterion at `j` by `margin` (plus the penalty both pay) does not end
        // the optimum after `j + m` (where `j` itself becomes a start), see
        // `PRUNE_MARGIN`.
        for ((_, dies), &total) in alive.iter_mut().zip(&totals) {
            if *dies == usize::MAX && total > best[j] + penalty + margin {
                *dies = j + m;
            }
        }
    }
    starts_from(&from)
}

/// Safety margin of the pruning in [`detect_joint`], in penalties. Pruning (Killick,
/// Fearnhead and Eckley 2012, "Optimal detection of changepoints with a linear
/// computational cost", PELT) drops a start `i` at `t` (for the ends from `t + m`
/// on, where `t` is a start itself) when `best[i] + C(i, t) > best[t] + V`. That
/// loses nothing if splitting a segment never lowers its cost by more than `V`,
/// `C(i, t) + C(t, s) <= C(i, s) + V` for `i < t < s`: then `i` ends every later
/// segment `i..s` worse than `t` does. For the least capped cost over all lines
/// this holds with `V = 0` (the best line over `i..s` is one line over each part).
/// [`JointFits::cost`] is not that least cost: it evaluates the cap at the Huber line
/// (50 IRLS steps at most), and charges runs of misfits in full, so across a real
/// change the condition can fail by several penalties. Where it matters, for the
/// start `i` of the optimum's last segment `i..s`, it must only hold in the form
/// `best[i] + C(i, t) <= best[t] + V` for `i + m <= t <= s - m`; on random
/// synthetic sweeps with up to three protocols and disturbed sizes, and on the
/// measured fixtures, the largest `V` this needs is 0.12 penalties
/// (`the_start_of_an_optimal_segment_is_never_pruned`), and `V` is 2 penalties.
/// What gets pruned is a start before a real change, whose misfit grows with every
/// point past it; starts within a homogeneous range are not (splitting there
/// gains a little), so the DP stays cubic in the length of the longest range.
const PRUNE_MARGIN: f64 = 2.0;

/// The cost of the segments of several series: each series fitted by its own
/// Huber line (scaled by its noise level `sigmas[k]`), and per point the sum over
/// the series of `2 rho(r / sigma)`, capped at `cap`: a disturbed size usually
/// disturbs every series at once, and still costs no more than one 3-sigma
/// residual, so that cutting a run of disturbed sizes into a segment of its own
/// does not pay more for having several series. The Huber fits are
/// [`huber_line_scaled`]'s (same steps, same arithmetic in the same order, so the
/// same bits) without its allocations and repeated checks, for the many segments
/// of one DP.
struct JointFits<'a> {
    xs: &'a [f64],
    series: &'a [&'a [f64]],
    sigmas: &'a [Vec<f64>],
    /// `1 / sigma^2` per series and point.
    base: Vec<Vec<f64>>,
    cap: f64,
    weights: Vec<f64>,
    per_point: Vec<f64>,
    side: Vec<f64>,
}

impl<'a> JointFits<'a> {
    fn new(xs: &'a [f64], series: &'a [&'a [f64]], sigmas: &'a [Vec<f64>], cap: f64) -> Self {
        JointFits {
            xs,
            series,
            sigmas,
            base: sigmas
                .iter()
                .map(|sigma| sigma.iter().map(|s| 1.0 / (s * s)).collect())
                .collect(),
            cap,
            weights: Vec::new(),
            per_point: Vec::new(),
            side: Vec::new(),
        }
    }

    /// The cost of the segment `a..b`; `None` where a fit fails.
    fn cost(&mut self, a: usize, b: usize) -> Option<f64> {
        let len = b - a;
        self.per_point.clear();
        self.per_point.resize(len, 0.0);
        self.side.clear();
        self.side.resize(len, 0.0);
        let xs = &self.xs[a..b];
        for ((ys, sigma), base) in self.series.iter().zip(self.sigmas).zip(&self.base) {
            let (ys, sigma, base) = (&ys[a..b], &sigma[a..b], &base[a..b]);
            let (intercept, slope) = huber_fit(xs, ys, sigma, base, &mut self.weights)?;
            for p in 0..len {
                let r = (ys[p] - (intercept + slope * xs[p])) / sigma[p];
                self.per_point[p] += 2.0 * huber_rho(r, HUBER_K);
                self.side[p] += r;
            }
        }
        let series: Vec<&[f64]> = self.series.iter().map(|ys| &ys[a..b]).collect();
        let sigmas: Vec<&[f64]> = self.sigmas.iter().map(|sigma| &sigma[a..b]).collect();
        let cap = self.cap;
        let smooth = |from: usize, to: usize| smooth_run(xs, &series, &sigmas, from, to, cap);
        Some(capped_sum(&self.per_point, &self.side, cap, smooth))
    }
}

/// [`huber_line_scaled`]'s line as `(intercept, slope)`: the same IRLS steps and
/// stopping rule, each weighted fit computed as [`super::lsq::fit_weighted_line`]
/// computes its line (same operations in the same order) in two passes, the
/// checks that cannot change between iterations made once; `base` is
/// `1 / sigma^2`, `weights` scratch.
fn huber_fit(
    xs: &[f64],
    ys: &[f64],
    sigma: &[f64],
    base: &[f64],
    weights: &mut Vec<f64>,
) -> Option<(f64, f64)> {
    let n = xs.len();
    if sigma.len() != n || sigma.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return None;
    }
    if n < 2 || ys.len() != n || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    weights.clear();
    weights.extend_from_slice(base);
    let mut line = weighted_fit(xs, ys, weights)?;
    for _ in 0..50 {
        for i in 0..n {
            let h = huber_weight(ys[i] - (line.0 + line.1 * xs[i]), sigma[i], HUBER_K);
            weights[i] = base[i] * h;
        }
        let next = weighted_fit(xs, ys, weights)?;
        let done = (next.1 - line.1).abs() <= 1e-10 * (1.0 + line.1.abs())
            && (next.0 - line.0).abs() <= 1e-10 * (1.0 + line.0.abs());
        line = next;
        if done {
            break;
        }
    }
    Some(line)
}

/// The line of [`super::lsq::fit_weighted_line`] for finite `xs` and `ys` of one
/// length of at least 2, as `(intercept, slope)`: `None` where it refuses.
fn weighted_fit(xs: &[f64], ys: &[f64], weights: &[f64]) -> Option<(f64, f64)> {
    // `Sum` of floats starts from -0.0, which adds as the identity.
    let (mut w_sum, mut xw, mut yw) = (-0.0, -0.0, -0.0);
    for ((x, y), &w) in xs.iter().zip(ys).zip(weights) {
        if !(w.is_finite() && w >= 0.0) {
            return None;
        }
        w_sum += w;
        xw += x * w;
        yw += y * w;
    }
    if w_sum <= 0.0 {
        return None;
    }
    let mean_x = xw / w_sum;
    let mean_y = yw / w_sum;
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for ((x, y), w) in xs.iter().zip(ys).zip(weights) {
        let dx = x - mean_x;
        sxx += w * dx * dx;
        sxy += w * dx * (y - mean_y);
    }
    if sxx <= 0.0 || !sxx.is_finite() {
        return None;
    }
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

/// BIC's price of one more segment over `k` series of `n` points: `ln N` for each
/// of its `2k + 1` parameters, plus the surcharge of `penalty_factor` on the one
/// parameter that is searched for, the start (`3 (factor - 1) ln N`, so that one
/// series pays `3 ln N * factor`): the surcharge pays for trying
/// every position, which does not grow with the number of series, while each
/// series' intercept and slope are fitted as BIC assumes.
fn joint_penalty(n: usize, k: usize, opts: &SegmentOptions) -> f64 {
    let ln_n = (n as f64).ln();
    (1 + 2 * k) as f64 * ln_n + 3.0 * (opts.penalty_factor - 1.0) * ln_n
}

/// For each change `starts[c]` (a segmentation of `xs` as returned by
/// [`detect_joint`]), which of `series` show it: those whose own cost over the two
/// neighbouring segments drops, by cutting there, by more than that series' share
/// of the penalty (`2 ln N * factor`, an intercept and a slope).
pub fn shown_by(
    xs: &[f64],
    series: &[&[f64]],
    starts: &[usize],
    opts: &SegmentOptions,
) -> Vec<Vec<usize>> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let share = 2.0 * (n as f64).ln() * opts.penalty_factor;
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(starts.iter().copied())
        .chain(std::iter::once(n))
        .collect();
    series_costs(xs, series, n, opts, |cost| {
        (1..bounds.len() - 1)
            .map(|c| {
                let (a, m, b) = (bounds[c - 1], bounds[c], bounds[c + 1]);
                (0..series.len())
                    .filter(|&k| cost(k, a, b) - cost(k, a, m) - cost(k, m, b) > share)
                    .collect()
            })
            .collect()
    })
}

/// Calls `body` with a cost function `(series, from, to)` over `series` (each
/// scaled by its own noise level); segments of fewer than 3 points cost nothing.
fn series_costs<R>(
    xs: &[f64],
    series: &[&[f64]],
    n: usize,
    opts: &SegmentOptions,
    body: impl FnOnce(&dyn Fn(usize, usize, usize) -> f64) -> R,
) -> R {
    let sigmas = noise_levels(xs, series, n, opts);
    let cost = |k: usize, a: usize, b: usize| -> f64 {
        if b < a + 3 {
            return 0.0;
        }
        let ys = series[k];
        segment_cost(&xs[a..b], &ys[a..b], &sigmas[k][a..b], OUTLIER_CAP).map_or(0.0, |(_, c)| c)
    };
    body(&cost)
}

/// The best subset of `candidates` (indices where a segment may start, ascending)
/// under the criterion of [`detect_joint`]: used to confirm the look-ahead
/// detector's changes, so that a run of disturbed points it took for a protocol
/// (costing at most [`OUTLIER_CAP`] each) is merged back when two segments'
/// penalties outweigh it. Segments of fewer than 3 points cost nothing but their
/// penalty.
pub fn best_subset_joint(
    xs: &[f64],
    series: &[&[f64]],
    candidates: &[usize],
    opts: &SegmentOptions,
) -> Vec<usize> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let penalty = joint_penalty(n, series.len(), opts);
    let mut cuts: Vec<usize> = vec![0];
    cuts.extend(candidates.iter().copied().filter(|&c| c > 0 && c < n));
    cuts.sort_unstable();
    cuts.dedup();
    cuts.push(n);
    let sigmas = noise_levels(xs, series, n, opts);
    let mut fits = JointFits::new(xs, series, &sigmas, OUTLIER_CAP);
    let cost = |a: usize, b: usize| -> f64 {
        if b < a + 3 {
            return 0.0;
        }
        fits.cost(a, b).unwrap_or(0.0)
    };
    optimal_partition(&cuts, penalty, cost)
}

/// Moves each change `starts[c]` by up to 2 points to where the two neighbouring
/// segments fit best without the outlier cap (Huber's loss, summed over the
/// series). The cap makes [`detect_joint`] robust to disturbed sizes, but also
/// blind to which side of a step its first points belong: off either line they cost
/// the same capped amount. Uncapped, points on the wrong side of a step cost in
/// proportion to the step, so the boundary goes to the step.
pub fn refine(
    xs: &[f64],
    series: &[&[f64]],
    starts: &[usize],
    opts: &SegmentOptions,
) -> Vec<usize> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let sigmas = noise_levels(xs, series, n, opts);
    let m = MIN_POINTS;
    let cost = |a: usize, b: usize| -> f64 {
        series
            .iter()
            .zip(&sigmas)
            .map(|(ys, sigma)| {
                segment_cost(&xs[a..b], &ys[a..b], &sigma[a..b], f64::INFINITY)
                    .map_or(0.0, |(_, c)| c)
            })
            .sum()
    };
    let mut cuts = starts.to_vec();
    for c in 0..cuts.len() {
        let a = if c == 0 { 0 } else { cuts[c - 1] };
        let b = cuts.get(c + 1).copied().unwrap_or(n);
        let lo = cuts[c].saturating_sub(2).max(a + m);
        let hi = (cuts[c] + 2).min(b.saturating_sub(m));
        if lo > hi {
            continue;
        }
        let best = (lo..=hi)
            .map(|p| (p, cost(a, p) + cost(p, b)))
            .min_by(|x, y| x.1.total_cmp(&y.1));
        if let Some((p, _)) = best {
            cuts[c] = p;
        }
    }
    cuts
}

/// The step at each change `starts[c]`: the largest, over `series`, of the
/// difference between the lines of the two neighbouring segments midway between
/// the last point of one and the first of the other, in units of that series' noise
/// around them: the larger robust residual scale of the two fits, floored at
/// [`STEP_FLOOR`] of the lines' value there and at [`STEP_NOISE_FLOOR_US`]. (The local
/// noise estimate of the points next to the boundary is not used: it is inflated by
/// the very kink it sits on.) A segment of fewer than 3 points gives an infinite
/// step.
pub fn steps(xs: &[f64], series: &[&[f64]], starts: &[usize], opts: &SegmentOptions) -> Vec<f64> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let sigmas = noise_levels(xs, series, n, opts);
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(starts.iter().copied())
        .chain(std::iter::once(n))
        .collect();
    (1..bounds.len() - 1)
        .map(|c| {
            let (a, m, b) = (bounds[c - 1], bounds[c], bounds[c + 1]);
            let x = (xs[m - 1] + xs[m]) / 2.0;
            series
                .iter()
                .zip(&sigmas)
                .map(|(ys, sigma)| {
                    if m < a + 3 || b < m + 3 {
                        return f64::INFINITY;
                    }
                    let before = segment_cost(&xs[a..m], &ys[a..m], &sigma[a..m], OUTLIER_CAP);
                    let after = segment_cost(&xs[m..b], &ys[m..b], &sigma[m..b], OUTLIER_CAP);
                    match (before, after) {
                        (Some((l1, _)), Some((l2, _))) => {
                            let unit = residual_scale(&xs[a..m], &ys[a..m], &l1)
                                .max(residual_scale(&xs[m..b], &ys[m..b], &l2))
                                .max(STEP_FLOOR * (l1.at(x).abs() + l2.at(x).abs()) / 2.0)
                                .max(STEP_NOISE_FLOOR_US);
                            (l2.at(x) - l1.at(x)).abs() / unit
                        }
                        _ => f64::INFINITY,
                    }
                })
                .fold(0.0, f64::max)
        })
        .collect()
}

/// 1.4826 times the median absolute residual of `ys` from `line` (a standard
/// deviation for Gaussian noise, blind to a minority of outliers).
fn residual_scale(xs: &[f64], ys: &[f64], line: &Line) -> f64 {
    let residuals: Vec<f64> = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - line.at(*x)).abs())
        .collect();
    1.4826 * median(&residuals).unwrap_or(0.0)
}

/// Drops, one at a time and smallest first, the changes whose [`steps`] stay below
/// [`MIN_STEP`]: a protocol switch changes the time of a message at once, so its
/// two lines are apart at the boundary in some series, whereas a curve that bends
/// smoothly (caches: TCP loopback bends by ~10-15% between 16 and 40 KiB) or a level
/// that drifts under load is cut by BIC only because many points add up small
/// misfits. A pure change of slope without a step is not reported.
pub fn keep_steps(
    xs: &[f64],
    series: &[&[f64]],
    starts: &[usize],
    opts: &SegmentOptions,
) -> Vec<usize> {
    let mut kept = starts.to_vec();
    loop {
        let s = steps(xs, series, &kept, opts);
        let Some((i, &smallest)) = s.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)) else {
            return kept;
        };
        if smallest >= MIN_STEP {
            return without_detours(xs, series, &kept, opts);
        }
        kept.remove(i);
    }
}

/// Removes detours: a segment whose two neighbours lie on one line in every series
/// (one line through both fits them as well as two, by the criterion's price of a
/// segment) is a stretch of disturbed sizes, not a protocol, since a stack does not
/// switch back to the protocol it left. Its two boundaries go. This is what makes
/// it safe to charge runs of misfits in full ([`SYSTEMATIC_RUN`]): a short real
/// range is kept, a burst of load in the middle of a range is not.
pub fn without_detours(
    xs: &[f64],
    series: &[&[f64]],
    starts: &[usize],
    opts: &SegmentOptions,
) -> Vec<usize> {
    let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
    let sigmas = noise_levels(xs, series, n, opts);
    let price = joint_penalty(n, series.len(), opts);
    let full = |xs: &[f64], ys: &[f64], sigma: &[f64]| {
        segment_cost(xs, ys, sigma, f64::INFINITY).map(|(_, c)| c)
    };
    let mut kept = starts.to_vec();
    'search: loop {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(kept.iter().copied())
            .chain(std::iter::once(n))
            .collect();
        for w in bounds.windows(4) {
            let (a, b, c, d) = (w[0], w[1], w[2], w[3]);
            if b - a < 2 || d - c < 2 {
                continue;
            }
            let mut apart = 0.0;
            let mut together = 0.0;
            for (ys, sigma) in series.iter().zip(&sigmas) {
                let join =
                    |v: &[f64]| -> Vec<f64> { v[a..b].iter().chain(&v[c..d]).copied().collect() };
                let (Some(left), Some(right), Some(both)) = (
                    full(&xs[a..b], &ys[a..b], &sigma[a..b]),
                    full(&xs[c..d], &ys[c..d], &sigma[c..d]),
                    full(&join(xs), &join(ys), &join(sigma)),
                ) else {
                    continue;
                };
                apart += left + right;
                together += both;
            }
            if together - apart < price {
                kept.retain(|&s| s != b && s != c);
                continue 'search;
            }
        }
        return kept;
    }
}

/// Optimal partitioning (Jackson et al. 2005) restricted to `cuts` (ascending, from
/// 0 to n): the subset of inner cuts minimising the sum of segment costs plus
/// `penalty` per segment, by dynamic programming over the cuts.
fn optimal_partition(
    cuts: &[usize],
    penalty: f64,
    mut cost: impl FnMut(usize, usize) -> f64,
) -> Vec<usize> {
    let m = cuts.len();
    let mut best = vec![f64::INFINITY; m];
    let mut from = vec![0usize; m];
    best[0] = 0.0;
    for j in 1..m {
        for i in 0..j {
            let total = best[i] + cost(cuts[i], cuts[j]) + penalty;
            if total < best[j] {
                best[j] = total;
                from[j] = i;
            }
        }
    }
    let mut kept = Vec::new();
    let mut j = m - 1;
    while j > 0 {
        j = from[j];
        if j > 0 {
            kept.push(cuts[j]);
        }
    }
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference for [`JointFits::cost`] (same bits): the cost of the segment
    /// `a..b` of several series: each series fitted by its own
    /// Huber line (scaled by its noise level `sigmas[k]`), and per point the sum over
    /// the series of `2 rho(r / sigma)`, capped at `cap`: a disturbed size usually
    /// disturbs every series at once, and still costs no more than one 3-sigma
    /// residual, so that cutting a run of disturbed sizes into a segment of its own
    /// does not pay more for having several series.
    fn joint_cost(
        xs: &[f64],
        series: &[&[f64]],
        sigmas: &[Vec<f64>],
        a: usize,
        b: usize,
        cap: f64,
    ) -> Option<f64> {
        let mut per_point = vec![0.0; b - a];
        let mut side = vec![0.0; b - a];
        for (ys, sigma) in series.iter().zip(sigmas) {
            let fit = huber_line_scaled(&xs[a..b], &ys[a..b], &sigma[a..b])?;
            for p in 0..b - a {
                let r = (ys[a + p] - fit.line.at(xs[a + p])) / sigma[a + p];
                per_point[p] += 2.0 * huber_rho(r, HUBER_K);
                side[p] += r;
            }
        }
        let xs = &xs[a..b];
        let series: Vec<&[f64]> = series.iter().map(|ys| &ys[a..b]).collect();
        let sigmas: Vec<&[f64]> = sigmas.iter().map(|sigma| &sigma[a..b]).collect();
        let smooth = |from: usize, to: usize| smooth_run(xs, &series, &sigmas, from, to, cap);
        Some(capped_sum(&per_point, &side, cap, smooth))
    }

    /// The result of a segmentation.
    struct Segmentation {
        /// Indices at which a new segment starts (after the first), ascending.
        starts: Vec<usize>,
    }

    /// The optimal segmentation of `(xs, ys)` (`xs` ascending).
    fn detect(xs: &[f64], ys: &[f64], opts: &SegmentOptions) -> Segmentation {
        let n = xs.len().min(ys.len());
        let sigma = noise(&xs[..n], &ys[..n], opts);
        let m = MIN_POINTS;
        if n < 2 * m {
            return Segmentation { starts: Vec::new() };
        }
        let penalty = 3.0 * (n as f64).ln() * opts.penalty_factor;
        let (starts, _) = optimal_segments(n, m, penalty, |i, j| {
            segment_cost(&xs[i..j], &ys[i..j], &sigma[i..j], OUTLIER_CAP).map(|(_, c)| c)
        });
        Segmentation { starts }
    }

    /// Optimal partitioning of `n` points into segments of at least `m` points, by
    /// dynamic programming over "best criterion of the first `j` points" with `cost(i,
    /// j)` for the segment `i..j` (`None`: not fittable) and `penalty` per segment:
    /// the segment starts after the first and the minimal criterion.
    fn optimal_segments(
        n: usize,
        m: usize,
        penalty: f64,
        cost: impl Fn(usize, usize) -> Option<f64>,
    ) -> (Vec<usize>, f64) {
        // best[j]: minimal criterion for the first j points; from[j]: where its last
        // segment starts.
        let mut best = vec![f64::INFINITY; n + 1];
        let mut from = vec![0usize; n + 1];
        best[0] = 0.0;
        for j in m..=n {
            for i in 0..=(j - m) {
                if !best[i].is_finite() {
                    continue;
                }
                let Some(c) = cost(i, j) else { continue };
                let total = best[i] + c + penalty;
                if total < best[j] {
                    best[j] = total;
                    from[j] = i;
                }
            }
        }
        (starts_from(&from), best[n])
    }

    /// The best subset of `candidates` (indices where a segment may start, ascending)
    /// under the criterion of [`detect`] (one series).
    fn best_subset(
        xs: &[f64],
        ys: &[f64],
        candidates: &[usize],
        opts: &SegmentOptions,
    ) -> Vec<usize> {
        let n = xs.len().min(ys.len());
        let sigma = noise(&xs[..n], &ys[..n], opts);
        let penalty = 3.0 * (n as f64).ln() * opts.penalty_factor;
        let mut cuts: Vec<usize> = vec![0];
        cuts.extend(candidates.iter().copied().filter(|&c| c > 0 && c < n));
        cuts.sort_unstable();
        cuts.dedup();
        cuts.push(n);
        let cost = |a: usize, b: usize| -> f64 {
            if b - a < 3 {
                return 0.0;
            }
            segment_cost(&xs[a..b], &ys[a..b], &sigma[a..b], OUTLIER_CAP).map_or(0.0, |(_, c)| c)
        };
        optimal_partition(&cuts, penalty, cost)
    }

    #[test]
    fn two_kinks_are_found_exactly_on_clean_data() {
        let xs: Vec<f64> = (0..40).map(f64::from).collect();
        let ys: Vec<f64> = xs
            .iter()
            .map(|&x| match x {
                x if x < 10.0 => 1.0 + x,
                x if x < 25.0 => 30.0 + 2.0 * x,
                x => 5.0 + 4.0 * x,
            })
            .collect();
        let seg = detect(&xs, &ys, &SegmentOptions::default());
        assert_eq!(seg.starts, vec![10, 25]);
    }

    #[test]
    fn local_noise_is_zero_on_a_line_up_to_the_floor() {
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0];
        let ys: Vec<f64> = xs.iter().map(|x| 3.0 + 0.25 * x).collect();
        let sigma = local_noise(&xs, &ys, 0.15);
        assert!(sigma.iter().all(|&s| (s - 0.15).abs() < 1e-12), "{sigma:?}");
    }

    #[test]
    fn isolated_outliers_do_not_become_segments() {
        let xs: Vec<f64> = (0..40).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|&x| 3.0 + 0.5 * x).collect();
        ys[12] += 1000.0;
        ys[27] += 50.0;
        ys[28] += 40.0;
        let seg = detect(&xs, &ys, &SegmentOptions::default());
        assert!(seg.starts.is_empty(), "{:?}", seg.starts);
    }

    #[test]
    fn a_disturbed_run_is_a_detour_and_a_real_change_is_kept() {
        let xs: Vec<f64> = (0..60).map(f64::from).collect();
        let mut ys: Vec<f64> = xs
            .iter()
            .map(|&x| if x < 40.0 { 1.0 + x } else { 100.0 + 3.0 * x })
            .collect();
        for y in &mut ys[15..19] {
            *y += 500.0;
        }
        let opts = SegmentOptions::default();
        let kept = best_subset(&xs, &ys, &[15, 19, 40], &opts);
        assert_eq!(without_detours(&xs, &[&ys], &kept, &opts), vec![40]);
    }

    #[test]
    fn a_downward_step_in_one_series_is_cut_jointly_and_attributed_to_it() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let line: Vec<f64> = xs.iter().map(|&x| 10.0 + 0.2 * x).collect();
        let step: Vec<f64> = xs
            .iter()
            .map(|&x| {
                if x < 18.0 {
                    20.0 + 0.1 * x
                } else {
                    8.0 + 0.1 * x
                }
            })
            .collect();
        let opts = SegmentOptions::default();
        let starts = detect_joint(&xs, &[&line, &step], &opts);
        assert_eq!(starts, vec![18]);
        assert_eq!(
            shown_by(&xs, &[&line, &step], &starts, &opts),
            vec![vec![1]]
        );
        assert_eq!(keep_steps(&xs, &[&line, &step], &starts, &opts), vec![18]);
    }

    #[test]
    fn a_bend_without_a_step_is_not_kept_but_a_step_is() {
        // Slope 1, then 4 from x = 20 on: continuous, so no step at the cut.
        let xs: Vec<f64> = (0..40).map(f64::from).collect();
        let bend: Vec<f64> = xs
            .iter()
            .map(|&x| 50.0 + x + if x > 20.0 { 3.0 * (x - 20.0) } else { 0.0 })
            .collect();
        let opts = SegmentOptions::default();
        assert!(keep_steps(&xs, &[&bend], &[21], &opts).is_empty());
        // The same with the second part 30% higher: kept.
        let step: Vec<f64> = bend
            .iter()
            .zip(&xs)
            .map(|(y, &x)| if x > 20.0 { 1.3 * y } else { *y })
            .collect();
        assert_eq!(keep_steps(&xs, &[&step], &[21], &opts), vec![21]);
        assert_eq!(keep_steps(&xs, &[&bend, &step], &[21], &opts), vec![21]);
    }

    #[test]
    fn short_input_is_one_segment() {
        let seg = detect(
            &[1.0, 2.0, 3.0],
            &[1.0, 5.0, 2.0],
            &SegmentOptions::default(),
        );
        assert!(seg.starts.is_empty());
    }

    /// The DP of [`detect_joint`] as it was before pruning: every start, every
    /// segment's cost from [`joint_cost`].
    fn detect_joint_unpruned(xs: &[f64], series: &[&[f64]], opts: &SegmentOptions) -> Vec<usize> {
        let n = series.iter().fold(xs.len(), |n, ys| n.min(ys.len()));
        let sigmas = noise_levels(xs, series, n, opts);
        let m = MIN_POINTS;
        if n < 2 * m || series.is_empty() {
            return Vec::new();
        }
        let penalty = joint_penalty(n, series.len(), opts);
        optimal_segments(n, m, penalty, |i, j| {
            joint_cost(xs, series, &sigmas, i, j, OUTLIER_CAP)
        })
        .0
    }

    /// The series [`crate::model::loggp::assess`] cuts, from its samples.
    fn series_of(samples: &[crate::model::loggp::Sample]) -> (Vec<f64>, Vec<Vec<f64>>) {
        let xs = samples.iter().map(|s| s.size as f64 - 1.0).collect();
        let series = vec![
            samples
                .iter()
                .map(|s| (s.prtt_n_0_us - s.prtt_1_0_us) / 9.0)
                .collect(),
            samples.iter().map(|s| s.prtt_1_0_us).collect(),
            samples
                .iter()
                .map(|s| (s.prtt_n_d_us - s.prtt_1_0_us) / 9.0 - s.d_us)
                .collect(),
            samples.iter().map(|s| s.or_us).collect(),
            samples.iter().map(|s| s.send_late_us.unwrap()).collect(),
        ];
        (xs, series)
    }

    /// Random synthetic sweeps of `len` sizes: up to three protocols switching at
    /// random sizes, random noise, some sizes disturbed in every series.
    fn random_sweeps(len: usize, count: u64) -> Vec<(Vec<f64>, Vec<Vec<f64>>)> {
        use crate::model::loggp::synthetic::{sweep, Noise, Rng, Truth};
        (0..count)
            .map(|seed| {
                let mut rng = Rng::new(seed + 1);
                let mut truth = || Truth {
                    l: 2.0 + 20.0 * rng.uniform(),
                    os: 1.0 + 4.0 * rng.uniform(),
                    or: 1.0 + 4.0 * rng.uniform(),
                    g: 2.0 + 40.0 * rng.uniform(),
                    big_g: 0.0002 + 0.001 * rng.uniform(),
                    synchronous: rng.uniform() < 0.5,
                };
                let protocols = [truth(), truth(), truth()];
                let step = 1 + (64 * 1024 / len as u64);
                let sizes: Vec<u64> = (1..=len as u64).map(|k| k * step).collect();
                let switches: Vec<u64> = (0..(seed % 3))
                    .map(|_| sizes[(rng.uniform() * len as f64) as usize])
                    .collect::<std::collections::BTreeSet<u64>>()
                    .into_iter()
                    .collect();
                let noise = Noise {
                    relative: 0.002 + 0.03 * rng.uniform(),
                    absolute: 0.05,
                    bimodal_p: 0.3 * rng.uniform(),
                    bimodal_us: 1.0,
                };
                let mut samples = sweep(&sizes, &protocols, &switches, 10, noise, seed);
                for _ in 0..(seed % 4) {
                    let at = (rng.uniform() * len as f64) as usize;
                    let by = 1.0 + 2.0 * rng.uniform();
                    samples[at].prtt_1_0_us *= by;
                    samples[at].prtt_n_0_us *= by;
                    samples[at].prtt_n_d_us *= by;
                }
                series_of(&samples)
            })
            .collect()
    }

    #[test]
    fn dp_costs_are_joint_cost_to_the_bit() {
        let opts = SegmentOptions::default();
        for (xs, series) in random_sweeps(30, 4) {
            let series: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
            let sigmas = noise_levels(&xs, &series, xs.len(), &opts);
            let mut fits = JointFits::new(&xs, &series, &sigmas, OUTLIER_CAP);
            for a in 0..xs.len() - 3 {
                for b in a + 3..=xs.len() {
                    let want = joint_cost(&xs, &series, &sigmas, a, b, OUTLIER_CAP);
                    let got = fits.cost(a, b);
                    assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "{a}..{b}");
                }
            }
        }
        // And where the fit is refused.
        let xs = [1.0, 1.0, 1.0, 1.0];
        let ys = [1.0, 2.0, 3.0, 4.0];
        let sigmas = vec![vec![1.0; 4]];
        let series: [&[f64]; 1] = [&ys];
        assert_eq!(joint_cost(&xs, &series, &sigmas, 0, 4, 9.0), None);
        assert_eq!(JointFits::new(&xs, &series, &sigmas, 9.0).cost(0, 4), None);
    }

    #[test]
    fn pruned_dp_equals_the_unpruned_dp_on_random_sweeps() {
        let opts = SegmentOptions::default();
        let mut cut = 0;
        for (xs, series) in random_sweeps(48, 16) {
            let series: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
            let want = detect_joint_unpruned(&xs, &series, &opts);
            assert_eq!(detect_joint(&xs, &series, &opts), want);
            cut += want.len();
        }
        assert!(
            cut > 5,
            "the sweeps should have changes to find, found {cut}"
        );
    }

    /// The condition under which the pruning of [`detect_joint`] loses nothing
    /// (see [`PRUNE_MARGIN`]): the start `i` of the last segment of the optimum of
    /// the first `s` points is never pruned before `s`, `best[i] + C(i, t) <=
    /// best[t] + V` for `i + m <= t <= s - m`; checked on random synthetic sweeps
    /// and the measured fixtures.
    #[test]
    fn the_start_of_an_optimal_segment_is_never_pruned() {
        let fixtures = [
            include_str!("testdata/mpich_ucx_rndv_20000_outlier.json"),
            include_str!("testdata/openmpi_tcp_eager_20000_noisy.json"),
            include_str!("testdata/openmpi_vader_eager_8192_outlier_at_switch.json"),
            include_str!("testdata/openmpi_vader_eager_8192_short_range.json"),
            include_str!("testdata/openmpi_vader_eager_8192_small_step.json"),
            include_str!("testdata/tcp_loopback_burst_of_load.json"),
            include_str!("testdata/tcp_loopback_loaded.json"),
            include_str!("testdata/tcp_loopback_loaded2.json"),
        ];
        let mut sweeps = random_sweeps(40, 10);
        for text in fixtures {
            let data: serde_json::Value = serde_json::from_str(text).unwrap();
            let samples: Vec<crate::model::loggp::Sample> = data["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| crate::model::loggp::Sample {
                    size: r[0].as_u64().unwrap(),
                    prtt_1_0_us: r[1].as_f64().unwrap(),
                    prtt_n_0_us: r[2].as_f64().unwrap(),
                    prtt_n_d_us: r[3].as_f64().unwrap(),
                    d_us: r[4].as_f64().unwrap(),
                    or_us: r[5].as_f64().unwrap(),
                    send_late_us: Some(r.get(6).and_then(|v| v.as_f64()).unwrap_or(0.0)),
                })
                .collect();
            let (xs, series) = series_of(&samples);
            let series: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
            let opts = SegmentOptions::default();
            assert_eq!(
                detect_joint(&xs, &series, &opts),
                detect_joint_unpruned(&xs, &series, &opts)
            );
            sweeps.push(series_of(&samples));
        }
        let opts = SegmentOptions::default();
        let m = MIN_POINTS;
        let mut worst: f64 = 0.0;
        for (xs, series) in sweeps {
            let series: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
            let n = xs.len();
            let sigmas = noise_levels(&xs, &series, n, &opts);
            let penalty = joint_penalty(n, series.len(), &opts);
            let margin = PRUNE_MARGIN * penalty;
            let cost: Vec<Vec<f64>> = (0..=n)
                .map(|a| {
                    (0..=n)
                        .map(|b| match b >= a + m {
                            true => joint_cost(&xs, &series, &sigmas, a, b, OUTLIER_CAP).unwrap(),
                            false => f64::NAN,
                        })
                        .collect()
                })
                .collect();
            // The unpruned DP, keeping where the optimum of every prefix starts its
            // last segment.
            let mut best = vec![f64::INFINITY; n + 1];
            let mut from = vec![0; n + 1];
            best[0] = 0.0;
            for j in m..=n {
                for i in 0..=j - m {
                    if best[i].is_finite() && best[i] + cost[i][j] + penalty < best[j] {
                        best[j] = best[i] + cost[i][j] + penalty;
                        from[j] = i;
                    }
                }
            }
            // The start `i` of the optimum at `s` is pruned at `t` (and lost) if
            // `best[i] + C(i, t) > best[t] + V`.
            for (s, &i) in from.iter().enumerate().skip(2 * m) {
                for t in i + m..=s - m {
                    let needed = best[i] + cost[i][t] - best[t];
                    assert!(needed <= margin, "{i}..{t}..{s}: {needed} > {margin}");
                    worst = worst.max(needed / penalty);
                }
            }
        }
        println!("largest margin needed: {worst:.3} penalties (have {PRUNE_MARGIN})");
    }

    /// Timing of [`crate::model::loggp::assess`] (which runs [`detect_joint`] and
    /// the steps after it) on synthetic sweeps of 74, 256 and 1024 sizes, and of
    /// [`detect_joint`] against the DP as it was ([`detect_joint_unpruned`]) in the
    /// same run: a benchmark, not a test (`cargo test --release --lib
    /// segment_bench -- --ignored --nocapture`; the unpruned DP takes minutes on
    /// 1024 sizes).
    #[test]
    #[ignore]
    fn segment_bench() {
        use crate::model::loggp::synthetic::{default_sizes, sweep, Noise, Truth};
        use crate::model::loggp::{assess, AssessOptions};
        let eager = Truth {
            l: 8.0,
            os: 3.0,
            or: 4.0,
            g: 6.0,
            big_g: 0.0008,
            synchronous: false,
        };
        let rndv = Truth {
            l: 20.0,
            os: 5.0,
            or: 6.0,
            g: 40.0,
            big_g: 0.0005,
            synchronous: true,
        };
        let noise = Noise {
            relative: 0.01,
            absolute: 0.05,
            bimodal_p: 0.3,
            bimodal_us: 1.0,
        };
        for sizes in [
            default_sizes(),
            (1..=256).map(|k| k * 256).collect::<Vec<u64>>(),
            (1..=1024).map(|k| k * 64).collect(),
        ] {
            let samples = sweep(&sizes, &[eager, rndv], &[16384], 10, noise, 7);
            let t = std::time::Instant::now();
            let a = assess(&samples, &AssessOptions::default()).unwrap();
            let assess_s = t.elapsed().as_secs_f64();
            let (xs, series) = series_of(&samples);
            let series: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
            let opts = SegmentOptions::default();
            let t = std::time::Instant::now();
            let pruned = detect_joint(&xs, &series, &opts);
            let pruned_s = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            let unpruned = detect_joint_unpruned(&xs, &series, &opts);
            let unpruned_s = t.elapsed().as_secs_f64();
            assert_eq!(pruned, unpruned);
            println!(
                "{} sizes: assess {assess_s:.3} s (changes {:?}); detect_joint {pruned_s:.3} s, before {unpruned_s:.3} s",
                sizes.len(),
                a.changes
            );
        }
    }
}
