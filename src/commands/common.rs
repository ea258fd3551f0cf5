//! What every subcommand shares: starting the job, the job spec of the global flags,
//! metadata, warnings and printing.

use crate::cli::GlobalArgs;
use anyhow::Context as _;
use ngauge::clock::TimerSource;
use ngauge::experiment::{Context, ExperimentError, Records};
use ngauge::job::{
    JobError, JobSpec, JobWarning, OfiSpec, TransportName, UcxSpec, VerbsSpec, WaitPolicy,
};
use ngauge::launch::{self, LaunchOptions, Started, World};
use ngauge::report::document::Export;
use ngauge::report::effort::EffortWarning;
use ngauge::report::jsonl::JsonlWriter;
use ngauge::report::{Document, MetaBuilder, SetupWarning};
use std::path::{Path, PathBuf};

/// Bad input found after parsing (a size list, a config value): exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The flag of a spec's field: `--` and the field with `-` for `_`, but for the
/// fields whose flag takes a unit.
pub fn flag_of(field: &str) -> String {
    match field {
        "check_after_s" => "--check-after".into(),
        "duration_ns" => "--duration".into(),
        "delay_ns" => "--delay".into(),
        "test_every_ns" => "--test-every".into(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// A spec error as the command line says it: naming the flag.
pub fn spec_usage(e: ngauge::spec::SpecError) -> UsageError {
    UsageError(format!("{}: {}", flag_of(e.field), e.message))
}

/// Most ranks `--np` may start (a simulation may have more).
pub const MAX_LAUNCH_NP: u32 = 4096;

/// The launcher options in the global flags.
pub fn launch_options(global: &GlobalArgs) -> LaunchOptions {
    LaunchOptions {
        np: global.np as usize,
        rank: global.rank,
        size: global.size.map(|s| s as usize),
        rendezvous: global.rendezvous.clone(),
        bind: global.bind.clone(),
        job_token: global.job_token.clone(),
        data_addr: global.data_addr,
        timeout: std::time::Duration::from_secs_f64(global.timeout),
        verbose: global.verbose,
    }
}

/// The job spec the global flags describe.
pub fn job_spec(global: &GlobalArgs) -> JobSpec {
    JobSpec {
        transports: global.transport.clone(),
        wait: global.wait,
        send_buffer_bytes: global.sndbuf,
        recv_buffer_bytes: global.rcvbuf,
        timeout_s: global.timeout,
        verbs: VerbsSpec {
            device: global.verbs.device.clone(),
            port: global.verbs.port,
            gid_index: global.verbs.gid_index,
            op: global.verbs.verbs_op,
        },
        ucx: UcxSpec {
            tls: global.ucx.ucx_tls.clone(),
            op: global.ucx.ucx_op,
            connect: global.ucx.ucx_connect,
            listen_ip: global.ucx.ucx_listen_ip,
        },
        ofi: OfiSpec {
            provider: global.ofi.ofi_provider.clone(),
            op: global.ofi.ofi_op,
        },
    }
}

/// The global flags with the job of `spec` and `np` ranks in place of the
/// transport flags and `--np` (the inverse of [`job_spec`]): how a suite's
/// experiment runs through the same code as a command line.
pub fn with_job(global: &GlobalArgs, spec: &JobSpec, np: usize) -> GlobalArgs {
    let mut g = global.clone();
    g.transport = spec.transports.clone();
    g.wait = spec.wait;
    g.sndbuf = spec.send_buffer_bytes;
    g.rcvbuf = spec.recv_buffer_bytes;
    g.timeout = spec.timeout_s;
    g.verbs.device = spec.verbs.device.clone();
    g.verbs.port = spec.verbs.port;
    g.verbs.gid_index = spec.verbs.gid_index;
    g.verbs.verbs_op = spec.verbs.op;
    g.ucx.ucx_tls = spec.ucx.tls.clone();
    g.ucx.ucx_op = spec.ucx.op;
    g.ucx.ucx_connect = spec.ucx.connect;
    g.ucx.ucx_listen_ip = spec.ucx.listen_ip;
    g.ofi.ofi_provider = spec.ofi.provider.clone();
    g.ofi.ofi_op = spec.ofi.op;
    g.np = np as u32;
    g
}

/// A job error for the command line: the user's input is a [`UsageError`]
/// (exit status 2), with the flag named where the library's words do not say it.
pub fn job_error(e: JobError) -> anyhow::Error {
    if !e.is_input() {
        return anyhow::Error::new(e);
    }
    let text = match &e {
        JobError::DuplicateTransport(_) | JobError::NoTransport => format!("--transport: {e}"),
        JobError::NotCompiled {
            transport: TransportName::Mpi,
            ..
        } => format!("-t mpi: {e}"),
        JobError::BadTimeout(_) => format!("--timeout: {e}"),
        JobError::BadBuffer { .. } => format!("--sndbuf/--rcvbuf: {e}"),
        JobError::BadVerbsPort => format!("--port: {e}"),
        _ => e.to_string(),
    };
    anyhow::Error::new(UsageError(text))
}

/// The metadata of a result timed by `source` at `hz`, with this command line.
pub fn meta(source: ngauge::clock::TimerSource, hz: f64) -> MetaBuilder {
    ngauge::report::Meta::builder(std::env::args(), source, hz)
}

/// Prints a warning on stderr (after the results): its message and, when the
/// command line has one, a hint naming the flag to try.
pub fn warn(message: impl std::fmt::Display, hint: Option<String>) {
    match hint {
        Some(hint) => eprintln!("ngauge: warning: {message}; {hint}"),
        None => eprintln!("ngauge: warning: {message}"),
    }
}

/// The hint for too few valid calls in a window round: more rounds, and blocking
/// only where the job polls (a job that blocks already does).
pub fn few_valid_hint(global: &GlobalArgs) -> String {
    match global.wait {
        WaitPolicy::Poll => "raise --max-rounds, or --wait block when ranks share cores".into(),
        WaitPolicy::Auto | WaitPolicy::Block => "raise --max-rounds".into(),
    }
}

/// The command line's hint for a warning every command may carry: the job's, the
/// binding's, a clock synchronization's (every command that synchronizes clocks
/// shares `sync`'s flags).
pub fn setup_hint(w: &SetupWarning) -> Option<String> {
    match w {
        SetupWarning::Job(JobWarning::PollOversubscribed { .. }) => {
            Some("use --wait block (or auto, the default, which blocks here)".into())
        }
        SetupWarning::Binding(b) => Some(b.hint().into()),
        SetupWarning::Sync(EffortWarning::CrossedBrackets { .. }) => None,
        SetupWarning::Sync(EffortWarning::DroppedDrift { .. }) => Some(
            "more --fitpoints or --exchanges spread the fit over a longer time, where a drift can show"
                .into(),
        ),
    }
}

/// A failed experiment for the command line: the user's input is a
/// [`UsageError`] (exit status 2), naming the flag where the library names a field.
pub fn experiment_error(e: ExperimentError) -> anyhow::Error {
    match e {
        ExperimentError::Spec(s) => spec_usage(s).into(),
        ExperimentError::Job(j) => job_error(j),
        ExperimentError::TooFewRanks { needed, .. } => {
            UsageError(format!("{e} (--np {needed} or more)")).into()
        }
        e if e.is_input() => UsageError(e.to_string()).into(),
        e => anyhow::Error::new(e),
    }
}

/// The `-o` stream, when this process `writes` it (rank 0).
pub fn records(global: &GlobalArgs, writes: bool) -> anyhow::Result<Option<Outputs>> {
    if !writes || (global.output.is_none() && global.csv.is_none()) {
        return Ok(None);
    }
    let cannot = |path: &Path| format!("cannot create {}", path.display());
    let jsonl = (global.output.as_deref())
        .map(|path| JsonlWriter::create(path).with_context(|| cannot(path)))
        .transpose()?;
    let csv = match &global.csv {
        Some(path) => {
            std::fs::File::create(path).with_context(|| cannot(path))?;
            Some((path.clone(), Vec::new()))
        }
        None => None,
    };
    Ok(Some(Outputs { jsonl, csv }))
}

/// Where a command's records go: `-o` (JSON lines, appended as each point
/// finishes) and `--csv` (the same records as CSV, rewritten whole after each by
/// the writer of `run`'s directories, [`ngauge::suite::dir::records_csv`]).
pub struct Outputs {
    jsonl: Option<JsonlWriter>,
    csv: Option<(PathBuf, Vec<serde_json::Map<String, serde_json::Value>>)>,
}

impl Outputs {
    /// Writes one record.
    pub fn write<T: serde::Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        self.record(&serde_json::to_string(record).map_err(std::io::Error::other)?)
    }
}

impl Records for Outputs {
    fn record(&mut self, json: &str) -> std::io::Result<()> {
        if let Some(w) = &mut self.jsonl {
            w.write_line(json)?;
        }
        if let Some((path, rows)) = &mut self.csv {
            match serde_json::from_str(json).map_err(std::io::Error::other)? {
                serde_json::Value::Object(record) => rows.push(record),
                other => rows.push([("value".to_string(), other)].into_iter().collect()),
            }
            let bytes = ngauge::suite::dir::records_csv(rows)?;
            ngauge::suite::dir::write_atomically(path, &bytes)?;
        }
        Ok(())
    }
}

/// The context of an experiment on rank 0 (`rank0`) or another rank: this command
/// line, the `-o` and `--csv` records, the progress line when stderr is a terminal,
/// the `timer` its clocks read.
pub fn context(rank0: bool, timer: TimerSource, writer: Option<&mut Outputs>) -> Context<'_> {
    Context {
        command_line: std::env::args().collect(),
        records: writer.map(|w| w as &mut dyn Records),
        progress: rank0 && launch::local::stderr_is_terminal(),
        timer,
    }
}

/// The timer `--timer` names, or the house default ([`TimerSource::detect`]); one
/// this machine cannot read is a [`UsageError`].
pub fn timer(global: &GlobalArgs) -> anyhow::Result<TimerSource> {
    let Some(chosen) = global.timer else {
        return Ok(TimerSource::detect());
    };
    chosen
        .usable()
        .map_err(|e| UsageError(format!("--timer {chosen}: {e}")).into())
}

/// The files the command line exports a document to, each named by its flag:
/// `--plot` (an `Option<&Path>` converts to it), `loggp`'s `--params-out` and
/// `--netgauge-out`.
pub struct Exports<'a>(pub Vec<(Export, &'a Path)>);

impl<'a> From<Option<&'a Path>> for Exports<'a> {
    fn from(plot: Option<&'a Path>) -> Self {
        Exports(plot.map(|p| (Export::Plot, p)).into_iter().collect())
    }
}

/// The file of one `part` of an export to `path`: `gap.svg` becomes `gap.tcp.svg`
/// for the part `tcp` (a document of one part: `path`).
pub fn part_path(path: &Path, part: Option<&str>) -> PathBuf {
    let Some(part) = part else {
        return path.to_path_buf();
    };
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_string_lossy());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{part}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{part}"),
    };
    path.with_file_name(name)
}

/// Runs a measuring command's `experiment` on every rank of the job the flags
/// start, and ends the command on rank 0 with its document (see [`end`]).
pub fn measure<'a, D: Document>(
    global: &GlobalArgs,
    exports: impl Into<Exports<'a>>,
    experiment: impl FnOnce(&mut World, &mut Context) -> Result<Option<D>, ExperimentError>,
    hint: impl Fn(&D::Warning) -> Option<String>,
) -> anyhow::Result<()> {
    let exports = exports.into();
    let timer = timer(global)?;
    with_world(global, |world| {
        let mut writer = records(global, world.rank == 0)?;
        let mut ctx = context(world.rank == 0, timer, writer.as_mut());
        match experiment(world, &mut ctx).map_err(experiment_error)? {
            Some(doc) => end(global, &doc, exports, hint),
            None => Ok(()),
        }
    })
}

/// The end of every measuring command: its exports to their files (`--plot`...),
/// its document as JSON (`--json`) or as its tables on stdout, then its warnings
/// on stderr, each after its prefix and with the command line's `hint`, one line
/// per cause ([`ngauge::report::warning::lines`]).
///
/// Generic only in what needs the document's type; the rest is [`end_said`],
/// compiled once for every command.
pub fn end<'a, D: Document>(
    global: &GlobalArgs,
    doc: &D,
    exports: impl Into<Exports<'a>>,
    hint: impl Fn(&D::Warning) -> Option<String>,
) -> anyhow::Result<()> {
    let exports = exports.into();
    let mut files = Vec::new();
    for (export, path) in exports.0 {
        for (part, text) in doc.export(export) {
            files.push((part_path(path, part.as_deref()), text));
        }
    }
    let text = if global.json {
        json_text(doc)?
    } else {
        doc.render()
    };
    let warnings: Vec<_> = (doc.warnings().into_iter())
        .map(|(prefix, w)| (prefix, w, hint(w)))
        .collect();
    end_said(files, &text, ngauge::report::warning::lines(&warnings))
}

/// [`end`] once the document is in words: writes each export file (`(path, text
/// or the error drawing it)`), prints `text` and then each warning line.
fn end_said(
    files: Vec<(PathBuf, Result<String, String>)>,
    text: &str,
    warning_lines: Vec<String>,
) -> anyhow::Result<()> {
    for (path, text) in files {
        let text = text.map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_text(text)?;
    for line in warning_lines {
        warn(line, None);
    }
    Ok(())
}

/// Starts the job and runs `body` on every rank; in the local launcher's parent,
/// waits for the ranks and exits with their worst status. Only rank 0 prints
/// results; `body` decides that by `world.rank`.
pub fn with_world(
    global: &GlobalArgs,
    body: impl FnOnce(&mut World) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    // One copy of the job's start and end for every command, not one per closure.
    with_world_dyn(global, Box::new(body))
}

/// [`with_world`] with its body boxed.
#[allow(clippy::type_complexity)]
fn with_world_dyn(
    global: &GlobalArgs,
    body: Box<dyn FnOnce(&mut World) -> anyhow::Result<()> + '_>,
) -> anyhow::Result<()> {
    if global.np > MAX_LAUNCH_NP {
        return Err(UsageError(format!(
            "--np {}: at most {MAX_LAUNCH_NP} ranks can be started (only `simulate` takes more)",
            global.np
        ))
        .into());
    }
    check_clock_env(global)?;
    let started =
        ngauge::job::start(&job_spec(global), &launch_options(global)).map_err(job_error)?;
    match started {
        Started::Launcher(0) => Ok(()),
        // The ranks already printed their errors.
        Started::Launcher(code) => std::process::exit(code),
        Started::Rank(mut world) => {
            let rank = world.rank;
            let result = match body(&mut world) {
                Err(e) => {
                    // Tell the others why, so their errors name the rank to blame
                    // (where the failure began: a broken link is confirmed before
                    // its peer is blamed) and the reason.
                    let suspect = launch::blame::suspect(e.as_ref());
                    let blamed = world.control.abort(suspect, &error_text(&e));
                    let e = match suspect {
                        Some(s) if s != blamed => {
                            e.context(format!("lost rank {blamed} (rank {s} failed after it)"))
                        }
                        _ => e,
                    };
                    Err(e.context(format!("rank {rank}")))
                }
                Ok(()) => world
                    .finish()
                    .map_err(|e| anyhow::Error::new(e).context(format!("rank {rank}"))),
            };
            #[cfg(feature = "mpi")]
            if let Err(e) = &result {
                // Under MPI a failed rank ends the job (MPI_Abort): the others may wait
                // for it, and MPI_Finalize would wait for them.
                let code = if e.downcast_ref::<UsageError>().is_some() {
                    2
                } else {
                    1
                };
                launch::mpi::abort_job_on_error(&error_text(e), code);
            }
            result
        }
    }
}

/// Checks the test-clock variables before any rank starts, so that a malformed one is
/// reported once (by the local launcher) rather than by every rank; and, in the local
/// launcher, fixes the common epoch of the injected skews (`NGAUGE_TEST_CLOCK_EPOCH`,
/// inherited by the ranks it starts) at its own raw timer reading, so the spec's
/// offsets hold at launch time. Ranks check the real job size again in [`ngauge::experiment::rank_clock`].
pub fn check_clock_env(global: &GlobalArgs) -> anyhow::Result<()> {
    use ngauge::clock::{SystemClock, TickRate, TimerSource};
    use ngauge::sync::skew::{self, SkewSpec, EPOCH_ENV};
    let usage = |e: skew::SkewSpecError| anyhow::Error::new(UsageError(e.to_string()));
    let Some(spec) = SkewSpec::from_env().map_err(usage)? else {
        return Ok(());
    };
    let env = launch::detect();
    let local_launcher =
        env.kind == launch::LauncherKind::Local && env.rank.is_none() && global.rank.is_none();
    if local_launcher {
        spec.check_size(global.np as usize).map_err(usage)?;
    }
    match std::env::var(EPOCH_ENV) {
        Ok(text) => {
            skew::epoch(Some(&text), ngauge::clock::Ticks(0)).map_err(usage)?;
        }
        Err(_) if local_launcher => {
            let raw = SystemClock::new(TimerSource::detect(), TickRate::new(1.0)).raw();
            // Single-threaded here: no rank, transport or timer thread exists yet.
            std::env::set_var(EPOCH_ENV, raw.0.to_string());
        }
        Err(_) => {}
    }
    Ok(())
}

/// The job's size when it is known before the job starts: `--size`, the
/// launcher's, or `--np` when the local launcher starts the ranks.
pub fn known_size(global: &GlobalArgs) -> Option<usize> {
    let env = launch::detect();
    let local =
        env.kind == launch::LauncherKind::Local && env.rank.is_none() && global.rank.is_none();
    (global.size.map(|s| s as usize))
        .or(env.size)
        .or(local.then_some(global.np as usize))
}

/// Whether this process writes the outputs: the local launcher's parent (which
/// checks them before starting any rank) or rank 0.
fn writes_outputs(global: &GlobalArgs) -> bool {
    global
        .rank
        .or_else(|| launch::detect().rank)
        .is_none_or(|r| r == 0)
}

/// Checks, before anything is measured, every output file named on the command
/// line (`(flag, path)`; `-o` is added here): each can be written (not a directory,
/// its directory exists, it opens for writing), and no two name one regular file,
/// through symlinks, `..` or hard links (the second would overwrite the first). A file that did
/// not exist is removed again. Bad paths are usage errors (exit status 2), found in
/// a second instead of after the whole sweep.
pub fn check_outputs(global: &GlobalArgs, outputs: &[(&str, Option<&Path>)]) -> anyhow::Result<()> {
    if !writes_outputs(global) {
        return Ok(());
    }
    let all = [
        ("-o/--output", global.output.as_deref()),
        ("--csv", global.csv.as_deref()),
    ]
    .into_iter()
    .chain(outputs.iter().copied());
    let mut created = Vec::new();
    let checked = check_files(all, &mut created);
    for path in created {
        let _ = std::fs::remove_file(path);
    }
    checked
}

/// [`check_outputs`] of `files`, noting in `created` each file the check created.
fn check_files<'a>(
    files: impl Iterator<Item = (&'a str, Option<&'a Path>)>,
    created: &mut Vec<&'a Path>,
) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let mut seen: Vec<(&str, &Path, (u64, u64))> = Vec::new();
    for (flag, path) in files {
        let Some(path) = path else { continue };
        let bad = |why: String| {
            anyhow::Error::new(UsageError(format!("{flag} {}: {why}", path.display())))
        };
        if path.is_dir() {
            return Err(bad("is a directory; give a file name".into()));
        }
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| bad(format!("cannot be written: {e}")))?;
        if !existed {
            created.push(path);
        }
        // The file exists now: its device and inode name it whatever the spelling
        // (symlinks, `..`, hard links).
        let meta = std::fs::metadata(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
        if !meta.is_file() {
            continue; // /dev/null, a pipe: writers do not overwrite each other
        }
        let file = (meta.dev(), meta.ino());
        if let Some((other, other_path, _)) = seen.iter().find(|(_, _, f)| *f == file) {
            return Err(bad(format!(
                "is also {other} {}; give each output its own file",
                other_path.display()
            )));
        }
        seen.push((flag, path, file));
    }
    Ok(())
}

/// The one line of an error: its chain of causes joined by `: ` (anyhow's `{:#}`),
/// but a cause whose text the line already holds is left out: many errors say
/// their source in their own text (`send failed: {source}`) and return it as the
/// source too, and the chain would then say the OS error twice.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text += ": ";
        }
        text += &said;
    }
    text
}

/// The one line of a command-line parser's error (clap prints 3 to 8): its message
/// with what clap lists under it (missing flags, possible values, a tip), then
/// the command's help to read, e.g. `invalid value 'x' for '--reps <NUM>': invalid
/// digit found in string; see `ngauge pingpong --help``.
/// `argv`: the command line, whose first known command names the help to read.
pub fn parse_error_text(cli: &clap::Command, argv: &[String], rendered: &str) -> String {
    let message = rendered.split("\nUsage:").next().unwrap_or("");
    let message = message.split("\nFor more information").next().unwrap_or("");
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut text = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string();
    let (tips, listed): (Vec<&str>, Vec<&str>) = lines.partition(|l| l.starts_with("tip:"));
    if !listed.is_empty() {
        let between = if text.ends_with(':') { ", " } else { " " };
        text += " ";
        text += &listed.join(between);
    }
    for tip in tips {
        text += "; ";
        text += tip;
    }
    match argv
        .iter()
        .skip(1)
        .find(|a| cli.find_subcommand(a).is_some())
    {
        Some(command) => format!("{text}; see `ngauge {command} --help`"),
        None => format!("{text}; see `ngauge --help`"),
    }
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    print_text(&json_text(value)?)
}

/// `value` as one pretty JSON document and a newline.
pub fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// Writes `text` to stdout. Unlike `print!`, a closed pipe (`ngauge ... | head`) is
/// an `io::Error` that `main` treats as success, not a panic.
pub fn print_text(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn global(argv: &[&str]) -> GlobalArgs {
        let mut all = vec!["ngauge"];
        all.extend_from_slice(argv);
        all.push("info");
        Cli::try_parse_from(all).unwrap().global
    }

    /// The usage error of checking `outputs` with the global flags `argv`.
    fn refused(argv: &[&str], outputs: &[(&str, Option<&Path>)]) -> String {
        let e = check_outputs(&global(argv), outputs).unwrap_err();
        e.downcast::<UsageError>().unwrap().0
    }

    #[test]
    fn issue38_two_outputs_naming_one_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let same = d.join("same.out");
        let same_s = same.to_str().unwrap();
        let e = refused(&["-o", same_s], &[("--params-out", Some(&same))]);
        assert!(
            e.starts_with("--params-out") && e.contains("also -o/--output"),
            "{e}"
        );
        // Probing created the file; the refusal removes it again.
        assert!(!same.exists());
        // Through `..`, a symlink and a hard link.
        std::fs::create_dir(d.join("sub")).unwrap();
        let dotdot = d.join("sub/../same.out");
        assert!(refused(
            &[],
            &[("--plot", Some(&same)), ("--params-out", Some(&dotdot))]
        )
        .contains("also --plot"));
        std::fs::write(&same, "kept").unwrap();
        let link = d.join("link.out");
        std::os::unix::fs::symlink(&same, &link).unwrap();
        assert!(refused(&["-o", same_s], &[("--plot", Some(&link))]).contains("also -o"));
        let hard = d.join("hard.out");
        std::fs::hard_link(&same, &hard).unwrap();
        assert!(
            refused(&[], &[("--plot", Some(&hard)), ("--timeline", Some(&same))])
                .contains("also --plot")
        );
        // A file that existed stays, untouched.
        assert_eq!(std::fs::read_to_string(&same).unwrap(), "kept");
        // Distinct files pass, and the ones made to probe are gone again.
        let (a, b) = (d.join("a.svg"), d.join("b.svg"));
        check_outputs(
            &global(&[]),
            &[("--plot", Some(&a)), ("--params-out", Some(&b))],
        )
        .unwrap();
        assert!(!a.exists() && !b.exists());
        // Devices are no files that overwrite each other.
        let null = Path::new("/dev/null");
        check_outputs(&global(&["-o", "/dev/null"]), &[("--plot", Some(null))]).unwrap();
    }

    #[test]
    fn issue38_an_unwritable_output_names_its_flag() {
        let e = refused(&[], &[("--timeline", Some(Path::new("/proc/t.svg")))]);
        assert!(
            e.starts_with("--timeline /proc/t.svg: cannot be written"),
            "{e}"
        );
    }

    /// What clap renders for `argv` (after `ngauge`), as one line.
    fn parse_error(argv: &[&str]) -> String {
        let all: Vec<String> = std::iter::once("ngauge")
            .chain(argv.iter().copied())
            .map(String::from)
            .collect();
        let e = crate::cli::command()
            .try_get_matches_from(&all)
            .unwrap_err();
        parse_error_text(&crate::cli::command(), &all, &e.to_string())
    }

    #[test]
    fn issue37_a_parse_error_is_one_line() {
        assert_eq!(
            parse_error(&["pingpong", "--reps", "x"]),
            "invalid value 'x' for '--reps <NUM>': invalid digit found in string; \
             see `ngauge pingpong --help`"
        );
        assert_eq!(
            parse_error(&["bogus"]),
            "unrecognized subcommand 'bogus'; see `ngauge --help`"
        );
        assert_eq!(
            parse_error(&["pingpong", "--wait", "sleep"]),
            "invalid value 'sleep' for '--wait <MODE>' [possible values: auto, poll, block]; \
             see `ngauge pingpong --help`"
        );
        assert_eq!(
            parse_error(&["simulate", "--op", "bcast", "--algo", "linear"]),
            "the following required arguments were not provided: --sizes <SPEC>, \
             --params <FILE>; see `ngauge simulate --help`"
        );
        let tip = parse_error(&["pingpong", "--sizs", "8"]);
        assert!(!tip.contains('\n') && tip.contains("; tip: "), "{tip}");
    }

    #[test]
    fn issue37_no_advice_to_block_to_a_job_that_blocks() {
        assert!(few_valid_hint(&global(&["--wait", "poll"])).contains("--wait block"));
        for wait in ["auto", "block"] {
            assert_eq!(
                few_valid_hint(&global(&["--wait", wait])),
                "raise --max-rounds"
            );
        }
    }

    #[test]
    fn issue38_the_os_error_is_said_once() {
        let io = std::io::Error::from_raw_os_error(28);
        let said = io.to_string();
        let e = anyhow::Error::new(ngauge::transport::TransportError::Io {
            transport: "tcp",
            peer: 1,
            op: "send",
            source: io,
        })
        .context("rank 0");
        let text = error_text(&e);
        assert_eq!(text.matches(&said).count(), 1, "{text}");
        assert_eq!(
            text,
            format!("rank 0: tcp: send with rank 1 failed: {said}")
        );
        // A chain whose causes say new things keeps them all.
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&e), "outer: inner");
    }
}
