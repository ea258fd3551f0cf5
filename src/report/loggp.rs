//! Exporters of a LogGP sweep (`ngauge loggp`): each pair's part of the JSON
//! document ([`PairDoc`], built from a [`PairAnalysis`]; the whole is
//! [`super::loggp_doc::LoggpDoc`]), the human table per protocol range,
//! Netgauge's column file, the parameter file, and an SVG plot. All are pure
//! functions of one [`PairDoc`].

use super::warning::{warned, SetupWarning, Warned};
use crate::job::TransportName;
use crate::model::confirm::{ChangeKind, Undecided, Verdict};
use crate::model::loggp::{Assessment, ModelWarning, RangeParams};
use crate::model::params::ParamsFile;
use crate::model::refine::Change;
pub use crate::model::sensitivity::ChangesVerdict;
use crate::model::sensitivity::{self, Stretch};
use crate::patterns::loggp::{disturbed_fraction, Point, DISTURBED_FACTOR};
use crate::report::svg;
use crate::report::table::{significant, Table};
use crate::stats::Summary;
use crate::units::Nanos;
use ngauge_transport::WaitMode;
use serde::Serialize;
use std::collections::BTreeMap;

/// One pair's measurements and the parameters derived from them.
#[derive(Clone, Debug)]
pub struct PairAnalysis {
    /// Client rank.
    pub client: usize,
    /// Server rank.
    pub server: usize,
    /// Measured points, ascending size.
    pub points: Vec<Point>,
    /// Ranges and parameters.
    pub assessment: Assessment,
    /// The protocol changes with their verdicts, rejected candidates included
    /// (the ranges are split at the confirmed and unconfirmed ones).
    pub changes: Vec<Change>,
    /// The boundaries re-measured for doubt (none: not asked for).
    pub doubt: Option<DoubtRun>,
}

/// What re-measuring the doubtful boundaries of one pair did
/// ([`crate::model::refine::Plan::doubt`]).
#[derive(Clone, Debug, Default)]
pub struct DoubtRun {
    /// Every boundary re-measured and its outcome (the confirmed ones are among
    /// the pair's changes too).
    pub changes: Vec<Change>,
    /// Passes (rounds) measured.
    pub passes: usize,
    /// Time spent.
    pub time: Nanos,
    /// Time allowed (`--doubt-budget`, or less: see `DoubtDoc::budget_s`).
    pub budget: Nanos,
}

/// The re-measurement of the doubtful boundaries of one pair, as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DoubtDoc {
    /// Boundaries measured again because a stretch's floor was above its
    /// target there.
    pub boundaries: usize,
    /// Of those, the ones fresh passes confirmed as a change (among `changes`).
    pub confirmed: usize,
    /// The ones whose passes now bound the step below the target.
    pub excluded: usize,
    /// The ones still above the target (the time ran out, or the passes
    /// scatter too much).
    pub undecided: usize,
    /// Interleaved passes measured for them.
    pub passes: usize,
    /// Time spent, s.
    pub time_s: f64,
    /// Time allowed, s: `--doubt-budget` when given; otherwise 3 s, or the
    /// time the run took before when shorter.
    pub budget_s: f64,
    /// Every boundary measured again, with its verdict and the passes' steps
    /// per series (a confirmed one is among the pair's `changes` too).
    pub remeasured: Vec<Change>,
}

impl PairAnalysis {
    /// An analysis whose changes are the detector's, not measured again.
    pub fn unconfirmed(
        client: usize,
        server: usize,
        points: Vec<Point>,
        assessment: Assessment,
    ) -> PairAnalysis {
        let sizes: Vec<u64> = points.iter().map(|p| p.size).collect();
        let changes = assessment
            .changes
            .iter()
            .zip(&assessment.changes_shown_by)
            .map(|(&c, by)| Change::unconfirmed(&sizes, c, by.clone()))
            .collect();
        PairAnalysis {
            client,
            server,
            points,
            assessment,
            changes,
            doubt: None,
        }
    }

    /// The changes reported (all but the rejected ones).
    pub fn reported(&self) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(|c| c.verdict != Verdict::Rejected)
    }
}

/// The spread of the repetitions behind a point's medians.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Spread {
    /// `PRTT(1,0,s)`, us.
    pub prtt_1_0: Summary,
    /// `PRTT(n,0,s)`, us.
    pub prtt_n_0: Summary,
    /// `PRTT(n,d,s)`, us.
    pub prtt_n_d: Summary,
    /// `o_r(s)`, us.
    pub or: Summary,
    /// The send call with a late receiver, us.
    pub send_late: Summary,
}

/// One size in the JSON document.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PointRecord {
    /// Message size, bytes.
    pub size: u64,
    /// Median `PRTT(1,0,s)`, us.
    pub prtt_1_0_us: f64,
    /// Median `PRTT(n,0,s)`, us.
    pub prtt_n_0_us: f64,
    /// Median `PRTT(n,d,s)`, us.
    pub prtt_n_d_us: f64,
    /// Median `PRTT(2,0,s)` when `--dg 2rtt`, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prtt_2_0_us: Option<f64>,
    /// `o_s(s)` from eq. (4), us.
    pub os_us: f64,
    /// Median `o_r(s)`, us.
    pub or_us: f64,
    /// Median send call while the receiver is late (the protocol probe: `o_s` for
    /// an eager send, about the receiver's lateness for a rendezvous send), us.
    pub send_late_us: f64,
    /// `(PRTT(n,0,s) - PRTT(1,0,s)) / (n-1)` (eq. 5), us.
    pub gap_us: f64,
    /// The delay `d` used, us.
    pub d_us: f64,
    /// Median delay actually spent after each send of `PRTT(n,d,s)` (`d` plus a
    /// timer read and the spin's overshoot), us: what eq. (4) subtracts.
    pub d_spent_us: f64,
    /// Weight of this point in its range's robust fit, `(0, 1]`.
    pub fit_weight: f64,
    /// How often the size was measured, over all passes (more than `passes` when
    /// the host disturbed most repetitions of a measurement).
    pub attempts: usize,
    /// Passes whose repetitions were pooled into this point (`--passes`).
    pub passes: usize,
    /// Min, median, mean, p99, max of the repetitions.
    pub spread_us: Spread,
    /// Transport counters accumulated while this size was measured (every
    /// attempt and pass), summed over the pair's two ranks (UDP:
    /// `lost_datagrams`, `duplicated_datagrams`, `retransmissions`... as in
    /// `pingpong`; empty for transports that count nothing).
    pub counters: BTreeMap<String, u64>,
    /// Every timed repetition behind the medians, when asked for (`--samples`;
    /// `ngauge run` asks), for `ngauge compare` and the statistics across launches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<PointSamples>,
}

/// The timed repetitions of one point, us, in the order measured (pooled over
/// the passes).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PointSamples {
    /// `PRTT(1,0,s)`.
    pub prtt_1_0_us: Vec<f64>,
    /// `PRTT(n,0,s)`.
    pub prtt_n_0_us: Vec<f64>,
    /// `PRTT(n,d,s)`.
    pub prtt_n_d_us: Vec<f64>,
    /// `o_r(s)`, timed at the server.
    pub or_us: Vec<f64>,
}

/// A point that counted little in the robust fit.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LowWeight {
    /// Message size, bytes.
    pub size: u64,
    /// Its final weight.
    pub weight: f64,
}

/// The part of the JSON document that describes one pair.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PairDoc {
    /// Client rank.
    pub client: usize,
    /// Server rank.
    pub server: usize,
    /// Every size.
    pub points: Vec<PointRecord>,
    /// Parameters per protocol range.
    pub ranges: Vec<RangeParams>,
    /// The protocol changes: confirmed (the ranges start there), undecided (not
    /// split at), or unconfirmed (confirmation off; split at), ascending.
    pub changes: Vec<Change>,
    /// Whether every candidate change was decided and every stretch of
    /// `sensitivity` excludes steps above its target.
    pub changes_verdict: ChangesVerdict,
    /// Per stretch of sizes between the reported changes: the largest step of
    /// `PRTT(1,0,s)` the run's data leave possible, against the target
    /// (`--decide-target`).
    pub sensitivity: Vec<Stretch>,
    /// The boundaries measured again where a stretch's floor was above its
    /// target (`--doubt-budget`; absent when off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doubt: Option<DoubtDoc>,
    /// Sweep sizes where the detector proposed a change that fresh passes
    /// rejected, bytes.
    pub rejected_changes: Vec<u64>,
    /// Points whose robust weight ended low.
    pub low_weight_points: Vec<LowWeight>,
    /// Validity warnings of the model, then of the measurement.
    pub warnings: Vec<Warned<LoggpWarning>>,
}

/// What `loggp` finds worth a warning about one pair.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoggpWarning {
    /// The default sweep was cut at a transport's message limit.
    #[error(
        "the default sweep ends at {last_bytes} bytes, the largest of its sizes within the \
         {limit_bytes}-byte message limit"
    )]
    SweepCut {
        /// The sweep's last size now, bytes.
        last_bytes: u64,
        /// The smallest message limit of the transports, bytes.
        limit_bytes: usize,
    },
    /// Many timed repetitions were disturbed by the host.
    #[error(
        "{:.0}% of the timed repetitions took more than {factor}x their median: other processes \
         competed for the cores; medians are robust to a few such repetitions, not to many",
        .fraction * 100.0
    )]
    Disturbed {
        /// Fraction of the pair's timed repetitions slower than `factor` times
        /// their median.
        fraction: f64,
        /// [`DISTURBED_FACTOR`].
        factor: f64,
        /// How the transport waited.
        wait: WaitMode,
    },
    /// A candidate protocol change could not be decided.
    #[error(
        "cannot decide whether the protocol changes between {last_old_bytes} and {bytes} bytes: \
         {}",
        why_undecided(*.reason)
    )]
    Undecided {
        /// Last sweep size of the old range, bytes.
        last_old_bytes: u64,
        /// First sweep size of the new range, bytes.
        bytes: u64,
        /// Why.
        reason: Undecided,
    },
    /// A stretch of sizes leaves a step above the target possible.
    #[error(
        "cannot tell whether the protocol changes between {from_bytes} and {to_bytes} bytes: \
         a step of up to {step_floor_us:.3} us in PRTT(1,0,s) (at {at_bytes} bytes) fits this \
         run's data, above the target of {target_us:.3} us (--decide-target); more --reps or \
         a longer --doubt-budget narrow it"
    )]
    Insensitive {
        /// First size of the stretch, bytes.
        from_bytes: u64,
        /// Last size of the stretch, bytes.
        to_bytes: u64,
        /// The largest step the data leave possible, us.
        step_floor_us: f64,
        /// Where the bound is furthest above its target, bytes.
        at_bytes: u64,
        /// The target there, us.
        target_us: f64,
    },
    /// A warning of the fit.
    #[serde(untagged)]
    #[error("{0}")]
    Model(ModelWarning),
    /// What threatens any command's figures alike (job, binding, clock sync).
    #[serde(untagged)]
    #[error("{0}")]
    Setup(SetupWarning),
}

/// Warn when more than this fraction of repetitions was disturbed by the host.
pub const DISTURBED_WARN: f64 = 0.10;

impl LoggpWarning {
    /// The warnings about the undecided changes of `changes`.
    pub fn undecided(changes: &[Change]) -> impl Iterator<Item = Self> + '_ {
        changes
            .iter()
            .filter(|c| c.verdict == Verdict::Undecided)
            .map(|c| LoggpWarning::Undecided {
                last_old_bytes: c.last_old_bytes,
                bytes: c.bytes,
                reason: c.undecided.unwrap_or(Undecided::Spread),
            })
    }

    /// The warning about `points`, measured waiting by `wait`, when more than
    /// [`DISTURBED_WARN`] of their repetitions were disturbed.
    pub fn disturbed(points: &[Point], wait: WaitMode) -> Option<Self> {
        let fraction = disturbed_fraction(points);
        (fraction > DISTURBED_WARN).then_some(LoggpWarning::Disturbed {
            fraction,
            factor: DISTURBED_FACTOR,
            wait,
        })
    }
}

/// Why a change is undecided, in words.
fn why_undecided(reason: Undecided) -> &'static str {
    match reason {
        Undecided::Disturbed => "the host disturbed too many confirmation passes",
        Undecided::Spread => "the confirmation passes disagree",
        Undecided::Unfinished => {
            "the time ran out before the passes were enough to judge (--doubt-budget gives \
                         the doubt rounds more)"
        }
        Undecided::Bent => {
            "the curve bends beside them, a change may lie one sweep size off (a \
                         finer sweep step tells)"
        }
        Undecided::Apart => {
            "the time per byte changes there, but not as two lines of the ranges \
                         beside them that meet at the boundary"
        }
        Undecided::BelowFloor => {
            "the time per byte changes there, but over the sizes measured by less \
                         than a protocol's smallest step (a slope-only change this faint needs \
                         wider sides to tell from a bump of the curve)"
        }
        Undecided::Falling => {
            "the time per byte changes there, but on one side the time falls as \
                         messages grow, which no protocol's cost per byte does"
        }
        Undecided::Unplaced => {
            "a re-measurement for doubt saw a step there, but could not place it at \
                         one byte, as a switch would be (a disturbance that comes and goes \
                         makes such steps; more repetitions or a quieter host tell)"
        }
        Undecided::Split => {
            "the bisection read a level between the two protocols' and went on as two \
                         parts, and this part was not placed at one byte (a second switch, or \
                         a disturbance that held the midpoint between the levels)"
        }
    }
}

/// One record of `--output FILE.jsonl`: a point as soon as it is measured.
#[derive(Clone, Debug, Serialize)]
pub struct StreamRecord<'a> {
    /// Index of the pair (0: ranks 0 and 1).
    pub pair: usize,
    /// The pass (sweep) it belongs to, from 0.
    pub pass: usize,
    /// The point.
    pub point: &'a Point,
    /// The transport, when several are measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportName>,
}

/// The sensitivity statements of one pair ([`sensitivity::stretches`]) over its
/// sweep's medians and its ranges, tightened by the fresh passes of its rejected
/// candidates and of its boundaries re-measured for doubt; `target` is a
/// fraction of `PRTT(1,0,s)`.
pub fn stretches(pa: &PairAnalysis, target: f64) -> Vec<Stretch> {
    let doubts = pa.doubt.iter().flat_map(|d| d.changes.iter());
    let measured: Vec<Change> = pa.changes.iter().chain(doubts).cloned().collect();
    sensitivity::stretches(
        &pa.points.iter().map(|p| p.size).collect::<Vec<_>>(),
        &pa.points
            .iter()
            .map(|p| p.prtt_1_0_us.median)
            .collect::<Vec<_>>(),
        &pa.assessment
            .ranges
            .iter()
            .map(|r| (r.from, r.to))
            .collect::<Vec<_>>(),
        &sensitivity::passes_bounds(&measured),
        target,
    )
}

/// What became of the boundaries re-measured for doubt, against the final
/// `stretches`.
fn doubt_doc(run: &DoubtRun, stretches: &[Stretch]) -> DoubtDoc {
    let confirmed = run
        .changes
        .iter()
        .filter(|c| c.verdict == Verdict::Confirmed)
        .count();
    let still = |c: &&Change| {
        let doubtful = |s: &Stretch| s.doubtful.iter().any(|d| d.0 == c.bytes);
        c.verdict != Verdict::Confirmed && stretches.iter().any(doubtful)
    };
    let undecided = run.changes.iter().filter(still).count();
    DoubtDoc {
        boundaries: run.changes.len(),
        confirmed,
        excluded: run.changes.len() - confirmed - undecided,
        undecided,
        passes: run.passes,
        time_s: run.time.0 / 1e9,
        budget_s: run.budget.0 / 1e9,
        remeasured: run.changes.clone(),
    }
}

/// The JSON body for one pair; `target`: the fraction of `PRTT(1,0,s)` below
/// which a stretch must exclude steps to be decided; `extra` follows the model's
/// warnings; `samples`: keep every point's repetitions.
pub fn pair_doc(
    pa: &PairAnalysis,
    low_weight: f64,
    target: f64,
    extra: &[LoggpWarning],
    samples: bool,
) -> PairDoc {
    let a = &pa.assessment;
    let stretches = stretches(pa, target);
    let insensitive =
        stretches
            .iter()
            .filter(|s| !s.decided())
            .map(|s| LoggpWarning::Insensitive {
                from_bytes: s.from_bytes,
                to_bytes: s.to_bytes,
                step_floor_us: s.step_floor_us,
                at_bytes: s.worst_at_bytes.unwrap_or(s.from_bytes),
                target_us: s.target_us,
            });
    let points = pa
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| PointRecord {
            size: p.size,
            prtt_1_0_us: p.prtt_1_0_us.median,
            prtt_n_0_us: p.prtt_n_0_us.median,
            prtt_n_d_us: p.prtt_n_d_us.median,
            prtt_2_0_us: p.prtt_2_0_us.map(|s| s.median),
            os_us: a.os_us[i],
            or_us: p.or_us.median,
            send_late_us: p.send_late_us.median,
            gap_us: a.gap_us[i],
            d_us: p.d_us,
            d_spent_us: p.d_spent_us.median,
            fit_weight: a.weights[i],
            attempts: p.attempts,
            passes: p.passes,
            spread_us: Spread {
                prtt_1_0: p.prtt_1_0_us,
                prtt_n_0: p.prtt_n_0_us,
                prtt_n_d: p.prtt_n_d_us,
                or: p.or_us,
                send_late: p.send_late_us,
            },
            counters: p.counters.clone(),
            samples: samples.then(|| PointSamples {
                prtt_1_0_us: p.samples.prtt_1_0_us.clone(),
                prtt_n_0_us: p.samples.prtt_n_0_us.clone(),
                prtt_n_d_us: p.samples.prtt_n_d_us.clone(),
                or_us: p.samples.or_us.clone(),
            }),
        })
        .collect();
    PairDoc {
        client: pa.client,
        server: pa.server,
        points,
        ranges: a.ranges.clone(),
        changes: pa.reported().cloned().collect(),
        changes_verdict: if pa.reported().any(|c| c.verdict == Verdict::Undecided)
            || !stretches.iter().all(Stretch::decided)
        {
            ChangesVerdict::Undecided
        } else {
            ChangesVerdict::Decided
        },
        rejected_changes: pa
            .changes
            .iter()
            .filter(|c| c.verdict == Verdict::Rejected)
            .map(|c| c.bytes)
            .collect(),
        low_weight_points: pa
            .points
            .iter()
            .zip(&a.weights)
            .filter(|(_, &w)| w < low_weight)
            .map(|(p, &w)| LowWeight {
                size: p.size,
                weight: w,
            })
            .collect(),
        warnings: warned(
            a.warnings
                .iter()
                .cloned()
                .map(LoggpWarning::Model)
                .chain(insensitive)
                .chain(extra.iter().cloned()),
        ),
        doubt: pa.doubt.as_ref().map(|d| doubt_doc(d, &stretches)),
        sensitivity: stretches,
    }
}

/// The sensitivity statement of one stretch for the table: `no switch larger
/// than 0.018 us in PRTT(1,0,s) between 1024 and 4096 bytes (target 0.040 us)`.
fn describe_stretch(st: &Stretch) -> String {
    let between = format!("between {} and {} bytes", st.from_bytes, st.to_bytes);
    if st.decided() {
        format!(
            "sensitivity: no switch larger than {:.3} us in PRTT(1,0,s) {between} (target {:.3} us)\n",
            st.step_floor_us, st.target_us
        )
    } else {
        format!(
            "sensitivity: undecided {between}: a switch of up to {:.3} us in PRTT(1,0,s) fits \
             the data (at {} bytes; target {:.3} us)\n",
            st.step_floor_us,
            st.worst_at_bytes.unwrap_or(st.from_bytes),
            st.target_us
        )
    }
}

/// One change for the table: `8192 (first byte 8129, in gap, o_r, confirmed in 6
/// passes)`.
fn describe_change(c: &Change) -> String {
    let mut notes = Vec::new();
    match (c.first_bytes, c.crossing_bytes) {
        (Some(b), _) => notes.push(format!("first byte {b}")),
        (None, Some(x)) => notes.push(format!("slope changes near {x:.0}")),
        (None, None) if c.verdict == Verdict::Confirmed && c.kind == ChangeKind::Step => notes
            .push(format!(
                "between {} and {}",
                c.bracket_bytes[0], c.bracket_bytes[1]
            )),
        _ => {}
    }
    if !c.shown_by.is_empty() {
        notes.push(format!("in {}", c.shown_by.join(", ")));
    }
    if let Some(conf) = &c.confirmation {
        notes.push(format!("confirmed in {} passes", conf.clean_passes));
    }
    if notes.is_empty() {
        c.bytes.to_string()
    } else {
        format!("{} ({})", c.bytes, notes.join(", "))
    }
}

/// The human table: one row per protocol range, times in us.
pub fn table(pa: &PairDoc) -> String {
    let mut t = Table::new([
        "range [bytes]",
        "RTT/2 [us]",
        "L [us]",
        "o_s [us]",
        "call [us]",
        "o_r [us]",
        "g [us]",
        "G [us/B]",
        "1/G [MB/s]",
        "lsq [us^2]",
        "sizes",
    ]);
    let mut clamped = false;
    for r in &pa.ranges {
        let bw = if r.big_g_us_per_byte > 0.0 {
            format!("{:.1}", 1.0 / r.big_g_us_per_byte)
        } else {
            "-".into()
        };
        let overlap = pa.warnings.iter().any(|w| {
            matches!(&w.warning, LoggpWarning::Model(ModelWarning::OverheadsExceedHalfRtt { from, .. }) if *from == r.from)
        });
        clamped |= overlap;
        t.row([
            format!("{}-{}", r.from, r.to),
            format!("{:.2}", r.half_rtt_1b_us),
            format!("{:.2}{}", r.wire_latency_us, if overlap { "*" } else { "" }),
            format!("{:.2}", r.os_us),
            r.send_call_us
                .map_or("-".into(), |call| format!("{call:.2}")),
            format!("{:.2}", r.or_us),
            format!("{:.2}", r.g_us),
            significant(r.big_g_us_per_byte, 4),
            bw,
            format!("{:.4}", r.lsq_us2),
            r.points.to_string(),
        ]);
    }
    let mut out = format!(
        "LogGP parameters, rank {} -> rank {} ({} sizes, {} protocol range{})\n",
        pa.client,
        pa.server,
        pa.points.len(),
        pa.ranges.len(),
        if pa.ranges.len() == 1 { "" } else { "s" }
    );
    out += &t.render();
    out += "RTT/2: PRTT(1,0,1)/2 = L + o_s + o_r (the paper's L); L: the wire latency\n";
    out += "o_s: a send's CPU cost (eq. 4: what each send of a train adds); call: the time a lone \
            send call blocks; o_r: a receive's CPU cost, its call's time with the message there\n";
    if clamped {
        out += "*: o_s + o_r exceed RTT/2, so L would be negative; shown as 0 (see the warning)\n";
    }
    let ranges_with = |value: fn(&RangeParams) -> f64, show: fn(f64) -> String| -> Vec<String> {
        (pa.ranges.iter())
            .filter(|r| value(r) > 0.0)
            .map(|r| format!("{}-{} {}", r.from, r.to, show(value(r))))
            .collect()
    };
    let sends = ranges_with(|r| r.send_overlap_us, |v| format!("{v:.2} us"));
    if !sends.is_empty() {
        out += &format!(
            "o_s outlasts the message's arrival by (send_overlap_us): {}\n",
            sends.join(", ")
        );
    }
    let recvs = ranges_with(|r| r.recv_overlap_us, |v| format!("{v:.2} us"));
    if !recvs.is_empty() {
        out += &format!(
            "o_r starts before the message's last byte by (recv_overlap_us): {}\n",
            recvs.join(", ")
        );
    }
    if !sends.is_empty() || !recvs.is_empty() {
        out +=
            "so L + o_s - send_overlap + o_r - recv_overlap = RTT/2 (what one message waits for)\n";
    }
    let per_byte = ranges_with(
        |r| r.big_o_us_per_byte,
        |v| format!("{} us/B", significant(v, 3)),
    );
    if !per_byte.is_empty() {
        out += &format!(
            "O, CPU per byte at each end beyond G (LogGOPS): {}\n",
            per_byte.join(", ")
        );
    }
    for st in &pa.sensitivity {
        out += &describe_stretch(st);
    }
    if let Some(d) = pa.doubt.as_ref().filter(|d| d.boundaries > 0) {
        out += &format!(
            "re-measured {} doubtful boundaries in {:.1} s ({} passes): {} confirmed, {} excluded, \
             {} undecided\n",
            d.boundaries, d.time_s, d.passes, d.confirmed, d.excluded, d.undecided
        );
    }
    // The notes below the table, each when it has items.
    let mut note = |label: &str, items: Vec<String>, sep: &str, unit: &str| {
        if !items.is_empty() {
            out += &format!("{label}: {}{unit}\n", items.join(sep));
        }
    };
    let changes = |undecided: bool| {
        pa.changes
            .iter()
            .filter(move |c| (c.verdict == Verdict::Undecided) == undecided)
    };
    note(
        "protocol changes at",
        changes(false).map(describe_change).collect(),
        "; ",
        " bytes",
    );
    note(
        "protocol changes undecided between",
        changes(true)
            .map(|c| format!("{}-{}", c.last_old_bytes, c.bytes))
            .collect(),
        "; ",
        " bytes (not split into ranges)",
    );
    let low = pa.ranges.iter().flat_map(|r| &r.low_weight_sizes);
    note(
        "low-weight points (outliers)",
        low.map(u64::to_string).collect(),
        ", ",
        " bytes",
    );
    let mut counted: BTreeMap<&str, u64> = BTreeMap::new();
    for (name, value) in pa.points.iter().flat_map(|p| &p.counters) {
        *counted.entry(name).or_insert(0) += value;
    }
    if counted.values().all(|&v| v == 0) {
        counted.clear();
    }
    note(
        "transport counters, both ranks",
        counted.iter().map(|(n, v)| format!("{n} {v}")).collect(),
        ", ",
        "",
    );
    let mut by_fit: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (fit, sizes) in pa.ranges.iter().flat_map(|r| &r.low_weight_sizes_by_fit) {
        by_fit
            .entry(fit)
            .or_default()
            .extend(sizes.iter().map(u64::to_string));
    }
    note(
        "low-weight points in the other fits",
        by_fit
            .iter()
            .map(|(fit, sizes)| format!("{fit} {}", sizes.join(", ")))
            .collect(),
        "; ",
        " (bytes)",
    );
    out
}

/// Netgauge's LogGP column file (`size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,d,s) L o_s
/// o_r g G lsq`), one line per size, times in us and `G` in us per byte, with the
/// parameters of the range the size belongs to, so gnuplot scripts written for
/// Netgauge's output keep working: `lsq` is, as Netgauge's `lsqu(g,G)`, the square
/// root of eq. (6), in us; `n` is the n of PRTT(n,.,s).
pub fn netgauge_columns(pa: &PairDoc, n: usize) -> String {
    let mut out = String::from(
        "# ngauge loggp: times in us, G in us/byte; L g G lsq are those of the size's range;\n\
         # L is Netgauge's, PRTT(1,0,1)/2 = L + o_s + o_r of LogGP (half_rtt_1b_us)\n\
         # size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,d,s) L o_s o_r g G lsq\n",
    );
    for p in &pa.points {
        let r = range_of(&pa.ranges, p.size);
        out += &format!(
            "{} {} {:.4} {:.4} {:.4} {:.4} {:.4} {:.4} {:.4} {:.8} {:.6}\n",
            p.size,
            n,
            p.prtt_1_0_us,
            p.prtt_n_0_us,
            p.prtt_n_d_us,
            r.half_rtt_1b_us,
            p.os_us,
            p.or_us,
            r.g_us,
            r.big_g_us_per_byte,
            r.lsq_us2.sqrt()
        );
    }
    out
}

fn range_of(ranges: &[RangeParams], size: u64) -> &RangeParams {
    ranges
        .iter()
        .rev()
        .find(|r| r.from <= size)
        .unwrap_or(&ranges[0])
}

/// The parameter file `ngauge simulate` reads.
pub fn params_file(pa: &PairDoc, transport: &str) -> ParamsFile {
    ParamsFile::measured(transport, &pa.ranges)
}

/// Where the plot draws a change the ranges split at: the located first byte,
/// the crossing of a slope-only change, or the bracket of sweep sizes it lies in.
fn drawn_at(c: &Change) -> Result<f64, [f64; 2]> {
    match (c.first_bytes, c.crossing_bytes) {
        (Some(b), _) => Ok(b as f64),
        (None, Some(x)) => Ok(x),
        (None, None) => Err(c.bracket_bytes.map(|b| b as f64)),
    }
}

/// An SVG plot over the size (log 2 axis): the measured
/// `(PRTT(n,0,s) - PRTT(1,0,s))/(n-1)` per size with bars from `PRTT(n,0,s)`'s
/// minimum to its 99th percentile, the fitted `g + G(s-1)` of each range, the
/// protocol changes split at (at the located byte, or shading the sweep sizes
/// between which it lies), and `o_s(s)`; `n` messages per round.
pub fn plot_svg(pa: &PairDoc, n: usize, title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    let per = (n.max(2) - 1) as f64;
    let bars: Vec<(f64, f64, f64)> = pa
        .points
        .iter()
        .map(|p| {
            let gap = |prtt_n: f64| (prtt_n - p.prtt_1_0_us) / per;
            let sp = &p.spread_us.prtt_n_0;
            (p.size.max(1) as f64, gap(sp.min), gap(sp.p99))
        })
        .collect();
    // Robust vertical range: the fitted lines and the bulk of the points; single
    // points far above (a size disturbed by the scheduler) are left out of the view
    // and counted in the legend instead of squashing everything else flat.
    let mut all: Vec<f64> = pa.points.iter().flat_map(|p| [p.gap_us, p.os_us]).collect();
    all.sort_by(f64::total_cmp);
    let bulk = all.get(all.len() * 95 / 100).copied().unwrap_or(0.0);
    let fit_max = pa
        .ranges
        .iter()
        .map(|r| r.gap_at(r.to as f64).max(r.gap_at(r.from as f64)))
        .fold(0.0f64, f64::max);
    let hi = (bulk * 1.25).max(fit_max * 1.1).max(1e-3);
    let lo = all.first().copied().unwrap_or(0.0).min(0.0).max(-hi);
    let y = svg::Axis::linear([lo, hi], true);
    let view = y.view();
    let visible = |v: f64| view.contains(&v);
    let hidden = all.iter().filter(|&&v| !visible(v)).count();
    let x = svg::Axis::bytes(pa.points.iter().map(|p| p.size.max(1) as f64));
    let changes: Vec<&Change> = pa
        .changes
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Confirmed | Verdict::Unconfirmed))
        .collect();
    let rows = 4 + usize::from(!changes.is_empty()) + 1;
    svg::document(svg::page(rows), |root| {
        let e = svg::error;
        let mut chart = svg::chart(
            root,
            title,
            (x, "message size s [bytes]"),
            (y, "time [us]"),
            rows,
        )?;
        let [measured, fitted, overhead, ..] = svg::PALETTE;
        for c in &changes {
            if let Err([a, b]) = drawn_at(c) {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(a, view.start), (b, view.end)],
                        svg::GREY.mix(0.15).filled(),
                    )))
                    .map_err(e)?;
            }
        }
        let shown: Vec<_> = bars
            .iter()
            .filter(|b| visible(b.1) && visible(b.2))
            .copied()
            .collect();
        svg::error_bars(&mut chart, 0, &shown)?;
        chart
            .draw_series(pa.points.iter().filter(|p| visible(p.gap_us)).map(|p| {
                let style = if p.fit_weight < 0.5 {
                    measured.stroke_width(1)
                } else {
                    measured.filled()
                };
                Circle::new((p.size.max(1) as f64, p.gap_us), 3, style)
            }))
            .map_err(e)?
            .label("measured (PRTT(n,0,s) - PRTT(1,0,s)) / (n-1); hollow: low weight")
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, measured.filled()));
        svg::key(
            &mut chart,
            "bars: the same with PRTT(n,0,s) from its minimum to its 99th percentile",
        )?;
        for (i, r) in pa.ranges.iter().enumerate() {
            // A straight line in s is a curve on the log axis: 32 points per range.
            let (a, b) = ((r.from.max(1) as f64).log2(), (r.to.max(1) as f64).log2());
            let curve = (0..=32).map(|k| {
                let s = (a + (b - a) * f64::from(k) / 32.0).exp2();
                (s, r.gap_at(s).clamp(view.start, view.end))
            });
            let drawn = chart
                .draw_series(LineSeries::new(curve, fitted.stroke_width(2)))
                .map_err(e)?;
            if i == 0 {
                drawn
                    .label("fit g + G(s-1) per range")
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], fitted.stroke_width(2))
                    });
            }
        }
        chart
            .draw_series(pa.points.iter().filter(|p| visible(p.os_us)).map(|p| {
                TriangleMarker::new((p.size.max(1) as f64, p.os_us), 4, overhead.filled())
            }))
            .map_err(e)?
            .label(if hidden > 0 {
                format!("o_s(s), eq. (4); {hidden} point(s) beyond the view")
            } else {
                "o_s(s), eq. (4)".to_string()
            })
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 4, overhead.filled()));
        if !changes.is_empty() {
            let located: Vec<String> = changes
                .iter()
                .map(|c| match drawn_at(c) {
                    Ok(b) => format!("{b:.0} B"),
                    Err([a, b]) => format!("{a:.0}-{b:.0} B (shaded)"),
                })
                .collect();
            let label = format!("protocol change at {}", located.join(", "));
            let mut labelled = false;
            for c in &changes {
                if let Ok(b) = drawn_at(c) {
                    svg::vertical(&mut chart, b, (!labelled).then(|| label.clone()))?;
                    labelled = true;
                }
            }
            if !labelled {
                svg::key(&mut chart, &label)?;
            }
        }
        svg::legend(&mut chart)
    })
}

/// Synthetic analyses shared by the report tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::model::loggp::{assess, AssessOptions, Detector};
    use crate::model::segment::SegmentOptions;

    /// A clean sweep 1-16 KiB with gap `g0 + 0.001 (s-1)` below `switch` and
    /// `g0 + 18 + 0.0005 (s-1)` from it on (no switch when `switch` is `None`);
    /// `o_r` is `or`.
    pub(crate) fn synthetic_analysis(g0: f64, or: f64, switch: Option<u64>) -> PairAnalysis {
        let summary = |v: f64| Summary::of(&[v]).unwrap();
        let points: Vec<Point> = (1..=16)
            .map(|k| {
                let s = k * 1024;
                let x = s as f64 - 1.0;
                let (g, big_g) = match switch {
                    Some(w) if s >= w => (g0 + 18.0, 0.0005),
                    _ => (g0, 0.001),
                };
                let p1 = 10.0 + 0.002 * x;
                Point {
                    size: s,
                    n: 10,
                    d_us: p1,
                    prtt_1_0_us: summary(p1),
                    prtt_2_0_us: None,
                    prtt_n_0_us: summary(p1 + 9.0 * (g + big_g * x)),
                    prtt_n_d_us: summary(p1 + 9.0 * (1.5 + p1)),
                    or_us: summary(or),
                    send_late_us: summary(1.5),
                    d_spent_us: summary(p1),
                    attempts: 1,
                    timed_reps: 3,
                    disturbed_reps: 0,
                    passes: 1,
                    counters: Default::default(),
                    samples: Default::default(),
                }
            })
            .collect();
        let samples: Vec<_> = points.iter().map(Point::sample).collect();
        let opts = AssessOptions {
            detector: Detector::Segmented(SegmentOptions::default()),
            ..AssessOptions::default()
        };
        PairAnalysis::unconfirmed(0, 1, points, assess(&samples, &opts).unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::refine::Proposer;

    /// A clean sweep with a switch at 8 KiB: gap 2 + 0.001 (s-1) below, 20 +
    /// 0.0005 (s-1) above.
    fn analysis() -> PairAnalysis {
        super::fixtures::synthetic_analysis(2.0, 1.25, Some(8192))
    }

    /// The doubt rounds' boundaries are in the JSON one by one, each with its
    /// verdict, beside the counts.
    #[test]
    fn the_doubt_rounds_list_every_boundary_measured_again() {
        let mut pa = analysis();
        let sizes: Vec<u64> = pa.points.iter().map(|p| p.size).collect();
        let judged = |bytes: u64, verdict: Verdict| Change {
            verdict,
            proposed_by: Proposer::Doubt,
            ..Change::unconfirmed(&sizes, bytes, Vec::new())
        };
        // Cut before its first judgement: a confirmation with its passes only.
        let unfinished = Change {
            undecided: Some(Undecided::Unfinished),
            confirmation: Some(crate::model::refine::Confirmation {
                passes: 2,
                clean_passes: 2,
                ..Default::default()
            }),
            ..judged(16384, Verdict::Undecided)
        };
        pa.doubt = Some(DoubtRun {
            changes: vec![judged(4096, Verdict::Rejected), unfinished],
            passes: 12,
            time: Nanos(1e9),
            budget: Nanos(3e9),
        });
        let doc = serde_json::to_value(pair_doc(&pa, 0.5, sensitivity::DEFAULT_TARGET, &[], false))
            .unwrap();
        let doubt = &doc["doubt"];
        assert_eq!(doubt["boundaries"], 2, "{doubt:#}");
        let listed: Vec<(u64, &str)> = doubt["remeasured"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["bytes"].as_u64().unwrap(), c["verdict"].as_str().unwrap()))
            .collect();
        assert_eq!(listed, [(4096, "rejected"), (16384, "undecided")]);
        // As the committed schema describes it (a field left out when empty is
        // not required).
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schemas/loggp.schema.json")).unwrap();
        let pair = serde_json::json!({"$ref": "#/$defs/PairDoc", "$defs": schema["$defs"]});
        let validator = jsonschema::validator_for(&pair).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }

    #[test]
    fn json_body_carries_the_contract_fields() {
        let doc = serde_json::to_value(pair_doc(
            &analysis(),
            0.5,
            sensitivity::DEFAULT_TARGET,
            &[],
            false,
        ))
        .unwrap();
        assert_eq!(doc["changes"][0]["bytes"], 8192);
        assert_eq!(doc["changes"][0]["last_old_bytes"], 7168);
        assert_eq!(doc["changes"][0]["verdict"], "unconfirmed");
        assert_eq!(doc["changes_verdict"], "decided");
        let shown = doc["changes"][0]["shown_by"]
            .as_array()
            .expect("series per change");
        assert!(!shown.is_empty(), "a change names the series it showed in");
        let p = &doc["points"][0];
        for key in [
            "size",
            "prtt_1_0_us",
            "prtt_n_0_us",
            "prtt_n_d_us",
            "os_us",
            "or_us",
        ] {
            assert!(p[key].is_number(), "{key}");
        }
        assert!((p["os_us"].as_f64().unwrap() - 1.5).abs() < 1e-9);
        let r = &doc["ranges"][1];
        for key in [
            "from",
            "to",
            "half_rtt_1b_us",
            "wire_latency_us",
            "os_us",
            "or_us",
            "g_us",
            "G_us_per_byte",
            "lsq_us2",
        ] {
            assert!(r[key].is_number(), "{key}");
        }
        assert!((r["g_us"].as_f64().unwrap() - 20.0).abs() < 1e-6);
    }

    #[test]
    fn table_netgauge_and_params_agree() {
        let pa = analysis();
        let doc = pair_doc(&pa, 0.5, sensitivity::DEFAULT_TARGET, &[], false);
        let t = table(&doc);
        assert!(
            t.contains("8192-16384") && t.contains("protocol changes at: 8192"),
            "{t}"
        );
        let cols = netgauge_columns(&doc, 10);
        let lines: Vec<&str> = cols.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines.len(), 16);
        let last: Vec<f64> = lines[15].split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(last.len(), 11);
        assert_eq!((last[0], last[1]), (16384.0, 10.0));
        assert!((last[8] - 20.0).abs() < 1e-3 && (last[9] - 0.0005).abs() < 1e-8);
        let params = params_file(&doc, "tcp");
        params.check().unwrap();
        assert_eq!(params.for_size(9000).g_us, pa.assessment.ranges[1].g_us);
        assert!(!t.contains("transport counters"), "nothing counted: {t}");
    }

    #[test]
    fn counters_are_summed_over_the_sizes_in_the_json_and_the_table() {
        let mut pa = analysis();
        for (i, p) in pa.points.iter_mut().enumerate() {
            p.counters.insert("lost_datagrams".into(), i as u64 % 2);
            p.counters.insert("retransmissions".into(), 3);
        }
        let pd = pair_doc(&pa, 0.5, sensitivity::DEFAULT_TARGET, &[], false);
        let doc = serde_json::to_value(&pd).unwrap();
        assert_eq!(doc["points"][1]["counters"]["lost_datagrams"], 1);
        assert_eq!(doc["points"][2]["counters"]["retransmissions"], 3);
        // 16 points: 8 with one loss, 3 retransmissions each.
        let t = table(&pd);
        assert!(
            t.contains("transport counters, both ranks: lost_datagrams 8, retransmissions 48"),
            "{t}"
        );
    }

    #[test]
    fn plot_is_an_svg_with_the_legend() {
        let svg = plot_svg(
            &pair_doc(&analysis(), 0.5, sensitivity::DEFAULT_TARGET, &[], false),
            10,
            "test",
        )
        .unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("protocol change") && svg.contains("o_s(s)"));
    }

    #[test]
    fn issue_37_the_plot_draws_the_located_byte_on_a_log_2_axis() {
        let mut pd = pair_doc(&analysis(), 0.5, sensitivity::DEFAULT_TARGET, &[], false);
        pd.changes[0].first_bytes = Some(7745);
        let svg = plot_svg(&pd, 10, "test").unwrap();
        let (lo, hi) = pd
            .points
            .iter()
            .flat_map(|p| [p.gap_us, p.os_us])
            .fold((0.0f64, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
        svg::check::figure(
            &svg,
            "message size s [bytes]",
            "time [us]",
            (1024.0, 16384.0),
            (lo, hi),
        );
        assert!(
            svg.contains("protocol change at 7745 B"),
            "the located byte, not the sweep size 8192"
        );
        assert!(
            svg::check::texts(&svg)
                .iter()
                .filter(|t| t.text == "1K" || t.text == "16K")
                .count()
                == 2,
            "binary size labels"
        );
        // Without a located byte, the bracket of sweep sizes is shaded.
        pd.changes[0].first_bytes = None;
        let svg = plot_svg(&pd, 10, "test").unwrap();
        assert!(
            svg.contains("protocol change at 7168-8192 B (shaded)"),
            "{svg}"
        );
    }
}
