//! `ngauge pingpong`: latency and bandwidth per message size between ranks 0 and 1.

use super::interleave;
use crate::cli::{GlobalArgs, PingpongArgs, TransportName};
use crate::UsageError;
use anyhow::Context;
use ngauge::clock::{FrequencyControl, SystemClock};
use ngauge::patterns::pingpong::{self, Params, SizeResult, PINGER, PONGER};
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::progress::Progress;
use ngauge::report::table::Table;
use ngauge::report::Meta;
use ngauge::sizes::parse_sizes;
use serde::Serialize;
use std::io::Write;

/// One JSON record: a size's result and the transport it was measured over.
#[derive(Debug, Serialize)]
struct Record<'a> {
    transport: &'static str,
    wait: &'static str,
    #[serde(flatten)]
    result: &'a SizeResult,
}

/// The `--json` document.
#[derive(Debug, Serialize)]
struct Document<'a> {
    meta: Meta,
    /// The measuring pair (pinger, ponger).
    pair: [usize; 2],
    /// MB in `bandwidth_MBps` means 10^6 bytes.
    bandwidth_unit: &'static str,
    results: Vec<Record<'a>>,
    /// With several transports: per size, each one's median half round trip and
    /// its ratio to the last transport listed (the baseline: `-t mpi,tcp` gives
    /// MPI over raw TCP).
    #[serde(skip_serializing_if = "Option::is_none")]
    comparison: Option<Comparison>,
    warnings: &'a [String],
}

/// Side by side medians and ratios (several transports in one run).
#[derive(Debug, Serialize)]
struct Comparison {
    /// The transport the ratios divide by.
    baseline: &'static str,
    rows: Vec<ComparisonRow>,
}

#[derive(Debug, Serialize)]
struct ComparisonRow {
    size: usize,
    /// Median half round trip per transport, in microseconds.
    median_us: std::collections::BTreeMap<&'static str, f64>,
    /// Median over the baseline's median, per other transport.
    ratio: std::collections::BTreeMap<&'static str, f64>,
}

/// The side-by-side comparison of several sweeps; `None` for a single transport.
fn compare(sweeps: &[Sweep]) -> Option<Comparison> {
    let baseline = sweeps.last().filter(|_| sweeps.len() > 1)?;
    let rows = baseline
        .results
        .iter()
        .map(|base| {
            let mut median_us = std::collections::BTreeMap::new();
            let mut ratio = std::collections::BTreeMap::new();
            for s in sweeps {
                if let Some(r) = s.results.iter().find(|r| r.size == base.size) {
                    median_us.insert(s.transport, r.half_rtt_us.median);
                    if s.transport != baseline.transport && base.half_rtt_us.median > 0.0 {
                        ratio.insert(s.transport, r.half_rtt_us.median / base.half_rtt_us.median);
                    }
                }
            }
            ComparisonRow {
                size: base.size,
                median_us,
                ratio,
            }
        })
        .collect();
    Some(Comparison {
        baseline: baseline.transport,
        rows,
    })
}

/// The human side-by-side table: per size each transport's median and its ratio to
/// the baseline.
fn render_comparison(c: &Comparison, order: &[&'static str]) -> String {
    let others: Vec<&str> = order.iter().copied().filter(|t| *t != c.baseline).collect();
    let mut header = vec!["size [B]".to_string()];
    header.extend(order.iter().map(|t| format!("{t} median [us]")));
    header.extend(others.iter().map(|t| format!("{t}/{}", c.baseline)));
    let mut table = Table::new(header);
    for row in &c.rows {
        let mut cells = vec![row.size.to_string()];
        cells.extend(order.iter().map(|t| {
            row.median_us
                .get(t)
                .map_or("-".to_string(), |m| format!("{m:.2}"))
        }));
        cells.extend(others.iter().map(|t| {
            row.ratio
                .get(t)
                .map_or("-".to_string(), |r| format!("{r:.3}"))
        }));
        table.row(cells);
    }
    table.render()
}

struct Sweep {
    transport: &'static str,
    wait: &'static str,
    results: Vec<SizeResult>,
}

/// Hidden test hooks: `NGAUGE_TEST_DIE_AFTER_SIZE=BYTES` makes rank
/// `NGAUGE_TEST_DIE_RANK` (default 1) kill itself with SIGKILL right after that size
/// (with `NGAUGE_TEST_DIE_SIGNAL=STOP`: stop itself, a peer that hangs).
fn die_hook() -> anyhow::Result<Option<(usize, usize)>> {
    let Ok(size) = std::env::var("NGAUGE_TEST_DIE_AFTER_SIZE") else {
        return Ok(None);
    };
    let size = ngauge::sizes::parse_size(&size).context("NGAUGE_TEST_DIE_AFTER_SIZE")? as usize;
    let rank = match std::env::var("NGAUGE_TEST_DIE_RANK") {
        Ok(r) => r.parse().context("NGAUGE_TEST_DIE_RANK")?,
        Err(_) => PONGER,
    };
    Ok(Some((size, rank)))
}

pub fn run(global: &GlobalArgs, args: &PingpongArgs) -> anyhow::Result<()> {
    let sizes: Vec<usize> = parse_sizes(&args.sizes)
        .map_err(|e| UsageError(format!("--sizes: {e}")))?
        .into_iter()
        .map(|s| s as usize)
        .collect();
    if global.np < 2 && global.size.is_none_or(|s| s < 2) {
        return Err(UsageError("pingpong needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    let die = die_hook()?;
    super::with_world(global, |world| {
        let (clock, calibration) = SystemClock::calibrated();
        let rank = world.rank;
        // Every rank's core, for `meta`.
        let core = world.pinned_core.map_or(-1i64, |c| c as i64);
        let cores: Vec<Option<usize>> = world
            .control
            .gather(0, &core.to_le_bytes())?
            .iter()
            .map(|b| {
                let c = i64::from_le_bytes(b.as_slice().try_into().unwrap_or([255; 8]));
                usize::try_from(c).ok()
            })
            .collect();
        let mut writer = match (&global.output, rank) {
            (Some(path), 0) => Some(
                JsonlWriter::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            _ => None,
        };
        let mut progress = Progress::new(rank == 0 && ngauge::launch::local::stderr_is_terminal());
        let mut warnings = super::binding_warnings(world, &cores, [vec![PINGER, PONGER]]);
        let mut sweeps = Vec::new();
        let mut waits = Vec::new();
        // Open every transport first, then measure them interleaved, size by size
        // (see `interleave`).
        let mut open = Vec::new();
        for opened in interleave::open_all(global, world, &mut warnings, |_, _| {})? {
            let name = opened.name;
            waits.push(format!("{}={}", name.as_str(), opened.wait));
            let mut these = sizes.clone();
            if name == TransportName::Tcp && these.contains(&0) {
                // A byte stream carries no empty messages: nothing would be timed.
                warnings.push("tcp has no 0-byte messages (a byte stream): size 0 skipped".into());
                these.retain(|&s| s > 0);
            }
            if let Some(max) = opened.transport.capabilities().max_message_bytes {
                let skipped: Vec<String> = these
                    .iter()
                    .filter(|&&s| s > max)
                    .map(usize::to_string)
                    .collect();
                if !skipped.is_empty() {
                    warnings.push(format!(
                        "{} carries at most {max} bytes per message: sizes {} skipped",
                        name.as_str(),
                        skipped.join(", ")
                    ));
                }
                these.retain(|&s| s <= max);
            }
            sweeps.push(Sweep {
                transport: name.as_str(),
                wait: opened.wait,
                results: Vec::new(),
            });
            open.push((name, opened.transport, these));
        }
        let per_transport: Vec<Vec<usize>> =
            open.iter().map(|(_, _, these)| these.clone()).collect();
        let order = interleave::schedule(&sizes, &per_transport);
        let total = order.len();
        let mut done = 0usize;
        for (size, i) in order {
            let (name, transport, _) = &mut open[i];
            let params = Params {
                sizes: vec![size],
                reps: args.reps as usize,
                warmup: args.warmup as usize,
                check: args.check,
                native_loop: args.native_loop,
                samples: false,
            };
            let wait = sweeps[i].wait;
            let results = pingpong::run(
                &clock,
                transport.as_mut(),
                world.control.as_mut(),
                &params,
                &mut |size, result| {
                    if let (Some(w), Some(r)) = (writer.as_mut(), result) {
                        w.write(&Record {
                            transport: name.as_str(),
                            wait,
                            result: r,
                        })
                        .map_err(|e| format!("writing the output file: {e}"))?;
                    }
                    done += 1;
                    progress.update(&format!(
                        "{}: {done}/{total} points ({size} B done)",
                        name.as_str()
                    ));
                    if die.is_some_and(|(s, r)| s == size && r == rank) {
                        let signal = match std::env::var("NGAUGE_TEST_DIE_SIGNAL").as_deref() {
                            Ok("STOP") => rustix::process::Signal::STOP,
                            _ => rustix::process::Signal::KILL,
                        };
                        let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
                    }
                    Ok(())
                },
            );
            progress.finish();
            sweeps[i].results.extend(results?);
        }
        // Dropping the transports before anything else lets a UDP peer stop
        // lingering for retransmissions.
        drop(open);
        if rank != 0 {
            return Ok(());
        }
        if global.json {
            let mut meta = Meta::for_this_host(
                clock.source().as_str(),
                calibration.rate.hz,
                &FrequencyControl::read().description,
            );
            meta.transport = global.transport.iter().map(|t| t.as_str().into()).collect();
            meta.wait = Some(waits.join(","));
            meta.timing_loop = Some(timing_loops(&sweeps));
            meta.launcher = world.env.kind.describe().into();
            meta.np = world.size;
            meta.pinning = cores;
            let records = sweeps
                .iter()
                .flat_map(|s| {
                    s.results.iter().map(|r| Record {
                        transport: s.transport,
                        wait: s.wait,
                        result: r,
                    })
                })
                .collect();
            super::print_json(&Document {
                meta,
                pair: [PINGER, PONGER],
                bandwidth_unit: "MB/s, MB = 10^6 bytes",
                results: records,
                comparison: compare(&sweeps),
                warnings: &warnings,
            })?;
        } else {
            let mut out = std::io::stdout().lock();
            for s in &sweeps {
                writeln!(
                    out,
                    "{} ping-pong, rank {PINGER} <-> rank {PONGER}, wait {}, cores {}; \
                     half round-trip times; MB = 10^6 bytes",
                    s.transport,
                    s.wait,
                    cores
                        .iter()
                        .take(2)
                        .map(|c| c.map_or("unpinned".to_string(), |c| c.to_string()))
                        .collect::<Vec<_>>()
                        .join(",")
                )?;
                write!(out, "{}", render(&s.results))?;
            }
            if let Some(c) = compare(&sweeps) {
                let order: Vec<&'static str> = sweeps.iter().map(|s| s.transport).collect();
                writeln!(
                    out,
                    "side by side (measured interleaved, size by size): median half \
                     round trip, ratio to {}",
                    c.baseline
                )?;
                write!(out, "{}", render_comparison(&c, &order))?;
            }
        }
        for w in &warnings {
            eprintln!("ngauge: warning: {w}");
        }
        Ok(())
    })
}

/// `meta.timing_loop`: per transport the loop(s) that timed its sizes
/// (`mpi=native,tcp=generic`; `a+b` if they differed, which no transport does).
fn timing_loops(sweeps: &[Sweep]) -> String {
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

/// The human table of one sweep.
fn render(results: &[SizeResult]) -> String {
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
        "bandwidth [MB/s]",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(
        counter_names
            .iter()
            .map(|n| short_counter_name(n).to_string()),
    );
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
            format!("{:.1}", r.bandwidth_mbps),
        ];
        row.extend(
            counter_names
                .iter()
                .map(|n| r.counters.get(*n).copied().unwrap_or(0).to_string()),
        );
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
