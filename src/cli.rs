//! The command line: global flags (before or after the command) and one subcommand.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nbuild:      ",
    env!("NGAUGE_BUILD_PROFILE"),
    " (opt-level ",
    env!("NGAUGE_BUILD_OPT_LEVEL"),
    "), git ",
    env!("NGAUGE_BUILD_GIT"),
    "\ncompiler:   ",
    env!("NGAUGE_BUILD_RUSTC"),
    "\ntarget:     ",
    env!("NGAUGE_BUILD_TARGET"),
    "\ntransports: ",
    env!("NGAUGE_BUILD_TRANSPORTS"),
);

/// Measure what communication really costs: latency, bandwidth, LogGP parameters and
/// protocol switches over TCP, UDP, InfiniBand verbs and MPI.
#[derive(Debug, Parser)]
#[command(
    name = "ngauge",
    version,
    long_version = LONG_VERSION,
    max_term_width = 80,
    after_help = "Examples:\n  ngauge timer                 check the timer before trusting any figure\n  \
                  ngauge loggp                 LogGP parameters over TCP between 2 local ranks\n  \
                  ngauge --np 4 info --json    what this build and machine can do"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags accepted before or after the command.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Transport(s) to measure; several, comma separated, are measured interleaved.
    #[arg(
        short = 't',
        long,
        global = true,
        value_enum,
        value_delimiter = ',',
        default_value = "tcp",
        value_name = "NAME"
    )]
    pub transport: Vec<TransportName>,

    /// Number of ranks the local launcher starts (ignored under mpirun/srun).
    #[arg(long, global = true, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub np: u32,

    /// Print exactly one JSON document on stdout instead of the human table.
    #[arg(long, global = true)]
    pub json: bool,

    /// Stream one JSON record per finished measurement point to FILE (JSON lines).
    #[arg(short = 'o', long, global = true, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Let every rank print its progress and warnings, not just rank 0.
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,
}

/// The transports ngauge knows (whether compiled in or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportName {
    /// TCP sockets, one connection per pair, TCP_NODELAY.
    Tcp,
    /// UDP datagrams with sequence numbers and retransmission.
    Udp,
    /// InfiniBand/RoCE verbs (cargo feature `verbs`).
    Verbs,
    /// MPI point-to-point through a C shim (cargo feature `mpi`).
    Mpi,
}

impl TransportName {
    /// Lowercase name.
    #[allow(dead_code)] // used once the launcher and patterns land
    pub fn as_str(self) -> &'static str {
        match self {
            TransportName::Tcp => "tcp",
            TransportName::Udp => "udp",
            TransportName::Verbs => "verbs",
            TransportName::Mpi => "mpi",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Timer facts: source, frequency, read cost, invariant TSC, pinning, governor.
    ///
    /// Run this before trusting any figure on a new machine. It calibrates the timer
    /// against CLOCK_MONOTONIC_RAW by regression over 100 ms, compares the result with
    /// the TSC frequency the kernel states, times 10^6 back-to-back reads, and warns
    /// about every fact that threatens a measurement (variable frequency, unpinned
    /// process, TSC that is not invariant).
    ///
    /// Example: ngauge timer --json
    Timer(TimerArgs),

    /// What this build and machine can do: transports compiled and usable (with the
    /// reason when not), the launcher detected, timer facts.
    ///
    /// Example: ngauge --np 4 info --json
    Info,
}

/// Options of `ngauge timer`.
#[derive(Debug, Args, Clone)]
pub struct TimerArgs {
    /// Back-to-back reads timed for the read cost.
    #[arg(long, default_value_t = 1_000_000, value_name = "NUM", value_parser = clap::value_parser!(u64).range(10..=100_000_000))]
    pub reads: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_before_or_after_the_command() {
        let a = Cli::try_parse_from(["ngauge", "--json", "-t", "udp", "info"]).unwrap();
        let b = Cli::try_parse_from(["ngauge", "info", "--json", "--transport", "udp"]).unwrap();
        assert!(a.global.json && b.global.json);
        assert_eq!(a.global.transport, vec![TransportName::Udp]);
        assert_eq!(b.global.transport, vec![TransportName::Udp]);
        let c = Cli::try_parse_from(["ngauge", "-t", "mpi,tcp", "info"]).unwrap();
        assert_eq!(
            c.global.transport,
            vec![TransportName::Mpi, TransportName::Tcp]
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(Cli::try_parse_from(["ngauge", "--np", "0", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "-t", "carrier-pigeon", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "timer", "--reads", "1"]).is_err());
    }
}
