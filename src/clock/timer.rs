//! Reading the raw timer: RDTSCP on x86-64, CLOCK_MONOTONIC_RAW elsewhere.
//!
//! Netgauge's `hrtimer/x86_64-gcc-rdtsc.h` used a bare `rdtsc` with a TODO about
//! instruction ordering: the CPU may execute it before the operation being timed has
//! finished (or after the next one has started). We use the sequence recommended by
//! Intel's "How to Benchmark Code Execution Times" and Hoefler et al. (accurately
//! measuring collectives, sec. 2): `rdtscp` waits until every earlier instruction has
//! executed, and the `lfence` after it keeps later instructions from starting before
//! the read. Each read also returns `TSC_AUX`, which Linux sets to the CPU number, so a
//! migration during a timed region can be detected.
//!
//! `--timer rdtsc` reads the counter as Netgauge and `ucx_perftest` do, with a plain
//! `rdtsc`: cheaper (no wait, no fence), at the price of that ordering guarantee. It
//! is a choice a result records (`meta.timer`), never the default: it exists to
//! compare with such a tool on its own terms.
//!
//! This is one of the three places in ngauge allowed to use `unsafe` (the clock, verbs,
//! MPI).
#![allow(unsafe_code)]

use crate::units::Ticks;
use ngauge_transport::TscRead;

crate::names::named_enum! {
    /// Where ticks come from.
    pub enum TimerSource("timer source") {
        /// The time-stamp counter read with `rdtscp; lfence` (x86-64): the house
        /// timer.
        Rdtscp = "rdtscp",
        /// The time-stamp counter read with a plain `rdtsc` (x86-64, `--timer
        /// rdtsc`): cheaper, but not ordered with the code it brackets.
        Rdtsc = "rdtsc",
        /// `clock_gettime(CLOCK_MONOTONIC_RAW)` in nanoseconds (fallback).
        MonotonicRaw = "clock_monotonic_raw",
    }
}

/// Why a timer the user asked for cannot run here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimerUnavailable {
    /// The instruction needs an x86-64 CPU.
    #[error("timer {0} reads the x86-64 time-stamp counter, and this is not x86-64")]
    NotX86(TimerSource),
    /// The CPU has no `rdtscp`.
    #[error("this CPU has no rdtscp instruction (the default timer is then clock_monotonic_raw)")]
    NoRdtscp,
}

impl TimerSource {
    /// The source this build and CPU use by default: `rdtscp`, else
    /// `clock_monotonic_raw`.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if cpuid_has_rdtscp() || cpu_flag("rdtscp") {
                return TimerSource::Rdtscp;
            }
        }
        TimerSource::MonotonicRaw
    }

    /// `self` when it can run on this build and CPU.
    ///
    /// # Errors
    /// [`TimerUnavailable`] (see [`Self::usable_on`]).
    pub fn usable(self) -> Result<Self, TimerUnavailable> {
        let has_rdtscp = Self::detect() == TimerSource::Rdtscp;
        self.usable_on(cfg!(target_arch = "x86_64"), has_rdtscp)
    }

    /// `self` when it can run on a CPU that is x86-64 (`x86_64`) and has
    /// `rdtscp` (`has_rdtscp`): the counter's readings need x86-64, `rdtscp` needs
    /// its instruction; `clock_monotonic_raw` runs everywhere.
    ///
    /// # Errors
    /// [`TimerUnavailable`].
    pub fn usable_on(self, x86_64: bool, has_rdtscp: bool) -> Result<Self, TimerUnavailable> {
        match self {
            TimerSource::Rdtscp | TimerSource::Rdtsc if !x86_64 => {
                Err(TimerUnavailable::NotX86(self))
            }
            TimerSource::Rdtscp if !has_rdtscp => Err(TimerUnavailable::NoRdtscp),
            _ => Ok(self),
        }
    }

    /// How a transport's own timed loop reads the counter to tick as this source
    /// does; `None` when the source is not the counter.
    pub fn tsc_read(self) -> Option<TscRead> {
        match self {
            TimerSource::Rdtscp => Some(TscRead::Rdtscp),
            TimerSource::Rdtsc => Some(TscRead::Rdtsc),
            TimerSource::MonotonicRaw => None,
        }
    }
}

/// CPUID leaf 0x8000_0001, EDX bit 27: the RDTSCP instruction.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn cpuid_has_rdtscp() -> bool {
    // SAFETY: `cpuid` exists on every x86-64 CPU and has no memory effects; leaf
    // 0x8000_0000 reports the highest extended leaf, checked before reading 0x8000_0001.
    unsafe {
        let max_extended = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max_extended >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0
    }
}

/// Whether `/proc/cpuinfo` lists `flag` for the first CPU.
pub(crate) fn cpu_flag(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("flags"))
                .map(|line| line.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

/// Reads the time-stamp counter with `rdtscp; lfence`, returning the ticks and the
/// CPU number the read ran on (`TSC_AUX & 0xfff` on Linux).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn read_tsc() -> (Ticks, u32) {
    let mut aux = 0u32;
    // SAFETY: `rdtscp` and `lfence` have no memory effects besides writing `aux`, a
    // valid local; the caller (`read`) only reaches this after `TimerSource::detect`
    // confirmed the CPU supports `rdtscp` (lfence is part of SSE2, baseline x86-64).
    let ticks = unsafe {
        let t = core::arch::x86_64::__rdtscp(&mut aux);
        core::arch::x86_64::_mm_lfence();
        t
    };
    (Ticks(ticks), aux & 0xfff)
}

/// Reads the time-stamp counter with a plain `rdtsc` (`--timer rdtsc`; see the
/// module docs for what it gives up).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn read_tsc_plain() -> Ticks {
    // SAFETY: `rdtsc` has no memory effects, and every x86-64 CPU has it.
    Ticks(unsafe { core::arch::x86_64::_rdtsc() })
}

/// Nanoseconds of `CLOCK_MONOTONIC_RAW`: the kernel's clock that NTP does not slew,
/// used as the reference for calibration and as the fallback timer.
#[inline]
pub fn monotonic_raw_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicRaw);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads `source`.
#[inline(always)]
pub fn read(source: TimerSource) -> Ticks {
    match source {
        #[cfg(target_arch = "x86_64")]
        TimerSource::Rdtscp => read_tsc().0,
        #[cfg(target_arch = "x86_64")]
        TimerSource::Rdtsc => read_tsc_plain(),
        #[cfg(not(target_arch = "x86_64"))]
        TimerSource::Rdtscp | TimerSource::Rdtsc => {
            unreachable!("the counter is only read on x86-64 (TimerSource::usable)")
        }
        TimerSource::MonotonicRaw => Ticks(monotonic_raw_ns()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_monotonic_on_one_thread() {
        let source = TimerSource::detect();
        let mut last = read(source);
        for _ in 0..10_000 {
            let now = read(source);
            assert!(now >= last, "timer went backwards: {last:?} then {now:?}");
            last = now;
        }
    }

    /// The plain reading exists on x86-64 only (`TimerSource::usable_on`).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn plain_rdtsc_readings_are_monotonic_on_one_thread() {
        let mut last = read(TimerSource::Rdtsc);
        for _ in 0..10_000 {
            let now = read(TimerSource::Rdtsc);
            assert!(now >= last, "rdtsc went backwards: {last:?} then {now:?}");
            last = now;
        }
    }

    #[test]
    fn a_timer_runs_only_where_its_instruction_exists() {
        use TimerSource::*;
        assert_eq!(Rdtsc.usable_on(true, false), Ok(Rdtsc));
        assert_eq!(Rdtscp.usable_on(true, true), Ok(Rdtscp));
        assert_eq!(
            Rdtscp.usable_on(true, false),
            Err(TimerUnavailable::NoRdtscp)
        );
        assert_eq!(
            Rdtsc.usable_on(false, false),
            Err(TimerUnavailable::NotX86(Rdtsc))
        );
        assert_eq!(
            Rdtscp.usable_on(false, true),
            Err(TimerUnavailable::NotX86(Rdtscp))
        );
        assert_eq!(MonotonicRaw.usable_on(false, false), Ok(MonotonicRaw));
        // The default is always usable where it was detected.
        assert_eq!(TimerSource::detect().usable(), Ok(TimerSource::detect()));
    }

    #[test]
    fn each_counter_source_names_its_own_reading() {
        assert_eq!(TimerSource::Rdtscp.tsc_read(), Some(TscRead::Rdtscp));
        assert_eq!(TimerSource::Rdtsc.tsc_read(), Some(TscRead::Rdtsc));
        assert_eq!(TimerSource::MonotonicRaw.tsc_read(), None);
    }

    #[test]
    fn monotonic_raw_advances_with_sleep() {
        let a = monotonic_raw_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_raw_ns();
        // sleep() measures CLOCK_MONOTONIC, which NTP may slew by up to 500 ppm
        // against MONOTONIC_RAW: allow 5% slack rather than exactly 2 ms.
        assert!(b - a >= 1_900_000, "{} ns", b - a);
    }
}
