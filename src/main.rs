//! The `ngauge` binary: parse the command line, dispatch, print errors.

mod cli;
mod commands;

use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;

fn main() -> ExitCode {
    #[cfg(feature = "ofi")]
    ngauge_ofi::default_stop_signals();
    let parsed = cli::Cli::command()
        .try_get_matches()
        .and_then(|m| cli::Cli::from_arg_matches(&m).map(|c| (m, c)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            // --help and --version go to stdout with status 0; bad input is one
            // line (plus clap's usage hint) with status 2.
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    if let Some(message) = cli::refused_job_flags(&matches) {
        say_error(&message);
        return ExitCode::from(2);
    }
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            // A failure that a SIGINT/SIGTERM caused is reported as the signal.
            ngauge::launch::signals::exit_if_interrupted();
            say_error(&commands::error_text(&err));
            if err.downcast_ref::<commands::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Prints `ngauge: error: MESSAGE` in one write: under an MPI launcher every rank
/// may print the same error, and lines written in pieces come out interleaved.
fn say_error(message: &str) {
    use std::io::Write;
    let line = format!("ngauge: error: {message}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
