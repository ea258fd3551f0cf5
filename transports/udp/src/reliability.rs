//! Reliability over datagrams: what an arriving datagram means for the sequence
//! ([`crate::inbound`]) and the send window ([`crate::window`]), requests to send
//! again (`NACK`) and the answers to them, the retransmission timeout
//! ([`crate::rto`]) and what happens when it expires (this rank, waiting for an
//! answer, sends its last unacknowledged message again or asks for the answer,
//! backs off, and gives up after the peer timeout; see the crate docs,
//! "Recovery"). Serving peers outside a receive is [`crate::linger`]'s.

use crate::datagram::{Arrival, Payload};
use crate::inbound::{Delivery, Position};
use crate::wire::{Header, FLAG_ACK, FLAG_BYE, FLAG_NACK, FLAG_REPLAY, FLAG_RETX};
use crate::{closed_err, Peer, UdpTransport, NAME};
use ngauge_transport::{Rank, TransportError};
use std::time::{Duration, Instant};

/// A datagram of the wrong size for the receive posted (out of line: it builds an
/// error on the in-order path).
#[cold]
fn size_mismatch(peer: Rank, expected_bytes: usize, got_bytes: usize) -> TransportError {
    TransportError::SizeMismatch {
        transport: NAME,
        peer,
        expected_bytes,
        got_bytes,
    }
}

/// Probes a rank sends a peer that said `BYE` before it gives up on the answer it
/// waits for (the dropped peer lingers and answers; each probe or its answer may
/// be lost).
pub(crate) const BYE_PROBES: u32 = 3;
/// And not before this long after the `BYE`: half the shortest linger of a dropped
/// transport (`linger::MIN_LINGER`). Probes follow the RTO, which sits at its
/// 200 us floor on a fast link, so three of them span about a millisecond, less
/// than a loaded host may deschedule the lingering peer for.
pub(crate) const BYE_PATIENCE: Duration = Duration::from_millis(50);

impl Peer {
    /// Whether this rank sent more messages to the peer than it received from it
    /// (it waits for an answer: the side that probes when the RTO expires).
    pub(crate) fn ahead(&self) -> bool {
        (self.next_seq.wrapping_sub(self.inbound.expected()) as i32) > 0
    }

    /// The peer said `BYE` and nothing more can come from it: this rank waits for
    /// no answer, or the lingering peer left [`BYE_PROBES`] probes and
    /// [`BYE_PATIENCE`] unanswered.
    pub(crate) fn gone(&self) -> bool {
        self.said_bye
            && (!self.ahead()
                || (self.probes_after_bye >= BYE_PROBES
                    && self.bye_at.is_none_or(|t| t.elapsed() >= BYE_PATIENCE)))
    }
}

impl UdpTransport {
    /// Accounts for a datagram from `peer` whose payload of `payload_len` bytes
    /// (`truncated`: it did not fit) arrived for a receive of `want_bytes`: a
    /// `NACK` (send again what it asks for), a `BYE`, or a message, which is a
    /// duplicate, the next one (delivered, if it has the posted size), or early
    /// (dropped, and the missing one asked for). The next message is handled
    /// inline; everything else in [`UdpTransport::on_other_arrival`].
    #[inline(always)]
    pub(crate) fn on_arrival(
        &mut self,
        peer: Rank,
        header: Header,
        payload_len: usize,
        truncated: bool,
        want_bytes: usize,
    ) -> Result<Arrival, TransportError> {
        let Header { flags, ack, seq } = header;
        let p = self.peers[peer].as_mut().expect("checked peer");
        if flags & (FLAG_NACK | FLAG_ACK | FLAG_BYE) != 0
            || p.inbound.position(seq) != Position::Next
        {
            return self.on_other_arrival(peer, header);
        }
        if truncated || payload_len != want_bytes {
            return Err(size_mismatch(peer, want_bytes, payload_len));
        }
        let copy = flags & (FLAG_RETX | FLAG_REPLAY) != 0;
        let delivery = p.inbound.deliver(copy);
        p.owe_ack = true;
        if delivery != Delivery::default() {
            self.stats.lost += u64::from(delivery.lost);
            self.stats.reordered += u64::from(delivery.reordered);
            if delivery.lost {
                // A sign of loss: wait for the RTO precisely for a while.
                p.precise_waits = crate::datagram::PRECISE_WAITS;
            }
        }
        // Acknowledgements are read from in-order datagrams only (see `window`).
        p.window.ack_low_byte(ack, p.next_seq);
        if !copy {
            p.rto.collapse();
        }
        Ok(Arrival::Delivered { copy })
    }

    /// A datagram from `peer`'s address without the link's connection id arrived
    /// (forged, or stray): it was dropped unread; count it and say so on stderr
    /// (rate-limited).
    #[cold]
    #[inline(never)]
    pub(crate) fn on_foreign(&mut self, peer: Rank) {
        self.stats.foreign += 1;
        self.foreign_log.refused(
            &format!("rank {peer}'s address"),
            "a datagram without this job's connection id (forged or stray): dropped, counted in foreign_datagrams",
        );
    }

    /// [`UdpTransport::on_arrival`] for anything but the next message: a `NACK`,
    /// an `ACK`, a `BYE`, a duplicate or an early message.
    #[cold]
    #[inline(never)]
    fn on_other_arrival(&mut self, peer: Rank, header: Header) -> Result<Arrival, TransportError> {
        let Header { flags, ack, seq } = header;
        let p = self.peers[peer].as_mut().expect("checked peer");
        // The peer is alive: restart the nonblocking path's timers.
        p.last_heard = None;
        p.quiet_since = None;
        if flags & FLAG_NACK != 0 {
            // The peer delivered everything before `seq` and wants the rest again.
            p.window.ack(seq, p.next_seq);
            self.resend_from(peer, seq)?;
            return Ok(Arrival::Ignored);
        }
        if flags & FLAG_ACK != 0 {
            // The peer delivered everything before `seq` (it settles).
            p.window.ack(seq, p.next_seq);
            return Ok(Arrival::Ignored);
        }
        if flags & FLAG_BYE != 0 {
            // The peer dropped its transport while we wait for it. If we wait for an
            // answer, it may have been lost: ask again now (the lingering peer
            // sends it again) and give up after `BYE_PROBES` more RTOs of silence
            // (`quiet_for`, `on_quiet`). Otherwise nothing more will come.
            p.said_bye = true;
            p.bye_at.get_or_insert_with(Instant::now);
            p.window.ack(seq, p.next_seq);
            if !p.ahead() {
                return Err(closed_err(peer));
            }
            self.send_nack(peer)?;
            return Ok(Arrival::Ignored);
        }
        if p.inbound.position(seq) == Position::Old {
            self.stats.duplicated += 1;
            if flags & FLAG_RETX != 0 {
                // The peer waits for an answer it did not get: what it has not
                // acknowledged (its header says how much it has) goes again.
                p.window.ack_low_byte(ack, p.next_seq);
                let from = p.window.acked();
                self.resend_from(peer, from)?;
            }
            return Ok(Arrival::Ignored);
        }
        // Early: a message before this one is missing (a sign of loss: wait for
        // the RTO precisely for a while).
        self.stats.out_of_order += 1;
        p.precise_waits = crate::datagram::PRECISE_WAITS;
        let copy = flags & (FLAG_RETX | FLAG_REPLAY) != 0;
        if p.inbound.early(seq, copy, flags & FLAG_RETX != 0) {
            self.send_nack(peer)?;
        }
        Ok(Arrival::Ignored)
    }

    /// Asks `peer` to send again everything from the next message this rank
    /// expects (a header-only `NACK` carrying that sequence number).
    pub(crate) fn send_nack(&mut self, peer: Rank) -> Result<(), TransportError> {
        let expected = self.peers[peer].as_ref().expect("peer").inbound.expected();
        self.stats.resend_requests += 1;
        self.transmit(peer, FLAG_NACK, expected, Payload::Empty)
    }

    /// Sends again, in order, every kept message to `peer` from `seq` on (go-back-N:
    /// a `NACK` asked for it, or a probe showed the peer waiting). Asked again for
    /// the same message, it sends that one twice: it was lost twice, and a cycle of
    /// requests and answers of fixed length must not meet a loss pattern of the
    /// same period (the test hook's) at the same datagram every time.
    pub(crate) fn resend_from(&mut self, peer: Rank, seq: u32) -> Result<(), TransportError> {
        let p = self.peers[peer].as_mut().expect("peer");
        let first = p.window.position(seq);
        let again = p.resent_from == Some(seq) && first < p.window.len();
        p.resent_from = Some(seq);
        if again {
            self.stats.retransmissions += 1;
            self.transmit(peer, FLAG_REPLAY, seq, Payload::Window(first))?;
        }
        for index in first..self.peers[peer].as_ref().expect("peer").window.len() {
            let seq = self.peers[peer].as_ref().expect("peer").window.seq(index);
            self.stats.retransmissions += 1;
            self.transmit(peer, FLAG_REPLAY, seq, Payload::Window(index))?;
        }
        Ok(())
    }

    /// The RTO expired while this rank waits for an answer from `peer`: send the
    /// last message it has not acknowledged again (it may have been lost; a gap
    /// before it makes the peer ask for the rest, and a peer that has it sends
    /// its own unacknowledged messages again: the answer may have been lost), or,
    /// with nothing unacknowledged, ask for what the peer sent. One datagram per
    /// expiry: a pair would let a loss pattern with an even period (the test
    /// hook's) drop the same one of the two every time.
    pub(crate) fn probe(&mut self, peer: Rank) -> Result<(), TransportError> {
        self.stats.timeouts += 1;
        let p = self.peers[peer].as_ref().expect("peer");
        match p.window.len().checked_sub(1) {
            Some(index) => {
                let seq = p.window.seq(index);
                self.stats.retransmissions += 1;
                self.transmit(peer, FLAG_RETX, seq, Payload::Window(index))
            }
            None => self.send_nack(peer),
        }
    }

    /// The RTO for `peer` expired: give up after `timeout` of silence, else
    /// probe if this rank waits for an answer, and back off.
    pub(crate) fn on_quiet(&mut self, peer: Rank) -> Result<(), TransportError> {
        let timeout = self.timeout;
        let p = self.peers[peer].as_mut().expect("checked peer");
        if p.gone() {
            return Err(closed_err(peer));
        }
        let now = Instant::now();
        if now - *p.last_heard.get_or_insert(now) >= timeout {
            return Err(self.timeout_err(peer, "recv"));
        }
        p.quiet_since = Some(now);
        self.expired(peer)
    }

    /// How long the next blocking wait on `peer` may sleep before acting; starts the
    /// timers that were reset (`None`) at `now`.
    pub(crate) fn patience(&mut self, peer: Rank, now: Instant) -> Duration {
        let timeout = self.timeout;
        let p = self.peers[peer].as_mut().expect("checked peer");
        let quiet_since = *p.quiet_since.get_or_insert(now);
        let last_heard = *p.last_heard.get_or_insert(now);
        if p.ahead() {
            p.rto.get().saturating_sub(now - quiet_since)
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
            p.rto.get()
        } else {
            timeout.saturating_sub(now - last_heard)
        };
        now - quiet_since >= limit
    }

    /// A blocking receive waiting since `since` heard nothing for an RTO: give up
    /// after `timeout`, else probe if this rank waits for an answer, and back off.
    pub(crate) fn quiet_for(&mut self, peer: Rank, since: Instant) -> Result<(), TransportError> {
        if self.peers[peer].as_ref().expect("checked peer").gone() {
            return Err(closed_err(peer));
        }
        if since.elapsed() >= self.timeout {
            return Err(self.timeout_err(peer, "recv"));
        }
        self.expired(peer)
    }

    /// The RTO expired short of the give-up timeout: back off (RFC 6298 (5.5)) and
    /// probe if this rank waits for an answer (a peer that said `BYE` is given
    /// [`BYE_PROBES`] of them: it lingers and answers).
    fn expired(&mut self, peer: Rank) -> Result<(), TransportError> {
        let p = self.peers[peer].as_mut().expect("checked peer");
        p.rto.backoff();
        if !p.ahead() {
            return Ok(());
        }
        if p.said_bye {
            p.probes_after_bye += 1;
        }
        self.probe(peer)
    }
}
