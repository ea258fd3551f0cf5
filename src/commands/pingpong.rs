//! `ngauge pingpong`: latency and bandwidth per message size between ranks 0 and 1.

use super::common::UsageError;
use crate::cli::{GlobalArgs, PingpongArgs};
use anyhow::Context;
use ngauge::clock::SystemClock;
use ngauge::job::{interleave, TransportName};
use ngauge::patterns::pingpong::{self, SizeResult, PINGER, PONGER};
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::pingpong::{
    timing_loops, Comparison, PingpongDoc, PingpongWarning, Record, Sweep,
};
use ngauge::report::progress::Progress;
use ngauge::report::table::Table;
use ngauge::spec::{PingpongSpec, SizeList};
use std::io::Write;

/// The human side-by-side table: per size each transport's median and its ratio to
/// the baseline.
fn render_comparison(c: &Comparison, order: &[TransportName]) -> String {
    let others: Vec<TransportName> = order.iter().copied().filter(|t| *t != c.baseline).collect();
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

impl PingpongArgs {
    /// The spec these flags ask for.
    pub fn spec(&self) -> Result<PingpongSpec, UsageError> {
        Ok(PingpongSpec {
            sizes: self
                .sizes
                .parse::<SizeList>()
                .map_err(|e| UsageError(format!("--sizes: {e}")))?,
            reps: self.reps,
            warmup: self.warmup,
            check: self.check,
            native_loop: self.native_loop,
            samples: self.samples,
            window: self.window,
        })
    }
}

pub fn run(global: &GlobalArgs, args: &PingpongArgs) -> anyhow::Result<()> {
    run_spec(global, &args.spec()?)
}

pub fn run_spec(global: &GlobalArgs, args: &PingpongSpec) -> anyhow::Result<()> {
    args.validate().map_err(super::common::spec_usage)?;
    let sizes: Vec<usize> = args.sizes.0.iter().map(|&s| s as usize).collect();
    if global.size.map_or(global.np < 2, |s| s < 2) {
        return Err(UsageError("pingpong needs at least 2 ranks (--np 2 or more)".into()).into());
    }
    if sizes.iter().all(|&s| s == 0)
        && (global.transport.is_empty() || global.transport.contains(&TransportName::Tcp))
    {
        return Err(UsageError(
            "--sizes: only empty messages, which a byte stream (tcp) cannot carry: nothing to measure"
                .into(),
        )
        .into());
    }
    super::common::check_outputs(global, &[])?;
    let die = die_hook()?;
    super::common::with_world(global, |world| {
        super::common::need_two_ranks(world, "pingpong")?;
        let (clock, calibration) = SystemClock::calibrated();
        let rank = world.rank;
        // Every rank's core, for `meta`.
        let cores = world.gather_pinning()?;
        let mut writer = match (&global.output, rank) {
            (Some(path), 0) => Some(
                JsonlWriter::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            _ => None,
        };
        let mut progress = Progress::line(rank == 0 && ngauge::launch::local::stderr_is_terminal());
        let mut sweeps = Vec::new();
        // Open every transport first, then measure them interleaved, size by size
        // (see `interleave`).
        let job = super::common::open_job(global, world, |_, _| {})?;
        let mut warnings: Vec<PingpongWarning> =
            job.warnings.into_iter().map(PingpongWarning::Job).collect();
        // Issue 20: the two measured ranks must not share a core.
        warnings.extend(
            ngauge::launch::binding::check_groups(
                &world.peers,
                &cores,
                world.env.kind,
                [vec![PINGER, PONGER]],
            )
            .into_iter()
            .map(PingpongWarning::Binding),
        );
        let mut open = Vec::new();
        for opened in job.transports {
            let name = opened.name;
            let mut these = sizes.clone();
            if name == TransportName::Tcp && these.contains(&0) {
                // A byte stream carries no empty messages: nothing would be timed.
                warnings.push(PingpongWarning::NoEmptyMessages { transport: name });
                these.retain(|&s| s > 0);
            }
            if let Some(max) = opened.transport.capabilities().max_message_bytes {
                let skipped: Vec<usize> = these.iter().copied().filter(|&s| s > max).collect();
                if !skipped.is_empty() {
                    warnings.push(PingpongWarning::SizesSkipped {
                        transport: name,
                        max_bytes: max,
                        sizes: skipped,
                    });
                }
                these.retain(|&s| s <= max);
            }
            sweeps.push(Sweep {
                transport: name,
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
            let params = args.params(vec![size]);
            let wait = sweeps[i].wait;
            let results = pingpong::run(
                &clock,
                transport.as_mut(),
                world.control.as_mut(),
                &params,
                &mut |size, result| {
                    if let (Some(w), Some(r)) = (writer.as_mut(), result) {
                        w.write(&Record {
                            transport: *name,
                            wait,
                            result: r.clone(),
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
            let waits: Vec<_> = sweeps.iter().map(|s| (s.transport, s.wait)).collect();
            let meta = super::common::meta(clock.source(), calibration.rate.hz)
                .transports_named(&waits)
                .timing_loop(timing_loops(&sweeps))
                .job(world, cores)
                .build();
            super::common::print_json(&PingpongDoc::new(
                meta,
                [PINGER, PONGER],
                &sweeps,
                &warnings,
            ))?;
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
            if let Some(c) = ngauge::report::pingpong::compare(&sweeps) {
                let order: Vec<TransportName> = sweeps.iter().map(|s| s.transport).collect();
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
            let hint = match w {
                PingpongWarning::Job(j) => super::common::job_hint(j),
                PingpongWarning::Binding(b) => Some(b.hint().into()),
                _ => None,
            };
            super::common::warn(w, hint);
        }
        Ok(())
    })
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
