//! MPI one-sided communication: a window from `MPI_Win_allocate` on
//! `MPI_COMM_WORLD`, its two synchronization modes (passive target with
//! `MPI_Win_lock_all` + `MPI_Win_flush`, active target with `MPI_Win_fence`), and
//! the operations `ngauge rma` times (`MPI_Put`, `MPI_Get`, `MPI_Accumulate`,
//! `MPI_Fetch_and_op`), as MPI-3.1 chapter 11 defines them.
//!
//! # Design decisions
//!
//! **The origin buffers belong to the window.** MPI reads a put's origin buffer and
//! writes a get's result buffer at any time until the epoch or flush that
//! completes the operation. [`MpiWindow`] owns both buffers and counts the
//! operations started since the last completion, so the safe methods that hand
//! them out ([`MpiWindow::origin_mut`], [`MpiWindow::result`]) can refuse while
//! MPI may still touch them.
//!
//! **The window memory is read and written volatile, one byte at a time.** The
//! peer's puts land in it with no Rust borrow in sight, so it is never handed out
//! as a slice: [`MpiWindow::local_byte`] (for the notification flag, after
//! [`MpiWindow::sync`]) and [`MpiWindow::local_copy`] (for data checks, after a
//! barrier) read it with volatile loads.
//!
//! **Freeing is collective.** `MPI_Win_free` is a collective call, so every rank
//! must call [`MpiWindow::free`] (dropping a window frees it too, in the same way).

use crate::ffi;
use crate::runtime::{Caller, Mpi, MpiError};
use crate::{Datatype, ReduceOp};
use ngauge_transport::{OneSided, TransportError};
use std::os::raw::{c_int, c_longlong, c_void};
use std::sync::Arc;

/// A window of `MPI_COMM_WORLD` with its origin and result buffers.
pub struct MpiWindow {
    index: c_int,
    base: *mut u8,
    bytes: usize,
    /// The origin buffer of puts and accumulates (8-byte aligned for doubles).
    origin: Vec<u64>,
    /// The result buffer of gets and fetch-and-ops.
    result: Vec<u64>,
    /// Operations started and not completed by a flush, fence or unlock.
    pending: usize,
    locked: bool,
    freed: bool,
    _mpi: Arc<Mpi>,
}

impl MpiWindow {
    /// Allocates `bytes` of window memory on every rank, and origin and result
    /// buffers of as many bytes. Collective over `MPI_COMM_WORLD`.
    ///
    /// # Errors
    /// Off the MPI thread, or when MPI refuses.
    pub fn allocate(mpi: &Arc<Mpi>, bytes: usize) -> Result<MpiWindow, MpiError> {
        let caller = Caller::checked()?;
        let mut base: *mut c_void = std::ptr::null_mut();
        let mut index: c_int = -1;
        // SAFETY: both out-pointers point to live locals; on the MPI thread.
        let rc = unsafe { ffi::ngm_win_allocate(bytes as c_longlong, &mut base, &mut index) };
        caller.check("MPI_Win_allocate", rc)?;
        let words = bytes.div_ceil(8).max(1);
        let window = MpiWindow {
            index,
            base: base.cast(),
            bytes,
            origin: vec![0; words],
            result: vec![0; words],
            pending: 0,
            locked: false,
            freed: false,
            _mpi: Arc::clone(mpi),
        };
        for offset in 0..bytes {
            window.write_local(offset, 0);
        }
        Ok(window)
    }

    /// Bytes of window memory on each rank.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `MPI_Win_lock_all(0)`: opens a passive-target epoch to every rank.
    pub fn lock_all(&mut self) -> Result<(), MpiError> {
        // SAFETY: the index came from ngm_win_allocate and is not freed; MPI thread.
        self.call("MPI_Win_lock_all", unsafe {
            ffi::ngm_win_lock_all(self.index)
        })?;
        self.locked = true;
        Ok(())
    }

    /// `MPI_Win_unlock_all`: closes the epoch and completes every operation.
    pub fn unlock_all(&mut self) -> Result<(), MpiError> {
        // SAFETY: as in `lock_all`.
        self.call("MPI_Win_unlock_all", unsafe {
            ffi::ngm_win_unlock_all(self.index)
        })?;
        self.locked = false;
        self.pending = 0;
        Ok(())
    }

    /// `MPI_Win_flush(peer)`: this rank's operations complete at origin and target.
    /// With only one peer ever addressed, that is every pending operation.
    pub fn flush(&mut self, peer: usize) -> Result<(), MpiError> {
        // SAFETY: as in `lock_all`.
        self.call("MPI_Win_flush", unsafe {
            ffi::ngm_win_flush(self.index, peer as c_int)
        })?;
        self.pending = 0;
        Ok(())
    }

    /// `MPI_Win_fence(0)`: ends the access epoch (completing every operation) and
    /// opens the next. Collective.
    pub fn fence(&mut self) -> Result<(), MpiError> {
        // SAFETY: as in `lock_all`.
        self.call("MPI_Win_fence", unsafe { ffi::ngm_win_fence(self.index) })?;
        self.pending = 0;
        Ok(())
    }

    /// `MPI_Win_sync` and one `MPI_Iprobe` (progress), for a rank polling its own
    /// window memory inside a passive epoch.
    pub fn sync(&mut self) -> Result<(), MpiError> {
        // SAFETY: as in `lock_all`.
        self.call("MPI_Win_sync", unsafe { ffi::ngm_win_sync(self.index) })
    }

    /// `MPI_Put` of the origin buffer's first `len` bytes to `offset` in `peer`'s
    /// window.
    pub fn put(&mut self, peer: usize, offset: usize, len: usize) -> Result<(), MpiError> {
        self.bounds("MPI_Put", offset, len)?;
        let buf = self.origin.as_ptr().cast::<c_void>();
        // SAFETY: `buf` has at least `len` bytes (checked); the origin buffer is not
        // touched by Rust until the operation completes (`pending`), nor freed
        // before the window (it is a field of it).
        let rc = unsafe {
            ffi::ngm_put(
                self.index,
                buf,
                len as c_int,
                peer as c_int,
                offset as c_longlong,
            )
        };
        self.started("MPI_Put", rc)
    }

    /// `MPI_Get` of `len` bytes at `offset` of `peer`'s window into the result
    /// buffer.
    pub fn get(&mut self, peer: usize, offset: usize, len: usize) -> Result<(), MpiError> {
        self.bounds("MPI_Get", offset, len)?;
        let buf = self.result.as_mut_ptr().cast::<c_void>();
        // SAFETY: as in `put`, for the result buffer MPI writes.
        let rc = unsafe {
            ffi::ngm_get(
                self.index,
                buf,
                len as c_int,
                peer as c_int,
                offset as c_longlong,
            )
        };
        self.started("MPI_Get", rc)
    }

    /// `MPI_Accumulate` of the origin buffer's first `count` elements of `dtype`
    /// with `op` at `offset` of `peer`'s window.
    pub fn accumulate(
        &mut self,
        peer: usize,
        offset: usize,
        count: usize,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<(), MpiError> {
        self.bounds("MPI_Accumulate", offset, count * dtype.size_bytes())?;
        let buf = self.origin.as_ptr().cast::<c_void>();
        // SAFETY: as in `put`; `count` elements fit the origin buffer (checked).
        let rc = unsafe {
            ffi::ngm_accumulate(
                self.index,
                buf,
                count as c_int,
                dtype.code(),
                op.code(),
                peer as c_int,
                offset as c_longlong,
            )
        };
        self.started("MPI_Accumulate", rc)
    }

    /// `MPI_Fetch_and_op` of the origin buffer's first element of `dtype` with `op`
    /// at `offset` of `peer`'s window; the old value lands in the result buffer.
    pub fn fetch_and_op(
        &mut self,
        peer: usize,
        offset: usize,
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<(), MpiError> {
        self.bounds("MPI_Fetch_and_op", offset, dtype.size_bytes())?;
        let origin = self.origin.as_ptr().cast::<c_void>();
        let result = self.result.as_mut_ptr().cast::<c_void>();
        // SAFETY: as in `put` and `get`; one element fits both buffers (checked).
        let rc = unsafe {
            ffi::ngm_fetch_and_op(
                self.index,
                origin,
                result,
                dtype.code(),
                op.code(),
                peer as c_int,
                offset as c_longlong,
            )
        };
        self.started("MPI_Fetch_and_op", rc)
    }

    /// The origin buffer as 8-byte words, to fill; refused while operations on it
    /// are pending.
    pub fn origin_mut(&mut self) -> Result<&mut [u64], MpiError> {
        self.idle("origin buffer")?;
        Ok(&mut self.origin)
    }

    /// The result buffer as 8-byte words; refused while operations are pending.
    pub fn result(&self) -> Result<&[u64], MpiError> {
        self.idle("result buffer")?;
        Ok(&self.result)
    }

    /// The byte at `offset` of this rank's window memory (volatile: a peer may be
    /// writing it).
    ///
    /// # Panics
    /// If `offset` is outside the window.
    pub fn local_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.bytes, "offset {offset} outside the window");
        // SAFETY: in bounds (asserted); the memory lives until the window is freed.
        unsafe { self.base.add(offset).read_volatile() }
    }

    /// Writes `value` at `offset` of this rank's window memory (volatile).
    ///
    /// # Panics
    /// If `offset` is outside the window.
    pub fn write_local(&self, offset: usize, value: u8) {
        assert!(offset < self.bytes, "offset {offset} outside the window");
        // SAFETY: in bounds (asserted); the memory lives until the window is freed.
        unsafe { self.base.add(offset).write_volatile(value) }
    }

    /// A copy of `len` bytes of this rank's window memory from `offset`.
    pub fn local_copy(&self, offset: usize, len: usize) -> Vec<u8> {
        (offset..offset + len).map(|o| self.local_byte(o)).collect()
    }

    /// Frees the window (closing a passive epoch first). Collective.
    pub fn free(mut self) -> Result<(), MpiError> {
        self.release()
    }

    fn release(&mut self) -> Result<(), MpiError> {
        if self.freed {
            return Ok(());
        }
        self.freed = true;
        if self.locked {
            self.unlock_all()?;
        }
        // SAFETY: the index is valid and freed once (`freed`); the buffers MPI may
        // use outlive the call.
        self.call("MPI_Win_free", unsafe { ffi::ngm_win_free(self.index) })
    }

    fn call(&self, op: &'static str, rc: c_int) -> Result<(), MpiError> {
        Caller::take().check(op, rc)
    }

    fn started(&mut self, op: &'static str, rc: c_int) -> Result<(), MpiError> {
        self.call(op, rc)?;
        self.pending += 1;
        Ok(())
    }

    fn bounds(&self, op: &'static str, offset: usize, len: usize) -> Result<(), MpiError> {
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > self.bytes || e > self.origin.len() * 8)
            || len > i32::MAX as usize
        {
            return Err(MpiError::Window {
                op,
                detail: format!(
                    "{len} bytes at offset {offset} do not fit a window of {} bytes",
                    self.bytes
                ),
            });
        }
        Ok(())
    }

    fn idle(&self, what: &str) -> Result<(), MpiError> {
        if self.pending > 0 {
            return Err(MpiError::Window {
                op: "MpiWindow",
                detail: format!(
                    "the {what} is in use by {} pending operation(s): flush first",
                    self.pending
                ),
            });
        }
        Ok(())
    }
}

impl Drop for MpiWindow {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            eprintln!("ngauge-mpi: warning: freeing a window: {e}");
        }
    }
}

/// The data-plane error of a failed window operation with `peer`.
fn failed(op: &'static str, peer: usize, e: MpiError) -> TransportError {
    TransportError::Io {
        transport: "mpi",
        peer,
        op,
        source: std::io::Error::other(e),
    }
}

impl OneSided for MpiWindow {
    fn window_bytes(&self) -> usize {
        self.bytes
    }

    fn has_fence(&self) -> bool {
        true
    }

    fn has_accumulate(&self) -> bool {
        true
    }

    fn begin_passive(&mut self) -> Result<(), TransportError> {
        self.lock_all().map_err(|e| failed("lock_all", 0, e))
    }

    fn end_passive(&mut self) -> Result<(), TransportError> {
        self.unlock_all().map_err(|e| failed("unlock_all", 0, e))
    }

    fn fill_origin(&mut self, byte: u8) -> Result<(), TransportError> {
        let words = self.origin_mut().map_err(|e| failed("fill", 0, e))?;
        words.fill(u64::from_ne_bytes([byte; 8]));
        Ok(())
    }

    fn fill_origin_f64(&mut self, value: f64) -> Result<(), TransportError> {
        let words = self.origin_mut().map_err(|e| failed("fill", 0, e))?;
        words.fill(value.to_bits());
        Ok(())
    }

    fn put(&mut self, peer: usize, offset: usize, len: usize) -> Result<(), TransportError> {
        MpiWindow::put(self, peer, offset, len).map_err(|e| failed("put", peer, e))
    }

    fn get(&mut self, peer: usize, offset: usize, len: usize) -> Result<(), TransportError> {
        MpiWindow::get(self, peer, offset, len).map_err(|e| failed("get", peer, e))
    }

    fn accumulate_sum_f64(
        &mut self,
        peer: usize,
        offset: usize,
        count: usize,
    ) -> Result<(), TransportError> {
        self.accumulate(peer, offset, count, Datatype::F64, ReduceOp::Sum)
            .map_err(|e| failed("accumulate", peer, e))
    }

    fn fetch_add_u64(&mut self, peer: usize, offset: usize) -> Result<(), TransportError> {
        self.origin_mut()
            .map_err(|e| failed("fetch_add", peer, e))?[0] = 1;
        self.fetch_and_op(peer, offset, Datatype::U64, ReduceOp::Sum)
            .map_err(|e| failed("fetch_add", peer, e))
    }

    fn flush(&mut self, peer: usize) -> Result<(), TransportError> {
        MpiWindow::flush(self, peer).map_err(|e| failed("flush", peer, e))
    }

    fn fence(&mut self) -> Result<(), TransportError> {
        MpiWindow::fence(self).map_err(|e| failed("fence", 0, e))
    }

    fn poll_byte(&mut self, offset: usize) -> Result<u8, TransportError> {
        self.sync().map_err(|e| failed("poll", 0, e))?;
        Ok(self.local_byte(offset))
    }

    fn local_byte(&self, offset: usize) -> u8 {
        MpiWindow::local_byte(self, offset)
    }

    fn result_u64(&self) -> Result<u64, TransportError> {
        Ok(self.result().map_err(|e| failed("result", 0, e))?[0])
    }

    fn close(self: Box<Self>) -> Result<(), TransportError> {
        self.free().map_err(|e| failed("free", 0, e))
    }
}
