//! Nonblocking collectives: what overlapping communication with computation saves,
//! and what asynchronous progress is worth.
//!
//! The scheme of NBCBench (Hoefler, Schneider, Lumsdaine, "Accurately measuring
//! collective operations at massive scale", sec. 4.1, Listing 6,
//! `../shared/papers/hoefler-accurately-measuring-collectives.txt`), reported in the
//! columns of Intel's IMB-NBC:
//!
//! 1. **Blocking time of the nonblocking call** (`t_pure`): start, then wait at once,
//!    every rank starting at the same global time (a window,
//!    [`crate::sync::window`]). `t_b` is the largest rank's median ("t b = max t b
//!    of all processes").
//! 2. **Overlapped** (`t_ovrl`): start simultaneously, compute for `t_b`, wait. The
//!    start is `t_init`, the computation `t_CPU`, the wait `t_wait`. Optionally the
//!    computation calls test every [`NbcSpec::test_every_ns`] (the paper's "progression
//!    calls ... during the computation phase"); their time is `t_test`.
//!    - *time-based* ([`Compute::Time`]): compute until `t_b` has passed (tests
//!      included); "able to assess all overheads related to calls on the CPU".
//!    - *work-based* ([`Compute::Work`]): a fixed workload `λ` calibrated to take
//!      `t_b` (the paper's steps 2-3: grow `λ` until it takes `t_b`, take the
//!      largest `λ` of all ranks), computed whatever it costs, so interrupts and
//!      scheduling show in `t_ovrl`.
//! 3. **Report** (IMB-NBC): the rank with the largest `t_ovrl`, its `t_pure`,
//!    `t_ovrl`, `t_CPU`, and `overlap = 100 max(0, min(1, (t_pure + t_CPU - t_ovrl) /
//!    min(t_pure, t_CPU)))` ([`overlap_pct`]); `t_ovrl = max(t_pure, t_CPU)` is
//!    perfect overlap, `t_ovrl = t_pure + t_CPU` none. The overhead the program pays
//!    is `t_ovrl` minus its pure computation ([`RankNbc::overhead_ns`]): `t_init +
//!    t_test + t_wait` time-based, anything that slowed the workload as well
//!    work-based.
//!
//! Per rank we take medians over the valid calls where IMB averages (a shared
//! 2-core machine has outliers a mean would carry). Calls that started late or
//! overran their window are invalid on every rank and repeated.
//!
//! Our schedules progress only inside `test` and `wait` ([`crate::coll::exec`]):
//! without progress calls a rank that must forward (a tree's inner node) does so
//! only in the final wait. MPI's `MPI_I...` may progress on their own (a progress
//! thread, offload) or not; the same measurement over both shows what asynchronous
//! progress is worth.

use super::late::CallMode;
use super::rounds::{broadcast_word, max_at_root, warm_up, CallPlan, Verdict, WindowRounds};
use super::PatternError;
use crate::clock::{Clock, Nanos, Ticks};
use crate::coll::{CollError, CollOp, Uninterrupted};
use crate::stats::median;
use crate::sync::model::ClockModel;
use crate::sync::window::{self, SlotStatus, Tally};
use ngauge_transport::{Control, Rank};

/// This measurement in errors.
const NAME: &str = "nonblocking collective";

/// IMB-NBC's overlap in percent: `100 max(0, min(1, (t_pure + t_cpu - t_ovrl) /
/// min(t_pure, t_cpu)))`; 0 when either time is not positive.
pub fn overlap_pct(t_pure: f64, t_cpu: f64, t_ovrl: f64) -> f64 {
    let shorter = t_pure.min(t_cpu);
    if shorter <= 0.0 {
        return 0.0;
    }
    100.0 * ((t_pure + t_cpu - t_ovrl) / shorter).clamp(0.0, 1.0)
}

crate::names::named_enum! {
    /// How the computation between start and wait is measured out.
    pub enum Compute("compute scheme") {
        /// Until `t_b` has passed on the clock.
        Time = "time",
        /// A workload calibrated to take `t_b`.
        Work = "work",
    }
}

/// A computation that can be done in units (the work-based scheme's `λ`).
pub trait Workload {
    /// Does `units` units of work.
    fn work(&mut self, units: u64);
}

/// Integer arithmetic the optimizer cannot skip: a dependent chain of xorshift
/// steps, 16 per unit, its result kept.
#[derive(Clone, Copy, Debug)]
pub struct Arithmetic {
    state: u64,
}

impl Default for Arithmetic {
    fn default() -> Self {
        Arithmetic {
            state: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

impl Workload for Arithmetic {
    fn work(&mut self, units: u64) {
        let mut x = self.state;
        for _ in 0..units {
            for _ in 0..16 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            x = std::hint::black_box(x);
        }
        self.state = x;
    }
}

/// Units of `work` that take `target_ticks` on `clock`: Netgauge's `tune_workload`,
/// which scales the units by target over the fastest of several tries until they
/// agree within 0.5 % (at most 40 scalings; at least 1 unit).
pub fn calibrate<C: Clock + ?Sized, W: Workload + ?Sized>(
    clock: &C,
    work: &mut W,
    target_ticks: u64,
) -> u64 {
    let target = target_ticks.max(1) as f64;
    let mut units: u64 = 16;
    for _ in 0..40 {
        let fastest = fastest_of_5(clock, work, units);
        if fastest == 0 {
            units = units.saturating_mul(16);
            continue;
        }
        let ratio = target / fastest as f64;
        if (ratio - 1.0).abs() <= 0.005 {
            break;
        }
        units = ((units as f64 * ratio).ceil() as u64).max(1);
    }
    units
}

/// The fastest of 5 runs of `units` units of `work`, ticks.
fn fastest_of_5<C: Clock + ?Sized, W: Workload + ?Sized>(
    clock: &C,
    work: &mut W,
    units: u64,
) -> u64 {
    let mut once = || {
        let t0 = clock.now();
        work.work(units);
        clock.now().since(t0)
    };
    (0..5).map(|_| once()).min().expect("tries")
}

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NbcSpec {
    /// Time- or work-based computation.
    pub compute: Compute,
    /// Call test this often during the computation, ns (`None`: never).
    pub test_every_ns: Option<f64>,
    /// The calls: how many, the warm-up, the data check, the windows.
    pub plan: CallPlan,
}

/// One rank's medians over the valid calls, ns.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct RankNbc {
    /// The rank.
    pub rank: Rank,
    /// Start + wait, back to back.
    pub t_pure_ns: f64,
    /// Start + computation + wait.
    pub t_ovrl_ns: f64,
    /// The computation phase (progress calls included).
    pub t_cpu_ns: f64,
    /// The start call.
    pub t_init_ns: f64,
    /// The final wait.
    pub t_wait_ns: f64,
    /// All progress calls of one computation together.
    pub t_test_ns: f64,
    /// Progress calls per computation.
    pub tests: f64,
    /// The computation without the progress calls: time-based, `t_CPU - t_test`;
    /// work-based, the workload alone (calibrated).
    pub compute_ns: f64,
}

impl RankNbc {
    /// IMB-NBC's overlap for this rank ([`overlap_pct`]).
    pub fn overlap_pct(&self) -> f64 {
        overlap_pct(self.t_pure_ns, self.t_cpu_ns, self.t_ovrl_ns)
    }

    /// What the collective cost the program beyond its computation:
    /// `t_ovrl - compute`.
    pub fn overhead_ns(&self) -> f64 {
        self.t_ovrl_ns - self.compute_ns
    }
}

/// Everything measured (complete on rank 0; the others get no ranks).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NbcTimes {
    /// Every rank's medians, by rank.
    pub ranks: Vec<RankNbc>,
    /// `t_b`: the computation's length, ns.
    pub t_b_ns: f64,
    /// The workload's units (work-based).
    pub work_units: Option<u64>,
    /// Valid and invalid calls of the blocking stage.
    pub pure_calls: (usize, usize),
    /// Valid and invalid calls of the overlapped stage.
    pub ovrl_calls: (usize, usize),
    /// Whether each stage (blocking, overlapped) had a valid call. A stage
    /// without one reports the medians of all its calls, which started late or
    /// overran their window: figures of a disturbed host, not a decision.
    pub decided: (bool, bool),
}

impl NbcTimes {
    /// The rank IMB-NBC reports: the largest `t_ovrl`.
    pub fn reported(&self) -> Option<&RankNbc> {
        self.ranks
            .iter()
            .max_by(|a, b| a.t_ovrl_ns.total_cmp(&b.t_ovrl_ns))
    }
}

/// Measures `op` as NBCBench does (see the module docs). Collective: every rank
/// calls it with the same arguments; `model` maps this rank's clock to global time;
/// `work` is the work-based scheme's computation (unused time-based).
pub fn measure<C: Clock + ?Sized, W: Workload + ?Sized>(
    clock: &C,
    op: &mut dyn CollOp,
    control: &mut dyn Control,
    model: &ClockModel,
    spec: &NbcSpec,
    work: &mut W,
) -> Result<NbcTimes, PatternError> {
    if spec.plan.reps == 0 || spec.plan.warmup == 0 || spec.plan.max_rounds == 0 {
        return Err(PatternError::Options(
            "the nonblocking benchmark needs at least one repetition, one warm-up call and \
             one round"
                .into(),
        ));
    }
    if let Some(te) = spec.test_every_ns {
        if !(te > 0.0 && te.is_finite()) {
            return Err(PatternError::Options(format!(
                "progress calls every {te} ns: the interval must be positive"
            )));
        }
    }
    let rate = clock.rate();
    let none = &mut Uninterrupted;

    // Warm-up: start + wait after a control barrier, the data checked.
    let slowest = warm_up(clock, control, NAME, op, &spec.plan, |op| {
        CallMode::Nonblocking.call(op, none)
    })?;

    // Stage 1: the blocking time of the nonblocking call.
    let window1 = window::initial_window(slowest);
    let pure = stage(clock, control, model, spec, window1, || {
        let t0 = clock.now();
        CallMode::Nonblocking.call(op, none)?;
        Ok(vec![clock.now().since(t0)])
    })?;
    // t_b: the largest rank's median, to every rank (in ns: the ranks' rates differ).
    let medians = pure
        .by_rank
        .iter()
        .filter_map(|calls| median_field(calls, 0));
    let slowest_pure = medians.fold(0.0f64, f64::max) as u64;
    let tb_bits = rate.to_nanos(slowest_pure).0.to_bits();
    let tb_ns = f64::from_bits(broadcast_word(control, NAME, "a time", tb_bits)?);
    let tb_ticks = rate.to_ticks(Nanos(tb_ns));

    // The work-based scheme's workload: the largest λ of all ranks, and how long it
    // takes here alone.
    let (units, alone_ticks) = match spec.compute {
        Compute::Time => (None, 0),
        Compute::Work => {
            let mine = calibrate(clock, work, tb_ticks);
            let largest = max_at_root(control, NAME, mine)?;
            let units = broadcast_word(control, NAME, "a workload", largest)?;
            let alone = fastest_of_5(clock, work, units);
            (Some(units), alone)
        }
    };
    let test_every = spec.test_every_ns.map(|ns| rate.to_ticks(Nanos(ns)).max(1));
    let chunk = match (units, spec.test_every_ns) {
        (Some(u), Some(te)) if tb_ns > 0.0 => {
            ((u as f64 * te / tb_ns).ceil() as u64).clamp(1, u.max(1))
        }
        (Some(u), _) => u.max(1),
        _ => 0,
    };

    // Stage 2: start, compute for t_b, wait.
    let window2 = window::initial_window(slowest_pure.saturating_add(tb_ticks));
    let ovrl = stage(clock, control, model, spec, window2, || {
        let t0 = clock.now();
        op.start(none)?;
        let t1 = clock.now();
        let mut done = false;
        let mut tests = 0u64;
        let mut in_tests = 0u64;
        let mut test = |op: &mut dyn CollOp, done: &mut bool| -> Result<(), CollError> {
            if !*done {
                let s = clock.now();
                *done = op.test(none)?;
                in_tests += clock.now().since(s);
                tests += 1;
            }
            Ok(())
        };
        match units {
            None => {
                // Time-based: until t_b has passed, tests included.
                let end = t1.plus(tb_ticks);
                match test_every {
                    None => {
                        clock.spin_until(end);
                    }
                    Some(every) => loop {
                        let next = Ticks(clock.now().0.saturating_add(every)).min(end);
                        if clock.spin_until(next) >= end {
                            break;
                        }
                        test(op, &mut done)?;
                    },
                }
            }
            Some(total) => {
                // Work-based: λ units whatever they cost, a test after each chunk.
                let mut left = total;
                while left > 0 {
                    let w = if test_every.is_some() {
                        chunk.min(left)
                    } else {
                        left
                    };
                    work.work(w);
                    left -= w;
                    if left > 0 && test_every.is_some() {
                        test(op, &mut done)?;
                    }
                }
            }
        }
        let t2 = clock.now();
        op.wait(none)?;
        let t3 = clock.now();
        let t_cpu = t2.since(t1);
        let compute = match units {
            None => t_cpu.saturating_sub(in_tests),
            Some(_) => alone_ticks,
        };
        Ok(vec![
            t3.since(t0),
            t1.since(t0),
            t_cpu,
            t3.since(t2),
            in_tests,
            tests,
            compute,
        ])
    })?;

    let ranks = if control.rank() == 0 {
        pure.by_rank
            .iter()
            .zip(&ovrl.by_rank)
            .enumerate()
            .map(|(rank, (p, o))| {
                let ns = |ticks: f64| rate.to_nanos(ticks.round() as u64).0;
                let m = |field: usize| median_field(o, field).unwrap_or(0.0);
                RankNbc {
                    rank,
                    t_pure_ns: ns(median_field(p, 0).unwrap_or(0.0)),
                    t_ovrl_ns: ns(m(0)),
                    t_init_ns: ns(m(1)),
                    t_cpu_ns: ns(m(2)),
                    t_wait_ns: ns(m(3)),
                    t_test_ns: ns(m(4)),
                    tests: m(5),
                    compute_ns: ns(m(6)),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(NbcTimes {
        ranks,
        t_b_ns: tb_ns,
        work_units: units,
        pure_calls: (pure.valid, pure.invalid),
        ovrl_calls: (ovrl.valid, ovrl.invalid),
        decided: (pure.decided, ovrl.decided),
    })
}

/// The median of field `field` over `calls`.
fn median_field(calls: &[Vec<u64>], field: usize) -> Option<f64> {
    let values: Vec<f64> = calls.iter().map(|c| c[field] as f64).collect();
    median(&values)
}

/// One stage's calls: per rank, per call, the fields the call returned; the valid
/// calls, or when no call was valid after every round, all of them
/// (`decided == false`).
struct Stage {
    by_rank: Vec<Vec<Vec<u64>>>,
    valid: usize,
    invalid: usize,
    decided: bool,
}

/// Runs `call` in rounds of windows until `reps` calls were valid on every rank (or
/// `max_rounds` rounds ran); the window adapts to field 0 of what it returns (the
/// call's length). Rank 0 gets every rank's fields of the valid calls; when none was
/// valid (a loaded host: every call started late or overran even the largest window)
/// the stage degrades rather than fails: rank 0 gets every call's fields, undecided.
fn stage<C: Clock + ?Sized>(
    clock: &C,
    control: &mut dyn Control,
    model: &ClockModel,
    spec: &NbcSpec,
    window_ticks: u64,
    mut call: impl FnMut() -> Result<Vec<u64>, CollError>,
) -> Result<Stage, PatternError> {
    let np = control.size();
    let mut out = Stage {
        by_rank: vec![Vec::new(); np],
        valid: 0,
        invalid: 0,
        decided: true,
    };
    // The invalid calls, for a stage that ends without a valid one.
    let mut every: Vec<Vec<Vec<u64>>> = vec![Vec::new(); np];
    let mut rounds = WindowRounds::new(
        NAME,
        *model,
        spec.plan.window_wait,
        spec.plan.max_rounds,
        spec.plan.reps,
        window_ticks,
    );
    let mut more = true;
    while more {
        rounds.init_round(clock, control)?;
        for _ in 0..spec.plan.reps {
            let slot = rounds.start(clock, 0);
            let fields = call()?;
            rounds.stop(clock, &slot, &fields);
        }
        let round = rounds.end_round(control)?;
        let short = rounds.valid_calls() < spec.plan.reps;
        more = rounds.decide(control, || {
            let mut longest = 0u64;
            for (rank, calls) in round.records.iter().enumerate() {
                for (fields, status) in calls.iter().zip(&round.statuses) {
                    if *status == SlotStatus::Valid {
                        longest = longest.max(fields[0]);
                        out.by_rank[rank].push(fields.clone());
                    } else {
                        every[rank].push(fields.clone());
                    }
                }
            }
            let invalid = Tally::of(&round.statuses).invalid();
            out.valid += spec.plan.reps - invalid;
            out.invalid += invalid;
            let op_ticks = longest as f64;
            Verdict {
                short,
                invalid,
                op_ticks,
            }
        })?;
    }
    if rounds.valid_calls() == 0 {
        out.decided = false;
        out.by_rank = every;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
