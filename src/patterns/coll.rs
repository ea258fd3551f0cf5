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
//! channel. The timed region holds only [`Executor::run`] (or the one native call). Per-call,
//! per-rank times are returned to rank 0 ([`CollTimes`]); statistics are the
//! caller's.

use crate::clock::{Clock, Ticks};
use crate::coll::native::{self, NativeCalls};
use crate::coll::{check, CollBuffers, CollError, CollSpec, Executor};
use crate::sync::model::ClockModel;
use crate::sync::window::{self, SlotStatus, Tally, Windows};
use crate::sync::SyncError;
use ngauge_transport::{Control, ControlError, NativeCollective, Rank, Transport, WaitMode};

/// How calls are timed (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
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
    /// Calls to time (the window scheme: valid calls wanted).
    pub reps: usize,
    /// Untimed calls first (at least 1 for the window scheme, which sizes its
    /// first window from them).
    pub warmup: usize,
    /// Fill the buffers with known data before each warm-up call and check the
    /// result after it ([`check`]).
    pub check_data: bool,
    /// How a rank waits for a window to open: the transport's wait mode in a real
    /// run ([`window::wait_until`]).
    pub window_wait: WaitMode,
    /// The window scheme gives up after this many rounds of `reps` calls.
    pub max_rounds: usize,
}

/// One rank's part of a call: its start and end readings. Global ticks (rank 0's
/// clock through the [`ClockModel`]) for the window scheme, local ticks otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    /// When the rank started its part.
    pub start: Ticks,
    /// When it finished.
    pub end: Ticks,
}

impl Span {
    /// `end - start` in ticks.
    pub fn ticks(&self) -> u64 {
        self.end.since(self.start)
    }
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

/// What can go wrong timing a collective.
#[derive(Debug, thiserror::Error)]
pub enum CollTimingError {
    /// Building, running or checking the collective failed.
    #[error(transparent)]
    Coll(#[from] CollError),
    /// The window schedule failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// The control channel failed; its text is in this error's (no source too).
    #[error("collective timing: {0}")]
    Control(ControlError),
    /// A rank sent malformed timing data.
    #[error("collective timing: rank {rank} sent {detail}")]
    Protocol {
        /// The rank.
        rank: Rank,
        /// What was wrong.
        detail: String,
    },
    /// Parameters that cannot work.
    #[error("collective timing: {0}")]
    Options(&'static str),
    /// A checked call left wrong data.
    #[error("data check failed: {what} of {size_bytes} bytes on {np} ranks{}: {error}",
        root.map_or(String::new(), |r| format!(" from root {r}")))]
    DataCheck {
        /// The operation and algorithm (`bcast/binomial`, `bcast/native`).
        what: String,
        /// Bytes per rank.
        size_bytes: usize,
        /// Ranks in the job.
        np: usize,
        /// The root of a rooted collective.
        root: Option<Rank>,
        /// The first wrong byte (names the rank).
        error: check::DataError,
    },
}

impl From<ControlError> for CollTimingError {
    fn from(e: ControlError) -> Self {
        CollTimingError::Control(e)
    }
}

/// The executors of every root a run uses, built before the first timed call, on
/// one set of buffers (a gather's are `np` blocks: one copy per root would be `np`
/// times that).
struct Executors {
    by_root: Vec<Executor>,
    buffers: CollBuffers,
    rotate: bool,
    root: Rank,
}

impl Executors {
    fn new(t: &mut dyn Transport, timing: &CollTiming) -> Result<Executors, CollError> {
        let spec = timing.spec;
        let rotate = timing.rotate_root && spec.algorithm.collective().is_rooted();
        let roots: Vec<Rank> = if rotate {
            (0..spec.np).collect()
        } else {
            vec![spec.root]
        };
        let schedules = roots
            .into_iter()
            .map(|root| CollSpec { root, ..spec }.schedule(t.rank()))
            .collect::<Result<Vec<_>, _>>()?;
        let buffers = CollBuffers::alloc_for(t, &schedules)?;
        let by_root = schedules
            .into_iter()
            .map(|s| Executor::new(s, buffers))
            .collect::<Result<_, _>>()?;
        Ok(Executors {
            by_root,
            buffers,
            rotate,
            root: spec.root,
        })
    }

    fn root(&self, call: usize) -> Rank {
        if self.rotate {
            call % self.by_root.len()
        } else {
            self.root
        }
    }

    fn get(&mut self, call: usize) -> &mut Executor {
        let i = if self.rotate { self.root(call) } else { 0 };
        &mut self.by_root[i]
    }
}

/// One call, prepared: [`Ready::run`] is the whole timed region.
enum Ready<'a> {
    Executor(&'a mut Executor),
    Native(NativeCollective),
}

impl Ready<'_> {
    #[inline]
    fn run(self, t: &mut dyn Transport) -> Result<(), CollTimingError> {
        match self {
            Ready::Executor(e) => Ok(e.run(t)?),
            Ready::Native(call) => Ok(native::run(t, call)?),
        }
    }
}

/// What a run times: our schedules, or the transport's own collective.
enum Calls {
    Scheduled(Executors),
    Native(NativeCalls),
}

impl Calls {
    fn new(
        t: &mut dyn Transport,
        timing: &CollTiming,
        implementation: Implementation,
    ) -> Result<Calls, CollError> {
        Ok(match implementation {
            Implementation::Schedule => Calls::Scheduled(Executors::new(t, timing)?),
            Implementation::Native => {
                Calls::Native(NativeCalls::new(t, &timing.spec, timing.rotate_root)?)
            }
        })
    }

    fn root(&self, call: usize) -> Rank {
        match self {
            Calls::Scheduled(e) => e.root(call),
            Calls::Native(n) => n.root(call),
        }
    }

    /// Call `index`, ready to run: everything but the call itself done (the root's
    /// executor picked, the native call's regions built).
    fn ready(&mut self, index: usize) -> Ready<'_> {
        match self {
            Calls::Scheduled(e) => Ready::Executor(e.get(index)),
            Calls::Native(n) => Ready::Native(n.call(index)),
        }
    }

    /// Call `index` (the loop scheme's body).
    fn run(&mut self, t: &mut dyn Transport, index: usize) -> Result<(), CollTimingError> {
        self.ready(index).run(t)
    }

    fn fill(&mut self, t: &mut dyn Transport, spec: &CollSpec) -> Result<(), CollError> {
        match self {
            Calls::Scheduled(e) => {
                let rank = t.rank();
                Ok(check::fill(spec, rank, t, &e.buffers)?)
            }
            Calls::Native(n) => n.fill(t, spec),
        }
    }

    fn verify(&self, t: &dyn Transport, spec: &CollSpec) -> Result<(), CollError> {
        match self {
            Calls::Scheduled(e) => check::verify(spec, t.rank(), t, &e.buffers),
            Calls::Native(n) => n.verify(t, spec),
        }
    }

    fn free(self, t: &mut dyn Transport) -> Result<(), CollError> {
        match self {
            Calls::Scheduled(e) => e.buffers.free(t)?,
            Calls::Native(n) => n.free(t)?,
        }
        Ok(())
    }
}

/// Times `timing.spec` as `timing.scheme` says (see the module docs). Collective:
/// every rank calls it with the same arguments. `model` maps this rank's clock to
/// global time (the window scheme; ignored by the others).
pub fn measure<C: Clock + ?Sized>(
    clock: &C,
    t: &mut dyn Transport,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
) -> Result<CollTimes, CollTimingError> {
    measure_with(clock, t, control, model, timing, Implementation::Schedule)
}

/// [`measure`] of `implementation`: our schedule, or the transport's own collective
/// (an error on a transport that has none).
pub fn measure_with<C: Clock + ?Sized>(
    clock: &C,
    t: &mut dyn Transport,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
    implementation: Implementation,
) -> Result<CollTimes, CollTimingError> {
    if timing.reps == 0 {
        return Err(CollTimingError::Options("reps must be at least 1"));
    }
    if timing.scheme == Scheme::Window && (timing.warmup == 0 || timing.max_rounds == 0) {
        return Err(CollTimingError::Options(
            "the window scheme needs a warm-up call and at least one round",
        ));
    }
    let rank = t.rank();
    let spec = timing.spec;
    let mut calls = Calls::new(t, timing, implementation)?;
    let barrier_spec = CollSpec {
        algorithm: crate::coll::Algorithm::BarrierDissemination,
        size_bytes: 0,
        segment_bytes: 0,
        root: 0,
        ..spec
    };
    let mut barrier = Executor::prepare(t, barrier_spec.schedule(rank)?)?;

    // Warm-up: barrier, call, checked data; the longest local time sizes the window.
    let mut longest = 0u64;
    for i in 0..timing.warmup {
        let root = calls.root(i);
        let call_spec = CollSpec { root, ..spec };
        if timing.check_data {
            calls.fill(t, &call_spec)?;
        }
        let ready = calls.ready(i);
        barrier.run(t)?;
        let start = clock.now();
        ready.run(t)?;
        longest = longest.max(clock.now().since(start));
        if timing.check_data {
            calls
                .verify(t, &call_spec)
                .map_err(|e| checked(e, timing, implementation, root))?;
        }
    }

    let times = match timing.scheme {
        Scheme::Window => {
            t.settle().map_err(CollError::from)?;
            let slowest = max_at_root(control, longest)?;
            windowed(clock, t, control, model, timing, &mut calls, slowest)?
        }
        Scheme::Barrier => {
            let mut spans = Vec::with_capacity(timing.reps);
            for i in 0..timing.reps {
                let ready = calls.ready(i);
                barrier.run(t)?;
                let start = clock.now();
                ready.run(t)?;
                spans.push(Span {
                    start,
                    end: clock.now(),
                });
            }
            t.settle().map_err(CollError::from)?;
            let timed = gather_calls(control, &spans, |i| (calls.root(i), 1))?;
            CollTimes {
                scheme: Scheme::Barrier,
                calls: timed,
                window_ticks: None,
                rounds: 1,
            }
        }
        Scheme::Loop => {
            barrier.run(t)?;
            let start = clock.now();
            for i in 0..timing.reps {
                calls.run(t, i)?;
            }
            let span = Span {
                start,
                end: clock.now(),
            };
            t.settle().map_err(CollError::from)?;
            let timed = gather_calls(control, &[span], |_| (calls.root(0), timing.reps))?;
            CollTimes {
                scheme: Scheme::Loop,
                calls: timed,
                window_ticks: None,
                rounds: 1,
            }
        }
    };
    calls.free(t)?;
    barrier.buffers().free(t).map_err(CollError::from)?;
    Ok(times)
}

/// A failed data check with what was being checked; other errors unchanged.
fn checked(
    error: CollError,
    timing: &CollTiming,
    implementation: Implementation,
    root: Rank,
) -> CollTimingError {
    let spec = timing.spec;
    let collective = spec.algorithm.collective();
    match error {
        CollError::Data(error) => CollTimingError::DataCheck {
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
    t: &mut dyn Transport,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
    executors: &mut Calls,
    slowest_ticks: u64,
) -> Result<CollTimes, CollTimingError> {
    let mut window_ticks = window::initial_window(slowest_ticks);
    let first_window = window_ticks;
    let mut calls: Vec<Call> = Vec::new();
    let mut rounds = 0;
    let mut index = 0;
    loop {
        rounds += 1;
        let mut windows = Windows::announce(clock, control, model, window_ticks)?;
        window_ticks = windows.window_ticks();
        let mut spans = Vec::with_capacity(timing.reps);
        let mut statuses = Vec::with_capacity(timing.reps);
        for k in 0..timing.reps {
            let ready = executors.ready(index + k);
            let slot = windows.wait(clock, timing.window_wait);
            ready.run(t)?;
            let end = clock.now();
            statuses.push(windows.finish(clock, &slot));
            spans.push(Span {
                start: model.global(slot.started),
                end: model.global(end),
            });
        }
        t.settle().map_err(CollError::from)?;
        let agreed = window::agree(control, &statuses)?;
        let round = gather_calls(control, &spans, |k| (executors.root(index + k), 1))?;
        index += timing.reps;
        let first_new = calls.len();
        for (mut call, status) in round.into_iter().zip(&agreed) {
            call.status = *status;
            calls.push(call);
        }
        // Rank 0 decides whether to go on, and with which window.
        let mut decision = Vec::new();
        if control.rank() == 0 {
            let fresh = &calls[first_new..];
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
            let invalid = fresh.len() - valid.len();
            let next =
                window::adapt_window_capped(first_window, window_ticks, invalid, fresh.len(), mean)
                    .unwrap_or(window_ticks);
            let total_valid = calls
                .iter()
                .filter(|c| c.status == SlotStatus::Valid)
                .count();
            let more = total_valid < timing.reps && rounds < timing.max_rounds;
            decision.push(more as u8);
            decision.extend_from_slice(&next.to_le_bytes());
        }
        control.broadcast(0, &mut decision)?;
        let (more, next) = match decision.as_slice() {
            [m, rest @ ..] if rest.len() == 8 => (
                *m == 1,
                u64::from_le_bytes(rest.try_into().expect("8 bytes")),
            ),
            _ => {
                return Err(CollTimingError::Protocol {
                    rank: 0,
                    detail: format!("a round decision of {} bytes", decision.len()),
                })
            }
        };
        if !more {
            return Ok(CollTimes {
                scheme: Scheme::Window,
                calls,
                window_ticks: Some(window_ticks),
                rounds,
            });
        }
        window_ticks = next;
    }
}

/// The largest of every rank's `value`, known at rank 0 (others get their own).
fn max_at_root(control: &mut dyn Control, value: u64) -> Result<u64, CollTimingError> {
    let all = control.gather(0, &value.to_le_bytes())?;
    Ok(all
        .iter()
        .filter_map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
        .max()
        .unwrap_or(value))
}

/// Gathers every rank's spans at rank 0 into calls; `meta(i)` is call `i`'s root
/// and number of calls. Other ranks get the calls without spans.
fn gather_calls(
    control: &mut dyn Control,
    spans: &[Span],
    meta: impl Fn(usize) -> (Rank, usize),
) -> Result<Vec<Call>, CollTimingError> {
    let mine: Vec<u8> = spans
        .iter()
        .flat_map(|s| [s.start.0.to_le_bytes(), s.end.0.to_le_bytes()])
        .flatten()
        .collect();
    let gathered = control.gather(0, &mine)?;
    let mut calls: Vec<Call> = (0..spans.len())
        .map(|i| {
            let (root, calls) = meta(i);
            Call {
                root,
                calls,
                status: SlotStatus::Valid,
                ranks: Vec::new(),
            }
        })
        .collect();
    for (rank, bytes) in gathered.iter().enumerate() {
        if bytes.len() != mine.len() {
            return Err(CollTimingError::Protocol {
                rank,
                detail: format!("{} bytes of spans, expected {}", bytes.len(), mine.len()),
            });
        }
        for (call, chunk) in calls.iter_mut().zip(bytes.chunks_exact(16)) {
            let word = |i: usize| u64::from_le_bytes(chunk[i..i + 8].try_into().expect("8"));
            call.ranks.push(Span {
                start: Ticks(word(0)),
                end: Ticks(word(8)),
            });
        }
    }
    Ok(calls)
}

#[cfg(test)]
mod tests;
