//! UDP transport for ngauge: one datagram per message, one connected socket per pair
//! of ranks, sequence numbers, in-order delivery with recovery of lost datagrams (no
//! acknowledgement datagrams in the lossless path), a retransmission timeout that
//! follows the measured round trip (RFC 6298), and counts of what was lost.
//!
//! # Wire format
//!
//! Every datagram is a 16-byte header followed by the message:
//!
//! ```text
//! 0      2      3      4                8                         16
//! | "NU" | flags| ack  | seq (u32, LE)  | connection id (u64, LE) | payload ...
//! ```
//!
//! The connection id proves the datagram belongs to this job and this link: each
//! rank draws one at random per peer (from the operating system's random source)
//! for the datagrams it receives from that peer and hands it over the control
//! plane, which only ranks that proved the job token (or MPI's own launch) can
//! read, with its ports. A datagram without it (a stranger's, sent with the
//! peer's source address) is dropped before anything else in it is read, counted
//! (`foreign_datagrams`) and logged at a limited rate: never delivered, never
//! answered, never taken as a `BYE` (`docs/reliability.md`, "UDP datagrams").
//!
//! `seq` counts the messages this rank sent to that peer (wrapping); `ack` is the low
//! byte of how many messages this rank delivered from that peer. `flags` marks a
//! copy sent again after a timeout (`RETX`) or on request (`REPLAY`), and the
//! header-only datagrams `NACK` ("send again from `seq`"), `ACK` ("I delivered
//! everything before `seq`") and `BYE` (the transport was dropped). The largest
//! message is the datagram limit minus the header: 65 507 − 16 = 65 491 bytes over
//! IPv4 (65 511 over IPv6); larger ones are refused with
//! [`TransportError::TooLarge`] naming the limit.
//!
//! # Recovery (why a lost datagram neither hangs nor ends a run)
//!
//! Every rank keeps the messages it sent to a peer until the peer acknowledges them
//! (the `ack` byte of its datagrams: in a request/answer pattern the answer
//! acknowledges the request), by reference to the caller's buffer. Messages are
//! delivered in the order they were sent (go-back-N): a datagram that arrives
//! after a missing one is dropped and the sender is asked (`NACK`) to send again
//! from the missing one, so a receive gets exactly the message posted for it, in
//! a ping-pong or in a stream of n messages (the PRTT(n) of `loggp`). A loss at the
//! end of a flight leaves no gap to see: a rank that waits for an answer and hears
//! nothing for the retransmission timeout (RTO) sends its last unacknowledged
//! message again (or, with none, asks for the answer), and a peer that receives a
//! copy of a message it has delivered already sends what the waiting rank has not
//! acknowledged (the lost answer). The RTO follows RFC 6298 (smoothed round trip
//! and its variation, exponential backoff) with a floor of 200 us instead of 1 s,
//! fed with the median of every 8 round trips so that one in which the peer was
//! descheduled does not raise it (see `rto`). The final answer of an exchange can
//! still be lost after its sender has moved on to the control channel:
//! [`Transport::settle`], which the patterns call before control-plane waits, and
//! the linger of a dropped transport keep answering until the peer has what it
//! needs.
//!
//! A receive gives up after `timeout` without hearing from its peer, with
//! [`TransportError::Timeout`] naming the peer. A peer whose socket is gone makes
//! the kernel answer with ICMP port unreachable, which ends the wait at once with
//! [`TransportError::PeerClosed`]. A peer that drops its transport says `BYE`: a
//! receive waiting for it then ends with [`TransportError::PeerClosed`] at once, or,
//! when this rank waits for an answer (which the lingering peer may still send),
//! after three more unanswered probes and 50 ms.
//!
//! # Buffer holds
//!
//! A datagram leaves at once, so a send holds nothing; a pending `irecv` holds its
//! bytes exclusively ([`BufferPool`]): another receive into them, pending or
//! blocking, and a send from them fail with [`TransportError::BufferBusy`]. The
//! receive gives its hold back when it completes or fails (a datagram of the wrong
//! size, a peer that closed; it is then forgotten: its id becomes unknown). A timeout
//! fails nothing: the receive keeps its bytes and may be waited for again; a
//! blocking `recv` that times out takes back its own request. Messages kept for
//! sending again are copied only when their bytes are about to change (a receive
//! into them, `buffer_mut`, `free_buffer`).
//!
//! # Counters ([`Transport::counters`])
//!
//! - `lost_datagrams`: messages delivered from a copy sent again whose original
//!   never arrived;
//! - `duplicated_datagrams`: arrivals of an already delivered message;
//! - `reordered_datagrams`: originals delivered after a later message had arrived
//!   (late, not lost);
//! - `out_of_order_datagrams`: arrivals after a missing message, dropped (the
//!   sender sends them again);
//! - `retransmissions`: datagrams sent again (after a timeout or on request);
//! - `resend_requests`: `NACK`s sent;
//! - `receive_timeouts`: RTO expiries while this rank waited for an answer (or, in
//!   `settle`, for an acknowledgement);
//! - `refused_sends`: datagrams the kernel refused to send (`EPERM`: a firewall
//!   rule dropped it on its way out; `ENOBUFS`), lost like a drop on the wire;
//! - `foreign_datagrams`: arrivals without this link's connection id (forged or
//!   stray), dropped unread;
//! - `test_dropped_datagrams` (only with [`UdpOptions::drop_one_in`]).
//!
//! # Waiting
//!
//! In [`WaitMode::Block`] a blocking receive that waits for a request is one blocking
//! `recvmsg` with `SO_RCVTIMEO` set to the peer timeout, as in the TCP transport; one
//! that waits for an answer is one blocking `recvmsg` with `SO_RCVTIMEO` set to the
//! RTO, raised to at least 100 ms (a socket timeout of a few tens of milliseconds
//! costs about 2 us per wake-up on a VM, one of 40 ms or more nothing measurable),
//! until a sign of loss (a wait that expired, a message delivered from a
//! copy whose original never came, an arrival after a gap); the next 1024 such
//! receives sleep in `ppoll(2)` for the RTO and then read without blocking, so that
//! under loss each recovery takes one RTO. `ppoll`'s precise timer costs a fifth of
//! a loopback round trip on a VM (it reprograms the timer hardware at every
//! receive), which the C floor does not pay: the first loss after a loss-free
//! stretch is noticed after 100 ms instead. In [`WaitMode::Poll`] it is
//! `recv(MSG_DONTWAIT)` in a [`std::hint::spin_loop`]. Messages above 2 KiB go out
//! with `send` straight from the caller's buffer and come in with `recv` straight
//! into it, framed: the pool keeps 16 bytes of headroom in front of every buffer, and
//! the header is written into the 16 bytes in front of the region (saved and put
//! back when they are the caller's), so header and payload are one slice and no
//! payload byte is copied. Smaller ones go through a scratch buffer with plain
//! `send`/`recv`. Both because the kernel handles one slice faster than an iovec
//! pair (measured: the 1-byte ping-pong then matches the C floor; at 65000 B two
//! iovecs cost 2-3 %).
//!
//! # Code
//!
//! `wire` is the datagram header; `inbound` the receiving side of a sequence,
//! `window` the sending side's unacknowledged messages, `rto` the RFC 6298 timer;
//! `reliability` what arrivals and timeouts do with them; `linger` the serving of
//! peers outside receives (`settle`, and a dropped transport); `datagram` the
//! system calls that move datagrams and the waits between them; `fast` the
//! common case of a blocking receive (the next message of at most 2 KiB, arriving
//! in order, nothing to time or to wait for precisely) in one piece, handing
//! everything else to `datagram`; this file holds the options, the setup, the
//! buffer holds and the [`Transport`] impl. The per-message path keeps the
//! in-order case inline and moves every other case out of line (`#[cold]`):
//! callgrind counted about 1060 instructions per round trip on the answering side
//! of a 1-byte ping-pong before, 700 after, TCP's 430
//! (`docs/findings/2026-11-24-verbs-udp-speed.md`, fifth session).
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod datagram;
mod drop;
mod fast;
mod inbound;
mod linger;
mod reliability;
mod rto;
mod window;
mod wire;

pub use wire::{HEADER_BYTES, MAX_DATAGRAM_V4, MAX_DATAGRAM_V6};

use datagram::{Payload, SMALL_BYTES};
use inbound::Inbound;
use ngauge_transport::auth::RefusalLog;
use ngauge_transport::util::{self, Completion, Requests};
use ngauge_transport::{
    Access, BufferId, BufferPool, Buffers, Capabilities, Control, Counters, Rank, Region,
    RequestId, Transport, TransportError, WaitMode,
};
use rto::{Rto, SAMPLE_EVERY};
use rustix::event::PollFd;
use rustix::io::Errno;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use window::SendWindow;

const NAME: &str = "udp";

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
    /// Retransmission timeout until the round trip has been measured; from then on
    /// it follows the measured round trip (RFC 6298, see the crate docs).
    pub retransmit_after: Duration,
    /// Test hook: silently drop every n-th outgoing datagram (counted as
    /// `test_dropped_datagrams`), to exercise recovery on a loss-free link. `BYE`
    /// is never dropped.
    pub drop_one_in: Option<u64>,
    /// With [`UdpOptions::drop_one_in`] = n: drop each datagram with probability
    /// 1/n, drawn from a generator seeded with this and the rank (the same drops
    /// again for the same seed and datagrams), instead of every n-th.
    pub drop_seed: Option<u64>,
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
            drop_seed: None,
        }
    }
}

#[derive(Debug)]
struct Peer {
    socket: Socket,
    /// The connection id datagrams from this peer must carry (drawn by this rank).
    id_in: u64,
    /// The connection id this rank's datagrams to the peer carry (drawn by it).
    id_out: u64,
    /// Sequence number of the next message sent to this peer.
    next_seq: u32,
    /// The messages from this peer: which one is next, what was missed.
    inbound: Inbound,
    /// The messages sent to this peer that it has not acknowledged.
    window: SendWindow,
    recvs: VecDeque<RequestId>,
    rto: Rto,
    /// Blocking receives from this peer since its round trip was last sampled.
    unsampled: u32,
    /// Messages were delivered from this peer since this rank last sent it a
    /// datagram (which carries an acknowledgement).
    owe_ack: bool,
    /// Where the last go-back-N resend to this peer started.
    resent_from: Option<u32>,
    /// Last datagram heard from this peer (for the give-up timeout). `None`: reset
    /// since the clock was last read; the next read starts it (so the nonblocking
    /// path reads no clock per delivery).
    last_heard: Option<Instant>,
    /// Last time something happened on this link (for the RTO); `None` as above.
    quiet_since: Option<Instant>,
    /// Current `SO_RCVTIMEO` (block mode).
    socket_timeout: Option<Duration>,
    /// The wait (the RTO or the peer timeout) that `socket_timeout` was set for
    /// (`datagram::socket_wait` of it), so that the fast path (`fast`) sees that the
    /// socket is ready for a wait with one comparison.
    armed_for: Option<Duration>,
    /// Waits for an answer left that use the precise `ppoll` wait for the RTO
    /// (block mode; set by a sign of loss, see `datagram::PRECISE_WAITS`).
    precise_waits: u32,
    /// The peer dropped its transport (sent `BYE`).
    said_bye: bool,
    /// Probes sent since the peer said `BYE` (see `reliability::BYE_PROBES`).
    probes_after_bye: u32,
    /// When its `BYE` arrived during a receive (see `reliability::BYE_PATIENCE`).
    bye_at: Option<Instant>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    lost: u64,
    duplicated: u64,
    reordered: u64,
    out_of_order: u64,
    retransmissions: u64,
    resend_requests: u64,
    timeouts: u64,
    sent: u64,
    refused: u64,
    foreign: u64,
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
    drop: Option<drop::DropHook>,
    max_payload: usize,
    peers: Vec<Option<Peer>>,
    pool: BufferPool,
    requests: Requests<Request>,
    stats: Stats,
    /// Header plus a small message, for the copy path.
    scratch: Box<[u8; HEADER_BYTES + SMALL_BYTES]>,
    /// Nonblocking receive attempts that found nothing (to pace clock reads).
    empty_polls: u32,
    /// `poll(2)` descriptors, kept empty between sleeps to reuse the allocation.
    poll_fds: Vec<PollFd<'static>>,
    /// Rate-limited stderr lines about foreign datagrams.
    foreign_log: RefusalLog,
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

impl UdpTransport {
    /// Opens one socket per peer on `data_addr`, draws a connection id per peer,
    /// exchanges ports and ids with `control.allgather` (a collective call: every
    /// rank must call this together) and connects each socket to its peer's.
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
        // Unguessable by anyone outside the job: the operating system's random
        // source, as the TCP transport's keys.
        let ids: Vec<u64> = (0..size)
            .map(|_| getrandom::u64())
            .collect::<Result<_, _>>()
            .map_err(|e| setup(format!("cannot draw connection ids: {e}")))?;
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
            "{}@{}|{}",
            ids.iter()
                .map(|id| format!("{id:x}"))
                .collect::<Vec<_>>()
                .join(","),
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
            let (endpoint, id_out) = split_ids(&all[peer], size)
                .and_then(|(theirs, endpoint)| {
                    let (ip, ports) = parse_endpoint(endpoint, size)?;
                    Some((SocketAddr::new(ip, ports[rank]), theirs[rank]))
                })
                .ok_or_else(|| setup(format!("rank {peer} sent a malformed endpoint")))?;
            socket
                .connect(&endpoint.into())
                .and_then(|()| socket.set_write_timeout(Some(opts.timeout)))
                .map_err(|e| setup(format!("connecting to rank {peer} at {endpoint}: {e}")))?;
            peers[peer] = Some(Peer {
                socket,
                id_in: ids[peer],
                id_out,
                next_seq: 0,
                inbound: Inbound::default(),
                window: SendWindow::default(),
                recvs: VecDeque::new(),
                rto: Rto::new(opts.retransmit_after),
                // The first blocking receive takes a sample.
                unsampled: SAMPLE_EVERY,
                owe_ack: false,
                resent_from: None,
                last_heard: Some(now),
                quiet_since: Some(now),
                socket_timeout: None,
                armed_for: None,
                precise_waits: 0,
                said_bye: false,
                probes_after_bye: 0,
                bye_at: None,
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
            drop: drop::DropHook::new(opts.drop_one_in, opts.drop_seed, rank),
            max_payload: max_datagram - HEADER_BYTES,
            peers,
            // Room for the header in front of every buffer: a large message goes out
            // and comes in as one slice (datagram.rs, `framed`).
            pool: BufferPool::with_headroom(NAME, HEADER_BYTES),
            requests: Requests::new(NAME),
            stats: Stats::default(),
            scratch: Box::new([0; HEADER_BYTES + SMALL_BYTES]),
            empty_polls: 0,
            poll_fds: Vec::new(),
            foreign_log: RefusalLog::new(format!("ngauge: udp: rank {rank}")),
        })
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        util::check_peer(NAME, peer, self.rank, self.size)
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

    /// Copies every kept message (to any peer) that `region` is about to overwrite.
    #[inline(always)]
    fn preserve(&mut self, region: Region) -> Result<(), TransportError> {
        for p in self.peers.iter_mut().flatten() {
            p.window.preserve(region, &self.pool)?;
        }
        Ok(())
    }

    fn preserve_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.preserve(buffer.prefix(usize::MAX / 2))
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

/// The connection ids in front of an endpoint (`id,id,...@endpoint`, hexadecimal,
/// one per rank) and the endpoint's bytes.
fn split_ids(bytes: &[u8], size: usize) -> Option<(Vec<u64>, &[u8])> {
    let at = bytes.iter().position(|&b| b == b'@')?;
    let ids: Vec<u64> = std::str::from_utf8(&bytes[..at])
        .ok()?
        .split(',')
        .map(|id| u64::from_str_radix(id, 16).ok())
        .collect::<Option<_>>()?;
    (ids.len() == size).then_some((ids, &bytes[at + 1..]))
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

    fn buffers(&self) -> &dyn Buffers {
        &self.pool
    }
    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.pool
    }
    // Before the bytes change, the messages kept for sending again are copied.
    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.pool.get(buffer)?;
        self.preserve_buffer(buffer)?;
        self.pool.free(buffer)
    }
    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.pool.get(buffer)?;
        self.preserve_buffer(buffer)?;
        self.pool.get_mut(buffer)
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        self.check_size(region.len)?;
        let seq = self.peers[peer].as_ref().expect("checked peer").next_seq;
        // Not from bytes a pending receive writes (`Payload::Region`; sends complete
        // at once and hold nothing themselves).
        self.transmit(peer, 0, seq, Payload::Region(region))?;
        let p = self.peers[peer].as_mut().expect("checked peer");
        p.next_seq = seq.wrapping_add(1);
        p.window.push(seq, region);
        Ok(())
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        self.check_size(region.len)?;
        // Not into bytes a pending receive (from any peer) writes.
        self.pool.region_for_write(region)?;
        if self.peers[peer].as_ref().expect("peer").recvs.is_empty() {
            self.recv_fast(peer, region)
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
            ("out_of_order_datagrams", s.out_of_order),
            ("retransmissions", s.retransmissions),
            ("resend_requests", s.resend_requests),
            ("receive_timeouts", s.timeouts),
            ("refused_sends", s.refused),
            ("foreign_datagrams", s.foreign),
        ];
        if self.drop.is_some() {
            entries.push(("test_dropped_datagrams", s.test_dropped));
        }
        Counters { entries }
    }

    fn settle(&mut self) -> Result<(), TransportError> {
        self.settle_all()
    }
}

#[cfg(test)]
mod tests;
