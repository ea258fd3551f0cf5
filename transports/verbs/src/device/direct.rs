//! The direct path of the blocking [`Transport::send`] and [`Transport::recv`]:
//! a small message with nothing queued before it goes without a request, the way
//! perftest's loop does it (`ib_send_lat`: post an inline send; poll the
//! completion queue until the receive completes).
//!
//! Measured with callgrind in the soft-RoCE VM (docs/findings/
//! 2026-11-24-verbs-perftest.md, third session), the generic path (`isend` + `wait`,
//! `irecv` + `wait`) spent about 2100 user-space instructions per round trip more
//! than `ib_send_lat`'s 1160: for each message a request in the request table, a
//! hold on the buffer, a queue entry, a pass through the queues ([`pump`]) and the
//! retirement. Here:
//!
//! - **send**: an eager message that goes inline (send path) or a ring message
//!   that goes inline with its trailer (write-poll path), when the peer has no
//!   queued request, the queues have room and the flow control allows it, is
//!   posted at once; an inline send's buffer is free when the post returns, so the
//!   send is complete. One that does not go inline (up to 4 KiB) is copied into
//!   the peer's next staging slot ([`crate::layout::StageSlots`]) and posted from
//!   there, unsignaled under the selective signalling: complete too, since the
//!   caller's buffer is not read again (an MPI library's eager bounce buffer).
//! - **recv**: an eager or ring receive with no other receive from that peer
//!   waiting takes a message already copied out of its slot, or waits, polling as
//!   [`VerbsTransport::wait_one`] does, for the completion handler to copy the next
//!   message from that peer into its region ([`VerbsTransport::deliver_direct`]).
//!
//! Inline sends (these, and the generic path's inline eager sends and ring writes)
//! go through a work request prepared per peer when the connection is set up
//! ([`PreparedSend`]), as perftest prepares its own: only what varies per message
//! is written before `ibv_post_send`.
//!
//! Whatever does not fit (a buffer some pending request holds, a larger message,
//! a queue without room, a broken connection, a bad argument) takes the generic
//! path, which reports errors as before. Both paths keep the same order of
//! messages between a pair of ranks and the same credits; the counters differ
//! only in how a send went (`inline_sends`, `staged_sends`, `signaled_sends`).
//!
//! [`Transport::send`]: ngauge_transport::Transport::send
//! [`Transport::recv`]: ngauge_transport::Transport::recv
//! [`pump`]: VerbsTransport::pump

use super::{rc_error, size_mismatch, DirectRecv, VerbsTransport};
use crate::flat::STAGE_BYTES;
use crate::layout::{self, MsgKind, EAGER_BYTES, TRAILER_BYTES};
use crate::wire::VerbsOp;
use ngauge_transport::{Rank, Region, TransportError};
use rdma_sys::*;

/// Where a message for the direct receive landed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Landed {
    /// In a receive slot (send path).
    Slot,
    /// In the ring area (write-poll path).
    Ring,
}

impl VerbsTransport {
    /// The address and lkey of `region` when it is a valid region of a buffer no
    /// pending request holds.
    pub(super) fn idle_region(&self, region: Region) -> Option<(u64, u32)> {
        let b = self.res.buffers.get(region.buffer.0 as usize)?.as_ref()?;
        let fits = region
            .offset
            .checked_add(region.len)
            .is_some_and(|end| end <= b.len);
        (b.holds.is_empty() && fits).then(|| (b.reg.addr(region.offset), b.reg.lkey()))
    }

    /// Whether `peer` is another rank whose connection works and that has no
    /// request of ours queued.
    fn quiet_peer(&self, peer: Rank) -> bool {
        if peer >= self.size || peer == self.rank {
            return false;
        }
        let p = &self.peers[peer];
        p.broken.is_none() && p.queued_sends.is_empty() && p.queued_recvs.is_empty()
    }

    /// The direct blocking send; `None` when it does not apply (nothing was done).
    pub(super) fn send_direct(
        &mut self,
        peer: Rank,
        region: Region,
    ) -> Option<Result<(), TransportError>> {
        if !self.quiet_peer(peer) {
            return None;
        }
        let (addr, lkey) = self.idle_region(region)?;
        let data = ibv_sge {
            addr,
            length: region.len as u32,
            lkey,
        };
        if let Some(done) = self.post_inline(peer, data) {
            return Some(done);
        }
        self.send_staged(peer, region)
    }

    /// The direct blocking send of an eager (send path) or ring (write-poll
    /// path) message that does not go inline: copied into the peer's next
    /// staging slot ([`StageSlots`]) and posted from there, unsignaled under the
    /// selective signalling (the last staged send of each half of the slots is
    /// signaled), so the caller's buffer is free at once, as with an eager bounce
    /// buffer of an MPI library. On the write-poll path the trailer follows the
    /// message in the slot: one gather entry, right-aligned in the peer's ring
    /// slot as [`VerbsTransport::post_ring`] writes it. `None` (nothing was done)
    /// when it does not apply: a message that goes inline, another size, no
    /// queue room, credit or ring room, or a slot whose last reader is not
    /// retired even after one poll of the completion queue (the generic path
    /// then takes the message, as before). The caller has checked that `peer` is
    /// quiet and that `region` is idle.
    ///
    /// [`StageSlots`]: crate::layout::StageSlots
    fn send_staged(&mut self, peer: Rank, region: Region) -> Option<Result<(), TransportError>> {
        let len = region.len;
        let ring = self.is_ring(len);
        let wire = if ring { len + TRAILER_BYTES } else { len };
        if !(ring || self.is_eager(len))
            || len == 0
            || layout::goes_inline(wire, self.max_inline)
            || self.res.stage.is_none()
        {
            return None;
        }
        let p = &self.peers[peer];
        if !p.stage.next_free(p.retired) {
            // the signaled send that covers the slot's last reader may be done
            if self.poll(peer).is_err() || !self.quiet_peer(peer) {
                return None;
            }
            let p = &self.peers[peer];
            if !p.stage.next_free(p.retired) {
                return None;
            }
        }
        if self.peers[peer].sq_used >= self.depth {
            return None;
        }
        let room = if ring {
            self.ring_room(peer)
        } else {
            self.peers[peer].credits.can_send_data()
        };
        if !room {
            return None;
        }
        let posted = self.post_staged(peer, region, ring);
        if posted.is_ok() {
            self.staged_sends += 1;
        }
        Some(self.after_post(peer, posted))
    }

    /// Copies the message in `region` into the peer's next staging slot (with
    /// its trailer on the write-poll path) and posts it from there through the
    /// prepared work request, not inline. The caller checked that the slot is
    /// free, the region idle, and queue room and credit or ring room.
    fn post_staged(
        &mut self,
        peer: Rank,
        region: Region,
        ring: bool,
    ) -> Result<(), TransportError> {
        let len = region.len;
        let p = &self.peers[peer];
        let slot = p.stage.next();
        let signal =
            self.signal_next || p.unsignaled + 1 >= self.signal_every || p.stage.must_signal();
        let base = layout::stage_offset(peer, slot);
        let (start, wire) = if ring {
            (base + EAGER_BYTES - len, len + TRAILER_BYTES)
        } else {
            (base, len)
        };
        let ring_target = ring.then(|| self.next_ring_write(peer, len));
        let imm = (!ring).then(|| {
            let credits = self.peers[peer].credits.consume(true);
            layout::msg_imm(MsgKind::Eager, credits, len as u32)
        });
        let (Some(stage), Some(b)) = (
            self.res.stage.as_ref(),
            self.res
                .buffers
                .get(region.buffer.0 as usize)
                .and_then(Option::as_ref),
        ) else {
            return Err(self.io(peer, "post send", std::io::Error::other("no staging slot")));
        };
        // SAFETY: the region lies in the buffer and no request holds any part
        // of it (idle_region), so no work request writes those bytes; the send
        // that last read the staging slot is retired (its completion, or a later
        // signaled one's on the same QP, was polled: StageSlots::next_free), so
        // the device no longer reads it, and only this rank writes it.
        unsafe { b.reg.copy_to(region.offset, stage, start, len) };
        if let Some((trailer, _)) = ring_target {
            // SAFETY: as above: the staging slot is ours again.
            unsafe { stage.write_at(base + EAGER_BYTES, &trailer.encode()) };
        }
        let Some(ps) = self.prepared.get_mut(peer) else {
            return Err(self.io(peer, "post send", std::io::Error::other("not connected")));
        };
        ps.sges[0] = ibv_sge {
            addr: stage.addr(start),
            length: wire as u32,
            lkey: stage.lkey(),
        };
        ps.wr.sg_list = ps.sges.as_mut_ptr();
        ps.wr.num_sge = 1;
        // not inline: the device reads the staging slot until the send completes
        ps.wr.send_flags = if signal {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        };
        if let Some((_, remote_addr)) = ring_target {
            ps.wr.wr.rdma.remote_addr = remote_addr;
        }
        if let Some(imm) = imm {
            // immediate data travels in network byte order
            ps.wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        // SAFETY: its one gather entry is the staging slot, registered memory
        // that outlives the QP (Resources drops the QPs first) and that is not
        // written again before this send is retired (StageSlots).
        unsafe { self.post_prepared_wr(peer, signal) }?;
        let p = &mut self.peers[peer];
        let post = p.posted;
        p.stage.used(post);
        if ring {
            self.ring_posted(peer);
        }
        Ok(())
    }

    /// Posts the message in `data` to `peer` at once, when it goes inline (an
    /// eager message on the send path, a ring message with its trailer on the
    /// write-poll path) and queue room and credit or ring room allow; `None` when
    /// not (nothing was done). The caller has checked that `peer` is quiet and
    /// that `data` is a valid region of a buffer that no pending request writes.
    /// A failed post breaks the connection.
    #[inline]
    pub(super) fn post_inline(
        &mut self,
        peer: Rank,
        data: ibv_sge,
    ) -> Option<Result<(), TransportError>> {
        let len = data.length as usize;
        if self.peers[peer].sq_used >= self.depth {
            return None;
        }
        let posted = if self.is_eager(len) && layout::goes_inline(len, self.max_inline) {
            if !self.peers[peer].credits.can_send_data() {
                return None;
            }
            self.post_eager_inline(peer, data)
        } else if self.is_ring(len) && layout::goes_inline(len + TRAILER_BYTES, self.max_inline) {
            if !self.ring_room(peer) {
                return None;
            }
            // inline (checked above): no completion names a request
            self.post_ring(peer, data, self.peer_wr_id(peer)).map(drop)
        } else {
            return None;
        };
        Some(self.inline_posted(peer, posted))
    }

    /// The end of an inline post outside the request machinery (this path and the
    /// flat one): count it and send owed credits the message could not carry, or
    /// break the connection as a failed post of the generic path does
    /// (`post_failed`). Inlined: both callers are on a timed send path, and the
    /// failure arm stays out of line in `break_peer`.
    #[inline]
    pub(super) fn inline_posted(
        &mut self,
        peer: Rank,
        posted: Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        if posted.is_ok() {
            self.inline_sends += 1;
        }
        self.after_post(peer, posted)
    }

    /// The end of a post at once outside the request machinery (inline or
    /// staged): send owed credits the message could not carry, or break the
    /// connection as a failed post of the generic path does.
    #[inline]
    fn after_post(
        &mut self,
        peer: Rank,
        posted: Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        match posted {
            Ok(()) => {
                if self.peers[peer].credits.credit_due() {
                    // owed credits the message could not carry all of
                    self.pump(peer);
                }
                Ok(())
            }
            Err(e) => {
                self.break_peer(peer, format!("a post failed: {e}"));
                Err(e)
            }
        }
    }

    /// Posts an inline message through `peer`'s prepared work request
    /// ([`PreparedSend`]), filling in only what varies: the message, the
    /// signalling, and the immediate (send path) or the remote address and the
    /// trailer (write-poll path). Signalled and accounted for as
    /// [`VerbsTransport::post_send`] does it for a send whose `wr_id` names its peer.
    pub(super) fn post_prepared(
        &mut self,
        peer: Rank,
        data: ibv_sge,
        what: Prepared,
    ) -> Result<(), TransportError> {
        let signal = self.signal_next || self.peers[peer].unsignaled + 1 >= self.signal_every;
        let Some(p) = self.prepared.get_mut(peer) else {
            return Err(self.io(peer, "post send", std::io::Error::other("not connected")));
        };
        p.sges[0] = data;
        p.wr.send_flags = ibv_send_flags::IBV_SEND_INLINE.0
            | if signal {
                ibv_send_flags::IBV_SEND_SIGNALED.0
            } else {
                0
            };
        let first = match what {
            Prepared::Eager { imm } => {
                // immediate data travels in network byte order
                p.wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                0
            }
            Prepared::Ring {
                remote_addr,
                trailer,
            } => {
                p.trailer = trailer;
                p.sges[1].addr = std::ptr::addr_of!(p.trailer) as u64;
                p.wr.wr.rdma.remote_addr = remote_addr;
                // an empty message is its trailer alone
                usize::from(data.length == 0)
            }
        };
        p.wr.sg_list = p.sges[first..].as_mut_ptr();
        p.wr.num_sge = (p.sge_count - first) as i32;
        // SAFETY: the send is inline, so the provider copies the message (from a
        // registered buffer no request holds) and the trailer (in `p`) before
        // the post returns.
        unsafe { self.post_prepared_wr(peer, signal) }
    }

    /// Posts `peer`'s prepared work request as its caller filled it in, on the
    /// message QP, and accounts for it ([`VerbsTransport::account_send`]).
    ///
    /// # Safety
    /// Every gather entry of the request must stay readable until the device
    /// has read it: inline (the provider copies it before the post returns), or
    /// registered memory not written again before this send is retired.
    #[inline]
    pub(super) unsafe fn post_prepared_wr(
        &mut self,
        peer: Rank,
        signal: bool,
    ) -> Result<(), TransportError> {
        let Some(p) = self.prepared.get_mut(peer) else {
            return Err(self.io(peer, "post send", std::io::Error::other("not connected")));
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live and in RTS (prepared entries exist only for
        // connected peers); `wr` and the sges it points to are valid for the
        // call, and the caller guarantees what the device reads after it.
        // ibv_post_send is the verbs.h inline that calls the provider through
        // the context ops table.
        let rc = unsafe { ibv_post_send(self.res.qps[peer], &mut p.wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post send", rc_error(rc)));
        }
        self.account_send(peer, false, signal);
        Ok(())
    }

    /// The direct blocking receive; `None` when it does not apply (nothing was done).
    pub(super) fn recv_direct(
        &mut self,
        peer: Rank,
        region: Region,
    ) -> Option<Result<(), TransportError>> {
        if !(self.is_eager(region.len) || self.is_ring(region.len))
            || !self.quiet_peer(peer)
            || self.idle_region(region).is_none()
        {
            return None;
        }
        let p = &self.peers[peer];
        if !p.awaiting.is_empty() || !p.awaiting_ring.is_empty() {
            return None;
        }
        if let Some(data) = self.peers[peer].unexpected.pop_front() {
            return Some(self.copy_unexpected(peer, region, &data));
        }
        self.direct = Some(DirectRecv {
            peer,
            region,
            outcome: None,
        });
        let result = self.wait_direct(peer);
        // whatever happened, nothing may be delivered into the region any more
        self.direct = None;
        Some(result)
    }

    /// Polls (and yields, and times out) as [`VerbsTransport::wait_one`] does,
    /// until the direct receive has its outcome.
    fn wait_direct(&mut self, peer: Rank) -> Result<(), TransportError> {
        self.wait_for(peer, |t| {
            t.direct.as_mut().and_then(|d| d.outcome.take()).transpose()
        })
    }

    /// A message that arrived before its receive, into `region`.
    fn copy_unexpected(
        &mut self,
        peer: Rank,
        region: Region,
        data: &[u8],
    ) -> Result<(), TransportError> {
        if data.len() != region.len {
            return Err(size_mismatch(peer, region.len, data.len()));
        }
        let b = self.res.buf(region.buffer)?;
        // SAFETY: no request holds any part of the buffer (idle_region), and
        // none can start during this call: no work request covers these bytes.
        unsafe { b.reg.write_at(region.offset, data) };
        Ok(())
    }

    /// Whether the direct receive waits for the next message from `peer`.
    pub(super) fn direct_waits(&self, peer: Rank) -> bool {
        self.direct
            .as_ref()
            .is_some_and(|d| d.peer == peer && d.outcome.is_none())
    }

    /// Completes the direct receive (the caller checked [`Self::direct_waits`])
    /// with the `len`-byte message at `from` of the slot or ring area.
    ///
    /// # Safety
    /// The message has landed and the device does not write `[from, from+len)`
    /// while this runs (a slot whose receive completed and is not re-posted yet;
    /// a ring slot whose flag is set and whose credit the peer has not got back).
    pub(super) unsafe fn deliver_direct(&mut self, landed: Landed, from: usize, len: usize) {
        let Some(d) = &self.direct else {
            return;
        };
        let (peer, region) = (d.peer, d.region);
        let outcome = if len != region.len {
            Err(size_mismatch(peer, region.len, len))
        } else {
            let area = match landed {
                Landed::Slot => self.res.slots.as_ref().expect("slots"),
                Landed::Ring => self.res.ring.as_ref().expect("ring"),
            };
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("checked by recv_direct");
            // SAFETY: the caller guarantees the source; the region lies in the
            // buffer (idle_region), no request holds any part of it and none can
            // start while the direct receive waits (it holds `&mut self`), so no
            // work request covers the destination.
            unsafe { area.copy_to(from, &b.reg, region.offset, len) };
            Ok(())
        };
        if let Some(d) = &mut self.direct {
            d.outcome = Some(outcome);
        }
    }
}

/// What varies between two messages of a [`PreparedSend`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Prepared {
    /// Send path: the immediate of the eager message.
    Eager { imm: u32 },
    /// Write-poll path: where the message starts in the peer's ring, and its
    /// trailer ([`crate::layout::Trailer::word`]).
    Ring { remote_addr: u64, trailer: u64 },
}

/// The work request of the direct path's sends to one peer, built once when the
/// connection is set up, as perftest builds its `ibv_send_wr` once and changes
/// only what varies per message: the generic [`VerbsTransport::post_send`] zeroes
/// and fills the whole request (about 100 instructions) on every message.
pub(super) struct PreparedSend {
    pub(super) wr: ibv_send_wr,
    /// The message, then (write-poll path) its trailer.
    pub(super) sges: [ibv_sge; 2],
    /// Gather entries of a message: 1 (send path) or 2 (write-poll path).
    sge_count: usize,
    /// Write-poll path: the trailer of the message being posted. The write is
    /// inline: the provider copies it at post time, so it needs no staging entry.
    trailer: u64,
    /// Write-poll path, flat send (`flat.rs`): a message of up to
    /// [`STAGE_BYTES`] copied right before its trailer, so that the inline write
    /// gathers one entry (the provider's copy loop runs once, as for
    /// `ib_write_lat`'s one buffer).
    pub(super) stage: Stage,
}

/// The staging area of a [`PreparedSend`]: message bytes right-aligned at
/// [`STAGE_BYTES`], then the 8-byte trailer (aligned).
#[repr(C, align(8))]
pub(super) struct Stage(pub(super) [u8; STAGE_BYTES + TRAILER_BYTES]);

impl PreparedSend {
    /// The request for messages to `peer`: `wr_id` names the peer (the direct
    /// path posts only inline and staged sends, whose completions only free
    /// queue space and staging slots).
    pub(super) fn new(op: VerbsOp, wr_id: u64, remote_ring_rkey: u32) -> PreparedSend {
        // SAFETY: plain data (unions of plain data), all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        let empty = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        let mut sges = [empty; 2];
        let sge_count = if op == VerbsOp::WritePoll {
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.wr.rdma.rkey = remote_ring_rkey;
            // inline: the lkey is not checked, the address is set per message
            sges[1].length = TRAILER_BYTES as u32;
            2
        } else {
            wr.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
            1
        };
        PreparedSend {
            wr,
            sges,
            sge_count,
            trailer: 0,
            stage: Stage([0; STAGE_BYTES + TRAILER_BYTES]),
        }
    }
}
