//! Plain heap buffers with busy tracking, for transports that need no registration
//! (TCP, UDP, MPI, in-process). Verbs keeps its own registered regions instead.

use crate::error::TransportError;
use crate::transport::{BufferId, Region};

/// A set of heap buffers addressed by [`BufferId`], each with a busy count held by
/// pending nonblocking operations.
#[derive(Debug)]
pub struct BufferPool {
    transport: &'static str,
    slots: Vec<Option<Slot>>,
}

#[derive(Debug)]
struct Slot {
    bytes: Vec<u8>,
    busy: u32,
}

impl BufferPool {
    /// An empty pool whose errors name `transport`.
    pub fn new(transport: &'static str) -> Self {
        BufferPool {
            transport,
            slots: Vec::new(),
        }
    }

    /// A zeroed buffer of `len` bytes.
    ///
    /// At least a cache line is reserved, so that two small buffers (a ping-pong's
    /// send and receive buffers of 1 byte) never share one: sharing adds ~5 ns to an
    /// MPI shared-memory round trip of ~500 ns (scripts/bench-mpi).
    pub fn alloc(&mut self, len: usize) -> BufferId {
        let mut bytes = Vec::with_capacity(len.max(CACHE_LINE));
        bytes.resize(len, 0);
        let slot = Some(Slot { bytes, busy: 0 });
        if let Some(free) = self.slots.iter().position(Option::is_none) {
            self.slots[free] = slot;
            BufferId(free as u32)
        } else {
            self.slots.push(slot);
            BufferId((self.slots.len() - 1) as u32)
        }
    }

    /// Frees a buffer that is not busy.
    pub fn free(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.check_idle(buffer)?;
        self.slots[buffer.0 as usize] = None;
        Ok(())
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
        if self.slot(buffer)?.busy > 0 {
            return Err(TransportError::BufferBusy {
                transport: self.transport,
                buffer,
            });
        }
        Ok(())
    }

    /// The whole buffer, if it is not busy.
    pub fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.check_idle(buffer)?;
        Ok(&self.slot(buffer)?.bytes)
    }

    /// The whole buffer, mutable, if it is not busy.
    pub fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.check_idle(buffer)?;
        Ok(&mut self.slot_mut(buffer)?.bytes)
    }

    /// The bytes of `region`, checked against the buffer's bounds; ignores the busy
    /// count (the transport itself reads busy buffers while it progresses them).
    #[inline]
    pub fn region(&self, region: Region) -> Result<&[u8], TransportError> {
        let bytes = &self.slot(region.buffer)?.bytes;
        let range = self.range(region, bytes.len())?;
        Ok(&bytes[range])
    }

    /// Mutable bytes of `region`, checked against the buffer's bounds.
    #[inline]
    pub fn region_mut(&mut self, region: Region) -> Result<&mut [u8], TransportError> {
        let capacity = self.slot(region.buffer)?.bytes.len();
        let range = self.range(region, capacity)?;
        Ok(&mut self.slot_mut(region.buffer)?.bytes[range])
    }

    #[inline]
    fn range(
        &self,
        region: Region,
        capacity: usize,
    ) -> Result<std::ops::Range<usize>, TransportError> {
        match region.offset.checked_add(region.len) {
            Some(end) if end <= capacity => Ok(region.offset..end),
            _ => Err(TransportError::RegionOutOfBounds {
                transport: self.transport,
                buffer: region.buffer,
                offset: region.offset,
                len: region.len,
                capacity,
            }),
        }
    }

    /// Marks the buffer busy for one more pending operation (after checking bounds).
    pub fn acquire(&mut self, region: Region) -> Result<(), TransportError> {
        let capacity = self.slot(region.buffer)?.bytes.len();
        self.range(region, capacity)?;
        self.slot_mut(region.buffer)?.busy += 1;
        Ok(())
    }

    /// Releases one pending operation's hold on the buffer.
    pub fn release(&mut self, buffer: BufferId) {
        if let Ok(slot) = self.slot_mut(buffer) {
            slot.busy = slot.busy.saturating_sub(1);
        }
    }
}

/// The smallest allocation behind a buffer, in bytes.
const CACHE_LINE: usize = 64;

/// Out of line, so that a lookup on a latency-critical path (a transport's `send`,
/// inlined) neither builds nor drops an error value when the buffer exists.
#[cold]
fn unknown_buffer(transport: &'static str, buffer: BufferId) -> TransportError {
    TransportError::UnknownBuffer { transport, buffer }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_buffer_refuses_access_until_released() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(8);
        pool.acquire(b.prefix(8)).unwrap();
        assert!(matches!(
            pool.get(b),
            Err(TransportError::BufferBusy { .. })
        ));
        assert!(matches!(
            pool.free(b),
            Err(TransportError::BufferBusy { .. })
        ));
        assert_eq!(pool.region(b.region(2, 3)).unwrap().len(), 3);
        pool.release(b);
        assert_eq!(pool.get(b).unwrap(), &[0u8; 8]);
        pool.free(b).unwrap();
        assert!(matches!(
            pool.get(b),
            Err(TransportError::UnknownBuffer { .. })
        ));
    }

    #[test]
    fn regions_are_bounds_checked_without_overflow() {
        let mut pool = BufferPool::new("test");
        let b = pool.alloc(4);
        assert!(pool.region(b.region(0, 4)).is_ok());
        assert!(pool.region(b.region(1, 4)).is_err());
        assert!(pool.region(b.region(usize::MAX, 2)).is_err());
        assert!(pool.acquire(b.region(3, 2)).is_err());
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
