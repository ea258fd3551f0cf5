//! TCP transport for ngauge: one connection per pair of ranks, `TCP_NODELAY` on.
//!
//! # Design decisions
//!
//! **No header bytes.** The receiver always posts the exact size of the next message
//! (see `ngauge_transport`), so a message is just its bytes on the stream: a 1-byte
//! ping-pong puts one byte on the wire each way, exactly like the hand-written C
//! reference it is compared with (`benches/c/pingpong.c`).
//!
//! **`TCP_NODELAY` always.** Netgauge 2.4.6's TCP module never set it, so its LogGP
//! runs over TCP stalled on Nagle's algorithm and delayed ACKs (about 44 ms per burst of
//! 10 messages) and reported nonsense (Hoefler et al., "LogGP in theory and practice",
//! sec. 3 measures o_s, o_r and g with bursts of n messages).
//!
//! **One syscall per step.** In [`WaitMode::Block`] the sockets are blocking, so a
//! blocking `send`/`recv` is a single blocking syscall (with `SO_SNDTIMEO`/`SO_RCVTIMEO`
//! set to the peer timeout, so a silent peer becomes an error instead of a hang). In
//! [`WaitMode::Poll`] every call carries `MSG_DONTWAIT` and the transport spins with
//! [`std::hint::spin_loop`]. Nonblocking requests (`isend`/`irecv`) always use
//! `MSG_DONTWAIT`, and [`Transport::wait_all`] progresses every pending request of every
//! peer together, sleeping in `poll(2)` (block) or spinning (poll) only when nothing
//! moved, so two ranks exchanging messages larger than the socket buffers cannot
//! deadlock.
//!
//! **Buffer holds.** A queued `isend` holds its bytes shared, a queued `irecv`
//! exclusively ([`BufferPool`]): a receive into bytes that a pending request uses,
//! or a send from bytes that a pending receive writes, fails with
//! [`TransportError::BufferBusy`], blocking calls included. A request gives its hold
//! back when it completes, or when its connection fails (it is then forgotten: its
//! id becomes unknown). A timeout fails nothing: the pending requests keep their
//! bytes and may be waited for again; a blocking call that times out takes back its
//! own request if none of its bytes moved.
//!
//! **Connection setup** needs no MPI: every rank listens on an ephemeral port of its
//! data address, the endpoints are exchanged with [`Control::allgather`] together with
//! a random key per listener, and a pair connects the first time it talks: the
//! dialing rank proves with an HMAC challenge-response on the listener's key that it
//! is the rank it claims ([`ngauge_transport::auth`]: garbage, silence and forged
//! hellos on the port are refused without disturbing the job). A job opens one
//! connection per pair that talks, not p(p - 1)/2 (`links` has the tie-break when
//! both dial at once). The first operation of a pair pays for the connect (about
//! one round trip and two HMACs): the patterns' warm-up iterations take it, outside
//! their timed regions.
#![deny(missing_docs)]
#![deny(unsafe_code)]

use ngauge_transport::auth::{self, AuthKey};
use ngauge_transport::util::{self, recycle, spin_or_timeout, timespec, Completion, Requests};
use ngauge_transport::{
    Access, BufferPool, Buffers, Capabilities, Control, Rank, Region, RequestId, Transport,
    TransportError, WaitMode,
};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

mod links;

use links::Links;

const NAME: &str = "tcp";

/// How a [`TcpTransport`] is set up.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Spin on nonblocking calls or sleep in the kernel.
    pub wait: WaitMode,
    /// `SO_SNDBUF` for every connection (kernel default when `None`).
    pub send_buffer_bytes: Option<usize>,
    /// `SO_RCVBUF` for every connection (kernel default when `None`); set on the
    /// listener and before `connect`, so the window scale is negotiated for it.
    pub recv_buffer_bytes: Option<usize>,
    /// How long connecting may take, and how long an operation may wait without any
    /// progress before the peer is declared lost.
    pub timeout: Duration,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            wait: WaitMode::Poll,
            send_buffer_bytes: None,
            recv_buffer_bytes: None,
            timeout: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Send,
    Recv,
}

impl Kind {
    /// How a pending request of this kind holds its region in the pool.
    fn access(self) -> Access {
        match self {
            Kind::Send => Access::Read,
            Kind::Recv => Access::Write,
        }
    }

    /// The operation's name in errors.
    fn op(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Recv => "recv",
        }
    }
}

#[derive(Debug)]
struct Request {
    peer: Rank,
    kind: Kind,
    region: Region,
    done: usize,
    complete: bool,
}

impl Completion for Request {
    fn is_complete(&self) -> bool {
        self.complete
    }
}

#[derive(Debug)]
struct Peer {
    socket: Socket,
    sends: VecDeque<RequestId>,
    recvs: VecDeque<RequestId>,
}

/// A connected TCP transport: one stream per peer rank.
#[derive(Debug)]
pub struct TcpTransport {
    rank: Rank,
    size: usize,
    wait: WaitMode,
    timeout: Duration,
    /// The connection of each peer, once the pair has talked.
    peers: Vec<Option<Peer>>,
    links: Links,
    pool: BufferPool,
    requests: Requests<Request>,
    /// Requests queued on some peer and not complete yet (all peers together).
    queued: usize,
    /// `poll(2)` descriptors, kept empty between sleeps to reuse the allocation.
    poll_fds: Vec<PollFd<'static>>,
}

fn setup(reason: impl Into<String>) -> TransportError {
    util::setup_error(NAME, reason)
}

fn errno_err(peer: Rank, op: &'static str, errno: Errno) -> TransportError {
    util::errno_error(NAME, peer, op, errno)
}

fn timeout_err(peer: Rank, op: &'static str, after: Duration) -> TransportError {
    TransportError::Timeout {
        transport: NAME,
        peer,
        op,
        after,
    }
}

fn new_socket(addr: &SocketAddr, opts: &TcpOptions) -> std::io::Result<Socket> {
    let socket = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if let Some(bytes) = opts.send_buffer_bytes {
        socket.set_send_buffer_size(bytes)?;
    }
    if let Some(bytes) = opts.recv_buffer_bytes {
        socket.set_recv_buffer_size(bytes)?;
    }
    Ok(socket)
}

/// Makes a connected socket ready for the data plane.
fn configure(socket: &Socket, opts: &TcpOptions) -> std::io::Result<()> {
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(false)?;
    if let Some(bytes) = opts.send_buffer_bytes {
        socket.set_send_buffer_size(bytes)?;
    }
    if let Some(bytes) = opts.recv_buffer_bytes {
        socket.set_recv_buffer_size(bytes)?;
    }
    // Blocking calls give up after the peer timeout (EAGAIN), never hang.
    socket.set_read_timeout(Some(opts.timeout))?;
    socket.set_write_timeout(Some(opts.timeout))?;
    Ok(())
}

impl TcpTransport {
    /// Joins this rank to the job's data plane.
    ///
    /// Listens on an ephemeral port of `data_addr` and exchanges endpoints with
    /// `control.allgather` (a collective call: every rank must call this together);
    /// each pair connects the first time it talks (see `links`).
    pub fn connect(
        control: &mut dyn Control,
        data_addr: IpAddr,
        opts: &TcpOptions,
    ) -> Result<TcpTransport, TransportError> {
        let rank = control.rank();
        let size = control.size();
        let bind = SocketAddr::new(data_addr, 0);
        let listener = new_socket(&bind, opts)
            .and_then(|s| {
                s.set_reuse_address(true)?;
                s.bind(&bind.into())?;
                s.listen(size.max(1) as i32)?;
                Ok(s)
            })
            .map_err(|e| setup(format!("cannot listen on {bind}: {e}")))?;
        let local = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| setup("listener has no address"))?;
        // This listener's key goes to the other ranks over the control plane only
        // (see `ngauge_transport::auth`): [key | endpoint].
        let key = AuthKey::random().map_err(|e| setup(format!("no random key: {e}")))?;
        let mut mine = key.as_bytes().to_vec();
        mine.extend_from_slice(local.to_string().as_bytes());
        let endpoints = control
            .allgather(&mine)
            .map_err(|e| setup(format!("exchanging endpoints: {e}")))?;
        let endpoints: Vec<(AuthKey, SocketAddr)> = endpoints
            .iter()
            .enumerate()
            .map(|(r, bytes)| {
                let (k, addr) = bytes.split_at(bytes.len().min(auth::KEY_LEN));
                AuthKey::from_bytes(k)
                    .zip(std::str::from_utf8(addr).ok().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| setup(format!("rank {r} sent a malformed endpoint")))
            })
            .collect::<Result<_, _>>()?;

        let listener = std::net::TcpListener::from(listener);
        let links = Links::start(rank, listener, key, endpoints, opts)
            .map_err(|e| setup(format!("cannot serve the data listener: {e}")))?;
        Ok(TcpTransport {
            rank,
            size,
            wait: opts.wait,
            timeout: opts.timeout,
            peers: (0..size).map(|_| None).collect(),
            links,
            pool: BufferPool::new(NAME),
            requests: Requests::new(NAME),
            queued: 0,
            poll_fds: Vec::new(),
        })
    }

    /// Checks `peer` and connects to it if this is the pair's first operation.
    fn check_peer(&mut self, peer: Rank, op: &'static str) -> Result<(), TransportError> {
        util::check_peer(NAME, peer, self.rank, self.size)?;
        if self.peers[peer].is_none() {
            self.peers[peer] = Some(Peer::new(self.links.open(peer, op)?));
        }
        Ok(())
    }

    /// How many peers this rank is connected to: one per peer it talked to.
    pub fn connected_peers(&self) -> usize {
        self.links.opened()
    }

    fn new_request(&mut self, peer: Rank, kind: Kind, region: Region) -> RequestId {
        let id = self.requests.insert(Request {
            peer,
            kind,
            region,
            done: 0,
            complete: region.len == 0,
        });
        if region.len > 0 {
            self.queued += 1;
            let p = self.peers[peer].as_mut().expect("checked peer");
            p.queue(kind).push_back(id);
        }
        id
    }

    /// Moves every pending request as far as the sockets allow without waiting.
    /// Returns whether any byte moved.
    fn progress(&mut self) -> Result<bool, TransportError> {
        let mut moved = false;
        for peer in 0..self.size {
            if self.peers[peer].is_some() {
                moved |= self.progress_queue(peer, Kind::Send)?;
                moved |= self.progress_queue(peer, Kind::Recv)?;
            }
        }
        Ok(moved)
    }

    /// Moves the queued requests of `kind` on `peer`'s connection as far as its
    /// socket allows. A request that fails ends (see [`TcpTransport::fail_front`]).
    fn progress_queue(&mut self, peer: Rank, kind: Kind) -> Result<bool, TransportError> {
        let mut moved = false;
        let p = self.peers[peer].as_mut().expect("progressed peer exists");
        while let Some(&id) = p.queue(kind).front() {
            let req = self.requests.get_mut(id).expect("queued request exists");
            let step = match kind {
                Kind::Send => rustix::net::send(
                    &p.socket,
                    &self.pool.region(req.region)?[req.done..],
                    SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
                ),
                Kind::Recv => match rustix::net::recv(
                    &p.socket,
                    &mut self.pool.region_mut(req.region)?[req.done..],
                    RecvFlags::DONTWAIT,
                ) {
                    Ok((0, _)) => {
                        let closed = TransportError::PeerClosed {
                            transport: NAME,
                            peer,
                            op: "recv",
                        };
                        return Err(self.fail_front(peer, kind, closed));
                    }
                    received => received.map(|(n, _)| n),
                },
            };
            match step {
                Ok(n) => {
                    moved |= n > 0;
                    req.done += n;
                    if req.done == req.region.len {
                        req.complete = true;
                        self.pool.release_region(req.region, kind.access());
                        p.queue(kind).pop_front();
                        self.queued -= 1;
                    } else {
                        break;
                    }
                }
                Err(Errno::AGAIN) | Err(Errno::INTR) => break,
                Err(e) => return Err(self.fail_front(peer, kind, errno_err(peer, kind.op(), e))),
            }
        }
        Ok(moved)
    }

    /// Ends the request at the front of `peer`'s `kind` queue, whose connection
    /// failed with `err`: it leaves the queue and the table (its id becomes unknown)
    /// and releases its hold, so its buffer can be used and freed again. Returns
    /// `err`.
    #[cold]
    fn fail_front(&mut self, peer: Rank, kind: Kind, err: TransportError) -> TransportError {
        let p = self.peers[peer].as_mut().expect("progressed peer exists");
        if let Some(id) = p.queue(kind).pop_front() {
            self.queued -= 1;
            self.forget(id, kind);
        }
        err
    }

    /// Takes back `id`, just queued by a call that is about to fail, if none of its
    /// bytes moved yet (it is then still the last of its queue): it leaves the table
    /// and releases its hold. One that started stays queued, since its first bytes are
    /// on the stream; it completes with later progress and releases its hold then.
    fn withdraw(&mut self, id: RequestId) {
        let Some(req) = self.requests.get(id) else {
            return; // failed (and forgotten) already
        };
        if req.complete || req.done > 0 {
            return;
        }
        let (peer, kind) = (req.peer, req.kind);
        let queue = self.peers[peer]
            .as_mut()
            .expect("queued on a peer")
            .queue(kind);
        if queue.back() == Some(&id) {
            queue.pop_back();
            self.queued -= 1;
            self.forget(id, kind);
        }
    }

    /// Removes `id`, no longer queued, from the table and releases its hold.
    fn forget(&mut self, id: RequestId, kind: Kind) {
        if let Some(req) = self.requests.get(id) {
            let region = req.region;
            self.requests.retire_all(&[id]);
            self.pool.release_region(region, kind.access());
        }
    }

    /// Sleeps in `poll(2)` until a socket with pending work is ready or `left` passes.
    /// Returns `false` on timeout.
    fn sleep_until_ready(&mut self, left: Duration) -> Result<bool, TransportError> {
        let mut fds = recycle(std::mem::take(&mut self.poll_fds));
        for p in self.peers.iter().flatten() {
            let mut events = PollFlags::empty();
            if !p.sends.is_empty() {
                events |= PollFlags::OUT;
            }
            if !p.recvs.is_empty() {
                events |= PollFlags::IN;
            }
            if !events.is_empty() {
                fds.push(PollFd::new(&p.socket, events));
            }
        }
        let polled = if fds.is_empty() {
            Ok(1)
        } else {
            poll(&mut fds, Some(&timespec(left)))
        };
        self.poll_fds = recycle(fds);
        match polled {
            Ok(0) => Ok(false),
            Ok(_) | Err(Errno::INTR) => Ok(true),
            Err(e) => Err(setup(format!("poll failed: {e}"))),
        }
    }

    fn first_pending_peer(&self, requests: &[RequestId]) -> (Rank, &'static str) {
        requests
            .iter()
            .filter_map(|&r| self.requests.get(r))
            .find(|r| !r.complete)
            .map_or((0, "wait"), |r| (r.peer, r.kind.op()))
    }

    /// Blocking send while nothing is queued on any connection.
    fn send_direct(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        let bytes = self.pool.region_for_read(region)?;
        let mut done = 0;
        let mut spins: u32 = 0;
        let mut since: Option<Instant> = None;
        let flags = match self.wait {
            WaitMode::Poll => SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            WaitMode::Block => SendFlags::NOSIGNAL,
        };
        while done < bytes.len() {
            match rustix::net::send(&p.socket, &bytes[done..], flags) {
                Ok(n) => {
                    done += n;
                    since = None;
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) if self.wait == WaitMode::Block => {
                    return Err(timeout_err(peer, "send", self.timeout))
                }
                Err(Errno::AGAIN) => {
                    spin_or_timeout(&mut spins, &mut since, self.timeout)
                        .map_err(|after| timeout_err(peer, "send", after))?;
                }
                Err(e) => return Err(errno_err(peer, "send", e)),
            }
        }
        Ok(())
    }

    /// Blocking receive while nothing is queued on any connection.
    fn recv_direct(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let p = self.peers[peer].as_ref().expect("checked peer");
        let bytes = self.pool.region_for_write(region)?;
        let mut done = 0;
        let mut spins: u32 = 0;
        let mut since: Option<Instant> = None;
        let flags = match self.wait {
            WaitMode::Poll => RecvFlags::DONTWAIT,
            WaitMode::Block => RecvFlags::empty(),
        };
        while done < bytes.len() {
            match rustix::net::recv(&p.socket, &mut bytes[done..], flags) {
                Ok((0, _)) => {
                    return Err(TransportError::PeerClosed {
                        transport: NAME,
                        peer,
                        op: "recv",
                    })
                }
                Ok((n, _)) => {
                    done += n;
                    since = None;
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) if self.wait == WaitMode::Block => {
                    return Err(timeout_err(peer, "recv", self.timeout))
                }
                Err(Errno::AGAIN) => {
                    spin_or_timeout(&mut spins, &mut since, self.timeout)
                        .map_err(|after| timeout_err(peer, "recv", after))?;
                }
                Err(e) => return Err(errno_err(peer, "recv", e)),
            }
        }
        Ok(())
    }
}

impl Peer {
    fn new(socket: Socket) -> Self {
        Peer {
            socket,
            sends: VecDeque::new(),
            recvs: VecDeque::new(),
        }
    }

    /// The queue of requests of `kind` on this connection.
    fn queue(&mut self, kind: Kind) -> &mut VecDeque<RequestId> {
        match kind {
            Kind::Send => &mut self.sends,
            Kind::Recv => &mut self.recvs,
        }
    }
}

impl Transport for TcpTransport {
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
            reliable: true,
            ordered: true,
            max_message_bytes: None,
            may_split: true,
            needs_registered_memory: false,
            checks_message_size: false,
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

    // The direct (one syscall) path is taken only when nothing at all is queued: a
    // blocking call on one connection would otherwise leave a queued `isend` to
    // another rank (or the same one) unprogressed while that rank waits for it.
    // Nothing queued means no holds either (a request holds its bytes only while
    // queued), so the direct path's hold check is a test of an empty list; the
    // queued path gets its check from `isend`/`irecv`.
    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer, "send")?;
        if self.queued == 0 {
            self.send_direct(peer, region)
        } else {
            let id = self.isend(peer, region)?;
            self.wait(id).inspect_err(|_| self.withdraw(id))
        }
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer, "recv")?;
        if self.queued == 0 {
            self.recv_direct(peer, region)
        } else {
            let id = self.irecv(peer, region)?;
            self.wait(id).inspect_err(|_| self.withdraw(id))
        }
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.check_peer(peer, "send")?;
        self.pool.acquire_read(region)?;
        let id = self.new_request(peer, Kind::Send, region);
        if region.len == 0 {
            self.pool.release_region(region, Access::Read);
        } else if let Err(e) = self.progress_queue(peer, Kind::Send) {
            // Start it now: a small message then leaves before the caller blocks
            // elsewhere, as with a blocking send. Only this connection's sends: an
            // error is then about this request or one queued before it (whose
            // failure left this one untouched), and this one can be taken back.
            self.withdraw(id);
            return Err(e);
        }
        Ok(id)
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.check_peer(peer, "recv")?;
        self.pool.acquire_write(region)?;
        let id = self.new_request(peer, Kind::Recv, region);
        if region.len == 0 {
            self.pool.release_region(region, Access::Write);
        }
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
        let mut spins: u32 = 0;
        let mut since: Option<Instant> = None;
        loop {
            if self.requests.all_complete(requests) {
                self.requests.retire_all(requests);
                return Ok(());
            }
            if self.progress()? {
                since = None;
                continue;
            }
            match self.wait {
                WaitMode::Poll => {
                    if let Err(after) = spin_or_timeout(&mut spins, &mut since, self.timeout) {
                        let (peer, op) = self.first_pending_peer(requests);
                        return Err(timeout_err(peer, op, after));
                    }
                }
                WaitMode::Block => {
                    let start = *since.get_or_insert_with(Instant::now);
                    let left = self.timeout.saturating_sub(start.elapsed());
                    if left.is_zero() || !self.sleep_until_ready(left)? {
                        let (peer, op) = self.first_pending_peer(requests);
                        return Err(timeout_err(peer, op, self.timeout));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
