//! [`MpiTransport`]: the [`Transport`] trait over MPI point-to-point on
//! `MPI_COMM_WORLD`.
//!
//! `send`/`recv` are `MPI_Send`/`MPI_Recv` when the transport polls (MPI's own
//! progress loop, which is what a C benchmark measures), and `MPI_Isend`/`MPI_Irecv`
//! followed by `MPI_Test` with a yield between tests when it blocks (so co-located
//! ranks that outnumber the cores still get to run). Messages are tagged 0 on
//! `MPI_COMM_WORLD` (a duplicate costs a few ns per message in Open MPI, and the C
//! ping-pong it is compared with uses the world); the MPI control plane uses tags 1
//! and 2 on the same communicator, so nothing else in ngauge can match them.

use crate::datatype::{Datatype, ReduceOp};
use crate::ffi;
use crate::runtime::{Caller, Comm, Mpi, MpiError};
use ngauge_transport::NativeCollective;
use ngauge_transport::{
    Access, BufferPool, Buffers, Capabilities, NativeRole, Rank, Region, RequestId, Transport,
    TransportError, TscRead, WaitMode,
};
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

pub(crate) const NAME: &str = "mpi";
const TAG: c_int = 0;

/// Options of the MPI transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiOptions {
    /// Spin in MPI's progress engine, or test and yield.
    pub wait: WaitMode,
}

impl Default for MpiOptions {
    fn default() -> Self {
        MpiOptions {
            wait: WaitMode::Poll,
        }
    }
}

/// What a pending request is, for completing it and for naming it in errors.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Send { peer: Rank },
    Recv { peer: Rank, expected: usize },
    Coll { name: &'static str, root: Rank },
}

#[derive(Debug)]
struct Pending {
    generation: u32,
    op: Op,
    /// The regions MPI reads or writes until the request completes.
    holds: [Option<(Region, Access)>; 2],
}

/// MPI point-to-point messages (and MPI's collectives, see the `coll` methods)
/// between the ranks of `MPI_COMM_WORLD`.
///
/// Not `Send`: only the thread that initialized MPI may call it, so the transport is
/// made there and stays there (which is why its calls need no check).
#[derive(Debug)]
pub struct MpiTransport {
    pub(crate) comm: Comm,
    rank: Rank,
    size: usize,
    wait: WaitMode,
    pub(crate) pool: BufferPool,
    /// Pending requests, indexed by the shim's request slot.
    pending: Vec<Option<Pending>>,
    generation: u32,
    _not_send: PhantomData<*const ()>,
}

impl MpiTransport {
    /// A transport over `MPI_COMM_WORLD`.
    /// Fails off the thread that initialized MPI.
    pub fn new(mpi: &Arc<Mpi>, options: MpiOptions) -> Result<Self, TransportError> {
        let comm = mpi.world().map_err(setup)?; // checks the thread
        Ok(MpiTransport {
            rank: mpi.rank(),
            size: mpi.size(),
            comm,
            wait: options.wait,
            pool: BufferPool::new(NAME),
            pending: Vec::new(),
            generation: 0,
            _not_send: PhantomData,
        })
    }

    /// The ngauge transport constructor: starts MPI (under an MPI launcher only),
    /// checks that the control plane's ranks are MPI's ranks, and returns the
    /// connected transport. MPI needs no address exchange; the control plane only
    /// confirms that every rank got this far.
    pub fn connect(
        control: &mut dyn ngauge_transport::Control,
        options: MpiOptions,
    ) -> Result<Self, TransportError> {
        let mpi = Mpi::init_under_launcher().map_err(|e| TransportError::Unavailable {
            transport: NAME,
            reason: e.to_string(),
        })?;
        if (control.rank(), control.size()) != (mpi.rank(), mpi.size()) {
            return Err(setup(format!(
                "the control plane says rank {} of {}, MPI says rank {} of {}: \
                 start every rank with the same MPI launcher",
                control.rank(),
                control.size(),
                mpi.rank(),
                mpi.size()
            )));
        }
        let transport = MpiTransport::new(&mpi, options)?;
        control
            .barrier()
            .map_err(|e| setup(format!("barrier after starting the MPI transport: {e}")))?;
        Ok(transport)
    }

    /// The MPI library this transport runs on.
    pub fn mpi(&self) -> &Arc<Mpi> {
        self.comm.mpi()
    }

    #[inline]
    pub(crate) fn check_peer(&self, peer: Rank) -> Result<c_int, TransportError> {
        ngauge_transport::util::check_peer(NAME, peer, self.rank, self.size)?;
        Ok(peer as c_int)
    }

    pub(crate) fn check_root(&self, op: &'static str, root: Rank) -> Result<c_int, TransportError> {
        if root >= self.size {
            return Err(invalid(
                op,
                root,
                format!("root {root} outside a job of {} ranks", self.size),
            ));
        }
        Ok(root as c_int)
    }

    /// The shim's request slot and the generation, packed into one id.
    fn register(&mut self, slot: c_int, op: Op, holds: [Option<(Region, Access)>; 2]) -> RequestId {
        let slot = slot as usize;
        if self.pending.len() <= slot {
            self.pending.resize_with(slot + 1, || None);
        }
        self.generation = self.generation.wrapping_add(1);
        self.pending[slot] = Some(Pending {
            generation: self.generation,
            op,
            holds,
        });
        RequestId((u64::from(self.generation) << 32) | slot as u64)
    }

    /// Starts a nonblocking operation whose pointers were taken from `regions`:
    /// holds them in the pool (reads shared, writes exclusive; a conflict with a
    /// pending operation fails with `BufferBusy` before MPI sees anything), calls
    /// `start`, and registers the request.
    pub(crate) fn start(
        &mut self,
        op: Op,
        regions: [Option<(Region, Access)>; 2],
        start: impl FnOnce(*mut c_int) -> c_int,
    ) -> Result<RequestId, TransportError> {
        for (i, &(region, access)) in regions.iter().flatten().enumerate() {
            if let Err(e) = self.pool.acquire_as(region, access) {
                for &(region, access) in regions.iter().flatten().take(i) {
                    self.pool.release_region(region, access);
                }
                return Err(e);
            }
        }
        let mut slot: c_int = -1;
        let rc = {
            let caller = Caller::take();
            caller.check(op_name(op), start(&mut slot))
        };
        if let Err(e) = rc {
            for &(region, access) in regions.iter().flatten() {
                self.pool.release_region(region, access);
            }
            return Err(mpi_error(op, e));
        }
        Ok(self.register(slot, op, regions))
    }

    fn lookup(&self, request: RequestId) -> Result<usize, TransportError> {
        let slot = (request.0 & 0xffff_ffff) as usize;
        let generation = (request.0 >> 32) as u32;
        match self.pending.get(slot) {
            Some(Some(p)) if p.generation == generation => Ok(slot),
            _ => Err(TransportError::UnknownRequest {
                transport: NAME,
                request,
            }),
        }
    }

    /// Retires a completed request and turns the shim's verdict into a result.
    fn complete(
        &mut self,
        call: &'static str,
        slot: usize,
        rc: c_int,
        got: c_int,
        caller: Caller,
    ) -> Result<(), TransportError> {
        let verdict = caller.check(call, rc);
        let pending = self.pending[slot].take().expect("looked up");
        for &(region, access) in pending.holds.iter().flatten() {
            self.pool.release_region(region, access);
        }
        finish(pending.op, rc, verdict, got)
    }

    #[inline(never)]
    fn send_blocking(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let request = self.isend(peer, region)?;
        self.wait_blocking(request)
    }

    #[inline(never)]
    fn recv_blocking(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let request = self.irecv(peer, region)?;
        self.wait_blocking(request)
    }

    /// [`Transport::native_round_trips`] in poll mode: checks everything `send` and
    /// `recv` check, once, then lets the shim run the whole loop
    /// (`ngm_pingpong`). `None` when the shim has no loop on this machine (it
    /// returns before any MPI call).
    fn native_loop(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Option<Result<(), TransportError>> {
        let checked = (|| -> Result<_, TransportError> {
            let peer_c = self.check_peer(peer)?;
            let slen = count(send.len)?;
            let rlen = count(recv.len)?;
            // Bounds and holds of both regions are checked before either pointer is
            // taken; the write pointer first, so no reference to the receive bytes
            // outlives its raw pointer. The regions may overlap (one buffer for
            // both): the shim never runs the send and the receive at once.
            let rptr = self.pool.region_for_write(recv)?.as_mut_ptr();
            let sptr = self.pool.region_for_read(send)?.as_ptr();
            Ok((peer_c, slen, rlen, sptr, rptr))
        })();
        let (peer_c, slen, rlen, sptr, rptr) = match checked {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        let (initiator, plain, warmup, rounds, ticks) = match role {
            NativeRole::Initiator {
                warmup,
                ticks,
                read,
            } => {
                let plain = c_int::from(read == TscRead::Rdtsc);
                (1, plain, warmup, ticks.len(), ticks.as_mut_ptr())
            }
            NativeRole::Responder { round_trips } => (0, 0, 0, round_trips, std::ptr::null_mut()),
        };
        let (Ok(warmup), Ok(rounds)) = (i64::try_from(warmup), i64::try_from(rounds)) else {
            return Some(Err(invalid(
                "pingpong",
                peer,
                format!("{warmup} + {rounds} round trips do not fit MPI's loop counter"),
            )));
        };
        let (mut got, mut in_recv): (c_int, c_int) = (-1, 0);
        let caller = Caller::take();
        // SAFETY: `sptr` points at `slen` readable bytes and `rptr` at `rlen`
        // writable bytes of pool buffers that stay allocated for the call (the pool
        // is borrowed through `&mut self`, so nothing can free or hand them out),
        // that no pending operation reads or writes (`region_for_read`/`_write`),
        // and that no Rust reference covers while MPI writes the receive bytes.
        // MPI_Recv writes at most `rlen` bytes. The initiator's `ticks` is an
        // exclusive borrow of exactly `rounds` u64 slots, the responder's null and
        // unused; `got` and `in_recv` are valid out pointers. On the MPI thread
        // (the transport is not Send).
        let rc = unsafe {
            ffi::ngm_pingpong(
                initiator,
                plain,
                peer_c,
                sptr.cast::<c_void>(),
                slen,
                rptr.cast::<c_void>(),
                rlen,
                warmup,
                rounds,
                ticks,
                &mut got,
                &mut in_recv,
            )
        };
        match rc {
            ffi::OK => Some(Ok(())),
            ffi::E_UNSUPPORTED => None,
            // A short message: `finish` turns the length into SizeMismatch.
            ffi::E_COUNT => Some(recv_failed(&caller, peer, recv.len, ffi::OK, got)),
            rc if in_recv != 0 => Some(recv_failed(&caller, peer, recv.len, rc, got)),
            rc => Some(Err(send_failed(&caller, peer, rc))),
        }
    }

    fn wait_blocking(&mut self, request: RequestId) -> Result<(), TransportError> {
        let mut backoff = Backoff::default();
        while !self.test(request)? {
            backoff.pause();
        }
        Ok(())
    }
}

/// Turns the outcome of a completed operation into a `Result`.
fn finish(
    op: Op,
    rc: c_int,
    verdict: Result<(), MpiError>,
    got: c_int,
) -> Result<(), TransportError> {
    match (op, verdict) {
        (Op::Recv { peer, expected }, Err(_)) if rc == ffi::E_TRUNCATE => Err(TransportError::Io {
            transport: NAME,
            peer,
            op: "recv",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("message longer than the {expected} bytes posted (MPI_ERR_TRUNCATE)"),
            ),
        }),
        (op, Err(e)) => Err(mpi_error(op, e)),
        (Op::Recv { peer, expected }, Ok(())) if got as usize != expected => {
            Err(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: expected,
                got_bytes: got.max(0) as usize,
            })
        }
        _ => Ok(()),
    }
}

/// The error of a failed `MPI_Send` (out of the hot path).
#[cold]
#[inline(never)]
fn send_failed(caller: &Caller, peer: Rank, rc: c_int) -> TransportError {
    let verdict = caller.check("MPI_Send", rc);
    match finish(Op::Send { peer }, rc, verdict, 0) {
        Err(e) => e,
        Ok(()) => unreachable!("a failed return code is an error"),
    }
}

/// The outcome of an `MPI_Recv` that failed or brought a message of another size
/// than the one posted (out of the hot path).
#[cold]
#[inline(never)]
fn recv_failed(
    caller: &Caller,
    peer: Rank,
    expected: usize,
    rc: c_int,
    got: c_int,
) -> Result<(), TransportError> {
    let verdict = caller.check("MPI_Recv", rc);
    finish(Op::Recv { peer, expected }, rc, verdict, got)
}

/// Gives the core away between tests: a yield at first, then short sleeps, so a
/// blocking-mode wait neither burns a core a co-located rank needs nor adds more than
/// tens of microseconds once the peer is back.
#[derive(Default)]
pub(crate) struct Backoff {
    rounds: u32,
}

impl Backoff {
    pub(crate) fn pause(&mut self) {
        self.rounds = self.rounds.saturating_add(1);
        if self.rounds < 1000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Send { .. } => "MPI_Isend",
        Op::Recv { .. } => "MPI_Irecv",
        Op::Coll { name, .. } => name,
    }
}

/// The rank an operation is about (the root for collectives).
fn op_peer(op: Op) -> Rank {
    match op {
        Op::Send { peer } | Op::Recv { peer, .. } => peer,
        Op::Coll { root, .. } => root,
    }
}

pub(crate) fn mpi_error(op: Op, e: MpiError) -> TransportError {
    TransportError::Io {
        transport: NAME,
        peer: op_peer(op),
        op: match op {
            Op::Send { .. } => "send",
            Op::Recv { .. } => "recv",
            Op::Coll { name, .. } => name,
        },
        source: std::io::Error::other(e),
    }
}

pub(crate) fn invalid(op: &'static str, peer: Rank, what: String) -> TransportError {
    TransportError::Io {
        transport: NAME,
        peer,
        op,
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, what),
    }
}

fn setup(reason: impl ToString) -> TransportError {
    ngauge_transport::util::setup_error(NAME, reason.to_string())
}

/// A message length as MPI's `int` count.
#[inline]
pub(crate) fn count(len: usize) -> Result<c_int, TransportError> {
    c_int::try_from(len).map_err(|_| TransportError::TooLarge {
        transport: NAME,
        len_bytes: len,
        max_bytes: c_int::MAX as usize,
    })
}

impl Transport for MpiTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: Some(c_int::MAX as usize),
            may_split: true,
            needs_registered_memory: false,
            checks_message_size: true,
        }
    }
    fn wait_mode(&self) -> WaitMode {
        self.wait
    }
    fn buffers(&self) -> &dyn Buffers {
        &self.pool
    }
    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.pool
    }

    // The hot path of every latency measurement: `send` and `recv` in poll mode are
    // one bounds-checked pool lookup, one shim call and one comparison; everything
    // else (blocking mode, error reports) is out of line so that it costs neither
    // instructions nor saved registers per message (`scripts/bench-mpi`).
    #[inline]
    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        if self.wait == WaitMode::Block {
            return self.send_blocking(peer, region);
        }
        let peer_c = self.check_peer(peer)?;
        let len = count(region.len)?;
        let ptr = self.pool.region_for_read(region)?.as_ptr();
        let caller = Caller::take();
        // SAFETY: `ptr` points at `len` readable bytes of a pool buffer that stays
        // allocated for the call (the pool is borrowed through `self`) and that no
        // pending receive writes (`region_for_read`); MPI_Send returns only when it
        // no longer reads them. On the MPI thread (the transport is not Send).
        let rc = unsafe { ffi::ngm_send(self.comm.index, ptr.cast::<c_void>(), len, peer_c, TAG) };
        if rc != ffi::OK {
            return Err(send_failed(&caller, peer, rc));
        }
        Ok(())
    }

    #[inline]
    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        if self.wait == WaitMode::Block {
            return self.recv_blocking(peer, region);
        }
        let peer_c = self.check_peer(peer)?;
        let len = count(region.len)?;
        let ptr = self.pool.region_for_write(region)?.as_mut_ptr();
        let mut got: c_int = -1;
        let caller = Caller::take();
        // SAFETY: `ptr` points at `len` writable bytes of a pool buffer that no Rust
        // reference covers during the call and that no pending operation reads or
        // writes (`region_for_write`); MPI_Recv writes at most `len` bytes (longer
        // messages fail with MPI_ERR_TRUNCATE). On the MPI thread (the transport is
        // not Send).
        let rc = unsafe {
            ffi::ngm_recv(
                self.comm.index,
                ptr.cast::<c_void>(),
                len,
                peer_c,
                TAG,
                &mut got,
            )
        };
        if rc == ffi::OK && got == len {
            return Ok(());
        }
        recv_failed(&caller, peer, region.len, rc, got)
    }

    /// The shim's loop (`ngm_pingpong`: MPI_Send and MPI_Recv between `rdtscp;
    /// lfence` readings, as in `benches/c/mpi_pingpong.c`, or plain `rdtsc` ones as
    /// the initiator's role says) in poll mode; `None` in
    /// block mode (whose waits yield the core, which a C benchmark's do not) and
    /// where the shim has no loop (not x86-64, no `rdtscp`).
    fn native_round_trips(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Option<Result<(), TransportError>> {
        if self.wait == WaitMode::Block {
            return None;
        }
        self.native_loop(peer, send, recv, role)
    }

    /// MPI's blocking collectives on this transport's communicator (`coll`), in
    /// either wait mode: MPI's own progress loop is part of what is measured.
    fn native_collective(&mut self, call: NativeCollective) -> Option<Result<(), TransportError>> {
        Some(match call {
            NativeCollective::Barrier => self.barrier(),
            NativeCollective::Bcast { root, data } => self.bcast(root, data),
            NativeCollective::Gather { root, send, recv } => self.gather(root, send, recv),
            NativeCollective::Allreduce { send, recv } => {
                self.allreduce(send, recv, Datatype::U64, ReduceOp::Sum)
            }
            NativeCollective::Alltoall { send, recv } => self.alltoall(send, recv),
            NativeCollective::Alltoallv { send, recv, layout } => {
                self.alltoallv(send, recv, layout)
            }
            NativeCollective::Reduce { root, send, recv } => {
                self.reduce(root, send, recv, Datatype::U64, ReduceOp::Sum)
            }
            NativeCollective::Allgather { send, recv } => self.allgather(send, recv),
            NativeCollective::ReduceScatter { send, recv } => self.reduce_scatter_block(send, recv),
            NativeCollective::Scatter { root, send, recv } => self.scatter(root, send, recv),
        })
    }

    /// Their nonblocking forms (`MPI_Ibcast`, ...), completed by `test`/`wait`.
    fn start_native_collective(
        &mut self,
        call: NativeCollective,
    ) -> Option<Result<RequestId, TransportError>> {
        Some(match call {
            NativeCollective::Barrier => self.ibarrier(),
            NativeCollective::Bcast { root, data } => self.ibcast(root, data),
            NativeCollective::Gather { root, send, recv } => self.igather(root, send, recv),
            NativeCollective::Allreduce { send, recv } => {
                self.iallreduce(send, recv, Datatype::U64, ReduceOp::Sum)
            }
            NativeCollective::Alltoall { send, recv } => self.ialltoall(send, recv),
            NativeCollective::Alltoallv { send, recv, layout } => {
                self.ialltoallv(send, recv, layout)
            }
            NativeCollective::Reduce { root, send, recv } => {
                self.ireduce(root, send, recv, Datatype::U64, ReduceOp::Sum)
            }
            NativeCollective::Allgather { send, recv } => self.iallgather(send, recv),
            NativeCollective::ReduceScatter { send, recv } => {
                self.ireduce_scatter_block(send, recv)
            }
            NativeCollective::Scatter { root, send, recv } => self.iscatter(root, send, recv),
        })
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        let peer_c = self.check_peer(peer)?;
        let len = count(region.len)?;
        // Checked against pending receives before any reference to the bytes is made
        // (`start` then holds them).
        let ptr = self.pool.region_for_read(region)?.as_ptr();
        let comm = self.comm.index;
        self.start(
            Op::Send { peer },
            [Some((region, Access::Read)), None],
            |slot| {
                // SAFETY: `ptr` points at `len` bytes of a pool buffer that `start` holds
                // for reading until the request completes, so it is neither freed, nor
                // handed out mutably, nor received into while MPI reads it; `slot` is a
                // valid out pointer.
                unsafe { ffi::ngm_isend(comm, ptr.cast::<c_void>(), len, peer_c, TAG, slot) }
            },
        )
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        let peer_c = self.check_peer(peer)?;
        let len = count(region.len)?;
        // Checked against pending operations before any reference to the bytes is
        // made (`start` then holds them).
        let ptr = self.pool.region_for_write(region)?.as_mut_ptr();
        let comm = self.comm.index;
        let op = Op::Recv {
            peer,
            expected: region.len,
        };
        self.start(op, [Some((region, Access::Write)), None], |slot| {
            // SAFETY: `ptr` points at `len` writable bytes of a pool buffer that
            // `start` holds exclusively until the request completes: it is not
            // freed, `buffer`/`buffer_mut` refuse it, and no other operation reads
            // or writes those bytes while MPI writes into them.
            unsafe { ffi::ngm_irecv(comm, ptr.cast::<c_void>(), len, peer_c, TAG, slot) }
        })
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        let slot = self.lookup(request)?;
        let (mut done, mut got): (c_int, c_int) = (0, -1);
        let caller = Caller::take();
        // SAFETY: `slot` is a request of this transport still in flight (looked up
        // above); out pointers are valid. On the MPI thread (the transport is not Send).
        let rc = unsafe { ffi::ngm_test(slot as c_int, &mut done, &mut got) };
        if done == 0 {
            // Still MPI's (even on an error): the request stays pending and its
            // buffers busy.
            caller
                .check("MPI_Test", rc)
                .map_err(|e| mpi_error(self.pending[slot].as_ref().expect("looked up").op, e))?;
            return Ok(false);
        }
        self.complete("MPI_Test", slot, rc, got, caller)?;
        Ok(true)
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        if self.wait == WaitMode::Block {
            return self.wait_blocking(request);
        }
        let slot = self.lookup(request)?;
        let (mut done, mut got): (c_int, c_int) = (0, -1);
        let caller = Caller::take();
        // SAFETY: as in `test`.
        let rc = unsafe { ffi::ngm_wait(slot as c_int, &mut done, &mut got) };
        if done == 0 {
            // MPI_Wait failed and MPI still holds the request: keep it pending (and
            // its buffers busy) rather than hand memory MPI owns back to safe code.
            let op = self.pending[slot].as_ref().expect("looked up").op;
            return Err(mpi_error(
                op,
                caller
                    .check("MPI_Wait", rc)
                    .err()
                    .unwrap_or_else(|| MpiError::Call {
                        op: "MPI_Wait",
                        code: ffi::E_HANDLE,
                        message: "returned with the request still active".into(),
                    }),
            ));
        }
        self.complete("MPI_Wait", slot, rc, got, caller)
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        if self.pending.iter().any(Option::is_some) {
            // MPI may still write into buffers of requests nobody completed: leak the
            // memory rather than free it under MPI's feet.
            std::mem::forget(std::mem::replace(&mut self.pool, BufferPool::new(NAME)));
        }
    }
}
