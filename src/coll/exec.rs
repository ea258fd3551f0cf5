//! Runs one rank's [`Schedule`] over a [`Transport`]: every send and receive is
//! posted nonblocking as soon as the steps it waits for have completed (and, per
//! peer, after the sends or receives listed before it), local steps run as soon as
//! they are ready, and progress happens only inside [`Executor::start_with`],
//! [`Executor::test_with`] and [`Executor::wait_with`]: between them the executor does
//! nothing, so a nonblocking-collective benchmark can compute between `start` and
//! `wait` and decide how often to call `test`.
//!
//! # How it waits
//!
//! [`Executor::wait_with`] alternates a sweep (`test` on every step in flight, then start
//! what became ready; skipped when only one step is in flight) with a blocking
//! [`Transport::wait`] on the earliest step in flight in list order. A transport
//! progresses all its pending requests inside `wait` (TCP, MPI) or buffers its sends
//! (in-process), so blocking on one step does not stop the others from moving; what
//! it delays is only *noticing* the others and starting the steps they enable.
//! The tests' `check_progress` replays exactly this policy with sends
//! that complete only when matched, and proves for every algorithm that it cannot
//! deadlock. Inside `wait` (and [`Executor::run`]), a send or receive that is the
//! only step in flight or ready is made with the blocking `send` or `recv`, which
//! is the same wait in one call (on TCP, one system call instead of a nonblocking
//! attempt, a `poll` and a second attempt).
//!
//! # Interruptions
//!
//! The `*_with` forms take an [`Interrupts`]: the executor calls
//! [`Interrupts::poll`] before it starts each step and after each transfer it saw
//! complete, which are the only instants at which it does anything. An injected
//! noise pattern ([`crate::patterns::noise::Injector`]) spins there while its
//! detour lasts, so a collective runs under known noise without a global variable:
//! the caller passes the noise in. The plain forms use [`Uninterrupted`], which
//! compiles to nothing.
//!
//! # Cost
//!
//! [`Executor::new`] does the allocation and the bookkeeping (who waits for whom);
//! a call allocates nothing unless the transport does. A reduction or copy goes
//! through a scratch vector, because a transport lends one buffer at a time
//! (`buffer` / `buffer_mut`): one extra `memcpy` of the operand.

use super::allreduce::reduce_into;
use super::schedule::{Action, Buf, Kind, Schedule, Slice, StepId, BUFFERS};
use super::CollError;
use ngauge_transport::{BufferId, Rank, Region, RequestId, Transport, TransportError};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

const NONE: StepId = StepId::MAX;

/// What may take the CPU from a rank while it runs a collective (see the module
/// docs): called at every instant the executor acts.
pub trait Interrupts {
    /// Takes whatever time is due now (a detour), or nothing.
    fn poll(&mut self);
}

/// No interruptions: the executor's plain methods use it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uninterrupted;

impl Interrupts for Uninterrupted {
    #[inline(always)]
    fn poll(&mut self) {}
}

/// The transport buffers a schedule runs on (allocated once, reused by every call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollBuffers {
    ids: [Option<BufferId>; BUFFERS],
    lens: [usize; BUFFERS],
}

impl CollBuffers {
    /// Allocates every buffer `schedule` uses, as long as it needs (call outside
    /// timed regions).
    pub fn alloc(t: &mut dyn Transport, schedule: &Schedule) -> Result<Self, TransportError> {
        CollBuffers::alloc_for(t, [schedule])
    }

    /// Allocates buffers large enough for every one of `schedules`, so that
    /// executors of several schedules (a rooted collective with each root) can share
    /// them instead of holding a copy each.
    pub fn alloc_for<'s>(
        t: &mut dyn Transport,
        schedules: impl IntoIterator<Item = &'s Schedule>,
    ) -> Result<Self, TransportError> {
        let mut lens = [0; BUFFERS];
        for s in schedules {
            for buf in Buf::ALL {
                lens[buf.index()] = lens[buf.index()].max(s.buffer_bytes(buf));
            }
        }
        CollBuffers::alloc_lens(t, lens)
    }

    /// Allocates buffers of the given lengths, indexed as [`Buf::ALL`] (0: unused),
    /// for a caller that lays out data as the schedules do without running one (a
    /// transport's own collective, timed with the same data checks).
    pub fn alloc_lens(
        t: &mut dyn Transport,
        lens: [usize; BUFFERS],
    ) -> Result<Self, TransportError> {
        let mut ids = [None; BUFFERS];
        for (id, &len) in ids.iter_mut().zip(&lens) {
            if len > 0 {
                *id = Some(t.alloc_buffer(len)?);
            }
        }
        Ok(CollBuffers { ids, lens })
    }

    /// The transport buffer behind `buf`, if the schedule uses it.
    pub fn id(&self, buf: Buf) -> Option<BufferId> {
        self.ids[buf.index()]
    }

    /// Length of `buf` in bytes (0 when unused).
    pub fn len(&self, buf: Buf) -> usize {
        self.lens[buf.index()]
    }

    /// Releases the buffers.
    pub fn free(self, t: &mut dyn Transport) -> Result<(), TransportError> {
        for id in self.ids.into_iter().flatten() {
            t.free_buffer(id)?;
        }
        Ok(())
    }

    fn region(&self, s: Slice) -> Region {
        let id = self.ids[s.buf.index()].expect("checked in Executor::new");
        id.region(s.offset, s.len)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    InFlight(RequestId),
    Done,
}

/// Runs one rank's schedule, call after call (see the module docs).
///
/// After an error the executor and the transport's pending requests are in an
/// unknown state: drop both.
#[derive(Debug)]
pub struct Executor {
    schedule: Schedule,
    buffers: CollBuffers,
    /// Steps that wait for step `i`: `dependents[dependents_start[i]..[i + 1]]`.
    dependents_start: Vec<u32>,
    dependents: Vec<StepId>,
    /// The next transfer of the same kind with the same peer, which may start only
    /// after this one started (per-pair order).
    same_peer_next: Vec<StepId>,
    /// What each step waits for before a call: its dependencies, plus 1 if an
    /// earlier transfer of its kind and peer must start first.
    blockers: Vec<u32>,
    waiting: Vec<u32>,
    state: Vec<State>,
    ready: BinaryHeap<Reverse<StepId>>,
    /// Transfers in flight, in list order.
    in_flight: Vec<StepId>,
    left: usize,
    scratch: Vec<u8>,
    started: bool,
}

impl Executor {
    /// Prepares `schedule` to run on `buffers` (which must be large enough, as
    /// [`CollBuffers::alloc`] makes them).
    pub fn new(schedule: Schedule, buffers: CollBuffers) -> Result<Executor, CollError> {
        for buf in Buf::ALL {
            let need = schedule.buffer_bytes(buf);
            if buffers.len(buf) < need || (need > 0 && buffers.id(buf).is_none()) {
                return Err(CollError::BufferTooSmall {
                    buf: buf.name(),
                    got: buffers.len(buf),
                    need,
                });
            }
        }
        let n = schedule.len();
        let mut counts = vec![0u32; n + 1];
        let mut blockers = vec![0u32; n];
        for i in 0..n as StepId {
            for &d in schedule.deps(i) {
                counts[d as usize + 1] += 1;
            }
            blockers[i as usize] = schedule.deps(i).len() as u32;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let dependents_start = counts.clone();
        let mut fill = counts;
        let mut dependents = vec![0; schedule.edges()];
        for i in 0..n as StepId {
            for &d in schedule.deps(i) {
                dependents[fill[d as usize] as usize] = i;
                fill[d as usize] += 1;
            }
        }
        let mut same_peer_next = vec![NONE; n];
        let mut last: HashMap<(Kind, Rank), StepId> = HashMap::new();
        let mut scratch_len = 0;
        for (i, step) in schedule.steps().iter().enumerate() {
            match step.action.peer() {
                Some(peer) => {
                    if let Some(prev) = last.insert((step.action.kind(), peer), i as StepId) {
                        same_peer_next[prev as usize] = i as StepId;
                        blockers[i] += 1;
                    }
                }
                None => scratch_len = scratch_len.max(step.action.bytes()),
            }
        }
        Ok(Executor {
            waiting: blockers.clone(),
            state: vec![State::Done; n],
            ready: BinaryHeap::with_capacity(n),
            in_flight: Vec::with_capacity(n),
            left: 0,
            scratch: vec![0; scratch_len],
            started: false,
            schedule,
            buffers,
            dependents_start,
            dependents,
            same_peer_next,
            blockers,
        })
    }

    /// Allocates the buffers of `schedule` on `t` and prepares it.
    pub fn prepare(t: &mut dyn Transport, schedule: Schedule) -> Result<Executor, CollError> {
        let buffers = CollBuffers::alloc(t, &schedule)?;
        Executor::new(schedule, buffers)
    }

    /// The buffers it runs on (to fill before and check after a call).
    pub fn buffers(&self) -> &CollBuffers {
        &self.buffers
    }

    /// Starts a call under `interrupts`: posts every step that waits for nothing,
    /// without blocking.
    pub fn start_with<I: Interrupts + ?Sized>(
        &mut self,
        t: &mut dyn Transport,
        interrupts: &mut I,
    ) -> Result<(), CollError> {
        self.reset(t)?;
        self.pump(t, false, interrupts)
    }

    fn reset(&mut self, t: &dyn Transport) -> Result<(), CollError> {
        if t.rank() != self.schedule.rank() || t.size() != self.schedule.np() {
            return Err(CollError::WrongRank {
                schedule_rank: self.schedule.rank(),
                schedule_np: self.schedule.np(),
                rank: t.rank(),
                np: t.size(),
            });
        }
        self.waiting.copy_from_slice(&self.blockers);
        self.state.fill(State::Waiting);
        self.ready.clear();
        self.in_flight.clear();
        self.left = self.schedule.len();
        for (i, &w) in self.waiting.iter().enumerate() {
            if w == 0 {
                self.ready.push(Reverse(i as StepId));
            }
        }
        self.started = true;
        Ok(())
    }

    /// Makes progress without blocking, under `interrupts`; `true` once the call is
    /// complete.
    pub fn test_with<I: Interrupts + ?Sized>(
        &mut self,
        t: &mut dyn Transport,
        interrupts: &mut I,
    ) -> Result<bool, CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        loop {
            let mut progressed = false;
            let mut k = 0;
            while k < self.in_flight.len() {
                let i = self.in_flight[k];
                let State::InFlight(request) = self.state[i as usize] else {
                    unreachable!("in_flight holds only steps in flight");
                };
                if t.test(request)? {
                    interrupts.poll();
                    self.in_flight.remove(k);
                    self.complete(i);
                    progressed = true;
                } else {
                    k += 1;
                }
            }
            if !progressed {
                return Ok(self.left == 0);
            }
            self.pump(t, false, interrupts)?;
        }
    }

    /// Completes the call, under `interrupts`.
    pub fn wait_with<I: Interrupts + ?Sized>(
        &mut self,
        t: &mut dyn Transport,
        interrupts: &mut I,
    ) -> Result<(), CollError> {
        if !self.started {
            return Err(CollError::NotStarted);
        }
        loop {
            if self.left == 0 {
                return Ok(());
            }
            // With one step in flight the sweep is the wait itself.
            if self.in_flight.len() > 1 && self.test_with(t, interrupts)? {
                return Ok(());
            }
            let Some(&i) = self.in_flight.first() else {
                return Err(CollError::Stalled {
                    rank: self.schedule.rank(),
                    left: self.left,
                    total: self.schedule.len(),
                });
            };
            let State::InFlight(request) = self.state[i as usize] else {
                unreachable!("in_flight holds only steps in flight");
            };
            t.wait(request)?;
            interrupts.poll();
            self.in_flight.remove(0);
            self.complete(i);
            self.pump(t, true, interrupts)?;
        }
    }

    /// One blocking call: [`Executor::start_with`], then [`Executor::wait_with`], except that
    /// a send or receive that is the only step in flight or ready is made with the
    /// transport's blocking `send` or `recv` (what waiting on it alone would amount
    /// to, in one call instead of two: TCP's blocking path is one system call).
    pub fn run(&mut self, t: &mut dyn Transport) -> Result<(), CollError> {
        self.run_with(t, &mut Uninterrupted)
    }

    /// [`Executor::run`] under `interrupts`.
    pub fn run_with<I: Interrupts + ?Sized>(
        &mut self,
        t: &mut dyn Transport,
        interrupts: &mut I,
    ) -> Result<(), CollError> {
        self.reset(t)?;
        self.pump(t, true, interrupts)?;
        self.wait_with(t, interrupts)
    }

    /// Starts every ready step; local steps run here, and what they enable too.
    /// With `may_block`, a transfer that is alone (nothing else in flight or ready)
    /// runs blocking.
    fn pump<I: Interrupts + ?Sized>(
        &mut self,
        t: &mut dyn Transport,
        may_block: bool,
        interrupts: &mut I,
    ) -> Result<(), CollError> {
        while let Some(Reverse(i)) = self.ready.pop() {
            interrupts.poll();
            let action = self.schedule.steps()[i as usize].action;
            let alone = may_block && self.in_flight.is_empty() && self.ready.is_empty();
            match action {
                Action::Send { peer, from } if alone => {
                    t.send(peer, self.buffers.region(from))?;
                    interrupts.poll();
                    self.finished_blocking(i);
                }
                Action::Recv { peer, into } if alone => {
                    t.recv(peer, self.buffers.region(into))?;
                    interrupts.poll();
                    self.finished_blocking(i);
                }
                Action::Send { peer, from } => {
                    let request = t.isend(peer, self.buffers.region(from))?;
                    self.launched(i, request);
                }
                Action::Recv { peer, into } => {
                    let request = t.irecv(peer, self.buffers.region(into))?;
                    self.launched(i, request);
                }
                Action::Reduce { from, into } => {
                    self.stage(t, from)?;
                    let dst = self.bytes_mut(t, into)?;
                    reduce_into(dst, &self.scratch[..from.len]);
                    self.complete(i);
                }
                Action::Copy { from, into } => {
                    self.stage(t, from)?;
                    let dst = self.bytes_mut(t, into)?;
                    dst.copy_from_slice(&self.scratch[..from.len]);
                    self.complete(i);
                }
            }
        }
        Ok(())
    }

    /// Copies `from` into the scratch vector.
    fn stage(&mut self, t: &dyn Transport, from: Slice) -> Result<(), CollError> {
        let id = self.buffers.id(from.buf).expect("checked in new");
        let src = &t.buffer(id)?[from.offset..from.end()];
        self.scratch[..from.len].copy_from_slice(src);
        Ok(())
    }

    fn bytes_mut<'t>(
        &self,
        t: &'t mut dyn Transport,
        into: Slice,
    ) -> Result<&'t mut [u8], CollError> {
        let id = self.buffers.id(into.buf).expect("checked in new");
        Ok(&mut t.buffer_mut(id)?[into.offset..into.end()])
    }

    fn launched(&mut self, i: StepId, request: RequestId) {
        self.state[i as usize] = State::InFlight(request);
        let at = self.in_flight.partition_point(|&j| j < i);
        self.in_flight.insert(at, i);
        self.started_transfer(i);
    }

    fn finished_blocking(&mut self, i: StepId) {
        self.started_transfer(i);
        self.complete(i);
    }

    /// The next transfer with the same peer and kind may start now.
    fn started_transfer(&mut self, i: StepId) {
        let next = self.same_peer_next[i as usize];
        if next != NONE {
            self.release(next);
        }
    }

    fn complete(&mut self, i: StepId) {
        self.state[i as usize] = State::Done;
        self.left -= 1;
        let range = self.dependents_start[i as usize] as usize
            ..self.dependents_start[i as usize + 1] as usize;
        for k in range {
            let j = self.dependents[k];
            self.release(j);
        }
    }

    fn release(&mut self, j: StepId) {
        let w = &mut self.waiting[j as usize];
        *w -= 1;
        if *w == 0 {
            self.ready.push(Reverse(j));
        }
    }
}

#[cfg(test)]
impl Executor {
    /// [`Executor::start_with`], uninterrupted.
    pub(crate) fn start(&mut self, t: &mut dyn Transport) -> Result<(), CollError> {
        self.start_with(t, &mut Uninterrupted)
    }

    /// [`Executor::test_with`], uninterrupted.
    pub(crate) fn test(&mut self, t: &mut dyn Transport) -> Result<bool, CollError> {
        self.test_with(t, &mut Uninterrupted)
    }

    /// [`Executor::wait_with`], uninterrupted.
    pub(crate) fn wait(&mut self, t: &mut dyn Transport) -> Result<(), CollError> {
        self.wait_with(t, &mut Uninterrupted)
    }
}
