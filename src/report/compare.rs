//! `ngauge compare A B`: two sets of results side by side, per experiment and size,
//! with the rank-sum test (Hunold & Carpen-Amarie, sec. 6.2, Fig. 26).
//!
//! Per side, experiment and size, each launch is reduced to one value (Algorithm 6:
//! the median of its repetitions after Tukey's filter when the repetitions were
//! recorded, else the median the command reported). Then:
//!
//! - `median_a`, `median_b`: the median of the per-launch values (of one launch:
//!   its value);
//! - `ratio = median_b / median_a` (above 1: B is slower, for times);
//! - `p_value`: the two-sided rank-sum test on the per-launch values when both
//!   sides have at least two launches (the paper's test: the launch is the unit of
//!   replication); otherwise on the repetitions when both sides recorded them
//!   (`basis: repetitions`: the test then speaks of these launches only, not of
//!   the next one); otherwise none. The statistics are
//!   [`crate::stats::compare`]'s; this module pairs the experiments and sizes of
//!   two result sets and renders.
//!
//! With `k` launches a side the smallest two-sided p-value the exact test can give
//! is `2 / C(2k, k)`: 0.33 for 2, 0.10 for 3, 0.029 for 4, 0.0079 for 5. Fewer than
//! four launches a side can never reach `*`; the document carries
//! [`CompareWarning::TooFewLaunches`] then.
//!
//! Experiments are matched by name; when each side holds a single experiment they
//! are matched whatever their names (`pingpong -t mpi` against `pingpong -t tcp`).

use crate::report::svg;
use crate::report::table::Table;
use crate::report::Meta;
use crate::stats::compare::{compare_launches, Basis, LaunchValues};
use crate::stats::{stars, Outliers, RankSumMethod};
use crate::suite::results::{LaunchPoint, ResultSet, Series, SourceMeta};
use serde::Serialize;
use std::collections::BTreeMap;

/// One experiment and size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CompareRow {
    /// The experiment (`A-name vs B-name` when single experiments of different
    /// names were matched).
    pub experiment: String,
    /// The metric compared (`half_rtt_us`, ...).
    pub metric: String,
    /// Message size, bytes (`None` for sizeless results).
    pub size: Option<u64>,
    /// A's median of per-launch values, in the metric's unit.
    pub median_a: f64,
    /// B's median of per-launch values.
    pub median_b: f64,
    /// `median_b / median_a`; `None` when `median_a` is 0.
    pub ratio: Option<f64>,
    /// Two-sided rank-sum p-value; `None` when there is nothing to test.
    pub p_value: Option<f64>,
    /// `*`, `**`, `***` or empty (see [`crate::stats::stars`]).
    pub stars: &'static str,
    /// What was tested.
    pub basis: Basis,
    /// The rank-sum statistic `W` of A.
    pub w: Option<f64>,
    /// Exact or normal.
    pub method: Option<RankSumMethod>,
    /// Values tested on A's side (launches or repetitions).
    pub n_a: usize,
    /// Values tested on B's side.
    pub n_b: usize,
    /// Launches on A's side.
    pub launches_a: usize,
    /// Launches on B's side.
    pub launches_b: usize,
}

/// What limits a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CompareWarning {
    /// An experiment on one side only.
    #[error("experiment `{experiment}` is only in {}; not compared", .side.to_uppercase())]
    Unmatched {
        /// `a` or `b`.
        side: &'static str,
        /// The experiment.
        experiment: String,
    },
    /// Sizes of an experiment measured on one side only.
    #[error(
        "`{experiment}`: sizes measured on one side only{}{}",
        only("A", .only_a),
        only("B", .only_b)
    )]
    SizesUnmatched {
        /// The experiment.
        experiment: String,
        /// Sizes only A has.
        only_a: Vec<u64>,
        /// Sizes only B has.
        only_b: Vec<u64>,
    },
    /// The two sides measured different metrics.
    #[error(
        "`{experiment}`: A measures {a}, B measures {b}; not compared (choose one with --metric)"
    )]
    MetricsDiffer {
        /// The experiment.
        experiment: String,
        /// A's metric.
        a: String,
        /// B's metric.
        b: String,
    },
    /// Launch medians tested with fewer than 4 launches on a side: no p-value can
    /// reach 0.05.
    #[error(
        "only {launches} launch(es) on a side: the rank-sum test of launch medians cannot reach \
         p <= 0.05 below 4 launches a side (run the suites with more `launches`)"
    )]
    TooFewLaunches {
        /// The fewest launches of a side among the rows tested on launch medians.
        launches: usize,
    },
    /// A single launch on a side: p-values test repetitions of these launches.
    #[error(
        "a side has a single launch: p-values test the repetitions of these launches, which \
         says nothing about the next launch (Hunold & Carpen-Amarie, sec. 5.2; run suites with \
         several `launches`)"
    )]
    SingleLaunch,
}

/// `; only A: 8, 16` when `side` alone has `sizes`, else nothing.
fn only(side: &str, sizes: &[u64]) -> String {
    if sizes.is_empty() {
        return String::new();
    }
    format!("; only {side}: {}", super::table::joined(sizes))
}

/// The comparison (the body of `ngauge compare --json`, see [`CompareDoc`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Comparison {
    /// Where A was read from.
    pub a: String,
    /// Where B was read from.
    pub b: String,
    /// Outlier handling within a launch.
    pub outliers: Outliers,
    /// One row per experiment and size measured on both sides.
    pub rows: Vec<CompareRow>,
    /// What limits the comparison.
    pub warnings: Vec<CompareWarning>,
}

/// `ngauge compare --json`: the comparison, the `meta` of this run, and the
/// launch metadata of each side (the `meta` of the documents compared: what a
/// reader needs to tell whether A and B differ in more than the factor studied).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CompareDoc {
    /// The comparison.
    #[serde(flatten)]
    pub comparison: Comparison,
    /// A's launches: the `meta` of its document, or of every run of its run
    /// directory (empty for a stream).
    pub meta_a: Vec<SourceMeta>,
    /// B's launches.
    pub meta_b: Vec<SourceMeta>,
    /// This comparison's own metadata (version, build, host, date, command line).
    pub meta: Meta,
}

/// One side's launches at one size.
fn launches(points: &BTreeMap<usize, LaunchPoint>) -> Vec<LaunchValues<'_>> {
    points
        .values()
        .map(|p| LaunchValues {
            samples: &p.samples,
            median: p.median,
        })
        .collect()
}

/// Compares B against A (see the module doc).
pub fn compare(a: &ResultSet, b: &ResultSet, outliers: Outliers) -> Comparison {
    let mut warnings = Vec::new();
    let pairs: Vec<(String, &Series, &Series)> = if a.series.len() == 1 && b.series.len() == 1 {
        let (ka, sa) = a.series.iter().next().expect("one series");
        let (kb, sb) = b.series.iter().next().expect("one series");
        let name = if ka == kb {
            ka.clone()
        } else {
            format!("{ka} vs {kb}")
        };
        vec![(name, sa, sb)]
    } else {
        for (side, mine, other) in [("a", a, b), ("b", b, a)] {
            for k in mine
                .series
                .keys()
                .filter(|k| !other.series.contains_key(*k))
            {
                warnings.push(CompareWarning::Unmatched {
                    side,
                    experiment: k.clone(),
                });
            }
        }
        a.series
            .iter()
            .filter_map(|(k, sa)| b.series.get(k).map(|sb| (k.clone(), sa, sb)))
            .collect()
    };
    let mut rows = Vec::new();
    let mut fewest_launches: Option<usize> = None;
    let mut single_launch = false;
    for (experiment, sa, sb) in pairs {
        if sa.metric != sb.metric {
            warnings.push(CompareWarning::MetricsDiffer {
                experiment,
                a: sa.metric.clone(),
                b: sb.metric.clone(),
            });
            continue;
        }
        let only = |x: &Series, y: &Series| -> Vec<u64> {
            x.points
                .keys()
                .filter(|s| !y.points.contains_key(*s))
                .filter_map(|s| *s)
                .collect()
        };
        let (only_a, only_b) = (only(sa, sb), only(sb, sa));
        if !only_a.is_empty() || !only_b.is_empty() {
            warnings.push(CompareWarning::SizesUnmatched {
                experiment: experiment.clone(),
                only_a,
                only_b,
            });
        }
        for (size, la) in &sa.points {
            let Some(lb) = sb.points.get(size) else {
                continue;
            };
            let t = compare_launches(&launches(la), &launches(lb), outliers);
            if t.basis == Basis::LaunchMedians {
                fewest_launches = Some(
                    fewest_launches
                        .unwrap_or(usize::MAX)
                        .min(la.len().min(lb.len())),
                );
            } else {
                single_launch = true;
            }
            let p_value = t.test.map(|t| t.p_value);
            rows.push(CompareRow {
                experiment: experiment.clone(),
                metric: sa.metric.clone(),
                size: *size,
                median_a: t.median_a,
                median_b: t.median_b,
                ratio: t.ratio,
                p_value,
                stars: p_value.map_or("", stars),
                basis: t.basis,
                w: t.test.map(|t| t.w),
                method: t.test.map(|t| t.method),
                n_a: t.n_a,
                n_b: t.n_b,
                launches_a: la.len(),
                launches_b: lb.len(),
            });
        }
    }
    if let Some(k) = fewest_launches.filter(|&k| k < 4) {
        warnings.push(CompareWarning::TooFewLaunches { launches: k });
    }
    if single_launch {
        warnings.push(CompareWarning::SingleLaunch);
    }
    Comparison {
        a: a.source.display().to_string(),
        b: b.source.display().to_string(),
        outliers,
        rows,
        warnings,
    }
}

/// The unit a metric's name carries (`half_rtt_us` -> `us`).
fn unit(metric: &str) -> &str {
    metric
        .rsplit('_')
        .next()
        .filter(|u| u.len() <= 3)
        .unwrap_or("")
}

/// The human table: one row per experiment and size.
pub fn table(c: &Comparison) -> String {
    let unit = c.rows.first().map_or("", |r| unit(&r.metric));
    let mut t = Table::new([
        "experiment".to_string(),
        "size [B]".to_string(),
        format!("A median [{unit}]"),
        format!("B median [{unit}]"),
        "B/A".to_string(),
        "p".to_string(),
        "".to_string(),
        "tested".to_string(),
    ]);
    for r in &c.rows {
        t.row([
            r.experiment.clone(),
            r.size.map_or("-".into(), |s| s.to_string()),
            format!("{:.3}", r.median_a),
            format!("{:.3}", r.median_b),
            r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
            r.p_value.map_or("-".into(), format_p),
            r.stars.to_string(),
            match r.basis {
                Basis::LaunchMedians => format!("launches {}:{}", r.n_a, r.n_b),
                Basis::Repetitions => format!("reps {}:{}", r.n_a, r.n_b),
                Basis::None => "-".into(),
            },
        ]);
    }
    let mut out = format!("A: {}\nB: {}\n", c.a, c.b);
    out += &t.render();
    out += "* p <= 0.05, ** p <= 0.01, *** p <= 0.001 (two-sided Wilcoxon rank-sum test)\n";
    out
}

/// A p-value in 4 significant digits, `< 1e-16` below double precision's reach.
fn format_p(p: f64) -> String {
    if p < 1e-16 {
        "<1e-16".into()
    } else if p < 1e-3 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

/// An SVG plot of `median_b / median_a` over the size (log 2 axis), one series per
/// experiment; filled markers with their stars where `p <= 0.05`, hollow ones
/// elsewhere, and a line at ratio 1.
///
/// # Errors
/// When no row has a size and a ratio, or plotters fails.
pub fn plot_svg(c: &Comparison, title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    // Per experiment: (size, ratio, p-value, stars).
    type Dot<'a> = (f64, f64, Option<f64>, &'a str);
    let mut by_experiment: BTreeMap<&str, Vec<Dot>> = BTreeMap::new();
    for r in &c.rows {
        if let (Some(size), Some(ratio)) = (r.size, r.ratio) {
            by_experiment.entry(&r.experiment).or_default().push((
                size.max(1) as f64,
                ratio,
                r.p_value,
                r.stars,
            ));
        }
    }
    let points: Vec<&Dot> = by_experiment.values().flatten().collect();
    if points.is_empty() {
        return Err("nothing to plot: no compared row has a message size".into());
    }
    let x = svg::Axis::bytes(points.iter().map(|p| p.0));
    let y = svg::Axis::linear(points.iter().map(|p| p.1).chain([1.0]), false);
    let lift = (y.view().end - y.view().start) * 0.02;
    let rows = by_experiment.len() + 1;
    svg::document(svg::page(rows), |root| {
        let e = svg::error;
        let mut chart = svg::chart(
            root,
            title,
            (x, "message size [bytes]"),
            (y, "median B / median A"),
            rows,
        )?;
        svg::horizontal(&mut chart, 1.0, None)?;
        for (i, (name, pts)) in by_experiment.iter().enumerate() {
            let colour = svg::PALETTE[i % svg::PALETTE.len()];
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    colour.stroke_width(1),
                ))
                .map_err(e)?
                .label(name.to_string())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, colour.filled()));
            chart
                .draw_series(pts.iter().map(|p| {
                    let significant = p.2.is_some_and(|p| p <= 0.05);
                    let style = if significant {
                        colour.filled()
                    } else {
                        colour.stroke_width(1)
                    };
                    Circle::new((p.0, p.1), 4, style)
                }))
                .map_err(e)?;
            chart
                .draw_series(pts.iter().filter(|p| !p.3.is_empty()).map(|p| {
                    Text::new(
                        p.3.to_string(),
                        (p.0, p.1 + lift),
                        ("sans-serif", svg::FONT_PX).into_font().color(&colour),
                    )
                }))
                .map_err(e)?;
        }
        svg::key(
            &mut chart,
            "filled: p <= 0.05 (stars: * 0.05, ** 0.01, *** 0.001); hollow: not significant",
        )?;
        svg::legend(&mut chart)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A result set of one experiment: per size, per launch (median, samples).
    /// Per launch: its median and repetitions.
    type Launches = Vec<(f64, Vec<f64>)>;

    fn set(name: &str, points: &[(u64, Launches)]) -> ResultSet {
        let mut series = Series {
            metric: "half_rtt_us".into(),
            points: BTreeMap::new(),
        };
        for (size, launches) in points {
            let m = series.points.entry(Some(*size)).or_default();
            for (i, (median, samples)) in launches.iter().enumerate() {
                m.insert(
                    i,
                    LaunchPoint {
                        median: *median,
                        samples: samples.clone(),
                    },
                );
            }
        }
        ResultSet {
            source: PathBuf::from(format!("{name}.json")),
            series: [(name.to_string(), series)].into(),
            meta: Vec::new(),
        }
    }

    #[test]
    fn launch_medians_are_tested_when_both_sides_have_launches() {
        // Five launches each, B's medians all above A's: exact W = 0, p = 2/252.
        let a = set(
            "x",
            &[(8, (0..5).map(|i| (10.0 + i as f64 * 0.1, vec![])).collect())],
        );
        let b = set(
            "x",
            &[(8, (0..5).map(|i| (12.0 + i as f64 * 0.1, vec![])).collect())],
        );
        let c = compare(&a, &b, Outliers::Tukey);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let r = &c.rows[0];
        assert_eq!((r.experiment.as_str(), r.size), ("x", Some(8)));
        assert_eq!((r.median_a, r.median_b), (10.2, 12.2));
        assert!((r.ratio.unwrap() - 12.2 / 10.2).abs() < 1e-12);
        assert_eq!(
            (r.basis, r.n_a, r.n_b, r.w),
            (Basis::LaunchMedians, 5, 5, Some(0.0))
        );
        assert!((r.p_value.unwrap() - 2.0 / 252.0).abs() < 1e-12);
        assert_eq!(r.stars, "**");
        let t = table(&c);
        assert!(t.contains("launches 5:5") && t.contains("**"), "{t}");
    }

    #[test]
    fn a_single_launch_tests_its_repetitions_after_the_filter() {
        // One launch each with repetitions; A has one far outlier that Tukey drops.
        let mut ra: Vec<f64> = (0..20).map(|i| 10.0 + i as f64 * 0.01).collect();
        ra.push(1000.0);
        let rb: Vec<f64> = (0..20).map(|i| 10.1 + i as f64 * 0.01).collect();
        let a = set("tcp", &[(1, vec![(10.1, ra)])]);
        let b = set("udp", &[(1, vec![(10.195, rb)])]);
        let c = compare(&a, &b, Outliers::Tukey);
        let r = &c.rows[0];
        assert_eq!(r.experiment, "tcp vs udp");
        assert_eq!((r.basis, r.n_a, r.n_b), (Basis::Repetitions, 20, 20));
        // Filtered A: 10.00 .. 10.19, median 10.095.
        assert!((r.median_a - 10.095).abs() < 1e-9, "{}", r.median_a);
        assert!(r.p_value.unwrap() < 0.01);
        assert_eq!(c.warnings, vec![CompareWarning::SingleLaunch]);
        let kept = compare(&a, &b, Outliers::Keep);
        assert_eq!(kept.rows[0].n_a, 21);
    }

    #[test]
    fn nothing_to_test_and_unmatched_parts_are_reported() {
        let a = set("x", &[(1, vec![(5.0, vec![])]), (2, vec![(6.0, vec![])])]);
        let b = set("x", &[(1, vec![(5.5, vec![])]), (4, vec![(7.0, vec![])])]);
        let c = compare(&a, &b, Outliers::Tukey);
        assert_eq!(c.rows.len(), 1);
        assert_eq!(
            (c.rows[0].basis, c.rows[0].p_value, c.rows[0].stars),
            (Basis::None, None, "")
        );
        assert!(c.warnings.contains(&CompareWarning::SizesUnmatched {
            experiment: "x".into(),
            only_a: vec![2],
            only_b: vec![4],
        }));
        // Several experiments: matched by name.
        let mut two = set("x", &[(1, vec![(5.0, vec![])])]);
        two.series.insert(
            "y".into(),
            set("y", &[(1, vec![(1.0, vec![])])]).series["y"].clone(),
        );
        let c = compare(&two, &b, Outliers::Keep);
        assert_eq!(c.rows.len(), 1);
        assert_eq!(
            c.warnings[0].to_string(),
            "experiment `y` is only in A; not compared"
        );
        // Two launches a side: tested, but a warning says it cannot be significant.
        let a = set("x", &[(1, vec![(1.0, vec![]), (1.1, vec![])])]);
        let b = set("x", &[(1, vec![(2.0, vec![]), (2.1, vec![])])]);
        let c = compare(&a, &b, Outliers::Keep);
        assert!((c.rows[0].p_value.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            c.warnings,
            vec![CompareWarning::TooFewLaunches { launches: 2 }]
        );
    }

    #[test]
    fn the_plot_marks_significance() {
        let a = set(
            "x",
            &[
                (1, (0..5).map(|i| (10.0 + i as f64, vec![])).collect()),
                (1024, (0..5).map(|i| (20.0 + i as f64, vec![])).collect()),
            ],
        );
        let b = set(
            "x",
            &[
                (1, (0..5).map(|i| (30.0 + i as f64, vec![])).collect()),
                (1024, (0..5).map(|i| (20.5 + i as f64, vec![])).collect()),
            ],
        );
        let c = compare(&a, &b, Outliers::Keep);
        let svg = plot_svg(&c, "x").unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("**") && svg.contains("1K"),
            "labels"
        );
        let none = Comparison { rows: vec![], ..c };
        assert!(plot_svg(&none, "x")
            .unwrap_err()
            .contains("nothing to plot"));
        assert_eq!(svg::size_label(65536.0), "64K");
        assert_eq!(format_p(0.25441), "0.2544");
        assert_eq!(format_p(1.2e-4), "1.20e-4");
    }
}
