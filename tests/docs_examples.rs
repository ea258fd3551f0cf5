//! Issue 37: the examples of `docs/commands/*.md` run as written, and every
//! figure in `docs/` names the command that draws it.
//!
//! Every `ngauge ...` line of a page's `sh` blocks runs through the local
//! launcher, the page's lines in order in one directory (so a file one line
//! writes is there for the next), after this mechanical rewrite to tiny runs:
//!
//! | what | becomes | when the command's `--help` lists the flag |
//! |---|---|---|
//! | `--reps`, `--warmup` | 2, 1 | set, or added |
//! | `--max-reps` | 20 | set when written |
//! | `--fitpoints`, `--exchanges` | 50, 2 (a clock sync in milliseconds) | set, or added |
//! | `--reads`, `--duration`, `--check-after`, `--passes` | 1000, 10ms, 0s, 1 | set, or added |
//! | `--sizes` | sizes of M or G bytes become 64K; loggp sweeps `1K-8K:1K` | as written otherwise |
//! | loggp | adds `--no-confirm --no-refine` (no confirmation passes) | |
//!
//! `simulate` without `--measure` measures nothing and runs as written (its
//! `--np` is the simulated job's). Each must exit 0. What cannot run here is skipped with its reason
//! ([`skipped`]): another transport's hardware or library, more than 4 ranks,
//! a whole suite, an input the page does not make.

use crate::support;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One example: its page, line, words, and the file its stdout is redirected to.
struct Example {
    page: String,
    line: usize,
    words: Vec<String>,
    stdout_to: Option<String>,
}

/// Every `ngauge ...` line of the `sh` blocks of `text` (continuations joined,
/// comments dropped, a stdout redirection `> FILE` kept as `stdout_to`).
fn examples_of(page: &str, text: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let (start, mut joined) = match pending.take() {
            Some((start, before)) => (start, before + " " + t),
            None if t.starts_with("ngauge ") => (i + 1, t.to_string()),
            None => continue,
        };
        if let Some(rest) = joined.strip_suffix('\\') {
            pending = Some((start, rest.trim_end().to_string()));
            continue;
        }
        if let Some(at) = joined.find(" #") {
            joined.truncate(at);
        }
        let mut stdout_to = None;
        if let Some(at) = joined.find(" > ") {
            stdout_to = Some(joined[at + 3..].trim().to_string());
            joined.truncate(at);
        }
        let words = joined
            .split_whitespace()
            .skip(1)
            .map(String::from)
            .collect();
        out.push(Example {
            page: page.to_string(),
            line: start,
            words,
            stdout_to,
        });
    }
    out
}

const COMMANDS: &[&str] = &[
    "timer", "info", "pingpong", "loggp", "sync", "coll", "simulate", "late", "nbc", "noise",
    "run", "compare", "matrix", "ebb", "rma",
];

/// The subcommand among `words`.
fn command(words: &[String]) -> Option<&str> {
    (words.iter())
        .map(String::as_str)
        .find(|w| COMMANDS.contains(w))
}

/// The value after `flag` in `words`.
fn value<'a>(words: &'a [String], flag: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| w == flag)?;
    words.get(at + 1).map(String::as_str)
}

/// Why an example cannot run here (`dir`: where the page's earlier lines
/// wrote), or `None`.
fn skipped(words: &[String], dir: &Path) -> Option<&'static str> {
    let joined = words.join(" ");
    let transports = value(words, "-t").or(value(words, "--transport"));
    if transports.is_some_and(|t| {
        t.split(',')
            .any(|t| ["verbs", "mpi", "ucx", "ofi"].contains(&t))
    }) {
        return Some("another transport's feature and library (tests/verbs_vm.rs, mpi.rs, ucx.rs, ofi.rs run it)");
    }
    if joined.contains("$(") {
        return Some("a shell substitution");
    }
    let cmd = command(words)?;
    if value(words, "--np").and_then(|n| n.parse::<u32>().ok()) > Some(4) && measures(words) {
        return Some("more than 4 ranks: minutes on a 2-core CI host");
    }
    if cmd == "run" {
        return Some("a whole suite over several launches (tests/run.rs runs one)");
    }
    let mut inputs: Vec<&str> = ["--params", "--predict", "--counts"]
        .iter()
        .filter_map(|f| value(words, f))
        .collect();
    if cmd == "compare" {
        let at = words.iter().position(|w| w == "compare").unwrap_or(0);
        inputs.extend(
            words[at + 1..]
                .iter()
                .take_while(|w| !w.starts_with('-'))
                .map(String::as_str),
        );
    }
    if inputs.iter().any(|f| !dir.join(f).exists()) {
        return Some("an input file from a command the page does not show");
    }
    None
}

/// Whether the example measures (all but `simulate` without `--measure`).
fn measures(words: &[String]) -> bool {
    command(words) != Some("simulate") || words.iter().any(|w| w == "--measure")
}

/// Sets `flag` to `to` in `words`, or adds it when `add`.
fn set(words: &mut Vec<String>, flag: &str, to: &str, add: bool) {
    match words.iter().position(|w| w == flag) {
        Some(at) if at + 1 < words.len() => words[at + 1] = to.to_string(),
        Some(_) => {}
        None if add => words.extend([flag.to_string(), to.to_string()]),
        None => {}
    }
}

/// The rewrite of the module docs, `help`: the command's `--help`.
fn tiny(mut words: Vec<String>, help: &str) -> Vec<String> {
    let cmd = command(&words).unwrap_or_default().to_string();
    if !measures(&words) {
        return words;
    }
    for (flag, to, add) in [
        ("--reps", "2", true),
        ("--warmup", "1", true),
        ("--max-reps", "20", false),
        ("--fitpoints", "50", true),
        ("--exchanges", "2", true),
        ("--reads", "1000", true),
        ("--duration", "10ms", true),
        ("--check-after", "0s", true),
        ("--passes", "1", true),
    ] {
        if help.contains(&format!("{flag} <")) {
            set(&mut words, flag, to, add);
        }
    }
    if cmd == "loggp" {
        set(&mut words, "--sizes", "1K-8K:1K", true);
        words.extend(["--no-confirm", "--no-refine"].map(String::from));
    } else if let Some(at) = words.iter().position(|w| w == "--sizes") {
        words[at + 1] = capped(&words[at + 1]);
    }
    words
}

/// A size spec with every size of M or G bytes made 64K (a list keeps one 64K).
fn capped(spec: &str) -> String {
    let (mut out, mut token) = (String::new(), String::new());
    for c in spec.chars().chain(['\0']) {
        if matches!(c, ',' | '-' | ':' | '\0') {
            let big = token.ends_with('M') || token.ends_with('G');
            out += if big { "64K" } else { &token };
            token.clear();
            out.extend((c != '\0').then_some(c));
        } else {
            token.push(c);
        }
    }
    let mut parts: Vec<&str> = out.split(',').collect();
    parts.dedup();
    parts.join(",")
}

/// `ngauge CMD --help`, once per command.
fn help(cache: &mut HashMap<String, String>, cmd: &str) -> String {
    cache
        .entry(cmd.to_string())
        .or_insert_with(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_ngauge"))
                .args([cmd, "--help"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .clone()
}

fn pages() -> Vec<(String, String)> {
    let dir = root().join("docs/commands");
    let mut pages: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    pages.sort();
    pages
}

#[test]
fn issue_37_every_command_page_example_runs() {
    let started = Instant::now();
    let mut helps = HashMap::new();
    let (mut ran, mut failed, mut skips) = (0, Vec::new(), Vec::new());
    for (page, text) in pages() {
        let dir = tempfile::tempdir().unwrap();
        for ex in examples_of(&page, &text) {
            let at = format!("{}:{}", ex.page, ex.line);
            if let Some(why) = skipped(&ex.words, dir.path()) {
                skips.push(format!("{at} ({why})"));
                continue;
            }
            let cmd = command(&ex.words).unwrap_or_else(|| panic!("{at}: no command"));
            let words = tiny(ex.words.clone(), &help(&mut helps, cmd));
            let child = Command::new(env!("CARGO_BIN_EXE_ngauge"))
                .args(&words)
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(match &ex.stdout_to {
                    Some(file) => {
                        Stdio::from(std::fs::File::create(dir.path().join(file)).unwrap())
                    }
                    None => Stdio::null(),
                })
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            ran += 1;
            match support::output_within(child, Duration::from_secs(60)) {
                Ok(out) if out.status.success() => {}
                Ok(out) | Err(out) => failed.push(format!(
                    "{at}: ngauge {} -> {:?}: {}",
                    words.join(" "),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            }
        }
    }
    // Past libtest's capture, as tests/support's skip lines: the user sees what
    // did not run here.
    let _ = writeln!(
        std::io::stdout().lock(),
        "\n{ran} examples ran in {:.1} s; skipped: {}",
        started.elapsed().as_secs_f64(),
        skips.join(", ")
    );
    assert!(ran >= 25, "only {ran} examples ran");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Every figure under `docs/` is named, with its path, on a line that runs
/// `ngauge` or a script of `scripts/` on some page of `docs/`.
#[test]
fn issue_37_every_figure_in_docs_names_its_command() {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|e| e == ext) {
                out.push(p);
            }
        }
    }
    let (mut figures, mut pages) = (Vec::new(), Vec::new());
    walk(&root().join("docs"), "svg", &mut figures);
    walk(&root().join("docs"), "md", &mut pages);
    let lines: Vec<String> = pages
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.lines().map(String::from).collect::<Vec<_>>()
        })
        .filter(|l| l.contains("ngauge ") || l.contains("scripts/"))
        .collect();
    assert!(!figures.is_empty());
    for f in figures {
        let rel = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            lines.iter().any(|l| l.contains(&rel)),
            "{rel}: no page shows the command that draws it"
        );
    }
}

#[test]
fn the_rewrite_is_mechanical() {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let help = "  --reps <NUM>\n  --warmup <NUM>\n  --sizes <SPEC>\n";
    assert_eq!(
        tiny(words("pingpong --sizes 1-1M --reps 100"), help).join(" "),
        "pingpong --sizes 1-64K --reps 2 --warmup 1"
    );
    assert_eq!(
        tiny(words("pingpong --sizes 64K,1M"), help).join(" "),
        "pingpong --sizes 64K --reps 2 --warmup 1"
    );
    assert_eq!(capped("1-1M:4K"), "1-64K:4K");
    assert_eq!(capped("1,8,4K"), "1,8,4K");
    let ex = examples_of(
        "p.md",
        "text\n```sh\nngauge --np 4 coll --sizes 1-1M   # a comment\nngauge a \\\n  b > x.json\n```\n```\nngauge not sh\n```\n",
    );
    let got: Vec<(usize, String)> = ex.iter().map(|e| (e.line, e.words.join(" "))).collect();
    assert_eq!(
        got,
        [
            (3, "--np 4 coll --sizes 1-1M".to_string()),
            (4, "a b".into())
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    assert!(skipped(&words("-t mpi,tcp pingpong"), dir.path()).is_some());
    assert!(skipped(&words("--np 8 ebb"), dir.path()).is_some());
    assert_eq!(
        skipped(&words("simulate --np 64 --op bcast"), dir.path()),
        None
    );
    let sim = words("simulate --np 64 --sizes 1-1M");
    assert_eq!(tiny(sim.clone(), help), sim);
    assert!(skipped(&words("simulate --params p.json"), dir.path()).is_some());
    assert!(skipped(&words("compare a.json b.json"), dir.path()).is_some());
    assert_eq!(skipped(&words("--np 4 coll --op bcast"), dir.path()), None);
}
