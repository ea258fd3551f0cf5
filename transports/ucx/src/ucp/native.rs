//! [`Transport::native_round_trips`](ngauge_transport::Transport::native_round_trips)
//! on the tag path in poll mode: the bounds, holds and peer are checked once,
//! then each round trip is the calls `ucx_perftest -t tag_lat` times (a
//! `ucp_tag_send_nbx`, progress until it completes, a `ucp_tag_recv_nbx`,
//! progress until it completes) between two `rdtscp; lfence` readings.

use super::UcxTransport;
use crate::UcxOp;
use ngauge_transport::{Access, NativeRole, Rank, Region, TransportError, WaitMode};

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
            NativeRole::Initiator { warmup, ticks } => {
                for _ in 0..warmup {
                    self.send_raw(ep, peer, sptr, slen)?;
                    self.recv_raw(peer, rptr, rlen)?;
                }
                for slot in ticks.iter_mut() {
                    let t0 = tsc();
                    let sent = self.send_raw(ep, peer, sptr, slen);
                    let got = sent.and_then(|()| self.recv_raw(peer, rptr, rlen));
                    let t1 = tsc();
                    got?;
                    *slot = t1 - t0;
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
}
