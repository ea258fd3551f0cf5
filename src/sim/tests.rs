//! The threaded world against the LogGP rules, message by message.

use super::*;
use ngauge_transport::{Control, Transport, TransportError};

const US: u64 = 1_000_000;

const EAGER: LogGp = LogGp {
    l_ps: 5 * US,
    os_ps: US,
    or_ps: 2 * US,
    g_ps: 3 * US,
    big_g_fs: 1_000_000,
    rendezvous: false,
    send_overlap_ps: 0,
    recv_overlap_ps: 0,
    big_o_fs: 0,
};

const RENDEZVOUS: LogGp = LogGp {
    rendezvous: true,
    ..EAGER
};

/// `p` ranks on `net`, 1 tick per ps, free reads, a control plane without time.
fn spec(net: Network, p: usize) -> WorldSpec {
    WorldSpec {
        network: net,
        clocks: vec![
            RankClock {
                map: TickMap {
                    offset: 0,
                    ticks: 1,
                    per_ps: 1,
                },
                skew: None,
            };
            p
        ],
        start: Ps(0),
        read_cost: Ps(0),
        quantum: Quantum::PS,
        control_latency: None,
    }
}

/// The transport contract, over a network that costs nothing (the times are
/// the other tests'): a `test` then never waits for virtual time to pass.
#[test]
fn keeps_the_transport_contract() {
    use ngauge_transport::conformance;
    let free = LogGp {
        l_ps: 0,
        os_ps: 0,
        or_ps: 0,
        g_ps: 0,
        big_g_fs: 0,
        rendezvous: false,
        send_overlap_ps: 0,
        recv_overlap_ps: 0,
        big_o_fs: 0,
    };
    let profile = conformance::Profile {
        modes: vec![ngauge_transport::WaitMode::Block],
        timeout: std::time::Duration::from_secs(10),
        short_timeout: None,
        timeouts_keep_requests: false,
        reports_closed_peers: true,
    };
    conformance::run_threads(&profile, |s| {
        let ranks = world(&spec(Network::uniform(free), s.ranks));
        conformance::ready(
            ranks
                .into_iter()
                .map(|r| (r.transport, r.control))
                .collect(),
        )
    })
    .assert_passed();
}

#[test]
fn an_eager_message_takes_o_s_l_transfer_o_r() {
    let times = run(&spec(Network::uniform(EAGER), 2), |mut r| {
        let buf = r.transport.alloc_buffer(1001).unwrap();
        r.transport.buffer_mut(buf).unwrap()[1000] = 42;
        if r.transport.rank() == 0 {
            r.transport.send(1, buf.prefix(1001)).unwrap();
        } else {
            r.transport.recv(0, buf.prefix(1001)).unwrap();
            assert_eq!(r.transport.buffer(buf).unwrap()[1000], 42, "bytes move");
        }
        r.clock.true_time()
    });
    assert_eq!(times[0], Ps(US), "the sender is back after o_s");
    assert_eq!(
        times[1],
        Ps(US + US + 5 * US + 2 * US),
        "o_s + 1000 G + L + o_r"
    );
}

#[test]
fn back_to_back_sends_are_paced_by_the_gap() {
    let arrivals = run(&spec(Network::uniform(EAGER), 2), |mut r| {
        let buf = r.transport.alloc_buffer(1).unwrap();
        let mut out = Vec::new();
        for _ in 0..3 {
            if r.transport.rank() == 0 {
                r.transport.send(1, buf.prefix(1)).unwrap();
            } else {
                r.transport.recv(0, buf.prefix(1)).unwrap();
            }
            out.push(r.clock.true_time().0 / US);
        }
        out
    });
    // Sends return after o_s = 1 us each; the interface lets them out 3 us apart:
    // at 1, 4, 7 us, in at 6, 9, 12, received o_r = 2 us later.
    assert_eq!(arrivals[0], vec![1, 2, 3]);
    assert_eq!(arrivals[1], vec![8, 11, 14]);
}

#[test]
fn a_rendezvous_send_waits_for_the_receive() {
    let times = run(&spec(Network::uniform(RENDEZVOUS), 2), |mut r| {
        let buf = r.transport.alloc_buffer(1).unwrap();
        if r.transport.rank() == 0 {
            r.transport.send(1, buf.prefix(1)).unwrap();
        } else {
            r.clock.advance_ns(20_000.0); // posts its receive at 20 us
            r.transport.recv(0, buf.prefix(1)).unwrap();
        }
        r.clock.true_time().0 / US
    });
    // Request at 1 + 5 = 6 us; answered at 20, clear at 25: the data leaves at 25
    // (the send returns), arrives at 30, received at 32.
    assert_eq!(times, vec![25, 32]);
}

#[test]
fn crossing_rendezvous_sends_progress_between_posted_receives() {
    // A ring of three: every rank posts its receive, then sends (blocking) to the
    // next. Each clear-to-send is answered while its rank is blocked in its own send.
    let times = run(&spec(Network::uniform(RENDEZVOUS), 3), |mut r| {
        let (me, p) = (r.transport.rank(), 3);
        let (tx, rx) = (
            r.transport.alloc_buffer(8).unwrap(),
            r.transport.alloc_buffer(8).unwrap(),
        );
        r.transport.buffer_mut(tx).unwrap().fill(me as u8);
        let request = r.transport.irecv((me + p - 1) % p, rx.prefix(8)).unwrap();
        r.transport.send((me + 1) % p, tx.prefix(8)).unwrap();
        r.transport.wait(request).unwrap();
        assert_eq!(r.transport.buffer(rx).unwrap()[0], ((me + p - 1) % p) as u8);
        r.clock.true_time()
    });
    // Request at o_s + L = 6 us, clear-to-send 5 us later (the receive was posted
    // at 0), data leaves at 11 us, 7 G later plus L it is in, o_r on top.
    assert_eq!(times, vec![Ps(11 * US + 7_000 + 5 * US + 2 * US); 3]);
}

#[test]
fn a_message_sent_before_its_receive_is_posted_waits_for_it() {
    let times = run(&spec(Network::uniform(EAGER), 2), |mut r| {
        let buf = r.transport.alloc_buffer(1).unwrap();
        if r.transport.rank() == 0 {
            r.transport.send(1, buf.prefix(1)).unwrap();
            r.control.barrier().unwrap();
        } else {
            r.control.barrier().unwrap(); // the frame is surely here in real time
            r.clock.advance_ns(100_000.0);
            r.transport.recv(0, buf.prefix(1)).unwrap();
        }
        r.clock.true_time().0 / US
    });
    assert_eq!(times, vec![1, 102], "received at 100 us plus o_r");
}

#[test]
fn test_completes_only_what_has_arrived_by_the_virtual_time() {
    let out = run(&spec(Network::uniform(EAGER), 2), |mut r| {
        let buf = r.transport.alloc_buffer(1).unwrap();
        if r.transport.rank() == 0 {
            r.transport.send(1, buf.prefix(1)).unwrap();
            return vec![];
        }
        let request = r.transport.irecv(0, buf.prefix(1)).unwrap();
        let mut polls = Vec::new();
        for _ in 0..4 {
            polls.push((
                r.clock.true_time().0 / US,
                r.transport.test(request).unwrap(),
            ));
            if polls.last().unwrap().1 {
                break;
            }
            r.clock.advance_ns(2_000.0);
        }
        polls.push((r.clock.true_time().0 / US, true));
        polls
    });
    // In at 6 us: tests at 0, 2, 4 fail, at 6 it completes (+ o_r).
    assert_eq!(
        out[1],
        vec![(0, false), (2, false), (4, false), (6, true), (8, true)]
    );
}

#[test]
fn the_wrong_size_and_a_gone_peer_are_errors() {
    let out = run(&spec(Network::uniform(EAGER), 2), |mut r| {
        let buf = r.transport.alloc_buffer(8).unwrap();
        if r.transport.rank() == 0 {
            r.transport.send(1, buf.prefix(4)).unwrap();
            drop(r.transport);
            return String::new();
        }
        let mismatch = r.transport.recv(0, buf.prefix(8)).unwrap_err();
        assert!(
            matches!(mismatch, TransportError::SizeMismatch { .. }),
            "{mismatch}"
        );
        let gone = r.transport.recv(0, buf.prefix(8)).unwrap_err();
        assert!(
            matches!(gone, TransportError::PeerClosed { peer: 0, .. }),
            "{gone}"
        );
        assert!(matches!(
            r.transport.recv(1, buf.prefix(8)),
            Err(TransportError::NoSuchPeer { .. })
        ));
        gone.to_string()
    });
    assert!(out[1].contains("sim"), "{}", out[1]);
}

#[test]
fn control_latency_aligns_every_rank_to_the_latest() {
    let mut s = spec(Network::uniform(EAGER), 3);
    s.control_latency = Some(Ps(50 * US));
    let out = run(&s, |mut r| {
        r.clock.advance_ns(1_000.0 * r.control.rank() as f64);
        r.control.barrier().unwrap();
        (r.clock.true_time(), r.control.longest_wait())
    });
    for (rank, (t, waited)) in out.iter().enumerate() {
        assert_eq!(*t, Ps(52 * US));
        assert_eq!(*waited, Ps((2 - rank as u64) * US));
    }
}

#[test]
fn a_peer_that_left_is_reported_while_others_are_still_there() {
    // Rank 2 is alive (and could still send to rank 1) while rank 1 waits for
    // rank 0, which has gone: the wait ends with an error naming rank 0.
    let out = run(&spec(Network::uniform(EAGER), 3), |mut r| {
        let buf = r.transport.alloc_buffer(1).unwrap();
        match r.transport.rank() {
            0 => None,
            1 => {
                let err = r.transport.recv(0, buf.prefix(1)).unwrap_err();
                r.transport.send(2, buf.prefix(1)).unwrap();
                Some(err.to_string())
            }
            _ => {
                r.transport.recv(1, buf.prefix(1)).unwrap();
                None
            }
        }
    });
    let err = out[1].as_deref().unwrap();
    assert!(err.contains("rank 0"), "{err}");
}
