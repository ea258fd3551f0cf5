//! The Wilcoxon-Mann-Whitney rank-sum test, two-sided, with R's `wilcox.test`
//! semantics: the test Hunold & Carpen-Amarie apply to the per-launch medians of
//! two implementations (sec. 6.2, Fig. 26).
//!
//! Statistic: `W = R_a - n_a (n_a + 1) / 2`, `R_a` the sum of the ranks of sample
//! `a` in the pooled sample (tied values get the mean of their ranks), which is
//! Mann & Whitney's `U`: the number of pairs `(a_i, b_j)` with `a_i > b_j`, ties
//! counting one half. Under the null hypothesis (both samples from one continuous
//! distribution) `E[W] = n_a n_b / 2`.
//!
//! p-value, as R computes it (`stats:::wilcox.test.default`):
//!
//! - **exact** when both samples have fewer than [`EXACT_BELOW`] values and no
//!   value occurs twice in the pooled sample: the null distribution of `U` by the
//!   recurrence of Mann & Whitney (1947, eq. 2), in probabilities,
//!   `p(i, j, u) = i/(i+j) p(i-1, j, u-j) + j/(i+j) p(i, j-1, u)`
//!   (the largest of the `i + j` values is one of the `a`s with probability
//!   `i/(i+j)`, and then exceeds all `j` values of `b`), and
//!   `p = min(1, 2 P(U >= W))` for `W > n_a n_b / 2`, else `min(1, 2 P(U <= W))`;
//! - **normal** otherwise: `z = (W - n_a n_b / 2 - sign(.) / 2) / sigma` with the
//!   continuity correction and the tie-corrected variance
//!   `sigma^2 = n_a n_b / 12 ((N + 1) - sum(t^3 - t) / (N (N - 1)))`,
//!   `t` the size of each group of equal values, `N = n_a + n_b`;
//!   `p = 2 min(Phi(z), 1 - Phi(z))`.
//!
//! Where R returns `NaN` (every value equal: `sigma = 0`) this returns `p = 1`:
//! the samples give no evidence of a difference.
//!
//! Checked against R's documented examples and SciPy's `mannwhitneyu`, which
//! implements the same definitions (`scripts/stats-reference.py` prints every
//! reference value the tests use).
//!
//! H. B. Mann, D. R. Whitney (1947), "On a test of whether one of two random
//! variables is stochastically larger than the other", Ann. Math. Statist. 18(1).
//! M. Hollander, D. A. Wolfe (1973), "Nonparametric Statistical Methods", Wiley,
//! sec. 4.1 (the normal approximation with ties).

use super::sample::Sorted;
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

/// R's rule: the exact distribution when both samples are smaller than this and
/// there are no ties.
pub const EXACT_BELOW: usize = 50;

/// How the p-value was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RankSumMethod {
    /// The exact null distribution (small samples without ties).
    Exact,
    /// The normal approximation with continuity and tie correction.
    Normal,
}

/// The outcome of a two-sided rank-sum test of sample `a` against sample `b`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RankSum {
    /// `W`: the rank sum of `a` minus `n_a (n_a + 1) / 2` (R's `W`, Mann &
    /// Whitney's `U` of `a`); between 0 and `n_a n_b`, halves where ties span the
    /// two samples.
    pub w: f64,
    /// Values in `a`.
    pub n_a: usize,
    /// Values in `b`.
    pub n_b: usize,
    /// Two-sided p-value.
    pub p_value: f64,
    /// How `p_value` was computed.
    pub method: RankSumMethod,
    /// Whether some value occurs more than once in the pooled sample.
    pub ties: bool,
}

/// Stars for a p-value as Hunold & Carpen-Amarie mark significance (sec. 6.2): `***`
/// for `p <= 0.001`, `**` for `p <= 0.01`, `*` for `p <= 0.05`, none otherwise.
pub fn stars(p_value: f64) -> &'static str {
    if p_value <= 0.001 {
        "***"
    } else if p_value <= 0.01 {
        "**"
    } else if p_value <= 0.05 {
        "*"
    } else {
        ""
    }
}

/// The two-sided rank-sum test of `a` against `b` (see the module doc).
pub fn rank_sum(a: &Sorted<f64>, b: &Sorted<f64>) -> RankSum {
    let (a, b) = (a.as_slice(), b.as_slice());
    let (n_a, n_b) = (a.len(), b.len());
    let ranked = rank_pooled(a, b);
    let w = ranked.rank_sum_a - (n_a * (n_a + 1)) as f64 / 2.0;
    let ties = ranked.tie_term > 0.0;
    let mn = (n_a * n_b) as f64;
    let (p_value, method) = if n_a < EXACT_BELOW && n_b < EXACT_BELOW && !ties {
        // Without ties W is an integer.
        let u = w as usize;
        let pmf = null_distribution(n_a, n_b);
        let tail: f64 = if w > mn / 2.0 {
            pmf[u..].iter().sum()
        } else {
            pmf[..=u].iter().sum()
        };
        ((2.0 * tail).min(1.0), RankSumMethod::Exact)
    } else {
        let n = (n_a + n_b) as f64;
        let variance = mn / 12.0 * ((n + 1.0) - ranked.tie_term / (n * (n - 1.0)));
        let centred = w - mn / 2.0;
        let p = if variance > 0.0 {
            let z = (centred - 0.5 * sign(centred)) / variance.sqrt();
            let normal = Normal::standard();
            (2.0 * normal.cdf(z).min(normal.sf(z))).min(1.0)
        } else {
            1.0
        };
        (p, RankSumMethod::Normal)
    };
    RankSum {
        w,
        n_a,
        n_b,
        p_value,
        method,
        ties,
    }
}

/// R's `sign`: 0 at 0.
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// The rank sum of `a` in the pooled sample and `sum(t^3 - t)` over its groups of
/// equal values.
struct Ranked {
    rank_sum_a: f64,
    tie_term: f64,
}

/// Merges the two ascending samples, giving each group of equal values the mean of
/// the ranks it spans.
fn rank_pooled(a: &[f64], b: &[f64]) -> Ranked {
    let (mut i, mut j, mut next_rank) = (0usize, 0usize, 1usize);
    let (mut rank_sum_a, mut tie_term) = (0.0, 0.0);
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => unreachable!("the loop runs while a value is left"),
        };
        let from_a = a[i..].iter().take_while(|&&x| x == v).count();
        let from_b = b[j..].iter().take_while(|&&y| y == v).count();
        let t = from_a + from_b;
        // Ranks next_rank ..= next_rank + t - 1, mean next_rank + (t - 1) / 2.
        let mid_rank = next_rank as f64 + (t - 1) as f64 / 2.0;
        rank_sum_a += from_a as f64 * mid_rank;
        let t = t as f64;
        tie_term += t * t * t - t;
        i += from_a;
        j += from_b;
        next_rank += from_a + from_b;
    }
    Ranked {
        rank_sum_a,
        tie_term,
    }
}

/// The null distribution of `U` for samples of `m` and `n` values without ties:
/// `P(U = u)` for `u` in `0..=m n`, by Mann & Whitney's recurrence (module doc).
/// Works in probabilities, not counts: the counts reach `C(98, 49) ~ 2.5e28` at
/// R's largest exact case, beyond `f64`'s exact integers, while every term here is
/// a convex combination of probabilities.
pub fn null_distribution(m: usize, n: usize) -> Vec<f64> {
    // layer[i] = P(i, j, .) for the current j; j = 0: U = 0 surely.
    let mut layer: Vec<Vec<f64>> = vec![vec![1.0]; m + 1];
    for j in 1..=n {
        // layer[0] stays [1.0]: no `a`, U = 0.
        for i in 1..=m {
            let total = (i + j) as f64;
            let (p_a, p_b) = (i as f64 / total, j as f64 / total);
            let mut next = vec![0.0; i * j + 1];
            // The largest value is a `b`: P(i, j-1, u).
            for (u, &p) in layer[i].iter().enumerate() {
                next[u] += p_b * p;
            }
            // The largest value is an `a`: P(i-1, j, u - j) (layer[i-1] already at j).
            for (u, &p) in layer[i - 1].iter().enumerate() {
                next[u + j] += p_a * p;
            }
            layer[i] = next;
        }
    }
    layer.swap_remove(m)
}

#[cfg(test)]
impl RankSum {
    /// [`stars`] of the p-value.
    fn stars(&self) -> &'static str {
        stars(self.p_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(a: &[f64], b: &[f64]) -> RankSum {
        rank_sum(&Sorted::new(a).unwrap(), &Sorted::new(b).unwrap())
    }

    /// The vectors of `scripts/stats-reference.py`, bit for bit: a 64-bit LCG
    /// (Knuth's MMIX constants), 53 bits scaled to `[0, 10)`, plus `shift`.
    fn gen(seed: u64, n: usize, shift: f64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64 * 10.0 + shift
            })
            .collect()
    }

    /// Python's `round(v * 10) / 10` (round half to even; no value here is a half).
    fn rounded(values: Vec<f64>) -> Vec<f64> {
        values
            .into_iter()
            .map(|v| (v * 10.0).round_ties_even() / 10.0)
            .collect()
    }

    fn assert_close(got: f64, want: f64, rel: f64, what: &str) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: {got} vs {want} (relative {:e})",
            (got - want).abs() / want.abs()
        );
    }

    /// R's `?wilcox.test`: Hollander & Wolfe (1973, p. 69), permeability constants
    /// of the human chorioamnion; R prints `W = 35, p-value = 0.1272` for
    /// `alternative = "greater"`, so 0.2544 two-sided (exact: 2 * 382 / 3003).
    /// SciPy (`method='exact'`): 0.2544122544122544.
    #[test]
    fn hollander_wolfe_exact_as_in_r_documentation() {
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let y = [1.15, 0.88, 0.90, 0.74, 1.21];
        let r = test(&x, &y);
        assert_eq!((r.w, r.n_a, r.n_b), (35.0, 10, 5));
        assert_eq!((r.method, r.ties), (RankSumMethod::Exact, false));
        assert_close(r.p_value, 2.0 * 382.0 / 3003.0, 1e-13, "exact fraction");
        assert_close(r.p_value, 0.2544122544122544, 1e-13, "scipy");
        assert_eq!(format!("{:.4}", r.p_value), "0.2544");
        // Swapping the samples mirrors W and keeps p.
        let s = test(&y, &x);
        assert_eq!(s.w, 50.0 - 35.0);
        assert_close(s.p_value, r.p_value, 1e-13, "swapped");
    }

    /// R's `?wilcox.test`: `wilcox.test(Ozone ~ Month, data = airquality, subset =
    /// Month %in% c(5, 8))` prints `W = 127.5, p-value = 0.0001208` (ties: the
    /// normal approximation). SciPy (`method='asymptotic'`): 0.00012080783076877434.
    #[test]
    fn airquality_normal_with_ties_as_in_r_documentation() {
        let may = [
            41., 36., 12., 18., 28., 23., 19., 8., 7., 16., 11., 14., 18., 14., 34., 6., 30., 11.,
            1., 11., 4., 32., 23., 45., 115., 37.,
        ];
        let aug = [
            39., 9., 16., 78., 35., 66., 122., 89., 110., 44., 28., 65., 22., 59., 23., 31., 44.,
            21., 9., 45., 168., 73., 76., 118., 84., 85.,
        ];
        let r = test(&may, &aug);
        assert_eq!(
            (r.w, r.method, r.ties),
            (127.5, RankSumMethod::Normal, true)
        );
        assert_close(r.p_value, 0.00012080783076877434, 1e-9, "scipy");
        assert_eq!(format!("{:.7}", r.p_value), "0.0001208");
        assert_eq!(r.stars(), "***");
    }

    /// The remaining values of `scripts/stats-reference.py` (SciPy 1.17.1,
    /// `mannwhitneyu(x, y, method=..., use_continuity=True)`).
    #[test]
    fn reference_values_from_scipy() {
        use RankSumMethod::{Exact, Normal};
        // (name, a, b, W, method, p)
        type Case = (&'static str, Vec<f64>, Vec<f64>, f64, RankSumMethod, f64);
        let cases: [Case; 7] = [
            (
                "separated-3-4",
                vec![1.1, 2.2, 3.3],
                vec![4.4, 5.5, 6.6, 7.7],
                0.0,
                Exact,
                0.05714285714285714,
            ),
            (
                "gen-12-9",
                gen(1, 12, 0.0),
                gen(2, 9, 0.8),
                47.0,
                Exact,
                0.651052971796006,
            ),
            (
                "gen-7-30",
                gen(5, 7, 0.0),
                gen(6, 30, 0.0),
                79.0,
                Exact,
                0.3304035016558736,
            ),
            (
                "gen-49-49",
                gen(3, 49, 0.0),
                gen(4, 49, 1.0),
                1006.0,
                Exact,
                0.16880568736672272,
            ),
            (
                "gen-50-49",
                gen(7, 50, 0.0),
                gen(8, 49, 0.5),
                902.0,
                Normal,
                0.024006210602966035,
            ),
            (
                "small-ties",
                vec![1.0, 2.0, 2.0, 3.0],
                vec![2.0, 3.0, 3.0, 4.0, 5.0],
                3.0,
                Normal,
                0.09934224785346528,
            ),
            (
                "rounded-200-150",
                rounded(gen(9, 200, 0.0)),
                rounded(gen(10, 150, 0.3)),
                13291.0,
                Normal,
                0.06814563581745715,
            ),
        ];
        for (name, a, b, w, method, p) in cases {
            let r = test(&a, &b);
            assert_eq!((r.w, r.method), (w, method), "{name}");
            let rel = if method == Exact { 1e-12 } else { 1e-9 };
            assert_close(r.p_value, p, rel, name);
        }
    }

    /// The recurrence against brute force: every way of placing `m` of the ranks
    /// `1..=m+n` in `a`, counted by `U`.
    #[test]
    fn the_null_distribution_is_the_enumeration_of_rank_subsets() {
        for (m, n) in [(1, 1), (1, 4), (3, 4), (4, 3), (5, 5), (6, 9), (2, 11)] {
            let total = m + n;
            let mut counts = vec![0u64; m * n + 1];
            let mut subsets = 0u64;
            for mask in 0u32..(1 << total) {
                if mask.count_ones() as usize != m {
                    continue;
                }
                subsets += 1;
                let rank_sum: usize = (0..total)
                    .filter(|k| mask >> k & 1 == 1)
                    .map(|k| k + 1)
                    .sum();
                counts[rank_sum - m * (m + 1) / 2] += 1;
            }
            let pmf = null_distribution(m, n);
            assert_eq!(pmf.len(), counts.len());
            for (u, (&p, &c)) in pmf.iter().zip(&counts).enumerate() {
                let want = c as f64 / subsets as f64;
                assert!((p - want).abs() < 1e-15, "m={m} n={n} u={u}: {p} vs {want}");
            }
        }
        // Symmetric about mn/2 and summing to 1 at R's largest exact case.
        let pmf = null_distribution(49, 49);
        assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for u in 0..pmf.len() {
            assert!((pmf[u] - pmf[pmf.len() - 1 - u]).abs() <= 1e-15 + 1e-12 * pmf[u]);
        }
    }

    #[test]
    fn edge_cases() {
        // One value each: p = 1 either way.
        let r = test(&[1.0], &[2.0]);
        assert_eq!((r.w, r.p_value, r.method), (0.0, 1.0, RankSumMethod::Exact));
        // Every value equal: R gives NaN, we give 1 (no evidence).
        let r = test(&[3.0; 4], &[3.0; 6]);
        assert_eq!((r.w, r.p_value, r.ties), (12.0, 1.0, true));
        // Identical samples without ties across them are far from significant.
        let v = gen(12, 20, 0.0);
        let r = test(&v, &v);
        assert!(r.ties && r.p_value > 0.9, "{r:?}");
        // Fully separated samples of 60: the normal tail, far below 0.001.
        let r = test(&gen(13, 60, 0.0), &gen(14, 60, 20.0));
        assert_eq!((r.w, r.method), (0.0, RankSumMethod::Normal));
        assert!(r.p_value < 1e-15 && r.p_value > 0.0, "{r:?}");
    }

    #[test]
    fn stars_follow_the_paper() {
        for (p, s) in [
            (0.0005, "***"),
            (0.001, "***"),
            (0.0011, "**"),
            (0.01, "**"),
            (0.05, "*"),
            (0.0501, ""),
            (1.0, ""),
        ] {
            assert_eq!(stars(p), s, "{p}");
        }
    }
}
