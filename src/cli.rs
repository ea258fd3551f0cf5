//! The command line: global flags (before or after the command) and one subcommand.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use ngauge::clock::{Nanos, TimerSource};
use ngauge::coll::Collective;
use ngauge::job::{OfiOp, TransportName, UcxConnect, UcxOp, VerbsOp, WaitPolicy};
use ngauge::model::loggp::DetectorKind;
use ngauge::patterns::coll::Scheme;
use ngauge::patterns::late::{CallMode, DelayedRanks};
use ngauge::patterns::loggp::{DelayChoice, PairsMode};
use ngauge::patterns::nbc::Compute;
use ngauge::patterns::noise::NoiseInjection;
use ngauge::spec::coll::{RootChoice, Rotate};
use ngauge::sync::{Algorithm as SyncAlgorithm, Estimator as SyncEstimator};
use std::path::PathBuf;

/// A parser for one of the library's named enums: its names are the possible
/// values (with the help text given here), parsed by the library's `FromStr`, so
/// the command line spells them as specs and documents do.
fn names<T>(values: &[(T, &'static str)]) -> impl TypedValueParser<Value = T>
where
    T: Copy + Into<&'static str> + std::str::FromStr + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    PossibleValuesParser::new(
        values
            .iter()
            .map(|&(v, help)| PossibleValue::new(v.into()).help(help)),
    )
    .try_map(|s: String| s.parse::<T>())
}

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

/// The global flags that describe a job (transports, ranks, how they wait, socket
/// buffers): `ngauge run` takes all of these from each experiment of its suite
/// (`job`, `np`), so given to it they would be ignored; it refuses them instead.
const JOB_FLAGS: &[(&str, &str)] = &[
    ("transport", "-t/--transport"),
    ("np", "--np"),
    ("wait", "--wait"),
    ("sndbuf", "--sndbuf"),
    ("rcvbuf", "--rcvbuf"),
];

/// The one-line refusal of a job flag given to `ngauge run`, if any (before or
/// after the command).
pub fn refused_job_flags(matches: &clap::ArgMatches) -> Option<String> {
    let (name, sub) = matches.subcommand()?;
    if name != "run" {
        return None;
    }
    let given = |id: &str| {
        [matches, sub].iter().any(|m| {
            m.try_get_raw(id).is_ok()
                && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        })
    };
    if given("timer") {
        return Some(
            "--timer: a suite's experiments time with the house timer; run the \
             command itself with --timer (e.g. ngauge --timer rdtsc pingpong)"
                .into(),
        );
    }
    let flags: Vec<&str> = JOB_FLAGS
        .iter()
        .filter(|(id, _)| given(id))
        .map(|(_, flag)| *flag)
        .collect();
    (!flags.is_empty()).then(|| {
        format!(
            "{}: `ngauge run` takes transports, ranks and their setup from each experiment \
             of the suite (its `job` table and `np`); edit the suite file instead",
            flags.join(", ")
        )
    })
}

/// The global flags of a job's transports (`-t`, how ranks wait, buffers, each
/// transport's options) and of starting ranks by hand.
const TRANSPORT_FLAGS: &[&str] = &[
    "transport",
    "timeout",
    "wait",
    "sndbuf",
    "rcvbuf",
    "device",
    "port",
    "gid_index",
    "verbs_op",
    "ucx_tls",
    "ucx_op",
    "ucx_connect",
    "ucx_listen_ip",
    "ofi_provider",
    "ofi_op",
];
const BY_HAND_FLAGS: &[&str] = &[
    "rank",
    "size",
    "rendezvous",
    "bind",
    "job_token",
    "data_addr",
];

/// Per command, the global flags its help leaves out: those it ignores (one
/// process: `simulate`, `timer`, `compare`) or refuses (`run`'s [`JOB_FLAGS`]).
/// They are still accepted, so a flag before the command never breaks one.
const NOT_SHOWN: &[(&str, &[&[&str]])] = &[
    ("simulate", &[TRANSPORT_FLAGS, BY_HAND_FLAGS, &["timer"]]),
    ("timer", &[TRANSPORT_FLAGS, BY_HAND_FLAGS, &["np"]]),
    (
        "compare",
        &[TRANSPORT_FLAGS, BY_HAND_FLAGS, &["np", "verbose", "timer"]],
    ),
    ("run", &[TRANSPORT_FLAGS, &["np", "timer"]]),
];

/// The command line's parser: [`Cli`] with each command's help showing only the
/// global flags that apply to it ([`NOT_SHOWN`]).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    // clap gives each command the global flags it does not define itself: a hidden
    // copy defined first is the one the command parses, and its help leaves out.
    for (name, groups) in NOT_SHOWN {
        let hidden: Vec<clap::Arg> = (groups.iter().copied().flatten())
            .map(|id| {
                let arg = cli.get_arguments().find(|a| a.get_id() == *id);
                arg.expect("a global flag of Cli").clone().hide(true)
            })
            .collect();
        cli = cli.mut_subcommand(name, |sub| sub.args(hidden));
    }
    cli
}

/// Flags accepted before or after the command.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// Transport(s) to measure; several, comma separated, are measured interleaved.
    #[arg(
        short = 't',
        long,
        global = true,
        value_parser = names(&[
            (TransportName::Tcp, "TCP sockets, one connection per pair, TCP_NODELAY"),
            (TransportName::Udp, "UDP datagrams with sequence numbers and retransmission"),
            (TransportName::Verbs, "InfiniBand/RoCE verbs (cargo feature `verbs`)"),
            (TransportName::Mpi, "MPI point-to-point through a C shim (cargo feature `mpi`)"),
            (TransportName::Ucx, "UCX's UCP tag messages or RMA puts (cargo feature `ucx`)"),
            (TransportName::Ofi, "libfabric RDM endpoints (cargo feature `ofi`)"),
        ]),
        value_delimiter = ',',
        default_value = "tcp",
        value_name = "NAME"
    )]
    pub transport: Vec<TransportName>,

    /// Number of ranks the local launcher starts (ignored under mpirun/srun; at
    /// most 4096), or the simulated job's size (`simulate`, up to 2^26).
    #[arg(long, global = true, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=(1 << 26)))]
    pub np: u32,

    /// Print exactly one JSON document on stdout instead of the human table.
    #[arg(long, global = true)]
    pub json: bool,

    /// Stream one JSON record per finished measurement point to FILE (JSON lines).
    #[arg(short = 'o', long, global = true, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Write the records of -o also as CSV to FILE: one row per point, one column
    /// per field (named as in the JSON, with its unit), numbers to 6 significant
    /// digits; rewritten whole after each point.
    #[arg(long, global = true, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Let every rank print its progress and warnings, not just rank 0.
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,

    /// How clocks read the time-stamp counter. Default: `rdtscp` followed by
    /// `lfence`, which waits for the code it brackets (clock_monotonic_raw on a
    /// CPU without rdtscp). `rdtsc` trades that ordering guarantee for a cheaper
    /// reading, as Netgauge and ucx_perftest read: to compare with such a tool on
    /// its own terms. Every result records the timer (`meta.timer`).
    /// Example: ngauge -t ucx --timer rdtsc pingpong --sizes 1
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (TimerSource::Rdtscp, "rdtscp; lfence: ordered with the code it times (the default)"),
            (TimerSource::Rdtsc, "plain rdtsc: cheaper, not ordered"),
        ]),
        value_name = "NAME"
    )]
    pub timer: Option<TimerSource>,

    /// This process's rank when starting ranks by hand (with --size and
    /// --rendezvous; rank 0 prints the command line for the others).
    #[arg(
        long,
        global = true,
        env = "NGAUGE_RANK",
        value_name = "R",
        help_heading = "Starting by hand"
    )]
    pub rank: Option<usize>,

    /// Number of ranks when starting ranks by hand.
    #[arg(long, global = true, env = "NGAUGE_SIZE", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536), help_heading = "Starting by hand")]
    pub size: Option<u32>,

    /// Rank 0's listener, HOST:PORT: rank 0 binds it, the others connect to it.
    /// Needed across hosts (under Slurm the first node is the default).
    #[arg(
        long,
        global = true,
        env = "NGAUGE_RENDEZVOUS",
        value_name = "HOST:PORT",
        help_heading = "Starting by hand"
    )]
    pub rendezvous: Option<String>,

    /// Where rank 0 listens when not the --rendezvous address (e.g. 0.0.0.0:7000).
    #[arg(
        long,
        global = true,
        value_name = "ADDR:PORT",
        help_heading = "Starting by hand"
    )]
    pub bind: Option<String>,

    /// Proof that a rank belongs to this job; rank 0 generates one when missing.
    #[arg(
        long,
        global = true,
        env = "NGAUGE_JOB_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        help_heading = "Starting by hand"
    )]
    pub job_token: Option<String>,

    /// Address this rank's data transports listen on (default: the local address
    /// of its connection to rank 0, i.e. the link the user chose).
    #[arg(
        long,
        global = true,
        value_name = "IP",
        help_heading = "Starting by hand"
    )]
    pub data_addr: Option<std::net::IpAddr>,

    /// Seconds to wait for ranks to join, and for the slowest rank to enter a
    /// control operation; a lost rank is reported within it. A bare number is
    /// seconds; a unit works too (500ms).
    #[arg(long, global = true, default_value_t = 30.0, value_name = "SECONDS", value_parser = parse_timeout)]
    pub timeout: f64,
    /// How data transports wait: `poll` spins on nonblocking calls (lowest latency,
    /// burns the core), `block` sleeps in the kernel, `auto` (the default) polls
    /// when this host's ranks fit on its cores and blocks otherwise.
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (WaitPolicy::Auto, "poll when this host's ranks fit on its cores, else block"),
            (WaitPolicy::Poll, "spin on nonblocking calls"),
            (WaitPolicy::Block, "sleep in the kernel"),
        ]),
        default_value = "auto",
        value_name = "MODE",
        help_heading = "Transports"
    )]
    pub wait: WaitPolicy,

    /// SO_SNDBUF for TCP/UDP sockets, in bytes (K/M suffixes; kernel default if unset).
    #[arg(long, global = true, value_name = "BYTES", value_parser = parse_buffer_bytes, help_heading = "Transports")]
    pub sndbuf: Option<usize>,

    /// SO_RCVBUF for TCP/UDP sockets, in bytes (K/M suffixes; kernel default if unset).
    #[arg(long, global = true, value_name = "BYTES", value_parser = parse_buffer_bytes, help_heading = "Transports")]
    pub rcvbuf: Option<usize>,

    #[command(flatten)]
    pub verbs: VerbsArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,

    #[command(flatten)]
    pub ofi: OfiArgs,
}

/// Flags of the verbs transport (`-t verbs`).
#[derive(Debug, Args, Clone)]
pub struct VerbsArgs {
    /// RDMA device to use (see `ibv_devices`); default: the first one.
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        help_heading = "Verbs (-t verbs)"
    )]
    pub device: Option<String>,

    /// Port of the device, 1-based.
    #[arg(long, global = true, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u8).range(1..), help_heading = "Verbs (-t verbs)")]
    pub port: u8,

    /// GID table index for RoCE or routed InfiniBand (see `ibv_devinfo -v`); default:
    /// no GRH on InfiniBand, the first IPv4-mapped GID on RoCE.
    #[arg(
        long,
        global = true,
        value_name = "N",
        help_heading = "Verbs (-t verbs)"
    )]
    pub gid_index: Option<u8>,

    /// Data path: `send` (send/recv into pre-posted receives), `write` (RDMA write
    /// with immediate into the region the receiver advertised) or `write-poll`
    /// (RDMA write into a ring whose last byte the receiver polls, as
    /// `ib_write_lat`; needs `--wait poll`).
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (VerbsOp::Send, "two-sided send/recv"),
            (VerbsOp::Write, "one-sided RDMA write with immediate"),
            (
                VerbsOp::WritePoll,
                "one-sided RDMA write into a ring the receiver polls (as ib_write_lat; --wait poll)",
            ),
        ]),
        default_value = "send",
        value_name = "OP",
        help_heading = "Verbs (-t verbs)"
    )]
    pub verbs_op: VerbsOp,
}

/// Flags of the UCX transport (`-t ucx`).
#[derive(Debug, Args, Clone)]
pub struct UcxArgs {
    /// UCX's transport list, as UCX_TLS (`posix,self`, `sysv`, `cma`, `tcp`,
    /// `rc`, `ud`, `dc`, `shm`, ...; `ngauge info -t ucx` lists those usable
    /// here); default: the environment's UCX_TLS, else UCX's own choice.
    #[arg(
        long,
        global = true,
        value_name = "LIST",
        help_heading = "UCX (-t ucx)"
    )]
    pub ucx_tls: Option<String>,

    /// Data path: `send` (ucp_tag_send_nbx into posted ucp_tag_recv_nbx, what
    /// MPI over UCX calls) or `put` (ucp_put_nbx into a ring the receiver
    /// polls, as --verbs-op write-poll; needs --wait poll).
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (UcxOp::Send, "two-sided tag send/receive"),
            (UcxOp::Put, "one-sided put into a ring the receiver polls (--wait poll)"),
        ]),
        default_value = "send",
        value_name = "OP",
        help_heading = "UCX (-t ucx)"
    )]
    pub ucx_op: UcxOp,

    /// How endpoints connect: `address` (worker addresses over the control
    /// channel) or `sockaddr` (UCX's client-server mode through its connection
    /// manager, UCX_SOCKADDR_TLS_PRIORITY: the lower rank of each pair listens,
    /// the higher connects; what RC over verbs needs where UD does not work).
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (UcxConnect::Address, "worker addresses over the control channel"),
            (UcxConnect::Sockaddr, "client-server through UCX's connection manager"),
        ]),
        default_value = "address",
        value_name = "HOW",
        help_heading = "UCX (-t ucx)"
    )]
    pub ucx_connect: UcxConnect,

    /// The IPv4 address listeners bind with --ucx-connect sockaddr; default:
    /// the host's first non-loopback one.
    #[arg(long, global = true, value_name = "IP", help_heading = "UCX (-t ucx)")]
    pub ucx_listen_ip: Option<std::net::Ipv4Addr>,
}

/// Flags of the ofi transport (`-t ofi`).
#[derive(Debug, Args, Clone)]
pub struct OfiArgs {
    /// libfabric provider, as `fi_info -l` names it (`shm`, `tcp;ofi_rxm`,
    /// `udp;ofi_rxd`, `verbs;ofi_rxm`, `cxi`, `efa`, `opx`); default: the first RDM
    /// provider `fi_getinfo` offers (`ngauge info` says which).
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        help_heading = "ofi (-t ofi)"
    )]
    pub ofi_provider: Option<String>,

    /// Data path: `send` (tagged or plain messages) or `write` (`fi_writedata`
    /// into the region the receiver advertised; needs FI_RMA).
    #[arg(
        long,
        global = true,
        value_parser = names(&[
            (OfiOp::Send, "two-sided messages, tagged where offered"),
            (OfiOp::Write, "one-sided fi_writedata with remote CQ data"),
        ]),
        default_value = "send",
        value_name = "OP",
        help_heading = "ofi (-t ofi)"
    )]
    pub ofi_op: OfiOp,
}

fn parse_buffer_bytes(s: &str) -> Result<usize, String> {
    match ngauge::sizes::parse_size(s) {
        Ok(b) if (1..=(1u64 << 30)).contains(&b) => Ok(b as usize),
        Ok(_) => Err(format!("{s:?} is not between 1 byte and 1G")),
        Err(e) => Err(e.to_string()),
    }
}

/// Every time flag's parser (the rule in README.md, "Times"): a number with a
/// unit (`850ns`, `50us`, `1.5ms`, `2s`, a bare `0`). A bare number only where
/// the value name states its unit (`--timeout SECONDS`, `--floor-us US`), in
/// `bare` nanoseconds per unit; elsewhere it is refused, since `--delay 5`
/// meaning five seconds would be a trap.
fn parse_time(s: &str, bare: Option<f64>) -> Result<Nanos, String> {
    let t = s.trim();
    let number = |n: &str| {
        (n.chars().all(|c| c.is_ascii_digit() || c == '.') && n.chars().any(|c| c.is_ascii_digit()))
            .then(|| n.parse::<f64>().ok())
            .flatten()
    };
    match (number(t), bare) {
        (Some(x), Some(scale)) => Ok(Nanos(x * scale)),
        (Some(x), None) if x != 0.0 => Err(format!(
            "{s:?} needs a unit: {t}us, {t}ms or {t}s (ns, us, ms, s)"
        )),
        _ => t
            .parse()
            .map_err(|e: ngauge::clock::DurationError| e.to_string()),
    }
}

fn parse_timeout(s: &str) -> Result<f64, String> {
    match parse_time(s, Some(1e9)).map(|t| t.0 / 1e9) {
        Ok(t) if t > 0.0 && t <= 86_400.0 => Ok(t),
        _ => Err(format!(
            "{s:?} is not a time in (0, 86400] seconds (a bare number is seconds, or 500ms)"
        )),
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

    /// LogGP parameters per protocol range from parametrized round trips.
    ///
    /// Measures PRTT(1,0,s), PRTT(n,0,s) and PRTT(n,d,s) between rank pairs (Hoefler
    /// et al., "LogGP in theory and practice", sec. 2), times the receive overhead at
    /// the receiver, finds protocol changes (look-ahead as in the paper, or an
    /// optimal segmentation), and reports L, o_s, o_r, g and G per range.
    ///
    /// Example: ngauge loggp --plot loggp.svg --params-out tcp.json
    Loggp(LoggpArgs),

    /// Latency and bandwidth per message size: rank 0 pings rank 1.
    ///
    /// Per size: --warmup untimed round trips, then --reps round trips, each timed on
    /// its own with RDTSCP (never a loop divided by n). Reports the half round-trip
    /// time (min/median/mean/p99/max, microseconds) and the bandwidth from the median
    /// (MB/s, MB = 10^6 bytes). With more than 2 ranks, ranks 2.. stay idle. UDP sizes
    /// above the datagram limit are skipped with a warning.
    ///
    /// Example: ngauge pingpong --sizes 1-1M -o sweep.jsonl
    Pingpong(PingpongArgs),

    /// Clock synchronization: how long it takes and how far each rank's global time
    /// is off, right after and some time after the sync.
    ///
    /// Every rank learns a model of its clock relative to rank 0 (offset, and drift
    /// for jk/hca) over the data transport; then, at each --check-after time, rank 0
    /// measures each rank's residual afresh with the min-RTT ping-pong. With
    /// NGAUGE_TEST_CLOCK_SKEW=RANK:OFFSET:DRIFT,... (e.g. 1:+3ms:+40ppm) the named
    /// ranks' clocks are skewed and the true residual is reported too.
    ///
    /// Example: ngauge --np 4 sync --sync hca --check-after 0s,1s,5s --json
    Sync(SyncArgs),

    /// Collectives timed correctly, over any transport: ngauge's own algorithms as
    /// schedules, or (with -t mpi) the MPI library's own collective.
    ///
    /// --scheme window (default, Hunold & Carpen-Amarie; Hoefler et al.): the
    /// clocks are synchronized (--sync), every call starts on every rank at a common
    /// global time, and its run-time is the latest end minus the earliest start;
    /// calls that start late or overrun their window are invalid, and the window
    /// grows. barrier: a dissemination barrier before each call, the largest local
    /// time. loop: calls back to back, total divided by their number (to see the
    /// error it makes). Per size: valid and invalid calls, then Tukey's filter, min,
    /// median, mean and the 95% interval of the mean. Several transports (-t
    /// mpi,tcp) or algorithms (--algo mpi,binomial) are measured interleaved, size
    /// by size, and compared with the last one measured.
    ///
    /// Example: ngauge --np 4 coll --op bcast --algo binomial,chain --sizes 1-64K
    Coll(CollCmdArgs),

    /// Run a suite of experiments (a bench-configs TOML file) over several launches.
    ///
    /// Each launch runs every experiment once, in its own shuffled order drawn from
    /// the suite's seed, each run a job of its own (Hunold & Carpen-Amarie,
    /// Algorithm 5). Results land in one directory: every run's document, the
    /// records per experiment as JSON Lines and CSV, each launch's factors (Table
    /// VI), and summary.json/csv with the median of the per-launch medians. Ctrl-C
    /// keeps every finished run; --resume DIR runs the rest. See
    /// docs/commands/run.md.
    ///
    /// Example: ngauge run bench-configs/quick.toml --output quick-a
    Run(RunArgs),

    /// Two result files or run directories side by side, with a rank-sum test.
    ///
    /// Per experiment and size: the medians of A and B, B/A, the Wilcoxon-Mann-
    /// Whitney p-value on the per-launch medians (or on the repetitions of single
    /// launches) and stars (* <= 0.05, ** <= 0.01, *** <= 0.001). See
    /// docs/commands/compare.md.
    ///
    /// Example: ngauge compare quick-a quick-b --plot ratio.svg
    Compare(CompareArgs),

    /// Runs one experiment of a suite from its spec file (what `ngauge run` starts).
    #[command(hide = true)]
    Exec(ExecArgs),

    /// LogGP simulation of a collective: predicted completion per rank and overall,
    /// from measured parameters (`loggp --params-out`) or given ones.
    ///
    /// A discrete-event simulator (Hoefler et al., "LogGP in theory and practice",
    /// sec. 4.1) runs the very schedules `coll` executes: o_s and o_r on each rank's
    /// CPU, g + (s-1)G between messages on its interface (sending and receiving), L
    /// in flight, eager or rendezvous per protocol range. One process, no launcher:
    /// --np is the simulated job's size. With --select (or several --algo) it ranks
    /// the algorithms and segment sizes per message size.
    ///
    /// Example: ngauge simulate --op bcast --algo binomial --np 1048576 --sizes 1 --L 5 --o 1 --g 2 --G 0.001
    Simulate(SimulateArgs),
    /// Late arrivals: how much of a late rank's delay a collective hides.
    ///
    /// After the clocks are synchronized (--sync), every rank starts each call at
    /// the same global time except the --delayed-ranks, which start --delay later
    /// (Niethammer et al., "Entering time of collectives"). Per call the global
    /// time is max(end) - min(start); per delay the minimum and the median over
    /// --reps valid calls; the delay overlap benefit is b = (t0 + d - td) / td
    /// (eq. 5): 0 when the delay adds to the call, d/td when it is hidden. The
    /// delays are measured interleaved, call by call. --inject runs the collective
    /// under a known noise pattern on one rank.
    ///
    /// Example: ngauge --np 4 late --op allreduce --delay 0,50us,500us --json
    Late(LateArgs),

    /// Nonblocking collectives: overhead, overlap and what progress is worth.
    ///
    /// NBCBench (Hoefler et al., "Accurately measuring collective operations",
    /// sec. 4.1): the blocking time t_pure of start + wait; then start, compute
    /// for that long (time-based, or a calibrated workload: --compute work), with a
    /// test every --test-every, and wait. Reported in IMB-NBC's columns (t_pure,
    /// t_ovrl, t_CPU, overlap %) for the rank with the largest t_ovrl, with
    /// t_init, t_test and t_wait. ngauge's own schedules progress only inside test
    /// and wait; --algo mpi (with -t mpi) times MPI_Ibcast, MPI_Iallreduce, ...
    ///
    /// Example: ngauge nbc --op bcast --sizes 1K-1M --test-every none,10us
    Nbc(NbcArgs),

    /// One-sided communication: put, get, accumulate and fetch-and-add latency,
    /// put bandwidth and put-with-notification latency, rank 0 on rank 1's window.
    ///
    /// Each operation is timed on its own from its start to its completion:
    /// passive target (MPI_Win_lock_all + MPI_Win_flush) and, for put and get,
    /// active target (MPI_Win_fence). Over -t mpi (windows from
    /// MPI_Win_allocate); transports without one-sided operations (tcp, udp) are
    /// named in one warning and skipped, so `-t mpi,tcp` measures MPI. With two
    /// one-sided transports the medians stand side by side with ratios.
    ///
    /// Example: mpirun -np 2 ngauge -t mpi rma --sizes 1-64K --ops put,get
    Rma(RmaArgs),

    /// System noise per core: the selfish-detour benchmark.
    ///
    /// Every rank spins reading the clock on its pinned core for --duration; an
    /// iteration longer than --threshold times the fastest is a detour (Beckman
    /// et al.'s selfish detour, Netgauge's noise pattern). Reports per core the
    /// detours, their count, the CPU fraction lost and a histogram of lengths.
    /// Run with --np equal to the number of cores to measure every core.
    ///
    /// Example: ngauge --np 4 noise --duration 5s --plot noise.svg
    Noise(NoiseArgs),

    /// Latency and bandwidth between every ordered pair of ranks: the p x p
    /// matrices, per-rank, per-host and per-placement summaries, and the slow
    /// links named.
    ///
    /// Pairs take turns in a seeded round-robin tournament: p-1 rounds of p/2
    /// disjoint pairs measuring at once, each round in both directions (odd p:
    /// one rank idles per round); --one-at-a-time measures each ordered pair
    /// alone, a quiet reference. Latency: the ping-pong of --latency-size;
    /// bandwidth: --bandwidth-size streamed with --window messages in flight. A
    /// link is named when it is --outlier-factor times worse than the median of
    /// its placement class (same host, different hosts) and beyond 3.5 scaled
    /// MADs of it. See docs/commands/matrix.md.
    ///
    /// Example: ngauge --np 8 matrix --svg matrix.svg --csv matrix.csv
    Matrix(MatrixArgs),

    /// Effective bisection bandwidth: many random bisections of the ranks into
    /// pairs, the pairs of each streaming at once; the per-pair bandwidth's
    /// distribution over all of them.
    ///
    /// Each bisection is a random perfect matching (seeded: --seed); all its
    /// pairs stream the same amount at once, --reps rounds of --window
    /// messages of --message-size, the first rank of a pair to the second (both ways
    /// with --bidirectional, as Netgauge's ebb). Prints the min, quartiles,
    /// median, mean and max over every pair of every bisection (Hoefler et
    /// al., Cluster 2008), and each bisection's figures. See
    /// docs/commands/ebb.md.
    ///
    /// Example: ngauge --np 8 ebb --bisections 50 --message-size 1M
    Ebb(EbbArgs),

    /// Self-tests of the launcher, for the integration tests.
    #[command(hide = true, subcommand)]
    Selftest(SelftestCommand),
}

/// Hidden self-test subcommands.
#[derive(Debug, Subcommand)]
pub enum SelftestCommand {
    /// Every rank loops in barriers (forever unless --count); rank 0 prints the count.
    BarrierLoop {
        /// Barriers to run (0: until a rank is lost).
        #[arg(long, default_value_t = 0)]
        count: u64,
        /// This rank kills itself with SIGKILL after --die-after barriers.
        #[arg(long)]
        die_rank: Option<usize>,
        /// This rank returns an error after --die-after barriers.
        #[arg(long)]
        fail_rank: Option<usize>,
        /// This rank stops taking part (sleeps) after --die-after barriers.
        #[arg(long)]
        hang_rank: Option<usize>,
        /// This rank stops itself with SIGSTOP after --die-after barriers.
        #[arg(long)]
        stop_rank: Option<usize>,
        /// This rank works (sleeps) for --pause-s seconds before barrier --die-after,
        /// then goes on: the others wait for it, a healthy job all along.
        #[arg(long)]
        pause_rank: Option<usize>,
        /// How long --pause-rank works.
        #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
        pause_s: f64,
        /// Barriers before --die-rank kills itself (or --fail-rank fails).
        #[arg(long, default_value_t = 10)]
        die_after: u64,
    },
}

/// Options of `ngauge loggp`.
#[derive(Debug, Args, Clone)]
pub struct LoggpArgs {
    /// Message sizes: 1-65536 (powers of two), 1K-64K:1K (step), 1,8,4K (list).
    /// Default: powers of two below 1 KiB, then every 1 KiB up to 72 KiB, 8 steps past
    /// 64 KiB (or to the largest message every transport carries: 63 KiB over UDP).
    #[arg(long, value_name = "SPEC")]
    pub sizes: Option<String>,

    /// Messages per PRTT(n,.,s).
    #[arg(long = "n", default_value_t = 10, value_name = "NUM", value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub n: u64,

    /// Timed repetitions of each PRTT per size (summarised by their median), over
    /// all passes.
    #[arg(long, default_value_t = 50, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reps: u64,

    /// Untimed round trips before each size (in the first pass at least 100: a
    /// path the stack takes first, such as its connection, can be slow at first).
    #[arg(long, default_value_t = 5, value_name = "NUM")]
    pub warmup: u64,

    /// Measurements of a size at most: a size whose PRTT median exceeds 1.5x its
    /// minimum + 50 us (most repetitions disturbed by other processes) is measured
    /// again, up to NUM times in all.
    #[arg(long, default_value_t = 3, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100))]
    pub attempts: u64,

    /// Sweeps over all sizes, sharing the repetitions (at most one pass per
    /// repetition). 2 or more: every sweep visits the sizes in its own shuffled
    /// order and each size's repetitions from all sweeps are pooled (Hunold and
    /// Carpen-Amarie's randomised, replicated design), so a slow phase of the host
    /// hits scattered sizes instead of a run of neighbours, which a detector takes
    /// for a protocol range. 1: one ascending sweep, as Netgauge.
    #[arg(long, default_value_t = ngauge::spec::loggp::DEFAULT_PASSES, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100))]
    pub passes: u64,

    /// Delay d of PRTT(n,d,s): one or two round trips.
    #[arg(long, value_parser = names(&[
        (DelayChoice::OneRtt, "d = PRTT(1,0,s) (the paper's default)"),
        (DelayChoice::TwoRtt, "d = PRTT(2,0,s) (the paper's fallback when d <= g + (s-1)G)"),
    ]), default_value = "rtt", value_name = "D")]
    pub dg: DelayChoice,

    /// With more than 2 ranks: pairs (0,1), (2,3), ... measure in turn or at once.
    #[arg(long, value_parser = names(&[
        (PairsMode::InTurn, "one pair at a time"),
        (PairsMode::Concurrent, "all pairs at once"),
    ]), default_value = "in-turn", value_name = "MODE")]
    pub pairs: PairsMode,

    /// Protocol-change detector.
    #[arg(long, value_parser = names(&[
        (
            DetectorKind::Lookahead,
            "the paper's look-ahead (sec. 2.6) on the gap, o_s, o_r, PRTT(1,0,s) and the \
             send with a late receiver, robust to outliers, its changes confirmed by the \
             joint segmentation criterion (which also proposes changes): --lookahead, \
             --pfact, --floor-us, --penalty",
        ),
        (
            DetectorKind::Paper,
            "the paper's look-ahead (sec. 2.6) exactly as written, on the gap per message \
             alone, nothing confirmed: --lookahead, --pfact, --floor-us",
        ),
        (
            DetectorKind::Segmented,
            "optimal piecewise-linear segmentation with a BIC penalty (--penalty)",
        ),
        (DetectorKind::None, "one range over all sizes"),
    ]), default_value = "lookahead", value_name = "NAME")]
    pub detector: DetectorKind,

    /// Report the detector's protocol changes as found, without measuring each
    /// again in fresh interleaved passes (not confirmed, not located).
    #[arg(long)]
    pub no_confirm: bool,

    /// Do not bisect confirmed protocol changes to the byte (changes[].first_bytes).
    #[arg(long)]
    pub no_refine: bool,

    /// Keep every timed repetition of each point in the JSON document
    /// (`points[].samples`), for `ngauge compare` and the statistics across
    /// launches (`ngauge run` sets it).
    #[arg(long)]
    pub samples: bool,

    /// Look-ahead detector: points looked ahead (x).
    #[arg(long, default_value_t = 5, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub lookahead: u64,

    /// Look-ahead detector: factor every look-ahead deviation must exceed (pfact).
    #[arg(long, default_value_t = 2.0, value_name = "F")]
    pub pfact: f64,

    /// Look-ahead detector and robust fits: noise floor in us (Netgauge: 0.15), or
    /// with a unit (150ns). The floor under a protocol step (0.05 us, or 10% of
    /// the value) is separate.
    #[arg(long, default_value_t = 0.15, value_name = "US", value_parser = parse_floor_us)]
    pub floor_us: f64,

    /// Segmented and look-ahead detectors: multiplier on the joint criterion's
    /// per-segment penalty (BIC's 3 ln N for one series).
    #[arg(long, default_value_t = 2.0, value_name = "F")]
    pub penalty: f64,

    /// The run says `changes_verdict: decided` only where no step of PRTT(1,0,s)
    /// above PCT percent of it fits its data (the `sensitivity` statement per
    /// stretch of sizes). Example: --decide-target 5
    #[arg(long, default_value_t = 2.0, value_name = "PCT")]
    pub decide_target: f64,

    /// Time to spend measuring again, in fresh interleaved passes, the sizes
    /// where a stretch's floor is above the target, until each is decided or
    /// the time is spent, per transport (0s: none). Without it, 3s and at most
    /// as long as the sweep took, but at least 0.5s; a time given is spent whole.
    /// A change being located to its byte when it is spent gets up to the
    /// budget again (without it, 3s whatever the sweep took). Example:
    /// --doubt-budget 10s
    #[arg(long, value_name = "TIME", value_parser = parse_check_time)]
    pub doubt_budget: Option<f64>,

    /// Write Netgauge's column file (size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,d,s) L
    /// o_s o_r g G lsq) to FILE.
    #[arg(long, value_name = "FILE")]
    pub netgauge_out: Option<PathBuf>,

    /// Write the fitted LogGP parameters per protocol range to FILE (JSON).
    #[arg(long, value_name = "FILE")]
    pub params_out: Option<PathBuf>,

    /// Draw the gap per size, the fitted lines, the switches and o_s(s) to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// Options of `ngauge pingpong`.
#[derive(Debug, Args, Clone)]
pub struct PingpongArgs {
    /// Message sizes: `1-1M` (powers of two), `1-64K:1K` (step), `1,8,4K` (list).
    #[arg(long, default_value = "1-1M", value_name = "SPEC")]
    pub sizes: String,

    /// Timed round trips per size.
    #[arg(long, default_value_t = 1000, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub reps: u64,

    /// Untimed round trips before the timed ones, per size (at least 100 before
    /// the first: the transport's setup on its first messages).
    #[arg(long, default_value_t = 100, value_name = "NUM", value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub warmup: u64,

    /// Verify every size's payloads (outside the timed region).
    #[arg(long)]
    pub check: bool,

    /// Let a transport that has one (MPI and UCX in poll mode; UCX's stream runs
    /// too) run the timed round trips in its own loop, so the timed region holds
    /// only the library's send and receive, as in a C benchmark; `off` times every
    /// transport with ngauge's loop of send and recv calls (to compare the two).
    /// Example: --native-loop off
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = on_off, action = clap::ArgAction::Set)]
    pub native_loop: bool,

    /// Keep every timed round trip in the JSON document and the stream
    /// (`samples.half_rtt_us`), for `ngauge compare` and the statistics across
    /// launches (`ngauge run` sets it).
    #[arg(long)]
    pub samples: bool,

    /// Add each size's half round trips in log-spaced bins (10 per decade) to
    /// the JSON (`histogram`) and below the table.
    #[arg(long)]
    pub histogram: bool,

    /// Show the bandwidth in Gb/s (10^9 bits per second) instead of MB/s (10^6
    /// bytes per second) in the table; the JSON keeps bandwidth_MBps.
    #[arg(long)]
    pub gbps: bool,

    /// Messages in flight per timed round: 1 ping-pongs; more streams, as
    /// perftest's ib_send_bw does: rank 0 sends NUM messages back to back and
    /// rank 1 answers the last with one byte; the bandwidth is NUM x size over
    /// the median round. Example: --window 64
    #[arg(long, default_value_t = 1, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub window: u64,

    /// With --window: stream NUM messages per timed round, --window of them in
    /// flight at a time (a new send as soon as the oldest completed) and one
    /// reply at the end, as ucx_perftest -t tag_bw does; 0 (the default) ends
    /// every window with a reply. Example: --window 32 --stream 20000 --reps 7
    #[arg(long, default_value_t = 0, value_name = "NUM")]
    pub stream: u64,
    /// Both ranks send at once, as osu_bibw and ib_send_bw -b do: each posts
    /// --window receives and --window sends per round; the bandwidth counts
    /// the bytes of both directions. Example: --bidirectional --window 64
    #[arg(long)]
    pub bidirectional: bool,

    /// Measure N disjoint pairs at once, (0,1), (2,3), ... (osu_multi_lat,
    /// osu_mbw_mr; needs 2N ranks): per pair and in total MB/s and messages
    /// per second. Example: --np 4 pingpong --pairs 2 --window 64
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub pairs: u64,

    /// Congestion at rank 0, as Netgauge's 1toN and Nto1: rank 0 streams
    /// --window messages to every other rank at once (1toN), or all of them to
    /// rank 0 (Nto1); per flow and in total MB/s, against the pair (0,1)
    /// streaming alone in the same run. Example: --np 4 pingpong --pattern 1toN --window 16
    #[arg(long, value_name = "1toN|Nto1")]
    pub pattern: Option<ngauge::patterns::fan::Fan>,

    /// Repeat batches of --reps until the 95% confidence interval of the
    /// median is within this relative half-width (a fraction or a percentage),
    /// or --max-reps is reached, as SKaMPI, ReproMPI and hyperfine's
    /// --min-runs do; the table and the JSON say per size whether it was met.
    /// Example: --precision 1% --reps 100 --max-reps 10000
    #[arg(long, value_name = "FRACTION|PCT%", value_parser = fraction)]
    pub precision: Option<f64>,

    /// With --precision: timed round trips per size at most (default 10 x
    /// --reps).
    #[arg(long, value_name = "NUM")]
    pub max_reps: Option<u64>,
}

/// A fraction, `0.01`, or a percentage, `1%`.
fn fraction(value: &str) -> Result<f64, String> {
    let (number, scale) = match value.strip_suffix('%') {
        Some(pct) => (pct, 0.01),
        None => (value, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x * scale),
        _ => Err(format!(
            "{value:?} is not a fraction (0.01) or a percentage (1%)"
        )),
    }
}

/// `on` or `off`.
fn on_off(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?} is neither on nor off")),
    }
}

/// The collective and how its calls are timed in windows: shared by `late` and
/// `nbc`, flag names as issue 14 spells them for `coll` (`--op`, `--algo`,
/// `--segment`, `--root`); the library's `WindowColl`.
#[derive(Debug, Args, Clone)]
pub struct CollArgs {
    /// The collective: bcast, gather, allreduce, barrier, alltoall, reduce,
    /// allgather, reduce_scatter or scatter.
    #[arg(long, default_value = "allreduce", value_name = "OP")]
    pub op: Collective,

    /// Its implementation: one of ngauge's schedules, run over any transport with
    /// progress only inside test and wait (bcast: linear, binomial, chain, binary,
    /// split-binary, kchain[:K]; gather: linear, binomial; allreduce:
    /// recursive-doubling, ring; barrier: dissemination; alltoall: pairwise), or
    /// `mpi` for MPI's own (needs -t mpi). Default: mpi with -t mpi, otherwise
    /// binomial, recursive-doubling, dissemination or pairwise.
    #[arg(long, value_name = "NAME")]
    pub algo: Option<String>,

    /// Segment size of the pipelined broadcasts (0: one segment).
    #[arg(long, default_value = "0", value_name = "BYTES", value_parser = parse_segment)]
    pub segment: usize,

    /// The root of bcast and gather.
    #[arg(long, default_value_t = 0, value_name = "RANK")]
    pub root: usize,

    #[command(flatten)]
    pub window: WindowFlags,
}

/// How the calls of a collective are timed: shared by `coll`, `late` and `nbc`.
#[derive(Debug, Args, Clone)]
pub struct WindowFlags {
    /// Valid calls wanted per measurement point (coll's loop scheme: calls in the
    /// loop).
    #[arg(long, default_value_t = 100, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reps: u64,

    /// Untimed calls first (their data checked, the slowest sizing the window).
    #[arg(long, default_value_t = 10, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub warmup: u64,

    /// Rounds of --reps calls at most (the window scheme): calls that started late
    /// or overran their window are repeated, in a larger window.
    #[arg(long, default_value_t = 5, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_rounds: u64,

    /// Skip the data check of the warm-up calls.
    #[arg(long)]
    pub no_check: bool,

    #[command(flatten)]
    pub sync: SyncFlags,
}

/// Options of `ngauge late`.
#[derive(Debug, Args, Clone)]
pub struct LateArgs {
    #[command(flatten)]
    pub coll: CollArgs,

    /// Bytes per rank: 8-64K (powers of two), 1K-8K:1K (step), 8,1K (list).
    #[arg(long, default_value = "8", value_name = "SPEC")]
    pub sizes: String,

    /// The delays d to sweep, comma separated, each with a unit (0 needs none);
    /// the undelayed calls (t0) are measured in any case.
    #[arg(long, value_delimiter = ',', default_value = "0,50us,500us", value_name = "DELAYS", value_parser = parse_delay)]
    pub delay: Vec<Nanos>,

    /// The ranks that enter late: a list (0,3), `last`, or `random` (one rank drawn
    /// from --seed).
    #[arg(long, default_value = "0", value_name = "RANKS")]
    pub delayed_ranks: DelayedRanks,

    /// Seed of `--delayed-ranks random` (default 0).
    #[arg(long, value_name = "NUM")]
    pub seed: Option<u64>,

    /// How each call is made: blocking, nonblocking (start, then wait at once), or
    /// both, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = names(&[
        (CallMode::Blocking, "the blocking call"),
        (CallMode::Nonblocking, "start, then wait at once"),
    ]), default_value = "blocking", value_name = "MODE")]
    pub mode: Vec<CallMode>,

    /// Run under injected noise: --inject-rank loses its CPU for DURATION at the
    /// start of every PERIOD (e.g. 1ms:50us), inside ngauge's schedules (not
    /// --algo mpi).
    #[arg(long, value_name = "PERIOD:DURATION")]
    pub inject: Option<NoiseInjection>,

    /// The rank --inject disturbs.
    #[arg(long, default_value_t = 0, value_name = "RANK")]
    pub inject_rank: usize,

    /// Draw b over the delay, one curve per size and mode, to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// Options of `ngauge nbc`.
#[derive(Debug, Args, Clone)]
pub struct NbcArgs {
    #[command(flatten)]
    pub coll: CollArgs,

    /// Bytes per rank: 8-64K (powers of two), 1K-8K:1K (step), 8,1K (list).
    #[arg(long, default_value = "8-64K", value_name = "SPEC")]
    pub sizes: String,

    /// How the computation is measured out: time (until t_pure has passed,
    /// progress calls included), work (a workload calibrated to take t_pure,
    /// whatever it then costs), or both, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = names(&[
        (Compute::Time, "compute until t_pure has passed"),
        (Compute::Work, "a fixed workload calibrated to take t_pure"),
    ]), default_value = "time", value_name = "SCHEME")]
    pub compute: Vec<Compute>,

    /// Progress calls during the computation: `none`, or an interval with a unit;
    /// several, comma separated, are each measured (e.g. none,10us).
    #[arg(long, value_delimiter = ',', default_value = "none", value_name = "INTERVALS", value_parser = parse_test_every)]
    pub test_every: Vec<Nanos>,
}

/// One `--test-every` value: its interval, 0 for `none` (no progress calls).
fn parse_test_every(s: &str) -> Result<Nanos, String> {
    if s.trim() == "none" {
        return Ok(Nanos(0.0));
    }
    let d = parse_time(s, None)?;
    if d.0 <= 0.0 || d.0 > 1e9 {
        return Err(format!("{s:?} must be `none` or between 1ns and 1s"));
    }
    Ok(d)
}

/// `--floor-us`: a bare number is microseconds.
fn parse_floor_us(s: &str) -> Result<f64, String> {
    parse_time(s, Some(1e3)).map(|t| t.0 / 1e3)
}

/// Options of `ngauge noise`.
#[derive(Debug, Args, Clone)]
pub struct NoiseArgs {
    /// How long every rank spins, with a unit (1ms to 3600s).
    #[arg(long, default_value = "1s", value_name = "TIME", value_parser = |s: &str| parse_time(s, None))]
    pub duration: Nanos,

    /// An iteration longer than this many times the fastest is a detour (above 1).
    #[arg(long, default_value_t = 10.0, value_name = "FACTOR")]
    pub threshold: f64,

    /// Detours kept per rank; more are only counted.
    #[arg(long, default_value_t = 100_000, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_detours: u64,

    /// Inject noise into every rank's loop, PERIOD:DURATION (e.g. 1ms:50us): a
    /// self-test, the loop must find one detour of DURATION per PERIOD.
    #[arg(long, value_name = "PERIOD:DURATION")]
    pub inject: Option<NoiseInjection>,

    /// Draw every core's detours over time to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

/// Options of `ngauge matrix`.
#[derive(Debug, Args, Clone)]
pub struct MatrixArgs {
    /// Message size of the latency matrix (ping-pong), e.g. 8 or 1K.
    #[arg(long, default_value = "8", value_name = "BYTES", value_parser = parse_message_size)]
    pub latency_size: u64,

    /// Message size of the bandwidth matrix (streamed), e.g. 64K.
    #[arg(long, default_value = "64K", value_name = "BYTES", value_parser = parse_message_size)]
    pub bandwidth_size: u64,

    /// Messages in flight per timed bandwidth round.
    #[arg(long, default_value_t = 16, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub window: u64,

    /// Timed rounds per ordered pair and matrix.
    #[arg(long, default_value_t = 50, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reps: u64,

    /// Untimed rounds before them.
    #[arg(long, default_value_t = 5, value_name = "NUM", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub warmup: u64,

    /// Verify every payload (outside the timed regions).
    #[arg(long)]
    pub check: bool,

    /// Measure one ordered pair at a time (a quiet reference) instead of
    /// rounds of disjoint pairs at once.
    #[arg(long)]
    pub one_at_a_time: bool,

    /// Seed of the pairing order (same seed, same rounds).
    #[arg(long, default_value_t = 1, value_name = "NUM")]
    pub seed: u64,

    /// Name a link that is this many times worse than its class median.
    #[arg(long, default_value_t = 2.0, value_name = "FACTOR")]
    pub outlier_factor: f64,

    /// Draw the two matrices as heat maps to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Options of `ngauge ebb`.
#[derive(Debug, Args, Clone)]
pub struct EbbArgs {
    /// Random bisections to measure, one after the other.
    #[arg(long, default_value_t = 20, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub bisections: u64,

    /// Message size every pair streams, e.g. 64K.
    #[arg(long, default_value = "64K", value_name = "BYTES", value_parser = parse_message_size)]
    pub message_size: u64,

    /// Messages in flight per timed round.
    #[arg(long, default_value_t = 16, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub window: u64,

    /// Timed rounds per pair and bisection (every pair streams the same amount).
    #[arg(long, default_value_t = 20, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reps: u64,

    /// Untimed rounds before them.
    #[arg(long, default_value_t = 2, value_name = "NUM", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub warmup: u64,

    /// Both ranks of a pair stream at once (Netgauge's ebb exchange).
    #[arg(long)]
    pub bidirectional: bool,

    /// Verify every payload (outside the timed regions).
    #[arg(long)]
    pub check: bool,

    /// Seed of the bisections (same seed, same pairs).
    #[arg(long, default_value_t = 1, value_name = "NUM")]
    pub seed: u64,
}

/// A message size of 1 byte to 1G (`64K`).
fn parse_message_size(s: &str) -> Result<u64, String> {
    match ngauge::sizes::parse_size(s) {
        Ok(b) if (1..=(1u64 << 30)).contains(&b) => Ok(b),
        Ok(_) => Err(format!("{s:?} is not between 1 byte and 1G")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_segment(s: &str) -> Result<usize, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    match ngauge::sizes::parse_size(s) {
        Ok(b) if b <= (1u64 << 30) => Ok(b as usize),
        Ok(_) => Err(format!("{s:?} is larger than 1G")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_delay(s: &str) -> Result<Nanos, String> {
    let d = parse_time(s, None)?;
    if d.0 > 10e9 {
        return Err(format!("{s:?} is longer than 10s"));
    }
    Ok(d)
}

/// Options of `ngauge run`. The run directory is `--output DIR` (else the suite's
/// `output`, else SUITE-DATE).
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The suite file.
    #[arg(
        value_name = "FILE.toml",
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub suite: Option<PathBuf>,

    /// Finish the runs an interrupted `ngauge run` left in DIR.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
}

/// Options of `ngauge compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// The baseline: a run directory, a --json document or an -o stream.
    #[arg(value_name = "A")]
    pub a: PathBuf,

    /// What is compared with it.
    #[arg(value_name = "B")]
    pub b: PathBuf,

    /// Draw B/A over the size to FILE (SVG), significant sizes marked.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Compare this numeric field instead of the default metric.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,

    /// No Tukey filter on the repetitions of a launch.
    #[arg(long)]
    pub keep_outliers: bool,
}

/// Options of the hidden `ngauge exec`.
#[derive(Debug, Args, Clone)]
pub struct ExecArgs {
    /// The experiment's spec (`runs/EXP/experiment.json` of a run directory).
    #[arg(value_name = "SPEC.json")]
    pub spec: PathBuf,
}

/// Options of `ngauge timer`.
#[derive(Debug, Args, Clone)]
pub struct TimerArgs {
    /// Back-to-back reads timed for the read cost.
    #[arg(long, default_value_t = 1_000_000, value_name = "NUM", value_parser = clap::value_parser!(u64).range(10..=100_000_000))]
    pub reads: u64,

    /// Keep every read's cost in the JSON document (`samples.overhead_ns`; at
    /// most 1000000 reads), for the statistics across launches (`ngauge run`
    /// sets it).
    #[arg(long)]
    pub samples: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    /// The help `argv` (after `ngauge`) prints.
    fn help(argv: &[&str]) -> String {
        let all = std::iter::once("ngauge").chain(argv.iter().copied());
        let e = command().try_get_matches_from(all).unwrap_err();
        assert_eq!(
            e.kind(),
            clap::error::ErrorKind::DisplayHelp,
            "{argv:?}: {e}"
        );
        e.to_string()
    }

    #[test]
    fn issue37_a_command_s_help_shows_the_global_flags_that_apply() {
        for argv in [
            &["simulate", "--help"][..],
            &["help", "simulate"],
            &["timer", "-h"],
        ] {
            let text = help(argv);
            for flag in [
                "--wait",
                "-t, --transport",
                "--sndbuf",
                "--rendezvous",
                "--ofi-op",
            ] {
                assert!(!text.contains(flag), "{argv:?} shows {flag}:\n{text}");
            }
            assert!(text.contains("--json"), "{text}");
        }
        let pingpong = help(&["pingpong", "--help"]);
        for flag in [
            "--wait",
            "-t, --transport",
            "--np",
            "--rendezvous",
            "--json",
        ] {
            assert!(pingpong.contains(flag), "{flag}:\n{pingpong}");
        }
        assert!(help(&["simulate", "--help"]).contains("--np"));
        assert!(!help(&["run", "--help"]).contains("--np"));
        // Left out of the help, still accepted: a flag before the command never
        // breaks it.
        let m = command().try_get_matches_from(["ngauge", "--wait", "block", "simulate", "-h"]);
        assert_eq!(m.unwrap_err().kind(), clap::error::ErrorKind::DisplayHelp);
        command().debug_assert();
    }

    #[test]
    fn issue37_a_negative_loggp_parameter_is_a_value_not_a_flag() {
        let argv = [
            "ngauge", "simulate", "--op", "bcast", "--algo", "binomial", "--sizes", "8",
        ];
        for flag in ["--L", "--o", "--os", "--or", "--g", "--G"] {
            let mut all = argv.to_vec();
            for (required, value) in [("--L", "1"), ("--g", "1"), ("--G", "0")] {
                all.extend([required, if required == flag { "-5" } else { value }]);
            }
            if !["--L", "--g", "--G"].contains(&flag) {
                all.extend([flag, "-5"]);
            }
            let cli = command().try_get_matches_from(&all);
            let cli = Cli::from_arg_matches(&cli.unwrap()).unwrap();
            let Command::Simulate(s) = cli.command else {
                panic!("simulate")
            };
            let given = [s.l_us, s.o_us, s.os_us, s.or_us, s.g_us, s.big_g];
            assert!(given.contains(&Some(-5.0)), "{flag}: {given:?}");
        }
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
    fn sync_flags_and_check_times() {
        let cli = Cli::try_parse_from([
            "ngauge",
            "sync",
            "--sync",
            "logp",
            "--check-after",
            "0s,250ms,5s",
        ])
        .unwrap();
        let Command::Sync(args) = cli.command else {
            panic!("not sync")
        };
        assert_eq!(args.sync.algorithm, SyncAlgorithm::Logp);
        assert_eq!(args.check_after, vec![0.0, 0.25, 5.0]);
        assert_eq!(args.sync.fitpoints, 1000);
        assert_eq!(args.sync.exchanges, None);
        for bad in [
            &["ngauge", "sync", "--check-after", "5"][..],
            &["ngauge", "sync", "--check-after", "-1s"],
            &["ngauge", "sync", "--check-after", "2h"],
            &["ngauge", "sync", "--sync", "ntp"],
            &["ngauge", "sync", "--fitpoints", "1"],
            &["ngauge", "sync", "--exchanges", "0"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(Cli::try_parse_from(["ngauge", "--np", "0", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "-t", "carrier-pigeon", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "timer", "--reads", "1"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "--timeout", "0", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "--timeout", "nan", "info"]).is_err());
        assert!(Cli::try_parse_from(["ngauge", "--data-addr", "host", "info"]).is_err());
    }

    /// Issue 37: one rule for every time flag. A unit works everywhere; a bare
    /// number only where the value name states its unit (`--timeout SECONDS`,
    /// `--floor-us US`), and elsewhere it is refused with the units to try.
    #[test]
    fn issue_37_time_flags_share_one_rule() {
        let cli = |args: &[&str]| Cli::try_parse_from([&["ngauge"][..], args].concat());
        assert_eq!(
            cli(&["--timeout", "30", "info"]).unwrap().global.timeout,
            30.0
        );
        assert_eq!(
            cli(&["--timeout", "500ms", "info"]).unwrap().global.timeout,
            0.5
        );
        assert_eq!(parse_floor_us("0.15"), Ok(0.15));
        assert_eq!(parse_floor_us("150ns"), Ok(0.15));
        assert_eq!(parse_delay("50us"), Ok(Nanos(50e3)));
        assert_eq!(parse_delay("0"), Ok(Nanos(0.0)));
        assert_eq!(parse_test_every("1.5ms"), Ok(Nanos(1.5e6)));
        assert_eq!(parse_check_time("0"), Ok(0.0));
        assert_eq!(parse_check_time("2s"), Ok(2.0));
        assert_eq!(parse_time("2ms", None), Ok(Nanos(2e6)));
        for flags in [
            &["late", "--delay", "5"][..],
            &["noise", "--duration", "5"],
            &["nbc", "--test-every", "10"],
            &["sync", "--check-after", "1"],
        ] {
            let e = cli(flags).unwrap_err().to_string();
            let first = e.lines().next().unwrap();
            let hint = format!("needs a unit: {v}us, {v}ms or {v}s", v = flags[2]);
            assert!(
                first.contains(flags[1]) && first.contains(&hint),
                "{flags:?}: {e}"
            );
        }
        for bad in ["", ".", "-5", "5 us x", "1e3", "nan", "5m"] {
            assert!(parse_time(bad, Some(1e9)).is_err(), "{bad:?}");
            assert!(parse_time(bad, None).is_err(), "{bad:?}");
        }
    }
}

/// Clock-synchronization flags, shared by every command that synchronizes clocks.
#[derive(Debug, Args, Clone)]
pub struct SyncFlags {
    /// Algorithm: linear (SKaMPI, O(p)), logp (Netgauge tree, O(log p)), jk (Jones &
    /// Koenig drift models, O(p)), hca (drift models in the log p tree).
    #[arg(long = "sync", value_parser = names(&[
        (SyncAlgorithm::Linear, "SKaMPI: root with each rank in turn, offsets only"),
        (SyncAlgorithm::Logp, "Netgauge: power-of-two tree plus remainder, offsets only"),
        (SyncAlgorithm::Jk, "Jones & Koenig: root learns a drift model per rank"),
        (
            SyncAlgorithm::Hca,
            "Hunold & Carpen-Amarie: drift models in the log p tree, intercepts from root",
        ),
    ]), default_value = "hca", value_name = "ALGO")]
    pub algorithm: SyncAlgorithm,

    /// Fit points per drift model (jk, hca). The fit spans the whole exchange, so
    /// more points give a better drift; with many ranks on few cores the sync takes
    /// long, and ranks that finish their part early wait within --timeout.
    #[arg(long, default_value_t = 1000, value_name = "NUM", value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub fitpoints: u32,

    /// Ping-pongs per fit point (jk, hca); the median one is kept. Default: 100 (the
    /// papers' value; 20, as in Hunold's own jk runs, is 5x faster and less
    /// accurate).
    #[arg(long, value_name = "NUM", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub exchanges: Option<u32>,

    /// Offset estimator of linear, logp and hca's intercepts: minrtt (Hoefler: the
    /// smallest of RTTs, stop after 100 without a smaller one) or skampi (bracket of
    /// 100 ping-pongs). Default: skampi for linear and hca, minrtt for logp.
    #[arg(long, value_parser = names(&[
        (
            SyncEstimator::MinRtt,
            "minimal round trip, stop after 100 exchanges without a smaller one",
        ),
        (SyncEstimator::Skampi, "SKaMPI's [td_min, td_max] bracket of 100 ping-pongs"),
    ]), value_name = "EST")]
    pub estimator: Option<SyncEstimator>,
}

/// Options of `ngauge coll`.
#[derive(Debug, Args, Clone)]
pub struct CollCmdArgs {
    /// The collective: bcast, gather, allreduce, barrier, alltoall, reduce,
    /// allgather, reduce_scatter, scatter or alltoallv.
    #[arg(long, default_value = "bcast", value_name = "OP")]
    pub op: Collective,

    /// Implementations, comma separated: ngauge's schedules (bcast: linear,
    /// binomial, chain, binary, split-binary, kchain[:K]; gather, scatter: linear,
    /// binomial; allreduce: recursive-doubling, ring; reduce: binomial,
    /// in-order-binary; allgather: ring, recursive-doubling, bruck;
    /// reduce_scatter: ring, recursive-halving; barrier: dissemination; alltoall:
    /// pairwise; alltoallv: pairwise, linear), `all` (every one of --op), or
    /// `mpi`: the MPI library's own collective (measured on -t mpi only).
    /// Default: binomial, recursive-doubling, recursive-halving, dissemination or
    /// pairwise.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub algo: Vec<String>,

    /// Segment size of the pipelined broadcasts (0: one segment).
    #[arg(long, default_value = "0", value_name = "BYTES", value_parser = parse_segment)]
    pub segment: usize,

    /// The root of bcast and gather: a rank, or `rotate` (call i uses root i % np).
    #[arg(long, default_value = "0", value_name = "RANK|rotate", value_parser = parse_root)]
    pub root: RootChoice,

    /// How calls are timed.
    #[arg(long, value_parser = schemes(), default_value = "window", value_name = "SCHEME")]
    pub scheme: Scheme,

    /// Bytes per rank: 1-64K (powers of two), 1K-8K:1K (step), 1,1K,64K (list).
    /// Default: 1-64K; its multiples of 8 for a reduction with --algo mpi (MPI's
    /// reductions sum 8-byte words).
    #[arg(long, value_name = "SPEC")]
    pub sizes: Option<String>,

    /// Force Open MPI's algorithm N for --algo mpi (sets
    /// OMPI_MCA_coll_tuned_use_dynamic_rules=1 and
    /// OMPI_MCA_coll_tuned_<op>_algorithm=N before MPI starts; bcast: 1 linear, 2
    /// chain, 3 pipeline, 4 split binary, 5 binary, 6 binomial).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=64))]
    pub mpi_algo: Option<u32>,

    /// The count matrix of alltoallv: rank i sends rank j count(i,j) times the
    /// size in bytes. `uniform` (1 everywhere: OSU's and IMB's alltoallv),
    /// `random:SEED` (0, 1 or 2 per pair, mean 1), or FILE: np rows of np counts,
    /// CSV or a JSON array of rows. Example: --counts random:7 --sizes 1K.
    #[arg(
        long,
        default_value = "uniform",
        value_name = "uniform|random:SEED|FILE"
    )]
    pub counts: String,

    /// Report every rank's local time of every valid call (JSON `ranks`).
    #[arg(long)]
    pub per_rank: bool,

    /// Keep every valid call's run-time in the JSON document and the stream
    /// (`samples.runtime_us`), for `ngauge compare` and the statistics across
    /// launches (`ngauge run` sets it).
    #[arg(long)]
    pub samples: bool,

    /// Draw the median run-time over the size, one line per transport and
    /// algorithm, to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    /// LogGP parameters (`loggp --params-out FILE`): beside every measured point
    /// of our schedules, the LogGP simulation of the same schedule and scheme and
    /// Hockney's formula, with measured / predicted; with several algorithms, the
    /// models' choice per size against the measured best.
    #[arg(long, value_name = "PARAMS_FILE")]
    pub predict: Option<PathBuf>,

    #[command(flatten)]
    pub window: WindowFlags,
}

/// The timing schemes of `coll` and `simulate --measure`.
fn schemes() -> impl TypedValueParser<Value = Scheme> {
    names(&[
        (
            Scheme::Window,
            "synchronized clocks, common start times, latest end - earliest start",
        ),
        (
            Scheme::Barrier,
            "a dissemination barrier before each call, the largest local time",
        ),
        (
            Scheme::Loop,
            "calls back to back, total / calls (underestimates one call)",
        ),
    ])
}

fn parse_root(s: &str) -> Result<RootChoice, String> {
    if s == "rotate" {
        return Ok(RootChoice::Rotate(Rotate::Rotate));
    }
    s.parse()
        .map(RootChoice::Rank)
        .map_err(|_| format!("{s:?} is neither a rank nor `rotate`"))
}

/// Options of `ngauge sync`.
#[derive(Debug, Args, Clone)]
pub struct SyncArgs {
    #[command(flatten)]
    pub sync: SyncFlags,

    /// When to measure the residuals, after the sync ends: durations with a unit
    /// (ns, us, ms, s), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "0s,1s,5s", value_name = "TIMES", value_parser = parse_check_time)]
    pub check_after: Vec<f64>,

    /// Synchronizations (each with its checks) one after the other in the job;
    /// the table shows the first, `samples` in the JSON holds every one's
    /// duration and largest residual.
    #[arg(long, default_value_t = 1, value_name = "NUM", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,

    /// Keep every repetition's duration and largest residual in the JSON
    /// document (`samples`), for the statistics across launches (`ngauge run`
    /// sets it).
    #[arg(long)]
    pub samples: bool,
}

/// A duration with a unit (`500ms`, `5s`), as seconds; at most one hour.
fn parse_check_time(s: &str) -> Result<f64, String> {
    let seconds = parse_time(s, None)?.0 / 1e9;
    if !(0.0..=3600.0).contains(&seconds) {
        return Err(format!("{s:?} must be between 0s and 3600s"));
    }
    Ok(seconds)
}

/// Options of `ngauge simulate`.
#[derive(Debug, Args, Clone)]
pub struct SimulateArgs {
    /// Collective: bcast, gather, allreduce, barrier, alltoall, reduce, allgather,
    /// reduce_scatter, scatter.
    #[arg(long, value_name = "OP")]
    pub op: String,

    /// Algorithm(s) of OP, comma separated (bcast: linear, binomial, chain, binary,
    /// split-binary, kchain[:K]); required unless --select.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ALGO",
        required_unless_present = "select"
    )]
    pub algo: Vec<String>,

    /// Segment size(s) of the pipelined broadcasts (0: one segment), as --sizes
    /// lists them; with --select the default is 0,1K,8K,64K.
    #[arg(long, value_name = "SPEC")]
    pub segment: Option<String>,

    /// Message sizes, bytes per rank: 1-65536 (powers of two), 1-64K:1K, 1,8,4K.
    #[arg(long, value_name = "SPEC")]
    pub sizes: String,

    /// Root of a broadcast or gather.
    #[arg(long, default_value_t = 0, value_name = "RANK")]
    pub root: usize,

    /// Rank every algorithm of OP (and every segment size) per message size.
    #[arg(long)]
    pub select: bool,

    /// Also measure every candidate in a live job, as `ngauge coll` does, and
    /// report per size the measured best, each model's choice and its
    /// degradation against the best. The simulated size is the job's: the local
    /// launcher's --np (at most 4096), or mpirun's or srun's. The job's transport
    /// flags mean what they mean to `coll` (see `ngauge coll --help`).
    #[arg(long, conflicts_with_all = ["timeline", "loop_calls"])]
    pub measure: bool,

    /// With --measure: how calls are timed (as `ngauge coll --scheme`).
    #[arg(long, requires = "measure", value_parser = schemes(), default_value = "window", value_name = "SCHEME", help_heading = "Measuring")]
    pub scheme: Scheme,

    /// With --measure: valid calls wanted per candidate and size.
    #[arg(long, requires = "measure", default_value_t = 100, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000), help_heading = "Measuring")]
    pub reps: u64,

    /// With --measure: untimed calls first (their data checked).
    #[arg(long, requires = "measure", default_value_t = 10, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1_000_000), help_heading = "Measuring")]
    pub warmup: u64,

    /// With --measure and the window scheme: rounds of --reps calls at most.
    #[arg(long, requires = "measure", default_value_t = 5, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=1000), help_heading = "Measuring")]
    pub max_rounds: u64,

    /// Parameter file written by `ngauge loggp --params-out`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["l_us", "o_us", "os_us", "or_us", "g_us", "big_g"], required_unless_present_all = ["l_us", "g_us", "big_g"], help_heading = "Network")]
    pub params: Option<PathBuf>,

    /// Wire latency L, us (LogGP's L, not PRTT(1,0,1)/2).
    #[arg(long = "L", value_name = "US", allow_negative_numbers = true, requires_all = ["g_us", "big_g"], help_heading = "Network")]
    pub l_us: Option<f64>,

    /// Overhead o, us, for both sides (unless --os/--or).
    #[arg(
        long = "o",
        value_name = "US",
        allow_negative_numbers = true,
        help_heading = "Network"
    )]
    pub o_us: Option<f64>,

    /// Send overhead o_s, us.
    #[arg(
        long = "os",
        value_name = "US",
        allow_negative_numbers = true,
        help_heading = "Network"
    )]
    pub os_us: Option<f64>,

    /// Receive overhead o_r, us.
    #[arg(
        long = "or",
        value_name = "US",
        allow_negative_numbers = true,
        help_heading = "Network"
    )]
    pub or_us: Option<f64>,

    /// Gap g, us.
    #[arg(
        long = "g",
        value_name = "US",
        allow_negative_numbers = true,
        requires = "l_us",
        help_heading = "Network"
    )]
    pub g_us: Option<f64>,

    /// Gap per byte G, us per byte.
    #[arg(
        long = "G",
        value_name = "US_PER_BYTE",
        allow_negative_numbers = true,
        requires = "l_us",
        help_heading = "Network"
    )]
    pub big_g: Option<f64>,

    /// With --L...: `eager` sends complete locally, `rendezvous` sends wait for
    /// the receiver (request-to-send, clear-to-send).
    #[arg(long, value_parser = ["eager", "rendezvous"], default_value = "eager", value_name = "PROTOCOL", help_heading = "Network")]
    pub protocol: String,

    /// Let receptions on an interface overlap (no receive-side gap), as the threaded
    /// simulated transport does.
    #[arg(long, help_heading = "Network")]
    pub no_receive_gap: bool,

    /// Print every rank's completion time (the default up to 16 ranks with one
    /// algorithm and size).
    #[arg(long)]
    pub per_rank: bool,

    /// Also simulate N calls back to back, with the same root and with the root
    /// rotating, and print the per-call time a loop benchmark would report and
    /// its error against one call (LogGP paper, sec. 4.2).
    #[arg(long = "loop", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub loop_calls: Option<u32>,

    /// Draw the first algorithm at the first size as an SVG timeline (ranks as rows,
    /// o, g and L as bars; at most 64 ranks).
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<PathBuf>,
}

/// Options of `ngauge rma`.
#[derive(Debug, Args, Clone)]
pub struct RmaArgs {
    /// Payload sizes: `1-1M` (powers of two), `1-64K:1K` (step), `1,8,4K` (list).
    /// Accumulate takes the multiples of 8 among them; fetch-add is 8 bytes.
    #[arg(long, default_value = "1-1M", value_name = "SPEC")]
    pub sizes: String,

    /// Operations: put, get, put-bw, put-notify, accumulate, fetch-add.
    #[arg(
        long,
        default_value = "put,get,put-bw,put-notify,accumulate,fetch-add",
        value_name = "LIST"
    )]
    pub ops: String,

    /// Synchronizations: flush (passive target) and fence (active target, put and
    /// get only).
    #[arg(long, default_value = "flush,fence", value_name = "LIST")]
    pub sync: String,

    /// Timed operations per point.
    #[arg(long, default_value_t = 1000, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub reps: u64,

    /// Untimed operations first, per point.
    #[arg(long, default_value_t = 100, value_name = "NUM", value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub warmup: u64,

    /// Puts per timed round of put-bw (then one flush), as osu_put_bw's window.
    #[arg(long, default_value_t = 64, value_name = "NUM", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub window: u64,

    /// Verify the data of put and fetch-add (outside the timed regions).
    #[arg(long)]
    pub check: bool,
}
