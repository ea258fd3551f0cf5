use super::schedule::{bisections, both_directions, check, first_pairs, one_at_a_time, tournament};
use super::*;
use crate::clock::{TickRate, Ticks};
use crate::transport::inproc;
use std::cell::Cell;
use std::collections::BTreeSet;

#[test]
fn a_tournament_pairs_every_two_ranks_once_in_disjoint_rounds() {
    for np in 2..=9 {
        for seed in [0, 1, 42] {
            let rounds = tournament(np, seed);
            let want_rounds = if np % 2 == 0 { np - 1 } else { np };
            assert_eq!(rounds.len(), want_rounds, "np {np}");
            check(&rounds, np).unwrap();
            let mut seen = BTreeSet::new();
            for r in &rounds {
                assert_eq!(r.len(), np / 2, "np {np}: one rank idles at odd np");
                for &(a, b) in r {
                    assert!(seen.insert((a.min(b), a.max(b))), "np {np}: {a}-{b} twice");
                }
            }
            assert_eq!(seen.len(), np * (np - 1) / 2);
            let ordered: BTreeSet<Pair> = both_directions(&rounds).concat().into_iter().collect();
            assert_eq!(ordered.len(), np * (np - 1));
            assert_eq!(one_at_a_time(np, seed).len(), np * (np - 1));
        }
    }
    assert_eq!(tournament(8, 7), tournament(8, 7), "seeded");
    assert_ne!(tournament(8, 7), tournament(8, 8));
}

#[test]
fn a_bisection_is_a_seeded_perfect_matching() {
    for np in 2..=9 {
        let steps = bisections(np, 5, 3);
        assert_eq!(steps.len(), 5);
        check(&steps, np).unwrap();
        assert!(steps.iter().all(|s| s.len() == np / 2), "np {np}");
    }
    assert_eq!(bisections(8, 4, 7), bisections(8, 4, 7), "seeded");
    assert_ne!(bisections(8, 4, 7), bisections(8, 4, 8));
    // Over many draws every ordered pair of 4 ranks shows up.
    let seen: BTreeSet<Pair> = bisections(4, 64, 1).concat().into_iter().collect();
    assert_eq!(seen.len(), 12);
}

#[test]
fn bad_steps_are_refused() {
    assert!(check(&[vec![(0, 1), (1, 2)]], 3)
        .unwrap_err()
        .contains("rank 1 is in two pairs"));
    assert!(check(&[vec![(0, 0)]], 3).is_err());
    assert!(check(&[vec![(0, 3)]], 3).is_err());
    assert_eq!(first_pairs(2), vec![vec![(0, 1), (2, 3)]]);
}

/// A clock that advances by `step` ns per reading: every round measures `step`.
struct SteppingClock {
    next: Cell<u64>,
    step: u64,
}

impl Clock for SteppingClock {
    fn now(&self) -> Ticks {
        let t = self.next.get();
        self.next.set(t + self.step);
        Ticks(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::new(1e9)
    }
}

fn run_all(
    np: usize,
    steps: Vec<Vec<Pair>>,
    params: Params,
) -> Vec<Result<Vec<PairResult>, String>> {
    let handles: Vec<_> = inproc::world(np)
        .into_iter()
        .map(|(mut t, mut c)| {
            let (steps, params) = (steps.clone(), params.clone());
            std::thread::spawn(move || {
                let clock = SteppingClock {
                    next: Cell::new(0),
                    step: 4000,
                };
                let mut seen = 0;
                let out = run(&clock, &mut t, &mut c, &steps, &params, &mut |_| {
                    seen += 1;
                    Ok(())
                });
                out.inspect(|v| assert_eq!(v.len(), seen))
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn params(window: usize) -> Params {
    Params {
        sizes: vec![1, 1000],
        reps: 3,
        warmup: 1,
        check: true,
        native_loop: false,
        samples: false,
        window,
        stream: 0,
        bidirectional: false,
        precision: None,
    }
}

#[test]
fn every_ordered_pair_of_a_tournament_is_measured_with_its_data_checked() {
    let np = 4;
    let steps = both_directions(&tournament(np, 3));
    for window in [1, 4] {
        let out = run_all(np, steps.clone(), params(window));
        let r0 = out[0].as_ref().unwrap();
        for o in &out[1..] {
            assert!(o.as_ref().unwrap().is_empty());
        }
        assert_eq!(r0.len(), np * (np - 1) * 2, "12 ordered pairs, 2 sizes");
        let pairs: BTreeSet<Pair> = r0.iter().map(|r| (r.from, r.to)).collect();
        assert_eq!(pairs.len(), 12);
        for r in r0 {
            // 4000 ns per round, whatever the pair
            assert_eq!(r.half_rtt_us.median, 2.0);
            assert_eq!(r.concurrent_pairs, 2);
            assert_eq!(r.data_check, Some(true));
            assert_eq!(r.msgs_per_s, window as f64 / 4.0 * 1e6);
            let want = if window == 1 {
                r.size as f64 / 2.0
            } else {
                (window * r.size) as f64 / 4.0
            };
            assert_eq!(r.bandwidth_mbps, want);
        }
    }
}

#[test]
fn a_damaged_payload_names_the_receiving_rank() {
    struct Corrupting(inproc::InprocTransport);
    impl Transport for Corrupting {
        ngauge_transport::forward_transport!(0, except name, recv);
        fn name(&self) -> &'static str {
            "corrupting"
        }
        fn recv(
            &mut self,
            peer: Rank,
            region: crate::transport::Region,
        ) -> Result<(), crate::transport::TransportError> {
            self.0.recv(peer, region)?;
            if self.0.rank() == 3 && region.len > 0 {
                self.0.buffer_mut(region.buffer)?[region.offset] ^= 1;
            }
            Ok(())
        }
    }
    let handles: Vec<_> = inproc::world(4)
        .into_iter()
        .map(|(t, mut c)| {
            std::thread::spawn(move || {
                let mut t = Corrupting(t);
                let clock = SteppingClock {
                    next: Cell::new(0),
                    step: 10,
                };
                run(
                    &clock,
                    &mut t,
                    &mut c,
                    &first_pairs(2),
                    &params(1),
                    &mut |_| Ok(()),
                )
                .map(|v| v.len())
                .map_err(|e| e.to_string())
            })
        })
        .collect();
    let out: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let e = out[0].as_ref().unwrap_err();
    assert!(e.contains("rank 3 received"), "{e}");
}

#[test]
fn two_pairs_at_once_give_the_first_pairs_figures_and_the_totals() {
    let mut p = params(4);
    p.sizes = vec![1000];
    let out = run_all(4, first_pairs(2), p);
    let r0 = out[0].as_ref().unwrap().clone();
    let r = size_result(r0, 3, false).unwrap();
    let multi = r.pairs.as_ref().unwrap();
    let got: Vec<Pair> = multi.per_pair.iter().map(|p| (p.from, p.to)).collect();
    assert_eq!(got, [(0, 1), (2, 3)]);
    // 4 messages of 1000 B per 4000 ns round, per pair
    assert_eq!((r.size, r.reps, r.bandwidth_mbps), (1000, 3, 1000.0));
    assert_eq!(multi.total_bandwidth_mbps, 2000.0);
    assert_eq!(multi.total_msgs_per_s, 2e6);
    assert_eq!(r.data_check, Some(true));
    assert!(size_result(Vec::new(), 3, false).is_none());
}
