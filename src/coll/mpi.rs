//! MPI's own collectives as a [`CollOp`] (feature `mpi`): `MPI_Bcast`,
//! `MPI_Gather`, `MPI_Allreduce`, `MPI_Barrier`, `MPI_Alltoall` for blocking calls
//! and their `MPI_I...` forms, completed with `MPI_Test`/`MPI_Wait`, for the
//! nonblocking ones, on the MPI transport's communicator and buffers.
//!
//! The data layout follows our schedules' (`size_bytes` per rank: the broadcast
//! message, each rank's gather block, the allreduce vector of `u64` words summed,
//! each all-to-all block), so the figures compare like with like. MPI reduces whole
//! elements: an allreduce size must be a multiple of 8 bytes.

use super::exec::Interrupts;
use super::op::CollOp;
use super::{CollError, Collective};
use ngauge_mpi::{Datatype, MpiTransport, ReduceOp};
use ngauge_transport::{BufferId, Rank, RequestId, Transport, TransportError, WaitMode};

/// One of MPI's collectives over an [`MpiTransport`].
pub struct MpiColl<'t> {
    t: &'t mut MpiTransport,
    collective: Collective,
    size_bytes: usize,
    root: Rank,
    send: Option<BufferId>,
    recv: Option<BufferId>,
    send_len: usize,
    recv_len: usize,
    pending: Option<RequestId>,
    started: bool,
}

impl<'t> MpiColl<'t> {
    /// Allocates the buffers `collective` of `size_bytes` per rank needs (rooted
    /// ones at `root`).
    pub fn new(
        t: &'t mut MpiTransport,
        collective: Collective,
        size_bytes: usize,
        root: Rank,
    ) -> Result<MpiColl<'t>, CollError> {
        let np = t.size();
        if root >= np {
            return Err(CollError::RootOutOfRange { root, np });
        }
        if collective == Collective::Allreduce && size_bytes % 8 != 0 {
            return Err(CollError::Unsupported {
                what: format!(
                    "MPI's allreduce sums 8-byte words: {size_bytes} bytes is not a multiple of 8"
                ),
            });
        }
        let whole = size_bytes.checked_mul(np).ok_or(CollError::Unsupported {
            what: format!("{size_bytes} bytes times {np} ranks overflows"),
        })?;
        let (send_len, recv_len) = match collective {
            Collective::Bcast => (size_bytes, 0),
            Collective::Gather => (size_bytes, whole),
            Collective::Allreduce => (size_bytes, size_bytes),
            Collective::Barrier => (0, 0),
            Collective::Alltoall => (whole, whole),
        };
        let mut alloc = |len: usize| -> Result<Option<BufferId>, TransportError> {
            // A zero-length region still needs a buffer to name.
            Ok(Some(t.alloc_buffer(len.max(1))?))
        };
        let send = alloc(send_len)?;
        let recv = alloc(recv_len)?;
        Ok(MpiColl {
            t,
            collective,
            size_bytes,
            root,
            send,
            recv,
            send_len,
            recv_len,
            pending: None,
            started: false,
        })
    }

    /// Releases the buffers.
    pub fn free(self) -> Result<(), CollError> {
        for id in [self.send, self.recv].into_iter().flatten() {
            self.t.free_buffer(id)?;
        }
        Ok(())
    }

    fn name(&self, nonblocking: bool) -> &'static str {
        match (self.collective, nonblocking) {
            (Collective::Bcast, false) => "MPI_Bcast",
            (Collective::Bcast, true) => "MPI_Ibcast",
            (Collective::Gather, false) => "MPI_Gather",
            (Collective::Gather, true) => "MPI_Igather",
            (Collective::Allreduce, false) => "MPI_Allreduce",
            (Collective::Allreduce, true) => "MPI_Iallreduce",
            (Collective::Barrier, false) => "MPI_Barrier",
            (Collective::Barrier, true) => "MPI_Ibarrier",
            (Collective::Alltoall, false) => "MPI_Alltoall",
            (Collective::Alltoall, true) => "MPI_Ialltoall",
        }
    }

    fn regions(&self) -> (ngauge_transport::Region, ngauge_transport::Region) {
        let send = self.send.expect("allocated").prefix(self.send_len);
        let recv = self.recv.expect("allocated").prefix(self.recv_len);
        (send, recv)
    }

    /// The receive region of a gather: the whole array at the root only.
    fn gather_recv(&self) -> ngauge_transport::Region {
        let len = if self.t.rank() == self.root {
            self.recv_len
        } else {
            0
        };
        self.recv.expect("allocated").prefix(len)
    }
}

impl std::fmt::Debug for MpiColl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiColl")
            .field("collective", &self.collective)
            .field("size_bytes", &self.size_bytes)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl CollOp for MpiColl<'_> {
    fn label(&self) -> String {
        self.name(false).to_string()
    }
    fn collective(&self) -> Collective {
        self.collective
    }
    fn size_bytes(&self) -> usize {
        self.size_bytes
    }
    fn wait_mode(&self) -> WaitMode {
        self.t.wait_mode()
    }
    fn interruptible(&self) -> bool {
        false
    }
    fn run(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        interrupts.poll();
        let (send, recv) = self.regions();
        match self.collective {
            Collective::Bcast => self.t.bcast(self.root, send)?,
            Collective::Gather => {
                let recv = self.gather_recv();
                self.t.gather(self.root, send, recv)?
            }
            Collective::Allreduce => self.t.allreduce(send, recv, Datatype::U64, ReduceOp::Sum)?,
            Collective::Barrier => self.t.barrier()?,
            Collective::Alltoall => self.t.alltoall(send, recv)?,
        }
        interrupts.poll();
        Ok(())
    }
    fn start(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        interrupts.poll();
        let (send, recv) = self.regions();
        let request = match self.collective {
            Collective::Bcast => self.t.ibcast(self.root, send)?,
            Collective::Gather => {
                let recv = self.gather_recv();
                self.t.igather(self.root, send, recv)?
            }
            Collective::Allreduce => self
                .t
                .iallreduce(send, recv, Datatype::U64, ReduceOp::Sum)?,
            Collective::Barrier => self.t.ibarrier()?,
            Collective::Alltoall => self.t.ialltoall(send, recv)?,
        };
        self.pending = Some(request);
        self.started = true;
        Ok(())
    }
    fn test(&mut self, interrupts: &mut dyn Interrupts) -> Result<bool, CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        let Some(request) = self.pending else {
            return Ok(true);
        };
        let done = self.t.test(request)?;
        if done {
            self.pending = None;
            interrupts.poll();
        }
        Ok(done)
    }
    fn wait(&mut self, interrupts: &mut dyn Interrupts) -> Result<(), CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        if let Some(request) = self.pending.take() {
            self.t.wait(request)?;
            interrupts.poll();
        }
        Ok(())
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.free()
    }
}
