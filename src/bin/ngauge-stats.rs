//! `ngauge-stats`: the crate's statistics for shell scripts (plumbing, not a
//! measurement). Reads numbers separated by white space on standard input and
//! prints one line:
//!
//! ```text
//! N MEDIAN LO HI COVERAGE
//! ```
//!
//! the count, the median, and the distribution-free confidence interval of the
//! median at `--level` (default 0.95) with the coverage it reaches; `LO HI COVERAGE`
//! are `- - -` when there are too few numbers for that level (fewer than 6 at 95%).
//! Definitions: `docs/statistics.md`. `scripts/bench-mpi` uses it, so the interval
//! it prints is the library's.
//!
//! A separate binary rather than an `ngauge` subcommand: it has no job, transport or
//! clock, and keeping it out of the command line leaves `ngauge --help` to users.
//! No clap here (the house keeps clap in the main binary's CLI): two flags.

use ngauge::stats::{Sorted, StatsError};
use std::io::Read;
use std::process::ExitCode;

const USAGE: &str = "usage: ngauge-stats [--level P] < NUMBERS
Reads numbers (separated by white space) on standard input and prints
`N MEDIAN LO HI COVERAGE`: the count, the median, and the distribution-free
confidence interval of the median at level P (default 0.95) with the coverage
it reaches (`- - -` when there are too few numbers for that level).";

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(Failure::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(message)) => {
            eprintln!("ngauge-stats: {message}");
            ExitCode::from(2)
        }
    }
}

enum Failure {
    Help,
    Usage(String),
}

fn run() -> Result<String, Failure> {
    let level = parse_args(std::env::args().skip(1))?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
    let values = parse_numbers(&input)?;
    let sample = Sorted::new(&values).map_err(|e| match e {
        StatsError::Empty => Failure::Usage("no numbers on standard input".into()),
        StatsError::NotFinite { index } => Failure::Usage(format!(
            "number {} ({}) is not finite",
            index + 1,
            values[index]
        )),
        other => Failure::Usage(other.to_string()),
    })?;
    let interval = sample
        .median_interval(level)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let tail = match interval {
        Some(ci) => format!("{} {} {:.6}", ci.lo, ci.hi, ci.coverage),
        None => "- - -".into(),
    };
    Ok(format!("{} {} {tail}", sample.len(), sample.median()))
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<f64, Failure> {
    let mut level = 0.95;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "-h" | "--help" => return Err(Failure::Help),
            "--level" => args
                .next()
                .ok_or_else(|| Failure::Usage("--level needs a value, as --level 0.95".into()))?,
            _ => match arg.strip_prefix("--level=") {
                Some(v) => v.to_string(),
                None => {
                    return Err(Failure::Usage(format!(
                        "unknown argument '{arg}' (see --help)"
                    )))
                }
            },
        };
        level = value
            .parse::<f64>()
            .ok()
            .filter(|l| *l > 0.0 && *l < 1.0)
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "--level {value}: expected a probability between 0 and 1, as 0.95"
                ))
            })?;
    }
    Ok(level)
}

fn parse_numbers(input: &str) -> Result<Vec<f64>, Failure> {
    input
        .split_whitespace()
        .enumerate()
        .map(|(i, word)| {
            word.parse::<f64>()
                .map_err(|_| Failure::Usage(format!("number {}: '{word}' is not a number", i + 1)))
        })
        .collect()
}
