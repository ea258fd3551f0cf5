//! [`Transport::native_round_trips`](ngauge_transport::Transport::native_round_trips)
//! on the tag path in poll mode: the bounds, holds and peer are checked once,
//! then each round trip is the calls `ucx_perftest -t tag_lat` times (a
//! `ucp_tag_send_nbx`, progress until it completes, a `ucp_tag_recv_nbx`,
//! progress until it completes) between two readings of the time-stamp counter,
//! `rdtscp; lfence` or a plain `rdtsc` as the initiator's role says (the job's
//! `--timer`).
//!
//! [`Transport::native_stream`](ngauge_transport::Transport::native_stream) on
//! the same path, checked once the same way: the loop of `ucx_perftest -t
//! tag_bw` (`run_stream_uni`): the sender posts `ucp_tag_send_nbx` with at most
//! `window` in flight, progressing while the window is full; the receiver keeps
//! `window` `ucp_tag_recv_nbx` posted and reposts each as it completes. Both
//! count completions by callback into request memory taken before the loop
//! ([`super::slots`]), so the loop allocates nothing and holds no buffer.

use super::slots::{self, RunSlot};
use super::{failed, sys, tagged, UcxTransport};
use crate::tag::Kind;
use crate::UcxOp;
use ngauge_transport::{Access, NativeRole, Rank, Region, TransportError, TscRead, WaitMode};
use std::os::raw::c_void;

/// Reads the time-stamp counter as ngauge's clock does (`rdtscp; lfence`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc() -> u64 {
    let mut aux = 0u32;
    // SAFETY: rdtscp and lfence have no memory effects besides writing `aux`, a
    // valid local; callers checked that the CPU has rdtscp (`has_rdtscp`).
    unsafe {
        let t = core::arch::x86_64::__rdtscp(&mut aux);
        core::arch::x86_64::_mm_lfence();
        t
    }
}

/// Reads the time-stamp counter with a plain `rdtsc`, as ngauge's clock does
/// under `--timer rdtsc` (and `ucx_perftest`'s `ucs_get_time`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tsc_plain() -> u64 {
    // SAFETY: rdtsc has no memory effects; every x86-64 CPU has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// CPUID leaf 0x8000_0001, EDX bit 27: the rdtscp instruction.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)]
fn has_rdtscp() -> bool {
    // SAFETY: cpuid exists on every x86-64 CPU and has no memory effects; the
    // highest extended leaf is checked before 0x8000_0001 is read.
    unsafe {
        let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
        max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 27) != 0
    }
}

impl UcxTransport {
    /// See the module docs: `None` on the put path, in block mode and where
    /// there is no rdtscp (nothing sent then).
    pub(super) fn native_loop(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Option<Result<(), TransportError>> {
        #[cfg(target_arch = "x86_64")]
        {
            if self.op != UcxOp::Send || self.wait != WaitMode::Poll || !has_rdtscp() {
                return None;
            }
            Some(self.timed_loop(peer, send, recv, role))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (peer, send, recv, role);
            None
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn timed_loop(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        // Both regions checked before the loop; they may overlap (one buffer):
        // the send and the receive never run at once.
        let rptr = self.memory.ptr(recv, Access::Write)?;
        let sptr = self.memory.ptr(send, Access::Read)?;
        let ep = self.live_ep(peer, "send")?;
        let (slen, rlen) = (send.len, recv.len);
        match role {
            NativeRole::Initiator {
                warmup,
                ticks,
                read,
            } => {
                for _ in 0..warmup {
                    self.send_raw(ep, peer, sptr, slen)?;
                    self.recv_raw(peer, rptr, rlen)?;
                }
                // One loop per reading, so the timed region holds no branch on it.
                match read {
                    TscRead::Rdtscp => {
                        self.timed_round_trips(ep, peer, (sptr, slen), (rptr, rlen), ticks, tsc)?
                    }
                    TscRead::Rdtsc => self.timed_round_trips(
                        ep,
                        peer,
                        (sptr, slen),
                        (rptr, rlen),
                        ticks,
                        tsc_plain,
                    )?,
                }
            }
            NativeRole::Responder { round_trips } => {
                for _ in 0..round_trips {
                    self.recv_raw(peer, rptr, rlen)?;
                    self.send_raw(ep, peer, sptr, slen)?;
                }
            }
        }
        Ok(())
    }

    /// The initiator's timed round trips, each between two readings of `now`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn timed_round_trips(
        &mut self,
        ep: sys::ucp_ep_h,
        peer: Rank,
        (sptr, slen): (*mut u8, usize),
        (rptr, rlen): (*mut u8, usize),
        ticks: &mut [u64],
        now: impl Fn() -> u64,
    ) -> Result<(), TransportError> {
        for slot in ticks.iter_mut() {
            let t0 = now();
            let sent = self.send_raw(ep, peer, sptr, slen);
            let got = sent.and_then(|()| self.recv_raw(peer, rptr, rlen));
            let t1 = now();
            got?;
            *slot = t1 - t0;
        }
        Ok(())
    }
}

impl UcxTransport {
    /// See the module docs: `None` on the put path and in block mode (nothing
    /// sent then).
    pub(super) fn native_stream_run(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        window: usize,
        messages: usize,
        sender: bool,
    ) -> Option<Result<(), TransportError>> {
        if self.op != UcxOp::Send || self.wait != WaitMode::Poll {
            return None;
        }
        Some(self.stream(peer, send, recv, window.max(1), messages, sender))
    }

    fn stream(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        window: usize,
        messages: usize,
        sender: bool,
    ) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        let slots = window.min(messages);
        // The receiver's slots side by side, all checked at once; the ack and
        // the messages never run at once, so the regions may overlap.
        let span = if sender {
            recv
        } else {
            Region {
                len: recv.len.saturating_mul(slots),
                ..recv
            }
        };
        let rptr = self.memory.ptr(span, Access::Write)?;
        let sptr = self.memory.ptr(send, Access::Read)?;
        let ep = self.live_ep(peer, "send")?;
        let mut run = self.slots.take_run(slots);
        let streamed = if sender {
            self.send_stream(ep, peer, sptr, send.len, messages, &mut run)
        } else {
            self.recv_stream(peer, rptr, recv.len, messages, &mut run)
        };
        if streamed.is_err() {
            self.end_run(&mut run, !sender);
        }
        self.slots.give_run(run);
        streamed?;
        if sender {
            self.recv_raw(peer, rptr, recv.len)
        } else {
            self.send_raw(ep, peer, sptr, send.len)
        }
    }

    /// `messages` sends of `len` bytes at `ptr`, message `i` in `run[i % w]`.
    #[inline(always)]
    fn send_stream(
        &mut self,
        ep: sys::ucp_ep_h,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
        messages: usize,
        run: &mut [RunSlot],
    ) -> Result<(), TransportError> {
        let mut k = 0;
        for _ in 0..messages {
            if run[k].1 {
                self.settle(peer, &mut run[k], false, len)?;
            }
            run[k].1 = self.post_send(ep, ptr, len, Kind::Data, run[k].0, peer)?;
            k = if k + 1 == run.len() { 0 } else { k + 1 };
        }
        for entry in run.iter_mut().filter(|e| e.1) {
            self.settle(peer, entry, false, len)?;
        }
        Ok(())
    }

    /// `messages` receives of exactly `len` bytes, message `i` into slot `i % w`
    /// at `ptr + (i % w) * len` with request memory `run[i % w]`: the slots are
    /// posted in order and each is reposted as it completes, so the next
    /// message matches the oldest.
    #[inline(always)]
    fn recv_stream(
        &mut self,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
        messages: usize,
        run: &mut [RunSlot],
    ) -> Result<(), TransportError> {
        let w = run.len();
        for (k, entry) in run.iter_mut().enumerate() {
            self.post_slot(peer, ptr.wrapping_add(k * len), len, entry)?;
        }
        let mut k = 0;
        for i in 0..messages {
            self.settle(peer, &mut run[k], true, len)?;
            if i + w < messages {
                self.post_slot(peer, ptr.wrapping_add(k * len), len, &mut run[k])?;
            }
            k = if k + 1 == w { 0 } else { k + 1 };
        }
        Ok(())
    }

    #[inline(always)]
    fn post_slot(
        &mut self,
        peer: Rank,
        ptr: *mut u8,
        len: usize,
        entry: &mut RunSlot,
    ) -> Result<(), TransportError> {
        self.post_recv(peer, ptr, len, entry.0)
            .map_err(|status| failed("ucp_tag_recv_nbx", peer, "recv", status))?;
        entry.1 = true;
        Ok(())
    }

    /// Progresses until the operation UCX holds in `entry` ends (a timeout or
    /// a lost peer abandons it, see `abandon`), and checks its outcome.
    #[inline(always)]
    fn settle(
        &mut self,
        peer: Rank,
        entry: &mut RunSlot,
        recv: bool,
        len: usize,
    ) -> Result<(), TransportError> {
        let request = entry.0;
        // SAFETY: `request` was armed when it was posted, and UCX holds it.
        let (status, got) = match self.spin(Some(peer), |_| unsafe { slots::completed(request) }) {
            Ok(done) => done,
            Err(stop) => {
                let op = if recv { "recv" } else { "send" };
                match self.abandon(request, peer, recv, stop, op) {
                    Ok(done) => done,
                    Err(e) => {
                        *entry = (std::ptr::null_mut(), false);
                        return Err(e);
                    }
                }
            }
        };
        entry.1 = false;
        if recv {
            tagged::received("ucp_tag_recv_nbx", peer, len, status, got)
        } else if status == sys::UCS_OK {
            Ok(())
        } else {
            Err(failed("ucp_tag_send_nbx", peer, "send", status))
        }
    }

    /// After a run that failed: cancels the receives UCX still holds in `run`
    /// and waits for every held operation to let go of its request memory
    /// (what it keeps is marked null and not given back).
    #[cold]
    fn end_run(&mut self, run: &mut [RunSlot], recv: bool) {
        for entry in run.iter_mut().filter(|e| e.1) {
            let request: *mut c_void = entry.0;
            if recv {
                // SAFETY: the worker is live and `request` a receive it holds.
                unsafe { sys::ucp_request_cancel(self.ctx.worker, request) };
            }
            *entry = match self.drain(|| Self::outcome(request)) {
                Some(_) => (request, false),
                None => (std::ptr::null_mut(), false),
            };
        }
    }
}
