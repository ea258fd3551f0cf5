//! Posting: sends (`fi_inject` up to the provider's `inject_size`, else
//! `fi_send`/`fi_tsend` with a context), receives, the write path's
//! advertisements and writes, and the transport's own receives. A post that
//! finds the provider's queue full (`-FI_EAGAIN`) progresses the completion
//! queue and tries again, so operations reach the provider in the order they
//! were started.

use super::setup::ADVERT_BYTES;
use super::{
    ffi, Advert, Ctx, OfiTransport, State, ADVERT, ADVERT_SLOTS, NAME, TAG_ADVERT, TAG_DATA,
};
use ngauge_transport::{Rank, TransportError};
use std::os::raw::c_void;
use std::time::Instant;

impl OfiTransport {
    /// Messages are registered memory (`FI_MR_LOCAL`, or the write path).
    pub(super) fn memory_registered(&self) -> bool {
        self.memory.desc_needed()
    }

    /// Calls `post` until it does not return `-FI_EAGAIN`, progressing the
    /// completion queue in between; `Err` on another error or after the timeout.
    pub(super) fn retry(
        &mut self,
        peer: Rank,
        op: &'static str,
        mut post: impl FnMut(&mut OfiTransport) -> isize,
    ) -> Result<(), TransportError> {
        let mut start: Option<Instant> = None;
        loop {
            let rc = post(self);
            if rc == 0 {
                return Ok(());
            }
            if rc != ffi::EAGAIN {
                return Err(self.io(peer, op, format!("posting failed: {}", ffi::strerror(rc))));
            }
            self.progress()?;
            let began = *start.get_or_insert_with(Instant::now);
            if began.elapsed() > self.timeout {
                return Err(TransportError::Timeout {
                    transport: NAME,
                    peer,
                    op,
                    after: self.timeout,
                });
            }
        }
    }

    fn tag(&self, kind: u64) -> u64 {
        kind | self.rank as u64
    }

    /// Posts a send request: injected (done at once) up to `inject_size`, else
    /// sent with its context.
    pub(super) fn post_send(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let ptr = self.memory.pool.region(region)?.as_ptr().cast::<c_void>();
        let (ep, tagged, dest, tag) = (
            self.ep.ep,
            i32::from(self.tagged),
            self.peers[peer].addr,
            self.tag(TAG_DATA),
        );
        if region.len <= self.inject {
            // SAFETY: `ptr` points at `region.len` bytes of a pool buffer held for
            // reading by this request; fi_inject copies them before it returns.
            self.retry(peer, "send", |_| unsafe {
                ffi::ngo_inject(ep, tagged, ptr, region.len, dest, tag)
            })?;
            self.requests.get_mut(&id).expect("started").state = State::Done;
            return Ok(());
        }
        let desc = self.memory.desc(region);
        let mut ctx = Ctx::boxed(id);
        let c = Ctx::ptr(&mut ctx);
        // SAFETY: `ptr` points at `region.len` bytes held for reading by this
        // request until its completion (the request keeps the hold and the
        // context, whose address stays put in its box, until then).
        self.retry(peer, "send", |_| unsafe {
            ffi::ngo_send(ep, tagged, ptr, region.len, desc, dest, tag, c)
        })?;
        let r = self.requests.get_mut(&id).expect("started");
        r.ctx = Some(ctx);
        Ok(())
    }

    /// Posts a receive from `peer` of messages tagged `kind` into raw memory.
    pub(super) fn post_recv_raw(
        &mut self,
        peer: Rank,
        kind: u64,
        ptr: *mut u8,
        len: usize,
        desc: *mut c_void,
        ctx: *mut c_void,
    ) -> Result<(), TransportError> {
        let (ep, tagged) = (self.ep.ep, i32::from(self.tagged));
        let src = if self.tagged {
            ffi::ADDR_UNSPEC
        } else {
            self.peers[peer].addr
        };
        let tag = kind | peer as u64;
        // SAFETY: the callers guarantee that `ptr` has `len` writable bytes and
        // `ctx` a context that stay put until the receive completes.
        self.retry(peer, "recv", |_| unsafe {
            ffi::ngo_recv(ep, tagged, ptr.cast::<c_void>(), len, desc, src, tag, ctx)
        })
    }

    /// Posts a receive request into its region.
    pub(super) fn post_recv(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let ptr = self.memory.pool.region_mut(region)?.as_mut_ptr();
        let desc = self.memory.desc(region);
        let mut ctx = Ctx::boxed(id);
        // The region is held for writing by this request (no other operation and
        // no reference uses it) until its completion; the context stays in the
        // request until then.
        self.post_recv_raw(peer, TAG_DATA, ptr, region.len, desc, Ctx::ptr(&mut ctx))?;
        self.requests.get_mut(&id).expect("started").ctx = Some(ctx);
        Ok(())
    }

    /// (Re)posts advertisement slot `slot` (of peer `slot / ADVERT_SLOTS`),
    /// reusing its context when it has one.
    pub(super) fn post_advert_slot(
        &mut self,
        slot: usize,
        ctx: Option<Box<Ctx>>,
    ) -> Result<(), TransportError> {
        let buffer = self.advert_buffer.expect("write path");
        let region = buffer.region(slot * ADVERT_BYTES, ADVERT_BYTES);
        let ptr = self.memory.pool.region_mut(region)?.as_mut_ptr();
        let desc = self.memory.desc(region);
        let mut ctx = ctx.unwrap_or_else(|| Ctx::boxed(ADVERT | slot as u64));
        // The slot is part of the advertisement buffer, held for good and read
        // only once this receive has completed.
        self.post_recv_raw(
            slot / ADVERT_SLOTS,
            TAG_ADVERT,
            ptr,
            ADVERT_BYTES,
            desc,
            Ctx::ptr(&mut ctx),
        )?;
        self.fixed.push(ctx);
        Ok(())
    }

    /// Write path, receive: advertises the region to the sender.
    pub(super) fn advertise(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        if self.peers[peer].closed {
            // Nothing can be written into the region by a peer that left: the
            // request fails when it is waited for, as a posted receive would.
            let err = TransportError::PeerClosed {
                transport: NAME,
                peer,
                op: "recv",
            };
            self.requests.get_mut(&id).expect("started").state = State::Failed(err);
            return Ok(());
        }
        let (addr, key) = self.memory.remote(region).unwrap_or((0, 0));
        let seq = self.peers[peer].next_seq;
        self.peers[peer].next_seq = seq.wrapping_add(1);
        let mut advert = [0u8; ADVERT_BYTES];
        for (i, word) in [addr, key, region.len as u64, u64::from(seq)]
            .into_iter()
            .enumerate()
        {
            advert[i * 8..][..8].copy_from_slice(&word.to_le_bytes());
        }
        let (ep, tagged, dest, tag) = (
            self.ep.ep,
            i32::from(self.tagged),
            self.peers[peer].addr,
            self.tag(TAG_ADVERT),
        );
        // SAFETY: `advert` is a local array; fi_inject copies it before returning
        // (the setup checked that inject_size holds it).
        self.retry(peer, "recv", |_| unsafe {
            ffi::ngo_inject(
                ep,
                tagged,
                advert.as_ptr().cast::<c_void>(),
                ADVERT_BYTES,
                dest,
                tag,
            )
        })?;
        self.peers[peer].awaiting.push_back((seq, id));
        Ok(())
    }

    /// Write path, send: writes at once when the peer has advertised a region,
    /// else waits in the peer's queue.
    pub(super) fn queue_write(&mut self, id: u64) -> Result<(), TransportError> {
        let peer = self.requests[&id].peer;
        if self.peers[peer].queued_writes.is_empty() {
            if let Some(advert) = self.peers[peer].adverts.pop_front() {
                return self.post_write(id, advert);
            }
        }
        self.requests.get_mut(&id).expect("started").state = State::Queued;
        self.peers[peer].queued_writes.push_back(id);
        Ok(())
    }

    /// Writes a send request into the advertised region with remote CQ data
    /// (sender, sequence number, length); when the lengths differ, writes
    /// nothing and the data tells the receiver the length sent.
    pub(super) fn post_write(&mut self, id: u64, advert: Advert) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let ptr = self.memory.pool.region(region)?.as_ptr().cast::<c_void>();
        let data = ((self.rank as u64) << 48) | (u64::from(advert.seq) << 32) | region.len as u64;
        let (ep, dest) = (self.ep.ep, self.peers[peer].addr);
        let mismatch = advert.len != region.len as u64;
        let len = if mismatch { 0 } else { region.len };
        if len <= self.inject {
            // SAFETY: `ptr` points at `region.len >= len` bytes held for reading by
            // this request; fi_inject_writedata copies them before it returns; the
            // target region is one the peer advertised and holds for this write.
            self.retry(peer, "send", |_| unsafe {
                ffi::ngo_inject_writedata(ep, ptr, len, data, dest, advert.addr, advert.key)
            })?;
            let r = self.requests.get_mut(&id).expect("started");
            r.state = if mismatch {
                State::Failed(TransportError::SizeMismatch {
                    transport: NAME,
                    peer,
                    expected_bytes: advert.len as usize,
                    got_bytes: region.len,
                })
            } else {
                State::Done
            };
            return Ok(());
        }
        let desc = self.memory.desc(region);
        let mut ctx = Ctx::boxed(id);
        let c = Ctx::ptr(&mut ctx);
        // SAFETY: as above; the region stays held and the context boxed in the
        // request until the write's completion.
        self.retry(peer, "send", |_| unsafe {
            ffi::ngo_writedata(ep, ptr, len, desc, data, dest, advert.addr, advert.key, c)
        })?;
        let r = self.requests.get_mut(&id).expect("started");
        r.ctx = Some(ctx);
        r.state = State::Posted;
        Ok(())
    }

    /// Posts the writes queued for `peer` that have advertisements now.
    pub(super) fn drain_writes(&mut self, peer: Rank) -> Result<(), TransportError> {
        while !self.peers[peer].queued_writes.is_empty() {
            let Some(advert) = self.peers[peer].adverts.pop_front() else {
                break;
            };
            let id = self.peers[peer].queued_writes.pop_front().expect("checked");
            if let Err(e) = self.post_write(id, advert) {
                if let Some(r) = self.requests.get_mut(&id) {
                    r.state = State::Failed(e);
                }
            }
        }
        Ok(())
    }
}
