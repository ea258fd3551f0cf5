//! Liveness apart from waiting: is the rank this one waits for still running?
//!
//! A control-plane wait has no deadline of its own: rank 2 idling in a barrier
//! while ranks 0 and 1 measure for minutes is a healthy job. What ends a wait is a
//! rank that is gone (its connection closes: the kernel tells at once) or one that no
//! longer runs (stopped with SIGSTOP, its host frozen or cut off), which this module
//! tells within the job's timeout.
//!
//! # How
//!
//! Next to each control connection (the star through rank 0) lies a *liveness link*,
//! a second TCP connection set up right after rendezvous and authenticated like a
//! data-plane connection ([`ngauge_transport::auth`], key sent over the control
//! channel). On each rank a thread of its own serves the links: it answers every
//! probe byte (`?`) with `!` and notes when it last heard anything from each peer.
//! The main thread, while it waits in a control call and only then, sends a probe to
//! the ranks it waits for once per [`probe_interval`] of waiting, and gives up on a
//! rank it has not heard from for the whole timeout. A stopped process answers
//! nothing (all its threads are stopped), a busy one answers from its liveness
//! thread without its measuring thread noticing.
//!
//! # Why not heartbeats on the control connections
//!
//! The control plane must carry nothing while a timed region runs. Periodic
//! heartbeats from every rank would put packets on the measuring ranks' sockets all
//! the time. Here nothing moves unless some rank waits, then one byte per interval
//! (by default every 5 s with the 30 s timeout) goes to the ranks it waits for, and
//! is answered by a thread that is moved off the measuring core (to the cores the
//! process was allowed before it pinned itself), so a measuring rank sees at most
//! one wake-up of another core per interval. TCP keepalive was the other candidate:
//! the kernel answers it, so it needs no thread, but for the same reason it cannot
//! tell a stopped process from a running one.
//!
//! Limits: a rank whose process runs but whose measuring thread is stuck forever
//! (a deadlock in a transport) is not found here; the data plane's own timeouts
//! name such a peer.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROBE: u8 = b'?';
const ANSWER: u8 = b'!';

/// How often a waiting rank probes the ranks it waits for: a quarter of the
/// timeout, between 20 ms and 5 s.
pub fn probe_interval(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(20), Duration::from_secs(5))
}

struct Shared {
    base: Instant,
    /// Per rank: nanoseconds after `base` when something last arrived from it
    /// (`u64::MAX`: its link is closed).
    heard_ns: Vec<AtomicU64>,
    /// Per rank: nanoseconds after `base` when its link closed (`u64::MAX`: open).
    closed_ns: Vec<AtomicU64>,
    /// Per rank: the write side of its link.
    writers: Vec<Option<Mutex<TcpStream>>>,
}

/// This rank's liveness links and the thread that serves them.
pub struct Liveness {
    shared: Arc<Shared>,
    readers: Vec<TcpStream>,
    interval: Duration,
    last_probe: Vec<Option<Instant>>,
}

impl std::fmt::Debug for Liveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Liveness")
            .field("interval", &self.interval)
            .finish()
    }
}

impl Liveness {
    /// Starts serving `links` (`links[r]`: the link to rank `r`, if any) on a thread
    /// that runs on `cores` (when not empty), and probes every `interval` of waiting.
    pub fn start(
        links: Vec<Option<TcpStream>>,
        interval: Duration,
        cores: Vec<usize>,
    ) -> std::io::Result<Liveness> {
        let base = Instant::now();
        let mut readers = Vec::new();
        let mut thread_links = Vec::new();
        let mut writers = Vec::new();
        for (rank, link) in links.into_iter().enumerate() {
            match link {
                Some(s) => {
                    s.set_nodelay(true)?;
                    s.set_write_timeout(Some(Duration::from_millis(200)))?;
                    let r = s.try_clone()?;
                    readers.push(s.try_clone()?);
                    thread_links.push((rank, r));
                    writers.push(Some(Mutex::new(s)));
                }
                None => writers.push(None),
            }
        }
        let shared = Arc::new(Shared {
            base,
            heard_ns: writers.iter().map(|_| AtomicU64::new(0)).collect(),
            closed_ns: writers.iter().map(|_| AtomicU64::new(u64::MAX)).collect(),
            writers,
        });
        let last_probe = vec![None; shared.writers.len()];
        let serving = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ngauge-liveness".into())
            .spawn(move || {
                off_the_measuring_core(&cores);
                serve(&serving, thread_links);
            })?;
        Ok(Liveness {
            shared,
            readers,
            interval,
            last_probe,
        })
    }

    /// How long since anything arrived from `rank` (`None`: no link to it, or its
    /// link is closed).
    pub fn silent_for(&self, rank: usize) -> Option<Duration> {
        let ns = self.shared.heard_ns.get(rank)?.load(Ordering::Relaxed);
        if ns == u64::MAX || self.shared.writers.get(rank)?.is_none() {
            return None;
        }
        let heard = self.shared.base + Duration::from_nanos(ns);
        Some(Instant::now().saturating_duration_since(heard))
    }

    /// Sends `rank` a probe unless one went out less than an interval ago.
    pub fn probe(&mut self, rank: usize) {
        let now = Instant::now();
        if self.last_probe[rank].is_some_and(|t| now.duration_since(t) < self.interval) {
            return;
        }
        self.last_probe[rank] = Some(now);
        if let Some(Some(w)) = self.shared.writers.get(rank) {
            let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
            let _ = w.write_all(&[PROBE]);
        }
    }

    /// How often a waiting rank probes.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether the link to `rank` is up.
    pub fn has_link(&self, rank: usize) -> bool {
        self.silent_for(rank).is_some()
    }

    /// The rank whose link closed first (its process exited or was killed), if any
    /// did: where a failure that spread to other ranks began.
    pub fn first_closed(&self) -> Option<usize> {
        (0..self.shared.closed_ns.len())
            .map(|r| (self.shared.closed_ns[r].load(Ordering::Relaxed), r))
            .filter(|&(ns, _)| ns != u64::MAX)
            .min()
            .map(|(_, r)| r)
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // The thread sees the end of every link and exits.
        for r in &self.readers {
            let _ = r.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Moves the calling thread to `cores` (the process's cores before it pinned
/// itself, less the measuring core), so that answering a probe does not preempt a
/// measurement.
fn off_the_measuring_core(cores: &[usize]) {
    if cores.is_empty() {
        return;
    }
    let mut set = rustix::thread::CpuSet::new();
    for &c in cores {
        if c < rustix::thread::CpuSet::MAX_CPU {
            set.set(c);
        }
    }
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn serve(shared: &Shared, mut links: Vec<(usize, TcpStream)>) {
    use rustix::event::{poll, PollFd, PollFlags};
    let mark = |rank: usize| {
        let ns = shared.base.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64;
        shared.heard_ns[rank].store(ns, Ordering::Relaxed);
    };
    for &(rank, _) in &links {
        mark(rank);
    }
    let mut buf = [0u8; 64];
    while !links.is_empty() {
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = links
                .iter()
                .map(|(_, s)| PollFd::new(s, PollFlags::IN))
                .collect();
            match poll(&mut fds, None) {
                Ok(_) => fds.iter().map(|p| !p.revents().is_empty()).collect(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            }
        };
        let mut closed = Vec::new();
        for (i, (rank, stream)) in links.iter_mut().enumerate() {
            if !ready[i] {
                continue;
            }
            match stream.read(&mut buf) {
                Ok(0) => closed.push(i),
                Ok(n) => {
                    mark(*rank);
                    let probes = buf[..n].iter().filter(|&&b| b == PROBE).count();
                    if probes > 0 {
                        if let Some(Some(w)) = shared.writers.get(*rank) {
                            let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                            let _ = w.write_all(&[ANSWER]);
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
                Err(_) => closed.push(i),
            }
        }
        for i in closed.into_iter().rev() {
            let (rank, _) = links.swap_remove(i);
            shared.heard_ns[rank].store(u64::MAX, Ordering::Relaxed);
            let ns = shared.base.elapsed().as_nanos().min(u64::MAX as u128 - 1) as u64;
            shared.closed_ns[rank].store(ns, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    /// Waits (up to a minute, for a loaded host) until `done` holds.
    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let began = Instant::now();
        while !done() {
            assert!(began.elapsed() < Duration::from_secs(60), "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Order, not deadlines: the serving thread has noted the link before the probe
    /// goes out, and hears from the peer only after it.
    #[test]
    fn a_probe_is_answered_and_refreshes_what_was_heard() {
        let (a, b) = pair();
        let interval = Duration::from_millis(20);
        let mut zero = Liveness::start(vec![None, Some(a)], interval, vec![]).unwrap();
        let _one = Liveness::start(vec![Some(b), None], interval, vec![]).unwrap();
        eventually("the link is noted and then silent", || {
            zero.silent_for(1).unwrap() >= Duration::from_millis(50)
        });
        let probed = Instant::now();
        zero.probe(1);
        eventually("the answer arrives after the probe", || {
            zero.silent_for(1).unwrap() < probed.elapsed()
        });
        assert_eq!(zero.silent_for(0), None);
    }

    #[test]
    fn a_peer_without_a_thread_stays_silent_and_a_closed_link_shows() {
        // `b` is a bare socket: nobody answers, like a stopped process.
        let (a, b) = pair();
        let mut zero =
            Liveness::start(vec![None, Some(a)], Duration::from_millis(20), vec![]).unwrap();
        eventually("the link is noted and then silent", || {
            zero.silent_for(1).unwrap() >= Duration::from_millis(50)
        });
        let probed = Instant::now();
        zero.probe(1);
        std::thread::sleep(Duration::from_millis(200));
        // Nothing was heard since the probe (read in this order: `silent` is taken
        // after `since`, so it is at least `since` when the last news predates the
        // probe).
        let since = probed.elapsed();
        assert!(zero.silent_for(1).unwrap() >= since);
        drop(b);
        eventually("the closed link shows", || zero.silent_for(1).is_none());
    }

    #[test]
    fn the_interval_follows_the_timeout() {
        assert_eq!(
            probe_interval(Duration::from_secs(30)),
            Duration::from_secs(5)
        );
        assert_eq!(
            probe_interval(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(probe_interval(Duration::ZERO), Duration::from_millis(20));
    }
}
