//! A deterministic virtual-time world for tests: ranks are threads (over
//! [`ngauge_transport::inproc`]), time is a per-rank counter that advances only by
//! clock reads and by message arrival, and each clock can carry an injected
//! [`Skew`]. The truth of every synchronization is therefore exact, and a test does
//! not depend on how loaded the machine is (a real-time fake on a shared 2-core box
//! would measure the scheduler).
//!
//! Rules of the virtual time (all in raw ticks of [`SIM_HZ`]):
//! - every clock read costs [`NetModel::read_cost_ns`];
//! - a message sent at the sender's time `s` arrives at `s + latency`, where the
//!   latency is the base plus a deterministic pseudo-random jitter, and every
//!   [`NetModel::outlier_every`]-th message from a lower to a higher rank is delayed
//!   by [`NetModel::outlier_ns`] (outliers in one direction only bias a midpoint
//!   offset by half their delay, which is what the estimators must reject); a
//!   receiver's time becomes `max(own, arrival)`; one link can be made slower in
//!   one direction ([`NetModel::slow_link`]), a delay asymmetry no estimator can see;
//! - control operations end with every rank at the latest rank's time plus
//!   [`NetModel::control_latency_ns`], like a barrier.
//!
//! The per-pair FIFO order of the in-process transport makes the result independent
//! of thread scheduling.

use crate::clock::{Clock, Skew, TickRate, Ticks};
use ngauge_transport::inproc::{self, InprocControl, InprocTransport};
use ngauge_transport::{
    BufferId, Capabilities, Control, ControlError, Counters, Rank, Region, RequestId, Transport,
    TransportError, WaitMode,
};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Ticks per second of the virtual timer (a TSC-like 2.5 GHz, so tick/ns mix-ups show).
pub const SIM_HZ: f64 = 2.5e9;
/// The raw reading every rank starts at (large, like a TSC after an hour of uptime).
pub const SIM_START: Ticks = Ticks(9_000_000_000_000);

/// Network and timer behaviour of the virtual world.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetModel {
    /// One-way latency of a data message, ns.
    pub latency_ns: f64,
    /// Uniform jitter added to each message, `0..jitter_ns`.
    pub jitter_ns: f64,
    /// Every this many messages from a lower to a higher rank is an outlier (0:
    /// never); the other direction has none.
    pub outlier_every: u64,
    /// Extra delay of an outlier, ns.
    pub outlier_ns: f64,
    /// Cost of one clock read, ns.
    pub read_cost_ns: f64,
    /// Duration of a control operation after the last rank entered it, ns.
    pub control_latency_ns: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// One direction of one link that is slower than the rest (none by default).
    pub slow_link: Option<SlowLink>,
}

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

impl Default for NetModel {
    /// A slow, noisy network: 20 us one way, 200 ns jitter, every 7th message from a
    /// lower to a higher rank 30 us late. The long latency spreads a short synchronization over enough virtual time
    /// for drift to show.
    fn default() -> Self {
        NetModel {
            latency_ns: 20_000.0,
            jitter_ns: 200.0,
            outlier_every: 7,
            outlier_ns: 30_000.0,
            read_cost_ns: 20.0,
            control_latency_ns: 50_000.0,
            seed: 0x5eed,
            slow_link: None,
        }
    }
}

fn ticks(ns: f64) -> u64 {
    (ns * SIM_HZ / 1e9).round() as u64
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

struct Shared {
    size: usize,
    net: NetModel,
    /// Arrival times of messages in flight, per `from * size + to`, FIFO.
    in_flight: Vec<Mutex<VecDeque<u64>>>,
}

impl Shared {
    fn latency(&self, from: Rank, to: Rank, seq: u64) -> u64 {
        let h = splitmix64(self.net.seed ^ ((from as u64) << 40) ^ ((to as u64) << 20) ^ seq);
        let jitter = (h % 1_000_000) as f64 / 1e6 * self.net.jitter_ns;
        let outlier = from < to && self.net.outlier_every > 0 && seq % self.net.outlier_every == 3;
        let extra = if outlier { self.net.outlier_ns } else { 0.0 };
        let slow = match self.net.slow_link {
            Some(l) if (l.from, l.to) == (from, to) => l.extra_ns,
            _ => 0.0,
        };
        ticks(self.net.latency_ns + jitter + extra + slow)
    }
}

/// A rank's virtual clock, optionally skewed.
#[derive(Clone, Debug)]
pub struct SimClock {
    now: Arc<AtomicU64>,
    read_cost: u64,
    skew: Option<Skew>,
}

impl SimClock {
    /// The current raw (true) time, without advancing it.
    pub fn raw(&self) -> Ticks {
        Ticks(self.now.load(Ordering::SeqCst))
    }

    /// The injected skew.
    pub fn skew(&self) -> Option<Skew> {
        self.skew
    }

    /// Lets `ns` of virtual time pass on this rank (a sleep).
    pub fn advance_ns(&self, ns: f64) {
        self.now.fetch_add(ticks(ns), Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Ticks {
        let raw = Ticks(self.now.fetch_add(self.read_cost, Ordering::SeqCst) + self.read_cost);
        self.skew.map_or(raw, |s| s.apply(raw))
    }
    fn rate(&self) -> TickRate {
        TickRate::new(SIM_HZ)
    }
}

/// The data plane of a virtual rank: the in-process transport plus virtual latency.
pub struct SimTransport {
    inner: InprocTransport,
    rank: Rank,
    now: Arc<AtomicU64>,
    shared: Arc<Shared>,
    sent: Vec<u64>,
    receives: HashMap<RequestId, Rank>,
}

impl SimTransport {
    fn depart(&mut self, peer: Rank) {
        if peer >= self.shared.size || peer == self.rank {
            return; // the inner transport reports the error
        }
        let seq = self.sent[peer];
        self.sent[peer] += 1;
        let arrival = self.now.load(Ordering::SeqCst) + self.shared.latency(self.rank, peer, seq);
        self.shared.in_flight[self.rank * self.shared.size + peer]
            .lock()
            .expect("sim lock")
            .push_back(arrival);
    }

    fn arrive(&self, peer: Rank) {
        let arrival = self.shared.in_flight[peer * self.shared.size + self.rank]
            .lock()
            .expect("sim lock")
            .pop_front()
            .expect("a delivered message has a recorded departure");
        self.now.fetch_max(arrival, Ordering::SeqCst);
    }
}

impl Transport for SimTransport {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn rank(&self) -> Rank {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn wait_mode(&self) -> WaitMode {
        self.inner.wait_mode()
    }
    fn alloc_buffer(&mut self, len: usize) -> Result<BufferId, TransportError> {
        self.inner.alloc_buffer(len)
    }
    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        self.inner.free_buffer(buffer)
    }
    fn buffer(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.inner.buffer(buffer)
    }
    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.inner.buffer_mut(buffer)
    }
    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.depart(peer);
        self.inner.send(peer, region)
    }
    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.inner.recv(peer, region)?;
        self.arrive(peer);
        Ok(())
    }
    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.depart(peer);
        self.inner.isend(peer, region)
    }
    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        let request = self.inner.irecv(peer, region)?;
        self.receives.insert(request, peer);
        Ok(request)
    }
    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        let done = self.inner.test(request)?;
        if done {
            if let Some(peer) = self.receives.remove(&request) {
                self.arrive(peer);
            }
        }
        Ok(done)
    }
    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        self.inner.wait(request)?;
        if let Some(peer) = self.receives.remove(&request) {
            self.arrive(peer);
        }
        Ok(())
    }
    fn counters(&self) -> Counters {
        self.inner.counters()
    }
}

/// The control plane of a virtual rank: the in-process control channel, after which
/// every rank's time is the latest rank's plus the control latency.
pub struct SimControl {
    inner: InprocControl,
    now: Arc<AtomicU64>,
    latency: u64,
    longest_wait: u64,
}

impl SimControl {
    fn align(&mut self) -> Result<(), ControlError> {
        let own = self.now.load(Ordering::SeqCst);
        let all = self.inner.allgather(&own.to_le_bytes())?;
        let latest = all
            .iter()
            .filter_map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
            .max()
            .unwrap_or(0);
        self.longest_wait = self.longest_wait.max(latest.saturating_sub(own));
        self.now.fetch_max(latest + self.latency, Ordering::SeqCst);
        Ok(())
    }

    /// The longest this rank waited in one control operation for the latest rank to
    /// enter it, in raw ticks (the control latency not included).
    pub fn longest_wait_ticks(&self) -> u64 {
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

/// One virtual rank.
pub struct SimRank {
    /// Its clock.
    pub clock: SimClock,
    /// Its data plane.
    pub transport: SimTransport,
    /// Its control plane.
    pub control: SimControl,
}

/// Builds a virtual job of `skews.len()` ranks; `skews[r]` is rank `r`'s injected
/// clock error (relative to the true time every rank shares).
pub fn world(skews: &[Option<Skew>], net: NetModel) -> Vec<SimRank> {
    let size = skews.len();
    let shared = Arc::new(Shared {
        size,
        net,
        in_flight: (0..size * size)
            .map(|_| Mutex::new(VecDeque::new()))
            .collect(),
    });
    inproc::world(size)
        .into_iter()
        .zip(skews)
        .enumerate()
        .map(|(rank, ((transport, control), skew))| {
            let now = Arc::new(AtomicU64::new(SIM_START.0));
            SimRank {
                clock: SimClock {
                    now: now.clone(),
                    read_cost: ticks(net.read_cost_ns).max(1),
                    skew: *skew,
                },
                transport: SimTransport {
                    inner: transport,
                    rank,
                    now: now.clone(),
                    shared: shared.clone(),
                    sent: vec![0; size],
                    receives: HashMap::new(),
                },
                control: SimControl {
                    inner: control,
                    now,
                    latency: ticks(net.control_latency_ns),
                    longest_wait: 0,
                },
            }
        })
        .collect()
}

/// Runs `body` on every rank of a virtual job in its own thread; results by rank.
///
/// # Panics
/// If a rank's body panics (the panic is re-raised here, in the test).
pub fn run<R: Send>(
    skews: &[Option<Skew>],
    net: NetModel,
    body: impl Fn(SimRank) -> R + Sync,
) -> Vec<R> {
    let ranks = world(skews, net);
    std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|rank| scope.spawn(|| body(rank)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_pong_costs_two_latencies_and_reads() {
        let net = NetModel {
            jitter_ns: 0.0,
            outlier_every: 0,
            ..NetModel::default()
        };
        let rtts = run(&[None, None], net, |mut r| {
            let buf = r.transport.alloc_buffer(8).unwrap();
            if r.transport.rank() == 0 {
                let sent = r.clock.now();
                r.transport.send(1, buf.prefix(8)).unwrap();
                r.transport.recv(1, buf.prefix(8)).unwrap();
                r.clock.now().since(sent)
            } else {
                r.transport.recv(0, buf.prefix(8)).unwrap();
                r.transport.send(0, buf.prefix(8)).unwrap();
                0
            }
        });
        // 2 x 20 us, plus the closing read.
        assert_eq!(rtts[0], ticks(40_000.0) + ticks(20.0));
    }

    #[test]
    fn control_operations_align_time_and_skew_applies() {
        let skew = Skew {
            offset_ticks: 1000.0,
            drift: 0.0,
            epoch: SIM_START,
        };
        let out = run(&[None, Some(skew)], NetModel::default(), |mut r| {
            if r.control.rank() == 0 {
                r.clock.advance_ns(1e6);
            }
            r.control.barrier().unwrap();
            (r.clock.raw(), r.clock.now())
        });
        assert_eq!(out[0].0, out[1].0, "aligned after the barrier");
        assert_eq!(out[0].0, Ticks(SIM_START.0 + ticks(1e6) + ticks(50_000.0)));
        assert_eq!(out[1].1 .0, out[1].0 .0 + ticks(20.0) + 1000);
    }
}
