//! `ngauge run FILE.toml [--output DIR]` and `ngauge run --resume DIR`: a suite of
//! experiments over several launches (Hunold & Carpen-Amarie, sec. 6.1), through
//! the library's suite runner ([`ngauge::suite`]). Each run is a child
//! `ngauge exec runs/EXP/experiment.json` (under the suite's launcher, if any).

use super::common::UsageError;
use crate::cli::{GlobalArgs, RunArgs};
use anyhow::Context;
use ngauge::report::progress::Progress;
use ngauge::report::table::Table;
use ngauge::suite::dir::{write_atomically, RunDir};
use ngauge::suite::file::{self, Suite};
use ngauge::suite::plan::Plan;
use ngauge::suite::runner::{self, Observer, RunRecord, RunRequest, RunStatus};
use ngauge::suite::summary::{refresh, Summary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The document of `ngauge run --json`.
#[derive(Serialize)]
struct RunDoc<'a> {
    directory: String,
    plan: &'a Plan,
    runs: usize,
    done: usize,
    failed: Vec<Failed>,
    left: usize,
    interrupted: bool,
    summary: Option<Summary>,
}

#[derive(Serialize)]
struct Failed {
    launch: usize,
    experiment: String,
    error: String,
}

pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<()> {
    let usage = |e: file::SuiteError| UsageError(e.to_string());
    let (dir, suite, plan) = match (&args.suite, &args.resume) {
        (Some(path), None) => {
            let suite = file::load(path).map_err(usage)?;
            let root = global
                .output
                .clone()
                .or_else(|| suite.output.clone())
                .unwrap_or_else(|| default_dir(path));
            let dir = RunDir::new(root);
            let plan = start(&dir, path, &suite)?;
            (dir, suite, plan)
        }
        (None, Some(root)) => {
            let dir = RunDir::new(root.clone());
            let plan_text = std::fs::read_to_string(dir.plan()).map_err(|_| {
                UsageError(format!(
                    "{} is not a run directory of `ngauge run` (it has no plan.json)",
                    root.display()
                ))
            })?;
            let plan: Plan = serde_json::from_str(&plan_text)
                .map_err(|e| UsageError(format!("{}: {e}", dir.plan().display())))?;
            let suite = file::load(&dir.suite_copy()).map_err(usage)?;
            let names: Vec<String> = suite.experiments.iter().map(|e| e.name.clone()).collect();
            if names != plan.experiments {
                return Err(UsageError(format!(
                    "{}: its experiments ({}) are not those of plan.json ({})",
                    dir.suite_copy().display(),
                    names.join(", "),
                    plan.experiments.join(", ")
                ))
                .into());
            }
            write_specs(&dir, &suite)?;
            (dir, suite, plan)
        }
        _ => unreachable!("clap requires exactly one of FILE and --resume"),
    };

    // Ctrl-C (or SIGTERM) stops the current run and keeps what finished; a second
    // Ctrl-C ends the runner at once (its child dies with it).
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())?;
        signal_hook::flag::register(signal, stop.clone())?;
    }

    let exe = std::env::current_exe().context("cannot find the ngauge binary")?;
    let command = |req: &RunRequest| child_command(&exe, &suite, req);
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut bar = Bar {
        progress: Progress::bar(terminal, plan.len() as u64),
    };
    let launches = plan.launches.len();
    let mut summary = None;
    let outcome = runner::run(&dir, &plan, &command, &stop, &mut bar, &mut |experiment| {
        summary = Some(refresh(&dir, experiment, launches)?);
        Ok(())
    })?;
    bar.progress.finish();
    drop(bar);
    let done = outcome.already_done + outcome.done;
    let left = plan.len() - done - outcome.failed.len();
    if summary.is_none() && done > 0 {
        // A resumed directory whose runs were all done already.
        if let Some(e) = plan.experiments.first() {
            summary = Some(refresh(&dir, e, launches)?);
        }
    }
    let root = dir.root().display().to_string();
    if global.json {
        super::common::print_json(&RunDoc {
            directory: root.clone(),
            plan: &plan,
            runs: plan.len(),
            done,
            failed: outcome
                .failed
                .iter()
                .map(|(launch, experiment, error)| Failed {
                    launch: *launch,
                    experiment: experiment.clone(),
                    error: error.clone(),
                })
                .collect(),
            left,
            interrupted: outcome.interrupted,
            summary: summary.clone(),
        })?;
    } else {
        let mut text = format!(
            "{}: {done} of {} runs done ({} now, {} before), {} failed; results in {root}\n",
            plan.suite,
            plan.len(),
            outcome.done,
            outcome.already_done,
            outcome.failed.len()
        );
        if let Some(s) = &summary {
            text += &render_summary(s);
        }
        super::common::print_text(&text)?;
    }
    if outcome.interrupted {
        eprintln!("ngauge: interrupted: {left} runs left; `ngauge run --resume {root}` runs them");
        std::process::exit(130);
    }
    if !outcome.failed.is_empty() {
        anyhow::bail!(
            "{} runs failed (their stderr is in {root}/runs/EXP/launch-K.stderr); \
             `ngauge run --resume {root}` runs them again",
            outcome.failed.len()
        );
    }
    Ok(())
}

/// A new run: the directory (refused when it holds anything), the suite's copy,
/// the plan, the experiments' specs.
fn start(dir: &RunDir, path: &Path, suite: &Suite) -> anyhow::Result<Plan> {
    let root = dir.root();
    if std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_some()) {
        return Err(UsageError(format!(
            "{} exists and is not empty; give another --output, or finish an \
             interrupted run with --resume {}",
            root.display(),
            root.display()
        ))
        .into());
    }
    // The directory is the run's only output: one that cannot be made is the
    // user's input, like any other command's output file.
    std::fs::create_dir_all(root).map_err(|e| {
        UsageError(format!(
            "cannot create the run directory {}: {e}",
            root.display()
        ))
    })?;
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    write_atomically(&dir.suite_copy(), &text)
        .with_context(|| format!("cannot write {}", dir.suite_copy().display()))?;
    let seed = suite.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let names: Vec<String> = suite.experiments.iter().map(|e| e.name.clone()).collect();
    let plan = Plan::new(&path.display().to_string(), seed, &names, suite.launches);
    write_atomically(&dir.plan(), serde_json::to_string_pretty(&plan)?.as_bytes())
        .with_context(|| format!("cannot write {}", dir.plan().display()))?;
    write_specs(dir, suite)?;
    Ok(plan)
}

/// `runs/EXP/experiment.json` of every experiment; the runs of every measuring
/// command record their repetitions, for the statistics per launch (simulate is
/// deterministic: one value per launch).
fn write_specs(dir: &RunDir, suite: &Suite) -> anyhow::Result<()> {
    for e in &suite.experiments {
        let mut e = e.clone();
        e.kind.keep_samples();
        let path = dir.experiment_spec(&e.name);
        write_atomically(&path, serde_json::to_string_pretty(&e)?.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// `SUITE-YYYYMMDDTHHMMSSZ` in the current directory.
fn default_dir(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("suite".into(), |s| s.to_string_lossy().into_owned());
    let date =
        ngauge::time_format::rfc3339_utc(std::time::SystemTime::now()).replace(['-', ':'], "");
    PathBuf::from(format!("{stem}-{date}"))
}

/// The child that does one run: `[launcher] ngauge exec SPEC --json --output STREAM`.
fn child_command(exe: &Path, suite: &Suite, req: &RunRequest) -> Command {
    let e = suite
        .experiments
        .iter()
        .find(|e| e.name == req.experiment)
        .expect("the plan's experiments are the suite's");
    let np = e.np.to_string();
    let mut argv: Vec<std::ffi::OsString> = e
        .launcher
        .as_ref()
        .or(suite.launcher.as_ref())
        .map(|l| l.iter().map(|a| a.replace("{np}", &np).into()).collect())
        .unwrap_or_default();
    argv.push(exe.into());
    argv.extend([
        "exec".into(),
        req.spec.clone().into_os_string(),
        "--json".into(),
        "--output".into(),
        req.stream.clone().into_os_string(),
    ]);
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

/// The suite's progress bar; failures are printed above it as they happen.
struct Bar {
    progress: Progress,
}

impl Observer for Bar {
    fn starting(&mut self, launch: usize, experiment: &str, position: usize, _total: usize) {
        self.progress.set_position(position as u64);
        self.progress
            .update(&format!("launch {launch}: {experiment}"));
    }

    fn ended(&mut self, r: &RunRecord) {
        if r.status == RunStatus::Failed {
            self.progress.println(&format!(
                "ngauge: warning: {} failed: {}",
                r.experiment,
                r.error.as_deref().unwrap_or("no document")
            ));
        }
    }
}

/// The human summary: per experiment and size the median of the per-launch
/// medians and its interval.
fn render_summary(s: &Summary) -> String {
    let mut t = Table::new([
        "experiment",
        "metric",
        "size [B]",
        "launches",
        "median of medians",
        "95% CI",
    ]);
    for e in &s.experiments {
        for p in &e.sizes {
            let st = &p.stats;
            t.row([
                e.experiment.clone(),
                e.metric.clone(),
                p.size.map_or("-".into(), |s| s.to_string()),
                st.launches.len().to_string(),
                format!("{:.3}", st.median_of_medians),
                st.median_ci
                    .map_or("-".into(), |c| format!("[{:.3}, {:.3}]", c.lo, c.hi)),
            ]);
        }
    }
    t.render()
}
