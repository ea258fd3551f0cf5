//! A transport's own collective (MPI's `MPI_Bcast`, `MPI_Ibcast`, ...), called
//! through [`Transport::native_collective`] and
//! [`Transport::start_native_collective`], on buffers laid out as our schedules'
//! are, so that [`check`] fills and verifies them and the figures compare like with
//! like. This is the one path by which ngauge calls a library's collectives: `coll`
//! times it ([`crate::patterns::coll`], [`Implementation::Native`]), and `late` and
//! `nbc` time it as a [`CollOp`] ([`NativeOp`]).
//!
//! The layout ([`NativeCalls`]): the broadcast message in `Data`; a gather's blocks
//! in `Data` (on the root), with this rank's block sent from `Tmp0`; an allreduce's
//! vector of little-endian `u64` words summed from `Tmp0` into `Data`; an
//! all-to-all from `Data` into `Out`. MPI forbids a send buffer that is also the
//! receive buffer, hence the copies of the operand that [`NativeCalls::fill`]
//! makes.
//!
//! [`Implementation::Native`]: crate::patterns::coll::Implementation::Native

use super::exec::Interrupts;
use super::op::CollOp;
use super::{check, Buf, CollBuffers, CollError, CollSpec, Collective};
use ngauge_transport::{NativeCollective, Rank, RequestId, Transport};

/// The buffers of a native collective and the calls on them, for one root or for
/// every root in turn.
#[derive(Debug)]
pub struct NativeCalls {
    collective: Collective,
    np: usize,
    size: usize,
    root: Rank,
    rotate: bool,
    buffers: CollBuffers,
}

impl NativeCalls {
    /// Checks `spec` (only its collective, size, job size and root matter: the
    /// library picks its algorithm) and allocates the buffers on `t`. With
    /// `rotate_root`, call `i` of a rooted collective uses root `i % np`.
    pub fn new(
        t: &mut dyn Transport,
        spec: &CollSpec,
        rotate_root: bool,
    ) -> Result<NativeCalls, CollError> {
        spec.validate()?;
        let collective = spec.algorithm.collective();
        let (np, size) = (spec.np, spec.size_bytes);
        if collective == Collective::Allreduce && size % 8 != 0 {
            return Err(CollError::Unsupported {
                what: format!(
                    "a native allreduce sums 8-byte words: {size} bytes is not a multiple of 8"
                ),
            });
        }
        let whole = size.checked_mul(np).ok_or(CollError::Unsupported {
            what: format!("{size} bytes times {np} ranks overflows"),
        })?;
        let mut lens = [0; super::schedule::BUFFERS];
        let mut need = |buf: Buf, len: usize| lens[buf.index()] = len;
        match collective {
            Collective::Bcast => need(Buf::Data, size),
            Collective::Gather => {
                need(Buf::Data, whole);
                need(Buf::Tmp0, size);
            }
            Collective::Allreduce => {
                need(Buf::Data, size);
                need(Buf::Tmp0, size);
            }
            Collective::Alltoall => {
                need(Buf::Data, whole);
                need(Buf::Out, whole);
            }
            Collective::Barrier => {}
        }
        // A 0-byte operation still names a region: give every buffer a byte.
        if collective != Collective::Barrier {
            for len in &mut lens {
                *len = (*len).max(1);
            }
        }
        Ok(NativeCalls {
            collective,
            np,
            size,
            root: spec.root,
            rotate: rotate_root && collective.is_rooted(),
            buffers: CollBuffers::alloc_lens(t, lens)?,
        })
    }

    /// The root of call `index`.
    pub fn root(&self, index: usize) -> Rank {
        if self.rotate {
            index % self.np
        } else {
            self.root
        }
    }

    /// Call `index`: the regions and the root.
    pub fn call(&self, index: usize) -> NativeCollective {
        let region = |buf: Buf, len: usize| {
            self.buffers
                .id(buf)
                .expect("allocated in NativeCalls::new")
                .prefix(len)
        };
        let (np, size) = (self.np, self.size);
        match self.collective {
            Collective::Barrier => NativeCollective::Barrier,
            Collective::Bcast => NativeCollective::Bcast {
                root: self.root(index),
                data: region(Buf::Data, size),
            },
            Collective::Gather => NativeCollective::Gather {
                root: self.root(index),
                send: region(Buf::Tmp0, size),
                recv: region(Buf::Data, np * size),
            },
            Collective::Allreduce => NativeCollective::Allreduce {
                send: region(Buf::Tmp0, size),
                recv: region(Buf::Data, size),
            },
            Collective::Alltoall => NativeCollective::Alltoall {
                send: region(Buf::Data, np * size),
                recv: region(Buf::Out, np * size),
            },
        }
    }

    /// [`check::fill`] for `spec` (whose root is the call's), then this rank's
    /// operand copied where the library sends it from.
    pub fn fill(&self, t: &mut dyn Transport, spec: &CollSpec) -> Result<(), CollError> {
        let rank = t.rank();
        check::fill(spec, rank, t, &self.buffers)?;
        let from = match self.collective {
            Collective::Gather => rank * self.size,
            Collective::Allreduce => 0,
            _ => return Ok(()),
        };
        let (data, tmp) = (self.buffers.id(Buf::Data), self.buffers.id(Buf::Tmp0));
        let (Some(data), Some(tmp)) = (data, tmp) else {
            return Ok(());
        };
        let operand = t.buffer(data)?[from..from + self.size].to_vec();
        t.buffer_mut(tmp)?[..self.size].copy_from_slice(&operand);
        Ok(())
    }

    /// [`check::verify`] for `spec`.
    pub fn verify(&self, t: &dyn Transport, spec: &CollSpec) -> Result<(), CollError> {
        check::verify(spec, t.rank(), t, &self.buffers)
    }

    /// Releases the buffers.
    pub fn free(self, t: &mut dyn Transport) -> Result<(), CollError> {
        Ok(self.buffers.free(t)?)
    }
}

/// One blocking call of `t`'s own collective; an error on a transport that has
/// none.
#[inline]
pub fn run(t: &mut dyn Transport, call: NativeCollective) -> Result<(), CollError> {
    match t.native_collective(call) {
        Some(result) => Ok(result?),
        None => Err(no_collectives(t)),
    }
}

fn no_collectives(t: &dyn Transport) -> CollError {
    CollError::NoNativeCollectives {
        transport: t.name(),
    }
}

/// The transport's own collective of a [`CollSpec`] as a [`CollOp`], blocking or
/// nonblocking, its data checked like our schedules'. [`Interrupts`] are polled
/// only between calls (MPI's progress engine is opaque), where ours reach every step.
pub struct NativeOp<'t> {
    t: &'t mut dyn Transport,
    /// Its root is the selected call's.
    spec: CollSpec,
    calls: NativeCalls,
    /// The selected call, its regions built.
    call: NativeCollective,
    pending: Option<RequestId>,
    started: bool,
}

impl<'t> NativeOp<'t> {
    /// Allocates the buffers of `spec`'s collective (its algorithm and segment are
    /// ignored) on `t`. On a transport without collectives of its own, the first
    /// call fails ([`CollError::NoNativeCollectives`]).
    pub fn new(t: &'t mut dyn Transport, spec: CollSpec) -> Result<NativeOp<'t>, CollError> {
        NativeOp::rotating(t, spec, false)
    }

    /// [`NativeOp::new`], with `rotate_root`: call `i` of a rooted collective on
    /// root `i % np` ([`CollOp::select`]).
    pub fn rotating(
        t: &'t mut dyn Transport,
        spec: CollSpec,
        rotate_root: bool,
    ) -> Result<NativeOp<'t>, CollError> {
        let calls = NativeCalls::new(t, &spec, rotate_root)?;
        Ok(NativeOp {
            t,
            spec,
            call: calls.call(0),
            calls,
            pending: None,
            started: false,
        })
    }

    /// Releases the buffers.
    pub fn free(self) -> Result<(), CollError> {
        self.calls.free(self.t)
    }
}

impl std::fmt::Debug for NativeOp<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeOp")
            .field("spec", &self.spec)
            .field("transport", &self.t.name())
            .finish_non_exhaustive()
    }
}

impl CollOp for NativeOp<'_> {
    /// `bcast/mpi`: the operation and whose it is.
    fn label(&self) -> String {
        format!("{}/{}", self.spec.algorithm.collective(), self.t.name())
    }
    fn select(&mut self, index: usize) -> Rank {
        self.call = self.calls.call(index);
        self.spec.root = self.calls.root(index);
        self.spec.root
    }
    fn transport(&mut self) -> &mut dyn Transport {
        self.t
    }
    fn run(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        interrupts.poll();
        run(self.t, self.call)?;
        interrupts.poll();
        Ok(())
    }
    fn start(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        interrupts.poll();
        let request = match self.t.start_native_collective(self.call) {
            Some(result) => result?,
            None => return Err(no_collectives(self.t)),
        };
        self.pending = Some(request);
        self.started = true;
        Ok(())
    }
    fn test(&mut self, interrupts: &mut dyn Interrupts) -> Result<bool, CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        let Some(request) = self.pending else {
            return Ok(true);
        };
        let done = self.t.test(request)?;
        if done {
            self.pending = None;
            interrupts.poll();
        }
        Ok(done)
    }
    fn wait(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        if let Some(request) = self.pending.take() {
            self.t.wait(request)?;
            interrupts.poll();
        }
        Ok(())
    }
    fn fill(&mut self) -> Result<(), CollError> {
        self.calls.fill(self.t, &self.spec)
    }
    fn verify(&mut self) -> Result<(), CollError> {
        self.calls.verify(self.t, &self.spec)
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.free()
    }
}
