//! One module per subcommand: each glues launch, a pattern, statistics and a report.
//! What they share (starting the job, the spec of the global flags, metadata,
//! warnings, printing) is in [`common`].

mod coll;
mod common;
mod compare;
mod ebb;
mod exec;
mod info;
mod late;
mod loggp;
mod matrix;
mod nbc;
mod noise;
mod pingpong;
mod rma;
mod run;
mod selftest;
mod simulate;
mod sync;
mod timer;

pub use common::{error_text, parse_error_text, UsageError};

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Coll(args) => coll::run(&cli.global, &args),
        Command::Timer(args) => timer::run(&cli.global, &args),
        Command::Info => info::run(&cli.global),
        Command::Loggp(args) => loggp::run(&cli.global, &args),
        Command::Pingpong(args) => pingpong::run(&cli.global, &args),
        Command::Run(args) => run::run(&cli.global, &args),
        Command::Compare(args) => compare::run(&cli.global, &args),
        Command::Exec(args) => exec::run(&cli.global, &args),
        Command::Selftest(cmd) => selftest::run(&cli.global, &cmd),
        Command::Sync(args) => sync::run(&cli.global, &args),
        Command::Simulate(args) => simulate::run(&cli.global, &args),
        Command::Late(args) => late::run(&cli.global, &args),
        Command::Nbc(args) => nbc::run(&cli.global, &args),
        Command::Noise(args) => noise::run(&cli.global, &args),
        Command::Rma(args) => rma::run(&cli.global, &args),
        Command::Matrix(args) => matrix::run(&cli.global, &args),
        Command::Ebb(args) => ebb::run(&cli.global, &args),
    }
}
