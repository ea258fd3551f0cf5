//! Statistics of repeated measurements. Every median, quantile and summary in the
//! crate comes from here; `docs/statistics.md` states each definition with its
//! reference.
//!
//! What exists:
//!
//! | module | what |
//! |---|---|
//! | [`order`] | the median (midpoint of the two middle values for an even count), quantiles (Hyndman & Fan definition 7, R's default), the lower median; generic over [`Value`] so ticks stay ticks |
//! | [`sample`] | [`Sorted`]: a non-empty, finite sample sorted once, in its unit |
//! | [`summary`] | [`Summary`]: n, min, median, mean, p99, p99.9, max, stdev |
//! | [`histogram`] | [`Histogram`]: counts in log-spaced bins (10 per decade) |
//! | [`median_ci`] | the distribution-free confidence interval of the median (order statistics of the sign test) |
//! | [`precision`] | repetitions until the interval of the median is within a relative half-width (`--precision`, SKaMPI / ReproMPI / hyperfine `--min-runs`) |
//! | [`tukey`] | Tukey's outlier filter, `[Q1 - 1.5 IQR, Q3 + 1.5 IQR]` (Hunold & Carpen-Amarie, sec. 3.5) |
//! | [`mean_ci`] | the interval of the mean from Student's t (R's `t.test`) |
//! | [`ranksum`] | the two-sided Wilcoxon-Mann-Whitney rank-sum test with R's `wilcox.test` semantics: exact below 50 values without ties, else normal with tie and continuity correction |
//! | [`huber`] | Huber's robust regression of a two-coefficient linear model (the algorithm-specific Hockney fits of Nuriyev's thesis, sec. 5.2.2) |
//! | [`compare`] | two sides' launches at one point: per-launch values, medians, ratio, and the rank-sum test on launch medians or repetitions (`ngauge compare`) |
//! | [`level`] | whether repetitions in the order measured held one level: consecutive chunks' medians, intervals apart and a quarter apart |
//! | [`launches`] | Algorithm 6 of Hunold & Carpen-Amarie: per launch filter, median and mean; across launches the median of medians with its interval |
//!
//! Each takes a [`Sorted`] or a slice and returns a plain serde struct, like
//! [`MedianInterval`].
//!
//! Distributions come from `statrs`; nothing here reads a clock or prints.

pub mod compare;
pub mod histogram;
pub mod huber;
pub mod launches;
pub mod level;
pub mod mad;
pub mod mean_ci;
pub mod median_ci;
pub mod order;
pub mod precision;
pub mod ranksum;
pub mod sample;
pub mod summary;
pub mod tukey;

pub use histogram::Histogram;
pub use launches::{across_launches, launch_summary, AcrossLaunches, LaunchSummary, Outliers};
pub use mean_ci::{mean_interval, MeanInterval};
pub use median_ci::{median_interval, MedianInterval};
pub use order::{lower_median_by, median, median_of_sorted, quantile_of_sorted, sorted, Value};
pub use ranksum::{rank_sum, stars, RankSum, RankSumMethod};
pub use sample::Sorted;
pub use summary::Summary;
pub use tukey::{tukey_filter, Fences, Filtered, TUKEY_K};

/// Why a statistic could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// The sample has no values.
    #[error("the sample is empty")]
    Empty,
    /// A value is NaN or infinite.
    #[error("value {index} of the sample is not a finite number")]
    NotFinite {
        /// Its 0-based position in the input.
        index: usize,
    },
    /// A launch of a suite has no values (`index: None`) or a value that is not
    /// finite.
    #[error("{}", in_launch(*launch, *index))]
    InLaunch {
        /// Its 0-based launch number.
        launch: usize,
        /// The 0-based position of the value that is not finite.
        index: Option<usize>,
    },
    /// A confidence level outside `(0, 1)`.
    #[error("confidence level {level} is not between 0 and 1 (exclusive)")]
    Level {
        /// The level given.
        level: f64,
    },
}

fn in_launch(launch: usize, index: Option<usize>) -> String {
    match index {
        None => format!("launch {launch} has no values"),
        Some(i) => format!("value {i} of launch {launch} is not a finite number"),
    }
}
