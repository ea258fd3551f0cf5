//! One collective, ready to be called again and again, whoever implements it: our
//! schedule over any transport ([`Scheduled`]), or the transport's own function
//! (MPI's, [`super::NativeOp`]). The late-arrival and nonblocking-collective
//! patterns time a [`CollOp`] and do not care which.
//!
//! The operation holds its transport, so a pattern gets a `&mut dyn CollOp`, a
//! clock and a control channel, and nothing else. `coll` times a [`CollOp`] too,
//! with rotating roots: call `i` of a rooted collective on root `i % np`
//! ([`CollOp::select`]), every root's call prepared before the first one.

use super::exec::Interrupts;
use super::{check, CollBuffers, CollError, CollSpec, Executor};
use ngauge_transport::{Rank, Transport};

/// A collective that can be called blocking, or started, tested and waited for.
///
/// Every call on every rank must be matched by the same call on the others (it is
/// a collective). After an error the operation is in an unknown state: drop it.
pub trait CollOp {
    /// What runs, for reports: `allreduce/recursive-doubling`, `MPI_Allreduce`.
    fn label(&self) -> String;
    /// Makes call `index` of a run the next call, outside any timed region (with
    /// rotating roots, its root is `index % np`), and returns its root. Without it,
    /// every call is call 0.
    fn select(&mut self, index: usize) -> Rank;
    /// The transport it runs on, between calls (a pattern's own barrier on the
    /// data plane, [`Transport::settle`]).
    fn transport(&mut self) -> &mut dyn Transport;
    /// One blocking call.
    fn run(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError>;
    /// Starts a nonblocking call.
    fn start(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError>;
    /// Progresses the started call without blocking; `true` once it is complete.
    fn test(&mut self, interrupts: &mut dyn Interrupts) -> Result<bool, CollError>;
    /// Completes the started call.
    fn wait(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError>;
    /// Writes known inputs before a checked call (nothing by default).
    fn fill(&mut self) -> Result<(), CollError> {
        Ok(())
    }
    /// Checks the result of a call made after [`CollOp::fill`] (nothing by
    /// default).
    fn verify(&mut self) -> Result<(), CollError> {
        Ok(())
    }
    /// Releases the buffers on the transport.
    fn release(self: Box<Self>) -> Result<(), CollError>;
}

/// Our schedule of a [`CollSpec`] over any transport, run by the [`Executor`]
/// (progress happens only inside `start`, `test` and `wait`).
pub struct Scheduled<'t> {
    t: &'t mut dyn Transport,
    /// Its root is the selected call's.
    spec: CollSpec,
    /// One executor per root a run uses, all on one set of buffers (a gather's are
    /// `np` blocks: one copy per root would be `np` times that).
    by_root: Vec<Executor>,
    current: usize,
}

impl<'t> Scheduled<'t> {
    /// Builds this rank's schedule of `spec` and allocates its buffers on `t`.
    pub fn new(t: &'t mut dyn Transport, spec: CollSpec) -> Result<Scheduled<'t>, CollError> {
        Scheduled::rotating(t, spec, false)
    }

    /// [`Scheduled::new`], with `rotate_root`: the schedules of every root of a
    /// rooted collective, call `i` on root `i % np` ([`CollOp::select`]).
    pub fn rotating(
        t: &'t mut dyn Transport,
        spec: CollSpec,
        rotate_root: bool,
    ) -> Result<Scheduled<'t>, CollError> {
        let roots: Vec<Rank> = if rotate_root && spec.algorithm.collective().is_rooted() {
            (0..spec.np).collect()
        } else {
            vec![spec.root]
        };
        let schedules = roots
            .into_iter()
            .map(|root| CollSpec { root, ..spec }.schedule(t.rank()))
            .collect::<Result<Vec<_>, _>>()?;
        let buffers = CollBuffers::alloc_for(t, &schedules)?;
        let by_root = schedules
            .into_iter()
            .map(|s| Executor::new(s, buffers))
            .collect::<Result<_, _>>()?;
        Ok(Scheduled {
            t,
            spec,
            by_root,
            current: 0,
        })
    }

    /// Releases the buffers.
    pub fn free(self) -> Result<(), CollError> {
        self.by_root[0].buffers().free(self.t)?;
        Ok(())
    }
}

impl std::fmt::Debug for Scheduled<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduled")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl CollOp for Scheduled<'_> {
    fn label(&self) -> String {
        format!(
            "{}/{}",
            self.spec.algorithm.collective(),
            self.spec.algorithm
        )
    }
    fn select(&mut self, index: usize) -> Rank {
        if self.by_root.len() > 1 {
            self.current = index % self.by_root.len();
            self.spec.root = self.current;
        }
        self.spec.root
    }
    fn transport(&mut self) -> &mut dyn Transport {
        self.t
    }
    fn run(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.by_root[self.current].run_with(self.t, interrupts)
    }
    fn start(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.by_root[self.current].start_with(self.t, interrupts)
    }
    fn test(&mut self, interrupts: &mut dyn Interrupts) -> Result<bool, CollError> {
        self.by_root[self.current].test_with(self.t, interrupts)
    }
    fn wait(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.by_root[self.current].wait_with(self.t, interrupts)
    }
    fn fill(&mut self) -> Result<(), CollError> {
        let rank = self.t.rank();
        check::fill(&self.spec, rank, self.t, self.by_root[0].buffers())?;
        Ok(())
    }
    fn verify(&mut self) -> Result<(), CollError> {
        let rank = self.t.rank();
        check::verify(&self.spec, rank, self.t, self.by_root[0].buffers())?;
        Ok(())
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.free()
    }
}
