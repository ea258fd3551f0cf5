//! Helpers shared by the transports: the peer check every operation makes, and
//! for the socket transports (`ngauge-tcp`, `ngauge-udp`) the table of nonblocking
//! requests, error constructors, the poll-mode spin and `poll(2)` plumbing.
//!
//! They live here rather than in each transport so that the transports cannot drift
//! apart: the same peer check, the same request bookkeeping, the same mapping of
//! errno values to "the peer is gone", the same reuse of `poll` descriptor vectors.

use crate::transport::{Rank, RequestId};
use crate::TransportError;
use rustix::event::{PollFd, Timespec};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A request that knows whether it has completed.
pub trait Completion {
    /// `true` once the operation is done (the buffer is free again).
    fn is_complete(&self) -> bool;
}

/// The pending nonblocking requests of one transport instance, by [`RequestId`].
///
/// A request stays in the table from `isend`/`irecv` until `test` reports it complete
/// or `wait` returns ([`Requests::retire_if_complete`], [`Requests::retire_all`]).
#[derive(Debug)]
pub struct Requests<R> {
    transport: &'static str,
    map: HashMap<u64, R>,
    next: u64,
}

impl<R: Completion> Requests<R> {
    /// An empty table; errors name `transport`.
    pub fn new(transport: &'static str) -> Self {
        Requests {
            transport,
            map: HashMap::new(),
            next: 0,
        }
    }

    /// Adds a request and returns its new id.
    pub fn insert(&mut self, request: R) -> RequestId {
        let id = self.next;
        self.next += 1;
        self.map.insert(id, request);
        RequestId(id)
    }

    /// The request behind `id`, if it is still in the table.
    pub fn get(&self, id: RequestId) -> Option<&R> {
        self.map.get(&id.0)
    }

    /// The request behind `id`, mutably.
    pub fn get_mut(&mut self, id: RequestId) -> Option<&mut R> {
        self.map.get_mut(&id.0)
    }

    /// [`TransportError::UnknownRequest`] unless every one of `ids` is in the table.
    pub fn check_all(&self, ids: &[RequestId]) -> Result<(), TransportError> {
        match ids.iter().find(|id| !self.map.contains_key(&id.0)) {
            None => Ok(()),
            Some(&request) => Err(TransportError::UnknownRequest {
                transport: self.transport,
                request,
            }),
        }
    }

    /// Whether `id` has completed; [`TransportError::UnknownRequest`] if unknown.
    pub fn is_complete(&self, id: RequestId) -> Result<bool, TransportError> {
        self.check_all(&[id])?;
        Ok(self.map[&id.0].is_complete())
    }

    /// Whether every one of `ids` has completed (all must be in the table).
    pub fn all_complete(&self, ids: &[RequestId]) -> bool {
        ids.iter().all(|id| self.map[&id.0].is_complete())
    }

    /// Removes `id` if it has completed; returns whether it did (what `test` says).
    pub fn retire_if_complete(&mut self, id: RequestId) -> bool {
        let done = self.map.get(&id.0).is_some_and(R::is_complete);
        if done {
            self.map.remove(&id.0);
        }
        done
    }

    /// Removes every one of `ids` (after [`Requests::all_complete`]).
    pub fn retire_all(&mut self, ids: &[RequestId]) {
        for id in ids {
            self.map.remove(&id.0);
        }
    }
}

/// `Ok` when `peer` is another rank of the job of `size` ranks in which this is
/// rank `me`, else [`TransportError::NoSuchPeer`] naming `transport`. Inlined
/// into every send and receive; the error is built out of line.
#[inline]
pub fn check_peer(
    transport: &'static str,
    peer: Rank,
    me: Rank,
    size: usize,
) -> Result<(), TransportError> {
    if peer < size && peer != me {
        return Ok(());
    }
    Err(no_such_peer(transport, peer, me, size))
}

#[cold]
#[inline(never)]
fn no_such_peer(transport: &'static str, peer: Rank, me: Rank, size: usize) -> TransportError {
    TransportError::NoSuchPeer {
        transport,
        peer,
        size,
        me,
    }
}

/// [`TransportError::Setup`] for `transport`.
pub fn setup_error(transport: &'static str, reason: impl Into<String>) -> TransportError {
    TransportError::Setup {
        transport,
        reason: reason.into(),
    }
}

/// An I/O error on the link to `peer`: [`TransportError::PeerClosed`] when it says
/// the peer is gone (reset, broken pipe, end of stream, refused or unreachable, which
/// is how an ICMP port unreachable shows on a connected UDP socket), else
/// [`TransportError::Io`].
pub fn peer_error(
    transport: &'static str,
    peer: Rank,
    op: &'static str,
    source: std::io::Error,
) -> TransportError {
    use std::io::ErrorKind::*;
    match source.kind() {
        ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof | ConnectionRefused
        | HostUnreachable | NetworkUnreachable => TransportError::PeerClosed {
            transport,
            peer,
            op,
        },
        _ => TransportError::Io {
            transport,
            peer,
            op,
            source,
        },
    }
}

/// [`peer_error`] for an errno value.
pub fn errno_error(
    transport: &'static str,
    peer: Rank,
    op: &'static str,
    errno: rustix::io::Errno,
) -> TransportError {
    peer_error(transport, peer, op, std::io::Error::from(errno))
}

/// One spin of a poll-mode wait; every 1024 spins checks whether `timeout` has passed
/// since the first spin without progress (`since`), and returns it as the error.
#[inline]
pub fn spin_or_timeout(
    spins: &mut u32,
    since: &mut Option<Instant>,
    timeout: Duration,
) -> Result<(), Duration> {
    std::hint::spin_loop();
    *spins = spins.wrapping_add(1);
    if *spins & 1023 == 0 {
        let start = *since.get_or_insert_with(Instant::now);
        if start.elapsed() >= timeout {
            return Err(timeout);
        }
    }
    Ok(())
}

/// `d` as a `poll(2)` timeout.
pub fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Empties `fds` and hands back its allocation for descriptors of another lifetime
/// (the collect reuses the buffer in place: same layout, no element survives), so a
/// transport can keep one `Vec<PollFd<'static>>` and sleep without allocating once
/// the vector has grown.
pub fn recycle<'a>(mut fds: Vec<PollFd<'_>>) -> Vec<PollFd<'a>> {
    fds.clear();
    fds.into_iter().map(|_| unreachable!("cleared")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::PollFlags;

    #[derive(Debug)]
    struct Flag(bool);
    impl Completion for Flag {
        fn is_complete(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn requests_are_retired_once_complete() {
        let mut t = Requests::new("t");
        let a = t.insert(Flag(false));
        let b = t.insert(Flag(true));
        assert_ne!(a, b);
        assert!(!t.retire_if_complete(a));
        assert!(t.retire_if_complete(b));
        assert!(matches!(
            t.check_all(&[a, b]),
            Err(TransportError::UnknownRequest { request, .. }) if request == b
        ));
        t.get_mut(a).unwrap().0 = true;
        assert!(t.is_complete(a).unwrap() && t.all_complete(&[a]));
        t.retire_all(&[a]);
        assert!(t.get(a).is_none());
    }

    #[test]
    fn gone_peers_are_peer_closed() {
        use rustix::io::Errno;
        for errno in [Errno::CONNREFUSED, Errno::CONNRESET, Errno::PIPE] {
            assert!(matches!(
                errno_error("t", 3, "recv", errno),
                TransportError::PeerClosed { peer: 3, .. }
            ));
        }
        assert!(matches!(
            errno_error("t", 3, "recv", Errno::INVAL),
            TransportError::Io { .. }
        ));
    }

    #[test]
    fn recycled_poll_descriptors_keep_their_allocation() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut fds = Vec::with_capacity(8);
        fds.push(PollFd::new(&a, PollFlags::IN));
        let before = fds.as_ptr() as usize;
        let fds: Vec<PollFd<'static>> = recycle(fds);
        assert!(fds.is_empty());
        assert_eq!((fds.as_ptr() as usize, fds.capacity()), (before, 8));
    }
}
