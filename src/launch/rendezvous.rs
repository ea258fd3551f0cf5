//! Rendezvous: rank 0 listens, every other rank connects and joins, rank 0 answers
//! every rank once all have joined. The answer is a table of no entries: the job
//! table (p entries) goes down the control tree once it stands
//! ([`super::world`]), not p - 1 times from rank 0.
//!
//! A join proves membership with the per-job token and states rank, size, protocol
//! version (in the frame header) and the address of the rank's data transports.
//! Rank 0 runs one blocking `poll` loop over the listener and every connection that
//! has not joined yet, feeding their bytes to the frame decoder as they arrive, so a
//! silent or hostile client can neither stall the honest ones nor crash rank 0: a
//! frame that is malformed, oversized, of another version, from another job, or from
//! a rank that already joined is refused (a `Refuse` frame with the reason, when the
//! peer can still read it), logged to stderr (a burst of ten lines, then one a second, with a count
//! of the ones held back), and the connection closed. The
//! connections that joined stay open and become the control channel.

use super::error::LaunchError;
use super::frame::{self, FrameError, Join, Kind, Peer, MAX_JOIN_PAYLOAD};
use super::wire::{self, WireError};
use ngauge_transport::auth::{pending_budget, RefusalLog};
use std::io::{ErrorKind, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The refusal of a connection evicted from a full queue of pending joins.
const QUEUE_FULL: &str = "too many connections waiting to join";

/// How long an accepted connection may take to send its join.
const JOIN_GRACE: Duration = Duration::from_secs(5);

/// What rank 0 expects of every join.
#[derive(Clone, Debug)]
pub struct Expect {
    /// Job size.
    pub size: usize,
    /// The job token.
    pub token: String,
    /// How long to wait for all ranks.
    pub timeout: Duration,
}

/// Rank 0's side once everyone joined.
#[derive(Debug)]
pub struct Hub {
    /// The control connection of each rank, indexed by rank (`None` at 0).
    pub streams: Vec<Option<TcpStream>>,
    /// The job table.
    pub peers: Vec<Peer>,
}

struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    buf: Vec<u8>,
    since: Instant,
}

fn refuse(mut stream: TcpStream, from: SocketAddr, reason: &str, log: &mut RefusalLog) {
    log.refused(&from.to_string(), reason);
    let _ = stream.set_nonblocking(false);
    let _ = wire::write_frame(
        &mut stream,
        Kind::Refuse,
        reason.as_bytes(),
        Duration::from_millis(200),
    );
}

/// What to do with a pending connection after reading from it.
enum Verdict {
    Wait,
    Refuse(String),
    Joined(Join),
}

fn judge(buf: &[u8], expect: &Expect, joined: &[Option<(TcpStream, Join)>]) -> Verdict {
    let (kind, payload, total) = match frame::decode(buf, MAX_JOIN_PAYLOAD) {
        Err(FrameError::Truncated { .. }) => return Verdict::Wait,
        Err(e) => return Verdict::Refuse(e.to_string()),
        Ok(f) => f,
    };
    if kind != Kind::Join {
        return Verdict::Refuse(format!("expected a join frame, got {}", kind.name()));
    }
    if total != buf.len() {
        return Verdict::Refuse("bytes after the join frame".into());
    }
    let join = match Join::decode(payload) {
        Ok(j) => j,
        Err(e) => return Verdict::Refuse(e.to_string()),
    };
    if !token_eq(&join.token, &expect.token) {
        return Verdict::Refuse("wrong job token (not a rank of this job)".into());
    }
    if join.size as usize != expect.size {
        return Verdict::Refuse(format!(
            "rank {} believes the job has {} ranks, it has {}",
            join.rank, join.size, expect.size
        ));
    }
    let rank = join.rank as usize;
    if rank == 0 || rank >= expect.size {
        return Verdict::Refuse(format!(
            "rank {rank} is outside 1..{} (rank 0 is this process)",
            expect.size - 1
        ));
    }
    if let Some((_, first)) = &joined[rank] {
        return Verdict::Refuse(format!(
            "rank {rank} already joined (pid {} on {})",
            first.pid, first.host
        ));
    }
    Verdict::Joined(join)
}

/// Compares tokens without an early exit (no timing oracle for the token).
fn token_eq(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Rank 0: accepts joins on `listener` until every rank of `expect.size` joined,
/// then tells everyone (an empty table). Gives up when no rank joined for
/// `expect.timeout`: ranks that keep arriving keep the join open, however many a
/// busy host starts. `me` is rank 0's own entry; its `data_addr` is
/// replaced by the address the first rank reached us at unless `data_addr_fixed`.
pub fn serve(
    listener: &TcpListener,
    expect: &Expect,
    mut me: Peer,
    data_addr_fixed: bool,
) -> Result<Hub, LaunchError> {
    listener
        .set_nonblocking(true)
        .map_err(LaunchError::io("listener nonblocking"))?;
    let mut deadline = Instant::now() + expect.timeout;
    // Connections waiting to join at once: every rank of the job and some room for
    // strangers, as far as the descriptor limit allows (rank 0 raised it to the hard
    // limit); beyond that the oldest is dropped, so a flood of idle connections can
    // neither exhaust the descriptors nor starve a real join.
    let budget = pending_budget(expect.size);
    let mut log = RefusalLog::new("ngauge: rendezvous");
    let mut pending: Vec<Pending> = Vec::new();
    let mut joined: Vec<Option<(TcpStream, Join)>> = (0..expect.size).map(|_| None).collect();
    let mut missing = expect.size - 1;
    let mut first_local: Option<IpAddr> = None;
    while missing > 0 {
        let now = Instant::now();
        if now >= deadline {
            return Err(LaunchError::JoinTimeout {
                missing: (1..expect.size).filter(|&r| joined[r].is_none()).collect(),
                after: expect.timeout,
            });
        }
        // Drop connections that never sent a complete join.
        pending.retain(|p| {
            let stale = now.duration_since(p.since) >= JOIN_GRACE;
            if stale {
                log.refused(
                    &p.from.to_string(),
                    &format!("no complete join within {JOIN_GRACE:?}"),
                );
            }
            !stale
        });
        let mut wake = deadline - now;
        for p in &pending {
            wake = wake.min((p.since + JOIN_GRACE).saturating_duration_since(now));
        }
        let ready = {
            let mut fds: Vec<std::os::fd::BorrowedFd<'_>> = Vec::new();
            use std::os::fd::AsFd;
            fds.push(listener.as_fd());
            fds.extend(pending.iter().map(|p| p.stream.as_fd()));
            fds.extend(joined.iter().flatten().map(|(s, _)| s.as_fd()));
            wire::wait_readable(&fds, wake).map_err(LaunchError::io("poll"))?
        };
        // A rank that joined must stay silent until the answer: data or EOF means it
        // is gone or broken.
        let joined_ready = &ready[1 + pending.len()..];
        let joined_ranks: Vec<usize> = (0..expect.size).filter(|&r| joined[r].is_some()).collect();
        for (&rank, &r) in joined_ranks.iter().zip(joined_ready) {
            if r {
                let (stream, _) = joined[rank].as_mut().expect("listed as joined");
                let mut byte = [0u8; 1];
                let _ = stream.set_nonblocking(true);
                match stream.read(&mut byte) {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    _ => {
                        return Err(LaunchError::Rendezvous(format!(
                            "rank {rank} left (or spoke out of turn) before every rank had joined"
                        )))
                    }
                }
                let _ = stream.set_nonblocking(false);
            }
        }
        // Read what arrived on pending connections, back to front so removal is cheap.
        for i in (0..pending.len()).rev() {
            if !ready[1 + i] {
                continue;
            }
            let p = &mut pending[i];
            let room = frame::HEADER_LEN + MAX_JOIN_PAYLOAD + 1 - p.buf.len();
            let mut chunk = vec![0u8; room.min(8192)];
            let verdict = match p.stream.read(&mut chunk) {
                Ok(0) => Verdict::Refuse("closed the connection before joining".into()),
                Ok(n) => {
                    p.buf.extend_from_slice(&chunk[..n]);
                    judge(&p.buf, expect, &joined)
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    Verdict::Wait
                }
                Err(e) => Verdict::Refuse(format!("read failed: {e}")),
            };
            match verdict {
                Verdict::Wait => {}
                Verdict::Refuse(reason) => {
                    let p = pending.swap_remove(i);
                    refuse(p.stream, p.from, &reason, &mut log);
                }
                Verdict::Joined(join) => {
                    let p = pending.swap_remove(i);
                    if first_local.is_none() {
                        first_local = p.stream.local_addr().ok().map(|a| a.ip());
                    }
                    let _ = p.stream.set_nonblocking(false);
                    let _ = p.stream.set_nodelay(true);
                    let rank = join.rank as usize;
                    joined[rank] = Some((p.stream, join));
                    missing -= 1;
                    deadline = Instant::now() + expect.timeout;
                }
            }
        }
        if ready[0] {
            // A batch at a time, so that joins already queued are read in between.
            for _ in 0..budget.div_ceil(2) {
                match listener.accept() {
                    Ok((stream, from)) => {
                        if pending.len() >= budget {
                            let oldest = pending.remove(0);
                            refuse(oldest.stream, oldest.from, QUEUE_FULL, &mut log);
                        }
                        if stream.set_nonblocking(true).is_ok() {
                            pending.push(Pending {
                                stream,
                                from,
                                buf: Vec::new(),
                                since: Instant::now(),
                            });
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // Per-connection failures (ECONNABORTED, EMFILE) must not end
                    // the job: log and keep serving.
                    Err(e) => {
                        log.refused("?", &format!("accept failed: {e}"));
                        // Descriptors exhausted: the oldest waiting connection
                        // makes room; with none, pause instead of spinning on poll.
                        if pending.is_empty() {
                            std::thread::sleep(Duration::from_millis(50));
                        } else {
                            drop(pending.remove(0));
                        }
                        break;
                    }
                }
            }
        }
    }
    for p in pending {
        refuse(p.stream, p.from, "every rank already joined", &mut log);
    }
    if !data_addr_fixed {
        if let Some(ip) = first_local {
            me.data_addr = ip;
        }
    }
    let mut peers = vec![me];
    let mut streams = vec![None];
    for (stream, join) in joined.into_iter().skip(1).flatten() {
        peers.push(Peer {
            rank: join.rank as usize,
            data_addr: join.data_addr,
            host: join.host,
            pid: join.pid,
        });
        streams.push(Some(stream));
    }
    let joined = frame::encode_table(&[]);
    for (rank, stream) in streams.iter_mut().enumerate() {
        if let Some(s) = stream {
            wire::write_frame(s, Kind::Table, &joined, expect.timeout).map_err(|e| {
                LaunchError::Rendezvous(format!("answering rank {rank}'s join: {e}"))
            })?;
        }
    }
    Ok(Hub { streams, peers })
}

/// How long a joined rank waits for the answer beyond its own timeout: rank 0
/// waits for every further join up to the timeout after the one before, so the
/// table of a large job may come long after the first joins. Allows 128 joins per
/// timeout (a 2-core host joins thousands of ranks a minute); a rank 0 that gives
/// up closes the connection, which ends the wait at once. The answer comes
/// when every rank has joined.
fn table_wait(timeout: Duration, size: usize) -> Duration {
    timeout.saturating_mul(u32::try_from(size / 128).unwrap_or(u32::MAX))
}

/// A rank other than 0: connects to rank 0 at `addr` (retrying until `timeout`, as
/// rank 0 may start later), joins, and waits until every rank has joined.
pub struct Joiner<'a> {
    /// `HOST:PORT` of rank 0.
    pub addr: &'a str,
    /// This rank.
    pub rank: usize,
    /// Job size.
    pub size: usize,
    /// Job token.
    pub token: &'a str,
    /// Data address override (`--data-addr`).
    pub data_addr: Option<IpAddr>,
    /// This host's name.
    pub host: String,
    /// How long to try.
    pub timeout: Duration,
}

impl Joiner<'_> {
    /// Joins; returns the control connection and this rank's data address.
    ///
    /// A refusal for a full queue (`QUEUE_FULL`: rank 0 evicts its oldest
    /// pending connection when strangers flood it, and that may be this rank's) is
    /// transient: the join is tried again until the timeout.
    pub fn join(&self) -> Result<(TcpStream, IpAddr), LaunchError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            match self.join_once(deadline) {
                Err(LaunchError::Refused(reason))
                    if reason == QUEUE_FULL && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                done => return done,
            }
        }
    }

    /// One attempt of [`Self::join`], until `deadline`.
    fn join_once(&self, deadline: Instant) -> Result<(TcpStream, IpAddr), LaunchError> {
        let mut stream = self.connect(deadline)?;
        let _ = stream.set_nodelay(true);
        let data_addr = match self.data_addr {
            Some(ip) => ip,
            None => stream
                .local_addr()
                .map_err(LaunchError::io(
                    "local address of the rendezvous connection",
                ))?
                .ip(),
        };
        let join = Join {
            token: self.token.to_string(),
            rank: self.rank as u32,
            size: self.size as u32,
            data_addr,
            host: self.host.clone(),
            pid: std::process::id(),
        };
        let fail = |e: WireError| match e {
            WireError::Closed => LaunchError::Rendezvous(format!(
                "rank 0 at {} closed the connection during the join",
                self.addr
            )),
            WireError::TimedOut(after) => LaunchError::Rendezvous(format!(
                "rank 0 at {} did not answer the join within {after:?} (are all {} ranks started?)",
                self.addr, self.size
            )),
            e => LaunchError::Rendezvous(format!("join with rank 0 at {}: {e}", self.addr)),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        wire::write_frame(&mut stream, Kind::Join, &join.encode(), left).map_err(fail)?;
        let left = deadline.saturating_duration_since(Instant::now());
        let (kind, payload) = wire::read_frame(
            &mut stream,
            frame::MAX_CONTROL_PAYLOAD,
            left + table_wait(self.timeout, self.size),
        )
        .map_err(fail)?;
        match kind {
            Kind::Table => {
                frame::decode_table(&payload, 0)
                    .map_err(|e| LaunchError::Rendezvous(e.to_string()))?;
                Ok((stream, data_addr))
            }
            Kind::Refuse => Err(LaunchError::Refused(frame::decode_refusal(&payload))),
            other => Err(LaunchError::Rendezvous(format!(
                "rank 0 answered the join with a {} frame",
                other.name()
            ))),
        }
    }

    fn connect(&self, deadline: Instant) -> Result<TcpStream, LaunchError> {
        let mut backoff = Duration::from_millis(10);
        let mut last = String::from("no attempt");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LaunchError::Connect {
                    addr: self.addr.into(),
                    after: self.timeout,
                    detail: last,
                });
            }
            match self.addr.to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        match TcpStream::connect_timeout(&a, left.min(Duration::from_secs(2))) {
                            Ok(s) => return Ok(s),
                            Err(e) => last = format!("{a}: {e}"),
                        }
                    }
                }
                Err(e) => last = format!("cannot resolve: {e}"),
            }
            // Rank 0 may not listen yet: sleep (never spin) and retry.
            std::thread::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())));
            backoff = (backoff * 2).min(Duration::from_millis(250));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn me() -> Peer {
        Peer {
            rank: 0,
            data_addr: "127.0.0.1".parse().unwrap(),
            host: "h".into(),
            pid: 1,
        }
    }

    fn joiner(addr: &str, rank: usize, token: &str) -> Joiner<'static> {
        Joiner {
            addr: Box::leak(addr.to_string().into_boxed_str()),
            rank,
            size: 3,
            token: Box::leak(token.to_string().into_boxed_str()),
            data_addr: None,
            host: "h".into(),
            timeout: Duration::from_secs(10),
        }
    }

    /// A refusal for a full queue is transient: the rank joins again (here the
    /// second answer is a refusal that is not, which ends the join).
    #[test]
    fn a_rank_evicted_from_a_full_queue_joins_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let fake_rank_0 = std::thread::spawn(move || {
            let mut log = RefusalLog::new("test");
            for reason in [QUEUE_FULL, "wrong job token"] {
                let (mut stream, from) = listener.accept().unwrap();
                wire::read_frame(&mut stream, MAX_JOIN_PAYLOAD, Duration::from_secs(5)).unwrap();
                refuse(stream, from, reason, &mut log);
            }
        });
        let joined = joiner(&addr, 1, "T").join();
        // Before the second answer's check: a joiner that gave up at the first
        // would leave the fake rank 0 waiting for a connection forever.
        assert!(
            matches!(&joined, Err(LaunchError::Refused(r)) if r == "wrong job token"),
            "{joined:?}"
        );
        fake_rank_0.join().unwrap();
    }

    #[test]
    fn three_ranks_join_despite_hostile_clients() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let expect = Expect {
            size: 3,
            token: "T".into(),
            timeout: Duration::from_secs(10),
        };
        let server = std::thread::spawn(move || serve(&listener, &expect, me(), false));
        // Garbage, wrong token, wrong version, oversized, duplicate.
        let mut garbage = TcpStream::connect(&addr).unwrap();
        garbage.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let wrong = joiner(&addr, 1, "X").join();
        assert!(
            matches!(&wrong, Err(LaunchError::Refused(r)) if r.contains("token")),
            "{wrong:?}"
        );
        let mut old = TcpStream::connect(&addr).unwrap();
        let j = Join {
            token: "T".into(),
            rank: 1,
            size: 3,
            data_addr: "127.0.0.1".parse().unwrap(),
            host: "h".into(),
            pid: 2,
        };
        old.write_all(&frame::encode_with_version(Kind::Join, 7, &j.encode()))
            .unwrap();
        let mut big = TcpStream::connect(&addr).unwrap();
        let mut head = frame::encode(Kind::Join, &[]);
        head[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        big.write_all(&head).unwrap();
        // Rank 1 joins twice at once: whichever comes second is refused at once, the
        // other stays in until the job is complete (rank 2 joins after the refusal).
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..2 {
            let (addr, tx) = (addr.clone(), tx.clone());
            std::thread::spawn(move || tx.send(joiner(&addr, 1, "T").join()).unwrap());
        }
        let dup = rx.recv().unwrap();
        assert!(
            matches!(&dup, Err(LaunchError::Refused(r)) if r.contains("already joined")),
            "{dup:?}"
        );
        let two = joiner(&addr, 2, "T").join().unwrap();
        let one = rx.recv().unwrap().unwrap();
        let hub = server.join().unwrap().unwrap();
        assert_eq!(hub.peers.len(), 3);
        // The joiners' table entries are what they said (the table goes down the
        // control tree later).
        assert_eq!((hub.peers[1].rank, hub.peers[1].data_addr), (1, one.1));
        assert_eq!((hub.peers[2].rank, hub.peers[2].data_addr), (2, two.1));
        for (kind, mut s) in [("version", old), ("oversized", big)] {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let (k, reason) = wire::read_frame(&mut s, 4096, Duration::from_secs(5)).unwrap();
            assert_eq!(k, Kind::Refuse, "{kind}");
            assert!(!reason.is_empty());
        }
    }

    #[test]
    fn missing_ranks_are_named_after_the_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let expect = Expect {
            size: 3,
            token: "T".into(),
            timeout: Duration::from_millis(300),
        };
        match serve(&listener, &expect, me(), false) {
            Err(LaunchError::JoinTimeout { missing, .. }) => assert_eq!(missing, [1, 2]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_eq("abc", "abc"));
        assert!(!token_eq("abc", "abd"));
        assert!(!token_eq("abc", "abcd"));
    }
}
