//! MPI for ngauge: a [`Transport`](ngauge_transport::Transport) over MPI
//! point-to-point, MPI's collectives for `coll`, a
//! [`Control`](ngauge_transport::Control) plane over MPI point-to-point messages,
//! `MPI_Wtime`, and one-sided windows for `rma` ([`MpiWindow`]).
//!
//! The first use of ngauge is comparing an MPI library with the transport under it
//! (Hoefler et al., "LogGP in theory and practice", measure both with one
//! procedure). Everything MPI-specific is in this crate.
//!
//! # Design decisions
//!
//! **A C shim, not bindings.** MPI's handle types are pointers to structs in Open MPI
//! and ints in MPICH, and its constants are macros, so Rust bindings to `mpi.h` are
//! different per library. `shim/ngauge_mpi.c` is compiled by `build.rs` against the
//! MPI found (`MPICC`, `mpicc --showme`, `mpicc -show`, pkg-config) and exposes a
//! small ABI of ints and pointers: communicators and requests are indices into its
//! tables. The Rust side ([`ffi`](crate)) is declared by hand and is the same for
//! every MPI.
//!
//! **One build, every MPI installed.** The shim is a shared object per MPI library
//! found, carried in the crate and loaded when MPI starts ([`shims`]): the
//! launcher's family (or `NGAUGE_MPI`) picks it, so the same binary runs under
//! Open MPI's `mpirun` and MPICH's `mpiexec`, and testing both builds once.
//!
//! **One lifecycle.** [`Mpi::init`] calls `MPI_Init_thread` once and returns an
//! `Arc`; transports and control planes hold it, and `MPI_Finalize` runs when the last
//! is dropped. MPI cannot be initialized again after that.
//!
//! **One thread, no lock.** Only the thread that initialized MPI calls it: the
//! transport is not `Send`, the control plane checks its thread. So MPI runs at
//! `MPI_THREAD_SINGLE`, like the `MPI_Init` of the C benchmarks it is compared
//! with; Open MPI 4.1 adds ~65 ns to a 1-byte shared-memory latency at any higher
//! level.
//!
//! **Communicators.** There is one: `MPI_COMM_WORLD`. The transport sends on it
//! with tag 0, as a C benchmark does; the control plane sends on it with tags 1
//! and 2, which the data plane never uses, so control messages can never match
//! data messages. No duplicate: `MPI_Comm_dup` (like any nonblocking collective)
//! leaves Open MPI's libnbc in every later progress loop and slows the data plane
//! down (see `control`).
//!
//! **Builds without MPI.** When `build.rs` finds no MPI the crate still compiles
//! ([`AVAILABLE`] is false, [`shims::built`] empty) and [`Mpi::init`] returns
//! [`MpiError::NotBuilt`], so a workspace build never requires an MPI installation.
#![deny(missing_docs)]

mod coll;
mod control;
mod datatype;
mod ffi;
mod runtime;
pub mod shims;
mod transport;
mod window;

/// The wrapper-output parser of `build.rs`, compiled here for its unit tests.
#[cfg(test)]
#[path = "../build/flags.rs"]
#[allow(dead_code)]
mod build_flags;
#[cfg(test)]
mod build_flags_tests;

pub use control::{MpiControl, Watch};
pub use datatype::{Datatype, ReduceOp};
pub use runtime::{launched_by_mpi, launched_by_mpi_from, Flavor, Mpi, MpiError};
pub use transport::{MpiOptions, MpiTransport};
pub use window::MpiWindow;

/// True when this build carries a shim for at least one MPI library.
pub const AVAILABLE: bool = !shims::SHIMS.is_empty();

/// The shim this process uses ([`shims::selected`]), or [`Shim::NONE`] when the
/// build has none or `NGAUGE_MPI` names one it lacks: its MPI family (`openmpi`,
/// `mpich`, `unknown`, `none`), wrapper and launcher. Tests launch with its
/// `mpiexec`.
pub fn shim() -> &'static Shim {
    shims::selected().unwrap_or(&Shim::NONE)
}

pub use shims::Shim;
