//! Datagrams in and out: one `send`/`sendmsg` per message (header and payload,
//! small ones through a scratch buffer), one `recv`/`recvmsg` per arrival, the
//! blocking receive with its socket timeout, the nonblocking progress of pending
//! receives, and the sleep in `poll(2)` between them (see the crate docs,
//! "Waiting"). What an arrival means for the sequence is [`crate::reliability`]'s.

use crate::reliability::Arrival;
use crate::rto::{MAX_RTO, SAMPLE_EVERY};
use crate::wire::{Header, HEADER_BYTES};
use crate::{closed_err, errno_err, setup, UdpTransport, NAME};
use ngauge_transport::util::{recycle, timespec};
use ngauge_transport::{Access, Rank, Region, TransportError, WaitMode};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use std::io::IoSlice;
use std::time::{Duration, Instant};

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
    Duration::from_millis(u64::try_from(rto.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX))
        .max(COARSE_FLOOR)
}

/// What a datagram carries after its header.
#[derive(Clone, Copy)]
pub(crate) enum Payload {
    /// A region of the pool (a message sent for the first time).
    Region(Region),
    /// The message at this index of the peer's send window (sent again).
    Window(usize),
    /// Nothing (`NACK`).
    Empty,
}

impl UdpTransport {
    /// Sends one datagram: header (with the acknowledgement of what this rank
    /// delivered from `peer`) plus `payload`.
    pub(crate) fn transmit(
        &mut self,
        peer: Rank,
        flags: u8,
        seq: u32,
        payload: Payload,
    ) -> Result<(), TransportError> {
        self.stats.sent += 1;
        // Every datagram carries an acknowledgement.
        self.peers[peer].as_mut().expect("checked peer").owe_ack = false;
        let sent = self.stats.sent;
        if self.drop.as_mut().is_some_and(|d| d.drops(sent)) {
            self.stats.test_dropped += 1;
            return Ok(());
        }
        let p = self.peers[peer].as_ref().expect("checked peer");
        let ack = p.inbound.expected() as u8;
        let hdr = Header { flags, ack, seq }.encode();
        if let Payload::Region(region) = payload {
            if region.len > SMALL_BYTES {
                return self.transmit_framed(peer, region, &hdr);
            }
        }
        let p = self.peers[peer].as_ref().expect("checked peer");
        let bytes: &[u8] = match payload {
            Payload::Region(region) => self.pool.region(region)?,
            Payload::Window(index) => p.window.payload(index, &self.pool)?,
            Payload::Empty => &[],
        };
        let small = bytes.len() <= SMALL_BYTES;
        let total = HEADER_BYTES + bytes.len();
        if small {
            self.scratch[..HEADER_BYTES].copy_from_slice(&hdr);
            self.scratch[HEADER_BYTES..total].copy_from_slice(bytes);
        }
        let iov = [IoSlice::new(&hdr), IoSlice::new(bytes)];
        let send_flags = match self.wait {
            WaitMode::Poll => SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            WaitMode::Block => SendFlags::NOSIGNAL,
        };
        let mut spins = 0u32;
        let mut since: Option<Instant> = None;
        loop {
            let sent = if small {
                rustix::net::send(&p.socket, &self.scratch[..total], send_flags)
            } else {
                rustix::net::sendmsg(
                    &p.socket,
                    &iov,
                    &mut SendAncillaryBuffer::default(),
                    send_flags,
                )
            };
            match sent {
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) if self.wait == WaitMode::Poll => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins & 1023 == 0
                        && since.get_or_insert_with(Instant::now).elapsed() >= self.timeout
                    {
                        return Err(self.timeout_err(peer, "send"));
                    }
                }
                Err(e) => return self.send_failed(peer, e),
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
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins & 1023 == 0
                        && since.get_or_insert_with(Instant::now).elapsed() >= self.timeout
                    {
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

    /// One `recvmsg` into `region` from `peer`; classifies what arrived.
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
        let small = region.len <= SMALL_BYTES;
        let mut hdr = [0u8; HEADER_BYTES];
        // (datagram length, truncated)
        let (total, truncated) = if small {
            match rustix::net::recv(&p.socket, &mut self.scratch[..], flags) {
                Ok((n, full)) => {
                    if n >= HEADER_BYTES {
                        hdr.copy_from_slice(&self.scratch[..HEADER_BYTES]);
                    }
                    (full, full > n)
                }
                Err(e @ (Errno::AGAIN | Errno::INTR)) => return Ok(Err(e)),
                Err(e) => return Err(errno_err(peer, "recv", e)),
            }
        } else {
            // Framed (see SMALL_BYTES): the header lands in the bytes in front of
            // the region, which are put back.
            let frame = self.pool.framed_mut(region)?;
            let front: [u8; HEADER_BYTES] = frame[..HEADER_BYTES].try_into().expect("headroom");
            let got = rustix::net::recv(&p.socket, &mut *frame, flags);
            hdr.copy_from_slice(&frame[..HEADER_BYTES]);
            frame[..HEADER_BYTES].copy_from_slice(&front);
            match got {
                Ok((n, full)) => (full, full > n),
                Err(e @ (Errno::AGAIN | Errno::INTR)) => return Ok(Err(e)),
                Err(e) => return Err(errno_err(peer, "recv", e)),
            }
        };
        let Some(header) = Header::parse(&hdr[..total.min(HEADER_BYTES)]) else {
            // Not ours (a stray datagram on the port): ignore it.
            return Ok(Ok(Arrival::Ignored));
        };
        let arrival = self.on_arrival(peer, header, total - HEADER_BYTES, truncated, region.len)?;
        if small && matches!(arrival, Arrival::Delivered { .. }) {
            self.pool
                .region_mut(region)?
                .copy_from_slice(&self.scratch[HEADER_BYTES..HEADER_BYTES + region.len]);
        }
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
    pub(crate) fn recv_direct(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let p = self.peers[peer].as_mut().expect("checked peer");
        if p.said_bye && !p.ahead() {
            return Err(closed_err(peer));
        }
        let sample_from = if p.ahead() && (p.unsampled >= SAMPLE_EVERY || !p.rto.measured()) {
            Some((Instant::now(), self.stats.retransmissions))
        } else {
            p.unsampled = p.unsampled.saturating_add(u32::from(p.ahead()));
            None
        };
        self.preserve(region)?;
        let blocking = self.wait == WaitMode::Block;
        // After a sign of loss (or a `BYE`), the RTO is waited for precisely.
        let mut careful =
            blocking && careful_wait(self.peers[peer].as_mut().expect("checked peer"));
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
                let want = if p.ahead() { p.rto.get() } else { self.timeout };
                if want < PRECISE_BELOW && careful {
                    (want, true)
                } else {
                    let want = if want < PRECISE_BELOW {
                        coarse(want)
                    } else {
                        want
                    };
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
                    (want, false)
                }
            } else {
                (Duration::ZERO, false)
            };
            let arrival = if precise {
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
