//! `loggp`: the PRTT sweep between rank pairs and the LogGP parameters per protocol
//! range (Hoefler et al., "LogGP in theory and practice", sec. 2-3), over every
//! transport of the job: passes x transports, measured interleaved size by size
//! ([`crate::job::interleave`], [`crate::patterns::order`]), every candidate
//! protocol change measured again before it is reported
//! ([`crate::patterns::loggp::verify`]), each transport fitted on its own
//! and compared side by side ([`crate::report::loggp_compare`]).

use super::{binding_warnings, need_ranks, rank_clock, Context, ExperimentError};
use crate::clock::Clock;
use crate::job::{Job, JobSpec, TransportName};
use crate::launch::World;
use crate::model::confirm::Verdict;
use crate::model::loggp::{assess, assess_with_changes, AssessOptions};
use crate::model::refine::{Change, Plan, RefineOptions};
use crate::patterns::loggp::{self as pattern, PairResult, PairsMode, Params};
use crate::patterns::order;
use crate::report::loggp::{pair_doc, LoggpWarning, PairAnalysis, StreamRecord};
use crate::report::loggp_compare::compare;
use crate::report::loggp_doc::{LoggpBody, LoggpDoc, TransportFit};
use crate::spec::{LoggpSpec, SpecError};

/// Opens the job's transports, sweeps the sizes in every pass over each, verifies
/// the candidate changes and fits every pair; rank 0 gets the document, and the
/// context one record per point as it finishes. Collective: every rank calls it.
///
/// # Errors
/// A spec out of range (sizes beyond a transport's message limit among them), a
/// job of one rank, a transport that fails to open, a lost peer, a sweep that
/// cannot be fitted, a record that cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &LoggpSpec,
    ctx: &mut Context,
) -> Result<Option<LoggpDoc>, ExperimentError> {
    let mut plan = spec.plan()?;
    need_ranks(world, "loggp", 2)?;
    let clock = rank_clock(world)?;
    let largest = *plan.params.sizes.last().unwrap_or(&1) as usize;
    let opened = Job::open(job, world, |name, opts| {
        if name == TransportName::Udp && opts.recv_buffer_bytes.is_none() {
            // PRTT(n,0,s) sends n datagrams back to back; a default-sized receive
            // buffer overflows at tens of KiB, and a datagram lost inside a stream
            // stalls it. Ask for room for two streams (the kernel caps it at
            // net.core.rmem_max).
            opts.recv_buffer_bytes = Some((2 * plan.params.n * (largest + 64)).max(1 << 18));
        }
    })?;
    let mut open = opened.transports;
    let limit = open
        .iter()
        .filter_map(|o| Some((o.name, o.transport.capabilities().max_message_bytes?)))
        .min_by_key(|&(_, limit)| limit);
    let mut sweep_cut = None;
    if let Some((name, limit)) = limit.filter(|&(_, limit)| largest > limit) {
        if spec.sizes.is_some() {
            return Err(SpecError::new(
                "sizes",
                format!(
                    "{largest} bytes exceeds the {name} message limit of {limit} bytes; give \
                     sizes up to {limit} (e.g. 1K-{}K:1K)",
                    limit / 1024
                ),
            )
            .into());
        }
        // The default sweep ends at the largest message every transport carries
        // (UDP: the last 1 KiB step below its datagram limit).
        plan.params.sizes.retain(|&s| s as usize <= limit);
        sweep_cut = Some(LoggpWarning::SweepCut {
            last_bytes: plan.params.sizes.last().copied().unwrap_or(0),
            limit_bytes: limit,
        });
    }
    let several = open.len() > 1;
    // Every pass visits the sizes in its own order (one pass: ascending). One
    // transport: one sweep per pass. Several: interleaved, size by size,
    // alternating transports (the order of `job::interleave`).
    let transports = open.len();
    let chunks: Vec<(usize, Vec<u64>, usize)> = order::passes(&plan.params.sizes, plan.passes)
        .into_iter()
        .enumerate()
        .flat_map(|(pass, sizes)| -> Vec<_> {
            if !several {
                return vec![(pass, sizes, 0)];
            }
            let each = move |s: u64| (0..transports).map(move |i| (pass, vec![s], i));
            sizes.into_iter().flat_map(each).collect()
        })
        .collect();
    let total = chunks.iter().map(|c| c.1.len()).sum::<usize>() * (world.size / 2);
    let mut done = 0;
    let mut progress = ctx.progress_line();
    let mut record_error = None;
    let mut results: Vec<Vec<PairResult>> = vec![Vec::new(); open.len()];
    for (pass, sizes, i) in chunks {
        let params = Params {
            sizes,
            ..plan.params.clone()
        };
        let name = open[i].name;
        let got = pattern::run(
            &clock,
            open[i].transport.as_mut(),
            world.control.as_mut(),
            &params,
            |pair, point| {
                done += 1;
                progress.update(&format!(
                    "loggp: {name}, pair {pair}, {} bytes, pass {} ({done}/{total} points)",
                    point.size,
                    pass + 1
                ));
                let record = StreamRecord {
                    pair,
                    pass,
                    point,
                    transport: several.then_some(name),
                };
                if let Err(e) = ctx.record(&record) {
                    record_error.get_or_insert(e);
                }
            },
        )?;
        merge(&mut results[i], got);
    }
    progress.finish();
    if let Some(e) = record_error {
        return Err(e);
    }
    let results: Vec<Vec<PairResult>> = results.into_iter().map(pool_passes).collect();
    // Every candidate change measured again, and located, before it is reported.
    // Every rank takes part; rank 0 plans.
    let mut changes: Vec<Option<Vec<Vec<Change>>>> = vec![None; open.len()];
    if let Some(opts) = plan.refine {
        for ((o, results), changes) in open.iter_mut().zip(&results).zip(&mut changes) {
            let mut plans: Option<Vec<Plan>> = (world.rank == 0).then(|| {
                results
                    .iter()
                    .map(|r| plan_for(&plan.assess, r, opts))
                    .collect()
            });
            pattern::verify::verify(
                &clock,
                o.transport.as_mut(),
                world.control.as_mut(),
                &plan.params,
                plans.as_deref_mut(),
            )?;
            *changes = plans.map(|p| p.into_iter().map(Plan::finish).collect());
        }
    }
    let waits: Vec<_> = open.iter().map(|o| (o.name, o.wait)).collect();
    // Dropping the transports before anything else lets a UDP peer stop lingering
    // for retransmissions.
    drop(open);
    let pinning = world.gather_pinning()?;
    if world.rank != 0 {
        return Ok(None);
    }
    let analysed = waits
        .iter()
        .zip(&results)
        .zip(&changes)
        .map(|((&(transport, _), results), changes)| {
            let changes = |i: usize| changes.as_ref().map(|c| &c[i]);
            let pairs = results.iter().enumerate();
            pairs
                .map(|(i, r)| analyse(&plan.assess, transport, r, changes(i)))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let firsts: Vec<_> = waits
        .iter()
        .zip(&analysed)
        .map(|((t, _), a)| (t.as_str(), &a[0]))
        .collect();
    let comparison = compare(&firsts);
    // Ranks measured together must not share a core: each pair on its own, or all
    // pairs at once with `--pairs concurrent` (reported with the first pair).
    let group = |client: usize, server: usize| match plan.params.pairs {
        PairsMode::InTurn => Some(vec![client, server]),
        PairsMode::Concurrent if client == 0 => Some((0..world.size / 2 * 2).collect()),
        PairsMode::Concurrent => None,
    };
    let mut fits: Vec<TransportFit> = waits
        .iter()
        .zip(&analysed)
        .map(|(&(transport, wait), analyses)| {
            let pairs = analyses
                .iter()
                .map(|a| {
                    let extra: Vec<LoggpWarning> = sweep_cut
                        .iter()
                        .cloned()
                        .chain(LoggpWarning::undecided(&a.changes))
                        .chain(LoggpWarning::disturbed(&a.points, wait))
                        .chain(
                            opened
                                .warnings
                                .iter()
                                .map(|w| LoggpWarning::Setup(w.clone().into())),
                        )
                        .chain(
                            binding_warnings(world, &pinning, group(a.client, a.server))
                                .map(LoggpWarning::Setup),
                        )
                        .collect();
                    pair_doc(
                        a,
                        plan.assess.low_weight,
                        plan.decide_target,
                        &extra,
                        spec.samples,
                    )
                })
                .collect();
            TransportFit::new(transport, several.then_some(wait), pairs)
        })
        .collect();
    let meta = ctx
        .meta(clock.source(), clock.rate().hz)
        .transports(&waits)
        .job(world, pinning)
        .build();
    let body = if several {
        LoggpBody::Several {
            transports: fits,
            comparison,
        }
    } else {
        LoggpBody::One(fits.remove(0))
    };
    Ok(Some(LoggpDoc {
        body,
        detector: plan.assess.detector.kind(),
        n: plan.params.n,
        reps: plan.params.reps,
        passes: plan.passes,
        dg: plan.params.delay,
        meta,
    }))
}

/// The confirmation plan of one pair's sweep: the detector's changes as
/// candidates (none when the sweep cannot be assessed; the analysis reports why).
fn plan_for(assess_opts: &AssessOptions, r: &PairResult, opts: RefineOptions) -> Plan {
    let samples: Vec<_> = r.points.iter().map(|p| p.sample()).collect();
    let readings: Vec<_> = r.points.iter().map(pattern::verify::reading).collect();
    let steps = assess(&samples, assess_opts)
        .map(|a| a.changes)
        .unwrap_or_default();
    Plan::new(&readings, &steps, opts)
}

/// Appends the points of a sweep over more sizes to the pairs measured so far.
fn merge(into: &mut Vec<PairResult>, got: Vec<PairResult>) {
    if into.is_empty() {
        *into = got;
        return;
    }
    for (pair, more) in into.iter_mut().zip(got) {
        pair.points.extend(more.points);
    }
}

/// One pair's fit over `transport`: its ranges start at the confirmed changes
/// (`changes`, after verification) or at the detector's (`None`).
fn analyse(
    opts: &AssessOptions,
    transport: TransportName,
    r: &PairResult,
    changes: Option<&Vec<Change>>,
) -> Result<PairAnalysis, ExperimentError> {
    let fit = |error| ExperimentError::Fit {
        transport,
        client: r.client,
        server: r.server,
        error,
    };
    let samples: Vec<_> = r.points.iter().map(|p| p.sample()).collect();
    let Some(changes) = changes else {
        let assessment = assess(&samples, opts).map_err(fit)?;
        return Ok(PairAnalysis::unconfirmed(
            r.client,
            r.server,
            r.points.clone(),
            assessment,
        ));
    };
    let confirmed: Vec<u64> = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Confirmed)
        .map(|c| c.bytes)
        .collect();
    Ok(PairAnalysis {
        client: r.client,
        server: r.server,
        points: r.points.clone(),
        assessment: assess_with_changes(&samples, opts, &confirmed).map_err(fit)?,
        changes: changes.clone(),
    })
}

/// Pools every pair's passes over each size into one point per size, ascending.
fn pool_passes(pairs: Vec<PairResult>) -> Vec<PairResult> {
    pairs
        .into_iter()
        .map(|mut pair| {
            pair.points.sort_by_key(|p| p.size);
            let pooled = pair
                .points
                .chunk_by(|a, b| a.size == b.size)
                .map(|same| pattern::pool(same).expect("points of one size and n"))
                .collect();
            pair.points = pooled;
            pair
        })
        .collect()
}
