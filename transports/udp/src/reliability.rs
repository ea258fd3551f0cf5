//! Reliability over datagrams: sequence numbers (lost, duplicated and reordered
//! messages counted), the retransmission timeout and what happens when it
//! expires (retransmit if this rank waits for an answer, back off, give up after
//! the peer timeout), replays of lost answers, and the linger of a dropped
//! transport that keeps answering a peer's retransmissions (see the crate docs,
//! "Recovery").

use crate::datagram::Payload;
use crate::wire::{Header, FLAG_BYE, FLAG_REPLAY, FLAG_RETX, MAX_DATAGRAM_V6};
use crate::{closed_err, Peer, UdpTransport, NAME};
use ngauge_transport::util::timespec;
use ngauge_transport::{Rank, TransportError};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};
use std::time::{Duration, Instant};

/// Bounds of how long a dropped transport keeps answering retransmissions (see
/// [`Drop`]): 16 initial RTOs, covering four doublings.
const MIN_LINGER: Duration = Duration::from_millis(100);
const MAX_LINGER: Duration = Duration::from_secs(2);
pub(crate) const MAX_RTO: Duration = Duration::from_secs(1);
/// How many skipped sequence numbers are remembered to tell "late" from "lost".
const MISSING_MEMORY: usize = 4096;

/// What [`UdpTransport::on_arrival`] made of a datagram.
pub(crate) enum Arrival {
    /// The next message: the receive it was read into completes.
    Delivered,
    /// Nothing for the receive (an old or stray datagram, a `BYE`): read again.
    Ignored,
}

impl Peer {
    /// Whether this rank sent more messages to the peer than it received from it.
    pub(crate) fn ahead(&self) -> bool {
        (self.next_seq.wrapping_sub(self.expected) as i32) > 0
    }
}

impl UdpTransport {
    /// Accounts for a datagram from `peer` whose payload of `payload_len` bytes
    /// (`truncated`: it did not fit) arrived for a receive of `want_bytes`: a `BYE`,
    /// an old sequence number (late: reordered; or a duplicate, which a waiting
    /// peer's retransmission answers with a replay), or the next message, after
    /// which every skipped number counts as lost until it turns up.
    pub(crate) fn on_arrival(
        &mut self,
        peer: Rank,
        header: Header,
        payload_len: usize,
        truncated: bool,
        want_bytes: usize,
    ) -> Result<Arrival, TransportError> {
        let p = self.peers[peer].as_mut().expect("checked peer");
        let Header { flags, seq } = header;
        if flags & FLAG_BYE != 0 {
            // The peer dropped its transport while we wait for it. If we wait for an
            // answer, it may have been lost: ask again now (the lingering peer
            // replays it) and give up after one more RTO of silence (`quiet_for`,
            // `on_quiet`). Otherwise nothing more will come.
            p.said_bye = true;
            if !p.ahead() {
                return Err(closed_err(peer));
            }
            self.retransmit(peer, FLAG_RETX)?;
            return Ok(Arrival::Ignored);
        }
        let ahead_of_expected = seq.wrapping_sub(p.expected) as i32;
        if ahead_of_expected < 0 {
            // The peer is alive: restart the nonblocking path's timers.
            p.last_heard = None;
            p.quiet_since = None;
            // Already delivered or skipped.
            if let Some(i) = p.missing.iter().position(|&s| s == seq) {
                p.missing.remove(i);
                self.stats.lost = self.stats.lost.saturating_sub(1);
                self.stats.reordered += 1;
            } else {
                self.stats.duplicated += 1;
                if flags & FLAG_RETX != 0 {
                    // The peer is still waiting for our answer: it was lost.
                    self.retransmit(peer, FLAG_REPLAY)?;
                }
            }
            return Ok(Arrival::Ignored);
        }
        if truncated || payload_len != want_bytes {
            return Err(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: want_bytes,
                got_bytes: payload_len,
            });
        }
        if ahead_of_expected > 0 {
            for s in 0..ahead_of_expected as u32 {
                if p.missing.len() == MISSING_MEMORY {
                    p.missing.pop_front();
                }
                p.missing.push_back(p.expected.wrapping_add(s));
            }
            self.stats.lost += ahead_of_expected as u64;
        }
        if flags & (FLAG_RETX | FLAG_REPLAY) != 0 {
            // The first copy to arrive is a retransmission: the original was lost.
            self.stats.lost += 1;
        }
        p.expected = seq.wrapping_add(1);
        p.rto = self.rto_initial;
        Ok(Arrival::Delivered)
    }

    /// Sends the last message to `peer` again, if there is one.
    pub(crate) fn retransmit(&mut self, peer: Rank, flags: u8) -> Result<(), TransportError> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        let Some(last) = p.last_sent.as_ref() else {
            return Ok(());
        };
        let (seq, payload) = if last.copied {
            (last.seq, Payload::Kept)
        } else {
            (last.seq, Payload::Region(last.region))
        };
        self.stats.retransmissions += 1;
        self.transmit(peer, flags, seq, payload)
    }

    /// The RTO for `peer` expired: give up after `timeout` of silence, else
    /// retransmit if this rank waits for an answer, and back off.
    pub(crate) fn on_quiet(&mut self, peer: Rank) -> Result<(), TransportError> {
        let timeout = self.timeout;
        let p = self.peers[peer].as_mut().expect("checked peer");
        if p.said_bye {
            return Err(closed_err(peer));
        }
        let now = Instant::now();
        if now - *p.last_heard.get_or_insert(now) >= timeout {
            return Err(self.timeout_err(peer, "recv"));
        }
        p.quiet_since = Some(now);
        p.rto = (p.rto * 2).min(MAX_RTO);
        if p.ahead() {
            self.stats.timeouts += 1;
            self.retransmit(peer, FLAG_RETX)?;
        }
        Ok(())
    }

    /// How long the next blocking wait on `peer` may sleep before acting; starts the
    /// timers that were reset (`None`) at `now`.
    pub(crate) fn patience(&mut self, peer: Rank, now: Instant) -> Duration {
        let timeout = self.timeout;
        let p = self.peers[peer].as_mut().expect("checked peer");
        let quiet_since = *p.quiet_since.get_or_insert(now);
        let last_heard = *p.last_heard.get_or_insert(now);
        if p.ahead() {
            p.rto.saturating_sub(now - quiet_since)
        } else {
            timeout.saturating_sub(now - last_heard)
        }
        .max(Duration::from_micros(100))
    }

    /// Whether the RTO (or the give-up timeout) of `peer` has passed; starts the
    /// timers that were reset (`None`) now.
    pub(crate) fn quiet_expired(&mut self, peer: Rank) -> bool {
        let now = Instant::now();
        let timeout = self.timeout;
        let p = self.peers[peer].as_mut().expect("checked peer");
        let quiet_since = *p.quiet_since.get_or_insert(now);
        let last_heard = *p.last_heard.get_or_insert(now);
        let limit = if p.ahead() {
            p.rto
        } else {
            timeout.saturating_sub(now - last_heard)
        };
        now - quiet_since >= limit
    }

    /// A blocking receive waiting since `since` heard nothing for an RTO: give up
    /// after `timeout`, else retransmit if this rank waits for an answer, and back off.
    pub(crate) fn quiet_for(&mut self, peer: Rank, since: Instant) -> Result<(), TransportError> {
        if self.peers[peer].as_ref().expect("checked peer").said_bye {
            return Err(closed_err(peer));
        }
        if since.elapsed() >= self.timeout {
            return Err(self.timeout_err(peer, "recv"));
        }
        let p = self.peers[peer].as_mut().expect("checked peer");
        p.rto = (p.rto * 2).min(MAX_RTO);
        if p.ahead() {
            self.stats.timeouts += 1;
            self.retransmit(peer, FLAG_RETX)?;
        }
        Ok(())
    }
}

/// The last message of a conversation may be lost after its sender has finished (the
/// final pong of a sweep): the peer then retransmits its request and needs an answer.
/// So a dropped transport tells every peer `BYE` and keeps answering retransmitted
/// requests until every peer has said `BYE` too (it is done as well) or until 16
/// initial RTOs (0.1 to 2 s) have passed.
impl Drop for UdpTransport {
    fn drop(&mut self) {
        for peer in 0..self.size {
            if self.peers[peer].is_some() {
                let _ = self.send_control(peer, FLAG_BYE);
            }
        }
        let linger = (self.rto_initial * 16).clamp(MIN_LINGER, MAX_LINGER);
        let deadline = Instant::now() + linger;
        let mut scratch = vec![0u8; MAX_DATAGRAM_V6];
        loop {
            for peer in 0..self.size {
                while let Some(retx) = self.linger_receive(peer, &mut scratch) {
                    if retx {
                        let _ = self.retransmit(peer, FLAG_REPLAY);
                    }
                }
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

impl UdpTransport {
    /// A header-only datagram with `flags` (no sequence number of its own).
    fn send_control(&self, peer: Rank, flags: u8) -> rustix::io::Result<usize> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        rustix::net::send(
            &p.socket,
            &Header { flags, seq: 0 }.encode(),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )
    }

    /// While lingering: one datagram from `peer` if any; `Some(true)` when it is a
    /// retransmitted request that was already answered (so the answer was lost).
    fn linger_receive(&mut self, peer: Rank, scratch: &mut [u8]) -> Option<bool> {
        let p = self.peers[peer].as_mut().filter(|p| !p.said_bye)?;
        let (n, _) = match rustix::net::recv(&p.socket, &mut *scratch, RecvFlags::DONTWAIT) {
            Ok(got) => got,
            Err(Errno::AGAIN | Errno::INTR) => return None,
            Err(_) => {
                // Port unreachable: the peer is gone, nobody to answer.
                p.said_bye = true;
                return None;
            }
        };
        let Some(Header { flags, seq }) = Header::parse(&scratch[..n.min(scratch.len())]) else {
            return Some(false);
        };
        if flags & FLAG_BYE != 0 {
            p.said_bye = true;
            return Some(false);
        }
        let old = (seq.wrapping_sub(p.expected) as i32) < 0;
        Some(old && flags & FLAG_RETX != 0)
    }
}
