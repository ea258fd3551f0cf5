//! The document of `ngauge matrix`: every ordered pair's latency and bandwidth
//! (mpiGraph's p x p matrices), summaries per rank, per host and per placement
//! class, and the links named as outliers within their class
//! ([`crate::stats::mad`]). Its exports: a CSV row per ordered pair and an SVG
//! heat map of the two matrices.

use super::table::{significant, Table};
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::patterns::pairs::PairResult;
use crate::stats::mad::{median_mad, outliers, Worse};
use crate::stats::median;
use ngauge_transport::WaitMode;
use serde::Serialize;

crate::names::named_enum! {
    /// Where the two ranks of a link run.
    pub enum Placement("placement") {
        /// On one host (shared memory, loopback).
        SameHost = "same-host",
        /// On different hosts (the network).
        InterHost = "inter-host",
    }
}

crate::names::named_enum! {
    /// What a matrix holds.
    pub enum Metric("metric") {
        /// Median half round trip of the latency size.
        Latency = "latency",
        /// Streaming bandwidth of the bandwidth size.
        Bandwidth = "bandwidth",
    }
}

/// One ordered pair: where it runs and its two measurements.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Link {
    /// The initiator (the sender of the stream).
    pub from: usize,
    /// The responder (the receiver of the stream).
    pub to: usize,
    /// Same host or different hosts.
    pub placement: Placement,
    /// The ping-pong of the latency size.
    pub latency: PairResult,
    /// The stream of the bandwidth size.
    pub bandwidth: PairResult,
}

/// One record of `-o` (`matrix`, `ebb`): a pair's result and the transport it
/// was measured over, as `pingpong`'s records.
#[derive(Clone, Debug, Serialize)]
pub struct PairRecord {
    /// The transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// The result.
    #[serde(flatten)]
    pub result: PairResult,
}

/// A link named by the outlier rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Outlier {
    /// The matrix it stands out in.
    pub metric: Metric,
    /// The initiator.
    pub from: usize,
    /// The responder.
    pub to: usize,
    /// Its placement class.
    pub placement: Placement,
    /// How many times worse than the class median (latency: value / median;
    /// bandwidth: median / value).
    pub times_worse: f64,
    /// Its value (us or MB/s, as the metric's matrix).
    pub value: f64,
    /// The class median (same unit).
    pub class_median: f64,
    /// The rule's verdict in words.
    pub message: String,
}

/// The medians of a group of links (a rank's, a host's, a placement class's).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Medians {
    /// Links in the group.
    pub links: usize,
    /// Median of their median half round trips, us.
    pub latency_median_us: Option<f64>,
    /// Median of their bandwidths, MB/s.
    #[serde(rename = "bandwidth_median_MBps")]
    pub bandwidth_median_mbps: Option<f64>,
}

/// A rank's links: those it initiates (`out`) and those it answers (`in`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RankSummary {
    /// The rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Links from it.
    pub out: Medians,
    /// Links to it.
    #[serde(rename = "in")]
    pub into: Medians,
}

/// A host's links (from any of its ranks).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct HostSummary {
    /// The host.
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<usize>,
    /// Links from its ranks.
    pub out: Medians,
}

/// A placement class's links, with the scaled MADs the outlier rule uses.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ClassSummary {
    /// The class.
    pub placement: Placement,
    /// Its medians.
    #[serde(flatten)]
    pub medians: Medians,
    /// 1.4826 MAD of its latencies, us.
    pub latency_mad_us: Option<f64>,
    /// 1.4826 MAD of its bandwidths, MB/s.
    #[serde(rename = "bandwidth_mad_MBps")]
    pub bandwidth_mad_mbps: Option<f64>,
}

/// How the pairs were scheduled.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ScheduleFacts {
    /// `tournament` (rounds of disjoint pairs, each in both directions) or
    /// `one-at-a-time`.
    pub kind: String,
    /// Seed of the pairing order.
    pub seed: u64,
    /// Steps per matrix (pairs of a step measure at once).
    pub steps: usize,
}

/// What `matrix` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MatrixWarning {
    /// What threatens any command's figures alike (job, binding).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// `ngauge matrix --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MatrixDoc {
    /// How the result came about.
    pub meta: Meta,
    /// Every rank's host, indexed by rank.
    pub hosts: Vec<String>,
    /// How the pairs took turns.
    pub schedule: ScheduleFacts,
    /// Message size of the latency matrix, bytes.
    pub latency_size: usize,
    /// Message size of the bandwidth matrix, bytes.
    pub bandwidth_size: usize,
    /// MB in `bandwidth_MBps` means 10^6 bytes.
    pub bandwidth_unit: String,
    /// A ratio beyond which (and beyond 3.5 scaled MADs) a link is an outlier.
    pub outlier_factor: f64,
    /// Every ordered pair (p (p - 1) of them), by initiator, then responder.
    pub links: Vec<Link>,
    /// `latency_us[from][to]`: median half round trip, us (`null` on the
    /// diagonal).
    pub latency_us: Vec<Vec<Option<f64>>>,
    /// `bandwidth_MBps[from][to]` (`null` on the diagonal).
    #[serde(rename = "bandwidth_MBps")]
    pub bandwidth_mbps: Vec<Vec<Option<f64>>>,
    /// Per rank.
    pub ranks: Vec<RankSummary>,
    /// Per host, in order of first rank.
    pub host_summaries: Vec<HostSummary>,
    /// Per placement class present.
    pub placements: Vec<ClassSummary>,
    /// The links named by the outlier rule, latency first.
    pub outliers: Vec<Outlier>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<MatrixWarning>>,
}

/// The medians of `links`.
fn medians<'a>(links: impl Iterator<Item = &'a Link>) -> Medians {
    let (lat, bw): (Vec<f64>, Vec<f64>) = links
        .map(|l| (l.latency.half_rtt_us.median, l.bandwidth.bandwidth_mbps))
        .unzip();
    Medians {
        links: lat.len(),
        latency_median_us: median(&lat),
        bandwidth_median_mbps: median(&bw),
    }
}

impl MatrixDoc {
    /// The document of the latency and bandwidth results (`latency`,
    /// `bandwidth`: one per ordered pair, any order) of ranks on `hosts`.
    pub fn new(
        meta: Meta,
        hosts: Vec<String>,
        schedule: ScheduleFacts,
        latency: &[PairResult],
        bandwidth: &[PairResult],
        outlier_factor: f64,
        warnings: &[MatrixWarning],
    ) -> Self {
        let np = hosts.len();
        let mut links: Vec<Link> = latency
            .iter()
            .filter_map(|l| {
                let b = bandwidth
                    .iter()
                    .find(|b| (b.from, b.to) == (l.from, l.to))?;
                let placement = if hosts[l.from] == hosts[l.to] {
                    Placement::SameHost
                } else {
                    Placement::InterHost
                };
                Some(Link {
                    from: l.from,
                    to: l.to,
                    placement,
                    latency: l.clone(),
                    bandwidth: b.clone(),
                })
            })
            .collect();
        links.sort_by_key(|l| (l.from, l.to));
        let mut latency_us = vec![vec![None; np]; np];
        let mut bandwidth_mbps = vec![vec![None; np]; np];
        for l in &links {
            latency_us[l.from][l.to] = Some(l.latency.half_rtt_us.median);
            bandwidth_mbps[l.from][l.to] = Some(l.bandwidth.bandwidth_mbps);
        }
        let ranks = (0..np)
            .map(|r| RankSummary {
                rank: r,
                host: hosts[r].clone(),
                out: medians(links.iter().filter(|l| l.from == r)),
                into: medians(links.iter().filter(|l| l.to == r)),
            })
            .collect();
        let mut host_names: Vec<&String> = Vec::new();
        for h in &hosts {
            if !host_names.contains(&h) {
                host_names.push(h);
            }
        }
        let host_summaries = host_names
            .into_iter()
            .map(|h| HostSummary {
                host: h.clone(),
                ranks: (0..np).filter(|&r| hosts[r] == *h).collect(),
                out: medians(links.iter().filter(|l| hosts[l.from] == *h)),
            })
            .collect();
        let mut placements = Vec::new();
        let mut found = Vec::new();
        for &class in Placement::ALL {
            let members: Vec<&Link> = links.iter().filter(|l| l.placement == class).collect();
            if members.is_empty() {
                continue;
            }
            let lat: Vec<f64> = members
                .iter()
                .map(|l| l.latency.half_rtt_us.median)
                .collect();
            let bw: Vec<f64> = members.iter().map(|l| l.bandwidth.bandwidth_mbps).collect();
            for (metric, values, worse) in [
                (Metric::Latency, &lat, Worse::Higher),
                (Metric::Bandwidth, &bw, Worse::Lower),
            ] {
                let class_median = median(values).unwrap_or(0.0);
                for (i, times_worse) in outliers(values, worse, outlier_factor) {
                    let (from, to) = (members[i].from, members[i].to);
                    found.push(Outlier {
                        metric,
                        from,
                        to,
                        placement: class,
                        times_worse,
                        value: values[i],
                        class_median,
                        message: outlier_message(metric, from, to, class, times_worse),
                    });
                }
            }
            placements.push(ClassSummary {
                placement: class,
                medians: medians(members.iter().copied()),
                latency_mad_us: median_mad(&lat).map(|(_, s)| s),
                bandwidth_mad_mbps: median_mad(&bw).map(|(_, s)| s),
            });
        }
        found.sort_by_key(|o| (o.metric, o.from, o.to));
        MatrixDoc {
            meta,
            hosts,
            schedule,
            latency_size: links.first().map_or(0, |l| l.latency.size),
            bandwidth_size: links.first().map_or(0, |l| l.bandwidth.size),
            bandwidth_unit: super::pingpong::BANDWIDTH_UNIT.into(),
            outlier_factor,
            links,
            latency_us,
            bandwidth_mbps,
            ranks,
            host_summaries,
            placements,
            outliers: found,
            warnings: super::warning::warned(warnings.iter().cloned()),
        }
    }

    /// One CSV row per ordered pair, the units in the column names.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "from,to,from_host,to_host,placement,latency_size_bytes,latency_median_us,\
             latency_min_us,latency_p99_us,bandwidth_size_bytes,window,bandwidth_MBps,\
             msgs_per_s,outlier\n",
        );
        for l in &self.links {
            let named: Vec<&str> = self
                .outliers
                .iter()
                .filter(|o| (o.from, o.to) == (l.from, l.to))
                .map(|o| o.metric.as_str())
                .collect();
            let (lat, bw) = (&l.latency, &l.bandwidth);
            out += &format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                l.from,
                l.to,
                csv_field(&self.hosts[l.from]),
                csv_field(&self.hosts[l.to]),
                l.placement,
                lat.size,
                lat.half_rtt_us.median,
                lat.half_rtt_us.min,
                lat.half_rtt_us.p99,
                bw.size,
                bw.window,
                bw.bandwidth_mbps,
                bw.msgs_per_s,
                named.join("+"),
            );
        }
        out
    }

    /// The heat maps of both matrices side by side.
    ///
    /// # Errors
    /// What plotters reports.
    pub fn heat_map_svg(&self) -> Result<String, String> {
        use super::svg::{document, error};
        use plotters::prelude::*;
        let np = self.hosts.len();
        let cell = (480 / np.max(1)).clamp(4, 60) as i32;
        let (left, top) = (50, 60);
        let side = cell * np as i32;
        let width = (2 * (left + side) + 40) as u32;
        let height = (top + side + 40) as u32;
        document((width, height), |area| {
            let panels = [
                (
                    Metric::Latency,
                    &self.latency_us,
                    "latency [us] (darker: slower)",
                ),
                (
                    Metric::Bandwidth,
                    &self.bandwidth_mbps,
                    "bandwidth [MB/s] (darker: slower)",
                ),
            ];
            for (k, (metric, m, title)) in panels.into_iter().enumerate() {
                let x0 = left + k as i32 * (left + side + 20);
                let values: Vec<f64> = m.iter().flatten().flatten().copied().collect();
                let (lo, hi) = values
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
                area.draw(&Text::new(title.to_string(), (x0, 20), ("sans-serif", 14)))
                    .map_err(error)?;
                area.draw(&Text::new(
                    format!(
                        "row: from, column: to; {} to {}",
                        significant(lo, 3),
                        significant(hi, 3)
                    ),
                    (x0, 38),
                    ("sans-serif", 11),
                ))
                .map_err(error)?;
                for (from, row) in m.iter().enumerate() {
                    for (to, v) in row.iter().enumerate() {
                        // 0: best, 1: worst of this matrix.
                        let badness = v.map(|v| {
                            let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
                            if metric == Metric::Latency {
                                t
                            } else {
                                1.0 - t
                            }
                        });
                        let colour = match badness {
                            None => RGBColor(220, 220, 220),
                            Some(t) => {
                                let c = (255.0 * (1.0 - 0.85 * t)) as u8;
                                RGBColor(c, c, 255)
                            }
                        };
                        let (x, y) = (x0 + to as i32 * cell, top + from as i32 * cell);
                        area.draw(&Rectangle::new(
                            [(x, y), (x + cell - 1, y + cell - 1)],
                            colour.filled(),
                        ))
                        .map_err(error)?;
                    }
                }
                for o in self.outliers.iter().filter(|o| o.metric == metric) {
                    let (x, y) = (x0 + o.to as i32 * cell, top + o.from as i32 * cell);
                    area.draw(&Rectangle::new(
                        [(x, y), (x + cell - 1, y + cell - 1)],
                        RGBColor(214, 39, 40).stroke_width(2),
                    ))
                    .map_err(error)?;
                }
                if cell >= 12 {
                    for r in 0..np {
                        let label = r.to_string();
                        let at = r as i32 * cell + cell / 3;
                        area.draw(&Text::new(
                            label.clone(),
                            (x0 - 18, top + at),
                            ("sans-serif", 10),
                        ))
                        .map_err(error)?;
                        area.draw(&Text::new(
                            label,
                            (x0 + at, top + side + 4),
                            ("sans-serif", 10),
                        ))
                        .map_err(error)?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// The outlier rule's verdict: `link 3->7: latency 4.1x the median of
/// same-host links`.
fn outlier_message(metric: Metric, from: usize, to: usize, class: Placement, times: f64) -> String {
    let what = match metric {
        Metric::Latency => "latency",
        Metric::Bandwidth => "bandwidth 1/",
    };
    format!("link {from}->{to}: {what}{times:.1}x the median of {class} links")
}

/// A CSV field, quoted when it holds a comma or a quote.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl super::Document for MatrixDoc {
    type Warning = MatrixWarning;

    /// The two matrices, the classes, the ranks and the outliers.
    fn render(&self) -> String {
        let np = self.hosts.len();
        let t = self.meta.transport.first().map_or("-", |t| t.as_str());
        let mut out = format!(
            "{t} all-pairs matrix, {np} ranks, {} schedule (seed {}, {} steps); rows: from, \
             columns: to; MB = 10^6 bytes\n",
            self.schedule.kind, self.schedule.seed, self.schedule.steps
        );
        for (title, m) in [
            (
                format!("median half round trip [us], {} B", self.latency_size),
                &self.latency_us,
            ),
            (
                format!("bandwidth [MB/s], {} B messages", self.bandwidth_size),
                &self.bandwidth_mbps,
            ),
        ] {
            out += &format!("\n{title}\n");
            let mut table = Table::new(
                std::iter::once("from\\to".to_string()).chain((0..np).map(|r| r.to_string())),
            );
            for (from, row) in m.iter().enumerate() {
                table.row(
                    std::iter::once(from.to_string()).chain(
                        row.iter()
                            .map(|v| v.map_or("-".into(), |v| significant(v, 3))),
                    ),
                );
            }
            out += &table.render();
        }
        out += "\nper placement class\n";
        let mut table = Table::new([
            "class",
            "links",
            "latency [us]",
            "MAD [us]",
            "bandwidth [MB/s]",
            "MAD [MB/s]",
        ]);
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| significant(v, 3));
        for c in &self.placements {
            table.row([
                c.placement.to_string(),
                c.medians.links.to_string(),
                opt(c.medians.latency_median_us),
                opt(c.latency_mad_us),
                opt(c.medians.bandwidth_median_mbps),
                opt(c.bandwidth_mad_mbps),
            ]);
        }
        out += &table.render();
        out += "\nper rank (medians of its links)\n";
        let mut table = Table::new([
            "rank",
            "host",
            "out latency [us]",
            "out bw [MB/s]",
            "in bw [MB/s]",
        ]);
        for r in &self.ranks {
            table.row([
                r.rank.to_string(),
                r.host.clone(),
                opt(r.out.latency_median_us),
                opt(r.out.bandwidth_median_mbps),
                opt(r.into.bandwidth_median_mbps),
            ]);
        }
        out += &table.render();
        if self.host_summaries.len() > 1 {
            out += "\nper host (medians of the links from its ranks)\n";
            let mut table = Table::new(["host", "ranks", "latency [us]", "bandwidth [MB/s]"]);
            for h in &self.host_summaries {
                table.row([
                    h.host.clone(),
                    super::table::joined(&h.ranks),
                    opt(h.out.latency_median_us),
                    opt(h.out.bandwidth_median_mbps),
                ]);
            }
            out += &table.render();
        }
        if self.outliers.is_empty() {
            out += &format!(
                "\nno outlier (none {}x worse than its class median and beyond 3.5 scaled MADs)\n",
                self.outlier_factor
            );
        } else {
            out += "\noutliers\n";
            for o in &self.outliers {
                out += &format!("{}\n", o.message);
            }
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &MatrixWarning)> {
        super::document::unwarned(&self.warnings)
    }

    fn export(&self, export: super::document::Export) -> Vec<super::document::ExportFile> {
        use super::document::Export;
        match export {
            Export::Plot => vec![(None, self.heat_map_svg())],
            Export::Csv => vec![(None, Ok(self.csv()))],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
