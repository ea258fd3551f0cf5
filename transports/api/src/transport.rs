//! The data plane: the [`Transport`] trait and its handle types.

use crate::error::TransportError;

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

/// How a transport waits for an operation to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Spin on nonblocking calls: lowest latency, but burns the core.
    Poll,
    /// Sleep in the kernel (or completion channel) until the operation can proceed:
    /// needed when ranks outnumber cores.
    Block,
}

impl WaitMode {
    /// `"poll"` or `"block"`, as on the command line and in result metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitMode::Poll => "poll",
            WaitMode::Block => "block",
        }
    }
}

/// What a transport guarantees and requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Messages are never lost.
    pub reliable: bool,
    /// Messages between one pair of ranks arrive in the order they were sent.
    pub ordered: bool,
    /// Largest message, in bytes, if limited (UDP: the datagram limit).
    pub max_message_bytes: Option<usize>,
    /// The transport may cut a message into several wire units (TCP segments,
    /// fragments); patterns that study protocol switches note it.
    pub may_split: bool,
    /// Messages must live in memory registered with the device (verbs).
    pub needs_registered_memory: bool,
    /// The transport checks that a received message has the posted size.
    pub checks_message_size: bool,
}

/// Event counters a transport keeps (UDP: lost, duplicated, reordered datagrams;
/// retransmissions). Reported with every result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `(name, value)` pairs, names in snake_case with their unit
    /// (`lost_datagrams`, `retransmissions`).
    pub entries: Vec<(&'static str, u64)>,
}

/// Point-to-point messaging between the ranks of a job.
///
/// All operations move a whole message of `region.len` bytes; the receiver posts the
/// exact size it expects (see the crate docs). A transport instance is connected to
/// every other rank of the job when it is constructed.
///
/// Nonblocking operations (`isend`, `irecv`) mark their buffer busy until `test`
/// reports completion or `wait` returns; reading or writing a busy buffer fails with
/// [`TransportError::BufferBusy`].
pub trait Transport {
    /// Short lowercase name: `tcp`, `udp`, `verbs`, `mpi`, `inproc`.
    fn name(&self) -> &'static str;
    /// This process's rank.
    fn rank(&self) -> Rank;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Guarantees and requirements.
    fn capabilities(&self) -> Capabilities;
    /// How this instance waits.
    fn wait_mode(&self) -> WaitMode;

    /// Allocates (and registers, where needed) a zeroed buffer of `len` bytes. Call
    /// this outside timed regions.
    fn alloc_buffer(&mut self, len: usize) -> Result<BufferId, TransportError>;
    /// Releases a buffer; fails if it is busy.
    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError>;
    /// Reads a buffer's bytes (fails while busy with a nonblocking receive).
    fn buffer(&self, buffer: BufferId) -> Result<&[u8], TransportError>;
    /// Writes a buffer's bytes (fails while busy).
    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError>;

    /// Sends `region` to `peer` and returns when the buffer may be reused.
    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError>;
    /// Receives one message of exactly `region.len` bytes from `peer` into `region`.
    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError>;
    /// Starts a send; the buffer is busy until the request completes.
    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError>;
    /// Starts a receive; the buffer is busy until the request completes.
    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError>;
    /// Makes progress; `true` (and the request is retired) when it has completed.
    fn test(&mut self, request: RequestId) -> Result<bool, TransportError>;
    /// Waits (per [`WaitMode`]) until the request completes, and retires it.
    fn wait(&mut self, request: RequestId) -> Result<(), TransportError>;
    /// Waits for all of `requests`, making progress on all of them together (so two
    /// ranks that exchange large messages cannot deadlock).
    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        let mut pending: Vec<RequestId> = requests.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for request in pending {
                if !self.test(request)? {
                    still.push(request);
                }
            }
            pending = still;
            if !pending.is_empty() && self.wait_mode() == WaitMode::Block {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Event counters (empty for transports that count nothing).
    fn counters(&self) -> Counters {
        Counters::default()
    }
}
