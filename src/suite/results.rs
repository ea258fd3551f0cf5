//! Reading measurements back: from the JSON document a command prints (`--json`),
//! from a JSON Lines stream (`--output FILE.jsonl`, or a run directory's
//! `EXPERIMENT.jsonl`), or from a run directory of `ngauge run`, into one shape:
//! per experiment and size, one value per launch (its median), with the
//! repetitions behind it when they were recorded (`--samples`).
//!
//! The documents differ by command; what is read is what they share:
//!
//! - **records**: a document's `results[]` (pingpong, coll, late, nbc, ebb, rma),
//!   `cores[]` (noise), the latency of each of `links[]` (matrix),
//!   `points[]` (loggp, one transport) or `transports[].points[]` (loggp,
//!   several); a stream's lines (a loggp stream line holds its record under
//!   `point`). A document without any of
//!   these (timer, sync) is one record itself, without a size.
//! - **the experiment** of a record: its `transport`, `op`, rma's `sync`, `algo`,
//!   (when not 0) `segment` and `pair`, and late's `mode` and `delay_us`, nbc's `compute` and
//!   `test_every_us`, joined by `/`, under the experiment name of a run directory.
//! - **the metric**: the first of [`PRIMARY_METRICS`] a record has, or the one asked
//!   for; an ebb pair's record (it inherits its document's `bisections`) is read
//!   by its bandwidth ([`EBB_METRIC`]), so a launch's value is the per-pair
//!   bandwidth median, as ebb's table heads with. Its value is a number, or an object with a `median` (a summary), or an
//!   array of numbers (sync's per-check residuals: the largest is taken).
//! - **the repetitions**: `samples.METRIC`, an array, when recorded.
//! - **the launch**: `launch` (run directories), else 0.
//!
//! Several records of one experiment, size and launch (a loggp stream of several
//! passes) are pooled: their repetitions joined, their medians reduced to their
//! median.

use crate::stats::median;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The metrics read by default, in order of preference: the first a record has is
/// taken (pingpong's half round trip, coll's run time, loggp's `PRTT(1,0,s)`,
/// timer's read cost, sync's worst residual, simulate's prediction, noise's CPU
/// fraction lost to detours, late's delay overlap benefit, nbc's overlap, rma's
/// latency per operation).
pub const PRIMARY_METRICS: &[&str] = &[
    "half_rtt_us",
    "runtime_us",
    "prtt_1_0_us",
    "overhead_ns",
    "max_abs_residual_ns",
    "predicted_us",
    "cpu_fraction_lost",
    "benefit",
    "overlap_pct",
    "latency_us",
];

/// The metric of an ebb pair's record (one with `bisections`), read by default
/// before [`PRIMARY_METRICS`].
pub const EBB_METRIC: &str = "bandwidth_MBps";

/// Fields that name the experiment of a record, in the order they are joined
/// (`sync`: rma's points; `mode` and `delay_us`: late's; `compute` and
/// `test_every_us`: nbc's).
const KEY_FIELDS: &[&str] = &[
    "transport",
    "op",
    "sync",
    "algo",
    "segment",
    "pair",
    "mode",
    "delay_us",
    "compute",
    "test_every_us",
];

/// One launch's measurement of one experiment at one size.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchPoint {
    /// The median the command reported (of pooled records: their medians' median).
    pub median: f64,
    /// The repetitions behind it, when recorded; empty otherwise.
    pub samples: Vec<f64>,
}

/// One experiment's measurements: per size (`None` for a sizeless result such as
/// `timer`) and launch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The metric read (`half_rtt_us`, ...).
    pub metric: String,
    /// Per size, per launch.
    pub points: BTreeMap<Option<u64>, BTreeMap<usize, LaunchPoint>>,
}

/// Everything read from one file or run directory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultSet {
    /// Where it was read from.
    pub source: PathBuf,
    /// Per experiment.
    pub series: BTreeMap<String, Series>,
    /// The launch metadata of what was read: a document's `meta`, or the `meta`
    /// of each run of a run directory (none for a stream).
    pub meta: Vec<SourceMeta>,
}

/// The metadata of one launch read ([`crate::report::Meta`] as its document
/// recorded it: host, build, transport, pinning, timer, date...).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SourceMeta {
    /// The experiment of a run directory (`None` for a document).
    pub experiment: Option<String>,
    /// The launch of a run directory, from 0 (`None` for a document).
    pub launch: Option<usize>,
    /// The document's `meta`, as written.
    pub meta: serde_json::Map<String, Value>,
}

/// The `meta` of every run document of the run directory `root`
/// (`runs/EXP/launch-K.json`), by experiment and launch.
fn run_dir_meta(root: &Path) -> Vec<SourceMeta> {
    let mut out = Vec::new();
    let Ok(experiments) = std::fs::read_dir(root.join("runs")) else {
        return out;
    };
    let mut experiments: Vec<PathBuf> = experiments
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    experiments.sort();
    for dir in experiments {
        let experiment = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut runs: Vec<(usize, PathBuf)> = files
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                let name = p.file_name()?.to_str()?;
                let k = name
                    .strip_prefix("launch-")?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()?;
                Some((k, p))
            })
            .collect();
        runs.sort();
        for (launch, path) in runs {
            let meta = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|d| d.get("meta").and_then(Value::as_object).cloned());
            if let Some(meta) = meta {
                out.push(SourceMeta {
                    experiment: experiment.clone(),
                    launch: Some(launch),
                    meta,
                });
            }
        }
    }
    out
}

/// Why results could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON (`line` is 1-based; for a whole document, where serde found it).
    #[error("{}:{line}: not JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A directory that `ngauge run` did not write.
    #[error("{} is not a run directory of `ngauge run` (it has no {PLAN_FILE})", path.display())]
    NotARunDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// Nothing measured in it.
    #[error("{} holds no measurements ngauge can compare (no record with one of {})", path.display(), PRIMARY_METRICS.join(", "))]
    Empty {
        /// The file or directory.
        path: PathBuf,
    },
    /// The metric asked for is in no record.
    #[error("{}: no record has the metric `{metric}` (it has: {})", path.display(), available.join(", "))]
    NoSuchMetric {
        /// The file or directory.
        path: PathBuf,
        /// The metric asked for.
        metric: String,
        /// The numeric fields the records have.
        available: Vec<String>,
    },
}

/// The plan a run directory holds; its presence marks the directory.
pub const PLAN_FILE: &str = "plan.json";

/// Reads a result document, a JSON Lines stream, or a run directory; `metric`
/// overrides [`PRIMARY_METRICS`].
///
/// # Errors
/// See [`ReadError`].
pub fn read(path: &Path, metric: Option<&str>) -> Result<ResultSet, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut records = Vec::new();
    let mut meta = Vec::new();
    if path.is_dir() {
        if !path.join(PLAN_FILE).is_file() {
            return Err(ReadError::NotARunDirectory {
                path: path.to_path_buf(),
            });
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        for file in files {
            let experiment = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&file).map_err(|source| ReadError::Io {
                path: file.clone(),
                source,
            })?;
            records.extend(
                parse_text(&file, &text)?
                    .into_iter()
                    .map(|r| (Some(experiment.clone()), r)),
            );
        }
        meta = run_dir_meta(path);
    } else {
        let text = std::fs::read_to_string(path).map_err(io)?;
        records.extend(parse_text(path, &text)?.into_iter().map(|r| (None, r)));
        if let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(&text) {
            if let Some(Value::Object(m)) = doc.get("meta") {
                meta.push(SourceMeta {
                    experiment: None,
                    launch: None,
                    meta: m.clone(),
                });
            }
        }
    }
    let mut set = collect(path, records, metric)?;
    set.meta = meta;
    Ok(set)
}

/// A document (one JSON value) or a stream (one per line).
fn parse_text(path: &Path, text: &str) -> Result<Vec<Map<String, Value>>, ReadError> {
    match serde_json::from_str::<Value>(text) {
        Ok(doc) => Ok(document_records(&doc)),
        Err(whole) => {
            // Not one document: a stream of one per line, unless it does not even
            // start like one (then the document's error says more).
            if !text.trim_start().starts_with('{') {
                return Err(ReadError::Json {
                    path: path.to_path_buf(),
                    line: whole.line(),
                    source: whole,
                });
            }
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let value: Value =
                    serde_json::from_str(line).map_err(|source| ReadError::Json {
                        path: path.to_path_buf(),
                        line: i + 1,
                        source,
                    })?;
                out.extend(stream_record(value));
            }
            Ok(out)
        }
    }
}

/// The records of one document (see the module doc).
pub fn document_records(doc: &Value) -> Vec<Map<String, Value>> {
    let Some(obj) = doc.as_object() else {
        return Vec::new();
    };
    let inherit = |item: &Value, from: &Map<String, Value>| {
        let mut r = item.as_object().cloned().unwrap_or_default();
        for k in ["transport", "launch", "bisections"] {
            if let (false, Some(v)) = (r.contains_key(k), from.get(k)) {
                r.insert(k.into(), v.clone());
            }
        }
        r
    };
    if let Some(results) = ["results", "cores"]
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_array))
    {
        return results.iter().map(|r| inherit(r, obj)).collect();
    }
    if let Some(links) = obj.get("links").and_then(Value::as_array) {
        return links.iter().map(|l| inherit(&l["latency"], obj)).collect();
    }
    if let Some(fits) = obj.get("transports").and_then(Value::as_array) {
        return fits
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|fit| {
                fit.get("points")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(move |p| {
                        let mut r = inherit(p, fit);
                        if let (false, Some(l)) = (r.contains_key("launch"), obj.get("launch")) {
                            r.insert("launch".into(), l.clone());
                        }
                        r
                    })
            })
            .collect();
    }
    if let Some(points) = obj.get("points").and_then(Value::as_array) {
        return points.iter().map(|p| inherit(p, obj)).collect();
    }
    // A stream line read as a whole file (a stream of one line), or a sizeless
    // document.
    stream_record(doc.clone())
}

/// One line of a stream: the record, with a loggp line's `point` lifted out.
fn stream_record(line: Value) -> Vec<Map<String, Value>> {
    let Value::Object(mut obj) = line else {
        return Vec::new();
    };
    if let Some(Value::Object(point)) = obj.remove("point") {
        let mut r = point;
        for (k, v) in obj {
            r.entry(k).or_insert(v);
        }
        return vec![r];
    }
    vec![obj]
}

/// The value of `metric` in `record`, if it has a usable one.
pub fn metric_value(record: &Map<String, Value>, metric: &str) -> Option<f64> {
    let v = match record.get(metric)? {
        Value::Number(n) => n.as_f64(),
        Value::Object(o) => o.get("median").and_then(Value::as_f64),
        Value::Array(a) => a
            .iter()
            .map(Value::as_f64)
            .collect::<Option<Vec<f64>>>()
            .and_then(|v| v.into_iter().reduce(f64::max)),
        _ => None,
    }?;
    v.is_finite().then_some(v)
}

/// The repetitions behind `metric` in `record` (`samples.METRIC`), empty when not
/// recorded or not all finite numbers.
pub fn metric_samples(record: &Map<String, Value>, metric: &str) -> Vec<f64> {
    record
        .get("samples")
        .and_then(|s| s.get(metric))
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .map(|v| v.as_f64().filter(|x| x.is_finite()))
                .collect::<Option<Vec<f64>>>()
        })
        .unwrap_or_default()
}

/// The experiment a record belongs to, from its [`KEY_FIELDS`].
fn record_key(record: &Map<String, Value>) -> String {
    KEY_FIELDS
        .iter()
        .filter_map(|&k| match record.get(k)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) if k == "pair" => (n.as_u64() != Some(0)).then(|| format!("pair{n}")),
            // Simulate's segment size: 0 is one segment, named by its algorithm.
            Value::Number(n) if k == "segment" => {
                (n.as_u64() != Some(0)).then(|| format!("segment{n}"))
            }
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Groups records into series.
fn collect(
    path: &Path,
    records: Vec<(Option<String>, Map<String, Value>)>,
    metric: Option<&str>,
) -> Result<ResultSet, ReadError> {
    let chosen = |r: &Map<String, Value>| -> Option<String> {
        match metric {
            Some(m) => metric_value(r, m).map(|_| m.to_string()),
            None => r
                .contains_key("bisections")
                .then_some(EBB_METRIC)
                .into_iter()
                .chain(PRIMARY_METRICS.iter().copied())
                .find(|m| metric_value(r, m).is_some())
                .map(|m| m.to_string()),
        }
    };
    // Experiments of a run directory with a single record key are named by the
    // experiment alone.
    let mut keys_per_experiment: BTreeMap<String, std::collections::BTreeSet<String>> =
        BTreeMap::new();
    for (exp, r) in &records {
        if let Some(exp) = exp {
            keys_per_experiment
                .entry(exp.clone())
                .or_default()
                .insert(record_key(r));
        }
    }
    // (experiment, size, launch) -> (metric, medians, repetitions)
    type Pool = BTreeMap<(String, Option<u64>, usize), (String, Vec<f64>, Vec<f64>)>;
    let mut pooled = Pool::new();
    for (exp, r) in &records {
        let Some(m) = chosen(r) else { continue };
        let value = metric_value(r, &m).expect("chosen metrics have a value");
        let key = match exp {
            Some(e) if keys_per_experiment[e].len() <= 1 => e.clone(),
            Some(e) => format!("{e}/{}", record_key(r)),
            None => record_key(r),
        };
        let key = if key.is_empty() { m.clone() } else { key };
        let size = r.get("size").and_then(Value::as_u64);
        let launch = r.get("launch").and_then(Value::as_u64).unwrap_or(0) as usize;
        let entry = pooled
            .entry((key, size, launch))
            .or_insert_with(|| (m.clone(), Vec::new(), Vec::new()));
        entry.1.push(value);
        entry.2.extend(metric_samples(r, &m));
    }
    if pooled.is_empty() {
        if let Some(m) = metric {
            let mut available: Vec<String> = records
                .iter()
                .flat_map(|(_, r)| r.iter())
                .filter(|(_, v)| v.is_number() || v.get("median").is_some_and(Value::is_number))
                .map(|(k, _)| k.clone())
                .collect();
            available.sort();
            available.dedup();
            if !records.is_empty() {
                return Err(ReadError::NoSuchMetric {
                    path: path.to_path_buf(),
                    metric: m.to_string(),
                    available,
                });
            }
        }
        return Err(ReadError::Empty {
            path: path.to_path_buf(),
        });
    }
    let mut series: BTreeMap<String, Series> = BTreeMap::new();
    for ((key, size, launch), (m, medians, samples)) in pooled {
        let s = series.entry(key).or_insert_with(|| Series {
            metric: m,
            points: BTreeMap::new(),
        });
        s.points.entry(size).or_default().insert(
            launch,
            LaunchPoint {
                median: median(&medians).expect("a pooled point has a value"),
                samples,
            },
        );
    }
    Ok(ResultSet {
        source: path.to_path_buf(),
        series,
        meta: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_pingpong_document_with_two_transports() {
        let doc = json!({
            "meta": {"np": 2},
            "results": [
                {"transport": "tcp", "size": 1, "half_rtt_us": {"median": 10.0, "n": 3},
                 "samples": {"half_rtt_us": [9.0, 10.0, 11.0]}},
                {"transport": "tcp", "size": 8, "half_rtt_us": {"median": 12.0}},
                {"transport": "udp", "size": 1, "half_rtt_us": {"median": 8.0}},
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.json", &doc.to_string());
        let set = read(&p, None).unwrap();
        assert_eq!(set.series.keys().collect::<Vec<_>>(), ["tcp", "udp"]);
        let tcp = &set.series["tcp"];
        assert_eq!(tcp.metric, "half_rtt_us");
        let one = &tcp.points[&Some(1)][&0];
        assert_eq!((one.median, one.samples.len()), (10.0, 3));
        assert!(tcp.points[&Some(8)][&0].samples.is_empty());
    }

    /// Issue 35: a matrix document's records are its links' latencies.
    #[test]
    fn a_matrix_document_reads_its_links_latencies() {
        let link = |median: f64| {
            json!({"latency": {"size": 8, "half_rtt_us": {"median": median}},
                   "bandwidth": {"size": 65536, "half_rtt_us": {"median": 99.0}}})
        };
        let doc = json!({"meta": {"np": 2}, "links": [link(1.0), link(3.0)]});
        let records = document_records(&doc);
        assert_eq!(records.len(), 2);
        assert_eq!(records[1]["half_rtt_us"]["median"], 3.0);
        assert_eq!(records[0]["size"], 8);
    }

    #[test]
    fn late_and_nbc_documents_read_their_benefit_and_overlap_per_point() {
        let late = json!({
            "transport": "tcp",
            "results": [
                {"size": 8, "mode": "blocking", "delay_us": 0.0, "benefit": 0.0},
                {"size": 8, "mode": "blocking", "delay_us": 50.0, "benefit": 0.5},
                {"size": 8, "mode": "blocking", "delay_us": 500.0, "benefit": null},
            ]
        });
        let nbc = json!({
            "transport": "tcp",
            "results": [{"size": 8, "op": "bcast", "algo": "chain", "compute": "time",
                         "test_every_us": null, "overlap_pct": 40.0}]
        });
        let dir = tempfile::tempdir().unwrap();
        let set = read(&write(dir.path(), "l.json", &late.to_string()), None).unwrap();
        let keys: Vec<&String> = set.series.keys().collect();
        assert_eq!(
            keys,
            ["tcp/blocking/0.0", "tcp/blocking/50.0"],
            "undecided: no b"
        );
        assert_eq!(set.series["tcp/blocking/50.0"].metric, "benefit");
        assert_eq!(
            set.series["tcp/blocking/50.0"].points[&Some(8)][&0].median,
            0.5
        );
        let set = read(&write(dir.path(), "n.json", &nbc.to_string()), None).unwrap();
        let (key, series) = set.series.iter().next().unwrap();
        assert_eq!(
            (key.as_str(), series.metric.as_str()),
            ("tcp/bcast/chain/time", "overlap_pct")
        );
    }

    #[test]
    fn a_noise_document_is_its_cores() {
        let doc = json!({
            "meta": {"np": 2},
            "cores": [
                {"rank": 0, "core": 0, "cpu_fraction_lost": 0.01},
                {"rank": 1, "core": 1, "cpu_fraction_lost": 0.03},
            ]
        });
        let dir = tempfile::tempdir().unwrap();
        let set = read(&write(dir.path(), "n.json", &doc.to_string()), None).unwrap();
        let (_, series) = set.series.iter().next().unwrap();
        assert_eq!(series.metric, "cpu_fraction_lost");
        assert!(
            (series.points[&None][&0].median - 0.02).abs() < 1e-12,
            "{series:?}"
        );
    }

    #[test]
    fn loggp_documents_and_streams() {
        let dir = tempfile::tempdir().unwrap();
        // One transport: points at the top level.
        let one = json!({"transport": "tcp", "points": [
            {"size": 1, "prtt_1_0_us": 20.0}, {"size": 2, "prtt_1_0_us": 21.0}]});
        let set = read(&write(dir.path(), "one.json", &one.to_string()), None).unwrap();
        assert_eq!(set.series["tcp"].metric, "prtt_1_0_us");
        assert_eq!(set.series["tcp"].points.len(), 2);
        // Several transports.
        let several = json!({"transports": [
            {"transport": "mpi", "points": [{"size": 1, "prtt_1_0_us": 2.0}]},
            {"transport": "tcp", "points": [{"size": 1, "prtt_1_0_us": 20.0}]}]});
        let set = read(&write(dir.path(), "s.json", &several.to_string()), None).unwrap();
        assert_eq!(set.series.keys().collect::<Vec<_>>(), ["mpi", "tcp"]);
        // A stream of two passes over size 1: pooled.
        let stream = [
            json!({"pair": 0, "pass": 0, "point": {"size": 1, "prtt_1_0_us": {"median": 10.0},
                   "samples": {"prtt_1_0_us": [10.0, 10.5]}}}),
            json!({"pair": 0, "pass": 1, "point": {"size": 1, "prtt_1_0_us": {"median": 12.0},
                   "samples": {"prtt_1_0_us": [12.0]}}}),
            json!({"pair": 1, "pass": 0, "point": {"size": 1, "prtt_1_0_us": {"median": 30.0}}}),
        ]
        .map(|v| v.to_string())
        .join("\n");
        let set = read(&write(dir.path(), "s.jsonl", &stream), None).unwrap();
        // No transport named: the series is named by its metric.
        let p = &set.series["prtt_1_0_us"].points[&Some(1)][&0];
        assert_eq!(
            (p.median, p.samples.clone()),
            (11.0, vec![10.0, 10.5, 12.0])
        );
        assert_eq!(set.series["pair1"].points[&Some(1)][&0].median, 30.0);
    }

    #[test]
    fn sizeless_documents_and_chosen_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let timer = json!({"source": "rdtscp", "overhead_ns": {"min": 9.0, "median": 11.0}});
        let set = read(&write(dir.path(), "t.json", &timer.to_string()), None).unwrap();
        assert_eq!(set.series["overhead_ns"].points[&None][&0].median, 11.0);
        let sync = json!({"transport": "tcp", "duration_us": 900.0,
                          "max_abs_residual_ns": [120.0, 340.0]});
        let p = write(dir.path(), "sync.json", &sync.to_string());
        let set = read(&p, None).unwrap();
        assert_eq!(set.series["tcp"].points[&None][&0].median, 340.0);
        let set = read(&p, Some("duration_us")).unwrap();
        assert_eq!(set.series["tcp"].metric, "duration_us");
        let e = read(&p, Some("latency")).unwrap_err().to_string();
        assert!(
            e.contains("no record has the metric `latency`") && e.contains("duration_us"),
            "{e}"
        );
    }

    #[test]
    fn run_directories_name_experiments_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("not a run directory"), "{e}");
        write(dir.path(), PLAN_FILE, "{}");
        let lines = |transport: &str| {
            (0..3)
                .map(|launch| {
                    json!({"launch": launch, "transport": transport, "size": 4,
                           "half_rtt_us": {"median": 10.0 + launch as f64}})
                    .to_string()
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        write(dir.path(), "pp.jsonl", &lines("tcp"));
        write(
            dir.path(),
            "both.jsonl",
            &(lines("tcp") + "\n" + &lines("udp")),
        );
        let set = read(dir.path(), None).unwrap();
        assert_eq!(
            set.series.keys().collect::<Vec<_>>(),
            ["both/tcp", "both/udp", "pp"]
        );
        let launches = &set.series["pp"].points[&Some(4)];
        assert_eq!(
            launches.values().map(|p| p.median).collect::<Vec<_>>(),
            [10.0, 11.0, 12.0]
        );
    }

    #[test]
    fn bad_files_are_named_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "bad.jsonl",
            "{\"size\": 1, \"half_rtt_us\": 2}\n{oops\n",
        );
        let e = read(&p, None).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}:2: not JSON", p.display())),
            "{e}"
        );
        let p = write(dir.path(), "empty.json", "{\"hello\": 1}");
        let e = read(&p, None).unwrap_err().to_string();
        assert!(e.contains("holds no measurements"), "{e}");
        let e = read(&dir.path().join("missing.json"), None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read "), "{e}");
    }
}
