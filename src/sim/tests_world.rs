//! A virtual job of the threaded test world (built for tests only): `P` ranks, each with its clock, data plane and control plane over
//! one [`Network`], built from a [`WorldSpec`]; [`run`] gives each rank a thread.

use crate::clock::Skew;
use crate::sim::net::Network;
use crate::sim::tests_clock::{Quantum, RankTime, SimClock, TickMap};
use crate::sim::tests_transport::{Links, SimControl, SimTransport};
use crate::sim::time::Ps;
use ngauge_transport::inproc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::sync::Arc;

/// One rank's timer: how it counts, and its injected error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankClock {
    /// Offset and rate.
    pub map: TickMap,
    /// Injected error relative to the true time (clock-sync tests), if any.
    pub skew: Option<Skew>,
}

/// Everything that defines a virtual job.
#[derive(Clone, Debug, PartialEq)]
pub struct WorldSpec {
    /// The network model.
    pub network: Network,
    /// One entry per rank: the job has `clocks.len()` ranks.
    pub clocks: Vec<RankClock>,
    /// The true time every rank starts at.
    pub start: Ps,
    /// What one clock read costs (0: reads are free).
    pub read_cost: Ps,
    /// The grid [`SimClock::advance_ns`] rounds to.
    pub quantum: Quantum,
    /// Control operations end with every rank at the latest rank's time plus this;
    /// `None`: the control plane moves no time.
    pub control_latency: Option<Ps>,
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

/// Builds the ranks of `spec`; move each into its own thread (or use [`run`]).
pub fn world(spec: &WorldSpec) -> Vec<SimRank> {
    let size = spec.clocks.len();
    let network = Arc::new(spec.network.clone());
    let gone: Arc<Vec<AtomicBool>> = Arc::new((0..size).map(|_| AtomicBool::new(false)).collect());
    let (senders, inboxes): (Vec<_>, Vec<_>) = (0..size).map(|_| channel()).unzip();
    let times: Arc<Vec<RankTime>> =
        Arc::new((0..size).map(|_| RankTime::new(spec.start)).collect());
    inproc::world(size)
        .into_iter()
        .zip(inboxes)
        .zip(&spec.clocks)
        .enumerate()
        .map(|(rank, (((_, control), inbox), clock))| {
            let time = times[rank].clone();
            let to = (0..size)
                .map(|peer| (peer != rank).then(|| senders[peer].clone()))
                .collect();
            let links = Links {
                to,
                inbox,
                gone: gone.clone(),
                times: times.clone(),
            };
            SimRank {
                clock: SimClock::new(
                    time.clone(),
                    clock.map,
                    clock.skew,
                    spec.read_cost,
                    spec.quantum,
                ),
                transport: SimTransport::new(rank, time.clone(), network.clone(), links),
                control: SimControl::new(control, time, spec.control_latency),
            }
        })
        .collect()
}

/// Runs `body` on every rank of `spec` in its own thread; results by rank.
///
/// # Panics
/// If a rank's body panics (the panic is raised again here, in the caller).
pub fn run<R: Send>(spec: &WorldSpec, body: impl Fn(SimRank) -> R + Sync) -> Vec<R> {
    let ranks = world(spec);
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
