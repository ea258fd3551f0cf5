//! Plain heap buffers with busy tracking, for transports that need no registration
//! (TCP, UDP, MPI, in-process). Verbs keeps its own registered regions instead.
//!
//! # Holds
//!
//! A pending operation holds the region it reads or writes, as a reader (a send:
//! [`Access::Read`]) or as the writer (a receive, a broadcast, a reduction's result:
//! [`Access::Write`]), like a `RwLock` per byte range: any number of readers may hold
//! overlapping regions, a writer excludes every other hold on an overlapping region.
//! Regions that do not overlap never conflict, so an all-to-all can post one receive
//! per peer into disjoint parts of one buffer. A region of 0 bytes touches no memory
//! and conflicts with nothing. A conflicting request gets
//! [`TransportError::BufferBusy`]; blocking operations check the same rule
//! ([`BufferPool::region_for_read`], [`BufferPool::region_for_write`]), so a blocking
//! receive into a buffer a pending send reads from fails instead of overwriting it.
//! While any hold exists, the whole buffer is refused to [`Buffers::get`],
//! [`Buffers::get_mut`] and [`Buffers::free`].
//!
//! A transport takes a hold when it starts a request ([`BufferPool::acquire_read`]
//! for a send, [`BufferPool::acquire_write`] for a receive) and gives that same hold
//! back ([`BufferPool::release_region`] with the request's region and access) when
//! the request completes, or fails (TCP, UDP, MPI).

use crate::error::TransportError;
use crate::handle::{BufferId, Region};
use std::collections::BTreeMap;
use std::ops::Range;

/// Memory the kernel says is available for new allocations without swapping
/// (`MemAvailable` of `/proc/meminfo`), lowered to what an address-space limit
/// (`RLIMIT_AS`) leaves this process; `None` when neither is known.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    let address_space = rustix::process::getrlimit(rustix::process::Resource::As)
        .current
        .map(|limit| {
            let used = std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("VmSize:"))?;
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                })
                .map_or(0, |kib| kib * 1024);
            limit.saturating_sub(used)
        });
    match (meminfo, address_space) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How a pending operation uses the region it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads it (a send): shared with other readers.
    Read,
    /// Writes it (a receive): exclusive.
    Write,
}

/// A set of heap buffers addressed by [`BufferId`], each with the holds of the
/// pending nonblocking operations on it (see the module docs).
#[derive(Debug)]
pub struct BufferPool {
    transport: &'static str,
    /// Bytes reserved in front of every buffer (see [`BufferPool::with_headroom`]).
    headroom: usize,
    slots: Vec<Option<Slot>>,
}

#[derive(Debug)]
struct Slot {
    /// `lead` bytes of padding, the pool's headroom, then the buffer's bytes.
    bytes: Vec<u8>,
    /// Padding that puts the buffer's first byte at the start of a page.
    lead: usize,
    holds: Holds,
}

impl Slot {
    /// The pool's headroom, then the buffer's bytes.
    #[inline]
    fn stored(&self) -> &[u8] {
        &self.bytes[self.lead..]
    }

    /// [`Slot::stored`], mutable.
    #[inline]
    fn stored_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.lead..]
    }
}

/// The parts of one buffer that pending requests hold, like a `RwLock` per byte
/// range (see the module docs): any number of sends may hold overlapping regions,
/// a receive excludes every other request from the bytes of its region. Regions
/// that do not overlap never conflict, and a region of 0 bytes touches no memory
/// and conflicts with nothing. Verbs and UCX keep one per registered buffer.
///
/// A window's bookkeeping compares O(log w) holds per request: receives never
/// overlap anything held, so they are disjoint intervals in a vector ordered by
/// start (binary search); one given back stays, marked, until a hold overlaps
/// it or none is held, so a stream reposting its window into the same slots
/// moves and allocates nothing. Equal sends (a stream from one region) are one
/// counted entry; a receive's check visits only the sends that start within the
/// longest send held before its range (one or two for a window of equal regions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// Receives held and given back: ordered, non-empty, pairwise disjoint.
    writes: Vec<Write>,
    /// How many of `writes` are held.
    held_writes: usize,
    /// Sends: (start, end) -> how many, non-empty.
    reads: BTreeMap<(usize, usize), u32>,
    /// The longest send held since none was: a send that overlaps a range
    /// starts less than this many bytes before it.
    read_reach: usize,
    /// Holds of 0 bytes: (offset, whether a receive) -> how many.
    empty: BTreeMap<(usize, bool), u32>,
}

/// A receive's bytes in [`Holds`], and whether it is still held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Write {
    start: usize,
    end: usize,
    held: bool,
}

impl Holds {
    /// Whether a hold of `range` with `access` would conflict with none held.
    /// Inlined into blocking paths (a TCP send of a 1-byte ping-pong), where
    /// nothing is held: that case is two tests, the lookups stay out of line.
    #[inline]
    pub fn allows(&self, range: &Range<usize>, access: Access) -> bool {
        (self.held_writes == 0 && self.reads.is_empty()) || !self.conflicts(range, access, &mut 0)
    }

    /// Whether a hold of `range` with `access` conflicts with one held; adds
    /// the number of holds compared to `visited`.
    #[cold]
    #[inline(never)]
    fn conflicts(&self, range: &Range<usize>, access: Access, visited: &mut usize) -> bool {
        if range.is_empty() {
            return false;
        }
        let met = self.writes_meeting(range, visited);
        if self.writes[met].iter().any(|w| w.held) {
            return true;
        }
        access == Access::Write && self.reads_meeting(range, visited)
    }

    /// Whether a send held overlaps `range` (not empty); adds the sends
    /// compared to `visited`.
    fn reads_meeting(&self, range: &Range<usize>, visited: &mut usize) -> bool {
        if self.reads.is_empty() {
            return false;
        }
        let from = (range.start.saturating_sub(self.read_reach), 0);
        self.reads
            .range(from..(range.end, 0))
            .any(|(&(_, end), _)| {
                *visited += 1;
                end > range.start
            })
    }

    /// The (adjacent) entries of `writes` that overlap `range`, held or given
    /// back; adds the entries compared to `visited`.
    fn writes_meeting(&self, range: &Range<usize>, visited: &mut usize) -> Range<usize> {
        let hi = self.writes.partition_point(|w| w.start < range.end);
        let mut lo = hi;
        while lo > 0 {
            *visited += 1;
            if self.writes[lo - 1].end <= range.start {
                break;
            }
            lo -= 1;
        }
        lo..hi
    }

    /// Takes a hold of `range` with `access`, unless it conflicts with one held:
    /// then `false` and nothing changes.
    pub fn try_hold(&mut self, range: Range<usize>, access: Access) -> bool {
        if access == Access::Write && !range.is_empty() {
            // A receive into the slot given back there (a stream reposting its
            // window): the entry, disjoint from every other, flips in place.
            let i = self.writes.partition_point(|w| w.start < range.start);
            let given_back = |w: &Write| !w.held && w.end == range.end && w.start == range.start;
            if self.writes.get(i).is_some_and(given_back) {
                if self.reads_meeting(&range, &mut 0) {
                    return false;
                }
                self.writes[i].held = true;
                self.held_writes += 1;
                return true;
            }
        }
        if !self.allows(&range, access) {
            return false;
        }
        if range.is_empty() {
            *self
                .empty
                .entry((range.start, access == Access::Write))
                .or_insert(0) += 1;
        } else if access == Access::Write {
            // Given-back receives it overlaps make way (the same slot: in place).
            let met = self.writes_meeting(&range, &mut 0);
            let new = Write {
                start: range.start,
                end: range.end,
                held: true,
            };
            if met.is_empty() {
                self.writes.insert(met.start, new);
            } else {
                self.writes[met.start] = new;
                self.writes.drain(met.start + 1..met.end);
            }
            self.held_writes += 1;
        } else {
            self.read_reach = self.read_reach.max(range.len());
            *self.reads.entry((range.start, range.end)).or_insert(0) += 1;
        }
        true
    }

    /// Gives back one hold of `range` with `access` (taken by [`Holds::try_hold`]).
    pub fn release(&mut self, range: Range<usize>, access: Access) {
        if range.is_empty() {
            give_back(&mut self.empty, (range.start, access == Access::Write));
        } else if access == Access::Write {
            let i = self.writes.partition_point(|w| w.start < range.start);
            if let Some(w) = self.writes.get_mut(i) {
                if w.held && w.end == range.end && w.start == range.start {
                    w.held = false;
                    self.held_writes -= 1;
                }
            }
            // Given-back entries kept at most about twice the held ones.
            if self.held_writes == 0 || self.writes.len() > 2 * self.held_writes + 64 {
                self.writes.retain(|w| w.held);
            }
        } else {
            give_back(&mut self.reads, (range.start, range.end));
            if self.reads.is_empty() {
                self.read_reach = 0;
            }
        }
    }

    /// Whether no request holds any part of the buffer.
    pub fn is_empty(&self) -> bool {
        self.held_writes == 0 && self.reads.is_empty() && self.empty.is_empty()
    }
}

/// One fewer of `key` in a count map, removed at zero; nothing when absent.
fn give_back<K: Ord>(counts: &mut BTreeMap<K, u32>, key: K) {
    if let Some(n) = counts.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&key);
        }
    }
}

/// The bytes `region` covers within its buffer (bounds are checked before a hold
/// is taken, so the end does not overflow; an unchecked one saturates).
fn span(region: Region) -> Range<usize> {
    region.offset..region.offset.saturating_add(region.len)
}

impl BufferPool {
    /// An empty pool whose errors name `transport`.
    pub fn new(transport: &'static str) -> Self {
        Self::with_headroom(transport, 0)
    }

    /// An empty pool that reserves `headroom_bytes` in front of every buffer it
    /// allocates, where a transport can put a header so that header and payload go
    /// to the kernel as one contiguous slice ([`BufferPool::framed_mut`]): one
    /// iovec instead of two, which Linux copies faster (UDP, 65000 B datagrams: the
    /// C floor with an 8-byte header as a second iovec is 1.025-1.035x the floor with
    /// one, `docs/findings/2026-11-24-verbs-udp-speed.md`, fourth session).
    pub fn with_headroom(transport: &'static str, headroom_bytes: usize) -> Self {
        BufferPool {
            transport,
            headroom: headroom_bytes,
            slots: Vec::new(),
        }
    }

    /// [`Buffers::try_alloc`] for tests and small buffers.
    ///
    /// # Panics
    /// When the buffer cannot be allocated; transports call `try_alloc`.
    pub fn alloc(&mut self, len: usize) -> BufferId {
        self.try_alloc(len).expect("buffer allocation")
    }

    #[inline]
    fn slot(&self, buffer: BufferId) -> Result<&Slot, TransportError> {
        match self.slots.get(buffer.0 as usize) {
            Some(Some(slot)) => Ok(slot),
            _ => Err(unknown_buffer(self.transport, buffer)),
        }
    }

    #[inline]
    fn slot_mut(&mut self, buffer: BufferId) -> Result<&mut Slot, TransportError> {
        let transport = self.transport;
        match self.slots.get_mut(buffer.0 as usize) {
            Some(Some(slot)) => Ok(slot),
            _ => Err(unknown_buffer(transport, buffer)),
        }
    }

    fn check_idle(&self, buffer: BufferId) -> Result<(), TransportError> {
        if !self.slot(buffer)?.holds.is_empty() {
            return Err(busy(self.transport, buffer));
        }
        Ok(())
    }

    /// Whether any pending operation holds part of `buffer` (false for unknown ones).
    pub fn is_busy(&self, buffer: BufferId) -> bool {
        self.slot(buffer).is_ok_and(|s| !s.holds.is_empty())
    }

    /// The bytes of `region`, checked against the buffer's bounds; ignores holds
    /// (the transport itself reads busy buffers while it progresses them).
    #[inline]
    pub fn region(&self, region: Region) -> Result<&[u8], TransportError> {
        let bytes = self.slot(region.buffer)?.stored();
        let range = self.range(region, bytes.len())?;
        Ok(&bytes[range])
    }

    /// Mutable bytes of `region`, checked against the buffer's bounds; ignores holds.
    #[inline]
    pub fn region_mut(&mut self, region: Region) -> Result<&mut [u8], TransportError> {
        let (transport, headroom) = (self.transport, self.headroom);
        let slot = self.slot_mut(region.buffer)?;
        match locate(region, slot.stored().len(), headroom) {
            Some(range) => Ok(&mut slot.stored_mut()[range]),
            None => Err(out_of_bounds(
                transport,
                region,
                slot.stored().len() - headroom,
            )),
        }
    }

    /// The pool's headroom worth of bytes in front of `region`, then the region's
    /// bytes: a frame in which a transport writes its header right before the
    /// payload (see [`BufferPool::with_headroom`]). The bytes in front belong to the
    /// headroom, or to the region's buffer when the region does not start it, so a
    /// caller that writes them must put them back before it returns; ignores holds.
    /// Empty-headroom pools give the region itself.
    #[inline]
    pub fn framed_mut(&mut self, region: Region) -> Result<&mut [u8], TransportError> {
        let (transport, headroom) = (self.transport, self.headroom);
        let slot = self.slot_mut(region.buffer)?;
        match locate(region, slot.stored().len(), headroom) {
            Some(range) => Ok(&mut slot.stored_mut()[range.start - headroom..range.end]),
            None => Err(out_of_bounds(
                transport,
                region,
                slot.stored().len() - headroom,
            )),
        }
    }

    /// The bytes of `region` for a blocking send: bounds checked, and refused
    /// ([`TransportError::BufferBusy`]) while a pending operation writes an
    /// overlapping region.
    #[inline]
    pub fn region_for_read(&self, region: Region) -> Result<&[u8], TransportError> {
        let slot = self.slot(region.buffer)?;
        let range = self.range(region, slot.stored().len())?;
        if !slot.holds.allows(&span(region), Access::Read) {
            return Err(busy(self.transport, region.buffer));
        }
        Ok(&slot.stored()[range])
    }

    /// Mutable bytes of `region` for a blocking receive: bounds checked, and refused
    /// while a pending operation reads or writes an overlapping region.
    #[inline]
    pub fn region_for_write(&mut self, region: Region) -> Result<&mut [u8], TransportError> {
        let (transport, headroom) = (self.transport, self.headroom);
        let slot = self.slot_mut(region.buffer)?;
        let Some(range) = locate(region, slot.stored().len(), headroom) else {
            return Err(out_of_bounds(
                transport,
                region,
                slot.stored().len() - headroom,
            ));
        };
        if !slot.holds.allows(&span(region), Access::Write) {
            return Err(busy(transport, region.buffer));
        }
        Ok(&mut slot.stored_mut()[range])
    }

    /// [`locate`] with this pool's headroom, or the error naming the capacity.
    #[inline]
    fn range(
        &self,
        region: Region,
        stored: usize,
    ) -> Result<std::ops::Range<usize>, TransportError> {
        locate(region, stored, self.headroom)
            .ok_or_else(|| out_of_bounds(self.transport, region, stored - self.headroom))
    }

    /// Holds `region` for a pending operation that uses it as `access` says (after
    /// checking bounds); fails with [`TransportError::BufferBusy`] when a hold on
    /// an overlapping region conflicts (see the module docs). Undo with
    /// [`BufferPool::release_region`].
    pub fn acquire_as(&mut self, region: Region, access: Access) -> Result<(), TransportError> {
        let transport = self.transport;
        let capacity = self.slot(region.buffer)?.stored().len();
        self.range(region, capacity)?;
        if !self
            .slot_mut(region.buffer)?
            .holds
            .try_hold(span(region), access)
        {
            return Err(busy(transport, region.buffer));
        }
        Ok(())
    }

    /// [`BufferPool::acquire_as`] for a pending send.
    pub fn acquire_read(&mut self, region: Region) -> Result<(), TransportError> {
        self.acquire_as(region, Access::Read)
    }

    /// [`BufferPool::acquire_as`] for a pending receive.
    pub fn acquire_write(&mut self, region: Region) -> Result<(), TransportError> {
        self.acquire_as(region, Access::Write)
    }

    /// Releases the hold [`BufferPool::acquire_as`] took with the same arguments.
    pub fn release_region(&mut self, region: Region, access: Access) {
        if let Ok(slot) = self.slot_mut(region.buffer) {
            slot.holds.release(span(region), access);
        }
    }
}

/// The buffers behind [`Transport`](crate::Transport)'s buffer methods, which
/// use them unless a transport overrides them: a [`BufferPool`] for transports
/// that need no registration, a store of registered memory otherwise (verbs).
pub trait Buffers {
    /// A zeroed buffer of `len` bytes.
    fn try_alloc(&mut self, len: usize) -> Result<BufferId, TransportError>;
    /// Frees a buffer no pending operation holds.
    fn free(&mut self, buffer: BufferId) -> Result<(), TransportError>;
    /// The whole buffer, if no pending operation holds any of it.
    fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError>;
    /// [`Buffers::get`], mutable.
    fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError>;
}

impl Buffers for BufferPool {
    /// A zeroed buffer of `len` bytes, or [`TransportError::OutOfMemory`] when
    /// `len` exceeds the memory available (`available_memory_bytes`: `MemAvailable`
    /// of `/proc/meminfo`, within `RLIMIT_AS`) or the allocator refuses it
    /// (fallible reservation: an address-space limit gives an error, not an abort).
    ///
    /// The buffer's first byte (after the headroom) starts a page, as OSU's and
    /// perftest's buffers do: a stack whose cost grows per page a message touches
    /// (UCX's rendezvous over shared memory, about 0.6 us more per round trip for
    /// each page) then steps at the same sizes in every run, the multiples of the
    /// page size, instead of at sizes that move with where the allocator put the
    /// buffer (docs/findings/2026-12-01-page-steps.md). Two small buffers (a
    /// ping-pong's send and receive buffers of 1 byte) never share a cache line:
    /// sharing adds ~5 ns to an MPI shared-memory round trip of ~500 ns
    /// (scripts/bench-mpi).
    fn try_alloc(&mut self, len: usize) -> Result<BufferId, TransportError> {
        let oom = |detail: String| TransportError::OutOfMemory {
            transport: self.transport,
            len_bytes: len,
            detail,
        };
        if let Some(available) = available_memory_bytes() {
            if len as u64 > available {
                return Err(oom(format!(
                    "only {available} bytes of memory are available; choose smaller messages"
                )));
            }
        }
        let with_headroom = len
            .checked_add(self.headroom)
            .ok_or_else(|| oom("larger than the address space".to_string()))?;
        let page = page_bytes();
        let reserved = with_headroom
            .checked_add(page - 1)
            .ok_or_else(|| oom("larger than the address space".to_string()))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(reserved)
            .map_err(|e| oom(format!("{e} (an address-space limit such as ulimit -v?)")))?;
        let lead = lead_to_page(bytes.as_ptr() as usize, self.headroom, page);
        bytes.resize(lead + with_headroom, 0);
        let slot = Some(Slot {
            bytes,
            lead,
            holds: Holds::default(),
        });
        if let Some(free) = self.slots.iter().position(Option::is_none) {
            self.slots[free] = slot;
            Ok(BufferId(free as u32))
        } else {
            self.slots.push(slot);
            Ok(BufferId((self.slots.len() - 1) as u32))
        }
    }

    fn free(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.check_idle(buffer)?;
        self.slots[buffer.0 as usize] = None;
        Ok(())
    }

    fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.check_idle(buffer)?;
        Ok(&self.slot(buffer)?.stored()[self.headroom..])
    }

    fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.check_idle(buffer)?;
        let headroom = self.headroom;
        Ok(&mut self.slot_mut(buffer)?.stored_mut()[headroom..])
    }
}

/// Where `region`'s bytes lie in a slot of `stored` bytes that starts with
/// `headroom` bytes of headroom; `None` when the region does not fit the buffer.
#[inline]
fn locate(region: Region, stored: usize, headroom: usize) -> Option<std::ops::Range<usize>> {
    match region.offset.checked_add(region.len) {
        Some(end) if end <= stored - headroom => Some(region.offset + headroom..end + headroom),
        _ => None,
    }
}

/// The kernel's page size in bytes (4096 on x86-64).
fn page_bytes() -> usize {
    rustix::param::page_size()
}

/// The padding after an allocation at `address` that puts the byte after
/// `headroom` bytes at the start of a page of `page` bytes (a power of two).
fn lead_to_page(address: usize, headroom: usize, page: usize) -> usize {
    address.wrapping_add(headroom).wrapping_neg() & (page - 1)
}

/// Out of line, so that a lookup on a latency-critical path (a transport's `send`,
/// inlined) neither builds nor drops an error value when the buffer exists.
#[cold]
fn unknown_buffer(transport: &'static str, buffer: BufferId) -> TransportError {
    TransportError::UnknownBuffer { transport, buffer }
}

#[cold]
fn busy(transport: &'static str, buffer: BufferId) -> TransportError {
    TransportError::BufferBusy { transport, buffer }
}

#[cold]
fn out_of_bounds(transport: &'static str, region: Region, capacity: usize) -> TransportError {
    TransportError::RegionOutOfBounds {
        transport,
        buffer: region.buffer,
        offset: region.offset,
        len: region.len,
        capacity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_buffer_starts_a_page_after_its_headroom() {
        let page = page_bytes();
        for headroom in [0, 8, 100] {
            let mut pool = BufferPool::with_headroom("test", headroom);
            let ids: Vec<BufferId> = [1, 7, 63, 4096, 5000, 20480, 200_000]
                .into_iter()
                .map(|len| pool.alloc(len))
                .collect();
            for (id, len) in ids.into_iter().zip([1, 7, 63, 4096, 5000, 20480, 200_000]) {
                let buffer = pool.get(id).unwrap();
                assert_eq!(buffer.len(), len);
                assert_eq!(
                    buffer.as_ptr() as usize % page,
                    0,
                    "headroom {headroom}, len {len}"
                );
                assert!(buffer.iter().all(|&b| b == 0));
                let frame = pool.framed_mut(id.prefix(len)).unwrap();
                assert_eq!(frame.len(), headroom + len);
            }
        }
    }

    #[test]
    fn the_lead_puts_the_byte_after_the_headroom_on_a_page() {
        assert_eq!(lead_to_page(4096, 0, 4096), 0);
        assert_eq!(lead_to_page(4096 + 16, 0, 4096), 4080);
        assert_eq!(lead_to_page(4096 - 8, 8, 4096), 0);
        assert_eq!(lead_to_page(4096 + 1, 8, 4096), 4087);
        for address in (0..3 * 4096).step_by(37) {
            for headroom in [0, 8, 5000] {
                let lead = lead_to_page(address, headroom, 4096);
                assert!(lead < 4096);
                assert_eq!((address + lead + headroom) % 4096, 0);
            }
        }
    }

    #[test]
    fn a_window_of_equal_sends_is_one_counted_hold() {
        let mut h = Holds::default();
        for _ in 0..128 {
            assert!(h.try_hold(0..1, Access::Read));
        }
        assert_eq!(h.reads.len(), 1);
        assert!(!h.try_hold(0..1, Access::Write));
        for _ in 0..127 {
            h.release(0..1, Access::Read);
        }
        assert!(!h.is_empty() && !h.try_hold(0..1, Access::Write));
        h.release(0..1, Access::Read);
        assert!(h.is_empty());
        // releasing what is not held changes nothing
        h.release(0..1, Access::Read);
        assert!(h.is_empty());
    }

    /// Issue 33: a window of w requests on one buffer compares O(1) holds per
    /// request (it compared every hold, w^2 / 2 in all).
    #[test]
    fn issue33_a_window_compares_a_bounded_number_of_holds_per_request() {
        use Access::{Read, Write};
        let w = 4096;
        let mut h = Holds::default();
        let mut visited = 0;
        for k in 0..w {
            // receives side by side, sends from one region past them
            assert!(!h.conflicts(&(k * 8..k * 8 + 8), Write, &mut visited));
            assert!(h.try_hold(k * 8..k * 8 + 8, Write));
            assert!(!h.conflicts(&(w * 8..w * 8 + 8), Read, &mut visited));
            assert!(h.try_hold(w * 8..w * 8 + 8, Read));
        }
        assert!(
            visited <= 2 * w,
            "{visited} holds compared for {} requests",
            2 * w
        );
        // a receive over the sends visits the one counted entry
        let mut visited = 0;
        assert!(h.conflicts(&(w * 8 + 7..w * 8 + 9), Write, &mut visited));
        assert!(visited <= 2, "{visited}");
        for k in 0..w {
            h.release(k * 8..k * 8 + 8, Write);
            h.release(w * 8..w * 8 + 8, Read);
        }
        assert!(h.is_empty() && h.read_reach == 0);
    }

    /// Issue 33: a stream's receiver keeps a window of 512 receives posted in
    /// 512 slots of one buffer, reposting each into its slot as it completes:
    /// O(1) holds compared per request, the given-back slot reused in place
    /// (no entry moved, nothing allocated), and overlaps still refused.
    #[test]
    fn issue33_a_window_of_512_reposted_receives_is_bounded_and_still_exclusive() {
        use Access::{Read, Write};
        let (w, slot) = (512, |k: usize| k * 4..k * 4 + 4);
        let mut h = Holds::default();
        for k in 0..w {
            assert!(h.try_hold(slot(k), Write));
        }
        let capacity = h.writes.capacity();
        let mut visited = 0;
        for i in 0..4 * w {
            h.release(slot(i % w), Write);
            assert!(!h.conflicts(&slot(i % w), Write, &mut visited));
            assert!(h.try_hold(slot(i % w), Write));
            // every neighbour is held: a range over two slots, a send into one,
            // and the same slot again are refused
            let k = 1 + (i + 1) % (w - 1);
            assert!(!h.try_hold(slot(k).start - 2..slot(k).start + 2, Write));
            assert!(!h.try_hold(slot(k), Read));
            assert!(!h.try_hold(slot(i % w), Write));
        }
        assert!(
            visited <= 2 * 4 * w,
            "{visited} holds compared for {} requests",
            4 * w
        );
        assert_eq!((h.writes.len(), h.writes.capacity()), (w, capacity));
        // two given-back slots make way for one receive over both
        h.release(slot(7), Write);
        h.release(slot(8), Write);
        assert!(!h.try_hold(slot(6).start..slot(8).end, Write));
        assert!(h.try_hold(slot(7).start..slot(8).end, Write));
        assert_eq!(h.writes.len(), w - 1);
        h.release(slot(7).start..slot(8).end, Write);
        for k in (0..w).filter(|k| !(7..=8).contains(k)) {
            h.release(slot(k), Write);
        }
        assert!(h.is_empty());
        assert_eq!(h, Holds::default());
    }

    #[test]
    fn a_long_send_is_found_from_a_receive_far_into_it() {
        use Access::{Read, Write};
        let mut h = Holds::default();
        assert!(h.try_hold(0..1000, Read));
        assert!(h.try_hold(990..991, Read));
        assert!(h.try_hold(2000..2001, Read));
        assert!(!h.try_hold(999..1000, Write));
        assert!(h.try_hold(1000..2000, Write));
        h.release(0..1000, Read);
        assert!(h.try_hold(0..990, Write));
        assert!(!h.try_hold(990..995, Write));
    }

    #[test]
    fn holds_exclude_writers_from_overlapping_bytes() {
        use Access::{Read, Write};
        let mut h = Holds::default();
        assert!(h.is_empty());
        // sends share, even the same bytes
        assert!(h.try_hold(0..64, Read));
        assert!(h.try_hold(0..64, Read));
        assert!(h.try_hold(32..8192, Read));
        // a receive overlapping any of them is refused, down to one byte
        assert!(!h.try_hold(0..1, Write));
        assert!(!h.try_hold(8191..9000, Write));
        assert!(!h.try_hold(0..100_000, Write));
        // next to them it is not, nor is a region of 0 bytes inside them
        assert!(h.try_hold(8192..16384, Write));
        assert!(h.try_hold(10..10, Write));
        // a receive excludes sends and receives from its bytes
        assert!(!h.try_hold(16383..16384, Read));
        assert!(!h.try_hold(9000..9001, Write));
        assert!(h.try_hold(16384..16385, Write));
        // releasing gives back exactly one hold
        h.release(0..64, Read);
        assert!(!h.try_hold(0..64, Write), "one read hold of 0..64 is left");
        h.release(0..64, Read);
        assert!(!h.try_hold(0..64, Write), "32..8192 still overlaps");
        h.release(32..8192, Read);
        assert!(h.try_hold(0..64, Write));
        for (r, a) in [
            (0..64, Write),
            (8192..16384, Write),
            (10..10, Write),
            (16384..16385, Write),
        ] {
            assert!(!h.is_empty());
            h.release(r, a);
        }
        assert!(h.is_empty());
        // releasing what is not held changes nothing
        h.release(0..1, Read);
        assert!(h.is_empty());
    }

    #[test]
    fn busy_buffer_refuses_access_until_released() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(8);
        pool.acquire_read(b.prefix(8)).unwrap();
        assert!(matches!(
            pool.get(b),
            Err(TransportError::BufferBusy { .. })
        ));
        assert!(matches!(
            pool.free(b),
            Err(TransportError::BufferBusy { .. })
        ));
        assert_eq!(pool.region(b.region(2, 3)).unwrap().len(), 3);
        pool.release_region(b.prefix(8), Access::Read);
        assert_eq!(pool.get(b).unwrap(), &[0u8; 8]);
        pool.free(b).unwrap();
        assert!(matches!(
            pool.get(b),
            Err(TransportError::UnknownBuffer { .. })
        ));
    }

    #[test]
    fn headroom_lies_in_front_of_every_buffer_and_outside_its_views() {
        let mut pool = BufferPool::with_headroom("test", 3);
        let b = pool.alloc(5);
        pool.get_mut(b).unwrap().copy_from_slice(&[1, 2, 3, 4, 5]);
        assert_eq!(pool.get(b).unwrap(), &[1, 2, 3, 4, 5]);
        assert_eq!(pool.region(b.region(1, 2)).unwrap(), &[2, 3]);
        assert_eq!(pool.region_for_read(b.region(4, 1)).unwrap(), &[5]);
        assert_eq!(pool.region_for_write(b.region(0, 1)).unwrap(), &mut [1]);
        // A frame at the buffer's start: the headroom, then the region.
        let frame = pool.framed_mut(b.region(0, 2)).unwrap();
        assert_eq!(frame, &[0, 0, 0, 1, 2]);
        frame[..3].copy_from_slice(&[7, 8, 9]);
        assert_eq!(
            pool.get(b).unwrap(),
            &[1, 2, 3, 4, 5],
            "the headroom is not the buffer"
        );
        // Further in, the bytes in front are the buffer's own.
        assert_eq!(pool.framed_mut(b.region(3, 2)).unwrap(), &[1, 2, 3, 4, 5]);
        assert_eq!(pool.framed_mut(b.region(4, 1)).unwrap(), &[2, 3, 4, 5]);
        // Bounds are the buffer's, not the slot's.
        assert!(pool.region(b.region(3, 3)).is_err());
        assert!(pool.framed_mut(b.region(5, 1)).is_err());
        assert!(matches!(
            pool.region_for_write(b.region(4, 2)),
            Err(TransportError::RegionOutOfBounds { capacity: 5, .. })
        ));
        // Without headroom a frame is the region itself.
        let mut plain = BufferPool::new("test");
        let p = plain.alloc(4);
        assert_eq!(plain.framed_mut(p.region(1, 2)).unwrap().len(), 2);
    }

    #[test]
    fn regions_are_bounds_checked_without_overflow() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(4);
        assert!(pool.region(b.region(0, 4)).is_ok());
        assert!(pool.region(b.region(1, 4)).is_err());
        assert!(pool.region(b.region(usize::MAX, 2)).is_err());
        assert!(pool.acquire_read(b.region(3, 2)).is_err());
    }

    fn is_busy(r: Result<impl Sized, TransportError>) -> bool {
        matches!(r, Err(TransportError::BufferBusy { .. }))
    }

    #[test]
    fn a_pending_send_excludes_writers_but_not_readers() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(16);
        pool.acquire_read(b.region(0, 8)).unwrap();
        // Another send from the same bytes is fine, and so is a blocking send.
        pool.acquire_read(b.region(4, 8)).unwrap();
        assert!(pool.region_for_read(b.region(0, 8)).is_ok());
        // A receive into them, pending or blocking, is not.
        assert!(is_busy(pool.acquire_write(b.region(7, 2))));
        assert!(is_busy(pool.region_for_write(b.region(0, 1))));
        // Bytes no send reads may be received into.
        pool.acquire_write(b.region(12, 4)).unwrap();
        assert!(pool.region_for_write(b.region(12, 0)).is_ok());
        pool.release_region(b.region(0, 8), Access::Read);
        pool.release_region(b.region(4, 8), Access::Read);
        pool.release_region(b.region(12, 4), Access::Write);
        assert!(pool.region_for_write(b.region(0, 16)).is_ok());
        assert!(!pool.is_busy(b));
        pool.free(b).unwrap();
    }

    #[test]
    fn a_pending_receive_excludes_everything_on_its_bytes() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(16);
        pool.acquire_write(b.region(8, 8)).unwrap();
        assert!(is_busy(pool.acquire_read(b.region(15, 1))));
        assert!(is_busy(pool.acquire_write(b.region(0, 9))));
        assert!(is_busy(pool.region_for_read(b.region(8, 1))));
        assert!(is_busy(pool.region_for_write(b.region(10, 2))));
        assert!(is_busy(pool.get(b)));
        assert!(is_busy(pool.get_mut(b)));
        assert!(is_busy(pool.free(b)));
        // Disjoint parts of one buffer: one receive per peer (an all-to-all).
        pool.acquire_write(b.region(0, 8)).unwrap();
        assert!(pool.region_for_read(b.region(0, 0)).is_ok());
        pool.release_region(b.region(8, 8), Access::Write);
        assert!(pool.region_for_read(b.region(8, 8)).is_ok());
        assert!(is_busy(pool.region_for_read(b.region(7, 2))));
        pool.release_region(b.region(0, 8), Access::Write);
        pool.free(b).unwrap();
    }

    #[test]
    fn holds_are_bounds_checked_and_unknown_buffers_fail() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(4);
        assert!(matches!(
            pool.acquire_write(b.region(usize::MAX, 2)),
            Err(TransportError::RegionOutOfBounds { .. })
        ));
        assert!(matches!(
            pool.region_for_write(b.region(3, 2)),
            Err(TransportError::RegionOutOfBounds { .. })
        ));
        assert!(matches!(
            pool.region_for_read(BufferId(9).prefix(1)),
            Err(TransportError::UnknownBuffer { .. })
        ));
        assert!(!pool.is_busy(b));
    }

    #[test]
    fn a_release_gives_back_the_hold_of_its_own_region() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(16);
        pool.acquire_read(b.region(0, 8)).unwrap();
        pool.acquire_read(b.region(8, 8)).unwrap();
        // The older send completes first: its bytes are free, the newer one's not.
        pool.release_region(b.region(0, 8), Access::Read);
        pool.acquire_write(b.region(0, 8)).unwrap();
        assert!(is_busy(pool.acquire_write(b.region(8, 8))));
        // A release that matches no hold (wrong access or region) changes nothing.
        pool.release_region(b.region(8, 8), Access::Write);
        pool.release_region(b.region(8, 4), Access::Read);
        assert!(is_busy(pool.region_for_write(b.region(8, 8))));
        pool.release_region(b.region(8, 8), Access::Read);
        pool.release_region(b.region(0, 8), Access::Write);
        assert!(!pool.is_busy(b));
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut pool = BufferPool::new("test");
        let a = pool.alloc(1);
        let _b = pool.alloc(1);
        pool.free(a).unwrap();
        assert_eq!(pool.alloc(2), a);
    }
}

#[cfg(test)]
mod alloc_tests {
    use super::*;

    #[test]
    fn issue18_a_buffer_larger_than_memory_is_an_error_not_an_abort() {
        let mut pool = BufferPool::new("test");
        let huge = usize::MAX / 2;
        match pool.try_alloc(huge) {
            Err(TransportError::OutOfMemory { len_bytes, .. }) => assert_eq!(len_bytes, huge),
            other => panic!("{other:?}"),
        }
        // The pool still works.
        let b = pool.try_alloc(16).unwrap();
        assert_eq!(pool.get(b).unwrap(), &[0u8; 16]);
    }

    #[test]
    fn available_memory_is_known_on_linux() {
        let bytes = available_memory_bytes().expect("/proc/meminfo");
        assert!(bytes > 0);
    }
}
