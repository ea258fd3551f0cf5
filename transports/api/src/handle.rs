//! The handles of the data plane: ranks, buffers, regions of buffers, requests.

/// A process's index in the job, `0..size`.
pub type Rank = usize;

/// Handle to a message buffer owned (and, for verbs, registered) by a transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

impl BufferId {
    /// The first `len` bytes of this buffer.
    pub fn prefix(self, len: usize) -> Region {
        Region {
            buffer: self,
            offset: 0,
            len,
        }
    }

    /// `len` bytes of this buffer starting at `offset`.
    pub fn region(self, offset: usize, len: usize) -> Region {
        Region {
            buffer: self,
            offset,
            len,
        }
    }
}

/// A byte range of a transport-owned buffer: what one message is sent from or
/// received into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// The buffer.
    pub buffer: BufferId,
    /// First byte of the message in the buffer.
    pub offset: usize,
    /// Message length in bytes.
    pub len: usize,
}

/// Handle to a pending nonblocking operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);
