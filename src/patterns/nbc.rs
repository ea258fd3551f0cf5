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

use crate::clock::{Clock, Nanos, Ticks};
use crate::coll::{CollError, CollOp, Uninterrupted};
use crate::stats::median;
use crate::sync::model::ClockModel;
use crate::sync::window::{self, SlotStatus, Windows};
use crate::sync::SyncError;
use ngauge_transport::{Control, ControlError, Rank, WaitMode};

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
        let fastest = (0..5)
            .map(|_| {
                let t0 = clock.now();
                work.work(units);
                clock.now().since(t0)
            })
            .min()
            .expect("tries");
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

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NbcSpec {
    /// Time- or work-based computation.
    pub compute: Compute,
    /// Call test this often during the computation, ns (`None`: never).
    pub test_every_ns: Option<f64>,
    /// Valid calls wanted in each stage.
    pub reps: usize,
    /// Untimed calls first (at least 1: they size the first window).
    pub warmup: usize,
    /// Fill and verify the data around each warm-up call.
    pub check_data: bool,
    /// How a rank waits for its start time.
    pub window_wait: WaitMode,
    /// Each stage gives up after this many rounds of `reps` calls.
    pub max_rounds: usize,
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

/// What can go wrong measuring a nonblocking collective.
#[derive(Debug, thiserror::Error)]
pub enum NbcError {
    /// Parameters that cannot work.
    #[error("{0}")]
    Options(String),
    /// Running or checking the collective failed.
    #[error(transparent)]
    Coll(#[from] CollError),
    /// The window schedule failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// The control channel failed.
    #[error("nonblocking collective: {0}")]
    Control(#[from] ControlError),
    /// A rank sent malformed timing data.
    #[error("nonblocking collective: rank {rank} sent {detail}")]
    Protocol {
        /// The rank.
        rank: Rank,
        /// What was wrong.
        detail: String,
    },
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
) -> Result<NbcTimes, NbcError> {
    if spec.reps == 0 || spec.warmup == 0 || spec.max_rounds == 0 {
        return Err(NbcError::Options(
            "the nonblocking benchmark needs at least one repetition, one warm-up call and \
             one round"
                .into(),
        ));
    }
    if let Some(te) = spec.test_every_ns {
        if !(te > 0.0 && te.is_finite()) {
            return Err(NbcError::Options(format!(
                "progress calls every {te} ns: the interval must be positive"
            )));
        }
    }
    let rate = clock.rate();
    let none = &mut Uninterrupted;

    // Warm-up: start + wait after a control barrier, the data checked.
    let mut longest = 0u64;
    for _ in 0..spec.warmup {
        if spec.check_data {
            op.fill()?;
        }
        control.barrier()?;
        let t0 = clock.now();
        op.start(none)?;
        op.wait(none)?;
        longest = longest.max(clock.now().since(t0));
        if spec.check_data {
            op.verify()?;
        }
    }
    let slowest = super::late::max_at_root(control, longest)?;

    // Stage 1: the blocking time of the nonblocking call.
    let pure = stage(
        clock,
        control,
        model,
        spec,
        window::initial_window(slowest),
        || {
            let t0 = clock.now();
            op.start(none)?;
            op.wait(none)?;
            Ok(vec![clock.now().since(t0)])
        },
    )?;
    // t_b: the largest rank's median, to every rank (in ns: the ranks' rates differ).
    let mut tb_bytes = Vec::new();
    let mut slowest_pure = 0u64;
    if control.rank() == 0 {
        let tb = pure
            .by_rank
            .iter()
            .filter_map(|calls| median_field(calls, 0))
            .fold(0.0f64, f64::max);
        slowest_pure = tb as u64;
        tb_bytes.extend_from_slice(&rate.to_nanos(tb as u64).0.to_le_bytes());
    }
    control.broadcast(0, &mut tb_bytes)?;
    let tb_ns = read_f64(&tb_bytes)?;
    let tb_ticks = rate.to_ticks(Nanos(tb_ns));

    // The work-based scheme's workload: the largest λ of all ranks, and how long it
    // takes here alone.
    let (units, alone_ticks) = match spec.compute {
        Compute::Time => (None, 0),
        Compute::Work => {
            let mine = calibrate(clock, work, tb_ticks);
            let largest = super::late::max_at_root(control, mine)?;
            let mut bytes = largest.to_le_bytes().to_vec();
            control.broadcast(0, &mut bytes)?;
            let units = u64::from_le_bytes(bytes.as_slice().try_into().map_err(|_| {
                NbcError::Protocol {
                    rank: 0,
                    detail: format!("a workload of {} bytes", bytes.len()),
                }
            })?);
            let alone = (0..5)
                .map(|_| {
                    let t0 = clock.now();
                    work.work(units);
                    clock.now().since(t0)
                })
                .min()
                .expect("tries");
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

fn read_f64(bytes: &[u8]) -> Result<f64, NbcError> {
    bytes
        .try_into()
        .map(f64::from_le_bytes)
        .map_err(|_| NbcError::Protocol {
            rank: 0,
            detail: format!("a time of {} bytes", bytes.len()),
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

/// Runs `call` in windows until `reps` calls were valid on every rank (or
/// `max_rounds` rounds ran); field 0 of what it returns is the call's length, which
/// the window adapts to (within [`window::MAX_WINDOW_GROWTH`] of the first). Rank 0
/// gets every rank's fields of the valid calls; when none was valid (a loaded
/// host: every call started late or overran even the largest window) the stage
/// degrades rather than fails: rank 0 gets the fields of every call, and the
/// stage is not decided.
fn stage<C: Clock + ?Sized>(
    clock: &C,
    control: &mut dyn Control,
    model: &ClockModel,
    spec: &NbcSpec,
    mut window_ticks: u64,
    mut call: impl FnMut() -> Result<Vec<u64>, CollError>,
) -> Result<Stage, NbcError> {
    let np = control.size();
    let mut out = Stage {
        by_rank: vec![Vec::new(); np],
        valid: 0,
        invalid: 0,
        decided: true,
    };
    // Every call, valid or not, for a stage that ends without a valid one.
    let mut every: Vec<Vec<Vec<u64>>> = vec![Vec::new(); np];
    let mut rounds = 0;
    let first_window = window_ticks;
    loop {
        rounds += 1;
        let mut windows = Windows::announce(clock, control, model, window_ticks)?;
        window_ticks = windows.window_ticks();
        let mut statuses = Vec::with_capacity(spec.reps);
        let mut records: Vec<u64> = Vec::new();
        let mut width = 0;
        for _ in 0..spec.reps {
            let slot = windows.wait(clock, spec.window_wait);
            let fields = call()?;
            statuses.push(windows.finish(clock, &slot));
            width = fields.len();
            records.extend(fields);
        }
        let agreed = window::agree(control, &statuses)?;
        let bytes: Vec<u8> = records.iter().flat_map(|v| v.to_le_bytes()).collect();
        let gathered = control.gather(0, &bytes)?;
        let mut decision = Vec::new();
        if control.rank() == 0 {
            let mut round_invalid = 0;
            let mut longest = 0u64;
            for (rank, theirs) in gathered.iter().enumerate() {
                if theirs.len() != bytes.len() {
                    return Err(NbcError::Protocol {
                        rank,
                        detail: format!(
                            "{} bytes of times, expected {}",
                            theirs.len(),
                            bytes.len()
                        ),
                    });
                }
                let words: Vec<u64> = theirs
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
                    .collect();
                for (k, status) in agreed.iter().enumerate() {
                    let fields = &words[k * width..(k + 1) * width];
                    if out.valid == 0 {
                        every[rank].push(fields.to_vec());
                    }
                    if *status == SlotStatus::Valid {
                        longest = longest.max(fields[0]);
                        out.by_rank[rank].push(fields.to_vec());
                    } else if rank == 0 {
                        round_invalid += 1;
                    }
                }
            }
            let valid_now = agreed.iter().filter(|s| **s == SlotStatus::Valid).count();
            out.valid += valid_now;
            out.invalid += round_invalid;
            let next = window::adapt_window_capped(
                first_window,
                window_ticks,
                round_invalid,
                spec.reps,
                longest as f64,
            )
            .unwrap_or(window_ticks);
            let more = out.valid < spec.reps && rounds < spec.max_rounds;
            // 0: done, 1: another round, 2: done without a valid call.
            decision.push(if more {
                1
            } else if out.valid == 0 {
                2
            } else {
                0
            });
            decision.extend_from_slice(&next.to_le_bytes());
        }
        control.broadcast(0, &mut decision)?;
        let (verdict, next) = match decision.as_slice() {
            [m @ 0..=2, rest @ ..] if rest.len() == 8 => {
                (*m, u64::from_le_bytes(rest.try_into().expect("8 bytes")))
            }
            _ => {
                return Err(NbcError::Protocol {
                    rank: 0,
                    detail: format!("a round decision of {} bytes", decision.len()),
                })
            }
        };
        match verdict {
            0 => return Ok(out),
            2 => {
                out.decided = false;
                out.by_rank = every;
                return Ok(out);
            }
            _ => {}
        }
        window_ticks = next;
    }
}

#[cfg(test)]
mod tests;
