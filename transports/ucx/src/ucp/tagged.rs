//! The two-sided path: `ucp_tag_send_nbx` and `ucp_tag_recv_nbx` (see the crate
//! docs for why the tag API), each started with request memory of ours
//! ([`super::slots`]) and a completion callback that writes the outcome into
//! it; an operation that completes at once returns `UCS_OK` and hands its
//! memory straight back.
//!
//! The blocking calls and the native loop share [`UcxTransport::send_raw`] and
//! [`UcxTransport::recv_raw`], which post one operation and wait for it; the
//! nonblocking ones keep the request in the table until `test` or `wait`
//! retires it.

use super::{failed, slots, sys, Request, State, Stop, UcxTransport, NAME};
use crate::tag::{self, Kind};
use ngauge_transport::{Access, Rank, Region, RequestId, TransportError};
use std::os::raw::c_void;
use std::ptr::NonNull;

/// Operation parameters with caller-provided request memory `request`.
#[inline(always)]
pub(super) fn params(request: *mut c_void) -> sys::ucp_request_param_t {
    // SAFETY: all-zero is a valid ucp_request_param_t (integers, null pointers,
    // unions of pointers and optional callbacks); only the request is marked.
    let mut p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
    p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_REQUEST;
    p.request = request;
    p
}

/// The pointer UCX gets for `ptr` (never null, even for 0 bytes).
#[inline(always)]
fn buffer(ptr: *mut u8) -> *mut c_void {
    if ptr.is_null() {
        NonNull::<u64>::dangling().as_ptr().cast()
    } else {
        ptr.cast()
    }
}

/// A finished receive's outcome: its status and the length that arrived,
/// checked against the `expected` size.
pub(super) fn received(
    call: &'static str,
    peer: Rank,
    expected: usize,
    status: sys::ucs_status_t,
    got: usize,
) -> Result<(), TransportError> {
    match status {
        sys::UCS_OK if got == expected => Ok(()),
        sys::UCS_OK => Err(mismatch(peer, expected, got)),
        sys::UCS_ERR_MESSAGE_TRUNCATED if got > expected => Err(mismatch(peer, expected, got)),
        _ => Err(failed(call, peer, "recv", status)),
    }
}

#[cold]
fn mismatch(peer: Rank, expected: usize, got: usize) -> TransportError {
    TransportError::SizeMismatch {
        transport: NAME,
        peer,
        expected_bytes: expected,
        got_bytes: got,
    }
}

impl UcxTransport {
    /// The endpoint to `peer` for `op`, or the error naming it when it is gone.
    #[inline]
    pub(super) fn live_ep(
        &self,
        peer: Rank,
        op: &'static str,
    ) -> Result<sys::ucp_ep_h, TransportError> {
        let p = &self.peers[peer];
        if p.gone.is_some() || p.ep.is_null() {
            return Err(self.gone_error(peer, op));
        }
        Ok(p.ep)
    }

    /// Starts a send of `len` bytes at `ptr` to `peer` with request memory
    /// `request`: `Ok(true)` when UCX holds it, `Ok(false)` when it completed.
    #[inline(always)]
    pub(super) fn post_send(
        &self,
        ep: sys::ucp_ep_h,
        ptr: *mut u8,
        len: usize,
        kind: Kind,
        request: *mut c_void,
        peer: Rank,
    ) -> Result<bool, TransportError> {
        let mut p = params(request);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_CALLBACK;
        p.cb.send = Some(slots::send_done);
        // SAFETY: `ep` is a live endpoint of our worker; [ptr, ptr+len) is memory
        // of a mapped buffer that the caller keeps valid and unwritten until the
        // send completes (a hold, or a blocking wait); `request` is free request
        // memory of UCP's request size (slots), armed before UCX holds it.
        let status = unsafe {
            slots::arm(request);
            sys::ucp_tag_send_nbx(ep, buffer(ptr), len, tag::tag(kind, self.rank), &p)
        };
        if status.is_null() {
            Ok(false)
        } else if sys::ptr_is_err(status) {
            Err(failed(
                "ucp_tag_send_nbx",
                peer,
                "send",
                sys::ptr_status(status),
            ))
        } else {
            Ok(true)
        }
    }

    /// Starts a receive of `len` bytes into `ptr` from `peer` with request memory
    /// `request`, which UCX then holds until [`Self::outcome`] reports the
    /// receive ended; or the status it failed with. Immediate completion is
    /// denied (`UCP_OP_ATTR_FLAG_NO_IMM_CMPL`): UCX 1.13 leaves
    /// `recv_info.tag_info` unwritten when it completes a receive with
    /// caller-provided request memory at once, so the length always comes
    /// through the callback.
    #[inline(always)]
    pub(super) fn post_recv(
        &self,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
        request: *mut c_void,
    ) -> Result<(), sys::ucs_status_t> {
        let mut p = params(request);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FLAG_NO_IMM_CMPL | sys::UCP_OP_ATTR_FIELD_CALLBACK;
        p.cb.recv = Some(slots::recv_done);
        // SAFETY: the worker is live; [ptr, ptr+len) is memory of a mapped buffer
        // the caller keeps valid and untouched until the receive completes (a
        // hold, or a blocking wait); `request` is free request memory, armed
        // before UCX holds it (its callback may run before the call returns).
        let status = unsafe {
            slots::arm(request);
            sys::ucp_tag_recv_nbx(
                self.ctx.worker,
                buffer(ptr),
                len,
                tag::tag(Kind::Data, peer),
                tag::FULL_MASK,
                &p,
            )
        };
        if sys::ptr_is_err(status) {
            Err(sys::ptr_status(status))
        } else {
            Ok(())
        }
    }

    /// Whether a message from `peer` waits unreceived in UCX (`ucp_tag_probe_nb`):
    /// one sent before its goodbye is still delivered.
    pub(super) fn has_unexpected(&self, peer: Rank) -> bool {
        let mut info = sys::ucp_tag_recv_info_t {
            sender_tag: 0,
            length: 0,
        };
        // SAFETY: the worker is live; without `remove` the probe only looks.
        let msg = unsafe {
            sys::ucp_tag_probe_nb(
                self.ctx.worker,
                tag::tag(Kind::Data, peer),
                tag::FULL_MASK,
                0,
                &mut info,
            )
        };
        !msg.is_null()
    }

    /// The status of an operation UCX holds or completed in request memory
    /// `request` (posted armed, with a callback that fills it), and for a
    /// receive the length that arrived; `UCS_INPROGRESS` before.
    #[inline(always)]
    pub(super) fn outcome(request: *mut c_void) -> (sys::ucs_status_t, usize) {
        // SAFETY: `request` was armed when its operation was posted, and UCX
        // holds or completed it.
        unsafe { slots::completed(request) }.unwrap_or((sys::UCS_INPROGRESS, 0))
    }

    /// Sends `len` bytes at `ptr` to `peer` and waits until the memory may be
    /// reused (the blocking send and the native loop).
    #[inline(always)]
    pub(super) fn send_raw(
        &mut self,
        ep: sys::ucp_ep_h,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
    ) -> Result<(), TransportError> {
        let request = self.slots.take();
        match self.post_send(ep, ptr, len, Kind::Data, request, peer) {
            Ok(false) => {
                self.slots.give(request);
                Ok(())
            }
            Err(e) => {
                self.slots.give(request);
                Err(e)
            }
            Ok(true) => self.finish_raw(request, peer, false, len).map(drop),
        }
    }

    /// Receives one message of exactly `len` bytes from `peer` into `ptr` (the
    /// blocking receive and the native loop).
    #[inline(always)]
    pub(super) fn recv_raw(
        &mut self,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
    ) -> Result<(), TransportError> {
        if self.peers[peer].gone.is_some() && !self.has_unexpected(peer) {
            return Err(self.gone_error(peer, "recv"));
        }
        let request = self.slots.take();
        match self.post_recv(peer, ptr, len, request) {
            Ok(()) => self.finish_raw(request, peer, true, len),
            Err(status) => {
                self.slots.give(request);
                Err(failed("ucp_tag_recv_nbx", peer, "recv", status))
            }
        }
    }

    /// Waits for the blocking operation UCX holds in `request`; a receive that
    /// times out is cancelled (it takes its request back), a send that does
    /// breaks the connection to `peer` (the memory it reads stays UCX's until
    /// the endpoint is closed).
    #[cold]
    #[inline(never)]
    fn finish_raw(
        &mut self,
        request: *mut c_void,
        peer: Rank,
        recv: bool,
        len: usize,
    ) -> Result<(), TransportError> {
        let op = if recv { "recv" } else { "send" };
        // SAFETY: `request` was armed when it was posted, and UCX holds it.
        let waited = self.spin(Some(peer), |_| unsafe { slots::completed(request) });
        let (status, got) = match waited {
            Ok(done) => done,
            Err(stop) => self.abandon(request, peer, recv, stop, op)?,
        };
        self.slots.give(request);
        if recv {
            received("ucp_tag_recv_nbx", peer, len, status, got)
        } else if status == sys::UCS_OK {
            Ok(())
        } else {
            Err(failed("ucp_tag_send_nbx", peer, op, status))
        }
    }

    /// Ends an operation UCX holds in `request` that `stop` interrupted: cancels
    /// a receive or, for a send or a peer that is gone, closes the endpoint,
    /// then waits for UCX to let go of the request. `Ok` with its final status
    /// when the operation finished after all (the data came first); the error
    /// `stop` stands for otherwise (the request memory is then given back by the
    /// caller only on `Ok`; on `Err` it was given back here or stays with UCX).
    pub(super) fn abandon(
        &mut self,
        request: *mut c_void,
        peer: Rank,
        recv: bool,
        stop: Stop,
        op: &'static str,
    ) -> Result<(sys::ucs_status_t, usize), TransportError> {
        let error = match stop {
            Stop::Timeout(after) => TransportError::Timeout {
                transport: NAME,
                peer,
                op,
                after,
            },
            Stop::Gone => {
                self.mark_gone(peer, None);
                self.gone_error(peer, op)
            }
        };
        if recv {
            // SAFETY: the worker is live and `request` a receive it holds.
            unsafe { sys::ucp_request_cancel(self.ctx.worker, request) };
        } else {
            self.mark_gone(peer, Some(format!("a send made no progress ({error})")));
        }
        match self.drain(|| Self::outcome(request)) {
            Some((sys::UCS_OK, got)) => Ok((sys::UCS_OK, got)),
            Some(_) => {
                self.slots.give(request);
                Err(error)
            }
            None => Err(error),
        }
    }

    /// [`super::Transport::send`] on the tag path.
    #[inline]
    pub(super) fn tag_send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        let ptr = self.memory.ptr(region, Access::Read)?;
        let ep = self.live_ep(peer, "send")?;
        self.send_raw(ep, peer, ptr, region.len)
    }

    /// [`super::Transport::recv`] on the tag path.
    #[inline]
    pub(super) fn tag_recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        let ptr = self.memory.ptr(region, Access::Write)?;
        self.recv_raw(peer, ptr, region.len)
    }

    /// `isend` or `irecv` on the tag path: the region held until the request is
    /// retired.
    pub(super) fn tag_start(
        &mut self,
        peer: Rank,
        region: Region,
        access: Access,
    ) -> Result<RequestId, TransportError> {
        let recv = access == Access::Write;
        let ep = if recv {
            if self.peers[peer].gone.is_some() && !self.has_unexpected(peer) {
                return self.start_failed(peer, region, access);
            }
            std::ptr::null_mut()
        } else {
            self.live_ep(peer, "send")?
        };
        let ptr = self.memory.hold(region, access)?;
        let request = self.slots.take();
        let started = if recv {
            self.post_recv(peer, ptr, region.len, request)
                .map(|()| None)
                .map_err(|status| failed("ucp_tag_recv_nbx", peer, "recv", status))
        } else {
            self.post_send(ep, ptr, region.len, Kind::Data, request, peer)
                .map(|held| (!held).then_some(Ok(())))
        };
        let state = match started {
            Ok(None) => State::Ucx(request),
            Ok(Some(outcome)) => {
                self.slots.give(request);
                State::Done(outcome)
            }
            Err(e) => {
                self.slots.give(request);
                self.memory.release(region, access);
                return Err(e);
            }
        };
        Ok(self.requests.insert(Request {
            peer,
            region,
            access,
            state,
        }))
    }
}
