//! Pooling the passes of a sweep over one size into one point (Hunold and
//! Carpen-Amarie, "MPI Benchmarking Revisited", sec. 6.1, Algorithm 5; the order of
//! the passes is [`crate::patterns::order`]).

use super::{Point, DISTURBED_FACTOR};
use crate::stats::Summary;

/// The timed repetitions of one point, us (and `d` per pass).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// `d_G` of every pooled pass.
    pub d_us: Vec<f64>,
    /// `PRTT(1,0,s)` repetitions.
    pub prtt_1_0_us: Vec<f64>,
    /// `PRTT(2,0,s)` repetitions (empty unless [`super::DelayChoice::TwoRtt`]).
    pub prtt_2_0_us: Vec<f64>,
    /// `PRTT(n,0,s)` repetitions.
    pub prtt_n_0_us: Vec<f64>,
    /// `PRTT(n,d_G,s)` repetitions.
    pub prtt_n_d_us: Vec<f64>,
    /// `o_r` repetitions.
    pub or_us: Vec<f64>,
    /// Send calls with a late receiver.
    pub send_late_us: Vec<f64>,
    /// The delay spent per spin of each `PRTT(n,d_G,s)` repetition
    /// ([`Point::d_spent_us`]).
    pub d_spent_us: Vec<f64>,
}

impl Samples {
    /// Summarises the repetitions into a point of `passes` passes and `attempts`
    /// measurements; `None` when a series the point needs is empty.
    pub(super) fn point(
        self,
        size: u64,
        n: usize,
        attempts: usize,
        passes: usize,
    ) -> Option<Point> {
        let mut timed_reps = 0;
        let mut disturbed_reps = 0;
        for values in [
            &self.prtt_1_0_us,
            &self.prtt_2_0_us,
            &self.prtt_n_0_us,
            &self.prtt_n_d_us,
        ] {
            let Some(summary) = Summary::of(values) else {
                continue;
            };
            let limit = DISTURBED_FACTOR * summary.median;
            timed_reps += values.len();
            disturbed_reps += values.iter().filter(|&&v| v > limit).count();
        }
        Some(Point {
            size,
            n,
            d_us: Summary::of(&self.d_us)?.median,
            prtt_1_0_us: Summary::of(&self.prtt_1_0_us)?,
            prtt_2_0_us: if self.prtt_2_0_us.is_empty() {
                None
            } else {
                Some(Summary::of(&self.prtt_2_0_us)?)
            },
            prtt_n_0_us: Summary::of(&self.prtt_n_0_us)?,
            prtt_n_d_us: Summary::of(&self.prtt_n_d_us)?,
            or_us: Summary::of(&self.or_us)?,
            send_late_us: Summary::of(&self.send_late_us)?,
            d_spent_us: Summary::of(&self.d_spent_us)?,
            attempts,
            timed_reps,
            disturbed_reps,
            passes,
            counters: Default::default(),
            samples: self,
        })
    }
}

/// Pools passes over the same size into one point (Hunold and Carpen-Amarie,
/// "MPI Benchmarking Revisited", sec. 6.1, Algorithm 5: replicate every
/// experiment and shuffle their order, so that a slow phase of the host, which
/// lasts longer than one size's measurement, disturbs a few scattered passes of
/// different sizes instead of a run of consecutive sizes that looks like a
/// protocol range). The repetitions of all passes are summarised together and
/// `d_G` is the median of the passes' delays (each pass's `PRTT(n,d,s)` used its
/// own). `None` when `points` is empty or its sizes or `n` differ.
pub fn pool(points: &[Point]) -> Option<Point> {
    let first = points.first()?;
    if points
        .iter()
        .any(|p| p.size != first.size || p.n != first.n)
    {
        return None;
    }
    let mut all = Samples::default();
    for p in points {
        let s = &p.samples;
        all.d_us.extend(&s.d_us);
        all.prtt_1_0_us.extend(&s.prtt_1_0_us);
        all.prtt_2_0_us.extend(&s.prtt_2_0_us);
        all.prtt_n_0_us.extend(&s.prtt_n_0_us);
        all.prtt_n_d_us.extend(&s.prtt_n_d_us);
        all.or_us.extend(&s.or_us);
        all.send_late_us.extend(&s.send_late_us);
        all.d_spent_us.extend(&s.d_spent_us);
    }
    let attempts = points.iter().map(|p| p.attempts).sum();
    let passes = points.iter().map(|p| p.passes).sum();
    let mut pooled = all.point(first.size, first.n, attempts, passes)?;
    for p in points {
        crate::patterns::counters::add(&mut pooled.counters, p.counters.clone());
    }
    Some(pooled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(size: u64, d: f64, prtt: &[f64], attempts: usize) -> Point {
        let samples = Samples {
            d_us: vec![d],
            prtt_1_0_us: prtt.to_vec(),
            prtt_2_0_us: Vec::new(),
            prtt_n_0_us: prtt.iter().map(|v| 10.0 * v).collect(),
            prtt_n_d_us: prtt.iter().map(|v| 20.0 * v).collect(),
            or_us: vec![1.0; prtt.len()],
            send_late_us: vec![2.0; prtt.len()],
            d_spent_us: vec![d; prtt.len()],
        };
        samples.point(size, 10, attempts, 1).unwrap()
    }

    #[test]
    fn pooling_summarises_the_repetitions_of_all_passes() {
        // Pass 2 ran in a slow phase: pooled, its repetitions are a minority and
        // the median stays with the quiet passes.
        let passes = [
            measured(4096, 5.0, &[5.0, 5.1, 4.9], 1),
            measured(4096, 9.0, &[9.0, 9.2, 8.8], 2),
            measured(4096, 5.2, &[5.2, 5.0, 5.1], 1),
        ];
        let pooled = pool(&passes).unwrap();
        let all = [5.0, 5.1, 4.9, 9.0, 9.2, 8.8, 5.2, 5.0, 5.1];
        assert_eq!(pooled.prtt_1_0_us, Summary::of(&all).unwrap());
        assert_eq!(pooled.prtt_1_0_us.median, 5.1);
        assert_eq!(pooled.prtt_n_0_us.median, 51.0);
        assert_eq!(pooled.prtt_n_d_us.n, 9);
        assert_eq!(pooled.or_us.n, 9);
        assert_eq!(pooled.send_late_us.median, 2.0);
        assert_eq!(pooled.d_us, 5.2, "the median of the passes' delays");
        assert_eq!((pooled.passes, pooled.attempts), (3, 4));
        assert_eq!(pooled.timed_reps, 27);
        assert_eq!(pooled.prtt_2_0_us, None);
        // Pooling pooled points is pooling their passes.
        let twice = pool(&[pool(&passes[..2]).unwrap(), passes[2].clone()]).unwrap();
        assert_eq!(twice, pooled);
    }

    #[test]
    fn pooling_refuses_nothing_and_different_sizes() {
        assert_eq!(pool(&[]), None);
        let a = measured(1024, 3.0, &[3.0], 1);
        let b = measured(2048, 3.0, &[3.0], 1);
        assert_eq!(pool(&[a.clone(), b]), None);
        assert_eq!(pool(std::slice::from_ref(&a)), Some(a));
    }
}
