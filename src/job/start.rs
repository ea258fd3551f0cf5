//! Starting this process's part of a job for a spec: through the launcher's PMIx
//! server when one started us (feature `pmix`) and the spec does not ask for the
//! MPI transport; through MPI when the spec asks for the MPI transport or an MPI
//! launcher started us (feature `mpi`); else through [`crate::launch::start`].

use super::{JobError, JobSpec, TransportName};
use crate::launch::{self, LaunchOptions, Started};

/// Turns this process into the local launcher or one rank of the job `spec` needs.
pub fn start(spec: &JobSpec, opts: &LaunchOptions) -> Result<Started, JobError> {
    let wants_mpi = spec.uses(TransportName::Mpi);
    #[cfg(feature = "pmix")]
    if !wants_mpi && launch::pmix::wanted(opts) {
        return Ok(launch::pmix::start(opts)?);
    }
    #[cfg(feature = "mpi")]
    if launch::mpi::wanted(wants_mpi, opts) {
        return Ok(launch::mpi::start(opts)?);
    }
    #[cfg(not(feature = "mpi"))]
    if wants_mpi {
        return Err(super::open::not_compiled(TransportName::Mpi));
    }
    Ok(launch::start(opts)?)
}
