//! Every algorithm, rank count 1..=9, several sizes, segments and roots: the
//! schedules' properties ([`analysis`]), and the right bytes at the right ranks
//! when the executor runs them over the in-process transport and over real TCP.

use super::analysis::{self, Protocol};
use super::schedule::{Buf, Builder, Slice};
use super::*;
use ngauge_transport::inproc;
use ngauge_transport::Transport;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// Sizes with 0 and 1 byte, odd ones, ones not divisible by the segments or np.
const SIZES: [usize; 7] = [0, 1, 2, 7, 100, 1001, 4099];
const SEGMENTS: [usize; 3] = [0, 3, 100];

fn algorithms() -> Vec<Algorithm> {
    let mut all: Vec<Algorithm> = Collective::ALL
        .into_iter()
        .flat_map(|c| c.algorithms())
        .collect();
    all.push(Algorithm::BcastKChain { chains: 1 });
    all.push(Algorithm::BcastKChain { chains: 2 });
    all
}

/// A count matrix of `np` ranks with empty blocks, an empty row and column (rank
/// 0's), an empty own block (rank 1's), and counts up to 3.
fn skewed(np: usize) -> Counts {
    let counts = (0..np * np)
        .map(|k| ((k / np) * (k % np) % 4) as u64)
        .collect();
    let path = format!("skewed-{np}");
    Counts::Given(Box::leak(Box::new(counts::CountMatrix {
        path,
        np,
        counts,
    })))
}

/// The all-to-all-v's algorithms over the random and the skewed matrix of `np`.
fn alltoallv_algorithms(np: usize) -> Vec<Algorithm> {
    let c = [Counts::Random { seed: np as u64 }, skewed(np)];
    let all = Collective::Alltoallv.algorithms();
    c.iter()
        .flat_map(|&c| all.iter().map(move |a| a.with_counts(c)))
        .collect()
}

/// Every combination worth running on `np` ranks.
fn specs(np: usize) -> Vec<CollSpec> {
    let mut out = Vec::new();
    for algorithm in algorithms().into_iter().chain(alltoallv_algorithms(np)) {
        let mut roots = if algorithm.collective().is_rooted() {
            vec![0, np / 2, np - 1]
        } else {
            vec![0]
        };
        roots.dedup();
        let segments: &[usize] = if algorithm.is_segmented() {
            &SEGMENTS
        } else {
            &[0]
        };
        let sizes: &[usize] = match algorithm.counts() {
            _ if algorithm.collective() == Collective::Barrier => &[0],
            // The uneven matrices scale the blocks the uniform one runs at every size.
            Some(c) if c != Counts::Uniform => &[0, 1, 100],
            _ => &SIZES,
        };
        for &size_bytes in sizes {
            for &segment_bytes in segments {
                for &root in &roots {
                    out.push(CollSpec {
                        algorithm,
                        np,
                        size_bytes,
                        segment_bytes,
                        root,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn schedules_match_are_hazard_free_and_cannot_deadlock() {
    for np in 1..=9 {
        for spec in specs(np) {
            let fail = |e: analysis::AnalysisError| panic!("{spec:?}: {e}");
            analysis::check_matching(&spec).unwrap_or_else(fail);
            for rank in 0..np {
                analysis::check_hazards(&spec.schedule(rank).unwrap()).unwrap_or_else(fail);
            }
            analysis::check_progress(&spec, Protocol::Eager).unwrap_or_else(fail);
            analysis::check_progress(&spec, Protocol::Rendezvous).unwrap_or_else(fail);
        }
    }
}

/// Runs `specs` one after the other on `np` in-process ranks, each twice on the
/// same executor (once with `run`, once with `start` and `wait`), checking the data
/// after every call.
fn run_inproc(np: usize, specs: Vec<CollSpec>) {
    let specs = Arc::new(specs);
    let handles: Vec<_> = inproc::world(np)
        .into_iter()
        .map(|(t, _control)| {
            let specs = Arc::clone(&specs);
            thread::spawn(move || run_all(t, &specs))
        })
        .collect();
    report(handles);
}

/// Panics with every rank's error (the first is often only a peer that saw the
/// failing rank leave).
fn report(handles: Vec<thread::JoinHandle<Result<(), String>>>) {
    let errors: Vec<String> = handles
        .into_iter()
        .filter_map(|h| h.join().expect("rank thread panicked").err())
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

fn run_all(mut t: impl Transport, specs: &[CollSpec]) -> Result<(), String> {
    let rank = t.rank();
    for spec in specs {
        let err = |e: CollError| format!("{spec:?} rank {rank}: {e}");
        let mut ex = Executor::prepare(&mut t, spec.schedule(rank).map_err(err)?).map_err(err)?;
        for call in 0..2 {
            check::fill(spec, rank, &mut t, ex.buffers()).map_err(|e| err(e.into()))?;
            // `run` (blocking where a transfer is alone), then `start` and `wait`
            // (everything posted nonblocking first).
            if call == 0 {
                ex.run(&mut t).map_err(err)?;
            } else {
                ex.start(&mut t).map_err(err)?;
                ex.wait(&mut t).map_err(err)?;
            }
            check::verify(spec, rank, &t, ex.buffers()).map_err(err)?;
        }
        ex.buffers().free(&mut t).map_err(|e| err(e.into()))?;
    }
    Ok(())
}

#[test]
fn every_algorithm_delivers_the_right_bytes_on_1_to_9_ranks() {
    for np in 1..=9 {
        run_inproc(np, specs(np));
    }
}

#[test]
fn larger_messages_with_many_segments_arrive_intact() {
    let np = 6;
    let mut specs = Vec::new();
    for algorithm in algorithms() {
        specs.push(CollSpec {
            algorithm,
            np,
            size_bytes: 200_003,
            segment_bytes: 8192,
            root: 4,
        });
    }
    run_inproc(np, specs);
}

#[test]
fn start_then_test_completes_without_wait() {
    let spec = CollSpec {
        algorithm: Algorithm::BcastBinomial,
        np: 5,
        size_bytes: 10_000,
        segment_bytes: 1000,
        root: 2,
    };
    // The root starts only after every other rank has started and tested once, so
    // that those first tests cannot have found their data (however the threads
    // are scheduled: on a loaded host every rank's first test found it done).
    let receivers_tested = Arc::new(std::sync::Barrier::new(spec.np));
    let handles: Vec<_> = inproc::world(spec.np)
        .into_iter()
        .map(|(mut t, _)| {
            let receivers_tested = receivers_tested.clone();
            thread::spawn(move || {
                let rank = t.rank();
                let mut ex = Executor::prepare(&mut t, spec.schedule(rank).unwrap()).unwrap();
                assert!(matches!(ex.test(&mut t), Err(CollError::NotStarted)));
                check::fill(&spec, rank, &mut t, ex.buffers()).unwrap();
                let mut unfinished_tests = 0;
                if rank != spec.root {
                    ex.start(&mut t).unwrap();
                    if !ex.test(&mut t).unwrap() {
                        unfinished_tests += 1;
                    }
                }
                receivers_tested.wait();
                if rank == spec.root {
                    ex.start(&mut t).unwrap();
                }
                while !ex.test(&mut t).unwrap() {
                    unfinished_tests += 1;
                    thread::yield_now();
                }
                check::verify(&spec, rank, &t, ex.buffers()).unwrap();
                // Done stays done.
                assert!(ex.test(&mut t).unwrap());
                (rank, unfinished_tests)
            })
        })
        .collect();
    for (rank, unfinished_tests) in handles.into_iter().map(|h| h.join().unwrap()) {
        // The root sends without waiting for anyone: its first test may finish it;
        // a rank that receives tested at least once before its data was sent.
        if rank != spec.root {
            assert!(unfinished_tests >= 1, "rank {rank}: {unfinished_tests}");
        }
    }
}

#[test]
fn barrier_lets_no_rank_leave_before_the_last_enters() {
    let np = 7;
    let entered = Arc::new(AtomicBool::new(false));
    let spec = CollSpec {
        algorithm: Algorithm::BarrierDissemination,
        np,
        size_bytes: 0,
        segment_bytes: 0,
        root: 0,
    };
    let handles: Vec<_> = inproc::world(np)
        .into_iter()
        .map(|(mut t, _)| {
            let entered = Arc::clone(&entered);
            thread::spawn(move || {
                let rank = t.rank();
                let mut ex = Executor::prepare(&mut t, spec.schedule(rank).unwrap()).unwrap();
                if rank == 3 {
                    thread::sleep(std::time::Duration::from_millis(50));
                    entered.store(true, Ordering::SeqCst);
                }
                ex.run(&mut t).unwrap();
                entered.load(Ordering::SeqCst)
            })
        })
        .collect();
    for (rank, h) in handles.into_iter().enumerate() {
        assert!(h.join().unwrap(), "rank {rank} left before rank 3 entered");
    }
}

#[test]
fn a_schedule_runs_only_on_its_rank() {
    let mut world = inproc::world(2);
    let (mut t1, _) = world.pop().unwrap();
    let spec = CollSpec {
        algorithm: Algorithm::BcastLinear,
        np: 2,
        size_bytes: 4,
        segment_bytes: 0,
        root: 0,
    };
    let mut ex = Executor::prepare(&mut t1, spec.schedule(0).unwrap()).unwrap();
    let err = ex.start(&mut t1).unwrap_err();
    assert!(matches!(err, CollError::WrongRank { .. }), "{err}");
    let bufs = CollBuffers::alloc(
        &mut t1,
        &CollSpec {
            size_bytes: 2,
            ..spec
        }
        .schedule(1)
        .unwrap(),
    )
    .unwrap();
    let err = Executor::new(spec.schedule(1).unwrap(), bufs).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the data buffer holds 2 bytes, the schedule needs 4"
    );
}

#[test]
fn bad_parameters_are_named() {
    let spec = CollSpec {
        algorithm: Algorithm::BcastBinomial,
        np: 4,
        size_bytes: 1 << 30,
        segment_bytes: 1,
        root: 0,
    };
    let msg = |s: CollSpec| s.schedule(0).unwrap_err().to_string();
    assert!(msg(spec).contains("use larger segments"), "{}", msg(spec));
    assert_eq!(
        msg(CollSpec {
            root: 4,
            segment_bytes: 0,
            ..spec
        }),
        "root 4 is not a rank of a job of 4 ranks"
    );
    assert_eq!(
        msg(CollSpec {
            np: 0,
            root: 0,
            ..spec
        }),
        "a collective needs at least one rank"
    );
    assert!(matches!(
        spec.schedule(9).unwrap_err(),
        CollError::TooManySegments { .. }
    ));
    let fine = CollSpec {
        segment_bytes: 0,
        ..spec
    };
    assert!(matches!(
        fine.schedule(4),
        Err(CollError::RankOutOfRange { rank: 4, np: 4 })
    ));
    let k0 = CollSpec {
        algorithm: Algorithm::BcastKChain { chains: 0 },
        ..fine
    };
    assert!(matches!(k0.schedule(0), Err(CollError::BadChains { .. })));
}

#[test]
fn names_parse_back() {
    for c in Collective::ALL {
        assert_eq!(c.name().parse::<Collective>().unwrap(), c);
        for a in c.algorithms() {
            assert_eq!(Algorithm::parse(c, &a.to_string()).unwrap(), a);
            assert_eq!(a.collective(), c);
        }
    }
    assert_eq!(
        Algorithm::parse(Collective::Bcast, "kchain:7").unwrap(),
        Algorithm::BcastKChain { chains: 7 }
    );
    assert_eq!(
        Algorithm::parse(Collective::Bcast, "kchain").unwrap(),
        Algorithm::BcastKChain {
            chains: DEFAULT_CHAINS
        }
    );
    let err = Algorithm::parse(Collective::Gather, "chain").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown gather algorithm `chain` (known: linear, binomial)"
    );
    assert!(Algorithm::parse(Collective::Bcast, "kchain:0").is_err());
    assert!(Algorithm::parse(Collective::Bcast, "kchain:x").is_err());
    assert!(Algorithm::parse(Collective::Bcast, "binomial:2").is_err());
    assert!("scan".parse::<Collective>().is_err());
}

#[test]
fn a_million_ranks_cost_only_the_ranks_asked_for() {
    let np = 1 << 20;
    let spec = CollSpec {
        algorithm: Algorithm::BcastBinomial,
        np,
        size_bytes: 1 << 16,
        segment_bytes: 1 << 13,
        root: 0,
    };
    let root = spec.schedule(0).unwrap();
    // 8 segments to each of 20 children.
    assert_eq!(root.len(), 8 * 20);
    for rank in [1, 2, 3, 12345, np / 2, np - 1] {
        let s = spec.schedule(rank).unwrap();
        let children = topo::binomial(rank, 0, np).children.len();
        assert_eq!(s.len(), 8 * (children + 1), "rank {rank}");
        assert_eq!(
            s.heap_bytes(),
            std::mem::size_of::<Schedule>()
                + s.len() * std::mem::size_of::<Step>()
                + s.edges() * std::mem::size_of::<StepId>()
        );
    }
    for algorithm in [
        Algorithm::BcastBinary,
        Algorithm::BcastSplitBinary,
        Algorithm::BcastKChain { chains: 4 },
        Algorithm::AllreduceRecursiveDoubling,
        Algorithm::BarrierDissemination,
    ] {
        let s = CollSpec { algorithm, ..spec }.schedule(np - 7).unwrap();
        assert!(
            !s.is_empty() && s.len() < 200,
            "{algorithm}: {} steps",
            s.len()
        );
    }
}

/// Two ranks that each receive before they send: the replay must call it a
/// deadlock, whatever the protocol.
#[test]
fn analysis_finds_deadlocks_mismatches_and_hazards() {
    let slice = Slice::new(Buf::Data, 0, 4);
    let mutual_wait = |rank: usize| {
        let mut b = Builder::new(rank, 2);
        let r = b.recv(1 - rank, slice, 0, []);
        b.send(1 - rank, Slice::new(Buf::Tmp0, 0, 4), 0, [r]);
        b.finish()
    };
    for protocol in [Protocol::Eager, Protocol::Rendezvous] {
        let err = analysis::check_progress_of(vec![mutual_wait(0), mutual_wait(1)], protocol)
            .unwrap_err();
        assert!(err.to_string().starts_with("deadlock"), "{err}");
    }
    // Both send first and wait for the receive: fine when eager, and fine under
    // rendezvous too, since the receive is posted at once.
    let exchange = |rank: usize| {
        let mut b = Builder::new(rank, 2);
        b.send(1 - rank, Slice::new(Buf::Tmp0, 0, 4), 0, []);
        b.recv(1 - rank, slice, 0, []);
        b.finish()
    };
    analysis::check_progress_of(vec![exchange(0), exchange(1)], Protocol::Rendezvous).unwrap();
    // A receive of another length than was sent.
    let mut short = Builder::new(1, 2);
    short.recv(0, Slice::new(Buf::Data, 0, 3), 0, []);
    let err = analysis::check_matching_of(&[exchange(0), short.finish()]).unwrap_err();
    assert!(err.to_string().contains("from rank 0 to rank 1"), "{err}");
    // A send from bytes a receive writes, without an order between them.
    let mut b = Builder::new(0, 2);
    b.recv(1, slice, 0, []);
    b.send(1, Slice::new(Buf::Data, 2, 4), 0, []);
    assert!(matches!(
        analysis::check_hazards(&b.finish()),
        Err(analysis::AnalysisError::Hazard {
            first: 0,
            second: 1,
            ..
        })
    ));
    // A local step on a buffer a transfer holds, even on other bytes.
    let mut b = Builder::new(0, 2);
    let r = b.recv(1, Slice::new(Buf::Tmp0, 0, 4), 0, []);
    b.send(1, Slice::new(Buf::Data, 4, 4), 0, []);
    b.reduce(Slice::new(Buf::Tmp0, 0, 4), slice, 0, [r]);
    assert!(matches!(
        analysis::check_hazards(&b.finish()),
        Err(analysis::AnalysisError::Hazard {
            first: 1,
            second: 2,
            ..
        })
    ));
}

mod tcp {
    use super::*;
    use ngauge_tcp::{TcpOptions, TcpTransport};
    use ngauge_transport::WaitMode;
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Duration;

    fn run_tcp(np: usize, wait: WaitMode, specs: Vec<CollSpec>) {
        let specs = Arc::new(specs);
        let opts = TcpOptions {
            wait,
            timeout: Duration::from_secs(20),
            ..TcpOptions::default()
        };
        let handles: Vec<_> = inproc::world(np)
            .into_iter()
            .map(|(_, mut control)| {
                let specs = Arc::clone(&specs);
                let opts = opts.clone();
                thread::spawn(move || {
                    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
                    let t = TcpTransport::connect(&mut control, loopback, &opts)
                        .map_err(|e| e.to_string())?;
                    run_all(t, &specs)
                })
            })
            .collect();
        report(handles);
    }

    /// Every algorithm over real sockets, with a message (1 MiB) larger than the
    /// socket buffers, so sends complete only as the peer receives.
    fn every_algorithm(wait: WaitMode) {
        let np = 5;
        let mut specs = Vec::new();
        for algorithm in algorithms() {
            for (size_bytes, segment_bytes) in [(1, 0), (1000, 64), (1 << 20, 0), (1 << 20, 65536)]
            {
                if !algorithm.is_segmented() && segment_bytes > 0 {
                    continue;
                }
                specs.push(CollSpec {
                    algorithm,
                    np,
                    size_bytes,
                    segment_bytes,
                    root: np - 2,
                });
            }
        }
        run_tcp(np, wait, specs);
    }

    #[test]
    fn every_algorithm_over_tcp_polling() {
        every_algorithm(WaitMode::Poll);
    }

    #[test]
    fn every_algorithm_over_tcp_blocking() {
        every_algorithm(WaitMode::Block);
    }
}

mod udp {
    use super::*;
    use ngauge_transport::WaitMode;
    use ngauge_udp::{UdpOptions, UdpTransport};
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::Duration;

    /// Every algorithm over UDP datagrams on loopback, messages small enough that
    /// the socket buffers never overflow (a loss in a stream is not recovered).
    #[test]
    fn every_algorithm_over_udp() {
        let np = 5;
        let mut specs = Vec::new();
        for algorithm in algorithms() {
            for (size_bytes, segment_bytes) in [(1, 0), (1000, 64), (3000, 0)] {
                if !algorithm.is_segmented() && segment_bytes > 0 {
                    continue;
                }
                specs.push(CollSpec {
                    algorithm,
                    np,
                    size_bytes,
                    segment_bytes,
                    root: 1,
                });
            }
        }
        let specs = Arc::new(specs);
        let opts = UdpOptions {
            wait: WaitMode::Block,
            timeout: Duration::from_secs(20),
            ..UdpOptions::default()
        };
        let handles: Vec<_> = inproc::world(np)
            .into_iter()
            .map(|(_, mut control)| {
                let specs = Arc::clone(&specs);
                let opts = opts.clone();
                thread::spawn(move || {
                    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
                    let t = UdpTransport::connect(&mut control, loopback, &opts)
                        .map_err(|e| e.to_string())?;
                    run_all(t, &specs)
                })
            })
            .collect();
        report(handles);
    }
}

#[test]
fn alltoallv_refuses_a_matrix_of_another_job_and_uniform_is_the_alltoall() {
    let spec = |algorithm, np| CollSpec {
        algorithm,
        np,
        size_bytes: 10,
        segment_bytes: 0,
        root: 0,
    };
    let wrong = spec(Algorithm::AlltoallvLinear { counts: skewed(3) }, 4);
    assert_eq!(
        wrong.schedule(0).unwrap_err().to_string(),
        "the count matrix skewed-3 is 3 x 3, and the job has 4 ranks"
    );
    // Uniform counts move the all-to-all's blocks in its order, the own copy first.
    let uniform = Algorithm::AlltoallvPairwise {
        counts: Counts::Uniform,
    };
    let v = spec(uniform, 5).schedule(2).unwrap();
    let a = spec(Algorithm::AlltoallPairwise, 5).schedule(2).unwrap();
    let transfers = |s: &Schedule| -> Vec<Action> {
        let steps = s.steps().iter().map(|s| s.action);
        steps.filter(|a| a.is_transfer()).collect()
    };
    assert_eq!(transfers(&v), transfers(&a));
    assert_eq!(v.steps()[0].action.kind(), Kind::Copy);
    assert_eq!(a.steps().last().unwrap().action.kind(), Kind::Copy);
}
