//! Completions: polls the completion queue and says what each completion means
//! for its request, its peer's queue space and credits, and its receive slot.
//! Eager messages are copied from their slots into the waiting receive (or kept
//! until one is posted), advertisements are queued for the sends that wait for
//! them, and a failed completion breaks its peer's connection.

use super::direct::Landed;
use super::{size_mismatch, State, VerbsTransport};
use crate::layout::{self, MsgKind, RingLayout, Trailer, WrKind, SLOT_BYTES};
use crate::wire::{Advert, VerbsOp};
use ngauge_transport::{Rank, TransportError};
use rdma_sys::*;
use std::ffi::CStr;
use std::os::raw::c_int;

impl VerbsTransport {
    /// Polls the CQ once, handles what it found; returns the number of completions.
    /// A failed poll (the CQ is unusable: completions may be lost) breaks every
    /// connection; the error is reported as an I/O error with `peer`, the rank the
    /// caller waits for.
    pub(super) fn poll(&mut self, peer: Rank) -> Result<usize, TransportError> {
        const BATCH: usize = 16;
        let mut wcs = [const { std::mem::MaybeUninit::<ibv_wc>::uninit() }; BATCH];
        // SAFETY: the CQ is live and `wcs` has room for BATCH entries (MaybeUninit
        // has the layout of ibv_wc). ibv_poll_cq is the verbs.h inline that calls
        // the provider through the ops table.
        let n = unsafe { ibv_poll_cq(self.res.cq, BATCH as c_int, wcs.as_mut_ptr().cast()) };
        if n < 0 {
            return Err(self.poll_failed(peer, n));
        }
        let n = n as usize;
        let ring_found = if self.rings.is_some() {
            self.poll_rings()
        } else {
            0
        };
        if n == 0 {
            return Ok(ring_found);
        }
        // SAFETY: ibv_poll_cq wrote the first `n` entries (n <= BATCH).
        let wcs = unsafe { std::slice::from_raw_parts(wcs.as_ptr().cast::<ibv_wc>(), n) };
        self.handle(wcs);
        Ok(n + ring_found)
    }

    /// The completion queue failed: every connection breaks.
    #[cold]
    pub(super) fn poll_failed(&mut self, peer: Rank, n: c_int) -> TransportError {
        let reason = format!("polling the completion queue failed (ibv_poll_cq returned {n})");
        let me = self.rank;
        for p in (0..self.size).filter(|&p| p != me) {
            self.break_peer(p, reason.clone());
        }
        self.io(peer, "poll completion queue", std::io::Error::other(reason))
    }

    /// Handles a batch of completions (out of line, so that a poll that finds
    /// nothing, most of a wait's polls, keeps a small frame).
    #[inline(never)]
    pub(super) fn handle(&mut self, wcs: &[ibv_wc]) {
        const BATCH: usize = 16;
        let mut touched = [0 as Rank; BATCH];
        let mut touched_n = 0;
        // Every completion of the batch is handled, whatever happens to one of them:
        // a failure breaks that peer's connection, never the loop (the batch has
        // been dequeued; dropping part of it would leave queue space and requests
        // unaccounted for).
        for wc in wcs {
            if let Some(peer) = self.complete(wc) {
                // timed by the wait when it next reads the clock
                self.progressed[peer] = true;
                if !touched[..touched_n].contains(&peer) {
                    touched[touched_n] = peer;
                    touched_n += 1;
                }
            }
        }
        for &peer in &touched[..touched_n] {
            self.settle(peer);
        }
    }

    /// After completions concerning `peer` were handled: re-posts its receive
    /// slots when they are due, and posts what may go now.
    #[inline]
    pub(super) fn settle(&mut self, peer: Rank) {
        let p = &self.peers[peer];
        // a partial batch is flushed when it alone keeps the peer short of
        // credits (it would wait for it), see layout::repost_batch
        if !p.repost.is_empty()
            && p.broken.is_none()
            && (p.repost.len() >= self.repost_batch
                || p.credits.owed + (p.repost.len() as u32) >= p.credits.threshold)
        {
            if let Err(e) = self.flush_reposts(peer) {
                self.break_peer(peer, format!("re-posting receive slots failed: {e}"));
            }
        }
        self.pump(peer);
    }

    /// Write-poll path: takes every message that has landed in our rings (the
    /// slot's last byte shows its next use), oldest first per peer: to the oldest
    /// waiting receive, or copied out until one is posted, so that the slot is
    /// free again at once. Returns how many were found.
    fn poll_rings(&mut self) -> usize {
        let rings = self.rings.expect("write-poll path");
        let mut found = 0;
        for peer in 0..self.size {
            if !self.ring_landed(peer) {
                if !self.peers[peer].queued_sends.is_empty() {
                    // sends held back for ring room: the peer's credit word may
                    // have moved
                    self.pump(peer);
                }
                continue;
            }
            let before = found;
            loop {
                let seq = self.peers[peer].ring_head;
                let slot = rings.slot(peer, seq);
                let ring = self.res.ring.as_ref().expect("ring");
                let at = RingLayout::trailer_at(slot);
                // the rest of the message was placed before its last byte (RC
                // writes land in order: the assumption ib_write_lat makes too)
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                // one aligned load (slots and trailers are 8-byte aligned)
                let t = Trailer::from_word(ring.poll_u64(at));
                let len = t.len as usize;
                if len > layout::EAGER_BYTES {
                    self.break_peer(peer, format!("rank {peer} wrote a malformed ring message"));
                    break;
                }
                let p = &mut self.peers[peer];
                p.ring_acked = layout::widen_consumed(p.ring_acked, p.ring_sent, t.consumed);
                p.ring_head += 1;
                p.ring_next = (rings.flag_at(peer, seq + 1), rings.flag(seq + 1));
                let from = RingLayout::data_at(slot, len);
                match p.awaiting_ring.pop_front() {
                    Some(id) => self.deliver_ring(id, peer, from, len),
                    // SAFETY: as for deliver_ring: landed, and not written again
                    // before we return the peer's credit.
                    None if self.direct_waits(peer) => unsafe {
                        self.deliver_direct(Landed::Ring, from, len)
                    },
                    None => {
                        let mut data = vec![0u8; len];
                        // SAFETY: the message has landed (its flag is set) and
                        // the peer writes this slot again only after we return
                        // its credit, which counts this message as consumed.
                        unsafe { ring.read_at(from, &mut data) };
                        self.peers[peer].unexpected.push_back(data);
                    }
                }
                found += 1;
                if !self.ring_landed(peer) {
                    break;
                }
            }
            if found > before {
                self.progressed[peer] = true;
                self.pump(peer);
            }
        }
        found
    }

    /// Write-poll path: whether the next message of `peer` has landed in our
    /// ring (its slot's last byte shows the use we wait for). One byte read, as
    /// `ib_write_lat` polls: what a wait for a ring message spins on.
    pub(super) fn ring_landed(&self, peer: Rank) -> bool {
        let p = &self.peers[peer];
        let Some(ring) = &self.res.ring else {
            return false;
        };
        let (at, flag) = p.ring_next;
        peer != self.rank && p.broken.is_none() && ring.poll_byte(at) == flag
    }

    /// Completes ring receive `id` with the `len`-byte message at `from` of the
    /// ring area.
    fn deliver_ring(&mut self, id: u64, peer: Rank, from: usize, len: usize) {
        let region = self.requests[&id].region;
        let state = if len != region.len {
            State::Failed(size_mismatch(peer, region.len, len))
        } else {
            let ring = self.res.ring.as_ref().expect("ring");
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("busy buffer");
            // SAFETY: the message has landed (its flag is set) and the peer
            // writes this slot again only after we return its credit. This
            // receive holds its region exclusively (start() refused every
            // request whose region overlaps it) and posted nothing into it.
            unsafe { ring.copy_to(from, &b.reg, region.offset, len) };
            State::Done
        };
        self.requests.get_mut(&id).expect("request").state = state;
    }

    fn wc_error(&self, wc: &ibv_wc) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        let text = unsafe { CStr::from_ptr(ibv_wc_status_str(wc.status)) }.to_string_lossy();
        format!(
            "work completion failed: {text} (status {}, vendor error {:#x})",
            wc.status, wc.vendor_err
        )
    }

    /// Handles one completion; returns the peer whose queues changed.
    fn complete(&mut self, wc: &ibv_wc) -> Option<Rank> {
        let ok = wc.status == ibv_wc_status::IBV_WC_SUCCESS;
        let (kind, index) = layout::split_wr_id(wc.wr_id);
        match kind {
            WrKind::DataSend | WrKind::DataRecv => self.complete_data(wc, ok, kind, index),
            WrKind::SlotSend => self.complete_slot_send(wc, ok, index),
            WrKind::SlotRecv => self.complete_slot_recv(wc, ok, index),
        }
    }

    /// A data send or RDMA write, or a receive straight into a region (send path),
    /// of request `index` completed.
    fn complete_data(&mut self, wc: &ibv_wc, ok: bool, kind: WrKind, index: u64) -> Option<Rank> {
        let r = self.requests.get(&index)?;
        let (peer, len, mismatch, bulk) = (r.peer, r.region.len, r.mismatch, r.bulk);
        if kind == WrKind::DataSend {
            if bulk {
                self.peers[peer].sq_used -= 1;
            } else {
                self.retire_sends(peer, ok);
            }
        } else {
            self.peers[peer].rq_used -= 1;
        }
        let state = if !ok {
            let reason = self.wc_error(wc);
            let err = if wc.status == ibv_wc_status::IBV_WC_LOC_LEN_ERR {
                self.io(
                    peer,
                    "recv",
                    std::io::Error::other(format!(
                        "a message longer than the {len} bytes posted arrived"
                    )),
                )
            } else {
                self.io(
                    peer,
                    if kind == WrKind::DataSend {
                        "send"
                    } else {
                        "recv"
                    },
                    std::io::Error::other(reason.clone()),
                )
            };
            self.break_peer(peer, reason);
            State::Failed(err)
        } else if let Some(expected) = mismatch {
            State::Failed(size_mismatch(peer, expected as usize, len))
        } else if kind == WrKind::DataRecv && wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0 {
            // the sender refused: the immediate carries its length
            // SAFETY: reading the imm member of a completion that has one.
            let imm = u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data });
            State::Failed(size_mismatch(
                peer,
                len,
                layout::split_write_imm(imm).0 as usize,
            ))
        } else if kind == WrKind::DataRecv && wc.byte_len as usize != len {
            State::Failed(size_mismatch(peer, len, wc.byte_len as usize))
        } else {
            State::Done
        };
        if let Some(r) = self.requests.get_mut(&index) {
            if !matches!(r.state, State::Failed(_)) {
                r.state = state;
            }
        }
        Some(peer)
    }

    /// A send completed on the message QP of `peer`: a signaled one retires itself
    /// and the unsignaled sends before it; a failed one (signaled or not) only
    /// itself, and the connection breaks anyway.
    fn retire_sends(&mut self, peer: Rank, ok: bool) {
        let p = &mut self.peers[peer];
        let n = if ok {
            p.covers.pop_front().unwrap_or(1)
        } else {
            1
        };
        p.sq_used = p.sq_used.saturating_sub(n);
        p.retired += u64::from(n);
    }

    /// A send that names no request completed (an inline send, an advertisement,
    /// credits, a ring write, the flush at drop), whose wr_id names its peer
    /// through send slot `index`.
    fn complete_slot_send(&mut self, wc: &ibv_wc, ok: bool, index: u64) -> Option<Rank> {
        let (peer, _) = self.slots.owner(index as usize)?;
        self.retire_sends(peer, ok);
        if !ok {
            let reason = self.wc_error(wc);
            self.break_peer(peer, reason);
        }
        Some(peer)
    }

    /// A message landed in receive slot `index`: an eager message, an
    /// advertisement, a credit message, or (write path) an RDMA write with
    /// immediate into an advertised region. The slot is re-posted once handled.
    fn complete_slot_recv(&mut self, wc: &ibv_wc, ok: bool, index: u64) -> Option<Rank> {
        let Some((peer, true)) = self.slots.owner(index as usize) else {
            return None;
        };
        if !ok {
            let reason = self.wc_error(wc);
            self.break_peer(peer, reason);
            return Some(peer);
        }
        let slot = index as usize;
        let with_imm = wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
        let imm = with_imm.then(|| {
            // SAFETY: reading the imm member of a completion that has one
            // (its flags say so).
            u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data })
        });
        if wc.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM {
            let Some(imm) = imm else {
                self.break_peer(peer, format!("rank {peer} wrote without immediate data"));
                return Some(peer);
            };
            let (got, refused) = layout::split_write_imm(imm);
            match self.peers[peer].awaiting.pop_front() {
                Some(id) => {
                    let len = self.requests[&id].region.len;
                    let state = if refused || got as usize != len {
                        State::Failed(size_mismatch(peer, len, got as usize))
                    } else {
                        State::Done
                    };
                    self.requests.get_mut(&id).expect("request").state = state;
                }
                None => self.break_peer(
                    peer,
                    format!("rank {peer} wrote {got} bytes that no receive had advertised"),
                ),
            }
        } else {
            let Some((kind, credits, _)) = imm.and_then(layout::split_msg_imm) else {
                self.break_peer(peer, format!("rank {peer} sent a malformed message"));
                return Some(peer);
            };
            self.peers[peer].credits.granted(credits);
            match kind {
                MsgKind::Eager if self.op == VerbsOp::Send => {
                    // to the oldest waiting receive, or copied out until one
                    // is posted; the slot is re-posted either way
                    let len = (wc.byte_len as usize).min(self.slots.recv_bytes);
                    if self.direct_waits(peer) {
                        // SAFETY: this slot's receive has completed and the slot
                        // is re-posted only below, after the copy.
                        let offset = self.slots.offset(slot);
                        unsafe { self.deliver_direct(Landed::Slot, offset, len) };
                    } else if self.peers[peer].awaiting.is_empty() {
                        self.keep_unexpected(peer, slot, len);
                    } else {
                        self.deliver_eager(peer, slot, len);
                        return Some(peer);
                    }
                }
                MsgKind::Eager => {
                    self.break_peer(
                        peer,
                        format!("rank {peer} sent an eager message on the write path"),
                    );
                    return Some(peer);
                }
                MsgKind::Advert => {
                    let offset = self.slots.offset(slot);
                    let len = (wc.byte_len as usize).min(SLOT_BYTES);
                    let mut bytes = [0u8; SLOT_BYTES];
                    // SAFETY: this slot's receive has completed and is re-posted
                    // only below; the device does not write it meanwhile.
                    unsafe {
                        self.res
                            .slots
                            .as_ref()
                            .expect("slots")
                            .read_at(offset, &mut bytes[..len])
                    };
                    match Advert::decode(&bytes[..len]) {
                        Some(advert) => self.peers[peer].adverts.push_back(advert),
                        None => self.break_peer(
                            peer,
                            format!("rank {peer} sent a malformed receive advertisement"),
                        ),
                    }
                }
                MsgKind::Credit => {}
            }
        }
        self.repost_slot(peer, slot);
        Some(peer)
    }

    /// Copies an eager message out of its slot into the oldest waiting receive,
    /// completes that receive, and re-posts the slot.
    fn deliver_eager(&mut self, peer: Rank, slot: usize, len: usize) {
        let id = self.peers[peer]
            .awaiting
            .pop_front()
            .expect("a waiting receive");
        let region = self.requests[&id].region;
        let state = if len != region.len {
            State::Failed(size_mismatch(peer, region.len, len))
        } else {
            let offset = self.slots.offset(slot);
            let slots = self.res.slots.as_ref().expect("slots");
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("busy buffer");
            // SAFETY: the slot's receive has completed and is re-posted only below,
            // after the copy. This receive holds its region exclusively (start()
            // refused every request whose region overlaps it, and accepts none
            // until it retires) and, being eager, posted nothing into it: no work
            // request the device could read or write through covers those bytes.
            // Other slots and other regions of the buffer may be in flight: no
            // reference is made over them.
            unsafe { slots.copy_to(offset, &b.reg, region.offset, len) };
            State::Done
        };
        self.requests.get_mut(&id).expect("request").state = state;
        self.repost_slot(peer, slot);
    }

    /// Completes eager receive `id` with a message that arrived before it and was
    /// copied out of its slot.
    pub(super) fn deliver_unexpected(&mut self, id: u64, data: &[u8]) {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let state = if data.len() != region.len {
            State::Failed(size_mismatch(peer, region.len, data.len()))
        } else {
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("busy buffer");
            // SAFETY: this receive holds its region exclusively (start() refused
            // every request whose region overlaps it) and, being eager, posted
            // nothing into it: no work request the device could read or write
            // through covers those bytes. Other regions of the buffer may be in
            // flight: no reference is made over them.
            unsafe { b.reg.write_at(region.offset, data) };
            State::Done
        };
        self.requests.get_mut(&id).expect("request").state = state;
    }

    /// Send path: an eager message of `len` bytes in `slot` arrived before any
    /// receive for it: copies it out, so that the slot is re-posted at once and
    /// the peer gets its credit back. Keeping the message in its slot until the
    /// receive came would hold that credit, and a peer that sent enough of them
    /// would be left unable to advertise a receive this rank's send waits for.
    fn keep_unexpected(&mut self, peer: Rank, slot: usize, len: usize) {
        let mut data = vec![0u8; len];
        let offset = self.slots.offset(slot);
        // SAFETY: this slot's receive has completed and is re-posted only after
        // this copy (by the caller); the device does not write it meanwhile.
        unsafe {
            self.res
                .slots
                .as_ref()
                .expect("slots")
                .read_at(offset, &mut data)
        };
        self.peers[peer].unexpected.push_back(data);
    }

    /// Queues a receive slot whose message has been handled for re-posting; a
    /// full batch is re-posted at once (the rest by `poll`, see
    /// [`crate::layout::repost_batch`]). A failure breaks the connection (the
    /// slots would be missing from then on).
    pub(super) fn repost_slot(&mut self, peer: Rank, slot: usize) {
        if self.peers[peer].broken.is_some() {
            return;
        }
        self.peers[peer].repost.push(slot);
        if self.peers[peer].repost.len() >= self.repost_batch {
            if let Err(e) = self.flush_reposts(peer) {
                self.break_peer(peer, format!("re-posting receive slots failed: {e}"));
            }
        }
    }
}
