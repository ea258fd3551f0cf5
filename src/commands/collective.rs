//! What the commands that time collectives share (`late`, `nbc`, and `coll` of
//! issue 14): which implementation of the collective runs (one of our schedules, or
//! MPI's own), the data transport it runs on, the clock synchronization of the
//! window starts, and one [`CollOp`] per measurement point.
//!
//! The functions take plain values (one operation, one `--algo` name, one
//! transport), not a command's arguments, so that a command with lists (`coll`'s
//! `--algo mpi,binomial`, `-t mpi,tcp`, `--root rotate`) calls them once per item.
//! [`CollArgs`] holds the flags with the names issue 14 gives them (`--op`,
//! `--algo`, `--segment`, `--root`) and the window flags; a command flattens it or
//! declares its own. Nothing here is specific to one measurement.
//!
//! A command runs:
//! 1. [`transport_name`] and [`implementation`] before the job starts (usage errors
//!    come first, exit status 2);
//! 2. inside the job, [`coll_spec`] for every size, [`largest_message`] over them,
//!    then [`setup`] (open the transport, check it carries the sizes, synchronize
//!    the clocks over it);
//! 3. per point, [`Data::op`] for the collective's buffers, the pattern's measure
//!    function, then [`CollOp::release`];
//! 4. [`meta`] for the document.

use super::common::UsageError;
#[cfg(doc)]
use crate::cli::CollArgs;
use crate::cli::GlobalArgs;
use ngauge::clock::{Clock, SystemClock};
use ngauge::coll::{Algorithm, CollOp, CollSpec, Collective, NativeOp, Scheduled};
use ngauge::job::{Job, JobSpec, JobWarning, TransportName};
use ngauge::launch::binding::{self, BindingWarning};
use ngauge::launch::World;
use ngauge::report::effort::ClockSync;
use ngauge::sync::model::ClockModel;
use ngauge::sync::SyncOptions;
use ngauge::transport::{Transport, WaitMode};

/// Which collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// One of our schedules, over any transport.
    Ours(Algorithm),
    /// MPI's own function (`-t mpi`).
    Mpi,
}

impl Implementation {
    /// The `--algo` name (`recursive-doubling`, `kchain:4`, `mpi`).
    pub fn name(&self) -> String {
        match self {
            Implementation::Ours(a) => a.to_string(),
            Implementation::Mpi => "mpi".into(),
        }
    }
}

/// The one data transport of `-t` (several are refused).
pub fn transport_name(global: &GlobalArgs, command: &str) -> Result<TransportName, UsageError> {
    match global.transport.as_slice() {
        [one] => Ok(*one),
        _ => Err(UsageError(format!(
            "--transport: {command} measures one transport at a time; give one"
        ))),
    }
}

/// The implementation the `--algo` name `algo` (`None`: not given) names for `op`
/// on `transport`: MPI's own by default on `-t mpi`, otherwise
/// [`default_algorithm`].
pub fn implementation(
    op: Collective,
    algo: Option<&str>,
    transport: TransportName,
) -> Result<Implementation, UsageError> {
    match algo {
        None if transport == TransportName::Mpi => Ok(Implementation::Mpi),
        None => Ok(Implementation::Ours(default_algorithm(op))),
        Some("mpi") if transport == TransportName::Mpi => Ok(Implementation::Mpi),
        Some("mpi") => Err(UsageError(
            "--algo mpi: MPI's own collectives run on the MPI transport; add -t mpi \
             (under mpirun, with a build that has the `mpi` feature)"
                .into(),
        )),
        Some(name) => Algorithm::parse(op, name)
            .map(Implementation::Ours)
            .map_err(|e| UsageError(format!("--algo: {e}"))),
    }
}

/// Refuses sizes `imp` cannot run before anything is launched: MPI's own allreduce
/// sums 8-byte words (`MPI_INT64_T`, [`ngauge::coll::native`]), so its sizes are
/// multiples of 8; our schedules take any size.
pub fn check_sizes(op: Collective, imp: Implementation, sizes: &[usize]) -> Result<(), UsageError> {
    if imp == Implementation::Mpi && op == Collective::Allreduce {
        if let Some(s) = sizes.iter().find(|s| *s % 8 != 0) {
            return Err(UsageError(format!(
                "--sizes: MPI's allreduce sums 8-byte words, and {s} bytes is not a \
                 multiple of 8"
            )));
        }
    }
    Ok(())
}

/// The usual algorithm of each operation: the trees Open MPI's tuned component
/// picks for small messages, and the only barrier and all-to-all we have.
pub fn default_algorithm(op: Collective) -> Algorithm {
    match op {
        Collective::Bcast => Algorithm::BcastBinomial,
        Collective::Gather => Algorithm::GatherBinomial,
        Collective::Allreduce => Algorithm::AllreduceRecursiveDoubling,
        Collective::Barrier => Algorithm::BarrierDissemination,
        Collective::Alltoall => Algorithm::AlltoallPairwise,
    }
}

/// The data transport: ours run on any, MPI's own collectives on the MPI transport
/// ([`ngauge::coll::native`]).
pub struct Data(Box<dyn Transport>);

impl Data {
    /// As a plain transport (clock synchronization).
    pub fn as_dyn(&mut self) -> &mut dyn Transport {
        self.0.as_mut()
    }

    /// The collective of `spec` (ours) or MPI's of the same operation, size and
    /// root, with its buffers allocated.
    pub fn op<'a>(
        &'a mut self,
        imp: Implementation,
        spec: CollSpec,
    ) -> anyhow::Result<Box<dyn CollOp + 'a>> {
        let t = self.0.as_mut();
        Ok(match imp {
            Implementation::Ours(_) => Box::new(Scheduled::new(t, spec)?),
            Implementation::Mpi => {
                Box::new(NativeOp::new(t, spec).map_err(|e| UsageError(e.to_string()))?)
            }
        })
    }
}

/// One rank's measuring setup.
pub struct Setup {
    /// This rank's clock.
    pub clock: SystemClock,
    /// The data transport.
    pub data: Data,
    /// Its name.
    pub transport: TransportName,
    /// How it waits.
    pub wait: WaitMode,
    /// This rank's clock relative to rank 0's.
    pub model: ClockModel,
    /// The clock synchronization used.
    pub sync: SyncOptions,
    /// Its effort on every rank (rank 0; `None` on the others).
    pub sync_report: Option<ClockSync>,
    /// Every rank's pinned core (rank 0; others get their own list).
    pub cores: Vec<Option<usize>>,
    /// Setup warnings.
    pub job_warnings: Vec<JobWarning>,
    /// Ranks that share a core.
    pub binding_warnings: Vec<BindingWarning>,
}

/// Opens the data `transport`, checks it can carry messages of
/// `max_size` bytes, and synchronizes the clocks over it with `sync` (a collective
/// call: every rank, same arguments).
pub fn setup(
    global: &GlobalArgs,
    sync: SyncOptions,
    transport: TransportName,
    max_size: usize,
    world: &mut World,
) -> anyhow::Result<Setup> {
    sync.validate().map_err(|e| UsageError(e.to_string()))?;
    let clock = super::common::rank_clock(world)?;
    let cores = world.gather_pinning()?;
    let spec = JobSpec {
        transports: vec![transport],
        ..super::common::job_spec(global)
    };
    let mut job = Job::open(&spec, world, |_, _| {}).map_err(super::common::job_error)?;
    let mut data = Data(job.transports.remove(0).transport);
    let job_warnings = job.warnings;
    let caps = data.as_dyn().capabilities();
    if !caps.reliable {
        return Err(UsageError(format!(
            "the window starts need synchronized clocks, whose exchanges need a transport \
             that never loses a message, and {transport} may; use -t tcp"
        ))
        .into());
    }
    if let Some(max) = caps.max_message_bytes {
        if max_size > max {
            return Err(UsageError(format!(
                "--sizes: {transport} carries at most {max} bytes per message, and the \
                 collective's messages reach {max_size}"
            ))
            .into());
        }
    }
    let wait = data.as_dyn().wait_mode();
    let outcome = ngauge::sync::synchronize(&clock, data.as_dyn(), world.control.as_mut(), &sync)?;
    let sync_report =
        super::sync::gather_effort(world, sync.algorithm, &outcome.effort, clock.rate().hz)?;
    let binding_warnings = if world.rank == 0 {
        binding::check_groups(
            &world.peers,
            &cores,
            world.env.kind,
            [(0..world.size).collect()],
        )
    } else {
        Vec::new()
    };
    Ok(Setup {
        clock,
        data,
        transport,
        wait,
        model: outcome.model,
        sync,
        sync_report,
        cores,
        job_warnings,
        binding_warnings,
    })
}

/// The checked spec of every size of `coll` run by `imp` among `np` ranks, and the
/// largest single message they send (for the transport's buffers).
pub fn size_specs(
    coll: &crate::cli::CollArgs,
    imp: Implementation,
    np: usize,
    sizes: &[usize],
) -> Result<(Vec<CollSpec>, usize), UsageError> {
    let specs = sizes
        .iter()
        .map(|&size| coll_spec(coll.op, imp, coll.segment, coll.root, np, size))
        .collect::<Result<Vec<_>, _>>()?;
    let largest = sizes
        .iter()
        .map(|&s| largest_message(coll.op, s, np, coll.segment))
        .max()
        .unwrap_or(0);
    Ok((specs, largest))
}

/// The largest message one call of `op` of `size` bytes per rank sends over the
/// transport, for its size limit: a gather's inner nodes forward up to the whole
/// array; a segmented broadcast at most a segment.
pub fn largest_message(op: Collective, size: usize, np: usize, segment: usize) -> usize {
    match op {
        Collective::Gather => size.saturating_mul(np),
        Collective::Barrier => 1,
        Collective::Bcast if segment > 0 => size.min(segment),
        _ => size,
    }
}

/// The spec of one measurement point of `op` run by `imp` (MPI's own: the spec of
/// our default algorithm, for its sizes and checks), checked: a usage error names
/// the flag.
pub fn coll_spec(
    op: Collective,
    imp: Implementation,
    segment: usize,
    root: usize,
    np: usize,
    size: usize,
) -> Result<CollSpec, UsageError> {
    if root >= np {
        return Err(UsageError(format!(
            "--root {root}: not a rank of a job of {np} ranks"
        )));
    }
    let algorithm = match imp {
        Implementation::Ours(a) => a,
        Implementation::Mpi => default_algorithm(op),
    };
    let spec = CollSpec {
        algorithm,
        np,
        size_bytes: size,
        segment_bytes: segment,
        root,
    };
    spec.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(spec)
}

/// The meta of a result.
pub fn meta(setup: &Setup, world: &World) -> ngauge::report::Meta {
    super::common::meta(setup.clock.source(), setup.clock.rate().hz)
        .transports(&[(setup.transport, setup.wait)])
        .job(world, setup.cores.clone())
        .sync(setup.sync.algorithm)
        .build()
}
