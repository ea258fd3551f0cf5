//! One module per subcommand: each glues launch, a pattern, statistics and a report.

mod info;
mod selftest;
mod timer;

use crate::cli::{Cli, Command, GlobalArgs};
use ngauge::launch::{self, LaunchError, LaunchOptions, Started, World};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Timer(args) => timer::run(&cli.global, &args),
        Command::Info => info::run(&cli.global),
        Command::Selftest(cmd) => selftest::run(&cli.global, &cmd),
    }
}

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

/// Starts the job and runs `body` on every rank; in the local launcher's parent,
/// waits for the ranks and exits with their worst status. Only rank 0 prints
/// results; `body` decides that by `world.rank`.
pub fn with_world(
    global: &GlobalArgs,
    body: impl FnOnce(&mut World) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let started = launch::start(&launch_options(global)).map_err(|e| match e {
        LaunchError::Usage(msg) => anyhow::Error::new(crate::UsageError(msg)),
        e => anyhow::Error::new(e),
    })?;
    match started {
        Started::Launcher(0) => Ok(()),
        // The ranks already printed their errors.
        Started::Launcher(code) => std::process::exit(code),
        Started::Rank(mut world) => {
            let rank = world.rank;
            body(&mut world).map_err(|e| e.context(format!("rank {rank}")))?;
            world
                .finish()
                .map_err(|e| anyhow::Error::new(e).context(format!("rank {rank}")))
        }
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
