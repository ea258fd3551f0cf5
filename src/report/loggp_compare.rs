//! Side-by-side LogGP parameters of several transports measured in one run
//! (`ngauge loggp -t mpi,tcp`, issue 6 "MPI versus raw"): per size segment each
//! transport's `L`, `o_s`, `o_r`, `g`, `G` (Hoefler et al., "LogGP in theory and
//! practice", sec. 3) and the difference to the baseline, the last transport listed
//! (`-t mpi,tcp` shows what MPI adds to raw TCP), plus the protocol changes and
//! ranges one transport has and the others do not.
//!
//! Segments: the sizes measured by any transport, split at the baseline's protocol
//! changes and at every other transport's change that is not within one sweep step
//! of a change already splitting them (a switch found one size earlier or later by
//! another transport is the same switch). In a segment, each transport's parameters
//! are those of its range covering most of the segment's sizes.

use crate::model::loggp::RangeParams;
use crate::report::loggp::PairAnalysis;
use crate::report::table::{joined, significant, Table};
use serde::Serialize;
use std::collections::BTreeMap;

/// A span of message sizes, bytes, both ends measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SizeSpan {
    /// First size, bytes.
    pub from: u64,
    /// Last size, bytes.
    pub to: u64,
}

/// One parameter in one segment.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Param {
    /// Value per transport.
    pub value: BTreeMap<String, f64>,
    /// Value minus the baseline's, per other transport.
    pub difference: BTreeMap<String, f64>,
}

/// The parameters of every transport over one segment of sizes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Segment {
    /// First size of the segment, bytes.
    pub from: u64,
    /// Last size of the segment, bytes.
    pub to: u64,
    /// Per transport, the protocol range whose parameters describe the segment.
    pub range: BTreeMap<String, SizeSpan>,
    /// `PRTT(1,0,1)/2` (the paper's `L`, LogGP's `L + o_s + o_r`), us.
    pub half_rtt_1b_us: Param,
    /// LogGP's `L`, the wire latency, us.
    pub wire_latency_us: Param,
    /// `o_s`, us.
    pub os_us: Param,
    /// `o_r`, us.
    pub or_us: Param,
    /// `g`, us.
    pub g_us: Param,
    /// `G`, us per byte.
    #[serde(rename = "G_us_per_byte")]
    pub big_g_us_per_byte: Param,
}

/// The comparison of several transports' LogGP fits.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Comparison {
    /// The transport differences are taken to (the last one listed).
    pub baseline: String,
    /// Every transport, in the order given.
    pub transports: Vec<String>,
    /// Parameters side by side, ascending sizes.
    pub segments: Vec<Segment>,
    /// Per transport, the protocol changes (first size of each range after the first).
    pub changes: BTreeMap<String, Vec<u64>>,
    /// Per transport, its changes no other transport has within one sweep step.
    pub changes_only_in: BTreeMap<String, Vec<u64>>,
    /// Per transport, its ranges that begin at such a change (protocol ranges the
    /// others do not have, e.g. MPI's rendezvous range over raw TCP).
    pub ranges_only_in: BTreeMap<String, Vec<SizeSpan>>,
}

/// Within one step of the sweep `sizes` (ascending): the same switch.
fn near(a: u64, b: u64, sizes: &[u64]) -> bool {
    let index = |s: u64| sizes.partition_point(|&x| x < s) as i64;
    (index(a) - index(b)).abs() <= 1
}

/// Compares the first pair of each transport's analysis; `None` with fewer than two
/// transports.
pub fn compare(analyses: &[(&str, &PairAnalysis)]) -> Option<Comparison> {
    let (baseline, _) = *analyses.last().filter(|_| analyses.len() > 1)?;
    let mut sizes: Vec<u64> = analyses
        .iter()
        .flat_map(|(_, a)| a.points.iter().map(|p| p.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let changes_of = |a: &PairAnalysis| a.assessment.changes.clone();
    let mut boundaries: Vec<u64> = Vec::new();
    for (_, a) in analyses.iter().rev() {
        for c in changes_of(a) {
            if !boundaries.iter().any(|&b| near(b, c, &sizes)) {
                boundaries.push(c);
            }
        }
    }
    boundaries.sort_unstable();
    let mut segments = Vec::new();
    let mut start = 0;
    while start < sizes.len() {
        let from = sizes[start];
        let end = boundaries
            .iter()
            .filter(|&&b| b > from)
            .map(|&b| sizes.partition_point(|&x| x < b))
            .min()
            .unwrap_or(sizes.len());
        let span = &sizes[start..end];
        segments.push(segment(analyses, baseline, span));
        start = end;
    }
    let mut changes = BTreeMap::new();
    let mut changes_only_in = BTreeMap::new();
    let mut ranges_only_in = BTreeMap::new();
    for (i, (name, a)) in analyses.iter().enumerate() {
        let only: Vec<u64> = changes_of(a)
            .into_iter()
            .filter(|&c| {
                analyses
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .all(|(_, (_, o))| !o.assessment.changes.iter().any(|&d| near(c, d, &sizes)))
            })
            .collect();
        let ranges = a
            .assessment
            .ranges
            .iter()
            .filter(|r| only.contains(&r.from))
            .map(|r| SizeSpan {
                from: r.from,
                to: r.to,
            })
            .collect();
        changes.insert(name.to_string(), changes_of(a));
        changes_only_in.insert(name.to_string(), only);
        ranges_only_in.insert(name.to_string(), ranges);
    }
    Some(Comparison {
        baseline: baseline.to_string(),
        transports: analyses.iter().map(|(n, _)| n.to_string()).collect(),
        segments,
        changes,
        changes_only_in,
        ranges_only_in,
    })
}

/// The range of `ranges` holding most of `span`'s sizes (`None` when it holds none).
fn covering<'a>(ranges: &'a [RangeParams], span: &[u64]) -> Option<&'a RangeParams> {
    ranges
        .iter()
        .map(|r| {
            let inside = span.iter().filter(|&&s| r.from <= s && s <= r.to).count();
            (inside, r)
        })
        .filter(|(inside, _)| *inside > 0)
        .max_by_key(|(inside, _)| *inside)
        .map(|(_, r)| r)
}

fn segment(analyses: &[(&str, &PairAnalysis)], baseline: &str, span: &[u64]) -> Segment {
    let mut seg = Segment {
        from: span[0],
        to: span[span.len() - 1],
        range: BTreeMap::new(),
        half_rtt_1b_us: Param::default(),
        wire_latency_us: Param::default(),
        os_us: Param::default(),
        or_us: Param::default(),
        g_us: Param::default(),
        big_g_us_per_byte: Param::default(),
    };
    let mut chosen: Vec<(&str, &RangeParams)> = Vec::new();
    for (name, a) in analyses {
        if let Some(r) = covering(&a.assessment.ranges, span) {
            seg.range.insert(
                name.to_string(),
                SizeSpan {
                    from: r.from,
                    to: r.to,
                },
            );
            chosen.push((name, r));
        }
    }
    let base = chosen.iter().find(|(n, _)| *n == baseline).map(|(_, r)| *r);
    for (param, get) in [
        (
            &mut seg.half_rtt_1b_us,
            (|r: &RangeParams| r.half_rtt_1b_us) as fn(&RangeParams) -> f64,
        ),
        (&mut seg.wire_latency_us, |r| r.wire_latency_us),
        (&mut seg.os_us, |r| r.os_us),
        (&mut seg.or_us, |r| r.or_us),
        (&mut seg.g_us, |r| r.g_us),
        (&mut seg.big_g_us_per_byte, |r| r.big_g_us_per_byte),
    ] {
        for (name, r) in &chosen {
            param.value.insert(name.to_string(), get(r));
            if let Some(b) = base.filter(|_| *name != baseline) {
                param.difference.insert(name.to_string(), get(r) - get(b));
            }
        }
    }
    seg
}

/// The human comparison table: per segment one row per transport, then one row per
/// other transport with its difference to the baseline; then the protocol changes
/// and ranges only some transports have.
pub fn table(c: &Comparison) -> String {
    let mut t = Table::new([
        "sizes [bytes]",
        "transport",
        "RTT/2 [us]",
        "L [us]",
        "o_s [us]",
        "o_r [us]",
        "g [us]",
        "G [us/B]",
    ]);
    let others: Vec<&String> = c.transports.iter().filter(|t| **t != c.baseline).collect();
    for s in &c.segments {
        let cells = |label: String, pick: &dyn Fn(&Param) -> Option<f64>| {
            let us = |p: &Param| pick(p).map_or("-".to_string(), |v| format!("{v:.2}"));
            vec![
                label,
                us(&s.half_rtt_1b_us),
                us(&s.wire_latency_us),
                us(&s.os_us),
                us(&s.or_us),
                us(&s.g_us),
                pick(&s.big_g_us_per_byte).map_or("-".to_string(), |v| significant(v, 4)),
            ]
        };
        let mut first = true;
        let mut lead = || {
            if std::mem::take(&mut first) {
                format!("{}-{}", s.from, s.to)
            } else {
                String::new()
            }
        };
        for name in &c.transports {
            let mut row = vec![lead()];
            row.extend(cells(name.clone(), &|p| p.value.get(name).copied()));
            t.row(row);
        }
        for name in &others {
            let mut row = vec![lead()];
            row.extend(cells(format!("{name} - {}", c.baseline), &|p| {
                p.difference.get(*name).copied()
            }));
            t.row(row);
        }
    }
    let mut out = format!(
        "side by side (measured interleaved, size by size): LogGP parameters per size \
         segment, differences to {}\n",
        c.baseline
    );
    out += &t.render();
    for name in &c.transports {
        let only = &c.changes_only_in[name];
        if !only.is_empty() {
            let ranges: Vec<String> = c.ranges_only_in[name]
                .iter()
                .map(|r| format!("{}-{}", r.from, r.to))
                .collect();
            out += &format!(
                "protocol changes only {name} has: {} bytes (its ranges {} bytes)\n",
                joined(only),
                ranges.join(", ")
            );
        }
    }
    if c.changes_only_in.values().all(Vec::is_empty) {
        out += "protocol changes: the same in every transport (within one sweep step)\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    fn analysis(g0: f64, or: f64, switch: Option<u64>) -> PairAnalysis {
        crate::report::loggp::fixtures::synthetic_analysis(g0, or, switch)
    }

    #[test]
    fn one_transport_is_no_comparison() {
        assert!(compare(&[("tcp", &analysis(2.0, 1.0, None))]).is_none());
    }

    #[test]
    fn differences_and_ranges_only_one_transport_has() {
        let mpi = analysis(3.0, 2.0, Some(8192));
        let tcp = analysis(2.0, 1.25, None);
        assert_eq!(mpi.assessment.changes, vec![8192]);
        assert!(tcp.assessment.changes.is_empty());
        let c = compare(&[("mpi", &mpi), ("tcp", &tcp)]).unwrap();
        assert_eq!(c.baseline, "tcp");
        assert_eq!(c.segments.len(), 2);
        let (low, high) = (&c.segments[0], &c.segments[1]);
        assert_eq!(
            (low.from, low.to, high.from, high.to),
            (1024, 7168, 8192, 16384)
        );
        assert!((low.g_us.difference["mpi"] - 1.0).abs() < 1e-6);
        assert!((high.g_us.difference["mpi"] - 19.0).abs() < 1e-6);
        assert!((low.or_us.difference["mpi"] - 0.75).abs() < 1e-9);
        assert!(!low.g_us.difference.contains_key("tcp"));
        assert!((high.big_g_us_per_byte.difference["mpi"] + 0.0005).abs() < 1e-8);
        assert_eq!(
            high.range["tcp"],
            SizeSpan {
                from: 1024,
                to: 16384
            }
        );
        assert_eq!(c.changes_only_in["mpi"], vec![8192]);
        assert!(c.changes_only_in["tcp"].is_empty());
        assert_eq!(
            c.ranges_only_in["mpi"],
            vec![SizeSpan {
                from: 8192,
                to: 16384
            }]
        );
        let t = table(&c);
        assert!(t.contains("mpi - tcp") && t.contains("G [us/B]"), "{t}");
        assert!(
            t.contains("only mpi has: 8192 bytes (its ranges 8192-16384"),
            "{t}"
        );
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["segments"][1]["wire_latency_us"]["value"]["tcp"].is_number());
    }

    #[test]
    fn a_switch_one_step_apart_is_the_same_switch() {
        let a = analysis(2.0, 1.0, Some(8192));
        let b = analysis(2.0, 1.0, Some(9216));
        let c = compare(&[("a", &a), ("b", &b)]).unwrap();
        assert_eq!(c.segments.len(), 2);
        assert_eq!(c.segments[1].from, 9216, "the baseline's switch splits");
        assert!(c.changes_only_in.values().all(Vec::is_empty));
        assert_eq!(c.segments[1].range["a"].from, 8192);
        assert!(c.segments[1].g_us.difference["a"].abs() < 1e-6);
        assert!(table(&c).contains("the same in every transport"));
    }
}
