//! What each measuring command measures, as plain serde specs: the command line
//! fills them from flags (`src/cli.rs`), a suite file from its TOML tables
//! ([`crate::suite::file`]), and [`crate::experiment`] runs the command from the
//! spec alone. [`CommandSpec`] is one command with its spec.
//!
//! Field names are the flags' names with `-` written `_` (and a unit suffix where
//! the flag takes a unit: `check_after_s`); defaults are the flags' defaults.
//! Unknown fields are rejected. [`SpecError`] names the field, never a flag: the
//! command line turns the field into its flag, a suite into its file, line and key.

pub mod coll;
mod command;
pub mod ebb;
pub mod info;
pub mod late;
pub mod loggp;
pub mod matrix;
pub mod nbc;
pub mod noise;
pub mod pingpong;
pub mod rma;
mod sizes;
pub mod sync;
pub mod timer;

pub use coll::{CollCmdSpec, WindowColl};
pub use command::CommandSpec;
pub use ebb::EbbSpec;
pub use info::InfoSpec;
pub use late::LateCmdSpec;
pub use loggp::LoggpSpec;
pub use matrix::MatrixSpec;
pub use nbc::NbcCmdSpec;
pub use noise::NoiseSpec;
pub use pingpong::PingpongSpec;
pub use rma::RmaSpec;
pub use sizes::SizeList;
pub use sync::SyncSpec;
pub use timer::TimerSpec;

/// A value of a spec that no run can use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// The field, as the spec names it (`sizes`, `floor_us`).
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl SpecError {
    pub(crate) fn new(field: &'static str, message: impl Into<String>) -> Self {
        SpecError {
            field,
            message: message.into(),
        }
    }

    /// Refuses `field`'s `value` outside `lo..=hi`.
    pub(crate) fn range(
        field: &'static str,
        value: impl Into<u64>,
        lo: u64,
        hi: u64,
    ) -> Result<(), Self> {
        let value = value.into();
        if (lo..=hi).contains(&value) {
            return Ok(());
        }
        Err(SpecError::new(
            field,
            format!("must be between {lo} and {hi}, got {value}"),
        ))
    }
}
