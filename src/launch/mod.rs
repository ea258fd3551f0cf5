//! Starting the ranks of a job without MPI: launcher detection, the local launcher,
//! rendezvous, and the control channel.

pub mod env;

pub use env::{detect, LauncherEnv, LauncherKind};
