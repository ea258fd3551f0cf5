//! The document of `ngauge simulate`: predictions of the LogGP simulator
//! ([`crate::sim::spec`]), the network they were made on, with several
//! candidates the best per size, and with `--measure` the candidates measured
//! in the job and the models' choices against the measured best.

use super::coll::{predicted_cells, render_selection, CollRecord, CollWarning};
use super::table::Table;
use super::warning::{warned, Warned};
use super::Meta;
use crate::sim::net::{LogGp, Network};
use crate::sim::params::ParamsWarning;
use crate::sim::select::Selection;
use crate::sim::spec::{self, Prediction};
use serde::Serialize;

/// One protocol range of the network simulated, in the parameter file's units.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RangeUsed {
    /// First message size of the range.
    pub from_bytes: u64,
    /// Wire latency `L`, us.
    pub wire_latency_us: f64,
    /// Send overhead as simulated, us: in an eager range whose file gives a lone
    /// send call, where that call ends (between the message leaving and the
    /// file's `o_s`), not the file's `o_s`.
    pub o_s_us: f64,
    /// Receive overhead, us.
    pub o_r_us: f64,
    /// Gap, us.
    pub g_us: f64,
    /// Gap per byte, us per byte.
    #[serde(rename = "G_us_per_byte")]
    pub big_g_us_per_byte: f64,
    /// The end of `o_s` that comes after the message left (the receiver does not
    /// wait for it), us.
    pub send_overlap_us: f64,
    /// The start of `o_r` that a receive waiting in its call runs before the last
    /// byte is in, us.
    pub recv_overlap_us: f64,
    /// LogGOPS's CPU overhead per byte at each end, `O`, us per byte.
    #[serde(rename = "O_us_per_byte")]
    pub big_o_us_per_byte: f64,
    /// `eager` or `rendezvous`.
    pub protocol: &'static str,
}

impl RangeUsed {
    /// The range of `net` starting at `from_bytes`.
    pub fn new(from_bytes: u64, p: &LogGp) -> Self {
        RangeUsed {
            from_bytes,
            wire_latency_us: p.l_ps as f64 / 1e6,
            o_s_us: p.os_ps as f64 / 1e6,
            o_r_us: p.or_ps as f64 / 1e6,
            g_us: p.g_ps as f64 / 1e6,
            big_g_us_per_byte: p.big_g_fs as f64 / 1e9,
            send_overlap_us: p.send_overlap_ps as f64 / 1e6,
            recv_overlap_us: p.recv_overlap_ps as f64 / 1e6,
            big_o_us_per_byte: p.big_o_fs as f64 / 1e9,
            protocol: if p.rendezvous { "rendezvous" } else { "eager" },
        }
    }

    /// Every range of `net`.
    pub fn all(net: &Network) -> Vec<Self> {
        net.protocols()
            .iter()
            .map(|(from, p)| RangeUsed::new(*from, p))
            .collect()
    }
}

/// The best candidate of one size.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Best {
    /// Message size.
    pub size: u64,
    /// The algorithm.
    pub algo: String,
    /// Its segment size.
    pub segment: u64,
    /// Its predicted time, us.
    pub predicted_us: f64,
    /// The runner-up's time over the best's (1 when tied; absent with one
    /// candidate).
    pub margin: Option<f64>,
}

/// `simulate --measure`: the candidates measured by `ngauge coll`'s executor in
/// the job whose size was simulated, and the model-based selection judged
/// against the measured best (Nuriyev, sec. 6.3, tables 6.5 to 6.11).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Measurement {
    /// How calls were timed. The LogGP time of each record (`predicted.loggp_us`)
    /// simulates that scheme: one call for window and barrier, the loop's calls
    /// over their number for loop; so under the loop scheme the LogGP choice may
    /// differ from `best[]`, which ranks single calls.
    pub scheme: crate::patterns::coll::Scheme,
    /// Valid calls wanted per point.
    pub reps: u64,
    /// Every point measured, as `ngauge coll --predict` records it, in the order
    /// measured (sizes interleaved).
    pub results: Vec<CollRecord>,
    /// Per size the measured best, the LogGP simulation's choice, Hockney's with
    /// the parameter file's alpha and beta, Hockney's with per-algorithm
    /// parameters fitted by Huber regression, each with its degradation `loss` =
    /// its measured median over the best's - 1; absent with fewer than two
    /// candidates measured at every size.
    pub selection: Option<Selection>,
    /// The clock synchronization of the window scheme, per rank (absent with the
    /// other schemes), as in `coll`'s document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<super::effort::ClockSync>,
    /// What threatens the measured figures.
    pub warnings: Vec<Warned<CollWarning>>,
}

/// `ngauge simulate --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SimulateDoc {
    /// Where the parameters came from: the parameter file, or `flags`.
    pub params: String,
    /// The transport the parameter file names (empty for flags).
    pub params_transport: String,
    /// The network simulated.
    pub ranges: Vec<RangeUsed>,
    /// Whether the receiving interface kept the gap.
    pub receive_gap: bool,
    /// One row per size and candidate, sizes ascending.
    pub results: Vec<Prediction>,
    /// The best candidate per size (one entry per size).
    pub best: Vec<Best>,
    /// Events over all rows.
    pub events: u64,
    /// Events per wall-clock second over all rows.
    pub events_per_s: f64,
    /// What the parameter reader assumed (`coll`'s `Params` warnings, which
    /// serialize as the reader's own).
    pub warnings: Vec<Warned<CollWarning>>,
    /// With `--measure`: the candidates measured in the job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    /// How the result came about (`np` is the simulated job's; the timer is not
    /// used; with `--measure`, the job that measured, whose size was simulated).
    pub meta: Meta,
}

impl SimulateDoc {
    /// The document of `results` on `net`.
    pub fn new(
        params: String,
        params_transport: String,
        net: &Network,
        receive_gap: bool,
        results: Vec<Prediction>,
        warnings: Vec<ParamsWarning>,
        meta: Meta,
    ) -> Self {
        let events = results.iter().map(|r| r.events).sum();
        let secs: f64 = results.iter().map(|r| r.elapsed_s).sum();
        let best = best_of(&results);
        SimulateDoc {
            params,
            params_transport,
            ranges: RangeUsed::all(net),
            receive_gap,
            best,
            events,
            events_per_s: if secs > 0.0 {
                events as f64 / secs
            } else {
                0.0
            },
            results,
            warnings: warned(warnings.into_iter().map(CollWarning::Params)),
            measurement: None,
            meta,
        }
    }
}

fn best_of(results: &[Prediction]) -> Vec<Best> {
    spec::best(results)
        .into_iter()
        .map(|b| {
            let runner_up = results
                .iter()
                .filter(|r| r.size == b.size && !std::ptr::eq(*r, b))
                .map(|r| r.predicted_us)
                .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))));
            Best {
                size: b.size,
                algo: b.algo.clone(),
                segment: b.segment,
                predicted_us: b.predicted_us,
                margin: runner_up.map(|r| {
                    if b.predicted_us > 0.0 {
                        r / b.predicted_us
                    } else {
                        1.0
                    }
                }),
            }
        })
        .collect()
}

impl super::Document for SimulateDoc {
    type Warning = CollWarning;

    fn render(&self) -> String {
        let mut out = render(self);
        if let Some(m) = &self.measurement {
            out += &render_measurement(m);
        }
        out
    }

    /// The parameter reader's, then the measurement's.
    fn warnings(&self) -> Vec<(String, &CollWarning)> {
        let measured = self.measurement.iter().flat_map(|m| &m.warnings);
        self.warnings
            .iter()
            .chain(measured)
            .map(|w| (String::new(), &w.warning))
            .collect()
    }
}

/// The measured points beside both models, then the selection table.
fn render_measurement(m: &Measurement) -> String {
    let mut out = format!(
        "\nmeasured in this job ({} scheme, {} valid calls per point): median run-time \
         beside the models\n",
        m.scheme.as_str(),
        m.reps
    );
    let mut t = Table::new([
        "size [B]",
        "transport",
        "algo",
        "segment [B]",
        "median [us]",
        "LogGP [us]",
        "median / LogGP",
        "Hockney [us]",
        "median / Hockney",
    ]);
    for r in &m.results {
        let mut row = vec![
            r.size.to_string(),
            r.transport.to_string(),
            r.algo.clone(),
            segment(r.segment as u64),
            r.runtime_us
                .map_or("-".into(), |t| format!("{:.2}", t.median)),
        ];
        row.extend(predicted_cells(r.predicted.as_ref()));
        t.row(row);
    }
    out += &t.render();
    match &m.selection {
        Some(s) => out + "\n" + &render_selection(s),
        None => out + "no size has two candidates measured: nothing to select\n",
    }
}

/// A segment size, `-` for none.
fn segment(bytes: u64) -> String {
    match bytes {
        0 => "-".into(),
        b => b.to_string(),
    }
}

/// The rows worth a line, each with its segment column: segments no smaller
/// than the message leave it one segment, so such variants of a size and
/// algorithm that predict the same time tie; the first stands for all, its
/// segment shown as `>= S` (the JSON keeps every row).
fn untied(results: &[Prediction]) -> Vec<(&Prediction, String)> {
    let whole = |r: &Prediction| r.segment > 0 && r.segment >= r.size;
    let twin = |a: &Prediction, b: &Prediction| {
        whole(a)
            && whole(b)
            && (a.size, &a.algo, a.predicted_us) == (b.size, &b.algo, b.predicted_us)
    };
    let mut out: Vec<(&Prediction, String)> = Vec::new();
    for r in results {
        match out.iter_mut().find(|(kept, _)| twin(kept, r)) {
            Some((kept, label)) => *label = format!(">= {}", kept.segment.min(r.segment)),
            None => out.push((r, segment(r.segment))),
        }
    }
    out
}

/// The human rendering: the network, one row per prediction, the best per size when
/// there are several candidates, every rank's completion when there is one row
/// with them.
fn render(doc: &SimulateDoc) -> String {
    let mut out = String::new();
    let np = doc.results.first().map_or(0, |r| r.np);
    let op = doc.results.first().map_or("", |r| r.op.as_str());
    out += &format!("simulate {op} on {np} ranks, LogGP from {}\n", doc.params);
    for r in &doc.ranges {
        out += &format!(
            "  from {} B: L {} us, o_s {} us, o_r {} us, g {} us, G {} us/B",
            r.from_bytes, r.wire_latency_us, r.o_s_us, r.o_r_us, r.g_us, r.big_g_us_per_byte,
        );
        // Plain LogGP files (and the flags) have none of these: no noise for them.
        if r.send_overlap_us > 0.0 || r.recv_overlap_us > 0.0 || r.big_o_us_per_byte > 0.0 {
            out += &format!(
                ", send overlap {} us, receive overlap {} us, O {} us/B",
                r.send_overlap_us, r.recv_overlap_us, r.big_o_us_per_byte
            );
        }
        out += &format!(", {}\n", r.protocol);
    }
    out.push('\n');
    let looped = doc.results.iter().any(|r| r.looped_us.is_some());
    let mut header = vec![
        "size [B]",
        "algo",
        "segment [B]",
        "predicted [us]",
        "slowest rank",
        "place",
    ];
    if looped {
        header.extend(["loop [us]", "loop error", "rotate [us]", "rotate error"]);
    }
    let mut t = Table::new(header);
    for (r, seg) in untied(&doc.results) {
        let mut row = vec![
            r.size.to_string(),
            r.algo.clone(),
            seg,
            format!("{:.3}", r.predicted_us),
            r.slowest_rank.to_string(),
            r.place.to_string(),
        ];
        if looped {
            let error = |t: Option<f64>| {
                t.map_or(("-".into(), "-".into()), |t| {
                    (
                        format!("{t:.3}"),
                        format!("{:+.1}%", (t / r.predicted_us - 1.0) * 100.0),
                    )
                })
            };
            let (l, le) = error(r.looped_us);
            let (ro, re) = error(r.rotated_us);
            row.extend([l, le, ro, re]);
        }
        t.row(row);
    }
    out += &t.render();
    let candidates = doc.results.len() / doc.best.len().max(1);
    if candidates > 1 {
        out += "\nbest per size (model-based selection)\n";
        let mut t = Table::new([
            "size [B]",
            "algo",
            "segment [B]",
            "predicted [us]",
            "runner-up / best",
        ]);
        for b in &doc.best {
            t.row([
                b.size.to_string(),
                b.algo.clone(),
                segment(b.segment),
                format!("{:.3}", b.predicted_us),
                b.margin.map_or("-".into(), |m| format!("{m:.3}")),
            ]);
        }
        out += &t.render();
    }
    if let [one] = doc.results.as_slice() {
        if let Some(finish) = &one.finish_us {
            out += "\n";
            let mut t = Table::new(["rank", "completion [us]"]);
            for (rank, f) in finish.iter().enumerate() {
                t.row([rank.to_string(), format!("{f:.3}")]);
            }
            out += &t.render();
        }
    }
    out += &format!(
        "\n{} events in {:.3} s ({:.3e} events/s)\n",
        doc.events,
        doc.results.iter().map(|r| r.elapsed_s).sum::<f64>(),
        doc.events_per_s
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(size: u64, algo: &str, segment: u64, predicted_us: f64) -> Prediction {
        Prediction {
            op: "bcast".into(),
            algo: algo.into(),
            segment,
            size,
            np: 4,
            predicted_us,
            slowest_rank: 3,
            finish_us: None,
            place: 1,
            looped_us: None,
            rotated_us: None,
            events: 0,
            messages: 0,
            peak_state_bytes: 0,
            elapsed_s: 0.0,
        }
    }

    /// Issue 37: segment variants larger than the message tie, and one line
    /// stands for them; smaller segments and other sizes keep their lines.
    #[test]
    fn issue_37_segments_larger_than_the_message_collapse() {
        let rows = [
            row(1024, "chain", 512, 9.0),
            row(1024, "chain", 2048, 7.0),
            row(1024, "chain", 4096, 7.0),
            row(1024, "binomial", 2048, 5.0),
            row(8192, "chain", 2048, 30.0),
            row(8192, "chain", 4096, 31.0),
        ];
        let shown: Vec<(u64, &str, String)> = untied(&rows)
            .into_iter()
            .map(|(r, s)| (r.size, r.algo.as_str(), s))
            .collect();
        let want = [
            (1024, "chain", "512"),
            (1024, "chain", ">= 2048"),
            (1024, "binomial", "2048"),
            (8192, "chain", "2048"),
            (8192, "chain", "4096"),
        ];
        let want: Vec<(u64, &str, String)> = want
            .iter()
            .map(|&(z, a, s)| (z, a, s.to_string()))
            .collect();
        assert_eq!(shown, want);
    }
}
