//! System noise: the selfish-detour benchmark, and noise injected into our own
//! collectives.
//!
//! # Selfish detour
//!
//! Beckman, Iskra, Yoshii and Coghlan ("The influence of operating systems on the
//! performance of collective operations at extreme scale", Cluster 2006) spin in a
//! tight loop that does nothing but read the cycle counter; an iteration that takes
//! much longer than the fastest one is a *detour*: the CPU was taken away (an
//! interrupt, a daemon, the scheduler). Netgauge's `noise` pattern (Hoefler) does
//! the same, and so do we ([`selfish`]):
//!
//! 1. *Calibrate*: run the loop until its fastest iteration has not improved for
//!    [`SelfishSpec::calibration_reads`] iterations; that is `t_min` (at least one
//!    tick).
//! 2. *Measure*: run the same loop for [`SelfishSpec::duration_ns`]; every iteration
//!    longer than `threshold * t_min` is a detour, recorded with its start (the
//!    reading before it, from the start of the measurement) and its length minus
//!    `t_min` (the part that was not the loop: Netgauge's `elapsed - min`).
//! 3. *Report*: the detours, their count, and the CPU fraction lost: the detours'
//!    total length over the measured time.
//!
//! Improvements on Netgauge's `perform_selfish`: the measurement runs for a time, not
//! a number of detours, so a quiet core is measured as long as a noisy one (Netgauge
//! warns when its sample count covers less than a second); the detour list is
//! allocated before the loop and bounded ([`SelfishSpec::max_detours`]), detours
//! beyond it still count towards the count and the CPU fraction; the calibration
//! stops on "no improvement for N iterations" instead of Netgauge's loop that
//! compares every sample against a threshold computed from a minimum of zero.
//!
//! Every rank of a job runs the loop at once on its own pinned core ([`measure`]),
//! so `--np` equal to the core count measures every core while all of them are busy.
//!
//! # Injected noise
//!
//! A [`NoiseInjection`] `PERIOD:DURATION` makes an [`Injector`] take the CPU for
//! `DURATION` at the start of every `PERIOD` of the rank's clock. It is an
//! [`Interrupts`] the caller passes to the collective executor
//! ([`crate::coll::Executor::run_with`]), which polls it at every instant it acts:
//! inside a detour window the rank spins until the window ends, so whatever it was
//! about to do (forward a segment, reduce, post the next receive) waits. A window that
//! passes while the rank is blocked in the transport costs nothing, as the CPU was
//! idle anyway, unless the message arrives inside it. So a collective runs under a
//! known noise pattern, and `late` (and `coll`) show how each algorithm propagates it.

use crate::clock::{Clock, Ticks};
use crate::coll::Interrupts;
use ngauge_transport::{Control, ControlError, Rank};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// What can go wrong measuring or injecting noise.
#[derive(Debug, thiserror::Error)]
pub enum NoiseError {
    /// Parameters that cannot work.
    #[error("{0}")]
    Options(String),
    /// The control channel failed.
    #[error("noise: {0}")]
    Control(#[from] ControlError),
    /// A rank sent malformed results.
    #[error("noise: rank {rank} sent {detail}")]
    Protocol {
        /// The rank.
        rank: Rank,
        /// What was wrong.
        detail: String,
    },
}

// ---------------------------------------------------------------------------
// Injection

/// A noise pattern: the CPU is taken for `duration_ns` at the start of every
/// `period_ns` (`PERIOD:DURATION`, e.g. `1ms:50us`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseInjection {
    /// Time from the start of one detour to the start of the next, ns.
    pub period_ns: f64,
    /// Length of each detour, ns (less than the period).
    pub duration_ns: f64,
}

impl NoiseInjection {
    /// Checks that the detours are shorter than the period and not empty.
    pub fn validate(&self) -> Result<(), NoiseError> {
        if !(self.duration_ns > 0.0 && self.duration_ns < self.period_ns) {
            return Err(NoiseError::Options(format!(
                "noise injection {}: the duration must be positive and shorter than the period",
                self
            )));
        }
        Ok(())
    }
}

impl std::fmt::Display for NoiseInjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ns:{}ns", self.period_ns, self.duration_ns)
    }
}

impl FromStr for NoiseInjection {
    type Err = NoiseError;
    /// `PERIOD:DURATION`, each a duration with a unit (`1ms:50us`).
    fn from_str(text: &str) -> Result<NoiseInjection, NoiseError> {
        let bad = || {
            NoiseError::Options(format!(
                "`{text}` is not a noise pattern PERIOD:DURATION (e.g. 1ms:50us)"
            ))
        };
        let (period, duration) = text.split_once(':').ok_or_else(bad)?;
        let period: crate::clock::Nanos = period.parse().map_err(|_| bad())?;
        let duration: crate::clock::Nanos = duration.parse().map_err(|_| bad())?;
        let injection = NoiseInjection {
            period_ns: period.0,
            duration_ns: duration.0,
        };
        if !(injection.duration_ns > 0.0 && injection.duration_ns < injection.period_ns) {
            return Err(NoiseError::Options(format!(
                "noise pattern `{text}`: the duration must be positive and shorter than the period"
            )));
        }
        Ok(injection)
    }
}

/// Takes the CPU as a [`NoiseInjection`] says, on one rank's clock: detour `k`
/// covers `[epoch + k * period, epoch + k * period + duration)` (see the module
/// docs). Polled by the executor; counts what it took.
#[derive(Debug)]
pub struct Injector<'c, C: Clock + ?Sized> {
    clock: &'c C,
    epoch: Ticks,
    period_ticks: u64,
    duration_ticks: u64,
    /// Detours served.
    pub detours: u64,
    /// Ticks spent spinning in them.
    pub taken_ticks: u64,
}

impl<'c, C: Clock + ?Sized> Injector<'c, C> {
    /// An injector whose first detour starts at the clock's reading now.
    pub fn new(clock: &'c C, injection: NoiseInjection) -> Result<Self, NoiseError> {
        let epoch = clock.now();
        Self::with_epoch(clock, injection, epoch)
    }

    /// An injector whose first detour starts at `epoch`.
    pub fn with_epoch(
        clock: &'c C,
        injection: NoiseInjection,
        epoch: Ticks,
    ) -> Result<Self, NoiseError> {
        injection.validate()?;
        let rate = clock.rate();
        let period_ticks = rate
            .to_ticks(crate::clock::Nanos(injection.period_ns))
            .max(2);
        let duration_ticks = rate
            .to_ticks(crate::clock::Nanos(injection.duration_ns))
            .clamp(1, period_ticks - 1);
        Ok(Injector {
            clock,
            epoch,
            period_ticks,
            duration_ticks,
            detours: 0,
            taken_ticks: 0,
        })
    }

    /// When the detour covering `now` ends, if `now` is inside one.
    pub fn detour_end(&self, now: Ticks) -> Option<Ticks> {
        if now < self.epoch {
            return None;
        }
        let phase = now.since(self.epoch) % self.period_ticks;
        (phase < self.duration_ticks).then(|| now.plus(self.duration_ticks - phase))
    }
}

impl<C: Clock + ?Sized> Interrupts for Injector<'_, C> {
    fn poll(&mut self) {
        let now = self.clock.now();
        if let Some(end) = self.detour_end(now) {
            let left = self.clock.spin_until(end);
            self.detours += 1;
            self.taken_ticks += left.since(now);
        }
    }
}

// ---------------------------------------------------------------------------
// Selfish detour

/// Parameters of the selfish-detour loop.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SelfishSpec {
    /// How long to measure, ns.
    pub duration_ns: f64,
    /// An iteration longer than `threshold` times the fastest is a detour.
    pub threshold: f64,
    /// Calibration ends when the fastest iteration has not improved for this many
    /// iterations.
    pub calibration_reads: u64,
    /// At most this many detours are kept (the rest still count).
    pub max_detours: usize,
}

impl Default for SelfishSpec {
    /// One second, threshold 10 times the fastest loop, calibration until 100,000
    /// iterations bring no new minimum, at most 100,000 detours kept.
    fn default() -> Self {
        SelfishSpec {
            duration_ns: 1e9,
            threshold: 10.0,
            calibration_reads: 100_000,
            max_detours: 100_000,
        }
    }
}

impl SelfishSpec {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), NoiseError> {
        if !(self.duration_ns > 0.0 && self.duration_ns.is_finite()) {
            return Err(NoiseError::Options(
                "the noise measurement needs a positive duration".into(),
            ));
        }
        if !(self.threshold > 1.0 && self.threshold.is_finite()) {
            return Err(NoiseError::Options(format!(
                "a detour threshold of {} times the fastest loop would count ordinary \
                 iterations; it must be above 1",
                self.threshold
            )));
        }
        if self.calibration_reads == 0 {
            return Err(NoiseError::Options(
                "the calibration needs at least one iteration".into(),
            ));
        }
        Ok(())
    }
}

/// One detour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detour {
    /// When it started (the last reading before it), ns from the start of the
    /// measurement.
    pub at_ns: f64,
    /// Its length: the iteration minus the fastest iteration, ns.
    pub duration_ns: f64,
}

/// What one core's loop saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelfishRun {
    /// The fastest iteration (the calibration's minimum), ns.
    pub min_loop_ns: f64,
    /// Iterations longer than this were detours, ns.
    pub threshold_ns: f64,
    /// Iterations measured.
    pub iterations: u64,
    /// From the first to the last reading of the measurement, ns.
    pub measured_ns: f64,
    /// The detours kept, in order (at most [`SelfishSpec::max_detours`]).
    pub detours: Vec<Detour>,
    /// Every detour seen, kept or not.
    pub detour_count: u64,
    /// Total length of every detour seen, ns.
    pub lost_ns: f64,
}

impl SelfishRun {
    /// The fraction of the measured time the detours took.
    pub fn cpu_fraction_lost(&self) -> f64 {
        if self.measured_ns > 0.0 {
            self.lost_ns / self.measured_ns
        } else {
            0.0
        }
    }
}

/// Runs the selfish-detour loop on this thread (see the module docs); `interrupts`
/// is polled every iteration, calibration included (an [`Injector`] there is a
/// self-test: the loop must find its detours; pass [`crate::coll::Uninterrupted`]
/// otherwise, which costs nothing).
pub fn selfish<C: Clock + ?Sized, I: Interrupts + ?Sized>(
    clock: &C,
    spec: &SelfishSpec,
    interrupts: &mut I,
) -> Result<SelfishRun, NoiseError> {
    spec.validate()?;
    let rate = clock.rate();

    // 1. Calibration: the same loop, keeping only the fastest iteration.
    let mut min = u64::MAX;
    let mut streak = 0u64;
    let mut prev = clock.now();
    while streak < spec.calibration_reads {
        interrupts.poll();
        let now = clock.now();
        let elapsed = now.since(prev);
        prev = now;
        if elapsed < min {
            min = elapsed;
            streak = 0;
        } else {
            streak += 1;
        }
    }
    let min = min.max(1);
    let threshold = ((min as f64) * spec.threshold).ceil() as u64;

    // 2. Measurement.
    let duration = rate.to_ticks(crate::clock::Nanos(spec.duration_ns)).max(1);
    let mut detours: Vec<(u64, u64)> = Vec::with_capacity(spec.max_detours);
    let mut count = 0u64;
    let mut lost = 0u64;
    let mut iterations = 0u64;
    let start = clock.now();
    let end = start.plus(duration);
    let mut prev = start;
    loop {
        interrupts.poll();
        let now = clock.now();
        let elapsed = now.since(prev);
        iterations += 1;
        if elapsed > threshold {
            let detour = elapsed - min;
            count += 1;
            lost += detour;
            if detours.len() < spec.max_detours {
                detours.push((prev.since(start), detour));
            }
        }
        prev = now;
        if now >= end {
            break;
        }
    }
    let ns = |ticks: u64| rate.to_nanos(ticks).0;
    Ok(SelfishRun {
        min_loop_ns: ns(min),
        threshold_ns: ns(threshold),
        iterations,
        measured_ns: ns(prev.since(start)),
        detours: detours
            .into_iter()
            .map(|(at, d)| Detour {
                at_ns: ns(at),
                duration_ns: ns(d),
            })
            .collect(),
        detour_count: count,
        lost_ns: ns(lost),
    })
}

/// One rank's loop, with where it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreNoise {
    /// The rank.
    pub rank: Rank,
    /// The core it was pinned to, if known.
    pub core: Option<usize>,
    /// What its loop saw.
    pub run: SelfishRun,
}

/// Collective: after a barrier on the control channel, every rank runs [`selfish`]
/// at once on its core (`core`, as the caller pinned it); rank 0 gets every rank's
/// result, by rank (the others get an empty list).
pub fn measure<C: Clock + ?Sized, I: Interrupts + ?Sized>(
    clock: &C,
    control: &mut dyn Control,
    spec: &SelfishSpec,
    core: Option<usize>,
    interrupts: &mut I,
) -> Result<Vec<CoreNoise>, NoiseError> {
    spec.validate()?;
    control.barrier()?;
    let run = selfish(clock, spec, interrupts)?;
    let mine = CoreNoise {
        rank: control.rank(),
        core,
        run,
    };
    let bytes = serde_json::to_vec(&mine).expect("plain data serializes");
    let gathered = control.gather(0, &bytes)?;
    if control.rank() != 0 {
        return Ok(Vec::new());
    }
    gathered
        .iter()
        .enumerate()
        .map(|(rank, b)| {
            let got: CoreNoise = serde_json::from_slice(b).map_err(|e| NoiseError::Protocol {
                rank,
                detail: format!("an unreadable result ({e})"),
            })?;
            if got.rank != rank {
                return Err(NoiseError::Protocol {
                    rank,
                    detail: format!("the result of rank {}", got.rank),
                });
            }
            Ok(got)
        })
        .collect()
}

/// A bin of the detour-length histogram: `[from_ns, to_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Bin {
    /// Lower bound, ns (inclusive).
    pub from_ns: f64,
    /// Upper bound, ns (exclusive).
    pub to_ns: f64,
    /// Detours in it.
    pub count: u64,
}

/// The lengths of `detours` in power-of-two bins (`[2^k, 2^(k+1))` ns; the first
/// bin also holds what is shorter than 1 ns), from the shortest occupied bin to
/// the longest, empty bins between them included.
pub fn histogram(detours: &[Detour]) -> Vec<Bin> {
    let bin_of = |ns: f64| -> i32 {
        if ns < 1.0 {
            0
        } else {
            ns.log2().floor() as i32
        }
    };
    let Some(lo) = detours.iter().map(|d| bin_of(d.duration_ns)).min() else {
        return Vec::new();
    };
    let hi = detours
        .iter()
        .map(|d| bin_of(d.duration_ns))
        .max()
        .expect("non-empty");
    let mut bins: Vec<Bin> = (lo..=hi)
        .map(|k| Bin {
            from_ns: if k == 0 { 0.0 } else { 2f64.powi(k) },
            to_ns: 2f64.powi(k + 1),
            count: 0,
        })
        .collect();
    for d in detours {
        bins[(bin_of(d.duration_ns) - lo) as usize].count += 1;
    }
    bins
}

#[cfg(test)]
mod tests;
