//! The order in which a sweep visits its sizes when it measures each of them in
//! several passes: Hunold and Carpen-Amarie, "MPI Benchmarking Revisited:
//! Experimental Design and Reproducibility", sec. 6.1, Algorithm 5 (replicate every
//! experiment, shuffle the list of experiments before running it).
//!
//! On a shared host the latency level drifts and flips in phases that outlast the
//! measurement of one size. Measured in ascending order, such a phase shifts a run of
//! consecutive sizes, which a protocol detector cannot tell from a protocol range.
//! Shuffled, it shifts scattered sizes in one pass, which pooling the passes
//! ([`super::loggp::pool`]) and a robust fit absorb.
//!
//! One pass keeps the given order (the paper's and Netgauge's sweep). Several
//! passes are each shuffled independently from a fixed seed per pass (two passes
//! of a short list may still come out alike): every rank computes the same order
//! without talking to the others, and a run can be repeated exactly. (Algorithm 5 reshuffles in every call to `mpirun`; a fixed seed keeps
//! runs comparable, and the passes within one run still differ.)

// Also named from here by `patterns::late`, its users before the generator had a
// module of its own.
pub(crate) use crate::rng::SplitMix64;

/// The sizes in the order each of `passes` passes measures them.
pub fn passes<T: Copy>(sizes: &[T], passes: usize) -> Vec<Vec<T>> {
    if passes <= 1 {
        return vec![sizes.to_vec()];
    }
    (0..passes)
        .map(|pass| {
            shuffled(
                sizes,
                SEED ^ (pass as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            )
        })
        .collect()
}

/// Repetitions that pass `pass` of `passes` takes of `total`: the total split as
/// evenly as whole repetitions allow, the first passes taking one more, so the
/// passes together take exactly `total` (a size's sample count does not depend
/// on how many passes it is spread over).
pub fn share(total: usize, passes: usize, pass: usize) -> usize {
    let passes = passes.max(1);
    total / passes + usize::from(pass < total % passes)
}

/// `items` in a uniformly random order drawn from `seed` ([`SplitMix64::shuffle`]):
/// the same seed gives the same order on every machine. The suites shuffle the
/// experiments of each launch with it (`suite::plan`).
pub fn shuffled<T: Copy>(items: &[T], seed: u64) -> Vec<T> {
    let mut order = items.to_vec();
    SplitMix64(seed).shuffle(&mut order);
    order
}

/// Seed of the shuffles ("ngauge" in ASCII).
const SEED: u64 = 0x6e67_6175_6765;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_keeps_the_order() {
        assert_eq!(passes(&[1u64, 2, 4, 1024], 1), vec![vec![1, 2, 4, 1024]]);
        assert_eq!(passes(&[3u64, 1], 0), vec![vec![3, 1]]);
    }

    #[test]
    fn every_pass_is_a_permutation_and_the_passes_differ() {
        let sizes: Vec<u64> = (1..=74).collect();
        let orders = passes(&sizes, 3);
        assert_eq!(orders.len(), 3);
        for order in &orders {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, sizes);
            assert_ne!(*order, sizes, "a shuffled pass kept the ascending order");
        }
        assert_ne!(orders[0], orders[1]);
        assert_ne!(orders[1], orders[2]);
    }

    #[test]
    fn the_shares_add_up_to_the_total_and_differ_by_at_most_one() {
        for (total, passes) in [(50, 4), (20, 4), (3, 3), (7, 1), (9, 3), (5, 0)] {
            let shares: Vec<usize> = (0..passes.max(1))
                .map(|p| share(total, passes, p))
                .collect();
            assert_eq!(shares.iter().sum::<usize>(), total, "{total} over {passes}");
            let (lo, hi) = (shares.iter().min(), shares.iter().max());
            assert!(hi.unwrap() - lo.unwrap() <= 1, "{shares:?}");
        }
        assert_eq!(
            (0..4).map(|p| share(50, 4, p)).collect::<Vec<_>>(),
            [13, 13, 12, 12]
        );
    }

    #[test]
    fn the_order_is_the_same_on_every_call() {
        let sizes: Vec<u64> = (0..40).map(|k| 512 * k + 2048).collect();
        assert_eq!(passes(&sizes, 4), passes(&sizes, 4));
    }

    #[test]
    fn consecutive_sizes_are_scattered() {
        // Truth for a uniform shuffle: two given neighbours stay neighbours with
        // probability 2/n, so of 73 adjacent pairs about 2 stay adjacent per pass.
        let sizes: Vec<u64> = (0..74).collect();
        for order in passes(&sizes, 5) {
            let adjacent = order
                .windows(2)
                .filter(|w| w[0].abs_diff(w[1]) == 1)
                .count();
            assert!(adjacent <= 8, "{adjacent} of 73 neighbours kept: {order:?}");
        }
    }

    #[test]
    fn a_seed_fixes_the_order_and_every_order_is_reachable() {
        assert_eq!(shuffled(&[1, 2, 3, 4, 5], 7), shuffled(&[1, 2, 3, 4, 5], 7));
        // All 6 permutations of 3 items appear over 200 seeds, each about 1/6 of
        // the time (expected 33; a 4-sigma band of a binomial(200, 1/6) is 12-54).
        let mut seen = std::collections::BTreeMap::new();
        for seed in 0..200 {
            *seen.entry(shuffled(&['a', 'b', 'c'], seed)).or_insert(0) += 1;
        }
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(seen.values().all(|&n| (12..=54).contains(&n)), "{seen:?}");
        assert_eq!(shuffled::<u8>(&[], 1), Vec::<u8>::new());
    }
}
