//! A latency histogram with log-spaced bins (`--histogram`): bin `k` holds the
//! values in `[10^(k/B), 10^((k+1)/B))` us with `B` = [`BINS_PER_DECADE`], so that
//! bins keep the same relative width from 1 us to 10 ms and two histograms' bins
//! line up (a tail an order of magnitude out still gets its own bins, which linear
//! bins sized for the bulk would merge or spread over thousands).

use serde::Serialize;

/// Bins per factor of 10: each bin is 10^(1/10) = 1.26 times as wide as the one
/// before.
pub const BINS_PER_DECADE: u32 = 10;

/// The smallest value binned, us (values below, 0 included, count in its bin).
const FLOOR_US: f64 = 1e-3;

/// The non-empty bins of a sample, ascending.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Histogram {
    /// Bins per factor of 10 ([`BINS_PER_DECADE`]).
    pub bins_per_decade: u32,
    /// The non-empty bins, ascending.
    pub bins: Vec<Bin>,
}

/// One bin: the values `from_us <= v < to_us`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Bin {
    /// Lower edge, us.
    pub from_us: f64,
    /// Upper edge, us.
    pub to_us: f64,
    /// Values in the bin.
    pub count: u64,
}

impl Histogram {
    /// The histogram of `values_us` (non-finite values are left out).
    pub fn of(values_us: &[f64]) -> Self {
        let per = f64::from(BINS_PER_DECADE);
        let edge = |k: i64| 10f64.powf(k as f64 / per);
        let mut counts = std::collections::BTreeMap::<i64, u64>::new();
        for &v in values_us.iter().filter(|v| v.is_finite()) {
            let mut k = (v.max(FLOOR_US).log10() * per).floor() as i64;
            // log10 rounds: keep v inside its bin's edges.
            if v.max(FLOOR_US) < edge(k) {
                k -= 1;
            } else if v.max(FLOOR_US) >= edge(k + 1) {
                k += 1;
            }
            *counts.entry(k).or_default() += 1;
        }
        Histogram {
            bins_per_decade: BINS_PER_DECADE,
            bins: counts
                .into_iter()
                .map(|(k, count)| Bin {
                    from_us: edge(k),
                    to_us: edge(k + 1),
                    count,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37: values land in the log-spaced bin whose edges hold them.
    #[test]
    fn issue_37_values_land_in_their_log_spaced_bins() {
        let h = Histogram::of(&[1.0, 1.1, 1.3, 10.0, 12.0, 1000.0, f64::NAN]);
        let counts: Vec<(f64, u64)> = h.bins.iter().map(|b| (b.from_us, b.count)).collect();
        assert_eq!(counts.len(), 4, "{h:?}");
        assert_eq!(counts[0], (1.0, 2));
        assert!((counts[1].0 - 10f64.powf(0.1)).abs() < 1e-12 && counts[1].1 == 1);
        assert_eq!(counts[2], (10.0, 2));
        assert_eq!(counts[3], (1000.0, 1));
        for b in &h.bins {
            assert!((b.to_us / b.from_us - 10f64.powf(0.1)).abs() < 1e-9);
        }
        assert!(Histogram::of(&[]).bins.is_empty());
        assert_eq!(Histogram::of(&[0.0]).bins[0].count, 1);
    }
}
