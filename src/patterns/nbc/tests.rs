//! NBCBench in the virtual-time world ([`crate::sync::sim`]): a message takes
//! exactly `L`, a clock read one tick, a unit of the test workload one nanosecond
//! of virtual time. A chain broadcast 0 -> 1 -> 2 on our executor (progress only
//! inside test and wait) has a known answer:
//!
//! - `t_pure`: rank 2 receives at `2 L`, so `t_b = 2 L`.
//! - without progress calls, rank 1 computes for `t_b` and forwards only in its
//!   wait, at `2 L`; rank 2 ends at `3 L`: `t_ovrl = 3 L`, `t_CPU = 2 L`, overlap
//!   `(2 L + 2 L - 3 L) / 2 L = 50 %`.
//! - with a test every microsecond, rank 1 forwards at `L` (plus at most one
//!   interval), rank 2's message is there when its computation ends: overlap
//!   100 % (to within the interval).

use super::*;
use crate::coll::{Algorithm, CollSpec, Interrupts, Scheduled};
use crate::patterns::rounds::CallPlan;
use crate::sim::SimClock;
use crate::sync::sim::{self, NetModel};
use ngauge_transport::WaitMode;

const L_NS: f64 = 20_000.0;

/// One unit is one nanosecond of virtual time.
struct SimWork<'c>(&'c SimClock);

impl Workload for SimWork<'_> {
    fn work(&mut self, units: u64) {
        self.0.advance_ns(units as f64);
    }
}

fn nbc_sim(compute: Compute, test_every_ns: Option<f64>) -> NbcTimes {
    let net = NetModel {
        latency_ns: L_NS,
        jitter_ns: 0.0,
        outlier_every: 0,
        read_cost_ns: 0.4,
        ..NetModel::default()
    };
    let spec = NbcSpec {
        compute,
        test_every_ns,
        plan: CallPlan {
            reps: 4,
            warmup: 1,
            check_data: true,
            window_wait: WaitMode::Poll,
            max_rounds: 3,
        },
    };
    let out = sim::run(&[None, None, None], net, |mut r| {
        let coll = CollSpec {
            algorithm: Algorithm::BcastChain,
            np: 3,
            size_bytes: 100,
            segment_bytes: 0,
            root: 0,
        };
        let mut op = Scheduled::new(&mut r.transport, coll).unwrap();
        let mut work = SimWork(&r.clock);
        let times = measure(
            &r.clock,
            &mut op,
            &mut r.control,
            &ClockModel::IDENTITY,
            &spec,
            &mut work,
        )
        .unwrap();
        op.free().unwrap();
        times
    });
    out.into_iter().next().expect("rank 0")
}

fn near(got: f64, truth: f64, tolerance: f64) -> bool {
    (got - truth).abs() <= tolerance
}

#[test]
fn overlap_is_imb_nbcs_formula() {
    assert_eq!(overlap_pct(10.0, 10.0, 10.0), 100.0);
    assert_eq!(overlap_pct(10.0, 10.0, 20.0), 0.0);
    assert_eq!(overlap_pct(10.0, 10.0, 15.0), 50.0);
    assert_eq!(overlap_pct(10.0, 4.0, 12.0), 50.0); // (10 + 4 - 12) / 4
    assert_eq!(overlap_pct(10.0, 10.0, 25.0), 0.0); // worse than none: clamped
    assert_eq!(overlap_pct(10.0, 10.0, 5.0), 100.0); // better than perfect: clamped
    assert_eq!(overlap_pct(0.0, 10.0, 10.0), 0.0);
}

#[test]
fn without_progress_calls_a_chain_overlaps_half() {
    for compute in [Compute::Time, Compute::Work] {
        let times = nbc_sim(compute, None);
        assert_eq!(
            (times.pure_calls, times.ovrl_calls),
            ((4, 0), (4, 0)),
            "{times:?}"
        );
        assert!(
            near(times.t_b_ns, 2.0 * L_NS, 2.0),
            "{compute:?} t_b {}",
            times.t_b_ns
        );
        let r = times.reported().unwrap();
        assert_eq!(r.rank, 2, "the last rank of the chain waits longest");
        assert!(near(r.t_pure_ns, 2.0 * L_NS, 2.0), "{compute:?} {r:?}");
        assert!(near(r.t_cpu_ns, 2.0 * L_NS, 2.0), "{compute:?} {r:?}");
        assert!(near(r.t_ovrl_ns, 3.0 * L_NS, 5.0), "{compute:?} {r:?}");
        assert!(near(r.t_wait_ns, L_NS, 5.0), "{compute:?} {r:?}");
        assert!(near(r.overlap_pct(), 50.0, 0.05), "{compute:?} {r:?}");
        assert_eq!(r.tests, 0.0);
        // The overhead is the wait for the late forward.
        assert!(near(r.overhead_ns(), L_NS, 5.0), "{compute:?} {r:?}");
        if compute == Compute::Work {
            assert!(
                times.work_units.unwrap().abs_diff(40_000) <= 200,
                "{times:?}"
            );
        }
    }
}

#[test]
fn progress_calls_let_the_inner_rank_forward_in_time() {
    for compute in [Compute::Time, Compute::Work] {
        let times = nbc_sim(compute, Some(1_000.0));
        let r = times.reported().unwrap();
        assert!(r.overlap_pct() > 99.0, "{compute:?} {r:?}");
        assert!(near(r.t_ovrl_ns, 2.0 * L_NS, 1_100.0), "{compute:?} {r:?}");
        // About one test per microsecond of computation until the call completed.
        let inner = &times.ranks[1];
        assert!(
            inner.tests >= 19.0 && inner.tests <= 21.0,
            "{compute:?} {inner:?}"
        );
    }
}

#[test]
fn calibration_finds_the_units_of_a_linear_workload() {
    let net = NetModel::default();
    let got = sim::run(&[None], net, |r| {
        let mut w = SimWork(&r.clock);
        calibrate(&r.clock, &mut w, 25_000) // 10 us at 2.5 GHz
    });
    // 10,000 ns of work, give or take the reads inside the timing (20 ns each here).
    assert!(got[0].abs_diff(10_000) <= 60, "{}", got[0]);
}

#[test]
fn bad_specs_are_refused() {
    let mut world = ngauge_transport::inproc::world(1);
    let (mut t, mut c) = world.remove(0);
    let coll = CollSpec {
        algorithm: Algorithm::BarrierDissemination,
        np: 1,
        size_bytes: 0,
        segment_bytes: 0,
        root: 0,
    };
    let clock = crate::clock::SystemClock::calibrated().0;
    let mut op = Scheduled::new(&mut t, coll).unwrap();
    let spec = NbcSpec {
        compute: Compute::Time,
        test_every_ns: Some(0.0),
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
        &mut Arithmetic::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "progress calls every 0 ns: the interval must be positive"
    );
}

/// A collective whose rank stalls `stall_ns` of virtual time in every start after
/// the first `after` (the warm-up): every timed call overruns any window.
struct Stalling<'a, 't> {
    inner: Scheduled<'t>,
    clock: &'a SimClock,
    starts: usize,
    after: usize,
    stall_ns: f64,
}

impl CollOp for Stalling<'_, '_> {
    fn label(&self) -> String {
        self.inner.label()
    }
    fn select(&mut self, index: usize) -> Rank {
        self.inner.select(index)
    }
    fn transport(&mut self) -> &mut dyn ngauge_transport::Transport {
        self.inner.transport()
    }
    fn run(&mut self, i: &mut dyn Interrupts) -> Result<(), CollError> {
        self.inner.run(i)
    }
    fn start(&mut self, i: &mut dyn Interrupts) -> Result<(), CollError> {
        self.starts += 1;
        if self.starts > self.after {
            self.clock.advance_ns(self.stall_ns);
        }
        self.inner.start(i)
    }
    fn test(&mut self, i: &mut dyn Interrupts) -> Result<bool, CollError> {
        self.inner.test(i)
    }
    fn wait(&mut self, i: &mut dyn Interrupts) -> Result<(), CollError> {
        self.inner.wait(i)
    }
    fn release(self: Box<Self>) -> Result<(), CollError> {
        self.inner.free()
    }
}

#[test]
fn a_host_that_invalidates_every_call_degrades_to_an_undecided_point() {
    let net = NetModel {
        latency_ns: L_NS,
        jitter_ns: 0.0,
        outlier_every: 0,
        read_cost_ns: 0.4,
        ..NetModel::default()
    };
    let spec = NbcSpec {
        compute: Compute::Time,
        test_every_ns: None,
        plan: CallPlan {
            reps: 4,
            warmup: 1,
            check_data: false,
            window_wait: WaitMode::Poll,
            // Rounds enough for the window to reach its cap, and more.
            max_rounds: 12,
        },
    };
    let out = sim::run(&[None, None, None], net, |mut r| {
        let coll = CollSpec {
            algorithm: Algorithm::BcastChain,
            np: 3,
            size_bytes: 100,
            segment_bytes: 0,
            root: 0,
        };
        let rank = r.control.rank();
        let clock = &r.clock;
        let inner = Scheduled::new(&mut r.transport, coll).unwrap();
        // Rank 1 loses its core for a second in every timed call: far beyond
        // MAX_WINDOW_GROWTH times the first window (1.5 x 2 L = 60 us).
        let mut op = Stalling {
            inner,
            clock,
            starts: 0,
            after: if rank == 1 {
                spec.plan.warmup
            } else {
                usize::MAX
            },
            stall_ns: 1e9,
        };
        let mut work = SimWork(clock);
        let times = measure(
            clock,
            &mut op,
            &mut r.control,
            &ClockModel::IDENTITY,
            &spec,
            &mut work,
        )
        .expect("degrades, does not fail");
        op.inner.free().unwrap();
        times
    });
    let times = &out[0];
    // The blocking stage never fits its window, capped at 64 x 60 us: undecided.
    // Its figures are those of the invalid calls, rank 1's stall included, and
    // t_b (over a second) sizes the overlapped stage's window, in which the
    // stalled calls then fit.
    assert_eq!(times.decided, (false, true));
    assert_eq!(times.pure_calls, (0, spec.plan.reps * spec.plan.max_rounds));
    assert_eq!(times.ovrl_calls.0, spec.plan.reps);
    let r1 = &times.ranks[1];
    assert!(r1.t_pure_ns >= 1e9, "{r1:?}");
    assert!(times.t_b_ns >= 1e9, "{}", times.t_b_ns);
    let row =
        crate::report::nbc::NbcRow::new("bcast", "chain", 100, Compute::Time, None, times).unwrap();
    assert!(!row.decided);
    let w = crate::report::nbc::warnings(&row, times, spec.plan.reps);
    let undecided = w
        .iter()
        .filter(|w| matches!(w, crate::report::nbc::NbcWarning::Undecided { .. }))
        .count();
    assert_eq!(undecided, 1, "{w:?}");
}
