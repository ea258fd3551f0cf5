//! Whether a series of repetitions, in the order measured, held one level: the
//! medians of its consecutive chunks and their distribution-free intervals
//! ([`super::median_ci`]).
//!
//! Every summary of repetitions assumes they come from one distribution. On a
//! shared host they need not: the host's state can change the level of every
//! repetition for a while (over TCP loopback on the development VM, a 64 KiB half
//! round trip moved between about 17 and 45 us within one second, in both wait
//! modes, with the VM itself idle). A median over such a series is a mixture whose
//! weights are the time spent in each state, and it cannot be compared with a
//! figure measured in another state. Hunold & Carpen-Amarie (sec. 5.2) find the
//! launch itself a factor for the same reason; this is the finer test within one
//! launch.
//!
//! The rule: split the series into [`CHUNKS`] consecutive chunks of equal length
//! (fewer when a chunk would hold fewer than [`LEAST_CHUNK_REPS`]; the last few
//! repetitions beyond a whole number of chunks are left out), take each chunk's median with
//! its interval at [`CHUNK_LEVEL`], and call the level moved when the chunk with the
//! highest median lies above the one with the lowest, intervals apart, by at least
//! [`LEAST_MOVE_RATIO`] (a quarter). The intervals assume independent repetitions
//! within a chunk, which holds better within a chunk than across the series; the
//! ratio keeps a move that is statistically clear but small (a drift of a tenth, a
//! first chunk slow while the connection warms) from being reported.

use super::median_ci::median_interval;
use super::order::{median_of_sorted, sorted};

/// Chunks a series is split into.
pub const CHUNKS: usize = 8;
/// The fewest repetitions a chunk holds; a shorter series has fewer chunks.
pub const LEAST_CHUNK_REPS: usize = 16;
/// The coverage of each chunk's interval of the median: with 8 chunks, 28 pairs
/// could be compared, and at 99.9 % each the chance that any two intervals of one
/// level fall apart stays under 3 %.
pub const CHUNK_LEVEL: f64 = 0.999;
/// The least ratio of the highest chunk median to the lowest that counts as a move:
/// drifts of a tenth are common on a shared host and a warning at each would be
/// read by nobody, while the host states it is for differ by half or more
/// (docs/statistics.md).
pub const LEAST_MOVE_RATIO: f64 = 1.25;

/// A level that moved within a series: its slowest and fastest chunks.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LevelMove {
    /// How many consecutive chunks the series was split into.
    pub chunks: usize,
    /// The lowest chunk median, in the series' unit.
    pub low_median: f64,
    /// Its chunk, counted from 0 in the order measured.
    pub low_chunk: usize,
    /// The highest chunk median.
    pub high_median: f64,
    /// Its chunk.
    pub high_chunk: usize,
}

/// The move of `series` (values in the order measured, all finite), or `None`
/// when it held one level by the rule of the module docs, or is shorter than two
/// chunks.
pub fn level_move(series: &[f64]) -> Option<LevelMove> {
    let chunks = CHUNKS.min(series.len() / LEAST_CHUNK_REPS);
    if chunks < 2 {
        return None;
    }
    let per_chunk = series.len() / chunks;
    let mut stats = Vec::with_capacity(chunks);
    for chunk in series.chunks_exact(per_chunk).take(chunks) {
        let values = sorted(chunk);
        let interval = median_interval(&values, CHUNK_LEVEL)
            .expect("the level is a probability")
            .expect("LEAST_CHUNK_REPS values give an interval at CHUNK_LEVEL");
        let median = median_of_sorted(&values).expect("a chunk is not empty");
        stats.push((median, interval));
    }
    let by_median = |a: &&(f64, _), b: &&(f64, _)| a.0.total_cmp(&b.0);
    let (low_chunk, low) = stats
        .iter()
        .enumerate()
        .min_by(|a, b| by_median(&a.1, &b.1))?;
    let (high_chunk, high) = stats
        .iter()
        .enumerate()
        .max_by(|a, b| by_median(&a.1, &b.1))?;
    let apart = high.1.lo > low.1.hi;
    let large = high.0 >= LEAST_MOVE_RATIO * low.0;
    (apart && large).then_some(LevelMove {
        chunks,
        low_median: low.0,
        low_chunk,
        high_median: high.0,
        high_chunk,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// `n` values around `level`, each up to `spread` above it (a latency's skew:
    /// nothing below the level), from `seed`.
    fn around(level: f64, spread: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        (0..n)
            .map(|_| level + spread * (rng.next() as f64 / u64::MAX as f64).powi(3))
            .collect()
    }

    #[test]
    fn one_level_with_noise_has_not_moved() {
        for seed in 0..100 {
            let series = around(17.0, 30.0, 1000, seed);
            assert_eq!(level_move(&series), None, "seed {seed}");
        }
    }

    /// The VM's 64 KiB ping-pong: 17 us, then 45 us from the middle on.
    #[test]
    fn a_level_that_jumps_within_the_series_has_moved() {
        let mut series = around(17.0, 30.0, 500, 1);
        series.extend(around(45.0, 30.0, 500, 2));
        let moved = level_move(&series).expect("a move");
        assert_eq!(moved.chunks, 8);
        assert!(moved.low_chunk < 4 && moved.high_chunk >= 4, "{moved:?}");
        // Each level's median: the level plus 30 us times the median of U^3 (1/8),
        // the lowest and highest of four chunks a little outside.
        assert!((18.0..23.5).contains(&moved.low_median), "{moved:?}");
        assert!((46.0..53.5).contains(&moved.high_median), "{moved:?}");
    }

    /// A few chunks at another level count too, in either direction.
    #[test]
    fn a_short_dip_to_a_faster_level_has_moved() {
        let mut series = around(45.0, 20.0, 800, 3);
        series.extend(around(12.0, 5.0, 200, 4));
        let moved = level_move(&series).expect("a move");
        assert!(moved.low_chunk >= 6, "{moved:?}");
        assert!(moved.low_median < 14.0, "{moved:?}");
    }

    /// A clear step of 15 %: real, but a drift of the kind most runs show.
    #[test]
    fn a_move_smaller_than_the_least_ratio_is_not_reported() {
        let mut series = around(20.0, 0.5, 500, 5);
        series.extend(around(23.0, 0.5, 500, 6));
        assert_eq!(level_move(&series), None);
        // The same step at 30 % is.
        let mut series = around(20.0, 0.5, 500, 5);
        series.extend(around(26.0, 0.5, 500, 6));
        assert!(level_move(&series).is_some());
    }

    #[test]
    fn a_series_shorter_than_two_chunks_is_not_judged() {
        let mut series = around(17.0, 1.0, 16, 7);
        series.extend(around(45.0, 1.0, 15, 8));
        assert_eq!(level_move(&series), None);
        // Two chunks of 16: judged, and moved.
        series.push(45.0);
        let moved = level_move(&series).expect("two chunks");
        assert_eq!(moved.chunks, 2);
    }
}
