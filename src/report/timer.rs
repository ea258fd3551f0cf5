//! The documents of `ngauge timer` and `ngauge info`.

use super::warning::{warned, Warned};
use super::Meta;
use crate::clock::{TimerFacts, Warning};
use crate::job::probe::TransportInfo;
use crate::launch::LauncherKind;
use serde::{Deserialize, Serialize};

/// The timer's facts with their warnings as document records.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TimerReport {
    /// The facts.
    #[serde(flatten)]
    pub facts: TimerFacts,
    /// Every fact that threatens a measurement.
    pub warnings: Vec<Warned<Warning>>,
}

impl From<TimerFacts> for TimerReport {
    fn from(facts: TimerFacts) -> Self {
        TimerReport {
            warnings: warned(facts.warnings.iter().cloned()),
            facts,
        }
    }
}

/// `ngauge timer --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TimerDoc {
    /// The timer.
    #[serde(flatten)]
    pub timer: TimerReport,
    /// The core the read cost and resolution were measured on, if pinned.
    pub measured_on_core: Option<usize>,
    /// Every read's cost (`--samples`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<TimerSamples>,
    /// How the result came about.
    pub meta: Meta,
}

/// The repetitions behind `overhead_ns`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TimerSamples {
    /// Every back-to-back read's cost, nanoseconds, in the order read.
    pub overhead_ns: Vec<f64>,
}

/// One rank's place in the job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RankInfo {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Where its data transports listen.
    pub data_addr: std::net::IpAddr,
    /// Its pinned core, if pinned.
    pub pinned_core: Option<usize>,
}

/// The launcher and the ranks it started.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LauncherInfo {
    /// The launcher.
    pub kind: LauncherKind,
    /// In words.
    pub name: String,
    /// The rank that wrote the document.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Ranks on the writing rank's host.
    pub ranks_on_host: usize,
    /// Every rank.
    pub ranks: Vec<RankInfo>,
}

/// `ngauge info --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InfoDoc {
    /// Every transport: compiled, usable, why not.
    pub transports: Vec<TransportInfo>,
    /// The launcher.
    pub launcher: LauncherInfo,
    /// The timer.
    pub timer: TimerReport,
    /// How the result came about.
    pub meta: Meta,
}

impl super::Document for TimerDoc {
    type Warning = Warning;

    fn render(&self) -> String {
        let f = &self.timer.facts;
        let mut out = String::new();
        out += &format!(
            "timer        {} (TSC {})\n",
            f.source.as_str(),
            tsc_word(f.invariant_tsc)
        );
        out += &format!(
            "frequency    {:.6} GHz (regression over {:.0} ms, {} samples, +-{:.3} ppm)\n",
            f.hz / 1e9,
            f.calibration.window_ms,
            f.calibration.samples,
            f.calibration.uncertainty_ppm
        );
        if let (Some(k), Some(src)) = (f.kernel_hz, &f.kernel_hz_source) {
            out += &format!(
                "kernel says  {:.6} GHz ({src}), difference {:.4}%\n",
                k / 1e9,
                (f.hz / k - 1.0).abs() * 100.0
            );
        }
        out += &format!(
            "read cost    min {:.1} ns, median {:.1} ns, p99 {:.1} ns ({} back-to-back reads)\n",
            f.overhead_ns.min, f.overhead_ns.median, f.overhead_ns.p99, f.reads
        );
        if let Some(core) = self.measured_on_core {
            out += &format!("measured on  core {core} (read cost and resolution)\n");
        }
        out += &format!("resolution   {:.2} ns\n", f.resolution_ns);
        out += &format!(
            "pinned       {}\n",
            f.pinned_core
                .map_or("no (at start)".to_string(), |c| format!("core {c}"))
        );
        out += &format!("cpu freq     {}\n", f.frequency.description);
        out
    }

    fn warnings(&self) -> Vec<(String, &Warning)> {
        super::document::unwarned(&self.timer.warnings)
    }
}

/// `invariant` or `NOT invariant`.
fn tsc_word(invariant: bool) -> &'static str {
    if invariant {
        "invariant"
    } else {
        "NOT invariant"
    }
}

impl super::Document for InfoDoc {
    type Warning = Warning;

    fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::from("transports:\n");
        for t in &self.transports {
            let state = match (t.compiled, t.usable) {
                (true, true) => "usable".to_string(),
                (true, false) => format!(
                    "compiled, not usable: {}",
                    t.reason.as_deref().unwrap_or("")
                ),
                (false, _) => format!("not compiled: {}", t.reason.as_deref().unwrap_or("")),
            };
            let _ = writeln!(out, "  {:<6} {state}", t.name);
            if let Some(detail) = &t.detail {
                let _ = writeln!(out, "         {}", detail.replace('\n', "\n         "));
            }
        }
        let l = &self.launcher;
        let _ = writeln!(out, "launcher: {}, {} ranks", l.name, l.size);
        for r in &l.ranks {
            let _ = writeln!(
                out,
                "  rank {:<3} {} pid {} data {} core {}",
                r.rank,
                r.host,
                r.pid,
                r.data_addr,
                r.pinned_core
                    .map_or_else(|| "unpinned".to_string(), |c| c.to_string())
            );
        }
        let f = &self.timer.facts;
        let _ = writeln!(
            out,
            "timer:    {} at {:.6} GHz, read cost {:.1} ns median, TSC {}",
            f.source.as_str(),
            f.hz / 1e9,
            f.overhead_ns.median,
            tsc_word(f.invariant_tsc)
        );
        out
    }

    fn warnings(&self) -> Vec<(String, &Self::Warning)> {
        Vec::new()
    }
}
