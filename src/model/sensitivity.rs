//! What a run could have missed: per stretch of sizes between the
//! reported protocol changes, the largest step of `PRTT(1,0,s)` (Hoefler et al.,
//! sec. 2.2) that the run's own data leave possible at a boundary between
//! neighbouring sizes, and whether that floor lies below a target (by default
//! [`DEFAULT_TARGET`] of `PRTT(1,0,s)`). A run is `decided` only where it is: a
//! reader of "one change" then knows which switches the run could have seen.
//!
//! # Method
//!
//! Noise: the scatter of the sweep's medians about the line through their two
//! neighbours (the residual `y_i - ((1-t) y_{i-1} + t y_{i+1})` has variance
//! `(1 + (1-t)^2 + t^2) sigma^2`; a step or a bend moves one or two of them, which
//! the median absolute deviation ignores), from the triples within [`WINDOW`]
//! sizes of a boundary when there are [`MIN_OWN_TRIPLES`] of them (the noise of
//! `PRTT` grows with the size), otherwise the sweep's relative scatter times the
//! level. Step: at every boundary inside a stretch, up to [`WINDOW`] sizes a
//! side fitted with one common slope and an intercept each (analysis of
//! covariance, as the confirmation's [`super::confirm::pass_step`]), leaving out
//! the sizes disturbed alone ([`disturbed_alone`]: one size whose repetitions all
//! met the host's slow state would move the step of every boundary within
//! [`WINDOW`] sizes of it, and the doubt rounds would open those first); its
//! standard error is [`super::confirm::step_se`]. The
//! largest step the data leave possible there is `|step| + Z se` ([`Z`] standard
//! errors): a small step bounds how large a switch can hide, a large one that no
//! reported change explains is itself a switch the run did not report. Where
//! fresh passes rejected a candidate, the bound of their interval counts if it is
//! tighter. Slope changes are bounded the same way from each side's own line
//! (reported, not judged: a bend of the curve changes the slope as much).

use super::confirm::{StepEvidence, Undecided, Verdict};
use super::lsq::{moments, Moments};
use super::refine::{Change, Proposer, STEP_SIDE};
use crate::stats::median;
use serde::Serialize;

/// Default target: a stretch is decided when no step above 2% of `PRTT(1,0,s)`
/// fits its data.
pub const DEFAULT_TARGET: f64 = 0.02;

/// Standard errors added to a boundary's step to bound it.
pub const Z: f64 = 3.0;

/// Sizes per side of a boundary fitted for its step.
pub const WINDOW: usize = 8;

/// A boundary takes its noise from at least this many triples of neighbouring
/// sizes around it; with fewer, from the sweep's relative scatter.
pub const MIN_OWN_TRIPLES: usize = 5;

/// Sizes a side whose line predicts a size in [`disturbed_alone`] (at least 2).
pub const ALONE_SIDE: usize = 3;

/// A size is disturbed alone when both sides' lines predict it this many of
/// their prediction's standard errors off, the same way.
pub const ALONE_Z: f64 = 4.0;

/// Median absolute deviation of Gaussian noise in standard deviations.
const MAD_PER_SIGMA: f64 = 0.6745;

crate::names::named_enum! {
    /// Whether a run decided every protocol change it could have seen.
    pub enum ChangesVerdict("changes verdict") {
        /// Every candidate was confirmed or rejected (or not measured again), and
        /// every stretch excludes steps above the target.
        Decided = "decided",
        /// A candidate could not be decided (the host was too disturbed or the
        /// passes too spread), or a stretch leaves a step above the target possible.
        Undecided = "undecided",
    }
}

crate::names::named_enum! {
    /// Where a stretch's floor comes from.
    pub enum FloorSource("floor source") {
        /// The sweep's medians about the boundary.
        Sweep = "sweep",
        /// The interval of fresh passes over the boundary (a rejected candidate,
        /// or a boundary re-measured for doubt).
        Passes = "passes",
    }
}

/// The sensitivity statement of one stretch of sizes between reported changes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Stretch {
    /// First size of the stretch, bytes.
    pub from_bytes: u64,
    /// Last size of the stretch, bytes.
    pub to_bytes: u64,
    /// The largest step of `PRTT(1,0,s)` between neighbouring sizes that the
    /// run's data leave possible in this stretch, us ("no switch larger than").
    pub step_floor_us: f64,
    /// First size after the boundary where that bound is nearest to or furthest
    /// above its target, bytes (absent without a boundary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_at_bytes: Option<u64>,
    /// The target at that boundary (the fraction of `PRTT(1,0,s)` asked for), us.
    pub target_us: f64,
    /// The largest change of the slope of `PRTT(1,0,s)` the data leave possible,
    /// us per KiB (not judged: a bend of the curve changes it as much).
    pub slope_floor_us_per_kib: f64,
    /// Noise of one size's median at `worst_at_bytes`, us (a standard deviation).
    pub noise_us: f64,
    /// `decided` when every boundary's bound is below its target.
    pub verdict: ChangesVerdict,
    /// Whether `step_floor_us` is the sweep's bound or the passes' (tighter).
    pub floor_from: FloorSource,
    /// Boundaries of the stretch bounded by fresh passes rather than the sweep.
    pub remeasured_boundaries: usize,
    /// The boundaries whose bound is above their target, worst first: the first
    /// size after each, bytes, and its bound over its target (where re-measuring
    /// may decide the stretch).
    #[serde(skip)]
    pub doubtful: Vec<(u64, f64)>,
}

impl Stretch {
    /// Whether the stretch excludes steps above the target.
    pub fn decided(&self) -> bool {
        self.verdict == ChangesVerdict::Decided
    }
}

/// The sensitivity statements of a sweep: `sizes` ascending with their median
/// `prtt_us` (`PRTT(1,0,s)`), cut into the stretches `ranges` (`(from, to)`
/// bytes, inclusive); `passes_bound_us` gives, per first size of a boundary,
/// a bound on its step from fresh passes; `target` is a fraction of
/// `PRTT(1,0,s)`.
pub fn stretches(
    sizes: &[u64],
    prtt_us: &[f64],
    ranges: &[(u64, u64)],
    passes_bound_us: &[(u64, f64)],
    target: f64,
) -> Vec<Stretch> {
    let x: Vec<f64> = sizes.iter().map(|&s| s as f64).collect();
    let spans: Vec<(usize, usize)> = ranges
        .iter()
        .filter_map(|&(from, to)| {
            let a = sizes.iter().position(|&s| s >= from)?;
            let b = sizes.iter().rposition(|&s| s <= to)?;
            (a <= b).then_some((a, b))
        })
        .collect();
    let triples = |a: usize, b: usize| -> Vec<(usize, f64, f64)> {
        (a + 1..b)
            .filter_map(|i| {
                let t = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1]);
                let pred = (1.0 - t) * prtt_us[i - 1] + t * prtt_us[i + 1];
                let sd = (prtt_us[i] - pred).abs() / (1.0 + (1.0 - t).powi(2) + t * t).sqrt();
                (sd.is_finite() && prtt_us[i] > 0.0).then_some((i, sd, sd / prtt_us[i]))
            })
            .collect()
    };
    let relative: Vec<f64> = spans
        .iter()
        .flat_map(|&(a, b)| triples(a, b))
        .map(|t| t.2)
        .collect();
    let relative_sigma = median(&relative).unwrap_or(0.0) / MAD_PER_SIGMA;
    spans
        .iter()
        .map(|&(a, b)| {
            let own = triples(a, b);
            let level = |i: usize| 0.5 * (prtt_us[i - 1] + prtt_us[i]);
            let sigma = |j: usize| {
                let local: Vec<f64> = own
                    .iter()
                    .filter(|t| t.0 + WINDOW >= j && t.0 < j + WINDOW)
                    .map(|t| t.1)
                    .collect();
                if local.len() >= MIN_OWN_TRIPLES {
                    median(&local).unwrap_or(0.0) / MAD_PER_SIGMA
                } else {
                    relative_sigma * level(j)
                }
            };
            let mut stretch = Stretch {
                from_bytes: sizes[a],
                to_bytes: sizes[b],
                step_floor_us: 0.0,
                worst_at_bytes: None,
                target_us: 0.0,
                slope_floor_us_per_kib: 0.0,
                noise_us: 0.0,
                verdict: ChangesVerdict::Decided,
                floor_from: FloorSource::Sweep,
                remeasured_boundaries: 0,
                doubtful: Vec::new(),
            };
            let alone = disturbed_alone(&x[a..=b], &prtt_us[a..=b], |i| sigma(a + i));
            let kept = |r: std::ops::Range<usize>| -> Vec<usize> {
                r.filter(|&i| !alone[i - a]).collect()
            };
            let mut worst = f64::NEG_INFINITY;
            // Boundaries with two sizes a side (one size fits no slope of its own,
            // and no detector splits off a range of one size).
            for (j, &size) in sizes.iter().enumerate().take(b).skip(a + 2) {
                let left = kept(j.saturating_sub(WINDOW).max(a)..j);
                let right = kept(j..(j + WINDOW).min(b + 1));
                let target_us = target * level(j);
                let (bound, from_passes) = match boundary(&x, prtt_us, &left, &right, sigma(j)) {
                    Some(bd) => {
                        stretch.slope_floor_us_per_kib =
                            stretch.slope_floor_us_per_kib.max(bd.slope_bound * 1024.0);
                        let passes = passes_bound_us
                            .iter()
                            .find(|p| p.0 == size)
                            .map_or(f64::INFINITY, |p| p.1);
                        stretch.remeasured_boundaries += usize::from(passes < bd.step_bound);
                        (bd.step_bound.min(passes), passes < bd.step_bound)
                    }
                    None => (f64::INFINITY, false),
                };
                if bound > stretch.step_floor_us {
                    stretch.step_floor_us = bound;
                    stretch.floor_from = if from_passes {
                        FloorSource::Passes
                    } else {
                        FloorSource::Sweep
                    };
                }
                let ratio = bound / target_us;
                if ratio > worst || ratio.is_nan() {
                    worst = ratio;
                    stretch.worst_at_bytes = Some(size);
                    stretch.target_us = target_us;
                    stretch.noise_us = sigma(j);
                }
                if bound.is_nan() || target_us.is_nan() || bound > target_us {
                    stretch.verdict = ChangesVerdict::Undecided;
                    stretch.doubtful.push((size, ratio));
                }
            }
            stretch.doubtful.sort_by(|a, b| b.1.total_cmp(&a.1));
            stretch
        })
        .collect()
}

/// The order in which the doubt rounds open the doubtful boundaries of
/// `stretches` (first sizes after each): those in `beside` (the boundaries
/// beside a shape fault, [`beside_shape_faults`]) first, then the others; in
/// each part, every undecided stretch's worst boundary first, then every
/// stretch's second worst, and so on, the worse first among equals in rank.
/// Each stretch is a claim of its own ("no switch larger than ..."), and one
/// with the widest floors, as beyond a rendezvous, would otherwise take the
/// whole budget while the others keep theirs.
pub fn doubt_order(stretches: &[Stretch], beside: &[u64]) -> Vec<u64> {
    let mut ranked: Vec<(usize, f64, u64)> = stretches
        .iter()
        .flat_map(|s| {
            s.doubtful
                .iter()
                .enumerate()
                .map(|(rank, &(bytes, ratio))| (rank, ratio, bytes))
        })
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let (first, rest): (Vec<u64>, Vec<u64>) = ranked
        .into_iter()
        .map(|r| r.2)
        .partition(|bytes| beside.contains(bytes));
    first.into_iter().chain(rest).collect()
}

/// The boundaries (first sizes after each, of the ascending sweep `sizes`)
/// within [`STEP_SIDE`] sizes of a step candidate left undecided for the shape
/// of its sides (`bent`: a side hides a step; `apart`: the lines do not meet as
/// their ranges' do): the confirmation's judgement that a step may lie nearby.
/// In noise the sweep proposes a small switch a size or three off, where its
/// measured sides hold the step inside one of them.
pub fn beside_shape_faults<'a>(
    sizes: &[u64],
    changes: impl IntoIterator<Item = &'a Change>,
) -> Vec<u64> {
    let mut beside: Vec<u64> = changes
        .into_iter()
        .filter(|c| matches!(c.undecided, Some(Undecided::Bent | Undecided::Apart)))
        .filter_map(|c| sizes.iter().position(|&s| s == c.bytes))
        .flat_map(|k| {
            let from = k.saturating_sub(STEP_SIDE).max(1);
            let to = (k + STEP_SIDE).min(sizes.len().saturating_sub(1));
            (from..=to).filter(move |&j| j != k).map(|j| sizes[j])
        })
        .collect();
    beside.sort_unstable();
    beside.dedup();
    beside
}

/// The bounds at one boundary.
struct Bounds {
    /// `|step| + Z se`, us.
    step_bound: f64,
    /// `|b_r - b_l| + Z se`, us per byte (0 without two sizes a side).
    slope_bound: f64,
}

/// The step (common slope, an intercept a side) and the change of slope (a line
/// a side) of `y` between the sizes at the indices `left` and `right`; `None`
/// when no slope can be fitted (one size in all) or a value is not finite.
fn boundary(x: &[f64], y: &[f64], left: &[usize], right: &[usize], sigma: f64) -> Option<Bounds> {
    let side = |r: &[usize]| moments(r.iter().map(|&i| (x[i], y[i])));
    let xs = |r: &[usize]| -> Vec<f64> { r.iter().map(|&i| x[i]).collect() };
    let se = super::confirm::step_se(&xs(left), &xs(right), sigma)?;
    let (l, r) = (side(left), side(right));
    let sxx = l.sxx + r.sxx;
    if sxx <= 0.0 || !(l.mean_y.is_finite() && r.mean_y.is_finite() && sigma.is_finite()) {
        return None;
    }
    let slope = (l.sxy + r.sxy) / sxx;
    let step = r.mean_y - l.mean_y - slope * (r.mean_x - l.mean_x);
    let slope_bound = if l.sxx > 0.0 && r.sxx > 0.0 && l.n >= 2.0 && r.n >= 2.0 {
        (r.sxy / r.sxx - l.sxy / l.sxx).abs() + Z * sigma * (1.0 / l.sxx + 1.0 / r.sxx).sqrt()
    } else {
        0.0
    };
    Some(Bounds {
        step_bound: step.abs() + Z * se,
        slope_bound,
    })
}

/// Which of the sizes `x` (ascending, values `y`, noise `sigma(i)` of one value)
/// were disturbed alone: the straight lines through up to [`ALONE_SIDE`] sizes
/// on each side (at least 2 each) both put it more than [`ALONE_Z`] standard
/// errors of their prediction off, the same way. A step between two sizes
/// leaves each of them on its own side's line, so only a size off both its
/// neighbourhoods is left out: one that met the host's slow state through all
/// its repetitions while its neighbours did not. A size without two neighbours
/// a side is kept, and so may be two disturbed neighbours (each bends the line
/// that judges the other); a slow spell over a run of sizes (one ascending
/// pass) reads as a level and stays.
pub fn disturbed_alone(x: &[f64], y: &[f64], sigma: impl Fn(usize) -> f64) -> Vec<bool> {
    let off = |i: usize, side: std::ops::Range<usize>| -> Option<f64> {
        if side.len() < 2 {
            return None;
        }
        let Moments {
            n: k,
            mean_x: mx,
            mean_y: my,
            sxx,
            sxy,
        } = moments(side.map(|j| (x[j], y[j])));
        let se = sigma(i) * (1.0 + 1.0 / k + (x[i] - mx).powi(2) / sxx).sqrt();
        let z = (y[i] - (my + sxy / sxx * (x[i] - mx))) / se;
        (sxx > 0.0 && z.is_finite()).then_some(z)
    };
    (0..x.len())
        .map(|i| {
            let beyond = |z: f64| z.abs() > ALONE_Z;
            off(i, i.saturating_sub(ALONE_SIDE)..i)
                .filter(|&l| beyond(l))
                .and_then(|l| {
                    let right = off(i, i + 1..(i + 1 + ALONE_SIDE).min(x.len()))?;
                    Some(beyond(right) && l.signum() == right.signum())
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Per rejected candidate of `changes` (and per boundary re-measured for doubt
/// and not confirmed), the bound on its step of `PRTT(1,0,s)` from the fresh
/// passes (the larger end of the interval of the steps), keyed by the first
/// size after the boundary. A rejected part of a split bisection bounds
/// nothing there: its passes are those of the whole step, which the other part
/// holds.
pub fn passes_bounds(changes: &[Change]) -> Vec<(u64, f64)> {
    changes
        .iter()
        .filter(|c| {
            c.verdict == Verdict::Rejected
                || (c.proposed_by == Proposer::Doubt && c.verdict != Verdict::Confirmed)
        })
        .filter(|c| {
            c.confirmation
                .as_ref()
                .is_none_or(|f| f.split_at_bytes.is_none())
        })
        .filter_map(|c| {
            let e: &StepEvidence = c
                .confirmation
                .as_ref()?
                .steps
                .iter()
                .find(|e| e.series == "prtt_1_0")?;
            let [lo, hi] = e.step_us.interval?;
            Some((c.bytes, lo.abs().max(hi.abs())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(step_at: Option<u64>, step_us: f64, noise_us: f64, seed: u64) -> (Vec<u64>, Vec<f64>) {
        let sizes: Vec<u64> = (1..=32).map(|k| k * 1024).collect();
        let mut rng = crate::rng::SplitMix64(seed);
        let mut normal = move || {
            let u = |r: &mut crate::rng::SplitMix64| (r.next() >> 11) as f64 / (1u64 << 53) as f64;
            let (a, b) = (u(&mut rng).max(1e-300), u(&mut rng));
            (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
        };
        let y = sizes
            .iter()
            .map(|&s| {
                let jump = if step_at.is_some_and(|b| s >= b) {
                    step_us
                } else {
                    0.0
                };
                10.0 + 0.0004 * s as f64 + jump + noise_us * normal()
            })
            .collect();
        (sizes, y)
    }

    #[test]
    fn a_clean_line_is_decided_with_a_small_floor() {
        let (s, y) = sweep(None, 0.0, 0.01, 1);
        let st = stretches(&s, &y, &[(1024, 32768)], &[], DEFAULT_TARGET);
        assert_eq!(st.len(), 1);
        assert!(st[0].decided(), "{st:?}");
        assert!(st[0].step_floor_us < 0.2, "{st:?}");
        assert!(st[0].noise_us > 0.003 && st[0].noise_us < 0.03, "{st:?}");
    }

    #[test]
    fn an_unreported_step_makes_its_stretch_undecided_there() {
        let (s, y) = sweep(Some(9216), 0.5, 0.01, 2);
        let st = stretches(&s, &y, &[(1024, 32768)], &[], DEFAULT_TARGET);
        assert!(!st[0].decided(), "{st:?}");
        assert_eq!(st[0].worst_at_bytes, Some(9216));
        assert!(st[0].step_floor_us >= 0.5, "{st:?}");
        // Reported (the ranges split there), both stretches are decided.
        let st = stretches(&s, &y, &[(1024, 8192), (9216, 32768)], &[], DEFAULT_TARGET);
        assert!(st.iter().all(Stretch::decided), "{st:?}");
    }

    #[test]
    fn noise_above_the_target_is_undecided_and_a_looser_target_decides() {
        let (s, y) = sweep(None, 0.0, 0.3, 3);
        let st = stretches(&s, &y, &[(1024, 32768)], &[], DEFAULT_TARGET);
        assert!(!st[0].decided(), "{st:?}");
        let st = stretches(&s, &y, &[(1024, 32768)], &[], 0.5);
        assert!(st[0].decided(), "{st:?}");
    }

    #[test]
    fn short_stretches_borrow_the_sweeps_relative_noise() {
        let (s, y) = sweep(Some(5120), 2.0, 0.01, 4);
        let st = stretches(&s, &y, &[(1024, 4096), (5120, 32768)], &[], DEFAULT_TARGET);
        assert_eq!(st.len(), 2);
        assert!(st[0].noise_us > 0.0, "{st:?}");
        assert!(st.iter().all(Stretch::decided), "{st:?}");
    }

    /// One size disturbed through all its repetitions (5 us up, the host's slow
    /// state) beside a real step of 0.5 us four sizes on: the step's boundary is
    /// the stretch's worst, the first the doubt rounds open, and the boundaries
    /// whose windows hold the disturbed size do not bound a step above 1 us. A
    /// least-squares step moves by the disturbance over a side's sizes there.
    #[test]
    fn one_disturbed_size_does_not_make_its_neighbours_the_worst_boundaries() {
        let (s, mut y) = sweep(Some(24576), 0.5, 0.01, 5);
        let disturbed = s.iter().position(|&b| b == 20480).unwrap();
        y[disturbed] += 5.0;
        let st = stretches(&s, &y, &[(1024, 32768)], &[], DEFAULT_TARGET);
        assert_eq!(st[0].worst_at_bytes, Some(24576), "{st:?}");
        assert_eq!(doubt_order(&st, &[]).first(), Some(&24576), "{st:?}");
        assert!(st[0].step_floor_us < 1.0, "{st:?}");
    }

    /// A step leaves both its sizes on their own sides' lines; a size 5 us up
    /// alone is off both; the ends, with one neighbour a side, are kept.
    #[test]
    fn a_size_off_both_its_neighbourhoods_is_disturbed_alone_and_a_step_is_not() {
        let (s, mut y) = sweep(Some(24576), 0.5, 0.01, 6);
        let x: Vec<f64> = s.iter().map(|&b| b as f64).collect();
        let at = |bytes: u64| s.iter().position(|&b| b == bytes).unwrap();
        assert!(disturbed_alone(&x, &y, |_| 0.01).iter().all(|d| !d));
        y[at(20480)] += 5.0;
        y[0] += 5.0;
        let alone = disturbed_alone(&x, &y, |_| 0.01);
        let flagged: Vec<u64> = (0..s.len()).filter(|&i| alone[i]).map(|i| s[i]).collect();
        assert_eq!(flagged, [20480]);
    }

    /// Two undecided stretches, one with far wider floors: their worst
    /// boundaries are opened in turn, not the wide one's all first.
    #[test]
    fn the_doubt_rounds_take_each_stretchs_worst_boundary_in_turn() {
        let stretch = |doubtful: Vec<(u64, f64)>| Stretch {
            from_bytes: 0,
            to_bytes: 0,
            step_floor_us: 0.0,
            worst_at_bytes: None,
            target_us: 0.0,
            slope_floor_us_per_kib: 0.0,
            noise_us: 0.0,
            verdict: ChangesVerdict::Undecided,
            floor_from: FloorSource::Sweep,
            remeasured_boundaries: 0,
            doubtful,
        };
        let st = [
            stretch(vec![(7168, 9.0), (9216, 5.0), (6144, 2.0)]),
            stretch(vec![(18432, 30.0), (19456, 25.0)]),
        ];
        assert_eq!(doubt_order(&st, &[]), [18432, 7168, 19456, 9216, 6144]);
        // Those beside a shape fault first, each part in the same order.
        assert_eq!(
            doubt_order(&st, &[6144, 19456]),
            [19456, 6144, 18432, 7168, 9216]
        );
    }

    /// A candidate whose side bent, or whose lines stand apart, puts the
    /// boundaries within 3 sizes of it first; a confirmed one, one left spread
    /// and a rejected one put none; the sweep's first size bounds no boundary.
    #[test]
    fn the_boundaries_beside_a_shape_fault_are_named() {
        let sizes: Vec<u64> = (1..=32).map(|k| k * 1024).collect();
        let change = |bytes: u64, verdict: Verdict, undecided: Option<Undecided>| Change {
            verdict,
            undecided,
            ..Change::unconfirmed(&sizes, bytes, Vec::new())
        };
        let changes = [
            change(2048, Verdict::Undecided, Some(Undecided::Apart)),
            change(10240, Verdict::Undecided, Some(Undecided::Bent)),
            change(20480, Verdict::Confirmed, None),
            change(25600, Verdict::Undecided, Some(Undecided::Spread)),
            change(30720, Verdict::Rejected, None),
        ];
        assert_eq!(
            beside_shape_faults(&sizes, &changes),
            [3072, 4096, 5120, 7168, 8192, 9216, 11264, 12288, 13312]
        );
        assert!(beside_shape_faults(&sizes, &changes[2..]).is_empty());
    }

    /// The silent miss of `docs/findings/2026-11-28-vader-8192-miss.json`: its
    /// run reported no change and `decided`, and Open MPI's shared-memory eager
    /// switch lay at 8192 bytes. Its own points must say `undecided` there.
    #[test]
    fn issue_36_the_vader_8192_silent_miss_is_undecided() {
        let doc: serde_json::Value = serde_json::from_str(include_str!(
            "../../docs/findings/2026-11-28-vader-8192-miss.json"
        ))
        .unwrap();
        let points = doc["points"].as_array().unwrap();
        let sizes: Vec<u64> = points.iter().map(|p| p["size"].as_u64().unwrap()).collect();
        let prtt: Vec<f64> = points
            .iter()
            .map(|p| p["prtt_1_0_us"].as_f64().unwrap())
            .collect();
        let ranges: Vec<(u64, u64)> = doc["ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["from"].as_u64().unwrap(), r["to"].as_u64().unwrap()))
            .collect();
        assert!(doc["changes"].as_array().unwrap().is_empty());
        let st = stretches(&sizes, &prtt, &ranges, &[], DEFAULT_TARGET);
        let around = st
            .iter()
            .find(|s| s.from_bytes < 8192 && 8192 <= s.to_bytes)
            .expect("a stretch across 8192");
        assert!(!around.decided(), "{st:?}");
        assert!(
            around.step_floor_us > 0.5,
            "the 0.6 us step bounds it: {st:?}"
        );
    }

    /// Known answers in the synthetic LogGP world: steps of 1-3% of
    /// `PRTT(1,0,s)` at random sizes under 0.2% noise. No run may call a stretch
    /// decided that holds a step above the target the detector did not report
    /// (a step below the target is not promised).
    #[test]
    fn issue_36_a_small_switch_is_reported_or_its_stretch_undecided() {
        use crate::model::loggp::synthetic::{default_sizes, sweep, Noise, Rng, Truth};
        use crate::model::loggp::{assess, AssessOptions};
        let base = Truth {
            l: 2.0,
            os: 0.8,
            or: 0.7,
            g: 1.0,
            big_g: 0.0002,
            synchronous: false,
        };
        let sizes: Vec<u64> = default_sizes().into_iter().filter(|&s| s >= 1024).collect();
        let noise = Noise {
            relative: 0.002,
            absolute: 0.0,
            bimodal_p: 0.0,
            bimodal_us: 0.0,
        };
        let mut decided = 0;
        for seed in 0..40u64 {
            // Even seeds: no switch at all (the statement must not refuse all).
            let switch = seed % 2 == 1;
            let mut rng = Rng::new(seed + 100);
            let at = sizes[4 + (rng.uniform() * (sizes.len() - 8) as f64) as usize];
            let prtt_at = 2.0 * (base.l + base.os + base.or + (at - 1) as f64 * base.big_g);
            let fraction = if switch {
                0.01 + 0.02 * rng.uniform()
            } else {
                0.0
            };
            // The step lands on l: half of it on each way of the round trip.
            let after = Truth {
                l: base.l + fraction * prtt_at / 2.0,
                ..base
            };
            let samples = sweep(&sizes, &[base, after], &[at], 10, noise, seed);
            let a = assess(&samples, &AssessOptions::default()).unwrap();
            let prtt: Vec<f64> = samples.iter().map(|s| s.prtt_1_0_us).collect();
            let ranges: Vec<(u64, u64)> = a.ranges.iter().map(|r| (r.from, r.to)).collect();
            let st = stretches(&sizes, &prtt, &ranges, &[], DEFAULT_TARGET);
            let reported = a.changes.contains(&at);
            let holding = st.iter().find(|s| s.from_bytes < at && at <= s.to_bytes);
            if let Some(h) = holding.filter(|_| fraction > DEFAULT_TARGET) {
                assert!(
                    reported || !h.decided(),
                    "seed {seed}: step of {fraction:.3} at {at} missed, yet {st:?}"
                );
            }
            if !switch {
                decided += st.iter().all(Stretch::decided) as usize;
            }
        }
        // No blanket refusal: at 0.2% noise, sweeps without a switch decide.
        assert!(decided >= 15, "decided {decided} of 20");
    }
}
