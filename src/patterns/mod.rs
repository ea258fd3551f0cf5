//! Measurement procedures written against [`crate::transport::Transport`] and
//! [`crate::transport::Control`] only: each gets a clock, a transport and a control
//! channel, reads no global, and never touches the control channel inside a timed
//! region.

pub mod coll;
pub mod counters;
pub mod fan;
pub mod late;
pub mod loggp;
pub mod nbc;
pub mod noise;
pub mod order;
pub mod pairs;
pub mod pingpong;
pub mod rma;
pub mod rounds;

use crate::coll::{check, CollError};
use crate::sync::SyncError;
use ngauge_transport::{ControlError, Rank};

/// Untimed round trips before the first size a run measures, at least: that
/// size also pays for what the transport sets up on its first messages (UCX
/// wires up its shared-memory lanes, over `-t ucx` and under MPICH: a ping-pong
/// with `--warmup 1` read its first size 10 times slower than its neighbours),
/// which a few warmup rounds do not cover. Twice what made `loggp`'s first size
/// read as its neighbours (docs/findings/2026-11-29-real-switches.md). `loggp`
/// gives it to every size of its first pass ([`loggp::Params::warm`]): a path
/// a stack takes first at a later size is as slow at first (UCX's `egr/bcopy`:
/// 50 rounds, docs/findings/2026-12-01-first-contact-warmup.md).
pub const FIRST_SIZE_WARMUP: usize = 100;

/// The untimed round trips before a size: `warmup`, and at least
/// [`FIRST_SIZE_WARMUP`] before a first contact (the first size of a run).
pub(crate) fn warmup_rounds(warmup: usize, first_contact: bool) -> usize {
    if first_contact {
        warmup.max(FIRST_SIZE_WARMUP)
    } else {
        warmup
    }
}

/// What can go wrong in a pattern that times collective calls in windows (`coll`,
/// `late`, `nbc`); `pattern` names the measurement (`late arrivals`).
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Parameters that cannot work.
    #[error("{0}")]
    Options(String),
    /// Building, running or checking the collective failed.
    #[error(transparent)]
    Coll(#[from] CollError),
    /// The window schedule failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// The control channel failed; its text is in this error's (no source too: a
    /// chain printed in full would say it twice).
    #[error("{pattern}: {error}")]
    Control {
        /// The measurement.
        pattern: &'static str,
        /// What failed.
        error: ControlError,
    },
    /// A rank sent malformed timing data.
    #[error("{pattern}: rank {rank} sent {detail}")]
    Protocol {
        /// The measurement.
        pattern: &'static str,
        /// The rank.
        rank: Rank,
        /// What was wrong.
        detail: String,
    },
    /// A checked call left wrong data.
    #[error("data check failed: {what} of {size_bytes} bytes on {np} ranks{}: {error}",
        root.map_or(String::new(), |r| format!(" from root {r}")))]
    DataCheck {
        /// The operation and algorithm (`bcast/binomial`, `bcast/native`).
        what: String,
        /// Bytes per rank.
        size_bytes: usize,
        /// Ranks in the job.
        np: usize,
        /// The root of a rooted collective.
        root: Option<Rank>,
        /// The first wrong byte (names the rank).
        error: check::DataError,
    },
}

impl PatternError {
    /// A control-channel failure of `pattern`, for `map_err`.
    pub fn control(pattern: &'static str) -> impl FnOnce(ControlError) -> PatternError {
        move |error| PatternError::Control { pattern, error }
    }
}
