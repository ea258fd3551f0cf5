//! The crate's one random generator: Steele, Lea and Flood's SplitMix64 ("Fast
//! splittable pseudorandom number generators", OOPSLA 2014), a small, well-mixed
//! generator from a 64-bit seed. Enough to shuffle a list of sizes, to draw the
//! order of a confirmation pass, and to derive test bytes and noise from their
//! coordinates; the same seed gives the same numbers on every machine, so every
//! rank computes the same order without talking to the others.
//!
//! A leaf module: it imports nothing from the crate, so any folder may use it.

/// SplitMix64's output function (its "mix64" finaliser): a bijection of `u64`
/// whose every output bit depends on every input bit.
pub fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The first output of a generator seeded with `seed`: a hash of `seed`, for
/// values that depend on their coordinates (a rank and an offset) alone.
pub fn mix(seed: u64) -> u64 {
    SplitMix64(seed).next()
}

/// The generator; its state is the seed, advanced by the golden-ratio increment.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        finalize(self.0)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift; the bias is below
    /// `bound / 2^64`, nothing for lists of sizes).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(bound)) >> 64) as u64
    }

    /// Whether a fair coin comes up heads.
    pub fn coin(&mut self) -> bool {
        self.below(2) == 1
    }

    /// Puts `items` in a uniformly random order (Fisher-Yates: uniform given
    /// uniform draws).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SplitMix64(1);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = rng.below(7);
            assert!(v < 7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// The published first output for seed 0 (the reference implementation's
    /// test vector), so that every copy this module replaced gives the same bits.
    #[test]
    fn matches_the_reference_output() {
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(finalize(0x9e37_79b9_7f4a_7c15), mix(0));
    }
}
