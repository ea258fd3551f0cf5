//! The run directory of a suite: where everything lands, and which runs are done.
//!
//! ```text
//! DIR/
//!   suite.toml                    the suite as run (a copy)
//!   plan.json                     seed, launches, each launch's order (suite::plan)
//!   launches/launch-K.json        launch K: its factors (Table VI), order, times,
//!                                 and each run's status and command line
//!   runs/EXP/experiment.json      the experiment's spec, as its runs read it
//!   runs/EXP/launch-K.json        the document of EXP in launch K (written when
//!                                 the run finished: its presence marks it done)
//!   runs/EXP/launch-K.jsonl       the run's --output stream
//!   runs/EXP/launch-K.stderr      the run's standard error
//!   EXP.jsonl, EXP.csv            every finished launch's records of EXP, each
//!                                 with its `launch`
//!   summary.json, summary.csv     per experiment and size: the per-launch medians,
//!                                 their median and intervals (suite::summary)
//! ```
//!
//! A run is done when its document exists; documents are written to a temporary
//! name and renamed, so a kill leaves either the whole document or none. The
//! combined files and the summary are derived: they are rewritten from the run
//! documents after each finished run.

use super::results::{document_records, PLAN_FILE};
use serde_json::{Map, Value};
use std::io;
use std::path::{Path, PathBuf};

/// A run directory.
#[derive(Clone, Debug)]
pub struct RunDir {
    root: PathBuf,
}

/// Names that would collide with the files of the directory.
pub const RESERVED_NAMES: &[&str] = &["summary", "plan", "suite", "runs", "launches"];

impl RunDir {
    /// The directory at `root` (not created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `plan.json`.
    pub fn plan(&self) -> PathBuf {
        self.root.join(PLAN_FILE)
    }

    /// `suite.toml`.
    pub fn suite_copy(&self) -> PathBuf {
        self.root.join("suite.toml")
    }

    /// `launches/launch-K.json`.
    pub fn launch_meta(&self, launch: usize) -> PathBuf {
        self.root
            .join("launches")
            .join(format!("launch-{launch}.json"))
    }

    /// `runs/EXP/`.
    pub fn experiment_dir(&self, experiment: &str) -> PathBuf {
        self.root.join("runs").join(experiment)
    }

    /// `runs/EXP/experiment.json`.
    pub fn experiment_spec(&self, experiment: &str) -> PathBuf {
        self.experiment_dir(experiment).join("experiment.json")
    }

    /// `runs/EXP/launch-K.json`.
    pub fn run_document(&self, experiment: &str, launch: usize) -> PathBuf {
        self.experiment_dir(experiment)
            .join(format!("launch-{launch}.json"))
    }

    /// `runs/EXP/launch-K.jsonl`.
    pub fn run_stream(&self, experiment: &str, launch: usize) -> PathBuf {
        self.experiment_dir(experiment)
            .join(format!("launch-{launch}.jsonl"))
    }

    /// `runs/EXP/launch-K.stderr`.
    pub fn run_stderr(&self, experiment: &str, launch: usize) -> PathBuf {
        self.experiment_dir(experiment)
            .join(format!("launch-{launch}.stderr"))
    }

    /// `EXP.jsonl`.
    pub fn records(&self, experiment: &str) -> PathBuf {
        self.root.join(format!("{experiment}.jsonl"))
    }

    /// `EXP.csv`.
    pub fn records_csv(&self, experiment: &str) -> PathBuf {
        self.root.join(format!("{experiment}.csv"))
    }

    /// `summary.json`.
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.json")
    }

    /// `summary.csv`.
    pub fn summary_csv(&self) -> PathBuf {
        self.root.join("summary.csv")
    }

    /// Whether the run of `experiment` in `launch` finished.
    pub fn is_done(&self, experiment: &str, launch: usize) -> bool {
        self.run_document(experiment, launch).is_file()
    }

    /// The finished launches of `experiment` among `0..launches`, ascending.
    pub fn done_launches(&self, experiment: &str, launches: usize) -> Vec<usize> {
        (0..launches)
            .filter(|&k| self.is_done(experiment, k))
            .collect()
    }

    /// Rewrites `EXP.jsonl` and `EXP.csv` from the documents of the finished
    /// `launches`: each record of each document with `"launch": K` first.
    ///
    /// # Errors
    /// Reading a document or writing the files; a document that is not JSON is
    /// [`io::ErrorKind::InvalidData`] naming it.
    pub fn combine(&self, experiment: &str, launches: &[usize]) -> io::Result<()> {
        let mut records = Vec::new();
        for &k in launches {
            let path = self.run_document(experiment, k);
            let doc: Value =
                serde_json::from_str(&std::fs::read_to_string(&path)?).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
            for r in document_records(&doc) {
                let mut with_launch = Map::new();
                with_launch.insert("launch".into(), k.into());
                with_launch.extend(r.into_iter().filter(|(k, _)| k != "launch"));
                records.push(with_launch);
            }
        }
        let mut jsonl = String::new();
        for r in &records {
            jsonl += &serde_json::to_string(r).map_err(io::Error::other)?;
            jsonl.push('\n');
        }
        write_atomically(&self.records(experiment), jsonl.as_bytes())?;
        write_atomically(&self.records_csv(experiment), &records_csv(&records)?)
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a
/// rename, so a reader (or a kill) sees the old file or the new one, never a part.
///
/// # Errors
/// Creating the directory, writing, syncing or renaming.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
    }
    std::fs::rename(&tmp, path)
}

/// The scalar leaves of a record, by dotted path (`half_rtt_us.median`); arrays
/// (repetitions, per-check lists) are left to the JSON.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(o) => {
            for (k, v) in o {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out);
            }
        }
        Value::Array(_) => {}
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Number(n) => out.push((prefix.to_string(), rounded(n))),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// A number as the CSV writes it: integers whole, others to [`CSV_DIGITS`]
/// significant digits (the JSON keeps every digit; a table needs no 17).
fn rounded(n: &serde_json::Number) -> String {
    let short = n.as_f64().filter(|_| n.is_f64()).and_then(|x| {
        let y: f64 = format!("{x:.*e}", CSV_DIGITS - 1).parse().ok()?;
        serde_json::Number::from_f64(y)
    });
    short.unwrap_or_else(|| n.clone()).to_string()
}

/// Significant digits of the numbers the CSV files hold.
pub const CSV_DIGITS: usize = 6;

/// Records as CSV: one column per scalar leaf any record has, in order of first
/// appearance; empty where a record lacks it.
///
/// # Errors
/// Only from the CSV writer.
pub fn records_csv(records: &[Map<String, Value>]) -> io::Result<Vec<u8>> {
    let rows: Vec<Vec<(String, String)>> = records
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            leaves("", &Value::Object(r.clone()), &mut out);
            out
        })
        .collect();
    let mut columns: Vec<String> = Vec::new();
    for row in &rows {
        for (k, _) in row {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&columns).map_err(io::Error::other)?;
    for row in &rows {
        let cells: Vec<&str> = columns
            .iter()
            .map(|c| {
                row.iter()
                    .find(|(k, _)| k == c)
                    .map_or("", |(_, v)| v.as_str())
            })
            .collect();
        w.write_record(&cells).map_err(io::Error::other)?;
    }
    w.into_inner().map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn combined_records_carry_their_launch_in_json_and_csv() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::new(tmp.path());
        for k in [0, 2] {
            let doc = json!({"meta": {"np": 2}, "results": [
                {"transport": "tcp", "size": 1, "half_rtt_us": {"median": 10.0 + k as f64},
                 "samples": {"half_rtt_us": [1.0, 2.0]}},
                {"transport": "tcp", "size": 2, "half_rtt_us": {"median": 11.0}, "extra": "a,b"}]});
            write_atomically(&dir.run_document("pp", k), doc.to_string().as_bytes()).unwrap();
        }
        assert_eq!(dir.done_launches("pp", 3), vec![0, 2]);
        assert!(!dir.is_done("pp", 1));
        dir.combine("pp", &[0, 2]).unwrap();
        let lines: Vec<Value> = std::fs::read_to_string(dir.records("pp"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2]["launch"], 2);
        assert_eq!(lines[2]["half_rtt_us"]["median"], 12.0);
        let csv = String::from_utf8(std::fs::read(dir.records_csv("pp")).unwrap()).unwrap();
        let mut rows = csv.lines();
        assert_eq!(
            rows.next().unwrap(),
            "launch,transport,size,half_rtt_us.median,extra"
        );
        assert_eq!(rows.next().unwrap(), "0,tcp,1,10.0,");
        assert_eq!(rows.next().unwrap(), "0,tcp,2,11.0,\"a,b\"");
        // And the results reader finds them by experiment.
        std::fs::write(dir.plan(), "{}").unwrap();
        let set = super::super::results::read(tmp.path(), None).unwrap();
        let launches = &set.series["pp"].points[&Some(1)];
        assert_eq!(launches.keys().copied().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(launches[&2].samples, vec![1.0, 2.0]);
    }

    /// Issue 37: numbers to 6 significant digits, not 17; integers whole.
    #[test]
    fn issue_37_csv_numbers_are_rounded() {
        let r = json!({"size": 65536, "half_rtt_us": {"median": 12.345678912345},
            "G_us_per_byte": 0.000312345678, "big": 123456789.5, "flag": true});
        let Value::Object(r) = r else { unreachable!() };
        let csv = String::from_utf8(records_csv(&[r]).unwrap()).unwrap();
        assert_eq!(
            csv,
            "size,half_rtt_us.median,G_us_per_byte,big,flag\n\
             65536,12.3457,0.000312346,123457000.0,true\n"
        );
    }

    #[test]
    fn an_atomic_write_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/c.json");
        write_atomically(&p, b"1").unwrap();
        write_atomically(&p, b"2").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"2");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("c.json")]);
    }
}
