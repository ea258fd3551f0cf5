//! Connection setup: every rank listens on an ephemeral port of its data address,
//! the endpoints are exchanged over the control channel, each rank connects to
//! every lower rank (sending the 8-byte hello, `NGT1` + its rank) and accepts
//! every higher one, then configures each stream for the data plane (see the
//! crate docs, "Connection setup").

use crate::{setup, Peer, TcpOptions, TcpTransport, NAME};
use ngauge_transport::util::{timespec, Requests};
use ngauge_transport::{BufferPool, Control, TransportError};
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

const HELLO_MAGIC: &[u8; 4] = b"NGT1";

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
    /// Connects this rank to every other rank of the job.
    ///
    /// Listens on an ephemeral port of `data_addr`, exchanges endpoints with
    /// `control.allgather` (a collective call: every rank must call this together),
    /// connects to every lower rank and accepts every higher one.
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
        let endpoints = control
            .allgather(local.to_string().as_bytes())
            .map_err(|e| setup(format!("exchanging endpoints: {e}")))?;
        let endpoints: Vec<SocketAddr> = endpoints
            .iter()
            .enumerate()
            .map(|(r, bytes)| {
                std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| setup(format!("rank {r} sent a malformed endpoint")))
            })
            .collect::<Result<_, _>>()?;

        let mut peers: Vec<Option<Peer>> = (0..size).map(|_| None).collect();
        // Lower ranks first: their listeners complete our connect from the backlog.
        for (peer, endpoint) in endpoints.iter().enumerate().take(rank) {
            let socket = new_socket(endpoint, opts)
                .and_then(|s| {
                    s.connect_timeout(&SockAddr::from(*endpoint), opts.timeout)?;
                    configure(&s, opts)?;
                    let mut hello = [0u8; 8];
                    hello[..4].copy_from_slice(HELLO_MAGIC);
                    hello[4..].copy_from_slice(&(rank as u32).to_le_bytes());
                    (&s).write_all(&hello)?;
                    Ok(s)
                })
                .map_err(|e| setup(format!("connecting to rank {peer} at {endpoint}: {e}")))?;
            peers[peer] = Some(Peer::new(socket));
        }
        // Then every higher rank connects to us.
        let deadline = Instant::now() + opts.timeout;
        listener
            .set_nonblocking(true)
            .map_err(|e| setup(format!("listener: {e}")))?;
        let mut missing = size - rank - 1;
        while missing > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let who: Vec<String> = (rank + 1..size)
                    .filter(|&r| peers[r].is_none())
                    .map(|r| r.to_string())
                    .collect();
                return Err(setup(format!(
                    "rank(s) {} did not connect within {:?}",
                    who.join(", "),
                    opts.timeout
                )));
            }
            let mut fds = [PollFd::new(&listener, PollFlags::IN)];
            match poll(&mut fds, Some(&timespec(left))) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(setup(format!("waiting for connections: {e}"))),
            }
            let (socket, from) = match listener.accept() {
                Ok(pair) => pair,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(setup(format!("accepting a connection: {e}"))),
            };
            let describe = from
                .as_socket()
                .map_or_else(|| "?".to_string(), |a| a.to_string());
            let mut hello = [0u8; 8];
            configure(&socket, opts)
                .and_then(|()| (&socket).read_exact(&mut hello))
                .map_err(|e| setup(format!("reading the hello from {describe}: {e}")))?;
            let peer = u32::from_le_bytes([hello[4], hello[5], hello[6], hello[7]]) as usize;
            if &hello[..4] != HELLO_MAGIC || peer <= rank || peer >= size {
                return Err(setup(format!(
                    "a connection from {describe} is not an ngauge rank above {rank} \
                     (hello {hello:02x?}); is another job using this address?"
                )));
            }
            if peers[peer].is_some() {
                return Err(setup(format!("rank {peer} connected twice")));
            }
            peers[peer] = Some(Peer::new(socket));
            missing -= 1;
        }
        Ok(TcpTransport {
            rank,
            size,
            wait: opts.wait,
            timeout: opts.timeout,
            peers,
            pool: BufferPool::new(NAME),
            requests: Requests::new(NAME),
            queued: 0,
            poll_fds: Vec::new(),
        })
    }
}
