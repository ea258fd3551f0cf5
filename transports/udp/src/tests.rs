//! In-process tests: ranks are threads, the control plane is `inproc`, the data plane
//! real UDP sockets on loopback; losses are injected with `drop_one_in`.

use super::*;
use ngauge_transport::inproc;
use std::net::Ipv4Addr;
use std::sync::{mpsc, Arc, Mutex};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn opts(wait: WaitMode) -> UdpOptions {
    UdpOptions {
        wait,
        timeout: Duration::from_secs(10),
        retransmit_after: Duration::from_millis(5),
        ..UdpOptions::default()
    }
}

/// Runs `body(rank, transport)` on `n` threads with per-rank options.
fn run_world<R: Send + 'static>(
    n: usize,
    opts: impl Fn(Rank) -> UdpOptions,
    body: impl Fn(Rank, UdpTransport) -> R + Send + Sync + Clone + 'static,
) -> Vec<R> {
    let handles: Vec<_> = inproc::world(n)
        .into_iter()
        .enumerate()
        .map(|(rank, (_, mut control))| {
            let body = body.clone();
            let o = opts(rank);
            std::thread::spawn(move || {
                let t = UdpTransport::connect(&mut control, LOOPBACK, &o).unwrap();
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

/// Fixes every peer's retransmission timeout at `rto` (samples ignored), for tests
/// whose injected losses a spurious retransmission on a loaded machine would shift.
fn pin_rto(t: &mut UdpTransport, rto: Duration) {
    for p in t.peers.iter_mut().flatten() {
        p.rto = Rto::pinned(rto);
    }
}

fn counter(t: &UdpTransport, name: &str) -> u64 {
    t.counters()
        .entries
        .iter()
        .find(|(n, _)| *n == name)
        .map(|e| e.1)
        .unwrap()
}

/// `rounds` round trips per size, payloads checked each time.
fn pingpong(t: &mut UdpTransport, rank: Rank, sizes: &[usize], rounds: usize) -> bool {
    let max = *sizes.iter().max().unwrap();
    let sbuf = t.alloc_buffer(max).unwrap();
    let rbuf = t.alloc_buffer(max).unwrap();
    let mut ok = true;
    for &size in sizes {
        for round in 0..rounds {
            let mine = pattern(size, (rank * 100 + round) as u8);
            t.buffer_mut(sbuf).unwrap()[..size].copy_from_slice(&mine);
            let theirs = pattern(size, ((1 - rank) * 100 + round) as u8);
            if rank == 0 {
                t.send(1, sbuf.prefix(size)).unwrap();
                t.recv(1, rbuf.prefix(size)).unwrap();
            } else {
                t.recv(0, rbuf.prefix(size)).unwrap();
                t.send(0, sbuf.prefix(size)).unwrap();
            }
            ok &= t.buffer(rbuf).unwrap()[..size] == theirs[..];
        }
    }
    ok
}

fn pingpong_sizes(wait: WaitMode) {
    let got = run_world(
        2,
        |_| opts(wait),
        |rank, mut t| {
            // A long RTO: no spurious retransmission even on a loaded machine.
            pin_rto(&mut t, Duration::from_secs(2));
            let max = t.capabilities().max_message_bytes.unwrap();
            let ok = pingpong(&mut t, rank, &[0, 1, 1000, 32768, max], 3);
            ok && counter(&t, "lost_datagrams") == 0 && counter(&t, "duplicated_datagrams") == 0
        },
    );
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

#[test]
fn too_large_names_the_limit_and_mismatch_names_the_sizes() {
    let got = run_world(
        2,
        |_| opts(WaitMode::Poll),
        |rank, mut t| {
            let buf = t.alloc_buffer(70_000).unwrap();
            let too_large = t
                .send(1 - rank, buf.prefix(65_500))
                .unwrap_err()
                .to_string();
            let mismatch = if rank == 0 {
                t.send(1, buf.prefix(10)).unwrap();
                String::new()
            } else {
                t.recv(0, buf.prefix(20)).unwrap_err().to_string()
            };
            (too_large, mismatch)
        },
    );
    assert!(
        got[0]
            .0
            .contains("65500 bytes exceeds the limit of 65499 bytes"),
        "{}",
        got[0].0
    );
    assert!(
        got[1]
            .1
            .contains("rank 0 sent 10 bytes where 20 were posted"),
        "{}",
        got[1].1
    );
}

/// Every third datagram of each rank is dropped: every round trip still completes
/// with the right payload, and the loss shows in the counters.
fn recovers_from_loss(wait: WaitMode) {
    let got = run_world(
        2,
        |_| UdpOptions {
            drop_one_in: Some(3),
            ..opts(wait)
        },
        |rank, mut t| {
            let ok = pingpong(&mut t, rank, &[1, 1000], 30);
            (
                ok,
                counter(&t, "lost_datagrams"),
                counter(&t, "test_dropped_datagrams"),
                counter(&t, "retransmissions"),
            )
        },
    );
    assert!(got.iter().all(|g| g.0), "payload damaged: {got:?}");
    let lost: u64 = got.iter().map(|g| g.1).sum();
    let dropped: u64 = got.iter().map(|g| g.2).sum();
    let retransmitted: u64 = got.iter().map(|g| g.3).sum();
    assert!(dropped >= 20, "{got:?}");
    // Every lost message costs at least one drop; drops of spurious retransmissions
    // (a loaded machine stalls a thread past the 5 ms RTO) cost none.
    assert!(lost >= 1 && lost <= dropped, "{got:?}");
    assert!(retransmitted >= lost, "{got:?}");
}

#[test]
fn recovers_from_loss_polling() {
    recovers_from_loss(WaitMode::Poll);
}

#[test]
fn recovers_from_loss_blocking() {
    recovers_from_loss(WaitMode::Block);
}

/// Rank 0's second datagram is dropped, and rank 0 receives the answer into the very
/// buffer it sent from: the retransmission must still carry the original bytes.
#[test]
fn retransmission_sends_the_original_bytes_after_the_buffer_changed() {
    let got = run_world(
        2,
        |rank| UdpOptions {
            drop_one_in: (rank == 0).then_some(2),
            ..opts(WaitMode::Poll)
        },
        |rank, mut t| {
            // Long enough that no retransmission happens but the needed one.
            pin_rto(&mut t, Duration::from_millis(300));
            let buf = t.alloc_buffer(100).unwrap();
            let mut seen = Vec::new();
            for round in 0..2u8 {
                if rank == 0 {
                    t.buffer_mut(buf)
                        .unwrap()
                        .copy_from_slice(&pattern(100, round));
                    t.send(1, buf.prefix(100)).unwrap();
                    t.recv(1, buf.prefix(100)).unwrap();
                } else {
                    t.recv(0, buf.prefix(100)).unwrap();
                    seen.push(t.buffer(buf).unwrap().to_vec());
                    t.buffer_mut(buf).unwrap().fill(0xee);
                    t.send(0, buf.prefix(100)).unwrap();
                }
            }
            (
                seen,
                counter(&t, "lost_datagrams"),
                counter(&t, "retransmissions"),
            )
        },
    );
    assert_eq!(got[1].0, vec![pattern(100, 0), pattern(100, 1)]);
    // A slow thread may cause a spurious retransmission (counted as lost too when
    // its copy arrives first): only "at least the dropped one" is certain.
    let lost: u64 = got.iter().map(|g| g.1).sum();
    let retransmissions: u64 = got.iter().map(|g| g.2).sum();
    assert!(lost >= 1, "{lost}");
    assert!(retransmissions >= lost, "{retransmissions} < {lost}");
}

fn closed_peer_is_named(wait: WaitMode) {
    let got = run_world(
        2,
        |_| opts(wait),
        |rank, mut t| {
            let buf = t.alloc_buffer(8).unwrap();
            if rank == 1 {
                drop(t);
                return String::new();
            }
            // Give rank 1 time to close its sockets.
            std::thread::sleep(Duration::from_millis(50));
            let err = match t.send(1, buf.prefix(8)) {
                Err(e) => e,
                Ok(()) => t.recv(1, buf.prefix(8)).unwrap_err(),
            };
            assert_eq!(err.peer(), Some(1));
            err.to_string()
        },
    );
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

/// Rank 1 drops its transport (says `BYE`) while rank 0 waits for a message from it:
/// rank 0's receive ends with `PeerClosed` naming rank 1, not after the timeout.
fn bye_ends_a_pending_receive(wait: WaitMode) {
    let got = run_world(
        2,
        |_| UdpOptions {
            timeout: Duration::from_secs(5),
            ..opts(wait)
        },
        |rank, mut t| {
            if rank == 1 {
                drop(t);
                return None;
            }
            let buf = t.alloc_buffer(8).unwrap();
            Some(t.recv(1, buf.prefix(8)).unwrap_err())
        },
    );
    assert!(
        matches!(
            got[0],
            Some(TransportError::PeerClosed {
                peer: 1,
                op: "recv",
                ..
            })
        ),
        "{:?}",
        got[0]
    );
}

#[test]
fn bye_ends_a_pending_receive_polling() {
    bye_ends_a_pending_receive(WaitMode::Poll);
}

#[test]
fn bye_ends_a_pending_receive_blocking() {
    bye_ends_a_pending_receive(WaitMode::Block);
}

fn silent_peer_times_out(wait: WaitMode) {
    let (tx, rx) = mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let got = run_world(
        2,
        |_| UdpOptions {
            timeout: Duration::from_millis(300),
            ..opts(wait)
        },
        move |rank, mut t| {
            let buf = t.alloc_buffer(8).unwrap();
            if rank == 1 {
                let _ = rx.lock().unwrap().recv();
                return (String::new(), 0);
            }
            t.send(1, buf.prefix(8)).unwrap();
            let blocking = t.recv(1, buf.prefix(8)).unwrap_err();
            let id = t.irecv(1, buf.prefix(8)).unwrap();
            let nonblocking = t.wait(id).unwrap_err();
            tx.send(()).unwrap();
            (
                format!("{blocking} / {nonblocking}"),
                counter(&t, "receive_timeouts"),
            )
        },
    );
    assert_eq!(
        got[0].0.matches("rank 1 did not answer").count(),
        2,
        "{}",
        got[0].0
    );
    assert!(got[0].1 >= 2, "rank 0 retransmitted while waiting");
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
fn three_ranks_exchange_nonblocking() {
    let got = run_world(
        3,
        |_| opts(WaitMode::Block),
        |rank, mut t| {
            let buf = t.alloc_buffer(3).unwrap();
            t.buffer_mut(buf).unwrap()[rank] = rank as u8 + 10;
            let rbuf = t.alloc_buffer(3).unwrap();
            let mut ids = Vec::new();
            for peer in (0..3).filter(|&p| p != rank) {
                ids.push(t.irecv(peer, rbuf.region(peer, 1)).unwrap());
            }
            for peer in (0..3).filter(|&p| p != rank) {
                ids.push(t.isend(peer, buf.region(rank, 1)).unwrap());
            }
            t.wait_all(&ids).unwrap();
            let mut v = t.buffer(rbuf).unwrap().to_vec();
            v[rank] = rank as u8 + 10;
            v
        },
    );
    for v in got {
        assert_eq!(v, vec![10, 11, 12]);
    }
}

/// Large messages go out and come in framed, the header in the bytes in front of
/// the region (datagram.rs `SMALL_BYTES`): inside a buffer those bytes are the
/// caller's, and they stay as they were, around blocking and pending operations.
fn framed_messages_keep_the_bytes_in_front(wait: WaitMode) {
    const LEN: usize = 3 * SMALL_BYTES;
    let got = run_world(
        2,
        |_| opts(wait),
        |rank, mut t| {
            pin_rto(&mut t, Duration::from_secs(2));
            let peer = 1 - rank;
            let total = 3 + 2 * LEN;
            let sbuf = t.alloc_buffer(total).unwrap();
            let rbuf = t.alloc_buffer(total).unwrap();
            let before_send = pattern(total, 7 + rank as u8);
            let before_recv = pattern(total, 50 + rank as u8);
            t.buffer_mut(sbuf).unwrap().copy_from_slice(&before_send);
            t.buffer_mut(rbuf).unwrap().copy_from_slice(&before_recv);
            // Two messages each way: one at offset 3 (a blocking send and receive),
            // then one right behind it (pending ones), whose bytes in front are the
            // first message's.
            let first = |b: BufferId| b.region(3, LEN);
            let second = |b: BufferId| b.region(3 + LEN, LEN);
            if rank == 0 {
                t.send(peer, first(sbuf)).unwrap();
                t.recv(peer, first(rbuf)).unwrap();
            } else {
                t.recv(peer, first(rbuf)).unwrap();
                t.send(peer, first(sbuf)).unwrap();
            }
            let r = t.irecv(peer, second(rbuf)).unwrap();
            let s = t.isend(peer, second(sbuf)).unwrap();
            t.wait_all(&[r, s]).unwrap();
            let theirs = pattern(total, 7 + peer as u8);
            let mut expected = before_recv.clone();
            expected[3..].copy_from_slice(&theirs[3..]);
            (
                t.buffer(sbuf).unwrap() == &before_send[..],
                t.buffer(rbuf).unwrap() == &expected[..],
            )
        },
    );
    assert_eq!(
        got,
        vec![(true, true), (true, true)],
        "(sent buffer unchanged, received as expected)"
    );
}

#[test]
fn framed_messages_keep_the_bytes_in_front_polling() {
    framed_messages_keep_the_bytes_in_front(WaitMode::Poll);
}

#[test]
fn framed_messages_keep_the_bytes_in_front_blocking() {
    framed_messages_keep_the_bytes_in_front(WaitMode::Block);
}

#[test]
fn endpoint_parsing_rejects_garbage() {
    assert_eq!(
        parse_endpoint(b"127.0.0.1|0,4000", 2),
        Some((LOOPBACK, vec![0, 4000]))
    );
    assert_eq!(parse_endpoint(b"127.0.0.1|0,4000", 3), None);
    assert_eq!(parse_endpoint(b"127.0.0.1|0,99999", 2), None);
    assert_eq!(parse_endpoint(b"nonsense", 1), None);
}

/// Rank 1's last answer is lost and rank 1 has already finished: its dropped
/// transport lingers and sends the answer again when rank 0 probes or asks.
fn last_answer_lost_after_the_peer_finished(wait: WaitMode) {
    let rounds = 5;
    let got = run_world(
        2,
        move |rank| UdpOptions {
            drop_one_in: (rank == 1).then_some(rounds as u64),
            ..opts(wait)
        },
        move |rank, mut t| {
            // No spurious retransmission may shift which datagram is dropped.
            pin_rto(&mut t, Duration::from_millis(100));
            let ok = pingpong(&mut t, rank, &[100], rounds);
            let lost = counter(&t, "lost_datagrams");
            // A probe (the last ping again), or a request after rank 1's BYE.
            let asked = counter(&t, "retransmissions") + counter(&t, "resend_requests");
            drop(t);
            (ok, lost, asked)
        },
    );
    assert!(got.iter().all(|g| g.0), "{got:?}");
    assert_eq!(got[0].1, 1, "the answer arrives as a copy: {got:?}");
    assert!(got[0].2 >= 1, "{got:?}");
}

#[test]
fn last_answer_lost_after_the_peer_finished_polling() {
    last_answer_lost_after_the_peer_finished(WaitMode::Poll);
}

#[test]
fn last_answer_lost_after_the_peer_finished_blocking() {
    last_answer_lost_after_the_peer_finished(WaitMode::Block);
}

fn busy<T>(r: Result<T, TransportError>) -> bool {
    matches!(r, Err(TransportError::BufferBusy { .. }))
}

/// A pending receive holds exactly its bytes: no other receive (pending or
/// blocking, from any peer) and no send may touch them, while disjoint regions of
/// the same buffer stay usable. Ranks 1 and 2 send only once rank 0 has checked.
#[test]
fn pending_receives_hold_exactly_their_bytes() {
    let (tx, rx) = mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let got = run_world(
        3,
        |_| opts(WaitMode::Poll),
        move |rank, mut t| {
            let buf = t.alloc_buffer(32).unwrap();
            if rank != 0 {
                let _ = rx.lock().unwrap().recv();
                t.buffer_mut(buf)
                    .unwrap()
                    .copy_from_slice(&pattern(32, rank as u8));
                t.send(0, buf.prefix(8)).unwrap();
                if rank == 1 {
                    t.recv(0, buf.region(16, 1)).unwrap();
                }
                return Vec::new();
            }
            let r2 = t.irecv(2, buf.region(0, 8)).unwrap();
            let mut refused = vec![
                // Overlapping pending receives, from another peer or the same one.
                busy(t.irecv(1, buf.region(4, 8))),
                busy(t.irecv(2, buf.region(7, 1))),
                // A blocking receive from a peer with nothing pending (the direct
                // path) into those bytes.
                busy(t.recv(1, buf.region(4, 4))),
                // Sends from them, blocking or not.
                busy(t.send(1, buf.region(7, 2))),
                busy(t.isend(1, buf.region(0, 1))),
            ];
            // Disjoint regions of the same buffer are accepted.
            let r1 = t.irecv(1, buf.region(8, 8)).unwrap();
            t.send(1, buf.region(16, 1)).unwrap();
            refused.push(busy(t.buffer(buf)));
            refused.push(busy(t.free_buffer(buf)));
            tx.send(()).unwrap();
            tx.send(()).unwrap();
            t.wait_all(&[r1, r2]).unwrap();
            // Completed receives released their holds.
            let bytes = t.buffer(buf).unwrap();
            refused.push(bytes[..8] == pattern(8, 2)[..] && bytes[8..16] == pattern(8, 1)[..]);
            t.free_buffer(buf).unwrap();
            refused
        },
    );
    assert!(got[0].iter().all(|&r| r), "{:?}", got[0]);
}

/// A receive that fails gives its bytes back: a pending one that got a datagram of
/// the wrong size, and a blocking one queued behind a pending one that timed out.
fn failed_receives_release_their_holds(wait: WaitMode) {
    let (tx, rx) = mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let got = run_world(
        2,
        |_| UdpOptions {
            timeout: Duration::from_millis(300),
            ..opts(wait)
        },
        move |rank, mut t| {
            let buf = t.alloc_buffer(20).unwrap();
            if rank == 1 {
                t.send(0, buf.prefix(10)).unwrap();
                // Then silent until rank 0 is done.
                let _ = rx.lock().unwrap().recv();
                return true;
            }
            let id = t.irecv(1, buf.prefix(20)).unwrap();
            let mismatch = matches!(t.wait(id), Err(TransportError::SizeMismatch { .. }));
            let forgotten = matches!(t.test(id), Err(TransportError::UnknownRequest { .. }));
            let free = t.buffer(buf).is_ok();

            let _pending = t.irecv(1, buf.prefix(8)).unwrap();
            let timed_out = matches!(
                t.recv(1, buf.region(8, 8)),
                Err(TransportError::Timeout { peer: 1, .. })
            );
            // The blocking receive took its request back; the pending one did not.
            let back = t.irecv(1, buf.region(8, 8)).is_ok();
            let still_held = busy(t.irecv(1, buf.region(0, 1)));
            tx.send(()).unwrap();
            mismatch && forgotten && free && timed_out && back && still_held
        },
    );
    assert_eq!(got, vec![true, true]);
}

#[test]
fn failed_receives_release_their_holds_polling() {
    failed_receives_release_their_holds(WaitMode::Poll);
}

#[test]
fn failed_receives_release_their_holds_blocking() {
    failed_receives_release_their_holds(WaitMode::Block);
}

/// Issue 18: a PRTT(n)-like stream (n messages, one answer) loses messages in its
/// middle. Before go-back-N the next message filled the receive of the lost one,
/// the server waited for an n-th that never came and both ranks timed out; now
/// every message lands in its own receive, intact, and the loss is counted.
fn stream_survives_a_lost_middle_message(wait: WaitMode) {
    let (n, rounds, size) = (10, 30, 64);
    let got = run_world(
        2,
        |rank| UdpOptions {
            // The client's 7th, 14th, ... datagram: mostly messages inside a stream.
            drop_one_in: (rank == 0).then_some(7),
            ..opts(wait)
        },
        move |rank, mut t| {
            let tx = t.alloc_buffer(size).unwrap();
            let rx = t.alloc_buffer(size).unwrap();
            let mut intact = true;
            for round in 0..rounds {
                if rank == 0 {
                    for i in 0..n {
                        let seed = (round * n + i) as u8;
                        t.buffer_mut(tx)
                            .unwrap()
                            .copy_from_slice(&pattern(size, seed));
                        t.send(1, tx.prefix(size)).unwrap();
                    }
                    t.recv(1, rx.prefix(size)).unwrap();
                    intact &= t.buffer(rx).unwrap() == pattern(size, round as u8);
                } else {
                    for i in 0..n {
                        t.recv(0, rx.prefix(size)).unwrap();
                        let seed = (round * n + i) as u8;
                        intact &= t.buffer(rx).unwrap() == pattern(size, seed);
                    }
                    t.buffer_mut(tx)
                        .unwrap()
                        .copy_from_slice(&pattern(size, round as u8));
                    t.send(0, tx.prefix(size)).unwrap();
                }
            }
            (
                intact,
                counter(&t, "lost_datagrams"),
                counter(&t, "out_of_order_datagrams"),
                counter(&t, "resend_requests"),
                if rank == 0 {
                    counter(&t, "test_dropped_datagrams")
                } else {
                    0
                },
            )
        },
    );
    assert!(
        got.iter().all(|g| g.0),
        "a message landed in the wrong receive: {got:?}"
    );
    let (lost, early, asked, dropped) = (got[1].1, got[1].2, got[1].3, got[0].4);
    assert!(dropped >= (n * rounds / 7) as u64, "{got:?}");
    assert!(lost >= 1 && lost <= dropped, "{got:?}");
    // A loss inside a stream shows as the early arrivals after it, and is asked for.
    assert!(early >= 1 && asked >= 1, "{got:?}");
}

#[test]
fn stream_survives_a_lost_middle_message_polling() {
    stream_survives_a_lost_middle_message(WaitMode::Poll);
}

#[test]
fn stream_survives_a_lost_middle_message_blocking() {
    stream_survives_a_lost_middle_message(WaitMode::Block);
}

/// RFC 6298 at work: over loopback the measured round trip is far below the
/// initial 500 ms, and the RTO follows it down (to its floor or near it).
#[test]
fn the_retransmission_timeout_follows_the_measured_round_trip() {
    let got = run_world(
        2,
        |_| UdpOptions {
            retransmit_after: Duration::from_millis(500),
            ..opts(WaitMode::Poll)
        },
        |rank, mut t| {
            assert!(pingpong(&mut t, rank, &[1], 200));
            let p = t.peers[1 - rank].as_ref().unwrap();
            (p.rto.get(), p.rto.srtt())
        },
    );
    let (rto, srtt) = got[0];
    let srtt = srtt.expect("the pinging rank measured its round trip");
    assert!(srtt < Duration::from_millis(100), "{srtt:?}");
    assert!(
        rto < Duration::from_millis(250),
        "{rto:?} with SRTT {srtt:?}"
    );
    // The answering rank never waits for an answer: it keeps its initial value.
    assert_eq!(got[1], (Duration::from_millis(500), None));
}

/// `settle` (issue 18): rank 1's final answer is lost, and rank 1 then blocks on
/// something else that waits for rank 0 (here a channel, in ngauge the control
/// channel). Without settle both wait until the timeout; with it rank 1 probes and
/// answers until rank 0 has the answer and acknowledges it.
#[test]
fn settle_delivers_a_lost_final_answer_before_its_sender_blocks_elsewhere() {
    let rounds = 5;
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let done_rx = Arc::new(Mutex::new(done_rx));
    let got = run_world(
        2,
        move |rank| UdpOptions {
            drop_one_in: (rank == 1).then_some(rounds as u64),
            timeout: Duration::from_secs(5),
            ..opts(WaitMode::Poll)
        },
        move |rank, mut t| {
            pin_rto(&mut t, Duration::from_millis(200));
            let ok = pingpong(&mut t, rank, &[100], rounds);
            t.settle().unwrap();
            if rank == 0 {
                done_tx.send(()).unwrap();
            } else {
                done_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10))
                    .expect("rank 0 finished");
            }
            (
                ok,
                counter(&t, "lost_datagrams"),
                t.peers[1 - rank].as_ref().unwrap().window.len(),
            )
        },
    );
    assert!(got.iter().all(|g| g.0), "{got:?}");
    assert_eq!(got[0].1, 1, "the final answer arrived as a copy: {got:?}");
    // Both settled: nothing either sent is unacknowledged.
    assert_eq!((got[0].2, got[1].2), (0, 0), "{got:?}");
}

/// Issue 19: in block mode the wait for an answer blocks in `recv` with the RTO
/// (rounded up to whole milliseconds) as `SO_RCVTIMEO`, one system call, as long
/// as nothing was lost; a sign of loss turns the next `PRECISE_WAITS` waits into
/// precise `ppoll` sleeps, and recovery still delivers every payload intact.
#[test]
fn blocking_waits_for_the_rto_precisely_only_after_a_sign_of_loss() {
    use crate::datagram::{coarse, COARSE_FLOOR, PRECISE_WAITS};
    // A coarse wait never sleeps less than the floor, and beyond it whole
    // milliseconds.
    assert_eq!(coarse(Duration::from_micros(200)), COARSE_FLOOR);
    assert_eq!(coarse(Duration::from_millis(1)), COARSE_FLOOR);
    assert_eq!(
        coarse(COARSE_FLOOR + Duration::from_micros(1)),
        COARSE_FLOOR + Duration::from_millis(1)
    );

    let rto = Duration::from_millis(40);
    let lossless = run_world(
        2,
        |_| opts(WaitMode::Block),
        move |rank, mut t| {
            pin_rto(&mut t, rto);
            let ok = pingpong(&mut t, rank, &[1, 1000], 20);
            let p = t.peers[1 - rank].as_ref().unwrap();
            (
                ok,
                p.precise_waits,
                p.socket_timeout,
                counter(&t, "receive_timeouts"),
            )
        },
    );
    assert!(
        lossless.iter().all(|g| g.0),
        "payload damaged: {lossless:?}"
    );
    // Rank 0 waits for answers: SO_RCVTIMEO is the RTO, raised to the floor. Only
    // a wait that expired (a thread stalled for 100 ms on a loaded machine) may
    // have turned it precise.
    let (_, precise, socket_timeout, timeouts) = lossless[0];
    assert_eq!(socket_timeout, Some(coarse(rto)), "{lossless:?}");
    assert_eq!(socket_timeout, Some(COARSE_FLOOR), "{lossless:?}");
    assert!(precise == 0 || timeouts > 0, "{lossless:?}");
    // Rank 1 waits for requests: SO_RCVTIMEO is the peer timeout.
    assert_eq!(lossless[1].2, Some(Duration::from_secs(10)), "{lossless:?}");

    let lossy = run_world(
        2,
        |_| UdpOptions {
            drop_one_in: Some(3),
            ..opts(WaitMode::Block)
        },
        |rank, mut t| {
            let ok = pingpong(&mut t, rank, &[1, 1000], 30);
            let p = t.peers[1 - rank].as_ref().unwrap();
            (ok, p.precise_waits, counter(&t, "receive_timeouts"))
        },
    );
    assert!(lossy.iter().all(|g| g.0), "payload damaged: {lossy:?}");
    // Rank 0 timed out at least once (a lost request or answer), which made its
    // waits precise; 60 round trips do not use up PRECISE_WAITS.
    assert!(lossy[0].2 >= 1, "{lossy:?}");
    assert!(lossy[0].1 > 0 && lossy[0].1 <= PRECISE_WAITS, "{lossy:?}");
}
