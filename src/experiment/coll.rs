//! `coll`: one collective, timed correctly ([`crate::patterns::coll`]), per size,
//! over every transport of the job and every implementation the spec names: our
//! schedules over any transport, MPI's own collective (`mpi`) on the MPI transport.
//! The points are measured interleaved, size by size, so that "our binomial over
//! TCP" and "MPI's broadcast over its BTL" see the same machine; with several, the
//! medians are compared with the last one measured.
//!
//! **Clocks.** As in `sync`, every rank uses rank 0's tick rate. The window scheme
//! synchronizes the clocks once, before the first point, over the first transport
//! of the job that never loses a message; with none (`udp`), over a TCP transport
//! opened for that alone (a warning says so).
//!
//! **Models.** With `predict`, every point of our schedules carries the LogGP
//! simulation of the same schedule and scheme and Hockney's formula, and with
//! several algorithms the document carries the models' choices against the
//! measured best ([`crate::sim::select`]).

use super::collective::{call_plan, largest_message, Setup};
use super::sync::rank0_clock;
use super::{Context, ExperimentError};
use crate::clock::Clock;
use crate::coll::{CollSpec, Collective};
use crate::job::{Job, JobSpec, TransportName};
use crate::launch::World;
use crate::patterns::coll::{self, CollTiming, Implementation, Scheme};
use crate::report::coll::{self as doc, CollDoc, CollRecord, CollWarning, Point};
use crate::report::effort::ClockSync;
use crate::report::warning::warned;
use crate::report::Meta;
use crate::sim::collective::Calls;
use crate::sim::params::Loaded;
use crate::sim::select::{self, Predicted};
use crate::spec::coll::{CollImpl, RootChoice};
use crate::spec::{CollCmdSpec, SpecError};

/// Measures the spec's implementations over every transport of `job`; rank 0 gets
/// the document, and the context gets one record per point as it finishes.
/// Collective: every rank calls it.
///
/// # Errors
/// A spec out of range or that the job cannot run, an unreadable parameter file,
/// a transport that fails to open, a failed sync, a lost peer, a record that
/// cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    spec: &CollCmdSpec,
    ctx: &mut Context,
) -> Result<Option<CollDoc>, ExperimentError> {
    spec.validate()?;
    let params = spec.load_predict()?;
    let imps = spec.implementations()?;
    let candidates: Vec<Candidate> = imps
        .into_iter()
        .map(|imp| Candidate {
            imp,
            segment: match imp {
                CollImpl::Ours(a) if a.is_segmented() => spec.segment,
                // Open MPI's forced broadcast is cut into `segment` bytes too.
                CollImpl::Mpi if spec.mpi_algo.is_some() && spec.op == Collective::Bcast => {
                    spec.segment
                }
                _ => 0,
            },
        })
        .collect();
    let sizes = spec.sizes_bytes();
    let m = measure(world, job, spec, &candidates, &sizes, params.as_ref(), ctx)?;
    Ok(m.meta.map(|meta| CollDoc {
        meta,
        comparison: doc::compare(&m.records),
        selection: select::select(&points(&m.records)),
        results: m.records,
        sync: m.sync,
        warnings: warned(m.warnings),
    }))
}

/// One implementation with one segment size: what a table's rows measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The implementation.
    pub imp: CollImpl,
    /// Its segment size, bytes (0: one segment, or an algorithm that does not
    /// segment).
    pub segment: usize,
}

/// What [`measure`] gives back.
pub struct Measured {
    /// Every point, in the order measured (rank 0 only; empty on the others).
    pub records: Vec<CollRecord>,
    /// What threatens the figures (rank 0's are the job's).
    pub warnings: Vec<CollWarning>,
    /// The document's metadata (rank 0 only).
    pub meta: Option<Meta>,
    /// The window scheme's clock synchronization, per rank (rank 0 only).
    pub sync: Option<ClockSync>,
}

/// Measures every candidate at `sizes` over every transport of `job`,
/// interleaved size by size, on this rank of the job (`coll`'s executor;
/// `simulate --measure` measures its candidates with it too). With `params`, every
/// record of our schedules carries the models' times.
///
/// # Errors
/// As [`run`].
pub fn measure(
    world: &mut World,
    job: &JobSpec,
    spec: &CollCmdSpec,
    candidates: &[Candidate],
    sizes: &[usize],
    params: Option<&Loaded>,
    ctx: &mut Context,
) -> Result<Measured, ExperimentError> {
    spec.validate_for_job(&job.transports, Some(world.size))?;
    let (np, rank) = (world.size, world.rank);
    let root = match spec.root {
        RootChoice::Rank(r) => r,
        RootChoice::Rotate(_) => 0,
    };
    let counts = (spec.reps, spec.warmup, spec.max_rounds);
    let matrix = spec.counts()?;
    let matrix_record = (spec.op == Collective::Alltoallv).then(|| doc::CollCounts {
        matrix: matrix.to_string(),
        total: matrix.total(np),
    });
    let clock = rank0_clock(world, ctx.timer)?;
    let hz = clock.rate().hz;
    let mut setup = Setup::open(world, job, clock)?;
    let mut warnings = Vec::new();
    if spec.scheme == Scheme::Window {
        let mut tcp = None;
        if !setup
            .transports
            .iter()
            .any(|o| o.transport.capabilities().reliable)
        {
            let over = JobSpec {
                transports: vec![TransportName::Tcp],
                ..job.clone()
            };
            tcp = Some(Job::open(&over, world, |_, _| {})?);
            warnings.push(CollWarning::SyncedOver {
                transport: TransportName::Tcp,
            });
        }
        let fallback = tcp.as_mut().map(|j| &mut j.transports[0].transport);
        setup.synchronize(world, &spec.sync_options(), fallback)?;
    }
    let mut warnings: Vec<CollWarning> = (setup.warnings.drain(..).map(CollWarning::Setup))
        .chain(warnings)
        .collect();
    let rows: Vec<(usize, Candidate)> = (setup.transports.iter().enumerate())
        .flat_map(|(i, o)| {
            let on_mpi = o.name == TransportName::Mpi;
            (candidates.iter())
                .filter(move |c| c.imp != CollImpl::Mpi || on_mpi)
                .map(move |c| (i, *c))
        })
        .collect();
    let mut progress = ctx.progress_line();
    let total = sizes.len() * rows.len();
    let mut done = 0usize;
    let mut records: Vec<CollRecord> = Vec::new();
    // An all-to-all-v's largest block is its largest count of units of `size`.
    let units = match spec.op {
        Collective::Alltoallv => matrix.largest(np),
        _ => 1,
    };
    for &size in sizes {
        for &(i, c) in &rows {
            let o = &mut setup.transports[i];
            let label = format!("{}/{}", o.name, c.imp.name());
            let largest = largest_message(spec.op, size.saturating_mul(units), np, c.segment);
            if let Some(max) = o.transport.capabilities().max_message_bytes {
                if largest > max {
                    warnings.push(CollWarning::SizeSkipped {
                        label,
                        size,
                        largest_bytes: largest,
                        max_bytes: max,
                    });
                    continue;
                }
            }
            let coll = CollSpec {
                algorithm: c.imp.algorithm(spec.op).with_counts(matrix),
                np,
                size_bytes: size,
                segment_bytes: c.segment,
                root,
            };
            coll.validate()
                .map_err(|e| SpecError::new("segment", e.to_string()))?;
            let timing = CollTiming {
                spec: coll,
                scheme: spec.scheme,
                rotate_root: matches!(spec.root, RootChoice::Rotate(_)),
                plan: call_plan(counts, spec.no_check, o.wait),
            };
            let implementation = match c.imp {
                CollImpl::Ours(_) => Implementation::Schedule,
                CollImpl::Mpi => Implementation::Native,
            };
            let times = coll::measure_with(
                &setup.clock,
                o.transport.as_mut(),
                world.control.as_mut(),
                &setup.model,
                &timing,
                implementation,
            )
            .map_err(|error| ExperimentError::At {
                point: format!("{label} at {size} B"),
                error,
            })?;
            done += 1;
            progress.update(&format!("{done}/{total} points ({label} {size} B done)"));
            if rank != 0 {
                continue;
            }
            let point = Point {
                transport: o.name,
                wait: o.wait,
                op: spec.op.to_string(),
                algo: c.imp.name(),
                mpi_algo: spec.mpi_algo.filter(|_| c.imp == CollImpl::Mpi),
                segment: c.segment,
                size,
                np,
                root: spec.root,
            };
            let mut record = doc::record(point, &times, hz, spec.per_rank);
            record.counts.clone_from(&matrix_record);
            if spec.samples {
                let ticks = times.valid_runtimes_ticks();
                record.samples = Some(doc::CollSamples {
                    runtime_us: ticks.iter().map(|t| t / hz * 1e6).collect(),
                });
            }
            if let (Some(p), CollImpl::Ours(_)) = (params, c.imp) {
                let reps = u32::try_from(timing.plan.reps).unwrap_or(u32::MAX);
                let calls = match (timing.scheme, timing.rotate_root) {
                    (Scheme::Loop, true) => Calls::RotateRoot(reps),
                    (Scheme::Loop, false) => Calls::Loop(reps),
                    _ => Calls::Single,
                };
                let median = record.runtime_us.map(|t| t.median);
                let predicted = Predicted::of(&coll, &p.network, calls, median)
                    .map_err(crate::sim::spec::SpecError::from)?;
                record.predicted = Some(predicted);
                let other = |w: &CollWarning| matches!(w, CollWarning::PredictTransport { measured, .. } if *measured == o.name);
                if !p.transport.is_empty()
                    && p.transport != o.name.to_string()
                    && !warnings.iter().any(other)
                {
                    warnings.push(CollWarning::PredictTransport {
                        params: p.transport.clone(),
                        measured: o.name,
                    });
                }
            }
            if spec.scheme == Scheme::Window && record.valid < timing.plan.reps {
                warnings.push(CollWarning::FewValid {
                    label: record.label(),
                    size,
                    valid: record.valid,
                    wanted: timing.plan.reps,
                });
            }
            ctx.record(&record)?;
            records.push(record);
        }
    }
    progress.finish();
    let meta = (rank == 0).then(|| setup.meta(world, ctx, true));
    drop(setup.transports);
    if let Some(p) = params.filter(|_| rank == 0) {
        let sizes: Vec<u64> = sizes.iter().map(|&s| s as u64).collect();
        warnings.extend(p.warnings_at(&sizes).into_iter().map(CollWarning::Params));
    }
    Ok(Measured {
        records,
        warnings,
        meta,
        sync: setup.sync,
    })
}

/// The records as the model-based selection sees them.
pub fn points(records: &[CollRecord]) -> Vec<select::Point> {
    records
        .iter()
        .map(|r| select::Point {
            transport: r.transport,
            algo: r.algo.clone(),
            segment: r.segment,
            size: r.size,
            median_us: r.runtime_us.map(|t| t.median),
            predicted: r.predicted,
        })
        .collect()
}
