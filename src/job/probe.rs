//! Which transports this build and machine can use, with the reason when one
//! cannot (`ngauge info`).

use super::{JobSpec, TransportName, UcxSpec, VerbsSpec};
use crate::build_facts::BuildFacts;
use serde::{Deserialize, Serialize};

/// One transport's availability.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TransportInfo {
    /// The transport.
    pub name: TransportName,
    /// Compiled into this build.
    pub compiled: bool,
    /// Usable on this machine, in this process.
    pub usable: bool,
    /// Why not, when not.
    pub reason: Option<String>,
    /// What it would use here, where it says (UCX: its version and the
    /// transports and devices of its transport list; ofi: the provider a run
    /// uses and every one `fi_getinfo` offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Every transport's availability, in [`TransportName::ALL`] order; verbs is
/// probed on the device and port of `job`, UCX with its transport list, ofi
/// with its provider.
pub fn probe_all(job: &JobSpec) -> Vec<TransportInfo> {
    TransportName::ALL
        .iter()
        .map(|&name| probe(name, job))
        .collect()
}

/// `name`'s availability.
pub fn probe(name: TransportName, job: &JobSpec) -> TransportInfo {
    let unusable = |reason: String| TransportInfo {
        name,
        compiled: true,
        usable: false,
        reason: Some(reason),
        detail: None,
    };
    if !BuildFacts::current().has_transport(name.as_str()) {
        return TransportInfo {
            compiled: false,
            ..unusable(format!(
                "built without the `{name}` feature; rebuild with `cargo build --release --features {name}`"
            ))
        };
    }
    let usable = match name {
        TransportName::Tcp => std::net::TcpListener::bind("127.0.0.1:0").map(drop),
        TransportName::Udp => std::net::UdpSocket::bind("127.0.0.1:0").map(drop),
        TransportName::Verbs => {
            return probe_verbs(&job.verbs).map_or_else(unusable, |_| usable(name))
        }
        TransportName::Ucx => {
            return probe_ucx(&job.ucx).map_or_else(unusable, |detail| TransportInfo {
                detail: Some(detail),
                ..usable(name)
            })
        }
        TransportName::Ofi => {
            return super::ofi::probe(&job.ofi).map_or_else(unusable, |detail| TransportInfo {
                detail: Some(detail),
                ..usable(name)
            })
        }
        TransportName::Mpi => return probe_mpi().map_or_else(unusable, |_| usable(name)),
    };
    match usable {
        Ok(()) => self::usable(name),
        Err(e) => unusable(format!("cannot open a socket: {e}")),
    }
}

fn usable(name: TransportName) -> TransportInfo {
    TransportInfo {
        name,
        compiled: true,
        usable: true,
        reason: None,
        detail: None,
    }
}

#[cfg(feature = "verbs")]
fn probe_verbs(verbs: &VerbsSpec) -> Result<String, String> {
    ngauge_verbs::probe(verbs.device.as_deref(), verbs.port)
}

#[cfg(not(feature = "verbs"))]
fn probe_verbs(_verbs: &VerbsSpec) -> Result<String, String> {
    Err("built without the `verbs` feature".into())
}

/// UCX with the spec's transport list, else the environment's `UCX_TLS`.
fn probe_ucx(ucx: &UcxSpec) -> Result<String, String> {
    #[cfg(feature = "ucx")]
    {
        let env = std::env::var("UCX_TLS").ok().filter(|v| !v.is_empty());
        ngauge_ucx::probe(ucx.tls.as_deref().or(env.as_deref()))
    }
    #[cfg(not(feature = "ucx"))]
    {
        let _ = ucx;
        Err("built without the `ucx` feature".into())
    }
}

#[cfg(feature = "mpi")]
fn probe_mpi() -> Result<(), String> {
    if ngauge_mpi::launched_by_mpi() {
        Ok(())
    } else {
        let built: Vec<String> = ngauge_mpi::shims::built()
            .iter()
            .map(|s| format!("{} for {}", s.mpiexec, s.flavor))
            .collect();
        Err(format!(
            "needs an MPI launcher: run under {}",
            if built.is_empty() {
                "mpirun/mpiexec (this build has no MPI shim)".to_string()
            } else {
                built.join(" or ")
            }
        ))
    }
}

#[cfg(not(feature = "mpi"))]
fn probe_mpi() -> Result<(), String> {
    Err("built without the `mpi` feature".into())
}
