//! The library runs an experiment from a plain spec: one function per measuring
//! command takes the command's spec ([`crate::spec`]), the rank's
//! [`World`] (none for the one-process commands) and a [`Context`], runs the whole
//! experiment on this rank (opening the job's transports, synchronizing clocks,
//! the measurement loops, the checks), and returns the command's result document
//! ([`crate::report`]) on rank 0 (`None` elsewhere).
//!
//! The front ends only fill the spec and print: the command line maps its flags
//! onto it and renders the document with the hints that name its flags; a suite's
//! run (`ngauge exec`) reads it from the run directory. Nothing here reads the
//! process's arguments or prints, but for the progress line on stderr that the
//! context asks for.
//!
//! | command | function |
//! |---|---|
//! | `timer` | [`timer::run`] (one process) |
//! | `info` | [`info::run`] |
//! | `pingpong` | [`pingpong::run`] |
//! | `loggp` | [`loggp::run`] |
//! | `matrix` | [`matrix::run`] |
//! | `ebb` | [`ebb::run`] |
//! | `sync` | [`sync::run`] |
//! | `noise` | [`noise::run`] |
//! | `coll` | [`coll::run`] |
//! | `late` | [`late::run`] |
//! | `nbc` | [`nbc::run`] |
//! | `rma` | [`rma::run`] |
//! | `simulate` | [`simulate::run`] (one process), [`simulate::measure`] (in a job) |
//!
//! What `matrix` and `ebb` share is [`pairs`]. What the collective timings
//! share (their setup, the window starts' clock synchronization) is
//! [`collective`].

pub mod coll;
pub mod collective;
pub mod ebb;
pub mod info;
pub mod late;
pub mod loggp;
pub mod matrix;
pub mod nbc;
pub mod noise;
pub mod pairs;
pub mod pingpong;
pub mod rma;
pub mod simulate;
pub mod sync;
pub mod timer;

use crate::clock::{SystemClock, TimerSource};
use crate::job::{JobError, TransportName};
use crate::launch::binding::check_groups;
use crate::launch::World;
use crate::report::jsonl::JsonlWriter;
use crate::report::progress::Progress;
use crate::report::{Meta, MetaBuilder, SetupWarning};
use crate::spec::SpecError;
use ngauge_transport::ControlError;
use std::io;

/// Where the `-o` stream's records go: one JSON line per finished measurement
/// point, written as each point finishes.
pub trait Records {
    /// Takes one record, a JSON text without its line break.
    ///
    /// # Errors
    /// When it cannot be kept (a full disk).
    fn record(&mut self, json: &str) -> io::Result<()>;
}

impl Records for JsonlWriter {
    fn record(&mut self, json: &str) -> io::Result<()> {
        self.write_line(json)
    }
}

/// Records kept in memory (tests, library users).
impl Records for Vec<String> {
    fn record(&mut self, json: &str) -> io::Result<()> {
        self.push(json.to_string());
        Ok(())
    }
}

/// What a front end gives every experiment besides its spec.
pub struct Context<'a> {
    /// The command line (or suite invocation), for `meta.command_line`.
    pub command_line: Vec<String>,
    /// Where this rank's records go; rank 0's front end gives one for `-o`.
    pub records: Option<&'a mut dyn Records>,
    /// Draw a progress line on stderr (rank 0 with a terminal behind it).
    pub progress: bool,
    /// The timer every clock of the experiment reads ([`TimerSource::detect`]
    /// unless the user chose one, `--timer`); the front end checked that it runs
    /// here ([`TimerSource::usable`]).
    pub timer: TimerSource,
}

impl Context<'_> {
    /// A context that keeps no record and draws nothing.
    pub fn quiet(command_line: Vec<String>) -> Self {
        Context {
            command_line,
            records: None,
            progress: false,
            timer: TimerSource::detect(),
        }
    }

    /// Hands `record` to [`Self::records`], if any.
    ///
    /// # Errors
    /// [`ExperimentError::Records`].
    pub fn record<T: serde::Serialize>(&mut self, record: &T) -> Result<(), ExperimentError> {
        if let Some(records) = self.records.as_mut() {
            let json = serde_json::to_string(record).map_err(io::Error::other);
            json.and_then(|j| records.record(&j))
                .map_err(ExperimentError::Records)?;
        }
        Ok(())
    }

    /// The metadata of a result timed by `source` at `hz`, with this context's
    /// command line.
    pub fn meta(&self, source: TimerSource, hz: f64) -> MetaBuilder {
        Meta::builder(self.command_line.iter().cloned(), source, hz)
    }

    /// The progress line, drawn when the context asks for it.
    pub fn progress_line(&self) -> Progress {
        Progress::line(self.progress)
    }
}

/// Why an experiment did not produce its document.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A value of the spec no run can use.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The job could not be set up.
    #[error(transparent)]
    Job(#[from] JobError),
    /// The job has fewer ranks than the command measures between.
    #[error("{command} needs at least {needed} ranks, the job has {size}")]
    TooFewRanks {
        /// The command.
        command: &'static str,
        /// Ranks it needs.
        needed: usize,
        /// Ranks the job has.
        size: usize,
    },
    /// A test hook's environment variable is malformed (the injected clock,
    /// `NGAUGE_TEST_*`).
    #[error("{0}")]
    TestHook(String),
    /// A record could not be kept.
    #[error("writing the output file: {0}")]
    Records(#[source] io::Error),
    /// The control channel failed, or a rank sent what it should not.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The ping-pong pattern failed.
    #[error(transparent)]
    Pingpong(#[from] crate::patterns::pingpong::PingPongError),
    /// The one-sided pattern failed.
    #[error(transparent)]
    Rma(#[from] crate::patterns::rma::RmaError),
    /// No transport of the job has one-sided operations.
    #[error(
        "-t {0}: no transport with one-sided operations; rma runs over mpi, \
         ucx and verbs (mpirun -np 2 ngauge -t mpi rma, ngauge -t verbs rma)"
    )]
    NoOneSided(String),
    /// The noise pattern failed.
    #[error(transparent)]
    Noise(#[from] crate::patterns::noise::NoiseError),
    /// A pattern timing collectives in windows failed (or the clock sync of its
    /// window starts).
    #[error(transparent)]
    Pattern(#[from] crate::patterns::PatternError),
    /// Such a pattern failed at one measurement point.
    #[error("{point}: {error}")]
    At {
        /// The point (`tcp/binomial at 8 B`).
        point: String,
        /// What failed.
        error: crate::patterns::PatternError,
    },
    /// The simulator cannot run the spec, or its parameter file is unusable.
    #[error(transparent)]
    Simulate(#[from] crate::sim::spec::SpecError),
    /// The LogGP pattern failed.
    #[error(transparent)]
    Loggp(#[from] crate::patterns::loggp::PatternError),
    /// A pair's LogGP sweep cannot be fitted.
    #[error("{transport}: pair {client}-{server}: {error}")]
    Fit {
        /// The transport measured.
        transport: TransportName,
        /// The pair's client rank.
        client: usize,
        /// The pair's server rank.
        server: usize,
        /// Why (its text is in this error's).
        error: crate::model::loggp::ModelError,
    },
    /// A clock synchronization or its check failed; options no sync can run with
    /// (a transport that may lose messages among them) are the user's input.
    #[error(transparent)]
    Sync(#[from] crate::sync::SyncError),
}

impl ExperimentError {
    /// Whether the user's input is wrong (a front end exits with status 2), not
    /// the run.
    pub fn is_input(&self) -> bool {
        match self {
            ExperimentError::Spec(_)
            | ExperimentError::TooFewRanks { .. }
            | ExperimentError::NoOneSided(_)
            | ExperimentError::TestHook(_) => true,
            ExperimentError::Job(e) => e.is_input(),
            ExperimentError::Simulate(e) => e.is_input(),
            ExperimentError::Sync(e) => matches!(e, crate::sync::SyncError::Options(_)),
            _ => false,
        }
    }
}

/// Refuses a job of fewer than `needed` ranks.
///
/// # Errors
/// [`ExperimentError::TooFewRanks`].
pub fn need_ranks(
    world: &World,
    command: &'static str,
    needed: usize,
) -> Result<(), ExperimentError> {
    if world.size < needed {
        return Err(ExperimentError::TooFewRanks {
            command,
            needed,
            size: world.size,
        });
    }
    Ok(())
}

/// This rank's clock: `timer` calibrated once, skewed when
/// `NGAUGE_TEST_CLOCK_SKEW` names this rank (see [`crate::sync::skew`]), so the
/// injected test clock applies to every experiment that times with it.
///
/// # Errors
/// [`ExperimentError::TestHook`] when the variables are malformed.
pub fn rank_clock(world: &World, timer: TimerSource) -> Result<SystemClock, ExperimentError> {
    use crate::clock::Clock;
    use crate::sync::skew::{self, SkewSpec, EPOCH_ENV};
    let hook = |e: skew::SkewSpecError| ExperimentError::TestHook(e.to_string());
    let spec = SkewSpec::from_env().map_err(hook)?;
    let (clock, _) = SystemClock::calibrated_on(timer);
    let Some(spec) = spec else {
        return Ok(clock);
    };
    spec.check_size(world.size).map_err(hook)?;
    let epoch_env = std::env::var(EPOCH_ENV).ok();
    let epoch = skew::epoch(epoch_env.as_deref(), clock.raw()).map_err(hook)?;
    Ok(clock.with_skew(spec.skew_for(world.rank, clock.rate(), epoch)))
}

/// The binding warnings of the groups of ranks measured together, at rank 0
/// (`cores` from [`World::gather_pinning`]).
pub fn binding_warnings(
    world: &World,
    cores: &[Option<usize>],
    groups: impl IntoIterator<Item = Vec<usize>>,
) -> impl Iterator<Item = SetupWarning> {
    check_groups(&world.peers, cores, world.env.kind, groups)
        .into_iter()
        .map(SetupWarning::Binding)
}
