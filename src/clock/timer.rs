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
//! This is one of the three places in ngauge allowed to use `unsafe` (the clock, verbs,
//! MPI).
#![allow(unsafe_code)]

use crate::units::Ticks;

crate::names::named_enum! {
    /// Where ticks come from.
    pub enum TimerSource("timer source") {
        /// The time-stamp counter read with `rdtscp` (x86-64).
        Rdtscp = "rdtscp",
        /// `clock_gettime(CLOCK_MONOTONIC_RAW)` in nanoseconds (fallback).
        MonotonicRaw = "clock_monotonic_raw",
    }
}

impl TimerSource {
    /// The source this build and CPU use.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if cpuid_has_rdtscp() || cpu_flag("rdtscp") {
                return TimerSource::Rdtscp;
            }
        }
        TimerSource::MonotonicRaw
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
        #[cfg(not(target_arch = "x86_64"))]
        TimerSource::Rdtscp => unreachable!("rdtscp is only detected on x86-64"),
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
