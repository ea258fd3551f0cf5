//! Timing one collective call correctly, over any transport: the three schemes of
//! Hunold & Carpen-Amarie ("MPI benchmarking revisited", sec. 3.3 and 4.6) and
//! Hoefler, Schneider & Lumsdaine ("Accurately measuring collective operations at
//! massive scale", sec. 4; "LogGP in theory and practice", sec. 4.2 for the loop's
//! error).
//!
//! - [`Scheme::Window`]: the clocks are synchronized first (the caller passes the
//!   [`ClockModel`]); call `i` starts on every rank at the common global time
//!   `start + i * window` ([`crate::sync::window::Windows`]); each rank times its
//!   part; the call's run-time is the latest end minus the earliest start, in global
//!   time. Calls that started late or overran their window are invalid on every rank
//!   ([`window::agree`]); they are kept (with their status) and the round is
//!   repeated, with a window adapted by SKaMPI's rule ([`window::adapt_window`]),
//!   until `reps` calls are valid or `max_rounds` rounds have run. The first window
//!   is 1.5 times the slowest rank's time in the warm-up calls.
//! - [`Scheme::Barrier`]: before each call, our dissemination barrier
//!   ([`crate::coll::Algorithm::BarrierDissemination`], on the data plane like the
//!   call); the run-time is the largest local time. Its error is the barrier's exit
//!   skew (Hunold sec. 4.6).
//! - [`Scheme::Loop`]: one barrier, then `reps` calls back to back; per rank the
//!   total over `reps`, and the largest of those. Consecutive calls overlap
//!   (pipelining), so a loop underestimates a single call (the LogGP paper's sec.
//!   4.2); it is offered so users can see that error.
//!
//! With [`CollTiming::rotate_root`], call `i` of a rooted collective uses root
//! `i % np` (every root's schedule is built before the first timed call, and all
//! share one set of buffers).
//!
//! [`measure_with`] and [`Implementation::Native`] time the transport's own
//! collective instead ([`crate::coll::native`]: MPI's `MPI_Bcast`, ...) with the
//! same schemes, the same data layout and the same data checks, so "our binomial
//! over TCP" and "MPI's broadcast" are measured by one procedure.
//!
//! Before every control-plane exchange that follows data-plane traffic the
//! transport settles ([`Transport::settle`]): over UDP, a rank whose last datagram
//! was lost would otherwise wait for it while its sender waits on the control
//! channel. Our schedule and the native call are one [`CollOp`] ([`Scheduled`],
//! [`NativeOp`]), as in `late` and `nbc`; the timed region holds only its
//! [`CollOp::run`], the call's root selected before. Per-call,
//! per-rank times are returned to rank 0 ([`CollTimes`]); statistics are the
//! caller's.

use super::rounds::{gather_spans, max_at_root, spans_of, CallPlan, Verdict, WindowRounds};
use super::PatternError;
use crate::clock::Clock;
use crate::coll::{CollError, CollOp, CollSpec, Executor, NativeOp, Scheduled, Uninterrupted};
use crate::sync::model::ClockModel;
use crate::sync::window::{self, SlotStatus, Tally};
use ngauge_transport::{Control, Rank, Transport};

pub use super::rounds::Span;

/// This measurement in errors.
const NAME: &str = "collective timing";

/// How calls are timed (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// Synchronized clocks, a common start time per call, global run-time.
    Window,
    /// A barrier before each call, the largest local time.
    Barrier,
    /// Calls back to back, total divided by their number.
    Loop,
}

impl Scheme {
    /// `window`, `barrier` or `loop`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Window => "window",
            Scheme::Barrier => "barrier",
            Scheme::Loop => "loop",
        }
    }
}

impl From<Scheme> for &'static str {
    fn from(s: Scheme) -> &'static str {
        s.as_str()
    }
}

/// A name that is not a [`Scheme`].
#[derive(Debug, thiserror::Error)]
#[error("unknown timing scheme `{0}` (known: window, barrier, loop)")]
pub struct UnknownScheme(String);

impl std::str::FromStr for Scheme {
    type Err = UnknownScheme;
    fn from_str(s: &str) -> Result<Scheme, UnknownScheme> {
        [Scheme::Window, Scheme::Barrier, Scheme::Loop]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownScheme(s.into()))
    }
}

/// What a timed call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// Our schedule of `spec.algorithm`, run by the [`Executor`].
    Schedule,
    /// The transport's own collective for `spec.algorithm.collective()`
    /// ([`Transport::native_collective`]); `spec.algorithm` and its segment are
    /// ignored otherwise.
    Native,
}

/// What to measure and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollTiming {
    /// The collective (its root is used unless `rotate_root`).
    pub spec: CollSpec,
    /// The timing scheme.
    pub scheme: Scheme,
    /// Call `i` of a rooted collective uses root `i % np`.
    pub rotate_root: bool,
    /// The calls: how many, the warm-up, the data check, the windows.
    pub plan: CallPlan,
}

/// One timed call (the loop scheme: the whole loop).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Call {
    /// Its root (that of the first call of a loop).
    pub root: Rank,
    /// Calls it covers: 1, or `reps` for the loop.
    pub calls: usize,
    /// Valid, or why not (the window scheme; always valid for the others).
    pub status: SlotStatus,
    /// Every rank's span, by rank (filled on rank 0 only).
    pub ranks: Vec<Span>,
}

impl Call {
    /// The run-time of one call in ticks, as `scheme` defines it (see the module
    /// docs); 0 without spans (ranks other than 0).
    pub fn runtime_ticks(&self, scheme: Scheme) -> f64 {
        if self.ranks.is_empty() {
            return 0.0;
        }
        match scheme {
            Scheme::Window => {
                let start = self.ranks.iter().map(|s| s.start).min().expect("non-empty");
                let end = self.ranks.iter().map(|s| s.end).max().expect("non-empty");
                end.since(start) as f64
            }
            Scheme::Barrier | Scheme::Loop => {
                let longest = self.ranks.iter().map(Span::ticks).max().expect("non-empty");
                longest as f64 / self.calls.max(1) as f64
            }
        }
    }
}

/// Everything measured (complete on rank 0).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CollTimes {
    /// The scheme used.
    pub scheme: Scheme,
    /// Every timed call, valid or not, in order.
    pub calls: Vec<Call>,
    /// The last window, in global ticks (the window scheme).
    pub window_ticks: Option<u64>,
    /// Rounds of `reps` calls the window scheme ran (1 for the others).
    pub rounds: usize,
}

impl CollTimes {
    /// Counts of valid and invalid calls.
    pub fn tally(&self) -> Tally {
        let statuses: Vec<SlotStatus> = self.calls.iter().map(|c| c.status).collect();
        Tally::of(&statuses)
    }

    /// Run-times of the valid calls, in ticks, in order (rank 0).
    pub fn valid_runtimes_ticks(&self) -> Vec<f64> {
        self.calls
            .iter()
            .filter(|c| c.status == SlotStatus::Valid)
            .map(|c| c.runtime_ticks(self.scheme))
            .collect()
    }
}

/// Times `timing.spec` as `timing.scheme` says (see the module docs), run by
/// `implementation`: our schedule, or the transport's own collective (an error on a
/// transport that has none). Collective: every rank calls it with the same
/// arguments. `model` maps this rank's clock to global time (the window scheme;
/// ignored by the others).
pub fn measure_with<C: Clock + ?Sized>(
    clock: &C,
    t: &mut dyn Transport,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
    implementation: Implementation,
) -> Result<CollTimes, PatternError> {
    if timing.plan.reps == 0 {
        return Err(PatternError::Options(
            "collective timing: reps must be at least 1".into(),
        ));
    }
    if timing.scheme == Scheme::Window && (timing.plan.warmup == 0 || timing.plan.max_rounds == 0) {
        return Err(PatternError::Options(
            "collective timing: the window scheme needs a warm-up call and at least one round"
                .into(),
        ));
    }
    let spec = timing.spec;
    let mut op: Box<dyn CollOp + '_> = match implementation {
        Implementation::Schedule => Box::new(Scheduled::rotating(t, spec, timing.rotate_root)?),
        Implementation::Native => Box::new(NativeOp::rotating(t, spec, timing.rotate_root)?),
    };
    let barrier_spec = CollSpec {
        algorithm: crate::coll::Algorithm::BarrierDissemination,
        size_bytes: 0,
        segment_bytes: 0,
        root: 0,
        ..spec
    };
    let schedule = barrier_spec.schedule(op.transport().rank())?;
    let mut barrier = Executor::prepare(op.transport(), schedule)?;
    let none = &mut Uninterrupted;

    // Warm-up: barrier, call, checked data; the longest local time sizes the window.
    let mut longest = 0u64;
    for i in 0..timing.plan.warmup {
        let root = op.select(i);
        if timing.plan.check_data {
            op.fill()?;
        }
        barrier.run(op.transport())?;
        let start = clock.now();
        op.run(none)?;
        longest = longest.max(clock.now().since(start));
        if timing.plan.check_data {
            op.verify()
                .map_err(|e| checked(e, timing, implementation, root))?;
        }
    }

    let times = match timing.scheme {
        Scheme::Window => {
            op.transport().settle().map_err(CollError::from)?;
            let slowest = max_at_root(control, NAME, longest)?;
            windowed(clock, op.as_mut(), control, model, timing, slowest)?
        }
        Scheme::Barrier | Scheme::Loop => {
            let mut spans = Vec::with_capacity(timing.plan.reps);
            let mut roots = Vec::with_capacity(timing.plan.reps);
            let per_span = if timing.scheme == Scheme::Barrier {
                for i in 0..timing.plan.reps {
                    roots.push(op.select(i));
                    barrier.run(op.transport())?;
                    let start = clock.now();
                    op.run(none)?;
                    let end = clock.now();
                    spans.push(Span { start, end });
                }
                1
            } else {
                roots.push(op.select(0));
                barrier.run(op.transport())?;
                let start = clock.now();
                for i in 0..timing.plan.reps {
                    op.select(i);
                    op.run(none)?;
                }
                let end = clock.now();
                spans.push(Span { start, end });
                timing.plan.reps
            };
            op.transport().settle().map_err(CollError::from)?;
            let by_rank = gather_spans(control, NAME, &spans)?;
            let valid = vec![SlotStatus::Valid; spans.len()];
            CollTimes {
                scheme: timing.scheme,
                calls: calls_of(&by_rank, &valid, |i| (roots[i], per_span)),
                window_ticks: None,
                rounds: 1,
            }
        }
    };
    barrier
        .buffers()
        .free(op.transport())
        .map_err(CollError::from)?;
    op.release()?;
    Ok(times)
}

/// A failed data check with what was being checked; other errors unchanged.
fn checked(
    error: CollError,
    timing: &CollTiming,
    implementation: Implementation,
    root: Rank,
) -> PatternError {
    let spec = timing.spec;
    let collective = spec.algorithm.collective();
    match error {
        CollError::Data(error) => PatternError::DataCheck {
            what: match implementation {
                Implementation::Schedule => format!("{collective}/{}", spec.algorithm),
                Implementation::Native => format!("{collective}/native"),
            },
            size_bytes: spec.size_bytes,
            np: spec.np,
            root: collective.is_rooted().then_some(root),
            error,
        },
        other => other.into(),
    }
}

/// The window scheme's rounds (see the module docs).
fn windowed<C: Clock + ?Sized>(
    clock: &C,
    op: &mut dyn CollOp,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
    slowest_ticks: u64,
) -> Result<CollTimes, PatternError> {
    let mut rounds = WindowRounds::new(
        NAME,
        *model,
        timing.plan.window_wait,
        timing.plan.max_rounds,
        timing.plan.reps,
        window::initial_window(slowest_ticks),
    );
    let mut calls: Vec<Call> = Vec::new();
    let mut roots: Vec<Rank> = Vec::new();
    let mut more = true;
    while more {
        rounds.init_round(clock, control)?;
        let index = calls.len();
        for k in 0..timing.plan.reps {
            roots.push(op.select(index + k));
            let slot = rounds.start(clock, 0);
            op.run(&mut Uninterrupted)?;
            rounds.stop_span(clock, &slot);
        }
        op.transport().settle().map_err(CollError::from)?;
        let round = rounds.end_round(control)?;
        let meta = |k| (roots[index + k], 1);
        calls.extend(calls_of(&spans_of(&round.records), &round.statuses, meta));
        let (short, window_ticks) = (
            rounds.valid_calls() < timing.plan.reps,
            rounds.window_ticks(),
        );
        more = rounds.decide(control, || {
            let fresh = &calls[index..];
            let valid: Vec<f64> = fresh
                .iter()
                .filter(|c| c.status == SlotStatus::Valid)
                .map(|c| c.runtime_ticks(Scheme::Window))
                .collect();
            let mean = if valid.is_empty() {
                window_ticks as f64
            } else {
                valid.iter().sum::<f64>() / valid.len() as f64
            };
            Verdict {
                short,
                invalid: fresh.len() - valid.len(),
                op_ticks: mean,
            }
        })?;
    }
    Ok(CollTimes {
        scheme: Scheme::Window,
        calls,
        window_ticks: Some(rounds.window_ticks()),
        rounds: rounds.rounds(),
    })
}

/// Calls of `statuses` with every rank's spans (`by_rank`: empty on ranks other
/// than 0); `meta(i)` is call `i`'s root and number of calls.
fn calls_of(
    by_rank: &[Vec<Span>],
    statuses: &[SlotStatus],
    meta: impl Fn(usize) -> (Rank, usize),
) -> Vec<Call> {
    let call = |(i, &status): (usize, &SlotStatus)| Call {
        root: meta(i).0,
        calls: meta(i).1,
        status,
        ranks: by_rank.iter().map(|spans| spans[i]).collect(),
    };
    statuses.iter().enumerate().map(call).collect()
}

#[cfg(test)]
mod tests;
