//! The fast path of a blocking receive with nothing queued in front of it (every
//! message of a ping-pong): one look-up of the peer, one `recv` into the scratch
//! buffer, and the in-order delivery of the next message, inline.
//!
//! It is taken only where [`UdpTransport::recv_direct`] would do the same and
//! nothing more: a message of at most `SMALL_BYTES`, a peer that has not said
//! `BYE`, a receive that times no round trip for the RTO, no precise (`ppoll`)
//! wait after a sign of loss, and in block mode the socket timeout already armed
//! for this wait. Everything else goes on in `recv_direct`, from where the fast
//! path left it: before the `recv` (not eligible), after it with nothing consumed
//! (`EINTR`, polling's `EAGAIN` after [`FAST_SPINS`] tries), with the expiry of the socket timeout as its
//! first attempt's outcome (blocking `EAGAIN`), or after a datagram that was not
//! the next message, which [`UdpTransport::on_arrival`] has handled already (a
//! duplicate, an early message, a `NACK`, a `BYE`, a stray datagram). The fast
//! path changes no state before its `recv`, so `recv_direct` starts as if it had
//! been called first.

use crate::datagram::Arrival;
use crate::datagram::SMALL_BYTES;
use crate::rto::SAMPLE_EVERY;
use crate::wire::{Header, HEADER_BYTES};
use crate::{errno_err, UdpTransport};
use ngauge_transport::{Rank, Region, TransportError, WaitMode};
use rustix::io::Errno;
use rustix::net::RecvFlags;
use socket2::Socket;

/// Empty nonblocking `recv`s the fast path makes in poll mode before it hands the
/// wait over to `recv_direct` (each is one system call that finds nothing; a
/// loopback answer usually comes within them). `recv_direct` reads the clock once per 256 empty `recv`s and
/// counts the RTO and the peer timeout from its first read, which these spins
/// delay by as long.
const FAST_SPINS: u32 = 64;

impl UdpTransport {
    /// A blocking receive from `peer` into `region` with nothing queued (see the
    /// module docs).
    #[inline(always)]
    pub(crate) fn recv_fast(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let blocking = self.wait == WaitMode::Block;
        let timeout = self.timeout;
        let p = self.peers[peer].as_ref().expect("checked peer");
        let ahead = p.ahead();
        let eligible = region.len <= SMALL_BYTES
            && !p.said_bye
            // No round trip to time (`recv_direct`'s `sample_from`)...
            && !(ahead && (p.unsampled >= SAMPLE_EVERY || !p.rto.measured()))
            // ...no precise wait (`careful_wait`)...
            && !(blocking && ahead && p.precise_waits > 0)
            // ...and the socket timeout armed for this wait.
            && (!blocking
                || p.armed_for == Some(if ahead { p.rto.get() } else { timeout }));
        if !eligible {
            return self.recv_direct(peer, region, None);
        }
        // Kept messages in the bytes about to be written are copied first.
        self.preserve(region)?;
        let p = self.peers[peer].as_ref().expect("checked peer");
        let got = if blocking {
            rustix::net::recv(&p.socket, &mut self.scratch[..], RecvFlags::TRUNC)
        } else {
            spin_recv(&p.socket, &mut self.scratch[..])
        };
        let (n, full) = match got {
            Ok(got) => got,
            // The socket timeout expired: `recv_direct` takes it as its first wait's.
            Err(Errno::AGAIN) if blocking => {
                return self.recv_direct(peer, region, Some(Errno::AGAIN))
            }
            Err(Errno::AGAIN | Errno::INTR) => return self.recv_direct(peer, region, None),
            Err(e) => return Err(errno_err(peer, "recv", e)),
        };
        let Some(header) = Header::parse(&self.scratch[..n], p.id_in) else {
            self.on_foreign(peer);
            return self.recv_direct(peer, region, None);
        };
        match self.on_arrival(peer, header, full - HEADER_BYTES, full > n, region.len)? {
            Arrival::Delivered { .. } => {
                // `on_arrival` delivers only a payload of exactly `region.len` bytes.
                self.pool
                    .region_mut(region)?
                    .copy_from_slice(&self.scratch[HEADER_BYTES..HEADER_BYTES + region.len]);
                let p = self.peers[peer].as_mut().expect("checked peer");
                p.unsampled = p.unsampled.saturating_add(u32::from(ahead));
                Ok(())
            }
            Arrival::Ignored => self.recv_direct(peer, region, None),
        }
    }
}

/// Poll mode's `recv(MSG_DONTWAIT)` into `scratch`, tried up to [`FAST_SPINS`]
/// times while it finds nothing (out of line: the blocking path stays straight).
#[inline(never)]
fn spin_recv(socket: &Socket, scratch: &mut [u8]) -> Result<(usize, usize), Errno> {
    let mut spins = 0;
    loop {
        match rustix::net::recv(
            socket,
            &mut *scratch,
            RecvFlags::TRUNC | RecvFlags::DONTWAIT,
        ) {
            Err(Errno::AGAIN) if spins < FAST_SPINS => {
                std::hint::spin_loop();
                spins += 1;
            }
            other => return other,
        }
    }
}
