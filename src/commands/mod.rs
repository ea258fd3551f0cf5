//! One module per subcommand: each glues launch, a pattern, statistics and a report.

mod info;
mod loggp;
mod pingpong;
mod selftest;
mod timer;
pub mod transports;

use crate::cli::{Cli, Command, GlobalArgs, TransportName};
use ngauge::launch::{self, LaunchError, LaunchOptions, Started, World};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Timer(args) => timer::run(&cli.global, &args),
        Command::Info => info::run(&cli.global),
        Command::Loggp(args) => loggp::run(&cli.global, &args),
        Command::Pingpong(args) => pingpong::run(&cli.global, &args),
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
    let started = start_job(global, &launch_options(global)).map_err(|e| match e {
        LaunchError::Usage(msg) => anyhow::Error::new(crate::UsageError(msg)),
        e => anyhow::Error::new(e),
    })?;
    match started {
        Started::Launcher(0) => Ok(()),
        // The ranks already printed their errors.
        Started::Launcher(code) => std::process::exit(code),
        Started::Rank(mut world) => {
            let rank = world.rank;
            let result = match body(&mut world) {
                Err(e) => {
                    // Tell the others why, so their errors name this rank and the reason.
                    world.control.abort(&format!("{e:#}"));
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
                let code = if e.downcast_ref::<crate::UsageError>().is_some() {
                    2
                } else {
                    1
                };
                launch::mpi::abort_job_on_error(&format!("{e:#}"), code);
            }
            result
        }
    }
}

/// Starts this process's part of the job: through MPI when `-t` asks for it or an
/// MPI launcher started us (feature `mpi`), else through [`launch::start`].
fn start_job(global: &GlobalArgs, opts: &LaunchOptions) -> Result<Started, LaunchError> {
    let wants_mpi = global.transport.contains(&TransportName::Mpi);
    #[cfg(feature = "mpi")]
    if launch::mpi::wanted(wants_mpi, opts) {
        return launch::mpi::start(opts);
    }
    #[cfg(not(feature = "mpi"))]
    if wants_mpi {
        return Err(LaunchError::Usage(
            "-t mpi: this ngauge was built without MPI; rebuild with \
             `cargo build --release --features mpi` (needs libopenmpi-dev or libmpich-dev)"
                .into(),
        ));
    }
    launch::start(opts)
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}
