//! The document of `ngauge coll`: per transport, algorithm and size the run-time of
//! one collective call (Hunold & Carpen-Amarie sec. 3.5: the valid calls, Tukey's
//! filter, then median, mean and the 95% interval of the mean), and with several
//! transports or algorithms their medians side by side with ratios.

use super::side_by_side::{self, side_by_side, SideBySide};
use super::svg;
use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::patterns::coll::{CollTimes, Scheme};
use crate::sim::select::{Predicted, Selection};
use crate::spec::coll::RootChoice;
use crate::stats::{mean_interval, tukey_filter, Sorted};
use ngauge_transport::WaitMode;
use serde::Serialize;

/// The run-time of one call, in microseconds, over the valid calls Tukey's filter
/// kept.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Runtime {
    /// Fastest.
    pub min: f64,
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// 95% confidence interval of the mean (Student's t), `[lo, hi]`; absent with
    /// fewer than 2 values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci95: Option<[f64; 2]>,
    /// Slowest.
    pub max: f64,
}

/// One rank's local times of the valid calls, in microseconds (`--per-rank`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RankTimes {
    /// The rank.
    pub rank: usize,
    /// The time from its start to its end of each valid call, in order (the loop
    /// scheme: its whole loop divided by the calls).
    pub local_us: Vec<f64>,
}

/// One measurement point: a record of the document and of `--output`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CollRecord {
    /// The transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// The operation: bcast, gather, allreduce, barrier, alltoall, reduce,
    /// allgather, reduce_scatter, scatter.
    pub op: String,
    /// The algorithm: one of ngauge's schedules (`binomial`, `kchain:4`), or `mpi`
    /// for the MPI library's own collective.
    pub algo: String,
    /// Open MPI's forced algorithm (`coll_tuned_<op>_algorithm`) of an `mpi` row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mpi_algo: Option<u32>,
    /// Segment size of a pipelined broadcast (0: one segment).
    pub segment: usize,
    /// Bytes per rank.
    pub size: usize,
    /// Ranks.
    pub np: usize,
    /// How calls were timed.
    pub scheme: Scheme,
    /// The root of the rooted collectives.
    pub root: RootChoice,
    /// The count matrix of an alltoallv.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<CollCounts>,
    /// Calls timed validly (the loop scheme: its one loop, of `calls_per_loop`).
    pub valid: usize,
    /// Calls that started late or overran their window (the window scheme).
    pub invalid: usize,
    /// Of the invalid: calls a rank reached after their window had opened.
    pub started_late: usize,
    /// Of the invalid: calls still running when the next window opened.
    pub overran: usize,
    /// Valid calls Tukey's filter removed before the statistics.
    pub outliers: usize,
    /// Rounds the window scheme ran (1 for the others).
    pub rounds: usize,
    /// The last window, in microseconds (the window scheme).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_us: Option<f64>,
    /// Calls per timed loop (the loop scheme).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls_per_loop: Option<usize>,
    /// The run-time of one call; absent when no call was valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_us: Option<Runtime>,
    /// The models' times of the same schedule (`--predict`; our schedules only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Predicted>,
    /// Every rank's local times (`--per-rank`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Vec<RankTimes>>,
    /// Every valid call's run-time before Tukey's filter (`--samples`; a suite's
    /// runs keep them for the statistics per launch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<CollSamples>,
}

/// An alltoallv's count matrix: rank `i` sends rank `j` `count(i, j) * size`
/// bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CollCounts {
    /// `uniform`, `random:SEED` (the matrix follows from the seed), or the file's
    /// path.
    pub matrix: String,
    /// The sum of the counts: one call moves `total * size` bytes, the ranks'
    /// own blocks included.
    pub total: u64,
}

/// The repetitions behind a record's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CollSamples {
    /// Every valid call's run-time, microseconds, in the order measured.
    pub runtime_us: Vec<f64>,
}

impl CollRecord {
    /// `transport/algo`, the key of the comparison (`tcp/binomial`, `mpi/mpi`).
    pub fn label(&self) -> String {
        let algo = match self.mpi_algo {
            Some(n) => format!("{}:{n}", self.algo),
            None => self.algo.clone(),
        };
        format!("{}/{algo}", self.transport)
    }
}

/// What a record is computed from, besides the times.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// The operation.
    pub op: String,
    /// The algorithm (`mpi` for the library's own).
    pub algo: String,
    /// Open MPI's forced algorithm.
    pub mpi_algo: Option<u32>,
    /// Segment bytes.
    pub segment: usize,
    /// Bytes per rank.
    pub size: usize,
    /// Ranks.
    pub np: usize,
    /// The root.
    pub root: RootChoice,
}

/// The record of `times` (complete, on rank 0) at `hz` ticks per second.
pub fn record(point: Point, times: &CollTimes, hz: f64, per_rank: bool) -> CollRecord {
    let us = |ticks: f64| ticks / hz * 1e6;
    let tally = times.tally();
    let runtimes: Vec<f64> = times.valid_runtimes_ticks().into_iter().map(us).collect();
    let (runtime_us, outliers) = match tukey_filter(&runtimes) {
        Some(f) => (runtime(&f.kept), f.removed),
        None => (None, 0),
    };
    let loop_calls = times.calls.first().map_or(1, |c| c.calls.max(1));
    let ranks = per_rank.then(|| {
        let np = times.calls.first().map_or(0, |c| c.ranks.len());
        (0..np)
            .map(|rank| RankTimes {
                rank,
                local_us: times
                    .calls
                    .iter()
                    .filter(|c| c.status == crate::sync::window::SlotStatus::Valid)
                    .filter_map(|c| c.ranks.get(rank))
                    .map(|s| us(s.ticks() as f64) / loop_calls as f64)
                    .collect(),
            })
            .collect()
    });
    CollRecord {
        transport: point.transport,
        wait: point.wait,
        op: point.op,
        algo: point.algo,
        mpi_algo: point.mpi_algo,
        segment: point.segment,
        size: point.size,
        np: point.np,
        scheme: times.scheme,
        root: point.root,
        counts: None,
        valid: tally.valid,
        invalid: tally.started_late + tally.overran,
        started_late: tally.started_late,
        overran: tally.overran,
        outliers,
        rounds: times.rounds,
        window_us: times.window_ticks.map(|w| us(w as f64)),
        calls_per_loop: (times.scheme == Scheme::Loop).then_some(loop_calls),
        runtime_us,
        predicted: None,
        ranks,
        samples: None,
    }
}

/// Min, median, mean, interval and max of `values` (microseconds).
pub fn runtime(values: &[f64]) -> Option<Runtime> {
    let sorted = Sorted::new(values).ok()?;
    let s = sorted.summary();
    let ci95 = mean_interval(values, 0.95)
        .ok()
        .flatten()
        .map(|i| [i.lo, i.hi]);
    Some(Runtime {
        min: s.min,
        median: s.median,
        mean: s.mean,
        ci95,
        max: s.max,
    })
}

/// What `coll` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CollWarning {
    /// Fewer valid calls than asked for: the window scheme gave up after its rounds.
    #[error(
        "{label} at {size} B: {valid} valid calls of {wanted} wanted (calls started late or \
         overran their window in every round)"
    )]
    FewValid {
        /// `transport/algo`.
        label: String,
        /// Bytes per rank.
        size: usize,
        /// Valid calls.
        valid: usize,
        /// Calls asked for.
        wanted: usize,
    },
    /// A point was not measured: one of its messages exceeds the transport's limit.
    #[error(
        "{label} at {size} B not measured: it sends {largest_bytes}-byte messages, and the \
         transport carries at most {max_bytes}"
    )]
    SizeSkipped {
        /// `transport/algo`.
        label: String,
        /// Bytes per rank.
        size: usize,
        /// The largest message of one call.
        largest_bytes: usize,
        /// The transport's limit.
        max_bytes: usize,
    },
    /// The clocks were synchronized over another transport than the one measured
    /// (which may lose messages).
    #[error("the clocks were synchronized over {transport}, not over the transport measured")]
    SyncedOver {
        /// The transport the sync ran over.
        transport: TransportName,
    },
    /// `--predict`: the parameter file was measured on another transport than a
    /// point it predicts.
    #[error(
        "the LogGP parameters were measured on {params}, the predictions are for points \
         measured on {measured}"
    )]
    PredictTransport {
        /// The transport the file names.
        params: String,
        /// The transport measured.
        measured: TransportName,
    },
    /// `--predict`: what the parameter file's reader assumed.
    #[serde(untagged)]
    #[error("{0}")]
    Params(crate::sim::params::ParamsWarning),
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// Side by side medians with ratios (several transports or algorithms), labelled
/// `transport/algo`: `-t mpi,tcp --algo mpi,binomial` gives everything over our
/// binomial on raw TCP.
pub type CollComparison = SideBySide<String>;

/// The comparison of `records` (per size the median run-time); `None` with a
/// single `transport/algo`.
pub fn compare(records: &[CollRecord]) -> Option<CollComparison> {
    let labels = distinct(records.iter().map(CollRecord::label));
    let baseline = labels.last()?.clone();
    let median = |label: &String, size: usize| {
        records
            .iter()
            .find(|r| r.size == size && r.label() == *label)
            .and_then(|r| r.runtime_us)
            .map(|t| t.median)
    };
    let mut sizes: Vec<usize> = records
        .iter()
        .filter(|r| r.label() == baseline)
        .map(|r| r.size)
        .collect();
    sizes.dedup();
    side_by_side(labels, sizes, median)
}

/// What ran in `late` and `nbc`: one collective and its implementation over one
/// transport, timed in windows.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WindowedRun {
    /// The collective (`allreduce`, ...).
    pub op: String,
    /// Its implementation: one of ours (`recursive-doubling`, ...) or `mpi`.
    pub algo: String,
    /// What ran: `allreduce/recursive-doubling` (ours), `allreduce/mpi` (the
    /// transport's own: MPI's `MPI_Allreduce`, or `MPI_Iallreduce` and a wait).
    pub implementation: String,
    /// The data transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// Number of ranks.
    pub np: usize,
}

/// `ngauge coll --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CollDoc {
    /// How the result came about.
    pub meta: Meta,
    /// Every measurement point, in the order measured (sizes interleaved across
    /// transports and algorithms).
    pub results: Vec<CollRecord>,
    /// With several transports or algorithms: medians side by side and ratios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<CollComparison>,
    /// With `--predict` and several algorithms: the models' choice per size
    /// against the measured best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// The clock synchronization of the window scheme, per rank (absent with the
    /// other schemes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<super::effort::ClockSync>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<CollWarning>>,
}

impl super::Document for CollDoc {
    type Warning = CollWarning;

    /// One table per transport and algorithm, the comparison, the selection.
    fn render(&self) -> String {
        let mut out = render_records(&self.results);
        if let Some(c) = &self.comparison {
            out += &side_by_side::render(c, "median run-time", "[us]", " / ");
        }
        if let Some(s) = &self.selection {
            out += &render_selection(s);
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &CollWarning)> {
        super::document::unwarned(&self.warnings)
    }

    /// The median run-time over the size.
    fn plot_svg(&self) -> Option<Result<String, String>> {
        let title = self.results.first().map_or("coll".into(), |r| {
            format!("{} on {} ranks, {} scheme", r.op, r.np, r.scheme.as_str())
        });
        Some(plot_svg(&self.results, &title))
    }
}

/// `labels` without repeats, in order.
fn distinct(labels: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// The tables of `records`: one per transport and algorithm. The loop scheme
/// times one loop, so its table has one value per size, not statistics; the
/// window scheme runs rounds of `reps` calls until `reps` are valid, so its
/// `valid` (over every round) can exceed `reps` and its table shows the rounds.
fn render_records(records: &[CollRecord]) -> String {
    let mut out = String::new();
    for label in distinct(records.iter().map(CollRecord::label)) {
        let these: Vec<&CollRecord> = records.iter().filter(|r| r.label() == label).collect();
        let first = these[0];
        let (looped, windowed) = (first.scheme == Scheme::Loop, first.scheme == Scheme::Window);
        out += &format!(
            "{} {label} on {} ranks, root {}, segment {}, {} scheme, wait {}; {}\n",
            first.op,
            first.np,
            first.root,
            first.segment,
            first.scheme.as_str(),
            first.wait,
            if looped {
                "one call's run-time: the loop's time divided by its calls"
            } else {
                "one call's run-time after Tukey's filter"
            }
        );
        let predicted = these.iter().any(|r| r.predicted.is_some());
        let mut header: Vec<&str> = vec!["size [B]"];
        if looped {
            header.extend(["calls in loop", "one call [us]"]);
        } else {
            if windowed {
                header.push("rounds");
            }
            header.extend([
                "valid",
                "invalid",
                "min [us]",
                "median [us]",
                "mean [us]",
                "ci95 of mean [us]",
                "max [us]",
            ]);
        }
        if predicted {
            header.extend([
                "LogGP [us]",
                "median / LogGP",
                "Hockney [us]",
                "median / Hockney",
            ]);
        }
        let mut table = Table::new(header);
        for r in these {
            let mut row = vec![r.size.to_string()];
            if looped {
                row.push(r.calls_per_loop.unwrap_or(1).to_string());
                row.push(
                    r.runtime_us
                        .map_or("-".into(), |t| format!("{:.2}", t.median)),
                );
            } else {
                if windowed {
                    row.push(r.rounds.to_string());
                }
                row.extend([r.valid.to_string(), r.invalid.to_string()]);
                row.extend(match r.runtime_us {
                    Some(t) => vec![
                        format!("{:.2}", t.min),
                        format!("{:.2}", t.median),
                        format!("{:.2}", t.mean),
                        t.ci95
                            .map_or("-".into(), |[lo, hi]| format!("{lo:.2}..{hi:.2}")),
                        format!("{:.2}", t.max),
                    ],
                    None => vec!["-".to_string(); 5],
                });
            }
            if predicted {
                row.extend(predicted_cells(r.predicted.as_ref()));
            }
            table.row(row);
        }
        out += &table.render();
    }
    out
}

/// A point's models: LogGP, median / LogGP, Hockney, median / Hockney.
pub fn predicted_cells(p: Option<&Predicted>) -> [String; 4] {
    let num = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    [
        num(p.map(|p| p.loggp_us)),
        num(p.and_then(|p| p.measured_over_loggp)),
        num(p.map(|p| p.hockney_us)),
        num(p.and_then(|p| p.measured_over_hockney)),
    ]
}

/// The selection table: per size the measured best, each model's choice and the
/// time its choice loses (Nuriyev, tables 6.5 to 6.11).
pub fn render_selection(s: &Selection) -> String {
    let mut out = "model-based selection against measurement: per size the measured best, \
                   each model's choice and its loss (its measured median over the best's - 1)\n"
        .to_string();
    let mut table = Table::new([
        "transport",
        "size [B]",
        "best",
        "best [us]",
        "LogGP's choice",
        "loss",
        "Hockney's choice",
        "loss",
        "fitted Hockney's choice",
        "loss",
    ]);
    let pct = |l: f64| format!("{:.1}%", l * 100.0);
    for r in &s.rows {
        table.row(vec![
            r.transport.to_string(),
            r.size.to_string(),
            r.best.label(),
            format!("{:.2}", r.best.median_us),
            r.loggp.label(),
            pct(r.loggp.loss),
            r.hockney.label(),
            pct(r.hockney.loss),
            r.hockney_fitted.as_ref().map_or("-".into(), |c| c.label()),
            r.hockney_fitted
                .as_ref()
                .map_or("-".into(), |c| pct(c.loss)),
        ]);
    }
    out += &table.render();
    let mut scores = vec![("LogGP", &s.loggp), ("Hockney", &s.hockney)];
    if let Some(f) = &s.hockney_fitted {
        scores.push(("fitted Hockney (in-sample)", f));
    }
    for (name, score) in scores {
        out += &format!(
            "{name}: the best in {} of {} sizes, mean loss {}, largest {}\n",
            score.best_chosen,
            s.rows.len(),
            pct(score.mean_loss),
            pct(score.max_loss)
        );
    }
    if !s.fits.is_empty() {
        out += "algorithm-specific Hockney parameters (Huber regression over the measured \
                sizes, Nuriyev sec. 5.2.2):\n";
        for f in &s.fits {
            let segment = match f.segment {
                0 => String::new(),
                s => format!(" (segment {s} B)"),
            };
            out += &format!(
                "  {} {}{segment}: alpha {:.3} us, beta {:.6} us/B ({} sizes)\n",
                f.transport, f.algo, f.params.alpha_us, f.params.beta_us_per_byte, f.sizes
            );
        }
    }
    out
}

/// An SVG plot of the median run-time over the size, one line per
/// `transport/algo`, both axes logarithmic, each line in the band of the 95%
/// confidence interval of its mean where one was computed.
pub fn plot_svg(records: &[CollRecord], title: &str) -> Result<String, String> {
    // (label, size, median, ci95)
    let points: Vec<(String, f64, f64, Option<[f64; 2]>)> = records
        .iter()
        .filter_map(|r| {
            r.runtime_us.map(|t| {
                (
                    r.label(),
                    (r.size.max(1)) as f64,
                    t.median.max(1e-3),
                    t.ci95,
                )
            })
        })
        .collect();
    let labels = distinct(points.iter().map(|p| p.0.clone()));
    let banded = points.iter().any(|p| p.3.is_some());
    let x = svg::Axis::bytes(points.iter().map(|p| p.1));
    let y = svg::Axis::log(points.iter().flat_map(|p| {
        let [lo, hi] = p.3.unwrap_or([p.2, p.2]);
        [p.2, lo.max(1e-3), hi]
    }));
    let rows = labels.len() + usize::from(banded);
    svg::document(svg::page(rows), |root| {
        let mut chart = svg::chart(
            root,
            title,
            (x, "bytes per rank"),
            (y, "median run-time [us]"),
            rows,
        )?;
        for (i, label) in labels.into_iter().enumerate() {
            let mine: Vec<_> = points.iter().filter(|p| p.0 == label).collect();
            let band: Vec<(f64, f64, f64)> = mine
                .iter()
                .filter_map(|p| p.3.map(|[lo, hi]| (p.1, lo.max(1e-3), hi)))
                .collect();
            svg::band(&mut chart, i, &band)?;
            let line = mine.iter().map(|p| (p.1, p.2)).collect();
            svg::series(&mut chart, i, label, line, true)?;
        }
        if banded {
            svg::key(&mut chart, "shaded: 95% confidence interval of the mean")?;
        }
        svg::legend(&mut chart)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Ticks;
    use crate::patterns::coll::{Call, Span};
    use crate::spec::coll::Rotate;
    use crate::sync::window::SlotStatus;

    fn point(transport: TransportName, algo: &str, size: usize) -> Point {
        Point {
            transport,
            wait: WaitMode::Poll,
            op: "bcast".into(),
            algo: algo.into(),
            mpi_algo: None,
            segment: 0,
            size,
            np: 2,
            root: RootChoice::Rank(0),
        }
    }

    /// Two ranks; call `i` spans `[start_i, end_i]` per rank, in ticks at 1 MHz
    /// (1 tick = 1 us).
    fn times(calls: &[([u64; 2], [u64; 2], SlotStatus)]) -> CollTimes {
        CollTimes {
            scheme: Scheme::Window,
            calls: calls
                .iter()
                .map(|&(s, e, status)| Call {
                    root: 0,
                    calls: 1,
                    status,
                    ranks: (0..2)
                        .map(|r| Span {
                            start: Ticks(s[r]),
                            end: Ticks(e[r]),
                        })
                        .collect(),
                })
                .collect(),
            window_ticks: Some(100),
            rounds: 1,
        }
    }

    #[test]
    fn window_runtime_is_latest_end_minus_earliest_start_of_valid_calls() {
        let t = times(&[
            ([0, 2], [5, 10], SlotStatus::Valid),        // 10
            ([100, 101], [112, 108], SlotStatus::Valid), // 12
            ([200, 230], [250, 240], SlotStatus::StartedLate),
        ]);
        let r = record(point(TransportName::Tcp, "binomial", 8), &t, 1e6, true);
        assert_eq!((r.valid, r.invalid, r.outliers), (2, 1, 0));
        let rt = r.runtime_us.unwrap();
        assert_eq!((rt.min, rt.median, rt.max), (10.0, 11.0, 12.0));
        assert_eq!(r.window_us, Some(100.0));
        let ranks = r.ranks.unwrap();
        assert_eq!(ranks[0].local_us, vec![5.0, 12.0]);
        assert_eq!(ranks[1].local_us, vec![8.0, 7.0]);
    }

    #[test]
    fn tukey_removes_a_far_call() {
        let mut calls: Vec<_> = (0..10)
            .map(|i| {
                (
                    [i * 100, i * 100],
                    [i * 100 + 10, i * 100 + 10],
                    SlotStatus::Valid,
                )
            })
            .collect();
        calls.push(([2000, 2000], [2900, 2000], SlotStatus::Valid));
        let r = record(
            point(TransportName::Tcp, "binomial", 8),
            &times(&calls),
            1e6,
            false,
        );
        assert_eq!((r.valid, r.outliers), (11, 1));
        assert_eq!(r.runtime_us.unwrap().max, 10.0);
        assert!(r.ranks.is_none());
    }

    #[test]
    fn comparison_divides_by_the_last_label() {
        let t = |us: u64| times(&[([0, 0], [us, us], SlotStatus::Valid)]);
        let recs = vec![
            record(point(TransportName::Mpi, "mpi", 1), &t(30), 1e6, false),
            record(point(TransportName::Tcp, "binomial", 1), &t(10), 1e6, false),
            record(point(TransportName::Mpi, "mpi", 2), &t(40), 1e6, false),
            record(point(TransportName::Tcp, "binomial", 2), &t(20), 1e6, false),
        ];
        let c = compare(&recs).unwrap();
        assert_eq!(c.baseline, "tcp/binomial");
        assert_eq!(c.labels, vec!["mpi/mpi", "tcp/binomial"]);
        assert_eq!(c.rows.len(), 2);
        assert_eq!(c.rows[0].ratio["mpi/mpi"], 3.0);
        assert_eq!(c.rows[1].ratio["mpi/mpi"], 2.0);
        assert!(!c.rows[0].ratio.contains_key("tcp/binomial"));
        assert!(compare(&recs[..1]).is_none());
    }

    /// Issue 37: the loop scheme's one value is printed once, under its own
    /// column, not under five statistics columns.
    #[test]
    fn issue_37_a_loop_prints_one_value() {
        let mut t = times(&[([0, 0], [800, 760], SlotStatus::Valid)]);
        t.scheme = Scheme::Loop;
        t.calls[0].calls = 100;
        let r = record(point(TransportName::Tcp, "binomial", 8), &t, 1e6, false);
        let text = render_records(&[r]);
        assert!(
            text.contains("calls in loop") && text.contains("one call [us]"),
            "{text}"
        );
        assert!(
            !text.contains("min [us]") && !text.contains("valid"),
            "{text}"
        );
        assert_eq!(text.matches("8.00").count(), 1, "{text}");
    }

    /// Issue 37: a window run's valid calls count every round (up to rounds x
    /// reps, above `--reps`): the table shows the rounds beside them.
    #[test]
    fn issue_37_window_valid_calls_stand_beside_their_rounds() {
        let mut t = times(&[
            ([0, 0], [5, 5], SlotStatus::StartedLate),
            ([100, 100], [105, 105], SlotStatus::Valid),
            ([200, 200], [205, 205], SlotStatus::Valid),
            ([300, 300], [305, 305], SlotStatus::Valid),
        ]);
        t.rounds = 2;
        let r = record(point(TransportName::Tcp, "binomial", 8), &t, 1e6, false);
        let text = render_records(&[r]);
        let header = text.lines().nth(1).unwrap();
        assert!(
            header.contains("rounds") && header.contains("valid"),
            "{text}"
        );
        let row: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(row[..4], ["8", "2", "3", "1"], "{text}");
    }

    #[test]
    fn root_choice_serializes_as_a_rank_or_rotate() {
        assert_eq!(serde_json::to_value(RootChoice::Rank(3)).unwrap(), 3);
        assert_eq!(
            serde_json::to_value(RootChoice::Rotate(Rotate::Rotate)).unwrap(),
            "rotate"
        );
    }

    #[test]
    fn plot_has_one_line_per_label() {
        let t = |us: u64| times(&[([0, 0], [us, us], SlotStatus::Valid)]);
        let recs = vec![
            record(point(TransportName::Tcp, "binomial", 1), &t(10), 1e6, false),
            record(point(TransportName::Tcp, "chain", 1), &t(12), 1e6, false),
            record(
                point(TransportName::Tcp, "binomial", 1024),
                &t(20),
                1e6,
                false,
            ),
        ];
        let svg = plot_svg(&recs, "bcast").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("tcp/binomial") && svg.contains("tcp/chain"));
    }

    #[test]
    fn issue_37_the_plot_ticks_its_data_on_log_2_sizes_with_confidence_bands() {
        // Run-times of 20-90 us: the old log axis labelled only 100-400 us.
        let t = |a: u64, b: u64| {
            times(&[
                ([0, 0], [a, a], SlotStatus::Valid),
                ([100, 100], [100 + b, 100 + b], SlotStatus::Valid),
            ])
        };
        let recs: Vec<CollRecord> = [(8, 21, 23), (1024, 40, 44), (65536, 85, 90)]
            .into_iter()
            .map(|(s, a, b)| {
                record(
                    point(TransportName::Tcp, "binomial", s),
                    &t(a, b),
                    1e6,
                    false,
                )
            })
            .collect();
        let ci = recs.iter().map(|r| r.runtime_us.unwrap().ci95.unwrap());
        let (lo, hi) = ci.fold((f64::MAX, 0.0f64), |(l, h), [a, b]| (l.min(a), h.max(b)));
        let svg = plot_svg(&recs, "bcast").unwrap();
        svg::check::figure(
            &svg,
            "bytes per rank",
            "median run-time [us]",
            (8.0, 65536.0),
            (lo.max(1e-3), hi),
        );
        assert!(
            svg.contains("64K") && svg.contains("<polygon"),
            "K labels and a band"
        );
        assert!(svg.contains("95% confidence interval"));
    }

    /// A dropped drift of the window scheme's sync is a `coll` warning with
    /// `sync`'s kind, fields and words.
    #[test]
    fn a_dropped_drift_is_warned_as_sync_warns_it() {
        use super::super::effort::{DroppedDriftAt, DroppedDriftReport, EffortWarning};
        use super::super::sync::SyncWarning;
        let effort = EffortWarning::DroppedDrift {
            ranks: vec![DroppedDriftAt {
                rank: 2,
                drift: DroppedDriftReport {
                    fitted_ppm: 31.4,
                    stderr_ppm: 27.0,
                    fit_span_us: 850.0,
                    fitpoints: 10,
                    fits_dropped: 1,
                    peer: 0,
                    reason: crate::sync::pairwise::DriftRejection::Unresolved,
                },
            }],
        };
        let coll = Warned::from(CollWarning::Setup(effort.clone().into()));
        let sync = Warned::from(SyncWarning::Setup(effort.into()));
        assert_eq!(
            serde_json::to_value(&coll).unwrap(),
            serde_json::to_value(&sync).unwrap()
        );
        let v = serde_json::to_value(&coll).unwrap();
        assert_eq!(v["kind"], "dropped_drift", "{v}");
        assert_eq!(v["ranks"][0]["fitted_ppm"], 31.4, "{v}");
        assert!(
            coll.message
                .contains("rank 2 against rank 0 (31.4 +- 27.0 ppm from 10 points over 850us"),
            "{}",
            coll.message
        );
    }
}
