//! Datagrams in and out: one `send`/`sendmsg` per message (header and payload,
//! small ones through a scratch buffer), one `recv`/`recvmsg` per arrival, the
//! blocking receive with its socket timeout, the nonblocking progress of pending
//! receives, and the sleep in `poll(2)` between them (see the crate docs,
//! "Waiting"). What an arrival means for the sequence is [`crate::reliability`]'s.

use crate::rto::{MAX_RTO, SAMPLE_EVERY};
use crate::wire::{Header, HEADER_BYTES};
use crate::{closed_err, errno_err, setup, UdpTransport, NAME};
use ngauge_transport::util::{recycle, spin_or_timeout, timespec};
use ngauge_transport::{Access, Rank, Region, TransportError, WaitMode};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use socket2::Socket;
use std::io::IoSlice;
use std::time::{Duration, Instant};

/// What [`UdpTransport::on_arrival`](crate::UdpTransport::on_arrival) made of a datagram.
pub(crate) enum Arrival {
    /// The next message: the receive it was read into completes. `copy`: what
    /// arrived was sent again (no round-trip sample from it).
    Delivered { copy: bool },
    /// Nothing for the receive (an old, early or stray datagram, a `NACK`, a
    /// `BYE`): read again.
    Ignored,
}

/// Messages up to this size go through a scratch buffer with plain `send`/`recv`
/// (one copy of at most 2 KiB, cheaper than `sendmsg`/`recvmsg`'s iovec handling);
/// larger ones go out with `send` and come in with `recv` straight from and into
/// the caller's buffer, framed: the header sits in the [`HEADER_BYTES`] in front
/// of the region (the pool's headroom, or the caller's bytes, saved and put back
/// around the call), so header and payload are one slice. The kernel copies one
/// slice faster than an iovec pair: the C floor with the header as a second iovec
/// is 1.025-1.035x the floor with one at 65000 B
/// (`docs/findings/2026-11-24-verbs-udp-speed.md`, fourth session). A message sent
/// again from a copy (the send window) still goes out as two iovecs.
pub(crate) const SMALL_BYTES: usize = 2048;
/// In block mode, a blocking receive that waits less than this (the RTO) after
/// a sign of loss sleeps in `ppoll(2)`, whose hrtimer wakes it on time, and then
/// reads without blocking; every other blocking wait (the peer timeout, and the RTO
/// on a link that has lost nothing lately) blocks in `recv` with `SO_RCVTIMEO`, one
/// system call, with a timeout of at least [`COARSE_FLOOR`]. See [`PRECISE_WAITS`].
const PRECISE_BELOW: Duration = Duration::from_millis(50);
/// How many waits for an answer use the precise `ppoll` wait after a sign of loss
/// (an RTO that expired in a coarse wait, a message delivered from a copy whose
/// original never arrived, an arrival after a gap). Until then the RTO waits in
/// `recv` with `SO_RCVTIMEO`: the precise wait arms and cancels an hrtimer per
/// receive, which reprograms the timer hardware (a VM exit under a hypervisor)
/// and cost 20% of a 1-byte loopback round trip on the development VM (measured
/// against `benches/c/pingpong.c` with and without a 200 us `ppoll` before its
/// `recv`: 21.4 against 18.0 us, `docs/findings/2026-11-24-verbs-udp-speed.md`),
/// which the C floor and sockperf never pay. The cost of the trade: the first loss
/// after a loss-free stretch is noticed after [`COARSE_FLOOR`] instead of the RTO;
/// under sustained loss every recovery takes one RTO, as before.
pub(crate) const PRECISE_WAITS: u32 = 1024;
/// The shortest `SO_RCVTIMEO` of a coarse RTO wait. A blocking `recv` whose
/// socket timeout lies within a few tens of milliseconds pays about 2 us per
/// wake-up on the development VM, one that waits 40 ms or more nothing: the C
/// floor (`benches/c/pingpong.c`) with an `SO_RCVTIMEO` on the pinger, 1-byte UDP
/// ping-pong, 5 interleaved runs each on a quiet host, median half round trip
/// 24.2-25.2 us with timeouts of 1 to 36 ms against 22.2-23.1 us with 40 ms to
/// 30 s or none (`docs/findings/2026-11-24-verbs-udp-speed.md`, third session).
/// The cost of the floor: the first loss after a loss-free stretch is noticed
/// after at most this long instead of after the next tick or two; the
/// [`PRECISE_WAITS`] waits after it take one RTO each, as before.
pub(crate) const COARSE_FLOOR: Duration = Duration::from_millis(100);
/// `SO_RCVTIMEO` for a coarse RTO wait: the RTO rounded up to whole milliseconds,
/// so that the socket option is set again only when the RTO crosses one, and at
/// least [`COARSE_FLOOR`].
pub(crate) fn coarse(rto: Duration) -> Duration {
    // In u64 (a u128 division is a library call): 10^9 ns is a whole number of ms.
    let ms = rto
        .as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(rto.subsec_nanos().div_ceil(1_000_000)));
    Duration::from_millis(ms).max(COARSE_FLOOR)
}

/// `SO_RCVTIMEO` for a blocking wait of `want` in `recv` (not in `ppoll`): a short
/// one (the RTO) [`coarse`], a long one (the peer timeout) as it is.
pub(crate) fn socket_wait(want: Duration) -> Duration {
    if want < PRECISE_BELOW {
        coarse(want)
    } else {
        want
    }
}

/// What a datagram carries after its header.
#[derive(Clone, Copy)]
pub(crate) enum Payload {
    /// A region of the pool (a message sent for the first time), which no pending
    /// receive may be writing (`BufferPool::region_for_read`).
    Region(Region),
    /// The message at this index of the peer's send window (sent again).
    Window(usize),
    /// Nothing (`NACK`).
    Empty,
}

impl UdpTransport {
    /// Sends one datagram: header (with the acknowledgement of what this rank
    /// delivered from `peer`) plus `payload`. The first attempt is inline; a
    /// refused or interrupted one continues in [`UdpTransport::transmit_again`].
    #[inline(always)]
    pub(crate) fn transmit(
        &mut self,
        peer: Rank,
        flags: u8,
        seq: u32,
        payload: Payload,
    ) -> Result<(), TransportError> {
        let p = self.peers[peer].as_mut().expect("checked peer");
        let bytes: &[u8] = match payload {
            Payload::Region(region) => self.pool.region_for_read(region)?,
            Payload::Window(index) => p.window.payload(index, &self.pool)?,
            Payload::Empty => &[],
        };
        self.stats.sent += 1;
        // Every datagram carries an acknowledgement, also one the test hook drops.
        p.owe_ack = false;
        if let Some(hook) = self.drop.as_mut() {
            if hook.drops(self.stats.sent) {
                self.stats.test_dropped += 1;
                return Ok(());
            }
        }
        let hdr = Header {
            flags,
            ack: p.inbound.expected() as u8,
            seq,
        }
        .encode(p.id_out);
        if let Payload::Region(region) = payload {
            if region.len > SMALL_BYTES {
                return self.transmit_framed(peer, region, &hdr);
            }
        }
        match send_datagram(&p.socket, &mut self.scratch, &hdr, bytes, self.wait) {
            Ok(()) => Ok(()),
            Err(errno) => self.transmit_again(peer, &hdr, payload, errno),
        }
    }

    /// The first attempt to send the datagram with header `hdr` failed with
    /// `errno`: try again after an interruption (and, polling, while the socket
    /// buffer is full, up to the peer timeout); count a datagram the kernel
    /// refused as lost; report anything else.
    #[cold]
    #[inline(never)]
    fn transmit_again(
        &mut self,
        peer: Rank,
        hdr: &[u8; HEADER_BYTES],
        payload: Payload,
        mut errno: Errno,
    ) -> Result<(), TransportError> {
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        loop {
            match errno {
                Errno::INTR => {}
                Errno::AGAIN if self.wait == WaitMode::Poll => {
                    if spin_or_timeout(&mut spins, &mut since, self.timeout).is_err() {
                        return Err(self.timeout_err(peer, "send"));
                    }
                }
                e => return self.send_failed(peer, e),
            }
            let p = self.peers[peer].as_ref().expect("checked peer");
            let bytes: &[u8] = match payload {
                Payload::Region(region) => self.pool.region(region)?,
                Payload::Window(index) => p.window.payload(index, &self.pool)?,
                Payload::Empty => &[],
            };
            match send_datagram(&p.socket, &mut self.scratch, hdr, bytes, self.wait) {
                Ok(()) => return Ok(()),
                Err(e) => errno = e,
            }
        }
    }

    /// Sends `region` (larger than [`SMALL_BYTES`]) with `hdr` written into the
    /// bytes in front of it: one slice, one `send` (see [`SMALL_BYTES`]).
    fn transmit_framed(
        &mut self,
        peer: Rank,
        region: Region,
        hdr: &[u8; HEADER_BYTES],
    ) -> Result<(), TransportError> {
        let socket = &self.peers[peer].as_ref().expect("checked peer").socket;
        let frame = self.pool.framed_mut(region)?;
        let front: [u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("headroom");
        frame[..HEADER_BYTES].copy_from_slice(hdr);
        let send_flags = match self.wait {
            WaitMode::Poll => SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            WaitMode::Block => SendFlags::NOSIGNAL,
        };
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        let outcome = loop {
            match rustix::net::send(socket, frame, send_flags) {
                Ok(_) => break Ok(()),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) if self.wait == WaitMode::Poll => {
                    if spin_or_timeout(&mut spins, &mut since, self.timeout).is_err() {
                        break Err(Errno::AGAIN);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        frame[..HEADER_BYTES].copy_from_slice(&front);
        match outcome {
            Ok(()) => Ok(()),
            Err(e) => self.send_failed(peer, e),
        }
    }

    /// What a failed `send` of a datagram means (after `EINTR` was retried and, in
    /// poll mode, `EAGAIN` until the timeout).
    fn send_failed(&mut self, peer: Rank, e: Errno) -> Result<(), TransportError> {
        match e {
            Errno::AGAIN => Err(self.timeout_err(peer, "send")),
            // A firewall rule dropped the datagram on its way out (EPERM), or the
            // device queue was full (ENOBUFS): it is lost like one dropped on the
            // wire, and recovered the same way.
            Errno::PERM | Errno::NOBUFS => {
                self.stats.refused += 1;
                Ok(())
            }
            e => Err(errno_err(peer, "send", e)),
        }
    }

    pub(crate) fn timeout_err(&self, peer: Rank, op: &'static str) -> TransportError {
        TransportError::Timeout {
            transport: NAME,
            peer,
            op,
            after: self.timeout,
        }
    }

    /// One `recv` into `region` from `peer` (up to [`SMALL_BYTES`] through the
    /// scratch buffer, larger ones framed); classifies what arrived.
    #[inline(always)]
    pub(crate) fn receive_once(
        &mut self,
        peer: Rank,
        region: Region,
        wait: bool,
    ) -> Result<Result<Arrival, Errno>, TransportError> {
        let p = self.peers[peer].as_mut().expect("checked peer");
        let flags = if wait {
            RecvFlags::TRUNC
        } else {
            RecvFlags::TRUNC | RecvFlags::DONTWAIT
        };
        if region.len <= SMALL_BYTES {
            // Through the scratch buffer: the header and the payload in one `recv`.
            let (n, full) = match rustix::net::recv(&p.socket, &mut self.scratch[..], flags) {
                Ok(got) => got,
                Err(e @ (Errno::AGAIN | Errno::INTR)) => return Ok(Err(e)),
                Err(e) => return Err(errno_err(peer, "recv", e)),
            };
            let Some(header) = Header::parse(&self.scratch[..n], p.id_in) else {
                self.on_foreign(peer);
                return Ok(Ok(Arrival::Ignored));
            };
            let arrival =
                self.on_arrival(peer, header, full - HEADER_BYTES, full > n, region.len)?;
            if let Arrival::Delivered { .. } = arrival {
                // `on_arrival` delivers only a payload of exactly `region.len` bytes.
                self.pool
                    .region_mut(region)?
                    .copy_from_slice(&self.scratch[HEADER_BYTES..HEADER_BYTES + region.len]);
            }
            return Ok(Ok(arrival));
        }
        // Framed (see SMALL_BYTES): the header lands in the bytes in front of the
        // region, which are put back. (datagram length, truncated)
        let mut hdr = [0u8; HEADER_BYTES];
        let frame = self.pool.framed_mut(region)?;
        let front: [u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("headroom");
        let got = rustix::net::recv(&p.socket, &mut *frame, flags);
        let id_in = p.id_in;
        hdr.copy_from_slice(&frame[..HEADER_BYTES]);
        frame[..HEADER_BYTES].copy_from_slice(&front);
        let (total, truncated) = match got {
            Ok((n, full)) => (full, full > n),
            Err(e @ (Errno::AGAIN | Errno::INTR)) => return Ok(Err(e)),
            Err(e) => return Err(errno_err(peer, "recv", e)),
        };
        let Some(header) = Header::parse(&hdr[..total.min(HEADER_BYTES)], id_in) else {
            self.on_foreign(peer);
            return Ok(Ok(Arrival::Ignored));
        };
        let arrival = self.on_arrival(peer, header, total - HEADER_BYTES, truncated, region.len)?;
        Ok(Ok(arrival))
    }

    /// Blocking receive with nothing queued in front of it. The fast path reads no
    /// clock: in block mode the side that waits for a request blocks in `recv` with
    /// `SO_RCVTIMEO` set to the peer timeout, and the side that waits for an answer
    /// in `recv` with `SO_RCVTIMEO` set to the RTO (both re-armed only when the
    /// value changes), or, after a sign of loss, sleeps in `ppoll` for the RTO (see
    /// [`PRECISE_BELOW`], [`PRECISE_WAITS`]); in poll mode the clock is read once
    /// per 256 empty spins. One receive in [`SAMPLE_EVERY`] that waits for an answer (every one
    /// until the RTO's first measurement) times it for the RTO estimator (two
    /// clock reads), unless anything is sent again while it waits or the
    /// answer is itself a copy sent again (Karn's algorithm, RFC 6298 sec. 3), or
    /// the answer does not acknowledge everything this rank sent (it was not sent
    /// in reply to the last message).
    ///
    /// `first` is the outcome of a receive the fast path
    /// ([`UdpTransport::recv_fast`]) made already with this wait's socket timeout:
    /// the loop takes it as its first attempt's.
    pub(crate) fn recv_direct(
        &mut self,
        peer: Rank,
        region: Region,
        mut first: Option<Errno>,
    ) -> Result<(), TransportError> {
        let blocking = self.wait == WaitMode::Block;
        let retransmissions = self.stats.retransmissions;
        let p = self.peers[peer].as_mut().expect("checked peer");
        // Whether this rank waits for an answer: nothing this receive does changes
        // it (only a delivery, which ends it).
        let ahead = p.ahead();
        if p.said_bye && !ahead {
            return Err(closed_err(peer));
        }
        let sample_from = if ahead && (p.unsampled >= SAMPLE_EVERY || !p.rto.measured()) {
            Some((Instant::now(), retransmissions))
        } else {
            p.unsampled = p.unsampled.saturating_add(u32::from(ahead));
            None
        };
        // After a sign of loss (or a `BYE`), the RTO is waited for precisely.
        let mut careful = blocking && careful_wait(p);
        self.preserve(region)?;
        // When this wait began, and when the RTO was last restarted (set lazily).
        let mut started: Option<Instant> = None;
        let mut kicked: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            // Block mode: a short wait (the RTO) after a sign of loss sleeps in
            // ppoll(2); any other in recv itself, with SO_RCVTIMEO (see
            // PRECISE_BELOW and PRECISE_WAITS).
            let (want, precise) = if blocking {
                let p = self.peers[peer].as_mut().expect("checked peer");
                let wait = if ahead { p.rto.get() } else { self.timeout };
                if wait < PRECISE_BELOW && careful {
                    (wait, true)
                } else {
                    let want = socket_wait(wait);
                    if p.socket_timeout != Some(want) {
                        p.socket.set_read_timeout(Some(want)).map_err(|source| {
                            TransportError::Io {
                                transport: NAME,
                                peer,
                                op: "recv",
                                source,
                            }
                        })?;
                        p.socket_timeout = Some(want);
                    }
                    p.armed_for = Some(wait);
                    (want, false)
                }
            } else {
                (Duration::ZERO, false)
            };
            let arrival = if let Some(errno) = first.take() {
                Err(errno)
            } else if precise {
                let p = self.peers[peer].as_ref().expect("checked peer");
                let mut fds = [PollFd::new(&p.socket, PollFlags::IN)];
                match poll(&mut fds, Some(&timespec(want))) {
                    // Timed out: as when SO_RCVTIMEO expires.
                    Ok(0) => Err(Errno::AGAIN),
                    // Readable (a spurious wake-up reads nothing: wait again).
                    Ok(_) => match self.receive_once(peer, region, false)? {
                        Err(Errno::AGAIN) => Err(Errno::INTR),
                        other => other,
                    },
                    Err(Errno::INTR) => Err(Errno::INTR),
                    Err(e) => return Err(setup(format!("poll failed: {e}"))),
                }
            } else {
                self.receive_once(peer, region, blocking)?
            };
            match arrival {
                Ok(Arrival::Delivered { copy }) => {
                    if let Some((t0, retransmissions)) = sample_from {
                        let p = self.peers[peer].as_mut().expect("checked peer");
                        if !copy
                            && retransmissions == self.stats.retransmissions
                            && p.window.acked() == p.next_seq
                        {
                            p.rto.observe(t0.elapsed());
                            p.unsampled = 0;
                        }
                    }
                    return Ok(());
                }
                // The peer is alive (a request, a duplicate): the give-up timeout
                // counts from now, as `UdpOptions::timeout` says ("hear nothing").
                // The RTO does not restart: duplicates must not delay a probe.
                Ok(Arrival::Ignored) => started = None,
                Err(Errno::INTR) => {}
                Err(_) if blocking => {
                    // SO_RCVTIMEO expired: `want` has passed without a datagram.
                    let now = Instant::now();
                    let since = *started.get_or_insert_with(|| now - want);
                    let p = self.peers[peer].as_mut().expect("checked peer");
                    if !precise && p.ahead() {
                        // A coarse RTO wait expired: a sign of loss.
                        p.precise_waits = PRECISE_WAITS;
                        careful = true;
                    }
                    self.quiet_for(peer, since)?;
                }
                Err(_) => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins & 255 == 0 {
                        let now = Instant::now();
                        let since = *started.get_or_insert(now);
                        let last = *kicked.get_or_insert(now);
                        let rto = self.peers[peer].as_ref().expect("peer").rto.get();
                        if now - last >= rto.min(self.timeout) {
                            self.quiet_for(peer, since)?;
                            kicked = Some(now);
                        }
                    }
                }
            }
        }
    }

    /// Receives whatever has arrived for pending requests, without waiting; handles
    /// expired RTOs. Returns whether a request completed or a datagram arrived.
    pub(crate) fn progress(&mut self) -> Result<bool, TransportError> {
        let mut moved = false;
        for peer in 0..self.size {
            while let Some(&id) = self.peers[peer].as_ref().and_then(|p| p.recvs.front()) {
                let region = self.requests.get(id).expect("queued").region;
                let arrival = match self.receive_once(peer, region, false) {
                    Ok(arrival) => arrival,
                    Err(e) => return Err(self.fail_front(peer, e)),
                };
                match arrival {
                    Ok(Arrival::Delivered { .. }) => {
                        moved = true;
                        self.requests.get_mut(id).expect("queued").complete = true;
                        self.pool.release_region(region, Access::Write);
                        let p = self.peers[peer].as_mut().expect("peer");
                        p.recvs.pop_front();
                        p.last_heard = None;
                        p.quiet_since = None;
                    }
                    Ok(Arrival::Ignored) => moved = true,
                    Err(_) => {
                        // A peer that said `BYE` sends nothing more (as in `recv`).
                        if self.peers[peer].as_ref().is_some_and(|p| p.gone()) {
                            return Err(self.fail_front(peer, closed_err(peer)));
                        }
                        // Polling reads the clock once per 256 empty polls; blocking
                        // sleeps in between, so every wake-up checks.
                        self.empty_polls = self.empty_polls.wrapping_add(1);
                        let check = self.wait == WaitMode::Block || self.empty_polls & 255 == 0;
                        if check && self.quiet_expired(peer) {
                            if let Err(e) = self.on_quiet(peer) {
                                return Err(self.fail_front(peer, e));
                            }
                        }
                        break;
                    }
                }
            }
        }
        Ok(moved)
    }

    pub(crate) fn sleep_until_ready(&mut self) -> Result<(), TransportError> {
        let now = Instant::now();
        let mut left = MAX_RTO;
        for peer in 0..self.size {
            if self.peers[peer]
                .as_ref()
                .is_some_and(|p| !p.recvs.is_empty())
            {
                left = left.min(self.patience(peer, now));
            }
        }
        let mut fds = recycle(std::mem::take(&mut self.poll_fds));
        for p in self.peers.iter().flatten() {
            if !p.recvs.is_empty() {
                fds.push(PollFd::new(&p.socket, PollFlags::IN));
            }
        }
        let polled = if fds.is_empty() {
            Ok(0)
        } else {
            poll(&mut fds, Some(&timespec(left)))
        };
        self.poll_fds = recycle(fds);
        match polled {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(e) => Err(setup(format!("poll failed: {e}"))),
        }
    }
}

/// One attempt to send header `hdr` and `bytes` as one datagram on `socket`: up to
/// [`SMALL_BYTES`] copied behind the header in `scratch` and sent with `send`,
/// larger ones with `sendmsg` as two iovecs (no copy; a first send above
/// [`SMALL_BYTES`] goes framed instead, `transmit_framed`). Polling, it does not
/// block.
#[inline(always)]
fn send_datagram(
    socket: &Socket,
    scratch: &mut [u8; HEADER_BYTES + SMALL_BYTES],
    hdr: &[u8; HEADER_BYTES],
    bytes: &[u8],
    wait: WaitMode,
) -> Result<(), Errno> {
    let flags = match wait {
        WaitMode::Poll => SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        WaitMode::Block => SendFlags::NOSIGNAL,
    };
    let (head, rest) = scratch.split_at_mut(HEADER_BYTES);
    if let Some(tail) = rest.get_mut(..bytes.len()) {
        head.copy_from_slice(hdr);
        tail.copy_from_slice(bytes);
        let total = HEADER_BYTES + bytes.len();
        rustix::net::send(socket, &scratch[..total], flags).map(drop)
    } else {
        let iov = [IoSlice::new(hdr), IoSlice::new(bytes)];
        rustix::net::sendmsg(socket, &iov, &mut SendAncillaryBuffer::default(), flags).map(drop)
    }
}

/// Whether this receive from `p` waits for the RTO precisely (`ppoll`): after a
/// sign of loss, for the next [`PRECISE_WAITS`] waits for an answer, and while the
/// peer is saying goodbye. Counts the wait.
pub(crate) fn careful_wait(p: &mut crate::Peer) -> bool {
    if !p.ahead() {
        return false;
    }
    if p.precise_waits > 0 {
        p.precise_waits -= 1;
        return true;
    }
    p.said_bye
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_rounds_up_to_whole_milliseconds_across_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(coarse(ms(1500)), ms(1500));
        assert_eq!(coarse(ms(1500) + Duration::from_nanos(1)), ms(1501));
        assert_eq!(coarse(Duration::new(2, 999_000_001)), ms(3000));
        assert_eq!(coarse(Duration::from_secs(7)), ms(7000));
        // Below the floor, the floor; no overflow at the top.
        assert_eq!(coarse(ms(99) + Duration::from_nanos(1)), COARSE_FLOOR);
        assert_eq!(coarse(Duration::MAX), ms(u64::MAX));
    }
}
