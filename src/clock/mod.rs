//! Time: raw ticks from RDTSCP (or a plain RDTSC, `--timer rdtsc`), their rate, and
//! the host facts behind their accuracy.
//!
//! Patterns never read a clock themselves: they receive a [`Clock`] (smoltcp passes
//! `timestamp` into `Interface::poll` for the same reason), so the same code runs on
//! the real TSC, on a clock with injected skew (`NGAUGE_TEST_CLOCK_SKEW`, for tests
//! of clock synchronization), and inside the simulator.

mod calibrate;
mod facts;
mod host;
mod overhead;
mod pin;
mod timer;

pub use crate::units::{DurationError, Nanos, TickRate, Ticks};
pub use calibrate::{calibrate, fit as fit_calibration, Calibration, Sample as CalibrationSample};
pub use facts::{TimerFacts, RATE_DISAGREEMENT};
pub use host::{
    parse_cpuinfo_mhz, parse_kernel_log, FrequencyControl, KernelTscRate, TscFlags, Warning,
};
pub use overhead::{measure_overhead, measure_overhead_samples, TimerOverhead};
pub use pin::{allowed_cores, available_cores, parse_cpu_list, pin_to, pinned_core};
pub use timer::{monotonic_raw_ns, TimerSource, TimerUnavailable};

use ngauge_transport::TscRead;
#[cfg(target_arch = "x86_64")]
pub use timer::{read_tsc, read_tsc_plain};

/// A source of tick readings with a known rate.
pub trait Clock {
    /// The current reading.
    fn now(&self) -> Ticks;
    /// Ticks per second.
    fn rate(&self) -> TickRate;
    /// Spins until this clock reads `deadline` or later; returns the reading that
    /// ended the wait. The default busy-waits on [`Clock::now`]; a virtual clock in
    /// a test overrides it to jump to the deadline, exactly and without millions of
    /// reads (see [`spin_until`]).
    #[inline]
    fn spin_until(&self, deadline: Ticks) -> Ticks {
        loop {
            let now = self.now();
            if now >= deadline {
                return now;
            }
            std::hint::spin_loop();
        }
    }

    /// How [`Clock::now`] reads the raw time-stamp counter, when it returns that
    /// and nothing added (`rdtscp; lfence` or a plain `rdtsc`): then readings a
    /// transport takes with the same instruction (`Transport::native_round_trips`)
    /// are ticks of this clock. `None` by default (test clocks, skewed clocks,
    /// `CLOCK_MONOTONIC_RAW`).
    fn tsc_read(&self) -> Option<TscRead> {
        None
    }
}

/// An injected clock error: this rank's readings are shifted by
/// `offset + drift * (raw - epoch)`, so tests of clock synchronization know the truth.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Skew {
    /// Offset at `epoch`, in ticks (may be negative).
    pub offset_ticks: f64,
    /// Rate error as a fraction (40 ppm = 40e-6).
    pub drift: f64,
    /// Raw reading at which the offset is exactly `offset_ticks`.
    pub epoch: Ticks,
}

impl Skew {
    /// The skewed reading for a raw one. Only the shift goes through `f64`, computed
    /// from the distance to the epoch; the reading itself stays an integer, so every
    /// tick counts however large the readings are (an `f64` holds integers exactly
    /// only up to 2^53).
    pub fn apply(&self, raw: Ticks) -> Ticks {
        let elapsed = raw.0 as i128 - self.epoch.0 as i128;
        let shift = self.offset_ticks + self.drift * elapsed as f64;
        let shifted = raw.0 as i128 + shift.round() as i128;
        Ticks(shifted.clamp(0, u64::MAX as i128) as u64)
    }
}

/// The machine's timer (RDTSCP or CLOCK_MONOTONIC_RAW), calibrated, optionally skewed.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    source: TimerSource,
    rate: TickRate,
    skew: Option<Skew>,
}

impl SystemClock {
    /// A clock on `source` with a calibrated `rate`.
    pub fn new(source: TimerSource, rate: TickRate) -> Self {
        SystemClock {
            source,
            rate,
            skew: None,
        }
    }

    /// Detects the timer and calibrates it over a 100 ms window.
    pub fn calibrated() -> (Self, Calibration) {
        Self::calibrated_on(TimerSource::detect())
    }

    /// A clock on `source` (one [`TimerSource::usable`] here), calibrated over a
    /// 100 ms window.
    pub fn calibrated_on(source: TimerSource) -> (Self, Calibration) {
        let cal = calibrate(source, std::time::Duration::from_millis(100));
        (Self::new(source, cal.rate), cal)
    }

    /// The same clock with readings shifted by `skew`.
    pub fn with_skew(mut self, skew: Option<Skew>) -> Self {
        self.skew = skew;
        self
    }

    /// The injected skew, if any.
    pub fn skew(&self) -> Option<Skew> {
        self.skew
    }

    /// The timer behind this clock.
    pub fn source(&self) -> TimerSource {
        self.source
    }

    /// The unskewed reading.
    #[inline(always)]
    pub fn raw(&self) -> Ticks {
        timer::read(self.source)
    }
}

impl Clock for SystemClock {
    #[inline(always)]
    fn now(&self) -> Ticks {
        let raw = timer::read(self.source);
        match &self.skew {
            None => raw,
            Some(skew) => skew.apply(raw),
        }
    }
    fn rate(&self) -> TickRate {
        self.rate
    }
    fn tsc_read(&self) -> Option<TscRead> {
        self.skew
            .is_none()
            .then(|| self.source.tsc_read())
            .flatten()
    }
}

/// Spins until `clock` reaches `deadline` (for the busy-waits of PRTT's `d` and of
/// window-based starts). Returns the reading that ended the wait.
///
/// Calls [`Clock::spin_until`]: a busy loop on [`Clock::now`] for every clock but
/// the virtual ones of tests, whose time advances only by what the test charges.
#[inline]
pub fn spin_until<C: Clock + ?Sized>(clock: &C, deadline: Ticks) -> Ticks {
    clock.spin_until(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_applies_offset_and_drift_from_its_epoch() {
        let skew = Skew {
            offset_ticks: -1000.0,
            drift: 40e-6,
            epoch: Ticks(1_000_000),
        };
        assert_eq!(skew.apply(Ticks(1_000_000)), Ticks(999_000));
        // 1e6 ticks later the drift has added 40 ticks.
        assert_eq!(skew.apply(Ticks(2_000_000)), Ticks(1_999_040));
    }

    #[test]
    fn skew_keeps_every_tick_of_readings_beyond_2_pow_53() {
        // Regression (review finding 10): the reading went through f64 and lost its
        // low bits.
        let epoch = Ticks((1 << 60) + 12_345);
        let skew = Skew {
            offset_ticks: -1000.0,
            drift: 40e-6,
            epoch,
        };
        assert_eq!(skew.apply(epoch), Ticks(epoch.0 - 1000));
        assert_eq!(skew.apply(epoch.plus(1)), Ticks(epoch.0 + 1 - 1000));
        assert_eq!(
            skew.apply(epoch.plus(1_000_000)),
            Ticks(epoch.0 + 1_000_000 - 1000 + 40)
        );
        // Before the epoch the drift subtracts; the result stays in range.
        assert_eq!(
            skew.apply(Ticks(epoch.0 - 1_000_000)),
            Ticks(epoch.0 - 1_000_000 - 1000 - 40)
        );
        let early = Skew {
            offset_ticks: -1e9,
            drift: 0.0,
            epoch: Ticks(0),
        };
        assert_eq!(early.apply(Ticks(5)), Ticks(0));
        let late = Skew {
            offset_ticks: 1e9,
            drift: 0.0,
            epoch: Ticks(u64::MAX),
        };
        assert_eq!(late.apply(Ticks(u64::MAX - 5)), Ticks(u64::MAX));
    }

    #[test]
    fn only_an_unskewed_counter_clock_is_the_raw_tsc() {
        let rate = TickRate::new(1e9);
        let mono = SystemClock::new(TimerSource::MonotonicRaw, rate);
        assert_eq!(mono.tsc_read(), None);
        let plain = SystemClock::new(TimerSource::Rdtsc, rate);
        assert_eq!(plain.tsc_read(), Some(TscRead::Rdtsc));
        let tsc = SystemClock::new(TimerSource::Rdtscp, rate);
        assert_eq!(tsc.tsc_read(), Some(TscRead::Rdtscp));
        let skew = Some(Skew {
            offset_ticks: 5.0,
            drift: 0.0,
            epoch: Ticks(0),
        });
        let skewed = tsc.with_skew(skew);
        assert_eq!(skewed.tsc_read(), None);
        assert_eq!(plain.with_skew(skew).tsc_read(), None);
        assert_eq!(skewed.with_skew(None).tsc_read(), Some(TscRead::Rdtscp));
    }

    #[test]
    fn spin_until_returns_at_or_after_the_deadline() {
        let (clock, _) = (
            SystemClock::new(TimerSource::detect(), TickRate::new(1e9)),
            (),
        );
        let deadline = clock.now().plus(10_000);
        assert!(spin_until(&clock, deadline) >= deadline);
    }
}
