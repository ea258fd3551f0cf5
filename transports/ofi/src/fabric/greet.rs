//! Hellos: a 0-byte message each way between every pair of ranks, while all of
//! them progress their completion queues, at open and in `settle`. Providers
//! under `ofi_rxm` and `ofi_rxd` (and `shm`'s peer mapping) set a connection up
//! on the first message to a peer, and `ofi_rxd` completes a send only when the
//! receiver's acknowledgement arrives: both need the peer to read its queue. A
//! first message sent just before a rank blocks on the control channel (a
//! pattern's last answer, a goodbye at drop) would wait there with its peer, and
//! one in a timed region would time the setup; a rank that leaves for the control
//! channel right after its last receive would leave its peer's send pending. So
//! hellos at open set every connection up, and `settle` (before a control-plane
//! wait that follows traffic) exchanges hellos with the peers this rank has
//! completed an operation with since the last ones: a rank leaves only once its
//! hellos have completed (acknowledged after all it sent before them) and every
//! such peer's hello has arrived. Both ranks of a pair settle after their
//! traffic has completed, as the patterns do; ranks that did not talk, or whose
//! operations are still pending, exchange nothing.

use super::{ffi, setup_error, Ctx, OfiTransport, GREET, GREETED, TAG_GREET};
use ngauge_transport::TransportError;
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::time::Instant;

impl OfiTransport {
    /// Sends a hello to every peer still there (`all`), or to those with an
    /// operation completed since the last hellos, and waits for theirs and for its own to complete
    /// (at most the peer timeout).
    pub(super) fn greet(&mut self, all: bool) -> Result<(), TransportError> {
        let me = self.rank;
        let peers: Vec<usize> = (0..self.size)
            .filter(|&p| p != me && !self.peers[p].closed && (all || self.peers[p].talked))
            .collect();
        for &p in &peers {
            let peer = &mut self.peers[p];
            peer.talked = false;
            // Set before posting: a post that finds the queue full progresses it.
            // A peer whose messages no longer arrive gets ours; its own is posted
            // for, not waited for.
            peer.hello_awaited = peer.inbound_lost.is_none();
            peer.hello_pending = true;
        }
        for &peer in &peers {
            let mut ctx = Ctx::boxed(GREET | peer as u64);
            let nothing = NonNull::<u8>::dangling().as_ptr();
            self.post_recv_raw(
                peer,
                TAG_GREET,
                nothing,
                0,
                std::ptr::null_mut(),
                Ctx::ptr(&mut ctx),
            )?;
            self.fixed.push(ctx);
        }
        for &peer in &peers {
            self.send_hello(peer)?;
        }
        let start = Instant::now();
        loop {
            if let Some(why) = self.greeting_failed.take() {
                return Err(setup_error(format!("hellos: {why}")));
            }
            let awaited = |p: &&usize| self.peers[**p].hello_awaited;
            let pending = |p: &&usize| self.peers[**p].hello_pending;
            if !peers.iter().any(|p| awaited(&p) || pending(&p)) {
                return Ok(());
            }
            let resend = std::mem::take(&mut self.hellos_to_resend);
            if start.elapsed() > self.timeout {
                let from: Vec<_> = peers.iter().filter(awaited).collect();
                let to: Vec<_> = peers.iter().filter(pending).collect();
                let unconnected = if resend.is_empty() {
                    String::new()
                } else {
                    format!(" (no connection to ranks {resend:?})")
                };
                return Err(setup_error(format!(
                    "hellos missing after {:?}: none arrived from ranks {from:?}, \
                     ours to ranks {to:?} not completed{unconnected}",
                    self.timeout
                )));
            }
            // A hello that found no connection did not leave: the peer's receive
            // for it is still posted, so sending it again cannot be read twice.
            for peer in resend {
                self.send_hello(peer)?;
            }
            if !self.progress()? {
                std::thread::yield_now();
            }
        }
    }

    /// Posts this rank's 0-byte hello to `peer`.
    fn send_hello(&mut self, peer: usize) -> Result<(), TransportError> {
        let tag = TAG_GREET | self.rank as u64;
        let (ep, tagged) = (self.ep.ep, i32::from(self.tagged));
        let mut ctx = Ctx::boxed(GREETED | peer as u64);
        let (dest, c) = (self.peers[peer].addr, Ctx::ptr(&mut ctx));
        let nothing = NonNull::<u8>::dangling().as_ptr().cast::<c_void>();
        // SAFETY: a 0-byte send (the pointer is never read); the context stays
        // boxed in `fixed` until the endpoint is closed.
        self.retry(peer, "send", |_| unsafe {
            ffi::ngo_send(ep, tagged, nothing, 0, std::ptr::null_mut(), dest, tag, c)
        })?;
        self.fixed.push(ctx);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ffi;
    use std::os::raw::c_int;

    #[test]
    fn only_rxm_over_tcp_loses_a_peer_at_a_truncated_message() {
        let lost = super::super::lost_after_truncation;
        for dynamic in [None, Some("1"), Some("yes")] {
            let why = lost("tcp;ofi_rxm", dynamic);
            assert!(
                why.is_some_and(|w| w.contains("tcp;ofi_rxm")),
                "{dynamic:?}"
            );
        }
        for off in ["0", "off", "False", "NO"] {
            assert_eq!(lost("tcp;ofi_rxm", Some(off)), None, "{off}");
        }
        for keeps in ["shm", "udp;ofi_rxd", "sockets", "verbs;ofi_rxm"] {
            assert_eq!(lost(keeps, None), None, "{keeps}");
        }
    }

    #[test]
    fn only_a_hello_that_found_no_connection_is_sent_again() {
        for err in [ffi::FI_ENOTCONN, ffi::FI_ECONNRESET, ffi::FI_ECONNREFUSED] {
            assert!(ffi::not_connected(err as c_int), "{err}");
        }
        // Cancelled at close, truncated, or the provider's other failures: the
        // hello may have arrived, or will never; the open fails with the words.
        for err in [ffi::ECANCELED, ffi::ETRUNC, ffi::FI_EIO as c_int, 0] {
            assert!(!ffi::not_connected(err), "{err}");
        }
    }
}
