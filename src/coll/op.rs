//! One collective, ready to be called again and again, whoever implements it: our
//! schedule over any transport ([`Scheduled`]), or the transport's own function
//! (MPI's, [`super::NativeOp`]). The late-arrival and nonblocking-collective
//! patterns time a [`CollOp`] and do not care which.
//!
//! The operation holds its transport, so a pattern gets a `&mut dyn CollOp`, a
//! clock and a control channel, and nothing else.

use super::exec::Interrupts;
use super::{check, CollError, CollSpec, Collective, Executor};
use ngauge_transport::{Transport, WaitMode};

/// A collective that can be called blocking, or started, tested and waited for.
///
/// Every call on every rank must be matched by the same call on the others (it is
/// a collective). After an error the operation is in an unknown state: drop it.
pub trait CollOp {
    /// What runs, for reports: `allreduce/recursive-doubling`, `MPI_Allreduce`.
    fn label(&self) -> String;
    /// The operation.
    fn collective(&self) -> Collective;
    /// Bytes per rank (as [`CollSpec::size_bytes`]).
    fn size_bytes(&self) -> usize;
    /// How the transport waits.
    fn wait_mode(&self) -> WaitMode;
    /// Whether [`Interrupts`] reach inside the operation. Ours: at every step. MPI's:
    /// never (its progress engine is opaque), so noise injected through them
    /// would land only between calls.
    fn interruptible(&self) -> bool;
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
    spec: CollSpec,
    executor: Executor,
}

impl<'t> Scheduled<'t> {
    /// Builds this rank's schedule of `spec` and allocates its buffers on `t`.
    pub fn new(t: &'t mut dyn Transport, spec: CollSpec) -> Result<Scheduled<'t>, CollError> {
        let schedule = spec.schedule(t.rank())?;
        let executor = Executor::prepare(t, schedule)?;
        Ok(Scheduled { t, spec, executor })
    }

    /// Releases the buffers.
    pub fn free(self) -> Result<(), CollError> {
        self.executor.buffers().free(self.t)?;
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
    fn collective(&self) -> Collective {
        self.spec.algorithm.collective()
    }
    fn size_bytes(&self) -> usize {
        self.spec.size_bytes
    }
    fn wait_mode(&self) -> WaitMode {
        self.t.wait_mode()
    }
    fn interruptible(&self) -> bool {
        true
    }
    fn run(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.executor.run_with(self.t, interrupts)
    }
    fn start(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.executor.start_with(self.t, interrupts)
    }
    fn test(&mut self, interrupts: &mut dyn Interrupts) -> Result<bool, CollError> {
        self.executor.test_with(self.t, interrupts)
    }
    fn wait(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        self.executor.wait_with(self.t, interrupts)
    }
    fn fill(&mut self) -> Result<(), CollError> {
        let rank = self.t.rank();
        check::fill(&self.spec, rank, self.t, self.executor.buffers())?;
        Ok(())
    }
    fn verify(&mut self) -> Result<(), CollError> {
        let rank = self.t.rank();
        check::verify(&self.spec, rank, self.t, self.executor.buffers())?;
        Ok(())
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.free()
    }
}
