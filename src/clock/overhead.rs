//! Cost and resolution of the timer itself (Netgauge's `hrtimer` self-test, extended).

use super::Clock;
use crate::stats::Summary;

/// Read overhead and resolution of a clock.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TimerOverhead {
    /// Nanoseconds between back-to-back reads (min, median, p99, ...).
    pub read_ns: Summary,
    /// Smallest non-zero difference between two back-to-back reads, in nanoseconds.
    pub resolution_ns: f64,
}

/// Reads `clock` `reads + 1` times back to back and summarises the differences.
///
/// # Panics
/// If `reads` is zero.
pub fn measure_overhead<C: Clock>(clock: &C, reads: usize) -> TimerOverhead {
    overhead(clock, reads, false).0
}

/// [`measure_overhead`], also returning every read's cost in nanoseconds, in the
/// order read (the repetitions behind the summary).
///
/// # Panics
/// If `reads` is zero.
pub fn measure_overhead_samples<C: Clock>(clock: &C, reads: usize) -> (TimerOverhead, Vec<f64>) {
    let (o, samples) = overhead(clock, reads, true);
    (o, samples.unwrap_or_default())
}

fn overhead<C: Clock>(clock: &C, reads: usize, keep: bool) -> (TimerOverhead, Option<Vec<f64>>) {
    assert!(reads > 0, "need at least one read");
    let mut stamps = vec![0u64; reads + 1];
    for stamp in stamps.iter_mut() {
        *stamp = clock.now().0;
    }
    let rate = clock.rate();
    let mut deltas: Vec<f64> = stamps
        .windows(2)
        .map(|w| rate.to_nanos(w[1].saturating_sub(w[0])).0)
        .collect();
    drop(stamps);
    let samples = keep.then(|| deltas.clone());
    deltas.sort_by(f64::total_cmp);
    let resolution_ns = deltas
        .iter()
        .copied()
        .find(|&d| d > 0.0)
        .unwrap_or(rate.to_nanos(1).0);
    (
        TimerOverhead {
            read_ns: Summary::of_sorted(&deltas),
            resolution_ns,
        },
        samples,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{TickRate, Ticks};
    use std::cell::Cell;

    /// A clock that advances by a fixed pattern of steps per read.
    struct SteppingClock {
        now: Cell<u64>,
        steps: Vec<u64>,
        i: Cell<usize>,
    }

    impl Clock for SteppingClock {
        fn now(&self) -> Ticks {
            let step = self.steps[self.i.get() % self.steps.len()];
            self.i.set(self.i.get() + 1);
            self.now.set(self.now.get() + step);
            Ticks(self.now.get())
        }
        fn rate(&self) -> TickRate {
            TickRate::new(2e9)
        }
    }

    #[test]
    fn overhead_of_a_known_clock() {
        let clock = SteppingClock {
            now: Cell::new(0),
            steps: vec![0, 100, 100, 100],
            i: Cell::new(0),
        };
        let o = measure_overhead(&clock, 1000);
        // 2 GHz: 100 ticks = 50 ns; a quarter of the deltas are 0.
        assert_eq!(o.read_ns.median, 50.0);
        assert_eq!(o.read_ns.min, 0.0);
        assert_eq!(o.resolution_ns, 50.0);
    }

    #[test]
    fn the_samples_are_every_reads_cost_in_order() {
        let clock = SteppingClock {
            now: Cell::new(0),
            steps: vec![0, 100, 300, 100],
            i: Cell::new(0),
        };
        let (o, samples) = measure_overhead_samples(&clock, 8);
        // Read i costs step i+1 (the first read's step is before the first stamp).
        assert_eq!(samples, [50.0, 150.0, 50.0, 0.0, 50.0, 150.0, 50.0, 0.0]);
        assert_eq!(o.read_ns.median, crate::stats::median(&samples).unwrap());
        assert_eq!(o.read_ns.max, 150.0);
    }
}
