//! Everything `ngauge timer` reports, gathered in one place so that `info` and every
//! result's `meta` use the same facts.

use super::{
    calibrate, measure_overhead_samples, pinned_core, Calibration, FrequencyControl, KernelTscRate,
    SystemClock, TimerSource, TscFlags, Warning,
};
use crate::stats::Summary;
use serde::Serialize;
use std::time::Duration;

/// Relative difference above which calibrated and kernel rates are said to disagree.
pub const RATE_DISAGREEMENT: f64 = 1e-3;

/// The timer and the host facts behind its accuracy.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TimerFacts {
    /// `rdtscp`, `rdtsc` (`--timer rdtsc`) or `clock_monotonic_raw`.
    pub source: TimerSource,
    /// Calibrated ticks per second.
    pub hz: f64,
    /// How the rate was calibrated.
    pub calibration: Calibration,
    /// The kernel's TSC rate in Hz, when it states one.
    pub kernel_hz: Option<f64>,
    /// Where `kernel_hz` was read.
    pub kernel_hz_source: Option<String>,
    /// Nanoseconds per back-to-back read.
    pub overhead_ns: Summary,
    /// Smallest non-zero step between two reads, nanoseconds.
    pub resolution_ns: f64,
    /// Reads timed for `overhead_ns`.
    pub reads: usize,
    /// `constant_tsc` and `nonstop_tsc` both present.
    pub invariant_tsc: bool,
    /// The CPU flags behind `invariant_tsc`.
    pub flags: TscFlags,
    /// cpufreq governor and boost, or "not controllable".
    pub frequency: FrequencyControl,
    /// The core this process is pinned to, if pinned.
    pub pinned_core: Option<usize>,
    /// Every fact that threatens a measurement (in documents as
    /// [`crate::report::timer::TimerReport::warnings`]).
    #[serde(skip)]
    pub warnings: Vec<Warning>,
}

impl TimerFacts {
    /// Calibrates `source` over `window`, times `reads` reads, and reads the host
    /// facts.
    pub fn measure(source: TimerSource, window: Duration, reads: usize) -> (Self, SystemClock) {
        let (facts, clock, _) = Self::measure_with_samples(source, window, reads, false);
        (facts, clock)
    }

    /// [`Self::measure`], also returning every read's cost in nanoseconds, in the
    /// order read, when `keep`.
    pub fn measure_with_samples(
        source: TimerSource,
        window: Duration,
        reads: usize,
        keep: bool,
    ) -> (Self, SystemClock, Option<Vec<f64>>) {
        let counter = source != TimerSource::MonotonicRaw;
        let calibration = calibrate(source, window);
        let clock = SystemClock::new(source, calibration.rate);
        let (overhead, samples) = if keep {
            let (o, s) = measure_overhead_samples(&clock, reads);
            (o, Some(s))
        } else {
            (super::measure_overhead(&clock, reads), None)
        };
        let flags = TscFlags::read();
        let frequency = FrequencyControl::read();
        let kernel = if counter {
            KernelTscRate::read(&flags, &frequency)
        } else {
            None
        };
        let pinned_core = pinned_core();
        let mut warnings = Vec::new();
        if !counter {
            warnings.push(Warning::FallbackTimer);
        } else if !flags.invariant() {
            warnings.push(Warning::NonInvariantTsc);
        }
        if source == TimerSource::Rdtsc {
            warnings.push(Warning::UnorderedTimer);
        }
        if frequency.variable() {
            warnings.push(Warning::VariableFrequency {
                description: frequency.description.clone(),
            });
        }
        if pinned_core.is_none() {
            warnings.push(Warning::Unpinned);
        }
        if let Some(k) = &kernel {
            if (calibration.rate.hz / k.hz - 1.0).abs() > RATE_DISAGREEMENT {
                warnings.push(Warning::RateDisagrees {
                    calibrated_hz: calibration.rate.hz,
                    kernel_hz: k.hz,
                });
            }
        }
        let facts = TimerFacts {
            source,
            hz: calibration.rate.hz,
            calibration,
            kernel_hz: kernel.as_ref().map(|k| k.hz),
            kernel_hz_source: kernel.map(|k| k.source),
            overhead_ns: overhead.read_ns,
            resolution_ns: overhead.resolution_ns,
            reads,
            invariant_tsc: flags.invariant(),
            flags,
            frequency,
            pinned_core,
            warnings,
        };
        (facts, clock, samples)
    }
}
