//! UDP transport for ngauge: one datagram per message, one connected socket per pair
//! of ranks, sequence numbers, retransmission suited to ping-pong patterns, and counts
//! of lost, duplicated and reordered datagrams.
//!
//! # Wire format
//!
//! Every datagram is an 8-byte header followed by the message:
//!
//! ```text
//! 0      2      3      4                8
//! | "NU" | flags| 0    | seq (u32, LE)  | payload ...
//! ```
//!
//! `seq` counts the messages this rank sent to that peer (wrapping). `flags` marks a
//! timeout-driven retransmission (`RETX`) and a replay of a reply (`REPLAY`). The
//! largest message is the datagram limit minus the header: 65 507 − 8 = 65 499 bytes
//! over IPv4 (65 519 over IPv6); larger ones are refused with
//! [`TransportError::TooLarge`] naming the limit.
//!
//! # Recovery (why a lost datagram never hangs a run)
//!
//! A receive that hears nothing for the retransmission timeout (RTO, doubling up to
//! 1 s) retransmits this rank's last message to that peer, but only if this rank is
//! *ahead* of the peer (it sent more messages than it received, so it is waiting for
//! an answer: the pinging side of a ping-pong). A peer that receives a retransmitted
//! message it has already delivered replays its own last message (the lost answer).
//! Together this recovers every single loss in a ping-pong, whichever direction it hit,
//! in one RTO. Streaming patterns (n messages, one answer) recover a lost answer the
//! same way; a lost message in the middle of a stream is counted and skipped, and the
//! receive that can no longer be matched ends with [`TransportError::Timeout`] naming
//! the peer, after `timeout` without any datagram from it. A peer whose socket is gone
//! makes the kernel answer with ICMP port unreachable, which ends the wait at once
//! with [`TransportError::PeerClosed`]. A peer that drops its transport says `BYE`:
//! a receive waiting for it then ends with [`TransportError::PeerClosed`] at once, or,
//! when this rank waits for an answer (which the lingering peer may still replay),
//! after one more retransmission and RTO.
//!
//! # Buffer holds
//!
//! A datagram leaves at once, so a send holds nothing; a pending `irecv` holds its
//! bytes exclusively ([`BufferPool`]): another receive into them, pending or
//! blocking, and a send from them fail with [`TransportError::BufferBusy`]. The
//! receive gives its hold back when it completes or fails (a datagram of the wrong
//! size, a peer that closed; it is then forgotten: its id becomes unknown). A timeout
//! fails nothing: the receive keeps its bytes and may be waited for again; a
//! blocking `recv` that times out takes back its own request.
//!
//! # Counters ([`Transport::counters`])
//!
//! - `lost_datagrams`: messages whose first copy to arrive was a retransmission (the
//!   original was lost) plus sequence gaps skipped and never filled;
//! - `duplicated_datagrams`: arrivals of an already delivered sequence number;
//! - `reordered_datagrams`: arrivals of a skipped sequence number (it was late, not
//!   lost; it is taken off `lost_datagrams`);
//! - `retransmissions`: datagrams sent again (timeouts and replays);
//! - `receive_timeouts`: RTO expiries while a receive waited.
//!
//! # Waiting
//!
//! As in the TCP transport: in [`WaitMode::Block`] a blocking receive is one blocking
//! `recvmsg` with `SO_RCVTIMEO` set to the RTO (or to the peer timeout on the side that
//! waits for a request), in [`WaitMode::Poll`] `recvmsg(MSG_DONTWAIT)` in a
//! [`std::hint::spin_loop`]. Messages above 2 KiB go out with `sendmsg` straight from
//! the caller's buffer (header and payload as two iovecs: no copy) and come in with
//! `recvmsg` straight into it; smaller ones through a scratch buffer with plain
//! `send`/`recv`, which the kernel handles faster than an iovec pair (measured: the
//! 1-byte ping-pong then matches the C floor). The last message to each peer is kept
//! for retransmission by reference and copied only if its buffer is about to be
//! overwritten (a receive into it, `buffer_mut`, `free_buffer`).
#![deny(missing_docs)]
#![deny(unsafe_code)]

use ngauge_transport::util::{self, recycle, timespec, Completion, Requests};
use ngauge_transport::{
    Access, BufferId, BufferPool, Capabilities, Control, Counters, Rank, Region, RequestId,
    Transport, TransportError, WaitMode,
};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvAncillaryBuffer, RecvFlags, ReturnFlags, SendAncillaryBuffer, SendFlags};
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

const NAME: &str = "udp";
const MAGIC: [u8; 2] = *b"NU";
/// Bytes of the ngauge header in front of every datagram's payload.
pub const HEADER_BYTES: usize = 8;
const FLAG_RETX: u8 = 1;
const FLAG_REPLAY: u8 = 2;
const FLAG_BYE: u8 = 4;
/// Bounds of how long a dropped transport keeps answering retransmissions (see
/// [`Drop`]): 16 initial RTOs, covering four doublings.
const MIN_LINGER: Duration = Duration::from_millis(100);
const MAX_LINGER: Duration = Duration::from_secs(2);
/// Largest UDP payload over IPv4 (65 535 − 20 IP − 8 UDP).
pub const MAX_DATAGRAM_V4: usize = 65_507;
/// Largest UDP payload over IPv6 without jumbograms (65 535 − 8 UDP).
pub const MAX_DATAGRAM_V6: usize = 65_527;
/// Messages up to this size go through a scratch buffer with plain `send`/`recv`
/// (one copy of at most 2 KiB, cheaper than `sendmsg`/`recvmsg`'s iovec handling);
/// larger ones use two iovecs straight from and into the caller's buffer.
const SMALL_BYTES: usize = 2048;
const MAX_RTO: Duration = Duration::from_secs(1);
/// How many skipped sequence numbers are remembered to tell "late" from "lost".
const MISSING_MEMORY: usize = 4096;

/// How a [`UdpTransport`] is set up.
#[derive(Clone, Debug)]
pub struct UdpOptions {
    /// Spin on nonblocking calls or sleep in the kernel.
    pub wait: WaitMode,
    /// `SO_SNDBUF` (kernel default when `None`).
    pub send_buffer_bytes: Option<usize>,
    /// `SO_RCVBUF` (kernel default when `None`).
    pub recv_buffer_bytes: Option<usize>,
    /// How long a receive may hear nothing from its peer before it fails.
    pub timeout: Duration,
    /// First retransmission timeout (doubles per expiry up to 1 s).
    pub retransmit_after: Duration,
    /// Test hook: silently drop every n-th outgoing datagram (counted as
    /// `test_dropped_datagrams`), to exercise recovery on a loss-free link.
    pub drop_one_in: Option<u64>,
}

impl Default for UdpOptions {
    fn default() -> Self {
        UdpOptions {
            wait: WaitMode::Poll,
            send_buffer_bytes: None,
            recv_buffer_bytes: None,
            timeout: Duration::from_secs(30),
            retransmit_after: Duration::from_millis(50),
            drop_one_in: None,
        }
    }
}

#[derive(Debug)]
struct LastSent {
    seq: u32,
    region: Region,
    /// The payload was copied to [`Peer::kept`] because the buffer behind `region`
    /// was about to change.
    copied: bool,
}

#[derive(Debug)]
struct Peer {
    socket: Socket,
    /// Sequence number of the next message sent to this peer.
    next_seq: u32,
    /// Sequence number of the next message delivered from this peer.
    expected: u32,
    missing: VecDeque<u32>,
    last_sent: Option<LastSent>,
    /// The last message's bytes once its buffer changed (reused: cleared and
    /// refilled, so keeping a copy allocates only when a larger message comes).
    kept: Vec<u8>,
    recvs: VecDeque<RequestId>,
    rto: Duration,
    /// Last datagram heard from this peer (for the give-up timeout). `None`: reset
    /// since the clock was last read; the next read starts it (so the nonblocking
    /// path reads no clock per delivery).
    last_heard: Option<Instant>,
    /// Last time something happened on this link (for the RTO); `None` as above.
    quiet_since: Option<Instant>,
    /// Current `SO_RCVTIMEO` (block mode).
    socket_timeout: Option<Duration>,
    /// The peer dropped its transport (sent `BYE`).
    said_bye: bool,
}

impl Peer {
    /// Whether this rank sent more messages to the peer than it received from it.
    fn ahead(&self) -> bool {
        (self.next_seq.wrapping_sub(self.expected) as i32) > 0
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    lost: u64,
    duplicated: u64,
    reordered: u64,
    retransmissions: u64,
    timeouts: u64,
    sent: u64,
    test_dropped: u64,
}

#[derive(Debug)]
struct Request {
    region: Region,
    complete: bool,
}

impl Completion for Request {
    fn is_complete(&self) -> bool {
        self.complete
    }
}

/// A connected UDP transport: one connected socket per peer rank.
#[derive(Debug)]
pub struct UdpTransport {
    rank: Rank,
    size: usize,
    wait: WaitMode,
    timeout: Duration,
    rto_initial: Duration,
    drop_one_in: Option<u64>,
    max_payload: usize,
    peers: Vec<Option<Peer>>,
    pool: BufferPool,
    requests: Requests<Request>,
    stats: Stats,
    /// Header plus a small message, for the copy path.
    scratch: Vec<u8>,
    /// Nonblocking receive attempts that found nothing (to pace clock reads).
    empty_polls: u32,
    /// `poll(2)` descriptors, kept empty between sleeps to reuse the allocation.
    poll_fds: Vec<PollFd<'static>>,
}

enum Arrival {
    Delivered,
    Ignored,
}

fn setup(reason: impl Into<String>) -> TransportError {
    util::setup_error(NAME, reason)
}

/// ICMP port unreachable (the peer's socket is gone) shows as `ECONNREFUSED`.
fn errno_err(peer: Rank, op: &'static str, errno: Errno) -> TransportError {
    util::errno_error(NAME, peer, op, errno)
}

/// The peer said `BYE` (dropped its transport) while a receive from it was pending.
fn closed_err(peer: Rank) -> TransportError {
    TransportError::PeerClosed {
        transport: NAME,
        peer,
        op: "recv",
    }
}

fn header(flags: u8, seq: u32) -> [u8; HEADER_BYTES] {
    let s = seq.to_le_bytes();
    [MAGIC[0], MAGIC[1], flags, 0, s[0], s[1], s[2], s[3]]
}

fn regions_overlap(a: Region, b: Region) -> bool {
    a.buffer == b.buffer && a.offset < b.offset + b.len && b.offset < a.offset + a.len
}

impl UdpTransport {
    /// Opens one socket per peer on `data_addr`, exchanges the ports with
    /// `control.allgather` (a collective call: every rank must call this together)
    /// and connects each socket to its peer's.
    pub fn connect(
        control: &mut dyn Control,
        data_addr: IpAddr,
        opts: &UdpOptions,
    ) -> Result<UdpTransport, TransportError> {
        let rank = control.rank();
        let size = control.size();
        let bind = SocketAddr::new(data_addr, 0);
        let mut sockets: Vec<Option<Socket>> = Vec::with_capacity(size);
        let mut ports = Vec::with_capacity(size);
        for peer in 0..size {
            if peer == rank {
                sockets.push(None);
                ports.push(0u16);
                continue;
            }
            let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))
                .and_then(|s| {
                    if let Some(bytes) = opts.send_buffer_bytes {
                        s.set_send_buffer_size(bytes)?;
                    }
                    if let Some(bytes) = opts.recv_buffer_bytes {
                        s.set_recv_buffer_size(bytes)?;
                    }
                    s.bind(&bind.into())?;
                    Ok(s)
                })
                .map_err(|e| setup(format!("cannot bind a socket on {bind}: {e}")))?;
            let port = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .map(|a| a.port())
                .ok_or_else(|| setup("socket has no address"))?;
            sockets.push(Some(socket));
            ports.push(port);
        }
        let mine = format!(
            "{}|{}",
            data_addr,
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        let all = control
            .allgather(mine.as_bytes())
            .map_err(|e| setup(format!("exchanging endpoints: {e}")))?;
        let now = Instant::now();
        let mut peers: Vec<Option<Peer>> = (0..size).map(|_| None).collect();
        for (peer, socket) in sockets.into_iter().enumerate() {
            let Some(socket) = socket else { continue };
            let endpoint = parse_endpoint(&all[peer], size)
                .map(|(ip, ports)| SocketAddr::new(ip, ports[rank]))
                .ok_or_else(|| setup(format!("rank {peer} sent a malformed endpoint")))?;
            socket
                .connect(&endpoint.into())
                .and_then(|()| socket.set_write_timeout(Some(opts.timeout)))
                .map_err(|e| setup(format!("connecting to rank {peer} at {endpoint}: {e}")))?;
            peers[peer] = Some(Peer {
                socket,
                next_seq: 0,
                expected: 0,
                missing: VecDeque::new(),
                last_sent: None,
                kept: Vec::new(),
                recvs: VecDeque::new(),
                rto: opts.retransmit_after,
                last_heard: Some(now),
                quiet_since: Some(now),
                socket_timeout: None,
                said_bye: false,
            });
        }
        let max_datagram = if data_addr.is_ipv4() {
            MAX_DATAGRAM_V4
        } else {
            MAX_DATAGRAM_V6
        };
        Ok(UdpTransport {
            rank,
            size,
            wait: opts.wait,
            timeout: opts.timeout,
            rto_initial: opts.retransmit_after.max(Duration::from_micros(100)),
            drop_one_in: opts.drop_one_in.filter(|&n| n > 0),
            max_payload: max_datagram - HEADER_BYTES,
            peers,
            pool: BufferPool::new(NAME),
            requests: Requests::new(NAME),
            stats: Stats::default(),
            scratch: vec![0; HEADER_BYTES + SMALL_BYTES],
            empty_polls: 0,
            poll_fds: Vec::new(),
        })
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        if self.peers.get(peer).is_some_and(Option::is_some) {
            Ok(())
        } else {
            Err(TransportError::NoSuchPeer {
                transport: NAME,
                peer,
                size: self.size,
                me: self.rank,
            })
        }
    }

    fn check_size(&self, len: usize) -> Result<(), TransportError> {
        if len > self.max_payload {
            Err(TransportError::TooLarge {
                transport: NAME,
                len_bytes: len,
                max_bytes: self.max_payload,
            })
        } else {
            Ok(())
        }
    }

    /// Copies every kept last message that `region` is about to overwrite.
    fn preserve(&mut self, region: Region) -> Result<(), TransportError> {
        for p in self.peers.iter_mut().flatten() {
            if let Some(last) = p.last_sent.as_mut() {
                if !last.copied && regions_overlap(last.region, region) {
                    p.kept.clear();
                    p.kept.extend_from_slice(self.pool.region(last.region)?);
                    last.copied = true;
                }
            }
        }
        Ok(())
    }

    fn preserve_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.preserve(buffer.prefix(usize::MAX / 2))
    }

    /// Sends one datagram: header plus `payload` (a region of the pool, or a kept copy).
    fn transmit(
        &mut self,
        peer: Rank,
        flags: u8,
        seq: u32,
        payload: Payload,
    ) -> Result<(), TransportError> {
        self.stats.sent += 1;
        if self.drop_one_in.is_some_and(|n| self.stats.sent % n == 0) {
            self.stats.test_dropped += 1;
            return Ok(());
        }
        let p = self.peers[peer].as_ref().expect("checked peer");
        let bytes: &[u8] = match payload {
            Payload::Region(region) => self.pool.region(region)?,
            Payload::Kept => p
                .last_sent
                .as_ref()
                .filter(|l| l.copied)
                .map_or(&[], |_| &p.kept[..]),
        };
        let hdr = header(flags, seq);
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
                Err(Errno::AGAIN) => return Err(self.timeout_err(peer, "send")),
                Err(e) => return Err(errno_err(peer, "send", e)),
            }
        }
    }

    fn timeout_err(&self, peer: Rank, op: &'static str) -> TransportError {
        TransportError::Timeout {
            transport: NAME,
            peer,
            op,
            after: self.timeout,
        }
    }

    /// Sends the last message to `peer` again, if there is one.
    fn retransmit(&mut self, peer: Rank, flags: u8) -> Result<(), TransportError> {
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

    /// One `recvmsg` into `region` from `peer`; classifies what arrived.
    fn receive_once(
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
            let bytes = self.pool.region_mut(region)?;
            let mut iov = [IoSliceMut::new(&mut hdr), IoSliceMut::new(bytes)];
            match rustix::net::recvmsg(
                &p.socket,
                &mut iov,
                &mut RecvAncillaryBuffer::default(),
                flags,
            ) {
                Ok(msg) => (msg.bytes, msg.flags.contains(ReturnFlags::TRUNC)),
                Err(e @ (Errno::AGAIN | Errno::INTR)) => return Ok(Err(e)),
                Err(e) => return Err(errno_err(peer, "recv", e)),
            }
        };
        if total < HEADER_BYTES || hdr[..2] != MAGIC {
            // Not ours (a stray datagram on the port): ignore it.
            return Ok(Ok(Arrival::Ignored));
        }
        let seq = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]);
        let flags = hdr[2];
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
            return Ok(Ok(Arrival::Ignored));
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
            return Ok(Ok(Arrival::Ignored));
        }
        let payload_len = total - HEADER_BYTES;
        if truncated || payload_len != region.len {
            return Err(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: region.len,
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
        if small {
            self.pool
                .region_mut(region)?
                .copy_from_slice(&self.scratch[HEADER_BYTES..HEADER_BYTES + region.len]);
        }
        Ok(Ok(Arrival::Delivered))
    }

    /// The RTO for `peer` expired: give up after `timeout` of silence, else
    /// retransmit if this rank waits for an answer, and back off.
    fn on_quiet(&mut self, peer: Rank) -> Result<(), TransportError> {
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

    /// How long the next blocking wait on `peer` may sleep before acting.
    /// How long the next blocking wait on `peer` may sleep before acting; starts the
    /// timers that were reset (`None`) at `now`.
    fn patience(&mut self, peer: Rank, now: Instant) -> Duration {
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
    fn quiet_expired(&mut self, peer: Rank) -> bool {
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

    /// Blocking receive with nothing queued in front of it. The fast path reads no
    /// clock: in block mode `SO_RCVTIMEO` (the RTO, or the peer timeout on the side
    /// that waits for a request) is re-armed only when that value changes; in poll
    /// mode the clock is read once per 256 empty spins.
    fn recv_direct(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        if p.said_bye && !p.ahead() {
            return Err(closed_err(peer));
        }
        self.preserve(region)?;
        let blocking = self.wait == WaitMode::Block;
        // When this wait began, and when the RTO was last restarted (set lazily).
        let mut started: Option<Instant> = None;
        let mut kicked: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            let want = if blocking {
                let p = self.peers[peer].as_mut().expect("checked peer");
                let want = if p.ahead() { p.rto } else { self.timeout };
                if p.socket_timeout != Some(want) {
                    p.socket
                        .set_read_timeout(Some(want))
                        .map_err(|source| TransportError::Io {
                            transport: NAME,
                            peer,
                            op: "recv",
                            source,
                        })?;
                    p.socket_timeout = Some(want);
                }
                want
            } else {
                Duration::ZERO
            };
            match self.receive_once(peer, region, blocking)? {
                Ok(Arrival::Delivered) => return Ok(()),
                Ok(Arrival::Ignored) | Err(Errno::INTR) => {}
                Err(_) if blocking => {
                    // SO_RCVTIMEO expired: `want` has passed without a datagram.
                    let now = Instant::now();
                    let since = *started.get_or_insert_with(|| now - want);
                    self.quiet_for(peer, since)?;
                }
                Err(_) => {
                    std::hint::spin_loop();
                    spins = spins.wrapping_add(1);
                    if spins & 255 == 0 {
                        let now = Instant::now();
                        let since = *started.get_or_insert(now);
                        let last = *kicked.get_or_insert(now);
                        let rto = self.peers[peer].as_ref().expect("peer").rto;
                        if now - last >= rto.min(self.timeout) {
                            self.quiet_for(peer, since)?;
                            kicked = Some(now);
                        }
                    }
                }
            }
        }
    }

    /// A blocking receive waiting since `since` heard nothing for an RTO: give up
    /// after `timeout`, else retransmit if this rank waits for an answer, and back off.
    fn quiet_for(&mut self, peer: Rank, since: Instant) -> Result<(), TransportError> {
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

    /// Receives whatever has arrived for pending requests, without waiting; handles
    /// expired RTOs. Returns whether a request completed or a datagram arrived.
    fn progress(&mut self) -> Result<bool, TransportError> {
        let mut moved = false;
        for peer in 0..self.size {
            while let Some(&id) = self.peers[peer].as_ref().and_then(|p| p.recvs.front()) {
                let region = self.requests.get(id).expect("queued").region;
                let arrival = match self.receive_once(peer, region, false) {
                    Ok(arrival) => arrival,
                    Err(e) => return Err(self.fail_front(peer, e)),
                };
                match arrival {
                    Ok(Arrival::Delivered) => {
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

    fn sleep_until_ready(&mut self) -> Result<(), TransportError> {
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

    fn new_request(&mut self, region: Region, complete: bool) -> RequestId {
        self.requests.insert(Request { region, complete })
    }

    /// The first pending receive from `peer` hit `err`. Unless it is a timeout
    /// (after which the receive stays pending and may be waited for again), the
    /// receive ends: it leaves the queue and the table (its id becomes unknown) and
    /// releases its hold, so its buffer can be used and freed again. Returns `err`.
    #[cold]
    fn fail_front(&mut self, peer: Rank, err: TransportError) -> TransportError {
        if !matches!(err, TransportError::Timeout { .. }) {
            let p = self.peers[peer].as_mut().expect("progressed peer exists");
            if let Some(id) = p.recvs.pop_front() {
                self.forget(id);
            }
        }
        err
    }

    /// Takes back the receive `id`, just posted by a blocking `recv` that is about
    /// to fail, unless it completed or failed already.
    fn withdraw(&mut self, peer: Rank, id: RequestId) {
        if self.requests.get(id).is_some_and(|r| !r.complete) {
            let p = self.peers[peer].as_mut().expect("checked peer");
            if let Some(i) = p.recvs.iter().position(|&r| r == id) {
                p.recvs.remove(i);
                self.forget(id);
            }
        }
    }

    /// Removes the pending receive `id`, no longer queued, from the table and
    /// releases its hold.
    fn forget(&mut self, id: RequestId) {
        if let Some(req) = self.requests.get(id) {
            let region = req.region;
            self.requests.retire_all(&[id]);
            self.pool.release_region(region, Access::Write);
        }
    }
}

#[derive(Clone, Copy)]
enum Payload {
    Region(Region),
    Kept,
}

fn parse_endpoint(bytes: &[u8], size: usize) -> Option<(IpAddr, Vec<u16>)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (ip, ports) = text.split_once('|')?;
    let ports: Vec<u16> = ports
        .split(',')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    (ports.len() == size).then_some((ip.parse().ok()?, ports))
}

impl Transport for UdpTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: false,
            ordered: false,
            max_message_bytes: Some(self.max_payload),
            may_split: false,
            needs_registered_memory: false,
            checks_message_size: true,
        }
    }
    fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    fn alloc_buffer(&mut self, len: usize) -> Result<BufferId, TransportError> {
        self.pool.try_alloc(len)
    }
    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.pool.get(buffer)?;
        self.preserve_buffer(buffer)?;
        self.pool.free(buffer)
    }
    fn buffer(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.pool.get(buffer)
    }
    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.pool.get(buffer)?;
        self.preserve_buffer(buffer)?;
        self.pool.get_mut(buffer)
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        self.check_size(region.len)?;
        // Not from bytes a pending receive writes (sends complete at once and hold
        // nothing themselves).
        self.pool.region_for_read(region)?;
        let p = self.peers[peer].as_mut().expect("checked peer");
        let seq = p.next_seq;
        self.transmit(peer, 0, seq, Payload::Region(region))?;
        let p = self.peers[peer].as_mut().expect("checked peer");
        p.next_seq = seq.wrapping_add(1);
        p.last_sent = Some(LastSent {
            seq,
            region,
            copied: false,
        });
        Ok(())
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        self.check_size(region.len)?;
        // Not into bytes a pending receive (from any peer) writes.
        self.pool.region_for_write(region)?;
        if self.peers[peer].as_ref().expect("peer").recvs.is_empty() {
            self.recv_direct(peer, region)
        } else {
            let id = self.irecv(peer, region)?;
            self.wait(id).inspect_err(|_| self.withdraw(peer, id))
        }
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        // A datagram leaves (or is dropped) at once: the request is complete.
        self.send(peer, region)?;
        Ok(self.new_request(region, true))
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        self.check_size(region.len)?;
        self.preserve(region)?;
        self.pool.acquire_write(region)?;
        let id = self.new_request(region, false);
        let p = self.peers[peer].as_mut().expect("peer");
        if p.recvs.is_empty() {
            p.quiet_since = None;
            p.last_heard = None;
        }
        p.recvs.push_back(id);
        Ok(id)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        if !self.requests.is_complete(request)? {
            self.progress()?;
        }
        Ok(self.requests.retire_if_complete(request))
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        self.wait_all(&[request])
    }

    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        self.requests.check_all(requests)?;
        loop {
            if self.requests.all_complete(requests) {
                self.requests.retire_all(requests);
                return Ok(());
            }
            if self.progress()? {
                continue;
            }
            match self.wait {
                WaitMode::Poll => std::hint::spin_loop(),
                WaitMode::Block => self.sleep_until_ready()?,
            }
        }
    }

    fn counters(&self) -> Counters {
        let s = self.stats;
        let mut entries = vec![
            ("lost_datagrams", s.lost),
            ("duplicated_datagrams", s.duplicated),
            ("reordered_datagrams", s.reordered),
            ("retransmissions", s.retransmissions),
            ("receive_timeouts", s.timeouts),
        ];
        if self.drop_one_in.is_some() {
            entries.push(("test_dropped_datagrams", s.test_dropped));
        }
        Counters { entries }
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
            &header(flags, 0),
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
        if n < HEADER_BYTES || scratch[..2] != MAGIC {
            return Some(false);
        }
        let flags = scratch[2];
        if flags & FLAG_BYE != 0 {
            p.said_bye = true;
            return Some(false);
        }
        let seq = u32::from_le_bytes([scratch[4], scratch[5], scratch[6], scratch[7]]);
        let old = (seq.wrapping_sub(p.expected) as i32) < 0;
        Some(old && flags & FLAG_RETX != 0)
    }
}

#[cfg(test)]
mod tests;
