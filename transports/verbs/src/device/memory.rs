//! Registered memory, user buffers and their holds, and the [`Resources`] that own
//! everything allocated from the device: page-aligned allocations
//! registered with the protection domain ([`Registered`]), the user buffers a
//! pattern allocates (each with the [`Holds`] of its pending requests), and the
//! buffer side of the [`Transport`](ngauge_transport::Transport) impl. A buffer
//! is readable or writable by the CPU only while no request holds any part of it;
//! the raw copies between slots and regions (`copy_to`, `write_at`, `read_at`)
//! state what their callers guarantee about the device.

use super::{last_os_error, setup, NAME};
use crate::layout;
use crate::qp;
use ngauge_transport::{Access, BufferId, Buffers, Holds, TransportError};
use rdma_sys::*;
use std::alloc::Layout;
use std::os::raw::{c_int, c_void};

/// Page-aligned memory registered with the protection domain.
pub(super) struct Registered {
    mem: *mut u8,
    layout: Layout,
    mr: *mut ibv_mr,
}

impl Registered {
    pub(super) fn new(
        pd: *mut ibv_pd,
        len: usize,
        access: u32,
    ) -> Result<Registered, TransportError> {
        let too_large = || TransportError::TooLarge {
            transport: NAME,
            len_bytes: len,
            max_bytes: isize::MAX as usize,
        };
        let bytes = layout::alloc_bytes(len).ok_or_else(too_large)?;
        let layout =
            Layout::from_size_align(bytes, layout::BUFFER_ALIGN).map_err(|_| too_large())?;
        // SAFETY: `layout` has a non-zero size (alloc_bytes never returns 0).
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(setup(format!("cannot allocate {bytes} bytes")));
        }
        // SAFETY: `pd` is a live protection domain; [mem, mem+bytes) is our
        // allocation and stays allocated until the MR is deregistered (Drop).
        let mr = unsafe { ibv_reg_mr(pd, mem.cast::<c_void>(), bytes, access as c_int) };
        if mr.is_null() {
            let err = last_os_error();
            // SAFETY: allocated above with this layout, never registered.
            unsafe { std::alloc::dealloc(mem, layout) };
            let hint = if err.raw_os_error() == Some(libc::ENOMEM) {
                " (the locked-memory limit is too small: raise `ulimit -l`)"
            } else {
                ""
            };
            return Err(setup(format!(
                "memory registration of {bytes} bytes failed: {err}{hint}"
            )));
        }
        Ok(Registered { mem, layout, mr })
    }

    pub(super) fn addr(&self, offset: usize) -> u64 {
        self.mem as u64 + offset as u64
    }

    pub(super) fn lkey(&self) -> u32 {
        // SAFETY: `mr` is valid until Drop.
        unsafe { (*self.mr).lkey }
    }

    pub(super) fn rkey(&self) -> u32 {
        // SAFETY: `mr` is valid until Drop.
        unsafe { (*self.mr).rkey }
    }

    /// The first `len` bytes, for a user buffer that no request refers to.
    fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= self.layout.size());
        // SAFETY: `mem` is a live allocation of layout.size() >= len initialized
        // (zeroed) bytes. Only `Buffers::get` (`Transport::buffer`) calls this, for
        // a buffer no request holds any part of, so no work request that the device
        // could write (or, for `bytes_mut`, read) through is outstanding on it
        // (inline sends were copied at post time; a broken connection's QPs are in
        // the error state, where the device writes nothing).
        unsafe { std::slice::from_raw_parts(self.mem, len) }
    }

    fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.layout.size());
        // SAFETY: as in `bytes` (only `Buffers::get_mut` calls this, for a buffer no
        // request holds any part of), and `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem, len) }
    }

    /// Copies `len` bytes at `from` in this memory to `to` in `dst`, through raw
    /// pointers: no reference is made over bytes the device may be filling (other
    /// receive slots, other regions of a busy buffer).
    ///
    /// # Safety
    /// The device neither writes `[from, from+len)` nor touches `[to, to+len)` of
    /// `dst` while the copy runs (a slot whose receive has completed and is not
    /// re-posted yet; the region of a receive that holds it exclusively and has
    /// nothing posted on it).
    pub(super) unsafe fn copy_to(&self, from: usize, dst: &Registered, to: usize, len: usize) {
        assert!(from
            .checked_add(len)
            .is_some_and(|e| e <= self.layout.size()));
        assert!(to.checked_add(len).is_some_and(|e| e <= dst.layout.size()));
        // SAFETY: both ranges lie inside live allocations (asserted above); they do
        // not overlap (slot area and user buffers are separate allocations, and the
        // caller copies between them); the caller guarantees the device leaves them
        // alone.
        unsafe { copy_bytes(self.mem.add(from), dst.mem.add(to), len) }
    }

    /// Writes `data` at `offset`.
    ///
    /// # Safety
    /// The device does not read or write `[offset, offset+data.len())` while this
    /// runs (a send slot whose previous send has completed; the region of a
    /// receive that holds it exclusively and has nothing posted on it).
    pub(super) unsafe fn write_at(&self, offset: usize, data: &[u8]) {
        assert!(offset
            .checked_add(data.len())
            .is_some_and(|e| e <= self.layout.size()));
        // SAFETY: in bounds (asserted), `data` is another allocation, and the caller
        // guarantees the device leaves the range alone.
        unsafe { copy_bytes(data.as_ptr(), self.mem.add(offset), data.len()) }
    }

    /// Reads `out.len()` bytes at `offset`.
    ///
    /// # Safety
    /// The device does not write `[offset, offset+out.len())` while this runs (a
    /// receive slot whose receive has completed and is not re-posted yet).
    pub(super) unsafe fn read_at(&self, offset: usize, out: &mut [u8]) {
        assert!(offset
            .checked_add(out.len())
            .is_some_and(|e| e <= self.layout.size()));
        // SAFETY: in bounds (asserted), `out` is another allocation, and the caller
        // guarantees the device does not write the range.
        unsafe { copy_bytes(self.mem.add(offset), out.as_mut_ptr(), out.len()) }
    }
}

/// `copy_nonoverlapping`, with a 1-byte message as one load and one store: the
/// `memcpy` call that a copy of unknown length compiles to spent about 37
/// instructions on one byte under callgrind (docs/findings/
/// 2026-11-24-verbs-perftest.md), a fifth of the flat receive.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping`.
#[inline(always)]
pub(super) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if len == 1 {
        // SAFETY: as the caller guarantees for `len` bytes.
        unsafe { *dst = *src }
    } else {
        // SAFETY: as the caller guarantees.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

impl Registered {
    /// Reads the byte at `offset` with a volatile load: a byte the device may be
    /// writing right now (the flag of a ring slot, polled as `ib_write_lat` polls
    /// the last byte of its buffer), so the compiler must read it every time.
    pub(super) fn poll_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.layout.size());
        // SAFETY: in bounds (asserted) of a live allocation; a volatile read of a
        // u8 is atomic and any value is valid, whatever the device writes meanwhile.
        unsafe { std::ptr::read_volatile(self.mem.add(offset)) }
    }

    /// Reads the little-endian u64 at `offset` (8-aligned) with a volatile load: a
    /// word the peer RDMA-writes at any time (the credit word of a ring).
    pub(super) fn poll_u64(&self, offset: usize) -> u64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.layout.size());
        // SAFETY: in bounds and aligned (asserted; the allocation is page-aligned);
        // an aligned 8-byte load is single-copy atomic on the targets verbs runs on,
        // and any value is a valid u64.
        u64::from_le(unsafe { std::ptr::read_volatile(self.mem.add(offset).cast::<u64>()) })
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // SAFETY: `mr` registered `mem`; deregister first, then free the memory.
        unsafe {
            ibv_dereg_mr(self.mr);
            std::alloc::dealloc(self.mem, self.layout);
        }
    }
}

pub(super) struct Buffer {
    pub(super) reg: Registered,
    pub(super) len: usize,
    /// The regions pending requests read or write (see [`Holds`]).
    pub(super) holds: Holds,
}

/// How a request uses its region: a send reads it, a receive writes it.
pub(super) fn access(is_send: bool) -> Access {
    if is_send {
        Access::Read
    } else {
        Access::Write
    }
}

/// Everything allocated from the device, destroyed in dependency order.
pub(super) struct Resources {
    pub(super) ctx: *mut ibv_context,
    pub(super) pd: *mut ibv_pd,
    pub(super) channel: *mut ibv_comp_channel,
    pub(super) cq: *mut ibv_cq,
    /// Message QPs, indexed by rank; null for this rank.
    pub(super) qps: Vec<*mut ibv_qp>,
    /// Bulk QPs (send path), indexed by rank; null for this rank and on the write path.
    pub(super) bulk: Vec<*mut ibv_qp>,
    pub(super) buffers: Vec<Option<Buffer>>,
    pub(super) slots: Option<Registered>,
    /// Write-poll path: the ring area ([`crate::layout::RingLayout`]).
    pub(super) ring: Option<Registered>,
    /// Send and write-poll paths: the staging slots of the blocking send
    /// ([`crate::layout::STAGE_SLOTS`] per peer).
    pub(super) stage: Option<Registered>,
    pub(super) unacked_events: u32,
}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: each handle was created from the ones after it in this list and is
        // destroyed once, children before parents (QPs and MRs before the CQ and the
        // PD, the CQ before its channel, everything before the context).
        unsafe {
            for qp in self.qps.drain(..).chain(self.bulk.drain(..)) {
                if !qp.is_null() {
                    ibv_destroy_qp(qp);
                }
            }
            self.buffers.clear();
            self.slots = None;
            self.ring = None;
            self.stage = None;
            if !self.cq.is_null() {
                if self.unacked_events > 0 {
                    ibv_ack_cq_events(self.cq, self.unacked_events);
                }
                ibv_destroy_cq(self.cq);
            }
            if !self.channel.is_null() {
                ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
            if !self.ctx.is_null() {
                ibv_close_device(self.ctx);
            }
        }
    }
}

/// The user buffers: [`Transport`](ngauge_transport::Transport)'s buffer methods.
impl Buffers for Resources {
    /// Page-aligned memory registered for local writes and remote reads and
    /// writes, in the first free buffer slot.
    fn try_alloc(&mut self, len: usize) -> Result<BufferId, TransportError> {
        let access = qp::access::LOCAL_WRITE | qp::access::REMOTE_WRITE | qp::access::REMOTE_READ;
        let reg = Registered::new(self.pd, len, access)?;
        let buffer = Buffer {
            reg,
            len,
            holds: Holds::default(),
        };
        let slot = self.buffers.iter().position(Option::is_none);
        let index = match slot {
            Some(i) => {
                self.buffers[i] = Some(buffer);
                i
            }
            None => {
                self.buffers.push(Some(buffer));
                self.buffers.len() - 1
            }
        };
        Ok(BufferId(index as u32))
    }

    /// Deregisters and frees a buffer no request holds.
    fn free(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.idle(buffer)?;
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        let b = self.idle(buffer)?;
        Ok(b.reg.bytes(b.len))
    }

    fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.idle(buffer)?;
        let b = self.buf_mut(buffer)?;
        Ok(b.reg.bytes_mut(b.len))
    }
}

impl Resources {
    pub(super) fn buf(&self, buffer: BufferId) -> Result<&Buffer, TransportError> {
        self.buffers
            .get(buffer.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            })
    }

    pub(super) fn buf_mut(&mut self, buffer: BufferId) -> Result<&mut Buffer, TransportError> {
        self.buffers
            .get_mut(buffer.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            })
    }

    /// `buffer`, if no request holds any part of it.
    fn idle(&self, buffer: BufferId) -> Result<&Buffer, TransportError> {
        let b = self.buf(buffer)?;
        if !b.holds.is_empty() {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer,
            });
        }
        Ok(b)
    }
}
