//! `meta`: the factors a reader needs to reproduce a result (Hunold & Carpen-Amarie,
//! sec. 2: compiler, library, launcher, pinning, timer, frequency, sync method, date).

use serde::Serialize;

/// Facts recorded by `build.rs` when this binary was compiled.
#[derive(Clone, Debug, Serialize)]
pub struct BuildFacts {
    /// `rustc --version`.
    pub rustc: &'static str,
    /// `debug` or `release`.
    pub profile: &'static str,
    /// Optimisation level.
    pub opt_level: &'static str,
    /// Target triple.
    pub target: &'static str,
    /// Enabled target features (`sse2,...`).
    pub target_features: &'static str,
    /// Transports compiled in, comma separated.
    pub transports: &'static str,
    /// Git revision (`-dirty` when the tree had changes).
    pub git: &'static str,
}

impl BuildFacts {
    /// The facts of this binary.
    pub const fn current() -> Self {
        BuildFacts {
            rustc: env!("NGAUGE_BUILD_RUSTC"),
            profile: env!("NGAUGE_BUILD_PROFILE"),
            opt_level: env!("NGAUGE_BUILD_OPT_LEVEL"),
            target: env!("NGAUGE_BUILD_TARGET"),
            target_features: env!("NGAUGE_BUILD_TARGET_FEATURES"),
            transports: env!("NGAUGE_BUILD_TRANSPORTS"),
            git: env!("NGAUGE_BUILD_GIT"),
        }
    }

    /// Whether `transport` was compiled into this binary.
    pub fn has_transport(&self, transport: &str) -> bool {
        self.transports.split(',').any(|t| t == transport)
    }
}

/// Metadata attached to every JSON result as `meta`.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    /// ngauge version.
    pub version: &'static str,
    /// Build facts.
    pub build: BuildFacts,
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Transport(s) measured.
    pub transport: Vec<String>,
    /// Wait mode per transport (`poll` or `block`), when one was used.
    pub wait: Option<String>,
    /// `pingpong`: the loop that timed the round trips, per transport
    /// (`mpi=native,tcp=generic`; see `patterns::pingpong`). Absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_loop: Option<String>,
    /// Launcher that started the ranks (`local`, `mpirun (Open MPI)`, `srun`, ...).
    pub launcher: String,
    /// Number of ranks.
    pub np: usize,
    /// Core each rank was pinned to (`null` where unpinned), indexed by rank.
    pub pinning: Vec<Option<usize>>,
    /// Timer source (`rdtscp`, `clock_monotonic_raw`).
    pub timer: String,
    /// Calibrated timer frequency in Hz.
    pub timer_hz: f64,
    /// Frequency control (`not controllable (no cpufreq on this machine)`, governor).
    pub frequency_control: String,
    /// Clock synchronization algorithm used, if any.
    pub sync: Option<String>,
    /// UTC date and time of the run, RFC 3339.
    pub date: String,
    /// The command line as given.
    pub command_line: Vec<String>,
}

impl Meta {
    /// Metadata with host facts filled in; the caller sets the run's facts.
    pub fn for_this_host(timer: &str, timer_hz: f64, frequency_control: &str) -> Self {
        let uname = rustix::system::uname();
        Meta {
            version: env!("CARGO_PKG_VERSION"),
            build: BuildFacts::current(),
            host: uname.nodename().to_string_lossy().into_owned(),
            kernel: uname.release().to_string_lossy().into_owned(),
            transport: Vec::new(),
            wait: None,
            timing_loop: None,
            launcher: "none".into(),
            np: 1,
            pinning: Vec::new(),
            timer: timer.into(),
            timer_hz,
            frequency_control: frequency_control.into(),
            sync: None,
            date: rfc3339_utc(std::time::SystemTime::now()),
            command_line: std::env::args().collect(),
        }
    }
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ` (UTC), without a date crate.
pub fn rfc3339_utc(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29 01:01:01
        assert_eq!(rfc3339_utc(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_305_600); // 2026-11-22
        assert_eq!(rfc3339_utc(t), "2026-11-22T00:00:00Z");
    }

    #[test]
    fn build_facts_name_the_always_built_transports() {
        let b = BuildFacts::current();
        assert!(b.has_transport("tcp") && b.has_transport("udp"));
        assert!(!b.has_transport("t"));
    }
}
