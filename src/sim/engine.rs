//! A discrete-event LogGP simulator of collective schedules (Hoefler, Schneider,
//! Lumsdaine, "LogGP in theory and practice", sec. 4.1): every rank is a queue of
//! nonblocking sends, receives and local steps taken from the very
//! [`Schedule`] values that [`crate::coll::exec::Executor`] runs over a transport,
//! and one event queue in virtual time moves them all.
//!
//! # The model (sec. 4.1, with the rules of [`crate::sim::net`])
//!
//! - A send charges `o_s` to its rank's CPU. An eager send then completes; its
//!   first byte leaves when the network interface is free ([`Nic::inject`]: `g +
//!   (s-1)G` between messages), the last byte arrives `(s-1)G + L` later. A
//!   rendezvous send sends a request-to-send (`L`); the receiver answers with a
//!   clear-to-send (`L`) once the matching receive is posted; the data leaves when
//!   that arrives and the send completes then (when its first byte leaves, as in
//!   `SimTransport`).
//! - The receiving interface takes messages in `g + (s-1)G` apart ([`Nic::accept`],
//!   handled in global time order, so several senders to one rank queue up; can be
//!   switched off with [`Options::receive_gap`] to compare with the threaded world,
//!   which cannot place it).
//! - A receive completes `o_r` after the later of the rank noticing it and the
//!   last byte's arrival (a rank blocked in the receive starts `recv_overlap`
//!   before the arrival, [`LogGp::recv_start`]); local steps (`Reduce`, `Copy`) cost
//!   [`Options::local_fs_per_byte`] per byte on the CPU (0 by default: LogGP has no
//!   computation).
//! - Messages match in per-pair order (the `k`-th send from `a` to `b` is the
//!   `k`-th receive at `b` from `a`, [`crate::coll::schedule`]'s rule 2); the
//!   protocol (and so the parameters) of a message is that of its size's range in
//!   the [`Network`].
//!
//! # One description, two engines
//!
//! The paper's simulator notices a completed operation the moment it happens. Ours
//! replays what [`crate::coll::exec::Executor::run`] does instead, because that is
//! what runs on the wire and what the threaded `SimTransport` world
//! measures: post every ready step in list order (a transfer that is alone runs
//! blocking); sweep the steps in flight in list order, completing what has
//! finished by the rank's time (each receive costing `o_r` as it is noticed),
//! then post what became ready; otherwise block on the earliest step in flight
//! and notice nothing else until it completes. The tests' `check_progress`
//! is the same replay without time. With the receive-side gap switched off, the
//! completion time of every rank equals the threaded world's to the picosecond for
//! eager protocols (`sim::tests_engine` proves it for every algorithm); under
//! rendezvous the threaded transport's `isend` blocks until the clear-to-send, so the
//! two agree only where no other step is in flight at such a send.
//!
//! # Causality without a global lock step
//!
//! A rank runs ahead of the event queue's time `T` as long as nothing it decides
//! depends on messages not yet delivered: posting, charging overheads and its own
//! eager injections (in program order) never do. Testing a step whose message is
//! not delivered yet does: if the rank's time is beyond what the queue has
//! settled, the rank yields (an event at its own time, ordered after the message
//! events of that instant) and tests again then. Every message is delivered, or
//! has its event queued, by the time its sender reached the instant it left, and
//! every action happens at or after the action that caused it, so when the queue
//! reaches time `t` every message arriving by `t` is known. This holds when
//! messages take time (`L > 0`); with `L = 0`, a message arriving at the very
//! instant a rank tests for it may count as not yet arrived.
//!
//! # Cost
//!
//! A rank's state is built when it first has something to do: at time 0 unless
//! [`Program::passive_at_start`] says it only posts receives (every rank but the
//! root of a broadcast), otherwise when the first message reaches it; it is
//! recycled when the rank is done. So a broadcast over `2^20` ranks holds only the
//! ranks between their first message and their last send. Events are kept in
//! buckets of equal (time, priority): a collective over uniform parameters has few
//! distinct instants, so most events cost a vector push and pop.

use crate::coll::schedule::{Kind, Schedule, StepId};
use crate::coll::CollError;
use crate::sim::net::{LogGp, Network, Nic};
use crate::sim::time::Ps;
use ngauge_transport::Rank;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// What the simulator runs: per rank and per call, a schedule.
pub trait Program {
    /// Ranks in the job.
    fn np(&self) -> usize;
    /// Calls each rank makes back to back (a call starts when the rank's previous
    /// call is complete, as in a loop of `Executor::run`).
    fn calls(&self) -> u32;
    /// Rank `rank`'s schedule for call `call`.
    fn schedule(&self, rank: Rank, call: u32) -> Result<Schedule, CollError>;
    /// Whether every rank's schedule of `call` is the one of `call - 1` (the engine
    /// then keeps it instead of building it again).
    fn repeats(&self, call: u32) -> bool;
    /// Whether `rank` does nothing at the start of call 0 but post receives, so its
    /// state can wait until a message reaches it. Saying `false` is always safe;
    /// saying `true` wrongly is reported as [`SimError::NotPassive`].
    fn passive_at_start(&self, rank: Rank) -> bool;
}

/// How to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Keep `g + (s-1)G` between messages on the receiving interface too (LogP's
    /// gap holds for receptions). Off, a message is in `(s-1)G + L` after it left,
    /// whatever else arrives, as in the threaded `SimTransport`.
    pub receive_gap: bool,
    /// CPU time of a `Reduce` or `Copy` step per byte, femtoseconds.
    pub local_fs_per_byte: u64,
    /// Keep every rank's completion time in [`Outcome::finish`].
    pub per_rank: bool,
    /// Record every overhead, gap and message in [`Outcome::trace`] (for timelines
    /// of small runs: one entry per message and overhead).
    pub trace: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            receive_gap: true,
            local_fs_per_byte: 0,
            per_rank: false,
            trace: false,
        }
    }
}

/// What an entry of the trace shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// `o_s` on `rank`'s CPU.
    SendOverhead,
    /// `o_r` on `rank`'s CPU.
    RecvOverhead,
    /// A reduction or copy on `rank`'s CPU.
    Local,
    /// `rank`'s interface busy sending to `peer`: `g + (s-1)G` from the first byte.
    SendGap,
    /// `rank`'s interface busy receiving from `peer`: `g + (s-1)G`.
    RecvGap,
    /// A message from `rank` to `peer`: from its first byte leaving to its last byte
    /// in.
    Wire,
    /// A rendezvous request-to-send from `rank` to `peer` (`L`).
    Request,
    /// A rendezvous clear-to-send from `rank` to `peer` (`L`).
    Clear,
}

/// One entry of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// What it is.
    pub kind: SpanKind,
    /// The rank whose CPU or interface is busy, or the sender of a message.
    pub rank: Rank,
    /// The other end of a transfer (the rank itself for a local step).
    pub peer: Rank,
    /// The call it belongs to.
    pub call: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Start, virtual time.
    pub start: Ps,
    /// End, virtual time.
    pub end: Ps,
}

/// What the engine counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Events handled: message arrivals, rendezvous requests and answers, rank
    /// activations (start, wake-up, resumption).
    pub events: u64,
    /// Messages sent (rendezvous handshakes not counted).
    pub messages: u64,
    /// Messages the receiving interface held back because it was busy.
    pub receive_gap_delays: u64,
    /// Rank states built (a rank of a multi-call run is built once).
    pub ranks_built: u64,
    /// Most rank states alive at once.
    pub peak_live_ranks: usize,
    /// Most bytes of rank state alive at once (schedules, step states, queues;
    /// the per-rank completion vector not included).
    pub peak_state_bytes: usize,
}

/// The result of a simulation: when every rank was done, all having started at 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The latest completion over all ranks (the collective's time in the window
    /// scheme's sense: latest end minus common start).
    pub makespan: Ps,
    /// A rank that completes at `makespan` (the lowest such).
    pub slowest: Rank,
    /// Completion time of every rank's last call (empty unless
    /// [`Options::per_rank`]).
    pub finish: Vec<Ps>,
    /// Counts.
    pub stats: Stats,
    /// Overheads, gaps and messages in the order they were decided (empty unless
    /// [`Options::trace`]).
    pub trace: Vec<Span>,
}

/// Why a simulation failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A schedule could not be built.
    #[error(transparent)]
    Coll(#[from] CollError),
    /// A message that no receive of its destination matches.
    #[error("rank {to} has no receive for message {ordinal} of call {call} from rank {from}")]
    Unmatched {
        /// Destination.
        to: Rank,
        /// Sender.
        from: Rank,
        /// Call.
        call: u32,
        /// Position among the messages of that call from `from` to `to` (from 0).
        ordinal: u32,
    },
    /// Sender and receiver disagree on a message's length.
    #[error("rank {from} sends {sent} bytes to rank {to}, which receives {expected}")]
    SizeMismatch {
        /// Sender.
        from: Rank,
        /// Destination.
        to: Rank,
        /// Bytes sent.
        sent: u64,
        /// Bytes the receive expects.
        expected: u64,
    },
    /// A schedule sends to the rank itself or to a rank outside the job.
    #[error("rank {rank} has a transfer with rank {peer} in a job of {np} ranks")]
    BadPeer {
        /// The rank.
        rank: Rank,
        /// The peer named.
        peer: Rank,
        /// Ranks in the job.
        np: usize,
    },
    /// Ranks are left waiting and nothing can move.
    #[error("deadlock: {stuck}")]
    Deadlock {
        /// Who waits for what (the first few).
        stuck: String,
    },
    /// A rank said to be passive did more than post receives at time 0.
    #[error(
        "rank {rank} was declared passive at the start but sends or computes before receiving"
    )]
    NotPassive {
        /// The rank.
        rank: Rank,
    },
}

/// Runs `program` over `net`.
pub fn simulate(
    program: &dyn Program,
    net: &Network,
    options: Options,
) -> Result<Outcome, SimError> {
    Sim::new(program, net, options).run()
}

const NONE: u32 = u32::MAX;
/// `Sim::finish` of a rank whose state was never built.
const UNBUILT: u64 = u64::MAX;
/// `Sim::finish` of a rank whose state is built and not done.
const RUNNING: u64 = u64::MAX - 1;
/// Message events come before rank resumptions of the same instant.
const PRIO_MESSAGE: u8 = 0;
const PRIO_RESUME: u8 = 1;

/// One step, compiled for the engine.
#[derive(Clone, Copy, Debug)]
struct CStep {
    bytes: u64,
    /// Peer of a transfer (`NONE` for a local step).
    peer: u32,
    /// Position among this rank's transfers of the same kind with the same peer.
    ordinal: u32,
    /// The next transfer of the same kind and peer (`NONE`).
    next_same: u32,
    /// Dependencies, plus 1 if an earlier transfer of the same kind and peer must
    /// start first.
    blockers: u32,
    kind: Kind,
}

/// A rank's schedule for one call, compiled.
#[derive(Debug, Default)]
struct Compiled {
    steps: Vec<CStep>,
    /// Dependents of step `i`: `dependents[dep_start[i]..dep_start[i + 1]]`.
    dep_start: Vec<u32>,
    dependents: Vec<StepId>,
    /// Receives as `(peer, step)`, sorted: the `k`-th from a peer is the `k`-th of
    /// its run.
    recv_index: Vec<(u32, u32)>,
}

const POSTED: u8 = 1;
/// Completion time known (`time`): a receive's last byte in, a send's completion.
const KNOWN: u8 = 2;
/// A rendezvous request arrived at `time` from send step `aux`.
const REQUEST: u8 = 4;

/// A step's dynamic state.
#[derive(Clone, Copy, Debug, Default)]
struct SState {
    time: u64,
    aux: u32,
    waiting: u32,
    flags: u8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// Posting ready steps; then the sweep (`in_test`) or the top of the wait loop.
    Pump { may_block: bool, in_test: bool },
    /// The top of `Executor::wait`'s loop.
    WaitTop,
    /// A pass of `Executor::test` over the steps in flight, at position `k`, with
    /// `w` kept.
    Sweep { k: u32, w: u32, progressed: bool },
    /// Waiting for one step (`alone`: posted blocking, not in flight).
    Blocked { step: StepId, alone: bool },
    #[default]
    Done,
}

/// A message: the `ordinal`-th of call `call` from `from` to `to`, of `bytes`.
#[derive(Clone, Copy, Debug)]
struct Msg {
    to: u32,
    from: u32,
    call: u32,
    ordinal: u32,
    bytes: u64,
}

impl Msg {
    /// Send `step` of rank `from` in call `call`.
    fn of(from: usize, step: &CStep, call: u32) -> Msg {
        Msg {
            to: step.peer,
            from: from as u32,
            call,
            ordinal: step.ordinal,
            bytes: step.bytes,
        }
    }

    fn unmatched(self) -> SimError {
        SimError::Unmatched {
            to: self.to as usize,
            from: self.from as usize,
            call: self.call,
            ordinal: self.ordinal,
        }
    }
}

/// A message for a call the rank has not reached yet.
#[derive(Clone, Copy, Debug)]
struct Early {
    msg: Msg,
    time: u64,
    /// `NONE` for data (`time`: last byte in); else a request from send step `aux`.
    aux: u32,
}

/// A live rank.
#[derive(Debug, Default)]
struct Live {
    now: Ps,
    call: u32,
    prog: Compiled,
    st: Vec<SState>,
    ready: BinaryHeap<Reverse<StepId>>,
    in_flight: Vec<StepId>,
    left: u32,
    phase: Phase,
    nic: Nic,
    rendezvous_pending: u32,
    early: Vec<Early>,
    /// Whether it has run at all (a passive rank is built before it starts).
    started: bool,
    /// Whether it waits in `Sim::work`.
    queued: bool,
}

impl Live {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Live>()
            + self.prog.steps.capacity() * std::mem::size_of::<CStep>()
            + (self.prog.dep_start.capacity() + self.prog.dependents.capacity()) * 4
            + self.prog.recv_index.capacity() * 8
            + self.st.capacity() * std::mem::size_of::<SState>()
            + (self.ready.capacity() + self.in_flight.capacity()) * 4
            + self.early.capacity() * std::mem::size_of::<Early>()
    }

    /// The receive step for message `ordinal` from `from`.
    fn recv_for(&self, from: u32, ordinal: u32) -> Option<StepId> {
        let idx = &self.prog.recv_index;
        let first = idx.partition_point(|&(p, _)| p < from);
        match idx.get(first + ordinal as usize) {
            Some(&(p, step)) if p == from => Some(step),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Resume(u32),
    /// First byte of a data message reaches its destination's interface.
    FirstByte(Msg),
    /// A rendezvous request from send step `.1` reaches the message's destination.
    Request(Msg, u32),
    /// A clear-to-send reaches the sender `to` for its step `step`.
    Clear {
        to: u32,
        call: u32,
        step: u32,
    },
}

/// Events by (time, priority), first in first out within one.
#[derive(Debug, Default)]
struct Queue {
    buckets: BTreeMap<(u64, u8), VecDeque<Ev>>,
    spare: Vec<VecDeque<Ev>>,
}

impl Queue {
    fn push(&mut self, t: Ps, prio: u8, ev: Ev) {
        let spare = &mut self.spare;
        self.buckets
            .entry((t.0, prio))
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push_back(ev);
    }

    fn pop(&mut self) -> Option<(Ps, u8, Ev)> {
        let mut entry = self.buckets.first_entry()?;
        let (t, prio) = *entry.key();
        let ev = entry
            .get_mut()
            .pop_front()
            .expect("no empty bucket is kept");
        if entry.get().is_empty() {
            self.spare.push(entry.remove());
        }
        Some((Ps(t), prio, ev))
    }
}

struct Sim<'a> {
    program: &'a dyn Program,
    net: &'a Network,
    options: Options,
    np: usize,
    calls: u32,
    ranks: Vec<Option<Box<Live>>>,
    /// Completion of each rank's last call, or [`UNBUILT`] / [`RUNNING`].
    finish: Vec<u64>,
    queue: Queue,
    work: VecDeque<u32>,
    /// Every message arriving at or before this instant is known (`None`: none
    /// yet is guaranteed).
    settled: Option<Ps>,
    /// Finished ranks' states, reused (boxed so that building a rank moves a
    /// pointer, not the state).
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Live>>,
    /// Scratch for compiling.
    keys: Vec<(u8, u32, u32)>,
    live_ranks: usize,
    state_bytes: usize,
    /// Inside [`Sim::advance`]: ranks woken go to `work` instead of running.
    in_advance: bool,
    stats: Stats,
    trace: Vec<Span>,
}

impl<'a> Sim<'a> {
    fn new(program: &'a dyn Program, net: &'a Network, options: Options) -> Sim<'a> {
        let np = program.np();
        Sim {
            program,
            net,
            options,
            np,
            calls: program.calls(),
            ranks: (0..np).map(|_| None).collect(),
            finish: vec![UNBUILT; np],
            queue: Queue::default(),
            work: VecDeque::new(),
            settled: Some(Ps(0)),
            pool: Vec::new(),
            keys: Vec::new(),
            live_ranks: 0,
            state_bytes: 0,
            in_advance: false,
            stats: Stats::default(),
            trace: Vec::new(),
        }
    }

    fn run(mut self) -> Result<Outcome, SimError> {
        if self.calls == 0 {
            self.finish.fill(0);
        } else {
            for r in 0..self.np {
                if !self.program.passive_at_start(r) {
                    self.build(r)?;
                    self.ranks[r].as_mut().expect("built").queued = true;
                    self.work.push_back(r as u32);
                }
            }
        }
        loop {
            while let Some(r) = self.work.pop_front() {
                self.stats.events += 1;
                self.advance(r as usize)?;
            }
            let Some((t, prio, ev)) = self.queue.pop() else {
                break;
            };
            self.settled = if prio == PRIO_RESUME {
                Some(t)
            } else {
                t.0.checked_sub(1).map(Ps)
            };
            match ev {
                Ev::Resume(r) => self.wake(r as usize)?,
                Ev::FirstByte(m) => {
                    self.stats.events += 1;
                    self.first_byte(t, m)?
                }
                Ev::Request(m, send_step) => {
                    self.stats.events += 1;
                    self.deliver(m, t, send_step)?
                }
                Ev::Clear { to, call, step } => {
                    self.stats.events += 1;
                    self.clear(t, to as usize, call, step)?
                }
            }
        }
        self.conclude()
    }

    /// Checks that every rank is done and assembles the outcome.
    fn conclude(mut self) -> Result<Outcome, SimError> {
        let mut stuck = Vec::new();
        for r in 0..self.np {
            match self.finish[r] {
                RUNNING => {
                    let live = self.ranks[r].as_ref().expect("running ranks are live");
                    stuck.push(describe(r, live));
                }
                UNBUILT => {
                    // Never reached: fine if it had nothing to do.
                    let mut idle = true;
                    for call in 0..self.calls {
                        idle &= self.program.schedule(r, call)?.is_empty();
                    }
                    if idle {
                        self.finish[r] = 0;
                    } else {
                        stuck.push(format!("rank {r} never received anything"));
                    }
                }
                _ => {}
            }
            if stuck.len() >= 5 {
                break;
            }
        }
        if !stuck.is_empty() {
            return Err(SimError::Deadlock {
                stuck: stuck.join("; "),
            });
        }
        let (slowest, &makespan) = self
            .finish
            .iter()
            .enumerate()
            .rev()
            .max_by_key(|&(_, t)| *t)
            .unwrap_or((0, &0));
        Ok(Outcome {
            makespan: Ps(makespan),
            slowest,
            finish: if self.options.per_rank {
                self.finish.iter().map(|&t| Ps(t)).collect()
            } else {
                Vec::new()
            },
            stats: self.stats,
            trace: self.trace,
        })
    }

    /// Builds rank `r`'s state for call 0.
    fn build(&mut self, r: usize) -> Result<(), SimError> {
        let mut live = self.pool.pop().unwrap_or_default();
        live.now = Ps(0);
        live.call = 0;
        live.nic = Nic::default();
        live.rendezvous_pending = 0;
        live.early.clear();
        live.started = false;
        live.queued = false;
        self.load(r, &mut live, 0)?;
        self.stats.ranks_built += 1;
        self.live_ranks += 1;
        self.stats.peak_live_ranks = self.stats.peak_live_ranks.max(self.live_ranks);
        self.state_bytes += live.bytes();
        self.stats.peak_state_bytes = self.stats.peak_state_bytes.max(self.state_bytes);
        self.ranks[r] = Some(live);
        self.finish[r] = RUNNING;
        Ok(())
    }

    /// The live state of `r`, and whether it was built just now: a passive rank
    /// is built when its first message comes, and started (at time 0, where it
    /// only posts receives) once that message is filed, which decides nothing
    /// differently: the receives it posts at 0 see the message arrive when it does.
    fn live(&mut self, r: usize) -> Result<&mut Live, SimError> {
        if self.ranks[r].is_none() {
            debug_assert_eq!(self.finish[r], UNBUILT, "done ranks are refused before");
            self.build(r)?;
            let live = self.ranks[r].as_ref().expect("built");
            if live
                .ready
                .iter()
                .any(|&Reverse(i)| live.prog.steps[i as usize].kind != Kind::Recv)
            {
                return Err(SimError::NotPassive { rank: r });
            }
        }
        Ok(self.ranks[r].as_mut().expect("built"))
    }

    /// Runs `r` now, or after the current rank when called from inside one.
    fn wake(&mut self, r: usize) -> Result<(), SimError> {
        if self.in_advance {
            let live = self.ranks[r].as_mut().expect("woken ranks are live");
            if !live.queued {
                live.queued = true;
                self.work.push_back(r as u32);
            }
            Ok(())
        } else {
            self.stats.events += 1;
            self.advance(r)
        }
    }

    /// Loads call `call`'s schedule into `live` and resets it to start the call.
    fn load(&mut self, r: usize, live: &mut Live, call: u32) -> Result<(), SimError> {
        if call == 0 || !self.program.repeats(call) {
            let schedule = self.program.schedule(r, call)?;
            self.compile(r, &schedule, &mut live.prog)?;
        }
        let n = live.prog.steps.len();
        live.call = call;
        live.st.clear();
        live.st.extend(live.prog.steps.iter().map(|s| SState {
            waiting: s.blockers,
            ..SState::default()
        }));
        live.ready.clear();
        live.ready.extend(
            (0..n as u32)
                .filter(|&i| live.prog.steps[i as usize].blockers == 0)
                .map(Reverse),
        );
        live.in_flight.clear();
        live.left = n as u32;
        live.phase = Phase::Pump {
            may_block: true,
            in_test: false,
        };
        // Messages that came for this call while the rank was in an earlier one.
        let mut k = 0;
        while k < live.early.len() {
            if live.early[k].msg.call != call {
                k += 1;
                continue;
            }
            let e = live.early.swap_remove(k);
            let step = live
                .recv_for(e.msg.from, e.msg.ordinal)
                .ok_or(e.msg.unmatched())?;
            check_bytes(live, step, e.msg)?;
            let s = &mut live.st[step as usize];
            s.time = e.time;
            if e.aux == NONE {
                s.flags |= KNOWN;
            } else {
                s.flags |= REQUEST;
                s.aux = e.aux;
            }
        }
        // Early messages were matched in arrival order; requests must be answered
        // in the order posted, which `post` does.
        Ok(())
    }

    fn compile(&mut self, r: usize, s: &Schedule, out: &mut Compiled) -> Result<(), SimError> {
        let n = s.len();
        out.steps.clear();
        out.dep_start.clear();
        out.dep_start.resize(n + 1, 0);
        self.keys.clear();
        for (i, step) in s.steps().iter().enumerate() {
            let kind = step.action.kind();
            let peer = match step.action.peer() {
                Some(p) if p >= self.np || p == r => {
                    return Err(SimError::BadPeer {
                        rank: r,
                        peer: p,
                        np: self.np,
                    })
                }
                Some(p) => {
                    self.keys.push((kind as u8, p as u32, i as u32));
                    p as u32
                }
                None => NONE,
            };
            let deps = s.deps(i as StepId);
            for &d in deps {
                out.dep_start[d as usize + 1] += 1;
            }
            out.steps.push(CStep {
                bytes: step.action.bytes() as u64,
                peer,
                ordinal: 0,
                next_same: NONE,
                blockers: deps.len() as u32,
                kind,
            });
        }
        for i in 0..n {
            out.dep_start[i + 1] += out.dep_start[i];
        }
        out.dependents.clear();
        out.dependents.resize(s.edges(), 0);
        // Fill with a moving cursor per step (dep_start[i] advanced, then undone).
        for i in 0..n {
            for &d in s.deps(i as StepId) {
                let at = &mut out.dep_start[d as usize];
                out.dependents[*at as usize] = i as StepId;
                *at += 1;
            }
        }
        for i in (1..=n).rev() {
            out.dep_start[i] = out.dep_start[i - 1];
        }
        if n > 0 {
            out.dep_start[0] = 0;
        }
        // Per kind and peer, in list order: ordinals and the next of the same pair.
        self.keys.sort_unstable();
        out.recv_index.clear();
        let recv = Kind::Recv as u8;
        for k in 0..self.keys.len() {
            let (kind, peer, i) = self.keys[k];
            let first = k == 0 || (self.keys[k - 1].0, self.keys[k - 1].1) != (kind, peer);
            if !first {
                let prev = self.keys[k - 1].2 as usize;
                out.steps[i as usize].ordinal = out.steps[prev].ordinal + 1;
                out.steps[prev].next_same = i;
                out.steps[i as usize].blockers += 1;
            }
            if kind == recv {
                out.recv_index.push((peer, i));
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn trace(
        &mut self,
        kind: SpanKind,
        rank: usize,
        peer: u32,
        call: u32,
        bytes: u64,
        start: Ps,
        end: Ps,
    ) {
        if self.options.trace {
            self.trace.push(Span {
                kind,
                rank,
                peer: if peer == NONE { rank } else { peer as usize },
                call,
                bytes,
                start,
                end,
            });
        }
    }

    /// Whether a rank at `now` knows every message arriving by then.
    fn is_settled(&self, now: Ps) -> bool {
        self.settled.is_some_and(|s| now <= s)
    }

    fn yield_at(&mut self, r: usize, t: Ps) {
        self.queue.push(t, PRIO_RESUME, Ev::Resume(r as u32));
    }

    /// Runs rank `r` until it blocks, yields or is done.
    fn advance(&mut self, r: usize) -> Result<(), SimError> {
        let mut live = self.ranks[r].take().expect("advance a live rank");
        self.in_advance = true;
        live.started = true;
        live.queued = false;
        let result = self.advance_live(r, &mut live);
        self.in_advance = false;
        if live.phase == Phase::Done {
            self.finish[r] = live.now.0;
            self.live_ranks -= 1;
            self.state_bytes -= live.bytes();
            self.pool.push(live);
        } else {
            self.ranks[r] = Some(live);
        }
        result
    }

    fn advance_live(&mut self, r: usize, live: &mut Live) -> Result<(), SimError> {
        loop {
            match live.phase {
                Phase::Pump { may_block, in_test } => {
                    while let Some(&Reverse(i)) = live.ready.peek() {
                        let step = live.prog.steps[i as usize];
                        if step.kind == Kind::Send
                            && live.rendezvous_pending > 0
                            && !self.net.at(step.bytes).rendezvous
                            && !self.is_settled(live.now)
                        {
                            // An eager injection must not pass a rendezvous one
                            // whose clear-to-send comes earlier.
                            self.yield_at(r, live.now);
                            return Ok(());
                        }
                        live.ready.pop();
                        match step.kind {
                            Kind::Send | Kind::Recv => {
                                let alone =
                                    may_block && live.in_flight.is_empty() && live.ready.is_empty();
                                self.post(r, live, i)?;
                                if step.next_same != NONE {
                                    release(live, step.next_same);
                                }
                                if alone {
                                    live.phase = Phase::Blocked {
                                        step: i,
                                        alone: true,
                                    };
                                    break;
                                }
                                let at = live.in_flight.partition_point(|&j| j < i);
                                live.in_flight.insert(at, i);
                            }
                            Kind::Reduce | Kind::Copy => {
                                let cost = local_ps(self.options.local_fs_per_byte, step.bytes);
                                self.charge(SpanKind::Local, r, live, &step, cost);
                                complete(live, i);
                            }
                        }
                    }
                    if let Phase::Pump { .. } = live.phase {
                        live.phase = if in_test {
                            Phase::Sweep {
                                k: 0,
                                w: 0,
                                progressed: false,
                            }
                        } else {
                            Phase::WaitTop
                        };
                    }
                }
                Phase::WaitTop => {
                    if live.left == 0 {
                        if live.call + 1 < self.calls {
                            let before = live.bytes();
                            self.load(r, live, live.call + 1)?;
                            self.state_bytes = self.state_bytes + live.bytes() - before;
                            self.stats.peak_state_bytes =
                                self.stats.peak_state_bytes.max(self.state_bytes);
                            continue;
                        }
                        live.phase = Phase::Done;
                        return Ok(());
                    }
                    live.phase = match live.in_flight.len() {
                        0 => {
                            return Err(SimError::Deadlock {
                                stuck: format!(
                                    "rank {r}: {} steps of call {} cannot start (schedule error)",
                                    live.left, live.call
                                ),
                            })
                        }
                        1 => Phase::Blocked {
                            step: live.in_flight[0],
                            alone: false,
                        },
                        _ => Phase::Sweep {
                            k: 0,
                            w: 0,
                            progressed: false,
                        },
                    };
                }
                Phase::Sweep {
                    mut k,
                    mut w,
                    mut progressed,
                } => {
                    while (k as usize) < live.in_flight.len() {
                        let i = live.in_flight[k as usize];
                        let s = live.st[i as usize];
                        if s.flags & KNOWN == 0 {
                            if !self.is_settled(live.now) {
                                live.phase = Phase::Sweep { k, w, progressed };
                                self.yield_at(r, live.now);
                                return Ok(());
                            }
                            live.in_flight[w as usize] = i;
                            w += 1;
                        } else if s.time <= live.now.0 {
                            self.finish_step(r, live, i);
                            progressed = true;
                        } else {
                            live.in_flight[w as usize] = i;
                            w += 1;
                        }
                        k += 1;
                    }
                    live.in_flight.truncate(w as usize);
                    live.phase = if progressed {
                        Phase::Pump {
                            may_block: false,
                            in_test: true,
                        }
                    } else if live.left == 0 {
                        Phase::WaitTop
                    } else {
                        Phase::Blocked {
                            step: live.in_flight[0],
                            alone: false,
                        }
                    };
                }
                Phase::Blocked { step, alone } => {
                    let s = live.st[step as usize];
                    if s.flags & KNOWN == 0 {
                        return Ok(());
                    }
                    let step_kind = live.prog.steps[step as usize];
                    live.now = if step_kind.kind == Kind::Recv {
                        // A receive waiting in its call runs the start of o_r
                        // while the message is still arriving.
                        self.net
                            .at(step_kind.bytes)
                            .recv_start(live.now, Ps(s.time))
                    } else {
                        live.now.max(Ps(s.time))
                    };
                    if !alone {
                        debug_assert_eq!(live.in_flight[0], step);
                        live.in_flight.remove(0);
                    }
                    self.finish_step(r, live, step);
                    live.phase = Phase::Pump {
                        may_block: true,
                        in_test: false,
                    };
                }
                Phase::Done => return Ok(()),
            }
        }
    }

    /// Charges `cost_ps` of rank `r`'s CPU for `step` (its overhead, or a local step).
    fn charge(&mut self, kind: SpanKind, r: usize, live: &mut Live, step: &CStep, cost_ps: u64) {
        let start = live.now;
        live.now = Ps(start.0 + cost_ps);
        self.trace(kind, r, step.peer, live.call, step.bytes, start, live.now);
    }

    /// A transfer whose completion the rank notices now: a receive costs `o_r`.
    fn finish_step(&mut self, r: usize, live: &mut Live, i: StepId) {
        let step = live.prog.steps[i as usize];
        if step.kind == Kind::Recv {
            let p = self.net.at(step.bytes);
            let cost = p.recv_cpu_ps(step.bytes);
            self.charge(SpanKind::RecvOverhead, r, live, &step, cost);
        }
        complete(live, i);
    }

    /// Posts transfer `i` at the rank's time.
    fn post(&mut self, r: usize, live: &mut Live, i: StepId) -> Result<(), SimError> {
        let step = live.prog.steps[i as usize];
        let call = live.call;
        match step.kind {
            Kind::Send => {
                let p = self.net.at(step.bytes);
                let (before, after) = p.send_cpu_ps(step.bytes);
                self.charge(SpanKind::SendOverhead, r, live, &step, before);
                if p.rendezvous {
                    live.rendezvous_pending += 1;
                    let at = Ps(live.now.0 + p.l_ps);
                    self.trace(SpanKind::Request, r, step.peer, call, 0, live.now, at);
                    self.queue
                        .push(at, PRIO_MESSAGE, Ev::Request(Msg::of(r, &step, call), i));
                } else {
                    let s = &mut live.st[i as usize];
                    s.flags |= POSTED | KNOWN;
                    s.time = live.now.0;
                    let leave = live.nic.inject(live.now, step.bytes, &p);
                    self.transmit(r, step, call, leave, &p)?;
                    if after > 0 {
                        self.charge(SpanKind::SendOverhead, r, live, &step, after);
                    }
                }
            }
            Kind::Recv => {
                let s = live.st[i as usize];
                live.st[i as usize].flags |= POSTED;
                if s.flags & REQUEST != 0 {
                    let at = live.now.max(Ps(s.time));
                    self.answer(r, step, call, s.aux, at);
                } else if s.flags & KNOWN == 0 {
                    live.st[i as usize].time = live.now.0;
                }
            }
            Kind::Reduce | Kind::Copy => unreachable!("local steps are not posted"),
        }
        Ok(())
    }

    /// Sends the clear-to-send of receive `step` at `at`.
    fn answer(&mut self, r: usize, step: CStep, call: u32, send_step: u32, at: Ps) {
        let p = self.net.at(step.bytes);
        let arrive = Ps(at.0 + p.l_ps);
        self.trace(SpanKind::Clear, r, step.peer, call, 0, at, arrive);
        self.queue.push(
            arrive,
            PRIO_MESSAGE,
            Ev::Clear {
                to: step.peer,
                call,
                step: send_step,
            },
        );
    }

    /// Puts the data of send `step` of rank `r` on the wire, first byte at `leave`.
    fn transmit(
        &mut self,
        r: usize,
        step: CStep,
        call: u32,
        leave: Ps,
        p: &LogGp,
    ) -> Result<(), SimError> {
        self.stats.messages += 1;
        self.trace(
            SpanKind::SendGap,
            r,
            step.peer,
            call,
            step.bytes,
            leave,
            Ps(leave.0 + p.busy_ps(step.bytes)),
        );
        let first_in = Ps(leave.0 + p.l_ps);
        let msg = Msg::of(r, &step, call);
        if self.options.receive_gap {
            self.queue.push(first_in, PRIO_MESSAGE, Ev::FirstByte(msg));
            Ok(())
        } else {
            let last = Ps(first_in.0 + p.transfer_ps(step.bytes));
            self.trace(SpanKind::Wire, r, step.peer, call, step.bytes, leave, last);
            self.deliver(msg, last, NONE)
        }
    }

    /// The first byte of message `m` reaches its destination's interface at `t`.
    fn first_byte(&mut self, t: Ps, m: Msg) -> Result<(), SimError> {
        let (to, from, call, bytes) = (m.to as usize, m.from, m.call, m.bytes);
        if self.finish[to] < RUNNING {
            return Err(m.unmatched());
        }
        let p = self.net.at(bytes);
        let (delayed, last) = {
            let live = self.live(to)?;
            (live.nic.recv_free > t, live.nic.accept(t, bytes, &p))
        };
        if delayed {
            self.stats.receive_gap_delays += 1;
        }
        if self.options.trace {
            let taken = Ps(last.0 - p.transfer_ps(bytes));
            self.trace(
                SpanKind::RecvGap,
                to,
                from,
                call,
                bytes,
                taken,
                Ps(taken.0 + p.busy_ps(bytes)),
            );
            self.trace(
                SpanKind::Wire,
                from as usize,
                to as u32,
                call,
                bytes,
                Ps(t.0 - p.l_ps),
                last,
            );
        }
        self.deliver(m, last, NONE)
    }

    /// Data (`aux == NONE`, last byte in at `t`) or a rendezvous request (`aux`: the
    /// send step, arriving at `t`) for the destination of `m`.
    fn deliver(&mut self, m: Msg, t: Ps, aux: u32) -> Result<(), SimError> {
        let (to, call) = (m.to as usize, m.call);
        if self.finish[to] < RUNNING {
            return Err(m.unmatched());
        }
        let live = self.live(to)?;
        let fresh = !live.started;
        if call > live.call {
            live.early.push(Early {
                msg: m,
                time: t.0,
                aux,
            });
            return if fresh { self.wake(to) } else { Ok(()) };
        }
        let step = live
            .recv_for(m.from, m.ordinal)
            .filter(|_| call == live.call)
            .ok_or(m.unmatched())?;
        check_bytes(live, step, m)?;
        let cstep = live.prog.steps[step as usize];
        let st = &mut live.st[step as usize];
        let mut wake = fresh;
        if aux == NONE {
            st.flags |= KNOWN;
            st.time = t.0;
            wake |= blocked_on(live.phase, step);
        } else if st.flags & POSTED != 0 {
            let at = t.max(Ps(st.time));
            self.answer(to, cstep, call, aux, at);
        } else {
            st.flags |= REQUEST;
            st.time = t.0;
            st.aux = aux;
        }
        if wake {
            self.wake(to)?;
        }
        Ok(())
    }

    /// The clear-to-send for send `step` of `to` arrives at `t`: the data leaves.
    fn clear(&mut self, t: Ps, to: usize, call: u32, step: u32) -> Result<(), SimError> {
        let mut live = self.ranks[to]
            .take()
            .expect("a rank waiting for a clear-to-send is live");
        debug_assert_eq!(live.call, call);
        let cstep = live.prog.steps[step as usize];
        let p = self.net.at(cstep.bytes);
        let leave = live.nic.inject(t, cstep.bytes, &p);
        live.rendezvous_pending -= 1;
        let s = &mut live.st[step as usize];
        s.flags |= POSTED | KNOWN;
        s.time = leave.0;
        let wake = blocked_on(live.phase, step);
        self.ranks[to] = Some(live);
        self.transmit(to, cstep, call, leave, &p)?;
        if wake {
            self.wake(to)?;
        }
        Ok(())
    }
}

fn blocked_on(phase: Phase, step: StepId) -> bool {
    matches!(phase, Phase::Blocked { step: s, .. } if s == step)
}

fn check_bytes(live: &Live, step: StepId, m: Msg) -> Result<(), SimError> {
    let expected = live.prog.steps[step as usize].bytes;
    if expected != m.bytes {
        return Err(SimError::SizeMismatch {
            from: m.from as usize,
            to: m.to as usize,
            sent: m.bytes,
            expected,
        });
    }
    Ok(())
}

fn local_ps(fs_per_byte: u64, bytes: u64) -> u64 {
    ((u128::from(fs_per_byte) * u128::from(bytes) + 500) / 1000) as u64
}

fn release(live: &mut Live, j: StepId) {
    let w = &mut live.st[j as usize].waiting;
    *w -= 1;
    if *w == 0 {
        live.ready.push(Reverse(j));
    }
}

fn complete(live: &mut Live, i: StepId) {
    live.left -= 1;
    let range =
        live.prog.dep_start[i as usize] as usize..live.prog.dep_start[i as usize + 1] as usize;
    for k in range {
        let j = live.prog.dependents[k];
        release(live, j);
    }
}

fn describe(r: usize, live: &Live) -> String {
    match live.phase {
        Phase::Blocked { step, .. } => {
            let s = live.prog.steps[step as usize];
            let what = match s.kind {
                Kind::Send => "send to",
                _ => "receive from",
            };
            format!(
                "rank {r} (call {}) waits for its {what} rank {} (step {step})",
                live.call, s.peer
            )
        }
        _ => format!("rank {r} (call {}) is stuck", live.call),
    }
}

#[cfg(test)]
/// Given schedules, one call (tests).
#[derive(Clone, Debug)]
pub struct Schedules(pub Vec<Schedule>);

#[cfg(test)]
impl Program for Schedules {
    fn np(&self) -> usize {
        self.0.len()
    }
    fn calls(&self) -> u32 {
        1
    }
    fn schedule(&self, rank: Rank, _call: u32) -> Result<Schedule, CollError> {
        Ok(self.0[rank].clone())
    }
    fn repeats(&self, _call: u32) -> bool {
        true
    }
    fn passive_at_start(&self, _rank: Rank) -> bool {
        false
    }
}
