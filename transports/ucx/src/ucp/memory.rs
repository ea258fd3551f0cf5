//! Memory UCX allocated and mapped (`ucp_mem_map` with `UCP_MEM_MAP_ALLOCATE`,
//! as `ucx_perftest` allocates its buffers), the user buffers a pattern
//! allocates on it with the holds of their pending requests, and the buffer
//! side of the [`Transport`](ngauge_transport::Transport) impl.
//!
//! A buffer is readable or writable through a reference only while no request
//! holds any part of it; UCX reads and writes the bytes of a pending request
//! through the raw pointers it was given.

use super::{context, sys, NAME};
use ngauge_transport::{Access, BufferId, Buffers, Holds, Region, TransportError};
use std::ops::Range;

/// Smallest allocation: two small buffers never share a cache line.
const MIN_BYTES: usize = 64;

/// `len` bytes UCX allocated and mapped for this context.
pub(super) struct Mapped {
    ctx: sys::ucp_context_h,
    memh: sys::ucp_mem_h,
    ptr: *mut u8,
    len: usize,
}

impl Mapped {
    /// Allocates and maps at least `len` bytes, zeroed.
    pub(super) fn new(ctx: sys::ucp_context_h, len: usize) -> Result<Mapped, String> {
        let bytes = len.max(MIN_BYTES);
        // SAFETY: all-zero is a valid ucp_mem_map_params_t; the fields used are
        // marked in field_mask (no address: UCX allocates).
        let mut params: sys::ucp_mem_map_params_t = unsafe { std::mem::zeroed() };
        params.field_mask = u64::from(sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH)
            | u64::from(sys::UCP_MEM_MAP_PARAM_FIELD_FLAGS);
        params.length = bytes;
        params.flags = sys::UCP_MEM_MAP_ALLOCATE;
        let mut memh: sys::ucp_mem_h = std::ptr::null_mut();
        // SAFETY: `ctx` is a live context that outlives the mapping (the
        // transport's teardown unmaps first); `params` is valid for the call.
        context::check("ucp_mem_map", unsafe {
            sys::ucp_mem_map(ctx, &params, &mut memh)
        })?;
        // SAFETY: all-zero is a valid ucp_mem_attr_t; `memh` is live.
        let mut attr: sys::ucp_mem_attr_t = unsafe { std::mem::zeroed() };
        attr.field_mask = u64::from(sys::UCP_MEM_ATTR_FIELD_ADDRESS);
        // SAFETY: as above.
        let queried = context::check("ucp_mem_query", unsafe {
            sys::ucp_mem_query(memh, &mut attr)
        });
        let mapped = Mapped {
            ctx,
            memh,
            ptr: attr.address.cast::<u8>(),
            len: bytes,
        };
        queried?;
        if mapped.ptr.is_null() {
            return Err("ucp_mem_map returned no address".into());
        }
        // SAFETY: [ptr, ptr+bytes) is the mapping just made, which nothing else
        // refers to yet; UCX may have allocated it from a heap, so it is zeroed
        // here rather than assumed zero.
        unsafe { std::ptr::write_bytes(mapped.ptr, 0, bytes) };
        Ok(mapped)
    }

    /// The first byte.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The mapping's address, as a peer names it in a put.
    pub(super) fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The packed remote key of the mapping, for the peers' puts.
    pub(super) fn rkey(&self) -> Result<Vec<u8>, String> {
        let mut buf: *mut std::os::raw::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        // SAFETY: context and mapping are live; UCX allocates the packed key,
        // which is copied and released once.
        unsafe {
            context::check(
                "ucp_rkey_pack",
                sys::ucp_rkey_pack(self.ctx, self.memh, &mut buf, &mut size),
            )?;
            let bytes = std::slice::from_raw_parts(buf.cast::<u8>(), size).to_vec();
            sys::ucp_rkey_buffer_release(buf);
            Ok(bytes)
        }
    }

    /// Reads the 8-aligned word at `offset` with a volatile load: a word a peer
    /// may put at any time (a ring's trailer or credit word).
    pub(super) fn poll_u64(&self, offset: usize) -> u64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: in bounds and aligned (asserted; UCX's allocations are
        // page-aligned); an aligned 8-byte load is single-copy atomic on x86-64
        // and aarch64, and any value is a valid u64.
        u64::from_le(unsafe { std::ptr::read_volatile(self.ptr.add(offset).cast::<u64>()) })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` on this live context, unmapped once; no request
        // refers to it any more (the transport's teardown ended them).
        unsafe { sys::ucp_mem_unmap(self.ctx, self.memh) };
    }
}

struct Buffer {
    mapped: Mapped,
    len: usize,
    holds: Holds,
}

/// The user buffers.
pub(super) struct Memory {
    ctx: sys::ucp_context_h,
    buffers: Vec<Option<Buffer>>,
}

impl Memory {
    pub(super) fn new(ctx: sys::ucp_context_h) -> Memory {
        Memory {
            ctx,
            buffers: Vec::new(),
        }
    }

    fn buf(&self, buffer: BufferId) -> Result<&Buffer, TransportError> {
        match self.buffers.get(buffer.0 as usize) {
            Some(Some(b)) => Ok(b),
            _ => Err(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            }),
        }
    }

    fn buf_mut(&mut self, buffer: BufferId) -> Result<&mut Buffer, TransportError> {
        match self.buffers.get_mut(buffer.0 as usize) {
            Some(Some(b)) => Ok(b),
            _ => Err(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            }),
        }
    }

    fn idle(&self, buffer: BufferId) -> Result<&Buffer, TransportError> {
        let b = self.buf(buffer)?;
        if !b.holds.is_empty() {
            return Err(busy(buffer));
        }
        Ok(b)
    }

    /// The bytes of `region` as a range of its buffer, or why not.
    fn range(b: &Buffer, region: Region) -> Result<Range<usize>, TransportError> {
        match region.offset.checked_add(region.len) {
            Some(end) if end <= b.len => Ok(region.offset..end),
            _ => Err(TransportError::RegionOutOfBounds {
                transport: NAME,
                buffer: region.buffer,
                offset: region.offset,
                len: region.len,
                capacity: b.len,
            }),
        }
    }

    /// The first byte of `region`, for an operation that uses it as `access`
    /// and finishes before it returns (a blocking send or receive): checked
    /// against the buffer's bounds and its holds, none taken.
    #[inline]
    pub(super) fn ptr(&self, region: Region, access: Access) -> Result<*mut u8, TransportError> {
        let b = self.buf(region.buffer)?;
        let range = Self::range(b, region)?;
        if !b.holds.allows(&range, access) {
            return Err(busy(region.buffer));
        }
        // SAFETY: `range` lies inside the mapping (checked above).
        Ok(unsafe { b.mapped.ptr().add(range.start) })
    }

    /// [`Memory::ptr`] for a pending request: takes the hold, which
    /// [`Memory::release`] gives back.
    pub(super) fn hold(
        &mut self,
        region: Region,
        access: Access,
    ) -> Result<*mut u8, TransportError> {
        let b = self.buf_mut(region.buffer)?;
        let range = Self::range(b, region)?;
        let start = range.start;
        if !b.holds.try_hold(range, access) {
            return Err(busy(region.buffer));
        }
        // SAFETY: the range lies inside the mapping (checked above).
        Ok(unsafe { b.mapped.ptr().add(start) })
    }

    /// Gives back the hold [`Memory::hold`] took.
    pub(super) fn release(&mut self, region: Region, access: Access) {
        if let Ok(b) = self.buf_mut(region.buffer) {
            b.holds
                .release(region.offset..region.offset + region.len, access);
        }
    }

    /// Unmaps every buffer (before the context goes).
    pub(super) fn clear(&mut self) {
        self.buffers.clear();
    }
}

/// The user buffers: [`Transport`](ngauge_transport::Transport)'s buffer methods.
impl Buffers for Memory {
    /// Memory UCX allocates and maps (zeroed), in the first free slot; refused
    /// when larger than the memory available.
    fn try_alloc(&mut self, len: usize) -> Result<BufferId, TransportError> {
        let oom = |detail: String| TransportError::OutOfMemory {
            transport: NAME,
            len_bytes: len,
            detail,
        };
        if let Some(available) = ngauge_transport::available_memory_bytes() {
            if len as u64 > available {
                return Err(oom(format!(
                    "only {available} bytes of memory are available; choose smaller messages"
                )));
            }
        }
        let buffer = Buffer {
            mapped: Mapped::new(self.ctx, len).map_err(oom)?,
            len,
            holds: Holds::default(),
        };
        let index = match self.buffers.iter().position(Option::is_none) {
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

    fn free(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.idle(buffer)?;
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        let b = self.idle(buffer)?;
        // SAFETY: `len` bytes of a live mapping; no request holds any of them, so
        // UCX neither reads nor writes them while the reference lives (it borrows
        // `self`, so no request can start meanwhile).
        Ok(unsafe { std::slice::from_raw_parts(b.mapped.ptr(), b.len) })
    }

    fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        let b = self.idle(buffer)?;
        // SAFETY: as in `get`, and the exclusive borrow of `self` makes the view
        // the only one.
        Ok(unsafe { std::slice::from_raw_parts_mut(b.mapped.ptr(), b.len) })
    }
}

#[cold]
fn busy(buffer: BufferId) -> TransportError {
    TransportError::BufferBusy {
        transport: NAME,
        buffer,
    }
}
