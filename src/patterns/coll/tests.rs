//! The schemes in the virtual-time world of [`crate::sync::sim`], where a message
//! takes exactly `L` and nothing else costs time but clock reads, so the run-time
//! of a call is known: a chain broadcast on `P` ranks ends `(P - 1) L` after it
//! starts, however many segments it has.

use super::*;
use crate::clock::Skew;
use crate::coll::Algorithm;
use crate::patterns::rounds::CallPlan;
use crate::sync::sim::{self, NetModel, SIM_HZ, SIM_START};
use ngauge_transport::WaitMode;
use ngauge_transport::{NativeCollective, TransportError};

/// [`measure_with`] of our schedule.
fn measure<C: Clock + ?Sized>(
    clock: &C,
    t: &mut dyn Transport,
    control: &mut dyn Control,
    model: &ClockModel,
    timing: &CollTiming,
) -> Result<CollTimes, PatternError> {
    measure_with(clock, t, control, model, timing, Implementation::Schedule)
}

const L_NS: f64 = 20_000.0;
const NP: usize = 6;

fn quiet() -> NetModel {
    NetModel {
        latency_ns: L_NS,
        jitter_ns: 0.0,
        outlier_every: 0,
        ..NetModel::default()
    }
}

fn ns(ticks: f64) -> f64 {
    ticks * 1e9 / SIM_HZ
}

/// Ranks 1.. have clocks off by whole milliseconds; each gets its exact model.
fn skews() -> Vec<Option<Skew>> {
    skews_of(NP)
}

fn skews_of(np: usize) -> Vec<Option<Skew>> {
    (0..np)
        .map(|r| {
            (r > 0).then_some(Skew {
                offset_ticks: (r as f64 - 2.5) * 1e-3 * SIM_HZ,
                drift: 0.0,
                epoch: SIM_START,
            })
        })
        .collect()
}

fn timing(scheme: Scheme, algorithm: Algorithm) -> CollTiming {
    CollTiming {
        spec: CollSpec {
            algorithm,
            np: NP,
            size_bytes: 64 << 10,
            segment_bytes: 8 << 10,
            root: 0,
        },
        scheme,
        rotate_root: false,
        plan: CallPlan {
            reps: 8,
            warmup: 2,
            check_data: true,
            window_wait: WaitMode::Poll,
            max_rounds: 4,
        },
    }
}

fn measure_sim(net: NetModel, timing: CollTiming) -> CollTimes {
    let skews = skews_of(timing.spec.np);
    let out = sim::run(&skews, net, |mut r| {
        let model = match skews[r.control.rank()] {
            Some(s) => ClockModel::offset_only(s.offset_ticks),
            None => ClockModel::IDENTITY,
        };
        measure(&r.clock, &mut r.transport, &mut r.control, &model, &timing).unwrap()
    });
    out.into_iter().next().expect("rank 0")
}

/// A call's reads: a handful per step on the critical path, 20 ns each.
const READS_NS: f64 = 5_000.0;

#[test]
fn window_times_a_pipelined_broadcast_exactly() {
    let times = measure_sim(quiet(), timing(Scheme::Window, Algorithm::BcastChain));
    assert_eq!(times.tally().invalid(), 0);
    assert_eq!(times.calls.len(), 8);
    let truth = (NP - 1) as f64 * L_NS;
    for t in times.valid_runtimes_ticks() {
        let t = ns(t);
        assert!(
            t >= truth && t < truth + READS_NS,
            "{t} ns, truth {truth} ns"
        );
    }
    // Every rank's span is in global time: the starts agree although the clocks
    // are milliseconds apart.
    for call in &times.calls {
        let starts: Vec<u64> = call.ranks.iter().map(|s| s.start.0).collect();
        let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
        assert!(ns(spread as f64) < 1_000.0, "starts {spread} ticks apart");
    }
}

#[test]
fn loop_underestimates_what_the_window_measures() {
    let window = measure_sim(quiet(), timing(Scheme::Window, Algorithm::BcastChain));
    let looped = measure_sim(quiet(), timing(Scheme::Loop, Algorithm::BcastChain));
    assert_eq!(looped.calls.len(), 1);
    assert_eq!(looped.calls[0].calls, 8);
    let w = ns(window.valid_runtimes_ticks()[0]);
    let l = ns(looped.valid_runtimes_ticks()[0]);
    // Calls overlap down the chain: the loop sees all 8 end one chain later, so a
    // call looks 8 times shorter than it is (LogGP paper, sec. 4.2).
    assert!(l < w / 2.0, "loop {l} ns, window {w} ns");
    // The 8 calls take one chain plus at most the skew the barrier before the loop
    // leaves between the ranks' starts.
    let truth = (NP - 1) as f64 * L_NS;
    let skew = (NP as f64).log2().ceil() * L_NS;
    assert!(
        (l * 8.0 - truth).abs() <= skew + READS_NS,
        "loop {l} ns x 8 vs {truth} ns"
    );
}

/// Issue 14's acceptance, where time is exact: on 4 to 8 ranks, for the chain
/// and the segmented binomial broadcast, the loop scheme reports less than the
/// single call the window scheme measures (LogGP paper, sec. 4.2). (A real run
/// of 8 ranks on this 2-core host gave the opposite direction at 8 ranks,
/// `docs/findings/2026-11-24-coll.md`: the window keeps the calls the scheduler
/// left alone.)
#[test]
fn loop_underestimates_a_pipelined_broadcast_on_4_to_8_ranks() {
    for np in 4..=8 {
        for algorithm in [Algorithm::BcastChain, Algorithm::BcastBinomial] {
            let mut w = timing(Scheme::Window, algorithm);
            w.spec.np = np;
            w.plan.warmup = 1;
            w.plan.reps = 4;
            let mut l = w;
            l.scheme = Scheme::Loop;
            let window = ns(measure_sim(quiet(), w).valid_runtimes_ticks()[0]);
            let looped = ns(measure_sim(quiet(), l).valid_runtimes_ticks()[0]);
            assert!(
                looped < window,
                "{algorithm} on {np} ranks: loop {looped} ns, window {window} ns"
            );
        }
    }
}

/// In this world the ranks leave the barrier up to one latency apart, and the
/// scheme reports `P L` for a `(P - 1) L` call; in general its error is the
/// barrier's exit skew, at most its depth.
#[test]
fn barrier_scheme_is_off_by_at_most_the_barrier() {
    let times = measure_sim(quiet(), timing(Scheme::Barrier, Algorithm::BcastChain));
    assert_eq!(times.calls.len(), 8);
    let truth = (NP - 1) as f64 * L_NS;
    let rounds = (NP as f64).log2().ceil();
    for t in times.valid_runtimes_ticks() {
        let t = ns(t);
        assert!((t - truth).abs() <= rounds * L_NS + READS_NS, "{t} ns");
    }
}

#[test]
fn rotation_moves_the_root_every_call() {
    let mut tm = timing(Scheme::Window, Algorithm::BcastLinear);
    tm.rotate_root = true;
    let times = measure_sim(quiet(), tm);
    let roots: Vec<Rank> = times.calls.iter().map(|c| c.root).collect();
    assert_eq!(roots, vec![0, 1, 2, 3, 4, 5, 0, 1]);
    // A linear broadcast takes one latency from any root.
    for t in times.valid_runtimes_ticks() {
        assert!((ns(t) - L_NS).abs() < READS_NS, "{} ns", ns(t));
    }
}

#[test]
fn late_calls_are_counted_and_the_window_grows() {
    // Every 7th message from a lower to a higher rank is 30 us late: some calls
    // overrun a window sized on an undisturbed warm-up.
    let net = NetModel {
        latency_ns: L_NS,
        jitter_ns: 0.0,
        outlier_every: 7,
        outlier_ns: 3.0 * L_NS,
        ..NetModel::default()
    };
    let mut tm = timing(Scheme::Window, Algorithm::BcastLinear);
    tm.plan.warmup = 1;
    tm.plan.reps = 12;
    let times = measure_sim(net, tm);
    let tally = times.tally();
    assert!(tally.invalid() > 0, "{tally:?}");
    assert_eq!(tally.valid + tally.invalid(), times.calls.len());
    assert!(
        tally.valid >= 12 || times.rounds == 4,
        "{tally:?} in {} rounds",
        times.rounds
    );
    // The window grew past the outlier.
    let window = ns(times.window_ticks.unwrap() as f64);
    assert!(window > 4.0 * L_NS, "window {window} ns");
}

#[test]
fn no_reps_is_an_error() {
    let mut world = ngauge_transport::inproc::world(1);
    let (mut t, mut c) = world.pop().unwrap();
    let mut tm = timing(Scheme::Loop, Algorithm::BcastLinear);
    tm.spec.np = 1;
    tm.plan.reps = 0;
    let clock = crate::clock::SystemClock::calibrated().0;
    let err = measure(&clock, &mut t, &mut c, &ClockModel::IDENTITY, &tm).unwrap_err();
    assert_eq!(
        err.to_string(),
        "collective timing: reps must be at least 1"
    );
}

#[test]
fn rotated_roots_share_buffers_and_pass_the_data_check() {
    // A warm-up call per root, each filled and verified on the shared buffers.
    for algorithm in [Algorithm::GatherBinomial, Algorithm::BcastSplitBinary] {
        let mut tm = timing(Scheme::Barrier, algorithm);
        tm.rotate_root = true;
        tm.plan.warmup = NP;
        tm.spec.size_bytes = 1001;
        tm.spec.segment_bytes = 100;
        let times = measure_sim(quiet(), tm);
        let roots: Vec<Rank> = times.calls.iter().map(|c| c.root).collect();
        assert_eq!(roots, vec![0, 1, 2, 3, 4, 5, 0, 1]);
    }
}

/// A transport with collectives of its own, for [`Implementation::Native`]: a plain
/// reference implementation over the wrapped transport's point-to-point messages
/// (linear trees through rank 0 or the root), or, with `broken_at`, a broadcast
/// that leaves that rank's buffer alone.
/// Its nonblocking calls run at the start and complete at the first test or wait.
struct Native<T> {
    inner: T,
    broken_at: Option<Rank>,
    scratch: Option<ngauge_transport::BufferId>,
    started: Vec<ngauge_transport::RequestId>,
}

/// The request ids of [`Native`]'s nonblocking calls: far from the inner
/// transport's.
const NATIVE_REQUESTS: u64 = 1 << 63;

impl<T: Transport> Native<T> {
    fn new(inner: T) -> Self {
        Native {
            inner,
            broken_at: None,
            scratch: None,
            started: Vec::new(),
        }
    }

    fn bytes(&self, r: ngauge_transport::Region) -> Vec<u8> {
        self.inner.buffer(r.buffer).unwrap()[r.offset..r.offset + r.len].to_vec()
    }

    fn put(&mut self, r: ngauge_transport::Region, bytes: &[u8]) {
        self.inner.buffer_mut(r.buffer).unwrap()[r.offset..r.offset + r.len].copy_from_slice(bytes);
    }

    fn scratch(&mut self, len: usize) -> ngauge_transport::Region {
        let id = *self
            .scratch
            .get_or_insert_with(|| self.inner.alloc_buffer(1 << 20).unwrap());
        id.prefix(len)
    }

    fn collective(&mut self, call: NativeCollective) -> Result<(), TransportError> {
        let (me, np) = (self.inner.rank(), self.inner.size());
        let t = &mut self.inner;
        match call {
            NativeCollective::Barrier => {
                let one = self.scratch(1);
                let t = &mut self.inner;
                if me == 0 {
                    for r in 1..np {
                        t.recv(r, one)?;
                    }
                    for r in 1..np {
                        t.send(r, one)?;
                    }
                } else {
                    t.send(0, one)?;
                    t.recv(0, one)?;
                }
            }
            NativeCollective::Bcast { root, data } => {
                if me == root {
                    for r in (0..np).filter(|&r| r != root) {
                        t.send(r, data)?;
                    }
                } else if self.broken_at == Some(me) {
                    let lost = self.scratch(data.len);
                    self.inner.recv(root, lost)?;
                } else {
                    t.recv(root, data)?;
                }
            }
            NativeCollective::Gather { root, send, recv } => {
                let size = send.len;
                if me == root {
                    for r in (0..np).filter(|&r| r != root) {
                        t.recv(r, recv.buffer.region(recv.offset + r * size, size))?;
                    }
                    let own = self.bytes(send);
                    self.put(recv.buffer.region(recv.offset + me * size, size), &own);
                } else {
                    t.send(root, send)?;
                }
            }
            NativeCollective::Allreduce { send, recv } => {
                if me == 0 {
                    let mut sum = self.bytes(send);
                    let tmp = self.scratch(send.len);
                    for r in 1..np {
                        self.inner.recv(r, tmp)?;
                        crate::coll::allreduce::reduce_into(&mut sum, &self.bytes(tmp));
                    }
                    self.put(recv, &sum);
                    for r in 1..np {
                        self.inner.send(r, recv)?;
                    }
                } else {
                    t.send(0, send)?;
                    t.recv(0, recv)?;
                }
            }
            NativeCollective::Alltoall { send, recv } => {
                let size = send.len / np;
                let mut requests = Vec::new();
                for j in (0..np).filter(|&j| j != me) {
                    let block =
                        |r: ngauge_transport::Region| r.buffer.region(r.offset + j * size, size);
                    requests.push(t.irecv(j, block(recv))?);
                    requests.push(t.isend(j, block(send))?);
                }
                t.wait_all(&requests)?;
                let own = self.bytes(send.buffer.region(send.offset + me * size, size));
                self.put(recv.buffer.region(recv.offset + me * size, size), &own);
            }
            NativeCollective::Alltoallv { send, recv, layout } => {
                let words = self.bytes(layout);
                let word = |i: usize| {
                    i32::from_ne_bytes(words[4 * i..4 * i + 4].try_into().unwrap()) as usize
                };
                let block = |r: ngauge_transport::Region, at: usize| {
                    r.buffer.region(r.offset + word(at + np), word(at))
                };
                let t = &mut self.inner;
                let mut requests = Vec::new();
                for j in (0..np).filter(|&j| j != me) {
                    if word(2 * np + j) > 0 {
                        requests.push(t.irecv(j, block(recv, 2 * np + j))?);
                    }
                    if word(j) > 0 {
                        requests.push(t.isend(j, block(send, j))?);
                    }
                }
                t.wait_all(&requests)?;
                let own = self.bytes(block(send, me));
                self.put(block(recv, 2 * np + me), &own);
            }
            NativeCollective::Reduce { root, send, recv } => {
                if me == root {
                    let mut sum = self.bytes(send);
                    let tmp = self.scratch(send.len);
                    for r in (0..np).filter(|&r| r != root) {
                        self.inner.recv(r, tmp)?;
                        crate::coll::allreduce::reduce_into(&mut sum, &self.bytes(tmp));
                    }
                    self.put(recv, &sum);
                } else {
                    t.send(root, send)?;
                }
            }
            NativeCollective::Allgather { send, recv } => {
                let size = send.len;
                let block = |j: usize| recv.buffer.region(recv.offset + j * size, size);
                let mut requests = Vec::new();
                for j in (0..np).filter(|&j| j != me) {
                    requests.push(t.irecv(j, block(j))?);
                    requests.push(t.isend(j, send)?);
                }
                t.wait_all(&requests)?;
                let own = self.bytes(send);
                self.put(block(me), &own);
            }
            NativeCollective::ReduceScatter { send, recv } => {
                let size = recv.len;
                let tmp = self.scratch(np * size);
                let t = &mut self.inner;
                let block = |r: ngauge_transport::Region, j: usize| {
                    r.buffer.region(r.offset + j * size, size)
                };
                let mut requests = Vec::new();
                for j in (0..np).filter(|&j| j != me) {
                    requests.push(t.irecv(j, block(tmp, j))?);
                    requests.push(t.isend(j, block(send, j))?);
                }
                t.wait_all(&requests)?;
                let mut sum = self.bytes(block(send, me));
                for j in (0..np).filter(|&j| j != me) {
                    crate::coll::allreduce::reduce_into(&mut sum, &self.bytes(block(tmp, j)));
                }
                self.put(recv, &sum);
            }
            NativeCollective::Scatter { root, send, recv } => {
                let size = recv.len;
                let block = |j: usize| send.buffer.region(send.offset + j * size, size);
                if me == root {
                    for r in (0..np).filter(|&r| r != root) {
                        t.send(r, block(r))?;
                    }
                    let own = self.bytes(block(me));
                    self.put(recv, &own);
                } else {
                    t.recv(root, recv)?;
                }
            }
        }
        Ok(())
    }
}

impl<T: Transport> Transport for Native<T> {
    // `wait_all`: the trait's, over this `test` and `wait`.
    ngauge_transport::forward_transport!(inner, except name, test, wait, wait_all,
        native_collective, start_native_collective);
    fn name(&self) -> &'static str {
        "native-test"
    }
    fn test(&mut self, q: ngauge_transport::RequestId) -> Result<bool, TransportError> {
        if let Some(i) = self.started.iter().position(|s| *s == q) {
            self.started.remove(i);
            return Ok(true);
        }
        self.inner.test(q)
    }
    fn wait(&mut self, q: ngauge_transport::RequestId) -> Result<(), TransportError> {
        if self.test(q)? {
            return Ok(());
        }
        self.inner.wait(q)
    }
    fn native_collective(&mut self, call: NativeCollective) -> Option<Result<(), TransportError>> {
        Some(self.collective(call))
    }
    fn start_native_collective(
        &mut self,
        call: NativeCollective,
    ) -> Option<Result<ngauge_transport::RequestId, TransportError>> {
        Some(self.collective(call).map(|()| {
            let id = ngauge_transport::RequestId(NATIVE_REQUESTS + self.started.len() as u64);
            self.started.push(id);
            id
        }))
    }
}

fn measure_native(tm: CollTiming, broken_at: Option<Rank>) -> Vec<Result<CollTimes, PatternError>> {
    let skews = skews();
    sim::run(&skews, quiet(), |r| {
        let model = match skews[r.control.rank()] {
            Some(s) => ClockModel::offset_only(s.offset_ticks),
            None => ClockModel::IDENTITY,
        };
        let mut control = r.control;
        let mut t = Native::new(r.transport);
        t.broken_at = broken_at;
        measure_with(
            &r.clock,
            &mut t,
            &mut control,
            &model,
            &tm,
            Implementation::Native,
        )
    })
}

#[test]
fn native_collectives_are_timed_and_checked_on_the_same_layout() {
    for algorithm in [
        Algorithm::BcastBinomial,
        Algorithm::GatherLinear,
        Algorithm::AllreduceRing,
        Algorithm::BarrierDissemination,
        Algorithm::AlltoallPairwise,
    ] {
        for scheme in [Scheme::Window, Scheme::Barrier] {
            let mut tm = timing(scheme, algorithm);
            tm.spec.size_bytes = 1000; // whole words for the allreduce
            tm.rotate_root = true;
            tm.plan.warmup = NP; // every root checked once
            let times = measure_native(tm, None).remove(0).unwrap();
            assert_eq!(times.tally().valid, 8, "{algorithm} {scheme:?}");
            let roots: Vec<Rank> = times.calls.iter().map(|c| c.root).collect();
            if algorithm.collective().is_rooted() {
                assert_eq!(roots, vec![0, 1, 2, 3, 4, 5, 0, 1]);
            }
            // The window's run-time holds at least one message; the barrier's
            // largest local time need not: a rank that leaves the barrier a message
            // time after the root finds its data there (the barrier's exit skew,
            // the error Hunold sec. 4.6 describes).
            for t in times.valid_runtimes_ticks() {
                if scheme == Scheme::Window {
                    assert!(ns(t) >= L_NS, "{algorithm} {scheme:?}: {} ns", ns(t));
                } else {
                    assert!(ns(t) > 0.0, "{algorithm} {scheme:?}: {} ns", ns(t));
                }
            }
        }
    }
}

/// Issue 39: MPI's reduce, allgather, reduce-scatter and scatter on the layout of
/// `coll::native`, data checked on every root.
#[test]
fn native_reduce_allgather_reduce_scatter_and_scatter_pass_the_data_check() {
    for algorithm in [
        Algorithm::ReduceBinomial,
        Algorithm::AllgatherRing,
        Algorithm::ReduceScatterRing,
        Algorithm::ScatterLinear,
    ] {
        let mut tm = timing(Scheme::Window, algorithm);
        tm.spec.size_bytes = 1000;
        tm.rotate_root = true;
        tm.plan.warmup = NP;
        let times = measure_native(tm, None).remove(0).unwrap();
        assert_eq!(times.tally().valid, 8, "{algorithm}");
    }
}

/// Issue 39: the all-to-all-v's counts reach the library in its arrays.
#[test]
fn native_alltoallv_passes_the_data_check_with_empty_blocks() {
    let counts = crate::coll::Counts::Random { seed: 11 };
    let algorithm = Algorithm::AlltoallvPairwise { counts };
    let mut tm = timing(Scheme::Window, algorithm);
    tm.spec.size_bytes = 100;
    let times = measure_native(tm, None).remove(0).unwrap();
    assert_eq!(times.tally().valid, 8);
}

#[test]
fn a_wrong_result_names_the_rank_the_size_and_the_algorithm() {
    let mut tm = timing(Scheme::Window, Algorithm::BcastBinomial);
    tm.spec.size_bytes = 100;
    let results = measure_native(tm, Some(3));
    let err = results[3].as_ref().unwrap_err().to_string();
    assert!(
        err.starts_with(
            "data check failed: bcast/native of 100 bytes on 6 ranks from root 0: rank 3: \
             byte 0 of the data buffer is"
        ),
        "{err}"
    );
}

#[test]
fn native_on_a_transport_without_collectives_is_an_error() {
    let out = sim::run(&[None, None], quiet(), |mut r| {
        let mut tm = timing(Scheme::Loop, Algorithm::BcastLinear);
        tm.spec.np = 2;
        measure_with(
            &r.clock,
            &mut r.transport,
            &mut r.control,
            &ClockModel::IDENTITY,
            &tm,
            Implementation::Native,
        )
        .unwrap_err()
        .to_string()
    });
    assert!(
        out[0].ends_with("has no collectives of its own"),
        "{}",
        out[0]
    );
}

/// The same native collectives as a [`crate::coll::CollOp`] (what `late` and `nbc`
/// time): blocking and nonblocking calls, their data filled and verified, every
/// root; and on a transport without collectives, an error at the first call.
#[test]
fn native_op_runs_blocking_and_nonblocking_calls_with_checked_data() {
    use crate::coll::{CollOp, NativeOp, Uninterrupted};
    for algorithm in [
        Algorithm::BcastBinomial,
        Algorithm::GatherLinear,
        Algorithm::AllreduceRing,
        Algorithm::BarrierDissemination,
        Algorithm::AlltoallPairwise,
    ] {
        for root in [0, 2] {
            let spec = CollSpec {
                algorithm,
                np: 3,
                size_bytes: 1000,
                segment_bytes: 0,
                root,
            };
            let out = sim::run(&[None, None, None], quiet(), |r| {
                let mut t = Native::new(r.transport);
                let mut op = NativeOp::new(&mut t, spec).unwrap();
                let none = &mut Uninterrupted;
                op.fill().unwrap();
                op.run(none).unwrap();
                op.verify().unwrap();
                op.fill().unwrap();
                op.start(none).unwrap();
                while !op.test(none).unwrap() {}
                op.verify().unwrap();
                op.fill().unwrap();
                op.start(none).unwrap();
                op.wait(none).unwrap();
                op.verify().unwrap();
                let label = op.label();
                Box::new(op).release().unwrap();
                label
            });
            let collective = algorithm.collective();
            assert_eq!(out[0], format!("{collective}/native-test"));
        }
    }
    let out = sim::run(&[None, None], quiet(), |mut r| {
        let spec = CollSpec {
            algorithm: Algorithm::BcastLinear,
            np: 2,
            size_bytes: 8,
            segment_bytes: 0,
            root: 0,
        };
        let mut op = NativeOp::new(&mut r.transport, spec).unwrap();
        op.run(&mut Uninterrupted).unwrap_err().to_string()
    });
    assert!(
        out[0].ends_with("has no collectives of its own"),
        "{}",
        out[0]
    );
}
