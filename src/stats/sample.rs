//! A sample sorted once, in its unit: the container every statistic here reads.

use super::median_ci::{median_interval, MedianInterval};
use super::order::{median_of_sorted, sorted, Value};
use super::summary::Summary;
use super::StatsError;

/// A non-empty sample of usable values (finite, for floating point), sorted
/// ascending. `T` carries the unit: `Sorted<Ticks>`, `Sorted<Nanos>`, or `f64` with
/// the unit in the variable's name.
#[derive(Clone, Debug, PartialEq)]
pub struct Sorted<T>(Vec<T>);

impl<T: Value> Sorted<T> {
    /// Sorts `values`.
    ///
    /// # Errors
    /// [`StatsError::Empty`], or [`StatsError::NotFinite`] naming the first value
    /// that is not.
    pub fn new(values: &[T]) -> Result<Self, StatsError> {
        if values.is_empty() {
            return Err(StatsError::Empty);
        }
        if let Some(index) = values.iter().position(|v| !v.is_usable()) {
            return Err(StatsError::NotFinite { index });
        }
        Ok(Sorted(sorted(values)))
    }

    /// The values, ascending.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// Number of values (at least 1).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a `Sorted` holds at least one value.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The median (see [`super::order`] for the definition).
    pub fn median(&self) -> T {
        median_of_sorted(&self.0).expect("a Sorted is not empty")
    }
}

impl Sorted<f64> {
    /// Min, median, mean, p99, max.
    pub fn summary(&self) -> Summary {
        Summary::of_sorted(&self.0)
    }

    /// The distribution-free interval of the median at `level`; `Ok(None)` when
    /// the sample is too small for it.
    ///
    /// # Errors
    /// [`StatsError::Level`] unless `0 < level < 1`.
    pub fn median_interval(&self, level: f64) -> Result<Option<MedianInterval>, StatsError> {
        median_interval(&self.0, level)
    }
}

#[cfg(test)]
impl<T: Value> Sorted<T> {
    fn min(&self) -> T {
        self.0[0]
    }

    fn max(&self) -> T {
        self.0[self.0.len() - 1]
    }
}

#[cfg(test)]
impl Sorted<f64> {
    fn quantile(&self, q: f64) -> f64 {
        super::order::quantile_of_sorted(&self.0, q)
    }

    fn fences(&self) -> super::tukey::Fences {
        super::tukey::Fences::of_sorted(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Nanos, Ticks};

    #[test]
    fn a_sample_keeps_its_unit() {
        let ticks = Sorted::new(&[Ticks(9), Ticks(3), Ticks(4), Ticks(8)]).unwrap();
        assert_eq!(
            (ticks.min(), ticks.median(), ticks.max()),
            (Ticks(3), Ticks(6), Ticks(9))
        );
        let ns = Sorted::new(&[Nanos(2.0), Nanos(1.0)]).unwrap();
        assert_eq!(ns.median(), Nanos(1.5));
    }

    #[test]
    fn bad_samples_are_named() {
        assert_eq!(Sorted::<f64>::new(&[]), Err(StatsError::Empty));
        assert_eq!(
            Sorted::new(&[1.0, f64::INFINITY, f64::NAN]),
            Err(StatsError::NotFinite { index: 1 })
        );
        assert_eq!(
            Sorted::new(&[Nanos(1.0), Nanos(f64::NAN)]),
            Err(StatsError::NotFinite { index: 1 })
        );
    }

    #[test]
    fn every_statistic_reads_the_same_sorted_values() {
        let s = Sorted::new(&[5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 100.0]).unwrap();
        assert_eq!(s.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]);
        assert_eq!(s.summary().median, s.median());
        assert_eq!(s.quantile(0.5), 4.0);
        assert!(!s.fences().keeps(100.0));
        let ci = s.median_interval(0.95).unwrap().unwrap();
        assert_eq!((ci.lo, ci.hi), (1.0, 100.0));
    }
}
