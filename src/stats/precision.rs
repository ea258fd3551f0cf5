//! Repetitions until a precision target (`--precision`): the sequential stopping
//! rule of SKaMPI, ReproMPI and hyperfine's `--min-runs`, judged on the median.
//!
//! After each batch of repetitions, the distribution-free 95% interval of the
//! median over every repetition so far ([`super::median_ci`]) gives the relative
//! half-width `(hi - lo) / 2 / median`; measuring stops once it is at most the
//! target, or once `max_reps` repetitions are in. Stopping on the data makes the
//! interval's coverage slightly lower than its nominal 95% (the rule looks at it
//! more than once); it is a precision criterion, not a test.

use super::median_ci::median_interval;

/// The level of the interval judged.
pub const LEVEL: f64 = 0.95;

/// What to reach, and the cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// The largest acceptable relative half-width of the 95% interval of the
    /// median (0.01: the median within +-1%).
    pub rel_half_width: f64,
    /// Repetitions at most, however wide the interval still is.
    pub max_reps: usize,
}

/// Whether a point met its target, and with what (one JSON field per point).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Precision {
    /// The target: relative half-width of the 95% interval of the median.
    pub target_rel_half_width: f64,
    /// The relative half-width reached over every repetition measured; `None`
    /// with too few repetitions for an interval (fewer than 6) or a median of 0.
    pub rel_half_width: Option<f64>,
    /// Whether it is at most the target (`false`: stopped at `max_reps`).
    pub met: bool,
    /// The cap on repetitions.
    pub max_reps: usize,
}

/// `(hi - lo) / 2 / median` of the 95% interval of the median of ascending
/// `sorted` values; `None` without an interval or with a median that is not
/// positive.
pub fn relative_half_width(sorted: &[f64]) -> Option<f64> {
    let ci = median_interval(sorted, LEVEL).ok()??;
    let median = super::median_of_sorted(sorted)?;
    (median > 0.0).then(|| (ci.hi - ci.lo) / 2.0 / median)
}

impl Target {
    /// The verdict on ascending `sorted`: every repetition so far.
    pub fn judge(&self, sorted: &[f64]) -> Precision {
        let reached = relative_half_width(sorted);
        Precision {
            target_rel_half_width: self.rel_half_width,
            rel_half_width: reached,
            met: reached.is_some_and(|w| w <= self.rel_half_width),
            max_reps: self.max_reps,
        }
    }

    /// Whether another batch is due after `measured` repetitions judged `verdict`.
    pub fn more(&self, verdict: &Precision, measured: usize) -> bool {
        !verdict.met && measured < self.max_reps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the rule over a stream that repeats `batch` (95..=105, each once per
    /// batch): after m batches the sorted sample holds every value m times, so
    /// the interval's ends are known by hand. Returns (repetitions, verdict).
    fn run(target: Target) -> (usize, Precision) {
        let batch: Vec<f64> = (95..=105).map(f64::from).collect();
        let mut all: Vec<f64> = Vec::new();
        loop {
            all.extend(&batch);
            let mut sorted = all.clone();
            sorted.sort_by(f64::total_cmp);
            let verdict = target.judge(&sorted);
            if !target.more(&verdict, all.len()) {
                return (all.len(), verdict);
            }
        }
    }

    #[test]
    fn the_interval_of_a_known_stream_shrinks_batch_by_batch() {
        // n = 11 (k = 2): [96, 104] around 100, +-4%.
        // n = 22 (k = 6, P(X <= 5) = 35443 / 2^22 = 0.0085): x_6 = 97, x_17 = 103, +-3%.
        // n = 33 (k = 11): x_11 = 98, x_23 = 102, +-2%.
        let sorted = |m: usize| {
            let mut v: Vec<f64> = (0..m).flat_map(|_| (95..=105).map(f64::from)).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        for (m, width) in [(1, 0.04), (2, 0.03), (3, 0.02)] {
            let got = relative_half_width(&sorted(m)).unwrap();
            assert!((got - width).abs() < 1e-12, "{m} batches: {got}");
        }
        assert_eq!(relative_half_width(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        assert_eq!(relative_half_width(&[0.0; 10]), None);
    }

    #[test]
    fn stops_at_the_first_batch_that_meets_the_target_or_at_the_cap() {
        let target = |rel_half_width, max_reps| Target {
            rel_half_width,
            max_reps,
        };
        let (n, v) = run(target(0.04, 1000));
        assert_eq!((n, v.met), (11, true));
        let (n, v) = run(target(0.035, 1000));
        assert_eq!((n, v.met), (22, true));
        assert!((v.rel_half_width.unwrap() - 0.03).abs() < 1e-12);
        let (n, v) = run(target(0.025, 1000));
        assert_eq!((n, v.met), (33, true));
        // Never within 0.1%: the cap ends it, the verdict says so.
        let (n, v) = run(target(0.001, 44));
        assert_eq!((n, v.met, v.max_reps), (44, false, 44));
        assert!(v.rel_half_width.unwrap() > 0.001);
    }
}
