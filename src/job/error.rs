//! [`JobError`]: why a job could not be set up, and whose fault it is.

use super::TransportName;
use crate::launch::LaunchError;
use ngauge_transport::TransportError;

/// Why a job's transports could not be set up.
///
/// [`JobError::is_input`] tells bad input (a spec that cannot work, a transport this
/// build or machine lacks: the binary exits with status 2) from a failure at run
/// time (status 1). Messages name no command-line flag: the front end that filled
/// the spec adds its own hints.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The spec lists no transport.
    #[error("no transport to open")]
    NoTransport,
    /// A transport listed twice (its results would be ambiguous).
    #[error("{0} is listed twice")]
    DuplicateTransport(TransportName),
    /// A timeout outside `(0, 1 day]`.
    #[error("timeout {0} s is not a number of seconds in (0, 86400]")]
    BadTimeout(f64),
    /// A socket buffer outside `1..=1 GiB`.
    #[error("a {what} buffer of {bytes} bytes is not between 1 byte and 1 GiB")]
    BadBuffer {
        /// `send` or `receive`.
        what: &'static str,
        /// The size asked for.
        bytes: usize,
    },
    /// Verbs port 0 (ports are 1-based).
    #[error("verbs port 0 does not exist (ports are numbered from 1)")]
    BadVerbsPort,
    /// The transport is not compiled into this build.
    #[error(
        "this ngauge was built without {transport}: rebuild with `cargo build --release --features {transport}`{needs}"
    )]
    NotCompiled {
        /// The transport.
        transport: TransportName,
        /// What the build needs, as a suffix (` (needs ...)`), or empty.
        needs: &'static str,
    },
    /// A transport failed to open; [`TransportError::Unavailable`] (no device, no
    /// MPI launcher) is the user's to fix, anything else a failure.
    #[error("opening {transport}: {error}")]
    Open {
        /// The transport.
        transport: TransportName,
        /// What it said.
        error: TransportError,
    },
    /// A test hook variable that does not parse.
    #[error("{var}={value:?} is not a number")]
    TestHook {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// Starting the job failed.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

impl JobError {
    /// Whether this is the user's input (exit status 2) rather than a failure at
    /// run time (status 1).
    pub fn is_input(&self) -> bool {
        match self {
            JobError::NoTransport
            | JobError::DuplicateTransport(_)
            | JobError::BadTimeout(_)
            | JobError::BadBuffer { .. }
            | JobError::BadVerbsPort
            | JobError::NotCompiled { .. }
            | JobError::TestHook { .. } => true,
            JobError::Open { error, .. } => matches!(error, TransportError::Unavailable { .. }),
            JobError::Launch(e) => e.is_usage(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_input_and_a_lost_peer_is_not() {
        let open = |error| JobError::Open {
            transport: TransportName::Verbs,
            error,
        };
        let no_device = open(TransportError::Unavailable {
            transport: "verbs",
            reason: "no RDMA device".into(),
        });
        assert!(no_device.is_input());
        assert_eq!(
            no_device.to_string(),
            "opening verbs: verbs is not usable: no RDMA device"
        );
        let lost = open(TransportError::PeerClosed {
            transport: "verbs",
            peer: 1,
            op: "connect",
        });
        assert!(!lost.is_input());
        let missing = crate::job::open::not_compiled(TransportName::Mpi);
        assert!(missing.is_input());
        assert!(missing.to_string().contains("--features mpi"), "{missing}");
        assert!(JobError::Launch(LaunchError::Usage("x".into())).is_input());
    }
}
