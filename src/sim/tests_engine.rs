//! The discrete-event engine against closed forms of plain LogGP, and against the
//! threaded world running the real executor over the same schedules.

use super::collective::{self, CollJob};
use super::engine::{simulate, Options, Program, Schedules, SimError, SpanKind};
use super::*;
use crate::coll::schedule::{Buf, Builder, Slice};
use crate::coll::{topo, Algorithm, CollSpec, Collective, Executor};

const US: u64 = 1_000_000;

/// LogGP in picoseconds (`G` in ps per byte).
fn loggp(l: u64, os: u64, or: u64, g: u64, big_g_ps: u64) -> LogGp {
    LogGp {
        l_ps: l,
        os_ps: os,
        or_ps: or,
        g_ps: g,
        big_g_fs: big_g_ps * 1000,
        rendezvous: false,
        send_overlap_ps: 0,
        recv_overlap_ps: 0,
        big_o_fs: 0,
    }
}

fn rendezvous(p: LogGp) -> LogGp {
    LogGp {
        rendezvous: true,
        ..p
    }
}

/// Parameter sets where the gap binds (`g + (s-1)G > o_s + o_r`) and where the
/// overheads do, with `o_s != o_r`.
fn parameter_sets() -> Vec<LogGp> {
    vec![
        loggp(5 * US, US, 2 * US, 7 * US, 1),
        loggp(5 * US, 3 * US, 2 * US, 500_000, 2),
        loggp(20 * US, 1_500_000, 1_500_000, 2 * US, 0),
    ]
}

/// A collective of `np` ranks rooted at 0 (also the Hockney tests' spec).
pub(crate) fn spec(algorithm: Algorithm, np: usize, size: usize, segment: usize) -> CollSpec {
    CollSpec {
        algorithm,
        np,
        size_bytes: size,
        segment_bytes: segment,
        root: 0,
    }
}

fn finish(spec: &CollSpec, net: &Network, receive_gap: bool) -> Vec<u64> {
    let options = Options {
        receive_gap,
        per_rank: true,
        ..Options::default()
    };
    collective::run(spec, net, options)
        .unwrap()
        .finish
        .iter()
        .map(|t| t.0)
        .collect()
}

#[test]
fn one_message_takes_o_l_transfer_o() {
    // Issue 15: L 5, o 1, g 2, G 0.001 us/B, 1 byte: 7 us.
    let net = Network::uniform(LogGp::from_us(5.0, 1.0, 1.0, 2.0, 0.001, false));
    for algorithm in Collective::Bcast.algorithms() {
        let t = collective::predict(&spec(algorithm, 2, 1, 0), &net).unwrap();
        assert_eq!(t, Ps(7 * US), "{algorithm}");
    }
    // 1001 bytes: + 1000 G.
    let t = collective::predict(&spec(Algorithm::BcastLinear, 2, 1001, 0), &net).unwrap();
    assert_eq!(t, Ps(8 * US));
}

#[test]
fn linear_broadcast_is_paced_by_the_larger_of_o_s_and_the_gap() {
    for p in parameter_sets() {
        for np in [2, 3, 5, 8] {
            for m in [1u64, 1000] {
                let tau = p.busy_ps(m);
                let d = p.os_ps.max(tau);
                let mut want = vec![(np as u64 - 1) * p.os_ps];
                for j in 0..np as u64 - 1 {
                    want.push(p.os_ps + j * d + p.transfer_ps(m) + p.l_ps + p.or_ps);
                }
                let s = spec(Algorithm::BcastLinear, np, m as usize, 0);
                for gap in [true, false] {
                    assert_eq!(
                        finish(&s, &Network::uniform(p), gap),
                        want,
                        "{p:?} np {np} m {m}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_gap_binds_when_messages_leave_back_to_back() {
    let p = loggp(5 * US, US, US, 3 * US, 1000);
    let out = collective::run(
        &spec(Algorithm::BcastLinear, 5, 101, 0),
        &Network::uniform(p),
        Options {
            trace: true,
            ..Options::default()
        },
    )
    .unwrap();
    let leaves: Vec<u64> = out
        .trace
        .iter()
        .filter(|s| s.kind == SpanKind::SendGap)
        .map(|s| s.start.0)
        .collect();
    // Ready after o_s each (1, 2, 3, 4 us), out g + 100 G = 3.1 us apart.
    assert_eq!(leaves, vec![US, 4_100_000, 7_200_000, 10_300_000]);
    let free = collective::predict(
        &spec(Algorithm::BcastLinear, 5, 101, 0),
        &Network::uniform(LogGp { g_ps: 0, ..p }),
    )
    .unwrap();
    assert!(free < out.makespan, "without g the sends leave o_s apart");
}

#[test]
fn chain_with_k_segments_takes_p_minus_1_hops_and_k_minus_1_periods() {
    for p in parameter_sets() {
        for np in [2usize, 3, 4, 7] {
            for (k, m) in [(1u64, 100u64), (2, 100), (5, 100), (8, 1000)] {
                let hop = p.os_ps + p.l_ps + p.transfer_ps(m) + p.or_ps;
                let tau = p.busy_ps(m);
                // The bottleneck: an inner node receives and forwards every segment
                // (o_r + o_s); with two ranks the root's sends and the leaf's
                // receives pace on their own.
                let period = if np >= 3 {
                    (p.os_ps + p.or_ps).max(tau)
                } else {
                    p.os_ps.max(p.or_ps).max(tau)
                };
                let want = (np as u64 - 1) * hop + (k - 1) * period;
                let s = spec(Algorithm::BcastChain, np, (k * m) as usize, m as usize);
                for gap in [true, false] {
                    let got = collective::run(
                        &s,
                        &Network::uniform(p),
                        Options {
                            receive_gap: gap,
                            ..Options::default()
                        },
                    )
                    .unwrap()
                    .makespan;
                    assert_eq!(got, Ps(want), "{p:?} np {np} k {k} m {m} gap {gap}");
                }
            }
        }
    }
}

/// Completion of every rank of a one-segment binomial broadcast from root 0: the
/// `j`-th child of a rank (Open MPI's order) receives `h + j d` after its parent
/// did, `h = o_s + L + (m-1)G + o_r`, `d = max(o_s, g + (m-1)G)`; a rank is done
/// after its own sends, `o_s` each.
fn binomial_by_recursion(p: &LogGp, np: usize, m: u64) -> Vec<u64> {
    let h = p.os_ps + p.l_ps + p.transfer_ps(m) + p.or_ps;
    let d = p.os_ps.max(p.busy_ps(m));
    let mut received = vec![0u64; np];
    let mut order = vec![0usize];
    let mut done = vec![0u64; np];
    while let Some(r) = order.pop() {
        let t = topo::binomial(r, 0, np);
        for (j, &c) in t.children.iter().enumerate() {
            received[c] = received[r] + h + j as u64 * d;
            order.push(c);
        }
        done[r] = received[r] + t.children.len() as u64 * p.os_ps;
    }
    done
}

#[test]
fn binomial_tree_gives_every_rank_its_analytic_time() {
    for p in parameter_sets() {
        for np in [2, 3, 5, 6, 7, 12, 16, 33] {
            for m in [1u64, 777] {
                let s = spec(Algorithm::BcastBinomial, np, m as usize, 0);
                assert_eq!(
                    finish(&s, &Network::uniform(p), true),
                    binomial_by_recursion(&p, np, m),
                    "{p:?} np {np} m {m}"
                );
            }
        }
        // P = 2^n in closed form: rank s with c bits, highest b, is done at
        // c h + (b - c + 1) d + (n - 1 - b) o_s.
        let (n, m) = (5u32, 10u64);
        let h = p.os_ps + p.l_ps + p.transfer_ps(m) + p.or_ps;
        let d = p.os_ps.max(p.busy_ps(m));
        let got = finish(
            &spec(Algorithm::BcastBinomial, 1 << n, m as usize, 0),
            &Network::uniform(p),
            true,
        );
        for (s, &t) in got.iter().enumerate().skip(1) {
            let c = u64::from(s.count_ones());
            let b = u64::from(usize::BITS - 1 - s.leading_zeros());
            let want = c * h + (b + 1 - c) * d + (u64::from(n) - 1 - b) * p.os_ps;
            assert_eq!(t, want, "rank {s}");
        }
        assert_eq!(got[0], u64::from(n) * p.os_ps);
    }
}

#[test]
fn a_binomial_broadcast_over_65536_ranks_takes_log_p_hops() {
    let p = parameter_sets()[0];
    let m = 8u64;
    let h = p.os_ps + p.l_ps + p.transfer_ps(m) + p.or_ps;
    assert!(h >= p.os_ps.max(p.busy_ps(m)));
    let out = collective::run(
        &spec(Algorithm::BcastBinomial, 1 << 16, m as usize, 0),
        &Network::uniform(p),
        Options::default(),
    )
    .unwrap();
    assert_eq!(out.makespan, Ps(16 * h));
    assert_eq!(out.slowest, (1 << 16) - 1);
    assert_eq!(out.stats.messages, (1 << 16) - 1);
    assert_eq!(out.stats.ranks_built, 1 << 16);
    assert!(
        out.stats.peak_live_ranks < 1 << 15,
        "ranks are built when reached and recycled when done: {}",
        out.stats.peak_live_ranks
    );
}

#[test]
fn rendezvous_adds_the_handshake_and_follows_the_protocol_ranges() {
    let eager = loggp(5 * US, US, 2 * US, 3 * US, 1);
    let net = Network::new(vec![(1, eager), (1024, rendezvous(eager))]).unwrap();
    let two = |m: usize| collective::predict(&spec(Algorithm::BcastLinear, 2, m, 0), &net).unwrap();
    let one_way = |m: u64| eager.os_ps + eager.l_ps + eager.transfer_ps(m) + eager.or_ps;
    assert_eq!(two(1000), Ps(one_way(1000)));
    // Request and clear-to-send: two more L.
    assert_eq!(two(1024), Ps(one_way(1024) + 2 * eager.l_ps));

    // A linear broadcast whose receives are all posted at 0: send j's data leaves
    // when its clear-to-send is back, (j+1) o_s + 2L, or when the interface is free.
    let m = 4000u64;
    let p = rendezvous(eager);
    let np = 6;
    let mut start = Vec::new();
    for j in 0..np as u64 - 1 {
        let cts = (j + 1) * p.os_ps + 2 * p.l_ps;
        let s = match start.last() {
            Some(&prev) => cts.max(prev + p.busy_ps(m)),
            None => cts,
        };
        start.push(s);
    }
    let mut want = vec![*start.last().unwrap()];
    want.extend(
        start
            .iter()
            .map(|s| s + p.transfer_ps(m) + p.l_ps + p.or_ps),
    );
    assert_eq!(
        finish(
            &spec(Algorithm::BcastLinear, np, m as usize, 0),
            &Network::uniform(p),
            true
        ),
        want
    );
}

#[test]
fn rendezvous_serializes_a_gather_that_eager_lets_arrive_at_once() {
    let eager = loggp(5 * US, US, 2 * US, 3 * US, 1);
    let (np, m) = (5usize, 64u64);
    let gather = CollSpec {
        algorithm: Algorithm::GatherLinear,
        np,
        size_bytes: m as usize,
        segment_bytes: 0,
        root: 0,
    };
    // Eager, no receive-side gap: every block is in at o_s + L + (m-1)G; the root
    // receives them one after the other, o_r each.
    let arrived = eager.os_ps + eager.l_ps + eager.transfer_ps(m);
    let root = finish(&gather, &Network::uniform(eager), false)[0];
    assert_eq!(root, arrived + (np as u64 - 1) * eager.or_ps);
    // Rendezvous: the root answers sender k only once it posts receive k, after
    // receive k-1 is done; each later block costs L (clear) + (m-1)G + L + o_r.
    let p = rendezvous(eager);
    let first = p.os_ps + 3 * p.l_ps + p.transfer_ps(m) + p.or_ps;
    let each = 2 * p.l_ps + p.transfer_ps(m) + p.or_ps;
    let root = finish(&gather, &Network::uniform(p), false)[0];
    assert_eq!(root, first + (np as u64 - 2) * each);
}

#[test]
fn the_receive_gap_binds_when_several_senders_target_one_rank() {
    let p = loggp(5 * US, US, US, 3 * US, 1);
    let (np, m) = (6usize, 100u64);
    let gather = CollSpec {
        algorithm: Algorithm::GatherLinear,
        np,
        size_bytes: m as usize,
        segment_bytes: 0,
        root: 0,
    };
    // All first bytes reach the root at o_s + L; its interface takes them in
    // g + (m-1)G apart, in the order they were sent (rank order).
    let mut done = 0;
    for k in 0..np as u64 - 1 {
        let last_in = p.os_ps + p.l_ps + k * p.busy_ps(m) + p.transfer_ps(m);
        done = done.max(last_in) + p.or_ps;
    }
    let out = collective::run(
        &gather,
        &Network::uniform(p),
        Options {
            per_rank: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(out.finish[0], Ps(done));
    assert_eq!(out.stats.receive_gap_delays, np as u64 - 2);
    let ungapped = finish(&gather, &Network::uniform(p), false)[0];
    assert!(ungapped < done);
}

fn threaded(spec: &CollSpec, net: &Network, calls: u32) -> Vec<u64> {
    let world = WorldSpec {
        network: net.clone(),
        clocks: vec![
            RankClock {
                map: TickMap {
                    offset: 0,
                    ticks: 1,
                    per_ps: 1,
                },
                skew: None,
            };
            spec.np
        ],
        start: Ps(0),
        read_cost: Ps(0),
        quantum: Quantum::PS,
        control_latency: None,
    };
    run(&world, |mut r| {
        use ngauge_transport::Transport;
        let schedule = spec.schedule(r.transport.rank()).unwrap();
        let mut ex = Executor::prepare(&mut r.transport, schedule).unwrap();
        for _ in 0..calls {
            ex.run(&mut r.transport).unwrap();
        }
        r.clock.true_time().0
    })
}

fn all_algorithms() -> Vec<Algorithm> {
    let mut all: Vec<Algorithm> = Collective::ALL
        .into_iter()
        .flat_map(|c| c.algorithms())
        .collect();
    all.push(Algorithm::BcastKChain { chains: 2 });
    all
}

#[test]
fn the_threaded_executor_agrees_to_the_picosecond_without_the_receive_gap() {
    let checked = agreements(&parameter_sets());
    assert!(checked > 1000, "{checked}");
}

#[test]
fn the_threaded_executor_charges_overlaps_and_o_as_the_engine_does() {
    // TCP loopback's shape: the send call outlasts its message (send overlap
    // near o_s), a waiting receive starts before the last byte is in, and a
    // copy per byte at each end.
    let overlapped = |p: LogGp, send: u64, recv: u64| LogGp {
        send_overlap_ps: send,
        recv_overlap_ps: recv,
        big_o_fs: 700,
        ..p
    };
    let sets = [
        overlapped(parameter_sets()[0], 900_000, 1_500_000),
        overlapped(parameter_sets()[1], 2_500_000, 500_000),
    ];
    // The overlaps move the finishes: the check compares something that differs
    // from plain LogGP.
    let s = spec(Algorithm::BcastBinomial, 4, 1001, 0);
    assert_ne!(
        threaded(&s, &Network::uniform(sets[0]), 1),
        threaded(&s, &Network::uniform(parameter_sets()[0]), 1)
    );
    let checked = agreements(&sets);
    assert!(checked > 600, "{checked}");
}

/// Every algorithm, 1 to 6 ranks, three sizes, with and without segments, both
/// roots: the engine without the receive gap and the threaded executor give every
/// rank the same finish, under each of `sets`; returns the cases checked.
fn agreements(sets: &[LogGp]) -> usize {
    let mut checked = 0;
    for &p in sets {
        let net = Network::uniform(p);
        for algorithm in all_algorithms() {
            for np in 1..=6 {
                for size in [1usize, 100, 1001] {
                    for segment in [0usize, 100] {
                        for root in [0, np - 1] {
                            if (segment > 0 && !algorithm.is_segmented())
                                || (root > 0 && !algorithm.collective().is_rooted())
                            {
                                continue;
                            }
                            let s = CollSpec {
                                algorithm,
                                np,
                                size_bytes: size,
                                segment_bytes: segment,
                                root,
                            };
                            assert_eq!(
                                finish(&s, &net, false),
                                threaded(&s, &net, 1),
                                "{s:?} {p:?}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    checked
}

#[test]
fn loops_agree_with_the_threaded_executor_and_underestimate_a_pipeline() {
    let p = parameter_sets()[0];
    let net = Network::uniform(p);
    for algorithm in [
        Algorithm::BcastChain,
        Algorithm::BcastBinomial,
        Algorithm::GatherBinomial,
        Algorithm::AllreduceRing,
    ] {
        let s = CollSpec {
            algorithm,
            np: 5,
            size_bytes: 1000,
            segment_bytes: 250,
            root: 0,
        };
        let job = CollJob {
            spec: s,
            calls: Calls::Loop(4),
        };
        let out = simulate(
            &job,
            &net,
            Options {
                receive_gap: false,
                per_rank: true,
                ..Options::default()
            },
        )
        .unwrap();
        let engine: Vec<u64> = out.finish.iter().map(|t| t.0).collect();
        assert_eq!(engine, threaded(&s, &net, 4), "{algorithm}");
    }
    let chain = spec(Algorithm::BcastChain, 16, 1000, 0);
    let t = collective::schemes(&chain, &net, 5).unwrap();
    assert!(t.looped < t.single, "{t:?}");
    assert!(t.rotated < t.single, "{t:?}");
    assert!(t.loop_error() < -0.5, "{t:?}");
}

#[test]
fn rendezvous_chain_agrees_with_the_threaded_executor() {
    // Under rendezvous the threaded `isend` blocks until the clear-to-send; in a
    // chain of one segment no send has company, so the engines must agree.
    let p = rendezvous(parameter_sets()[1]);
    let net = Network::uniform(p);
    for np in 2..=6 {
        let s = spec(Algorithm::BcastChain, np, 3000, 0);
        assert_eq!(finish(&s, &net, false), threaded(&s, &net, 1), "np {np}");
    }
}

#[test]
fn local_steps_cost_cpu_time_per_byte() {
    let mut b = Builder::new(0, 1);
    b.copy(
        Slice::new(Buf::Data, 0, 500),
        Slice::new(Buf::Tmp0, 0, 500),
        0,
        [],
    );
    let program = Schedules(vec![b.finish()]);
    let out = simulate(
        &program,
        &Network::uniform(parameter_sets()[0]),
        Options {
            local_fs_per_byte: 2_000_000,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(out.makespan, Ps(US), "500 B at 2 ns/B");
}

#[test]
fn bad_programs_are_reported_not_hung() {
    let net = Network::uniform(rendezvous(parameter_sets()[0]));
    // Both receive first, then send: under rendezvous nobody moves.
    let ring: Vec<_> = (0..2)
        .map(|r| {
            let mut b = Builder::new(r, 2);
            let got = b.recv(1 - r, Slice::new(Buf::Tmp0, 0, 8), 0, []);
            b.send(1 - r, Slice::new(Buf::Data, 0, 8), 0, [got]);
            b.finish()
        })
        .collect();
    let err = simulate(&Schedules(ring), &net, Options::default()).unwrap_err();
    assert!(
        matches!(err, SimError::Deadlock { .. }),
        "{err}: waits named"
    );
    assert!(err
        .to_string()
        .contains("rank 0 (call 0) waits for its receive from rank 1"));

    // A send nobody receives.
    let mut b = Builder::new(0, 2);
    b.send(1, Slice::new(Buf::Data, 0, 8), 0, []);
    let lonely = Schedules(vec![b.finish(), Builder::new(1, 2).finish()]);
    let err = simulate(
        &lonely,
        &Network::uniform(parameter_sets()[0]),
        Options::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "rank 1 has no receive for message 0 of call 0 from rank 0"
    );

    // A rank declared passive that sends first.
    struct Liar(Schedules);
    impl Program for Liar {
        fn np(&self) -> usize {
            self.0.np()
        }
        fn calls(&self) -> u32 {
            1
        }
        fn schedule(
            &self,
            rank: usize,
            call: u32,
        ) -> Result<crate::coll::Schedule, crate::coll::CollError> {
            self.0.schedule(rank, call)
        }
        fn repeats(&self, _: u32) -> bool {
            true
        }
        fn passive_at_start(&self, rank: usize) -> bool {
            rank == 2
        }
    }
    let three: Vec<_> = (0..3)
        .map(|r| {
            let mut b = Builder::new(r, 3);
            match r {
                0 => {
                    b.send(2, Slice::new(Buf::Data, 0, 8), 0, []);
                }
                1 => {
                    b.recv(2, Slice::new(Buf::Data, 0, 8), 0, []);
                }
                _ => {
                    b.send(1, Slice::new(Buf::Data, 0, 8), 0, []);
                    b.recv(0, Slice::new(Buf::Data, 0, 8), 0, []);
                }
            }
            b.finish()
        })
        .collect();
    let err = simulate(
        &Liar(Schedules(three)),
        &Network::uniform(parameter_sets()[0]),
        Options::default(),
    )
    .unwrap_err();
    assert!(matches!(err, SimError::NotPassive { rank: 2 }), "{err}");
}

/// Speed and memory at scale (`cargo test --release --lib sim::tests_engine::speed
/// -- --ignored --nocapture`); figures in docs/findings/2026-11-24-simulator-speed.md.
#[test]
#[ignore = "a benchmark: prints figures, asserts nothing about time"]
fn speed() {
    let net = Network::uniform(LogGp::from_us(5.0, 1.0, 1.0, 2.0, 0.001, false));
    let only: Option<usize> = std::env::var("SPEED_CASE")
        .ok()
        .and_then(|v| v.parse().ok());
    let cases = [
        (Algorithm::BcastBinomial, 1usize << 20, 1usize, 0usize),
        (Algorithm::BcastBinomial, 1 << 20, 65536, 8192),
        (Algorithm::BcastChain, 1 << 20, 1, 0),
        (Algorithm::BcastLinear, 1 << 20, 1, 0),
        (Algorithm::BcastSplitBinary, 1 << 20, 65536, 8192),
        (Algorithm::AllreduceRecursiveDoubling, 1 << 16, 8, 0),
    ];
    for (k, (algorithm, np, size, segment)) in cases.into_iter().enumerate() {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let s = CollSpec {
            algorithm,
            np,
            size_bytes: size,
            segment_bytes: segment,
            root: 0,
        };
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let out = collective::run(&s, &net, Options::default()).unwrap();
            let secs = t0.elapsed().as_secs_f64();
            println!(
                "{algorithm} np {np} size {size} seg {segment}: {:.3} s, predicted {:.1} us, {} events, {:.2e} events/s, {} messages, peak live {} ranks, peak state {} B ({:.1} B/rank)",
                secs,
                out.makespan.as_us(),
                out.stats.events,
                out.stats.events as f64 / secs,
                out.stats.messages,
                out.stats.peak_live_ranks,
                out.stats.peak_state_bytes,
                out.stats.peak_state_bytes as f64 / np as f64,
            );
        }
    }
}

/// `o_s + L + (m-1)G + o_r`: one message of `m` bytes, end to end.
fn hop(p: &LogGp, m: u64) -> u64 {
    p.os_ps + p.l_ps + p.transfer_ps(m) + p.or_ps
}

#[test]
fn linear_scatter_is_the_linear_broadcast_of_one_block_each() {
    for p in parameter_sets() {
        for np in [2, 3, 5, 8] {
            for m in [1u64, 1000] {
                let d = p.os_ps.max(p.busy_ps(m));
                let mut want = vec![(np as u64 - 1) * p.os_ps];
                for j in 0..np as u64 - 1 {
                    want.push(p.os_ps + j * d + p.transfer_ps(m) + p.l_ps + p.or_ps);
                }
                let s = spec(Algorithm::ScatterLinear, np, m as usize, 0);
                for gap in [true, false] {
                    let got = finish(&s, &Network::uniform(p), gap);
                    assert_eq!(got, want, "{p:?} np {np} m {m}");
                }
            }
        }
    }
}

#[test]
fn ring_allgather_and_reduce_scatter_take_p_minus_1_hops() {
    for p in parameter_sets() {
        for np in [2usize, 3, 5, 8] {
            for m in [1u64, 800] {
                let want = vec![(np as u64 - 1) * hop(&p, m); np];
                for algorithm in [Algorithm::AllgatherRing, Algorithm::ReduceScatterRing] {
                    let s = spec(algorithm, np, m as usize, 0);
                    for gap in [true, false] {
                        let got = finish(&s, &Network::uniform(p), gap);
                        assert_eq!(got, want, "{algorithm} {p:?} np {np} m {m}");
                    }
                }
            }
        }
    }
}

#[test]
fn doubling_and_halving_take_one_hop_per_round_of_growing_messages() {
    for p in parameter_sets() {
        for np in [2usize, 3, 4, 6, 8, 16] {
            let m = 100u64;
            // Bruck: round i moves min(2^i, P - 2^i) blocks.
            let mut bruck = 0;
            let mut d = 1;
            while d < np {
                bruck += hop(&p, d.min(np - d) as u64 * m);
                d <<= 1;
            }
            let net = Network::uniform(p);
            let got = finish(
                &spec(Algorithm::AllgatherBruck, np, m as usize, 0),
                &net,
                true,
            );
            assert_eq!(got, vec![bruck; np], "bruck {p:?} np {np}");
            if np.is_power_of_two() {
                // 2^i blocks in round i, up for the allgather and down for the
                // reduce-scatter: the same sum.
                for algorithm in [
                    Algorithm::AllgatherRecursiveDoubling,
                    Algorithm::ReduceScatterRecursiveHalving,
                ] {
                    let got = finish(&spec(algorithm, np, m as usize, 0), &net, true);
                    assert_eq!(got, vec![bruck; np], "{algorithm} {p:?} np {np}");
                }
            }
        }
    }
}

#[test]
fn binomial_reduce_finishes_each_subtree_one_hop_per_child() {
    // P = 2^n, root 0: shifted rank v has as many children as trailing zeros,
    // child j done j hops in; v sends after its last child's hop (+ o_s).
    for p in parameter_sets() {
        for n in [1u32, 2, 3, 4] {
            let np = 1usize << n;
            let m = 64u64;
            let h = hop(&p, m);
            let want: Vec<u64> = (0..np)
                .map(|v| match v {
                    0 => u64::from(n) * h,
                    v => u64::from(v.trailing_zeros()) * h + p.os_ps,
                })
                .collect();
            let s = spec(Algorithm::ReduceBinomial, np, m as usize, 0);
            for gap in [true, false] {
                assert_eq!(finish(&s, &Network::uniform(p), gap), want, "{p:?} np {np}");
            }
        }
    }
}

#[test]
fn in_order_binary_reduce_serves_both_children_then_hands_the_root_the_sum() {
    for p in parameter_sets() {
        let m = 64u64;
        let h = hop(&p, m);
        let net = Network::uniform(p);
        // Ranks 0 and 1 are the leaves of rank 2; both messages arrive together.
        let io_root = spec(Algorithm::ReduceInOrderBinary, 3, m as usize, 0);
        let got = finish(&CollSpec { root: 2, ..io_root }, &net, false);
        assert_eq!(got, vec![p.os_ps, p.os_ps, h + p.or_ps], "{p:?}");
        // Root 0: rank 2 sends it the sum, one more hop.
        let got = finish(&io_root, &net, false);
        let done = h + p.or_ps;
        assert_eq!(got, vec![done + h, p.os_ps, done + p.os_ps], "{p:?}");
    }
}

/// Completion of every rank of a binomial scatter from root 0: each rank sends
/// its children their subtrees, largest first, each blocking send starting `o_s`
/// after the one before and leaving the interface `g + (s-1)G` after the one
/// before; a rank is done after its last send's `o_s` (a leaf: on receipt).
fn scatter_by_recursion(p: &LogGp, np: usize, m: u64) -> Vec<u64> {
    let mut received = vec![0u64; np];
    let mut done = vec![0u64; np];
    let mut order = vec![0usize];
    while let Some(r) = order.pop() {
        let t = topo::in_order_binomial(r, 0, np);
        let (mut start, mut free) = (received[r], 0u64);
        for &c in t.children.iter().rev() {
            let bytes = (c - r).min(np - c) as u64 * m;
            let leave = (start + p.os_ps).max(free);
            received[c] = leave + p.l_ps + p.transfer_ps(bytes) + p.or_ps;
            free = leave + p.busy_ps(bytes);
            start += p.os_ps;
            order.push(c);
        }
        done[r] = if t.children.is_empty() {
            received[r]
        } else {
            start
        };
    }
    done
}

#[test]
fn binomial_scatter_gives_every_rank_its_analytic_time() {
    for p in parameter_sets() {
        for np in [2usize, 3, 4, 5, 8, 13] {
            for m in [1u64, 500] {
                let s = spec(Algorithm::ScatterBinomial, np, m as usize, 0);
                assert_eq!(
                    finish(&s, &Network::uniform(p), false),
                    scatter_by_recursion(&p, np, m),
                    "{p:?} np {np} m {m}"
                );
            }
        }
    }
}

/// A send that outlasts its message (`send_overlap`), a receive that starts
/// before its last byte is in (`recv_overlap`) and a CPU cost per byte at each end
/// (`O`): one message of a 2-rank linear broadcast reaches its receiver `o_s -
/// send_overlap + (m-1)O + L + (m-1)G` after the send began and is taken in `o_r -
/// recv_overlap + (m-1)O`; the sender is busy for the whole `o_s + (m-1)O`. With
/// all 0 the times are plain LogGP's.
#[test]
fn the_overlaps_and_a_cpu_cost_per_byte_add_up_to_the_single_message() {
    let plain = loggp(2 * US, 3 * US, US, 4 * US, 2);
    let p = plain.with_cpu_costs(1.5, 0.25, 0.000_001);
    assert_eq!(
        (p.send_overlap_ps, p.recv_overlap_ps, p.big_o_fs),
        (1_500_000, 250_000, 1_000)
    );
    let capped = plain.with_cpu_costs(9.0, 9.0, 0.0);
    assert_eq!(
        (capped.send_overlap_ps, capped.recv_overlap_ps),
        (plain.os_ps, plain.or_ps)
    );
    for m in [1u64, 1000, 65536] {
        let per_byte = m - 1; // O is 1 ps per byte
        let s = spec(Algorithm::BcastLinear, 2, m as usize, 0);
        let got = finish(&s, &Network::uniform(p), false);
        let sent = p.os_ps + per_byte;
        let received = p.os_ps - p.send_overlap_ps + per_byte + p.l_ps + p.transfer_ps(m) + p.or_ps
            - p.recv_overlap_ps
            + per_byte;
        assert_eq!(got, vec![sent, received], "m {m}");
        let plain_got = finish(&s, &Network::uniform(plain), false);
        let plain_received = plain.os_ps + plain.l_ps + plain.transfer_ps(m) + plain.or_ps;
        assert_eq!(plain_got, vec![plain.os_ps, plain_received], "m {m}");
    }
}

/// The receive overlap starts a receive's work before its last byte only while
/// the rank waits in it: a broadcast's receiver, waiting from time 0, starts
/// `recv_overlap` before the arrival; in a 2-rank ring allgather each rank is busy
/// with its own send when the other's message comes in, so it pays the whole `o_r`
/// after its send, as without the overlap.
#[test]
fn the_receive_overlap_applies_only_to_a_waiting_receive() {
    let plain = loggp(0, 10 * US, 6 * US, US, 0);
    let p = plain.with_cpu_costs(0.0, 4.0, 0.0);
    let bcast = spec(Algorithm::BcastLinear, 2, 1, 0);
    // Arrival at 10 us (L = 0, one byte): rank 1 starts at 10 - 4 and ends at 12.
    assert_eq!(
        finish(&bcast, &Network::uniform(p), false),
        [10 * US, 12 * US]
    );
    assert_eq!(
        finish(&bcast, &Network::uniform(plain), false),
        [10 * US, 16 * US]
    );
    let ring = spec(Algorithm::AllgatherRing, 2, 1, 0);
    for q in [p, plain] {
        assert_eq!(
            finish(&ring, &Network::uniform(q), false),
            [16 * US, 16 * US]
        );
    }
}

/// A matrix of `np` ranks from a function of the pair (test matrices are leaked as
/// the files' are).
fn matrix(np: usize, count: impl Fn(usize, usize) -> u64) -> crate::coll::Counts {
    let counts = (0..np * np).map(|k| count(k / np, k % np)).collect();
    let m = crate::coll::counts::CountMatrix {
        path: format!("test-{np}"),
        np,
        counts,
    };
    crate::coll::Counts::Given(Box::leak(Box::new(m)))
}

#[test]
fn pairwise_alltoallv_takes_one_hop_per_step_of_its_own_length() {
    // Issue 39. Counts by distance (rank i sends rank i + s the count k_s, some 0):
    // every rank starts step s together, which lasts one hop of k_s m bytes, and
    // an empty step costs nothing.
    let k = |s: usize| [0u64, 3, 0, 1, 5, 2, 0, 4][s];
    for p in parameter_sets() {
        for np in [2usize, 3, 5, 8] {
            let counts = matrix(np, |i, j| k((j + np - i) % np) + u64::from(i == j));
            let m = 100u64;
            let want: u64 = (1..np)
                .filter(|&s| k(s) > 0)
                .map(|s| hop(&p, k(s) * m))
                .sum();
            let s = spec(Algorithm::AlltoallvPairwise { counts }, np, m as usize, 0);
            for gap in [true, false] {
                let got = finish(&s, &Network::uniform(p), gap);
                assert_eq!(got, vec![want; np], "{p:?} np {np}");
            }
        }
    }
}

#[test]
fn alltoallv_of_two_ranks_is_one_message_each_way() {
    // Rank 0 sends a blocks, rank 1 b: each finishes when the other's arrives, or
    // after o_s when nothing comes.
    for p in parameter_sets() {
        for (a, b) in [(1u64, 1u64), (3, 1), (0, 2), (0, 0)] {
            let counts = matrix(2, |i, j| [[7, a], [b, 7]][i][j]);
            let m = 10u64;
            let done = |send: u64, recv: u64| match (send, recv) {
                (_, r) if r > 0 => hop(&p, r * m),
                (s, _) if s > 0 => p.os_ps,
                _ => 0,
            };
            for algorithm in Collective::Alltoallv.algorithms() {
                let s = spec(algorithm.with_counts(counts), 2, m as usize, 0);
                let got = finish(&s, &Network::uniform(p), true);
                assert_eq!(got, [done(a, b), done(b, a)], "{algorithm} {p:?} {a} {b}");
            }
        }
    }
}

#[test]
fn alltoallv_with_uneven_counts_agrees_with_the_threaded_executor() {
    let net = Network::uniform(parameter_sets()[0]);
    for np in 2..=5 {
        let skew = matrix(np, |i, j| ((i + 2 * j) % 4) as u64);
        for counts in [crate::coll::Counts::Random { seed: 5 }, skew] {
            for algorithm in Collective::Alltoallv.algorithms() {
                let s = spec(algorithm.with_counts(counts), np, 100, 0);
                assert_eq!(finish(&s, &net, false), threaded(&s, &net, 1), "{s:?}");
            }
        }
    }
}
