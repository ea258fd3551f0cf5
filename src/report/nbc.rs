//! `ngauge nbc`: nonblocking-collective overhead and overlap per size, in the
//! columns of Intel's IMB-NBC (`t_pure`, `t_ovrl`, `t_CPU`, overlap %) plus
//! NBCBench's split of the overhead (`t_init`, `t_test`, `t_wait`).

use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::patterns::nbc::{Compute, NbcTimes};
use serde::Serialize;

/// One measurement point: a size, a computation scheme and a progress interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct NbcRow {
    /// The collective.
    pub op: String,
    /// Its implementation: one of ours or `mpi`.
    pub algo: String,
    /// Bytes per rank.
    pub size: usize,
    /// Time- or work-based computation.
    pub compute: Compute,
    /// Progress calls during the computation every this many us (`null`: none).
    pub test_every_us: Option<f64>,
    /// The rank reported (IMB-NBC: the one with the largest `t_ovrl`).
    pub rank: usize,
    /// Start + wait back to back, us.
    pub t_pure_us: f64,
    /// Start + computation + wait, us.
    pub t_ovrl_us: f64,
    /// The computation phase, progress calls included, us.
    pub t_cpu_us: f64,
    /// `100 max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, t_CPU)))`.
    pub overlap_pct: f64,
    /// The start call, us.
    pub t_init_us: f64,
    /// The progress calls of one computation together, us.
    pub t_test_us: f64,
    /// The final wait, us.
    pub t_wait_us: f64,
    /// Progress calls per computation.
    pub tests: f64,
    /// `t_ovrl` minus the pure computation: what the collective cost the program
    /// beyond its work, us.
    pub overhead_us: f64,
    /// `t_b`: the computation's length (the slowest rank's median `t_pure`), us.
    pub t_b_us: f64,
    /// The workload's units (work-based).
    pub work_units: Option<u64>,
    /// Valid calls of the blocking stage.
    pub valid_pure: usize,
    /// Valid calls of the overlapped stage.
    pub valid_ovrl: usize,
    /// Invalid calls of both stages (started late or overran their window).
    pub invalid: usize,
    /// Whether both stages had valid calls. `false`: a stage had none after
    /// every round (a loaded host), its figures are the medians of its invalid
    /// calls, and an `undecided` warning names it.
    pub decided: bool,
}

impl NbcRow {
    /// The row of one measurement (rank 0's [`NbcTimes`]); `None` without ranks.
    pub fn new(
        op: &str,
        algo: &str,
        size: usize,
        compute: Compute,
        test_every_ns: Option<f64>,
        times: &NbcTimes,
    ) -> Option<NbcRow> {
        let r = times.reported()?;
        Some(NbcRow {
            op: op.into(),
            algo: algo.into(),
            size,
            compute,
            test_every_us: test_every_ns.map(|ns| ns / 1e3),
            rank: r.rank,
            t_pure_us: r.t_pure_ns / 1e3,
            t_ovrl_us: r.t_ovrl_ns / 1e3,
            t_cpu_us: r.t_cpu_ns / 1e3,
            overlap_pct: r.overlap_pct(),
            t_init_us: r.t_init_ns / 1e3,
            t_test_us: r.t_test_ns / 1e3,
            t_wait_us: r.t_wait_ns / 1e3,
            tests: r.tests,
            overhead_us: r.overhead_ns() / 1e3,
            t_b_us: times.t_b_ns / 1e3,
            work_units: times.work_units,
            valid_pure: times.pure_calls.0,
            valid_ovrl: times.ovrl_calls.0,
            invalid: times.pure_calls.1 + times.ovrl_calls.1,
            decided: times.decided.0 && times.decided.1,
        })
    }
}

/// What `nbc` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NbcWarning {
    /// Fewer valid calls than asked for in a stage.
    #[error(
        "size {size} B, {stage} stage: only {valid} of {wanted} calls were valid (the others \
         started late or overran their window)"
    )]
    FewValidCalls {
        /// The size.
        size: usize,
        /// `blocking` or `overlapped`.
        stage: String,
        /// Valid calls.
        valid: usize,
        /// Asked for.
        wanted: usize,
    },
    /// A stage had no valid call after every round: its figures are the medians
    /// of calls that started late or overran their window.
    #[error(
        "size {size} B, {stage} stage: undecided: none of its {invalid} calls was valid (each \
         started late or overran its window, the largest included); its figures are the \
         medians of those calls"
    )]
    Undecided {
        /// The size.
        size: usize,
        /// `blocking` or `overlapped`.
        stage: String,
        /// Its invalid calls.
        invalid: usize,
    },
    /// The time-based computation took much longer than `t_b`: the rank was
    /// descheduled while it computed, and `t_ovrl` carries that.
    #[error(
        "size {size} B: the computation took {t_cpu_us:.1} us for a t_b of {t_b_us:.1} us (the \
         rank lost its core while computing)"
    )]
    ComputeOverran {
        /// The size.
        size: usize,
        /// The computation, us.
        t_cpu_us: f64,
        /// What it should have taken, us.
        t_b_us: f64,
    },
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// A time-based computation longer than this factor times `t_b` is worth a
/// warning.
pub const COMPUTE_OVERRUN: f64 = 1.25;

/// The warnings one measurement calls for (`times`: its measurement).
pub fn warnings(row: &NbcRow, times: &NbcTimes, wanted: usize) -> Vec<NbcWarning> {
    let mut w = Vec::new();
    for (stage, valid, (_, invalid), decided) in [
        (
            "blocking",
            row.valid_pure,
            times.pure_calls,
            times.decided.0,
        ),
        (
            "overlapped",
            row.valid_ovrl,
            times.ovrl_calls,
            times.decided.1,
        ),
    ] {
        if !decided {
            w.push(NbcWarning::Undecided {
                size: row.size,
                stage: stage.into(),
                invalid,
            });
        } else if valid < wanted {
            w.push(NbcWarning::FewValidCalls {
                size: row.size,
                stage: stage.into(),
                valid,
                wanted,
            });
        }
    }
    if row.compute == Compute::Time && row.t_cpu_us > COMPUTE_OVERRUN * row.t_b_us {
        w.push(NbcWarning::ComputeOverran {
            size: row.size,
            t_cpu_us: row.t_cpu_us,
            t_b_us: row.t_b_us,
        });
    }
    w
}

/// `ngauge nbc --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct NbcDoc {
    /// The collective, its implementation, the transport, the ranks.
    #[serde(flatten)]
    pub run: super::coll::WindowedRun,
    /// Every size, scheme and progress interval.
    pub results: Vec<NbcRow>,
    /// The clock synchronization of the window starts, per rank.
    pub sync: super::effort::ClockSync,
    /// What threatens the figures.
    pub warnings: Vec<Warned<NbcWarning>>,
    /// How the result came about.
    pub meta: Meta,
}

impl super::Document for NbcDoc {
    type Warning = NbcWarning;

    /// The human table.
    fn render(&self) -> String {
        let mut out = format!(
            "nonblocking {}: {} over {} ({}), {} ranks\n\
             IMB-NBC columns (the rank with the largest t_ovrl); overlap = (t_pure + t_CPU - \
             t_ovrl) / min(t_pure, t_CPU)\n\n",
            self.run.op, self.run.implementation, self.run.transport, self.run.wait, self.run.np
        );
        let mut table = Table::new([
            "size [B]",
            "compute",
            "test every [us]",
            "t_pure [us]",
            "t_ovrl [us]",
            "t_CPU [us]",
            "overlap [%]",
            "t_init [us]",
            "t_test [us]",
            "t_wait [us]",
            "tests",
            "overhead [us]",
            "rank",
        ]);
        for r in &self.results {
            table.row([
                r.size.to_string(),
                r.compute.to_string(),
                r.test_every_us.map_or("-".into(), |t| format!("{t}")),
                format!("{:.2}", r.t_pure_us),
                format!("{:.2}", r.t_ovrl_us),
                format!("{:.2}", r.t_cpu_us),
                // An undecided row's figures come from invalid calls: marked.
                if r.decided {
                    format!("{:.1}", r.overlap_pct)
                } else {
                    format!("{:.1} (undecided)", r.overlap_pct)
                },
                format!("{:.2}", r.t_init_us),
                format!("{:.2}", r.t_test_us),
                format!("{:.2}", r.t_wait_us),
                format!("{:.0}", r.tests),
                format!("{:.2}", r.overhead_us),
                r.rank.to_string(),
            ]);
        }
        out += &table.render();
        out
    }

    fn warnings(&self) -> Vec<(String, &NbcWarning)> {
        super::document::unwarned(&self.warnings)
    }
}
