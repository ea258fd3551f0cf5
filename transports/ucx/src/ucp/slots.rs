//! Request memory handed to UCX (`UCP_OP_ATTR_FIELD_REQUEST`), and the table of
//! pending requests. Both are allocated at setup and grow only when more
//! operations are in flight at once than ever before, so that starting an
//! operation allocates nothing.
//!
//! The user part of a request (the bytes from the pointer on) holds a
//! [`Completion`], which the tag path's completion callbacks fill: a wait
//! polls it with a load, where `ucp_request_check_status` or
//! `ucp_tag_recv_request_test` is a call into UCX per round of progress
//! (`ucx_perftest` likewise counts completions in its callbacks).

use super::sys;
use ngauge_transport::RequestId;
use std::alloc::Layout;
use std::os::raw::c_void;

/// The outcome of an operation, written by its completion callback into the
/// user part of its request memory.
#[repr(C)]
struct Completion {
    done: u32,
    status: sys::ucs_status_t,
    /// A receive's length that arrived.
    length: usize,
}

/// Marks the request memory `request` as not completed, before it is posted
/// with a completion callback.
///
/// # Safety
/// `request` is a pointer from [`Slots::take`] that UCX does not hold.
#[inline(always)]
pub(super) unsafe fn arm(request: *mut c_void) {
    // SAFETY: the user part of a slot holds a Completion, aligned (see `grow`).
    unsafe { std::ptr::write_volatile(&raw mut (*request.cast::<Completion>()).done, 0) };
}

/// The status and length [`send_done`] or [`recv_done`] wrote, `None` before.
///
/// # Safety
/// `request` is a pointer from [`Slots::take`] that was [`arm`]ed.
#[inline(always)]
pub(super) unsafe fn completed(request: *mut c_void) -> Option<(sys::ucs_status_t, usize)> {
    let c = request.cast::<Completion>();
    // SAFETY: as in `arm`; the callback ran on this thread, inside a UCX call
    // that returned (volatile: the compiler does not see that call write it).
    unsafe {
        (std::ptr::read_volatile(&raw const (*c).done) != 0).then(|| ((*c).status, (*c).length))
    }
}

/// The completion callback of a send.
pub(super) unsafe extern "C" fn send_done(
    request: *mut c_void,
    status: sys::ucs_status_t,
    _: *mut c_void,
) {
    // SAFETY: UCX passes the request memory the send was posted with, a slot.
    unsafe { finish(request, status, std::ptr::null()) };
}

/// The completion callback of a receive.
pub(super) unsafe extern "C" fn recv_done(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    _: *mut c_void,
) {
    // SAFETY: as in `send_done`; `info` is null or valid (UCX's).
    unsafe { finish(request, status, info) };
}

/// Writes the outcome into the slot's [`Completion`], the `done` flag last.
///
/// # Safety
/// `request` is a slot's request pointer; `info` is null or valid.
#[inline(always)]
unsafe fn finish(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
) {
    let c = request.cast::<Completion>();
    // SAFETY: the caller's.
    unsafe {
        (*c).status = status;
        (*c).length = info.as_ref().map_or(0, |i| i.length);
        std::ptr::write_volatile(&raw mut (*c).done, 1);
    }
}

/// Slots allocated at a time.
const CHUNK: usize = 256;
/// Alignment and rounding of a slot.
const ALIGN: usize = 64;

/// Memory for UCP requests: a caller-provided request is a pointer with UCP's
/// request size of memory before it (`ucp_request_param_t::request`).
pub(super) struct Slots {
    request_size: usize,
    stride: usize,
    chunks: Vec<(*mut u8, Layout)>,
    free: Vec<*mut c_void>,
    /// The entries of [`Slots::take_run`], kept between runs.
    run: Vec<RunSlot>,
}

/// A native stream run's request memory and whether UCX holds it (a null
/// pointer: UCX kept it after a failure, it is not given back).
pub(super) type RunSlot = (*mut c_void, bool);

impl Slots {
    /// Slots for requests of `request_size` bytes, the first chunk allocated.
    pub(super) fn new(request_size: usize) -> Slots {
        let mut slots = Slots {
            request_size,
            stride: (request_size.next_multiple_of(8) + size_of::<Completion>())
                .next_multiple_of(ALIGN),
            chunks: Vec::new(),
            free: Vec::new(),
            run: Vec::with_capacity(CHUNK),
        };
        slots.grow();
        slots
    }

    fn grow(&mut self) {
        let layout = Layout::from_size_align(self.stride * CHUNK, ALIGN).expect("a small layout");
        // SAFETY: the layout's size is not zero.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        self.chunks.push((base, layout));
        self.free.reserve(CHUNK * self.chunks.len());
        for i in (0..CHUNK).rev() {
            // SAFETY: inside the chunk: slot `i` starts at i * stride and the
            // request pointer lies request_size bytes or a few more into it, 8-
            // aligned, a Completion before the slot's end.
            let at = i * self.stride + self.request_size.next_multiple_of(8);
            self.free.push(unsafe { base.add(at) }.cast::<c_void>());
        }
    }

    /// A request pointer for one operation, until [`Slots::give`].
    #[inline]
    pub(super) fn take(&mut self) -> *mut c_void {
        match self.free.pop() {
            Some(p) => p,
            None => {
                self.grow();
                self.free.pop().expect("a fresh chunk")
            }
        }
    }

    /// Returns a request pointer whose operation UCX no longer holds (it
    /// completed, or was never started).
    #[inline]
    pub(super) fn give(&mut self, request: *mut c_void) {
        self.free.push(request);
    }

    /// Request memory for the `n` operations a native stream run keeps in
    /// flight, none held; allocates only for more than ever before.
    pub(super) fn take_run(&mut self, n: usize) -> Vec<RunSlot> {
        let mut run = std::mem::take(&mut self.run);
        run.clear();
        for _ in 0..n {
            let request = self.take();
            run.push((request, false));
        }
        run
    }

    /// Gives back the request memory of `run` that UCX no longer holds.
    pub(super) fn give_run(&mut self, mut run: Vec<RunSlot>) {
        for &(request, held) in &run {
            if !request.is_null() && !held {
                self.give(request);
            }
        }
        run.clear();
        self.run = run;
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        for &(base, layout) in &self.chunks {
            // SAFETY: allocated in `grow` with this layout, freed once; the
            // transport's teardown ended every request first.
            unsafe { std::alloc::dealloc(base, layout) };
        }
    }
}

/// Pending requests by [`RequestId`]: the index of an entry and its generation,
/// so that the id of a retired request is never valid again.
pub(super) struct Table<T> {
    entries: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
}

impl<T> Table<T> {
    pub(super) fn new() -> Table<T> {
        Table {
            entries: Vec::with_capacity(CHUNK),
            free: Vec::with_capacity(CHUNK),
        }
    }

    fn index(&self, id: RequestId) -> Option<usize> {
        let (generation, index) = ((id.0 >> 32) as u32, id.0 as u32 as usize);
        match self.entries.get(index) {
            Some((g, Some(_))) if *g == generation => Some(index),
            _ => None,
        }
    }

    pub(super) fn insert(&mut self, value: T) -> RequestId {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.entries.push((0, None));
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[index];
        entry.1 = Some(value);
        RequestId(u64::from(entry.0) << 32 | index as u64)
    }

    pub(super) fn get(&self, id: RequestId) -> Option<&T> {
        self.index(id).and_then(|i| self.entries[i].1.as_ref())
    }

    pub(super) fn get_mut(&mut self, id: RequestId) -> Option<&mut T> {
        self.index(id).and_then(|i| self.entries[i].1.as_mut())
    }

    pub(super) fn remove(&mut self, id: RequestId) -> Option<T> {
        let i = self.index(id)?;
        let entry = &mut self.entries[i];
        entry.0 = entry.0.wrapping_add(1);
        self.free.push(i as u32);
        entry.1.take()
    }

    /// The ids of every pending request.
    pub(super) fn ids(&self) -> Vec<RequestId> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, (_, v))| v.is_some())
            .map(|(i, (g, _))| RequestId(u64::from(*g) << 32 | i as u64))
            .collect()
    }
}
