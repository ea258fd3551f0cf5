//! Waiting: spinning on `ucp_worker_progress` (`--wait poll`) or sleeping on the
//! worker's event descriptor (`--wait block`: progress until nothing happens,
//! `ucp_worker_arm`, then `poll(2)`, as UCX's documentation of
//! `ucp_worker_get_efd` prescribes), with the peer's alerts checked every
//! [`PEER_ROUNDS`] rounds of spinning (every nap when sleeping) and the clock
//! every 1024 rounds; and what a request whose peer went away or fell silent
//! becomes.
//!
//! A timeout fails only the call that waited for a receive (the request stays
//! pending, or a blocking receive is cancelled); a send that makes no progress
//! within the timeout breaks the connection to its peer, as on the verbs
//! transport: UCX cannot cancel a send, so the endpoint is closed, which ends
//! every request on it.

use super::{context, failed, slots, sys, tagged, Gone, Request, State, Stop, UcxTransport, NAME};
use crate::UcxOp;
use ngauge_transport::{Access, Rank, Region, RequestId, TransportError, WaitMode};
use std::os::raw::c_void;
use std::time::{Duration, Instant};

/// How long teardown and a broken connection wait for UCX to let go of a
/// request.
const DRAIN: Duration = Duration::from_secs(2);
/// How long teardown waits for the goodbyes of peers still there.
const GOODBYE_WAIT: Duration = Duration::from_millis(500);
/// Longest sleep on the event descriptor before the clock is read again.
const NAP_MS: i32 = 100;
/// Rounds of spinning between checks of the peer's alerts: a round is one
/// `ucp_worker_progress` (tens of ns), so a peer that left is still noticed
/// within microseconds, and the round a ping-pong spins in is a load, the call
/// and a counter, as `ucx_perftest`'s (docs/findings/2026-11-28-ucx.md).
const PEER_ROUNDS: u32 = 64;
/// Rounds of `wait_all` between checks of every pending request's peer.
const SCAN_ROUNDS: u32 = 256;

impl UcxTransport {
    /// Progresses (per the wait mode) until `ready` returns a value, or `peer`
    /// (when given) is gone, or the timeout passes.
    #[inline(always)]
    pub(super) fn spin<R>(
        &mut self,
        peer: Option<Rank>,
        mut ready: impl FnMut(&mut Self) -> Option<R>,
    ) -> Result<R, Stop> {
        let mut rounds: u32 = 0;
        let mut start: Option<Instant> = None;
        loop {
            if let Some(r) = ready(self) {
                return Ok(r);
            }
            let block = match self.wait {
                WaitMode::Poll => {
                    self.progress_once();
                    false
                }
                WaitMode::Block => {
                    self.nap();
                    true
                }
            };
            rounds = rounds.wrapping_add(1);
            if !block && !rounds.is_multiple_of(PEER_ROUNDS) {
                continue;
            }
            if peer.is_some_and(|p| self.raised(p)) {
                return Err(Stop::Gone);
            }
            if block || rounds.is_multiple_of(1024) {
                let now = Instant::now();
                let waited = now - *start.get_or_insert(now);
                if waited > self.timeout {
                    return Err(Stop::Timeout(waited));
                }
            }
        }
    }

    /// One round of progress: the worker, and on the put path the rings.
    #[inline(always)]
    pub(super) fn progress_once(&mut self) {
        self.ctx.progress();
        if self.op == UcxOp::Put {
            self.ring_progress();
        }
    }

    /// Progresses; when nothing happened, arms the worker and sleeps on its event
    /// descriptor until something does (or for [`NAP_MS`]).
    fn nap(&mut self) {
        if self.ctx.progress() != 0 {
            return;
        }
        // SAFETY: the worker is live and was created with the wakeup feature
        // (block mode).
        let armed = unsafe { sys::ucp_worker_arm(self.ctx.worker) };
        if armed != sys::UCS_OK {
            // UCS_ERR_BUSY: events arrived meanwhile; progress again.
            return;
        }
        let Some(fd) = self.ctx.efd else { return };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; an interrupted or failed poll only ends the
        // nap early.
        unsafe { libc::poll(&mut pfd, 1, NAP_MS) };
    }

    /// Progresses until `status` reports the operation ended (not
    /// `UCS_INPROGRESS`), for at most [`DRAIN`]: teardown and abandoned requests.
    pub(super) fn drain(
        &mut self,
        mut status: impl FnMut() -> (sys::ucs_status_t, usize),
    ) -> Option<(sys::ucs_status_t, usize)> {
        let start = Instant::now();
        loop {
            let s = status();
            if s.0 != sys::UCS_INPROGRESS {
                return Some(s);
            }
            if start.elapsed() > DRAIN {
                return None;
            }
            self.ctx.progress();
        }
    }

    /// Whether `peer` is gone: it said goodbye, UCX reported its endpoint
    /// failed, or the connection to it was broken.
    #[inline(always)]
    pub(super) fn raised(&self, peer: Rank) -> bool {
        let a = &self.alerts[peer];
        a.status.get() != sys::UCS_OK || a.goodbye.get() || self.peers[peer].gone.is_some()
    }

    /// Records that `peer` is gone (why: its goodbye, UCX's error, else
    /// `reason`), and closes the endpoint to it, which ends every operation UCX
    /// still holds on it.
    pub(super) fn mark_gone(&mut self, peer: Rank, reason: Option<String>) {
        if self.peers[peer].gone.is_some() {
            return;
        }
        let a = &self.alerts[peer];
        let gone = if a.goodbye.get() {
            Gone::Closed
        } else if a.status.get() != sys::UCS_OK {
            Gone::Broken(context::status_text(a.status.get()))
        } else {
            Gone::Broken(reason.unwrap_or_else(|| "lost".into()))
        };
        self.peers[peer].gone = Some(gone);
        if let Some(ring) = self.ring.as_mut() {
            ring.forget(peer);
        }
        self.close_ep(peer, true);
    }

    /// Closes the endpoint to `peer` (`force`: without flushing) and waits, at
    /// most [`DRAIN`], for the close to finish.
    pub(super) fn close_ep(&mut self, peer: Rank, force: bool) {
        let ep = std::mem::replace(&mut self.peers[peer].ep, std::ptr::null_mut());
        if ep.is_null() {
            return;
        }
        // SAFETY: all-zero is a valid ucp_request_param_t; only the flags are set.
        let mut p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = if force {
            sys::UCP_EP_CLOSE_FLAG_FORCE
        } else {
            0
        };
        // SAFETY: `ep` is a live endpoint of our worker, closed once (the field
        // was cleared above).
        let request = unsafe { sys::ucp_ep_close_nbx(ep, &p) };
        if sys::ptr_is_ptr(request) {
            // SAFETY: `request` is UCX's own request of the close, checked until
            // it ends, then freed once.
            self.drain(|| (unsafe { sys::ucp_request_check_status(request) }, 0));
            // Freed even when the close has not ended (UCX releases it when it
            // does, at the latest when the worker is destroyed, which asserts
            // that its pending closes were freed).
            // SAFETY: as above.
            unsafe { sys::ucp_request_free(request) };
        }
    }

    /// The error of an operation `op` with `peer`, which is gone.
    #[cold]
    pub(super) fn gone_error(&self, peer: Rank, op: &'static str) -> TransportError {
        match &self.peers[peer].gone {
            Some(Gone::Broken(why)) => TransportError::Io {
                transport: NAME,
                peer,
                op,
                source: std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why.clone()),
            },
            _ => TransportError::PeerClosed {
                transport: NAME,
                peer,
                op,
            },
        }
    }

    /// [`TransportError::UnknownRequest`] unless `request` is pending.
    pub(super) fn known(&self, request: RequestId) -> Result<(), TransportError> {
        match self.requests.get(request) {
            Some(_) => Ok(()),
            None => Err(TransportError::UnknownRequest {
                transport: NAME,
                request,
            }),
        }
    }

    /// `isend` (`Access::Read`) or `irecv` (`Access::Write`).
    pub(super) fn start(
        &mut self,
        peer: Rank,
        region: Region,
        access: Access,
    ) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        match self.op {
            UcxOp::Send => self.tag_start(peer, region, access),
            UcxOp::Put => self.ring_start(peer, region, access),
        }
    }

    /// A request with `peer`, which is gone, that fails when waited for (a
    /// receive posted after the peer left, as on the other transports: the
    /// error comes from `wait`, and the region is held until then).
    pub(super) fn start_failed(
        &mut self,
        peer: Rank,
        region: Region,
        access: Access,
    ) -> Result<RequestId, TransportError> {
        let op = if access == Access::Write {
            "recv"
        } else {
            "send"
        };
        let error = self.gone_error(peer, op);
        self.memory.hold(region, access)?;
        Ok(self.requests.insert(Request {
            peer,
            region,
            access,
            state: State::Done(Err(error)),
        }))
    }

    /// Whether `request` has finished (it stays in the table); once it has, it
    /// stays finished until it is retired.
    #[inline]
    fn finished(&self, request: RequestId) -> bool {
        match self.requests.get(request).map(|r| &r.state) {
            // SAFETY: request memory posted armed, which UCX holds or completed
            // and which is not yet reused.
            Some(State::Ucx(memory)) => unsafe { slots::completed(*memory).is_some() },
            Some(State::Ring) => false,
            Some(State::Done(_)) | None => true,
        }
    }

    /// Retires `request` if it finished: `Some` with its outcome (`Ok` for one
    /// already retired), `None` while it is pending.
    #[inline]
    fn retire_finished(&mut self, request: RequestId) -> Option<Result<(), TransportError>> {
        if self.requests.get(request).is_none() {
            Some(Ok(()))
        } else if self.finished(request) {
            Some(self.retire(request))
        } else {
            None
        }
    }

    /// Retires `request` if it finished: its outcome, or `Ok(false)`.
    pub(super) fn try_retire(&mut self, request: RequestId) -> Result<bool, TransportError> {
        let Some(r) = self.requests.get(request) else {
            return Err(TransportError::UnknownRequest {
                transport: NAME,
                request,
            });
        };
        let peer = r.peer;
        if !self.finished(request) {
            if self.raised(peer) {
                return self.resolve(request, Stop::Gone).map(|()| true);
            }
            return Ok(false);
        }
        self.retire(request).map(|()| true)
    }

    /// Removes a finished request, gives back its region and request memory, and
    /// returns its outcome.
    fn retire(&mut self, request: RequestId) -> Result<(), TransportError> {
        let r = self.requests.remove(request).expect("a known request");
        self.memory.release(r.region, r.access);
        let recv = r.access == Access::Write;
        match r.state {
            State::Done(outcome) => outcome,
            State::Ucx(memory) => {
                let (status, got) = Self::outcome(memory);
                self.slots.give(memory);
                if recv {
                    tagged::received("ucp_tag_recv_nbx", r.peer, r.region.len, status, got)
                } else if status == sys::UCS_OK {
                    Ok(())
                } else {
                    Err(failed("ucp_tag_send_nbx", r.peer, "send", status))
                }
            }
            State::Ring => unreachable!("the put path finishes its requests"),
        }
    }

    /// Ends `request`, which `stop` interrupted (see [`UcxTransport::abandon`]
    /// and the module docs): retired with its error, or kept when a receive
    /// timed out.
    fn resolve(&mut self, request: RequestId, stop: Stop) -> Result<(), TransportError> {
        let r = self.requests.get(request).expect("a known request");
        let (peer, recv) = (r.peer, r.access == Access::Write);
        let op = if recv { "recv" } else { "send" };
        if let (Stop::Timeout(after), true) = (stop, recv) {
            return Err(TransportError::Timeout {
                transport: NAME,
                peer,
                op,
                after,
            });
        }
        match r.state {
            State::Ucx(memory) => match self.abandon(memory, peer, recv, stop, op) {
                Ok(_) => self.retire(request),
                Err(e) => {
                    // The request memory went back (or stays UCX's): forget it.
                    let r = self.requests.get_mut(request).expect("known");
                    r.state = State::Done(Err(e));
                    self.retire(request)
                }
            },
            State::Ring => {
                if let Stop::Gone = stop {
                    self.mark_gone(peer, None);
                } else {
                    self.mark_gone(peer, Some("a send made no progress".into()));
                }
                let e = self.gone_error(peer, op);
                self.ring_cancel(request);
                let r = self.requests.get_mut(request).expect("known");
                r.state = State::Done(Err(e));
                self.retire(request)
            }
            State::Done(_) => self.retire(request),
        }
    }

    /// `wait`: until `request` finishes, its peer is gone, or the timeout.
    pub(super) fn wait_for(&mut self, request: RequestId) -> Result<(), TransportError> {
        let Some(r) = self.requests.get(request) else {
            return self.known(request);
        };
        let peer = r.peer;
        let waited = match r.state {
            State::Ucx(memory) => self.spin(Some(peer), |_| {
                // SAFETY: request memory posted armed, which UCX holds or
                // completed and which stays the request's until it is retired.
                unsafe { slots::completed(memory) }.map(drop)
            }),
            _ => self.spin(Some(peer), |t| t.finished(request).then_some(())),
        };
        match waited {
            Ok(()) => self.retire(request),
            Err(stop) => self.resolve(request, stop),
        }
    }

    /// A blocking receive through a request (the put path): as `wait`, but a
    /// timeout takes the request back.
    pub(super) fn wait_blocking_recv(&mut self, request: RequestId) -> Result<(), TransportError> {
        let outcome = self.wait_for(request);
        if let Err(TransportError::Timeout { .. }) = outcome {
            self.ring_cancel(request);
            if let Some(r) = self.requests.get_mut(request) {
                r.state = State::Done(Ok(()));
                let _ = self.retire(request);
            }
        }
        outcome
    }

    /// `wait_all`: progresses every request together until all finished, and
    /// retires each as soon as it has.
    ///
    /// Requests finish in about the order they were started and stay finished,
    /// so a round tests the first one not yet retired and one more beyond it, in
    /// turn: a window of w receives costs about w tests in all rather than w per
    /// round of progress (`ucx_perftest` counts completions in a callback), and
    /// a window of sends is retired while its reply is awaited, not after it
    /// arrived. Whether a peer went away is checked every round for the first
    /// request, and for all the others every [`SCAN_ROUNDS`] rounds, each time in
    /// the order given. The error returned is the first in that order.
    pub(super) fn wait_for_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        for &r in requests {
            self.known(r)?;
        }
        let (mut first, mut ahead, mut rounds) = (0, 0, 0u32);
        let mut failed: Option<(usize, TransportError)> = None;
        let waited = self.spin(None, |t| {
            while let Some(outcome) = requests.get(first).and_then(|&r| t.retire_finished(r)) {
                keep_first(&mut failed, first, outcome);
                first += 1;
            }
            if first == requests.len() {
                return Some(Ok(()));
            }
            ahead = if ahead > first && ahead + 1 < requests.len() {
                ahead + 1
            } else {
                first + 1
            };
            if let Some(outcome) = requests.get(ahead).and_then(|&r| t.retire_finished(r)) {
                keep_first(&mut failed, ahead, outcome);
            }
            let pending = &requests[first..];
            rounds = rounds.wrapping_add(1);
            let scan = if rounds.is_multiple_of(SCAN_ROUNDS) {
                pending
            } else {
                &pending[..1]
            };
            scan.iter()
                .find(|&&r| !t.finished(r) && t.raised(t.requests.get(r).expect("known").peer))
                .map(|&r| Err((r, Stop::Gone)))
        });
        match waited {
            Ok(Ok(())) => failed.map_or(Ok(()), |(_, e)| Err(e)),
            Ok(Err((r, stop))) => self.resolve(r, stop),
            // The last round of progress may have finished them all: then the
            // timeout is no one's, and they are retired as usual.
            Err(stop) => match requests.iter().copied().find(|&r| !self.finished(r)) {
                Some(r) => self.resolve(r, stop),
                None => {
                    for (i, &r) in requests.iter().enumerate() {
                        if let Some(outcome) = self.retire_finished(r) {
                            keep_first(&mut failed, i, outcome);
                        }
                    }
                    failed.map_or(Ok(()), |(_, e)| Err(e))
                }
            },
        }
    }

    /// Teardown (drop): a goodbye to every peer still there, every pending
    /// receive cancelled, the endpoints closed, the worker destroyed, then the
    /// memory unmapped; the context goes last (a field).
    pub(super) fn teardown(&mut self) {
        let mut goodbyes: Vec<*mut c_void> = Vec::new();
        for peer in 0..self.size {
            if peer == self.rank || self.peers[peer].gone.is_some() || self.peers[peer].ep.is_null()
            {
                continue;
            }
            let request = self.slots.take();
            let ep = self.peers[peer].ep;
            match self.post_send(
                ep,
                std::ptr::null_mut(),
                0,
                crate::tag::Kind::Close,
                request,
                peer,
            ) {
                Ok(true) => goodbyes.push(request),
                _ => self.slots.give(request),
            }
        }
        for request in goodbyes {
            self.drain(|| Self::outcome(request));
        }
        // Peers tearing down at the same time say goodbye too: waiting a moment
        // for theirs keeps it from arriving unmatched at a destroyed worker.
        let start = Instant::now();
        let waiting = |t: &Self| {
            (0..t.size).any(|p| p != t.rank && t.peers[p].gone.is_none() && !t.raised(p))
        };
        while waiting(self) && start.elapsed() < GOODBYE_WAIT {
            if self.ctx.progress() == 0 {
                std::thread::yield_now();
            }
        }
        for peer in 0..self.size {
            let goodbye = std::mem::replace(&mut self.peers[peer].goodbye, std::ptr::null_mut());
            if !goodbye.is_null() {
                // SAFETY: the worker is live and `goodbye` a receive it holds or
                // completed; cancelling a completed one does nothing.
                unsafe { sys::ucp_request_cancel(self.ctx.worker, goodbye) };
                self.drain(|| Self::outcome(goodbye));
            }
        }
        for id in self.requests.ids() {
            if let Some(r) = self.requests.get(id) {
                if let (State::Ucx(memory), Access::Write) = (&r.state, r.access) {
                    let memory = *memory;
                    // SAFETY: as above, for a pending receive.
                    unsafe { sys::ucp_request_cancel(self.ctx.worker, memory) };
                    self.drain(|| Self::outcome(memory));
                }
            }
        }
        if let Some(ring) = self.ring.as_mut() {
            ring.destroy_rkeys();
        }
        for peer in 0..self.size {
            // No flush towards a peer that left: it would wait for a timeout.
            let left = self.alerts[peer].goodbye.get();
            self.close_ep(peer, left);
        }
        self.ctx.destroy_worker();
        self.ring = None;
        self.memory.clear();
    }
}

/// Keeps in `failed` the error of the request at `index` when it comes before
/// the one kept.
fn keep_first(
    failed: &mut Option<(usize, TransportError)>,
    index: usize,
    outcome: Result<(), TransportError>,
) {
    if let Err(e) = outcome {
        if failed.as_ref().is_none_or(|(kept, _)| index < *kept) {
            *failed = Some((index, e));
        }
    }
}
