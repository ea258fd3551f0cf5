//! The one-sided window of a transport of the job, for `rma`: MPI's from
//! `MPI_Win_allocate` (`ngauge_mpi::MpiWindow`); `None` for the transports
//! without one-sided operations in ngauge (TCP and UDP have none; verbs, OFI and
//! UCX RMA are not wired to `rma` yet).

use super::{JobError, TransportName};
use crate::launch::World;
use ngauge_transport::OneSided;

/// Opens `name`'s window of `bytes` on every rank (collective), or `None` when it
/// has no one-sided operations here.
///
/// # Errors
/// [`JobError::Open`] when the transport refuses; [`JobError::NotCompiled`] for a
/// transport this build lacks.
pub fn open(
    name: TransportName,
    world: &World,
    bytes: usize,
) -> Result<Option<Box<dyn OneSided>>, JobError> {
    let _ = (world, bytes);
    match name {
        #[cfg(feature = "mpi")]
        TransportName::Mpi => {
            let failed = |reason: String| JobError::Open {
                transport: name,
                error: ngauge_transport::TransportError::Unavailable {
                    transport: "mpi",
                    reason,
                },
            };
            let mpi = ngauge_mpi::Mpi::live()
                .ok_or_else(|| failed("MPI is not initialized: start under mpirun".into()))?;
            let window =
                ngauge_mpi::MpiWindow::allocate(&mpi, bytes).map_err(|e| failed(e.to_string()))?;
            Ok(Some(Box::new(window)))
        }
        #[cfg(not(feature = "mpi"))]
        TransportName::Mpi => Err(super::open::not_compiled(name)),
        _ => Ok(None),
    }
}
