//! `ngauge noise`: detours per core as a table, a document and a plot of the
//! detours over time.

use super::svg;
use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::patterns::noise::{histogram, Bin, CoreNoise, SelfishSpec};
use serde::Serialize;

/// One detour in the document.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DetourRow {
    /// When it started, us from the start of the measurement.
    pub at_us: f64,
    /// Its length (the iteration minus the fastest one), us.
    pub duration_us: f64,
}

/// One core's findings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CoreRow {
    /// The rank that measured it.
    pub rank: usize,
    /// The core it was pinned to (`null`: unpinned).
    pub core: Option<usize>,
    /// The fastest loop iteration, ns.
    pub min_loop_ns: f64,
    /// Iterations longer than this were detours, ns.
    pub threshold_ns: f64,
    /// Loop iterations measured.
    pub iterations: u64,
    /// The measured time, s.
    pub measured_s: f64,
    /// Every detour seen.
    pub detour_count: u64,
    /// The detours kept (at most `--max-detours`), in order.
    pub detours: Vec<DetourRow>,
    /// The detours' total length over the measured time.
    pub cpu_fraction_lost: f64,
    /// The kept detours' lengths in power-of-two bins.
    pub histogram: Vec<Bin>,
}

impl CoreRow {
    /// The row of one rank's loop.
    pub fn new(c: &CoreNoise) -> CoreRow {
        let r = &c.run;
        CoreRow {
            rank: c.rank,
            core: c.core,
            min_loop_ns: r.min_loop_ns,
            threshold_ns: r.threshold_ns,
            iterations: r.iterations,
            measured_s: r.measured_ns / 1e9,
            detour_count: r.detour_count,
            detours: r
                .detours
                .iter()
                .map(|d| DetourRow {
                    at_us: d.at_ns / 1e3,
                    duration_us: d.duration_ns / 1e3,
                })
                .collect(),
            cpu_fraction_lost: r.cpu_fraction_lost(),
            histogram: histogram(&r.detours),
        }
    }
}

/// Noise injected into every rank's loop (a self-test of the detector).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InjectedNoise {
    /// Time between the starts of two detours, us.
    pub period_us: f64,
    /// Length of each detour, us.
    pub duration_us: f64,
}

/// What `noise` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoiseWarning {
    /// Less than a second measured: rare noise (a 1 Hz daemon) may be missed and
    /// the CPU fraction is uncertain (Netgauge warns alike).
    #[error(
        "only {measured_s:.3} s measured: rare detours may be missed and the CPU fraction is \
         uncertain"
    )]
    ShortMeasurement {
        /// The measured time, s.
        measured_s: f64,
    },
    /// More detours than `--max-detours` on a rank: the list and histogram hold the
    /// first ones, the count and the CPU fraction all.
    #[error(
        "rank {rank} saw {seen} detours and kept the first {kept}: the list and histogram are \
         partial, the count and the CPU fraction are not"
    )]
    DetoursDropped {
        /// The rank.
        rank: usize,
        /// Detours kept.
        kept: usize,
        /// Detours seen.
        seen: u64,
    },
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// The warnings the rows call for.
pub fn warnings(cores: &[CoreRow]) -> Vec<NoiseWarning> {
    let mut w = Vec::new();
    if let Some(shortest) = cores.iter().map(|c| c.measured_s).reduce(f64::min) {
        if shortest < 1.0 {
            w.push(NoiseWarning::ShortMeasurement {
                measured_s: shortest,
            });
        }
    }
    for c in cores {
        if (c.detours.len() as u64) < c.detour_count {
            w.push(NoiseWarning::DetoursDropped {
                rank: c.rank,
                kept: c.detours.len(),
                seen: c.detour_count,
            });
        }
    }
    w
}

/// `ngauge noise --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct NoiseDoc {
    /// The loop's parameters.
    pub spec: SelfishSpec,
    /// Noise injected into every loop, if any.
    pub inject: Option<InjectedNoise>,
    /// Every rank's core.
    pub cores: Vec<CoreRow>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<NoiseWarning>>,
    /// How the result came about.
    pub meta: Meta,
}

impl super::Document for NoiseDoc {
    type Warning = NoiseWarning;

    /// One row per core, then the histogram of detour lengths.
    fn render(&self) -> String {
        let mut out = format!(
            "selfish detour: {} ranks spinning on the clock for {} s each; a detour is an \
             iteration above {} x the fastest\n",
            self.cores.len(),
            self.spec.duration_ns / 1e9,
            self.spec.threshold
        );
        if let Some(i) = &self.inject {
            out += &format!(
                "noise injected into every loop: {} us every {} us\n",
                i.duration_us, i.period_us
            );
        }
        out.push('\n');
        let mut table = Table::new([
            "rank",
            "core",
            "min loop [ns]",
            "threshold [ns]",
            "detours",
            "per s",
            "lost [%]",
            "median [us]",
            "longest [us]",
        ]);
        for c in &self.cores {
            let mut lengths: Vec<f64> = c.detours.iter().map(|d| d.duration_us).collect();
            lengths.sort_by(f64::total_cmp);
            let median = crate::stats::median_of_sorted(&lengths);
            table.row([
                c.rank.to_string(),
                c.core.map_or("-".into(), |c| c.to_string()),
                format!("{:.1}", c.min_loop_ns),
                format!("{:.1}", c.threshold_ns),
                c.detour_count.to_string(),
                format!("{:.1}", c.detour_count as f64 / c.measured_s.max(1e-9)),
                format!("{:.4}", 100.0 * c.cpu_fraction_lost),
                median.map_or("-".into(), |m| format!("{m:.2}")),
                lengths.last().map_or("-".into(), |m| format!("{m:.2}")),
            ]);
        }
        out += &table.render();
        // The histogram: one row per bin, one column per rank.
        let lo = self
            .cores
            .iter()
            .filter_map(|c| c.histogram.first().map(|b| b.from_ns))
            .reduce(f64::min);
        let hi = self
            .cores
            .iter()
            .filter_map(|c| c.histogram.last().map(|b| b.to_ns))
            .reduce(f64::max);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            out += "\ndetour lengths (detours per bin, by rank)\n";
            let mut header = vec!["length".to_string()];
            header.extend(self.cores.iter().map(|c| format!("rank {}", c.rank)));
            let mut t = Table::new(header);
            let mut from = lo;
            while from < hi {
                let to = if from == 0.0 { 2.0 } else { from * 2.0 };
                let mut row = vec![format!("{} - {}", ns_label(from), ns_label(to))];
                row.extend(self.cores.iter().map(|c| {
                    c.histogram
                        .iter()
                        .find(|b| b.from_ns == from)
                        .map_or(0, |b| b.count)
                        .to_string()
                }));
                t.row(row);
                from = to;
            }
            out += &t.render();
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &NoiseWarning)> {
        super::document::unwarned(&self.warnings)
    }

    /// The detours over time.
    fn plot_svg(&self) -> Option<Result<String, String>> {
        let title = format!(
            "selfish detours, {} ranks, threshold {} x the fastest loop",
            self.cores.len(),
            self.spec.threshold
        );
        Some(plot_detours_svg(&series(&self.cores), &title))
    }
}

/// `512 ns`, `2 us`, `1 ms`.
fn ns_label(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns} ns")
    } else if ns < 1e6 {
        format!("{} us", ns / 1e3)
    } else {
        format!("{} ms", ns / 1e6)
    }
}

/// The plot's series: every core's detours.
pub fn series(cores: &[CoreRow]) -> Vec<DetourSeries> {
    cores
        .iter()
        .map(|c| DetourSeries {
            label: match c.core {
                Some(core) => format!("rank {}, core {core}", c.rank),
                None => format!("rank {}, unpinned", c.rank),
            },
            points: c
                .detours
                .iter()
                .map(|d| (d.at_us / 1e6, d.duration_us))
                .collect(),
        })
        .collect()
}

/// One core's detours for the plot.
pub use super::svg::Curve as DetourSeries;

/// An SVG plot of the detours over time: one point per detour at its start
/// (seconds from the start of the measurement) and its length (microseconds, log
/// scale), one color per core.
pub fn plot_detours_svg(series: &[DetourSeries], title: &str) -> Result<String, String> {
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    let x = svg::Axis::linear(all.iter().map(|p| p.0), true);
    let y = svg::Axis::log(all.iter().map(|p| p.1));
    svg::document(svg::page(series.len()), |root| {
        let mut chart = svg::chart(
            root,
            title,
            (x, "time since the start [s]"),
            (y, "detour [us]"),
            series.len(),
        )?;
        for (i, s) in series.iter().enumerate() {
            let label = format!("{} ({} detours)", s.label, s.points.len());
            let points = s.points.iter().copied().filter(|p| p.1 > 0.0).collect();
            svg::series(&mut chart, i, label, points, false)?;
        }
        svg::legend(&mut chart)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_is_an_svg_with_every_core() {
        let series = vec![
            DetourSeries {
                label: "rank 0, core 0".into(),
                points: vec![(0.001, 2.5), (0.5, 120.0)],
            },
            DetourSeries {
                label: "rank 1, core 1".into(),
                points: vec![],
            },
        ];
        let svg = plot_detours_svg(&series, "noise").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("rank 0, core 0 (2 detours)"));
        assert!(svg.contains("rank 1, core 1 (0 detours)"));
        assert!(plot_detours_svg(&[], "empty").unwrap().starts_with("<svg"));
    }
}
