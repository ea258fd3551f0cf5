//! The clock-synchronization tests' virtual world (built for tests only): the crate's virtual-time world
//! ([`crate::sim`]) set up as a slow, noisy network of TSC-like clocks. Ranks are
//! threads, time is a per-rank counter that advances only by clock reads and by
//! message arrival, and each clock can carry an injected [`Skew`]. The truth of
//! every synchronization is therefore exact, and a test does not depend on how
//! loaded the machine is (a real-time fake on a shared 2-core box would measure the
//! scheduler).
//!
//! Rules of the virtual time (on top of [`crate::sim::net`]'s LogGP rules with
//! `o = g = G = 0`):
//! - every clock read costs [`NetModel::read_cost_ns`]; clocks tick at [`SIM_HZ`]
//!   from [`SIM_START`];
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
//! Per-pair FIFO matching makes the result independent of thread scheduling.

use crate::clock::{Skew, Ticks};
use crate::sim::{LogGp, Network, Noise, Ps, Quantum, RankClock, TickMap, WorldSpec};

pub use crate::sim::{SimClock, SimControl, SimRank, SimTransport, SlowLink};

/// Ticks per second of the virtual timer (a TSC-like 2.5 GHz, so tick/ns mix-ups show).
pub const SIM_HZ: f64 = 2.5e9;
/// The raw reading every rank starts at (large, like a TSC after an hour of uptime).
pub const SIM_START: Ticks = Ticks(9_000_000_000_000);

/// Picoseconds per tick of [`SIM_HZ`].
const TICK_PS: u64 = 400;

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

impl Default for NetModel {
    /// A slow, noisy network: 20 us one way, 200 ns jitter, every 7th message from a
    /// lower to a higher rank 30 us late. The long latency spreads a short
    /// synchronization over enough virtual time for drift to show.
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

impl NetModel {
    /// The virtual job of `skews.len()` ranks on this network; `skews[r]` is rank
    /// `r`'s injected clock error (relative to the true time every rank shares).
    pub fn world_spec(&self, skews: &[Option<Skew>]) -> WorldSpec {
        let quantum = Quantum(TICK_PS);
        let wire = LogGp {
            l_ps: Ps::from_ns(self.latency_ns).0,
            os_ps: 0,
            or_ps: 0,
            g_ps: 0,
            big_g_fs: 0,
            rendezvous: false,
            send_overlap_ps: 0,
            recv_overlap_ps: 0,
            big_o_fs: 0,
        };
        let noise = Noise {
            jitter_ns: self.jitter_ns,
            outlier_every: self.outlier_every,
            outlier_ns: self.outlier_ns,
            seed: self.seed,
            slow_link: self.slow_link,
            quantum,
        };
        WorldSpec {
            network: Network::uniform(wire).with_noise(noise),
            clocks: skews
                .iter()
                .map(|&skew| RankClock {
                    map: TickMap {
                        offset: 0,
                        ticks: 1,
                        per_ps: TICK_PS,
                    },
                    skew,
                })
                .collect(),
            start: Ps(SIM_START.0 * TICK_PS),
            // At least one tick, so a loop of reads always moves on.
            read_cost: quantum.round_ns(self.read_cost_ns).max(Ps(TICK_PS)),
            quantum,
            control_latency: Some(quantum.round_ns(self.control_latency_ns)),
        }
    }
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
    crate::sim::run(&net.world_spec(skews), body)
}

mod tests {
    use super::*;
    use crate::clock::Clock;
    use ngauge_transport::{Control, Transport};

    fn ticks(ns: f64) -> u64 {
        (ns * SIM_HZ / 1e9).round() as u64
    }

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
