//! The posting side of the data path: a request starts ([`VerbsTransport::start`]),
//! waits in its peer's queue, and is posted as far as queue space, send credits
//! ([`crate::layout::Credits`]) and advertisements allow: eager sends into the
//! peer's receive slots, advertisements of receive regions, zero-copy sends on
//! the bulk queue pair, RDMA writes with immediate, and credit messages.

use super::direct::Prepared;
use super::memory::access;
use super::{rc_error, Request, State, VerbsTransport, NAME};
use crate::layout::{self, MsgKind, RingLayout, Trailer, WrKind, TRAILER_BYTES};
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
        let capacity = self.res.buf(region.buffer)?.len;
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
            .res
            .buf_mut(region.buffer)?
            .holds
            .try_hold(range, access(is_send))
        {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer: region.buffer,
            });
        }
        let id = self.requests.insert(Request {
            peer,
            region,
            is_send,
            bulk: false,
            mismatch: None,
            state: State::Queued,
        });
        if is_send {
            // as the blocking send: an inline message to a quiet peer goes at once
            // (its data is copied: done, though it keeps its hold until retired)
            let p = &self.peers[peer];
            if p.queued_sends.is_empty() && p.queued_recvs.is_empty() {
                let posted = match self.region_sge(region) {
                    Ok(data) => self.post_inline(peer, data),
                    Err(_) => None,
                };
                if let Some(posted) = posted {
                    let r = self.requests.get_mut(&id).expect("request");
                    // a failed post broke the connection (as in post_failed)
                    r.state = posted.map_or_else(State::Failed, |()| State::Done);
                    return Ok(RequestId(id));
                }
            }
            self.peers[peer].queued_sends.push_back(id);
        } else if self.is_ring(region.len) || self.is_eager(region.len) {
            // nothing to post: the message lands in our ring or in a pre-posted
            // slot, or has already arrived and waits in a copy
            let ring = self.is_ring(region.len);
            match self.peers[peer].unexpected.pop_front() {
                Some(data) => self.deliver_unexpected(id, &data),
                None => {
                    self.requests.get_mut(&id).expect("request").state = State::Posted;
                    let p = &mut self.peers[peer];
                    if ring {
                        p.awaiting_ring.push_back(id);
                    } else {
                        p.awaiting.push_back(id);
                    }
                }
            }
        } else {
            self.peers[peer].queued_recvs.push_back(id);
        }
        self.pump(peer);
        Ok(RequestId(id))
    }

    /// Send path: whether a message of `len` bytes goes eagerly through a slot.
    pub(super) fn is_eager(&self, len: usize) -> bool {
        self.op == VerbsOp::Send && len <= self.slots.recv_bytes
    }

    /// Write-poll path: whether a message of `len` bytes goes through the ring.
    pub(super) fn is_ring(&self, len: usize) -> bool {
        self.op == VerbsOp::WritePoll && len <= layout::EAGER_BYTES
    }

    /// The `wr_id` of a send whose completion only frees send-queue space: it
    /// names the peer (through its first send slot), since it may come back
    /// unsignaled-and-failed, with nothing else to say whose it was.
    pub(super) fn peer_wr_id(&self, peer: Rank) -> u64 {
        layout::wr_id(WrKind::SlotSend, self.slots.send_slot(peer, 0) as u64)
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
    /// Checks inline whether there is anything to do (most calls in a
    /// ping-pong find nothing); the work is out of line.
    #[inline]
    pub(super) fn pump(&mut self, peer: Rank) {
        let p = &self.peers[peer];
        let ring_credit_due = self
            .rings
            .is_some_and(|rings| p.ring_head - p.ring_reported >= (rings.depth as u64 / 2).max(1));
        if p.broken.is_none()
            && p.queued_recvs.is_empty()
            && p.queued_sends.is_empty()
            && !p.credits.credit_due()
            && !ring_credit_due
        {
            // nothing to post
            return;
        }
        self.pump_now(peer);
    }

    #[inline(never)]
    fn pump_now(&mut self, peer: Rank) {
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
                && (self.op != VerbsOp::Send || p.rq_used < self.depth);
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
            let len = self.requests[&id].region.len;
            if self.is_ring(len) {
                if p.sq_used >= self.depth || !self.ring_room(peer) {
                    break;
                }
                self.peers[peer].queued_sends.pop_front();
                if let Err(e) = self.post_ring_write(id) {
                    self.post_failed(peer, id, e);
                    return;
                }
                continue;
            }
            let eager = self.is_eager(len);
            // everything but the send path's bulk transfers lands in a receive slot
            let needs_credit = eager || self.op != VerbsOp::Send;
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
        if let Some(rings) = self.rings {
            let p = &self.peers[peer];
            if p.broken.is_none()
                && p.ring_head - p.ring_reported >= (rings.depth as u64 / 2).max(1)
                && p.sq_used < self.depth
            {
                if let Err(e) = self.post_ring_credit(peer) {
                    self.break_peer(peer, format!("sending ring credits failed: {e}"));
                }
            }
        }
    }

    /// Write-poll path: whether the peer's ring has a free slot for our next
    /// message; when it seems full, reads the credit word the peer writes first.
    pub(super) fn ring_room(&mut self, peer: Rank) -> bool {
        let rings = self.rings.expect("write-poll path");
        let depth = rings.depth as u64;
        let p = &self.peers[peer];
        if p.ring_sent - p.ring_acked < depth {
            return true;
        }
        let ring = self.res.ring.as_ref().expect("ring");
        let word = ring.poll_u64(rings.credit_word(peer));
        let p = &mut self.peers[peer];
        p.ring_acked = p.ring_acked.max(word.min(p.ring_sent));
        p.ring_sent - p.ring_acked < depth
    }

    /// Write-poll path: RDMA-writes message `id` into the peer's ring
    /// ([`Self::post_ring`]).
    fn post_ring_write(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let data = self.region_sge(region)?;
        let inline = self.post_ring(peer, data, layout::wr_id(WrKind::DataSend, id))?;
        self.retire_posted(id, inline);
        Ok(())
    }

    /// Write-poll path: RDMA-writes the message in `region` (at most
    /// [`layout::EAGER_BYTES`]) and its trailer into the next slot of the peer's
    /// ring, right-aligned so that the trailer's flag is the slot's last byte; no
    /// immediate, so the peer sees no completion and finds it by polling. The
    /// trailer returns, as a cumulative count, the messages we consumed from it.
    /// The caller has checked [`Self::ring_room`]. Returns whether the write went
    /// inline (then its buffer is free at once); one that did not names its
    /// request by `data_wr_id`.
    pub(super) fn post_ring(
        &mut self,
        peer: Rank,
        data: ibv_sge,
        data_wr_id: u64,
    ) -> Result<bool, TransportError> {
        let rings = self.rings.expect("write-poll path");
        let len = data.length as usize;
        let seq = self.peers[peer].ring_sent;
        let (trailer, remote_addr) = self.next_ring_write(peer, len);
        let inline = layout::goes_inline(len + TRAILER_BYTES, self.max_inline);
        if inline {
            // the trailer travels from the prepared request (copied at post time)
            let trailer = trailer.word();
            self.post_prepared(
                peer,
                data,
                Prepared::Ring {
                    remote_addr,
                    trailer,
                },
            )?;
        } else {
            let staging = rings.staging(peer, seq);
            let ring = self.res.ring.as_ref().expect("ring");
            // SAFETY: the staging entry of message `seq` was last used by message
            // `seq - depth`, which the peer has consumed (ring_room: fewer than
            // `depth` unconsumed), so the device read it long ago; nothing else uses
            // staging entries.
            unsafe { ring.write_at(staging, &trailer.encode()) };
            let tail = ibv_sge {
                addr: ring.addr(staging),
                length: TRAILER_BYTES as u32,
                lkey: ring.lkey(),
            };
            let mut sges = [data, tail];
            let sges = if len == 0 {
                &mut sges[1..]
            } else {
                &mut sges[..]
            };
            let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            let remote = Some((remote_addr, self.peers[peer].remote_ring.1));
            self.post_send(peer, false, data_wr_id, sges, op, false, None, remote)?;
        }
        self.ring_posted(peer);
        Ok(inline)
    }

    /// Write-poll path: the trailer of our next ring message of `len` bytes to
    /// `peer` (returning, as a cumulative count, the messages we consumed from
    /// it) and the address in the peer's ring where the message starts, so that
    /// the trailer ends the slot.
    pub(super) fn next_ring_write(&self, peer: Rank, len: usize) -> (Trailer, u64) {
        let rings = self.rings.expect("write-poll path");
        let p = &self.peers[peer];
        let seq = p.ring_sent;
        let trailer = Trailer {
            len: len as u32,
            consumed: p.ring_head as u16,
            flag: rings.flag(seq),
        };
        let remote_slot = rings.slot(self.rank, seq);
        (
            trailer,
            p.remote_ring.0 + RingLayout::data_at(remote_slot, len) as u64,
        )
    }

    /// Write-poll path: our next ring message to `peer` was posted (its trailer
    /// told the peer what we consumed).
    pub(super) fn ring_posted(&mut self, peer: Rank) {
        let p = &mut self.peers[peer];
        p.ring_sent += 1;
        p.ring_reported = p.ring_head;
        self.ring_messages += 1;
    }

    /// Send path: an inline eager message into the peer's next receive slot; the
    /// immediate marks it as data and returns owed credits. Its `wr_id` names the
    /// peer (its buffer is free when the post returns).
    pub(super) fn post_eager_inline(
        &mut self,
        peer: Rank,
        data: ibv_sge,
    ) -> Result<(), TransportError> {
        let credits = self.peers[peer].credits.consume(true);
        let imm = layout::msg_imm(MsgKind::Eager, credits, data.length);
        self.post_prepared(peer, data, Prepared::Eager { imm })
    }

    /// Write-poll path: writes how many of the peer's messages we consumed into
    /// its credit word (when none of our messages carried it back for half a
    /// ring).
    fn post_ring_credit(&mut self, peer: Rank) -> Result<(), TransportError> {
        let rings = self.rings.expect("write-poll path");
        let p = &self.peers[peer];
        let (head, remote) = (p.ring_head, p.remote_ring);
        let source = rings.credit_source(peer);
        let ring = self.res.ring.as_ref().expect("ring");
        // SAFETY: only this rank writes its credit source. An earlier credit write
        // from it that is not inline may still be read by the device: it then
        // reads this newer count or the older one (an aligned 8-byte store), both
        // valid, since the count only grows.
        unsafe { ring.write_at(source, &head.to_le_bytes()) };
        let mut sge = [ibv_sge {
            addr: ring.addr(source),
            length: 8,
            lkey: ring.lkey(),
        }];
        let inline = layout::goes_inline(8, self.max_inline);
        let target = (remote.0 + rings.credit_word(self.rank) as u64, remote.1);
        let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        let wr_id = self.peer_wr_id(peer);
        self.post_send(peer, false, wr_id, &mut sge, op, inline, None, Some(target))?;
        self.peers[peer].ring_reported = head;
        self.credit_messages += 1;
        Ok(())
    }

    /// A signaled empty RDMA write behind the unsignaled sends to `peer`: its
    /// completion retires them (see `VerbsTransport`'s drop). An empty write
    /// carries no address or key the peer checks (IBA C9-88).
    pub(super) fn post_flush(&mut self, peer: Rank) -> Result<(), TransportError> {
        let wr_id = self.peer_wr_id(peer);
        let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
        self.signal_next = true;
        let posted = self.post_send(peer, false, wr_id, &mut [], op, false, None, Some((0, 0)));
        self.signal_next = false;
        posted
    }

    /// After posting data request `id`: an inline send's data was copied into the
    /// work request, so its buffer is free now, as in C verbs code (its
    /// completion, if it is signaled, only frees send-queue space); any other
    /// waits for its completion.
    fn retire_posted(&mut self, id: u64, inline: bool) {
        let r = self.requests.get_mut(&id).expect("request");
        if inline && r.mismatch.is_none() {
            r.state = State::Done;
            self.inline_sends += 1;
        } else {
            r.state = State::Posted;
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
        // no payload: the wr_id names the peer through its first send slot
        let wr_id = self.peer_wr_id(peer);
        let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        let imm = Some(layout::msg_imm(MsgKind::Credit, credits, 0));
        self.post_send(peer, false, wr_id, &mut [], op, false, imm, None)?;
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
        let b = self.res.buf(region.buffer)?;
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
        let sges = std::slice::from_mut(&mut sge);
        self.post_send(peer, false, wr_id, sges, op, inline, imm, None)?;
        self.requests.get_mut(&id).expect("request").state = State::Posted;
        Ok(())
    }

    /// Send path, large message: a receive straight into the region, on the bulk QP.
    fn post_data_recv(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let b = self.res.buf(region.buffer)?;
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
        let b = self.res.buf(region.buffer)?;
        let mut sge = ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        };
        let len = region.len as u32;
        let mut inline = layout::goes_inline(region.len, self.max_inline);
        // an inline send needs no completion: its wr_id only names the peer
        let data_wr_id = layout::wr_id(WrKind::DataSend, id);
        let peer_wr_id = self.peer_wr_id(peer);
        let wr_id = |inline: bool| {
            if inline {
                peer_wr_id
            } else {
                data_wr_id
            }
        };
        let mut mismatch = None;
        let mut bulk = false;
        if self.is_eager(region.len) && inline {
            self.post_eager_inline(peer, sge)?;
        } else if self.is_eager(region.len) {
            // into the peer's next pre-posted slot; the immediate marks it as data
            // and returns owed credits
            let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
            let wr_id = wr_id(inline);
            let credits = self.peers[peer].credits.consume(true);
            let imm = Some(layout::msg_imm(MsgKind::Eager, credits, len));
            let sges = std::slice::from_mut(&mut sge);
            self.post_send(peer, false, wr_id, sges, op, inline, imm, None)?;
        } else {
            let advert = self.peers[peer]
                .adverts
                .pop_front()
                .expect("checked by pump");
            if advert.len != len {
                mismatch = Some(advert.len);
            }
            match self.op {
                // into the receive posted on the bulk QP before this advertisement;
                // never inline, so that every bulk send is signaled and its
                // completion names its request
                VerbsOp::Send => {
                    inline = false;
                    bulk = true;
                    let (op, sges, imm) = if mismatch.is_none() {
                        let sges = std::slice::from_mut(&mut sge);
                        (ibv_wr_opcode::IBV_WR_SEND, sges, None)
                    } else {
                        // Send nothing of a message whose length differs from the
                        // posted receive (a longer one would fail the receive with
                        // a local length error and break the connection), but
                        // complete that receive with the length and the refusal in
                        // the immediate, so that both sides report the mismatch,
                        // as on the write path.
                        let imm = Some(layout::write_imm(len, true));
                        (ibv_wr_opcode::IBV_WR_SEND_WITH_IMM, &mut [][..], imm)
                    };
                    self.post_send(peer, true, data_wr_id, sges, op, false, imm, None)?;
                }
                VerbsOp::Write | VerbsOp::WritePoll => {
                    // completes a receive slot: one credit (the immediate is the length)
                    self.peers[peer].credits.consume(false);
                    let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                    let remote = Some((advert.addr, advert.rkey));
                    if mismatch.is_none() {
                        let wr_id = wr_id(inline);
                        let imm = Some(layout::write_imm(len, false));
                        let sges = std::slice::from_mut(&mut sge);
                        self.post_send(peer, false, wr_id, sges, op, inline, imm, remote)?;
                    } else {
                        // write nothing, but tell the receiver, so both sides fail
                        inline = false;
                        let imm = Some(layout::write_imm(len, true));
                        self.post_send(peer, false, data_wr_id, &mut [], op, false, imm, remote)?;
                    }
                }
            }
        }
        let r = self.requests.get_mut(&id).expect("request");
        r.mismatch = mismatch;
        r.bulk = bulk;
        self.retire_posted(id, inline);
        Ok(())
    }

    /// The gather entry of `region`.
    fn region_sge(&self, region: Region) -> Result<ibv_sge, TransportError> {
        let b = self.res.buf(region.buffer)?;
        Ok(ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        })
    }

    /// Posts one send work request on the message QP (or the bulk QP) of `peer`.
    /// Selective signalling ([`layout::signal_every`]): a send whose `wr_id` names
    /// no request (an inline send, an advertisement, credits) is signaled only
    /// every `signal_every` sends on the message QP; the completion of a signaled
    /// one retires the unsignaled sends before it. Bulk sends are all signaled.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_send(
        &mut self,
        peer: Rank,
        bulk: bool,
        wr_id: u64,
        sges: &mut [ibv_sge],
        opcode: ibv_wr_opcode::Type,
        inline: bool,
        imm: Option<u32>,
        remote: Option<(u64, u32)>,
    ) -> Result<(), TransportError> {
        let may_skip = !bulk && layout::split_wr_id(wr_id).0 == WrKind::SlotSend;
        let signal =
            !may_skip || self.signal_next || self.peers[peer].unsignaled + 1 >= self.signal_every;
        // SAFETY: plain data (unions of plain data), all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        if !sges.is_empty() {
            wr.sg_list = sges.as_mut_ptr();
            wr.num_sge = sges.len() as i32;
        }
        wr.opcode = opcode;
        wr.send_flags = if signal {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        } | if inline {
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
        // SAFETY: the QP is live and in RTS; `wr` and the sges it points to are
        // valid for the call; the source memory is registered and stays allocated
        // (the request's held region, the slot ring or the ring area) until the
        // completion is polled, or was copied into the work request (inline).
        // ibv_post_send is the verbs.h inline that calls the provider through the
        // context ops table.
        let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post send", rc_error(rc)));
        }
        self.account_send(peer, bulk, signal);
        Ok(())
    }

    /// A send was posted to `peer` (on the bulk QP with `bulk`): it takes
    /// send-queue room, and on the message QP joins the selective signalling
    /// (the next signaled completion retires it).
    pub(super) fn account_send(&mut self, peer: Rank, bulk: bool, signal: bool) {
        let p = &mut self.peers[peer];
        p.sq_used += 1;
        if !bulk {
            p.posted += 1;
            if signal {
                p.covers.push_back(p.unsignaled + 1);
                p.unsignaled = 0;
            } else {
                p.unsignaled += 1;
            }
        }
        if signal {
            self.signaled_sends += 1;
        }
    }

    /// Re-posts the receive slots of `peer` handled since the last batch, as one
    /// chain of work requests (one `ibv_post_recv`), and counts them as owed
    /// credits.
    pub(super) fn flush_reposts(&mut self, peer: Rank) -> Result<(), TransportError> {
        const CHAIN: usize = 16;
        let slots = std::mem::take(&mut self.peers[peer].repost);
        let area = self.res.slots.as_ref().expect("slots");
        for chunk in slots.chunks(CHAIN) {
            let mut sges = [ibv_sge {
                addr: 0,
                length: 0,
                lkey: 0,
            }; CHAIN];
            // SAFETY: plain data, all-zero is valid.
            let mut wrs: [ibv_recv_wr; CHAIN] = unsafe { std::mem::zeroed() };
            for (i, &slot) in chunk.iter().enumerate() {
                sges[i] = ibv_sge {
                    addr: area.addr(self.slots.offset(slot)),
                    length: self.slots.slot_bytes(slot) as u32,
                    lkey: area.lkey(),
                };
                wrs[i].wr_id = layout::wr_id(WrKind::SlotRecv, slot as u64);
                wrs[i].num_sge = 1;
            }
            for i in 0..chunk.len() {
                wrs[i].sg_list = &mut sges[i];
                if i + 1 < chunk.len() {
                    wrs[i].next = &mut wrs[i + 1];
                }
            }
            let mut bad = std::ptr::null_mut();
            // SAFETY: the QP is live; the chain of `chunk.len()` work requests and
            // their sges are valid for the call (the provider copies them); every
            // slot's receive has completed and its message was handled, and the
            // slot memory is registered and outlives the QP.
            let rc = unsafe { ibv_post_recv(self.res.qps[peer], wrs.as_mut_ptr(), &mut bad) };
            if rc != 0 {
                return Err(self.io(peer, "post receive", rc_error(rc)));
            }
            for _ in chunk {
                self.peers[peer].credits.reposted();
            }
        }
        self.peers[peer].repost = slots;
        self.peers[peer].repost.clear();
        Ok(())
    }
}
