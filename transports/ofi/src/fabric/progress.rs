//! The completion queue: reading it (`fi_cq_read`, and `fi_cq_readerr` for error
//! completions), what each completion means, waiting for a request (spinning, or
//! `fi_cq_sread` on the queue's wait object in [`WaitMode::Block`]), the peer
//! timeout, cancelling a receive (`fi_cancel`), goodbyes of peers that closed and
//! this rank's own at drop.

use super::setup::ADVERT_BYTES;
use super::{
    ffi, Advert, Ctx, OfiTransport, State, ADVERT, ADVERT_SLOTS, BYE, FAREWELL, GREET, GREETED,
    KIND, NAME, RMA, TAG_BYE,
};
use ngauge_transport::{Rank, TransportError, WaitMode};
use std::os::raw::c_void;
use std::time::{Duration, Instant};

/// Completions read per `fi_cq_read`.
const BATCH: usize = 16;
/// Empty polls between two clock readings of a polling wait.
const SPINS_PER_CLOCK: u32 = 256;
/// Longest single `fi_cq_sread`, so that timeouts and closed peers are noticed.
const SREAD_MS: i32 = 50;
/// Yields of a blocking wait without a wait object before it sleeps.
const YIELDS: u32 = 1000;
/// How long a cancelled receive or a goodbye may take to complete.
const GRACE: Duration = Duration::from_secs(1);

/// One completion, successful or not.
struct Completion {
    ctx: *mut c_void,
    flags: u64,
    len: usize,
    data: u64,
    /// `err` (positive `FI_E*`) and the provider's words, for an error completion.
    error: Option<(i32, String)>,
}

impl OfiTransport {
    /// Reads what the completion queue holds (one batch and the error entries
    /// before it) and handles it; whether anything was there.
    pub(super) fn progress(&mut self) -> Result<bool, TransportError> {
        let mut entries = [ffi::fi_cq_tagged_entry::default(); BATCH];
        // SAFETY: `cq` is open; `entries` has room for BATCH entries.
        let n = unsafe { ffi::ngo_cq_read(self.ep.cq, entries.as_mut_ptr(), BATCH) };
        self.handle(n, &entries)
    }

    /// Handles the return of `fi_cq_read`/`fi_cq_sread` into `entries`.
    fn handle(
        &mut self,
        n: isize,
        entries: &[ffi::fi_cq_tagged_entry],
    ) -> Result<bool, TransportError> {
        if n > 0 {
            for e in &entries[..n as usize] {
                self.complete(Completion {
                    ctx: e.op_context,
                    flags: e.flags,
                    len: e.len,
                    data: e.data,
                    error: None,
                });
            }
            return Ok(true);
        }
        if n == ffi::EAGAIN {
            return Ok(false);
        }
        if n == ffi::EAVAIL {
            let mut err = ffi::fi_cq_err_entry::default();
            // SAFETY: `cq` is open; `err` is zeroed (err_data_size 0: the provider
            // keeps the error data).
            let rc = unsafe { ffi::ngo_cq_readerr(self.ep.cq, &mut err) };
            if rc == 1 {
                let mut text = [0 as std::os::raw::c_char; 256];
                // SAFETY: `err` came from this queue; `text` has 256 bytes; the
                // result is a NUL-terminated string (ours or the provider's).
                let words = unsafe {
                    let p = ffi::ngo_cq_strerror(
                        self.ep.cq,
                        err.prov_errno,
                        err.err_data,
                        text.as_mut_ptr(),
                        text.len(),
                    );
                    if p.is_null() {
                        String::new()
                    } else {
                        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
                    }
                };
                let words = format!("{} ({words})", ffi::strerror(err.err as isize));
                self.complete(Completion {
                    ctx: err.op_context,
                    flags: err.flags,
                    len: err.len,
                    data: err.data,
                    error: Some((err.err, words)),
                });
                return Ok(true);
            }
            return Ok(false);
        }
        Err(TransportError::Io {
            transport: NAME,
            peer: self.rank,
            op: "fi_cq_read",
            source: std::io::Error::other(ffi::strerror(n)),
        })
    }

    /// What one completion means.
    fn complete(&mut self, c: Completion) {
        let remote = (ffi::FI_REMOTE_CQ_DATA | ffi::FI_REMOTE_WRITE) as u64;
        if c.flags & remote == remote && c.error.is_none() {
            return self.write_arrived(c.data);
        }
        if c.ctx.is_null() {
            return;
        }
        // SAFETY: every operation that completes was posted with a boxed `Ctx`
        // that its owner (a request, `fixed`, `farewells`) keeps until this
        // completion: the pointer is valid and the id was written at posting.
        let id = unsafe { (*c.ctx.cast::<Ctx>()).id };
        match id & !(KIND - 1) {
            0 => self.request_completed(id, &c),
            BYE => {
                let peer = (id & (KIND - 1)) as Rank;
                if c.error.is_none() {
                    self.peer_closed(peer);
                }
            }
            ADVERT => self.advert_arrived((id & (KIND - 1)) as usize, c.ctx, &c),
            RMA => self.one_sided_completed(c.error.map(|(_, words)| words)),
            GREET | GREETED => {
                if let Some(i) = self
                    .fixed
                    .iter()
                    .position(|b| std::ptr::eq(&**b, c.ctx.cast::<Ctx>()))
                {
                    self.fixed.swap_remove(i);
                }
                let peer = (id & (KIND - 1)) as Rank;
                let ours = id & !(KIND - 1) == GREETED;
                match c.error {
                    Some((err, _)) if ours && ffi::not_connected(err) => {
                        self.hellos_to_resend.push(peer);
                    }
                    Some((_, words)) => {
                        self.greeting_failed
                            .get_or_insert(format!("hello with rank {peer}: {words}"));
                    }
                    None if ours => self.peers[peer].hello_pending = false,
                    None => self.peers[peer].hello_awaited = false,
                }
            }
            _ => {} // a goodbye of ours left (FAREWELL)
        }
    }

    fn request_completed(&mut self, id: u64, c: &Completion) {
        let Some(r) = self.requests.get_mut(&id) else {
            return;
        };
        let peer = r.peer;
        r.ctx = None;
        let op = if r.send { "send" } else { "recv" };
        let expected = r.region.len;
        let closed = self.peers[peer].closed;
        r.state = match &c.error {
            None if !r.send && c.len != expected => State::Failed(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: expected,
                got_bytes: c.len,
            }),
            None => State::Done,
            Some((code, _)) if *code == ffi::ECANCELED && closed => {
                State::Failed(TransportError::PeerClosed {
                    transport: NAME,
                    peer,
                    op,
                })
            }
            Some((code, _)) if *code == ffi::ETRUNC => {
                let dynamic_rbuf = std::env::var("FI_OFI_RXM_ENABLE_DYN_RBUF").ok();
                let provider = &self.ep.facts.provider;
                if let Some(why) = super::lost_after_truncation(provider, dynamic_rbuf.as_deref()) {
                    self.peers[peer].inbound_lost.get_or_insert(why);
                }
                State::Failed(TransportError::Io {
                    transport: NAME,
                    peer,
                    op,
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("message longer than the {expected} bytes posted (FI_ETRUNC)"),
                    ),
                })
            }
            Some(_) if closed => State::Failed(TransportError::PeerClosed {
                transport: NAME,
                peer,
                op,
            }),
            Some((_, words)) => State::Failed(TransportError::Io {
                transport: NAME,
                peer,
                op,
                source: std::io::Error::other(words.clone()),
            }),
        };
        self.peers[peer].touched = true;
    }

    /// Write path: a write into one of our advertised regions arrived.
    fn write_arrived(&mut self, data: u64) {
        let peer = (data >> 48) as Rank;
        let seq = ((data >> 32) & 0xffff) as u16;
        let len = (data & 0xffff_ffff) as usize;
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        p.touched = true;
        let Some(i) = p.awaiting.iter().position(|&(s, _)| s == seq) else {
            return;
        };
        let (_, id) = p.awaiting.remove(i).expect("found");
        if let Some(r) = self.requests.get_mut(&id) {
            r.state = if len == r.region.len {
                State::Done
            } else {
                State::Failed(TransportError::SizeMismatch {
                    transport: NAME,
                    peer,
                    expected_bytes: r.region.len,
                    got_bytes: len,
                })
            };
        }
    }

    /// Write path: an advertisement arrived in `slot`; reposts the slot and
    /// posts the writes it unblocks.
    fn advert_arrived(&mut self, slot: usize, ctx: *mut c_void, c: &Completion) {
        let peer = slot / ADVERT_SLOTS;
        let Some(i) = self
            .fixed
            .iter()
            .position(|b| std::ptr::eq(&**b as *const Ctx, ctx.cast::<Ctx>()))
        else {
            return;
        };
        let boxed = self.fixed.swap_remove(i);
        if c.error.is_some() {
            return; // cancelled at close
        }
        let buffer = self.advert_buffer.expect("write path");
        let bytes = self
            .memory
            .pool
            .region(buffer.region(slot * ADVERT_BYTES, ADVERT_BYTES))
            .expect("the advertisement buffer");
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..][..8].try_into().expect("8"));
        let advert = Advert {
            addr: word(0),
            key: word(1),
            len: word(2),
            seq: word(3) as u16,
        };
        self.peers[peer].adverts.push_back(advert);
        self.peers[peer].touched = true;
        if let Err(e) = self.post_advert_slot(slot, Some(boxed)) {
            self.break_peer(peer, format!("reposting an advertisement slot: {e}"));
        }
        let _ = self.drain_writes(peer);
    }

    /// The peer said goodbye: its queued and advertised operations fail now;
    /// receives posted to libfabric are cancelled by the next wait that finds
    /// the queue empty ([`OfiTransport::cancel_for_closed_peers`]).
    fn peer_closed(&mut self, peer: Rank) {
        self.peers[peer].closed = true;
        self.peers[peer].touched = true;
        let p = &mut self.peers[peer];
        let ids: Vec<u64> = p
            .queued_writes
            .drain(..)
            .chain(p.awaiting.drain(..).map(|(_, id)| id))
            .collect();
        for id in ids {
            if let Some(r) = self.requests.get_mut(&id) {
                let op = if r.send { "send" } else { "recv" };
                r.state = State::Failed(TransportError::PeerClosed {
                    transport: NAME,
                    peer,
                    op,
                });
            }
        }
    }

    /// Write path: fails every operation with `peer` after a timeout. Advertised
    /// receives keep their regions held: the peer may still write into them.
    fn break_peer(&mut self, peer: Rank, why: String) {
        let p = &mut self.peers[peer];
        p.broken.get_or_insert(why.clone());
        let queued: Vec<u64> = p.queued_writes.drain(..).collect();
        let advertised: Vec<u64> = p.awaiting.drain(..).map(|(_, id)| id).collect();
        for (id, keep_hold) in queued
            .into_iter()
            .map(|id| (id, false))
            .chain(advertised.into_iter().map(|id| (id, true)))
        {
            let err = self.io(peer, if keep_hold { "recv" } else { "send" }, why.clone());
            if let Some(r) = self.requests.get_mut(&id) {
                r.keep_hold = keep_hold;
                r.state = State::Failed(err);
            }
        }
    }

    /// Asks libfabric to cancel the posted receives from peers that closed (the
    /// queue was just found empty, so no message from them is on its way).
    pub(super) fn cancel_for_closed_peers(&mut self) {
        let ep = self.ep.ep;
        for r in self.requests.values_mut() {
            if !r.send && !r.cancelling && self.peers[r.peer].closed {
                if let Some(ctx) = r.ctx.as_mut() {
                    r.cancelling = true;
                    // SAFETY: `ep` is open and `ctx` the context of a receive posted
                    // on it; a cancel of a completed operation does nothing.
                    unsafe { ffi::ngo_cancel(std::ptr::addr_of_mut!((*ep).fid), Ctx::ptr(ctx)) };
                }
            }
        }
    }

    /// Waits until request `id` completes and retires it.
    pub(super) fn wait_for(&mut self, id: u64) -> Result<(), TransportError> {
        let mut since = Instant::now();
        let (mut spins, mut idle) = (0u32, 0u32);
        loop {
            if let Some(done) = self.try_retire(id)? {
                return done;
            }
            if self.progress()? {
                idle = 0;
                continue;
            }
            self.cancel_for_closed_peers();
            let peer = self.requests[&id].peer;
            spins += 1;
            if self.wait == WaitMode::Poll && spins < SPINS_PER_CLOCK {
                std::hint::spin_loop();
                continue;
            }
            spins = 0;
            if std::mem::take(&mut self.peers[peer].touched) {
                since = Instant::now();
            }
            let silent = since.elapsed();
            if silent >= self.timeout {
                return Err(self.timed_out(id, peer));
            }
            if self.wait == WaitMode::Block {
                idle = idle.saturating_add(1);
                self.sleep(self.timeout - silent, idle)?;
            }
        }
    }

    /// Block mode: waits on the completion queue's wait object for at most
    /// `left` (and [`SREAD_MS`]), handling what arrives; yields where the queue
    /// has no wait object.
    fn sleep(&mut self, left: Duration, idle: u32) -> Result<(), TransportError> {
        if !self.ep.waitable {
            // As the MPI transport's blocking waits: a yield at first, then short
            // sleeps, so a waiting rank neither burns the core a co-located rank
            // needs nor adds more than tens of microseconds once the peer is back.
            if idle < YIELDS {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
            return Ok(());
        }
        let ms = (left.as_millis() as i32).clamp(1, SREAD_MS);
        let mut entries = [ffi::fi_cq_tagged_entry::default(); BATCH];
        // SAFETY: `cq` is open with a wait object; `entries` has room for BATCH.
        let n = unsafe { ffi::ngo_cq_sread(self.ep.cq, entries.as_mut_ptr(), BATCH, ms) };
        if n == ffi::ENOSYS {
            self.ep.waitable = false;
            return Ok(());
        }
        if n < 0 && n != ffi::EAGAIN && n != ffi::EAVAIL {
            // A timeout (-FI_ETIMEDOUT) or an interrupted wait: look again.
            return Ok(());
        }
        self.handle(n, &entries).map(drop)
    }

    /// The error of a wait that saw nothing from `peer` for the timeout. On the
    /// write path the exchange with the peer is broken; otherwise the request
    /// stays pending and may be waited for again.
    fn timed_out(&mut self, id: u64, peer: Rank) -> TransportError {
        let op = if self.requests[&id].send {
            "send"
        } else {
            "recv"
        };
        let err = TransportError::Timeout {
            transport: NAME,
            peer,
            op,
            after: self.timeout,
        };
        if self.op == super::OfiOp::Write {
            self.break_peer(peer, err.to_string());
            // Its own failure is the timeout.
            if let Some(r) = self.requests.get_mut(&id) {
                if matches!(r.state, State::Failed(_)) {
                    r.state = State::Failed(TransportError::Timeout {
                        transport: NAME,
                        peer,
                        op,
                        after: self.timeout,
                    });
                }
            }
            let _ = self.try_retire(id);
        }
        err
    }

    /// `send`/`recv`: waits for the request they started; a receive that timed
    /// out is cancelled and gives its region back (or, if it completed in the
    /// meantime, succeeds), a send that timed out stays with libfabric until it
    /// completes.
    pub(super) fn wait_blocking(
        &mut self,
        id: u64,
        op: &'static str,
    ) -> Result<(), TransportError> {
        match self.wait_for(id) {
            Err(e @ TransportError::Timeout { .. }) if op == "recv" => {
                if !self.requests.contains_key(&id) {
                    return Err(e);
                }
                self.cancel(id);
                match self.try_retire(id) {
                    Ok(Some(Ok(()))) => Ok(()),
                    _ => Err(e),
                }
            }
            other => other,
        }
    }

    /// Cancels a posted receive and waits (at most [`GRACE`]) for its completion.
    fn cancel(&mut self, id: u64) {
        let ep = self.ep.ep;
        let Some(r) = self.requests.get_mut(&id) else {
            return;
        };
        let Some(ctx) = r.ctx.as_mut() else {
            return;
        };
        r.cancelling = true;
        // SAFETY: as in `cancel_for_closed_peers`.
        unsafe { ffi::ngo_cancel(std::ptr::addr_of_mut!((*ep).fid), Ctx::ptr(ctx)) };
        let start = Instant::now();
        while start.elapsed() < GRACE {
            match self.requests.get(&id).map(|r| &r.state) {
                Some(State::Posted) => {}
                _ => break,
            }
            if self.progress().is_err() {
                break;
            }
        }
        if let Some(r) = self.requests.get_mut(&id) {
            if matches!(r.state, State::Failed(_)) {
                // Cancelled: the bytes are free again.
                r.keep_hold = false;
            }
        }
    }

    /// Tells every peer still there that this rank is closing (a 0-byte message
    /// tagged as a goodbye) and waits up to [`GRACE`] for the goodbyes to leave.
    pub(super) fn say_goodbye(&mut self) {
        // `shm` hands an endpoint of the same process the peer's own mapping of
        // its region, which the peer's close unmaps: progress (and a goodbye)
        // could touch unmapped memory. Ranks in one process are threads of a test.
        let shm = self.ep.facts.provider == "shm";
        if !self.tagged || (shm && self.peers.iter().any(|p| p.same_process)) {
            return;
        }
        // Goodbyes that arrived are handled first: no goodbye goes to a peer
        // whose endpoint is gone.
        while let Ok(true) = self.progress() {}
        let (ep, tag) = (self.ep.ep, TAG_BYE | self.rank as u64);
        let quiet = |p: &super::Peer| p.closed;
        for peer in (0..self.size).filter(|&p| p != self.rank && !quiet(&self.peers[p])) {
            let mut ctx = Ctx::boxed(FAREWELL | peer as u64);
            // SAFETY: a 0-byte send from a dangling (never read) pointer; the
            // context is kept in `farewells` until the endpoint is closed.
            let rc = unsafe {
                ffi::ngo_send(
                    ep,
                    1,
                    std::ptr::NonNull::<u8>::dangling()
                        .as_ptr()
                        .cast::<c_void>(),
                    0,
                    std::ptr::null_mut(),
                    self.peers[peer].addr,
                    tag,
                    Ctx::ptr(&mut ctx),
                )
            };
            if rc == 0 {
                self.farewells.push(ctx);
            }
        }
        let start = Instant::now();
        let mut left = self.farewells.len();
        while left > 0 && start.elapsed() < GRACE {
            let mut entries = [ffi::fi_cq_tagged_entry::default(); BATCH];
            // SAFETY: as in `progress`.
            let n = unsafe { ffi::ngo_cq_read(self.ep.cq, entries.as_mut_ptr(), BATCH) };
            let ours = |ctx: *mut c_void| {
                // SAFETY: as in `complete`.
                !ctx.is_null() && unsafe { (*ctx.cast::<Ctx>()).id } & !(KIND - 1) == FAREWELL
            };
            if n > 0 {
                left -= entries[..n as usize]
                    .iter()
                    .filter(|e| ours(e.op_context))
                    .count()
                    .min(left);
                for e in &entries[..n as usize] {
                    if !ours(e.op_context) {
                        self.complete(Completion {
                            ctx: e.op_context,
                            flags: e.flags,
                            len: e.len,
                            data: e.data,
                            error: None,
                        });
                    }
                }
            } else if n == ffi::EAVAIL {
                let mut err = ffi::fi_cq_err_entry::default();
                // SAFETY: as in `handle`.
                if unsafe { ffi::ngo_cq_readerr(self.ep.cq, &mut err) } == 1 && ours(err.op_context)
                {
                    left -= 1;
                }
            } else if n != ffi::EAGAIN {
                break;
            }
        }
    }
}
