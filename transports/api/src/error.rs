//! Errors of the data plane.

use crate::handle::{BufferId, Rank, RequestId};
use std::time::Duration;

/// What went wrong in a data-plane operation, and with which peer.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// An operating-system call on the connection to `peer` failed.
    #[error("{transport}: {op} with rank {peer} failed: {source}")]
    Io {
        /// Transport name (`tcp`, `udp`, ...).
        transport: &'static str,
        /// The peer rank.
        peer: Rank,
        /// The operation (`send`, `recv`, `connect`, ...).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The peer went away (connection closed or reset).
    #[error("{transport}: rank {peer} closed the connection during {op}")]
    PeerClosed {
        /// Transport name.
        transport: &'static str,
        /// The peer rank that went away.
        peer: Rank,
        /// The operation that noticed it.
        op: &'static str,
    },
    /// The peer did not answer in time.
    #[error("{transport}: rank {peer} did not answer within {after:?} during {op}")]
    Timeout {
        /// Transport name.
        transport: &'static str,
        /// The silent peer.
        peer: Rank,
        /// The operation that timed out.
        op: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// The message is larger than the transport can carry in one piece.
    #[error("{transport}: a message of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    TooLarge {
        /// Transport name.
        transport: &'static str,
        /// Requested message size.
        len_bytes: usize,
        /// The transport's limit.
        max_bytes: usize,
    },
    /// A message arrived with a size other than the one the receiver posted.
    #[error("{transport}: rank {peer} sent {got_bytes} bytes where {expected_bytes} were posted")]
    SizeMismatch {
        /// Transport name.
        transport: &'static str,
        /// The sender.
        peer: Rank,
        /// Posted size.
        expected_bytes: usize,
        /// Arrived size.
        got_bytes: usize,
    },
    /// The rank is outside the job or is this rank itself.
    #[error("{transport}: no peer rank {peer} (job size {size}, this is rank {me})")]
    NoSuchPeer {
        /// Transport name.
        transport: &'static str,
        /// The rank asked for.
        peer: Rank,
        /// Job size.
        size: usize,
        /// This rank.
        me: Rank,
    },
    /// A buffer handle that this transport never handed out (or already freed).
    #[error("{transport}: unknown buffer {buffer:?}")]
    UnknownBuffer {
        /// Transport name.
        transport: &'static str,
        /// The handle.
        buffer: BufferId,
    },
    /// The region does not fit inside its buffer.
    #[error("{transport}: region {offset}+{len} outside buffer {buffer:?} of {capacity} bytes")]
    RegionOutOfBounds {
        /// Transport name.
        transport: &'static str,
        /// The handle.
        buffer: BufferId,
        /// Region start.
        offset: usize,
        /// Region length.
        len: usize,
        /// Buffer capacity.
        capacity: usize,
    },
    /// The buffer is in use by a pending nonblocking operation.
    #[error("{transport}: buffer {buffer:?} is in use by a pending operation")]
    BufferBusy {
        /// Transport name.
        transport: &'static str,
        /// The handle.
        buffer: BufferId,
    },
    /// A request handle that is unknown or already completed.
    #[error("{transport}: unknown or completed request {request:?}")]
    UnknownRequest {
        /// Transport name.
        transport: &'static str,
        /// The handle.
        request: RequestId,
    },
    /// The transport cannot work on this machine or in this build.
    #[error("{transport} is not usable: {reason}")]
    Unavailable {
        /// Transport name.
        transport: &'static str,
        /// Why, in words the user can act on.
        reason: String,
    },
    /// A buffer could not be allocated: larger than the memory available, or the
    /// allocator refused it (an address-space limit, say).
    #[error("{transport}: cannot allocate a buffer of {len_bytes} bytes: {detail}")]
    OutOfMemory {
        /// Transport name.
        transport: &'static str,
        /// The size asked for.
        len_bytes: usize,
        /// Why: what was available, or what the allocator said.
        detail: String,
    },
    /// Setting the transport up failed (exchanging endpoints, connecting).
    #[error("{transport}: setup failed: {reason}")]
    Setup {
        /// Transport name.
        transport: &'static str,
        /// What failed.
        reason: String,
    },
}

impl TransportError {
    /// The peer rank this error is about, if any.
    pub fn peer(&self) -> Option<Rank> {
        match self {
            TransportError::Io { peer, .. }
            | TransportError::PeerClosed { peer, .. }
            | TransportError::Timeout { peer, .. }
            | TransportError::SizeMismatch { peer, .. }
            | TransportError::NoSuchPeer { peer, .. } => Some(*peer),
            _ => None,
        }
    }
}
