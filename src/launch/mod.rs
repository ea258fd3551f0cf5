//! Starting the ranks of a job without MPI: launcher detection, the local launcher,
//! rendezvous, and the control channel.
//!
//! [`start`] turns a process into either the local launcher (which starts `--np`
//! copies of itself and waits) or one rank of a job, a [`World`] with a
//! [`ngauge_transport::Control`] over a tree of TCP connections grown from the ones
//! made at rendezvous. No MPI
//! library is involved: under `mpirun`/`srun` the rank and size come from the
//! launcher's environment ([`env`](mod@env)).
//!
//! Modules, one job each: [`env`](mod@env) (launcher environments, job-id derivations),
//! [`binding`] (do the measured ranks have cores of their own),
//! [`hostlist`] (Slurm host lists), [`frame`] (the wire format and its checked
//! decoder), [`wire`] (whole frames on blocking sockets), [`rendezvous`] (joining),
//! [`grow`] (linking the tree of [`ngauge_transport::tree`]),
//! [`control`] (barrier/broadcast/gather), [`blame`] (the rank an error is about),
//! [`limits`] (descriptors and tasks a job needs), [`local`] (the local launcher),
//! [`world`] (putting it together); with their features, `mpi` (MPI as the
//! bootstrap) and `pmix` (the launcher's PMIx server as the bootstrap).

pub mod binding;
pub mod blame;
pub mod control;
pub mod env;
mod error;
pub mod frame;
pub mod grow;
pub mod hostlist;
pub mod limits;
pub mod liveness;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "pmix")]
pub mod pmix;
pub mod rendezvous;
pub mod signals;
pub mod wire;
pub mod world;

pub use control::TcpControl;
pub use env::{detect, LauncherEnv, LauncherKind};
pub use error::LaunchError;
pub use frame::Peer;
pub use world::{start, start_with, Started, World};

use std::net::IpAddr;
use std::time::Duration;

/// Everything [`start`] needs from the command line.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Ranks the local launcher starts (ignored under a launcher or by hand).
    pub np: usize,
    /// This rank, when started by hand (`--rank`, `NGAUGE_RANK`).
    pub rank: Option<usize>,
    /// Job size, when started by hand (`--size`, `NGAUGE_SIZE`).
    pub size: Option<usize>,
    /// Rank 0's `HOST:PORT` (`--rendezvous`, `NGAUGE_RENDEZVOUS`).
    pub rendezvous: Option<String>,
    /// Where rank 0 listens, when not the rendezvous address (`--bind`).
    pub bind: Option<String>,
    /// The per-job token (`--job-token`, `NGAUGE_JOB_TOKEN`).
    pub job_token: Option<String>,
    /// Where this rank's data transports listen (`--data-addr`).
    pub data_addr: Option<IpAddr>,
    /// How long to wait for joins and for the slowest rank in a collective.
    pub timeout: Duration,
    /// Forward every rank's stderr, not just rank 0's.
    pub verbose: bool,
}

impl Default for LaunchOptions {
    /// Two local ranks, nothing given by hand, a 30 s timeout.
    fn default() -> Self {
        LaunchOptions {
            np: 2,
            rank: None,
            size: None,
            rendezvous: None,
            bind: None,
            job_token: None,
            data_addr: None,
            timeout: Duration::from_secs(30),
            verbose: false,
        }
    }
}
