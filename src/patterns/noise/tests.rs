//! The selfish loop and the injector on a clock whose every reading is scripted:
//! 1 tick = 1 ns, each read costs `READ` ticks, and the script takes the CPU away
//! for known lengths at known instants, so every detour is known exactly.

use super::*;
use crate::clock::TickRate;
use crate::coll::Uninterrupted;
use std::cell::{Cell, RefCell};

const READ: u64 = 20;

/// A clock with scripted detours: when a read crosses `at`, `length` more ticks pass.
struct Scripted {
    now: Cell<u64>,
    detours: RefCell<std::collections::VecDeque<(u64, u64)>>,
}

impl Scripted {
    fn new(detours: &[(u64, u64)]) -> Self {
        Scripted {
            now: Cell::new(1_000_000),
            detours: RefCell::new(detours.iter().copied().collect()),
        }
    }
}

impl Clock for Scripted {
    fn now(&self) -> Ticks {
        let mut t = self.now.get() + READ;
        let mut script = self.detours.borrow_mut();
        while let Some(&(at, length)) = script.front() {
            if t < at {
                break;
            }
            t += length;
            script.pop_front();
        }
        self.now.set(t);
        Ticks(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::new(1e9)
    }
}

fn spec(duration_ns: f64) -> SelfishSpec {
    SelfishSpec {
        duration_ns,
        threshold: 5.0,
        calibration_reads: 1_000,
        max_detours: 100,
    }
}

#[test]
fn selfish_finds_every_scripted_detour_exactly() {
    // Calibration takes 1,001 reads (20 us); the detours come later.
    let script = [
        (2_000_000, 5_000),
        (2_500_000, 150),
        (3_000_000, 250_000),
        (4_000_000, 101), // 121 ticks: just above 5 x 20 = 100
        (4_100_000, 80),  // 100 ticks: not above the threshold
    ];
    let clock = Scripted::new(&script);
    let run = selfish(&clock, &spec(5e6), &mut Uninterrupted).unwrap();
    assert_eq!(run.min_loop_ns, READ as f64);
    assert_eq!(run.threshold_ns, 100.0);
    let lengths: Vec<f64> = run.detours.iter().map(|d| d.duration_ns).collect();
    // Each detour is its script length: the loop's own 20 ns are taken off.
    assert_eq!(lengths, vec![5_000.0, 150.0, 250_000.0, 101.0]);
    assert_eq!(run.detour_count, 4);
    assert_eq!(run.lost_ns, 255_251.0);
    // Starts: the reading before the detour, within one read of the script.
    let starts: Vec<f64> = run.detours.iter().map(|d| d.at_ns).collect();
    for (pair, script_pair) in starts.windows(2).zip(script.windows(2)) {
        let gap = pair[1] - pair[0];
        let truth = (script_pair[1].0 - script_pair[0].0) as f64;
        assert!((gap - truth).abs() <= READ as f64, "{gap} vs {truth}");
    }
    // The measurement spans its duration (to within one read plus the last
    // detour it ran into) and its iterations are the reads that fit.
    assert!(run.measured_ns >= 5e6 && run.measured_ns < 5e6 + READ as f64);
    let expected_iterations = (run.measured_ns - run.lost_ns) / READ as f64 - 1.0;
    assert!(
        (run.iterations as f64 - expected_iterations).abs() <= 5.0,
        "{} iterations, expected {expected_iterations}",
        run.iterations
    );
    let fraction = 255_251.0 / run.measured_ns;
    assert!((run.cpu_fraction_lost() - fraction).abs() < 1e-12);
}

#[test]
fn detours_beyond_the_cap_still_count() {
    let script: Vec<(u64, u64)> = (0..10).map(|k| (1_100_000 + k * 10_000, 1_000)).collect();
    let clock = Scripted::new(&script);
    let mut s = spec(1e6);
    s.max_detours = 3;
    let run = selfish(&clock, &s, &mut Uninterrupted).unwrap();
    assert_eq!(run.detours.len(), 3);
    assert_eq!(run.detour_count, 10);
    assert_eq!(run.lost_ns, 10_000.0);
}

#[test]
fn an_injector_takes_its_windows_and_the_loop_finds_them() {
    // Period 100 us, detours of 7 us, starting 50 us after the clock's start: the
    // loop polls the injector every iteration, so it finds one detour per period.
    let clock = Scripted::new(&[]);
    let injection: NoiseInjection = "100us:7us".parse().unwrap();
    let epoch = Ticks(1_000_000 + 50_000);
    let mut injector = Injector::with_epoch(&clock, injection, epoch).unwrap();
    let run = selfish(&clock, &spec(1e6), &mut injector).unwrap();
    // A poll reads the clock too: the fastest iteration is two reads.
    assert_eq!(run.min_loop_ns, 2.0 * READ as f64);
    assert!(run.detour_count >= 9 && run.detour_count <= 11, "{run:?}");
    for d in &run.detours {
        // Entered somewhere in the first read of the window: up to 7 us spun, the
        // read that noticed it and the loop's own read on top.
        assert!(
            d.duration_ns > 7_000.0 - 2.0 * READ as f64 && d.duration_ns <= 7_000.0 + READ as f64,
            "{d:?}"
        );
    }
    for pair in run.detours.windows(2) {
        let gap = pair[1].at_ns - pair[0].at_ns;
        assert!((gap - 100_000.0).abs() <= 2.0 * READ as f64, "gap {gap}");
    }
    // The calibration (1,001 iterations of 40 ns) ended before the first window,
    // so every detour the injector served is one the loop recorded.
    assert_eq!(injector.detours, run.detour_count);
}

#[test]
fn the_injector_spins_to_the_end_of_the_window_only_inside_one() {
    let clock = Scripted::new(&[]);
    let injection = NoiseInjection {
        period_ns: 1_000.0,
        duration_ns: 300.0,
    };
    let epoch = Ticks(2_000_000);
    let injector = Injector::with_epoch(&clock, injection, epoch).unwrap();
    assert_eq!(injector.detour_end(Ticks(1_999_999)), None);
    assert_eq!(injector.detour_end(epoch), Some(Ticks(2_000_300)));
    assert_eq!(
        injector.detour_end(Ticks(2_000_299)),
        Some(Ticks(2_000_300))
    );
    assert_eq!(injector.detour_end(Ticks(2_000_300)), None);
    assert_eq!(
        injector.detour_end(Ticks(2_005_100)),
        Some(Ticks(2_005_300))
    );
}

impl NoiseInjection {
    /// The fraction of the CPU it takes: `duration / period`.
    fn cpu_fraction(&self) -> f64 {
        self.duration_ns / self.period_ns
    }
}

#[test]
fn noise_patterns_parse_and_bad_ones_are_named() {
    let n: NoiseInjection = "1ms:50us".parse().unwrap();
    assert_eq!(n.period_ns, 1e6);
    assert_eq!(n.duration_ns, 5e4);
    assert_eq!(n.cpu_fraction(), 0.05);
    for bad in ["1ms", "1ms:", "x:50us", "1ms:50"] {
        assert_eq!(
            bad.parse::<NoiseInjection>().unwrap_err().to_string(),
            format!("`{bad}` is not a noise pattern PERIOD:DURATION (e.g. 1ms:50us)")
        );
    }
    for bad in ["50us:1ms", "1ms:1ms", "1ms:0"] {
        assert_eq!(
            bad.parse::<NoiseInjection>().unwrap_err().to_string(),
            format!(
                "noise pattern `{bad}`: the duration must be positive and shorter than the period"
            )
        );
    }
}

#[test]
fn bad_specs_are_refused() {
    let clock = Scripted::new(&[]);
    let mut s = spec(1e6);
    s.threshold = 1.0;
    assert!(selfish(&clock, &s, &mut Uninterrupted)
        .unwrap_err()
        .to_string()
        .contains("must be above 1"));
    let mut s = spec(0.0);
    s.threshold = 5.0;
    assert!(selfish(&clock, &s, &mut Uninterrupted).is_err());
}

#[test]
fn histogram_bins_by_powers_of_two() {
    let d = |ns: f64| Detour {
        at_ns: 0.0,
        duration_ns: ns,
    };
    assert!(histogram(&[]).is_empty());
    let bins = histogram(&[d(300.0), d(260.0), d(1_100.0), d(511.9)]);
    let got: Vec<(f64, f64, u64)> = bins.iter().map(|b| (b.from_ns, b.to_ns, b.count)).collect();
    assert_eq!(
        got,
        vec![(256.0, 512.0, 3), (512.0, 1024.0, 0), (1024.0, 2048.0, 1)]
    );
    let tiny = histogram(&[d(0.5), d(1.5)]);
    assert_eq!(tiny.len(), 1);
    assert_eq!(
        (tiny[0].from_ns, tiny[0].to_ns, tiny[0].count),
        (0.0, 2.0, 2)
    );
}

#[test]
fn every_rank_runs_and_rank_0_gets_all() {
    let world = ngauge_transport::inproc::world(3);
    let results: Vec<Vec<CoreNoise>> = std::thread::scope(|s| {
        let handles: Vec<_> = world
            .into_iter()
            .map(|(_, mut control)| {
                s.spawn(move || {
                    let rank = control.rank();
                    let clock = Scripted::new(&[(
                        1_500_000 + rank as u64 * 1_000,
                        1_000 * (rank as u64 + 1),
                    )]);
                    measure(
                        &clock,
                        &mut control,
                        &spec(1e6),
                        Some(rank + 10),
                        &mut Uninterrupted,
                    )
                    .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results[1].is_empty() && results[2].is_empty());
    let all = &results[0];
    assert_eq!(all.len(), 3);
    for (rank, core) in all.iter().enumerate() {
        assert_eq!(core.rank, rank);
        assert_eq!(core.core, Some(rank + 10));
        assert_eq!(core.run.detour_count, 1);
        assert_eq!(core.run.lost_ns, 1_000.0 * (rank as f64 + 1.0));
    }
}

/// Noise injected into our executor in the virtual-time world (20 us per message,
/// 1-tick reads): a chain broadcast 0 -> 1 -> 2 ends at `2 L = 40 us`; with rank 1
/// in a 50 us detour from the start, it receives at 50 us and rank 2 ends at 70 us.
#[test]
fn injected_noise_in_the_executor_delays_a_chain_exactly() {
    use crate::coll::{Algorithm, CollOp, CollSpec, Scheduled};
    use crate::sync::sim::{self, NetModel, SIM_HZ};
    let net = NetModel {
        latency_ns: 20_000.0,
        jitter_ns: 0.0,
        outlier_every: 0,
        read_cost_ns: 0.4,
        ..NetModel::default()
    };
    let injection: NoiseInjection = "1ms:50us".parse().unwrap();
    for (injected, expected_ns) in [(false, 40_000.0), (true, 70_000.0)] {
        let ends = sim::run(&[None, None, None], net, |mut r| {
            let spec = CollSpec {
                algorithm: Algorithm::BcastChain,
                np: 3,
                size_bytes: 8,
                segment_bytes: 0,
                root: 0,
            };
            let rank = r.control.rank();
            let mut op = Scheduled::new(&mut r.transport, spec).unwrap();
            r.control.barrier().unwrap();
            let start = r.clock.now();
            let mut injector = Injector::new(&r.clock, injection).unwrap();
            if injected && rank == 1 {
                op.run(&mut injector).unwrap();
                assert_eq!(injector.detours, 1);
            } else {
                op.run(&mut Uninterrupted).unwrap();
            }
            let end = r.clock.now();
            (end.since(start) as f64) * 1e9 / SIM_HZ
        });
        let took = ends[2];
        assert!(
            took >= expected_ns && took < expected_ns + 10.0,
            "injected {injected}: rank 2 took {took} ns"
        );
    }
}
