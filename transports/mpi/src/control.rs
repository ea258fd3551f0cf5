//! [`MpiControl`]: ngauge's control plane over MPI point-to-point messages on
//! `MPI_COMM_WORLD`, with tags of its own (1 and 2; the data plane uses 0).
//!
//! Under `mpirun` this replaces the TCP rendezvous of the local launcher: rank and
//! size come from MPI, and barrier, broadcast and gather are linear exchanges with
//! the root over `MPI_Isend`/`MPI_Irecv` (a length message, then the bytes),
//! completed with `MPI_Test` and a backoff that yields and then sleeps, because the
//! [`Control`] contract says waits must not spin: a control-plane wait on an
//! oversubscribed host must leave the core to the rank being waited for.
//!
//! Why not MPI's nonblocking collectives (`MPI_Ibarrier`, `MPI_Igatherv`, ...)? In
//! Open MPI 4.1 the first one hooks libnbc's progress function into every later
//! progress loop: a 1-byte ping-pong measured after a single `MPI_Ibarrier` spends
//! 6% of its time in `mca_coll_libnbc` and is that much slower than the C benchmark.
//! `MPI_Comm_dup` does the same (its context-id agreement is a nonblocking
//! allreduce). The control plane must not change what the data plane measures, so it
//! uses point-to-point requests on the world communicator, which leave nothing
//! behind, and tags the data plane never uses.

use crate::ffi;
use crate::runtime::{Caller, Comm, Mpi, MpiError};
use crate::transport::Backoff;
use ngauge_transport::{Control, ControlError, Rank};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The control plane over MPI.
#[derive(Debug)]
pub struct MpiControl {
    comm: Comm,
    rank: Rank,
    size: usize,
    timeout: Option<Duration>,
    /// Set when a collective timed out: its request is still in MPI's hands, so the
    /// communicator cannot be used again.
    broken: bool,
}

// The `Control` trait requires `Send`. Moving the control plane to another thread is
// allowed; calling MPI from there is not, and every operation checks it first
// (`Caller::checked`), failing with `ControlError::Invalid`.

impl MpiControl {
    /// The control plane on `MPI_COMM_WORLD` (fails off the MPI thread).
    pub fn new(mpi: &Arc<Mpi>) -> Result<Self, MpiError> {
        Ok(MpiControl {
            comm: mpi.world()?,
            rank: mpi.rank(),
            size: mpi.size(),
            timeout: None,
            broken: false,
        })
    }

    /// Gives up on a collective after `timeout` (default: wait forever, as a lost
    /// rank makes the MPI launcher end the whole job anyway). After a timeout the
    /// control plane refuses further calls.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The MPI library.
    pub fn mpi(&self) -> &Arc<Mpi> {
        self.comm.mpi()
    }

    fn check_root(&self, root: Rank) -> Result<c_int, ControlError> {
        if root >= self.size {
            return Err(ControlError::Invalid(format!(
                "root {root} outside a job of {} ranks",
                self.size
            )));
        }
        Ok(root as c_int)
    }

    fn usable(&self, op: &'static str) -> Result<(), ControlError> {
        Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
        if self.broken {
            return Err(ControlError::Invalid(format!(
                "{op} on an MPI control plane that timed out earlier"
            )));
        }
        Ok(())
    }

    /// Waits with backoff until every request in `reqs` completed; `keep` owns the
    /// memory they read or write and is returned, or leaked on a timeout (MPI still
    /// holds pointers into it). A receive that got another length than posted
    /// (`expected`, per request; `None` for sends) is a protocol error.
    fn wait_all<K>(
        &mut self,
        op: &'static str,
        peers: &[(c_int, Rank, Option<usize>)],
        keep: K,
    ) -> Result<K, ControlError> {
        let mut pending: Vec<(c_int, Rank, Option<usize>)> = peers.to_vec();
        let began = Instant::now();
        let mut backoff = Backoff::default();
        while !pending.is_empty() {
            let caller =
                Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
            let mut still = Vec::with_capacity(pending.len());
            for &(req, rank, expected) in &pending {
                let (mut done, mut got): (c_int, c_int) = (0, -1);
                // SAFETY: `req` is a request this call started and that has not
                // completed; out pointers are valid; on the MPI thread.
                let rc = unsafe { ffi::ngm_test(req, &mut done, &mut got) };
                caller.check(op, rc).map_err(|e| lost(rank, op, e))?;
                if done == 0 {
                    still.push((req, rank, expected));
                } else if let Some(len) = expected.filter(|&len| got as usize != len) {
                    return Err(ControlError::Protocol {
                        rank,
                        detail: format!("{op}: {got} bytes arrived where {len} were announced"),
                    });
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            if let Some(limit) = self.timeout {
                if began.elapsed() > limit {
                    self.broken = true;
                    std::mem::forget(keep);
                    return Err(ControlError::Timeout {
                        rank: pending[0].1,
                        op,
                        after: limit,
                    });
                }
            }
            backoff.pause();
        }
        Ok(keep)
    }

    /// Starts a send of `len` bytes at `ptr` to `peer` (the caller keeps the memory
    /// alive until the request completes).
    fn isend(
        &self,
        op: &'static str,
        peer: Rank,
        tag: c_int,
        ptr: *const u8,
        len: usize,
    ) -> Result<c_int, ControlError> {
        let len = c_len(op, len)?;
        let caller = Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
        let mut req: c_int = -1;
        // SAFETY: `ptr` points at `len` bytes the caller keeps alive and unchanged
        // until the request completes (`wait_all` owns them); on the MPI thread.
        let rc = unsafe {
            ffi::ngm_isend(
                self.comm.index,
                ptr.cast::<c_void>(),
                len,
                peer as c_int,
                tag,
                &mut req,
            )
        };
        caller.check(op, rc).map_err(|e| lost(peer, op, e))?;
        Ok(req)
    }

    /// Starts a receive of `len` bytes into `ptr` from `peer`.
    fn irecv(
        &self,
        op: &'static str,
        peer: Rank,
        tag: c_int,
        ptr: *mut u8,
        len: usize,
    ) -> Result<c_int, ControlError> {
        let len = c_len(op, len)?;
        let caller = Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
        let mut req: c_int = -1;
        // SAFETY: `ptr` points at `len` writable bytes the caller keeps alive and
        // otherwise unreferenced until the request completes; on the MPI thread.
        let rc = unsafe {
            ffi::ngm_irecv(
                self.comm.index,
                ptr.cast::<c_void>(),
                len,
                peer as c_int,
                tag,
                &mut req,
            )
        };
        caller.check(op, rc).map_err(|e| lost(peer, op, e))?;
        Ok(req)
    }
}

const TAG_LEN: c_int = 1;
const TAG_DATA: c_int = 2;

fn c_len(op: &'static str, len: usize) -> Result<c_int, ControlError> {
    c_int::try_from(len).map_err(|_| {
        ControlError::Invalid(format!(
            "{op} of {len} bytes exceeds MPI's 2 GiB count limit"
        ))
    })
}

fn lost(rank: Rank, op: &'static str, e: MpiError) -> ControlError {
    ControlError::LostRank {
        rank,
        op,
        detail: e.to_string(),
    }
}

impl Control for MpiControl {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&mut self) -> Result<(), ControlError> {
        self.usable("barrier")?;
        self.gather(0, &[])?;
        self.broadcast(0, &mut Vec::new())
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        const OP: &str = "broadcast";
        self.usable(OP)?;
        self.check_root(root)?;
        if self.rank == root {
            let header = Box::new((data.len() as u64).to_le_bytes());
            let body = std::mem::take(data);
            let mut reqs = Vec::new();
            for peer in (0..self.size).filter(|&p| p != root) {
                reqs.push((
                    self.isend(OP, peer, TAG_LEN, header.as_ptr(), 8)?,
                    peer,
                    None,
                ));
                reqs.push((
                    self.isend(OP, peer, TAG_DATA, body.as_ptr(), body.len())?,
                    peer,
                    None,
                ));
            }
            let (_, body) = self.wait_all(OP, &reqs, (header, body))?;
            *data = body;
            return Ok(());
        }
        let mut header = Box::new([0u8; 8]);
        let req = self.irecv(OP, root, TAG_LEN, header.as_mut_ptr(), 8)?;
        let header = self.wait_all(OP, &[(req, root, Some(8))], header)?;
        let len = u64::from_le_bytes(*header) as usize;
        let mut body = vec![0u8; len];
        let req = self.irecv(OP, root, TAG_DATA, body.as_mut_ptr(), len)?;
        *data = self.wait_all(OP, &[(req, root, Some(len))], body)?;
        Ok(())
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        const OP: &str = "gather";
        self.usable(OP)?;
        self.check_root(root)?;
        if self.rank != root {
            let header = Box::new((data.len() as u64).to_le_bytes());
            let body = data.to_vec();
            let reqs = [
                (
                    self.isend(OP, root, TAG_LEN, header.as_ptr(), 8)?,
                    root,
                    None,
                ),
                (
                    self.isend(OP, root, TAG_DATA, body.as_ptr(), body.len())?,
                    root,
                    None,
                ),
            ];
            self.wait_all(OP, &reqs, (header, body))?;
            return Ok(Vec::new());
        }
        let peers: Vec<Rank> = (0..self.size).filter(|&p| p != root).collect();
        let mut headers = vec![[0u8; 8]; peers.len()];
        let mut reqs = Vec::with_capacity(peers.len());
        for (i, &peer) in peers.iter().enumerate() {
            reqs.push((
                self.irecv(OP, peer, TAG_LEN, headers[i].as_mut_ptr(), 8)?,
                peer,
                Some(8),
            ));
        }
        let headers = self.wait_all(OP, &reqs, headers)?;
        let mut parts: Vec<Vec<u8>> = headers
            .iter()
            .map(|h| vec![0u8; u64::from_le_bytes(*h) as usize])
            .collect();
        let mut reqs = Vec::with_capacity(peers.len());
        for (part, &peer) in parts.iter_mut().zip(&peers) {
            let len = part.len();
            reqs.push((
                self.irecv(OP, peer, TAG_DATA, part.as_mut_ptr(), len)?,
                peer,
                Some(len),
            ));
        }
        let mut parts = self.wait_all(OP, &reqs, parts)?.into_iter();
        Ok((0..self.size)
            .map(|r| {
                if r == root {
                    data.to_vec()
                } else {
                    parts.next().expect("one part per peer")
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_beyond_int_are_refused() {
        assert!(c_len("gather", c_int::MAX as usize).is_ok());
        assert!(matches!(
            c_len("gather", c_int::MAX as usize + 1),
            Err(ControlError::Invalid(_))
        ));
    }
}
