//! Proving that a connection belongs to the job: an HMAC-SHA256 challenge-response
//! (RFC 2104 HMAC, FIPS 180-4 SHA-256) keyed by a secret only the job's ranks hold.
//!
//! # Protocol (`ngauge-auth/1`)
//!
//! 1. The listening side speaks first, the moment it accepts: `NGA1` and a fresh
//!    16-byte nonce `Ns` ([`GREETING_LEN`] bytes).
//! 2. The connecting rank answers with exactly [`PROOF_LEN`] bytes: `NGP1`, its rank
//!    (u32, little endian), its own nonce `Nc`, and
//!    `HMAC(K, "ngauge-auth/1 client" | Ns | Nc | client rank | listener rank)`.
//! 3. The listener checks the tag (in constant time), that the rank is one it waits
//!    for and has not connected yet, and answers with
//!    `HMAC(K, "ngauge-auth/1 server" | Ns | Nc | client rank | listener rank)`
//!    ([`REPLY_LEN`] bytes), which the client checks in turn.
//!
//! Nothing of variable length is read before the tag is checked, so garbage is
//! refused after at most [`PROOF_LEN`] bytes; the key `K` never crosses the wire; a
//! fresh `Ns` per connection makes a recorded proof useless, and the two labels keep
//! a server answer from being replayed as a client proof.
//!
//! # Where the key comes from
//!
//! Each listener draws its own random key ([`AuthKey::random`]) and hands it to the
//! other ranks over the control plane together with its address. The control plane
//! admits only ranks that proved the job token at rendezvous (or MPI's own launch), so
//! the key is as secret as the token, yet the transports never see the token: under
//! `mpirun` with the MPI control plane there is none. A key lives as long as one
//! transport instance, so nothing learned from one run opens the next.
//!
//! [`accept_authenticated`] serves many handshakes at once from one `poll` loop: a
//! silent client, a stalled half-proof, garbage or a flood cannot delay the ranks
//! that do prove themselves (see its docs for the limits it keeps).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 16;
const TAG_LEN: usize = 32;
const GREETING_MAGIC: &[u8; 4] = b"NGA1";
const PROOF_MAGIC: &[u8; 4] = b"NGP1";
/// Bytes the listener sends first.
pub const GREETING_LEN: usize = 4 + NONCE_LEN;
/// Bytes of the connecting rank's proof.
pub const PROOF_LEN: usize = 4 + 4 + NONCE_LEN + TAG_LEN;
/// Bytes of the listener's answer.
pub const REPLY_LEN: usize = TAG_LEN;

/// A secret shared by the ranks of one job (one per listener).
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey([u8; KEY_LEN]);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// A fresh key from the operating system's random source.
    pub fn random() -> std::io::Result<AuthKey> {
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).map_err(std::io::Error::other)?;
        Ok(AuthKey(key))
    }

    /// A key received from another rank; `None` unless exactly [`KEY_LEN`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<AuthKey> {
        bytes.try_into().ok().map(AuthKey)
    }

    /// The key's bytes, to hand to the other ranks over the control plane.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    fn mac(&self, label: &[u8], ns: &[u8], nc: &[u8], client: u32, server: u32) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(label);
        mac.update(ns);
        mac.update(nc);
        mac.update(&client.to_le_bytes());
        mac.update(&server.to_le_bytes());
        mac
    }
}

const CLIENT_LABEL: &[u8] = b"ngauge-auth/1 client";
const SERVER_LABEL: &[u8] = b"ngauge-auth/1 server";

fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n).map_err(std::io::Error::other)?;
    Ok(n)
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The peer did not speak this protocol or failed the challenge.
    #[error("{0}")]
    Refused(String),
    /// The socket failed (closed, timed out).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The connecting side: proves to the listener of rank `server` that this rank
/// (`client`) holds `key`, and checks that the listener holds it too. Blocking; the
/// caller sets the socket's timeouts.
pub fn prove<S: Read + Write>(
    stream: &mut S,
    key: &AuthKey,
    client: u32,
    server: u32,
) -> Result<(), AuthError> {
    let mut greeting = [0u8; GREETING_LEN];
    stream.read_exact(&mut greeting)?;
    if &greeting[..4] != GREETING_MAGIC {
        return Err(AuthError::Refused(format!(
            "the listener is not an ngauge rank (greeting {:02x?})",
            &greeting[..4]
        )));
    }
    let ns = &greeting[4..];
    let nc = nonce()?;
    let tag = key
        .mac(CLIENT_LABEL, ns, &nc, client, server)
        .finalize()
        .into_bytes();
    let mut proof = Vec::with_capacity(PROOF_LEN);
    proof.extend_from_slice(PROOF_MAGIC);
    proof.extend_from_slice(&client.to_le_bytes());
    proof.extend_from_slice(&nc);
    proof.extend_from_slice(&tag);
    stream.write_all(&proof)?;
    let mut reply = [0u8; REPLY_LEN];
    stream.read_exact(&mut reply).map_err(|e| {
        if e.kind() == ErrorKind::UnexpectedEof {
            AuthError::Refused(format!(
                "rank {server} closed the connection instead of accepting the proof \
                 (another job's listener at this address?)"
            ))
        } else {
            AuthError::Io(e)
        }
    })?;
    key.mac(SERVER_LABEL, ns, &nc, client, server)
        .verify_slice(&reply)
        .map_err(|_| {
            AuthError::Refused(format!(
                "rank {server}'s listener does not hold this job's key"
            ))
        })
}

/// The listening side of one handshake, fed bytes as they arrive (no I/O of its own,
/// so one thread can serve many connections and unit tests need no sockets).
#[derive(Debug)]
pub struct Challenge {
    ns: [u8; NONCE_LEN],
    buf: Vec<u8>,
}

/// What [`Challenge::feed`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not all of the proof yet.
    Wait,
    /// Not a rank of this job; the reason is for the log.
    Refuse(String),
    /// Rank `rank` proved itself; send it `reply`.
    Accept {
        /// The rank the proof was made for.
        rank: u32,
        /// The listener's answer.
        reply: [u8; REPLY_LEN],
    },
}

impl Challenge {
    /// A new challenge and the greeting to send first.
    pub fn new() -> std::io::Result<(Challenge, [u8; GREETING_LEN])> {
        let ns = nonce()?;
        let mut greeting = [0u8; GREETING_LEN];
        greeting[..4].copy_from_slice(GREETING_MAGIC);
        greeting[4..].copy_from_slice(&ns);
        Ok((
            Challenge {
                ns,
                buf: Vec::with_capacity(PROOF_LEN),
            },
            greeting,
        ))
    }

    /// How many more bytes the proof needs (read no more than this).
    pub fn wants(&self) -> usize {
        PROOF_LEN - self.buf.len()
    }

    /// Adds bytes received (at most [`Challenge::wants`]); judges once the proof is
    /// complete. `server` is the listener's rank.
    pub fn feed(&mut self, bytes: &[u8], key: &AuthKey, server: u32) -> Verdict {
        if bytes.len() > self.wants() {
            return Verdict::Refuse("sent more than a proof before the answer".into());
        }
        self.buf.extend_from_slice(bytes);
        // Refuse a wrong magic as soon as it shows, not after a whole proof.
        let seen = self.buf.len().min(4);
        if self.buf[..seen] != PROOF_MAGIC[..seen] {
            return Verdict::Refuse(format!(
                "not an ngauge proof (starts {:02x?})",
                &self.buf[..seen]
            ));
        }
        if self.buf.len() < PROOF_LEN {
            return Verdict::Wait;
        }
        let rank = u32::from_le_bytes(self.buf[4..8].try_into().expect("4 bytes"));
        let nc = &self.buf[8..8 + NONCE_LEN];
        let tag = &self.buf[8 + NONCE_LEN..];
        if key
            .mac(CLIENT_LABEL, &self.ns, nc, rank, server)
            .verify_slice(tag)
            .is_err()
        {
            return Verdict::Refuse(format!(
                "proof for rank {rank} does not match this job's key"
            ));
        }
        let reply = key
            .mac(SERVER_LABEL, &self.ns, nc, rank, server)
            .finalize()
            .into_bytes()
            .into();
        Verdict::Accept { rank, reply }
    }
}

/// Logs refusals to stderr: the first [`RefusalLog::BURST`] at once, then at most
/// one line per [`RefusalLog::INTERVAL`] (a token bucket), each with a count of the
/// ones held back, so a flood cannot flood the terminal too.
#[derive(Debug)]
pub struct RefusalLog {
    what: String,
    tokens: f64,
    last: Option<Instant>,
    held: u64,
}

impl RefusalLog {
    /// Lines a burst may print at once.
    pub const BURST: f64 = 10.0;
    /// Time to earn one more line.
    pub const INTERVAL: Duration = Duration::from_secs(1);

    /// A log whose lines start with `what` (`"ngauge: tcp: data listener"`).
    pub fn new(what: impl Into<String>) -> RefusalLog {
        RefusalLog {
            what: what.into(),
            tokens: Self::BURST,
            last: None,
            held: 0,
        }
    }

    /// Records a refusal; returns the line printed, if one was.
    pub fn refused(&mut self, from: &str, reason: &str) -> Option<String> {
        let now = Instant::now();
        if let Some(last) = self.last {
            let earned = now.duration_since(last).as_secs_f64() / Self::INTERVAL.as_secs_f64();
            self.tokens = (self.tokens + earned).min(Self::BURST);
        }
        self.last = Some(now);
        if self.tokens < 1.0 {
            self.held += 1;
            return None;
        }
        self.tokens -= 1.0;
        let more = match std::mem::take(&mut self.held) {
            0 => String::new(),
            n => format!(" ({n} more refused since the last report)"),
        };
        let line = format!(
            "{}: refused connection from {from}: {reason}{more}",
            self.what
        );
        eprintln!("{line}");
        Some(line)
    }
}

/// Connections beyond the expected ranks that may wait for their handshake: room
/// for strangers without starving the ranks.
pub const STRANGER_ROOM: usize = 64;

/// How many connections may wait for their handshake at once when `expected` ranks
/// are still to come: what the descriptor limit leaves (less a reserve for the job's
/// own sockets and files), at most the expected ranks plus [`STRANGER_ROOM`], so
/// every rank of the job fits whatever the order it arrives in.
pub fn pending_budget(expected: usize) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1 << 20);
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count() as u64);
    let left = limit.saturating_sub(open).saturating_sub(16);
    let wanted = expected.saturating_add(STRANGER_ROOM) as u64;
    (left.min(wanted) as usize).max(2)
}

struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    challenge: Challenge,
    since: Instant,
}

/// `rank 1` or `ranks 1, 3`: the ranks as the other errors name them, so that a
/// reader (and a test) finds "rank N" in every message about rank N.
pub fn ranks_phrase(ranks: &[u32]) -> String {
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    match list.len() {
        1 => format!("rank {}", list[0]),
        _ => format!("ranks {}", list.join(", ")),
    }
}

/// Why [`accept_authenticated`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// Not every expected rank proved itself before the deadline.
    #[error("{} did not connect within {after:?}", ranks_phrase(.missing))]
    Missing {
        /// The ranks still missing.
        missing: Vec<u32>,
        /// The time allowed.
        after: Duration,
    },
    /// The listener itself failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Limits of [`accept_authenticated`].
#[derive(Clone, Debug)]
pub struct AcceptLimits {
    /// How long one connection may take to send its proof.
    pub handshake: Duration,
    /// How long all expected ranks may take together.
    pub total: Duration,
}

/// Accepts connections on `listener` until every rank in `expected` proved itself
/// with `key` to this listener of rank `server`; returns their streams (blocking,
/// in the order of `expected`). A rank not expected, or one that already connected,
/// is refused (see [`serve_authenticated`] for how strangers are kept out).
pub fn accept_authenticated(
    listener: &TcpListener,
    key: &AuthKey,
    server: u32,
    expected: &[u32],
    limits: &AcceptLimits,
    log: &mut RefusalLog,
) -> Result<Vec<TcpStream>, AcceptError> {
    struct Expected<'a> {
        ranks: &'a [u32],
        done: Vec<Option<TcpStream>>,
    }
    impl Admit for Expected<'_> {
        fn admit(&mut self, rank: u32) -> Result<(), String> {
            match self.ranks.iter().position(|&r| r == rank) {
                None => Err(format!("rank {rank} is not expected here")),
                Some(s) if self.done[s].is_some() => Err(format!("rank {rank} already connected")),
                Some(_) => Ok(()),
            }
        }
        fn take(&mut self, rank: u32, stream: TcpStream) -> bool {
            if let Some(s) = self.ranks.iter().position(|&r| r == rank) {
                self.done[s] = Some(stream);
            }
            self.done.iter().all(Option::is_some)
        }
    }
    let mut want = Expected {
        ranks: expected,
        done: expected.iter().map(|_| None).collect(),
    };
    let served = expected.is_empty()
        || serve_authenticated(
            listener,
            key,
            server,
            expected.len(),
            limits,
            log,
            &mut want,
        )?;
    if !served {
        return Err(AcceptError::Missing {
            missing: expected
                .iter()
                .zip(&want.done)
                .filter(|(_, d)| d.is_none())
                .map(|(&r, _)| r)
                .collect(),
            after: limits.total,
        });
    }
    Ok(want
        .done
        .into_iter()
        .map(|s| s.expect("all done"))
        .collect())
}

/// Which ranks [`serve_authenticated`] lets in, and where their streams go.
pub trait Admit {
    /// Called once `rank` proved itself, before the answer: `Err(reason)` refuses it
    /// (logged, no answer sent).
    fn admit(&mut self, rank: u32) -> Result<(), String>;
    /// The stream of an admitted rank, answered (blocking); returns whether serving
    /// is done.
    fn take(&mut self, rank: u32, stream: TcpStream) -> bool;
}

/// Serves handshakes on `listener` for this listener of rank `server` (`ranks` of the
/// job may come, which sizes the [`pending_budget`]), handing every rank that proves
/// itself with `key` and that `admit` lets in to `admit.take`,
/// until `take` says it is done (`Ok(true)`), `limits.total` passes (`Ok(false)`),
/// or the listener fails (an error; shutting the listener down ends a server that
/// runs for a whole job this way).
///
/// Strangers never disturb the wait: each connection has `limits.handshake` to send
/// its [`PROOF_LEN`] bytes; garbage, a wrong tag or a rank `admit` refuses is refused
/// at once (logged through `log`, rate-limited); at most [`pending_budget`]
/// connections wait at a time and the oldest is dropped for a new one, and accepts
/// are taken in batches between reads, so a flood cannot keep a real rank's proof
/// from being read, nor exhaust the descriptors.
pub fn serve_authenticated(
    listener: &TcpListener,
    key: &AuthKey,
    server: u32,
    ranks: usize,
    limits: &AcceptLimits,
    log: &mut RefusalLog,
    admit: &mut dyn Admit,
) -> std::io::Result<bool> {
    use std::os::fd::AsFd;
    listener.set_nonblocking(true)?;
    let budget = pending_budget(ranks);
    // A server for the whole job runs with `Duration::MAX`: a century is as good.
    let deadline = Instant::now() + limits.total.min(Duration::from_secs(100 * 365 * 86_400));
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        pending.retain(|p| {
            let stale = now.duration_since(p.since) >= limits.handshake;
            if stale {
                log.refused(
                    &p.from.to_string(),
                    &format!("no proof within {:?}", limits.handshake),
                );
            }
            !stale
        });
        let mut wake = deadline - now;
        for p in &pending {
            wake = wake.min((p.since + limits.handshake).saturating_duration_since(now));
        }
        let ready = {
            let mut fds = vec![listener.as_fd()];
            fds.extend(pending.iter().map(|p| p.stream.as_fd()));
            wait_readable(&fds, wake)?
        };
        for i in (0..pending.len()).rev() {
            if !ready[1 + i] {
                continue;
            }
            let p = &mut pending[i];
            let mut chunk = [0u8; PROOF_LEN];
            let want = p.challenge.wants();
            let verdict = match p.stream.read(&mut chunk[..want]) {
                Ok(0) => Verdict::Refuse("closed the connection before its proof".into()),
                Ok(n) => p.challenge.feed(&chunk[..n], key, server),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    Verdict::Wait
                }
                Err(e) => Verdict::Refuse(format!("read failed: {e}")),
            };
            match verdict {
                Verdict::Wait => {}
                Verdict::Refuse(reason) => {
                    let p = pending.swap_remove(i);
                    log.refused(&p.from.to_string(), &reason);
                }
                Verdict::Accept { rank, reply } => {
                    let p = pending.swap_remove(i);
                    if let Err(reason) = admit.admit(rank) {
                        log.refused(&p.from.to_string(), &reason);
                        continue;
                    }
                    let mut stream = p.stream;
                    // 32 bytes into a fresh socket's empty send buffer.
                    let sent = stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.set_write_timeout(Some(limits.handshake)))
                        .and_then(|()| stream.write_all(&reply));
                    match sent {
                        Ok(()) if admit.take(rank, stream) => return Ok(true),
                        Ok(()) => {}
                        Err(e) => {
                            log.refused(&p.from.to_string(), &format!("answer: {e}"));
                        }
                    }
                }
            }
        }
        if ready[0] {
            // A batch at a time, so proofs already queued are read in between.
            for _ in 0..budget.div_ceil(2) {
                match listener.accept() {
                    Ok((mut stream, from)) => {
                        if pending.len() >= budget {
                            let oldest = pending.remove(0);
                            log.refused(
                                &oldest.from.to_string(),
                                "dropped for a newer connection (too many waiting)",
                            );
                        }
                        let (challenge, greeting) = Challenge::new()?;
                        // 20 bytes into an empty send buffer: never blocks.
                        if stream.set_nonblocking(true).is_ok()
                            && stream.write_all(&greeting).is_ok()
                        {
                            pending.push(Pending {
                                stream,
                                from,
                                challenge,
                                since: Instant::now(),
                            });
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // The listener was shut down: the job's server is over.
                    Err(e) if e.kind() == ErrorKind::InvalidInput => return Err(e),
                    Err(e) => {
                        // EMFILE, ECONNABORTED: per connection, not the job's end.
                        log.refused("?", &format!("accept failed: {e}"));
                        if !pending.is_empty() {
                            let oldest = pending.remove(0);
                            drop(oldest);
                        } else {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// Blocks until one of `fds` is readable (or has an error or end of stream) or
/// `timeout` passes; retries interrupted waits.
fn wait_readable(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout: Duration,
) -> std::io::Result<Vec<bool>> {
    use rustix::event::{poll, PollFd, PollFlags};
    let deadline = Instant::now() + timeout;
    loop {
        let mut polls: Vec<PollFd<'_>> = fds
            .iter()
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .collect();
        let left = deadline.saturating_duration_since(Instant::now());
        match poll(&mut polls, Some(&crate::util::timespec(left))) {
            Ok(_) => return Ok(polls.iter().map(|p| !p.revents().is_empty()).collect()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AuthKey {
        AuthKey::random().unwrap()
    }

    /// Runs the client's side against a `Challenge` in memory.
    fn handshake(client_key: &AuthKey, server_key: &AuthKey, client: u32) -> (Verdict, Vec<u8>) {
        let (mut challenge, greeting) = Challenge::new().unwrap();
        let nc = [7u8; NONCE_LEN];
        let tag = client_key
            .mac(CLIENT_LABEL, &greeting[4..], &nc, client, 0)
            .finalize()
            .into_bytes();
        let mut proof = Vec::new();
        proof.extend_from_slice(PROOF_MAGIC);
        proof.extend_from_slice(&client.to_le_bytes());
        proof.extend_from_slice(&nc);
        proof.extend_from_slice(&tag);
        // Byte by byte: a proof may arrive in any cut.
        let mut verdict = Verdict::Wait;
        for b in &proof {
            verdict = challenge.feed(std::slice::from_ref(b), server_key, 0);
            if verdict != Verdict::Wait {
                break;
            }
        }
        (verdict, proof)
    }

    #[test]
    fn the_right_key_is_accepted_and_a_wrong_one_refused() {
        let k = key();
        assert!(matches!(
            handshake(&k, &k, 3).0,
            Verdict::Accept { rank: 3, .. }
        ));
        assert!(matches!(handshake(&key(), &k, 3).0, Verdict::Refuse(r) if r.contains("key")));
    }

    #[test]
    fn garbage_is_refused_at_its_first_wrong_byte() {
        let k = key();
        let (mut c, _) = Challenge::new().unwrap();
        assert!(matches!(c.feed(b"N", &k, 0), Verdict::Wait));
        assert!(matches!(c.feed(b"X", &k, 0), Verdict::Refuse(_)));
        let (mut c, _) = Challenge::new().unwrap();
        assert!(matches!(c.feed(&[0; 8], &k, 0), Verdict::Refuse(_)));
        let (mut c, _) = Challenge::new().unwrap();
        assert!(matches!(
            c.feed(&[b'N'; PROOF_LEN + 1], &k, 0),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn a_recorded_proof_does_not_open_another_connection() {
        let k = key();
        let (_, proof) = handshake(&k, &k, 1);
        let (mut fresh, _) = Challenge::new().unwrap();
        assert!(matches!(fresh.feed(&proof, &k, 0), Verdict::Refuse(_)));
    }

    #[test]
    fn both_sides_over_a_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let k = key();
        let k2 = k.clone();
        let client = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            prove(&mut s, &k2, 2, 0).map(|()| s)
        });
        let limits = AcceptLimits {
            handshake: Duration::from_secs(5),
            total: Duration::from_secs(10),
        };
        let mut log = RefusalLog::new("test");
        let got = accept_authenticated(&listener, &k, 0, &[2], &limits, &mut log).unwrap();
        assert_eq!(got.len(), 1);
        client.join().unwrap().unwrap();
        // A client with another key is refused, and learns it.
        let other = key();
        let client = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            prove(&mut s, &other, 2, 0)
        });
        let limits = AcceptLimits {
            handshake: Duration::from_secs(5),
            total: Duration::from_millis(500),
        };
        let err = accept_authenticated(&listener, &k, 0, &[2], &limits, &mut log).unwrap_err();
        assert!(matches!(err, AcceptError::Missing { ref missing, .. } if missing == &[2]));
        assert!(matches!(client.join().unwrap(), Err(AuthError::Refused(_))));
    }

    #[test]
    fn refusal_lines_are_rate_limited() {
        let mut log = RefusalLog::new("test");
        for _ in 0..RefusalLog::BURST as usize {
            assert!(log.refused("a", "x").is_some());
        }
        for _ in 0..50 {
            assert!(log.refused("a", "x").is_none());
        }
        log.last = Some(Instant::now() - RefusalLog::INTERVAL);
        let line = log.refused("a", "x").unwrap();
        assert!(line.contains("50 more refused"), "{line}");
        assert!(log.refused("a", "x").is_none());
    }
}
