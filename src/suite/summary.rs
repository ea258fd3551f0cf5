//! `summary.json` and `summary.csv` of a run directory: per experiment and size,
//! Hunold & Carpen-Amarie's Algorithm 6 over the finished launches
//! ([`crate::stats::launches`]): each launch's repetitions filtered (Tukey) and
//! reduced to a median and a mean, then the median of the per-launch medians with
//! its distribution-free interval and the mean of the per-launch means with its t
//! interval.
//!
//! A launch whose repetitions were not recorded (a command without `samples`)
//! enters with the median its document reports, as a sample of one.

use super::results::{ResultSet, Series};
use crate::stats::{across_launches, AcrossLaunches, Outliers, StatsError};
use serde::Serialize;
use std::io;

/// Confidence level of every interval in the summary.
pub const LEVEL: f64 = 0.95;

/// The summary of a run directory.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Summary {
    /// Confidence level of the intervals.
    pub level: f64,
    /// Outlier handling within a launch.
    pub outliers: Outliers,
    /// One per experiment (and transport, when an experiment measures several).
    pub experiments: Vec<ExperimentSummary>,
}

/// One experiment's summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ExperimentSummary {
    /// The experiment (`NAME` or `NAME/TRANSPORT`).
    pub experiment: String,
    /// The metric summarised; its unit is the suffix of its name.
    pub metric: String,
    /// One per size, ascending (`size` absent for sizeless results).
    pub sizes: Vec<SizeSummary>,
}

/// One size of an experiment, across its launches.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SizeSummary {
    /// Message size, bytes.
    pub size: Option<u64>,
    /// The launches that measured it (numbers from 0), in the order of
    /// `launches[]` and `launch_medians`.
    pub launch_numbers: Vec<usize>,
    /// The per-launch medians (the sample `ngauge compare` tests).
    pub launch_medians: Vec<f64>,
    /// Whether every launch recorded its repetitions (else a launch enters with its
    /// reported median alone).
    pub repetitions_recorded: bool,
    /// Per launch and across launches.
    #[serde(flatten)]
    pub stats: AcrossLaunches,
}

/// Summarises every series of `set`.
///
/// # Errors
/// Only for values that are not finite, which the reader never yields.
pub fn summarize(set: &ResultSet, outliers: Outliers) -> Result<Summary, StatsError> {
    let experiments = set
        .series
        .iter()
        .map(|(name, series)| experiment(name, series, outliers))
        .collect::<Result<_, _>>()?;
    Ok(Summary {
        level: LEVEL,
        outliers,
        experiments,
    })
}

fn experiment(
    name: &str,
    series: &Series,
    outliers: Outliers,
) -> Result<ExperimentSummary, StatsError> {
    let sizes = series
        .points
        .iter()
        .map(|(size, launches)| {
            let values: Vec<Vec<f64>> = launches
                .values()
                .map(|p| {
                    if p.samples.is_empty() {
                        vec![p.median]
                    } else {
                        p.samples.clone()
                    }
                })
                .collect();
            let stats = across_launches(&values, outliers, LEVEL)?;
            Ok(SizeSummary {
                size: *size,
                launch_numbers: launches.keys().copied().collect(),
                launch_medians: stats.medians(),
                repetitions_recorded: launches.values().all(|p| !p.samples.is_empty()),
                stats,
            })
        })
        .collect::<Result<_, StatsError>>()?;
    Ok(ExperimentSummary {
        experiment: name.to_string(),
        metric: series.metric.clone(),
        sizes,
    })
}

/// Rewrites the derived files of a run directory after `experiment` finished a
/// run: its combined records (`EXP.jsonl`, `EXP.csv`) from the documents of its
/// finished launches among `launches`, then `summary.json` and `summary.csv`.
///
/// # Errors
/// Reading the documents or writing the files.
pub fn refresh(dir: &super::dir::RunDir, experiment: &str, launches: usize) -> io::Result<Summary> {
    dir.combine(experiment, &dir.done_launches(experiment, launches))?;
    let set = super::results::read(dir.root(), None).map_err(io::Error::other)?;
    let summary = summarize(&set, Outliers::Tukey).map_err(io::Error::other)?;
    let json = serde_json::to_string_pretty(&summary).map_err(io::Error::other)? + "\n";
    super::dir::write_atomically(&dir.summary(), json.as_bytes())?;
    super::dir::write_atomically(&dir.summary_csv(), &summary_csv(&summary)?)?;
    Ok(summary)
}

/// `summary.csv`: one row per experiment and size.
///
/// # Errors
/// Only from the CSV writer.
pub fn summary_csv(s: &Summary) -> io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "experiment",
        "metric",
        "size_bytes",
        "launches",
        "median_of_medians",
        "median_ci_lo",
        "median_ci_hi",
        "median_ci_coverage",
        "mean_of_means",
        "mean_ci_lo",
        "mean_ci_hi",
        "repetitions_removed",
    ])
    .map_err(io::Error::other)?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for e in &s.experiments {
        for p in &e.sizes {
            let st = &p.stats;
            w.write_record([
                e.experiment.clone(),
                e.metric.clone(),
                p.size.map_or(String::new(), |s| s.to_string()),
                st.launches.len().to_string(),
                st.median_of_medians.to_string(),
                opt(st.median_ci.map(|c| c.lo)),
                opt(st.median_ci.map(|c| c.hi)),
                opt(st.median_ci.map(|c| c.coverage)),
                st.mean_of_means.to_string(),
                opt(st.mean_ci.map(|c| c.lo)),
                opt(st.mean_ci.map(|c| c.hi)),
                st.launches
                    .iter()
                    .map(|l| l.removed)
                    .sum::<usize>()
                    .to_string(),
            ])
            .map_err(io::Error::other)?;
        }
    }
    w.into_inner().map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::results::LaunchPoint;
    use std::collections::BTreeMap;

    #[test]
    fn per_launch_medians_and_their_median() {
        // 7 launches of size 8: repetitions around 10 + launch, one far outlier
        // each that the filter removes; size 16 recorded medians only.
        let mut series = Series {
            metric: "half_rtt_us".into(),
            points: BTreeMap::new(),
        };
        for k in 0..7 {
            let mut reps: Vec<f64> = (0..9).map(|i| 10.0 + k as f64 + i as f64 * 0.01).collect();
            reps.push(500.0);
            series.points.entry(Some(8)).or_default().insert(
                k,
                LaunchPoint {
                    median: 0.0,
                    samples: reps,
                },
            );
            series.points.entry(Some(16)).or_default().insert(
                k,
                LaunchPoint {
                    median: 20.0 + k as f64,
                    samples: vec![],
                },
            );
        }
        let set = ResultSet {
            source: "dir".into(),
            series: [("pp".to_string(), series)].into(),
            meta: Vec::new(),
        };
        let s = summarize(&set, Outliers::Tukey).unwrap();
        let e = &s.experiments[0];
        assert_eq!(
            (e.experiment.as_str(), e.metric.as_str()),
            ("pp", "half_rtt_us")
        );
        let p8 = &e.sizes[0];
        assert_eq!(p8.size, Some(8));
        assert!(p8.repetitions_recorded);
        // Filtered medians 10.04 .. 16.04; their median 13.04.
        assert!((p8.stats.median_of_medians - 13.04).abs() < 1e-9);
        assert!(p8.stats.launches.iter().all(|l| l.removed == 1));
        let ci = p8.stats.median_ci.unwrap();
        assert_eq!(ci.rank, 1, "7 launches at 95%: [min, max]");
        let p16 = &e.sizes[1];
        assert!(!p16.repetitions_recorded);
        assert_eq!(
            p16.launch_medians,
            (20..27).map(f64::from).collect::<Vec<_>>()
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["experiments"][0]["sizes"][0]["median_of_medians"],
            p8.stats.median_of_medians
        );
        let csv = String::from_utf8(summary_csv(&s).unwrap()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].starts_with("pp,half_rtt_us,8,7,13.04"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with(",7"),
            "7 repetitions removed: {}",
            lines[1]
        );
        assert!(
            lines[2].starts_with("pp,half_rtt_us,16,7,23,"),
            "{}",
            lines[2]
        );
    }

    /// Issue 35: an `[experiment.ebb]` entry is summarised by its per-pair
    /// bandwidth (each launch's median over its pairs, as ebb's table heads
    /// with), not by the pairs' half round trips.
    #[test]
    fn an_ebb_experiment_is_summarised_by_its_per_pair_bandwidth_median() {
        use crate::suite::dir::{write_atomically, RunDir};
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::new(tmp.path());
        std::fs::write(dir.plan(), "{}").unwrap();
        for (k, bw) in [(0, [10.0, 30.0, 20.0, 40.0]), (1, [50.0, 60.0, 70.0, 80.0])] {
            let results: Vec<serde_json::Value> = bw
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    serde_json::json!({"from": 2 * i, "to": 2 * i + 1, "step": i / 2,
                        "size": 4096, "half_rtt_us": {"median": 1.0 + i as f64},
                        "bandwidth_MBps": b})
                })
                .collect();
            let doc = serde_json::json!({"meta": {"transport": "tcp"}, "bisections": 2,
                "seed": 1, "distribution": {"median_MBps": 0.0}, "results": results});
            write_atomically(&dir.run_document("eb", k), doc.to_string().as_bytes()).unwrap();
        }
        let s = refresh(&dir, "eb", 2).unwrap();
        let e = &s.experiments[0];
        assert_eq!(
            (e.experiment.as_str(), e.metric.as_str()),
            ("eb", "bandwidth_MBps")
        );
        assert_eq!(e.sizes[0].launch_medians, vec![25.0, 65.0]);
        let csv = std::fs::read_to_string(dir.summary_csv()).unwrap();
        let line = csv.lines().nth(1).unwrap();
        assert!(line.starts_with("eb,bandwidth_MBps,4096,2,45,"), "{csv}");
    }
}
