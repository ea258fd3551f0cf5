//! Which pairs measure at once: the steps [`super::run`] takes.
//!
//! The round-robin tournament is the circle method (Kirkman's; Knuth, TAOCP
//! vol. 4A, on 1-factorizations of K_p): rank 0 of the circle stays put, the
//! others rotate by one place per round, and round r pairs position i with
//! position p-1-i. For even p that is p-1 rounds of p/2 disjoint pairs with
//! every unordered pair in exactly one round; for odd p a "bye" joins the
//! circle, and its partner idles that round (p rounds of (p-1)/2 pairs).

use super::Pair;
use crate::rng::SplitMix64;
use crate::transport::Rank;

/// The tournament's rounds of unordered pairs over ranks `0..np`, the ranks'
/// places on the circle and the order of the rounds drawn from `seed`.
pub fn tournament(np: usize, seed: u64) -> Vec<Vec<Pair>> {
    let mut circle: Vec<Option<Rank>> = (0..np).map(Some).collect();
    let mut rng = SplitMix64(seed);
    rng.shuffle(&mut circle);
    if np % 2 == 1 {
        circle.push(None);
    }
    let n = circle.len();
    let mut rounds = Vec::new();
    for _ in 0..n.saturating_sub(1) {
        let round: Vec<Pair> = (0..n / 2)
            .filter_map(|i| Some((circle[i]?, circle[n - 1 - i]?)))
            .collect();
        rounds.push(round);
        // rotate every place but the first by one
        circle[1..].rotate_right(1);
    }
    rng.shuffle(&mut rounds);
    rounds
}

/// Each round measured in both directions: the round as given, then reversed.
pub fn both_directions(rounds: &[Vec<Pair>]) -> Vec<Vec<Pair>> {
    rounds
        .iter()
        .flat_map(|r| [r.clone(), r.iter().map(|&(a, b)| (b, a)).collect()])
        .collect()
}

/// Every ordered pair of `0..np` alone in its step, in the tournament's order
/// (`seed`): the quiet reference.
pub fn one_at_a_time(np: usize, seed: u64) -> Vec<Vec<Pair>> {
    both_directions(&tournament(np, seed))
        .into_iter()
        .flatten()
        .map(|p| vec![p])
        .collect()
}

/// The first `n` disjoint pairs `(0,1), (2,3), ...` in one step (osu_multi_lat's
/// pairing: rank i with rank i + 1 for even i).
pub fn first_pairs(n: usize) -> Vec<Vec<Pair>> {
    vec![(0..n).map(|i| (2 * i, 2 * i + 1)).collect()]
}

/// `count` random bisections of `0..np` drawn from `seed`, each a perfect
/// matching of the ranks into disjoint pairs in one step: the ranks shuffled,
/// the first half paired with the second, the first of a pair the initiator
/// (Netgauge 2.4.6 `ptrn_ebb.cpp`, `genptrn_bisect_fb`; Hoefler, Schneider and
/// Lumsdaine, "Multistage Switches are not Crossbars", IEEE Cluster 2008, sec. 4:
/// random bisection patterns). With odd `np` the last shuffled rank idles.
pub fn bisections(np: usize, count: usize, seed: u64) -> Vec<Vec<Pair>> {
    let mut rng = SplitMix64(seed);
    let half = np / 2;
    (0..count)
        .map(|_| {
            let mut ranks: Vec<Rank> = (0..np).collect();
            rng.shuffle(&mut ranks);
            (0..half).map(|i| (ranks[i], ranks[half + i])).collect()
        })
        .collect()
}

/// Refuses steps a run cannot measure: a rank out of `0..np`, paired with
/// itself, or in two pairs of one step.
///
/// # Errors
/// The first such pair, in words.
pub fn check(steps: &[Vec<Pair>], np: usize) -> Result<(), String> {
    for (i, step) in steps.iter().enumerate() {
        let mut seen = vec![false; np];
        for &(a, b) in step {
            if a >= np || b >= np || a == b {
                return Err(format!("step {i}: pair {a}-{b} is not two of {np} ranks"));
            }
            for r in [a, b] {
                if std::mem::replace(&mut seen[r], true) {
                    return Err(format!("step {i}: rank {r} is in two pairs"));
                }
            }
        }
    }
    Ok(())
}
