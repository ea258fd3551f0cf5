//! Errors of starting a job.

use ngauge_transport::ControlError;
use std::time::Duration;

/// Why a job could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The flags or environment do not describe a job (the binary exits with 2).
    #[error("{0}")]
    Usage(String),
    /// Rank 0 cannot listen where it was told to.
    #[error(
        "cannot listen on {addr}: {error}; choose another address or port with --rendezvous/--bind"
    )]
    Bind {
        /// The address.
        addr: String,
        /// What the kernel said (in the text, not a source: said once).
        error: std::io::Error,
    },
    /// This rank cannot reach rank 0.
    #[error("could not reach rank 0 at {addr} within {after:?}: {detail}; is rank 0 running and listening there (--rendezvous HOST:PORT)?")]
    Connect {
        /// The rendezvous address.
        addr: String,
        /// How long it tried.
        after: Duration,
        /// The last error.
        detail: String,
    },
    /// Rank 0 refused this rank.
    #[error("rank 0 refused to let this rank join: {0}")]
    Refused(String),
    /// Not every rank joined in time.
    #[error("ranks {missing:?} did not join within {after:?} (did they start? do they use the same --job-token and --rendezvous? raise --timeout if they start slowly)")]
    JoinTimeout {
        /// The ranks that never joined.
        missing: Vec<usize>,
        /// The join timeout.
        after: Duration,
    },
    /// A peer broke the rendezvous protocol or went away during it.
    #[error("rendezvous failed: {0}")]
    Rendezvous(String),
    /// A system call failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error (in the text, not a source: said once).
        error: std::io::Error,
    },
    /// The job needs more of a system resource than this process may have.
    #[error("{0}")]
    Limit(String),
    /// The control channel failed while starting.
    #[error(transparent)]
    Control(#[from] ControlError),
}

impl LaunchError {
    /// [`LaunchError::Io`] of what was being done, for `map_err`.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
        let what = what.into();
        move |error| LaunchError::Io { what, error }
    }

    /// Whether this is bad input or a limit too low for the job, refused before it
    /// starts (exit status 2), rather than a failure at run time.
    pub fn is_usage(&self) -> bool {
        matches!(self, LaunchError::Usage(_) | LaunchError::Limit(_))
    }
}

/// Prints `ngauge: error: MESSAGE` in one write, flushed, before an abort: the
/// launcher relays a rank's stderr in the chunks it was written in, and MPICH's
/// Hydra drops what it has not relayed yet when the job is aborted (`eprintln!`
/// writes the prefix, the message and the newline separately).
#[cfg(any(feature = "mpi", feature = "pmix"))]
pub(super) fn say_error(message: &str) {
    use std::io::Write;
    let line = format!("ngauge: error: {message}\n");
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.flush();
}
