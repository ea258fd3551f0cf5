//! What the experiments that time collectives share (`coll`, `late`, `nbc`,
//! `simulate --measure`): the job's transports opened with its setup warnings, the
//! clock synchronization of the window starts gathered to rank 0 with its effort
//! (Hoefler et al., "Accurately measuring collective operations", sec. 3: every
//! rank starts each call at a common global time, so the clocks are synchronized
//! once, before the first point), one checked [`CollSpec`] per measurement point
//! and the collective of an implementation with its buffers; for `late` and `nbc`,
//! the setup on the job's one transport ([`windowed`]) and rank 0's end of the
//! document ([`finish`]).

use super::sync::gather_effort;
use super::{binding_warnings, rank_clock, ExperimentError};
use crate::clock::{Clock, SystemClock, TimerSource};
use crate::coll::{CollOp, CollSpec, Collective, NativeOp, Scheduled};
use crate::job::open::Opened;
use crate::job::{Job, JobSpec};
use crate::launch::World;
use crate::patterns::rounds::CallPlan;
use crate::patterns::PatternError;
use crate::report::coll::WindowedRun;
use crate::report::effort::ClockSync;
use crate::report::warning::{warned, Warned};
use crate::report::{Meta, SetupWarning};
use crate::spec::coll::{CollImpl, WindowColl};
use crate::spec::SpecError;
use crate::sync::model::ClockModel;
use crate::sync::SyncOptions;
use ngauge_transport::{Transport, WaitMode};

/// One rank's measuring setup.
pub struct Setup {
    /// This rank's clock.
    pub clock: SystemClock,
    /// The job's transports, in its order.
    pub transports: Vec<Opened>,
    /// Every rank's pinned core (rank 0; empty elsewhere).
    pub cores: Vec<Option<usize>>,
    /// What threatens the figures: the job's, the binding's, the sync's (rank 0).
    pub warnings: Vec<SetupWarning>,
    /// This rank's clock relative to rank 0's (the identity until synchronized).
    pub model: ClockModel,
    /// The clock synchronization, per rank (rank 0, once synchronized).
    pub sync: Option<ClockSync>,
    /// Its options, once synchronized.
    pub sync_options: Option<SyncOptions>,
}

impl Setup {
    /// Opens the transports of `job` on this rank with `clock` (a collective
    /// call); the binding warnings are of all ranks measured together.
    ///
    /// # Errors
    /// A lost peer, a transport that fails to open.
    pub fn open(
        world: &mut World,
        job: &JobSpec,
        clock: SystemClock,
    ) -> Result<Setup, ExperimentError> {
        let cores = world.gather_pinning()?;
        let opened = Job::open(job, world, |_, _| {})?;
        let mut warnings: Vec<SetupWarning> = opened
            .warnings
            .into_iter()
            .map(SetupWarning::from)
            .collect();
        warnings.extend(binding_warnings(world, &cores, [(0..world.size).collect()]));
        Ok(Setup {
            clock,
            transports: opened.transports,
            cores,
            warnings,
            model: ClockModel::offset_only(0.0),
            sync: None,
            sync_options: None,
        })
    }

    /// Synchronizes the clocks with `options` over the job's transport that never
    /// loses a message, or over `fallback` when it has none; rank 0 keeps every
    /// rank's effort and its warnings (a collective call).
    ///
    /// # Errors
    /// A failed sync, a lost peer.
    pub fn synchronize(
        &mut self,
        world: &mut World,
        options: &SyncOptions,
        fallback: Option<&mut Box<dyn Transport>>,
    ) -> Result<(), ExperimentError> {
        let reliable = (self.transports.iter_mut())
            .find(|o| o.transport.capabilities().reliable)
            .map(|o| &mut o.transport);
        let over = reliable.or(fallback).ok_or_else(|| {
            let why = "the window starts need synchronized clocks, whose exchanges need a \
                       transport that never loses a message; use tcp";
            SpecError::new("transport", why)
        })?;
        let outcome =
            crate::sync::synchronize(&self.clock, over.as_mut(), world.control.as_mut(), options)
                .map_err(PatternError::from)?;
        self.model = outcome.model;
        self.sync_options = Some(*options);
        let hz = self.clock.rate().hz;
        self.sync = gather_effort(world, options.algorithm, &outcome.effort, hz)?;
        if let Some(s) = &self.sync {
            self.warnings
                .extend(s.warnings().into_iter().map(SetupWarning::from));
        }
        Ok(())
    }

    /// The metadata of a result measured with this setup; `pairs`: every
    /// transport's wait as `name=mode` (`coll`'s), else one transport's alone.
    pub fn meta(&self, world: &World, ctx: &super::Context, pairs: bool) -> Meta {
        let waits: Vec<_> = self.transports.iter().map(|o| (o.name, o.wait)).collect();
        let meta = ctx.meta(self.clock.source(), self.clock.rate().hz);
        let mut meta = match pairs {
            true => meta.transports_named(&waits),
            false => meta.transports(&waits),
        }
        .job(world, self.cores.clone());
        if let Some(o) = &self.sync_options {
            meta = meta.sync(o.algorithm);
        }
        meta.build()
    }
}

/// The calls of every point of `coll`, `late` and `nbc`: the spec's `counts`
/// (reps, warmup, max_rounds), the data checked unless `no_check`, windows waited
/// for as the transport's `window_wait` says.
pub fn call_plan(
    (reps, warmup, max_rounds): (u64, u64, u64),
    no_check: bool,
    window_wait: WaitMode,
) -> CallPlan {
    CallPlan {
        reps: reps as usize,
        warmup: warmup as usize,
        check_data: !no_check,
        window_wait,
        max_rounds: max_rounds as usize,
    }
}

/// What `late` and `nbc` measure with: the implementation of `coll` on the job's
/// one transport, the checked spec of every size, the setup synchronized over
/// that transport, which must carry the collective's messages without losing any
/// (a collective call), and the calls of every point.
///
/// # Errors
/// What [`WindowColl::validate_for_job`] finds, a point the collective cannot run
/// (field `segment`), a transport that may lose messages or cannot carry the
/// largest, a failed sync, a lost peer.
pub fn windowed(
    world: &mut World,
    job: &JobSpec,
    timer: TimerSource,
    coll: &WindowColl,
    sizes: &[u64],
) -> Result<(Setup, CollImpl, Vec<CollSpec>, CallPlan), ExperimentError> {
    let np = world.size;
    let (_, imp) = coll.validate_for_job(&job.transports, Some(np), sizes)?;
    let spec = |size: u64| CollSpec {
        algorithm: imp.algorithm(coll.op),
        np,
        size_bytes: size as usize,
        segment_bytes: coll.segment,
        root: coll.root,
    };
    let specs: Vec<CollSpec> = sizes.iter().map(|&s| spec(s)).collect();
    for s in &specs {
        s.validate()
            .map_err(|e| SpecError::new("segment", e.to_string()))?;
    }
    let largest = (specs.iter())
        .map(|s| largest_message(coll.op, s.size_bytes, np, coll.segment))
        .max()
        .unwrap_or(0);
    let clock = rank_clock(world, timer)?;
    let mut setup = Setup::open(world, job, clock)?;
    let o = &setup.transports[0];
    if let Some(max) = (o.transport.capabilities().max_message_bytes).filter(|m| largest > *m) {
        let why = format!(
            "{} carries at most {max} bytes per message, and the collective's messages \
             reach {largest}",
            o.name
        );
        return Err(SpecError::new("sizes", why).into());
    }
    setup.synchronize(world, &coll.sync_options(), None)?;
    let counts = (coll.reps, coll.warmup, coll.max_rounds);
    let plan = call_plan(counts, coll.no_check, setup.transports[0].wait);
    Ok((setup, imp, specs, plan))
}

/// Rank 0's end of a windowed experiment of `imp` (whose collective is
/// `implementation`): what ran, the setup's warnings (`setup_warning` wraps them)
/// then `found`, every rank's sync effort, the metadata.
pub fn finish<W: std::fmt::Display>(
    mut setup: Setup,
    (world, ctx): (&World, &super::Context),
    (op, imp, implementation): (Collective, CollImpl, String),
    setup_warning: fn(SetupWarning) -> W,
    found: Vec<W>,
) -> (WindowedRun, Vec<Warned<W>>, ClockSync, Meta) {
    let meta = setup.meta(world, ctx, false);
    let sync = (setup.sync.take()).expect("rank 0 gathers every rank's sync effort");
    let run = WindowedRun {
        op: op.to_string(),
        algo: imp.name(),
        implementation,
        transport: setup.transports[0].name,
        wait: setup.transports[0].wait,
        np: world.size,
    };
    let all = setup.warnings.into_iter().map(setup_warning).chain(found);
    (run, warned(all), sync, meta)
}

/// The collective of `spec` run by `imp` on `t` (ours, or the transport's own of
/// the same operation, size and root), with its buffers allocated.
///
/// # Errors
/// A schedule or a native collective the transport cannot set up.
pub fn coll_op<'a>(
    t: &'a mut dyn Transport,
    imp: CollImpl,
    spec: CollSpec,
) -> Result<Box<dyn CollOp + 'a>, ExperimentError> {
    let op: Result<Box<dyn CollOp + 'a>, _> = match imp {
        CollImpl::Ours(_) => Scheduled::new(t, spec).map(|s| Box::new(s) as _),
        CollImpl::Mpi => NativeOp::new(t, spec).map(|s| Box::new(s) as _),
    };
    Ok(op.map_err(PatternError::from)?)
}

/// The largest message one call of `op` of `size` bytes per rank sends over the
/// transport, for its size limit: a gather's and a scatter's inner nodes forward up
/// to the whole array, and so do the allgather and the reduce-scatter; a segmented
/// broadcast at most a segment.
pub fn largest_message(op: Collective, size: usize, np: usize, segment: usize) -> usize {
    match op {
        Collective::Gather
        | Collective::Scatter
        | Collective::Allgather
        | Collective::ReduceScatter => size.saturating_mul(np),
        Collective::Barrier => 1,
        Collective::Bcast if segment > 0 => size.min(segment),
        _ => size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_message_of_each_op() {
        assert_eq!(largest_message(Collective::Gather, 8, 4, 0), 32);
        assert_eq!(largest_message(Collective::Bcast, 8192, 4, 1024), 1024);
        assert_eq!(largest_message(Collective::Bcast, 100, 4, 1024), 100);
        assert_eq!(largest_message(Collective::Barrier, 0, 4, 0), 1);
        assert_eq!(largest_message(Collective::Alltoall, 64, 4, 0), 64);
    }
}
