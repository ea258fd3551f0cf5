//! [`MpiControl`]: ngauge's control plane over MPI's collectives, on a private
//! duplicate of `MPI_COMM_WORLD`.
//!
//! Under `mpirun` this replaces the TCP rendezvous of the local launcher: rank and
//! size come from MPI, and barrier, broadcast, gather and allgather are
//! `MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Igather(v)` and `MPI_Iallgather(v)`. The
//! nonblocking forms are completed with `MPI_Test` and a backoff that yields and then
//! sleeps, because the [`Control`] contract says waits must not spin: a control-plane
//! wait on an oversubscribed host must leave the core to the rank being waited for.
//! Variable-length data travel in two steps: the lengths first (8 bytes per rank),
//! then the bytes.

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
    /// A control plane over a fresh duplicate of `MPI_COMM_WORLD` (collective).
    pub fn new(mpi: &Arc<Mpi>) -> Result<Self, MpiError> {
        Ok(MpiControl {
            comm: mpi.dup_world()?,
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

    /// Starts a nonblocking collective and waits for it with backoff. `keep` owns
    /// the memory the collective reads or writes: on a timeout it is leaked, since
    /// MPI still holds pointers into it.
    fn run<K>(
        &mut self,
        op: &'static str,
        root: Rank,
        keep: K,
        start: impl FnOnce(c_int, *mut c_int) -> c_int,
    ) -> Result<K, ControlError> {
        let comm = self.comm.index;
        let mut req: c_int = -1;
        {
            let caller =
                Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
            caller
                .check(op, start(comm, &mut req))
                .map_err(|e| lost(root, op, e))?;
        }
        let began = Instant::now();
        let mut backoff = Backoff::default();
        loop {
            let (mut done, mut got): (c_int, c_int) = (0, -1);
            let caller = Caller::take();
            // SAFETY: `req` is the request just started and not yet completed;
            // out pointers are valid; on the MPI thread (checked when it started).
            let rc = unsafe { ffi::ngm_test(req, &mut done, &mut got) };
            caller.check(op, rc).map_err(|e| lost(root, op, e))?;
            if done != 0 {
                return Ok(keep);
            }
            if let Some(limit) = self.timeout {
                if began.elapsed() > limit {
                    self.broken = true;
                    std::mem::forget(keep);
                    return Err(ControlError::Timeout {
                        rank: root,
                        op,
                        after: limit,
                    });
                }
            }
            backoff.pause();
        }
    }

    /// Every rank's length, via `MPI_Iallgather` or `MPI_Igather` (root only).
    fn lengths(
        &mut self,
        op: &'static str,
        root: Option<Rank>,
        len: usize,
    ) -> Result<Vec<usize>, ControlError> {
        let mine = (len as u64).to_le_bytes();
        let all = vec![0u8; 8 * self.size];
        let keep = (mine, all);
        let (_, all) = match root {
            Some(root) => {
                let root_c = root as c_int;
                let (send, recv) = (
                    keep.0.as_ptr().cast::<c_void>(),
                    keep.1.as_ptr() as *mut c_void,
                );
                // SAFETY: `send` (8 bytes) and `recv` (8 * size bytes) live in `keep`,
                // which `run` holds until completion (or leaks on timeout).
                self.run(op, root, keep, |comm, req| unsafe {
                    ffi::ngm_igather(comm, send, 8, recv, root_c, req)
                })?
            }
            None => {
                let (send, recv) = (
                    keep.0.as_ptr().cast::<c_void>(),
                    keep.1.as_ptr() as *mut c_void,
                );
                // SAFETY: as above.
                self.run(op, 0, keep, |comm, req| unsafe {
                    ffi::ngm_iallgather(comm, send, 8, recv, req)
                })?
            }
        };
        Ok(all
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as usize)
            .collect())
    }

    /// Gathers variable-length `data` to `root` (or to everyone when `root` is None).
    fn gather_any(
        &mut self,
        op: &'static str,
        root: Option<Rank>,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, ControlError> {
        let len = c_len(op, data.len())?;
        let lens = self.lengths(op, root, data.len())?;
        let receives = root.is_none_or(|r| r == self.rank);
        let (counts, displs, total) = if receives {
            layout(op, &lens)?
        } else {
            (vec![0; self.size], vec![0; self.size], 0)
        };
        let keep = (data.to_vec(), vec![0u8; total], counts, displs);
        let send = keep.0.as_ptr().cast::<c_void>();
        let recv = keep.1.as_ptr() as *mut c_void;
        let (counts_p, displs_p) = (keep.2.as_ptr(), keep.3.as_ptr());
        let (_, all, counts, displs) = match root {
            Some(root) => {
                let root_c = root as c_int;
                // SAFETY: every pointer points into `keep`, which `run` owns until
                // the collective completes (or leaks on timeout); on the root, `recv`
                // holds `total` = sum(counts) bytes at the displacements given.
                self.run(op, root, keep, |comm, req| unsafe {
                    ffi::ngm_igatherv(comm, send, len, recv, counts_p, displs_p, root_c, req)
                })?
            }
            None => {
                // SAFETY: as above, on every rank.
                self.run(op, 0, keep, |comm, req| unsafe {
                    ffi::ngm_iallgatherv(comm, send, len, recv, counts_p, displs_p, req)
                })?
            }
        };
        if !receives {
            return Ok(Vec::new());
        }
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&n, &at)| all[at as usize..at as usize + n as usize].to_vec())
            .collect())
    }
}

/// Receive counts and displacements for `lens`, checked against MPI's `int`.
fn layout(
    op: &'static str,
    lens: &[usize],
) -> Result<(Vec<c_int>, Vec<c_int>, usize), ControlError> {
    let mut counts = Vec::with_capacity(lens.len());
    let mut displs = Vec::with_capacity(lens.len());
    let mut total = 0usize;
    for &len in lens {
        displs.push(c_len(op, total)?);
        counts.push(c_len(op, len)?);
        total += len;
    }
    c_len(op, total)?;
    Ok((counts, displs, total))
}

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
        // SAFETY: no buffers; `req` is a valid out pointer.
        self.run("barrier", 0, (), |comm, req| unsafe {
            ffi::ngm_ibarrier(comm, req)
        })
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        self.usable("broadcast")?;
        let root_c = self.check_root(root)?;
        let header = (data.len() as u64).to_le_bytes().to_vec();
        let ptr = header.as_ptr() as *mut c_void;
        // SAFETY: `ptr` covers the 8 bytes of `header`, owned by `run` until done.
        let header = self.run("broadcast", root, header, |comm, req| unsafe {
            ffi::ngm_ibcast(comm, ptr, 8, root_c, req)
        })?;
        let len = u64::from_le_bytes(header[..8].try_into().expect("8 bytes")) as usize;
        let len_c = c_len("broadcast", len)?;
        let mut body = if self.rank == root {
            std::mem::take(data)
        } else {
            vec![0u8; len]
        };
        let ptr = body.as_mut_ptr().cast::<c_void>();
        // SAFETY: `body` holds `len` bytes (the root's length, broadcast above) and
        // is owned by `run` until the broadcast completes.
        *data = self.run("broadcast", root, body, |comm, req| unsafe {
            ffi::ngm_ibcast(comm, ptr, len_c, root_c, req)
        })?;
        Ok(())
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        self.usable("gather")?;
        self.check_root(root)?;
        self.gather_any("gather", Some(root), data)
    }

    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        self.usable("allgather")?;
        self.gather_any("allgather", None, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_places_parts_back_to_back() {
        let (counts, displs, total) = layout("gather", &[3, 0, 5]).unwrap();
        assert_eq!(counts, vec![3, 0, 5]);
        assert_eq!(displs, vec![0, 3, 3]);
        assert_eq!(total, 8);
    }

    #[test]
    fn layout_refuses_totals_beyond_int() {
        let half = c_int::MAX as usize / 2 + 1;
        assert!(matches!(
            layout("gather", &[half, half]),
            Err(ControlError::Invalid(_))
        ));
    }
}
