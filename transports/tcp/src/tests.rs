//! In-process tests: ranks are threads, the control plane is `inproc`, the data plane
//! real TCP connections on loopback. The contract every transport keeps is
//! `ngauge_transport::conformance`'s; here is what is TCP's own.

use super::*;
use ngauge_transport::{conformance, inproc};
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::sync::mpsc;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn opts(wait: WaitMode) -> TcpOptions {
    TcpOptions {
        wait,
        timeout: Duration::from_secs(10),
        ..TcpOptions::default()
    }
}

/// Runs `body(rank, transport, control)` on `n` threads, returns their results in rank
/// order.
fn run_world<R: Send + 'static>(
    n: usize,
    opts: TcpOptions,
    body: impl Fn(Rank, TcpTransport) -> R + Send + Sync + Clone + 'static,
) -> Vec<R> {
    let handles: Vec<_> = inproc::world(n)
        .into_iter()
        .enumerate()
        .map(|(rank, (_, mut control))| {
            let body = body.clone();
            let opts = opts.clone();
            std::thread::spawn(move || {
                let t = TcpTransport::connect(&mut control, LOOPBACK, &opts).unwrap();
                body(rank, t)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The transport contract, in both wait modes, with 16 KiB socket buffers: large
/// messages then wait for the receiver, as they would on a slower link.
#[test]
fn keeps_the_transport_contract() {
    let profile = conformance::Profile {
        modes: vec![WaitMode::Poll, WaitMode::Block],
        timeout: Duration::from_secs(10),
        short_timeout: Some(Duration::from_millis(300)),
        timeouts_keep_requests: true,
        reports_closed_peers: true,
    };
    conformance::run_threads(&profile, |s| {
        let o = TcpOptions {
            send_buffer_bytes: Some(16 * 1024),
            recv_buffer_bytes: Some(16 * 1024),
            timeout: s.timeout,
            ..opts(s.wait)
        };
        conformance::connect_each(s.ranks, move |c| TcpTransport::connect(c, LOOPBACK, &o))
    })
    .assert_passed();
}

fn busy<T>(r: Result<T, TransportError>) -> bool {
    matches!(r, Err(TransportError::BufferBusy { .. }))
}

/// A pending request holds exactly its bytes: a send shares them with other sends,
/// a receive excludes everything else on them, blocking calls included, and disjoint
/// regions of one buffer never conflict. Rank 1 reads nothing until rank 0 has
/// checked, so the 4 MiB send stays pending behind 16 KiB socket buffers.
#[test]
fn pending_requests_hold_exactly_their_bytes() {
    const LEN: usize = 4 << 20;
    let o = TcpOptions {
        send_buffer_bytes: Some(16 * 1024),
        recv_buffer_bytes: Some(16 * 1024),
        ..opts(WaitMode::Poll)
    };
    let (tx, rx) = mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let got = run_world(2, o, move |rank, mut t| {
        let buf = t.alloc_buffer(LEN + 24).unwrap();
        if rank == 1 {
            let _ = rx.lock().unwrap().recv();
            t.recv(0, buf.prefix(LEN)).unwrap();
            t.recv(0, buf.prefix(8)).unwrap();
            t.buffer_mut(buf).unwrap()[..16].copy_from_slice(&pattern(16, 7));
            t.send(0, buf.prefix(8)).unwrap();
            t.send(0, buf.region(8, 8)).unwrap();
            return Vec::new();
        }
        t.buffer_mut(buf).unwrap()[..LEN].copy_from_slice(&pattern(LEN, 3));
        let s = t.isend(1, buf.prefix(LEN)).unwrap();
        assert!(!t.test(s).unwrap(), "the large send must still be pending");
        let mut refused = vec![
            // A blocking receive into the bytes of the pending send.
            busy(t.recv(1, buf.region(100, 8))),
            // A pending receive overlapping them.
            busy(t.irecv(1, buf.region(LEN - 1, 2))),
        ];
        // Another send from the same bytes shares them.
        let s2 = t.isend(1, buf.prefix(8)).unwrap();
        // Receives into disjoint parts of the buffer are accepted...
        let r1 = t.irecv(1, buf.region(LEN, 8)).unwrap();
        let r2 = t.irecv(1, buf.region(LEN + 8, 8)).unwrap();
        // ...but not a second one into bytes a pending receive writes, nor a send
        // from them, nor a blocking receive.
        refused.push(busy(t.irecv(1, buf.region(LEN + 4, 8))));
        refused.push(busy(t.isend(1, buf.region(LEN + 15, 1))));
        refused.push(busy(t.send(1, buf.region(LEN + 7, 1))));
        refused.push(busy(t.recv(1, buf.region(LEN + 8, 1))));
        refused.push(busy(t.buffer(buf)));
        refused.push(busy(t.free_buffer(buf)));
        tx.send(()).unwrap();
        t.wait_all(&[s, s2, r1, r2]).unwrap();
        // Completed requests released their holds.
        assert_eq!(&t.buffer(buf).unwrap()[LEN..LEN + 16], &pattern(16, 7)[..]);
        t.free_buffer(buf).unwrap();
        refused
    });
    assert!(got[0].iter().all(|&r| r), "{:?}", got[0]);
}

/// A rank's control plane that runs `hook` on the endpoints once they are
/// exchanged (the one allgather of `TcpTransport::connect`), before the rank
/// connects.
struct Hooked<F> {
    inner: inproc::InprocControl,
    hook: F,
}

impl<F: FnMut(&[Vec<u8>]) + Send> Control for Hooked<F> {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&mut self) -> Result<(), ngauge_transport::ControlError> {
        self.inner.barrier()
    }
    fn broadcast(
        &mut self,
        root: Rank,
        data: &mut Vec<u8>,
    ) -> Result<(), ngauge_transport::ControlError> {
        self.inner.broadcast(root, data)
    }
    fn gather(
        &mut self,
        root: Rank,
        data: &[u8],
    ) -> Result<Vec<Vec<u8>>, ngauge_transport::ControlError> {
        self.inner.gather(root, data)
    }
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>, ngauge_transport::ControlError> {
        let all = self.inner.allgather(data)?;
        (self.hook)(&all);
        Ok(all)
    }
}

/// Rank 1's hook: strangers attack rank 0's data listener before rank 1 connects
/// (each attacker's thread ends with what the listener told it after the greeting,
/// sent to `answers`); then a probe waits until rank 1's own listener greets it,
/// that is until rank 0 has accepted rank 1's proof, and reports whether the
/// silent stranger's connection to rank 0 was still open then (to `probe`),
/// before it opens rank 2's `gate`.
fn attack(
    all: &[Vec<u8>],
    answers: &mpsc::Sender<std::thread::JoinHandle<Vec<u8>>>,
    probe: &mpsc::Sender<std::thread::JoinHandle<bool>>,
    gate: mpsc::Sender<()>,
) {
    let endpoint = |r: Rank| -> SocketAddr {
        let text = std::str::from_utf8(&all[r][auth::KEY_LEN..]).unwrap();
        text.parse().unwrap()
    };
    let zero = endpoint(0);
    const SILENT: usize = 1;
    let attacks: Vec<Vec<u8>> = vec![
        b"\x00\xffgarbage".to_vec(),      // 8 garbage bytes (aborted rank 0)
        Vec::new(),                       // silence (blocked rank 0)
        b"NGT1\x01\x00\x00\x00".to_vec(), // the old unauthenticated hello as rank 1
        [b"NGP1\x01\x00\x00\x00".as_slice(), &[0u8; 48]].concat(), // forged proof
        b"NGP1\x01\x00".to_vec(),         // a stalled half-proof
    ];
    let (tx, rx) = mpsc::channel();
    let n = attacks.len();
    for (i, bytes) in attacks.into_iter().enumerate() {
        let tx = tx.clone();
        let attacker = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(zero).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
            let mut greeting = [0u8; auth::GREETING_LEN];
            s.read_exact(&mut greeting).unwrap();
            s.write_all(&bytes).unwrap();
            tx.send((i, s.try_clone().unwrap())).unwrap();
            // What the listener tells a stranger after the greeting: nothing.
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            got
        });
        answers.send(attacker).unwrap();
    }
    // Every attack is on the wire before rank 1 connects.
    let sent: Vec<_> = (0..n).map(|_| rx.recv().unwrap()).collect();
    let silent = sent.into_iter().find(|(i, _)| *i == SILENT).unwrap().1;
    std::thread::sleep(Duration::from_millis(100));
    let one = endpoint(1);
    let watcher = std::thread::spawn(move || {
        let mut p = std::net::TcpStream::connect(one).unwrap();
        p.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut greeting = [0u8; auth::GREETING_LEN];
        p.read_exact(&mut greeting).unwrap();
        let mut byte = [0u8; 1];
        let peek = rustix::net::recv(&silent, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT);
        gate.send(()).unwrap();
        matches!(peek, Err(Errno::AGAIN))
    });
    probe.send(watcher).unwrap();
}

/// Issue 18: strangers on rank 0's data listener (garbage, silence, forged or
/// stalled proofs) get the greeting and nothing else, and do not hold up the
/// ranks: rank 0 accepts rank 1 while the silent stranger still waits out its
/// grace (rank 2, which rank 0 also waits for, connects only once that was
/// seen), and the job runs.
#[test]
fn issue18_strangers_on_the_data_listener_do_not_disturb_the_job() {
    let (answers, answers_rx) = mpsc::channel();
    let (probe, probe_rx) = mpsc::channel();
    let (gate, gate_rx) = mpsc::channel::<()>();
    let (probed, probed_rx) = mpsc::channel::<()>();
    let mut world = inproc::world(3).into_iter().map(|(_, c)| c);
    let (mut c0, c1, c2) = (
        world.next().unwrap(),
        world.next().unwrap(),
        world.next().unwrap(),
    );
    let o = opts(WaitMode::Block);
    let (o1, o2) = (o.clone(), o.clone());
    let one = std::thread::spawn(move || {
        let hook = move |all: &[Vec<u8>]| attack(all, &answers, &probe, gate.clone());
        let mut c1 = Hooked { inner: c1, hook };
        let mut t = TcpTransport::connect(&mut c1, LOOPBACK, &o1).unwrap();
        let b = t.alloc_buffer(4).unwrap();
        t.recv(0, b.prefix(4)).unwrap();
        t.send(0, b.prefix(4)).unwrap();
        let got = t.buffer(b).unwrap().to_vec();
        // Rank 1's listener must outlive the probe, which connects to it.
        let _ = probed_rx.recv_timeout(Duration::from_secs(60));
        got
    });
    let two = std::thread::spawn(move || {
        let hook = move |_: &[Vec<u8>]| {
            let opened = gate_rx.recv_timeout(Duration::from_secs(60));
            opened.expect("rank 1 was accepted");
        };
        let mut c2 = Hooked { inner: c2, hook };
        TcpTransport::connect(&mut c2, LOOPBACK, &o2).unwrap();
    });
    let mut t = TcpTransport::connect(&mut c0, LOOPBACK, &o).unwrap();
    let b = t.alloc_buffer(4).unwrap();
    t.buffer_mut(b).unwrap().copy_from_slice(b"ping");
    t.send(1, b.prefix(4)).unwrap();
    t.recv(1, b.prefix(4)).unwrap();
    two.join().unwrap();
    assert_eq!(t.buffer(b).unwrap(), b"ping");
    assert!(
        probe_rx.recv().unwrap().join().unwrap(),
        "rank 0 refused the silent stranger before it accepted rank 1: the stranger \
         held up a rank's proof"
    );
    probed.send(()).unwrap();
    assert_eq!(one.join().unwrap(), b"ping");
    // Rank 0's listener serves until its transport ends: then the strangers still
    // waiting (the silent one) are closed instead of waiting out their grace.
    drop(t);
    // Strangers got the greeting and nothing else: no answer to a forged proof.
    for a in answers_rx {
        let a = a.join().unwrap();
        assert!(a.is_empty(), "{a:02x?}");
    }
}

/// Issue 34: pairs connect the first time they talk. At np 16 a ring opens 16
/// connections and a binomial-tree gather and broadcast 15 (each rank counts the
/// peers it holds: twice the connections), and every message arrives intact.
#[test]
fn issue34_a_ring_and_a_tree_open_only_the_connections_they_use() {
    const N: usize = 16;
    let held = run_world(N, opts(WaitMode::Block), |me, mut t| {
        let b = t.alloc_buffer(2).unwrap();
        // Ring: even ranks send first, odd ones receive first.
        let (next, prev) = ((me + 1) % N, (me + N - 1) % N);
        t.buffer_mut(b).unwrap()[0] = me as u8;
        for step in 0..2 {
            if (me % 2 == 0) == (step == 0) {
                t.send(next, b.prefix(1)).unwrap();
            } else {
                t.recv(prev, b.region(1, 1)).unwrap();
            }
        }
        assert_eq!(t.buffer(b).unwrap()[1], prev as u8);
        let ring = t.connected_peers();
        // Binomial tree rooted at 0: gather up, then broadcast down.
        let mut mask = 1;
        while mask < N && me & mask == 0 {
            if me + mask < N {
                t.recv(me + mask, b.prefix(1)).unwrap();
            }
            mask <<= 1;
        }
        if me != 0 {
            t.send(me - mask, b.prefix(1)).unwrap();
            t.recv(me - mask, b.prefix(1)).unwrap();
        }
        while mask > 1 {
            mask >>= 1;
            if me + mask < N && me & (mask * 2 - 1) == 0 {
                t.send(me + mask, b.prefix(1)).unwrap();
            }
        }
        (ring, t.connected_peers() - ring)
    });
    let ring: usize = held.iter().map(|h| h.0).sum();
    assert_eq!(ring, 2 * N, "{held:?}");
    // The tree's edges (rank r to r without its lowest bit) that the ring did not
    // open already: 15 edges, 8 of them ring edges (2k+1 to 2k).
    let tree_only = (1..N)
        .map(|r| (r, r & (r - 1)))
        .filter(|&(r, parent)| r - parent != 1)
        .count();
    assert_eq!(tree_only, 7);
    let opened: usize = held.iter().map(|h| h.1).sum();
    assert_eq!(opened, 2 * tree_only, "{held:?}");
}

/// Issue 34: when both ranks of every pair dial at once (all to all, nonblocking),
/// each pair ends with one connection, the same on both sides, and every message
/// arrives on it intact and in order.
#[test]
fn issue34_pairs_that_dial_each_other_at_once_agree_on_one_connection() {
    const N: usize = 6;
    for wait in [WaitMode::Poll, WaitMode::Block] {
        let got = run_world(N, opts(wait), |me, mut t| {
            let out = t.alloc_buffer(N * 2).unwrap();
            let inb = t.alloc_buffer(N * 2).unwrap();
            for p in 0..N {
                t.buffer_mut(out).unwrap()[2 * p..2 * p + 2].copy_from_slice(&[me as u8, p as u8]);
            }
            let mut reqs = Vec::new();
            for p in (0..N).filter(|&p| p != me) {
                reqs.push(t.isend(p, out.region(2 * p, 1)).unwrap());
                reqs.push(t.isend(p, out.region(2 * p + 1, 1)).unwrap());
                reqs.push(t.irecv(p, inb.region(2 * p, 2)).unwrap());
            }
            t.wait_all(&reqs).unwrap();
            let bytes = t.buffer(inb).unwrap().to_vec();
            (t.connected_peers(), bytes)
        });
        for (me, (held, bytes)) in got.into_iter().enumerate() {
            assert_eq!(held, N - 1, "{wait:?}");
            for p in (0..N).filter(|&p| p != me) {
                assert_eq!(&bytes[2 * p..2 * p + 2], &[p as u8, me as u8], "{wait:?}");
            }
        }
    }
}
