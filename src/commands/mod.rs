//! One module per subcommand: each glues launch, a pattern, statistics and a report.

mod info;
mod timer;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Timer(args) => timer::run(&cli.global, &args),
        Command::Info => info::run(&cli.global),
    }
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}
