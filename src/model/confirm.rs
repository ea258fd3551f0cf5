//! Whether a candidate protocol change is real, and where exactly it lies: the
//! decisions behind the confirmation and the location of a change (issue 13). The
//! measurements are [`crate::patterns::loggp::verify`]'s; everything here is a pure
//! function of the values it measured.
//!
//! # Why a second experiment
//!
//! A detector (Hoefler et al., sec. 2.6, or [`super::segment`]) sees one sweep,
//! measured size after size. On a shared host, a disturbance that outlasts the
//! measurement of a few sizes (another process on a core, a frequency or level flip
//! of the VM) shifts a run of neighbouring sizes, and a run of shifted sizes is what
//! a protocol range looks like. No threshold on one sweep separates the two. The
//! remedy is experimental design (Hunold & Carpen-Amarie, "MPI Benchmarking
//! Revisited", sec. 6.1: randomise and replicate): a change the detector proposes
//! between `s_a` (the last size of the old range) and `s_b` (the first of the new)
//! is a hypothesis, tested by measuring sizes on both sides again in `R` fresh
//! passes, each pass alternating between the two sides in a shuffled order, so that
//! a disturbance of the machine hits both sides alike.
//!
//! # The step of one pass
//!
//! Per pass and per series (the gap of eq. 5, `PRTT(1,0,s)`, `o_s` of eq. 4, `o_r`,
//! the send with a late receiver), [`pass_step`] fits both sides with one common
//! slope and an intercept each (the analysis-of-covariance model: the slope from
//! the within-side deviations of all points, so two or three sizes per side still
//! give a slope) and takes the difference of the two lines at the boundary, midway
//! between `s_a` and `s_b`, together with the level there (the mean of the lines).
//!
//! # Across passes: three verdicts
//!
//! The steps of the passes are independent measurements of one step. [`judge`]
//! takes their median and its distribution-free confidence interval `I` (the
//! order statistics that invert the sign test, [`crate::stats::median_ci`]: with 6
//! to 8 passes at 95% it is `[min, max]`, i.e. all passes agree in sign). With
//! `f` the step floor (10% of the level, or [`STEP_SE`] standard errors of one
//! pass's step where that is smaller, so that quiet passes confirm a small step
//! they show beyond doubt; at least [`CONFIRM_FLOOR_US`], and twice the
//! series' [`roughness`], its own moves between neighbours):
//!
//! - **confirmed** when `I` excludes `[-f/2, f/2]` and the median is beyond `f`;
//! - **undecided** when `I` reaches into `[-f/2, f/2]` and holds `f` (or `-f`):
//!   the passes are too spread to tell a protocol step from none or a small one;
//! - **rejected** otherwise: the passes agree on a step smaller than `f`, or on
//!   none.
//!
//! A change is confirmed when two witnesses confirm it, undecided when one does or
//! none does and one is undecided, rejected when every series rejects it
//! ([`combine_steps`]); each series is its own witness but `o_s` and the late
//! send, which time the same send call ([`witness`]). A pass in
//! which a size was still mostly disturbed after its re-measurements is left out;
//! too few clean passes make the change undecided as well ([`Undecided::Disturbed`]).
//!
//! # Slope-only changes
//!
//! A protocol may change only the per-byte cost `G`: the two lines meet at the
//! switch, and there is no step to find. [`propose_kinks`] proposes such changes
//! from a sweep (the joint segmentation's cuts whose two sides' slopes differ by
//! more than [`KINK_FLOOR`] in both per-byte series, the gap and `PRTT(1,0,s)`);
//! [`pass_slopes`] measures, per pass, each side's own line over sizes spread wider
//! than for a step, and the relative change of slope `(b_right - b_left) /
//! max(|b_left|, |b_right|)` is judged like a step with the floor [`KINK_FLOOR`].
//! Such a change is located where its two lines cross (the median over the passes).
//! Both series must confirm it: `G` changes the slope of both. A protocol's new `G`
//! holds over its whole range, so the change must also hold between the lines the
//! sweep fits over the whole ranges on either side (to the neighbouring
//! candidates), in sign and by half [`KINK_FLOOR`] ([`hold_over_ranges`]); the
//! passes see only the sides' few sizes, where a bump of the curve that one
//! launch's buffers put there bends it as much (story:
//! `docs/findings/2026-11-24-detector-verdicts.md`).
//!
//! A relative change says nothing of size, and a step must reach its floor `f`: so
//! must a change of slope. Over the sizes of the passes, the two lines part by
//! `|b_right - b_left|` times half their span (from the boundary to a side's far
//! end, on average); below `f` the change is **undecided**
//! ([`Undecided::BelowFloor`]), since a bump of the curve smaller than a protocol's
//! step bends the sides as much (story:
//! `docs/findings/2026-11-25-detector-rates.md`). And `G` is a time per byte
//! (Hoefler et al., sec. 1: "the time needed to transmit a single byte"): a side
//! whose slope is below zero in every pass's order is no protocol's line, and the
//! change is **undecided** ([`Undecided::Falling`]).
//!
//! # Location to the byte
//!
//! Between the last size known to be old and the first known to be new, a midpoint
//! is measured interleaved with both, in a few passes. [`span_position`] places it
//! between the level expected of the old protocol there (the old reference plus
//! the old slope) and of the new (likewise): 0 is old, 1 is new. [`decide_side`]
//! calls it when the passes agree, and bisection goes on until the two brackets
//! are one byte apart.

use super::loggp::{Sample, Series};
use super::lsq::{fit_line, moments};
use super::robust::huber_line;
use super::segment::{self, SegmentOptions};
use crate::stats::{median, median_interval};
use serde::Serialize;

crate::names::named_enum! {
    /// What the passes say about a candidate change.
    pub enum Verdict("verdict") {
        /// The step (or change of slope) persists in every pass's order, beyond the
        /// floor.
        Confirmed = "confirmed",
        /// The passes are too disturbed or too spread to tell.
        Undecided = "undecided",
        /// The passes agree that there is no step of a protocol's size.
        Rejected = "rejected",
        /// Not measured again (confirmation switched off).
        Unconfirmed = "unconfirmed",
    }
}

crate::names::named_enum! {
    /// Why a change stayed undecided. The shape faults of a slope-only change
    /// (from [`Undecided::Bent`] on) are declared in the order in which
    /// [`judge_slopes`] names a change that has several: those that may hide a
    /// step nearby first.
    pub enum Undecided("reason") {
        /// Too few passes were clean of disturbed sizes.
        Disturbed = "disturbed",
        /// The interval of the step holds both zero and the floor.
        Spread = "spread",
        /// The time ran out (the doubt budget, or the plan's limit on rounds)
        /// before the candidate had the clean passes of its first judgement.
        Unfinished = "unfinished",
        /// The slopes change, but a side of the boundary bends: a change lies
        /// nearby, not at this boundary.
        Bent = "bent",
        /// The slopes change, but not as two lines of their ranges that meet at
        /// the boundary ([`SlopeEvidence::apart`], [`SlopeEvidence::off_range`]).
        Apart = "apart",
        /// The slopes change in every pass, but over a side they part by less
        /// than a protocol's smallest step ([`SlopeEvidence::below_floor`]): too
        /// faint for the sizes measured.
        BelowFloor = "below_floor",
        /// The slopes change, but a side falls with the size in every pass
        /// ([`SlopeEvidence::falling`]): no protocol's `G` is negative.
        Falling = "falling",
        /// Proposed only because the run's data left a step possible there (a
        /// doubt round, [`super::refine::Proposer::Doubt`]), confirmed by the
        /// passes, but not placed to a byte: the doubt rounds judge many
        /// boundaries, and a disturbance that comes and goes in time passes the
        /// passes' sign test at some of them; only a switch keeps one byte
        /// between the two protocols round after round.
        Unplaced = "unplaced",
        /// A part of a bisection split at a third level (its midpoint read
        /// between the two protocols' levels round after round) that the
        /// rounds did not place at one byte: the passes confirmed one change
        /// across the whole bracket, and a disturbance that holds a midpoint
        /// between the levels makes such a part as a second switch would.
        Split = "split",
    }
}

crate::names::named_enum! {
    /// What changes at a protocol switch.
    pub enum ChangeKind("change kind") {
        /// The time of a message jumps (latency, handshake, a copy more or less).
        Step = "step",
        /// Only the time per byte changes; the lines meet at the switch.
        Slope = "slope",
    }
}

/// The values of the [`Series`] at one size in one pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// Message size, bytes.
    pub size: u64,
    /// The gap per message, eq. (5), us.
    pub gap_us: f64,
    /// `PRTT(1,0,s)`, us.
    pub prtt_1_0_us: f64,
    /// The send overhead `o_s`, eq. (4), us.
    pub os_us: f64,
    /// The receive overhead `o_r`, us.
    pub or_us: f64,
    /// The send with a late receiver, us; `None` where not measured.
    pub send_late_us: Option<f64>,
    /// Most repetitions of this size were disturbed by the host, even after
    /// re-measuring.
    pub disturbed: bool,
}

impl Reading {
    /// The series of a measured sample (`n` messages per `PRTT(n,.,s)`), as
    /// [`super::loggp::assess`] derives them.
    pub fn of(s: &Sample, n: usize, disturbed: bool) -> Reading {
        Reading {
            size: s.size,
            gap_us: s.gap_per_message_us(n),
            prtt_1_0_us: s.prtt_1_0_us,
            os_us: s.send_overhead_us(n),
            or_us: s.or_us,
            send_late_us: s.send_late_us,
            disturbed,
        }
    }

    /// The value of one series; `None` where not measured.
    pub fn get(&self, series: Series) -> Option<f64> {
        match series {
            Series::Gap => Some(self.gap_us),
            Series::Prtt10 => Some(self.prtt_1_0_us),
            Series::Os => Some(self.os_us),
            Series::Or => Some(self.or_us),
            Series::SendLate => self.send_late_us,
        }
    }
}

/// Confidence level of the median's interval in every verdict.
pub const CONFIDENCE: f64 = 0.95;

/// Step floor as a fraction of the value, the most a step must reach ([`steps`]
/// lowers it to [`STEP_SE`] standard errors of a pass's step where that is
/// smaller): the 10% of the detector's [`segment::STEP_FLOOR`]. TCP loopback bends by
/// 10-15% over 16-40 KiB, but a bend is no step between neighbouring sizes; Open
/// MPI's shared-memory switch at 8 KiB steps by 7-16% in the round trip and ~20% in
/// `o_r` and the gap.
pub const STEP_FLOOR: f64 = 0.10;

/// Smallest relative change of the per-byte slope of a slope-only change: the
/// slope must at least halve or double (`|b_r - b_l| >= 0.5 max(|b_l|, |b_r|)`),
/// since a bend from caches changes it gradually and by less.
pub const KINK_FLOOR: f64 = 0.5;

/// Smallest step of a protocol, us: a few timer readings.
pub const STEP_FLOOR_US: f64 = 0.05;

/// Smallest step fresh passes confirm in one series, us: lower than
/// [`STEP_FLOOR_US`], since each pass's step is a difference of medians over
/// many repetitions, and a switch that adds 0.1 us to a round trip of 0.5 us adds
/// 0.02-0.05 us to the gap, `o_s` and the late send (UCX's `egr/short` to
/// `egr/bcopy`), which every pass shows; boundaries without a switch moved these
/// series by at most 0.03 us there (story: docs/findings/2026-12-01-first-contact-warmup.md).
pub const CONFIRM_FLOOR_US: f64 = 0.03;

/// The step of one series at a boundary in one pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassStep {
    /// Right line minus left line at the boundary, us.
    pub step_us: f64,
    /// Mean of the two lines there, us.
    pub level_us: f64,
}

/// [`PassStep`] from points `(size, value)` on the left and the right of a
/// boundary: both sides share one slope (least squares over the deviations from
/// each side's mean), each has its own intercept; the boundary is midway between
/// the largest left size and the smallest right size. `None` without a point on
/// each side or with a value that is not finite. One size per side gives a slope
/// of zero.
pub fn pass_step(left: &[(f64, f64)], right: &[(f64, f64)]) -> Option<PassStep> {
    if left.is_empty() || right.is_empty() || !all_finite(left, right) {
        return None;
    }
    let mean = |p: &[(f64, f64)]| {
        let n = p.len() as f64;
        (
            p.iter().map(|v| v.0).sum::<f64>() / n,
            p.iter().map(|v| v.1).sum::<f64>() / n,
        )
    };
    let (xl, yl) = mean(left);
    let (xr, yr) = mean(right);
    let slope = common_slope(left, right);
    let last_left = left.iter().map(|v| v.0).fold(f64::NEG_INFINITY, f64::max);
    let first_right = right.iter().map(|v| v.0).fold(f64::INFINITY, f64::min);
    let at = (last_left + first_right) / 2.0;
    let l = yl + slope * (at - xl);
    let r = yr + slope * (at - xr);
    Some(PassStep {
        step_us: r - l,
        level_us: (l + r) / 2.0,
    })
}

/// How far one series moves between neighbouring sizes on one side of a boundary,
/// us: the placebo of [`pass_step`], applied by [`steps`] to the per-size medians
/// over the passes, so that it measures the series' reproducible shape and not the
/// noise of one pass (which the interval of the step already weighs). Both sides
/// are detrended with the common slope of [`pass_step`]'s model; then every split
/// of one side into its smaller and larger sizes is a boundary where no change is
/// proposed, and the largest difference of the two parts' mean detrended values is
/// returned. A series that steps by as much between neighbours where nothing
/// changes shows no protocol at the boundary by stepping there (story:
/// `docs/findings/2026-11-24-detector-verdicts.md`). `None` when neither side has
/// two sizes, or with a value that is not finite.
pub fn roughness(left: &[(f64, f64)], right: &[(f64, f64)]) -> Option<f64> {
    if !all_finite(left, right) {
        return None;
    }
    let slope = common_slope(left, right);
    let mut out: Option<f64> = None;
    for points in [left, right] {
        let mut z: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x, y - slope * x)).collect();
        z.sort_by(|a, b| a.0.total_cmp(&b.0));
        for k in 1..z.len() {
            let mean = |p: &[(f64, f64)]| p.iter().map(|v| v.1).sum::<f64>() / p.len() as f64;
            let d = (mean(&z[..k]) - mean(&z[k..])).abs();
            out = Some(out.map_or(d, |o: f64| o.max(d)));
        }
    }
    out
}

/// Whether every point of both sides is finite.
fn all_finite(left: &[(f64, f64)], right: &[(f64, f64)]) -> bool {
    left.iter()
        .chain(right)
        .all(|(x, y)| x.is_finite() && y.is_finite())
}

/// The slope of [`pass_step`]'s model: least squares over the deviations of the
/// points from their own side's mean; zero without spread in size.
fn common_slope(left: &[(f64, f64)], right: &[(f64, f64)]) -> f64 {
    let (sxx, sxy) = [left, right]
        .iter()
        .filter(|points| !points.is_empty())
        .map(|points| moments(points.iter().copied()))
        .fold((0.0, 0.0), |(sxx, sxy), m| (sxx + m.sxx, sxy + m.sxy));
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// Signed distances of a side's inner points from the chord of its first and last
/// points, `(size, us)`, in ascending size; empty with fewer than three sizes.
pub fn chord_deviations(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut p = points.to_vec();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    if p.len() < 3 || p[p.len() - 1].0 <= p[0].0 {
        return Vec::new();
    }
    let (a, z) = (p[0], p[p.len() - 1]);
    p[1..p.len() - 1]
        .iter()
        .map(|&(x, y)| (x, y - (a.1 + (z.1 - a.1) * (x - a.0) / (z.0 - a.0))))
        .collect()
}

/// The two sides' own lines in one pass, for a slope-only change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassSlopes {
    /// Slope of the left line, us per byte.
    pub left_per_byte_us: f64,
    /// Slope of the right line, us per byte.
    pub right_per_byte_us: f64,
    /// `(right - left) / max(|left|, |right|)`: -1 to 1 when the signs agree.
    pub relative_change: f64,
    /// Where the two lines cross, bytes (`None` when parallel).
    pub crossing_bytes: Option<f64>,
    /// The right line minus the left one at the boundary, midway between the
    /// largest left size and the smallest right size, us.
    pub offset_us: f64,
}

/// [`PassSlopes`] from points `(size, value)` on both sides (each side at least two
/// different sizes); `None` otherwise, or when both slopes are zero.
pub fn pass_slopes(left: &[(f64, f64)], right: &[(f64, f64)]) -> Option<PassSlopes> {
    let line = |p: &[(f64, f64)]| {
        let xs: Vec<f64> = p.iter().map(|v| v.0).collect();
        let ys: Vec<f64> = p.iter().map(|v| v.1).collect();
        fit_line(&xs, &ys)
    };
    let (l, r) = (line(left)?, line(right)?);
    let scale = l.slope.abs().max(r.slope.abs());
    if scale <= 0.0 {
        return None;
    }
    let crossing = (l.slope != r.slope).then(|| (r.intercept - l.intercept) / (l.slope - r.slope));
    let last_left = left.iter().map(|v| v.0).fold(f64::NEG_INFINITY, f64::max);
    let first_right = right.iter().map(|v| v.0).fold(f64::INFINITY, f64::min);
    let at = (last_left + first_right) / 2.0;
    Some(PassSlopes {
        left_per_byte_us: l.slope,
        right_per_byte_us: r.slope,
        relative_change: (r.slope - l.slope) / scale,
        crossing_bytes: crossing.filter(|c| c.is_finite()),
        offset_us: (r.intercept + r.slope * at) - (l.intercept + l.slope * at),
    })
}

/// The median of the passes' values, its interval, and the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Judged {
    /// Median over the passes.
    pub median: f64,
    /// Distribution-free interval of the median `[lo, hi]` at the options' level;
    /// `None` with too few passes for that level.
    pub interval: Option<[f64; 2]>,
    /// Probability that such an interval covers the median.
    pub coverage: Option<f64>,
    /// The floor the median must pass, in the values' unit (positive).
    pub floor: f64,
    /// Passes judged.
    pub passes: usize,
    /// What the passes say.
    pub verdict: Verdict,
}

/// Judges `values` (one per pass) against `floor` (positive) at confidence
/// `level`: see the module doc for the three verdicts. Too few values for an
/// interval, or none, is undecided.
pub fn judge(values: &[f64], floor: f64, level: f64) -> Judged {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let sorted = crate::stats::sorted(&finite);
    let mid = median(&sorted).unwrap_or(f64::NAN);
    let ci = median_interval(&sorted, level).ok().flatten();
    let verdict = match ci {
        None => Verdict::Undecided,
        Some(ci) => {
            let holds = |v: f64| ci.lo <= v && v <= ci.hi;
            // Half the floor, not zero, is what the interval must exclude: on a
            // loaded host passes scatter widely, and an interval from just above
            // zero to several floors is no protocol's step (story:
            // docs/findings/2026-11-24-detector-verdicts.md).
            let margin = floor / 2.0;
            let near_zero = ci.lo <= margin && ci.hi >= -margin;
            if near_zero && (holds(floor) || holds(-floor)) {
                Verdict::Undecided
            } else if !near_zero && mid.abs() >= floor {
                Verdict::Confirmed
            } else {
                Verdict::Rejected
            }
        }
    };
    Judged {
        median: mid,
        interval: ci.map(|c| [c.lo, c.hi]),
        coverage: ci.map(|c| c.coverage),
        floor,
        passes: sorted.len(),
        verdict,
    }
}

/// The step of one series over the passes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct StepEvidence {
    /// The series (a name of [`Series`]).
    pub series: &'static str,
    /// Median level at the boundary over the passes, us.
    pub level_us: f64,
    /// The series' largest step between neighbouring sizes on one side, from the
    /// per-size medians over the passes ([`roughness`]), us; the floor is at least
    /// twice it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roughness_us: Option<f64>,
    /// The passes' steps (right minus left), us: median, interval, floor, verdict.
    pub step_us: Judged,
}

/// The relative change of slope of one series over the passes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SlopeEvidence {
    /// The series (`gap` or `prtt_1_0`).
    pub series: &'static str,
    /// Median slope on the left, us per byte.
    pub left_per_byte_us: f64,
    /// Median slope on the right, us per byte.
    pub right_per_byte_us: f64,
    /// `(right - left) / max(|left|, |right|)` per pass: median, interval, floor
    /// ([`KINK_FLOOR`]), verdict.
    pub relative_change: Judged,
    /// Median over the passes of where the two lines cross, bytes.
    pub crossing_bytes: Option<f64>,
    /// How far a side bends: the largest median over the passes of an inner
    /// point's distance from its side's chord ([`chord_deviations`]), us.
    pub bend_us: f64,
    /// How far the change of the median slopes bends the curve over one sweep
    /// step (`|b_right - b_left|` times the mean spacing of the sizes), us.
    pub kink_us: f64,
    /// The passes agreed on a change of slope, but an inner point of a side lies
    /// off its chord in every pass's order (its interval excludes zero) by at
    /// least half the kink and half the step floor ([`STEP_FLOOR`]): no verdict
    /// for a slope-only change here (undecided).
    pub bent: bool,
    /// The relative change between the sweep's robust lines over the whole ranges
    /// on either side ([`hold_over_ranges`]); absent when a range has fewer than
    /// [`RANGE_MIN_SIZES`] sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_relative_change: Option<f64>,
    /// The passes confirmed a change of slope that the ranges do not show (another
    /// sign, or less than half [`KINK_FLOOR`]): a local bend, rejected.
    pub local: bool,
    /// The slopes of the sweep's robust lines over the whole ranges on either
    /// side, us per byte, `[left, right]` ([`hold_over_ranges`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_per_byte_us: Option<[f64; 2]>,
    /// The right line minus the left one at the boundary, median over the
    /// passes, us (see [`PassSlopes::offset_us`]).
    pub offset_us: f64,
    /// The passes agreed on a change of slope, but the two sides' lines cross
    /// (median over the passes) outside the sizes of the sides, or not at all,
    /// and stand at least half the step floor apart at the boundary
    /// (`offset_us`): they do not meet at this boundary, so the change is not one
    /// of `G` alone (undecided, [`Undecided::Apart`]).
    pub apart: bool,
    /// The passes and the ranges agreed on a change of slope, but a side's slope
    /// differs from its range's by more than half the change
    /// ([`hold_over_ranges`]): the sides are not the lines of their ranges
    /// (undecided, [`Undecided::Apart`]).
    pub off_range: bool,
    /// How far the two median lines part over the sizes of the passes:
    /// `|right - left|` slope times half the span of the sizes (the distance
    /// from the boundary to a side's far end, on average), us.
    pub divergence_us: f64,
    /// The step floor at this level ([`STEP_FLOOR`] of the median value, at least
    /// [`STEP_FLOOR_US`]): what a step here must
    /// reach, and what `divergence_us` must reach, us.
    pub step_floor_us: f64,
    /// The passes agreed on a change of slope, but `divergence_us` is below
    /// `step_floor_us`: too faint to tell from a bump of the curve smaller than a
    /// protocol's step (undecided, [`Undecided::BelowFloor`]).
    pub below_floor: bool,
    /// The distribution-free interval of the median left slope over the passes,
    /// us per byte (absent with too few passes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_interval_per_byte_us: Option<[f64; 2]>,
    /// Likewise of the right slope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_interval_per_byte_us: Option<[f64; 2]>,
    /// The passes agreed on a change of slope, but a side's slope interval lies
    /// below zero: that side falls with the size, which no `G` does (undecided,
    /// [`Undecided::Falling`]).
    pub falling: bool,
}

impl SlopeEvidence {
    /// Why the passes' agreement on a change of slope is no verdict on this
    /// series, if it is not (the series is undecided by it): the first of
    /// [`Undecided::Bent`], [`Undecided::Apart`], [`Undecided::BelowFloor`],
    /// [`Undecided::Falling`] that holds. More passes would not remove any of
    /// them. `None` for a series rejected (as [`SlopeEvidence::local`]).
    pub fn shape_fault(&self) -> Option<Undecided> {
        if self.relative_change.verdict != Verdict::Undecided {
            None
        } else if self.bent {
            Some(Undecided::Bent)
        } else if self.apart || self.off_range {
            Some(Undecided::Apart)
        } else if self.below_floor {
            Some(Undecided::BelowFloor)
        } else if self.falling {
            Some(Undecided::Falling)
        } else {
            None
        }
    }
}

/// Sweep sizes a range needs for its own line in [`hold_over_ranges`].
pub const RANGE_MIN_SIZES: usize = 3;

/// Checks confirmed slope changes against the sweep's whole ranges: `left_range`
/// and `right_range` are the sweep's readings from the previous candidate (or the
/// first size) to this one and from this one to the next (or the last size). Per
/// series, the relative change between Huber lines fitted over the two ranges must
/// have the sign of the passes' median and at least half [`KINK_FLOOR`]; otherwise
/// the series' verdict becomes rejected and `local` is set. A series the ranges
/// confirm must also have each side's median slope within half the change of its
/// range's slope: a protocol's `G` is the slope of its whole range, and a side that
/// is not on its range's line measures a bump there (story:
/// `docs/findings/2026-11-25-detector-rates.md`); otherwise the verdict becomes
/// undecided and `off_range` is set. A series that the passes confirmed but
/// [`slopes`] left undecided as [`SlopeEvidence::below_floor`] or
/// [`SlopeEvidence::falling`] alone is rejected as `local` all the same when the
/// ranges do not hold it: the ranges then say that no protocol changes here, which
/// a faint or falling side does not contradict.
pub fn hold_over_ranges(
    evidence: &mut [SlopeEvidence],
    left_range: &[Reading],
    right_range: &[Reading],
) {
    for e in evidence.iter_mut() {
        let Ok(k) = e.series.parse::<Series>() else {
            continue;
        };
        let slope = |range: &[Reading]| {
            let (xs, ys): (Vec<f64>, Vec<f64>) = range
                .iter()
                .filter_map(|r| r.get(k).map(|v| (r.size as f64, v)))
                .unzip();
            if xs.len() < RANGE_MIN_SIZES {
                return None;
            }
            huber_line(&xs, &ys, 1e-3).map(|l| l.line.slope)
        };
        let (Some(bl), Some(br)) = (slope(left_range), slope(right_range)) else {
            continue;
        };
        let scale = bl.abs().max(br.abs());
        let change = if scale > 0.0 { (br - bl) / scale } else { 0.0 };
        e.range_relative_change = Some(change);
        e.range_per_byte_us = Some([bl, br]);
        let local = e.relative_change.median;
        let holds = change.signum() == local.signum() && change.abs() >= KINK_FLOOR / 2.0;
        let faint = (e.below_floor || e.falling) && !e.bent && !e.apart;
        let agreed = e.relative_change.verdict == Verdict::Confirmed || faint;
        if agreed && !holds {
            e.relative_change.verdict = Verdict::Rejected;
            e.local = true;
        }
        let half_change = (e.right_per_byte_us - e.left_per_byte_us).abs() / 2.0;
        let on_range = (e.left_per_byte_us - bl).abs() <= half_change
            && (e.right_per_byte_us - br).abs() <= half_change;
        if e.relative_change.verdict == Verdict::Confirmed && !on_range {
            e.relative_change.verdict = Verdict::Undecided;
            e.off_range = true;
        }
    }
}

/// Which passes are clean: none of their readings disturbed.
pub fn clean(passes: &[Vec<Reading>]) -> Vec<&[Reading]> {
    passes
        .iter()
        .filter(|p| !p.iter().any(|r| r.disturbed))
        .map(Vec::as_slice)
        .collect()
}

/// The readings of `pass` at `sizes` in series `k`, as `(size, value)`.
pub(super) fn side(pass: &[Reading], sizes: &[u64], k: Series) -> Vec<(f64, f64)> {
    pass.iter()
        .filter(|r| sizes.contains(&r.size))
        .filter_map(|r| r.get(k).map(|v| (r.size as f64, v)))
        .collect()
}

/// The step evidence per series over the (clean) `passes`, each holding readings at
/// sizes `left` and `right` of the boundary. Series missing from a pass are left
/// out of it; a series measured in no pass is left out.
pub fn steps(passes: &[&[Reading]], left: &[u64], right: &[u64]) -> Vec<StepEvidence> {
    Series::ALL
        .iter()
        .filter_map(|&k| {
            let per_pass: Vec<PassStep> = passes
                .iter()
                .filter_map(|p| pass_step(&side(p, left, k), &side(p, right, k)))
                .collect();
            if per_pass.is_empty() {
                return None;
            }
            let level = median(&per_pass.iter().map(|s| s.level_us).collect::<Vec<_>>())?;
            let per_size = |sizes: &[u64]| -> Vec<(f64, f64)> {
                sizes
                    .iter()
                    .filter_map(|&s| {
                        let vs: Vec<f64> = passes
                            .iter()
                            .flat_map(|p| side(p, &[s], k))
                            .map(|v| v.1)
                            .collect();
                        median(&vs).map(|m| (s as f64, m))
                    })
                    .collect()
            };
            let roughness = roughness(&per_size(left), &per_size(right));
            // A protocol's step stands out from the series' own moves between
            // neighbouring sizes: twice the roughness, so that the interval must
            // exclude the roughness itself (see [`judge`]'s half floor). Below
            // `STEP_FLOOR` of the level, the floor is `STEP_SE` standard errors of
            // one pass's step, so that passes without a step are rejected, not
            // left spread, while a step quiet passes show beyond doubt is
            // confirmed however small against the level (issue 36).
            let xs = |sizes: &[u64]| sizes.iter().map(|&s| s as f64).collect::<Vec<_>>();
            let pass_se = reading_noise(passes, left, right, k)
                .and_then(|sigma| step_se(&xs(left), &xs(right), sigma))
                .unwrap_or(f64::INFINITY);
            let floor = (STEP_FLOOR * level.abs())
                .min(STEP_SE * pass_se)
                .max(CONFIRM_FLOOR_US)
                .max(2.0 * roughness.unwrap_or(0.0));
            let values: Vec<f64> = per_pass.iter().map(|s| s.step_us).collect();
            Some(StepEvidence {
                series: k.as_str(),
                level_us: level,
                roughness_us: roughness,
                step_us: judge(&values, floor, CONFIDENCE),
            })
        })
        .collect()
}

/// Standard errors of one pass's step that a step's floor is at least
/// ([`steps`]): with six passes, a series without a step leaves the floor outside
/// the interval `[min, max]` of its passes' steps in 98% of the runs.
pub const STEP_SE: f64 = 3.0;

/// The standard error of [`pass_step`]'s step between sides at sizes `left` and
/// `right`, each reading with noise `sigma`:
/// `sigma sqrt(1/k_l + 1/k_r + (xbar_r - xbar_l)^2 / S_xx)`, the common slope
/// fitted on the within-side deviations (`S_xx`, independent of the side means).
/// `None` without a size on each side or without spread in size.
pub fn step_se(left: &[f64], right: &[f64], sigma: f64) -> Option<f64> {
    let side = |x: &[f64]| {
        let k = x.len() as f64;
        let mean = x.iter().sum::<f64>() / k;
        (k, mean, x.iter().map(|v| (v - mean).powi(2)).sum::<f64>())
    };
    if left.is_empty() || right.is_empty() {
        return None;
    }
    let ((kl, xl, sl), (kr, xr, sr)) = (side(left), side(right));
    let sxx = sl + sr;
    (sxx > 0.0 && sigma.is_finite())
        .then(|| sigma * (1.0 / kl + 1.0 / kr + (xr - xl).powi(2) / sxx).sqrt())
}

/// The noise of one reading of series `k` within a pass, us (a standard
/// deviation): the residuals of the passes' values at the sizes `left` and
/// `right` from each size's median and each pass's median offset (a disturbance
/// of the whole pass moves both sides alike and leaves the step alone), their
/// median absolute value scaled to Gaussian noise and corrected for the
/// degrees of freedom of the two medians. `None` with fewer than two passes or
/// two sizes.
fn reading_noise(passes: &[&[Reading]], left: &[u64], right: &[u64], k: Series) -> Option<f64> {
    let sizes: Vec<u64> = left.iter().chain(right).copied().collect();
    let table: Vec<Vec<f64>> = passes
        .iter()
        .map(|p| {
            sizes
                .iter()
                .map(|s| side(p, &[*s], k).first().map_or(f64::NAN, |v| v.1))
                .collect()
        })
        .filter(|row: &Vec<f64>| row.iter().all(|v| v.is_finite()))
        .collect();
    let (np, ns) = (table.len(), sizes.len());
    if np < 2 || ns < 2 {
        return None;
    }
    let col: Vec<f64> = (0..ns)
        .map(|j| median(&table.iter().map(|r| r[j]).collect::<Vec<_>>()).unwrap_or(0.0))
        .collect();
    let mut residuals = Vec::with_capacity(np * ns);
    for row in &table {
        let r: Vec<f64> = row.iter().zip(&col).map(|(v, c)| v - c).collect();
        let offset = median(&r).unwrap_or(0.0);
        residuals.extend(r.iter().map(|v| (v - offset).abs()));
    }
    let dof = ((np * ns) as f64 / ((np - 1) * (ns - 1)) as f64).sqrt();
    Some(1.4826 * median(&residuals)? * dof)
}

/// The slope evidence of the gap and `PRTT(1,0,s)` over the (clean) `passes`.
pub fn slopes(passes: &[&[Reading]], left: &[u64], right: &[u64]) -> Vec<SlopeEvidence> {
    [Series::Gap, Series::Prtt10]
        .into_iter()
        .filter_map(|k| {
            let per_pass: Vec<PassSlopes> = passes
                .iter()
                .filter_map(|p| pass_slopes(&side(p, left, k), &side(p, right, k)))
                .collect();
            if per_pass.is_empty() {
                return None;
            }
            let med = |f: fn(&PassSlopes) -> f64| {
                median(&per_pass.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let crossings: Vec<f64> = per_pass.iter().filter_map(|s| s.crossing_bytes).collect();
            let values: Vec<f64> = per_pass.iter().map(|s| s.relative_change).collect();
            let mut relative_change = judge(&values, KINK_FLOOR, CONFIDENCE);
            // Each shape below is a reason why passes that agree on a change of
            // slope are no verdict on a change of `G` alone; all are reported.
            let agreed = relative_change.verdict == Verdict::Confirmed;
            // Two straight lines that meet is what a slope-only change is. A side
            // whose inner points lie off its chord, the same way in every pass, by
            // half of what the kink bends the curve over one sweep step and by half
            // a protocol's smallest step, is no line: a step inside it (a switch
            // one sweep size off the candidate) steepens its fit like a kink
            // (story: docs/findings/2026-11-24-detector-verdicts.md).
            let mut xs: Vec<f64> = left.iter().chain(right).map(|&s| s as f64).collect();
            xs.sort_by(f64::total_cmp);
            let spacing = (xs[xs.len() - 1] - xs[0]) / (xs.len().max(2) - 1) as f64;
            let kink = (med(|s| s.right_per_byte_us) - med(|s| s.left_per_byte_us)).abs() * spacing;
            // A step of a protocol is at least the step floor; hidden at a side's end
            // it moves the side's inner points off the chord by half of it or more.
            let values_here: Vec<f64> = passes
                .iter()
                .flat_map(|p| side(p, left, k).into_iter().chain(side(p, right, k)))
                .map(|v| v.1)
                .collect();
            let level = median(&values_here).unwrap_or(0.0).abs();
            let floor = (STEP_FLOOR * level).max(STEP_FLOOR_US);
            let hidden_step = floor / 2.0;
            let mut bend = 0.0f64;
            let mut bent = false;
            for sizes in [left, right] {
                let per_pass: Vec<Vec<(f64, f64)>> = passes
                    .iter()
                    .map(|p| chord_deviations(&side(p, sizes, k)))
                    .collect();
                let mut inner: Vec<f64> = per_pass.iter().flatten().map(|d| d.0).collect();
                inner.sort_by(f64::total_cmp);
                inner.dedup();
                for x in inner {
                    let ds: Vec<f64> = per_pass
                        .iter()
                        .flatten()
                        .filter(|d| d.0 == x)
                        .map(|d| d.1)
                        .collect();
                    let sorted = crate::stats::sorted(&ds);
                    let Some(m) = median(&sorted) else { continue };
                    bend = bend.max(m.abs());
                    let consistent = median_interval(&sorted, CONFIDENCE)
                        .ok()
                        .flatten()
                        .is_some_and(|ci| ci.lo > 0.0 || ci.hi < 0.0);
                    bent |= consistent && m.abs() >= (0.5 * kink).max(hidden_step);
                }
            }
            let bent = bent && agreed;
            // Two lines that meet at the boundary cross between the sides' sizes; a
            // step beside a change of slope moves the crossing out. The step must be
            // one `bent` would see (half the floor) for the lines to be apart:
            // lines that stand closer at the boundary meet within that resolution,
            // however far from it their crossing lies (a sub-floor handshake beside
            // a small change of `G` puts it beyond a side). The median crossing,
            // not its interval: a step and a kink whose crossing falls near a
            // side's end scatter it across that end, and such a pair is no
            // change of `G` alone either.
            let crossing_bytes = median(&crossings);
            let offset = med(|s| s.offset_us);
            let meets = crossing_bytes.is_some_and(|c| xs[0] <= c && c <= xs[xs.len() - 1]);
            let apart = agreed && !meets && offset.abs() >= hidden_step;
            // A change of slope must amount to a step's floor over the sizes
            // measured, as a step must (story:
            // docs/findings/2026-11-25-detector-rates.md). Undecided, not rejected:
            // a step below its floor is no protocol's at any sweep, but the same
            // change of `G` parts its lines by more over wider sides or at a lower
            // level, so this experiment cannot tell, and more passes would not
            // widen it.
            let half_span = (xs[xs.len() - 1] - xs[0]) / 2.0;
            let divergence =
                (med(|s| s.right_per_byte_us) - med(|s| s.left_per_byte_us)).abs() * half_span;
            let below_floor = agreed && divergence < floor;
            // `G` is "the time needed to transmit a single byte" (Hoefler et al.,
            // sec. 1): no protocol's line falls with the size. A side whose slope
            // is below zero in every pass's order (the interval of its median)
            // measures a dip of the curve (story:
            // docs/findings/2026-11-25-detector-rates.md). Undecided, for a change
            // may still lie nearby.
            let interval = |f: fn(&PassSlopes) -> f64| {
                let sorted = crate::stats::sorted(&per_pass.iter().map(f).collect::<Vec<_>>());
                median_interval(&sorted, CONFIDENCE)
                    .ok()
                    .flatten()
                    .map(|ci| [ci.lo, ci.hi])
            };
            let left_interval = interval(|s| s.left_per_byte_us);
            let right_interval = interval(|s| s.right_per_byte_us);
            let falling = agreed
                && [left_interval, right_interval]
                    .iter()
                    .flatten()
                    .any(|[_, hi]| *hi < 0.0);
            if bent || apart || below_floor || falling {
                relative_change.verdict = Verdict::Undecided;
            }
            Some(SlopeEvidence {
                series: k.as_str(),
                left_per_byte_us: med(|s| s.left_per_byte_us),
                right_per_byte_us: med(|s| s.right_per_byte_us),
                relative_change,
                crossing_bytes,
                bend_us: bend,
                kink_us: kink,
                bent,
                range_relative_change: None,
                local: false,
                range_per_byte_us: None,
                offset_us: offset,
                apart,
                off_range: false,
                divergence_us: divergence,
                step_floor_us: floor,
                below_floor,
                left_interval_per_byte_us: left_interval,
                right_interval_per_byte_us: right_interval,
                falling,
            })
        })
        .collect()
}

/// The experiment whose time a series measures, for counting the witnesses of a
/// step ([`combine_steps`]): `o_s` (eq. 4) and the send with a late receiver both
/// time the send call before its receive is posted, which for an eager message is
/// one call doing the same work, so a disturbance of that call's path moves both
/// alike and they are one witness; every other series is its own.
pub fn witness(series: Series) -> Series {
    match series {
        Series::SendLate => Series::Os,
        other => other,
    }
}

/// The verdicts of the step evidence per witness ([`witness`]): a witness
/// confirms when one of its series does, else is undecided when one of them is,
/// else rejects.
pub fn witness_verdicts(evidence: &[StepEvidence]) -> Vec<Verdict> {
    let strength = |v: Verdict| match v {
        Verdict::Confirmed => 2,
        Verdict::Undecided | Verdict::Unconfirmed => 1,
        Verdict::Rejected => 0,
    };
    let mut by_witness: Vec<(Series, Verdict)> = Vec::new();
    for e in evidence {
        let Ok(series) = e.series.parse::<Series>() else {
            continue;
        };
        let (w, v) = (witness(series), e.step_us.verdict);
        match by_witness.iter_mut().find(|(k, _)| *k == w) {
            Some((_, best)) if strength(v) > strength(*best) => *best = v,
            Some(_) => {}
            None => by_witness.push((w, v)),
        }
    }
    by_witness.into_iter().map(|(_, v)| v).collect()
}

/// The verdict of a step change from its series' evidence: [`combine`] over the
/// witnesses ([`witness_verdicts`]), so that two series timing one call do not
/// confirm a change alone.
pub fn combine_steps(evidence: &[StepEvidence]) -> Verdict {
    combine(witness_verdicts(evidence))
}

/// The witnesses ([`witness`]) among `evidence` that confirm a step.
pub fn confirmed_witnesses(evidence: &[StepEvidence]) -> usize {
    witness_verdicts(evidence)
        .into_iter()
        .filter(|&v| v == Verdict::Confirmed)
        .count()
}

/// The verdict of a change from its witnesses' verdicts: confirmed by two or
/// more, undecided if one confirms or none confirms and one is undecided,
/// rejected if all reject (or there are none).
///
/// Two, because the series are different experiments on the same messages (a round
/// trip, a stream, the two overheads, a send to a late receiver) and a protocol
/// changes what a message costs in several of them, while a step in one experiment
/// alone is that experiment's (story:
/// `docs/findings/2026-11-24-detector-verdicts.md`); slope-only changes likewise
/// need both per-byte series ([`combine_slopes`]).
pub fn combine(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
    let (mut confirmed, mut undecided) = (0, false);
    for v in verdicts {
        match v {
            Verdict::Confirmed => confirmed += 1,
            Verdict::Undecided | Verdict::Unconfirmed => undecided = true,
            Verdict::Rejected => {}
        }
    }
    if confirmed >= 2 {
        Verdict::Confirmed
    } else if confirmed == 1 || undecided {
        Verdict::Undecided
    } else {
        Verdict::Rejected
    }
}

/// The verdict of a slope-only change: both per-byte series must confirm it (`G`
/// changes the slope of both); undecided if neither rejects it otherwise.
pub fn combine_slopes(evidence: &[SlopeEvidence]) -> Verdict {
    if evidence.len() < 2 {
        return Verdict::Rejected;
    }
    let vs: Vec<Verdict> = evidence.iter().map(|e| e.relative_change.verdict).collect();
    if vs.iter().all(|&v| v == Verdict::Confirmed) {
        Verdict::Confirmed
    } else if vs.contains(&Verdict::Rejected) {
        Verdict::Rejected
    } else {
        Verdict::Undecided
    }
}

/// The verdict of a slope-only change ([`combine_slopes`]) and, when it is
/// undecided, the fault of the sides' shape that makes it so ([`SlopeEvidence::
/// shape_fault`]; of several, the first in [`Undecided`]'s order, the one that may
/// hide a step nearby first). `None` when the passes are only too spread, which
/// more passes may settle. A change too faint ([`Undecided::BelowFloor`]) or
/// falling ([`Undecided::Falling`]) is the verdict only once every series agreed
/// on a change of slope: while another series' passes are merely spread, more
/// passes may still reject the change, as they did before these two rules (story:
/// `docs/findings/2026-11-25-detector-rates.md`).
pub fn judge_slopes(evidence: &[SlopeEvidence]) -> (Verdict, Option<Undecided>) {
    let verdict = combine_slopes(evidence);
    let all_agreed = evidence
        .iter()
        .all(|e| e.relative_change.verdict == Verdict::Confirmed || e.shape_fault().is_some());
    let fault = (verdict == Verdict::Undecided)
        .then(|| {
            evidence
                .iter()
                .filter_map(SlopeEvidence::shape_fault)
                .filter(|f| all_agreed || matches!(f, Undecided::Bent | Undecided::Apart))
                .min()
        })
        .flatten();
    (verdict, fault)
}

/// The confirmed series, the clearest first: the one whose median step stands out
/// most against the spread of its passes (the interval's width, at least a
/// hundredth of the floor). Location tries
/// them in this order, round by round: a series' step may change (even its sign)
/// with the host's state between the confirmation and the bisection, and then
/// [`span_position`] finds its brackets not a step apart in any round (story:
/// `docs/findings/2026-11-25-detector-rates.md`).
pub fn by_clarity(evidence: &[StepEvidence]) -> Vec<&StepEvidence> {
    let clarity = |e: &StepEvidence| {
        let width = e
            .step_us
            .interval
            .map_or(f64::INFINITY, |[lo, hi]| hi - lo)
            .max(e.step_us.floor / 100.0);
        e.step_us.median.abs() / width
    };
    let mut out: Vec<&StepEvidence> = evidence
        .iter()
        .filter(|e| e.step_us.verdict == Verdict::Confirmed)
        .collect();
    out.sort_by(|a, b| clarity(b).total_cmp(&clarity(a)));
    out
}

/// Where `mid` lies between the old and the new protocol in one pass, given one
/// reading `(size, value)` of each bracket: 0 at the level the old protocol has at
/// `mid.0` (the old reading moved along the old slope), 1 at the new one's.
/// `None` when the pass's brackets are not `step` apart (at least half of it, same
/// sign): that pass was disturbed. A position in the middle of the span
/// ([`between_levels`]) is neither protocol's: the pass was disturbed (a
/// disturbance slows the faster protocol's readings toward the slower one's, so
/// counted by its nearer half it would be a vote for the wrong side), or the
/// size has a level of its own ([`third_level`]) (story:
/// docs/findings/2026-11-29-real-switches.md, section 3b).
pub fn span_position(
    old: (f64, f64),
    mid: (f64, f64),
    new: (f64, f64),
    slopes: (f64, f64),
    step: f64,
) -> Option<f64> {
    let (expect_old, expect_new) = levels(old, mid, new, slopes);
    let span = expect_new - expect_old;
    if !(span.is_finite() && mid.1.is_finite()) || span * step.signum() < 0.5 * step.abs() {
        return None;
    }
    Some((mid.1 - expect_old) / span)
}

/// The distance between the two protocols' levels at `mid.0` in one pass: the
/// new bracket's reading moved back along the new slope less the old one's
/// moved on along the old slope.
pub fn span(old: (f64, f64), mid: (f64, f64), new: (f64, f64), slopes: (f64, f64)) -> f64 {
    let (expect_old, expect_new) = levels(old, mid, new, slopes);
    expect_new - expect_old
}

/// The two protocols' levels at `mid.0` in one pass: the old bracket's reading
/// moved on along the old slope, the new one's moved back along the new slope.
fn levels(old: (f64, f64), mid: (f64, f64), new: (f64, f64), slopes: (f64, f64)) -> (f64, f64) {
    (
        old.1 + slopes.0 * (mid.0 - old.0),
        new.1 - slopes.1 * (new.0 - mid.0),
    )
}

/// The step of a series as the bisection's recent rounds show it: the median
/// of their brackets' `spans` ([`span`]) where there are at least three, of the
/// sign of the `confirmed` step, and their median is at least three robust
/// standard deviations (1.4826 MAD) from 0 and at least [`LEAST_STEP_SHARE`] of
/// the confirmed step; `confirmed` otherwise. The host's state, and a series'
/// step with it, may change between the confirmation and the bisection, and
/// then no round's brackets are half the confirmed step apart (story:
/// docs/findings/2026-11-29-real-switches.md, "A third level").
pub fn current_step(confirmed: f64, spans: &[f64]) -> f64 {
    if spans.len() < 3 {
        return confirmed;
    }
    let Some(mid) = median(spans) else {
        return confirmed;
    };
    let deviations: Vec<f64> = spans.iter().map(|s| (s - mid).abs()).collect();
    let spread = 1.4826 * median(&deviations).unwrap_or(f64::INFINITY);
    let shown = mid * confirmed.signum() > 0.0
        && mid.abs() >= 3.0 * spread
        && mid.abs() >= LEAST_STEP_SHARE * confirmed.abs();
    if shown {
        mid
    } else {
        confirmed
    }
}

/// The smallest share of the confirmed step that [`current_step`] takes from the
/// rounds: three spans alike by chance, as brackets of one protocol can give,
/// must not set a step that noise crosses.
pub const LEAST_STEP_SHARE: f64 = 0.2;

/// Whether a [`span_position`] lies in the middle of the span, within
/// [`BETWEEN_LEVELS`] of 0.5: at neither protocol's level.
pub fn between_levels(at: f64) -> bool {
    (at - 0.5).abs() < BETWEEN_LEVELS
}

/// Whether the rounds of a bisection step read its midpoint at a level of its
/// own, between the two protocols': `between` rounds in the middle of the span
/// ([`between_levels`]) against `placed` rounds at either protocol's level, by a
/// sequential sign test stricter than [`decide_side`]'s: at least
/// [`THIRD_LEVEL_ROUNDS`] between, and at most one placed round per
/// [`THIRD_LEVEL_ROUNDS`] between. A disturbance that reads a size between the
/// levels in a third of the rounds (as beside a hog, where it slows the faster
/// protocol toward the slower) passes it about once in 700 steps; a size that
/// sits at a third level, a few bytes between two switches, reads there in
/// nearly every round (story: docs/findings/2026-11-29-real-switches.md, "A
/// third level").
pub fn third_level(between: usize, placed: usize) -> bool {
    between >= THIRD_LEVEL_ROUNDS && THIRD_LEVEL_ROUNDS * placed <= between
}

/// Fewest rounds, and rounds per placed round, that [`third_level`] asks of the
/// readings between the levels.
pub const THIRD_LEVEL_ROUNDS: usize = 8;

/// Half the width of the band around the middle of a bisection round's span in
/// which a [`span_position`] places nothing: a midpoint reading must lie within a
/// quarter of the span of one protocol's level to count.
pub const BETWEEN_LEVELS: f64 = 0.25;

/// Which protocol a size belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The protocol below the change.
    Old,
    /// The protocol from the change on.
    New,
}

/// The side the passes' [`span_position`]s put a size on, by a sequential sign test:
/// of `n` valid passes, the minority may be at most `(n - 3) / 4` (none of 3, one
/// of 7, two of 11, three of 15: one-sided sign-test p of 12.5%, 6.3%, 3.3% and
/// 1.8%, falling as the passes grow, so that spending more rounds on a doubtful
/// midpoint does not raise the chance of a wrong side). `None` until then.
pub fn decide_side(positions: &[Option<f64>]) -> Option<Side> {
    let (new, old) = votes(positions);
    let minority = new.min(old);
    let agreed = new + old >= 3 && 4 * minority + 3 <= new + old;
    agreed.then_some(if new > old { Side::New } else { Side::Old })
}

/// How the placed rounds among `positions` vote: `(new, old)`, a position of at
/// least 0.5 for the new protocol; unplaced rounds (`None`) do not vote.
pub fn votes(positions: &[Option<f64>]) -> (usize, usize) {
    let placed = positions.iter().flatten();
    let new = placed.clone().filter(|&&t| t >= 0.5).count();
    (new, placed.count() - new)
}

/// The side at the last look of a bisection step, once its placed rounds are
/// spent without [`decide_side`]'s agreement: a majority ahead of the minority
/// by [`LAST_LOOK_MARGIN`] rounds (11 of 15: one-sided sign-test p of 5.9%,
/// where [`decide_side`] asks 12 of 15, 1.8%). Where a small step's rounds
/// place the midpoint right about three times in four, the stricter test gives
/// up about every second step, while at 11 of 15 the wrong side is about a
/// thousand times less likely than the right one (story:
/// docs/findings/2026-11-29-real-switches.md, section 3e). `None` below that
/// margin.
pub fn decide_side_at_last(positions: &[Option<f64>]) -> Option<Side> {
    let (new, old) = votes(positions);
    (new.abs_diff(old) >= LAST_LOOK_MARGIN).then_some(if new > old { Side::New } else { Side::Old })
}

/// Rounds by which the majority must lead at a bisection step's last look
/// ([`decide_side_at_last`]).
pub const LAST_LOOK_MARGIN: usize = 7;

/// Fewest sizes on each side of a kink for [`propose_kinks`].
const KINK_SIDE: usize = 4;

/// Proposes slope-only changes in `readings` (a sweep, ascending sizes) between the
/// step changes `starts` (indices of first sizes of ranges): in each range, the
/// joint segmentation ([`segment::detect_joint`]) of the gap and `PRTT(1,0,s)`,
/// boundaries placed by [`segment::refine`], keeping the cuts with at least
/// `KINK_SIDE` sizes on each side where both series' Huber lines change slope by
/// at least [`KINK_FLOOR`] (see [`pass_slopes`]) and not by a step (those are the
/// step detector's). Returns indices, ascending.
pub fn propose_kinks(readings: &[Reading], starts: &[usize]) -> Vec<usize> {
    let n = readings.len();
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(starts.iter().copied())
        .chain(std::iter::once(n))
        .collect();
    let opts = SegmentOptions::default();
    let mut out = Vec::new();
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b < a + 2 * KINK_SIDE {
            continue;
        }
        let xs: Vec<f64> = readings[a..b].iter().map(|r| r.size as f64 - 1.0).collect();
        let gap: Vec<f64> = readings[a..b].iter().map(|r| r.gap_us).collect();
        let prtt: Vec<f64> = readings[a..b].iter().map(|r| r.prtt_1_0_us).collect();
        let refs: Vec<&[f64]> = vec![&gap, &prtt];
        let cuts = segment::detect_joint(&xs, &refs, &opts);
        let cuts = segment::refine(&xs, &refs, &cuts, &opts);
        let steps = segment::steps(&xs, &refs, &cuts, &opts);
        let inner: Vec<usize> = std::iter::once(0)
            .chain(cuts.iter().copied())
            .chain(std::iter::once(b - a))
            .collect();
        for (c, &cut) in cuts.iter().enumerate() {
            let (lo, hi) = (inner[c], inner[c + 2]);
            if cut < lo + KINK_SIDE || hi < cut + KINK_SIDE || steps[c] >= segment::MIN_STEP {
                continue;
            }
            let kinked = refs.iter().all(|ys| {
                let fit = |from: usize, to: usize| {
                    huber_line(&xs[from..to], &ys[from..to], 1e-3).map(|f| f.line.slope)
                };
                match (fit(lo, cut), fit(cut, hi)) {
                    (Some(l), Some(r)) => {
                        let scale = l.abs().max(r.abs());
                        scale > 0.0 && (r - l).abs() >= KINK_FLOOR * scale
                    }
                    _ => false,
                }
            });
            if kinked {
                out.push(a + cut);
            }
        }
    }
    out
}

#[cfg(test)]
/// The first of [`by_clarity`].
fn clearest(evidence: &[StepEvidence]) -> Option<&StepEvidence> {
    by_clarity(evidence).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Reading {
        /// A clean reading with every series measured: `[gap, prtt_1_0, o_s, o_r,
        /// send_late]`, us.
        pub(crate) fn measured(size: u64, values: [f64; 5]) -> Reading {
            let [gap_us, prtt_1_0_us, os_us, or_us, send_late_us] = values;
            Reading {
                size,
                gap_us,
                prtt_1_0_us,
                os_us,
                or_us,
                send_late_us: Some(send_late_us),
                disturbed: false,
            }
        }
    }

    fn line(sizes: &[u64], at_0: f64, per_byte: f64) -> Vec<(f64, f64)> {
        sizes
            .iter()
            .map(|&s| (s as f64, at_0 + per_byte * s as f64))
            .collect()
    }

    #[test]
    fn a_step_between_two_parallel_lines_is_their_distance() {
        let left = line(&[18432, 19456, 20480], 10.0, 0.001);
        let right = line(&[21504, 22528, 23552], 30.0, 0.001);
        let s = pass_step(&left, &right).unwrap();
        assert!((s.step_us - 20.0).abs() < 1e-9, "{s:?}");
        // The boundary is at 20992 B: level = 20 + 20.992.
        assert!((s.level_us - 40.992).abs() < 1e-9, "{s:?}");
        // One size per side: no slope, the difference of the values.
        let s = pass_step(&left[2..], &right[..1]).unwrap();
        assert!((s.step_us - (51.504 - 30.48)).abs() < 1e-9);
        assert_eq!(pass_step(&[], &right), None);
        assert_eq!(pass_step(&[(1.0, f64::NAN)], &right), None);
    }

    #[test]
    fn slopes_and_their_crossing() {
        // Continuous at 20001 B: 10 + 0.0008 s on the left, 0.0002 s + c on the right.
        let c = 10.0 + (0.0008 - 0.0002) * 20001.0;
        let left = line(&[14000, 16000, 18000], 10.0, 0.0008);
        let right = line(&[22000, 24000, 26000], c, 0.0002);
        let s = pass_slopes(&left, &right).unwrap();
        assert!((s.relative_change + 0.75).abs() < 1e-9, "{s:?}");
        assert!((s.crossing_bytes.unwrap() - 20001.0).abs() < 1e-6, "{s:?}");
        assert_eq!(pass_slopes(&left[..1], &right), None);
    }

    /// A candidate at 10240 B beside a switch at 8256 B: the left side 7168, 8192,
    /// 9216 holds the step, and fitted with a line it is 50 times steeper than the
    /// right, so the passes agree on a slope-only change. A side that bends is no
    /// line: undecided (story: docs/findings/2026-11-24-detector-verdicts.md).
    #[test]
    fn a_step_inside_a_side_is_no_change_of_slope() {
        let (left, right) = ([7168u64, 8192, 9216], [10240u64, 11264, 12288]);
        let value = |s: u64| if s >= 8256 { 8.8 } else { 6.2 } + 0.00005 * s as f64;
        // A round trip of 4 us plus 8e-4 us/B, a quarter of that per byte from
        // 9728 B on: its lines part by 1.5 us over the sides, beyond the floor
        // of 1.2 us (`below_floor`).
        let kinked = |s: u64| 4.0 + 0.0008 * s as f64 - 0.0006 * (s as f64 - 9728.0).max(0.0);
        for (truth, bent) in [(&value as &dyn Fn(u64) -> f64, true), (&kinked, false)] {
            let passes: Vec<Vec<Reading>> = (0..6)
                .map(|i| {
                    let wobble = 0.01 * (i as f64 - 2.5);
                    left.iter()
                        .chain(&right)
                        .map(|&s| reading(s, truth(s) + wobble, truth(s) + wobble))
                        .collect()
                })
                .collect();
            let ev = slopes(&clean(&passes), &left, &right);
            assert_eq!(ev.len(), 2);
            for e in &ev {
                assert_eq!(e.bent, bent, "{e:?}");
                let want = if bent {
                    Verdict::Undecided
                } else {
                    Verdict::Confirmed
                };
                assert_eq!(e.relative_change.verdict, want, "{e:?}");
            }
        }
    }

    /// Six passes of `truth` (gap and `PRTT(1,0,s)` alike) at `left` and `right`,
    /// each pass off by a small wobble.
    fn passes_of(truth: &dyn Fn(u64) -> f64, left: &[u64], right: &[u64]) -> Vec<Vec<Reading>> {
        passes_two(truth, truth, left, right)
    }

    /// Six passes of the gap `gap` and `PRTT(1,0,s)` `prtt` at `left` and
    /// `right`, each pass off by a small wobble (the same at every size, so every
    /// pass has the same slopes).
    fn passes_two(
        gap: &dyn Fn(u64) -> f64,
        prtt: &dyn Fn(u64) -> f64,
        left: &[u64],
        right: &[u64],
    ) -> Vec<Vec<Reading>> {
        (0..6)
            .map(|i| {
                let wobble = 0.01 * (i as f64 - 2.5);
                left.iter()
                    .chain(right)
                    .map(|&s| reading(s, prtt(s) + wobble, gap(s) + wobble))
                    .collect()
            })
            .collect()
    }

    /// `n` sweep sizes 1 KiB apart on each side of the boundary before `first`
    /// (the first size of the new range), the nearest first, and the boundary,
    /// midway between `first - 1024` and `first`.
    fn sides(first: u64, n: u64) -> (Vec<u64>, Vec<u64>, f64) {
        let left = (1..=n).map(|k| first - k * 1024).collect();
        let right = (0..n).map(|k| first + k * 1024).collect();
        (left, right, first as f64 - 512.0)
    }

    /// A line of slope `left` (us per byte) up to `at` and one of slope `right`
    /// from there, at `level` us at `at`, the right one `step` us higher.
    fn two_lines(at: f64, level: f64, left: f64, right: f64, step: f64) -> impl Fn(u64) -> f64 {
        move |s| {
            let d = s as f64 - at;
            if d < 0.0 {
                level + left * d
            } else {
                level + step + right * d
            }
        }
    }

    /// MPICH's false switch at 53248 B
    /// (docs/findings/2026-11-25-detector-rates.md), from the finding's numbers: a
    /// detector's candidate (three sizes a side), no step; the gap's sides at
    /// -1.7e-5 and 1.2e-4 us/B at 7 us, `PRTT(1,0,s)`'s changing by 0.19 us per
    /// sweep step (relative change 0.87) at 14 us. Both parted by less than the
    /// step floor over the sizes (0.35 us against 0.71, 0.47 against 1.40), and the
    /// gap's left side falls: not confirmed.
    #[test]
    fn mpich_slope_only_false_switch_at_53248_is_not_confirmed() {
        let (left, right, at) = sides(53248, 3);
        let gap = two_lines(at, 7.0, -1.7e-5, 1.2e-4, 0.0);
        let prtt = two_lines(at, 14.0, 2.8e-5, 2.13e-4, 0.0);
        let ev = slopes(
            &clean(&passes_two(&gap, &prtt, &left, &right)),
            &left,
            &right,
        );
        let [g, p] = &ev[..] else { panic!("{ev:?}") };
        for e in &ev {
            assert!(e.below_floor && !e.apart && !e.bent, "{e:?}");
            assert_eq!(e.relative_change.verdict, Verdict::Undecided, "{e:?}");
            assert!(e.relative_change.median >= KINK_FLOOR, "{e:?}");
        }
        assert!((g.divergence_us - 0.35).abs() < 0.01, "{g:?}");
        assert!((g.step_floor_us - 0.705).abs() < 0.01, "{g:?}");
        assert!((p.divergence_us - 0.47).abs() < 0.01, "{p:?}");
        assert!(g.falling && !p.falling, "{ev:?}");
        assert_eq!(
            judge_slopes(&ev),
            (Verdict::Undecided, Some(Undecided::BelowFloor))
        );
    }

    /// A faint (or falling) series is the verdict only once every series agreed on
    /// a change of slope: beside a series whose passes are merely spread, more
    /// passes may still reject the change, so no fault ends them (story:
    /// docs/findings/2026-11-25-detector-rates.md).
    #[test]
    fn a_faint_series_beside_a_spread_one_leaves_the_passes_going() {
        let (left, right, at) = sides(53248, 3);
        let gap = two_lines(at, 7.0, -1.7e-5, 1.2e-4, 0.0);
        let prtt = two_lines(at, 14.0, 2.8e-5, 2.13e-4, 0.0);
        let mut ev = slopes(
            &clean(&passes_two(&gap, &prtt, &left, &right)),
            &left,
            &right,
        );
        // The round trip's passes, as if they disagreed: spread, no shape fault.
        let p = &mut ev[1];
        p.below_floor = false;
        p.falling = false;
        assert_eq!(p.relative_change.verdict, Verdict::Undecided, "{p:?}");
        assert_eq!(p.shape_fault(), None, "{p:?}");
        assert_eq!(ev[0].shape_fault(), Some(Undecided::BelowFloor));
        assert_eq!(judge_slopes(&ev), (Verdict::Undecided, None), "{ev:?}");
        // A side that hides a step ends the passes all the same.
        ev[0].bent = true;
        assert_eq!(
            judge_slopes(&ev),
            (Verdict::Undecided, Some(Undecided::Bent))
        );
    }

    /// Rule (a) of docs/findings/2026-11-25-detector-rates.md: a change of slope
    /// must part its lines by a step's floor over the sizes. MPICH's shape with its
    /// left side rising (so no side falls) is too faint at 7 and 14 us; a real
    /// change of `G` by 2.5 times at a rendezvous switch without a step, at
    /// shared-memory levels, is not: at 16 KiB with four sizes a side (a kink
    /// candidate) and at 8 KiB with three (a detector's candidate).
    #[test]
    fn a_change_of_slope_must_part_its_lines_by_a_step_floor() {
        let (left, right, at) = sides(53248, 3);
        let gap = two_lines(at, 7.0, 1.7e-5, 1.2e-4, 0.0);
        let prtt = two_lines(at, 14.0, 2.8e-5, 2.13e-4, 0.0);
        let passes = passes_two(&gap, &prtt, &left, &right);
        let ev = slopes(&clean(&passes), &left, &right);
        assert_eq!(ev.len(), 2);
        for e in &ev {
            assert!(e.below_floor && !e.falling && !e.apart && !e.bent, "{e:?}");
            assert!(e.divergence_us < e.step_floor_us, "{e:?}");
        }
        assert_eq!(
            judge_slopes(&ev),
            (Verdict::Undecided, Some(Undecided::BelowFloor))
        );
        for (first, n) in [(17408, 4), (9216, 3)] {
            let (left, right, at) = sides(first, n);
            // g + G s: 0.5 us + 1e-4 us/B (10 GB/s) before, 2.5e-4 after; the
            // round trip twice the time per byte.
            let level = |b: f64, a: f64| b + a * at;
            let gap = two_lines(at, level(0.5, 1e-4), 1e-4, 2.5e-4, 0.0);
            let prtt = two_lines(at, level(2.0, 2e-4), 2e-4, 5e-4, 0.0);
            let passes = passes_two(&gap, &prtt, &left, &right);
            let ev = slopes(&clean(&passes), &left, &right);
            assert_eq!(ev.len(), 2);
            for e in &ev {
                assert!(!e.below_floor && !e.falling && !e.apart && !e.bent, "{e:?}");
                assert!(e.divergence_us > 1.3 * e.step_floor_us, "{e:?}");
            }
            assert_eq!(judge_slopes(&ev), (Verdict::Confirmed, None), "{ev:?}");
        }
    }

    /// Rule (b) of docs/findings/2026-11-25-detector-rates.md: `G` is a time per
    /// byte, so a side whose slope is below zero in every pass is no protocol's
    /// line (undecided), even when its lines part by more than the floor. The same
    /// change with that side rising is confirmed.
    #[test]
    fn a_side_that_falls_is_no_protocols_line() {
        let (left, right, at) = sides(13312, 3);
        let prtt = two_lines(at, 7.0, 1e-4, 5e-4, 0.0);
        for (left_gap, falls) in [(-5e-5, true), (5e-5, false)] {
            let gap = two_lines(at, 3.0, left_gap, 3e-4, 0.0);
            let passes = passes_two(&gap, &prtt, &left, &right);
            let ev = slopes(&clean(&passes), &left, &right);
            let [g, p] = &ev[..] else { panic!("{ev:?}") };
            assert_eq!(g.falling, falls, "{g:?}");
            assert!(g.left_interval_per_byte_us.unwrap()[1] < 0.0 || !falls);
            assert!(!p.falling && !g.below_floor && !p.below_floor, "{ev:?}");
            let want = if falls {
                (Verdict::Undecided, Some(Undecided::Falling))
            } else {
                (Verdict::Confirmed, None)
            };
            assert_eq!(judge_slopes(&ev), want, "{ev:?}");
        }
    }

    /// A kink candidate measures no step: a step of 1 us (20% of the level)
    /// beside a change of slope from 1e-4 to 4e-4 us/B moves the lines' crossing
    /// 3.3 KiB left of the boundary, outside the sides: no change of `G` alone
    /// meets there (undecided). The same slopes meeting at the boundary are one.
    #[test]
    fn lines_that_cross_outside_the_sides_are_no_change_of_slope_alone() {
        let (left, right, at) = sides(53248, 3);
        for (step, apart) in [(1.0, true), (0.0, false)] {
            let gap = two_lines(at, 5.0, 1e-4, 4e-4, step);
            let prtt = two_lines(at, 10.0, 2e-4, 8e-4, 2.0 * step);
            let passes = passes_two(&gap, &prtt, &left, &right);
            let ev = slopes(&clean(&passes), &left, &right);
            assert_eq!(ev.len(), 2);
            for e in &ev {
                assert_eq!(e.apart, apart, "step {step}: {e:?}");
                assert!(!e.bent && !e.below_floor && !e.falling, "{e:?}");
                let want = if apart {
                    (Verdict::Undecided, Some(Undecided::Apart))
                } else {
                    (Verdict::Confirmed, None)
                };
                assert_eq!((e.relative_change.verdict, e.shape_fault()), want, "{e:?}");
            }
            let want = if apart {
                (Verdict::Undecided, Some(Undecided::Apart))
            } else {
                (Verdict::Confirmed, None)
            };
            assert_eq!(judge_slopes(&ev), want);
        }
    }

    /// Lines whose crossing lies outside the sides but that stand less than half
    /// the step floor apart at the boundary meet within the resolution: a
    /// handshake step of 0.3 us at 7 us beside a change of `G` from 5e-5 to
    /// 1.1e-4 us/B crosses 4.9 KiB off. Not `apart`: the change is too faint
    /// (`below_floor`), which is what it is. A real switch with a sub-floor step
    /// (0.2 us at 2.3 us) and a change of `G` the sizes resolve is confirmed.
    #[test]
    fn lines_nearer_than_half_the_floor_at_the_boundary_meet() {
        let (left, right, at) = sides(53248, 3);
        let gap = two_lines(at, 7.0, 5e-5, 1.1e-4, 0.3);
        let prtt = two_lines(at, 14.0, 1e-4, 2.2e-4, 0.6);
        let passes = passes_two(&gap, &prtt, &left, &right);
        let ev = slopes(&clean(&passes), &left, &right);
        assert_eq!(ev.len(), 2);
        for e in &ev {
            let c = e.crossing_bytes.unwrap();
            assert!(c < left[left.len() - 1] as f64, "{e:?}");
            assert!(e.offset_us.abs() < e.step_floor_us / 2.0, "{e:?}");
            assert!(!e.apart && e.below_floor, "{e:?}");
        }
        assert_eq!(
            judge_slopes(&ev),
            (Verdict::Undecided, Some(Undecided::BelowFloor))
        );
        let (left, right, at) = sides(17408, 4);
        let gap = two_lines(at, 0.5 + 1e-4 * at, 1e-4, 2.5e-4, 0.2);
        let prtt = two_lines(at, 2.0 + 2e-4 * at, 2e-4, 5e-4, 0.4);
        let passes = passes_two(&gap, &prtt, &left, &right);
        let ev = slopes(&clean(&passes), &left, &right);
        assert_eq!(ev.len(), 2);
        for e in &ev {
            // A step the step judgement rejects, beside lines that meet.
            assert!(e.offset_us.abs() < e.step_floor_us, "{e:?}");
            assert!(!e.apart && !e.below_floor && !e.falling && !e.bent, "{e:?}");
        }
        assert_eq!(judge_slopes(&ev), (Verdict::Confirmed, None), "{ev:?}");
        let steps = steps(&clean(&passes), &left, &right);
        assert!(
            steps
                .iter()
                .filter(|e| e.series == "gap" || e.series == "prtt_1_0")
                .all(|e| e.step_us.verdict == Verdict::Rejected),
            "{steps:?}"
        );
    }

    /// Sides that meet and whose ranges change slope the same way, but whose own
    /// slopes are not their ranges' (a bump of the curve rising 1.3 us over the
    /// 3.5 KiB of the right side, at 6e-4 us/B where its range rises at 2.5e-4):
    /// undecided. Sides on their ranges' lines: confirmed.
    #[test]
    fn sides_off_their_ranges_lines_are_no_change_of_slope() {
        let (left, right, at) = sides(25600, 4);
        // The ranges: 1e-4 us/B up to the boundary, 2.5e-4 after it, 4 us there.
        let range = two_lines(at, 4.0, 1e-4, 2.5e-4, 0.0);
        let sweep = |from: u64, to: u64, f: &dyn Fn(u64) -> f64| -> Vec<Reading> {
            (from / 1024..to / 1024)
                .map(|k| reading(k * 1024, f(k * 1024), f(k * 1024)))
                .collect()
        };
        let (left_range, right_range) = (sweep(9216, 25600, &range), sweep(25600, 65536, &range));
        // The right side rises at 6e-4 us/B: off its range by more than half the
        // sides' change of 5e-4.
        let bumped = two_lines(at, 4.0, 1e-4, 6e-4, 0.0);
        for (truth, off) in [(&bumped as &dyn Fn(u64) -> f64, true), (&range, false)] {
            let passes = passes_of(truth, &left, &right);
            let mut ev = slopes(&clean(&passes), &left, &right);
            assert!(ev
                .iter()
                .all(|e| e.relative_change.verdict == Verdict::Confirmed));
            hold_over_ranges(&mut ev, &left_range, &right_range);
            for e in &ev {
                let [bl, br] = e.range_per_byte_us.unwrap();
                assert!(
                    (bl - 1e-4).abs() < 1e-9 && (br - 2.5e-4).abs() < 1e-9,
                    "{e:?}"
                );
                assert!(!e.local, "{e:?}");
                assert_eq!(e.off_range, off, "{e:?}");
                let want = if off {
                    Verdict::Undecided
                } else {
                    Verdict::Confirmed
                };
                assert_eq!(e.relative_change.verdict, want, "{e:?}");
            }
            let want = if off {
                (Verdict::Undecided, Some(Undecided::Apart))
            } else {
                (Verdict::Confirmed, None)
            };
            assert_eq!(judge_slopes(&ev), want);
        }
    }

    /// A change too faint for its sizes, or with a falling side, that the ranges
    /// do not show either is rejected as local, not left undecided: the ranges
    /// say no protocol changes there.
    #[test]
    fn a_faint_change_the_ranges_do_not_show_is_rejected() {
        let (left, right, at) = sides(53248, 3);
        let gap = two_lines(at, 7.0, -1.7e-5, 1.2e-4, 0.0);
        let prtt = two_lines(at, 14.0, 2.8e-5, 2.13e-4, 0.0);
        let passes = passes_two(&gap, &prtt, &left, &right);
        // Ranges on one line each, 7 and 14 us at the boundary.
        let flat = |s: u64| {
            let d = s as f64 - at;
            reading(s, 14.0 + 1e-4 * d, 7.0 + 5e-5 * d)
        };
        let left_range: Vec<Reading> = (9..52).map(|k| flat(k * 1024)).collect();
        let right_range: Vec<Reading> = (52..64).map(|k| flat(k * 1024)).collect();
        let mut ev = slopes(&clean(&passes), &left, &right);
        hold_over_ranges(&mut ev, &left_range, &right_range);
        for e in &ev {
            assert!(e.local && e.below_floor, "{e:?}");
            assert_eq!(e.relative_change.verdict, Verdict::Rejected, "{e:?}");
            assert_eq!(e.shape_fault(), None, "{e:?}");
        }
        assert_eq!(judge_slopes(&ev), (Verdict::Rejected, None));
    }

    #[test]
    fn judge_gives_the_three_verdicts() {
        // Six passes: the 95% interval is [min, max].
        let v = |xs: &[f64]| judge(xs, 1.0, 0.95).verdict;
        assert_eq!(v(&[2.0, 2.5, 1.8, 2.2, 3.0, 2.1]), Verdict::Confirmed);
        assert_eq!(v(&[-2.0, -2.5, -1.8, -2.2, -3.0, -2.1]), Verdict::Confirmed);
        // No step: all within the floor.
        assert_eq!(v(&[0.1, -0.2, 0.3, 0.0, -0.1, 0.2]), Verdict::Rejected);
        // A consistent step, but below the floor: not a protocol's.
        assert_eq!(v(&[0.3, 0.4, 0.5, 0.35, 0.45, 0.4]), Verdict::Rejected);
        // One pass the other way: the interval holds 0 and the floor.
        assert_eq!(v(&[2.0, 2.5, -1.8, 2.2, 3.0, 2.1]), Verdict::Undecided);
        // Passes that agree in sign but scatter from near zero to several
        // floors: not told from a small step.
        assert_eq!(v(&[0.05, 1.2, 2.4, 1.9, 5.8, 1.6]), Verdict::Undecided);
        assert_eq!(v(&[-0.1, -1.2, -2.4, -1.9, -9.8, -1.6]), Verdict::Undecided);
        // Too few passes for a 95% interval.
        let few = judge(&[2.0, 2.5, 1.8, 2.2, 3.0], 1.0, 0.95);
        assert_eq!((few.verdict, few.interval), (Verdict::Undecided, None));
        // Twelve passes: the interval drops the two extreme passes on each side,
        // so one disturbed pass no longer decides.
        let twelve = [2.0, 2.5, -1.8, 2.2, 3.0, 2.1, 2.4, 1.9, 2.6, 2.3, 2.0, 2.2];
        let j = judge(&twelve, 1.0, 0.95);
        assert_eq!(j.verdict, Verdict::Confirmed, "{j:?}");
        assert_eq!(j.interval, Some([2.0, 2.5]));
    }

    #[test]
    fn combining_series() {
        use Verdict::*;
        assert_eq!(combine([Rejected, Confirmed, Confirmed]), Confirmed);
        // One experiment alone: not a protocol's step, and not nothing either.
        assert_eq!(combine([Rejected, Confirmed, Rejected]), Undecided);
        assert_eq!(combine([Rejected, Confirmed, Undecided]), Undecided);
        assert_eq!(combine([Rejected, Undecided]), Undecided);
        assert_eq!(combine([Rejected, Rejected]), Rejected);
        assert_eq!(combine([]), Rejected);
    }

    /// The readings of one pass at `sizes`, the series `[gap, prtt_1_0, o_s, o_r,
    /// send_late]` at 1 us plus `step` at sizes from `at` on, plus a pass's jitter.
    fn pass_with_step(sizes: &[u64], at: u64, step: [f64; 5], jitter: f64) -> Vec<Reading> {
        sizes
            .iter()
            .map(|&s| {
                let up = if s >= at { 1.0 } else { 0.0 };
                let v = |k: usize| 1.0 + up * step[k] + jitter * ((s % 7) as f64 - 3.0);
                Reading::measured(s, [v(0), v(1), v(2), v(3), v(4)])
            })
            .collect()
    }

    /// `o_s` and the late send time one send call: the two alone are one witness
    /// and leave a step undecided; with the gap beside them it is confirmed.
    #[test]
    fn the_two_timings_of_one_send_call_are_one_witness() {
        let (left, right) = ([128u64, 136, 144], [152u64, 160, 168]);
        let sizes: Vec<u64> = left.iter().chain(&right).copied().collect();
        let judged = |step: [f64; 5]| {
            let passes: Vec<Vec<Reading>> = (0..8)
                .map(|i| pass_with_step(&sizes, 152, step, 0.001 * (i % 3) as f64))
                .collect();
            let ev = steps(&clean(&passes), &left, &right);
            let confirmed: Vec<&str> = ev
                .iter()
                .filter(|e| e.step_us.verdict == Verdict::Confirmed)
                .map(|e| e.series)
                .collect();
            (combine_steps(&ev), confirmed_witnesses(&ev), confirmed)
        };
        let (v, n, by) = judged([0.0, 0.0, 0.2, 0.0, 0.2]);
        assert_eq!(by, ["o_s", "send_late"]);
        assert_eq!((v, n), (Verdict::Undecided, 1));
        let (v, n, by) = judged([0.2, 0.0, 0.2, 0.0, 0.2]);
        assert_eq!(by, ["gap", "o_s", "send_late"]);
        assert_eq!((v, n), (Verdict::Confirmed, 2));
        let (v, n, _) = judged([0.2, 0.0, 0.0, 0.2, 0.0]);
        assert_eq!((v, n), (Verdict::Confirmed, 2));
        assert_eq!(witness(Series::SendLate), Series::Os);
        assert_eq!(witness(Series::Or), Series::Or);
    }

    fn reading(size: u64, prtt: f64, gap: f64) -> Reading {
        Reading::measured(size, [gap, prtt, 1.0, 1.0, 1.0])
    }

    /// A pass in which a disturbance slowed every size on both sides alike leaves
    /// the step as it is; one where it hit one side only is an outlier pass that
    /// the interval of twelve passes no longer counts.
    #[test]
    fn steps_over_passes_confirm_a_real_switch_and_reject_a_shifted_run() {
        let (left, right) = ([18432u64, 19456, 20480], [21504u64, 22528, 23552]);
        let pass = |extra_left: f64, extra_right: f64, step: f64| -> Vec<Reading> {
            left.iter()
                .map(|&s| reading(s, 16.0 + 0.0003 * s as f64 + extra_left, 4.0))
                .chain(right.iter().map(|&s| {
                    reading(
                        s,
                        16.0 + 0.0003 * s as f64 + step + extra_right,
                        4.0 + step / 20.0,
                    )
                }))
                .collect()
        };
        // A real switch of 20 us, one pass disturbed by 30 us on both sides.
        let passes: Vec<Vec<Reading>> = (0..6)
            .map(|i| {
                let d = if i == 2 { 30.0 } else { 0.0 };
                pass(d, d, 20.0)
            })
            .collect();
        let ev = steps(&clean(&passes), &left, &right);
        let prtt = ev.iter().find(|e| e.series == "prtt_1_0").unwrap();
        assert_eq!(prtt.step_us.verdict, Verdict::Confirmed, "{prtt:?}");
        assert!((prtt.step_us.median - 20.0).abs() < 1e-6);
        assert_eq!(combine_steps(&ev), Verdict::Confirmed);
        assert_eq!(clearest(&ev).unwrap().series, "prtt_1_0");
        // The sweep saw a run of sizes 20 us slower (a level flip of the host); the
        // passes see no step: rejected.
        let passes: Vec<Vec<Reading>> = (0..6).map(|_| pass(0.0, 0.0, 0.0)).collect();
        let ev = steps(&clean(&passes), &left, &right);
        assert_eq!(combine_steps(&ev), Verdict::Rejected, "{ev:?}");
    }

    #[test]
    fn roughness_is_the_largest_placebo_step_on_either_side() {
        // Straight lines: nothing moves between neighbours, whatever the step.
        let left = line(&[1000, 2000, 3000], 5.0, 0.001);
        let right = line(&[4000, 5000, 6000], 9.0, 0.001);
        assert!(roughness(&left, &right).unwrap().abs() < 1e-9);
        // The middle size of the right side 2 us up: the splits {4000}|{5000,6000}
        // and {4000,5000}|{6000} differ by 1 us in their means, less the common
        // slope's share, which the middle point does not move.
        let mut bumped = right.clone();
        bumped[1].1 += 2.0;
        let r = roughness(&left, &bumped).unwrap();
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        // One size per side: no neighbours to compare.
        assert_eq!(roughness(&left[..1], &right[..1]), None);
        assert_eq!(roughness(&[(1.0, f64::NAN), (2.0, 1.0)], &right), None);
    }

    /// A series that moves by 1-3 us from one size to the next, the same way in
    /// every pass (`o_s` over Open MPI's TCP BTL at 12-17 KiB), steps by as much at
    /// a boundary where nothing changes: its own moves between neighbours set the
    /// floor (story: docs/findings/2026-11-24-detector-verdicts.md).
    #[test]
    fn a_step_no_larger_than_the_series_moves_between_neighbours_is_no_protocol() {
        let (left, right) = ([12288u64, 13312, 14336], [15360u64, 16384, 17408]);
        // o_s in a zigzag between neighbouring sizes, 2 us deep, and 1.7 us lower
        // on the right: beyond 10% of the level (1.15 us), not beyond the zigzag.
        let zigzag_os = [13.0, 11.0, 13.0, 11.3, 9.3, 11.3];
        let pass = |i: usize, step: f64| -> Vec<Reading> {
            let wobble = 0.05 * ((i * 7 % 5) as f64 - 2.0);
            left.iter()
                .chain(&right)
                .zip(zigzag_os)
                .map(|(&s, os)| {
                    let extra = if s >= 15360 { step } else { 0.0 };
                    Reading::measured(
                        s,
                        [
                            12.0 + 0.0005 * s as f64 + extra + wobble,
                            30.0 + 0.0005 * s as f64 + extra + wobble,
                            os + wobble,
                            5.0 + wobble,
                            12.0 + wobble,
                        ],
                    )
                })
                .collect()
        };
        let passes: Vec<Vec<Reading>> = (0..12).map(|i| pass(i, 0.0)).collect();
        let ev = steps(&clean(&passes), &left, &right);
        let os = ev.iter().find(|e| e.series == "o_s").unwrap();
        assert!((os.step_us.median + 1.7).abs() < 0.01, "{os:?}");
        assert!((os.roughness_us.unwrap() - 1.0).abs() < 0.01, "{os:?}");
        assert!(os.step_us.median.abs() > STEP_FLOOR * os.level_us, "{os:?}");
        assert_ne!(os.step_us.verdict, Verdict::Confirmed, "{os:?}");
        assert_eq!(combine_steps(&ev), Verdict::Rejected, "{ev:?}");
        // A real switch of 20 us in the gap and the round trip on the same
        // rough o_s is confirmed by the smooth series.
        let passes: Vec<Vec<Reading>> = (0..12).map(|i| pass(i, 20.0)).collect();
        let ev = steps(&clean(&passes), &left, &right);
        assert_eq!(combine_steps(&ev), Verdict::Confirmed, "{ev:?}");
        assert_ne!(clearest(&ev).unwrap().series, "o_s");
    }

    #[test]
    fn disturbed_passes_are_left_out() {
        let mut passes = vec![vec![reading(1, 1.0, 1.0), reading(2, 1.0, 1.0)]; 3];
        passes[1][0].disturbed = true;
        assert_eq!(clean(&passes).len(), 2);
    }

    #[test]
    fn position_between_the_protocols() {
        // Old: 10 + 0.001 (s - 20000) from the bracket at 20000 B; new: 30 at 21000 B
        // and the same slope.
        let old = (20000.0, 10.0);
        let new = (21000.0, 31.0);
        let slopes = (0.001, 0.001);
        let at = |v| span_position(old, (20500.0, v), new, slopes, 20.0);
        assert_eq!(at(10.5), Some(0.0));
        assert_eq!(at(30.5), Some(1.0));
        // The brackets of a disturbed pass are not a step apart.
        assert_eq!(
            span_position(old, (20500.0, 10.5), (21000.0, 12.0), slopes, 20.0),
            None
        );
        // A step down works alike.
        let down = span_position((1.0, 30.0), (2.0, 30.0), (3.0, 10.0), (0.0, 0.0), -20.0);
        assert_eq!(down, Some(0.0));
    }

    /// The recent rounds' spans replace the confirmed step where three or more
    /// show a step of its sign clearly apart from 0; not where they scatter
    /// about 0, are too few, step the other way, or are a small share of it.
    #[test]
    fn the_recent_spans_give_the_step_where_they_show_one() {
        assert_eq!(current_step(43.0, &[12.5, 13.5, 14.9, 14.2]), 13.85);
        assert_eq!(current_step(43.0, &[12.5, 13.5]), 43.0);
        assert_eq!(current_step(43.0, &[1.0, -1.2, 0.8, -0.5, 0.3]), 43.0);
        assert_eq!(current_step(43.0, &[-14.0, -13.0, -15.0]), 43.0);
        assert_eq!(current_step(-4.0, &[-1.2, -1.3, -1.1]), -1.2);
        // Alike but a twentieth of the confirmed step: not taken.
        assert_eq!(current_step(4.0, &[0.2, 0.21, 0.19]), 4.0);
    }

    #[test]
    fn a_side_needs_agreeing_passes() {
        let s = |v: &[Option<f64>]| decide_side(v);
        assert_eq!(s(&[Some(0.1), Some(-0.2), Some(0.3)]), Some(Side::Old));
        assert_eq!(s(&[Some(0.9), Some(1.2), None, Some(0.7)]), Some(Side::New));
        assert_eq!(s(&[Some(0.9), Some(0.1), Some(0.7)]), None);
        assert_eq!(s(&[Some(0.9), None, Some(0.7)]), None);
        let seven = [0.9, 0.1, 0.7, 1.0, 1.1, 0.95, 0.8].map(Some);
        assert_eq!(s(&seven), Some(Side::New));
        // Two against eight is not yet a side; two against nine is.
        let ten = [0.9, 0.1, 0.7, 1.0, 0.2, 0.95, 0.8, 0.6, 0.9, 0.7].map(Some);
        assert_eq!(s(&ten), None);
        let eleven: Vec<Option<f64>> = ten.iter().copied().chain([Some(0.8)]).collect();
        assert_eq!(s(&eleven), Some(Side::New));
    }

    /// At a step's last look, 11 of 15 placed rounds are a side, 10 of 15 are
    /// not; unplaced rounds do not count.
    #[test]
    fn the_last_look_takes_a_clear_majority() {
        let votes = |new: usize, old: usize, none: usize| -> Vec<Option<f64>> {
            std::iter::repeat_n(Some(0.9), new)
                .chain(std::iter::repeat_n(Some(0.1), old))
                .chain(std::iter::repeat_n(None, none))
                .collect()
        };
        assert_eq!(decide_side(&votes(11, 4, 0)), None);
        assert_eq!(decide_side_at_last(&votes(11, 4, 0)), Some(Side::New));
        assert_eq!(decide_side_at_last(&votes(4, 11, 9)), Some(Side::Old));
        assert_eq!(decide_side_at_last(&votes(10, 5, 9)), None);
        assert_eq!(decide_side_at_last(&votes(2, 5, 17)), None);
        assert_eq!(decide_side_at_last(&votes(0, 0, 24)), None);
    }
}
