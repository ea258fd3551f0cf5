//! Virtual time: integer picoseconds, so every sum is exact and ties are real ties.
//! (The threaded test world's per-rank clocks are in `tests_clock.rs`.)

/// A virtual instant or duration in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ps(pub u64);

impl Ps {
    /// The same span in microseconds.
    pub fn as_us(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl std::ops::Add for Ps {
    type Output = Ps;
    fn add(self, rhs: Ps) -> Ps {
        Ps(self.0 + rhs.0)
    }
}
