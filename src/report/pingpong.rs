//! The document of `ngauge pingpong`: every transport's results per size, and with
//! several transports their medians side by side.

use super::side_by_side::{self, side_by_side, SideBySide};
use super::table::{joined, significant, Table};
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::job::TransportName;
use crate::patterns::pingpong::SizeResult;
use ngauge_transport::WaitMode;
use serde::Serialize;

/// One transport's sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// The transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// Its results, in the order measured.
    pub results: Vec<SizeResult>,
}

/// One record (of the document and of `--output`): a size's result and the transport
/// it was measured over.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Record {
    /// The transport.
    pub transport: TransportName,
    /// How it waited.
    pub wait: WaitMode,
    /// The result.
    #[serde(flatten)]
    pub result: SizeResult,
}

/// What `pingpong` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PingpongWarning {
    /// A byte stream carries no empty message: size 0 was not measured.
    #[error("{transport} has no 0-byte messages (a byte stream): size 0 skipped")]
    NoEmptyMessages {
        /// The transport.
        transport: TransportName,
    },
    /// Sizes above the transport's message limit were not measured.
    #[error(
        "{transport} carries at most {max_bytes} bytes per message: sizes {} skipped",
        joined(.sizes)
    )]
    SizesSkipped {
        /// The transport.
        transport: TransportName,
        /// Its limit.
        max_bytes: usize,
        /// The sizes skipped.
        sizes: Vec<usize>,
    },
    /// A size stopped at `max_reps` with its median less precise than asked
    /// (`--precision`).
    #[error(
        "{transport} at {size} B: the median's 95% interval is {} after {reps} repetitions, \
         wider than the +-{}% asked",
        .rel_half_width.map_or("undefined".into(), |w| format!("+-{}%", significant(100.0 * w, 3))),
        significant(100.0 * .target_rel_half_width, 3)
    )]
    PrecisionNotMet {
        /// The transport.
        transport: TransportName,
        /// The size.
        size: usize,
        /// The repetitions measured (`max_reps`).
        reps: usize,
        /// The relative half-width reached (`None`: too few repetitions).
        rel_half_width: Option<f64>,
        /// The one asked for.
        target_rel_half_width: f64,
    },
    /// A size whose half round trips, in the order measured, did not hold one level
    /// ([`crate::stats::level`]): the host's state changed while it was measured.
    #[error(
        "{transport} at {size} B: the level moved while it was measured (medians of \
         {chunks} consecutive parts from {} to {} us): the host's state changed, and a \
         figure measured at another moment may differ as much",
        significant(*.low_us, 3),
        significant(*.high_us, 3)
    )]
    LevelMoved {
        /// The transport.
        transport: TransportName,
        /// The size.
        size: usize,
        /// The consecutive parts its repetitions were split into.
        chunks: usize,
        /// The fastest part's median half round trip, us.
        low_us: f64,
        /// The slowest part's.
        high_us: f64,
    },
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// `ngauge pingpong --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PingpongDoc {
    /// How the result came about.
    pub meta: Meta,
    /// The measuring pair (pinger, ponger).
    pub pair: [usize; 2],
    /// MB in `bandwidth_MBps` means 10^6 bytes.
    pub bandwidth_unit: String,
    /// Every transport's results, transport by transport.
    pub results: Vec<Record>,
    /// With several transports: per size, each one's median half round trip and
    /// its ratio to the last transport listed (the baseline: `mpi,tcp` gives MPI
    /// over raw TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// What threatens the figures.
    pub warnings: Vec<Warned<PingpongWarning>>,
    /// Whether the table shows the bandwidth in Gb/s (10^9 bits per second)
    /// instead of MB/s (`--gbps`); the JSON keeps `bandwidth_MBps`.
    #[serde(skip)]
    pub gbps: bool,
}

/// The unit of `bandwidth_MBps`.
pub const BANDWIDTH_UNIT: &str = "MB/s, MB = 10^6 bytes";

/// Side by side medians and ratios (several transports in one run).
pub type Comparison = SideBySide<TransportName>;

/// The side-by-side comparison of several sweeps (per size the median half round
/// trip); `None` for a single transport.
pub fn compare(sweeps: &[Sweep]) -> Option<Comparison> {
    let median = |t: &TransportName, size: usize| {
        let s = sweeps.iter().find(|s| s.transport == *t)?;
        let r = s.results.iter().find(|r| r.size == size)?;
        Some(r.half_rtt_us.median)
    };
    let sizes = sweeps.last()?.results.iter().map(|r| r.size);
    side_by_side(sweeps.iter().map(|s| s.transport).collect(), sizes, median)
}

/// A [`PingpongWarning::PrecisionNotMet`] per size that stopped at `max_reps`
/// short of its precision target.
fn imprecise(sweeps: &[Sweep]) -> impl Iterator<Item = PingpongWarning> + '_ {
    sweeps.iter().flat_map(|s| {
        (s.results.iter()).filter_map(|r| {
            let p = r.precision.filter(|p| !p.met)?;
            Some(PingpongWarning::PrecisionNotMet {
                transport: s.transport,
                size: r.size,
                reps: r.reps,
                rel_half_width: p.rel_half_width,
                target_rel_half_width: p.target_rel_half_width,
            })
        })
    })
}

/// A [`PingpongWarning::LevelMoved`] per size whose level moved.
fn level_moves(sweeps: &[Sweep]) -> impl Iterator<Item = PingpongWarning> + '_ {
    sweeps.iter().flat_map(|s| {
        (s.results.iter()).filter_map(|r| {
            let moved = r.level_moved?;
            Some(PingpongWarning::LevelMoved {
                transport: s.transport,
                size: r.size,
                chunks: moved.chunks,
                low_us: moved.low_median,
                high_us: moved.high_median,
            })
        })
    })
}

/// `meta.timing_loop`: per transport the loop(s) that timed its sizes
/// (`mpi=native,tcp=generic`; `a+b` if they differed, which no transport does).
pub fn timing_loops(sweeps: &[Sweep]) -> String {
    sweeps
        .iter()
        .map(|s| {
            let mut loops: Vec<&str> = s.results.iter().map(|r| r.timing_loop.as_str()).collect();
            loops.sort_unstable();
            loops.dedup();
            format!("{}={}", s.transport, loops.join("+"))
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl PingpongDoc {
    /// The document of `sweeps` (in the order measured).
    pub fn new(
        meta: Meta,
        pair: [usize; 2],
        sweeps: &[Sweep],
        warnings: &[PingpongWarning],
    ) -> Self {
        let warnings = (warnings.iter().cloned())
            .chain(imprecise(sweeps))
            .chain(level_moves(sweeps));
        PingpongDoc {
            meta,
            pair,
            bandwidth_unit: BANDWIDTH_UNIT.into(),
            results: sweeps
                .iter()
                .flat_map(|s| {
                    s.results.iter().map(|r| Record {
                        transport: s.transport,
                        wait: s.wait,
                        result: r.clone(),
                    })
                })
                .collect(),
            comparison: compare(sweeps),
            warnings: super::warning::warned(warnings),
            gbps: false,
        }
    }
}

impl super::Document for PingpongDoc {
    type Warning = PingpongWarning;

    /// Per transport a header and its table; with several, the medians side by
    /// side.
    fn render(&self) -> String {
        let cores = self
            .meta
            .pinning
            .iter()
            .take(2)
            .map(|c| c.map_or("unpinned".to_string(), |c| c.to_string()))
            .collect::<Vec<_>>()
            .join(",");
        let [pinger, ponger] = self.pair;
        let mut out = String::new();
        for t in &self.meta.transport {
            // `meta.wait` names every transport's mode: `tcp=poll,udp=block`.
            let wait = self.meta.wait.as_deref().unwrap_or_default();
            let wait = wait
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{t}=")))
                .unwrap_or("-");
            let results: Vec<&SizeResult> = self
                .results
                .iter()
                .filter(|r| r.transport == *t)
                .map(|r| &r.result)
                .collect();
            let others = results
                .iter()
                .find_map(|r| r.pairs.as_ref())
                .map_or(String::new(), |p| match &p.congestion {
                    Some(c) => format!(
                        " (the first of {} {} flows at once)",
                        p.per_pair.len(),
                        c.pattern
                    ),
                    None => format!(" (and {} more pairs at once)", p.per_pair.len() - 1),
                });
            let timed = results
                .first()
                .map_or("half round-trip times".into(), |r| timed(r));
            out += &format!(
                "{t} ping-pong, rank {pinger} <-> rank {ponger}{others}, wait {wait}, cores {cores}; \
                 {timed}; MB = 10^6 bytes\n"
            );
            out += &render_sweep(&results, self.gbps);
            out += &histograms(&results);
        }
        if let Some(c) = &self.comparison {
            let title = match self.results.first().map(|r| timed(&r.result)) {
                Some(t) if t.starts_with("half of a round") => format!("median {t}"),
                _ => "median half round trip".into(),
            };
            out += &side_by_side::render(c, &title, "median [us]", "/");
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &PingpongWarning)> {
        super::document::unwarned(&self.warnings)
    }
}

/// What the time columns hold: a half round trip for the ping-pong, half of
/// the whole timed round once it carries more than one message (see
/// `patterns::pingpong`'s module docs).
fn timed(r: &SizeResult) -> String {
    let w = r.window;
    match (r.stream_messages, r.bidirectional) {
        (Some(n), _) => {
            format!("half of a round of {n} messages ({w} in flight) and a 1 B reply")
        }
        (None, true) => {
            let m = if w == 1 { "message" } else { "messages" };
            format!("half of a round of {w} {m} each way")
        }
        (None, false) if w > 1 => format!("half of a round of {w} messages and a 1 B reply"),
        (None, false) => "half round-trip times".into(),
    }
}

/// The compact text form of each size's histogram (`--histogram`): one line per
/// non-empty bin, its edges (3 significant digits), a bar scaled to the fullest
/// bin, the count.
fn histograms(results: &[&SizeResult]) -> String {
    let mut out = String::new();
    for r in results {
        let Some(h) = &r.histogram else { continue };
        // With a window the bins hold halves of N-message rounds (`timed`).
        let what = match timed(r).as_str() {
            "half round-trip times" => format!("half round trips of {} B", r.size),
            round => format!(
                "{} B: {}",
                r.size,
                round.replacen("half of a round", "halves of rounds", 1)
            ),
        };
        out += &format!("{what}, {} bins per decade:\n", h.bins_per_decade);
        let most = h.bins.iter().map(|b| b.count).max().unwrap_or(1).max(1);
        for b in &h.bins {
            let edges = format!("{}-{}", significant(b.from_us, 3), significant(b.to_us, 3));
            out += &format!(
                "  {edges:>13} us {:<40} {}\n",
                "#".repeat((b.count * 40).div_ceil(most) as usize),
                b.count
            );
        }
    }
    out
}

/// The human table of one sweep.
fn render_sweep(results: &[&SizeResult], gbps: bool) -> String {
    let counter_names: Vec<&String> = results
        .first()
        .map(|r| r.counters.keys().collect())
        .unwrap_or_default();
    let mut header: Vec<String> = [
        "size [B]",
        "reps",
        "min [us]",
        "median [us]",
        "mean [us]",
        "p99 [us]",
        "max [us]",
        if gbps {
            "bandwidth [Gb/s]"
        } else {
            "bandwidth [MB/s]"
        },
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(
        counter_names
            .iter()
            .map(|n| short_counter_name(n).to_string()),
    );
    // Several pairs at once: the first pair's figures, then the totals.
    let multi = results.iter().any(|r| r.pairs.is_some());
    if multi {
        header.extend(["pairs", "total [MB/s]", "total [msg/s]"].map(String::from));
    }
    // A congestion pattern: against the pair streaming alone.
    let fan = results
        .iter()
        .any(|r| r.pairs.as_ref().is_some_and(|p| p.congestion.is_some()));
    if fan {
        header.extend(["1 pair [MB/s]", "flow/1 pair", "total/1 pair"].map(String::from));
    }
    // `--precision`: the interval reached, and whether it met the target.
    let precise = results.iter().any(|r| r.precision.is_some());
    if precise {
        header.extend(["median CI95 [+-%]", "met"].map(String::from));
    }
    let mut table = Table::new(header);
    for r in results {
        let h = &r.half_rtt_us;
        let mut row = vec![
            r.size.to_string(),
            r.reps.to_string(),
            format!("{:.2}", h.min),
            format!("{:.2}", h.median),
            format!("{:.2}", h.mean),
            format!("{:.2}", h.p99),
            format!("{:.2}", h.max),
            if gbps {
                // 10^6 bytes/s = 8 10^6 bits/s.
                significant(r.bandwidth_mbps * 8e-3, 4)
            } else {
                format!("{:.1}", r.bandwidth_mbps)
            },
        ];
        row.extend(
            counter_names
                .iter()
                .map(|n| r.counters.get(*n).copied().unwrap_or(0).to_string()),
        );
        if multi {
            let p = r.pairs.as_ref();
            row.push(p.map_or(1, |p| p.per_pair.len()).to_string());
            row.push(format!(
                "{:.1}",
                p.map_or(r.bandwidth_mbps, |p| p.total_bandwidth_mbps)
            ));
            row.push(format!("{:.0}", p.map_or(0.0, |p| p.total_msgs_per_s)));
        }
        if fan {
            let c = r.pairs.as_ref().and_then(|p| p.congestion.as_ref());
            row.push(c.map_or("-".into(), |c| format!("{:.1}", c.one_pair_mbps)));
            row.push(c.map_or("-".into(), |c| format!("{:.2}", c.flow_ratio)));
            row.push(c.map_or("-".into(), |c| format!("{:.2}", c.total_ratio)));
        }
        if precise {
            let p = r.precision.as_ref();
            let width = p.and_then(|p| p.rel_half_width);
            row.push(width.map_or("-".into(), |w| significant(100.0 * w, 3)));
            row.push(p.map_or("-", |p| if p.met { "yes" } else { "no" }).into());
        }
        table.row(row);
    }
    table.render()
}

/// Table headers for the transport counters (the JSON keeps the full names).
fn short_counter_name(name: &str) -> &str {
    match name {
        "lost_datagrams" => "lost",
        "duplicated_datagrams" => "dup",
        "reordered_datagrams" => "reord",
        "retransmissions" => "retx",
        "receive_timeouts" => "rto",
        "test_dropped_datagrams" => "dropped",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobWarning;
    use crate::patterns::pingpong::TimingLoop;
    use crate::stats::precision::Precision;
    use crate::stats::Summary;
    use std::collections::BTreeMap;

    fn sweep(transport: TransportName, medians: &[(usize, f64)]) -> Sweep {
        Sweep {
            transport,
            wait: WaitMode::Poll,
            results: medians
                .iter()
                .map(|&(size, median)| SizeResult {
                    size,
                    reps: 1,
                    half_rtt_us: Summary::of(&[median]).unwrap(),
                    bandwidth_mbps: size as f64 / median,
                    window: 1,
                    stream_messages: None,
                    bidirectional: false,
                    data_check: None,
                    timing_loop: TimingLoop::Generic,
                    counters: BTreeMap::new(),
                    samples: None,
                    precision: None,
                    histogram: None,
                    level_moved: None,
                    pairs: None,
                })
                .collect(),
        }
    }

    /// Issue 37: with a window the time columns are half of a round of N
    /// messages, not a half round trip, and the header says so.
    #[test]
    fn issue_37_a_window_is_labelled_as_a_round() {
        let mut s = sweep(TransportName::Tcp, &[(1000, 0.8)]);
        assert_eq!(timed(&s.results[0]), "half round-trip times");
        s.results[0].window = 16;
        assert_eq!(
            timed(&s.results[0]),
            "half of a round of 16 messages and a 1 B reply"
        );
        s.results[0].stream_messages = Some(1000);
        assert_eq!(
            timed(&s.results[0]),
            "half of a round of 1000 messages (16 in flight) and a 1 B reply"
        );
        s.results[0].stream_messages = None;
        s.results[0].bidirectional = true;
        assert_eq!(
            timed(&s.results[0]),
            "half of a round of 16 messages each way"
        );
    }

    /// Issue 37: with `--window N` the histogram's heading says that it bins
    /// halves of N-message rounds, not half round trips.
    #[test]
    fn issue_37_a_window_histogram_says_what_it_bins() {
        let mut s = sweep(TransportName::Tcp, &[(1000, 0.8)]);
        s.results[0].histogram = Some(crate::stats::Histogram::of(&[0.8, 0.9]));
        let text = histograms(&s.results.iter().collect::<Vec<_>>());
        assert!(text.starts_with("half round trips of 1000 B,"), "{text}");
        s.results[0].window = 16;
        let text = histograms(&s.results.iter().collect::<Vec<_>>());
        assert!(
            text.starts_with("1000 B: halves of rounds of 16 messages and a 1 B reply, 10 bins"),
            "{text}"
        );
    }

    /// Issue 37: Gb/s as a unit of the table (1250 MB/s = 10 Gb/s).
    #[test]
    fn issue_37_the_table_in_gbps() {
        let sweep = sweep(TransportName::Tcp, &[(1000, 0.8)]);
        let results: Vec<&SizeResult> = sweep.results.iter().collect();
        let t = render_sweep(&results, true);
        assert!(t.contains("bandwidth [Gb/s]") && t.contains("10.00"), "{t}");
        assert!(render_sweep(&results, false).contains("1250.0"));
    }

    #[test]
    fn ratios_divide_by_the_last_transport() {
        let sweeps = [
            sweep(TransportName::Mpi, &[(1, 3.0), (8, 4.0)]),
            sweep(TransportName::Tcp, &[(1, 2.0), (8, 8.0), (64, 9.0)]),
        ];
        let c = compare(&sweeps).unwrap();
        assert_eq!(c.baseline, TransportName::Tcp);
        assert_eq!(c.rows.len(), 3);
        assert_eq!(c.rows[0].ratio[&TransportName::Mpi], 1.5);
        assert_eq!(c.rows[1].ratio[&TransportName::Mpi], 0.5);
        assert!(c.rows[2].ratio.is_empty(), "mpi did not measure 64 B");
        assert!(compare(&sweeps[..1]).is_none());
        assert_eq!(timing_loops(&sweeps), "mpi=generic,tcp=generic");
    }

    /// A size whose level moved is a warning naming both levels, and its record
    /// carries the move; a size that held one level is neither.
    #[test]
    fn a_size_whose_level_moved_is_a_warning() {
        let mut s = sweep(TransportName::Tcp, &[(1, 6.0), (65536, 19.0)]);
        s.results[1].level_moved = Some(crate::stats::level::LevelMove {
            chunks: 8,
            low_median: 17.25,
            low_chunk: 2,
            high_median: 45.5,
            high_chunk: 6,
        });
        let warnings: Vec<PingpongWarning> = level_moves(std::slice::from_ref(&s)).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let json =
            serde_json::to_value(super::super::warning::Warned::from(warnings[0].clone())).unwrap();
        assert_eq!(json["kind"], "level_moved");
        assert_eq!(json["size"], 65536);
        assert_eq!(json["low_us"], 17.25);
        assert_eq!(json["high_us"], 45.5);
        let message = json["message"].as_str().unwrap();
        assert!(message.contains("tcp at 65536 B"), "{message}");
        assert!(message.contains("from 17.2 to 45.5 us"), "{message}");
        let record = |r: &SizeResult| {
            serde_json::to_value(Record {
                transport: s.transport,
                wait: s.wait,
                result: r.clone(),
            })
            .unwrap()
        };
        assert_eq!(record(&s.results[1])["level_moved"]["high_chunk"], 6);
        let held = record(&s.results[0]);
        assert!(held.get("level_moved").is_none(), "{held}");
    }

    #[test]
    fn warnings_are_tagged_records() {
        let doc = serde_json::to_value(super::super::warning::Warned::from(
            PingpongWarning::SizesSkipped {
                transport: TransportName::Udp,
                max_bytes: 65507,
                sizes: vec![65536, 131072],
            },
        ))
        .unwrap();
        assert_eq!(doc["kind"], "sizes_skipped");
        assert_eq!(doc["transport"], "udp");
        assert_eq!(
            doc["message"],
            "udp carries at most 65507 bytes per message: sizes 65536, 131072 skipped"
        );
        let job =
            serde_json::to_value(super::super::warning::Warned::from(PingpongWarning::Setup(
                JobWarning::PollOversubscribed {
                    ranks_on_host: 3,
                    cores: 2,
                }
                .into(),
            )))
            .unwrap();
        assert_eq!(job["kind"], "poll_oversubscribed");
        assert_eq!(job["cores"], 2);
    }

    /// Issue 37, `--precision`: the table says per size the interval reached
    /// and whether it met the target; each size short of it is a warning, and
    /// on stderr they are one line.
    #[test]
    fn issue_37_precision_per_size_and_one_warning_line() {
        let mut s = sweep(TransportName::Tcp, &[(1, 2.0), (8, 2.0), (64, 2.0)]);
        let verdict = |rel_half_width, met| Precision {
            target_rel_half_width: 0.01,
            rel_half_width,
            met,
            max_reps: 400,
        };
        s.results[0].precision = Some(verdict(Some(0.005), true));
        s.results[1].precision = Some(verdict(Some(0.0234), false));
        s.results[2].precision = Some(verdict(None, false));
        for r in &mut s.results[1..] {
            r.reps = 400;
        }
        let t = render_sweep(&s.results.iter().collect::<Vec<_>>(), false);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("median CI95 [+-%]") && lines[0].ends_with("met"),
            "{t}"
        );
        assert!(
            lines[1].contains("0.500") && lines[1].trim_end().ends_with("yes"),
            "{t}"
        );
        assert!(
            lines[2].contains("2.34") && lines[2].trim_end().ends_with("no"),
            "{t}"
        );
        assert!(lines[3].trim_end().ends_with("no"), "{t}");
        let w: Vec<PingpongWarning> = imprecise(std::slice::from_ref(&s)).collect();
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[0].to_string(),
            "tcp at 8 B: the median's 95% interval is +-2.34% after 400 repetitions, \
             wider than the +-1.00% asked"
        );
        assert!(w[1].to_string().contains("interval is undefined after 400"));
        let json = serde_json::to_value(super::super::warning::Warned::from(w[0].clone())).unwrap();
        assert_eq!(json["kind"], "precision_not_met");
        assert_eq!(json["size"], 8);
        let said: Vec<(String, &PingpongWarning, Option<String>)> =
            w.iter().map(|w| (String::new(), w, None)).collect();
        let said = super::super::warning::lines(&said);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("1 more like it: size 8/64"), "{said:?}");
    }
}
