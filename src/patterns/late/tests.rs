//! Eq. (5) on known numbers, and the whole pattern in the virtual-time world
//! ([`crate::sync::sim`]): a message takes exactly `L`, a clock read one tick, the
//! clocks are milliseconds apart with exact models, so every call's global time is
//! known and `t_d` can be predicted for each delayed rank.

use super::*;
use crate::clock::{Skew, Ticks};
use crate::coll::{Algorithm, CollSpec, Scheduled, Uninterrupted};
use crate::patterns::rounds::CallPlan;
use crate::sync::sim::{self, NetModel, SIM_HZ, SIM_START};
use ngauge_transport::WaitMode;

#[test]
fn benefit_is_eq_5() {
    // b = (t0 + d - td) / td.
    assert_eq!(benefit(10.0, 5.0, 10.0), 0.5); // fully hidden: d / td
    assert_eq!(benefit(10.0, 5.0, 15.0), 0.0); // the delay adds
    assert_eq!(benefit(10.0, 5.0, 20.0), -0.25); // costs more than the delay
    assert_eq!(benefit(60.0, 50.0, 70.0), 40.0 / 70.0);
    assert_eq!(benefit(4.0, 0.0, 4.0), 0.0);
}

/// A point of valid calls with the given runtimes and effective delays, ns.
fn point(delay_ns: f64, runtimes_ns: &[f64], effective_ns: &[f64]) -> LatePoint {
    LatePoint {
        delay_ns,
        valid: runtimes_ns.len(),
        invalid: 0,
        missed_delay: 0,
        runtimes_ns: runtimes_ns.to_vec(),
        effective_delays_ns: effective_ns.to_vec(),
        valid_effective_delays_ns: effective_ns.to_vec(),
        wanted: runtimes_ns.len(),
    }
}

#[test]
fn eq_5_takes_the_effective_delay_not_the_one_asked_for() {
    // t0 = 60 us; d asked 50 us, but the late rank entered 45 us late in the
    // fastest call (t_d = 70 us) and 47 us in the median one (t_d = 80 us).
    let times = LateTimes {
        baseline: point(0.0, &[60_000.0, 61_000.0, 62_000.0], &[0.0, 0.0, 0.0]),
        points: vec![point(
            50_000.0,
            &[80_000.0, 70_000.0, 90_000.0],
            &[47_000.0, 45_000.0, 52_000.0],
        )],
        delayed: vec![0],
        window_ns: 1e6,
        rounds: 1,
    };
    let b = times.benefits()[0].unwrap();
    assert_eq!((b.delay_ns, b.effective_delay_min_ns), (50_000.0, 45_000.0));
    // b = (t0 + d_eff - td) / td = (60 + 45 - 70) / 70 = 0.5.
    assert_eq!(b.benefit_min, 0.5);
    // Medians: t0 61, d_eff 47, td 80: (61 + 47 - 80) / 80 = 0.35.
    assert_eq!(b.effective_delay_median_ns, 47_000.0);
    assert_eq!(
        b.benefit_median,
        (61_000.0 + 47_000.0 - 80_000.0) / 80_000.0
    );
    // With the asked-for d the minimum would have read (60 + 50 - 70) / 70.
    assert_ne!(b.benefit_min, benefit(60_000.0, 50_000.0, 70_000.0));
}

#[test]
fn a_delay_of_0_is_the_baseline_whatever_the_start_skew() {
    // The undelayed calls repeated as the delay 0: their "effective delays" are
    // the start skew of the clocks (here -19 us), which eq. (5) must not credit.
    let calls = [60_000.0, 61_000.0, 62_000.0];
    let times = LateTimes {
        baseline: point(0.0, &calls, &[0.0, 0.0, 0.0]),
        points: vec![point(0.0, &calls, &[-19_000.0, -18_000.0, 3_000.0])],
        delayed: vec![0],
        window_ns: 1e6,
        rounds: 1,
    };
    let b = times.benefits()[0].unwrap();
    assert_eq!(
        (b.effective_delay_min_ns, b.effective_delay_median_ns),
        (0.0, 0.0)
    );
    assert_eq!((b.benefit_min, b.benefit_median), (0.0, 0.0));
}

#[test]
fn delayed_ranks_parse_and_resolve() {
    let r = |s: &str, np: usize| s.parse::<DelayedRanks>().unwrap().resolve(np);
    assert_eq!(r("0", 4).unwrap(), vec![0]);
    assert_eq!(r("3, 1,1", 4).unwrap(), vec![1, 3]);
    assert_eq!(r("last", 4).unwrap(), vec![3]);
    let drawn = r("random:7", 16).unwrap();
    assert_eq!(drawn.len(), 1);
    assert_eq!(
        drawn,
        r("random:7", 16).unwrap(),
        "the same seed draws the same rank"
    );
    let all: std::collections::BTreeSet<Rank> = (0..64)
        .map(|s| r(&format!("random:{s}"), 4).unwrap()[0])
        .collect();
    assert_eq!(all.len(), 4, "64 seeds reach every rank of 4");
    assert_eq!(
        r("4", 4).unwrap_err().to_string(),
        "delayed rank 4 is not a rank of a job of 4 ranks"
    );
    assert_eq!(
        r("0,1", 2).unwrap_err().to_string(),
        "all 2 ranks are delayed: nobody arrives late; delay fewer ranks"
    );
    for bad in ["", "x", "random:", "random:-1", "1,,2"] {
        assert_eq!(
            bad.parse::<DelayedRanks>().unwrap_err().to_string(),
            format!("`{bad}` is not a set of delayed ranks: a list (0,3), last, or random[:SEED]")
        );
    }
}

const L_NS: f64 = 20_000.0;
const NP: usize = 4;

fn exact_net() -> NetModel {
    NetModel {
        latency_ns: L_NS,
        jitter_ns: 0.0,
        outlier_every: 0,
        // One tick: every instant stays on the tick grid, so a spin ends exactly on
        // its deadline and starts are exact.
        read_cost_ns: 0.4,
        ..NetModel::default()
    }
}

fn skews() -> Vec<Option<Skew>> {
    (0..NP)
        .map(|r| {
            (r > 0).then_some(Skew {
                offset_ticks: (r as f64 - 1.5) * 1e-3 * SIM_HZ,
                drift: 0.0,
                epoch: SIM_START,
            })
        })
        .collect()
}

fn late_sim(
    algorithm: Algorithm,
    delayed: Vec<Rank>,
    delays_ns: Vec<f64>,
    mode: CallMode,
) -> LateTimes {
    late_sim_oversleeping(algorithm, delayed, delays_ns, mode, None)
}

/// A clock whose undelayed rank wakes `extra_ticks` late from every `period`-th
/// window wait (from the `phase`-th on): a blocking wait on a loaded host that
/// oversleeps, within the tenth of the window a start may lag. In `measure` the
/// window waits are the only `spin_until` calls, one per call, so wait `c` is the
/// call with delay `delays[c % n]`.
struct Oversleeping<'a> {
    inner: &'a crate::sim::SimClock,
    waits: std::cell::Cell<u64>,
    period: u64,
    phase: u64,
    extra_ticks: u64,
}

impl Clock for Oversleeping<'_> {
    fn now(&self) -> Ticks {
        self.inner.now()
    }
    fn rate(&self) -> crate::clock::TickRate {
        self.inner.rate()
    }
    fn spin_until(&self, deadline: Ticks) -> Ticks {
        let c = self.waits.get();
        self.waits.set(c + 1);
        let extra = if c % self.period == self.phase {
            self.extra_ticks
        } else {
            0
        };
        self.inner.spin_until(deadline.plus(extra))
    }
}

/// `late_sim` where every undelayed rank oversleeps as `oversleep` says:
/// `(period, phase, extra_ns)`.
fn late_sim_oversleeping(
    algorithm: Algorithm,
    delayed: Vec<Rank>,
    delays_ns: Vec<f64>,
    mode: CallMode,
    oversleep: Option<(u64, u64, f64)>,
) -> LateTimes {
    let skews = skews();
    let spec = LateSpec {
        delays_ns,
        delayed,
        mode,
        plan: CallPlan {
            reps: 5,
            warmup: 2,
            check_data: true,
            window_wait: WaitMode::Poll,
            max_rounds: 3,
        },
    };
    let out = sim::run(&skews, exact_net(), |mut r| {
        let model = match skews[r.control.rank()] {
            Some(s) => ClockModel::offset_only(s.offset_ticks),
            None => ClockModel::IDENTITY,
        };
        let coll = CollSpec {
            algorithm,
            np: NP,
            size_bytes: 64,
            segment_bytes: 0,
            root: 0,
        };
        let mut op = Scheduled::new(&mut r.transport, coll).unwrap();
        let clock = Oversleeping {
            inner: &r.clock,
            waits: std::cell::Cell::new(0),
            period: 1,
            phase: 0,
            extra_ticks: 0,
        };
        let clock = match oversleep {
            Some((period, phase, extra_ns)) if !spec.delayed.contains(&r.control.rank()) => {
                Oversleeping {
                    period,
                    phase,
                    extra_ticks: (extra_ns * SIM_HZ / 1e9).round() as u64,
                    ..clock
                }
            }
            _ => clock,
        };
        let times = measure(
            &clock,
            &mut op,
            &mut r.control,
            &model,
            &spec,
            &mut Uninterrupted,
        )
        .unwrap();
        op.free().unwrap();
        times
    });
    out.into_iter().next().expect("rank 0")
}

/// The chain broadcast 0 -> 1 -> 2 -> 3 takes `3 L`; rank `k` receives at `k L`.
#[test]
fn a_hidden_delay_gives_d_over_td() {
    // Rank 3 posts its receive 30 us late, before its message arrives at 60 us:
    // nothing changes, t_d = t_0, and b = d / t_d (the paper's "value of 1" case
    // scaled: all of the delay is hidden).
    let times = late_sim(
        Algorithm::BcastChain,
        vec![3],
        vec![30_000.0, 70_000.0],
        CallMode::Blocking,
    );
    assert_eq!(times.delayed, vec![3]);
    for (p, d) in times.points.iter().zip([30_000.0, 70_000.0]) {
        let effective = p.effective_delay_median_ns().unwrap();
        assert!((effective - d).abs() < 1.0, "{effective} vs {d}");
        assert_eq!(p.missed_delay, 0);
    }
    let t0 = times.baseline.min_ns().unwrap();
    let truth = 3.0 * L_NS;
    assert!(t0 >= truth && t0 < truth + 1.0, "t0 {t0} ns");
    // Every call is identical.
    assert_eq!(times.baseline.median_ns(), Some(t0));
    let p = &times.points[0];
    assert_eq!(p.valid, 5);
    assert_eq!(p.min_ns(), Some(t0));
    let b = times.benefits()[0].unwrap();
    assert_eq!(b.td_min_ns, t0);
    // Eq. (5) with the delay each call had: t_d = t_0, so b = d_eff / t_d.
    assert!((b.effective_delay_min_ns - 30_000.0).abs() < 1.0, "{b:?}");
    let expected = b.effective_delay_min_ns / b.td_min_ns;
    assert!(
        (b.benefit_min - expected).abs() < 1e-12,
        "{} vs {expected}",
        b.benefit_min
    );
    let expected = b.effective_delay_median_ns / b.td_median_ns;
    assert!((b.benefit_median - expected).abs() < 1e-12);
    // In the same run, 70 us is more than the 60 us it can hide: rank 3 receives
    // when it enters, t_d = d (+ the closing read, as t_0), b = 3 L / t_d.
    let b = times.benefits()[1].unwrap();
    assert!(
        (b.td_min_ns - 70_000.0 - (t0 - truth)).abs() < 1e-6,
        "{b:?}"
    );
    let hidden = truth + b.effective_delay_min_ns - 70_000.0;
    assert!(
        (b.benefit_min - hidden / b.td_min_ns).abs() < 1e-12,
        "{b:?}"
    );
}

#[test]
fn a_late_root_adds_its_delay_and_a_late_middle_rank_part_of_it() {
    // The root 50 us late: everything shifts, t_d = t_0 + d, b = 0.
    let root = late_sim(
        Algorithm::BcastChain,
        vec![0],
        vec![50_000.0],
        CallMode::Blocking,
    );
    let b = root.benefits()[0].unwrap();
    assert!((b.td_min_ns - b.t0_min_ns - 50_000.0).abs() < 1e-6, "{b:?}");
    assert!(b.benefit_min.abs() < 1e-12, "{b:?}");

    // Rank 2 50 us late: its segment arrived at 40 us, it forwards at 50 us, rank 3
    // ends at 70 us: t_d = t_0 + 10 us, b = (60 + 50 - 70) / 70 = 4/7.
    let mid = late_sim(
        Algorithm::BcastChain,
        vec![2],
        vec![50_000.0],
        CallMode::Nonblocking,
    );
    let b = mid.benefits()[0].unwrap();
    assert!((b.td_min_ns - b.t0_min_ns - 10_000.0).abs() < 1e-6, "{b:?}");
    let expected = (b.t0_min_ns + b.effective_delay_min_ns - b.td_min_ns) / b.td_min_ns;
    assert_eq!(b.benefit_min, expected);
    assert!((b.benefit_min - 4.0 / 7.0).abs() < 1e-4, "{b:?}");
}

#[test]
fn delays_are_interleaved_and_zero_repeats_the_baseline() {
    let times = late_sim(
        Algorithm::AllreduceRecursiveDoubling,
        vec![1],
        vec![0.0, 5_000.0, 500_000.0],
        CallMode::Blocking,
    );
    assert_eq!(times.points.len(), 3);
    assert_eq!(times.points[0].runtimes_ns, times.baseline.runtimes_ns);
    assert_eq!(times.benefits()[0].unwrap().benefit_min, 0.0);
    for p in &times.points {
        assert_eq!(p.valid, 5, "{p:?}");
    }
    // Recursive doubling on 4 ranks: two rounds of L; rank 1 late by d holds its
    // partner, then everyone: t_d = d + 2 L, b = (2L + d - d - 2L) / t_d = 0.
    let b = times.benefits()[2].unwrap();
    assert!(b.benefit_min.abs() < 1e-9, "{b:?}");
    // The window was sized for the largest delay: no call overran.
    assert!(times.window_ns > 500_000.0);
}

#[test]
fn bad_specs_are_refused() {
    let mut world = ngauge_transport::inproc::world(2);
    let (mut t, mut c) = world.remove(0);
    let coll = CollSpec {
        algorithm: Algorithm::BarrierDissemination,
        np: 2,
        size_bytes: 0,
        segment_bytes: 0,
        root: 0,
    };
    let clock = crate::clock::SystemClock::calibrated().0;
    let mut op = Scheduled::new(&mut t, coll).unwrap();
    let spec = LateSpec {
        delays_ns: vec![1.0],
        delayed: vec![0, 1],
        mode: CallMode::Blocking,
        plan: CallPlan {
            reps: 1,
            warmup: 1,
            check_data: false,
            window_wait: WaitMode::Poll,
            max_rounds: 1,
        },
    };
    let err = measure(
        &clock,
        &mut op,
        &mut c,
        &ClockModel::IDENTITY,
        &spec,
        &mut Uninterrupted,
    )
    .unwrap_err();
    assert!(err.to_string().contains("nobody arrives late"), "{err}");
    let spec = LateSpec {
        delayed: vec![0],
        plan: CallPlan {
            reps: 0,
            ..spec.plan
        },
        ..spec
    };
    let err = measure(
        &clock,
        &mut op,
        &mut c,
        &ClockModel::IDENTITY,
        &spec,
        &mut Uninterrupted,
    )
    .unwrap_err();
    assert!(err.to_string().contains("at least one repetition"), "{err}");
}

/// The defect of one loaded run (td = 124 us at d = 500 us, b = 3.65): the
/// undelayed ranks wake 45 us late from the windows of the 50 us calls, within the
/// tenth of the (500 us) window a start may lag, so the delayed rank leads them by
/// 5 us, not 50. Recursive doubling then ends 2 L after the late rank's entry: t_d
/// = 5 + 40 = 45 us < d, and eq. (5) with the nominal d gave b = (40 + 50 - 45) /
/// 45 = 1.0 where the truth is 0. Those calls miss their delay and the 50 us point
/// is undecided; the 500 us calls, not disturbed, still give b = 0.
#[test]
fn undelayed_ranks_that_start_late_make_the_delay_undecided() {
    let times = late_sim_oversleeping(
        Algorithm::AllreduceRecursiveDoubling,
        vec![1],
        vec![50_000.0, 500_000.0],
        CallMode::Blocking,
        // Delays 0, 50 us, 500 us: wait c is a 50 us call when c % 3 == 1.
        Some((3, 1, 45_000.0)),
    );
    assert!(
        times.window_ns / 10.0 > 45_000.0,
        "the lag is within the window's tenth: {}",
        times.window_ns
    );
    let (late, long) = (&times.points[0], &times.points[1]);
    // Every 50 us call started and ended in its window, and every one missed d.
    assert_eq!(late.valid, 0, "{late:?}");
    assert_eq!(late.missed_delay, late.invalid, "{late:?}");
    assert_eq!(late.invalid, 5 * times.rounds, "{late:?}");
    let effective = late.effective_delay_median_ns().unwrap();
    assert!((effective - 5_000.0).abs() < 1.0, "{effective}");
    assert!(!late.decided());
    assert_eq!(times.benefits()[0], None, "no b for an undecided delay");
    // The undisturbed delays are exact and decided.
    assert!(times.baseline.decided() && long.decided());
    assert_eq!(long.missed_delay, 0);
    let effective = long.effective_delay_median_ns().unwrap();
    assert!((effective - 500_000.0).abs() < 1.0, "{effective}");
    let b = times.benefits()[1].unwrap();
    assert!(b.benefit_min.abs() < 1e-9, "{b:?}");
}

#[test]
fn the_tolerance_is_a_tenth_of_d_with_the_sync_floor() {
    assert_eq!(delay_tolerance_ns(0.0), DELAY_FLOOR_NS);
    assert_eq!(delay_tolerance_ns(50_000.0), DELAY_FLOOR_NS);
    assert_eq!(delay_tolerance_ns(500_000.0), 50_000.0);
}
