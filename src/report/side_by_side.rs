//! Several series measured interleaved, side by side: per size each one's median and
//! its ratio to the baseline, the last one measured (`pingpong` over several
//! transports, `coll` over several transports or algorithms). The series are
//! labelled by what tells them apart (a transport, a `transport/algo`).

use super::table::Table;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Display;

/// Side by side medians and ratios.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SideBySide<K: Ord> {
    /// The series the ratios divide by: the last one measured (`-t mpi,tcp` gives
    /// MPI over raw TCP).
    pub baseline: K,
    /// Every series, in the order measured.
    pub labels: Vec<K>,
    /// One row per size the baseline measured.
    pub rows: Vec<SideBySideRow<K>>,
}

/// One size of a [`SideBySide`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SideBySideRow<K: Ord> {
    /// Message size (`coll`: per rank), bytes.
    pub size: usize,
    /// Median per series, in microseconds (`pingpong`: of the half round trip,
    /// `coll`: of the run-time of one call).
    pub median_us: BTreeMap<K, f64>,
    /// That median over the baseline's, per other series.
    pub ratio: BTreeMap<K, f64>,
}

/// The comparison of the series `labels` (in the order measured) at `sizes` (the
/// baseline's), with `median(label, size)` what a series measured; `None` for a
/// single series.
pub fn side_by_side<K: Ord + Clone>(
    labels: Vec<K>,
    sizes: impl IntoIterator<Item = usize>,
    median: impl Fn(&K, usize) -> Option<f64>,
) -> Option<SideBySide<K>> {
    let baseline = labels.last().filter(|_| labels.len() > 1)?.clone();
    let rows = sizes
        .into_iter()
        .map(|size| {
            let base = median(&baseline, size);
            let mut median_us = BTreeMap::new();
            let mut ratio = BTreeMap::new();
            for l in &labels {
                if let Some(m) = median(l, size) {
                    median_us.insert(l.clone(), m);
                    if let Some(b) = base.filter(|b| *b > 0.0 && *l != baseline) {
                        ratio.insert(l.clone(), m / b);
                    }
                }
            }
            SideBySideRow {
                size,
                median_us,
                ratio,
            }
        })
        .collect();
    Some(SideBySide {
        baseline,
        labels,
        rows,
    })
}

/// The title line and the table: per size each series' median and its ratio to
/// the baseline. `quantity` names the medians in the title (`median run-time`),
/// `{label} {median_column}` heads a median column (`[us]`),
/// `{label}{ratio_separator}{baseline}` a ratio column (` / `).
pub fn render<K: Ord + Display>(
    c: &SideBySide<K>,
    quantity: &str,
    median_column: &str,
    ratio_separator: &str,
) -> String {
    let mut out = format!(
        "side by side (measured interleaved, size by size): {}, ratio to {}\n",
        quantity, c.baseline
    );
    let others: Vec<&K> = c.labels.iter().filter(|l| **l != c.baseline).collect();
    let mut header = vec!["size [B]".to_string()];
    header.extend(c.labels.iter().map(|l| format!("{l} {}", median_column)));
    header.extend(
        others
            .iter()
            .map(|l| format!("{l}{}{}", ratio_separator, c.baseline)),
    );
    let mut table = Table::new(header);
    for row in &c.rows {
        let mut cells = vec![row.size.to_string()];
        cells.extend(c.labels.iter().map(|l| {
            row.median_us
                .get(l)
                .map_or("-".into(), |m| format!("{m:.2}"))
        }));
        cells.extend(
            others
                .iter()
                .map(|l| row.ratio.get(*l).map_or("-".into(), |r| format!("{r:.3}"))),
        );
        table.row(cells);
    }
    out += &table.render();
    out
}
