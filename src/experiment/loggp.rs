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
use crate::model::confirm::Reading;
use crate::model::confirm::{Undecided, Verdict};
use crate::model::loggp::{assess, assess_with_changes, AssessOptions};
use crate::model::propose::hint_steps;
use crate::model::refine::{Change, Plan, RefineOptions};
use crate::model::sensitivity::{beside_shape_faults, doubt_order};
use crate::patterns::loggp::{self as pattern, PairResult, PairsMode, Params};
use crate::patterns::order;
use crate::report::loggp::{
    self as loggp_report, pair_doc, DoubtRun, LoggpWarning, PairAnalysis, StreamRecord,
};
use crate::report::loggp_compare::compare;
use crate::report::loggp_doc::{LoggpBody, LoggpDoc, TransportFit};
use crate::spec::loggp::{LoggpPlan, MIN_CAPPED_DOUBT_BUDGET_S};
use crate::spec::{LoggpSpec, SpecError};
use crate::units::Nanos;

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
    let clock = rank_clock(world, ctx.timer)?;
    let started = clock.now();
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
            warm: pass > 0,
            reps: order::share(plan.params.reps, plan.passes, pass),
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
    let round_params = confirmation_round(&plan);
    let mut changes: Vec<Option<Vec<Vec<Change>>>> = vec![None; open.len()];
    let mut doubts: Vec<Option<Vec<DoubtRun>>> = vec![None; open.len()];
    if let Some(opts) = plan.refine {
        for (((o, results), changes), doubts) in open
            .iter_mut()
            .zip(&results)
            .zip(&mut changes)
            .zip(&mut doubts)
        {
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
                &round_params,
                plans.as_deref_mut(),
            )?;
            *changes = plans.map(|p| p.into_iter().map(Plan::finish).collect());
            let mut measure = |plans: Option<&mut [Plan]>, more: &mut dyn FnMut() -> bool| {
                pattern::verify::verify_while(
                    &clock,
                    o.transport.as_mut(),
                    world.control.as_mut(),
                    &round_params,
                    plans,
                    more,
                )
            };
            let so_far = clock.rate().to_nanos(clock.now().since(started));
            *doubts = resolve_doubts(
                &clock,
                &plan,
                so_far,
                o.name,
                results,
                changes.as_deref(),
                &mut measure,
            )?;
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
        .zip(&doubts)
        .map(|(((&(transport, _), results), changes), doubts)| {
            let changes = |i: usize| changes.as_ref().map(|c| &c[i]);
            let doubt = |i: usize| doubts.as_ref().map(|d| d[i].clone());
            let pairs = results.iter().enumerate();
            pairs
                .map(|(i, r)| analyse(&plan.assess, transport, r, changes(i), doubt(i)))
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

/// The parameters of a confirmation, location or doubt round: one more pass
/// over its sizes, taking one pass's share of the repetitions as the sweep's
/// passes do ([`order::share`]). A round that took the whole total would cost
/// as much per size as the sweep's passes together, and a bisection takes tens
/// of rounds.
fn confirmation_round(plan: &LoggpPlan) -> Params {
    Params {
        reps: order::share(plan.params.reps, plan.passes, 0),
        ..plan.params.clone()
    }
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
/// (`changes`, after verification, and the boundaries `doubt` confirmed) or at
/// the detector's (`None`).
fn analyse(
    opts: &AssessOptions,
    transport: TransportName,
    r: &PairResult,
    changes: Option<&Vec<Change>>,
    doubt: Option<DoubtRun>,
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
    let mut changes = changes.clone();
    // The doubt rounds' changes are reported when confirmed, and when confirmed
    // by the passes but not placed at a byte (undecided, which the run must say).
    let found = doubt.iter().flat_map(|d| &d.changes);
    let reported = |c: &&Change| {
        c.verdict == Verdict::Confirmed
            || matches!(c.undecided, Some(Undecided::Unplaced | Undecided::Split))
    };
    changes.extend(found.filter(reported).cloned());
    changes.sort_by_key(|c| c.bytes);
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
        changes,
        doubt,
    })
}

/// The time past the doubt budget, as a fraction of the plan's budget before
/// any cut to the sweep's time ([`locate_grace`]), that [`resolve_doubts`]
/// gives the bisections under way when the budget is spent, measuring them
/// alone ([`Plan::locate_only`]): a bisection needs tens of rounds of three
/// sizes, and without them a change the passes confirmed would be reported
/// undecided for want of time ([`crate::model::confirm::Undecided::Unplaced`]).
const LOCATE_GRACE: f64 = 1.0;

/// Boundaries opened for doubt per pair and round of [`resolve_doubts`], in
/// [`doubt_order`] (each stretch's worst in turn), before their neighbours
/// ([`Plan::doubt`]): each costs six sizes a pass, a neighbour one or two, and
/// the budget is checked between passes.
const DOUBTS_PER_ROUND: usize = 2;

/// Measures plans' rounds on every rank while rank 0's budget check says so
/// ([`pattern::verify::verify_while`]); returns the rounds measured.
type MeasureRounds<'a> = dyn FnMut(Option<&mut [Plan]>, &mut dyn FnMut() -> bool) -> Result<usize, pattern::PatternError>
    + 'a;

/// Spends repetitions where the doubt is (issue 36): after the confirmation,
/// computes every pair's stretches as the report will ([`loggp_report::stretches`])
/// and hands the boundaries whose bound is above the target to the
/// confirmation ([`Plan::doubt`]) as fresh interleaved passes through `measure`
/// ([`pattern::verify::verify_while`]); then again with the new bounds, until
/// no boundary is left to open or the budget is spent (checked before every
/// pass): [`doubt_budget`]. Collective: `changes` is `Some` on rank 0 only, which plans
/// and gets one [`DoubtRun`] per pair. A budget of zero measures nothing and
/// sends nothing: `None` on every rank.
fn resolve_doubts<C: Clock>(
    clock: &C,
    plan: &LoggpPlan,
    so_far: Nanos,
    transport: TransportName,
    results: &[PairResult],
    changes: Option<&[Vec<Change>]>,
    measure: &mut MeasureRounds,
) -> Result<Option<Vec<DoubtRun>>, ExperimentError> {
    let Some(opts) = plan.refine.filter(|_| plan.doubt_budget.0 > 0.0) else {
        return Ok(None);
    };
    let start = clock.now();
    let spent = || clock.rate().to_nanos(clock.now().since(start));
    let budget = doubt_budget(plan, so_far);
    let readings: Vec<Vec<Reading>> = results
        .iter()
        .map(|r| r.points.iter().map(pattern::verify::reading).collect())
        .collect();
    let mut plans: Option<Vec<Plan>> =
        changes.map(|c| c.iter().map(|_| Plan::without_candidates(opts)).collect());
    let hints: Vec<Vec<u64>> = match changes {
        Some(changes) => readings
            .iter()
            .zip(changes)
            .map(|(sweep, changes)| sweep_hints(sweep, changes))
            .collect(),
        None => Vec::new(),
    };
    loop {
        if let (Some(plans), Some(changes)) = (plans.as_mut(), changes) {
            for (i, p) in plans.iter_mut().enumerate() {
                if spent().0 >= budget.0 {
                    break;
                }
                let opened = p.clone().finish();
                let sizes: Vec<u64> = results[i].points.iter().map(|point| point.size).collect();
                let beside = beside_shape_faults(&sizes, changes[i].iter().chain(&opened));
                let doubt = DoubtRun {
                    changes: opened,
                    ..DoubtRun::default()
                };
                let Ok(pa) = analyse(
                    &plan.assess,
                    transport,
                    &results[i],
                    Some(&changes[i]),
                    Some(doubt),
                ) else {
                    continue;
                };
                let order = doubt_order(&loggp_report::stretches(&pa, plan.decide_target), &beside);
                let at = openings(&hints[i], order, |bytes| p.holds(bytes));
                let fences: Vec<u64> = pa
                    .assessment
                    .ranges
                    .iter()
                    .skip(1)
                    .map(|r| r.from)
                    .collect();
                p.doubt(&readings[i], &at, &fences, DOUBTS_PER_ROUND);
            }
        }
        let rounds = measure(plans.as_deref_mut(), &mut || spent().0 < budget.0)?;
        if rounds == 0 {
            break;
        }
    }
    // A change the rounds confirmed and are bisecting is placed at its byte
    // (or found at none) before it is reported; otherwise it would stay
    // unplaced because the time ran out, though its passes confirmed it.
    if let Some(plans) = plans.as_mut() {
        plans.iter_mut().for_each(Plan::locate_only);
    }
    let grace = locate_grace(plan, budget);
    measure(plans.as_deref_mut(), &mut || spent().0 < grace.0)?;
    let time = spent();
    Ok(plans.map(|plans| {
        plans
            .into_iter()
            .map(|p| DoubtRun {
                passes: p.rounds(),
                changes: p.finish(),
                time,
                budget,
            })
            .collect()
    }))
}

/// The boundaries of a pair's sweep (`sweep`, its readings) where a series
/// steps by the confirmation's floor though neither the detector nor the step
/// test proposed them ([`hint_steps`]), away from the confirmation's `changes`
/// (which fresh passes judged already): first sizes after each, best first.
fn sweep_hints(sweep: &[Reading], changes: &[Change]) -> Vec<u64> {
    let sizes: Vec<u64> = sweep.iter().map(|r| r.size).collect();
    let given: Vec<usize> = changes
        .iter()
        .flat_map(|c| [Some(c.bytes), c.moved_from_bytes])
        .flatten()
        .filter_map(|bytes| sizes.iter().position(|&s| s == bytes))
        .collect();
    hint_steps(sweep, &given)
        .into_iter()
        .map(|i| sizes[i])
        .collect()
}

/// The boundaries the doubt rounds of a pair open next, in order: the sweep's
/// `hints` that the plan does not hold yet (`held`), whether or not their
/// stretch is in doubt, then the doubt `order` without them. A hint is where
/// the sweep saw a step that its tests did not trust beside a disturbed size,
/// and where one opening most likely confirms a change; the doubt order ranks
/// by the round trip, which a switch of the receive side may leave alone.
fn openings(hints: &[u64], order: Vec<u64>, held: impl Fn(u64) -> bool) -> Vec<u64> {
    let first: Vec<u64> = hints.iter().copied().filter(|&b| !held(b)).collect();
    let rest = order.into_iter().filter(|b| !first.contains(b));
    first.iter().copied().chain(rest).collect()
}

/// The time the doubt rounds may take: the plan's budget; the default one at
/// most `so_far`, the time the run took until then (a short sweep, as in a
/// test, buys a short doubt phase), but at least
/// [`MIN_CAPPED_DOUBT_BUDGET_S`], while a budget the user gave is spent whole.
fn doubt_budget(plan: &LoggpPlan, so_far: Nanos) -> Nanos {
    if plan.doubt_budget_capped {
        let least = Nanos(MIN_CAPPED_DOUBT_BUDGET_S * 1e9);
        Nanos(plan.doubt_budget.0.min(so_far.0.max(least.0)))
    } else {
        plan.doubt_budget
    }
}

/// When the bisections under way must end: `budget` (the doubt rounds' time)
/// and [`LOCATE_GRACE`] of the plan's budget as given or defaulted, not of the
/// cut one: a short sweep (shared memory: under a second) cuts the doubt rounds
/// to its time, but a change they confirmed there needs as many bisection
/// rounds as anywhere else to reach its byte.
fn locate_grace(plan: &LoggpPlan, budget: Nanos) -> Nanos {
    Nanos(budget.0 + LOCATE_GRACE * plan.doubt_budget.0.max(budget.0))
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

/// Doubt rounds end to end in the virtual LogGP world
/// ([`crate::patterns::loggp::sim`]): a sweep measured under latency noise, then
/// the confirmation and the doubt rounds over the control plane on both ranks,
/// in a world as noisy or quieter (the passes' own noise is what bounds a step).
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::confirm::ChangeKind;
    use crate::model::refine::Proposer;
    use crate::patterns::loggp::sim::{ns, world, LogGp, Network, EAGER};
    use crate::sim::{Noise, Quantum, TimeShift};
    use crate::spec::SizeList;

    /// Latency jitter of `0..jitter_ns` on every message.
    fn noisy(net: Network, jitter_ns: f64) -> Network {
        noisy_seeded(net, jitter_ns, 7)
    }

    /// [`noisy`] with its own seed.
    fn noisy_seeded(net: Network, jitter_ns: f64, seed: u64) -> Network {
        net.with_noise(Noise {
            jitter_ns,
            outlier_every: 0,
            outlier_ns: 0.0,
            seed,
            slow_link: None,
            quantum: Quantum::PS,
        })
    }

    /// The changes of a run that were confirmed.
    fn confirmed(changes: &[Change]) -> Vec<&Change> {
        changes
            .iter()
            .filter(|c| c.verdict == Verdict::Confirmed)
            .collect()
    }

    /// The plan of a small sweep: 1-16 KiB by 1 KiB, few repetitions.
    fn spec_plan(budget_s: f64, target_pct: f64) -> LoggpPlan {
        plan_to(16, budget_s, target_pct)
    }

    /// The plan of a sweep from 1 to `last_kib` KiB by 1 KiB, few repetitions.
    fn plan_to(last_kib: u64, budget_s: f64, target_pct: f64) -> LoggpPlan {
        LoggpSpec {
            sizes: Some(SizeList((1..=last_kib).map(|k| k * 1024).collect())),
            n: 4,
            reps: 5,
            warmup: 1,
            attempts: 2,
            decide_target_pct: target_pct,
            doubt_budget_s: Some(budget_s),
            ..LoggpSpec::default()
        }
        .plan()
        .unwrap()
    }

    /// What rank 0 saw: the confirmed changes, the doubt rounds, the virtual
    /// time between the budget's checks (the rounds), the stretches without and
    /// with the doubt rounds.
    struct Outcome {
        changes: Vec<Change>,
        doubt: Option<DoubtRun>,
        rounds_ns: Vec<f64>,
        before: Vec<crate::model::sensitivity::Stretch>,
        after: Vec<crate::model::sensitivity::Stretch>,
    }

    /// Sweeps in `sweep_net`, then confirms and resolves the doubts in `net`.
    fn run_doubts(sweep_net: &Network, net: &Network, plan: &LoggpPlan) -> Outcome {
        let sweep = |r: &mut crate::sim::SimRank| {
            pattern::run(
                &r.clock,
                &mut r.transport,
                &mut r.control,
                &plan.params,
                |_, _| {},
            )
            .unwrap()
        };
        let swept: Vec<Vec<PairResult>> = std::thread::scope(|s| {
            let handles: Vec<_> = world(sweep_net)
                .into_iter()
                .map(|mut r| s.spawn(move || sweep(&mut r)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let results = pool_passes(swept[0].clone());
        let opts = plan.refine.unwrap();
        let mut outcomes: Vec<Option<Outcome>> = std::thread::scope(|s| {
            let handles: Vec<_> = world(net)
                .into_iter()
                .enumerate()
                .map(|(rank, mut r)| {
                    let results = &results;
                    s.spawn(move || {
                        let mut plans: Option<Vec<Plan>> = (rank == 0).then(|| {
                            results
                                .iter()
                                .map(|p| plan_for(&plan.assess, p, opts))
                                .collect()
                        });
                        pattern::verify::verify(
                            &r.clock,
                            &mut r.transport,
                            &mut r.control,
                            &plan.params,
                            plans.as_deref_mut(),
                        )
                        .unwrap();
                        let changes: Option<Vec<Vec<Change>>> =
                            plans.map(|p| p.into_iter().map(Plan::finish).collect());
                        let clock = r.clock.clone();
                        let mut checks = Vec::new();
                        let mut measure =
                            |plans: Option<&mut [Plan]>, more: &mut dyn FnMut() -> bool| {
                                pattern::verify::verify_while(
                                    &r.clock,
                                    &mut r.transport,
                                    &mut r.control,
                                    &plan.params,
                                    plans,
                                    || {
                                        checks.push(clock.now());
                                        more()
                                    },
                                )
                            };
                        let doubts = resolve_doubts(
                            &clock,
                            plan,
                            Nanos(f64::INFINITY),
                            TransportName::Tcp,
                            results,
                            changes.as_deref(),
                            &mut measure,
                        )
                        .unwrap();
                        let changes = changes?.remove(0);
                        let doubt = doubts.map(|mut d| d.remove(0));
                        let stretches = |doubt: Option<DoubtRun>| {
                            let pa = analyse(
                                &plan.assess,
                                TransportName::Tcp,
                                &results[0],
                                Some(&changes),
                                doubt,
                            )
                            .unwrap();
                            (loggp_report::stretches(&pa, plan.decide_target), pa.changes)
                        };
                        let (before, _) = stretches(None);
                        let (after, changes) = stretches(doubt.clone());
                        let rate = clock.rate();
                        let rounds_ns = checks
                            .windows(2)
                            .map(|w| rate.to_nanos(w[1].since(w[0])).0)
                            .collect();
                        Some(Outcome {
                            changes,
                            doubt,
                            rounds_ns,
                            before,
                            after,
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(outcomes[1].is_none());
        outcomes.swap_remove(0).unwrap()
    }

    fn decided(st: &[crate::model::sensitivity::Stretch]) -> bool {
        st.iter().all(|s| s.decided())
    }

    /// A sweep whose noise leaves its stretch above the target: fresh passes
    /// over the doubtful boundaries bound every step below it.
    #[test]
    fn issue_36_a_stretch_the_sweep_leaves_undecided_is_decided_by_the_doubt_rounds() {
        let net = Network::new(vec![(1, EAGER)]).unwrap();
        let plan = spec_plan(60.0, 2.0);
        let out = run_doubts(&noisy(net.clone(), 3000.0), &net, &plan);
        assert!(!decided(&out.before), "{:?}", out.before);
        assert!(decided(&out.after), "{:?}", out.after);
        assert!(out.after.iter().any(|s| s.remeasured_boundaries > 0));
        let d = out.doubt.unwrap();
        assert!(!d.changes.is_empty());
        assert!(d.changes.iter().all(|c| c.verdict == Verdict::Rejected));
        assert!(out.changes.iter().all(|c| c.verdict != Verdict::Confirmed));
    }

    /// A real step of 2% of `PRTT(1,0,s)` between sweep sizes (0.6 us of 31 us;
    /// 0.1 us of `o_s`, 0.3 us of the gap: a protocol shows in several series),
    /// hidden in the sweep's noise: the doubt rounds confirm it and locate it to
    /// the byte.
    #[test]
    fn issue_36_a_small_step_hidden_in_the_sweeps_noise_is_found_by_the_doubt_rounds() {
        const FIRST: u64 = 9000;
        let after = LogGp {
            l_ps: EAGER.l_ps + ns(200),
            os_ps: EAGER.os_ps + ns(100),
            g_ps: EAGER.g_ps + ns(300),
            ..EAGER
        };
        let net = Network::new(vec![(1, EAGER), (FIRST, after)]).unwrap();
        let plan = spec_plan(60.0, 2.0);
        let out = run_doubts(&noisy(net.clone(), 3000.0), &net, &plan);
        assert!(!decided(&out.before), "{:?}", out.before);
        let found = confirmed(&out.changes);
        let [c] = &found[..] else {
            panic!("{:?}", out.changes)
        };
        assert_eq!(
            (c.kind, c.proposed_by),
            (ChangeKind::Step, Proposer::Doubt),
            "{c:?}"
        );
        assert_eq!(c.first_bytes, Some(FIRST), "{c:?}");
        assert!(decided(&out.after), "{:?}", out.after);
    }

    /// A disturbance that comes and goes in time (a level shift of 2% of
    /// `PRTT(1,0,s)` in windows of 0.3 ms, about a size's measurement, as a
    /// process sharing a core), with no step in size: the doubt rounds judge
    /// many boundaries, and at one of them (seed 2) the passes confirm a step
    /// that the bisection cannot place (8448-8704), which `refine::unplaced_doubt`
    /// reports undecided. No change is confirmed, in any of the seeds.
    #[test]
    fn issue_36_a_disturbance_in_time_confirms_no_change_in_the_doubt_rounds() {
        let plan = spec_plan(60.0, 2.0);
        for seed in 0..10 {
            let shift = TimeShift {
                window_ns: 3e5,
                extra_ns: 300.0,
                seed,
            };
            let net = Network::new(vec![(1, EAGER)])
                .unwrap()
                .with_time_shift(shift);
            let out = run_doubts(&noisy(net.clone(), 1000.0), &net, &plan);
            let found = confirmed(&out.changes);
            assert!(found.is_empty(), "seed {seed}: {found:?}");
        }
    }

    /// A hog-like world: latency jitter of 1 us, and 5 us more on every message
    /// in a random half of windows of 3 ms (several sizes' measurement), seeded.
    fn hog_like(net: Network, seed: u64) -> Network {
        noisy_seeded(net, 1000.0, seed).with_time_shift(TimeShift {
            window_ns: 3e6,
            extra_ns: 5000.0,
            seed,
        })
    }

    /// The loopback segment switch beside a hog (issue 36, tcp-hog): a large step
    /// (+10 us, about 20% of `PRTT(1,0,s)`, which the sender's and the receiver's
    /// overheads share, as both step by 2-6 us at the real segment switch) two
    /// sizes before the sweep's end, in a world whose
    /// disturbance comes and goes over several sizes. The passes at the switch
    /// mostly show the step and a few reach down to none: with 18 passes at most
    /// per candidate it stayed undecided, or was never proposed, in 4 of these 10
    /// seeds. With [`crate::model::refine::MAX_PASSES`] it is found to the byte in
    /// 9 of 10 seeds or more; a run that misses it says its stretch is undecided
    /// (never a silent miss), and nothing is confirmed in the same world without
    /// the step. Which seeds miss it moves with the run's timing (the windows
    /// are of time, not of sizes), so the test claims a rate, not every seed.
    #[test]
    fn issue_36_a_large_step_near_the_sweeps_end_beside_a_hog_is_found_or_left_undecided() {
        const FIRST: u64 = 23000;
        let after = LogGp {
            l_ps: EAGER.l_ps + ns(3000),
            os_ps: EAGER.os_ps + ns(1000),
            or_ps: EAGER.or_ps + ns(1000),
            ..EAGER
        };
        let plan = plan_to(24, 60.0, 2.0);
        let mut found_in = 0;
        for seed in 0..10 {
            let net = Network::new(vec![(1, EAGER), (FIRST, after)]).unwrap();
            let net = hog_like(net, seed);
            let out = run_doubts(&net, &net, &plan);
            let firsts: Vec<Option<u64>> = confirmed(&out.changes)
                .iter()
                .map(|c| c.first_bytes)
                .collect();
            if firsts.is_empty() {
                let across = out
                    .after
                    .iter()
                    .find(|st| st.from_bytes < FIRST && st.to_bytes >= FIRST);
                let across = across.unwrap_or_else(|| panic!("seed {seed}: {:?}", out.after));
                assert!(!across.decided(), "seed {seed}, a silent miss: {across:?}");
            } else {
                assert_eq!(firsts, [Some(FIRST)], "seed {seed}: {:?}", out.changes);
                found_in += 1;
            }
            let flat = hog_like(Network::new(vec![(1, EAGER)]).unwrap(), seed);
            let out = run_doubts(&flat, &flat, &plan);
            let found = confirmed(&out.changes);
            assert!(found.is_empty(), "seed {seed}, flat: {found:?}");
        }
        assert!(found_in >= 9, "found in {found_in} of 10 seeds");
    }

    /// A candidate one sweep size beside its switch (issue 36: ucx-short-256,
    /// the 8249 switch of ucx-rndv-16384, tcp-hog's run 3 of section 3d): the
    /// sweep saw the step one size to the left or to the right of where it is
    /// (as when a disturbance slowed the sweep's last size of the old protocol
    /// to the new one's level), and the passes are disturbed as beside a hog;
    /// no doubt rounds, which could find the step on their own. In every seed
    /// the candidate moves to the switch's boundary, nothing is confirmed
    /// elsewhere, and what is confirmed is placed to the byte. At this level of
    /// disturbance the passes at a switch stay spread after 30 in some seeds,
    /// moved candidate or not, about as often either way, which ones moving with
    /// the run's timing (the windows are of time; the rates are in
    /// docs/findings/2026-11-29-real-switches.md). The moved candidate is
    /// located in three quarters of these runs at least. In the
    /// same disturbed world without the step, the sweep's candidate confirms
    /// nothing.
    #[test]
    fn issue_36_a_candidate_one_sweep_size_off_beside_a_hog_is_moved_and_located() {
        const FIRST: u64 = 12289;
        let after = LogGp {
            l_ps: EAGER.l_ps + ns(4000),
            os_ps: EAGER.os_ps + ns(1000),
            ..EAGER
        };
        let stepped_at = |first: u64| Network::new(vec![(1, EAGER), (first, after)]).unwrap();
        let plan = plan_to(24, 0.0, 2.0);
        let mut moved_located = 0;
        for seed in 0..4 {
            for seen in [FIRST - 1024, FIRST + 1024, FIRST] {
                let sweep = noisy_seeded(stepped_at(seen), 1000.0, seed);
                let out = run_doubts(&sweep, &hog_like(stepped_at(FIRST), seed), &plan);
                let what = format!("seed {seed}, seen {seen}: {:?}", out.changes);
                let at = out.changes.iter().find(|c| c.bytes == 13312);
                let at = at.unwrap_or_else(|| panic!("{what}"));
                let from = (seen != FIRST).then(|| seen.next_multiple_of(1024));
                assert_eq!(at.moved_from_bytes, from, "{what}");
                let found = confirmed(&out.changes);
                assert!(found.iter().all(|c| c.first_bytes == Some(FIRST)), "{what}");
                if seen != FIRST && !found.is_empty() {
                    moved_located += 1;
                }
            }
            let sweep = noisy_seeded(stepped_at(FIRST), 1000.0, seed);
            let flat = hog_like(Network::new(vec![(1, EAGER)]).unwrap(), seed);
            let out = run_doubts(&sweep, &flat, &plan);
            let found = confirmed(&out.changes);
            assert!(found.is_empty(), "seed {seed}, flat: {found:?}");
        }
        // Two moved candidates per seed.
        assert!(
            moved_located >= 6,
            "moved and located in {moved_located} of 8"
        );
    }

    /// The sweep's hints come first until the plan holds them, each once.
    #[test]
    fn the_doubt_rounds_open_the_sweeps_hints_first() {
        let order = vec![6144, 8192, 10240];
        assert_eq!(
            openings(&[8192, 10752], order.clone(), |_| false),
            vec![8192, 10752, 6144, 10240]
        );
        assert_eq!(
            openings(&[8192, 10752], order.clone(), |b| b == 8192),
            vec![10752, 6144, 8192, 10240]
        );
        assert_eq!(openings(&[], order.clone(), |_| false), order);
    }

    /// The default budget is cut to the run's time so far, but not below one
    /// and a half seconds; one the user gave is spent whole, after a short sweep
    /// too.
    #[test]
    fn issue_36_a_given_doubt_budget_is_not_cut_to_the_sweeps_time() {
        let sweep = Nanos(2e9);
        let default = LoggpSpec::default().plan().unwrap();
        assert_eq!(doubt_budget(&default, sweep), sweep);
        assert_eq!(doubt_budget(&default, Nanos(10e9)), Nanos(3e9));
        assert_eq!(doubt_budget(&default, Nanos(0.05e9)), Nanos(1.5e9));
        let given = plan_to(16, 20.0, 2.0);
        assert_eq!(doubt_budget(&given, sweep), Nanos(20e9));
    }

    /// The bisections under way get the plan's whole budget again, also when
    /// the doubt rounds were cut to a short sweep's time.
    #[test]
    fn issue_36_a_change_being_located_gets_the_whole_budget_again() {
        let default = LoggpSpec::default().plan().unwrap();
        let cut = doubt_budget(&default, Nanos(1.7e9));
        assert_eq!(cut, Nanos(1.7e9));
        assert_eq!(locate_grace(&default, cut), Nanos(4.7e9));
        assert_eq!(locate_grace(&default, Nanos(3e9)), Nanos(6e9));
        let given = plan_to(16, 20.0, 2.0);
        assert_eq!(
            locate_grace(&given, doubt_budget(&given, Nanos(1e9))),
            Nanos(40e9)
        );
        let small = plan_to(16, 0.2, 2.0);
        assert_eq!(locate_grace(&small, Nanos(0.2e9)), Nanos(0.4e9));
    }

    /// The rounds after the sweep take the largest pass's share of `--reps`:
    /// 13 of the default 50 over 4 passes, the whole with one pass.
    #[test]
    fn a_confirmation_round_takes_one_passes_share_of_the_repetitions() {
        let plan = |reps: u64, passes: u64| {
            LoggpSpec {
                reps,
                passes,
                ..LoggpSpec::default()
            }
            .plan()
            .unwrap()
        };
        assert_eq!(confirmation_round(&plan(50, 4)).reps, 13);
        assert_eq!(confirmation_round(&plan(60, 3)).reps, 20);
        assert_eq!(confirmation_round(&plan(50, 1)).reps, 50);
        let round = confirmation_round(&plan(50, 4));
        assert_eq!((round.n, round.sizes), (10, plan(50, 4).params.sizes));
    }

    /// A budget of zero measures nothing, sends nothing and changes nothing.
    #[test]
    fn issue_36_no_doubt_budget_is_the_run_without_doubt_rounds() {
        let net = Network::new(vec![(1, EAGER)]).unwrap();
        let plan = spec_plan(0.0, 2.0);
        let out = run_doubts(&noisy(net.clone(), 3000.0), &net, &plan);
        assert!(out.doubt.is_none());
        assert!(out.rounds_ns.is_empty());
        assert_eq!(out.before, out.after);
    }

    /// A short sweep whose boundaries are in doubt has them opened together:
    /// a round measures its 16 sizes once for all of them (13 of the 15 here),
    /// and a budget of a few such rounds gives each its opening's passes.
    #[test]
    fn issue_36_a_short_sweeps_doubtful_boundaries_are_opened_together() {
        let net = noisy(Network::new(vec![(1, EAGER)]).unwrap(), 3000.0);
        let plan = spec_plan(0.25, 0.5);
        let out = run_doubts(&net, &net, &plan);
        let d = out.doubt.unwrap();
        let passes: Vec<(u64, usize)> = d
            .changes
            .iter()
            .map(|c| (c.bytes, c.confirmation.as_ref().map_or(0, |f| f.passes)))
            .collect();
        assert!(passes.len() >= 12, "{passes:?}");
        let opening = crate::model::refine::PASSES;
        assert!(passes.iter().all(|&(_, p)| p >= opening), "{passes:?}");
        let longest = out.rounds_ns.iter().copied().fold(0.0, f64::max);
        assert!(longest < 0.25e9 / opening as f64, "{longest}");
    }

    /// Passes as noisy as the sweep keep boundaries in doubt: the rounds stop
    /// once the budget is spent, at most one round late (no change confirmed
    /// is being located then, which would earn [`LOCATE_GRACE`]).
    #[test]
    fn issue_36_the_doubt_budget_is_honoured() {
        let net = noisy(Network::new(vec![(1, EAGER)]).unwrap(), 3000.0);
        let budget_s = 0.06;
        let plan = spec_plan(budget_s, 0.5);
        let out = run_doubts(&net, &net, &plan);
        let d = out.doubt.unwrap();
        let longest = out.rounds_ns.iter().copied().fold(0.0, f64::max);
        assert!(d.passes >= 2, "{d:?}");
        assert!(d.time.0 >= budget_s * 1e9, "{d:?}");
        assert!(d.time.0 <= budget_s * 1e9 + longest, "{d:?} {longest}");
        assert_eq!(d.budget, Nanos(budget_s * 1e9));
    }
}
