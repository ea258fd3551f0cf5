//! The documents of `ngauge timer` and `ngauge info`.

use super::warning::{warned, Warned};
use super::Meta;
use crate::clock::{TimerFacts, Warning};
use crate::job::probe::TransportInfo;
use crate::launch::LauncherKind;
use serde::{Deserialize, Serialize};

/// The timer's facts with their warnings as document records.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TimerSamples {
    /// Every back-to-back read's cost, nanoseconds, in the order read.
    pub overhead_ns: Vec<f64>,
}

/// One rank's place in the job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
