//! The control plane: small collectives between timed regions.

use crate::transport::Rank;
use std::time::Duration;

/// What went wrong on the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A rank died, closed its connection, or stopped answering.
    #[error("lost rank {rank} during {op}: {detail}")]
    LostRank {
        /// The rank that is gone.
        rank: Rank,
        /// The control operation (`barrier`, `gather`, ...).
        op: &'static str,
        /// What was observed (EOF, reset, timeout after N s).
        detail: String,
    },
    /// No answer from `rank` within `after`.
    #[error("rank {rank} did not answer {op} within {after:?}")]
    Timeout {
        /// The silent rank.
        rank: Rank,
        /// The control operation.
        op: &'static str,
        /// How long it waited.
        after: Duration,
    },
    /// A peer sent something that does not follow the control protocol.
    #[error("control protocol violation by rank {rank}: {detail}")]
    Protocol {
        /// The offending rank.
        rank: Rank,
        /// What was wrong.
        detail: String,
    },
    /// The arguments do not fit the job (a root outside it, say).
    #[error("invalid control call: {0}")]
    Invalid(String),
}

/// Barrier, broadcast, gather and allgather of small messages among all ranks.
///
/// Implementations: the TCP rendezvous connections (`ngauge::launch`), MPI's own
/// collectives (`ngauge-mpi`), and `inproc` for tests. Every wait blocks in
/// the kernel (or in MPI) rather than spinning: with more ranks than cores a spinning
/// control plane would steal the core a peer needs to make progress.
///
/// Every call is collective: all ranks make the same calls in the same order.
pub trait Control: Send {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> Rank;
    /// Number of ranks in the job.
    fn size(&self) -> usize;
    /// Returns once every rank has entered the barrier.
    fn barrier(&mut self) -> Result<(), ControlError>;
    /// Rank `root`'s `data` replaces `data` on every other rank.
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError>;
    /// Rank `root` receives every rank's `data`, indexed by rank (its own included);
    /// the other ranks receive an empty vector.
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError>;
    /// Tells the other ranks, best effort and without blocking for long, that this
    /// rank is failing because of `reason`, so that their next control call fails
    /// naming the rank to blame and the reason instead of just "connection
    /// closed". `suspect`: the rank whose link broke, if that is the failure; the
    /// rank blamed (returned) is where the failure was first detected, confirmed
    /// where the implementation can (a peer that failed because of another names
    /// that one), else `suspect`, else this rank. The default tells nobody: a rank
    /// that exits is noticed as lost anyway.
    fn abort(&mut self, suspect: Option<Rank>, reason: &str) -> Rank {
        let _ = reason;
        suspect.unwrap_or(self.rank())
    }
    /// Every rank receives every rank's `data`, indexed by rank.
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        let gathered = self.gather(0, data)?;
        let mut packed = if self.rank() == 0 {
            pack(&gathered)
        } else {
            Vec::new()
        };
        self.broadcast(0, &mut packed)?;
        unpack(&packed, self.size()).ok_or_else(|| ControlError::Protocol {
            rank: 0,
            detail: "malformed allgather payload".into(),
        })
    }
}

/// Packs a list of byte strings as `count:u32, (len:u32, bytes)*`, little endian:
/// the payload of [`Control::allgather`]'s broadcast, and of any control
/// implementation that moves a gathered list in one message (`ngauge::launch`).
pub fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + parts.iter().map(|p| 4 + p.len()).sum::<usize>());
    out.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    for part in parts {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// Inverse of [`pack`]; `None` unless exactly `expected` parts fill `bytes` exactly
/// (so a truncated, padded or hostile payload is refused, never trusted for sizes).
pub fn unpack(bytes: &[u8], expected: usize) -> Option<Vec<Vec<u8>>> {
    let mut rest = bytes;
    let take_u32 = |rest: &mut &[u8]| -> Option<usize> {
        let (head, tail) = rest.split_first_chunk::<4>()?;
        *rest = tail;
        Some(u32::from_le_bytes(*head) as usize)
    };
    let count = take_u32(&mut rest)?;
    if count != expected {
        return None;
    }
    let mut parts = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let len = take_u32(&mut rest)?;
        if rest.len() < len {
            return None;
        }
        let (part, tail) = rest.split_at(len);
        parts.push(part.to_vec());
        rest = tail;
    }
    rest.is_empty().then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_with_empty_parts() {
        let parts = vec![b"abc".to_vec(), Vec::new(), vec![0u8; 300]];
        assert_eq!(unpack(&pack(&parts), 3), Some(parts));
    }

    #[test]
    fn unpack_rejects_truncated_trailing_and_wrong_count() {
        let packed = pack(&[b"abc".to_vec()]);
        assert_eq!(unpack(&packed[..packed.len() - 1], 1), None);
        let mut longer = packed.clone();
        longer.push(0);
        assert_eq!(unpack(&longer, 1), None);
        assert_eq!(unpack(&packed, 2), None);
        assert_eq!(unpack(&[], 0), None);
    }
}
