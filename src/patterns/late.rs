//! Late arrivals: how much of one rank's late entry a collective hides.
//!
//! The method of Niethammer, Gracia, Hilbrich and Schulz ("Entering time of
//! collectives", `../shared/papers/niethammer-entering-time-of-collectives.txt`):
//!
//! - **Delay through synchronized start times** (sec. III-B b, III-D): after the
//!   clocks are synchronized, every rank starts call `i` at the same global time,
//!   except the delayed ones, which start `d` later ([`WindowRounds::start`]). The
//!   delay is as exact as the synchronization, and no barrier's exit skew leaks in.
//! - **Global time** (eq. 4): `t = max(t_end) - min(t_start)` over the ranks, in
//!   global time: from the first rank entering to the last one leaving.
//! - **Delay overlap benefit** (eq. 5): `b = (t_0 + d - t_d) / t_d`, with `t_0` the
//!   time without delay and `t_d` with it ([`benefit`]). `b = 0`: the delay adds
//!   to the call; `b > 0`: part of it is hidden (with `t_d = t_0`, all of it, and
//!   `b = d / t_d`); `b < 0`: the late rank costs more than its delay.
//! - The paper reports the minimum over 100 measurements; we report the minimum
//!   and the median ([`LatePoint`]).
//!
//! Improvements: the delays of one run (0 always among them) are measured
//! *interleaved*, call after call in the same rounds of windows, so `t_0` and `t_d`
//! see the same machine state (the paper measures each delay in a separate run,
//! on a shared system whose load drifts); calls that started late or overran their
//! window are flagged on every rank and repeated ([`crate::sync::window`]), the
//! window sized from the warm-up plus the largest delay.
//!
//! - **Effective delay** (the paper's `t_b - t_a` of fig. 4, measured rather than
//!   assumed): per call, the earliest start among the delayed ranks minus the
//!   latest start among the others, in global time. A start may lag its window by
//!   a tenth of the window, and on a loaded host the window grows to milliseconds,
//!   so the undelayed ranks can start late enough to eat most of `d` (one run
//!   gave `t_d` = 124 us at `d` = 500 us, b = 3.65). A call whose effective delay
//!   is off `d` by more than [`delay_tolerance_ns`] is invalid and repeated; a
//!   delay left with fewer than half the wanted valid calls is undecided
//!   ([`LatePoint::decided`]): no `b` is computed for it.
//!
//! The collective is a [`CollOp`]: our schedules over any transport, or MPI's own,
//! blocking or nonblocking followed by a wait (the paper's "non-blocking MPI
//! collectives are directly followed by an MPI_Waitall", sec. IV).

use super::rounds::{spans_of, warm_up, CallPlan, Verdict, WindowRounds};
use super::PatternError;
use crate::clock::{Clock, Nanos};
use crate::coll::{CollError, CollOp, Interrupts};
use crate::stats::median;
use crate::sync::model::ClockModel;
use crate::sync::window::{self, SlotStatus};
use ngauge_transport::{Control, Rank};
use std::str::FromStr;

/// This measurement in errors.
const NAME: &str = "late arrivals";

/// The delay overlap benefit, eq. (5) of Niethammer et al.: `(t0 + d - td) / td`
/// (any one unit for all three).
pub fn benefit(t0: f64, d: f64, td: f64) -> f64 {
    (t0 + d - td) / td
}

/// Floor of the effective-delay tolerance, ns: the clock synchronization's error,
/// which the measured delay carries. 10 us is the largest residual measured at
/// `--np 4` on the shared 2-core host (`docs/findings/2026-11-22-sync-residuals.md`:
/// "up to ~10 us at np = 4 with short fits"); a tighter floor would reject calls
/// for the synchronization's error, not the start's.
pub const DELAY_FLOOR_NS: f64 = 10_000.0;

/// How far a call's effective delay may be from the asked-for `d` (ns) and the call
/// still measure `d`: a tenth of `d`, at least [`DELAY_FLOOR_NS`].
pub fn delay_tolerance_ns(delay_ns: f64) -> f64 {
    (delay_ns / 10.0).max(DELAY_FLOOR_NS)
}

/// Which ranks enter late.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DelayedRanks {
    /// These ranks.
    List(Vec<Rank>),
    /// The last rank of the job.
    Last,
    /// One rank drawn from `seed` (the same draw on every rank, so a run can be
    /// repeated).
    Random {
        /// Seed of the draw.
        seed: u64,
    },
}

impl DelayedRanks {
    /// The ranks of a job of `np` ranks, sorted: checked to be ranks of the job,
    /// at least one, and not all of them (with every rank late, nobody waits).
    pub fn resolve(&self, np: usize) -> Result<Vec<Rank>, PatternError> {
        let mut ranks = match self {
            DelayedRanks::List(list) => list.clone(),
            DelayedRanks::Last => vec![np.saturating_sub(1)],
            DelayedRanks::Random { seed } => {
                let mut rng = super::order::SplitMix64(*seed);
                vec![rng.below(np as u64) as Rank]
            }
        };
        ranks.sort_unstable();
        ranks.dedup();
        if let Some(&r) = ranks.iter().find(|&&r| r >= np) {
            return Err(PatternError::Options(format!(
                "delayed rank {r} is not a rank of a job of {np} ranks"
            )));
        }
        if ranks.is_empty() {
            return Err(PatternError::Options("no rank is delayed".into()));
        }
        if ranks.len() == np {
            return Err(PatternError::Options(format!(
                "all {np} ranks are delayed: nobody arrives late; delay fewer ranks"
            )));
        }
        Ok(ranks)
    }
}

impl std::fmt::Display for DelayedRanks {
    /// As [`FromStr`] reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DelayedRanks::List(l) => {
                let l: Vec<String> = l.iter().map(Rank::to_string).collect();
                f.write_str(&l.join(","))
            }
            DelayedRanks::Last => f.write_str("last"),
            DelayedRanks::Random { seed } => write!(f, "random:{seed}"),
        }
    }
}

impl FromStr for DelayedRanks {
    type Err = PatternError;
    /// `0`, `0,3` (a list), `last`, `random` (seed 0) or `random:SEED`.
    fn from_str(text: &str) -> Result<DelayedRanks, PatternError> {
        let bad = || {
            PatternError::Options(format!(
                "`{text}` is not a set of delayed ranks: a list (0,3), last, or random[:SEED]"
            ))
        };
        match text.trim() {
            "last" => Ok(DelayedRanks::Last),
            "random" => Ok(DelayedRanks::Random { seed: 0 }),
            t => {
                if let Some(seed) = t.strip_prefix("random:") {
                    return seed
                        .parse()
                        .map(|seed| DelayedRanks::Random { seed })
                        .map_err(|_| bad());
                }
                t.split(',')
                    .map(|r| r.trim().parse::<Rank>().map_err(|_| bad()))
                    .collect::<Result<Vec<_>, _>>()
                    .map(DelayedRanks::List)
            }
        }
    }
}

crate::names::named_enum! {
    /// How a call is made.
    pub enum CallMode("call mode") {
        /// The blocking call.
        Blocking = "blocking",
        /// Start, then wait at once (the paper's nonblocking variant).
        Nonblocking = "nonblocking",
    }
}

impl CallMode {
    /// Makes one call of `op` this way.
    pub fn call(
        self,
        op: &mut dyn CollOp,
        interrupts: &mut dyn Interrupts,
    ) -> Result<(), CollError> {
        match self {
            CallMode::Blocking => op.run(interrupts),
            CallMode::Nonblocking => {
                op.start(interrupts)?;
                op.wait(interrupts)
            }
        }
    }
}

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct LateSpec {
    /// The delays to sweep, ns (0 is measured in any case: it is `t_0`).
    pub delays_ns: Vec<f64>,
    /// The ranks that enter late ([`DelayedRanks::resolve`]).
    pub delayed: Vec<Rank>,
    /// Blocking, or start + wait.
    pub mode: CallMode,
    /// The calls: how many, the warm-up, the data check, the windows.
    pub plan: CallPlan,
}

/// One delay's calls.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LatePoint {
    /// The delay, ns.
    pub delay_ns: f64,
    /// Valid calls.
    pub valid: usize,
    /// Calls that started late, overran their window, or missed the delay.
    pub invalid: usize,
    /// Of `invalid`, the calls that started and ended in their windows but whose
    /// effective delay was off `d` by more than [`delay_tolerance_ns`].
    pub missed_delay: usize,
    /// Global time `max(end) - min(start)` of each valid call, ns, in order.
    pub runtimes_ns: Vec<f64>,
    /// Effective delay of every call that started and ended in its window (valid
    /// or missed the delay), ns, in order: the earliest delayed start minus the
    /// latest undelayed start.
    pub effective_delays_ns: Vec<f64>,
    /// Effective delay of each valid call, ns, in the order of `runtimes_ns`: the
    /// `d` eq. (5) takes for that call.
    pub valid_effective_delays_ns: Vec<f64>,
    /// Valid calls wanted.
    pub wanted: usize,
}

impl LatePoint {
    /// The fastest valid call (the paper's statistic), ns.
    pub fn min_ns(&self) -> Option<f64> {
        self.runtimes_ns.iter().copied().reduce(f64::min)
    }

    /// The median valid call, ns.
    pub fn median_ns(&self) -> Option<f64> {
        median(&self.runtimes_ns)
    }

    /// The effective delay of the fastest valid call (the one [`Self::min_ns`]
    /// times), ns.
    pub fn min_call_effective_delay_ns(&self) -> Option<f64> {
        let (i, _) = self
            .runtimes_ns
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))?;
        self.valid_effective_delays_ns.get(i).copied()
    }

    /// The median effective delay of the valid calls, ns.
    pub fn valid_effective_delay_median_ns(&self) -> Option<f64> {
        median(&self.valid_effective_delays_ns)
    }

    /// The median effective delay of the calls that started and ended in their
    /// windows, ns.
    pub fn effective_delay_median_ns(&self) -> Option<f64> {
        median(&self.effective_delays_ns)
    }

    /// Whether the point has at least half the wanted valid calls. With fewer, its
    /// minimum and median come from the few calls the host let through, not from a
    /// sample of `d`: the point is undecided and gets no `b`.
    pub fn decided(&self) -> bool {
        self.valid > 0 && self.valid * 2 >= self.wanted
    }
}

/// One delay against the undelayed calls: eq. (5) on minima and on medians, each
/// with the delay the calls actually had (measured), not the one asked for.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Benefit {
    /// The delay asked for, ns.
    pub delay_ns: f64,
    /// The effective delay of the fastest delayed call, ns: `d` of `benefit_min`.
    pub effective_delay_min_ns: f64,
    /// The median effective delay of the valid delayed calls, ns: `d` of
    /// `benefit_median`.
    pub effective_delay_median_ns: f64,
    /// `t_0`: fastest undelayed call, ns.
    pub t0_min_ns: f64,
    /// `t_d`: fastest delayed call, ns.
    pub td_min_ns: f64,
    /// `b` from the minima.
    pub benefit_min: f64,
    /// Median undelayed call, ns.
    pub t0_median_ns: f64,
    /// Median delayed call, ns.
    pub td_median_ns: f64,
    /// `b` from the medians.
    pub benefit_median: f64,
}

/// Everything measured (complete on rank 0; the others get the same shape with no
/// runtimes).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LateTimes {
    /// The undelayed calls (`t_0`).
    pub baseline: LatePoint,
    /// The asked-for delays, in the order given (a delay of 0 repeats the baseline).
    pub points: Vec<LatePoint>,
    /// The ranks delayed.
    pub delayed: Vec<Rank>,
    /// The last window, ns.
    pub window_ns: f64,
    /// Rounds run.
    pub rounds: usize,
}

impl LateTimes {
    /// Eq. (5) for every asked-for delay decided on both sides
    /// ([`LatePoint::decided`]; `None` otherwise).
    pub fn benefits(&self) -> Vec<Option<Benefit>> {
        self.points
            .iter()
            .map(|p| {
                if !(self.baseline.decided() && p.decided()) {
                    return None;
                }
                let (t0_min, t0_median) = (self.baseline.min_ns()?, self.baseline.median_ns()?);
                let (td_min, td_median) = (p.min_ns()?, p.median_ns()?);
                // Eq. (5) with the delay measured (fig. 4's t_b - t_a), not the one
                // asked for: a call kept may be off `d` by up to
                // `delay_tolerance_ns(d)`, and that much of "hidden" delay would
                // otherwise be credited to the collective.
                // A delay of 0 repeats the baseline: no rank is held back, and
                // what the calls' "effective delay" measures is their start skew
                // (the clock synchronization's error), not a delay to hide.
                let (d_min, d_median) = if p.delay_ns == 0.0 {
                    (0.0, 0.0)
                } else {
                    (
                        p.min_call_effective_delay_ns()?,
                        p.valid_effective_delay_median_ns()?,
                    )
                };
                Some(Benefit {
                    delay_ns: p.delay_ns,
                    effective_delay_min_ns: d_min,
                    effective_delay_median_ns: d_median,
                    t0_min_ns: t0_min,
                    td_min_ns: td_min,
                    benefit_min: benefit(t0_min, d_min, td_min),
                    t0_median_ns: t0_median,
                    td_median_ns: td_median,
                    benefit_median: benefit(t0_median, d_median, td_median),
                })
            })
            .collect()
    }
}

/// Times `op` with every delay of `spec` (see the module docs). Collective: every
/// rank calls it with the same arguments; `model` maps this rank's clock to global
/// time; `interrupts` is polled by the operation (injected noise, or
/// [`crate::coll::Uninterrupted`]).
pub fn measure<C: Clock + ?Sized>(
    clock: &C,
    op: &mut dyn CollOp,
    control: &mut dyn Control,
    model: &ClockModel,
    spec: &LateSpec,
    interrupts: &mut dyn Interrupts,
) -> Result<LateTimes, PatternError> {
    if spec.plan.reps == 0 || spec.plan.warmup == 0 || spec.plan.max_rounds == 0 {
        return Err(PatternError::Options(
            "late arrivals need at least one repetition, one warm-up call and one round".into(),
        ));
    }
    if let Some(d) = spec
        .delays_ns
        .iter()
        .find(|d| !(d.is_finite() && **d >= 0.0))
    {
        return Err(PatternError::Options(format!(
            "a delay of {d} ns is not a duration"
        )));
    }
    if spec.delays_ns.is_empty() {
        return Err(PatternError::Options("no delay to measure".into()));
    }
    let rank = control.rank();
    let np = control.size();
    let delayed = DelayedRanks::List(spec.delayed.clone()).resolve(np)?;
    let me_late = delayed.contains(&rank);

    // The distinct delays, 0 first: call j of a round has delay `delays[j % n]`.
    let mut delays: Vec<f64> = vec![0.0];
    for &d in &spec.delays_ns {
        if !delays.contains(&d) {
            delays.push(d);
        }
    }
    let rate = clock.rate();
    let delay_ticks: Vec<u64> = delays.iter().map(|&d| rate.to_ticks(Nanos(d))).collect();
    let max_delay = delay_ticks.iter().copied().max().unwrap_or(0);

    let slowest = warm_up(clock, control, NAME, op, &spec.plan, |op| {
        spec.mode.call(op, interrupts)
    })?;
    // A start may lag its window, which holds the largest delay, by a tenth of it
    // (`sync::window`; a tighter bound: docs/findings/2026-11-24-late-nbc-noise.md).
    // Eq. (4) uses the ranks' actual starts, so a lag shows in t, not in d.
    let n = delays.len();
    let per_round = n * spec.plan.reps;
    let mut rounds = WindowRounds::new(
        NAME,
        *model,
        spec.plan.window_wait,
        spec.plan.max_rounds,
        per_round,
        window::initial_window(slowest).saturating_add(max_delay),
    );
    let mut runtimes: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut invalid = vec![0usize; n];
    let mut missed = vec![0usize; n];
    let mut effective: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut valid_effective: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut more = true;
    while more {
        rounds.init_round(clock, control)?;
        for j in 0..per_round {
            let my_delay = if me_late { delay_ticks[j % n] } else { 0 };
            let slot = rounds.start(clock, my_delay);
            spec.mode.call(op, interrupts)?;
            rounds.stop_span(clock, &slot);
        }
        let round = rounds.end_round(control)?;
        let global = spans_of(&round.records);
        more = rounds.decide(control, || {
            let mut round_invalid = 0;
            let mut longest_valid = 0.0f64;
            for (j, status) in round.statuses.iter().enumerate() {
                let k = j % n;
                if *status != SlotStatus::Valid {
                    invalid[k] += 1;
                    round_invalid += 1;
                    continue;
                }
                let start = global.iter().map(|r| r[j].start).min().expect("a rank");
                let end = global.iter().map(|r| r[j].end).max().expect("a rank");
                // The effective delay (fig. 4's t_b - t_a): the first delayed rank's
                // start after the last undelayed rank's.
                // (Not counted for the window's growth: a larger window does not
                // make the ranks start together.)
                let (mut first_late, mut last_on_time) = (u64::MAX, 0u64);
                for (r, spans) in global.iter().enumerate() {
                    let started = spans[j].start.0;
                    if delayed.contains(&r) {
                        first_late = first_late.min(started);
                    } else {
                        last_on_time = last_on_time.max(started);
                    }
                }
                let lead = first_late as i128 - last_on_time as i128;
                let lead = lead.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                let effective_ns = rate.signed_to_nanos(lead).0;
                effective[k].push(effective_ns);
                if (effective_ns - delays[k]).abs() > delay_tolerance_ns(delays[k]) {
                    invalid[k] += 1;
                    missed[k] += 1;
                    continue;
                }
                // Eq. (4): from the first rank entering to the last one leaving.
                let t = end.since(start);
                runtimes[k].push(rate.to_nanos(t).0);
                valid_effective[k].push(effective_ns);
                longest_valid = longest_valid.max(t as f64);
            }
            Verdict {
                short: runtimes.iter().any(|r| r.len() < spec.plan.reps),
                invalid: round_invalid,
                op_ticks: longest_valid,
            }
        })?;
    }

    let point = |k: usize, delay_ns: f64| LatePoint {
        delay_ns,
        valid: runtimes[k].len(),
        invalid: invalid[k],
        missed_delay: missed[k],
        runtimes_ns: runtimes[k].clone(),
        effective_delays_ns: effective[k].clone(),
        valid_effective_delays_ns: valid_effective[k].clone(),
        wanted: spec.plan.reps,
    };
    Ok(LateTimes {
        baseline: point(0, 0.0),
        points: spec
            .delays_ns
            .iter()
            .map(|&d| {
                let k = delays.iter().position(|&x| x == d).expect("listed");
                point(k, d)
            })
            .collect(),
        delayed,
        window_ns: rate.to_nanos(rounds.window_ticks()).0,
        rounds: rounds.rounds(),
    })
}

#[cfg(test)]
mod tests;
