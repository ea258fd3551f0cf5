//! Properties of schedules proved without a transport: that the messages of every
//! pair of ranks match in order ([`check_matching`]), that no two steps that touch
//! the same bytes can run at the same time ([`check_hazards`]), and that the
//! executor's way of waiting cannot deadlock even when sends complete only once
//! matched ([`check_progress`]).
//!
//! Built for tests only: these build the schedules of all ranks, so they are meant
//! for small jobs; [`check_hazards`] is quadratic in a rank's steps.

use super::schedule::{Action, Kind, Schedule, StepId};
use super::{CollError, CollSpec};
use ngauge_transport::Rank;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;

/// A property a schedule lacks.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// Two steps that touch the same bytes are not ordered by dependencies.
    #[error("rank {rank}: steps {first} and {second} are not ordered but {reason}")]
    Hazard {
        /// The rank.
        rank: Rank,
        /// The earlier step.
        first: StepId,
        /// The later step.
        second: StepId,
        /// What they share.
        reason: &'static str,
    },
    /// The sends of one rank to another do not match the receives in order.
    #[error("messages from rank {from} to rank {to}: {detail}")]
    Mismatch {
        /// Sender.
        from: Rank,
        /// Receiver.
        to: Rank,
        /// What differs.
        detail: String,
    },
    /// Nothing can move any more but ranks are not done.
    #[error("deadlock ({protocol}): {stuck}")]
    Deadlock {
        /// Send completion semantics of the replay.
        protocol: Protocol,
        /// Which ranks wait for what.
        stuck: String,
    },
    /// A schedule could not be built.
    #[error(transparent)]
    Coll(#[from] CollError),
}

/// When a send completes in [`check_progress`]'s replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// As soon as it is posted (buffered, like the in-process transport or a small
    /// message over TCP).
    Eager,
    /// Only once the receiver posted the matching receive (MPI's rendezvous, a TCP
    /// send larger than the socket buffers).
    Rendezvous,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Eager => "eager sends",
            Protocol::Rendezvous => "rendezvous sends",
        })
    }
}

fn all_schedules(spec: &CollSpec) -> Result<Vec<Schedule>, CollError> {
    (0..spec.np).map(|r| spec.schedule(r)).collect()
}

/// Checks that for every ordered pair of ranks the k-th send from one to the other
/// and the k-th receive there from it have the same length, and that there are as
/// many of each.
pub fn check_matching(spec: &CollSpec) -> Result<(), AnalysisError> {
    check_matching_of(&all_schedules(spec)?)
}

/// [`check_matching`] of given schedules (one per rank, in rank order).
pub fn check_matching_of(schedules: &[Schedule]) -> Result<(), AnalysisError> {
    let mut sends: HashMap<(Rank, Rank), Vec<usize>> = HashMap::new();
    let mut recvs: HashMap<(Rank, Rank), Vec<usize>> = HashMap::new();
    for s in schedules {
        for step in s.steps() {
            match step.action {
                Action::Send { peer, from } => {
                    sends.entry((s.rank(), peer)).or_default().push(from.len)
                }
                Action::Recv { peer, into } => {
                    recvs.entry((peer, s.rank())).or_default().push(into.len)
                }
                _ => {}
            }
        }
    }
    let mut pairs: Vec<_> = sends.keys().chain(recvs.keys()).copied().collect();
    pairs.sort_unstable();
    pairs.dedup();
    for (from, to) in pairs {
        let s = sends.get(&(from, to)).map_or(&[][..], |v| &v[..]);
        let r = recvs.get(&(from, to)).map_or(&[][..], |v| &v[..]);
        if s != r {
            return Err(AnalysisError::Mismatch {
                from,
                to,
                detail: format!("sent lengths {s:?}, received lengths {r:?}"),
            });
        }
    }
    Ok(())
}

/// Checks that any two steps of `schedule` that must not overlap in time are
/// ordered by (transitive) dependencies: two transfers whose slices overlap with a
/// writer among them, a local step and a transfer on the same buffer (a transport
/// refuses a buffer to local access while a transfer holds any part of it), and two
/// local steps whose slices overlap with a writer among them.
pub fn check_hazards(schedule: &Schedule) -> Result<(), AnalysisError> {
    let n = schedule.len();
    let words = n.div_ceil(64);
    let mut ancestors = vec![0u64; n * words];
    for i in 0..n {
        for &d in schedule.deps(i as StepId) {
            let d = d as usize;
            ancestors[i * words + d / 64] |= 1 << (d % 64);
            let (before, mine) = ancestors.split_at_mut(i * words);
            for (m, a) in mine[..words]
                .iter_mut()
                .zip(&before[d * words..d * words + words])
            {
                *m |= *a;
            }
        }
    }
    let steps = schedule.steps();
    for j in 0..n {
        for i in 0..j {
            if ancestors[j * words + i / 64] & (1 << (i % 64)) != 0 {
                continue;
            }
            if let Some(reason) = conflict(&steps[i].action, &steps[j].action) {
                return Err(AnalysisError::Hazard {
                    rank: schedule.rank(),
                    first: i as StepId,
                    second: j as StepId,
                    reason,
                });
            }
        }
    }
    Ok(())
}

fn conflict(a: &Action, b: &Action) -> Option<&'static str> {
    let (ra, wa) = a.slices();
    let (rb, wb) = b.slices();
    let overlap = |x: Option<_>, y: Option<_>| match (x, y) {
        (Some(x), Some(y)) => super::Slice::overlaps(&x, &y),
        _ => false,
    };
    if overlap(wa, rb) || overlap(wa, wb) || overlap(wb, ra) {
        return Some("they overlap and one writes");
    }
    if a.is_transfer() != b.is_transfer() {
        let bufs = |r: Option<super::Slice>, w: Option<super::Slice>| {
            [r, w]
                .into_iter()
                .flatten()
                .map(|s| s.buf)
                .collect::<Vec<_>>()
        };
        let (x, y) = (bufs(ra, wa), bufs(rb, wb));
        if x.iter().any(|b| y.contains(b)) {
            return Some("a local step shares a buffer with a transfer");
        }
    }
    None
}

/// Replays every rank's [`super::Executor`] policy at once, without time: a rank starts
/// what is ready, sweeps what completed, and otherwise blocks on its earliest step
/// in flight, noticing nothing else until that one completes. Transfers match in
/// per-pair order; sends complete as `protocol` says. Fails if the ranks stop with
/// steps left.
pub fn check_progress(spec: &CollSpec, protocol: Protocol) -> Result<(), AnalysisError> {
    check_progress_of(all_schedules(spec)?, protocol)
}

/// [`check_progress`] of given schedules (one per rank, in rank order).
pub fn check_progress_of(
    schedules: Vec<Schedule>,
    protocol: Protocol,
) -> Result<(), AnalysisError> {
    let mut ranks: Vec<Replay> = schedules.into_iter().map(Replay::new).collect();
    // Posted, unmatched transfers per (sender, receiver).
    let mut sends: HashMap<(Rank, Rank), VecDeque<StepId>> = HashMap::new();
    let mut recvs: HashMap<(Rank, Rank), VecDeque<StepId>> = HashMap::new();
    for r in &mut ranks {
        r.start();
    }
    loop {
        let mut moved = false;
        for r in ranks.iter_mut() {
            for i in r.posted.drain(..) {
                match r.steps[i as usize] {
                    (Kind::Send, peer) => {
                        sends.entry((r.rank, peer)).or_default().push_back(i);
                        if protocol == Protocol::Eager {
                            r.transport_done[i as usize] = true;
                        }
                    }
                    (_, peer) => recvs.entry((peer, r.rank)).or_default().push_back(i),
                }
                moved = true;
            }
        }
        for (&(from, to), queue) in sends.iter_mut() {
            let Some(rq) = recvs.get_mut(&(from, to)) else {
                continue;
            };
            while let (Some(&s), Some(&r)) = (queue.front(), rq.front()) {
                queue.pop_front();
                rq.pop_front();
                ranks[from].transport_done[s as usize] = true;
                ranks[to].transport_done[r as usize] = true;
                moved = true;
            }
        }
        for r in ranks.iter_mut() {
            moved |= r.turn()?;
        }
        if ranks.iter().all(|r| r.left == 0) {
            return Ok(());
        }
        if !moved {
            let stuck = ranks
                .iter()
                .filter(|r| r.left > 0)
                .map(|r| match r.blocked_on {
                    Some(i) => {
                        let (kind, peer) = r.steps[i as usize];
                        format!("rank {} waits for its {kind:?} with rank {peer}", r.rank)
                    }
                    None => format!("rank {} has nothing in flight", r.rank),
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(AnalysisError::Deadlock { protocol, stuck });
        }
    }
}

/// One rank's executor, replayed (mirrors [`super::Executor`]'s bookkeeping).
struct Replay {
    rank: Rank,
    schedule: Schedule,
    /// (kind, peer) of each step; local steps have their own rank as peer.
    steps: Vec<(Kind, Rank)>,
    waiting: Vec<u32>,
    same_peer_next: Vec<Option<StepId>>,
    dependents: Vec<Vec<StepId>>,
    ready: BinaryHeap<Reverse<StepId>>,
    in_flight: Vec<StepId>,
    /// Completed on the transport (maybe not yet noticed by the rank).
    transport_done: Vec<bool>,
    /// Transfers started since the transport last looked.
    posted: Vec<StepId>,
    blocked_on: Option<StepId>,
    left: usize,
}

impl Replay {
    fn new(schedule: Schedule) -> Replay {
        let n = schedule.len();
        let rank = schedule.rank();
        let mut waiting = vec![0u32; n];
        let mut dependents = vec![Vec::new(); n];
        let mut same_peer_next = vec![None; n];
        let mut last: HashMap<(Kind, Rank), StepId> = HashMap::new();
        let mut steps = Vec::with_capacity(n);
        for (i, step) in schedule.steps().iter().enumerate() {
            let kind = step.action.kind();
            steps.push((kind, step.action.peer().unwrap_or(rank)));
            waiting[i] = schedule.deps(i as StepId).len() as u32;
            for &d in schedule.deps(i as StepId) {
                dependents[d as usize].push(i as StepId);
            }
            if let Some(peer) = step.action.peer() {
                if let Some(prev) = last.insert((kind, peer), i as StepId) {
                    same_peer_next[prev as usize] = Some(i as StepId);
                    waiting[i] += 1;
                }
            }
        }
        Replay {
            rank,
            schedule,
            steps,
            waiting,
            same_peer_next,
            dependents,
            ready: BinaryHeap::new(),
            in_flight: Vec::new(),
            transport_done: vec![false; n],
            posted: Vec::new(),
            blocked_on: None,
            left: n,
        }
    }

    fn start(&mut self) {
        for i in 0..self.steps.len() {
            if self.waiting[i] == 0 {
                self.ready.push(Reverse(i as StepId));
            }
        }
        self.pump();
    }

    fn pump(&mut self) {
        while let Some(Reverse(i)) = self.ready.pop() {
            match self.steps[i as usize].0 {
                Kind::Send | Kind::Recv => {
                    self.posted.push(i);
                    let at = self.in_flight.partition_point(|&j| j < i);
                    self.in_flight.insert(at, i);
                    if let Some(next) = self.same_peer_next[i as usize] {
                        self.release(next);
                    }
                }
                Kind::Reduce | Kind::Copy => self.complete(i),
            }
        }
    }

    fn complete(&mut self, i: StepId) {
        self.left -= 1;
        for k in 0..self.dependents[i as usize].len() {
            let j = self.dependents[i as usize][k];
            self.release(j);
        }
    }

    fn release(&mut self, j: StepId) {
        self.waiting[j as usize] -= 1;
        if self.waiting[j as usize] == 0 {
            self.ready.push(Reverse(j));
        }
    }

    /// One move of the rank; whether anything changed.
    fn turn(&mut self) -> Result<bool, AnalysisError> {
        if self.left == 0 {
            return Ok(false);
        }
        if let Some(i) = self.blocked_on {
            if !self.transport_done[i as usize] {
                return Ok(false);
            }
            self.blocked_on = None;
            self.in_flight.retain(|&j| j != i);
            self.complete(i);
            self.pump();
        }
        // The sweep of `Executor::test`, until nothing more completes.
        loop {
            let done: Vec<StepId> = self
                .in_flight
                .iter()
                .copied()
                .filter(|&j| self.transport_done[j as usize])
                .collect();
            if done.is_empty() {
                break;
            }
            self.in_flight.retain(|&j| !self.transport_done[j as usize]);
            for j in done {
                self.complete(j);
            }
            self.pump();
        }
        if self.left == 0 {
            return Ok(true);
        }
        match self.in_flight.first() {
            Some(&i) => self.blocked_on = Some(i),
            None => {
                return Err(CollError::Stalled {
                    rank: self.rank,
                    left: self.left,
                    total: self.schedule.len(),
                }
                .into())
            }
        }
        Ok(true)
    }
}
