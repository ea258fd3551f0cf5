//! The flat path of the blocking [`Transport::send`] and [`Transport::recv`] of
//! a small message, when nothing else of that peer's is in flight (the rule is
//! [`crate::flat`]): what `ib_write_lat` and `ib_send_lat` do per iteration and
//! little more, in one function each way, the way the UDP transport's
//! `fast.rs` does it for a datagram.
//!
//! - **send**: one inline work request through the peer's prepared request. On
//!   the write-poll path the message (up to [`STAGE_BYTES`]) is copied right
//!   before its trailer in the request's staging area, so the write gathers one
//!   entry, as `ib_write_lat`'s does.
//! - **recv, write-poll**: spins on the flag byte of the peer's next ring slot;
//!   when it is set, reads the trailer, copies the message into the region and
//!   moves the ring on. After each [`SPIN_POLLS`] checks that found nothing, a
//!   full poll (completion queue, every ring) runs with this receive as the
//!   direct one, and the clock is read as the general wait reads it (yield,
//!   timeout); the general wait polls fully every 16th check (`RING_CQ_EVERY`),
//!   which in a ping-pong under callgrind was more than once per message. After
//!   a message, the completion queue is polled only when a signaled send is
//!   likely done (more than `signal_every` sends posted), so that a ping-pong
//!   reaps its sends once per `signal_every` messages.
//! - **recv, send path**: polls the completion queue; a lone completion that is
//!   this peer's eager message of the posted length is delivered inline (credits,
//!   copy, re-post, [`VerbsTransport::settle`]); any other completion goes
//!   through the generic handler with this receive as the direct one.
//!
//! The direct path (`direct.rs`) had already dropped the request; what this one
//! drops is the rest of the general machinery per message: the wait loop's
//! closure and clock, the full poll of every ring and the completion queue at
//! each message found, the completion dispatch through `wr_id` kinds, the
//! second gather entry, `memcpy` for one byte.
//!
//! Hand-over: the flat path changes nothing before it posts or takes a message.
//! When a gate of [`crate::flat`] fails, or a landed message is not the simple
//! case (another length, a malformed trailer or immediate), or a poll while it
//! waited left the peer with something in flight (a broken connection), it
//! returns `None` and the direct path starts as if it had been called first.
//! Waiting itself is not handed over: yields and the timeout are those of the
//! general wait (`progress_for`), checked as often (once per [`SPIN_POLLS`]
//! empty checks).
//!
//! [`Transport::send`]: ngauge_transport::Transport::send
//! [`Transport::recv`]: ngauge_transport::Transport::recv

use super::progress::{WaitClock, SPIN_POLLS};
use super::{DirectRecv, VerbsTransport};
use crate::flat::{self, Pending, RecvGate, SendGate, STAGE_BYTES};
use crate::layout::{self, MsgKind, RingLayout, Trailer, WrKind, EAGER_BYTES, TRAILER_BYTES};
use crate::wire::VerbsOp;
use ngauge_transport::{Rank, Region, TransportError, WaitMode};
use rdma_sys::*;
use std::mem::MaybeUninit;
use std::os::raw::c_int;

/// Completions one poll of the flat receive takes (a lone one is the common
/// case; more go to the generic handler together).
const FLAT_BATCH: usize = 4;

impl VerbsTransport {
    /// What `peer` has in flight that the flat path must not pass.
    #[inline]
    fn pending(&self, peer: Rank) -> Pending {
        let p = &self.peers[peer];
        Pending {
            broken: p.broken.is_some(),
            queued: !p.queued_sends.is_empty() || !p.queued_recvs.is_empty(),
            waiting_recvs: !p.awaiting.is_empty() || !p.awaiting_ring.is_empty(),
            held: !p.unexpected.is_empty(),
        }
    }

    /// The flat blocking send; `None` when it does not apply (nothing was done).
    #[inline]
    pub(super) fn send_flat(
        &mut self,
        peer: Rank,
        region: Region,
    ) -> Option<Result<(), TransportError>> {
        if peer >= self.size || peer == self.rank {
            return None;
        }
        let ring = match self.op {
            VerbsOp::WritePoll => true,
            VerbsOp::Send => false,
            VerbsOp::Write => return None,
        };
        let idle = self.idle_region(region);
        let len = region.len;
        let p = &self.peers[peer];
        let gate = SendGate {
            // what a send must not pass (receives waiting or held do not matter)
            pending: Pending {
                broken: p.broken.is_some(),
                queued: !p.queued_sends.is_empty() || !p.queued_recvs.is_empty(),
                ..Pending::default()
            },
            region_idle: idle.is_some(),
            len,
            max_len: if ring {
                STAGE_BYTES
            } else {
                self.slots.recv_bytes
            },
            inline_bytes: if ring { len + TRAILER_BYTES } else { len },
            max_inline: self.max_inline,
            queue_room: p.sq_used < self.depth,
            peer_room: if ring {
                self.rings
                    .is_some_and(|r| p.ring_sent - p.ring_acked < r.depth as u64)
            } else {
                p.credits.can_send_data()
            },
            signal_next: self.signal_next,
        };
        if !flat::send_applies(&gate) {
            return None;
        }
        let (addr, lkey) = idle?;
        let posted = if ring {
            self.post_ring_flat(peer, region)
        } else {
            let data = ibv_sge {
                addr,
                length: len as u32,
                lkey,
            };
            self.post_eager_inline(peer, data)
        };
        Some(self.inline_posted(peer, posted))
    }

    /// Write-poll path: the message in `region` (checked by the gate: idle, at
    /// most [`STAGE_BYTES`], inline with its trailer; ring room) and its trailer,
    /// staged together and written inline with one gather entry into the peer's
    /// next ring slot. Accounted for as [`VerbsTransport::post_ring`] does it.
    fn post_ring_flat(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let len = region.len;
        let (trailer, remote_addr) = self.next_ring_write(peer, len);
        let trailer = trailer.word();
        let signal = self.peers[peer].unsignaled + 1 >= self.signal_every;
        let Some(b) = self
            .res
            .buffers
            .get(region.buffer.0 as usize)
            .and_then(Option::as_ref)
        else {
            return Err(self.io(peer, "post send", std::io::Error::other("no such buffer")));
        };
        let Some(ps) = self.prepared.get_mut(peer) else {
            return Err(self.io(peer, "post send", std::io::Error::other("not connected")));
        };
        let start = STAGE_BYTES - len;
        // SAFETY: the region lies in the buffer and no request holds any part of
        // it (the gate's `region_idle`), so no work request writes those bytes;
        // the stage is ours.
        unsafe {
            b.reg
                .read_at(region.offset, &mut ps.stage.0[start..STAGE_BYTES])
        };
        ps.stage.0[STAGE_BYTES..].copy_from_slice(&trailer.to_le_bytes());
        // inline: the lkey is not checked
        ps.sges[0] = ibv_sge {
            addr: ps.stage.0[start..].as_ptr() as u64,
            length: (len + TRAILER_BYTES) as u32,
            lkey: 0,
        };
        ps.wr.sg_list = ps.sges.as_mut_ptr();
        ps.wr.num_sge = 1;
        ps.wr.send_flags = ibv_send_flags::IBV_SEND_INLINE.0
            | if signal {
                ibv_send_flags::IBV_SEND_SIGNALED.0
            } else {
                0
            };
        ps.wr.wr.rdma.remote_addr = remote_addr;
        // SAFETY: its one gather entry (the stage, in `ps`) goes inline, so the
        // provider copies the staged bytes before the post returns.
        unsafe { self.post_prepared_wr(peer, signal) }?;
        self.ring_posted(peer);
        Ok(())
    }

    /// The flat blocking receive; `None` when it does not apply or hands over
    /// (nothing was taken).
    #[inline]
    pub(super) fn recv_flat(
        &mut self,
        peer: Rank,
        region: Region,
    ) -> Option<Result<(), TransportError>> {
        if peer >= self.size || peer == self.rank {
            return None;
        }
        let (ring, max_len) = match self.op {
            VerbsOp::WritePoll => (true, EAGER_BYTES),
            VerbsOp::Send => (false, self.slots.recv_bytes),
            VerbsOp::Write => return None,
        };
        let gate = RecvGate {
            pending: self.pending(peer),
            region_idle: self.idle_region(region).is_some(),
            len: region.len,
            max_len,
            polling: self.wait == WaitMode::Poll,
        };
        if !flat::recv_applies(&gate) {
            return None;
        }
        if ring {
            self.recv_ring_flat(peer, region)
        } else {
            self.recv_slot_flat(peer, region)
        }
    }

    /// Write-poll path: spins on the flag of the peer's next ring slot; after
    /// each [`SPIN_POLLS`] checks that found nothing, what the general wait does
    /// then ([`Self::flat_idle`]).
    fn recv_ring_flat(&mut self, peer: Rank, region: Region) -> Option<Result<(), TransportError>> {
        let mut clock = None;
        loop {
            for _ in 0..SPIN_POLLS {
                let (at, flag) = self.peers[peer].ring_next;
                if self.res.ring.as_ref()?.poll_byte(at) == flag {
                    return self.take_ring_flat(peer, region);
                }
                std::hint::spin_loop();
            }
            if let Some(done) = self.flat_idle(peer, region, &mut clock, true) {
                return Some(done);
            }
            if self.pending(peer) != Pending::default() {
                return None;
            }
        }
    }

    /// A whole spin of the flat receive found nothing: as the general wait
    /// (`wait_for`), a full poll (completion queue and every ring; with `full`)
    /// with this receive as the direct one, then the clock: a yield after
    /// `SPIN_BEFORE_YIELD` without progress, the timeout when the peer made
    /// none for the whole of it. `Some` ends the receive.
    #[inline(never)]
    fn flat_idle(
        &mut self,
        peer: Rank,
        region: Region,
        clock: &mut Option<WaitClock>,
        full: bool,
    ) -> Option<Result<(), TransportError>> {
        if full {
            if let Some(done) = self.poll_as_direct(peer, region, None) {
                return Some(done);
            }
        }
        match self.progress_for(&[peer], clock) {
            Ok(stale) if stale.is_empty() => None,
            Ok(_) => Some(Err(self.timeout_error(peer))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Write-poll path: the message whose flag is set, into `region`, when it is
    /// of the posted length; `None` (nothing taken) when not.
    #[inline]
    fn take_ring_flat(&mut self, peer: Rank, region: Region) -> Option<Result<(), TransportError>> {
        let rings = self.rings?;
        let seq = self.peers[peer].ring_head;
        let slot = rings.slot(peer, seq);
        let ring = self.res.ring.as_ref()?;
        // the rest of the message was placed before its last byte (RC writes
        // land in order: the assumption ib_write_lat makes too)
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let t = Trailer::from_word(ring.poll_u64(RingLayout::trailer_at(slot)));
        let len = t.len as usize;
        if !flat::takes_landed(region.len, len) {
            // another length (or a malformed trailer): the general path takes
            // and reports it
            return None;
        }
        let b = self.res.buffers[region.buffer.0 as usize].as_ref()?;
        // SAFETY: the message has landed (its flag is set) and the peer writes
        // this slot again only after we return its credit; the region lies in
        // the buffer and no request holds any part of it (the gate), so no work
        // request covers it.
        unsafe { ring.copy_to(RingLayout::data_at(slot, len), &b.reg, region.offset, len) };
        let half = (rings.depth as u64 / 2).max(1);
        let p = &mut self.peers[peer];
        p.ring_acked = layout::widen_consumed(p.ring_acked, p.ring_sent, t.consumed);
        p.ring_head = seq + 1;
        p.ring_next = (rings.flag_at(peer, seq + 1), rings.flag(seq + 1));
        let due = p.ring_head - p.ring_reported >= half || p.credits.credit_due();
        let reap = p.sq_used > self.signal_every;
        self.progressed[peer] = true;
        if due {
            self.pump(peer);
        }
        if reap {
            self.reap(peer);
        }
        Some(Ok(()))
    }

    /// Polls the completion queue (and the rings) once, after a flat receive
    /// took its message: a signaled send's completion retires the sends before
    /// it. A failed poll broke every connection; the next call reports it.
    #[inline(never)]
    fn reap(&mut self, peer: Rank) {
        let _ = self.poll(peer);
    }

    /// A full poll, or the generic handling of `wcs` already polled, with this
    /// receive as the direct one: its outcome if the next message from `peer`
    /// arrived (or the connection broke), `None` if not.
    #[inline(never)]
    fn poll_as_direct(
        &mut self,
        peer: Rank,
        region: Region,
        wcs: Option<&[ibv_wc]>,
    ) -> Option<Result<(), TransportError>> {
        self.direct = Some(DirectRecv {
            peer,
            region,
            outcome: None,
        });
        let polled = match wcs {
            Some(wcs) => {
                self.handle(wcs);
                Ok(0)
            }
            None => self.poll(peer),
        };
        // whatever happened, nothing may be delivered into the region any more
        let outcome = self.direct.take().and_then(|d| d.outcome);
        match (outcome, polled) {
            (Some(done), _) => Some(done),
            (None, Err(e)) => Some(Err(e)),
            (None, Ok(_)) => None,
        }
    }

    /// Send path: polls the completion queue for the peer's eager message;
    /// after each [`SPIN_POLLS`] polls that found nothing, what the general
    /// wait does then ([`Self::flat_idle`]).
    fn recv_slot_flat(&mut self, peer: Rank, region: Region) -> Option<Result<(), TransportError>> {
        let mut clock = None;
        let mut empty = 0;
        loop {
            let mut wcs = [const { MaybeUninit::<ibv_wc>::uninit() }; FLAT_BATCH];
            // SAFETY: the CQ is live and `wcs` has room for FLAT_BATCH entries
            // (MaybeUninit has the layout of ibv_wc).
            let n =
                unsafe { ibv_poll_cq(self.res.cq, FLAT_BATCH as c_int, wcs.as_mut_ptr().cast()) };
            if n == 0 {
                empty += 1;
                if empty == SPIN_POLLS {
                    empty = 0;
                    // the queue was just polled; no rings on this path
                    if let Some(done) = self.flat_idle(peer, region, &mut clock, false) {
                        return Some(done);
                    }
                    if self.pending(peer) != Pending::default() {
                        return None;
                    }
                }
                std::hint::spin_loop();
                continue;
            }
            if n < 0 {
                return Some(Err(self.poll_failed(peer, n)));
            }
            empty = 0;
            // SAFETY: ibv_poll_cq wrote the first `n` entries (n <= FLAT_BATCH).
            let wcs =
                unsafe { std::slice::from_raw_parts(wcs.as_ptr().cast::<ibv_wc>(), n as usize) };
            if let [wc] = wcs {
                if let Some(done) = self.take_slot_flat(peer, region, wc) {
                    return Some(done);
                }
            }
            if let Some(done) = self.poll_as_direct(peer, region, Some(wcs)) {
                return Some(done);
            }
            if self.pending(peer) != Pending::default() {
                return None;
            }
        }
    }

    /// Send path: delivers `wc` into `region` when it is the peer's eager
    /// message of the posted length, as `complete_slot_recv` would; `None`
    /// (nothing done) for any other completion.
    #[inline]
    fn take_slot_flat(
        &mut self,
        peer: Rank,
        region: Region,
        wc: &ibv_wc,
    ) -> Option<Result<(), TransportError>> {
        if wc.status != ibv_wc_status::IBV_WC_SUCCESS
            || wc.opcode != ibv_wc_opcode::IBV_WC_RECV
            || wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 == 0
        {
            return None;
        }
        let (kind, index) = layout::split_wr_id(wc.wr_id);
        if kind != WrKind::SlotRecv {
            return None;
        }
        let slot = index as usize;
        let i = self.slots.recv_index(peer, slot)?;
        // SAFETY: reading the imm member of a completion that has one (its flags
        // say so).
        let imm = u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data });
        let (MsgKind::Eager, credits, _) = layout::split_msg_imm(imm)? else {
            return None;
        };
        let len = wc.byte_len as usize;
        if !flat::takes_landed(region.len, len) || len > self.slots.recv_bytes {
            return None;
        }
        let slots = self.res.slots.as_ref()?;
        let b = self.res.buffers[region.buffer.0 as usize].as_ref()?;
        // SAFETY: this slot's receive has completed and is re-posted only below,
        // after the copy; the region lies in the buffer and no request holds any
        // part of it (the gate), so no work request covers it.
        unsafe { slots.copy_to(self.slots.recv_offset(peer, i), &b.reg, region.offset, len) };
        self.peers[peer].credits.granted(credits);
        self.progressed[peer] = true;
        self.repost_slot(peer, slot);
        self.settle(peer);
        Some(Ok(()))
    }
}
