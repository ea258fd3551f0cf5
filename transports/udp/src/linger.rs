//! Serving peers outside a receive: [`ngauge_transport::Transport::settle`] before
//! a rank blocks on the control channel, and the linger of a dropped transport.
//!
//! Both exist for the last message of an exchange. Lost messages are recovered
//! while both ranks talk over UDP (`reliability`), but a final answer lost after
//! its sender moved on can be asked for only if the sender still reads its
//! socket. So a rank that settles first acknowledges what it delivered (an `ACK`
//! to each peer that sent it something since it last said), then, for each peer
//! that has not acknowledged everything it was sent, keeps answering that peer's
//! requests and probing it (its last unacknowledged message again, which a peer
//! still waiting for it receives even if it never asks) until the peer
//! acknowledges, sends a new message (it has moved on), says `BYE`, or stays
//! silent through [`SETTLE_PROBES`] probes (it has what it needs and waits
//! elsewhere: its acknowledgement was lost). The settle fails only if the answer
//! and every probe are lost. A dropped transport answers every peer until each
//! has said `BYE` or 16 initial RTOs have passed.

use crate::datagram::Payload;
use crate::inbound::Position;
use crate::wire::{Header, FLAG_ACK, FLAG_BYE, FLAG_NACK, HEADER_BYTES};
use crate::UdpTransport;
use ngauge_transport::util::timespec;
use ngauge_transport::{Rank, TransportError};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};
use std::time::{Duration, Instant};

/// Probes a settling rank sends to a silent peer before it concludes that the
/// peer has what it needs (they back off: 1 + 2 + 4 + 8 RTOs in all).
pub(crate) const SETTLE_PROBES: u32 = 3;
/// Bounds of how long a dropped transport keeps answering requests (see
/// [`Drop`]): 16 initial RTOs, covering four doublings.
const MIN_LINGER: Duration = Duration::from_millis(100);
const MAX_LINGER: Duration = Duration::from_secs(2);

/// What [`UdpTransport::serve_once`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    /// No datagram waiting.
    Nothing,
    /// One datagram taken and handled.
    Handled,
    /// A message for a receive still to come, left in the socket.
    Data,
    /// The peer's socket is gone (port unreachable).
    Gone,
}

impl UdpTransport {
    /// See [`ngauge_transport::Transport::settle`] and the module docs.
    pub(crate) fn settle_all(&mut self) -> Result<(), TransportError> {
        for peer in 0..self.size {
            if let Some(p) = self.peers[peer].as_ref().filter(|p| p.owe_ack) {
                let expected = p.inbound.expected();
                self.transmit(peer, FLAG_ACK, expected, Payload::Empty)?;
            }
        }
        for peer in 0..self.size {
            self.settle_with(peer)?;
        }
        Ok(())
    }

    fn settle_with(&mut self, peer: Rank) -> Result<(), TransportError> {
        let unacknowledged = |t: &Self| {
            t.peers[peer]
                .as_ref()
                .is_some_and(|p| p.window.len() > 0 && !p.said_bye)
        };
        if !unacknowledged(self) {
            return Ok(());
        }
        let started = Instant::now();
        let retransmissions = self.stats.retransmissions;
        // Probes since the peer was last heard; whether the wait slept at all.
        let mut probes = 0;
        let mut slept = false;
        let mut waiting_since = started;
        while unacknowledged(self) {
            match self.serve_once(peer, false)? {
                Served::Handled => {
                    probes = 0;
                    waiting_since = Instant::now();
                    continue;
                }
                Served::Data | Served::Gone => return Ok(()),
                Served::Nothing => {}
            }
            let p = self.peers[peer].as_ref().expect("peer");
            let left = p.rto.get().saturating_sub(waiting_since.elapsed());
            if !left.is_zero() {
                slept = true;
                let mut fds = [PollFd::new(&p.socket, PollFlags::IN)];
                match poll(&mut fds, Some(&timespec(left))) {
                    Ok(_) | Err(Errno::INTR) => continue,
                    Err(e) => return Err(crate::setup(format!("poll failed: {e}"))),
                }
            }
            if probes == SETTLE_PROBES {
                return Ok(());
            }
            probes += 1;
            self.peers[peer].as_mut().expect("peer").rto.backoff();
            self.probe(peer)?;
            waiting_since = Instant::now();
        }
        // Acknowledged after a wait, with nothing sent again (Karn): the wait was a
        // round trip plus the peer's way to its own settle, a round trip for the
        // RTO (one of a group whose median counts: a long way does not inflate it).
        if slept && self.stats.retransmissions == retransmissions {
            let p = self.peers[peer].as_mut().expect("peer");
            p.rto.observe(started.elapsed());
        }
        Ok(())
    }

    /// Outside any receive: handles the datagram waiting from `peer`, if any: a
    /// request (`NACK`, or a probe of a message delivered already) is answered, an
    /// acknowledgement or `BYE` taken; a message for a receive still to come is left
    /// in the socket (`Served::Data`), or dropped when `discard_data` (the
    /// transport is going away).
    fn serve_once(&mut self, peer: Rank, discard_data: bool) -> Result<Served, TransportError> {
        let p = self.peers[peer].as_mut().expect("peer");
        let mut hdr = [0u8; HEADER_BYTES];
        let n = match rustix::net::recv(&p.socket, &mut hdr, RecvFlags::PEEK | RecvFlags::DONTWAIT)
        {
            Ok((n, _)) => n,
            Err(Errno::AGAIN | Errno::INTR) => return Ok(Served::Nothing),
            Err(_) => {
                // Port unreachable: the peer is gone, nobody to answer.
                p.said_bye = true;
                return Ok(Served::Gone);
            }
        };
        let header = Header::parse(&hdr[..n.min(HEADER_BYTES)], p.id_in);
        let data = header.filter(|h| h.flags & (FLAG_NACK | FLAG_ACK | FLAG_BYE) == 0);
        if let Some(h) = data {
            let position = p.inbound.position(h.seq);
            if position != Position::Old && !discard_data {
                if position == Position::Next {
                    // In order: its acknowledgement is fresh (see `window`).
                    p.window.ack_low_byte(h.ack, p.next_seq);
                }
                return Ok(Served::Data);
            }
        }
        // Taken: what does not fit the header is discarded with the datagram.
        let _ = rustix::net::recv(&p.socket, &mut hdr, RecvFlags::DONTWAIT);
        let Some(h) = header else {
            self.on_foreign(peer);
            return Ok(Served::Handled);
        };
        if h.flags & FLAG_BYE != 0 {
            p.said_bye = true;
            p.window.ack(h.seq, p.next_seq);
            return Ok(Served::Handled);
        }
        if data.is_some() && p.inbound.position(h.seq) != Position::Old {
            // Discarded: this transport delivers nothing more.
            return Ok(Served::Handled);
        }
        // A request, an acknowledgement, or a duplicate (a probe is answered).
        self.on_arrival(peer, h, 0, false, 0)?;
        Ok(Served::Handled)
    }

    /// A `BYE` (header only) carrying this rank's count of messages delivered from
    /// `peer`, sent once and outside the test hook's losses.
    fn send_bye(&self, peer: Rank) -> rustix::io::Result<usize> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        let expected = p.inbound.expected();
        let header = Header {
            flags: FLAG_BYE,
            ack: expected as u8,
            seq: expected,
        };
        rustix::net::send(
            &p.socket,
            &header.encode(p.id_out),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )
    }
}

/// The last message of a conversation may be lost after its sender has finished (the
/// final pong of a sweep): the peer then asks for it. So a dropped transport tells
/// every peer `BYE` (with how many of its messages it delivered) and keeps answering
/// requests until every peer has said `BYE` too (it is done as well) or until 16
/// initial RTOs (0.1 to 2 s) have passed.
impl Drop for UdpTransport {
    fn drop(&mut self) {
        for peer in 0..self.size {
            if self.peers[peer].is_some() {
                let _ = self.send_bye(peer);
            }
        }
        let linger = (self.rto_initial * 16).clamp(MIN_LINGER, MAX_LINGER);
        let deadline = Instant::now() + linger;
        loop {
            for peer in 0..self.size {
                while self.peers[peer].as_ref().is_some_and(|p| !p.said_bye)
                    && matches!(self.serve_once(peer, true), Ok(Served::Handled))
                {}
            }
            let waiting: Vec<Rank> = (0..self.size)
                .filter(|&r| self.peers[r].as_ref().is_some_and(|p| !p.said_bye))
                .collect();
            let left = deadline.saturating_duration_since(Instant::now());
            if waiting.is_empty() || left.is_zero() {
                return;
            }
            let mut fds: Vec<PollFd<'_>> = waiting
                .iter()
                .filter_map(|&r| self.peers[r].as_ref())
                .map(|p| PollFd::new(&p.socket, PollFlags::IN))
                .collect();
            let _ = poll(&mut fds, Some(&timespec(left)));
        }
    }
}
