//! Running a plan: each (launch, experiment) as a job of its own, one after the
//! other, every finished run kept on disk at once.
//!
//! **How a launch is done.** The paper's launch is one `mpirun` that runs every
//! experiment in a shuffled order (Algorithm 5). Here a launch is one pass over the
//! experiments in its shuffled order, and each experiment of it is started as a
//! job of its own: a child `ngauge` process (the local launcher starting `np`
//! ranks, or the suite's `launcher` command such as `mpirun -np 2` around it), with
//! its own transports, pinning and timer calibration. The launch factor the paper
//! found (sec. 5.2) is therefore sampled once per experiment and launch, at least
//! as often as in the paper. Separate jobs are also what makes a suite possible at
//! all: its experiments may differ in `np`, transports and launcher, which one job
//! cannot, and a run that loses a rank costs that run only.
//!
//! The child's document (stdout) goes to a temporary file renamed into place when
//! the child exits 0 with a JSON document: only then is the run done. Its stream
//! (`--output`) and stderr land beside it. The caller builds the child's command
//! ([`RunRequest`] -> [`Command`]), so this module names no flag.
//!
//! **Interruption.** The runner checks `stop` while it waits: when it is set (the
//! binary sets it on SIGINT/SIGTERM) the current child is killed, its run is
//! recorded as interrupted and the runner returns. Children started with
//! [`RUNNER_PID_ENV`] ask the kernel to kill them if the runner dies without
//! that chance (SIGKILL), and the local launcher's ranks die with their launcher,
//! so no orphan keeps measuring beside a resumed suite.

use super::dir::{write_atomically, RunDir};
use super::plan::Plan;
use crate::time_format::rfc3339_utc;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Environment variable a child of the runner finds its runner's pid in (see the
/// module doc).
pub const RUNNER_PID_ENV: &str = "NGAUGE_RUNNER_PID";

/// In a child of the runner (one run): die with the runner. A runner killed with
/// SIGKILL cannot stop its child, so the child asks the kernel to kill it when
/// the runner goes (`PR_SET_PDEATHSIG`), and exits if the runner is gone already.
/// Under a launcher command (`mpirun`) the runner is no parent: the process only
/// exits if the runner is gone (its launcher's own rules end it otherwise). Reads
/// [`RUNNER_PID_ENV`] from the process environment; without it, does nothing.
pub fn die_with_runner() {
    use rustix::process::{getppid, set_parent_process_death_signal, Pid, Signal};
    let Some(runner) = std::env::var(RUNNER_PID_ENV)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
        .and_then(Pid::from_raw)
    else {
        return;
    };
    if getppid() == Some(runner) {
        let _ = set_parent_process_death_signal(Some(Signal::KILL));
        // The runner may have gone between the spawn and the call above.
        if getppid() == Some(runner) {
            return;
        }
    } else if rustix::process::test_kill_process(runner).is_ok() {
        return;
    }
    eprintln!(
        "ngauge: the suite runner (pid {}) is gone; exiting",
        runner.as_raw_nonzero()
    );
    std::process::exit(1);
}

/// What the caller needs to build one run's command.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The experiment.
    pub experiment: String,
    /// The launch, from 0.
    pub launch: usize,
    /// The experiment's spec file (`runs/EXP/experiment.json`).
    pub spec: PathBuf,
    /// Where the run's stream goes (`runs/EXP/launch-K.jsonl`).
    pub stream: PathBuf,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Exit status 0 and a JSON document: kept.
    Done,
    /// Anything else: a lost rank, an error, no document.
    Failed,
    /// Stopped by the user (SIGINT, SIGTERM).
    Interrupted,
}

/// One run as its launch's record keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The experiment.
    pub experiment: String,
    /// How it ended.
    pub status: RunStatus,
    /// The child's exit status (128 + signal when killed by one).
    pub exit_code: Option<i32>,
    /// When it started, UTC.
    pub started: String,
    /// How long it took, seconds.
    pub duration_s: f64,
    /// The command that ran it.
    pub command_line: Vec<String>,
    /// The last line of its stderr when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The factors of Hunold & Carpen-Amarie's Table VI, from the document's
    /// `meta` (when it finished).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factors: Option<Factors>,
}

/// The experimental factors of Hunold & Carpen-Amarie's Table VI (plus host,
/// kernel, timer and date), as one run's document records them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    /// The implementation measured: ngauge's version and git revision, and the MPI
    /// library when the document names one.
    pub implementation: String,
    /// Transports and their wait modes.
    pub transport: String,
    /// Clock synchronization method, when one was used.
    pub sync: Option<String>,
    /// Compiler.
    pub compiler: String,
    /// Compiler flags: profile, optimisation level, target features.
    pub flags: String,
    /// DVFS state: the frequency governor, or why there is none.
    pub frequency: String,
    /// The core of each rank (`null`: unpinned).
    pub pinning: Value,
    /// Launcher and number of ranks.
    pub launcher: String,
    /// Timer source and frequency.
    pub timer: String,
    /// Host name.
    pub host: String,
    /// Kernel release.
    pub kernel: String,
    /// When the run measured, UTC.
    pub date: String,
}

impl Factors {
    /// The factors in a document's `meta`; `None` without one.
    pub fn of_document(doc: &Value) -> Option<Factors> {
        let m = doc.get("meta")?.as_object()?;
        let s = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => "unknown".into(),
            Some(other) => other.to_string(),
        };
        let b = m.get("build");
        let bs = |k: &str| s(b.and_then(|b| b.get(k)));
        let list = |v: Option<&Value>| match v {
            Some(Value::Array(a)) => a.iter().map(|x| s(Some(x))).collect::<Vec<_>>().join(","),
            other => s(other),
        };
        let mut implementation = format!("ngauge {} ({})", s(m.get("version")), bs("git"));
        if let Some(Value::String(mpi)) = m.get("mpi_library") {
            implementation += &format!(", {mpi}");
        }
        Some(Factors {
            implementation,
            transport: match m.get("wait") {
                Some(Value::String(w)) => format!("{} (wait {w})", list(m.get("transport"))),
                _ => list(m.get("transport")),
            },
            sync: m.get("sync").filter(|v| !v.is_null()).map(|v| s(Some(v))),
            compiler: bs("rustc"),
            flags: format!(
                "profile {}, opt-level {}, target {}, features {}",
                bs("profile"),
                bs("opt_level"),
                bs("target"),
                bs("target_features")
            ),
            frequency: s(m.get("frequency_control")),
            pinning: m.get("pinning").cloned().unwrap_or(Value::Null),
            launcher: format!("{}, np {}", s(m.get("launcher")), s(m.get("np"))),
            timer: format!("{} at {} Hz", s(m.get("timer")), s(m.get("timer_hz"))),
            host: s(m.get("host")),
            kernel: s(m.get("kernel")),
            date: s(m.get("date")),
        })
    }
}

/// `launches/launch-K.json`: a launch's plan and its runs, appended as they end
/// (a resumed launch adds the runs it completes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// The launch, from 0.
    pub launch: usize,
    /// The seed of its order.
    pub seed: u64,
    /// Its order of experiments.
    pub order: Vec<String>,
    /// Its runs, in the order they ended.
    pub runs: Vec<RunRecord>,
}

/// What a call of [`run`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Runs done before this call (a resumed directory).
    pub already_done: usize,
    /// Runs this call finished.
    pub done: usize,
    /// Runs that failed: (launch, experiment, the last line of their stderr).
    pub failed: Vec<(usize, String, String)>,
    /// Whether `stop` ended the call early.
    pub interrupted: bool,
}

/// Progress of a suite, for a display.
pub trait Observer {
    /// A run starts; `position` runs of `total` are behind it (done or failed).
    fn starting(&mut self, launch: usize, experiment: &str, position: usize, total: usize);
    /// A run ended.
    fn ended(&mut self, record: &RunRecord);
}

/// Why the runner stopped before its plan was through.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The run directory could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What was being written or read.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
    /// A child could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RunnerError {
    let what = what.into();
    move |source| RunnerError::Io { what, source }
}

/// Runs every run of `plan` that `dir` does not hold yet, in plan order; after each
/// run, `after_run` may rewrite derived files (combined records, summary).
///
/// # Errors
/// Writing the directory or starting a child; a run that fails is not an error
/// (it is recorded, and [`Outcome::failed`] lists it).
pub fn run(
    dir: &RunDir,
    plan: &Plan,
    command: &dyn Fn(&RunRequest) -> Command,
    stop: &AtomicBool,
    observer: &mut dyn Observer,
    after_run: &mut dyn FnMut(&str) -> io::Result<()>,
) -> Result<Outcome, RunnerError> {
    let total = plan.len();
    let mut outcome = Outcome {
        already_done: plan.runs().filter(|(k, e)| dir.is_done(e, *k)).count(),
        ..Outcome::default()
    };
    for (launch, experiment) in plan.runs() {
        if dir.is_done(experiment, launch) {
            continue;
        }
        if stop.load(Ordering::SeqCst) {
            outcome.interrupted = true;
            break;
        }
        let position = outcome.already_done + outcome.done + outcome.failed.len();
        observer.starting(launch, experiment, position, total);
        let request = RunRequest {
            experiment: experiment.to_string(),
            launch,
            spec: dir.experiment_spec(experiment),
            stream: dir.run_stream(experiment, launch),
        };
        let record = run_one(dir, &request, command(&request), stop)?;
        append_launch_record(dir, plan, launch, &record)?;
        observer.ended(&record);
        match record.status {
            RunStatus::Done => {
                outcome.done += 1;
                after_run(experiment).map_err(io_err(format!(
                    "updating the files of experiment {experiment}"
                )))?;
            }
            RunStatus::Failed => outcome.failed.push((
                launch,
                experiment.to_string(),
                record.error.clone().unwrap_or_default(),
            )),
            RunStatus::Interrupted => {
                outcome.interrupted = true;
                break;
            }
        }
    }
    Ok(outcome)
}

/// Runs one child and keeps its document if it succeeded.
fn run_one(
    dir: &RunDir,
    request: &RunRequest,
    mut command: Command,
    stop: &AtomicBool,
) -> Result<RunRecord, RunnerError> {
    let exp_dir = dir.experiment_dir(&request.experiment);
    std::fs::create_dir_all(&exp_dir).map_err(io_err(format!("creating {}", exp_dir.display())))?;
    let doc_path = dir.run_document(&request.experiment, request.launch);
    let mut partial = doc_path.clone().into_os_string();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let stderr_path = dir.run_stderr(&request.experiment, request.launch);
    let stdout =
        File::create(&partial).map_err(io_err(format!("creating {}", partial.display())))?;
    let stderr = File::create(&stderr_path)
        .map_err(io_err(format!("creating {}", stderr_path.display())))?;
    command
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .env(RUNNER_PID_ENV, std::process::id().to_string());
    let command_line: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let started = SystemTime::now();
    let clock = Instant::now();
    let mut child = command.spawn().map_err(|source| RunnerError::Spawn {
        program: command_line[0].clone(),
        source,
    })?;
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .map_err(io_err("waiting for a run".to_string()))?
        {
            break status;
        }
        if stop.load(Ordering::SeqCst) && !stopped {
            // Its ranks die with it (PR_SET_PDEATHSIG in the local launcher).
            let _ = child.kill();
            stopped = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let exit_code = exit_code(&status);
    let duration_s = clock.elapsed().as_secs_f64();
    let doc: Option<Value> = std::fs::read_to_string(&partial)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let interrupted = stop.load(Ordering::SeqCst);
    let status = match (&doc, status.success(), interrupted) {
        (Some(_), true, _) => RunStatus::Done,
        (_, _, true) => RunStatus::Interrupted,
        _ => RunStatus::Failed,
    };
    let mut error = None;
    if status == RunStatus::Done {
        let text =
            std::fs::read(&partial).map_err(io_err(format!("reading {}", partial.display())))?;
        write_atomically(&doc_path, &text)
            .map_err(io_err(format!("writing {}", doc_path.display())))?;
    } else {
        error = Some(last_line(&stderr_path).unwrap_or_else(|| match exit_code {
            Some(c) => format!("exit status {c}, no document"),
            None => "no document".into(),
        }));
    }
    let _ = std::fs::remove_file(&partial);
    Ok(RunRecord {
        experiment: request.experiment.clone(),
        status,
        exit_code,
        started: rfc3339_utc(started),
        duration_s,
        command_line,
        error,
        factors: doc.as_ref().and_then(Factors::of_document),
    })
}

/// A child's exit code, or 128 + the signal that killed it (the shell's convention).
fn exit_code(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// The last non-empty line of a file.
fn last_line(path: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Appends `record` to `launches/launch-K.json`, creating it from the plan.
fn append_launch_record(
    dir: &RunDir,
    plan: &Plan,
    launch: usize,
    record: &RunRecord,
) -> Result<(), RunnerError> {
    let path = dir.launch_meta(launch);
    let mut lr = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| RunnerError::Io {
            what: format!("reading {}", path.display()),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })?,
        Err(_) => {
            let lp = &plan.launches[launch];
            LaunchRecord {
                launch,
                seed: lp.seed,
                order: lp.order.clone(),
                runs: Vec::new(),
            }
        }
    };
    lr.runs.push(record.clone());
    let text = serde_json::to_string_pretty(&lr).map_err(|e| RunnerError::Io {
        what: "serialising a launch record".into(),
        source: io::Error::other(e),
    })?;
    write_atomically(&path, text.as_bytes()).map_err(io_err(format!("writing {}", path.display())))
}

#[cfg(test)]
/// An observer that shows nothing.
struct Quiet;

#[cfg(test)]
impl Observer for Quiet {
    fn starting(&mut self, _: usize, _: &str, _: usize, _: usize) {}
    fn ended(&mut self, _: &RunRecord) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A child that prints a document naming its experiment and launch, or fails
    /// for the experiment `bad`.
    fn shell(req: &RunRequest) -> Command {
        let mut c = Command::new("sh");
        let script = if req.experiment == "bad" {
            "echo 'rank 1 lost' >&2; exit 3".to_string()
        } else {
            format!(
                "printf '%s' '{}'",
                json!({"meta": {"version": "0.1.0", "host": "h", "build": {"rustc": "rustc 1.85"}},
                       "results": [{"size": 1, "half_rtt_us": {"median": req.launch as f64 + 1.0}}]})
            )
        };
        c.args(["-c", &script]);
        c
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn runs_every_run_keeps_documents_and_records_failures() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::new(tmp.path());
        let plan = Plan::new("s.toml", 1, &names(&["a", "bad"]), 2);
        let stop = AtomicBool::new(false);
        let mut updated = Vec::new();
        let out = run(&dir, &plan, &shell, &stop, &mut Quiet, &mut |e| {
            updated.push(e.to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!((out.done, out.already_done, out.interrupted), (2, 0, false));
        assert_eq!(out.failed.len(), 2);
        assert_eq!(out.failed[0].2, "rank 1 lost");
        assert_eq!(updated, ["a", "a"]);
        assert!(dir.is_done("a", 0) && dir.is_done("a", 1) && !dir.is_done("bad", 0));
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.run_document("a", 1)).unwrap())
                .unwrap();
        assert_eq!(doc["results"][0]["half_rtt_us"]["median"], 2.0);
        let lr: LaunchRecord =
            serde_json::from_str(&std::fs::read_to_string(dir.launch_meta(0)).unwrap()).unwrap();
        assert_eq!(lr.runs.len(), 2);
        let a = lr.runs.iter().find(|r| r.experiment == "a").unwrap();
        assert_eq!((a.status, a.exit_code), (RunStatus::Done, Some(0)));
        let f = a.factors.as_ref().unwrap();
        assert_eq!((f.compiler.as_str(), f.host.as_str()), ("rustc 1.85", "h"));
        assert!(f.implementation.starts_with("ngauge 0.1.0"));
        let bad = lr.runs.iter().find(|r| r.experiment == "bad").unwrap();
        assert_eq!((bad.status, bad.exit_code), (RunStatus::Failed, Some(3)));
        assert_eq!(bad.command_line[0], "sh");
        // Resuming runs only the failed runs again.
        let out = run(&dir, &plan, &shell, &stop, &mut Quiet, &mut |_| Ok(())).unwrap();
        assert_eq!((out.already_done, out.done, out.failed.len()), (2, 0, 2));
        let lr: LaunchRecord =
            serde_json::from_str(&std::fs::read_to_string(dir.launch_meta(0)).unwrap()).unwrap();
        assert_eq!(lr.runs.len(), 3, "the retried run is appended");
    }

    #[test]
    fn stop_kills_the_running_child_and_keeps_what_finished() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::new(tmp.path());
        let plan = Plan::new("s.toml", 1, &names(&["slow"]), 3);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let count = std::cell::Cell::new(0);
        let command = |req: &RunRequest| {
            count.set(count.get() + 1);
            let mut c = shell(req);
            if req.launch == 1 {
                // The second launch hangs until killed; ask for a stop meanwhile.
                let flag = flag.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(200));
                    flag.store(true, Ordering::SeqCst);
                });
                c = Command::new("sleep");
                c.arg("30");
            }
            c
        };
        let t = Instant::now();
        let out = run(&dir, &plan, &command, &stop, &mut Quiet, &mut |_| Ok(())).unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the child was killed"
        );
        assert_eq!((out.done, out.interrupted, count.get()), (1, true, 2));
        assert!(dir.is_done("slow", 0) && !dir.is_done("slow", 1));
        let lr: LaunchRecord =
            serde_json::from_str(&std::fs::read_to_string(dir.launch_meta(1)).unwrap()).unwrap();
        assert_eq!(lr.runs[0].status, RunStatus::Interrupted);
        assert_eq!(lr.runs[0].exit_code, Some(128 + 9));
    }
}
