//! The `ngauge` binary: parse the command line, dispatch, print errors.

mod cli;
mod commands;

use clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
use clap::FromArgMatches;
use std::process::ExitCode;

fn main() -> ExitCode {
    #[cfg(feature = "ofi")]
    ngauge_ofi::default_stop_signals();
    let mut parser = cli::command();
    let parsed = (parser.try_get_matches_from_mut(std::env::args_os()))
        .and_then(|m| cli::Cli::from_arg_matches(&m).map(|c| (m, c)));
    let (matches, cli) = match parsed {
        Ok(parsed) => parsed,
        Err(err) if !err.use_stderr() || err.kind() == DisplayHelpOnMissingArgumentOrSubcommand => {
            // --help and --version go to stdout with status 0, `ngauge` alone
            // shows the help.
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
        Err(err) => {
            let argv: Vec<String> = std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let text = commands::parse_error_text(&parser, &argv, &err.to_string());
            return usage_error(&text);
        }
    };
    if let Some(message) = cli::refused_job_flags(&matches) {
        return usage_error(&message);
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
            let text = commands::error_text(&err);
            if err
                .chain()
                .next()
                .is_some_and(|e| e.is::<commands::UsageError>())
            {
                // Found before the job started, alike on every rank.
                usage_error(&text)
            } else if err.downcast_ref::<commands::UsageError>().is_some() {
                say_error(&text);
                ExitCode::from(2)
            } else {
                say_error(&text);
                ExitCode::FAILURE
            }
        }
    }
}

/// Ends on bad input (status 2). Under a launcher that starts every rank with this
/// command line (mpirun, mpiexec, srun) each rank finds the same error, and rank 0
/// alone says it; a rank started by hand says its own.
fn usage_error(message: &str) -> ExitCode {
    use ngauge::launch::LauncherKind::{Local, Manual};
    let env = ngauge::launch::detect();
    let said_by_rank_0 = !matches!(env.kind, Local | Manual) && env.rank.is_some_and(|r| r != 0);
    if !said_by_rank_0 {
        say_error(message);
    }
    ExitCode::from(2)
}

/// Prints `ngauge: error: MESSAGE` in one write: under an MPI launcher every rank
/// may print the same error, and lines written in pieces come out interleaved.
fn say_error(message: &str) {
    use std::io::Write;
    let line = format!("ngauge: error: {message}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
