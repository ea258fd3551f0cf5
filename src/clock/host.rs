//! Facts about this host that decide whether a timing can be trusted.
//!
//! Hunold & Carpen-Amarie (sec. 2, "factors to record") and Hoefler et al.
//! (accurately measuring collectives, sec. 2) list them: an invariant TSC, a fixed CPU
//! frequency, and a process pinned to one core. We read each from the kernel, report
//! it, and turn every fact that threatens a measurement into a [`Warning`].

use serde::Serialize;
use std::path::Path;

/// CPU flags that make the TSC a trustworthy wall clock.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TscFlags {
    /// `constant_tsc`: ticks at a fixed rate whatever the core frequency.
    pub constant_tsc: bool,
    /// `nonstop_tsc`: keeps ticking in deep C-states.
    pub nonstop_tsc: bool,
    /// `rdtscp` instruction available.
    pub rdtscp: bool,
}

impl TscFlags {
    /// Reads the flags of the first CPU from `/proc/cpuinfo`.
    pub fn read() -> Self {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Self::parse(&text)
    }

    /// Parses the `flags` line of a cpuinfo text.
    pub fn parse(cpuinfo: &str) -> Self {
        let flags: Vec<&str> = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        let has = |f: &str| flags.contains(&f);
        TscFlags {
            constant_tsc: has("constant_tsc"),
            nonstop_tsc: has("nonstop_tsc"),
            rdtscp: has("rdtscp"),
        }
    }

    /// Invariant TSC: constant rate and never stops.
    pub fn invariant(&self) -> bool {
        self.constant_tsc && self.nonstop_tsc
    }
}

/// Frequency control as the kernel exposes it (cpufreq).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FrequencyControl {
    /// `true` when `/sys/devices/system/cpu/cpu0/cpufreq` exists.
    pub controllable: bool,
    /// The scaling governor (`performance`, `powersave`, ...), if readable.
    pub governor: Option<String>,
    /// Turbo/boost enabled, if the kernel says (`cpufreq/boost` or
    /// `intel_pstate/no_turbo`).
    pub boost: Option<bool>,
    /// Words for the report: the governor, or "not controllable (no cpufreq)".
    pub description: String,
}

impl FrequencyControl {
    /// Reads cpufreq state under `sys_cpu` (normally `/sys/devices/system/cpu`).
    pub fn read_from(sys_cpu: &Path) -> Self {
        let cpufreq = sys_cpu.join("cpu0/cpufreq");
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        if !cpufreq.is_dir() {
            return FrequencyControl {
                controllable: false,
                governor: None,
                boost: None,
                description: "not controllable (no cpufreq on this machine)".into(),
            };
        }
        let governor = read(&cpufreq.join("scaling_governor"));
        let boost = read(&sys_cpu.join("cpufreq/boost"))
            .map(|b| b == "1")
            .or_else(|| read(&sys_cpu.join("intel_pstate/no_turbo")).map(|nt| nt == "0"));
        let description = match (&governor, boost) {
            (Some(g), Some(b)) => format!("{g}, boost {}", if b { "on" } else { "off" }),
            (Some(g), None) => g.clone(),
            (None, _) => "cpufreq present, governor unreadable".into(),
        };
        FrequencyControl {
            controllable: true,
            governor,
            boost,
            description,
        }
    }

    /// Reads this machine's cpufreq state.
    pub fn read() -> Self {
        Self::read_from(Path::new("/sys/devices/system/cpu"))
    }

    /// Whether the frequency may change under a measurement.
    pub fn variable(&self) -> bool {
        self.controllable
            && (self.governor.as_deref() != Some("performance") || self.boost == Some(true))
    }
}

/// The TSC frequency as the kernel states it, and where that came from.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct KernelTscRate {
    /// Ticks per second.
    pub hz: f64,
    /// Where it was read: `sysfs tsc_freq_khz`, `kernel log`, `cpuinfo cpu MHz`.
    pub source: String,
}

impl KernelTscRate {
    /// The first of: sysfs `tsc_freq_khz`, the kernel log's TSC calibration line
    /// (refined over detected), `/proc/cpuinfo`'s `cpu MHz` when the TSC is constant
    /// and the kernel has no cpufreq (then it is the TSC rate the kernel calibrated).
    pub fn read(flags: &TscFlags, freq: &FrequencyControl) -> Option<Self> {
        if let Some(khz) = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/tsc_freq_khz")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            return Some(KernelTscRate {
                hz: khz * 1e3,
                source: "sysfs tsc_freq_khz".into(),
            });
        }
        if let Some(hz) = read_kernel_log().as_deref().and_then(parse_kernel_log) {
            return Some(KernelTscRate {
                hz,
                source: "kernel log".into(),
            });
        }
        if flags.constant_tsc && !freq.controllable {
            let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
            let mhz = parse_cpuinfo_mhz(&text)?;
            return Some(KernelTscRate {
                hz: mhz * 1e6,
                source: "cpuinfo cpu MHz".into(),
            });
        }
        None
    }
}

/// Reads what `/dev/kmsg` holds without blocking (root only; `None` otherwise).
fn read_kernel_log() -> Option<String> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        "/dev/kmsg",
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut text = String::new();
    let mut record = vec![0u8; 8192];
    // Each read returns one record; EAGAIN marks the end. Bound the loop anyway.
    for _ in 0..100_000 {
        match rustix::io::read(&fd, &mut record) {
            Ok(0) | Err(rustix::io::Errno::AGAIN) => break,
            Ok(n) => {
                text.push_str(&String::from_utf8_lossy(&record[..n]));
                text.push('\n');
            }
            Err(rustix::io::Errno::PIPE) => continue, // overwritten record
            Err(_) => break,
        }
    }
    Some(text)
}

/// The TSC rate in a kernel log: "tsc: Refined TSC clocksource calibration: X MHz"
/// wins over "tsc: Detected X MHz processor".
pub fn parse_kernel_log(log: &str) -> Option<f64> {
    let mhz_after = |marker: &str| {
        log.lines().rev().find_map(|line| {
            let rest = &line[line.find(marker)? + marker.len()..];
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
    };
    mhz_after("Refined TSC clocksource calibration: ")
        .or_else(|| mhz_after("tsc: Detected "))
        .map(|mhz| mhz * 1e6)
}

/// The first `cpu MHz` value in a cpuinfo text.
pub fn parse_cpuinfo_mhz(cpuinfo: &str) -> Option<f64> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
}

/// A fact that threatens a measurement, printed to stderr after the results.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Warning {
    /// The TSC is not invariant: ticks do not measure time.
    #[error(
        "the TSC is not invariant (constant_tsc/nonstop_tsc missing): tick counts \
         follow the core frequency; fix the frequency or expect skewed times"
    )]
    NonInvariantTsc,
    /// The CPU frequency may change during the run.
    #[error(
        "CPU frequency may vary ({description}); set the governor to 'performance' \
         and disable boost for repeatable results"
    )]
    VariableFrequency {
        /// Governor and boost as read.
        description: String,
    },
    /// The process may migrate between cores during a timed region.
    #[error(
        "this process is not pinned to one core; the local launcher pins ranks, \
         under another launcher use its binding option (e.g. mpirun --bind-to core)"
    )]
    Unpinned,
    /// The calibrated rate and the kernel's disagree.
    #[error(
        "calibrated timer rate {:.6} GHz differs from the kernel's {:.6} GHz by {:.3}%",
        .calibrated_hz / 1e9,
        .kernel_hz / 1e9,
        (.calibrated_hz / .kernel_hz - 1.0).abs() * 100.0
    )]
    RateDisagrees {
        /// Calibrated ticks per second.
        calibrated_hz: f64,
        /// The kernel's ticks per second.
        kernel_hz: f64,
    },
    /// The timer is not the TSC.
    #[error(
        "no rdtscp on this CPU: timing with clock_gettime(CLOCK_MONOTONIC_RAW), \
         which costs more per read"
    )]
    FallbackTimer,
    /// The timer is a plain `rdtsc` (`--timer rdtsc`), not ordered with the code
    /// it brackets.
    #[error(
        "timer rdtsc (--timer): a reading may run before the instructions ahead of \
         it finish, so a timed region may lose part of its end; the house timer \
         (rdtscp, the default) waits for them"
    )]
    UnorderedTimer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_from_the_flags_line_only() {
        let info = "model name: constant_tsc lookalike\nflags\t: fpu tsc rdtscp constant_tsc nonstop_tsc\n";
        let f = TscFlags::parse(info);
        assert!(f.invariant() && f.rdtscp);
        let g = TscFlags::parse("model name: constant_tsc nonstop_tsc\nflags: fpu tsc\n");
        assert!(!g.invariant() && !g.rdtscp);
    }

    #[test]
    fn kernel_log_prefers_the_refined_calibration() {
        let log = "6,1,69,-;tsc: Detected 2599.998 MHz processor\n\
                   6,2,99,-;tsc: Refined TSC clocksource calibration: 2600.010 MHz\n";
        assert_eq!(parse_kernel_log(log), Some(2_600_010_000.0));
        let only = "[0.000069] tsc: Detected 2599.998 MHz processor";
        assert!((parse_kernel_log(only).unwrap() - 2_599_998_000.0).abs() < 1e-3);
        assert_eq!(parse_kernel_log("nothing here"), None);
    }

    #[test]
    fn cpuinfo_mhz_is_parsed() {
        assert_eq!(
            parse_cpuinfo_mhz("processor: 0\ncpu MHz\t\t: 2599.998\n"),
            Some(2599.998)
        );
        assert_eq!(parse_cpuinfo_mhz("processor: 0\n"), None);
    }

    #[test]
    fn missing_cpufreq_is_not_controllable_and_not_variable() {
        let dir = tempfile::tempdir().unwrap();
        let f = FrequencyControl::read_from(dir.path());
        assert!(!f.controllable && !f.variable());
        assert!(f.description.contains("not controllable"));
    }

    #[test]
    fn powersave_governor_is_variable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cpu0/cpufreq")).unwrap();
        std::fs::write(
            dir.path().join("cpu0/cpufreq/scaling_governor"),
            "powersave\n",
        )
        .unwrap();
        let f = FrequencyControl::read_from(dir.path());
        assert!(f.controllable && f.variable());
        std::fs::write(
            dir.path().join("cpu0/cpufreq/scaling_governor"),
            "performance\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("intel_pstate")).unwrap();
        std::fs::write(dir.path().join("intel_pstate/no_turbo"), "1\n").unwrap();
        let g = FrequencyControl::read_from(dir.path());
        assert!(!g.variable(), "{g:?}");
        assert_eq!(g.description, "performance, boost off");
    }
}
