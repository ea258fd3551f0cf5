//! The suite file (`ngauge run FILE.toml`): its experiments read into the same
//! specs the command line fills ([`JobSpec`] and the command's spec from
//! [`crate::spec`]), checked completely before anything runs.
//!
//! Every error is one [`SuiteError`] naming the file, the line and column, and the
//! key (`experiment[1].pingpong.reps`): syntax and type errors with the span the
//! `toml` crate gives and the path `serde_path_to_error` records; errors of the
//! checks after parsing (a name used twice, a value out of range) with the span of
//! their key looked up in the document.

use crate::job::{JobError, JobSpec, TransportName};
use crate::sim::spec::{self as sim_spec, SimulateSpec};
use crate::spec::{
    CollCmdSpec, CommandSpec, EbbSpec, LateCmdSpec, LoggpSpec, MatrixSpec, NbcCmdSpec, NoiseSpec,
    PingpongSpec, RmaSpec, SpecError, SyncSpec, TimerSpec, WindowColl,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A suite: experiments, how often to launch them, in which orders, and where the
/// results go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Free text, for the reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Seed of the shuffled orders; absent: drawn when the run starts (and
    /// recorded in `plan.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Launches of every experiment.
    #[serde(default = "one")]
    pub launches: usize,
    /// Default run directory, relative to the current directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PathBuf>,
    /// A command put before every run (`{np}` becomes the experiment's `np`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<Vec<String>>,
    /// The experiments, in the order the file lists them.
    #[serde(rename = "experiment", default)]
    pub experiments: Vec<Experiment>,
}

fn one() -> usize {
    1
}

/// Most launches a suite may ask for.
pub const MAX_LAUNCHES: usize = 10_000;

/// One experiment: a command with its spec, run on `np` ranks of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawExperiment", into = "RawExperiment")]
pub struct Experiment {
    /// Its name (letters, digits, `-`, `_`, `.`): the file names of its results.
    pub name: String,
    /// Ranks.
    pub np: usize,
    /// Transports and how they are set up.
    pub job: JobSpec,
    /// A command put before its runs, replacing the suite's.
    pub launcher: Option<Vec<String>>,
    /// The command and its parameters.
    pub kind: CommandSpec,
}

/// An experiment as written: one optional table per command. Adding a command is
/// a field here and a [`CommandSpec`] variant.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    np: Option<usize>,
    #[serde(default)]
    job: JobSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    launcher: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timer: Option<TimerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pingpong: Option<PingpongSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    loggp: Option<LoggpSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sync: Option<SyncSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    coll: Option<CollCmdSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    simulate: Option<SimulateSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    noise: Option<NoiseSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    late: Option<LateCmdSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbc: Option<NbcCmdSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    matrix: Option<MatrixSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ebb: Option<EbbSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rma: Option<RmaSpec>,
}

impl TryFrom<RawExperiment> for Experiment {
    type Error = String;

    fn try_from(raw: RawExperiment) -> Result<Self, String> {
        let mut kinds: Vec<CommandSpec> = [
            raw.timer.map(CommandSpec::Timer),
            raw.pingpong.map(CommandSpec::Pingpong),
            raw.loggp.map(CommandSpec::Loggp),
            raw.sync.map(CommandSpec::Sync),
            raw.simulate.map(CommandSpec::Simulate),
            raw.coll.map(CommandSpec::Coll),
            raw.noise.map(CommandSpec::Noise),
            raw.late.map(CommandSpec::Late),
            raw.nbc.map(CommandSpec::Nbc),
            raw.matrix.map(CommandSpec::Matrix),
            raw.ebb.map(CommandSpec::Ebb),
            raw.rma.map(CommandSpec::Rma),
        ]
        .into_iter()
        .flatten()
        .collect();
        if kinds.len() != 1 {
            return Err(format!(
                "experiment {:?} needs exactly one command table ({}), found {}",
                raw.name,
                CommandSpec::NAMES.join(", "),
                if kinds.is_empty() {
                    "none".to_string()
                } else {
                    kinds
                        .iter()
                        .map(CommandSpec::command)
                        .collect::<Vec<_>>()
                        .join(" and ")
                }
            ));
        }
        let kind = kinds.pop().expect("one kind");
        Ok(Experiment {
            np: raw.np.unwrap_or(if kind.one_process() { 1 } else { 2 }),
            name: raw.name,
            job: raw.job,
            launcher: raw.launcher,
            kind,
        })
    }
}

impl From<Experiment> for RawExperiment {
    fn from(e: Experiment) -> Self {
        let mut raw = RawExperiment {
            name: e.name,
            np: Some(e.np),
            job: e.job,
            launcher: e.launcher,
            ..RawExperiment::default()
        };
        match e.kind {
            CommandSpec::Timer(s) => raw.timer = Some(s),
            CommandSpec::Pingpong(s) => raw.pingpong = Some(s),
            CommandSpec::Loggp(s) => raw.loggp = Some(s),
            CommandSpec::Sync(s) => raw.sync = Some(s),
            CommandSpec::Simulate(s) => raw.simulate = Some(s),
            CommandSpec::Coll(s) => raw.coll = Some(s),
            CommandSpec::Noise(s) => raw.noise = Some(s),
            CommandSpec::Late(s) => raw.late = Some(s),
            CommandSpec::Nbc(s) => raw.nbc = Some(s),
            CommandSpec::Matrix(s) => raw.matrix = Some(s),
            CommandSpec::Ebb(s) => raw.ebb = Some(s),
            CommandSpec::Rma(s) => raw.rma = Some(s),
        }
        raw
    }
}

/// What is wrong with a suite file: where, which key, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SuiteError {
    /// The file as named to [`parse`].
    pub file: String,
    /// Line and column, from 1, when known.
    pub position: Option<(usize, usize)>,
    /// The key (`experiment[1].pingpong.reps`), empty for the file as a whole.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        // One line whatever the message (toml's may hold several).
        write!(
            f,
            ": {}",
            self.message
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )
    }
}

/// Reads and checks the suite at `path`.
///
/// # Errors
/// The file cannot be read (no position), or [`parse`]'s errors.
pub fn load(path: &Path) -> Result<Suite, SuiteError> {
    let text = std::fs::read_to_string(path).map_err(|e| SuiteError {
        file: path.display().to_string(),
        position: None,
        key: String::new(),
        message: e.to_string(),
    })?;
    parse(&path.display().to_string(), &text)
}

/// Parses and checks a suite's text; `file` names it in errors.
///
/// # Errors
/// The first error: TOML syntax, an unknown key, a value of the wrong type, or a
/// value no run can use (see [`check`]).
pub fn parse(file: &str, text: &str) -> Result<Suite, SuiteError> {
    let error = |key: String, span: Option<std::ops::Range<usize>>, message: String| SuiteError {
        file: file.to_string(),
        position: span.map(|s| line_column(text, s.start)),
        key,
        message,
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| error(String::new(), e.span(), e.message().to_string()))?;
    let suite: Suite = serde_path_to_error::deserialize(de).map_err(|e| {
        let mut key = e.path().to_string();
        if key == "." {
            key.clear();
        }
        let inner = e.into_inner();
        let mut span = inner.span();
        // An unknown field: name it in the key, and point at it.
        if let Some(field) = inner
            .message()
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            if key.is_empty() {
                key = field.to_string();
            } else if !key.ends_with(&format!(".{field}")) && key != field {
                key = format!("{key}.{field}");
            }
            span = key_span(text, &key).or(span);
        }
        error(key, span, inner.message().to_string())
    })?;
    check(&suite).map_err(|(key, message)| {
        let span = key_span(text, &key);
        error(key, span, message)
    })?;
    Ok(suite)
}

/// The position of the first name that an earlier one repeats, in one pass over a
/// set of the names seen: a suite of 200,000 experiments is checked in linear
/// time, not in the 2 * 10^10 comparisons of comparing each with those before it.
fn first_duplicate<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<usize> {
    let mut seen = std::collections::HashSet::new();
    names.into_iter().position(|n| !seen.insert(n))
}

/// Checks what parsing cannot: at least one experiment, names (allowed
/// characters, unique, not a file of the run directory), `np`, launches, the
/// job spec, the command's spec, transports this build has.
///
/// # Errors
/// The key and what is wrong with it.
pub fn check(suite: &Suite) -> Result<(), (String, String)> {
    if !(1..=MAX_LAUNCHES).contains(&suite.launches) {
        return Err((
            "launches".into(),
            format!(
                "must be between 1 and {MAX_LAUNCHES}, got {}",
                suite.launches
            ),
        ));
    }
    if suite.experiments.is_empty() {
        return Err((
            "experiment".into(),
            "the suite has no experiment (add an [[experiment]] table)".into(),
        ));
    }
    check_launcher("launcher", suite.launcher.as_deref())?;
    let duplicate = first_duplicate(suite.experiments.iter().map(|e| e.name.as_str()));
    for (i, e) in suite.experiments.iter().enumerate() {
        let at = |field: &str| format!("experiment[{i}].{field}");
        check_name(&e.name).map_err(|m| (at("name"), m))?;
        if duplicate == Some(i) {
            return Err((at("name"), format!("{:?} names two experiments", e.name)));
        }
        if !(1..=4096).contains(&e.np) {
            return Err((
                at("np"),
                format!("must be between 1 and 4096, got {}", e.np),
            ));
        }
        check_launcher(&at("launcher"), e.launcher.as_deref())?;
        e.job
            .validate()
            .map_err(|err| (at(&format!("job.{}", job_field(&err))), err.to_string()))?;
        for (k, t) in e.job.transports.iter().enumerate() {
            if !compiled(*t) {
                return Err((
                    at(&format!("job.transports[{k}]")),
                    crate::job::open::not_compiled(*t).to_string(),
                ));
            }
        }
        let command = e.kind.command();
        let spec = |r: Result<(), SpecError>| {
            r.map_err(|s| {
                let key = match s.field {
                    "transport" => "job.transports".to_string(),
                    // `late`'s and `nbc`'s collective is their `coll` table.
                    f if matches!(e.kind, CommandSpec::Late(_) | CommandSpec::Nbc(_))
                        && WindowColl::FIELDS.split(' ').any(|c| c == f) =>
                    {
                        format!("{command}.coll.{f}")
                    }
                    f => format!("{command}.{f}"),
                };
                (at(&key), s.message)
            })
        };
        let needs_two = || {
            if e.np < 2 {
                Err((
                    at("np"),
                    format!("{command} needs at least 2 ranks, got {}", e.np),
                ))
            } else {
                Ok(())
            }
        };
        match &e.kind {
            CommandSpec::Timer(s) => {
                spec(s.validate())?;
                // The suite keeps every read's cost.
                spec(s.validate_sampled(true))?;
                if e.np != 1 {
                    return Err((
                        at("np"),
                        format!("timer runs in one process: np must be 1, got {}", e.np),
                    ));
                }
            }
            CommandSpec::Pingpong(s) => {
                spec(s.validate())?;
                spec(s.validate_for_job(&e.job.transports))?;
                needs_two()?;
            }
            CommandSpec::Loggp(s) => {
                spec(s.plan().map(|_| ()))?;
                needs_two()?;
            }
            CommandSpec::Sync(s) => {
                spec(s.validate())?;
                needs_two()?;
            }
            CommandSpec::Simulate(s) => {
                let at_sim = |field: &str| {
                    if field.is_empty() {
                        at("simulate")
                    } else {
                        at(&format!("simulate.{field}"))
                    }
                };
                sim_spec::validate(s)
                    .and_then(|_| s.network.load().map(|_| ()))
                    .map_err(|err| (at_sim(&simulate_field(&err)), err.to_string()))?;
                if e.np != 1 {
                    return Err((
                        at("np"),
                        format!(
                            "simulate runs in one process (the simulated ranks are \
                             simulate.np): np must be 1, got {}",
                            e.np
                        ),
                    ));
                }
            }
            CommandSpec::Coll(s) => {
                spec(s.validate())?;
                spec(s.validate_for_job(&e.job.transports, Some(e.np)))?;
                spec(s.load_predict().map(drop))?;
            }
            CommandSpec::Noise(s) => spec(s.validate())?,
            CommandSpec::Late(s) => {
                spec(s.validate())?;
                spec(s.validate_for_job(&e.job.transports, Some(e.np)).map(drop))?;
                needs_two()?;
            }
            CommandSpec::Nbc(s) => {
                spec(s.validate())?;
                let job = s
                    .coll
                    .validate_for_job(&e.job.transports, Some(e.np), &s.sizes.0);
                spec(job.map(drop))?;
                needs_two()?;
            }
            CommandSpec::Matrix(s) => {
                spec(s.validate())?;
                needs_two()?;
            }
            CommandSpec::Ebb(s) => {
                spec(s.validate())?;
                needs_two()?;
            }
            CommandSpec::Rma(s) => {
                spec(s.validate())?;
                needs_two()?;
            }
        }
    }
    Ok(())
}

fn check_launcher(key: &str, launcher: Option<&[String]>) -> Result<(), (String, String)> {
    match launcher {
        Some([]) => Err((key.into(), "the launcher command is empty".into())),
        _ => Ok(()),
    }
}

/// Whether this build has transport `t`.
fn compiled(t: TransportName) -> bool {
    match t {
        TransportName::Tcp | TransportName::Udp => true,
        TransportName::Verbs => cfg!(feature = "verbs"),
        TransportName::Mpi => cfg!(feature = "mpi"),
        TransportName::Ofi => cfg!(feature = "ofi"),
        TransportName::Ucx => cfg!(feature = "ucx"),
    }
}

/// The field of a simulate spec an error is about (empty: the table).
fn simulate_field(e: &sim_spec::SpecError) -> String {
    use sim_spec::SpecError as E;
    match e {
        E::BadNp { .. } | E::NoMemory { .. } => "np".into(),
        E::OutOfRange { .. } => "network".into(),
        E::NoSizes | E::SizeTooLarge { .. } => "sizes_bytes".into(),
        E::BadParameter { name, .. } => format!("network.loggp.{name}"),
        E::Read { .. } | E::Params { .. } => "network.params_file".into(),
        E::Coll(_) | E::Sim(_) => String::new(),
    }
}

/// The field of the job spec a validation error is about.
fn job_field(e: &JobError) -> &'static str {
    match e {
        JobError::BadTimeout(_) => "timeout_s",
        JobError::BadBuffer { what: "send", .. } => "send_buffer_bytes",
        JobError::BadBuffer { .. } => "recv_buffer_bytes",
        JobError::BadVerbsPort => "verbs.port",
        _ => "transports",
    }
}

/// Experiment names become file names: letters, digits, `-`, `_`, `.`, not
/// starting with `.`, at most 100 characters, none of the run directory's own.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(format!(
            "{name:?} is not a name: use 1 to 100 letters, digits, '-', '_' or '.', \
             not starting with '.'"
        ));
    }
    if super::dir::RESERVED_NAMES.contains(&name) {
        return Err(format!(
            "{name:?} is the name of a file of the run directory; choose another"
        ));
    }
    Ok(())
}

/// Line and column (from 1, in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// One step of a key path.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The steps of a key path (`experiment[1].job.transports[0]`).
fn steps(key: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push(Step::Key(name));
        }
        while let Some((index, after)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Step::Index(i));
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    out
}

/// The span of `key` in the document: of the key itself when it names a table
/// entry, of the value when it names an array element; as deep as the document
/// goes (a key left at its default points at its table).
fn key_span(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut span = None;
    let mut table = Some(root.get_ref());
    let mut value: Option<&DeValue> = None;
    for step in steps(key) {
        match step {
            Step::Key(k) => {
                let t = table.take().or(match value {
                    Some(DeValue::Table(t)) => Some(t),
                    _ => None,
                })?;
                let Some((name, v)) = t.iter().find(|(name, _)| name.get_ref().as_ref() == k)
                else {
                    break;
                };
                span = Some(name.span());
                value = Some(v.get_ref());
            }
            Step::Index(i) => {
                let Some(DeValue::Array(a)) = value else {
                    break;
                };
                let Some(v) = a.get(i) else {
                    break;
                };
                span = Some(v.span());
                value = Some(v.get_ref());
            }
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "two"
seed = 3
launches = 2

[[experiment]]
name = "t"
timer = { reads = 1000 }

[[experiment]]
name = "pp"
job = { transports = ["tcp", "udp"], wait = "block" }
[experiment.pingpong]
sizes = [1, 8]
reps = 10

[[experiment]]
name = "lg"
np = 4
loggp = { sizes = "1-8K:1K", detector = "segmented" }

[[experiment]]
name = "s"
sync = { sync = "jk", check_after_s = [0.0] }
"#;

    #[test]
    fn issue34_the_first_repeated_name_is_found_in_one_pass() {
        assert_eq!(first_duplicate(["a", "b", "c"]), None);
        assert_eq!(first_duplicate(["a", "b", "a", "b"]), Some(2));
        assert_eq!(first_duplicate(std::iter::empty()), None);
        // 200,000 distinct names and one repeat at the end: quadratic search
        // would compare 2 * 10^10 pairs.
        let names: Vec<String> = (0..200_000).map(|i| format!("e{i}")).collect();
        let last = names.iter().map(String::as_str).chain(["e17"]);
        assert_eq!(first_duplicate(last), Some(200_000));
    }

    #[test]
    fn issue34_a_suite_of_200000_experiments_is_read_checked_and_planned() {
        let mut text = String::from("seed = 1\nlaunches = 2\n");
        for i in 0..200_000 {
            text.push_str(&format!(
                "[[experiment]]\nname = \"e{i}\"\ntimer = {{ reads = 10 }}\n"
            ));
        }
        let suite = parse("big.toml", &text).unwrap();
        let names: Vec<String> = suite.experiments.iter().map(|e| e.name.clone()).collect();
        let plan = super::super::plan::Plan::new(
            "big.toml",
            suite.seed.unwrap_or(0),
            &names,
            suite.launches,
        );
        assert_eq!(plan.len(), 400_000);
        let dup = text.replacen("name = \"e199999\"", "name = \"e5\"", 1);
        let e = parse("big.toml", &dup).unwrap_err();
        assert!(e.message.contains("names two experiments"), "{e}");
    }

    #[test]
    fn a_suite_reads_into_the_commands_specs() {
        let s = parse("s.toml", GOOD).unwrap();
        assert_eq!((s.seed, s.launches), (Some(3), 2));
        let names: Vec<_> = s.experiments.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["t", "pp", "lg", "s"]);
        assert_eq!(s.experiments[0].np, 1);
        assert_eq!(s.experiments[1].np, 2);
        assert_eq!(s.experiments[2].np, 4);
        let CommandSpec::Pingpong(pp) = &s.experiments[1].kind else {
            panic!("not pingpong")
        };
        assert_eq!(
            (pp.sizes.0.as_slice(), pp.reps, pp.warmup),
            (&[1, 8][..], 10, 100)
        );
        assert_eq!(
            s.experiments[1].job.transports,
            [TransportName::Tcp, TransportName::Udp]
        );
        // An experiment survives its JSON (experiment.json of the run directory).
        for e in &s.experiments {
            let back: Experiment =
                serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
            assert_eq!(&back, e);
        }
    }

    #[test]
    fn late_and_nbc_experiments_read_their_tables_and_are_checked() {
        let text = "[[experiment]]\nname = \"late\"\nnp = 3\n[experiment.late]\n\
                    delay_ns = [0, 5e4]\ndelayed_ranks = \"last\"\n\
                    [experiment.late.coll]\nop = \"barrier\"\nreps = 5\n\
                    [[experiment]]\nname = \"nbc\"\n[experiment.nbc]\nsizes = \"8,1K\"\n\
                    test_every_ns = [0, 1e4]\n";
        let suite = parse("s.toml", text).unwrap();
        let CommandSpec::Late(late) = &suite.experiments[0].kind else {
            panic!("not late: {:?}", suite.experiments[0].kind)
        };
        assert_eq!((late.coll.reps, late.delay_ns.len()), (5, 2));
        let CommandSpec::Nbc(nbc) = &suite.experiments[1].kind else {
            panic!("not nbc")
        };
        assert_eq!((suite.experiments[1].np, nbc.points().len()), (2, 2));
        let back: Experiment =
            serde_json::from_str(&serde_json::to_string(&suite.experiments[0]).unwrap()).unwrap();
        assert_eq!(back, suite.experiments[0]);
        let err = |t: &str| parse("s.toml", t).unwrap_err();
        let e = err(&text.replace("reps = 5", "reps = 0"));
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[0].late.coll.reps", Some((9, 1)))
        );
        let e = err(&text.replace("reps = 5", "repz = 5"));
        assert_eq!(e.key, "experiment[0].late.coll.repz");
        let e = err(&text.replace("\"last\"", "\"7\""));
        assert_eq!(e.key, "experiment[0].late.delayed_ranks");
        let e = err(&text.replace("1e4", "2e9"));
        assert_eq!(e.key, "experiment[1].nbc.test_every_ns");
        let e = err(&text.replace(
            "np = 3\n",
            "np = 3\njob = { transports = [\"tcp\", \"udp\"] }\n",
        ));
        assert_eq!(e.key, "experiment[0].job.transports");
        let e = err(&text.replace("name = \"nbc\"\n", "name = \"nbc\"\nnp = 1\n"));
        assert_eq!(e.key, "experiment[1].np");
    }

    #[test]
    fn a_simulate_experiment_reads_into_the_commands_spec_and_is_checked() {
        let text = "[[experiment]]\nname = \"sim\"\n[experiment.simulate]\nop = \"bcast\"\n\
                    algorithms = [\"binomial\", \"kchain:2\"]\nnp = 64\nsizes_bytes = [8, 1024]\n\
                    network = { loggp = { L_us = 5.0, o_s_us = 1.0, o_r_us = 1.5, g_us = 2.0, \
                    G_us_per_byte = 0.001 } }\n";
        let s = parse("s.toml", text).unwrap();
        let e = &s.experiments[0];
        assert_eq!(e.np, 1, "one process");
        let CommandSpec::Simulate(spec) = &e.kind else {
            panic!("not simulate: {:?}", e.kind)
        };
        assert_eq!((spec.np, spec.sizes_bytes.as_slice()), (64, &[8, 1024][..]));
        assert!(spec.receive_gap, "the command line's default");
        // What the CLI would simulate from the same spec.
        let loaded = spec.network.load().unwrap();
        let predictions = sim_spec::run(spec, &loaded.network).unwrap();
        assert_eq!(predictions.len(), 4);
        let back: Experiment = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);

        let bad = text.replace("L_us = 5.0", "L_us = -5.0");
        let err = parse("s.toml", &bad).unwrap_err();
        assert_eq!(err.key, "experiment[0].simulate.network.loggp.L_us");
        assert!(err.message.contains("L_us = -5"), "{err}");
        let err = parse("s.toml", &text.replace("np = 64", "np = 0")).unwrap_err();
        assert_eq!(err.key, "experiment[0].simulate.np");
        assert_eq!(err.position.map(|p| p.0), Some(6), "{err}");
        let err = parse("s.toml", &text.replace("binomial", "pigeon")).unwrap_err();
        assert_eq!(err.key, "experiment[0].simulate");
        assert!(err.message.contains("pigeon"), "{err}");
        let err = parse(
            "s.toml",
            &text.replace("name = \"sim\"", "name = \"sim\"\nnp = 2"),
        )
        .unwrap_err();
        assert_eq!(err.key, "experiment[0].np");
        let err = parse("s.toml", &text.replace("np = 64", "np = 64\nnpz = 1")).unwrap_err();
        assert_eq!(err.key, "experiment[0].simulate.npz");
    }

    const COLL: &str = "[[experiment]]\nname = \"c\"\nnp = 4\n[experiment.coll]\nop = \"bcast\"\n\
                        algo = [\"binomial\", \"chain\"]\nsegment = \"8K\"\nroot = \"rotate\"\n\
                        scheme = \"barrier\"\nsizes = \"1,1K\"\nreps = 20\nwarmup = 2\n\
                        sync = \"jk\"\nfitpoints = 50\n";

    #[test]
    fn a_coll_experiment_reads_into_the_commands_spec_and_is_checked() {
        let s = parse("s.toml", COLL).unwrap();
        let e = &s.experiments[0];
        assert_eq!(e.np, 4);
        let CommandSpec::Coll(spec) = &e.kind else {
            panic!("not coll: {:?}", e.kind)
        };
        assert_eq!(spec.op, crate::coll::Collective::Bcast);
        assert_eq!(spec.algo, ["binomial", "chain"]);
        assert_eq!((spec.segment, spec.reps, spec.warmup), (8192, 20, 2));
        assert_eq!(spec.scheme, crate::patterns::coll::Scheme::Barrier);
        assert_eq!(spec.sizes.0, [1, 1024]);
        assert_eq!(spec.sync_options().fitpoints, 50);
        assert!(
            !spec.samples,
            "ngauge run sets it in the run directory's spec"
        );
        let back: Experiment = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);

        // Unknown key, wrong type, bad value, bad algorithm, a root the job lacks.
        let e = err(&COLL.replace("reps = 20", "repz = 20"));
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[0].coll.repz", Some((11, 1)))
        );
        let e = err(&COLL.replace("reps = 20", "reps = \"many\""));
        assert_eq!(e.key, "experiment[0].coll.reps");
        assert_eq!(e.position.map(|p| p.0), Some(11), "{e}");
        let e = err(&COLL.replace("scheme = \"barrier\"", "scheme = \"fast\""));
        assert_eq!(e.key, "experiment[0].coll.scheme");
        assert!(e.message.contains("unknown timing scheme `fast`"), "{e}");
        let e = err(&COLL.replace("\"chain\"", "\"ring\""));
        assert_eq!(
            (e.key.as_str(), e.position.map(|p| p.0)),
            ("experiment[0].coll.algo", Some(6))
        );
        assert!(e.message.contains("ring"), "{e}");
        let e = err(&COLL.replace("reps = 20", "reps = 0"));
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[0].coll.reps", Some((11, 1)))
        );
        let e = err(&COLL.replace("\"rotate\"", "4"));
        assert_eq!(e.key, "experiment[0].coll.root");
        assert!(e.message.contains("not a rank of a job of 4 ranks"), "{e}");
        let e = err(&COLL.replace("\"binomial\", \"chain\"", "\"mpi\""));
        assert_eq!(e.key, "experiment[0].coll.algo");
        assert!(e.message.contains("MPI transport"), "{e}");
        let e = err(&COLL.replace("sizes = \"1,1K\"", "sizes = \"1-2x\""));
        assert_eq!(
            (e.key.as_str(), e.position.map(|p| p.0)),
            ("experiment[0].coll.sizes", Some(10))
        );
        let e = err(&COLL.replace("reps = 20", "predict = \"/nonexistent/params.json\""));
        assert_eq!(e.key, "experiment[0].coll.predict");
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn a_noise_experiment_reads_into_the_commands_spec_and_is_checked() {
        let text = "[[experiment]]\nname = \"n\"\n[experiment.noise]\nduration_ns = 1e7\n\
                    inject = { period_ns = 1e6, duration_ns = 5e4 }\n";
        let s = parse("s.toml", text).unwrap();
        let e = &s.experiments[0];
        assert_eq!(e.np, 2, "a job, as on the command line");
        let CommandSpec::Noise(spec) = &e.kind else {
            panic!("not noise: {:?}", e.kind)
        };
        assert_eq!((spec.duration_ns, spec.threshold), (1e7, 10.0));
        assert_eq!(spec.inject.map(|i| i.period_ns), Some(1e6));
        let back: Experiment = serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap();
        assert_eq!(&back, e);
        let e = err(&text.replace("duration_ns = 1e7", "duration_ns = 10.0"));
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[0].noise.duration_ns", Some((4, 1)))
        );
        let e = err(&text.replace("duration_ns = 5e4", "duration_ns = 5e6"));
        assert_eq!(e.key, "experiment[0].noise.inject");
        let e = err(&text.replace("duration_ns = 1e7", "treshold = 2.0"));
        assert_eq!(e.key, "experiment[0].noise.treshold");
    }

    fn err(text: &str) -> SuiteError {
        parse("b.toml", text).unwrap_err()
    }

    /// Issue 35: `[experiment.matrix]` and `[experiment.ebb]` are experiments
    /// of two ranks or more, their fields checked as the flags are.
    #[test]
    fn matrix_and_ebb_are_suite_experiments() {
        let text = "[[experiment]]\nname = \"m\"\nnp = 4\nmatrix = { reps = 3 }\n\
                    [[experiment]]\nname = \"e\"\nebb = { bisections = 5 }\n";
        let s = parse("n.toml", text).unwrap();
        let CommandSpec::Matrix(m) = &s.experiments[0].kind else {
            panic!("not matrix")
        };
        assert_eq!((m.reps, s.experiments[0].np), (3, 4));
        let CommandSpec::Ebb(e) = &s.experiments[1].kind else {
            panic!("not ebb")
        };
        assert_eq!((e.bisections, s.experiments[1].np), (5, 2));
        let e = err(&text.replace("bisections = 5", "bisections = 0"));
        assert_eq!(e.key, "experiment[1].ebb.bisections");
        let e = err(&text.replace("np = 4", "np = 1"));
        assert_eq!(e.key, "experiment[0].np");
    }

    #[test]
    fn errors_name_file_line_column_and_key() {
        let e = err("launches = 2\n[[experiment]]\nname = \"a\"\npingpong = { reps = \"many\" }\n");
        assert_eq!(e.key, "experiment[0].pingpong.reps");
        assert_eq!(e.position.map(|p| p.0), Some(4), "{e}");
        assert!(e.to_string().starts_with("b.toml:4:"), "{e}");
        assert!(e.message.contains("invalid type"), "{e}");

        let e = err("[[experiment]]\nname = \"a\"\n[experiment.loggp]\nsizez = \"1-8\"\n");
        assert_eq!(e.key, "experiment[0].loggp.sizez");
        assert_eq!(e.position, Some((4, 1)), "{e}");

        let e = err("[[experiment]]\nname = \"a\"\njob = { transports = [\"tcp\", \"pigeon\"] }\npingpong = {}\n");
        assert_eq!(e.key, "experiment[0].job.transports[1]");
        assert_eq!(e.position.map(|p| p.0), Some(3), "{e}");
        assert!(e.message.contains("pigeon"), "{e}");

        let e = err("[[experiment]]\nname = \"a\"\n\npingpong = { sizes = \"3x\" }\n");
        assert_eq!(e.key, "experiment[0].pingpong.sizes");
        assert_eq!(e.position.map(|p| p.0), Some(4), "{e}");
        assert!(e.message.contains("invalid size '3x'"), "{e}");

        let e = err("seed = 1\nlaunchez = 3\n");
        assert_eq!((e.key.as_str(), e.position), ("launchez", Some((2, 1))));

        let e = err("seed = [\n");
        assert_eq!(e.key, "");
        assert!(e.position.is_some(), "{e}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }

    #[test]
    fn checks_after_parsing_point_at_their_key() {
        let e = err("[[experiment]]\nname = \"a\"\ntimer = {}\n[[experiment]]\nname = \"a\"\npingpong = {}\n");
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[1].name", Some((5, 1)))
        );
        assert!(e.message.contains("two experiments"), "{e}");

        let e = err("[[experiment]]\nname = \"a\"\nnp = 1\npingpong = { reps = 0 }\n");
        assert_eq!(e.key, "experiment[0].pingpong.reps");
        assert_eq!(e.position, Some((4, 14)));

        let e = err("[[experiment]]\nname = \"a\"\nnp = 1\npingpong = {}\n");
        assert_eq!(
            (e.key.as_str(), e.position),
            ("experiment[0].np", Some((3, 1)))
        );

        let e = err("[[experiment]]\nname = \"summary\"\ntimer = {}\n");
        assert_eq!(e.key, "experiment[0].name");

        let e = err("[[experiment]]\nname = \"a\"\n");
        assert!(e.message.contains("exactly one command table"), "{e}");
        assert_eq!(e.key, "experiment[0]");

        let e = err("[[experiment]]\nname = \"a\"\ntimer = {}\nsync = {}\n");
        assert!(e.message.contains("timer and sync"), "{e}");

        let e = err("seed = 1\n");
        assert_eq!(e.key, "experiment");

        let e = err("launches = 0\n[[experiment]]\nname = \"a\"\ntimer = {}\n");
        assert_eq!((e.key.as_str(), e.position), ("launches", Some((1, 1))));

        if !cfg!(feature = "mpi") {
            let e = err(
                "[[experiment]]\nname = \"a\"\njob = { transports = [\"mpi\"] }\npingpong = {}\n",
            );
            assert_eq!(e.key, "experiment[0].job.transports[0]");
            assert!(e.message.contains("--features mpi"), "{e}");
        }
    }
}
