//! The one-sided window of a transport of the job, for `rma`: MPI's from
//! `MPI_Win_allocate` (`ngauge_mpi::MpiWindow`), UCX's from `ucp_mem_map`
//! (`ngauge_ucx::UcxWindow`), verbs' from `ibv_reg_mr` (`ngauge_verbs::VerbsWindow`),
//! libfabric's from `fi_mr_reg` (`ngauge_ofi::OfiWindow`); `None` for the
//! transports without one-sided operations in ngauge (TCP and UDP have none).

use super::{JobError, JobSpec, TransportName};
use crate::launch::World;
use ngauge_transport::OneSided;

/// Whether `name` has one-sided operations in `rma` (compiled in or not).
pub fn offers(name: TransportName) -> bool {
    matches!(
        name,
        TransportName::Mpi | TransportName::Ucx | TransportName::Verbs | TransportName::Ofi
    )
}

/// Opens `name`'s window of `bytes` on every rank (collective), or `None` when it
/// has no one-sided operations here.
///
/// # Errors
/// [`JobError::Open`] when the transport refuses; [`JobError::NotCompiled`] for a
/// transport this build lacks.
pub fn open(
    name: TransportName,
    world: &mut World,
    job: &JobSpec,
    bytes: usize,
) -> Result<Option<Box<dyn OneSided>>, JobError> {
    let _ = (&world, job, bytes);
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
        #[cfg(feature = "ucx")]
        TransportName::Ucx => {
            let opts = ngauge_ucx::UcxOptions {
                tls: job.ucx.tls.clone(),
                timeout: job.timeout(),
                ..ngauge_ucx::UcxOptions::default()
            };
            let window =
                ngauge_ucx::open_window(world.control.as_mut(), &opts, bytes).map_err(|error| {
                    JobError::Open {
                        transport: name,
                        error,
                    }
                })?;
            Ok(Some(Box::new(window)))
        }
        #[cfg(not(feature = "ucx"))]
        TransportName::Ucx => Err(super::open::not_compiled(name)),
        #[cfg(feature = "verbs")]
        TransportName::Verbs => {
            let opts = ngauge_verbs::VerbsOptions {
                device: job.verbs.device.clone(),
                port: job.verbs.port,
                gid_index: job.verbs.gid_index,
                timeout: job.timeout(),
                ..ngauge_verbs::VerbsOptions::default()
            };
            let window = ngauge_verbs::open_window(world.control.as_mut(), &opts, bytes).map_err(
                |error| JobError::Open {
                    transport: name,
                    error,
                },
            )?;
            Ok(Some(Box::new(window)))
        }
        #[cfg(not(feature = "verbs"))]
        TransportName::Verbs => Err(super::open::not_compiled(name)),
        #[cfg(feature = "ofi")]
        TransportName::Ofi => {
            let wait = super::open::TransportOptions::new(job, world).wait;
            let window = super::ofi::open_window(
                world.control.as_mut(),
                &job.ofi,
                wait,
                job.timeout(),
                bytes,
            )
            .map_err(|error| JobError::Open {
                transport: name,
                error,
            })?;
            Ok(Some(Box::new(window)))
        }
        #[cfg(not(feature = "ofi"))]
        TransportName::Ofi => Err(super::open::not_compiled(name)),
        _ => Ok(None),
    }
}
