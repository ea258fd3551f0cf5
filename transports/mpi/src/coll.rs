//! MPI's own collectives on the transport's communicator and buffers, blocking and
//! nonblocking: what `ngauge coll` times when it measures MPI's algorithms instead of
//! its own schedules (Hoefler et al., "Accurately measuring collective operations",
//! times exactly these calls in a window).
//!
//! Blocking forms call MPI's blocking function whatever the wait mode (its progress
//! loop is part of what is measured); nonblocking forms return a [`RequestId`] that
//! [`Transport::test`]/[`Transport::wait`] complete like any other request, with the
//! buffers busy until then. MPI forbids overlapping send and receive buffers; that is
//! checked and refused here.

use crate::datatype::{Datatype, ReduceOp};
use crate::ffi;
use crate::runtime::Caller;
use crate::transport::{count, invalid, mpi_error, MpiTransport, Op};
#[allow(unused_imports)] // for the docs
use ngauge_transport::Transport;
use ngauge_transport::{Access, Rank, Region, RequestId, TransportError};
use std::os::raw::{c_int, c_void};

/// Whether two regions share a byte. Called before the bounds checks, so the ends
/// are computed in `u128`, where they cannot overflow (a region that ends past
/// `usize::MAX` is refused by the bounds check later).
fn overlap(a: Region, b: Region) -> bool {
    let end = |r: Region| r.offset as u128 + r.len as u128;
    let start = |r: Region| r.offset as u128;
    a.len > 0 && b.len > 0 && a.buffer == b.buffer && start(a) < end(b) && start(b) < end(a)
}

/// Send and receive pointers, checked: bounds, no overlap, receive length.
struct Pair {
    send: *const c_void,
    recv: *mut c_void,
}

impl MpiTransport {
    fn pair(
        &mut self,
        op: &'static str,
        send: Region,
        recv: Region,
        recv_len: usize,
    ) -> Result<Pair, TransportError> {
        if overlap(send, recv) {
            return Err(invalid(
                op,
                self.mpi().rank(),
                "send and receive regions overlap (MPI forbids aliased buffers)".into(),
            ));
        }
        if recv.len != recv_len {
            return Err(invalid(
                op,
                self.mpi().rank(),
                format!(
                    "receive region of {} bytes where {recv_len} are needed",
                    recv.len
                ),
            ));
        }
        // Checked against pending operations as well: MPI must not write where a
        // pending send reads, nor read or write where a pending receive writes.
        let send_ptr = self.pool.region_for_read(send)?.as_ptr().cast::<c_void>();
        let recv_ptr = self
            .pool
            .region_for_write(recv)?
            .as_mut_ptr()
            .cast::<c_void>();
        Ok(Pair {
            send: send_ptr,
            recv: recv_ptr,
        })
    }

    fn elements(
        &self,
        op: &'static str,
        region: Region,
        dtype: Datatype,
    ) -> Result<c_int, TransportError> {
        if region.len % dtype.size_bytes() != 0 {
            return Err(invalid(
                op,
                self.mpi().rank(),
                format!(
                    "{} bytes is not a whole number of {dtype:?} elements",
                    region.len
                ),
            ));
        }
        count(region.len / dtype.size_bytes())
    }

    fn blocking(
        &self,
        name: &'static str,
        root: Rank,
        call: impl FnOnce() -> c_int,
    ) -> Result<(), TransportError> {
        let caller = Caller::take();
        let rc = call();
        caller
            .check(name, rc)
            .map_err(|e| mpi_error(Op::Coll { name, root }, e))
    }

    /// Starts the nonblocking collective `name`, holding `send` shared and `recv`
    /// exclusively until it completes (see `start`).
    fn start_pair(
        &mut self,
        name: &'static str,
        root: Rank,
        send: Region,
        recv: Region,
        call: impl FnOnce(*mut c_int) -> c_int,
    ) -> Result<RequestId, TransportError> {
        let holds = [Some((send, Access::Read)), Some((recv, Access::Write))];
        self.start(Op::Coll { name, root }, holds, call)
    }

    /// Bytes `gather`'s receive region needs: `size * send.len` on the root, any
    /// length elsewhere.
    fn gather_need(&self, root: Rank, send: Region, recv: Region) -> usize {
        if self.mpi().rank() == root {
            send.len * self.mpi().size()
        } else {
            recv.len
        }
    }

    /// `MPI_Barrier`.
    pub fn barrier(&mut self) -> Result<(), TransportError> {
        let comm = self.comm.index;
        // SAFETY: a collective on this transport's live communicator; no buffers.
        self.blocking("MPI_Barrier", 0, || unsafe { ffi::ngm_barrier(comm) })
    }

    /// `MPI_Ibarrier`.
    pub fn ibarrier(&mut self) -> Result<RequestId, TransportError> {
        let comm = self.comm.index;
        let op = Op::Coll {
            name: "MPI_Ibarrier",
            root: 0,
        };
        // SAFETY: no buffers; `slot` is a valid out pointer.
        self.start(op, [None, None], |slot| unsafe {
            ffi::ngm_ibarrier(comm, slot)
        })
    }

    /// `MPI_Bcast` of `region` (the same length on every rank) from `root`.
    pub fn bcast(&mut self, root: Rank, region: Region) -> Result<(), TransportError> {
        let root_c = self.check_root("MPI_Bcast", root)?;
        let len = count(region.len)?;
        let ptr = self
            .pool
            .region_for_write(region)?
            .as_mut_ptr()
            .cast::<c_void>();
        let comm = self.comm.index;
        // SAFETY: `ptr` covers `len` bytes of a pool buffer that stays allocated and
        // unreferenced during the blocking call, and that no pending operation reads
        // or writes (`region_for_write`).
        self.blocking("MPI_Bcast", root, || unsafe {
            ffi::ngm_bcast(comm, ptr, len, root_c)
        })
    }

    /// `MPI_Ibcast`.
    pub fn ibcast(&mut self, root: Rank, region: Region) -> Result<RequestId, TransportError> {
        let root_c = self.check_root("MPI_Ibcast", root)?;
        let len = count(region.len)?;
        // Checked against pending operations before any reference to the bytes is
        // made (`start` then holds them).
        let ptr = self
            .pool
            .region_for_write(region)?
            .as_mut_ptr()
            .cast::<c_void>();
        let comm = self.comm.index;
        let op = Op::Coll {
            name: "MPI_Ibcast",
            root,
        };
        // SAFETY: `start` holds the region exclusively (not freed, not handed out,
        // not used by another operation) until the request completes; `slot` is a
        // valid out pointer.
        self.start(op, [Some((region, Access::Write)), None], |slot| unsafe {
            ffi::ngm_ibcast(comm, ptr, len, root_c, slot)
        })
    }

    /// `MPI_Reduce` of `send` into `recv` (same length; `recv` is written on `root`
    /// only but must be a valid region everywhere).
    pub fn reduce(
        &mut self,
        root: Rank,
        send: Region,
        recv: Region,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<(), TransportError> {
        let root_c = self.check_root("MPI_Reduce", root)?;
        let n = self.elements("MPI_Reduce", send, dtype)?;
        let p = self.pair("MPI_Reduce", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: `p` holds checked, non-overlapping pointers into live pool buffers
        // of `send.len` bytes each, clear of pending operations (`pair`); the call
        // is blocking.
        self.blocking("MPI_Reduce", root, || unsafe {
            ffi::ngm_reduce(comm, p.send, p.recv, n, dtype.code(), op.code(), root_c)
        })
    }

    /// `MPI_Ireduce`.
    pub fn ireduce(
        &mut self,
        root: Rank,
        send: Region,
        recv: Region,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<RequestId, TransportError> {
        let root_c = self.check_root("MPI_Ireduce", root)?;
        let n = self.elements("MPI_Ireduce", send, dtype)?;
        let p = self.pair("MPI_Ireduce", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: both regions stay held (send shared, receive exclusive) until the
        // request completes (see `start`).
        self.start_pair("MPI_Ireduce", root, send, recv, |slot| unsafe {
            ffi::ngm_ireduce(
                comm,
                p.send,
                p.recv,
                n,
                dtype.code(),
                op.code(),
                root_c,
                slot,
            )
        })
    }

    /// `MPI_Allreduce` of `send` into `recv` (same length).
    pub fn allreduce(
        &mut self,
        send: Region,
        recv: Region,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<(), TransportError> {
        let n = self.elements("MPI_Allreduce", send, dtype)?;
        let p = self.pair("MPI_Allreduce", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: as in `reduce`.
        self.blocking("MPI_Allreduce", 0, || unsafe {
            ffi::ngm_allreduce(comm, p.send, p.recv, n, dtype.code(), op.code())
        })
    }

    /// `MPI_Iallreduce`.
    pub fn iallreduce(
        &mut self,
        send: Region,
        recv: Region,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<RequestId, TransportError> {
        let n = self.elements("MPI_Iallreduce", send, dtype)?;
        let p = self.pair("MPI_Iallreduce", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: as in `ireduce`.
        self.start_pair("MPI_Iallreduce", 0, send, recv, |slot| unsafe {
            ffi::ngm_iallreduce(comm, p.send, p.recv, n, dtype.code(), op.code(), slot)
        })
    }

    /// `MPI_Gather`: every rank's `send` lands at `rank * send.len` in `recv` on
    /// `root`, whose `recv` must hold `size * send.len` bytes (elsewhere any region,
    /// even empty, will do).
    pub fn gather(&mut self, root: Rank, send: Region, recv: Region) -> Result<(), TransportError> {
        let root_c = self.check_root("MPI_Gather", root)?;
        let len = count(send.len)?;
        let need = self.gather_need(root, send, recv);
        let p = self.pair("MPI_Gather", send, recv, need)?;
        let comm = self.comm.index;
        // SAFETY: checked pointers into live pool buffers; `recv` holds size * len
        // bytes on the root; blocking call.
        self.blocking("MPI_Gather", root, || unsafe {
            ffi::ngm_gather(comm, p.send, len, p.recv, root_c)
        })
    }

    /// `MPI_Igather`.
    pub fn igather(
        &mut self,
        root: Rank,
        send: Region,
        recv: Region,
    ) -> Result<RequestId, TransportError> {
        let root_c = self.check_root("MPI_Igather", root)?;
        let len = count(send.len)?;
        let need = self.gather_need(root, send, recv);
        let p = self.pair("MPI_Igather", send, recv, need)?;
        let comm = self.comm.index;
        // SAFETY: as in `gather`; both buffers stay busy until completion.
        self.start_pair("MPI_Igather", root, send, recv, |slot| unsafe {
            ffi::ngm_igather(comm, p.send, len, p.recv, root_c, slot)
        })
    }

    /// `MPI_Allgather`: every rank's `send` lands at `rank * send.len` in every
    /// rank's `recv` (`size * send.len` bytes).
    pub fn allgather(&mut self, send: Region, recv: Region) -> Result<(), TransportError> {
        let len = count(send.len)?;
        let need = send.len * self.mpi().size();
        let p = self.pair("MPI_Allgather", send, recv, need)?;
        let comm = self.comm.index;
        // SAFETY: checked pointers into live pool buffers; blocking call.
        self.blocking("MPI_Allgather", 0, || unsafe {
            ffi::ngm_allgather(comm, p.send, len, p.recv)
        })
    }

    /// `MPI_Iallgather`.
    pub fn iallgather(&mut self, send: Region, recv: Region) -> Result<RequestId, TransportError> {
        let len = count(send.len)?;
        let need = send.len * self.mpi().size();
        let p = self.pair("MPI_Iallgather", send, recv, need)?;
        let comm = self.comm.index;
        // SAFETY: as in `allgather`; both buffers stay busy until completion.
        self.start_pair("MPI_Iallgather", 0, send, recv, |slot| unsafe {
            ffi::ngm_iallgather(comm, p.send, len, p.recv, slot)
        })
    }

    /// `MPI_Alltoall`: block `j` of `send` (`send.len / size` bytes) goes to rank `j`,
    /// and arrives as block `rank` of its `recv` (same length as `send`).
    pub fn alltoall(&mut self, send: Region, recv: Region) -> Result<(), TransportError> {
        let block = self.alltoall_block("MPI_Alltoall", send)?;
        let p = self.pair("MPI_Alltoall", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: checked pointers, `size * block` bytes each; blocking call.
        self.blocking("MPI_Alltoall", 0, || unsafe {
            ffi::ngm_alltoall(comm, p.send, block, p.recv)
        })
    }

    /// `MPI_Ialltoall`.
    pub fn ialltoall(&mut self, send: Region, recv: Region) -> Result<RequestId, TransportError> {
        let block = self.alltoall_block("MPI_Ialltoall", send)?;
        let p = self.pair("MPI_Ialltoall", send, recv, send.len)?;
        let comm = self.comm.index;
        // SAFETY: as in `alltoall`; both buffers stay busy until completion.
        self.start_pair("MPI_Ialltoall", 0, send, recv, |slot| unsafe {
            ffi::ngm_ialltoall(comm, p.send, block, p.recv, slot)
        })
    }

    /// `MPI_Alltoallv`: the blocks of `send` and `recv` as `layout` places them
    /// ([`ngauge_transport::NativeCollective::Alltoallv`]).
    pub fn alltoallv(
        &mut self,
        send: Region,
        recv: Region,
        layout: Region,
    ) -> Result<(), TransportError> {
        let (p, layout) = self.alltoallv_args("MPI_Alltoallv", send, recv, layout)?;
        let comm = self.comm.index;
        // SAFETY: checked pointers; every block `layout` names lies inside its
        // region (`alltoallv_args`); blocking call.
        self.blocking("MPI_Alltoallv", 0, || unsafe {
            ffi::ngm_alltoallv(comm, p.send, layout, p.recv)
        })
    }

    /// `MPI_Ialltoallv`.
    pub fn ialltoallv(
        &mut self,
        send: Region,
        recv: Region,
        layout: Region,
    ) -> Result<RequestId, TransportError> {
        let (p, layout) = self.alltoallv_args("MPI_Ialltoallv", send, recv, layout)?;
        let comm = self.comm.index;
        // SAFETY: as in `alltoallv`; both buffers stay busy until completion, and
        // the layout's pool buffer lives as long as the transport.
        self.start_pair("MPI_Ialltoallv", 0, send, recv, |slot| unsafe {
            ffi::ngm_ialltoallv(comm, p.send, layout, p.recv, slot)
        })
    }

    /// The checked pointers of an all-to-all-v: `layout` is four aligned arrays of
    /// `size` non-negative `i32`, and every block they name lies inside `send`
    /// or `recv` (MPI would read or write past them otherwise).
    fn alltoallv_args(
        &mut self,
        op: &'static str,
        send: Region,
        recv: Region,
        layout: Region,
    ) -> Result<(Pair, *const c_int), TransportError> {
        let (np, rank) = (self.mpi().size(), self.mpi().rank());
        let words = self.pool.region_for_read(layout)?;
        let bad = |why: String| Err(invalid(op, rank, why));
        if words.len() != 4 * np * 4 || words.as_ptr().align_offset(4) != 0 {
            return bad(format!(
                "a layout of {} bytes, not 4 aligned arrays of {np} i32",
                words.len()
            ));
        }
        let word =
            |i: usize| i32::from_ne_bytes(words[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        for (half, len) in [(0, send.len), (2, recv.len)] {
            for j in 0..np {
                let (count, displ) = (word(half * np + j), word((half + 1) * np + j));
                if count < 0 || displ < 0 || displ as usize + count as usize > len {
                    return bad(format!(
                        "block {j} ({count} bytes at {displ}) is outside {len} bytes"
                    ));
                }
            }
        }
        let layout = words.as_ptr().cast::<c_int>();
        Ok((self.pair(op, send, recv, recv.len)?, layout))
    }

    /// `MPI_Scatter`: block `r` of `send` on `root` (`size * recv.len` bytes there;
    /// elsewhere any region, even empty, will do) lands in rank `r`'s `recv`.
    pub fn scatter(
        &mut self,
        root: Rank,
        send: Region,
        recv: Region,
    ) -> Result<(), TransportError> {
        let root_c = self.check_root("MPI_Scatter", root)?;
        let len = count(recv.len)?;
        let p = self.scatter_pair("MPI_Scatter", root, send, recv)?;
        let comm = self.comm.index;
        // SAFETY: checked pointers into live pool buffers; `send` holds size * len
        // bytes on the root; blocking call.
        self.blocking("MPI_Scatter", root, || unsafe {
            ffi::ngm_scatter(comm, p.send, len, p.recv, root_c)
        })
    }

    /// `MPI_Iscatter`.
    pub fn iscatter(
        &mut self,
        root: Rank,
        send: Region,
        recv: Region,
    ) -> Result<RequestId, TransportError> {
        let root_c = self.check_root("MPI_Iscatter", root)?;
        let len = count(recv.len)?;
        let p = self.scatter_pair("MPI_Iscatter", root, send, recv)?;
        let comm = self.comm.index;
        // SAFETY: as in `scatter`; both buffers stay busy until completion.
        self.start_pair("MPI_Iscatter", root, send, recv, |slot| unsafe {
            ffi::ngm_iscatter(comm, p.send, len, p.recv, root_c, slot)
        })
    }

    /// The checked pointers of a scatter: the root's `send` must hold `size`
    /// blocks of `recv.len` bytes.
    fn scatter_pair(
        &mut self,
        op: &'static str,
        root: Rank,
        send: Region,
        recv: Region,
    ) -> Result<Pair, TransportError> {
        let np = self.mpi().size();
        if self.mpi().rank() == root && send.len != recv.len * np {
            return Err(invalid(
                op,
                root,
                format!(
                    "{} bytes do not split into {np} blocks of {}",
                    send.len, recv.len
                ),
            ));
        }
        self.pair(op, send, recv, recv.len)
    }

    /// The checked pointers of a reduce-scatter: `send` must hold `size` blocks of
    /// `recv.len` bytes.
    fn reduce_scatter_pair(
        &mut self,
        op: &'static str,
        send: Region,
        recv: Region,
    ) -> Result<Pair, TransportError> {
        let np = self.mpi().size();
        if send.len != recv.len * np {
            return Err(invalid(
                op,
                self.mpi().rank(),
                format!(
                    "{} bytes do not split into {np} blocks of {}",
                    send.len, recv.len
                ),
            ));
        }
        self.pair(op, send, recv, recv.len)
    }

    /// `MPI_Reduce_scatter_block` of `send` (`size` blocks) into `recv` (one
    /// block), summing `u64` words.
    pub fn reduce_scatter_block(
        &mut self,
        send: Region,
        recv: Region,
    ) -> Result<(), TransportError> {
        let (dtype, op) = (Datatype::U64, ReduceOp::Sum);
        let n = self.elements("MPI_Reduce_scatter_block", recv, dtype)?;
        let p = self.reduce_scatter_pair("MPI_Reduce_scatter_block", send, recv)?;
        let comm = self.comm.index;
        // SAFETY: as in `reduce`; `send` holds `size` blocks of `recv.len` bytes.
        self.blocking("MPI_Reduce_scatter_block", 0, || unsafe {
            ffi::ngm_reduce_scatter_block(comm, p.send, p.recv, n, dtype.code(), op.code())
        })
    }

    /// `MPI_Ireduce_scatter_block`.
    pub fn ireduce_scatter_block(
        &mut self,
        send: Region,
        recv: Region,
    ) -> Result<RequestId, TransportError> {
        let (dtype, op) = (Datatype::U64, ReduceOp::Sum);
        let n = self.elements("MPI_Ireduce_scatter_block", recv, dtype)?;
        let p = self.reduce_scatter_pair("MPI_Ireduce_scatter_block", send, recv)?;
        let comm = self.comm.index;
        // SAFETY: as in `ireduce`.
        self.start_pair("MPI_Ireduce_scatter_block", 0, send, recv, |slot| unsafe {
            ffi::ngm_ireduce_scatter_block(comm, p.send, p.recv, n, dtype.code(), op.code(), slot)
        })
    }

    fn alltoall_block(&self, op: &'static str, send: Region) -> Result<c_int, TransportError> {
        let size = self.mpi().size();
        if send.len % size != 0 {
            return Err(invalid(
                op,
                self.mpi().rank(),
                format!("{} bytes do not split into {size} equal blocks", send.len),
            ));
        }
        count(send.len / size)
    }

    /// `MPI_Wtime()` (seconds), for comparison with the RDTSCP clock.
    pub fn wtime(&self) -> f64 {
        self.mpi().wtime()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge_transport::BufferId;

    #[test]
    fn overlap_is_per_buffer_and_half_open() {
        let a = BufferId(0);
        let b = BufferId(1);
        assert!(overlap(a.region(0, 8), a.region(7, 8)));
        assert!(!overlap(a.region(0, 8), a.region(8, 8)));
        assert!(!overlap(a.region(0, 8), b.region(0, 8)));
        assert!(!overlap(a.region(4, 0), a.region(0, 8)));
        // Review finding 6: huge offsets must not overflow (a debug-build panic).
        assert!(overlap(
            a.region(usize::MAX, 2),
            a.region(usize::MAX - 1, 4)
        ));
        assert!(!overlap(a.region(usize::MAX, 2), a.region(0, 8)));
    }

    #[test]
    fn datatype_sizes() {
        assert_eq!(Datatype::F64.size_bytes(), 8);
        assert_eq!(Datatype::I32.size_bytes(), 4);
    }
}
