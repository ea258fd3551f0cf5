//! Virtual clocks of the threaded test world (built for tests only).
//!
//! Every rank has its own true time ([`RankTime`], integer picoseconds, so every
//! sum is exact) that advances only through what the rank does: clock reads that
//! cost time, overheads charged by the network model, waits for a message's
//! arrival, control operations. A [`SimClock`] turns a rank's true time into timer
//! readings the way a real timer would: its own offset and rate ([`TickMap`]), an
//! optional injected error ([`Skew`], the clock-sync tests' truth), and a cost per
//! read.

use crate::clock::{Clock, Skew, TickRate, Ticks};
use crate::sim::time::Ps;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl Ps {
    /// `ns` nanoseconds, rounded to the nearest picosecond.
    pub fn from_ns(ns: f64) -> Ps {
        Ps((ns * 1e3).round() as u64)
    }

    /// The same span in nanoseconds.
    pub fn as_ns(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// `self - earlier`, zero when `earlier` is later.
    pub fn since(self, earlier: Ps) -> Ps {
        Ps(self.0.saturating_sub(earlier.0))
    }
}

/// The grid a world rounds durations given in nanoseconds to (its clocks' tick,
/// when they all tick alike), in picoseconds per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantum(pub u64);

impl Quantum {
    /// One picosecond: no rounding beyond the unit.
    pub const PS: Quantum = Quantum(1);

    /// Steps per second.
    pub fn hz(self) -> f64 {
        1e12 / self.0 as f64
    }

    /// `ns` rounded to the nearest step (computed as `round(ns * hz / 1e9)` steps,
    /// the way a timer of that rate converts).
    pub fn round_ns(self, ns: f64) -> Ps {
        Ps((ns * self.hz() / 1e9).round() as u64 * self.0)
    }
}

/// A rank's true time, shared by its clock, data plane and control plane (all on
/// the rank's thread).
#[derive(Clone, Debug)]
pub struct RankTime(Arc<AtomicU64>);

impl RankTime {
    /// Starts at `start`.
    pub fn new(start: Ps) -> Self {
        RankTime(Arc::new(AtomicU64::new(start.0)))
    }

    /// The current true time.
    pub fn now(&self) -> Ps {
        Ps(self.0.load(Ordering::SeqCst))
    }

    /// Sets the time (the caller keeps it monotonic).
    pub fn set(&self, t: Ps) {
        self.0.store(t.0, Ordering::SeqCst);
    }

    /// Lets `d` pass; returns the new time.
    pub fn advance(&self, d: Ps) -> Ps {
        Ps(self.0.fetch_add(d.0, Ordering::SeqCst) + d.0)
    }

    /// Moves the time to `t` if that is later (waiting for something).
    pub fn advance_to(&self, t: Ps) {
        self.0.fetch_max(t.0, Ordering::SeqCst);
    }
}

/// How a rank's timer counts: it reads `offset + ticks * t / per_ps` (rounded down)
/// at true time `t` ps, a rate of `1e12 * ticks / per_ps` Hz. A 2.5 GHz TSC is
/// `ticks = 1, per_ps = 400`; a 2 THz test timer `ticks = 2, per_ps = 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickMap {
    /// The reading at true time 0.
    pub offset: u64,
    /// Ticks per `per_ps` picoseconds.
    pub ticks: u64,
    /// Picoseconds per `ticks` ticks.
    pub per_ps: u64,
}

impl TickMap {
    /// The unskewed reading at true time `t`.
    pub fn reading(&self, t: Ps) -> Ticks {
        let scaled = u128::from(t.0) * u128::from(self.ticks) / u128::from(self.per_ps);
        Ticks(self.offset + scaled as u64)
    }

    /// The timer's rate.
    pub fn rate(&self) -> TickRate {
        TickRate::new(1e12 * self.ticks as f64 / self.per_ps as f64)
    }
}

/// A rank's virtual timer: a [`TickMap`], an optional injected [`Skew`], and a cost
/// per read. [`Clock::spin_until`] jumps in closed form to where a busy-wait of
/// reads would end, so a long wait costs nothing real.
#[derive(Clone, Debug)]
pub struct SimClock {
    time: RankTime,
    map: TickMap,
    skew: Option<Skew>,
    read_cost: Ps,
    quantum: Quantum,
}

impl SimClock {
    /// A clock over `time`; [`SimClock::advance_ns`] rounds to `quantum`.
    pub fn new(
        time: RankTime,
        map: TickMap,
        skew: Option<Skew>,
        read_cost: Ps,
        quantum: Quantum,
    ) -> Self {
        SimClock {
            time,
            map,
            skew,
            read_cost,
            quantum,
        }
    }

    /// The unskewed reading now, without the cost of a read.
    pub fn raw(&self) -> Ticks {
        self.map.reading(self.time.now())
    }

    /// The injected error.
    pub fn skew(&self) -> Option<Skew> {
        self.skew
    }

    /// The rank's true time.
    pub fn true_time(&self) -> Ps {
        self.time.now()
    }

    /// Lets `ns` pass on this rank (a sleep, or work), rounded to the world's
    /// quantum.
    pub fn advance_ns(&self, ns: f64) {
        self.time.advance(self.quantum.round_ns(ns));
    }

    /// The reading, skew included, at true time `t`.
    fn reading_at(&self, t: Ps) -> Ticks {
        let raw = self.map.reading(t);
        self.skew.map_or(raw, |s| s.apply(raw))
    }

    /// The first true time at or after `from` whose reading is `deadline` or
    /// later (readings never decrease: a skew's drift is far below 1).
    fn first_reaching(&self, from: Ps, deadline: Ticks) -> Ps {
        if self.reading_at(from) >= deadline {
            return from;
        }
        let (mut below, mut step) = (from.0, 1u64);
        let mut above = loop {
            let probe = below.saturating_add(step);
            if self.reading_at(Ps(probe)) >= deadline || probe == u64::MAX {
                break probe;
            }
            below = probe;
            step = step.saturating_mul(2);
        };
        while above - below > 1 {
            let mid = below + (above - below) / 2;
            if self.reading_at(Ps(mid)) >= deadline {
                above = mid;
            } else {
                below = mid;
            }
        }
        Ps(above)
    }
}

impl Clock for SimClock {
    fn now(&self) -> Ticks {
        self.reading_at(self.time.advance(self.read_cost))
    }

    fn rate(&self) -> TickRate {
        self.map.rate()
    }

    /// Ends where `loop { if now() >= deadline { break } }` would: with free reads
    /// at the first instant that reads `deadline`; with reads costing `c`, at the
    /// first read `t0 + k c` (k >= 1) that reads it.
    fn spin_until(&self, deadline: Ticks) -> Ticks {
        let t0 = self.time.now();
        let target = self.first_reaching(t0, deadline);
        let end = if self.read_cost.0 == 0 {
            target
        } else {
            let k = target.since(t0).0.div_ceil(self.read_cost.0).max(1);
            Ps(t0.0 + k * self.read_cost.0)
        };
        self.time.set(end);
        self.reading_at(end)
    }
}

mod tests {
    use super::*;

    const TSC: TickMap = TickMap {
        offset: 0,
        ticks: 1,
        per_ps: 400,
    };

    fn clock(map: TickMap, skew: Option<Skew>, read_cost: Ps) -> SimClock {
        SimClock::new(
            RankTime::new(Ps(3_600_000_000_000_000)),
            map,
            skew,
            read_cost,
            Quantum(400),
        )
    }

    /// What the default `Clock::spin_until` does, read by read.
    fn spin_by_reads(c: &SimClock, deadline: Ticks) -> Ticks {
        loop {
            let now = c.now();
            if now >= deadline {
                return now;
            }
        }
    }

    #[test]
    fn readings_follow_the_tick_map_and_reads_cost() {
        let c = clock(TSC, None, Ps(20_000));
        assert_eq!(c.raw(), Ticks(9_000_000_000_000));
        assert_eq!(c.rate().hz, 2.5e9);
        assert_eq!(
            c.now(),
            Ticks(9_000_000_000_050),
            "a read costs 20 ns = 50 ticks"
        );
        c.advance_ns(1.0);
        assert_eq!(
            c.raw(),
            Ticks(9_000_000_000_053),
            "1 ns is 2.5 ticks, rounded to 3"
        );
        let fast = TickMap {
            offset: 7,
            ticks: 2,
            per_ps: 1,
        };
        assert_eq!(fast.reading(Ps(5)), Ticks(17));
        assert_eq!(fast.rate().hz, 2e12);
    }

    #[test]
    fn spinning_jumps_to_where_reading_would_end() {
        let skew = Skew {
            offset_ticks: -12_345.6,
            drift: 37e-6,
            epoch: Ticks(9_000_000_000_000),
        };
        for (skew, cost) in [
            (None, Ps(20_000)),
            (Some(skew), Ps(20_000)),
            (Some(skew), Ps(400)),
        ] {
            for ahead in [0u64, 1, 49, 50, 51, 1_000, 123_457] {
                let (jump, read) = (clock(TSC, skew, cost), clock(TSC, skew, cost));
                let deadline = jump.now().plus(ahead);
                read.now();
                assert_eq!(
                    jump.spin_until(deadline),
                    spin_by_reads(&read, deadline),
                    "{skew:?} {cost:?} +{ahead}"
                );
                assert_eq!(jump.true_time(), read.true_time());
            }
        }
    }

    #[test]
    fn free_reads_spin_exactly_to_the_deadline() {
        let c = clock(
            TickMap {
                offset: 1_000,
                ticks: 2,
                per_ps: 1,
            },
            None,
            Ps(0),
        );
        let t0 = c.now();
        // Two ticks per ps: an odd deadline ends on the next ps.
        assert_eq!(c.spin_until(t0.plus(7)), t0.plus(8));
        assert_eq!(c.true_time(), Ps(3_600_000_000_000_004));
        assert_eq!(
            c.spin_until(t0),
            t0.plus(8),
            "a past deadline does not wait"
        );
    }

    #[test]
    fn a_quantum_converts_like_a_timer_of_its_rate() {
        assert_eq!(Quantum(400).hz(), 2.5e9);
        assert_eq!(Quantum(400).round_ns(20_000.0), Ps(20_000_000));
        assert_eq!(Quantum(400).round_ns(0.5), Ps(400));
        assert_eq!(Quantum::PS.round_ns(1.2346), Ps(1_235));
        assert_eq!(Ps::from_ns(2.5).as_us(), 0.0025);
    }
}
