//! Statistics across launches: Hunold & Carpen-Amarie's analysis of benchmark data
//! (sec. 6.1, Algorithm 6).
//!
//! A launch is one start of the whole job (one `mpirun`, one `ngauge` job). The
//! paper finds the launch itself an experimental factor (sec. 5.2): run times differ
//! between launches by more than repetitions within a launch suggest, so the
//! repetitions of one launch are not independent draws and a confidence interval
//! over all of them claims too much. Algorithm 6 therefore reduces each launch to
//! one value first:
//!
//! 1. per launch `i`, remove the outliers of its repetitions (Tukey's filter, line
//!    9: [`super::tukey_filter`]), then take their median and mean (line 10);
//! 2. across launches, the distribution of the per-launch medians is the sample:
//!    its median (the "median of medians", Fig. 11 and 24) is the estimate, its
//!    distribution-free interval ([`super::median_ci`]) the uncertainty, and two
//!    implementations are compared by the rank-sum test on it
//!    ([`super::ranksum`], sec. 6.2).
//!
//! The mean of the per-launch means gets the t interval ([`super::mean_ci`]): the
//! paper finds per-launch means normal in most cases (Fig. 27), single run times
//! never.
//!
//! With fewer than six launches there is no 95% interval of the median of medians
//! (the sign test needs six); the per-launch intervals of the repetitions are still
//! given, with the caveat above.

use super::mean_ci::{mean_interval, MeanInterval};
use super::median_ci::MedianInterval;
use super::sample::Sorted;
use super::tukey::tukey_filter;
use super::StatsError;
use serde::Serialize;

/// What happens to outliers within a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outliers {
    /// Tukey's filter per launch (the paper's Algorithm 6).
    Tukey,
    /// Every repetition counts.
    Keep,
}

/// One launch's repetitions, reduced.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LaunchSummary {
    /// Repetitions recorded.
    pub n: usize,
    /// Repetitions the outlier filter removed.
    pub removed: usize,
    /// Median of the repetitions kept.
    pub median: f64,
    /// Mean of the repetitions kept.
    pub mean: f64,
    /// Interval of the median of the repetitions kept (within this launch only).
    pub median_ci: Option<MedianInterval>,
}

/// Per-launch summaries and the statistics across them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct AcrossLaunches {
    /// One per launch, in launch order.
    pub launches: Vec<LaunchSummary>,
    /// The median of the per-launch medians.
    pub median_of_medians: f64,
    /// Interval of the median of the per-launch medians; `None` with too few
    /// launches (fewer than 6 at 95%).
    pub median_ci: Option<MedianInterval>,
    /// The mean of the per-launch means.
    pub mean_of_means: f64,
    /// Student's t interval of the mean of the per-launch means; `None` with one
    /// launch.
    pub mean_ci: Option<MeanInterval>,
}

impl AcrossLaunches {
    /// The per-launch medians, in launch order: the sample the rank-sum test
    /// compares.
    pub fn medians(&self) -> Vec<f64> {
        self.launches.iter().map(|l| l.median).collect()
    }
}

/// Reduces one launch's repetitions (any order).
///
/// # Errors
/// As [`Sorted::new`]; and [`StatsError::Level`].
pub fn launch_summary(
    values: &[f64],
    outliers: Outliers,
    level: f64,
) -> Result<LaunchSummary, StatsError> {
    let all = Sorted::new(values)?;
    let kept = match outliers {
        Outliers::Keep => all,
        // Some value lies in [Q1, Q3] (for n >= 3 an integer rank lies between
        // the quartiles' ranks, which are (n-1)/2 apart), and the fences enclose
        // [Q1, Q3]: `kept` is never empty.
        Outliers::Tukey => Sorted::new(&tukey_filter(all.as_slice()).expect("non-empty").kept)?,
    };
    let s = kept.as_slice();
    Ok(LaunchSummary {
        n: values.len(),
        removed: values.len() - s.len(),
        median: kept.median(),
        mean: s.iter().sum::<f64>() / s.len() as f64,
        median_ci: kept.median_interval(level)?,
    })
}

/// Algorithm 6 over the repetitions of each launch (see the module doc).
///
/// # Errors
/// [`StatsError::Empty`] without launches; [`StatsError::InLaunch`] naming the
/// launch whose repetitions are empty or not finite; [`StatsError::Level`].
pub fn across_launches<V: AsRef<[f64]>>(
    launches: &[V],
    outliers: Outliers,
    level: f64,
) -> Result<AcrossLaunches, StatsError> {
    if launches.is_empty() {
        return Err(StatsError::Empty);
    }
    let summaries = launches
        .iter()
        .enumerate()
        .map(|(i, v)| {
            launch_summary(v.as_ref(), outliers, level).map_err(|e| match e {
                StatsError::Empty => StatsError::InLaunch {
                    launch: i,
                    index: None,
                },
                StatsError::NotFinite { index } => StatsError::InLaunch {
                    launch: i,
                    index: Some(index),
                },
                other => other,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let medians = Sorted::new(&summaries.iter().map(|l| l.median).collect::<Vec<_>>())?;
    let means: Vec<f64> = summaries.iter().map(|l| l.mean).collect();
    let mean_ci = mean_interval(&means, level)?;
    Ok(AcrossLaunches {
        median_of_medians: medians.median(),
        median_ci: medians.median_interval(level)?,
        mean_of_means: means.iter().sum::<f64>() / means.len() as f64,
        mean_ci,
        launches: summaries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_medians_by_hand() {
        // Launch medians 2, 10, 4 -> median of medians 4; means 2, 11, 4 -> 17/3.
        let launches = [vec![1.0, 2.0, 3.0], vec![9.0, 10.0, 14.0], vec![4.0]];
        let a = across_launches(&launches, Outliers::Keep, 0.95).unwrap();
        assert_eq!(a.medians(), vec![2.0, 10.0, 4.0]);
        assert_eq!(a.median_of_medians, 4.0);
        assert_eq!(a.mean_of_means, 17.0 / 3.0);
        assert_eq!(a.median_ci, None, "3 launches: no 95% interval");
        assert!(a.mean_ci.is_some());
        assert_eq!(a.launches[1].n, 3);
    }

    #[test]
    fn outliers_are_removed_per_launch() {
        // 1..10 and 100 in one launch: the filter removes 100 (see tukey.rs), so
        // the mean is 5.5 instead of 14.09.
        let mut one: Vec<f64> = (1..=10).map(f64::from).collect();
        one.push(100.0);
        let kept = launch_summary(&one, Outliers::Tukey, 0.95).unwrap();
        assert_eq!(
            (kept.n, kept.removed, kept.median, kept.mean),
            (11, 1, 5.5, 5.5)
        );
        let all = launch_summary(&one, Outliers::Keep, 0.95).unwrap();
        assert_eq!((all.removed, all.median), (0, 6.0));
        assert_eq!(all.mean, 155.0 / 11.0);
        let ci = kept.median_ci.unwrap();
        assert_eq!((ci.lo, ci.hi), (2.0, 9.0));
    }

    /// Launch-to-launch variation dominates: the interval of the median of
    /// medians reflects the launches, not the thousands of repetitions.
    #[test]
    fn the_interval_spans_the_launches() {
        // Launch i: 1000 repetitions around 10 + i (spread 0.01).
        let launches: Vec<Vec<f64>> = (0..10)
            .map(|i| {
                (0..1000)
                    .map(|k| 10.0 + i as f64 + (k % 7) as f64 * 0.01)
                    .collect()
            })
            .collect();
        let a = across_launches(&launches, Outliers::Tukey, 0.95).unwrap();
        let ci = a.median_ci.unwrap();
        // n = 10 at 95%: [x_(2), x_(9)] of the medians 10.03 .. 19.03.
        assert_eq!(ci.rank, 2);
        assert!(
            (ci.lo - 11.03).abs() < 1e-9 && (ci.hi - 18.03).abs() < 1e-9,
            "{ci:?}"
        );
        assert!((a.median_of_medians - 14.53).abs() < 1e-9);
        let within = a.launches[0].median_ci.unwrap();
        assert!(
            within.hi - within.lo < 0.05,
            "one launch alone claims far less"
        );
    }

    #[test]
    fn bad_launches_are_named() {
        let none: [Vec<f64>; 0] = [];
        assert_eq!(
            across_launches(&none, Outliers::Keep, 0.95),
            Err(StatsError::Empty)
        );
        assert_eq!(
            across_launches(&[vec![1.0], vec![]], Outliers::Keep, 0.95),
            Err(StatsError::InLaunch {
                launch: 1,
                index: None
            })
        );
        let e =
            across_launches(&[vec![1.0], vec![2.0, f64::NAN]], Outliers::Tukey, 0.95).unwrap_err();
        assert_eq!(
            e,
            StatsError::InLaunch {
                launch: 1,
                index: Some(1)
            }
        );
        assert_eq!(e.to_string(), "value 1 of launch 1 is not a finite number");
    }
}
