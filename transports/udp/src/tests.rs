//! In-process tests: ranks are threads, the control plane is `inproc`, the data plane
//! real UDP sockets on loopback; losses are injected with `drop_one_in`. The
//! contract every transport keeps is `ngauge_transport::conformance`'s; here is
//! what is UDP's own: recovery, its counters, the timer, framing, linger.

use super::*;
use ngauge_transport::{conformance, inproc};
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

/// The transport contract, in both wait modes.
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
        let o = UdpOptions {
            timeout: s.timeout,
            ..opts(s.wait)
        };
        conformance::connect_each(s.ranks, move |c| UdpTransport::connect(c, LOOPBACK, &o))
    })
    .assert_passed();
}

/// Every size, and with no loss injected nothing is counted lost or duplicated.
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

/// A silent peer times out, and rank 0, which waits for an answer, asks for it
/// again meanwhile.
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

#[test]
fn connection_ids_come_in_front_of_the_endpoint() {
    assert_eq!(
        split_ids(b"ff,1@127.0.0.1|0,4000", 2),
        Some((vec![0xff, 1], &b"127.0.0.1|0,4000"[..]))
    );
    assert_eq!(split_ids(b"ff@127.0.0.1|0,4000", 2), None);
    assert_eq!(split_ids(b"ff,zz@127.0.0.1|0,4000", 2), None);
    assert_eq!(split_ids(b"127.0.0.1|0,4000", 2), None);
}

/// Datagrams from the peer's own address without the link's connection id, as a
/// stranger forging the peer's source sends them: the magic and `BYE`, data with
/// the next sequence number and the wrong size, random bytes after the magic.
fn forgeries(seq: u32) -> Vec<Vec<u8>> {
    let mut old_bye = b"NU".to_vec();
    old_bye.extend_from_slice(&[crate::wire::FLAG_BYE, 0, 0, 0, 0, 0]);
    let mut next = b"NU\0\0".to_vec();
    next.extend_from_slice(&seq.to_le_bytes());
    next.extend_from_slice(&[0xa5; 12]);
    let mut random = b"NU".to_vec();
    random.extend((0..30u8).map(|i| i.wrapping_mul(97).wrapping_add(seq as u8)));
    let mut bye_wrong_id = old_bye.clone();
    bye_wrong_id.extend_from_slice(&seq.to_le_bytes());
    bye_wrong_id.extend_from_slice(&[1, 2, 3, 4]);
    vec![old_bye, next, random, bye_wrong_id]
}

/// Rank 1 sends forged datagrams from its own socket in front of every answer:
/// rank 0 drops and counts every one, and the exchange completes intact.
fn forged_datagrams_are_dropped_and_counted(wait: WaitMode) {
    let rounds = 20;
    let got = run_world(
        2,
        move |_| opts(wait),
        move |rank, mut t| {
            for &size in &[1usize, 4096] {
                let sbuf = t.alloc_buffer(size).unwrap();
                let rbuf = t.alloc_buffer(size).unwrap();
                for round in 0..rounds {
                    let mine = pattern(size, (rank * 100 + round) as u8);
                    t.buffer_mut(sbuf).unwrap().copy_from_slice(&mine);
                    if rank == 0 {
                        t.send(1, sbuf.prefix(size)).unwrap();
                        t.recv(1, rbuf.prefix(size)).unwrap();
                    } else {
                        t.recv(0, rbuf.prefix(size)).unwrap();
                        let seq = t.peers[0].as_ref().unwrap().next_seq;
                        for bytes in forgeries(seq) {
                            let socket = &t.peers[0].as_ref().unwrap().socket;
                            rustix::net::send(socket, &bytes, rustix::net::SendFlags::empty())
                                .unwrap();
                        }
                        t.send(0, sbuf.prefix(size)).unwrap();
                    }
                    let theirs = pattern(size, ((1 - rank) * 100 + round) as u8);
                    assert_eq!(t.buffers().get(rbuf).unwrap(), &theirs[..], "size {size}");
                }
            }
            t.settle().unwrap();
            counter(&t, "foreign_datagrams")
        },
    );
    assert_eq!(got, vec![2 * rounds as u64 * 4, 0]);
}

#[test]
fn issue38_forged_datagrams_are_dropped_and_counted_polling() {
    forged_datagrams_are_dropped_and_counted(WaitMode::Poll);
}

#[test]
fn issue38_forged_datagrams_are_dropped_and_counted_blocking() {
    forged_datagrams_are_dropped_and_counted(WaitMode::Block);
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

/// RFC 6298 at work: the rank that waits for answers measures its round trip and
/// its RTO becomes what that measurement gives (the estimator's own arithmetic
/// is `rto`'s unit tests'); the answering rank measures nothing and keeps the
/// initial value.
#[test]
fn the_retransmission_timeout_follows_the_measured_round_trip() {
    let initial = Duration::from_millis(500);
    let got = run_world(
        2,
        move |_| UdpOptions {
            retransmit_after: initial,
            ..opts(WaitMode::Poll)
        },
        |rank, mut t| {
            assert!(pingpong(&mut t, rank, &[1], 200));
            let p = t.peers[1 - rank].as_ref().unwrap();
            (
                p.rto.get(),
                p.rto.srtt(),
                crate::rto::tests::follows_its_estimate(&p.rto),
            )
        },
    );
    let (rto, srtt, follows) = got[0];
    srtt.expect("the pinging rank measured its round trip");
    assert!(follows, "{rto:?} is not what SRTT {srtt:?} gives");
    assert_eq!(got[1], (initial, None, false));
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

/// The fast path (`fast`) hands a wait it cannot finish to `recv_direct` without
/// losing what it saw: an answer that comes after the socket timeout expired
/// (block mode: the expiry counts, and the RTO probe goes out at once instead of
/// after a second coarse wait) or after the fast path's empty polls (poll mode).
fn late_answer_through_the_fast_path(wait: WaitMode) {
    // Longer than one coarse wait (block) but shorter than two (so that a wait
    // handed over as if nothing had expired would see no timeout), and longer than
    // the fast path's spins (poll).
    let delay = crate::datagram::COARSE_FLOOR * 3 / 2;
    let got = run_world(
        2,
        |_| opts(wait),
        move |rank, mut t| {
            let sbuf = t.alloc_buffer(4).unwrap();
            let rbuf = t.alloc_buffer(4).unwrap();
            let mut ok = true;
            let mut timeouts_while_late = 0;
            for round in 0..40u8 {
                let late = round == 30;
                if rank == 0 {
                    if late {
                        // No round trip to time: the fast path's (the RTO was
                        // measured in the rounds before, and the last timed one
                        // armed the socket timeout for it).
                        t.peers[1].as_mut().unwrap().unsampled = 0;
                    }
                    let before = counter(&t, "receive_timeouts");
                    t.buffer_mut(sbuf).unwrap().fill(round);
                    t.send(1, sbuf.prefix(4)).unwrap();
                    t.recv(1, rbuf.prefix(4)).unwrap();
                    if late {
                        timeouts_while_late = counter(&t, "receive_timeouts") - before;
                    }
                } else {
                    if late {
                        std::thread::sleep(delay);
                    }
                    t.recv(0, rbuf.prefix(4)).unwrap();
                    t.buffer_mut(sbuf).unwrap().fill(round.wrapping_add(100));
                    t.send(0, sbuf.prefix(4)).unwrap();
                }
                let theirs = if rank == 0 {
                    round.wrapping_add(100)
                } else {
                    round
                };
                ok &= t.buffer(rbuf).unwrap() == [theirs; 4];
            }
            t.settle().unwrap();
            (ok, timeouts_while_late, counter(&t, "duplicated_datagrams"))
        },
    );
    assert!(got.iter().all(|g| g.0), "payload damaged: {got:?}");
    // The late answer made rank 0's RTO expire (a coarse wait of COARSE_FLOOR in
    // block mode, handed over as expired), and its probe reached rank 1.
    assert!(got[0].1 >= 1, "{got:?}");
    assert!(got[1].2 >= 1, "{got:?}");
}

#[test]
fn late_answer_through_the_fast_path_blocking() {
    late_answer_through_the_fast_path(WaitMode::Block);
}

#[test]
fn late_answer_through_the_fast_path_polling() {
    late_answer_through_the_fast_path(WaitMode::Poll);
}
