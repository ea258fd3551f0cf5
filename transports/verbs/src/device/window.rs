//! One-sided operations for `ngauge rma` ([`OneSided`]) over the transport's
//! reliable-connected queue pairs: a window registered once at setup
//! (`ibv_reg_mr` with remote write, read and atomic access) whose address and
//! rkey the ranks exchange over the control channel, as [`super::open`]
//! exchanges the queue-pair addresses.
//!
//! Put is an RDMA WRITE (inline up to the device's inline limit, as
//! `ib_write_lat`), get an RDMA READ, fetch-and-add an
//! `IBV_WR_ATOMIC_FETCH_AND_ADD` of 1 on an 8-byte aligned word (the old value
//! lands in the result buffer). Each is posted signaled on the message queue pair
//! of the peer with a `wr_id` that names only the peer, as credit messages are,
//! so the transport's completion code retires it: no request, no allocation.
//!
//! **Flush** (passive target) waits until every signaled work request to the peer
//! has completed. On RC a write completes at the origin when the responder's ACK
//! of its last packet arrives, a read or an atomic when its response does: the
//! responder has executed it, in the order the queue pair carries them, which is
//! the remote completion `MPI_Win_flush` gives. **Fence** (active target) is the
//! flush to every peer, then a barrier of 1-byte messages over the same queue
//! pairs ([`fence_barrier`]): the fence is timed, and nothing goes on the control
//! channel in a timed region. No accumulate: verbs atomics are
//! 64-bit integer additions and compare-and-swaps only.

use super::memory::Registered;
use super::{rc_error, VerbsTransport};
use crate::layout;
use crate::qp::access;
use crate::{VerbsOp, VerbsOptions};
use ngauge_transport::one_sided::{exchange_keys, fence_barrier};
use ngauge_transport::{BufferId, Buffers, Control, OneSided, Rank, TransportError, WaitMode};
use rdma_sys::*;

/// The window of every rank, with this rank's origin and result buffers.
pub struct VerbsWindow {
    /// Per rank: the address and rkey of its window.
    remote: Vec<(u64, u32)>,
    bytes: usize,
    window: Registered,
    origin: Registered,
    result: Registered,
    /// The fence's barrier messages: byte 0 is sent, byte 1 received.
    token: BufferId,
    /// Last: the queue pairs and the protection domain outlive the registrations.
    t: VerbsTransport,
}

/// What a one-sided work request does at the target.
enum Remote {
    /// RDMA write or read of the window at this address.
    Rdma(u64, u32),
    /// Fetch-and-add of 1 to the word at this address.
    FetchAdd(u64, u32),
}

/// See [`crate::open_window`].
pub fn open_window(
    control: &mut dyn Control,
    opts: &VerbsOptions,
    bytes: usize,
) -> Result<VerbsWindow, TransportError> {
    let opts = VerbsOptions {
        op: VerbsOp::Send,
        wait: WaitMode::Poll,
        ..opts.clone()
    };
    let mut t = super::open(control, &opts)?;
    let remote_access =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let reg = |t: &VerbsTransport, a| Registered::new(t.res.pd, bytes.max(8), a);
    let mapped = reg(&t, remote_access).and_then(|window| {
        let origin = reg(&t, access::LOCAL_WRITE)?;
        let result = reg(&t, access::LOCAL_WRITE)?;
        Ok((window, origin, result))
    });
    let token = t.res.try_alloc(2);
    let mine = match (&mapped, &token) {
        (Ok((w, _, _)), Ok(_)) => {
            Ok([&w.addr(0).to_le_bytes()[..], &w.rkey().to_le_bytes()].concat())
        }
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    };
    let keys = exchange_keys(
        control,
        super::NAME,
        mine.as_deref().map_err(String::as_str),
        |k| {
            let (addr, rkey) = (k.get(..8)?.try_into().ok()?, k.get(8..)?.try_into().ok()?);
            Some((u64::from_le_bytes(addr), u32::from_le_bytes(rkey)))
        },
    );
    let ((window, origin, result), token) = (mapped?, token?);
    let remote = keys?;
    Ok(VerbsWindow {
        remote,
        bytes,
        window,
        origin,
        result,
        token,
        t,
    })
}

impl VerbsWindow {
    /// The address and rkey of `offset` in `peer`'s window, with `offset + len`
    /// checked against the window and the connection checked unbroken.
    fn target(
        &self,
        peer: Rank,
        offset: usize,
        len: usize,
        op: &'static str,
    ) -> Result<(u64, u32), TransportError> {
        self.t.check_peer(peer)?;
        layout::check_len(len, self.t.max_msg)?;
        let outside = offset.checked_add(len).is_none_or(|end| end > self.bytes);
        let reason = if outside {
            format!(
                "{offset}+{len} bytes outside the window of {} bytes",
                self.bytes
            )
        } else if let Some(broken) = &self.t.peers[peer].broken {
            broken.clone()
        } else {
            let (addr, rkey) = self.remote[peer];
            return Ok((addr + offset as u64, rkey));
        };
        Err(self.t.io(peer, op, std::io::Error::other(reason)))
    }

    /// Posts one signaled one-sided work request to `peer`, reading or writing
    /// `len` bytes of `local` (after waiting for send-queue room).
    fn post(
        &mut self,
        peer: Rank,
        opcode: ibv_wr_opcode::Type,
        local: Local,
        len: usize,
        remote: Remote,
    ) -> Result<(), TransportError> {
        let depth = self.t.depth;
        if self.t.peers[peer].sq_used >= depth {
            self.settle(peer, |used, _| used < depth)?;
        }
        let mem = match local {
            Local::Origin => &self.origin,
            Local::Result => &self.result,
        };
        let mut sge = ibv_sge {
            addr: mem.addr(0),
            length: len as u32,
            lkey: mem.lkey(),
        };
        let inline = matches!(remote, Remote::Rdma(..))
            && opcode == ibv_wr_opcode::IBV_WR_RDMA_WRITE
            && layout::goes_inline(len, self.t.max_inline);
        // SAFETY: plain data (unions of plain data), all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = self.t.peer_wr_id(peer);
        if len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        wr.opcode = opcode;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0
            | if inline {
                ibv_send_flags::IBV_SEND_INLINE.0
            } else {
                0
            };
        match remote {
            Remote::Rdma(addr, rkey) => {
                wr.wr.rdma.remote_addr = addr;
                wr.wr.rdma.rkey = rkey;
            }
            Remote::FetchAdd(addr, rkey) => {
                wr.wr.atomic.remote_addr = addr;
                wr.wr.atomic.compare_add = 1;
                wr.wr.atomic.rkey = rkey;
            }
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live and in RTS; `wr` and `sge` are valid for the
        // call; `len` bytes of the origin or result memory are registered and
        // stay allocated and untouched by the CPU until the completion is polled
        // (`idle` refuses fills and reads while one is outstanding), or were
        // copied into the work request (inline); the remote range lies in the
        // peer's window (checked by `target`).
        let rc = unsafe { ibv_post_send(self.t.res.qps[peer], &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.t.io(peer, "post send", rc_error(rc)));
        }
        self.t.account_send(peer, false, true);
        Ok(())
    }

    /// Polls until `done(sends in flight, unsignaled sends)` holds for `peer`,
    /// failing when its connection breaks or it makes no progress for the
    /// transport's timeout.
    fn settle(
        &mut self,
        peer: Rank,
        done: impl Fn(u32, u32) -> bool,
    ) -> Result<(), TransportError> {
        self.t.wait_for(peer, |t| {
            let p = &t.peers[peer];
            if let Some(reason) = &p.broken {
                return Err(t.io(peer, "flush", std::io::Error::other(reason.clone())));
            }
            Ok(done(p.sq_used, p.unsignaled).then_some(()))
        })
    }

    /// Fails while a one-sided operation (every one is signaled) is in flight.
    fn idle(&self, what: &'static str) -> Result<(), TransportError> {
        match self.t.peers.iter().position(|p| p.sq_used > p.unsignaled) {
            None => Ok(()),
            Some(peer) => Err(self.t.io(
                peer,
                what,
                std::io::Error::other("operations in flight use the buffer; flush first"),
            )),
        }
    }

    /// Completes every operation of this rank.
    fn flush_all(&mut self) -> Result<(), TransportError> {
        let rank = self.t.rank;
        for peer in (0..self.t.size).filter(|&p| p != rank) {
            self.flush(peer)?;
        }
        Ok(())
    }
}

/// Which local buffer a work request reads or writes.
enum Local {
    Origin,
    Result,
}

impl OneSided for VerbsWindow {
    fn window_bytes(&self) -> usize {
        self.bytes
    }

    fn has_fence(&self) -> bool {
        true
    }

    fn has_accumulate(&self) -> bool {
        false
    }

    fn end_passive(&mut self) -> Result<(), TransportError> {
        self.flush_all()
    }

    fn fill_origin(&mut self, byte: u8) -> Result<(), TransportError> {
        self.idle("fill")?;
        // SAFETY: no work request reads the origin buffer (idle).
        unsafe { self.origin.write_at(0, &vec![byte; self.bytes]) };
        Ok(())
    }

    fn fill_origin_f64(&mut self, value: f64) -> Result<(), TransportError> {
        self.idle("fill")?;
        let words: Vec<u8> = (0..self.bytes / 8)
            .flat_map(|_| value.to_ne_bytes())
            .collect();
        // SAFETY: as in `fill_origin`.
        unsafe { self.origin.write_at(0, &words) };
        Ok(())
    }

    fn put(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (addr, rkey) = self.target(peer, offset, len, "put")?;
        let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        self.post(peer, op, Local::Origin, len, Remote::Rdma(addr, rkey))
    }

    fn get(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (addr, rkey) = self.target(peer, offset, len, "get")?;
        let op = ibv_wr_opcode::IBV_WR_RDMA_READ;
        self.post(peer, op, Local::Result, len, Remote::Rdma(addr, rkey))
    }

    fn accumulate_sum_f64(
        &mut self,
        peer: Rank,
        _offset: usize,
        _count: usize,
    ) -> Result<(), TransportError> {
        let reason = "verbs has no floating-point atomics";
        Err(self.t.io(peer, "accumulate", std::io::Error::other(reason)))
    }

    fn fetch_add_u64(&mut self, peer: Rank, offset: usize) -> Result<(), TransportError> {
        let (addr, rkey) = self.target(peer, offset, 8, "fetch_add")?;
        if !offset.is_multiple_of(8) {
            let reason = format!("fetch-and-add at offset {offset}: not 8-byte aligned");
            return Err(self.t.io(peer, "fetch_add", std::io::Error::other(reason)));
        }
        self.idle("fetch_add")?;
        let op = ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD;
        self.post(peer, op, Local::Result, 8, Remote::FetchAdd(addr, rkey))
    }

    fn flush(&mut self, peer: Rank) -> Result<(), TransportError> {
        self.t.check_peer(peer)?;
        self.settle(peer, |used, unsignaled| used <= unsignaled)
    }

    fn fence(&mut self) -> Result<(), TransportError> {
        self.flush_all()?;
        fence_barrier(&mut self.t, self.token)
    }

    fn poll_byte(&mut self, offset: usize) -> Result<u8, TransportError> {
        Ok(self.local_byte(offset))
    }

    fn local_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.bytes, "offset {offset} outside the window");
        self.window.poll_byte(offset)
    }

    fn result_u64(&self) -> Result<u64, TransportError> {
        self.idle("result")?;
        let mut word = [0u8; 8];
        // SAFETY: no work request writes the result buffer (idle).
        unsafe { self.result.read_at(0, &mut word) };
        Ok(u64::from_ne_bytes(word))
    }

    fn close(mut self: Box<Self>) -> Result<(), TransportError> {
        self.flush_all()
    }
}
