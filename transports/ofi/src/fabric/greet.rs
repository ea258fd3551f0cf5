//! Eager connection setup: a 0-byte hello each way between every pair of ranks
//! while all of them are in [`super::open`]. Connection-based providers under
//! `ofi_rxm` and `ofi_rxd` (and `shm`'s peer mapping) set a connection up on the
//! first message to a peer, and finish only while both ranks progress their
//! completion queues: a first message sent just before a rank blocks on the
//! control channel (a pattern's last answer, a goodbye at drop) would wait there
//! with its peer, and a first message in a timed region would time the setup.

use super::{ffi, setup_error, Ctx, OfiTransport, GREET, GREETED, TAG_GREET};
use ngauge_transport::TransportError;
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::time::Instant;

impl OfiTransport {
    /// Sends a hello to every peer and waits for every peer's hello and for
    /// its own to complete (at most the peer timeout).
    pub(super) fn greet(&mut self) -> Result<(), TransportError> {
        let me = self.rank;
        let peers: Vec<usize> = (0..self.size).filter(|&p| p != me).collect();
        // Set before posting: a post that finds the queue full progresses it.
        self.greetings_left = 2 * peers.len();
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
        let (ep, tagged, tag) = (self.ep.ep, i32::from(self.tagged), TAG_GREET | me as u64);
        for &peer in &peers {
            let mut ctx = Ctx::boxed(GREETED | peer as u64);
            let (dest, c) = (self.peers[peer].addr, Ctx::ptr(&mut ctx));
            let nothing = NonNull::<u8>::dangling().as_ptr().cast::<c_void>();
            // SAFETY: a 0-byte send (the pointer is never read); the context stays
            // boxed in `fixed` until the endpoint is closed.
            self.retry(peer, "send", |_| unsafe {
                ffi::ngo_send(ep, tagged, nothing, 0, std::ptr::null_mut(), dest, tag, c)
            })?;
            self.fixed.push(ctx);
        }
        let start = Instant::now();
        while self.greetings_left > 0 {
            if let Some(why) = self.greeting_failed.take() {
                return Err(setup_error(format!("connection setup: {why}")));
            }
            if !self.progress()? {
                if start.elapsed() > self.timeout {
                    return Err(setup_error(format!(
                        "connection setup: {} hello(s) to or from other ranks missing after {:?}",
                        self.greetings_left, self.timeout
                    )));
                }
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}
