//! Distribution-free confidence interval of the median from order statistics (the
//! interval that inverts the sign test).
//!
//! For a sample of `n` independent values from any continuous distribution with
//! median `m`, the number of values below `m` is Binomial(n, 1/2). So the interval
//! `[x_(k), x_(n-k+1)]` between the `k`-th smallest and the `k`-th largest value
//! misses `m` with probability `2 P(X < k)`, `X ~ Binomial(n, 1/2)`, whatever the
//! distribution (Hollander, Wolfe & Chicken, "Nonparametric Statistical Methods",
//! sec. 3.6; Conover, "Practical Nonparametric Statistics", sec. 3.2). We take the
//! largest `k` with `P(X < k) <= (1 - level) / 2`, the narrowest such interval
//! whose coverage `1 - 2 P(X < k)` is at least `level`; the coverage reached is
//! reported, since a discrete distribution rarely hits the level exactly. Below
//! some `n` no `k >= 1` qualifies (at 95%: `n < 6`, where even `[min, max]` covers
//! with only `1 - 2^(1-n)`), and there is no interval.
//!
//! Hunold & Carpen-Amarie (sec. 5) recommend medians because run times are not
//! normal; this is the interval that goes with them. It assumes independent values:
//! repetitions that drift with the machine's state are not, which is why
//! `scripts/bench-mpi` pairs its rounds and takes the interval of per-round ratios.

use super::StatsError;
use statrs::distribution::{Binomial, DiscreteCDF};

/// A confidence interval of the median: `[x_(rank), x_(n-rank+1)]`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MedianInterval {
    /// Lower end, `x_(rank)`.
    pub lo: f64,
    /// Upper end, `x_(n-rank+1)`.
    pub hi: f64,
    /// `k`: the 1-based rank of the lower end, counted from each side.
    pub rank: usize,
    /// The probability that such an interval covers the median, `1 - 2 P(X < k)`
    /// (at least the level asked for).
    pub coverage: f64,
}

/// The rank `k` of the interval of `n` values at `level`; `None` when no `k >= 1`
/// reaches the level.
///
/// # Errors
/// [`StatsError::Level`] unless `0 < level < 1`.
pub fn median_rank(n: usize, level: f64) -> Result<Option<usize>, StatsError> {
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::Level { level });
    }
    if n == 0 {
        return Ok(None);
    }
    let tail = (1.0 - level) / 2.0;
    let below = below_fn(n);
    // P(X < k) grows with k and exceeds 1/2 > tail by k = n/2 + 1: bisect for the
    // largest k in 0..=n/2 with P(X < k) <= tail (P(X < 0) = 0 always qualifies).
    let (mut ok, mut bad) = (0usize, n / 2 + 1);
    while bad - ok > 1 {
        let mid = ok + (bad - ok) / 2;
        if below(mid) <= tail {
            ok = mid;
        } else {
            bad = mid;
        }
    }
    Ok((ok >= 1).then_some(ok))
}

/// `k -> P(X < k)` for `X ~ Binomial(n, 1/2)`.
fn below_fn(n: usize) -> impl Fn(usize) -> f64 {
    let binomial = Binomial::new(0.5, n as u64).expect("p = 1/2 is a probability");
    move |k| {
        if k == 0 {
            0.0
        } else {
            binomial.cdf(k as u64 - 1)
        }
    }
}

/// The interval of the median of ascending `sorted` values at `level` (0.95 for
/// 95%); `Ok(None)` when there are too few values for that level.
///
/// # Errors
/// [`StatsError::Level`] unless `0 < level < 1`.
pub fn median_interval(sorted: &[f64], level: f64) -> Result<Option<MedianInterval>, StatsError> {
    debug_assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
    let n = sorted.len();
    let Some(k) = median_rank(n, level)? else {
        return Ok(None);
    };
    Ok(Some(MedianInterval {
        lo: sorted[k - 1],
        hi: sorted[n - k],
        rank: k,
        coverage: 1.0 - 2.0 * below_fn(n)(k),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sum_{i<k} C(n, i)` in integers (exact for n <= 120).
    fn exact_below_count(n: u32, k: u32) -> u128 {
        let (mut c, mut sum) = (1u128, 0u128);
        for i in 0..k {
            sum += c;
            c = c * u128::from(n - i) / u128::from(i + 1);
        }
        sum
    }

    /// The exact rank: largest k with sum_{i<k} C(n,i) / 2^n <= num / den, compared
    /// in integers.
    fn exact_rank(n: u32, num: u128, den: u128) -> Option<usize> {
        let mut k = 0;
        while k < n && exact_below_count(n, k + 1) * den <= num << n {
            k += 1;
        }
        (k >= 1).then_some(k as usize)
    }

    #[test]
    fn ranks_by_hand() {
        // n = 9: P(X = 0) = 1/512, P(X <= 1) = 10/512 = 0.0195 <= 0.025,
        // P(X <= 2) = 46/512 = 0.0898: k = 2, coverage 1 - 20/512.
        assert_eq!(median_rank(9, 0.95).unwrap(), Some(2));
        let sorted: Vec<f64> = (1..=9).map(f64::from).collect();
        let ci = median_interval(&sorted, 0.95).unwrap().unwrap();
        assert_eq!((ci.lo, ci.hi, ci.rank), (2.0, 8.0, 2));
        assert!((ci.coverage - (1.0 - 20.0 / 512.0)).abs() < 1e-12);
        // n = 5: even [min, max] covers with 1 - 2/32 = 0.9375 < 0.95.
        assert_eq!(median_rank(5, 0.95).unwrap(), None);
        assert_eq!(
            median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95).unwrap(),
            None
        );
        // n = 6: [min, max] covers with 1 - 2/64 = 0.96875.
        let ci = median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0.95)
            .unwrap()
            .unwrap();
        assert_eq!((ci.lo, ci.hi), (1.0, 6.0));
        assert!((ci.coverage - 0.96875).abs() < 1e-12);
        assert_eq!(median_rank(0, 0.95).unwrap(), None);
        assert_eq!(median_rank(1, 0.5).unwrap(), None);
    }

    /// The textbook 95% table of the sign-test interval (lower rank k by n; each
    /// entry also recomputed from exact binomial sums).
    #[test]
    fn ranks_match_the_published_95_percent_table() {
        for (n, k) in [
            (6, 1),
            (7, 1),
            (8, 1),
            (9, 2),
            (10, 2),
            (11, 2),
            (12, 3),
            (13, 3),
            (14, 3),
            (15, 4),
            (16, 4),
            (17, 5),
            (18, 5),
            (19, 5),
            (20, 6),
            (25, 8),
            (30, 10),
            (40, 14),
            (50, 18),
            (100, 40),
        ] {
            assert_eq!(median_rank(n, 0.95).unwrap(), Some(k), "n = {n}");
        }
    }

    /// statrs's binomial CDF places every rank where exact integer arithmetic does
    /// (tails 1/20, 1/40, 1/200 for the 90, 95 and 99% levels).
    #[test]
    fn ranks_agree_with_exact_arithmetic() {
        for n in 1..=120u32 {
            for (level, den) in [(0.90, 20), (0.95, 40), (0.99, 200)] {
                assert_eq!(
                    median_rank(n as usize, level).unwrap(),
                    exact_rank(n, 1, den),
                    "n = {n}, level {level}"
                );
            }
        }
    }

    #[test]
    fn a_large_sample_bisects_fast_and_covers() {
        let sorted: Vec<f64> = (0..100_000).map(f64::from).collect();
        let ci = median_interval(&sorted, 0.99).unwrap().unwrap();
        // Normal approximation: k ~ n/2 - 2.576 sqrt(n)/2 = 49593.
        assert!((ci.rank as i64 - 49_593).abs() <= 2, "{ci:?}");
        assert!(ci.coverage >= 0.99 && ci.coverage < 0.9905);
        assert_eq!(ci.hi - ci.lo, (100_000 - 2 * ci.rank + 1) as f64);
    }

    #[test]
    fn levels_outside_the_unit_interval_are_errors() {
        for level in [0.0, 1.0, 95.0, -0.5, f64::NAN] {
            assert!(matches!(
                median_rank(10, level),
                Err(StatsError::Level { .. })
            ));
        }
    }
}
