//! The data and control planes of a virtual rank in the threaded test world (built
//! for tests only): a real [`Transport`] and
//! [`Control`] (ranks are threads, bytes really move) whose calls advance the
//! rank's virtual time by the [`Network`] model, so a pattern runs over them
//! unchanged and measures the model exactly.
//!
//! Every message carries its virtual arrival time. A rank's time depends only on
//! its own calls and on the arrival times of what it receives (matched per peer in
//! posting order, as MPI matches), never on how threads are scheduled: each call
//! that needs a message waits (in real time) until its frame is there, however
//! early in virtual time that is.
//!
//! - `send`: charges `o_s + (s-1)O` less the send overlap, injects at the
//!   sender's interface ([`Nic::inject`]), charges the send overlap and returns
//!   (eager, [`LogGp::send_cpu_ps`]); under a rendezvous protocol it charges all
//!   of it, sends a request-to-send, waits for the clear-to-send, then injects,
//!   and returns when the first byte left. `isend` is `send` returning a
//!   completed request.
//! - `recv` / `irecv` + `wait`: the receive is posted at the rank's time of the
//!   call; it completes `o_r + (s-1)O` after the later of the completing call and
//!   the arrival less the receive overlap ([`LogGp::recv_start`]), as the
//!   discrete-event engine charges it. A
//!   rendezvous request-to-send is answered as soon as a matching receive is
//!   posted (its clear-to-send leaves at `max(posted, request arrival)`), also
//!   while this rank is blocked in another call, so crossing rendezvous sends
//!   between pre-posted receives progress as under MPI.
//! - `test`: completes a receive only if its message has arrived by the rank's
//!   virtual time; otherwise returns `false` and leaves the time alone. It waits
//!   (in real time) for the message only as long as the sender's virtual time
//!   leaves it possible that the message arrives by then: a message not sent yet
//!   leaves at or after the sender's current time and takes at least `L`, so once
//!   the sender's time plus the smallest latency is past the tester's, the answer is
//!   `false` whatever the sender does next (the lookahead of conservative parallel
//!   simulation). Without that a `test` would wait for a sender that itself waits
//!   for the tester (a ring allreduce's sweeps). A polling loop must let time pass
//!   (a clock with a read cost, a spin) or it never ends.
//! - The receive side of the interface gap ([`Nic::accept`]) is not applied here:
//!   receives complete in the order the program calls them, not in the order
//!   messages reach the interface, which only a discrete-event simulator with a
//!   global event order can place faithfully.
//!
//! [`Noise`] adds to `L` a deterministic pseudo-random jitter, periodic outliers in
//! one direction and a slower link, for tests of estimators that must survive them
//! (the clock-sync tests).
//!
//! The control plane is the in-process one; with a control latency set, every
//! control operation ends with all ranks at the latest rank's time plus that
//! latency, like a barrier; without one it moves no time.

use crate::sim::net::{LogGp, Network, Nic};
use crate::sim::time::Ps;
use crate::sim::{Quantum, RankTime};
use ngauge_transport::inproc::InprocControl;
use ngauge_transport::{
    Access, BufferPool, Buffers, Capabilities, Control, ControlError, Rank, Region, RequestId,
    Transport, TransportError, WaitMode,
};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

const NAME: &str = "sim";

/// A one-way delay asymmetry: every message from `from` to `to` takes `extra_ns`
/// longer, the way back does not. A ping-pong over the link sees only the longer
/// round trip, so a midpoint offset measured over it errs by `extra_ns / 2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowLink {
    /// Sender.
    pub from: Rank,
    /// Receiver.
    pub to: Rank,
    /// Extra one-way delay, ns.
    pub extra_ns: f64,
}

/// Deterministic latency noise: a uniform jitter `0..jitter_ns` from a hash of
/// `(seed, from, to, seq)`; every [`Noise::outlier_every`]-th message from a lower
/// to a higher rank `outlier_ns` late (outliers in one direction bias a midpoint
/// offset by half their delay, which an estimator must reject); one slow link. The
/// noisy latency is rounded to `quantum`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Noise {
    /// Uniform jitter added to each message, `0..jitter_ns`.
    pub jitter_ns: f64,
    /// Every this many messages from a lower to a higher rank is an outlier (0:
    /// never); the other direction has none.
    pub outlier_every: u64,
    /// Extra delay of an outlier, ns.
    pub outlier_ns: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// One direction of one link that is slower than the rest.
    pub slow_link: Option<SlowLink>,
    /// The grid noisy latencies are rounded to.
    pub quantum: Quantum,
}

impl Noise {
    /// `base_ns` plus this message's jitter, outlier delay and slow-link delay.
    pub fn latency(&self, base_ns: f64, from: Rank, to: Rank, seq: u64) -> Ps {
        let h = crate::rng::mix(self.seed ^ ((from as u64) << 40) ^ ((to as u64) << 20) ^ seq);
        let jitter = (h % 1_000_000) as f64 / 1e6 * self.jitter_ns;
        let outlier = from < to && self.outlier_every > 0 && seq % self.outlier_every == 3;
        let extra = if outlier { self.outlier_ns } else { 0.0 };
        let slow = match self.slow_link {
            Some(l) if (l.from, l.to) == (from, to) => l.extra_ns,
            _ => 0.0,
        };
        self.quantum.round_ns(base_ns + jitter + extra + slow)
    }
}

/// A disturbance that varies in time and not with the size, as a process sharing a
/// core comes and goes: virtual time is cut into windows of `window_ns`, and in
/// a pseudo-random half of them (a hash of `seed` and the window's index) every
/// message sent takes `extra_ns` longer. A size measured in a disturbed window
/// reads higher than its neighbours measured in a quiet one: a step in the data
/// where the network has none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeShift {
    /// Length of a window, ns.
    pub window_ns: f64,
    /// Extra latency in a disturbed window, ns.
    pub extra_ns: f64,
    /// Seed of the windows' draw.
    pub seed: u64,
}

impl TimeShift {
    /// The extra latency of a message sent at `at`.
    pub fn extra_at(&self, at: Ps) -> Ps {
        let window = (at.as_ns() / self.window_ns) as u64;
        if crate::rng::mix(self.seed ^ window.wrapping_mul(0x9e37_79b9)) % 2 == 1 {
            Ps((self.extra_ns * 1000.0).round() as u64)
        } else {
            Ps(0)
        }
    }
}

impl Network {
    /// The same network with `shift` on the latency of every message sent in its
    /// disturbed windows.
    pub fn with_time_shift(mut self, shift: TimeShift) -> Self {
        self.shift = Some(shift);
        self
    }

    /// The same network with `noise` on every message's latency.
    pub fn with_noise(mut self, noise: Noise) -> Self {
        self.noise = Some(noise);
        self
    }

    /// A lower bound of every message's wire latency: the smallest `L`, less one
    /// step of the noise's grid when there is noise (rounding to it may shorten a
    /// latency).
    pub fn min_latency(&self) -> Ps {
        let l = self
            .protocols()
            .iter()
            .map(|(_, p)| p.l_ps)
            .min()
            .unwrap_or(0);
        let grid = self.noise.map_or(0, |n| n.quantum.0);
        Ps(l.saturating_sub(grid))
    }

    /// The wire latency of the `seq`-th message from `from` to `to` under protocol
    /// `p`: `L`, plus the noise if any.
    pub fn latency(&self, from: Rank, to: Rank, seq: u64, p: &LogGp) -> Ps {
        match &self.noise {
            None => Ps(p.l_ps),
            Some(noise) => noise.latency(Ps(p.l_ps).as_ns(), from, to, seq),
        }
    }
}

/// How often a blocked rank checks whether the peer it waits for has gone.
const LIVENESS_POLL: Duration = Duration::from_millis(20);

/// How often a `test` waiting for a message rereads the sender's time.
const LOOKAHEAD_POLL: Duration = Duration::from_micros(100);

/// What travels from one rank to another.
#[derive(Debug)]
pub(crate) struct Frame {
    from: Rank,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// An eager message, arriving (last byte) at `arrival`.
    Eager { bytes: Vec<u8>, arrival: Ps },
    /// A rendezvous request for a message of `len` bytes, arriving at `arrival`.
    RequestToSend { len: usize, arrival: Ps },
    /// The receiver's answer, arriving at the sender at `arrival`.
    ClearToSend { arrival: Ps },
    /// The data of a rendezvous message.
    Data { bytes: Vec<u8>, arrival: Ps },
}

/// A message from a peer that no receive has matched yet.
#[derive(Debug)]
enum Unexpected {
    Eager { bytes: Vec<u8>, arrival: Ps },
    RequestToSend { len: usize, arrival: Ps },
}

#[derive(Debug)]
enum Request {
    SendDone,
    Recv {
        peer: Rank,
        region: Region,
        posted: Ps,
        state: RecvState,
    },
}

#[derive(Debug)]
enum RecvState {
    /// Posted, no message matched yet.
    Posted,
    /// Matched a request-to-send; the clear-to-send went out.
    AwaitingData,
    /// The message is in the buffer (or failed); it arrived at `arrival`.
    Delivered {
        arrival: Ps,
        len: usize,
        error: Option<TransportError>,
    },
}

/// The links of one rank, shared by the world builder.
pub(crate) struct Links {
    pub(crate) to: Vec<Option<Sender<Frame>>>,
    pub(crate) inbox: Receiver<Frame>,
    pub(crate) gone: Arc<Vec<AtomicBool>>,
    /// Every rank's virtual time (read to bound when a peer's next message can
    /// arrive).
    pub(crate) times: Arc<Vec<RankTime>>,
}

/// One rank's data plane over the virtual network.
pub struct SimTransport {
    rank: Rank,
    time: RankTime,
    net: Arc<Network>,
    links: Links,
    nic: Nic,
    pool: BufferPool,
    /// Messages sent to each peer so far (the noise's sequence number).
    sent: Vec<u64>,
    /// Per peer: messages no receive matched yet, in order.
    unexpected: Vec<VecDeque<Unexpected>>,
    /// Per peer: posted receives not matched yet, in posting order.
    unmatched: Vec<VecDeque<RequestId>>,
    /// Per peer: receives that answered a request-to-send, in order.
    awaiting_data: Vec<VecDeque<RequestId>>,
    /// Per peer: clear-to-send arrival times not consumed yet.
    clear: Vec<VecDeque<Ps>>,
    requests: HashMap<RequestId, Request>,
    next_request: u64,
}

impl SimTransport {
    pub(crate) fn new(rank: Rank, time: RankTime, net: Arc<Network>, links: Links) -> Self {
        let size = links.to.len();
        SimTransport {
            rank,
            time,
            net,
            links,
            nic: Nic::default(),
            pool: BufferPool::new(NAME),
            sent: vec![0; size],
            unexpected: (0..size).map(|_| VecDeque::new()).collect(),
            unmatched: (0..size).map(|_| VecDeque::new()).collect(),
            awaiting_data: (0..size).map(|_| VecDeque::new()).collect(),
            clear: (0..size).map(|_| VecDeque::new()).collect(),
            requests: HashMap::new(),
            next_request: 0,
        }
    }

    fn size(&self) -> usize {
        self.links.to.len()
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        ngauge_transport::util::check_peer(NAME, peer, self.rank, self.size())
    }

    fn push(&self, peer: Rank, kind: Kind, op: &'static str) -> Result<(), TransportError> {
        let frame = Frame {
            from: self.rank,
            kind,
        };
        self.links.to[peer]
            .as_ref()
            .expect("checked peer")
            .send(frame)
            .map_err(|_| closed(peer, op))
    }

    /// Takes one frame from the inbox (blocking) and files it; fails when `peer`,
    /// whom the caller waits for, has gone and left nothing more.
    fn pump(&mut self, peer: Rank, op: &'static str) -> Result<(), TransportError> {
        loop {
            match self.links.inbox.recv_timeout(LIVENESS_POLL) {
                Ok(frame) => return self.file(frame),
                Err(RecvTimeoutError::Timeout) => {
                    if self.links.gone[peer].load(Ordering::SeqCst) {
                        // Its last frames were sent before it was marked gone.
                        return match self.links.inbox.try_recv() {
                            Ok(frame) => self.file(frame),
                            Err(_) => Err(closed(peer, op)),
                        };
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(closed(peer, op)),
            }
        }
    }

    /// Files a frame: matches it to a posted receive, answers a request-to-send,
    /// or keeps it for later.
    fn file(&mut self, frame: Frame) -> Result<(), TransportError> {
        let peer = frame.from;
        match frame.kind {
            Kind::ClearToSend { arrival } => self.clear[peer].push_back(arrival),
            Kind::Data { bytes, arrival } => {
                let request = self.awaiting_data[peer]
                    .pop_front()
                    .expect("data follows a clear-to-send this rank sent");
                self.deliver(request, &bytes, arrival);
            }
            Kind::Eager { bytes, arrival } => {
                let message = Unexpected::Eager { bytes, arrival };
                match self.unmatched[peer].pop_front() {
                    Some(request) => self.matched(request, message)?,
                    None => self.unexpected[peer].push_back(message),
                }
            }
            Kind::RequestToSend { len, arrival } => {
                let message = Unexpected::RequestToSend { len, arrival };
                match self.unmatched[peer].pop_front() {
                    Some(request) => self.matched(request, message)?,
                    None => self.unexpected[peer].push_back(message),
                }
            }
        }
        Ok(())
    }

    /// A posted receive meets its message.
    fn matched(&mut self, request: RequestId, message: Unexpected) -> Result<(), TransportError> {
        match message {
            Unexpected::Eager { bytes, arrival } => {
                self.deliver(request, &bytes, arrival);
                Ok(())
            }
            Unexpected::RequestToSend { len, arrival } => {
                let Some(Request::Recv {
                    peer,
                    posted,
                    state,
                    ..
                }) = self.requests.get_mut(&request)
                else {
                    unreachable!("only receives are matched");
                };
                let (peer, posted) = (*peer, *posted);
                *state = RecvState::AwaitingData;
                self.awaiting_data[peer].push_back(request);
                let p = self.net.at(len as u64);
                let answer = Ps(posted.max(arrival).0 + p.l_ps);
                self.push(peer, Kind::ClearToSend { arrival: answer }, "recv")
            }
        }
    }

    /// Copies a message into its receive's region and records its arrival.
    fn deliver(&mut self, request: RequestId, bytes: &[u8], arrival: Ps) {
        let Some(Request::Recv {
            peer,
            region,
            state,
            ..
        }) = self.requests.get_mut(&request)
        else {
            unreachable!("only receives are delivered");
        };
        let (peer, region) = (*peer, *region);
        let error = if bytes.len() != region.len {
            Some(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: region.len,
                got_bytes: bytes.len(),
            })
        } else {
            self.pool
                .region_mut(region)
                .map(|dst| dst.copy_from_slice(bytes))
                .err()
        };
        *state = RecvState::Delivered {
            arrival,
            len: bytes.len(),
            error,
        };
        self.pool.release_region(region, Access::Write);
    }

    fn new_request(&mut self, request: Request) -> RequestId {
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.requests.insert(id, request);
        id
    }

    /// The arrival of `request`'s message once it is delivered (pumping frames
    /// until then); `None` for a send.
    fn delivered(&mut self, request: RequestId) -> Result<Option<Ps>, TransportError> {
        loop {
            match self.requests.get(&request) {
                None => {
                    return Err(TransportError::UnknownRequest {
                        transport: NAME,
                        request,
                    })
                }
                Some(Request::SendDone) => return Ok(None),
                Some(Request::Recv {
                    state: RecvState::Delivered { arrival, .. },
                    ..
                }) => return Ok(Some(*arrival)),
                Some(Request::Recv { peer, .. }) => {
                    let peer = *peer;
                    self.pump(peer, "recv")?;
                }
            }
        }
    }

    /// Completes a delivered receive at the rank's time `now`: the time becomes
    /// `max(now, arrival - recv_overlap) + o_r + (s-1)O` ([`LogGp::recv_start`];
    /// a receive completed by `test` has its message in by `now`, so it pays all of
    /// `o_r` from `now`).
    fn complete(&mut self, request: RequestId) -> Result<(), TransportError> {
        match self.requests.remove(&request) {
            Some(Request::Recv {
                state:
                    RecvState::Delivered {
                        arrival,
                        len,
                        error,
                    },
                ..
            }) => {
                if let Some(e) = error {
                    return Err(e);
                }
                let p = self.net.at(len as u64);
                let start = p.recv_start(self.time.now(), arrival);
                self.time.set(Ps(start.0 + p.recv_cpu_ps(len as u64)));
                Ok(())
            }
            Some(Request::SendDone) => Ok(()),
            other => unreachable!("complete() after delivered(): {other:?}"),
        }
    }

    /// Forgets a request that failed (its peer left, the wrong size): unposts it
    /// and frees its region, so the buffer can be used again.
    fn cancel(&mut self, request: RequestId) {
        if let Some(Request::Recv {
            peer,
            region,
            state,
            ..
        }) = self.requests.remove(&request)
        {
            self.unmatched[peer].retain(|r| *r != request);
            self.awaiting_data[peer].retain(|r| *r != request);
            if !matches!(state, RecvState::Delivered { .. }) {
                self.pool.release_region(region, Access::Write);
            }
        }
    }

    /// Puts `len` bytes on the wire at `ready` or when the interface is free;
    /// returns when the first byte left and when the last arrives.
    fn inject(&mut self, peer: Rank, ready: Ps, len: usize, p: &LogGp) -> (Ps, Ps) {
        let start = self.nic.inject(ready, len as u64, p);
        let seq = self.sent[peer];
        self.sent[peer] += 1;
        let latency = self.net.latency(self.rank, peer, seq, p);
        let shift = self.net.shift.map_or(Ps(0), |s| s.extra_at(start));
        (
            start,
            Ps(start.0 + p.transfer_ps(len as u64)) + latency + shift,
        )
    }
}

fn closed(peer: Rank, op: &'static str) -> TransportError {
    TransportError::PeerClosed {
        transport: NAME,
        peer,
        op,
    }
}

impl Drop for SimTransport {
    fn drop(&mut self) {
        self.links.gone[self.rank].store(true, Ordering::SeqCst);
    }
}

impl Transport for SimTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.links.to.len()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: None,
            may_split: false,
            needs_registered_memory: false,
            checks_message_size: true,
        }
    }
    fn wait_mode(&self) -> WaitMode {
        WaitMode::Block
    }
    fn buffers(&self) -> &dyn Buffers {
        &self.pool
    }
    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.pool
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        let bytes = self.pool.region_for_read(region)?.to_vec();
        let len = bytes.len();
        let p = self.net.at(len as u64);
        let (before, after) = p.send_cpu_ps(len as u64);
        let after_os = Ps(self.time.now().0 + before);
        if !p.rendezvous {
            let (_, arrival) = self.inject(peer, after_os, len, &p);
            self.push(peer, Kind::Eager { bytes, arrival }, "send")?;
            self.time.set(Ps(after_os.0 + after));
            return Ok(());
        }
        let request = Kind::RequestToSend {
            len,
            arrival: Ps(after_os.0 + p.l_ps),
        };
        self.push(peer, request, "send")?;
        let clear = loop {
            if let Some(clear) = self.clear[peer].pop_front() {
                break clear;
            }
            self.pump(peer, "send")?;
        };
        let (start, arrival) = self.inject(peer, after_os.max(clear), len, &p);
        self.push(peer, Kind::Data { bytes, arrival }, "send")?;
        self.time.set(start);
        Ok(())
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let request = self.irecv(peer, region)?;
        self.wait(request)
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.send(peer, region)?;
        Ok(self.new_request(Request::SendDone))
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        self.pool.acquire_write(region)?;
        let request = self.new_request(Request::Recv {
            peer,
            region,
            posted: self.time.now(),
            state: RecvState::Posted,
        });
        match self.unexpected[peer].pop_front() {
            Some(message) => self.matched(request, message)?,
            None => self.unmatched[peer].push_back(request),
        }
        Ok(request)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        let done = self.arrived(request);
        if done.is_err() {
            self.cancel(request);
        }
        done
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        let done = self.delivered(request).and_then(|_| self.complete(request));
        if done.is_err() {
            self.cancel(request);
        }
        done
    }
}

impl SimTransport {
    /// [`Transport::test`], the request left to the caller when it fails.
    fn arrived(&mut self, request: RequestId) -> Result<bool, TransportError> {
        loop {
            let peer = match self.requests.get(&request) {
                None => {
                    return Err(TransportError::UnknownRequest {
                        transport: NAME,
                        request,
                    })
                }
                Some(Request::Recv {
                    state: RecvState::Delivered { arrival, .. },
                    ..
                }) => {
                    if *arrival > self.time.now() {
                        return Ok(false);
                    }
                    break;
                }
                Some(Request::SendDone) => break,
                Some(Request::Recv { peer, .. }) => *peer,
            };
            // The sender's time first, then the inbox: a frame pushed after the
            // read left at or after that time.
            let sender = self.links.times[peer].now();
            if let Ok(frame) = self.links.inbox.try_recv() {
                self.file(frame)?;
                continue;
            }
            let lookahead = self.net.min_latency();
            if lookahead.0 > 0 && Ps(sender.0 + lookahead.0) > self.time.now() {
                return Ok(false);
            }
            match self.links.inbox.recv_timeout(LOOKAHEAD_POLL) {
                Ok(frame) => self.file(frame)?,
                Err(RecvTimeoutError::Timeout) => {
                    if self.links.gone[peer].load(Ordering::SeqCst) {
                        self.pump(peer, "recv")?;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(closed(peer, "recv")),
            }
        }
        self.complete(request).map(|()| true)
    }
}

/// One rank's control plane: the in-process one, optionally aligning time.
pub struct SimControl {
    inner: InprocControl,
    time: RankTime,
    latency: Option<Ps>,
    longest_wait: Ps,
}

impl SimControl {
    pub(crate) fn new(inner: InprocControl, time: RankTime, latency: Option<Ps>) -> Self {
        SimControl {
            inner,
            time,
            latency,
            longest_wait: Ps(0),
        }
    }

    fn align(&mut self) -> Result<(), ControlError> {
        let Some(latency) = self.latency else {
            return Ok(());
        };
        let own = self.time.now();
        let all = self.inner.allgather(&own.0.to_le_bytes())?;
        let latest = all
            .iter()
            .filter_map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
            .max()
            .unwrap_or(0);
        self.longest_wait = self.longest_wait.max(Ps(latest).since(own));
        self.time.advance_to(Ps(latest) + latency);
        Ok(())
    }

    /// The longest this rank waited in one control operation for the latest rank
    /// to enter it (the control latency not included).
    pub fn longest_wait(&self) -> Ps {
        self.longest_wait
    }
}

impl Control for SimControl {
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&mut self) -> Result<(), ControlError> {
        self.inner.barrier()?;
        self.align()
    }
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        self.inner.broadcast(root, data)?;
        self.align()
    }
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        let out = self.inner.gather(root, data)?;
        self.align()?;
        Ok(out)
    }
    fn allgather(&mut self, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        let out = self.inner.allgather(data)?;
        self.align()?;
        Ok(out)
    }
}
