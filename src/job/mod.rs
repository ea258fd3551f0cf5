//! Job setup: from a plain, serde-named [`JobSpec`] to a running job's opened
//! transports.
//!
//! The command line and (later) TOML suites are two front ends that fill the same
//! spec; nothing here knows about either. [`start`] turns the process into the local
//! launcher or a rank ([`crate::launch`]); [`Job::open`] opens the spec's transports
//! over the rank's [`World`](crate::launch::World), with the wait mode the spec
//! gives or, for `auto`, the one the launcher decides from the cores it knows of
//! ([`World::default_wait_mode`](crate::launch::World::default_wait_mode)). Errors
//! are one [`JobError`] whose [`is_input`](JobError::is_input) tells the user's
//! mistakes from failures; they name no flag.
//!
//! ```no_run
//! use ngauge::job::{self, Job, JobSpec, TransportName};
//! use ngauge::launch::{LaunchOptions, Started};
//!
//! let spec = JobSpec { transports: vec![TransportName::Tcp], ..JobSpec::default() };
//! let opts = LaunchOptions { np: 2, ..LaunchOptions::default() };
//! if let Started::Rank(mut world) = job::start(&spec, &opts)? {
//!     let job = Job::open(&spec, &mut world, |_, _| {})?;
//!     // ... run a pattern over job.transports[0].transport ...
//! }
//! # Ok::<(), ngauge::job::JobError>(())
//! ```

mod error;
pub mod interleave;
pub mod ofi;
pub mod one_sided;
pub mod open;
pub mod probe;
mod spec;
mod start;

pub use error::JobError;
pub use open::{Job, JobWarning, Opened, TransportOptions};
pub use spec::{
    JobSpec, OfiOp, OfiSpec, TransportName, UcxConnect, UcxOp, UcxSpec, VerbsOp, VerbsSpec,
    WaitPolicy, MAX_BUFFER_BYTES, MAX_TIMEOUT_S,
};
pub use start::start;
