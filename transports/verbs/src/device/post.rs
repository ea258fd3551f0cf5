//! The posting side of the data path: a request starts ([`VerbsTransport::start`]),
//! waits in its peer's queue, and is posted as far as queue space, send credits
//! ([`crate::layout::Credits`]) and advertisements allow: eager sends into the
//! peer's receive slots, advertisements of receive regions, zero-copy sends on
//! the bulk queue pair, RDMA writes with immediate, and credit messages.

use super::memory::access;
use super::{rc_error, Request, State, VerbsTransport, NAME};
use crate::layout::{self, MsgKind, WrKind};
use crate::wire::{Advert, VerbsOp, ADVERT_BYTES};
use ngauge_transport::{Rank, Region, RequestId, TransportError};
use rdma_sys::*;

impl VerbsTransport {
    pub(super) fn start(
        &mut self,
        peer: Rank,
        region: Region,
        is_send: bool,
    ) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        let capacity = self.buf(region.buffer)?.len;
        let range = layout::region_range(region, capacity)?;
        layout::check_len(region.len, self.max_msg)?;
        if let Some(reason) = &self.peers[peer].broken {
            return Err(self.io(
                peer,
                if is_send { "send" } else { "recv" },
                std::io::Error::other(reason.clone()),
            ));
        }
        // A receive has its bytes to itself, sends share theirs: the CPU may then
        // copy an eager message into a receive's region while other requests on
        // the buffer are in flight (no work request covers those bytes).
        if !self
            .buf_mut(region.buffer)?
            .holds
            .try_hold(range, access(is_send))
        {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer: region.buffer,
            });
        }
        let id = self.next_request;
        self.next_request += 1;
        self.requests.insert(
            id,
            Request {
                peer,
                region,
                is_send,
                mismatch: None,
                state: State::Queued,
            },
        );
        if is_send {
            self.peers[peer].queued_sends.push_back(id);
        } else if self.is_eager(region.len) {
            // nothing to post: the message lands in a pre-posted slot, or has
            // already arrived and waits in a copy
            match self.peers[peer].unexpected.pop_front() {
                Some(data) => self.deliver_unexpected(id, &data),
                None => {
                    self.requests.get_mut(&id).expect("request").state = State::Posted;
                    self.peers[peer].awaiting.push_back(id);
                }
            }
        } else {
            self.peers[peer].queued_recvs.push_back(id);
        }
        self.pump(peer);
        Ok(RequestId(id))
    }

    /// Send path: whether a message of `len` bytes goes eagerly through a slot.
    fn is_eager(&self, len: usize) -> bool {
        self.op == VerbsOp::Send && len <= self.slots.recv_bytes
    }

    pub(super) fn post_slot_recv(&mut self, peer: Rank, slot: usize) -> Result<(), TransportError> {
        let slots = self.res.slots.as_ref().expect("slots");
        let mut sge = ibv_sge {
            addr: slots.addr(self.slots.offset(slot)),
            length: self.slots.slot_bytes(slot) as u32,
            lkey: slots.lkey(),
        };
        // SAFETY: plain data, all-zero is valid.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = layout::wr_id(WrKind::SlotRecv, slot as u64);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; `wr` and `sge` are valid for the call (the
        // provider copies them); the slot memory is registered and outlives the QP.
        let rc = unsafe { ibv_post_recv(self.res.qps[peer], &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post receive", rc_error(rc)));
        }
        Ok(())
    }

    /// Posts what is queued for `peer` as far as queue space, send credits (and
    /// advertisements) allow, then returns owed credits nothing carried back.
    pub(super) fn pump(&mut self, peer: Rank) {
        if self.peers[peer].broken.is_some() {
            let reason = self.peers[peer].broken.clone().unwrap_or_default();
            self.break_peer(peer, reason);
            return;
        }
        // receives first: their advertisements unblock the peer
        loop {
            let p = &self.peers[peer];
            let Some(&id) = p.queued_recvs.front() else {
                break;
            };
            // the advertisement takes a credit, the bulk receive (send path) room
            let room = p.sq_used < self.depth
                && p.credits.can_send_data()
                && (self.op == VerbsOp::Write || p.rq_used < self.depth);
            if !room {
                break;
            }
            self.peers[peer].queued_recvs.pop_front();
            if let Err(e) = self.post_recv_and_advert(id) {
                self.post_failed(peer, id, e);
                return;
            }
        }
        loop {
            let p = &self.peers[peer];
            let Some(&id) = p.queued_sends.front() else {
                break;
            };
            let eager = self.is_eager(self.requests[&id].region.len);
            // everything but the send path's bulk transfers lands in a receive slot
            let needs_credit = eager || self.op == VerbsOp::Write;
            if p.sq_used >= self.depth
                || (!eager && p.adverts.is_empty())
                || (needs_credit && !p.credits.can_send_data())
            {
                break;
            }
            self.peers[peer].queued_sends.pop_front();
            if let Err(e) = self.post_data_send(id) {
                self.post_failed(peer, id, e);
                return;
            }
        }
        while self.peers[peer].broken.is_none()
            && self.peers[peer].credits.credit_due()
            && self.peers[peer].sq_used < self.depth
        {
            if let Err(e) = self.post_credit(peer) {
                self.break_peer(peer, format!("sending credits failed: {e}"));
            }
        }
    }

    /// A post for request `id` failed: the request fails with that error, and the
    /// connection breaks. Part of the exchange may have happened (a bulk receive
    /// posted but not advertised, an advertisement used up but nothing written, a
    /// credit spent): the next message would land in the wrong place, so nothing
    /// more may go over this connection.
    fn post_failed(&mut self, peer: Rank, id: u64, err: TransportError) {
        let reason = format!("a post failed: {err}");
        self.fail(id, err);
        self.break_peer(peer, reason);
    }

    /// A credit message: a send with immediate and no payload that returns the
    /// credits owed to `peer`.
    fn post_credit(&mut self, peer: Rank) -> Result<(), TransportError> {
        let credits = self.peers[peer].credits.consume(true);
        let mut sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        // no payload: the wr_id names the peer through its first send slot
        let wr_id = layout::wr_id(WrKind::SlotSend, self.slots.send_slot(peer, 0) as u64);
        let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        let imm = Some(layout::msg_imm(MsgKind::Credit, credits, 0));
        self.post_send(peer, false, wr_id, &mut sge, op, false, imm, None)?;
        self.credit_messages += 1;
        Ok(())
    }

    /// A receive that is not eager: on the send path post it on the bulk QP, then
    /// advertise it (so the send cannot arrive before it); on the write path only
    /// advertise the region.
    fn post_recv_and_advert(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        if self.op == VerbsOp::Send {
            self.post_data_recv(id)?;
        } else {
            self.peers[peer].awaiting.push_back(id);
        }
        let b = self.buf(region.buffer)?;
        let advert = Advert {
            addr: b.reg.addr(region.offset),
            rkey: b.reg.rkey(),
            len: region.len as u32,
        };
        let p = &mut self.peers[peer];
        let slot = self.slots.send_slot(peer, p.next_send_slot);
        p.next_send_slot = (p.next_send_slot + 1) % self.slots.send_depth;
        let offset = self.slots.offset(slot);
        let slots = self.res.slots.as_ref().expect("slots");
        // SAFETY: the send slot is free: at most `depth` sends are outstanding, the
        // ring has `depth` slots and one QP's sends complete in order, so the send
        // that used this slot last has completed; nothing else uses send slots.
        unsafe { slots.write_at(offset, &advert.encode()) };
        let mut sge = ibv_sge {
            addr: slots.addr(offset),
            length: ADVERT_BYTES as u32,
            lkey: slots.lkey(),
        };
        let inline = layout::goes_inline(ADVERT_BYTES, self.max_inline);
        let wr_id = layout::wr_id(WrKind::SlotSend, slot as u64);
        let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        let credits = self.peers[peer].credits.consume(true);
        let imm = Some(layout::msg_imm(MsgKind::Advert, credits, 0));
        self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, None)?;
        self.requests.get_mut(&id).expect("request").state = State::Posted;
        Ok(())
    }

    /// Send path, large message: a receive straight into the region, on the bulk QP.
    fn post_data_recv(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let b = self.buf(region.buffer)?;
        let mut sge = ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        };
        // SAFETY: plain data, all-zero is valid.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = layout::wr_id(WrKind::DataRecv, id);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the bulk QP is live; the region lies inside a registered buffer
        // and is held by this receive exclusively until it retires (the buffer
        // cannot be freed or viewed, no other request's region overlaps it).
        let rc = unsafe { ibv_post_recv(self.res.bulk[peer], &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post receive", rc_error(rc)));
        }
        self.peers[peer].rq_used += 1;
        Ok(())
    }

    fn post_data_send(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let b = self.buf(region.buffer)?;
        let mut sge = ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        };
        let len = region.len as u32;
        let inline = layout::goes_inline(region.len, self.max_inline);
        let wr_id = layout::wr_id(WrKind::DataSend, id);
        let mut mismatch = None;
        if self.is_eager(region.len) {
            // into the peer's next pre-posted slot; the immediate marks it as data
            // and returns owed credits
            let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
            let credits = self.peers[peer].credits.consume(true);
            let imm = Some(layout::msg_imm(MsgKind::Eager, credits, len));
            self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, None)?;
        } else {
            let advert = self.peers[peer]
                .adverts
                .pop_front()
                .expect("checked by pump");
            if advert.len != len {
                mismatch = Some(advert.len);
            }
            match self.op {
                // into the receive posted on the bulk QP before this advertisement
                VerbsOp::Send if mismatch.is_none() => {
                    let op = ibv_wr_opcode::IBV_WR_SEND;
                    self.post_send(peer, true, wr_id, &mut sge, op, inline, None, None)?;
                }
                // Send nothing of a message whose length differs from the posted
                // receive (a longer one would fail the receive with a local length
                // error and break the connection), but complete that receive with
                // the length and the refusal in the immediate, so that both sides
                // report the mismatch, as on the write path.
                VerbsOp::Send => {
                    sge.length = 0;
                    let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                    let imm = Some(layout::write_imm(len, true));
                    self.post_send(peer, true, wr_id, &mut sge, op, false, imm, None)?;
                }
                VerbsOp::Write => {
                    // completes a receive slot: one credit (the immediate is the length)
                    self.peers[peer].credits.consume(false);
                    let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                    let remote = Some((advert.addr, advert.rkey));
                    if mismatch.is_none() {
                        let imm = Some(layout::write_imm(len, false));
                        self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, remote)?;
                    } else {
                        // write nothing, but tell the receiver, so both sides fail
                        sge.length = 0;
                        let imm = Some(layout::write_imm(len, true));
                        self.post_send(peer, false, wr_id, &mut sge, op, false, imm, remote)?;
                    }
                }
            }
        }
        let r = self.requests.get_mut(&id).expect("request");
        r.mismatch = mismatch;
        if inline && mismatch.is_none() {
            // The data was copied into the work request: the buffer is free now, as
            // in C verbs code. The completion is still reaped (every send is
            // signaled) to account for send-queue space.
            r.state = State::Done;
            self.inline_sends += 1;
            self.detached.insert(id, peer);
        } else {
            r.state = State::Posted;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn post_send(
        &mut self,
        peer: Rank,
        bulk: bool,
        wr_id: u64,
        sge: &mut ibv_sge,
        opcode: ibv_wr_opcode::Type,
        inline: bool,
        imm: Option<u32>,
        remote: Option<(u64, u32)>,
    ) -> Result<(), TransportError> {
        // SAFETY: plain data (unions of plain data), all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = sge;
        wr.num_sge = if sge.length == 0 { 0 } else { 1 };
        wr.opcode = opcode;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0
            | if inline {
                ibv_send_flags::IBV_SEND_INLINE.0
            } else {
                0
            };
        if let Some(imm) = imm {
            // immediate data travels in network byte order
            wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        if let Some((addr, rkey)) = remote {
            wr.wr.rdma.remote_addr = addr;
            wr.wr.rdma.rkey = rkey;
        }
        let qp = if bulk {
            self.res.bulk[peer]
        } else {
            self.res.qps[peer]
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live and in RTS; `wr` and the sge it points to are valid
        // for the call; the source memory is registered and stays allocated (the
        // request's held region, or the slot ring) until the completion is polled,
        // or was copied into the work request (inline). ibv_post_send is the
        // verbs.h inline that calls the provider through the context ops table.
        let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post send", rc_error(rc)));
        }
        self.peers[peer].sq_used += 1;
        Ok(())
    }
}
