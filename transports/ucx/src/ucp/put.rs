//! The one-sided path (`--ucx-op put`): every message goes as `ucp_put_nbx`
//! into the receiver's landing ring, which the receiver polls (the layout,
//! the flags and the flow control are in [`crate::ring`]).
//!
//! Each piece is two puts: the payload, then (after `ucp_worker_fence`, so that
//! the payload is in place before the flag) its 8-byte trailer, whose source
//! word lives in `stage` until UCX has read it. Puts that UCX does not finish
//! at once keep their request memory in the flow's `puts` until they complete;
//! a send is done when its last piece is put and every put of it completed.

use super::memory::Mapped;
use super::slots::{Slots, Table};
use super::tagged::params;
use super::{context, failed, sys, Request, State, UcxTransport, NAME};
use crate::ring::{widen_consumed, RingLayout, Trailer};
use ngauge_transport::{Access, Rank, Region, RequestId, TransportError};
use std::collections::VecDeque;
use std::os::raw::c_void;

/// A peer's ring: where it lies and the key to put there.
struct Remote {
    addr: u64,
    rkey: sys::ucp_rkey_h,
}

/// A send being put.
struct Out {
    id: RequestId,
    ptr: *const u8,
    len: usize,
    /// Bytes put so far.
    issued: usize,
    /// The piece number of its last piece, once put.
    last: Option<u64>,
}

/// A receive waiting for pieces.
struct In {
    id: RequestId,
    ptr: *mut u8,
    len: usize,
    /// Bytes that arrived so far (beyond `len` when the message is longer).
    got: usize,
}

/// Both directions between this rank and one peer.
struct Flow {
    /// Pieces put into the peer's ring, and how many of them it consumed.
    sent: u64,
    acked: u64,
    sends: VecDeque<Out>,
    /// Puts UCX holds, oldest first: the piece number and the request memory.
    puts: VecDeque<(u64, *mut c_void)>,
    /// The next piece of the peer's to consume from our ring, and the count of
    /// consumed pieces the peer was last told.
    head: u64,
    reported: u64,
    recvs: VecDeque<In>,
    /// The rest of a message whose receive was taken back is dropped.
    skipping: bool,
    /// The put of the credit word, while UCX holds it.
    credit_put: *mut c_void,
}

impl Flow {
    fn new(depth: usize) -> Flow {
        Flow {
            sent: 0,
            acked: 0,
            sends: VecDeque::with_capacity(16),
            puts: VecDeque::with_capacity(2 * depth + 2),
            head: 0,
            reported: 0,
            recvs: VecDeque::with_capacity(16),
            skipping: false,
            credit_put: std::ptr::null_mut(),
        }
    }
}

/// The put path's state: our landing area, the peers' rings, every flow.
pub(super) struct Ring {
    layout: RingLayout,
    area: Mapped,
    remote: Vec<Option<Remote>>,
    flows: Vec<Flow>,
    /// Source words of the trailers and credit words being put: per peer,
    /// `depth` trailer words and the credit word.
    stage: Box<[u64]>,
}

impl Ring {
    /// A ring of `layout` over `area` (mapped at setup), no peer connected yet.
    pub(super) fn new(layout: RingLayout, area: Mapped) -> Ring {
        Ring {
            layout,
            area,
            remote: (0..layout.ranks).map(|_| None).collect(),
            flows: (0..layout.ranks).map(|_| Flow::new(layout.depth)).collect(),
            stage: vec![0u64; layout.ranks * (layout.depth + 1)].into_boxed_slice(),
        }
    }

    /// Connects to `peer`'s ring at `addr`, unpacking its remote key `rkey` for
    /// the endpoint `ep`.
    pub(super) fn connect(
        &mut self,
        peer: Rank,
        ep: sys::ucp_ep_h,
        addr: u64,
        rkey: &[u8],
    ) -> Result<(), String> {
        let mut handle: sys::ucp_rkey_h = std::ptr::null_mut();
        // SAFETY: `ep` is a live endpoint; `rkey` is the packed key its owner
        // published, read by UCX during the call only; the handle is destroyed
        // before the endpoint closes (forget, destroy_rkeys).
        context::check("ucp_ep_rkey_unpack", unsafe {
            sys::ucp_ep_rkey_unpack(ep, rkey.as_ptr().cast(), &mut handle)
        })?;
        self.remote[peer] = Some(Remote { addr, rkey: handle });
        Ok(())
    }

    /// Slots per sender and payload bytes per slot.
    pub(super) fn geometry(&self) -> (usize, usize) {
        (self.layout.depth, self.layout.slot_bytes)
    }

    /// Destroys `peer`'s remote key (before its endpoint closes).
    pub(super) fn forget(&mut self, peer: Rank) {
        if let Some(r) = self.remote[peer].take() {
            // SAFETY: unpacked in `connect`, destroyed once (taken above).
            unsafe { sys::ucp_rkey_destroy(r.rkey) };
        }
    }

    /// Destroys every remote key (teardown).
    pub(super) fn destroy_rkeys(&mut self) {
        for peer in 0..self.remote.len() {
            self.forget(peer);
        }
    }

    /// The trailer of `peer`'s next piece, when it has arrived.
    fn arrived(&self, peer: Rank) -> Option<Trailer> {
        let seq = self.flows[peer].head;
        let t = Trailer::from_word(self.area.poll_u64(self.layout.trailer(peer, seq)));
        (t.flag == self.layout.flag(seq)).then_some(t)
    }
}

/// `ucp_put_nbx` of `len` bytes at `src` to `addr` of a peer: `Ok(true)` when UCX
/// holds the request memory.
fn put(
    ep: sys::ucp_ep_h,
    src: *const u8,
    len: usize,
    remote: &Remote,
    addr: u64,
    request: *mut c_void,
    peer: Rank,
) -> Result<bool, TransportError> {
    let p = params(request);
    // SAFETY: `ep` is live and `remote.rkey` was unpacked for it; [src, src+len)
    // is a held region or a staging word that stays valid and unwritten until
    // the put completes (tracked in the flow's `puts`); `addr` lies inside the
    // peer's area (the layout both sides agreed on); `request` is free request
    // memory.
    let status = unsafe { sys::ucp_put_nbx(ep, src.cast(), len, addr, remote.rkey, &p) };
    if status.is_null() {
        Ok(false)
    } else if sys::ptr_is_err(status) {
        Err(failed("ucp_put_nbx", peer, "send", sys::ptr_status(status)))
    } else {
        Ok(true)
    }
}

/// What progressing one flow needs besides the ring.
struct Parts<'a> {
    me: Rank,
    peer: Rank,
    ep: sys::ucp_ep_h,
    worker: sys::ucp_worker_h,
    requests: &'a mut Table<Request>,
    slots: &'a mut Slots,
}

impl Parts<'_> {
    fn finish(&mut self, id: RequestId, outcome: Result<(), TransportError>) {
        if let Some(r) = self.requests.get_mut(id) {
            r.state = State::Done(outcome);
        }
    }
}

/// Delivers the pieces of `peer` that arrived to its waiting receives.
fn deliver(ring: &mut Ring, x: &mut Parts) {
    let peer = x.peer;
    loop {
        let flow = &ring.flows[peer];
        if !flow.skipping && flow.recvs.is_empty() {
            return;
        }
        let Some(t) = ring.arrived(peer) else { return };
        // The payload was put before the trailer (fence): read it after.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let seq = ring.flows[peer].head;
        let from = ring.layout.slot(peer, seq);
        let flow = &mut ring.flows[peer];
        flow.acked = widen_consumed(flow.acked, flow.sent, t.consumed);
        flow.head += 1;
        if flow.skipping {
            flow.skipping = !t.last;
            continue;
        }
        let rin = flow.recvs.front_mut().expect("a receive");
        let take = (t.len as usize).min(rin.len.saturating_sub(rin.got));
        if take > 0 {
            // SAFETY: the slot's payload lies inside the area (layout) and was
            // written before its trailer; the receive's region (held for it,
            // `got + take <= len`) is not touched by anyone else meanwhile.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    ring.area.ptr().add(from),
                    rin.ptr.add(rin.got),
                    take,
                );
            }
        }
        rin.got += t.len as usize;
        if t.last {
            let rin = flow.recvs.pop_front().expect("a receive");
            let outcome = if rin.got == rin.len {
                Ok(())
            } else {
                Err(TransportError::SizeMismatch {
                    transport: NAME,
                    peer,
                    expected_bytes: rin.len,
                    got_bytes: rin.got,
                })
            };
            x.finish(rin.id, outcome);
        }
    }
}

/// Tells `peer` how many of its pieces were consumed, once half a ring is
/// unreported and no message of ours carried it.
fn report(ring: &mut Ring, x: &mut Parts) -> Result<(), TransportError> {
    let (peer, depth) = (x.peer, ring.layout.depth as u64);
    let flow = &mut ring.flows[peer];
    if flow.head - flow.reported < depth / 2 {
        return Ok(());
    }
    if !flow.credit_put.is_null() {
        // SAFETY: request memory of a put UCX holds or completed.
        if unsafe { sys::ucp_request_check_status(flow.credit_put) } == sys::UCS_INPROGRESS {
            return Ok(());
        }
        x.slots.give(std::mem::replace(
            &mut flow.credit_put,
            std::ptr::null_mut(),
        ));
    }
    let Some(remote) = ring.remote[peer].as_ref() else {
        return Ok(());
    };
    let word = peer * (ring.layout.depth + 1) + ring.layout.depth;
    ring.stage[word] = flow.head.to_le();
    flow.reported = flow.head;
    let request = x.slots.take();
    let addr = remote.addr + ring.layout.credit(x.me) as u64;
    match put(
        x.ep,
        (&ring.stage[word] as *const u64).cast(),
        8,
        remote,
        addr,
        request,
        peer,
    ) {
        Ok(true) => flow.credit_put = request,
        Ok(false) => x.slots.give(request),
        Err(e) => {
            x.slots.give(request);
            return Err(e);
        }
    }
    Ok(())
}

/// Puts the pieces of `peer`'s queued sends that credit allows, and finishes
/// the sends whose puts all completed.
fn push(ring: &mut Ring, x: &mut Parts) {
    let (peer, layout) = (x.peer, ring.layout);
    let depth = layout.depth as u64;
    let flow = &mut ring.flows[peer];
    while let Some(&(_, request)) = flow.puts.front() {
        // SAFETY: request memory of a put UCX holds or completed.
        let status = unsafe { sys::ucp_request_check_status(request) };
        if status == sys::UCS_INPROGRESS {
            break;
        }
        flow.puts.pop_front();
        x.slots.give(request);
        if status != sys::UCS_OK {
            if let Some(out) = flow.sends.pop_front() {
                x.finish(out.id, Err(failed("ucp_put_nbx", peer, "send", status)));
            }
        }
    }
    loop {
        let flow = &mut ring.flows[peer];
        let Some(out) = flow.sends.front_mut() else {
            return;
        };
        if let Some(last) = out.last {
            if flow.puts.front().is_some_and(|&(seq, _)| seq <= last) {
                return;
            }
            let out = flow.sends.pop_front().expect("a send");
            x.finish(out.id, Ok(()));
            continue;
        }
        if flow.sent - flow.acked >= depth {
            let credit = ring.area.poll_u64(layout.credit(peer));
            flow.acked = flow.acked.max(credit.min(flow.sent));
            if flow.sent - flow.acked >= depth {
                return;
            }
        }
        // The trailer word of this slot is free once the put of the slot's
        // previous trailer completed.
        if flow
            .puts
            .front()
            .is_some_and(|&(seq, _)| seq + depth <= flow.sent)
        {
            return;
        }
        let Some(remote) = ring.remote[peer].as_ref() else {
            return;
        };
        let seq = flow.sent;
        let n = (out.len - out.issued).min(layout.slot_bytes);
        let last = out.issued + n == out.len;
        let issued = (|| -> Result<(), TransportError> {
            if n > 0 {
                let request = x.slots.take();
                // SAFETY: `issued + n <= len` bytes of the send's held region.
                let src = unsafe { out.ptr.add(out.issued) };
                let addr = remote.addr + layout.slot(x.me, seq) as u64;
                match put(x.ep, src, n, remote, addr, request, peer) {
                    Ok(true) => flow.puts.push_back((seq, request)),
                    Ok(false) => x.slots.give(request),
                    Err(e) => {
                        x.slots.give(request);
                        return Err(e);
                    }
                }
                // SAFETY: the worker is live.
                context::check("ucp_worker_fence", unsafe {
                    sys::ucp_worker_fence(x.worker)
                })
                .map_err(|e| failed_text(peer, e))?;
            }
            let word = peer * (layout.depth + 1) + (seq % depth) as usize;
            ring.stage[word] = Trailer {
                len: n as u32,
                last,
                consumed: flow.head as u16,
                flag: layout.flag(seq),
            }
            .word()
            .to_le();
            let request = x.slots.take();
            let addr = remote.addr + layout.trailer(x.me, seq) as u64;
            match put(
                x.ep,
                (&ring.stage[word] as *const u64).cast(),
                8,
                remote,
                addr,
                request,
                peer,
            ) {
                Ok(true) => flow.puts.push_back((seq, request)),
                Ok(false) => x.slots.give(request),
                Err(e) => {
                    x.slots.give(request);
                    return Err(e);
                }
            }
            Ok(())
        })();
        if let Err(e) = issued {
            let out = flow.sends.pop_front().expect("a send");
            x.finish(out.id, Err(e));
            continue;
        }
        flow.reported = flow.head;
        flow.sent += 1;
        out.issued += n;
        if last {
            out.last = Some(seq);
        }
    }
}

fn failed_text(peer: Rank, text: String) -> TransportError {
    TransportError::Io {
        transport: NAME,
        peer,
        op: "send",
        source: std::io::Error::other(text),
    }
}

impl UcxTransport {
    /// One round of the put path: every peer's arrivals, credits and sends.
    pub(super) fn ring_progress(&mut self) {
        for peer in 0..self.size {
            if peer != self.rank {
                self.ring_peer(peer);
            }
        }
    }

    fn ring_peer(&mut self, peer: Rank) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let mut x = Parts {
            me: self.rank,
            peer,
            ep: self.peers[peer].ep,
            worker: self.ctx.worker,
            requests: &mut self.requests,
            slots: &mut self.slots,
        };
        deliver(ring, &mut x);
        if x.ep.is_null() {
            return;
        }
        if let Err(e) = report(ring, &mut x) {
            // No credit reaches the peer: fail what waits for it.
            if let Some(out) = ring.flows[peer].sends.pop_front() {
                x.finish(out.id, Err(e));
            }
        }
        push(ring, &mut x);
    }

    /// `isend`/`irecv` on the put path: the region held until the request is
    /// retired.
    pub(super) fn ring_start(
        &mut self,
        peer: Rank,
        region: Region,
        access: Access,
    ) -> Result<RequestId, TransportError> {
        let recv = access == Access::Write;
        if self.peers[peer].gone.is_some() {
            let waiting = self
                .ring
                .as_ref()
                .is_some_and(|r| r.arrived(peer).is_some());
            if !recv {
                return Err(self.gone_error(peer, "send"));
            }
            if !waiting {
                return self.start_failed(peer, region, access);
            }
        }
        let ptr = self.memory.hold(region, access)?;
        let id = self.requests.insert(Request {
            peer,
            region,
            access,
            state: State::Ring,
        });
        let flow = &mut self.ring.as_mut().expect("the put path").flows[peer];
        if recv {
            flow.recvs.push_back(In {
                id,
                ptr,
                len: region.len,
                got: 0,
            });
        } else {
            flow.sends.push_back(Out {
                id,
                ptr,
                len: region.len,
                issued: 0,
                last: None,
            });
        }
        self.ring_peer(peer);
        Ok(id)
    }

    /// Takes `request` out of the put path's queues (a receive that timed out,
    /// or a send to a peer that is gone); the rest of a message partly received
    /// is dropped when it arrives.
    pub(super) fn ring_cancel(&mut self, request: RequestId) {
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        for flow in &mut ring.flows {
            if let Some(i) = flow.recvs.iter().position(|r| r.id == request) {
                let rin = flow.recvs.remove(i).expect("found");
                if rin.got > 0 {
                    flow.skipping = true;
                }
            }
            flow.sends.retain(|o| o.id != request);
        }
    }

    /// Puts a word into every peer's ring (its credit word from us, still 0) and
    /// flushes: the RMA lanes are connected before anything is timed.
    pub(super) fn ring_warm(&mut self) -> Result<(), String> {
        for peer in 0..self.size {
            let Some(ring) = self.ring.as_ref() else {
                return Ok(());
            };
            let Some(remote) = ring.remote[peer].as_ref() else {
                continue;
            };
            let request = self.slots.take();
            let addr = remote.addr + ring.layout.credit(self.rank) as u64;
            let word = peer * (ring.layout.depth + 1) + ring.layout.depth;
            let src = (&ring.stage[word] as *const u64).cast();
            let started = put(self.peers[peer].ep, src, 8, remote, addr, request, peer);
            match started {
                Ok(true) => {
                    // SAFETY: request memory of a put UCX holds.
                    self.drain(|| (unsafe { sys::ucp_request_check_status(request) }, 0))
                        .ok_or("a put at setup did not complete")?;
                    self.slots.give(request);
                }
                Ok(false) => self.slots.give(request),
                Err(e) => {
                    self.slots.give(request);
                    return Err(e.to_string());
                }
            }
        }
        let request = self.slots.take();
        // SAFETY: the worker is live; `request` is free request memory.
        let status = unsafe { sys::ucp_worker_flush_nbx(self.ctx.worker, &params(request)) };
        if sys::ptr_is_err(status) {
            self.slots.give(request);
            return context::check("ucp_worker_flush_nbx", sys::ptr_status(status));
        }
        if !status.is_null() {
            // SAFETY: request memory of the flush UCX holds.
            self.drain(|| (unsafe { sys::ucp_request_check_status(request) }, 0))
                .ok_or("the flush at setup did not complete")?;
        }
        self.slots.give(request);
        Ok(())
    }
}
