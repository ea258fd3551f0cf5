//! `pingpong`: latency and bandwidth per message size between ranks 0 and 1, over
//! every transport of the job, measured interleaved size by size
//! ([`crate::job::interleave`], [`crate::patterns::pingpong`]).

use super::{binding_warnings, need_ranks, Context, ExperimentError};
use crate::clock::SystemClock;
use crate::job::{interleave, Job, JobSpec, TransportName};
use crate::launch::World;
use crate::patterns::fan::{self, Congestion};
use crate::patterns::pairs::{self, schedule};
use crate::patterns::pingpong::{self, PINGER, PONGER};
use crate::report::pingpong::{timing_loops, PingpongDoc, PingpongWarning, Record, Sweep};
use crate::spec::PingpongSpec;

/// Opens the job's transports and sweeps the sizes over each; rank 0 gets the
/// document, and the context gets one record per size and transport as it
/// finishes. Collective: every rank calls it.
///
/// # Errors
/// A spec out of range, a job of one rank, a transport that fails to open, a lost
/// peer, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &PingpongSpec,
    ctx: &mut Context,
) -> Result<Option<PingpongDoc>, ExperimentError> {
    spec.validate()?;
    spec.validate_for_job(&job.transports)?;
    let pairs = spec.pairs as usize;
    need_ranks(world, "pingpong", 2 * pairs)?;
    let die = die_hook()?;
    let sizes: Vec<usize> = spec.sizes.0.iter().map(|&s| s as usize).collect();
    let (clock, calibration) = SystemClock::calibrated_on(ctx.timer);
    let rank = world.rank;
    // Every rank's core, for `meta`.
    let cores = world.gather_pinning()?;
    let mut progress = ctx.progress_line();
    let mut sweeps = Vec::new();
    // Open every transport first, then measure them interleaved, size by size.
    let opened = Job::open(job, world, |_, _| {})?;
    let mut warnings: Vec<PingpongWarning> = opened
        .warnings
        .into_iter()
        .map(|w| PingpongWarning::Setup(w.into()))
        .collect();
    // The measured ranks must not share a core.
    let measured = if spec.pattern.is_some() {
        (0..world.size).collect()
    } else if pairs > 1 {
        (0..2 * pairs).collect()
    } else {
        vec![PINGER, PONGER]
    };
    warnings.extend(binding_warnings(world, &cores, [measured]).map(PingpongWarning::Setup));
    let mut open = Vec::new();
    for o in opened.transports {
        let name = o.name;
        let mut these = sizes.clone();
        if name == TransportName::Tcp && these.contains(&0) {
            // A byte stream carries no empty messages: nothing would be timed.
            warnings.push(PingpongWarning::NoEmptyMessages { transport: name });
            these.retain(|&s| s > 0);
        }
        if let Some(max) = o.transport.capabilities().max_message_bytes {
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
            wait: o.wait,
            results: Vec::new(),
        });
        open.push((name, o.transport, these));
    }
    let per_transport: Vec<Vec<usize>> = open.iter().map(|(_, _, these)| these.clone()).collect();
    let order = interleave::schedule(&sizes, &per_transport);
    let total = order.len();
    let mut done = 0usize;
    for (size, i) in order {
        let (name, transport, _) = &mut open[i];
        let wait = sweeps[i].wait;
        if pairs > 1 || spec.pattern.is_some() {
            // Several pairs at once over the multi-pair engine (osu_multi_lat),
            // or rank 0's flows and then the one pair alone (Netgauge's 1toN).
            let params = spec.params(vec![size]);
            let (control, t) = (world.control.as_mut(), transport.as_mut());
            let (measured, congestion) = match spec.pattern {
                Some(fan) => {
                    let flows = fan::run(&clock, t, control, fan, &params)?;
                    let pair = [vec![Congestion::reference(fan)]];
                    let one = pairs::run(&clock, t, control, &pair, &params, &mut |_| Ok(()))?;
                    let congestion = Congestion::of(fan, &flows, &one);
                    (flows, congestion)
                }
                None => {
                    let steps = schedule::first_pairs(pairs);
                    let all = pairs::run(&clock, t, control, &steps, &params, &mut |_| Ok(()))?;
                    (all, None)
                }
            };
            if let Some(mut result) =
                pairs::size_result(measured, spec.reps as usize, spec.bidirectional)
            {
                if let Some(p) = &mut result.pairs {
                    p.congestion = congestion;
                }
                ctx.record(&Record {
                    transport: *name,
                    wait,
                    result: result.clone(),
                })?;
                sweeps[i].results.push(result);
            }
            continue;
        }
        let results = pingpong::run(
            &clock,
            transport.as_mut(),
            world.control.as_mut(),
            &spec.params(vec![size]),
            &mut |size, result| {
                if let Some(r) = result {
                    ctx.record(&Record {
                        transport: *name,
                        wait,
                        result: spec.finish(r.clone()),
                    })
                    .map_err(|e| e.to_string())?;
                }
                done += 1;
                progress.update(&format!(
                    "{}: {done}/{total} points ({size} B done)",
                    name.as_str()
                ));
                if die.is_some_and(|(s, r)| s == size && r == rank) {
                    die_now();
                }
                Ok(())
            },
        );
        progress.finish();
        sweeps[i]
            .results
            .extend(results?.into_iter().map(|r| spec.finish(r)));
    }
    // Dropping the transports before anything else lets a UDP peer stop lingering
    // for retransmissions.
    drop(open);
    if rank != 0 {
        return Ok(None);
    }
    let waits: Vec<_> = sweeps.iter().map(|s| (s.transport, s.wait)).collect();
    let meta = ctx
        .meta(clock.source(), calibration.rate.hz)
        .transports_named(&waits)
        .timing_loop(timing_loops(&sweeps))
        .job(world, cores)
        .build();
    let doc = PingpongDoc::new(meta, [PINGER, PONGER], &sweeps, &warnings);
    Ok(Some(PingpongDoc {
        gbps: spec.gbps,
        ..doc
    }))
}

/// Hidden test hook: `NGAUGE_TEST_DIE_AFTER_SIZE=BYTES` makes rank
/// `NGAUGE_TEST_DIE_RANK` (default 1) kill itself with SIGKILL right after that size
/// (with `NGAUGE_TEST_DIE_SIGNAL=STOP`: stop itself, a peer that hangs).
fn die_hook() -> Result<Option<(usize, usize)>, ExperimentError> {
    let Ok(size) = std::env::var("NGAUGE_TEST_DIE_AFTER_SIZE") else {
        return Ok(None);
    };
    let bad = |what: &str, e: String| ExperimentError::TestHook(format!("{what}: {e}"));
    let size = crate::sizes::parse_size(&size)
        .map_err(|e| bad("NGAUGE_TEST_DIE_AFTER_SIZE", e.to_string()))? as usize;
    let rank = match std::env::var("NGAUGE_TEST_DIE_RANK") {
        Ok(r) => r
            .parse()
            .map_err(|e: std::num::ParseIntError| bad("NGAUGE_TEST_DIE_RANK", e.to_string()))?,
        Err(_) => PONGER,
    };
    Ok(Some((size, rank)))
}

/// The die hook's end: SIGKILL, or SIGSTOP with `NGAUGE_TEST_DIE_SIGNAL=STOP`.
fn die_now() {
    let signal = match std::env::var("NGAUGE_TEST_DIE_SIGNAL").as_deref() {
        Ok("STOP") => rustix::process::Signal::STOP,
        _ => rustix::process::Signal::KILL,
    };
    let _ = rustix::process::kill_process(rustix::process::getpid(), signal);
}
