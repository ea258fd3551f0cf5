//! In-process tests: ranks are threads, the control plane is `inproc`, the data plane
//! real TCP connections on loopback.

use super::*;
use ngauge_transport::inproc;
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

fn pingpong_sizes(wait: WaitMode) {
    let sizes = [0usize, 1, 7, 1000, 65536, 1 << 20];
    let got = run_world(2, opts(wait), move |rank, mut t| {
        let sbuf = t.alloc_buffer(1 << 20).unwrap();
        let rbuf = t.alloc_buffer(1 << 20).unwrap();
        for &size in &sizes {
            t.buffer_mut(sbuf).unwrap()[..size].copy_from_slice(&pattern(size, rank as u8));
            for _ in 0..3 {
                if rank == 0 {
                    t.send(1, sbuf.prefix(size)).unwrap();
                    t.recv(1, rbuf.prefix(size)).unwrap();
                } else {
                    t.recv(0, rbuf.prefix(size)).unwrap();
                    t.send(0, sbuf.prefix(size)).unwrap();
                }
            }
            let other = 1 - rank as u8;
            assert_eq!(&t.buffer(rbuf).unwrap()[..size], &pattern(size, other)[..]);
        }
        true
    });
    assert_eq!(got, vec![true, true]);
}

#[test]
fn pingpong_carries_every_size_intact_polling() {
    pingpong_sizes(WaitMode::Poll);
}

#[test]
fn pingpong_carries_every_size_intact_blocking() {
    pingpong_sizes(WaitMode::Block);
}

/// Both ranks post a send and a receive of 8 MiB with small socket buffers: only
/// progressing both requests together completes it.
fn simultaneous_large_exchange(wait: WaitMode) {
    let len = 8 << 20;
    let o = TcpOptions {
        send_buffer_bytes: Some(16 * 1024),
        recv_buffer_bytes: Some(16 * 1024),
        ..opts(wait)
    };
    let got = run_world(2, o, move |rank, mut t| {
        let peer = 1 - rank;
        let sbuf = t.alloc_buffer(len).unwrap();
        let rbuf = t.alloc_buffer(len).unwrap();
        t.buffer_mut(sbuf)
            .unwrap()
            .copy_from_slice(&pattern(len, rank as u8));
        let s = t.isend(peer, sbuf.prefix(len)).unwrap();
        let r = t.irecv(peer, rbuf.prefix(len)).unwrap();
        assert!(matches!(
            t.buffer(rbuf),
            Err(TransportError::BufferBusy { .. })
        ));
        t.wait_all(&[s, r]).unwrap();
        t.buffer(rbuf).unwrap() == &pattern(len, peer as u8)[..]
    });
    assert_eq!(got, vec![true, true]);
}

#[test]
fn simultaneous_large_exchange_completes_polling() {
    simultaneous_large_exchange(WaitMode::Poll);
}

#[test]
fn simultaneous_large_exchange_completes_blocking() {
    simultaneous_large_exchange(WaitMode::Block);
}

/// Rank 0 `isend(1); recv(1); wait` against rank 1 `recv(0); send(0)`: the blocking
/// receive on rank 0 must progress the queued send, or both ranks wait for each
/// other until the timeout. Small messages, and ones far above the socket buffers.
fn blocking_call_progresses_queued_isend(wait: WaitMode) {
    let o = TcpOptions {
        send_buffer_bytes: Some(16 * 1024),
        recv_buffer_bytes: Some(16 * 1024),
        timeout: Duration::from_secs(5),
        ..opts(wait)
    };
    let got = run_world(2, o, move |rank, mut t| {
        let mut ok = true;
        for len in [1usize, 4 << 20] {
            let sbuf = t.alloc_buffer(len).unwrap();
            let rbuf = t.alloc_buffer(len).unwrap();
            t.buffer_mut(sbuf)
                .unwrap()
                .copy_from_slice(&pattern(len, rank as u8));
            if rank == 0 {
                let s = t.isend(1, sbuf.prefix(len)).unwrap();
                t.recv(1, rbuf.prefix(len)).unwrap();
                t.wait(s).unwrap();
            } else {
                t.recv(0, rbuf.prefix(len)).unwrap();
                t.send(0, sbuf.prefix(len)).unwrap();
            }
            ok &= t.buffer(rbuf).unwrap() == &pattern(len, 1 - rank as u8)[..];
        }
        ok
    });
    assert_eq!(got, vec![true, true]);
}

#[test]
fn blocking_call_progresses_queued_isend_polling() {
    blocking_call_progresses_queued_isend(WaitMode::Poll);
}

#[test]
fn blocking_call_progresses_queued_isend_blocking() {
    blocking_call_progresses_queued_isend(WaitMode::Block);
}

#[test]
fn queued_nonblocking_messages_arrive_in_order() {
    let got = run_world(2, opts(WaitMode::Poll), |rank, mut t| {
        let buf = t.alloc_buffer(40).unwrap();
        if rank == 0 {
            for i in 0..4u8 {
                t.buffer_mut(buf).unwrap()[i as usize * 10..][..10].fill(i + 1);
            }
            let ids: Vec<_> = (0..4)
                .map(|i| t.isend(1, buf.region(i * 10, 10)).unwrap())
                .collect();
            // A blocking send behind queued ones must go after them.
            let tail = t.alloc_buffer(1).unwrap();
            t.buffer_mut(tail).unwrap()[0] = 9;
            t.send(1, tail.prefix(1)).unwrap();
            t.wait_all(&ids).unwrap();
            Vec::new()
        } else {
            let ids: Vec<_> = (0..4)
                .map(|i| t.irecv(0, buf.region(i * 10, 10)).unwrap())
                .collect();
            let mut done = [false; 4];
            while done.iter().any(|d| !d) {
                for (i, id) in ids.iter().enumerate() {
                    if !done[i] && t.test(*id).unwrap() {
                        done[i] = true;
                    }
                }
            }
            let tail = t.alloc_buffer(1).unwrap();
            t.recv(0, tail.prefix(1)).unwrap();
            let mut v = t.buffer(buf).unwrap().to_vec();
            v.push(t.buffer(tail).unwrap()[0]);
            v
        }
    });
    let mut expect: Vec<u8> = (1..=4u8).flat_map(|i| [i; 10]).collect();
    expect.push(9);
    assert_eq!(got[1], expect);
}

#[test]
fn three_ranks_connect_all_pairs() {
    let got = run_world(3, opts(WaitMode::Block), |rank, mut t| {
        let buf = t.alloc_buffer(3).unwrap();
        t.buffer_mut(buf).unwrap()[rank] = rank as u8 + 10;
        let mut ids = Vec::new();
        for peer in (0..3).filter(|&p| p != rank) {
            ids.push(t.isend(peer, buf.region(rank, 1)).unwrap());
        }
        let rbuf = t.alloc_buffer(3).unwrap();
        for peer in (0..3).filter(|&p| p != rank) {
            ids.push(t.irecv(peer, rbuf.region(peer, 1)).unwrap());
        }
        t.wait_all(&ids).unwrap();
        let mut v = t.buffer(rbuf).unwrap().to_vec();
        v[rank] = rank as u8 + 10;
        v
    });
    for v in got {
        assert_eq!(v, vec![10, 11, 12]);
    }
}

fn closed_peer_is_named(wait: WaitMode) {
    let got = run_world(2, opts(wait), |rank, mut t| {
        let buf = t.alloc_buffer(8).unwrap();
        if rank == 1 {
            drop(t);
            return String::new();
        }
        let err = t.recv(1, buf.prefix(8)).unwrap_err();
        assert_eq!(err.peer(), Some(1));
        err.to_string()
    });
    assert!(got[0].contains("rank 1 closed"), "{}", got[0]);
}

#[test]
fn closed_peer_is_named_polling() {
    closed_peer_is_named(WaitMode::Poll);
}

#[test]
fn closed_peer_is_named_blocking() {
    closed_peer_is_named(WaitMode::Block);
}

fn silent_peer_times_out(wait: WaitMode) {
    let o = TcpOptions {
        timeout: Duration::from_millis(300),
        ..opts(wait)
    };
    let (tx, rx) = mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let got = run_world(2, o, move |rank, mut t| {
        let buf = t.alloc_buffer(8).unwrap();
        if rank == 1 {
            // Stay connected but silent until rank 0 has given up.
            let _ = rx.lock().unwrap().recv();
            return String::new();
        }
        let blocking = t.recv(1, buf.prefix(8)).unwrap_err();
        let id = t.irecv(1, buf.prefix(8)).unwrap();
        let nonblocking = t.wait(id).unwrap_err();
        tx.send(()).unwrap();
        format!("{blocking} / {nonblocking}")
    });
    assert_eq!(
        got[0].matches("rank 1 did not answer").count(),
        2,
        "{}",
        got[0]
    );
}

#[test]
fn silent_peer_times_out_polling() {
    silent_peer_times_out(WaitMode::Poll);
}

#[test]
fn silent_peer_times_out_blocking() {
    silent_peer_times_out(WaitMode::Block);
}

#[test]
fn bad_peer_and_request_are_errors() {
    let got = run_world(2, opts(WaitMode::Poll), |_, mut t| {
        let buf = t.alloc_buffer(8).unwrap();
        let me = t.rank();
        let a = matches!(
            t.send(me, buf.prefix(1)),
            Err(TransportError::NoSuchPeer { .. })
        );
        let b = matches!(
            t.send(5, buf.prefix(1)),
            Err(TransportError::NoSuchPeer { .. })
        );
        let c = matches!(
            t.test(RequestId(999)),
            Err(TransportError::UnknownRequest { .. })
        );
        let d = matches!(
            t.send(1 - me, buf.region(4, 8)),
            Err(TransportError::RegionOutOfBounds { .. })
        );
        a && b && c && d
    });
    assert_eq!(got, vec![true, true]);
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

/// A request that fails gives its bytes back: a pending receive from a rank that
/// closed its end, a pending send to it, and a blocking receive that timed out
/// behind a pending one. Each buffer can then be freed.
fn failed_requests_release_their_holds(wait: WaitMode) {
    const LEN: usize = 4 << 20;
    let o = TcpOptions {
        send_buffer_bytes: Some(16 * 1024),
        recv_buffer_bytes: Some(16 * 1024),
        timeout: Duration::from_millis(300),
        ..opts(wait)
    };
    let (tx, rx) = mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let got = run_world(3, o, move |rank, mut t| {
        if rank == 1 {
            drop(t);
            return true;
        }
        if rank == 2 {
            // Connected but silent until rank 0 is done with it.
            let _ = rx.lock().unwrap().recv();
            return true;
        }
        let rbuf = t.alloc_buffer(8).unwrap();
        let r = t.irecv(1, rbuf.prefix(8)).unwrap();
        let closed = matches!(t.wait(r), Err(TransportError::PeerClosed { peer: 1, .. }));
        let forgotten = matches!(t.test(r), Err(TransportError::UnknownRequest { .. }));
        t.free_buffer(rbuf).unwrap();

        // The send fails in `isend` or in `wait` (when the reset arrives).
        let sbuf = t.alloc_buffer(LEN).unwrap();
        let send_failed = match t.isend(1, sbuf.prefix(LEN)) {
            Err(e) => e.peer() == Some(1),
            Ok(s) => t.wait(s).is_err_and(|e| e.peer() == Some(1)),
        };
        t.free_buffer(sbuf).unwrap();

        // A blocking receive queued behind a pending one gives up after the timeout
        // and takes its request back; the pending one keeps its bytes.
        let buf = t.alloc_buffer(16).unwrap();
        let _pending = t.irecv(2, buf.prefix(8)).unwrap();
        let timed_out = matches!(
            t.recv(2, buf.region(8, 8)),
            Err(TransportError::Timeout { peer: 2, .. })
        );
        let back = t.irecv(2, buf.region(8, 8)).is_ok();
        let still_held = busy(t.irecv(2, buf.region(0, 1))) && busy(t.send(2, buf.region(8, 1)));
        tx.send(()).unwrap();
        closed && forgotten && send_failed && timed_out && back && still_held
    });
    assert_eq!(got, vec![true, true, true]);
}

#[test]
fn failed_requests_release_their_holds_polling() {
    failed_requests_release_their_holds(WaitMode::Poll);
}

#[test]
fn failed_requests_release_their_holds_blocking() {
    failed_requests_release_their_holds(WaitMode::Block);
}

/// Rank 1's control plane, which lets strangers attack rank 0's data listener (whose
/// address it learns from the endpoint exchange) before rank 1 connects itself.
struct Attacked {
    inner: inproc::InprocControl,
    attackers: Vec<std::thread::JoinHandle<Vec<u8>>>,
}

impl Control for Attacked {
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
        let zero: SocketAddr = std::str::from_utf8(&all[0][auth::KEY_LEN..])
            .unwrap()
            .parse()
            .unwrap();
        let attacks: Vec<Vec<u8>> = vec![
            b"\x00\xffgarbage".to_vec(),      // 8 garbage bytes (aborted rank 0)
            Vec::new(),                       // silence (blocked rank 0)
            b"NGT1\x01\x00\x00\x00".to_vec(), // the old unauthenticated hello as rank 1
            [b"NGP1\x01\x00\x00\x00".as_slice(), &[0u8; 48]].concat(), // forged proof
            b"NGP1\x01\x00".to_vec(),         // a stalled half-proof
        ];
        let (tx, rx) = mpsc::channel();
        for bytes in attacks {
            let tx = tx.clone();
            self.attackers.push(std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(zero).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
                let mut greeting = [0u8; auth::GREETING_LEN];
                s.read_exact(&mut greeting).unwrap();
                s.write_all(&bytes).unwrap();
                tx.send(()).unwrap();
                // What the listener tells a stranger after the greeting: nothing.
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got);
                got
            }));
        }
        for _ in 0..self.attackers.len() {
            rx.recv().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        Ok(all)
    }
}

#[test]
fn issue18_strangers_on_the_data_listener_do_not_disturb_the_job() {
    let mut world = inproc::world(2).into_iter();
    let (_, mut c0) = world.next().unwrap();
    let (_, c1) = world.next().unwrap();
    let o = opts(WaitMode::Block);
    let o1 = o.clone();
    let one = std::thread::spawn(move || {
        let mut c1 = Attacked {
            inner: c1,
            attackers: Vec::new(),
        };
        let mut t = TcpTransport::connect(&mut c1, LOOPBACK, &o1).unwrap();
        let b = t.alloc_buffer(4).unwrap();
        t.recv(0, b.prefix(4)).unwrap();
        t.send(0, b.prefix(4)).unwrap();
        let answers: Vec<Vec<u8>> = c1
            .attackers
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        (t.buffer(b).unwrap().to_vec(), answers)
    });
    let started = Instant::now();
    let mut t = TcpTransport::connect(&mut c0, LOOPBACK, &o).unwrap();
    let b = t.alloc_buffer(4).unwrap();
    t.buffer_mut(b).unwrap().copy_from_slice(b"ping");
    t.send(1, b.prefix(4)).unwrap();
    t.recv(1, b.prefix(4)).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a silent stranger delayed the setup: {:?}",
        started.elapsed()
    );
    let (seen, answers) = one.join().unwrap();
    assert_eq!(seen, b"ping");
    assert_eq!(t.buffer(b).unwrap(), b"ping");
    // Strangers got the greeting and nothing else: no answer to a forged proof.
    for a in answers {
        assert!(a.is_empty(), "{a:02x?}");
    }
}
