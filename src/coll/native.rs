//! A transport's own collective (MPI's `MPI_Bcast`, `MPI_Ibcast`, ...), called
//! through [`Transport::native_collective`] and
//! [`Transport::start_native_collective`], on buffers laid out as our schedules'
//! are, so that [`check`] fills and verifies them and the figures compare like with
//! like. This is the one path by which ngauge calls a library's collectives: `coll`
//! (with rotating roots, [`Implementation::Native`]), `late` and `nbc` time it as
//! a [`CollOp`] ([`NativeOp`]).
//!
//! The layout ([`NativeOp`]): the broadcast message in `Data`; a gather's and an
//! allgather's blocks in `Data` (on the root), with this rank's block sent from
//! `Tmp0`; a scatter's blocks sent from `Tmp0` on the root into this rank's block
//! of `Data`; an (all)reduce's vector of little-endian `u64` words summed from
//! `Tmp0` into `Data`; a reduce-scatter's blocks summed from `Tmp0` into this
//! rank's block of `Data`; an all-to-all(-v) from `Data` into `Out` (the
//! all-to-all-v's counts and displacements in `Tmp1`). MPI forbids a send
//! buffer that is also the receive buffer, hence the copies of the operand that
//! [`NativeOp`]'s [`CollOp::fill`] makes.
//!
//! [`Implementation::Native`]: crate::patterns::coll::Implementation::Native

use super::exec::Interrupts;
use super::op::CollOp;
use super::{check, Buf, CollBuffers, CollError, CollSpec, Collective};
use ngauge_transport::{NativeCollective, Rank, RequestId, Transport};

/// One blocking call of `t`'s own collective; an error on a transport that has
/// none.
#[inline]
fn run(t: &mut dyn Transport, call: NativeCollective) -> Result<(), CollError> {
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

/// Bytes of one count or displacement of MPI's all-to-all-v (a C `int`).
const LAYOUT_WORD: usize = 4;

/// Rank `rank`'s arrays of an all-to-all-v, in bytes, as
/// [`NativeCollective::Alltoallv`] wants them.
fn layout(spec: &CollSpec, rank: Rank) -> Result<Vec<u8>, CollError> {
    let c = spec.algorithm.counts().unwrap_or(super::Counts::Uniform);
    let np = spec.np;
    let mut words = vec![0usize; 4 * np];
    let (mut sent, mut got) = (0, 0);
    for j in 0..np {
        let (out, into) = (c.count(rank, j), c.count(j, rank));
        words[j] = out * spec.size_bytes;
        words[np + j] = sent;
        words[2 * np + j] = into * spec.size_bytes;
        words[3 * np + j] = got;
        sent += words[j];
        got += words[2 * np + j];
    }
    let mut bytes = Vec::with_capacity(words.len() * LAYOUT_WORD);
    for w in words {
        let w = i32::try_from(w).map_err(|_| CollError::Unsupported {
            what: format!("MPI_Alltoallv counts bytes in an int, and {w} bytes is more"),
        })?;
        bytes.extend_from_slice(&w.to_ne_bytes());
    }
    Ok(bytes)
}

/// The transport's own collective of a [`CollSpec`] as a [`CollOp`], blocking or
/// nonblocking, on the layout of the module docs, its data checked like our
/// schedules'. [`Interrupts`] are polled only between calls (MPI's progress engine
/// is opaque), where ours reach every step.
pub struct NativeOp<'t> {
    t: &'t mut dyn Transport,
    /// Its root is the selected call's.
    spec: CollSpec,
    rotate: bool,
    buffers: CollBuffers,
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

    /// [`NativeOp::new`], after checking `spec` (only its collective, size, job
    /// size and root matter: the library picks its algorithm); with `rotate_root`,
    /// call `i` of a rooted collective on root `i % np` ([`CollOp::select`]).
    pub fn rotating(
        t: &'t mut dyn Transport,
        spec: CollSpec,
        rotate_root: bool,
    ) -> Result<NativeOp<'t>, CollError> {
        spec.validate()?;
        let collective = spec.algorithm.collective();
        let (np, size) = (spec.np, spec.size_bytes);
        if collective.is_reduction() && size % 8 != 0 {
            return Err(CollError::Unsupported {
                what: format!(
                    "a native {collective} sums 8-byte words: {size} bytes is not a multiple of 8"
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
            Collective::Gather | Collective::Allgather => {
                need(Buf::Data, whole);
                need(Buf::Tmp0, size);
            }
            Collective::Scatter | Collective::ReduceScatter => {
                need(Buf::Data, whole);
                need(Buf::Tmp0, whole);
            }
            Collective::Allreduce | Collective::Reduce => {
                need(Buf::Data, size);
                need(Buf::Tmp0, size);
            }
            Collective::Alltoall | Collective::Alltoallv => {
                let (sent, got) = check::exchanged(&spec, t.rank());
                need(Buf::Data, sent);
                need(Buf::Out, got);
                if collective == Collective::Alltoallv {
                    need(Buf::Tmp1, 4 * np * LAYOUT_WORD);
                }
            }
            Collective::Barrier => {}
        }
        // A 0-byte operation still names a region: give every buffer a byte.
        if collective != Collective::Barrier {
            for len in &mut lens {
                *len = (*len).max(1);
            }
        }
        let buffers = CollBuffers::alloc_lens(t, lens)?;
        if collective == Collective::Alltoallv {
            let layout = layout(&spec, t.rank())?;
            let id = buffers.id(Buf::Tmp1).expect("allocated above");
            t.buffer_mut(id)?[..layout.len()].copy_from_slice(&layout);
        }
        let mut op = NativeOp {
            t,
            spec,
            rotate: rotate_root && collective.is_rooted(),
            buffers,
            call: NativeCollective::Barrier,
            pending: None,
            started: false,
        };
        op.call = op.native_call();
        Ok(op)
    }

    /// The selected call: its regions and root.
    fn native_call(&self) -> NativeCollective {
        let region = |buf: Buf, len: usize| {
            self.buffers
                .id(buf)
                .expect("allocated in NativeOp::rotating")
                .prefix(len)
        };
        let (np, size, root) = (self.spec.np, self.spec.size_bytes, self.spec.root);
        let own = || {
            let data = self.buffers.id(Buf::Data).expect("allocated");
            data.region(self.t.rank() * size, size.max(1))
        };
        match self.spec.algorithm.collective() {
            Collective::Barrier => NativeCollective::Barrier,
            Collective::Bcast => NativeCollective::Bcast {
                root,
                data: region(Buf::Data, size),
            },
            Collective::Gather => NativeCollective::Gather {
                root,
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
            Collective::Alltoallv => {
                let (sent, got) = check::exchanged(&self.spec, self.t.rank());
                NativeCollective::Alltoallv {
                    send: region(Buf::Data, sent),
                    recv: region(Buf::Out, got),
                    layout: region(Buf::Tmp1, 4 * np * LAYOUT_WORD),
                }
            }
            Collective::Reduce => NativeCollective::Reduce {
                root,
                send: region(Buf::Tmp0, size),
                recv: region(Buf::Data, size),
            },
            Collective::Allgather => NativeCollective::Allgather {
                send: region(Buf::Tmp0, size),
                recv: region(Buf::Data, np * size),
            },
            Collective::ReduceScatter => NativeCollective::ReduceScatter {
                send: region(Buf::Tmp0, np * size),
                recv: own(),
            },
            Collective::Scatter => NativeCollective::Scatter {
                root,
                send: region(Buf::Tmp0, np * size),
                recv: own(),
            },
        }
    }

    /// Releases the buffers.
    pub fn free(self) -> Result<(), CollError> {
        Ok(self.buffers.free(self.t)?)
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
        if self.rotate {
            self.spec.root = index % self.spec.np;
            self.call = self.native_call();
        }
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
    /// [`check::fill`], then this rank's operand copied where the library sends it
    /// from.
    fn fill(&mut self) -> Result<(), CollError> {
        let rank = self.t.rank();
        check::fill(&self.spec, rank, self.t, &self.buffers)?;
        let size = self.spec.size_bytes;
        let (from, len) = match self.spec.algorithm.collective() {
            Collective::Gather | Collective::Allgather => (rank * size, size),
            Collective::Allreduce | Collective::Reduce => (0, size),
            Collective::Scatter | Collective::ReduceScatter => (0, self.spec.np * size),
            _ => return Ok(()),
        };
        let (data, tmp) = (self.buffers.id(Buf::Data), self.buffers.id(Buf::Tmp0));
        let (Some(data), Some(tmp)) = (data, tmp) else {
            return Ok(());
        };
        let operand = self.t.buffer(data)?[from..from + len].to_vec();
        self.t.buffer_mut(tmp)?[..len].copy_from_slice(&operand);
        Ok(())
    }
    fn verify(&mut self) -> Result<(), CollError> {
        check::verify(&self.spec, self.t.rank(), self.t, &self.buffers)
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.free()
    }
}
