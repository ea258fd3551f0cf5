//! `ngauge late`: the delay overlap benefit per size and delay, as a table, a
//! document and a plot of `b` over the delay.

use super::svg;
use super::table::Table;
use super::warning::{SetupWarning, Warned};
use super::Meta;
use crate::patterns::late::{CallMode, LateTimes};
use serde::Serialize;

/// One measurement point: a size, a call mode and a delay, against the undelayed
/// calls of the same run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LateRow {
    /// Bytes per rank.
    pub size: usize,
    /// Blocking, or nonblocking followed by a wait.
    pub mode: CallMode,
    /// The delay `d` of the late ranks, us.
    pub delay_us: f64,
    /// The ranks that entered late.
    pub delayed_ranks: Vec<usize>,
    /// The median effective delay, us: per call, the earliest delayed start minus
    /// the latest undelayed start (global time), over the calls that started and
    /// ended in their windows, kept or not (`null`: none did).
    pub effective_delay_us: Option<f64>,
    /// Whether both this delay and the undelayed calls kept at least half the
    /// wanted valid calls; if not, `benefit` and `benefit_median` are `null` and an
    /// `undecided` warning says why.
    pub decided: bool,
    /// `t_0`: the fastest undelayed call, global time (max end - min start), us.
    pub t0_us: Option<f64>,
    /// `t_d`: the fastest delayed call, us.
    pub td_us: Option<f64>,
    /// The effective delay of the fastest delayed call, us: the `d` of `benefit`
    /// (eq. 5 takes the delay measured, not the one asked for; 0 for the delay
    /// 0, which repeats the baseline).
    pub benefit_delay_us: Option<f64>,
    /// `b = (t0 + d - td) / td` from the minima (Niethammer et al., eq. 5), `d`
    /// being `benefit_delay_us`.
    pub benefit: Option<f64>,
    /// The median undelayed call, us.
    pub t0_median_us: Option<f64>,
    /// The median delayed call, us.
    pub td_median_us: Option<f64>,
    /// The median effective delay of the valid delayed calls, us: the `d` of
    /// `benefit_median` (0 for the delay 0, which repeats the baseline).
    pub benefit_delay_median_us: Option<f64>,
    /// `b` from the medians, `d` being `benefit_delay_median_us`.
    pub benefit_median: Option<f64>,
    /// Rounds of `reps` calls run: invalid calls are repeated in further
    /// rounds, so `valid` and `invalid` count calls over all of them.
    pub rounds: usize,
    /// Valid delayed calls.
    pub valid: usize,
    /// Delayed calls that started late, overran their window or missed the delay.
    pub invalid: usize,
    /// Of `invalid`, the calls whose effective delay was off `d` by more than a
    /// tenth of `d` (at least 10 us, the clock synchronization's error).
    pub missed_delay: usize,
}

/// The rows of one size and mode.
pub fn rows(size: usize, mode: CallMode, times: &LateTimes) -> Vec<LateRow> {
    let us = |ns: Option<f64>| ns.map(|v| v / 1e3);
    times
        .points
        .iter()
        .zip(times.benefits())
        .map(|(p, b)| LateRow {
            size,
            mode,
            delay_us: p.delay_ns / 1e3,
            delayed_ranks: times.delayed.clone(),
            effective_delay_us: us(p.effective_delay_median_ns()),
            decided: times.baseline.decided() && p.decided(),
            t0_us: us(times.baseline.min_ns()),
            td_us: us(p.min_ns()),
            benefit_delay_us: b.map(|b| b.effective_delay_min_ns / 1e3),
            benefit: b.map(|b| b.benefit_min),
            t0_median_us: us(times.baseline.median_ns()),
            td_median_us: us(p.median_ns()),
            benefit_delay_median_us: b.map(|b| b.effective_delay_median_ns / 1e3),
            benefit_median: b.map(|b| b.benefit_median),
            rounds: times.rounds,
            valid: p.valid,
            invalid: p.invalid,
            missed_delay: p.missed_delay,
        })
        .collect()
}

/// Noise injected on one rank while it measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Injected {
    /// The rank.
    pub rank: usize,
    /// Time between the starts of two detours, us.
    pub period_us: f64,
    /// Length of each detour, us.
    pub duration_us: f64,
}

/// What `late` finds worth a warning.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LateWarning {
    /// Fewer valid calls than asked for (calls started late, overran their window or
    /// missed the delay in every round).
    #[error(
        "size {size} B, {mode}, delay {delay_us} us: only {valid} of {wanted} calls were valid \
         (the others started late, overran their window or missed the delay)"
    )]
    FewValidCalls {
        /// The size.
        size: usize,
        /// The call mode.
        mode: CallMode,
        /// The delay, us (0: the undelayed calls).
        delay_us: f64,
        /// Valid calls.
        valid: usize,
        /// Asked for.
        wanted: usize,
    },
    /// No `b` for this delay: it or the undelayed calls kept fewer than half the
    /// wanted valid calls (most started late, overran, or missed the delay).
    #[error(
        "size {size} B, {mode}, delay {delay_us} us: undecided, no b (valid calls: {valid} \
         delayed, {valid_undelayed} undelayed, of {wanted}{})",
        .effective_delay_us.map_or(String::new(), |e| format!("; median effective delay {e:.1} us"))
    )]
    Undecided {
        /// The size.
        size: usize,
        /// The call mode.
        mode: CallMode,
        /// The delay, us.
        delay_us: f64,
        /// Its median effective delay, us (`null`: no call was timed).
        effective_delay_us: Option<f64>,
        /// Valid delayed calls.
        valid: usize,
        /// Valid undelayed calls.
        valid_undelayed: usize,
        /// Asked for.
        wanted: usize,
    },
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// `ngauge late --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LateDoc {
    /// The collective, its implementation, the transport, the ranks.
    #[serde(flatten)]
    pub run: super::coll::WindowedRun,
    /// Noise injected during the measurement, if any.
    pub inject: Option<Injected>,
    /// Every size, mode and delay.
    pub results: Vec<LateRow>,
    /// The clock synchronization of the window starts, per rank.
    pub sync: super::effort::ClockSync,
    /// What threatens the figures.
    pub warnings: Vec<Warned<LateWarning>>,
    /// How the result came about.
    pub meta: Meta,
}

/// The warnings one size and mode call for: fewer valid calls than `wanted`,
/// undelayed (reported as delay 0) or delayed, and every undecided delay.
pub fn warnings(size: usize, mode: CallMode, times: &LateTimes, wanted: usize) -> Vec<LateWarning> {
    let undecided = times
        .points
        .iter()
        .filter(|p| !(times.baseline.decided() && p.decided()))
        .map(|p| LateWarning::Undecided {
            size,
            mode,
            delay_us: p.delay_ns / 1e3,
            effective_delay_us: p.effective_delay_median_ns().map(|v| v / 1e3),
            valid: p.valid,
            valid_undelayed: times.baseline.valid,
            wanted,
        });
    std::iter::once(&times.baseline)
        .chain(times.points.iter().filter(|p| p.delay_ns > 0.0))
        .filter(|p| p.valid < wanted)
        .map(|p| LateWarning::FewValidCalls {
            size,
            mode,
            delay_us: p.delay_ns / 1e3,
            valid: p.valid,
            wanted,
        })
        .chain(undecided)
        .collect()
}

impl super::Document for LateDoc {
    type Warning = LateWarning;

    /// The human table.
    fn render(&self) -> String {
        let mut out = format!(
            "late arrivals: {} over {} ({}), {} ranks, delayed ranks {}\n\
             t: global time max(end) - min(start); b = (t0 + d - td) / td (Niethammer et al., \
             eq. 5), from the minima and from the medians\n\
             d eff: median effective delay (first delayed start - last undelayed start); a call \
             off d by more than max(d/10, 10 us) is invalid; undecided: under half the calls valid\n",
            self.run.implementation,
            self.run.transport,
            self.run.wait,
            self.run.np,
            delayed(&self.results),
        );
        if let Some(i) = &self.inject {
            out += &format!(
                "noise injected on rank {}: {} us every {} us\n",
                i.rank, i.duration_us, i.period_us
            );
        }
        out.push('\n');
        out += &table(&self.results);
        out
    }

    fn warnings(&self) -> Vec<(String, &LateWarning)> {
        super::document::unwarned(&self.warnings)
    }

    /// `b` over the delay, one curve per size and mode.
    fn plot_svg(&self) -> Option<Result<String, String>> {
        let title = format!(
            "delay overlap benefit: {}, {} ranks, delayed ranks {}",
            self.run.implementation,
            self.run.np,
            delayed(&self.results)
        );
        Some(plot_benefit_svg(&curves(&self.results), &title))
    }
}

/// The table of `results`: per size, mode and delay the times, `b`, the rounds
/// run and the valid calls over them (which can exceed `--reps`).
fn table(results: &[LateRow]) -> String {
    let mut table = Table::new([
        "size [B]",
        "mode",
        "delay [us]",
        "d eff [us]",
        "t0 min [us]",
        "td min [us]",
        "b min",
        "t0 median [us]",
        "td median [us]",
        "b median",
        "rounds",
        "valid",
    ]);
    let f = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let b = |r: &LateRow, v: Option<f64>| {
        if r.decided {
            f(v, 3)
        } else {
            "undecided".to_string()
        }
    };
    for r in results {
        table.row([
            r.size.to_string(),
            r.mode.to_string(),
            format!("{}", r.delay_us),
            f(r.effective_delay_us, 1),
            f(r.t0_us, 2),
            f(r.td_us, 2),
            b(r, r.benefit),
            f(r.t0_median_us, 2),
            f(r.td_median_us, 2),
            b(r, r.benefit_median),
            r.rounds.to_string(),
            format!("{}/{}", r.valid, r.valid + r.invalid),
        ]);
    }
    table.render()
}

/// The delayed ranks of `rows` (`0,3`).
fn delayed(rows: &[LateRow]) -> String {
    let ranks = rows
        .first()
        .map(|r| r.delayed_ranks.clone())
        .unwrap_or_default();
    crate::patterns::late::DelayedRanks::List(ranks).to_string()
}

/// The plot's curves: `b` (from the minima) over the delay, one per size and mode.
pub fn curves(rows: &[LateRow]) -> Vec<BenefitCurve> {
    let mut out: Vec<BenefitCurve> = Vec::new();
    for r in rows {
        let label = format!("{} B, {}", r.size, r.mode);
        let point = (r.delay_us, r.benefit.unwrap_or(f64::NAN));
        match out.iter_mut().find(|c| c.label == label) {
            Some(c) => c.points.push(point),
            None => out.push(BenefitCurve {
                label,
                points: vec![point],
            }),
        }
    }
    for c in &mut out {
        c.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// One curve of the plot: `b` over the delay for one size.
pub use super::svg::Curve as BenefitCurve;

/// An SVG plot of the delay overlap benefit `b` (eq. 5) over the delay, one curve
/// per size, with the reference of the paper's reading: `b = 0` (the delay adds to
/// the call) drawn as a line.
pub fn plot_benefit_svg(curves: &[BenefitCurve], title: &str) -> Result<String, String> {
    let finite = || {
        curves
            .iter()
            .flat_map(|c| c.points.iter())
            .filter(|p| p.1.is_finite())
    };
    let x = svg::Axis::linear(finite().map(|p| p.0), true);
    let y = svg::Axis::linear(finite().map(|p| p.1), true);
    let rows = curves.len() + 1;
    svg::document(svg::page(rows), |root| {
        let mut chart = svg::chart(
            root,
            title,
            (x, "delay d [us]"),
            (y, "delay overlap benefit b = (t0 + d - td) / td"),
            rows,
        )?;
        svg::horizontal(
            &mut chart,
            0.0,
            Some("b = 0: the delay adds to the call".into()),
        )?;
        for (i, curve) in curves.iter().enumerate() {
            let pts = curve.points.iter().copied().filter(|p| p.1.is_finite());
            svg::series(&mut chart, i, curve.label.clone(), pts.collect(), true)?;
        }
        svg::legend(&mut chart)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::late::LatePoint;

    /// Issue 37: the window scheme repeats invalid calls in further rounds, so
    /// `valid` can exceed `--reps`; the table shows the rounds it counts over.
    #[test]
    fn issue_37_valid_calls_are_counted_over_the_rounds_shown() {
        let point = |delay_ns: f64, valid: usize, invalid: usize| LatePoint {
            delay_ns,
            valid,
            invalid,
            missed_delay: 0,
            runtimes_ns: vec![60_000.0; valid],
            effective_delays_ns: vec![delay_ns; valid],
            valid_effective_delays_ns: vec![delay_ns; valid],
            wanted: 5,
        };
        // --reps 5 over 3 rounds: 12 of 15 delayed calls valid.
        let times = LateTimes {
            baseline: point(0.0, 14, 1),
            points: vec![point(50_000.0, 12, 3)],
            delayed: vec![0],
            window_ns: 1e6,
            rounds: 3,
        };
        let r = rows(8, CallMode::Blocking, &times);
        assert_eq!((r[0].rounds, r[0].valid, r[0].invalid), (3, 12, 3));
        let t = table(&r);
        let header: Vec<&str> = t.lines().next().unwrap().split("  ").collect();
        let header: Vec<&str> = header
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
            .collect();
        assert_eq!(header[header.len() - 2..], ["rounds", "valid"], "{t}");
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[row.len() - 2..], ["3", "12/15"], "{t}");
    }

    #[test]
    fn plot_is_an_svg_with_a_curve_per_size() {
        let curves = vec![
            BenefitCurve {
                label: "8 B".into(),
                points: vec![(0.0, 0.0), (50.0, 0.4), (500.0, -0.1)],
            },
            BenefitCurve {
                label: "64 KiB".into(),
                points: vec![(0.0, 0.0), (50.0, f64::NAN), (500.0, 0.05)],
            },
        ];
        let svg = plot_benefit_svg(&curves, "allreduce").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("8 B") && svg.contains("64 KiB") && svg.contains("b = 0"));
    }
}
