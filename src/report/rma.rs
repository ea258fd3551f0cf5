//! The document of `ngauge rma`: every one-sided transport's results per
//! operation, synchronization and size, and with several such transports their
//! medians side by side with ratios (`-t mpi,verbs`: MPI over the raw RDMA).

use super::side_by_side::{self, side_by_side, SideBySide};
use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::patterns::rma::{Op, PointResult, RmaSync};
use serde::Serialize;

/// One record (of the document and of `--output`): a point's result and the
/// transport it was measured over.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Record {
    /// The transport.
    pub transport: TransportName,
    /// The result.
    #[serde(flatten)]
    pub result: PointResult,
}

/// What `rma` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RmaWarning {
    /// A transport of `-t` has no one-sided operations: not measured.
    #[error("{transport} has no one-sided operations: not measured")]
    NoOneSided {
        /// The transport.
        transport: TransportName,
    },
    /// What threatens any command's figures alike (job, binding).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// One operation and synchronization side by side over the transports.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Comparison {
    /// The operation.
    pub op: Op,
    /// Its synchronization.
    pub sync: RmaSync,
    /// Per size each transport's median latency and its ratio to the last
    /// transport listed (the baseline).
    #[serde(flatten)]
    pub table: SideBySide<TransportName>,
}

/// `ngauge rma --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RmaDoc {
    /// How the result came about.
    pub meta: Meta,
    /// The measuring pair (origin, target).
    pub pair: [usize; 2],
    /// MB in `bandwidth_MBps` means 10^6 bytes.
    pub bandwidth_unit: String,
    /// Every transport's results, transport by transport.
    pub results: Vec<Record>,
    /// With several one-sided transports: per operation and synchronization the
    /// medians side by side (empty with one).
    pub comparisons: Vec<Comparison>,
    /// What threatens the figures (and the transports not measured).
    pub warnings: Vec<Warned<RmaWarning>>,
}

impl RmaDoc {
    /// The document of `results` (in the order measured).
    pub fn new(
        meta: Meta,
        pair: [usize; 2],
        results: Vec<Record>,
        warnings: &[RmaWarning],
    ) -> Self {
        RmaDoc {
            meta,
            pair,
            bandwidth_unit: super::pingpong::BANDWIDTH_UNIT.into(),
            comparisons: compare(&results),
            results,
            warnings: super::warning::warned(warnings.iter().cloned()),
        }
    }
}

/// The side-by-side tables of several transports (none for one).
fn compare(results: &[Record]) -> Vec<Comparison> {
    let mut transports: Vec<TransportName> = Vec::new();
    let mut kinds: Vec<(Op, RmaSync)> = Vec::new();
    for r in results {
        if !transports.contains(&r.transport) {
            transports.push(r.transport);
        }
        if !kinds.contains(&(r.result.op, r.result.sync)) {
            kinds.push((r.result.op, r.result.sync));
        }
    }
    let find = |t: &TransportName, op, sync, size| {
        results.iter().find(|r| {
            r.transport == *t && r.result.op == op && r.result.sync == sync && r.result.size == size
        })
    };
    kinds
        .into_iter()
        .filter_map(|(op, sync)| {
            let baseline = *transports.last()?;
            let sizes: Vec<usize> = results
                .iter()
                .filter(|r| r.transport == baseline && r.result.op == op && r.result.sync == sync)
                .map(|r| r.result.size)
                .collect();
            // An op the baseline lacks (verbs' and UCX's accumulate) has nothing
            // to divide by.
            if sizes.is_empty() {
                return None;
            }
            let median = |t: &TransportName, size| {
                find(t, op, sync, size).map(|r| r.result.latency_us.median)
            };
            let table = side_by_side(transports.clone(), sizes, median)?;
            Some(Comparison { op, sync, table })
        })
        .collect()
}

impl super::Document for RmaDoc {
    type Warning = RmaWarning;

    /// Per transport one table of every point; with several, per operation the
    /// medians side by side.
    fn render(&self) -> String {
        let [origin, target] = self.pair;
        let mut out = String::new();
        for t in &self.meta.transport {
            let mine: Vec<&PointResult> = self
                .results
                .iter()
                .filter(|r| r.transport == *t)
                .map(|r| &r.result)
                .collect();
            if mine.is_empty() {
                continue;
            }
            out += &format!(
                "{t} one-sided, origin rank {origin} -> target rank {target}; latency per \
                 operation to its completion (put-notify: half round trip; put-bw: per \
                 window); MB = 10^6 bytes\n"
            );
            out += &render_points(&mine);
        }
        for c in &self.comparisons {
            let quantity = format!("{} {} median latency", c.op.as_str(), c.sync.as_str());
            out += &side_by_side::render(&c.table, &quantity, "median [us]", "/");
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &RmaWarning)> {
        super::document::unwarned(&self.warnings)
    }
}

/// The human table of one transport's points.
fn render_points(results: &[&PointResult]) -> String {
    let mut table = Table::new([
        "op",
        "sync",
        "size [B]",
        "reps",
        "min [us]",
        "median [us]",
        "p99 [us]",
        "max [us]",
        "bandwidth [MB/s]",
        "checked",
    ]);
    for r in results {
        let l = &r.latency_us;
        table.row([
            r.op.as_str().to_string(),
            r.sync.as_str().to_string(),
            r.size.to_string(),
            r.reps.to_string(),
            format!("{:.2}", l.min),
            format!("{:.2}", l.median),
            format!("{:.2}", l.p99),
            format!("{:.2}", l.max),
            r.bandwidth_mbps.map_or("-".into(), |b| format!("{b:.1}")),
            if r.checked { "yes" } else { "-" }.to_string(),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn record(transport: TransportName, op: Op, size: usize, median: f64) -> Record {
        Record {
            transport,
            result: PointResult {
                op,
                sync: RmaSync::Flush,
                size,
                reps: 3,
                window: None,
                latency_us: Summary::of(&[median - 0.1, median, median + 0.1]).unwrap(),
                bandwidth_mbps: None,
                checked: false,
            },
        }
    }

    #[test]
    fn one_transport_has_no_comparison() {
        let results = vec![record(TransportName::Mpi, Op::Put, 8, 2.0)];
        assert!(compare(&results).is_empty());
    }

    #[test]
    fn ratios_divide_by_the_last_transport_per_op() {
        let results = vec![
            record(TransportName::Mpi, Op::Put, 8, 3.0),
            record(TransportName::Mpi, Op::Get, 8, 4.0),
            record(TransportName::Verbs, Op::Put, 8, 1.5),
            record(TransportName::Verbs, Op::Get, 8, 2.0),
        ];
        let c = compare(&results);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].op, c[1].op), (Op::Put, Op::Get));
        assert_eq!(c[0].table.baseline, TransportName::Verbs);
        assert_eq!(c[0].table.rows[0].ratio[&TransportName::Mpi], 2.0);
        assert_eq!(c[1].table.rows[0].ratio[&TransportName::Mpi], 2.0);
    }

    #[test]
    fn an_op_the_baseline_lacks_has_no_comparison() {
        let results = vec![
            record(TransportName::Mpi, Op::Put, 8, 3.0),
            record(TransportName::Mpi, Op::Accumulate, 8, 4.0),
            record(TransportName::Verbs, Op::Put, 8, 1.5),
        ];
        let ops: Vec<Op> = compare(&results).iter().map(|c| c.op).collect();
        assert_eq!(ops, [Op::Put]);
    }
}
