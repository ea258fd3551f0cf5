//! The document of `ngauge ebb`: the effective bisection bandwidth (Hoefler,
//! Schneider and Lumsdaine, "Multistage Switches are not Crossbars", IEEE
//! Cluster 2008; Netgauge's ebb pattern), as the distribution of the per-pair
//! bandwidths over every pair of every random bisection (min, quartiles, median,
//! mean, max), each bisection's own figures, and every pair's result.

use super::table::{significant, Table};
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::patterns::pairs::PairResult;
use crate::spec::EbbSpec;
use crate::stats::{median, quantile_of_sorted, Sorted};
use serde::Serialize;

/// The per-pair bandwidths of a run, MB/s with MB = 10^6 bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Distribution {
    /// Pair results summarised (pairs per bisection times bisections).
    pub pairs: usize,
    /// The slowest pair of any bisection.
    #[serde(rename = "min_MBps")]
    pub min_mbps: f64,
    /// First quartile (definition 7, as every quantile here).
    #[serde(rename = "q1_MBps")]
    pub q1_mbps: f64,
    /// Median.
    #[serde(rename = "median_MBps")]
    pub median_mbps: f64,
    /// Third quartile.
    #[serde(rename = "q3_MBps")]
    pub q3_mbps: f64,
    /// The fastest pair.
    #[serde(rename = "max_MBps")]
    pub max_mbps: f64,
    /// Mean: the effective bisection bandwidth per pair as the paper defines it.
    #[serde(rename = "mean_MBps")]
    pub mean_mbps: f64,
}

impl Distribution {
    /// The distribution of `bandwidths`; `None` when empty or not all finite.
    pub fn of(bandwidths: &[f64]) -> Option<Self> {
        let sorted = Sorted::new(bandwidths).ok()?;
        let s = sorted.summary();
        let q = |p| quantile_of_sorted(sorted.as_slice(), p);
        Some(Distribution {
            pairs: s.n,
            min_mbps: s.min,
            q1_mbps: q(0.25),
            median_mbps: s.median,
            q3_mbps: q(0.75),
            max_mbps: s.max,
            mean_mbps: s.mean,
        })
    }
}

/// One bisection's pairs, streaming at once.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BisectionSummary {
    /// Its index (the `step` of its pairs' results).
    pub bisection: usize,
    /// Its pairs, `[from, to]` (the first streams to the second).
    pub pairs: Vec<[usize; 2]>,
    /// Its slowest pair, MB/s.
    #[serde(rename = "min_MBps")]
    pub min_mbps: f64,
    /// The median of its pairs, MB/s.
    #[serde(rename = "median_MBps")]
    pub median_mbps: f64,
    /// Its pairs' bandwidths summed: the bisection's bandwidth, MB/s.
    #[serde(rename = "total_MBps")]
    pub total_mbps: f64,
}

/// `ngauge ebb --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct EbbDoc {
    /// How the result came about.
    pub meta: Meta,
    /// Random bisections measured.
    pub bisections: usize,
    /// Seed of the bisections (same seed, same pairs).
    pub seed: u64,
    /// Message size every pair streamed, bytes.
    pub message_size: usize,
    /// Messages in flight per timed round.
    pub window: usize,
    /// Timed rounds per pair and bisection: every pair streamed the same amount,
    /// `reps * window * message_size` bytes per direction.
    pub reps: usize,
    /// Both ranks of a pair streamed at once (the bandwidth counts both ways).
    pub bidirectional: bool,
    /// MB in the `_MBps` fields means 10^6 bytes.
    pub bandwidth_unit: String,
    /// The per-pair bandwidths over all bisections (`null` without a pair).
    pub distribution: Option<Distribution>,
    /// Each bisection, in the order measured.
    pub per_bisection: Vec<BisectionSummary>,
    /// Every pair's result (`step`: its bisection).
    pub results: Vec<PairResult>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<SetupWarning>>,
}

impl EbbDoc {
    /// The document of the pairs `results` (the engine's, in step order)
    /// measured as `spec` asked.
    pub fn new(
        meta: Meta,
        spec: &EbbSpec,
        results: Vec<PairResult>,
        warnings: &[SetupWarning],
    ) -> Self {
        let bw: Vec<f64> = results.iter().map(|r| r.bandwidth_mbps).collect();
        let per_bisection = (0..spec.bisections as usize)
            .filter_map(|b| {
                let these: Vec<&PairResult> = results.iter().filter(|r| r.step == b).collect();
                let bw: Vec<f64> = these.iter().map(|r| r.bandwidth_mbps).collect();
                Some(BisectionSummary {
                    bisection: b,
                    pairs: these.iter().map(|r| [r.from, r.to]).collect(),
                    min_mbps: bw.iter().copied().reduce(f64::min)?,
                    median_mbps: median(&bw)?,
                    total_mbps: bw.iter().sum(),
                })
            })
            .collect();
        EbbDoc {
            meta,
            bisections: spec.bisections as usize,
            seed: spec.seed,
            message_size: spec.message_size as usize,
            window: spec.window as usize,
            reps: spec.reps as usize,
            bidirectional: spec.bidirectional,
            bandwidth_unit: super::pingpong::BANDWIDTH_UNIT.into(),
            distribution: Distribution::of(&bw),
            per_bisection,
            results,
            warnings: super::warning::warned(warnings.iter().cloned()),
        }
    }
}

impl super::Document for EbbDoc {
    type Warning = SetupWarning;

    /// The distribution, then each bisection.
    fn render(&self) -> String {
        let t = self.meta.transport.first().map_or("-", |t| t.as_str());
        let ways = if self.bidirectional {
            ", both ways"
        } else {
            ""
        };
        let mut out = format!(
            "{t} effective bisection bandwidth, {} ranks, {} random bisections (seed {}), \
             {} x {} x {} B per pair{ways}; MB = 10^6 bytes\n",
            self.meta.np, self.bisections, self.seed, self.reps, self.window, self.message_size
        );
        let f = |v: f64| significant(v, 3);
        if let Some(d) = &self.distribution {
            out += "\nper-pair bandwidth [MB/s] over all bisections\n";
            let mut table = Table::new(["pairs", "min", "q1", "median", "q3", "max", "mean"]);
            table.row([
                d.pairs.to_string(),
                f(d.min_mbps),
                f(d.q1_mbps),
                f(d.median_mbps),
                f(d.q3_mbps),
                f(d.max_mbps),
                f(d.mean_mbps),
            ]);
            out += &table.render();
        }
        out += "\nper bisection [MB/s]\n";
        let mut table = Table::new(["bisection", "pairs", "min", "median", "total"]);
        for b in &self.per_bisection {
            let pairs: Vec<String> = b.pairs.iter().map(|[a, z]| format!("{a}->{z}")).collect();
            table.row([
                b.bisection.to_string(),
                pairs.join(" "),
                f(b.min_mbps),
                f(b.median_mbps),
                f(b.total_mbps),
            ]);
        }
        out += &table.render();
        out
    }

    fn warnings(&self) -> Vec<(String, &SetupWarning)> {
        super::document::unwarned(&self.warnings)
    }
}

#[cfg(test)]
mod tests;
