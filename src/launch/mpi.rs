//! Starting a rank under `mpirun`/`mpiexec` with MPI itself as the bootstrap (cargo
//! feature `mpi`).
//!
//! Rank and size come from `MPI_Init_thread`; the control plane is
//! [`ngauge_mpi::MpiControl`] (MPI point-to-point messages on `MPI_COMM_WORLD` with
//! tags of their own, 1 and 2), so `mpirun -np 2 ngauge -t mpi pingpong` needs no rendezvous flag,
//! and `-t tcp` (or `-t mpi,tcp`) in the same job uses the raw transport with this
//! same control plane. The peers' table (data address, host, pid) is exchanged with
//! one allgather. Data addresses: `--data-addr` when given; loopback when every rank
//! runs on this host; otherwise the address this host's name resolves to.
//!
//! Used by the binary's `with_world` instead of [`super::start`] when
//! [`wanted`] says so.
//!
//! Waits in the control plane last as long as the ranks waited for run (issue 18):
//! the liveness links of the local launcher ([`super::liveness`], along the control
//! tree: [`link_liveness`]) are [`MpiControl`]'s [`Watch`], so `--timeout` bounds
//! how long a rank may be stopped or unreachable, not how long the others may wait
//! for it to finish its work.

use super::env::{self, LauncherEnv, LauncherKind};
use super::error::say_error;
use super::frame::{self, Peer};
use super::liveness::Liveness;
use super::world::{hostname, Started, World};
use super::{LaunchError, LaunchOptions};
use ngauge_mpi::{Mpi, MpiControl, MpiError, Watch};
use ngauge_transport::tree::Shape;
use ngauge_transport::Control;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

/// Whether this process should bootstrap through MPI: `-t` asks for MPI, or an MPI
/// launcher started it (and no `--rank` says otherwise).
pub fn wanted(transport_mpi: bool, opts: &LaunchOptions) -> bool {
    transport_mpi || (opts.rank.is_none() && ngauge_mpi::launched_by_mpi())
}

/// Joins this process to the MPI job as one rank.
pub fn start(opts: &LaunchOptions) -> Result<Started, LaunchError> {
    start_with(opts, env::detect())
}

/// [`start`] with the launcher environment given.
pub fn start_with(opts: &LaunchOptions, detected: LauncherEnv) -> Result<Started, LaunchError> {
    let mpi = Mpi::init_under_launcher().map_err(|e| match e {
        MpiError::NotBuilt | MpiError::NoLauncher => LaunchError::Usage(e.to_string()),
        e => LaunchError::Rendezvous(format!("MPI start failed: {e}")),
    })?;
    match join(&mpi, opts, detected) {
        Ok(started) => Ok(started),
        Err(e) => {
            // MPI is up: returning would drop the last handle and call MPI_Finalize,
            // which can wait forever for ranks that wait for this one. End the job.
            say_error(&e.to_string());
            mpi.abort(if e.is_usage() { 2 } else { 1 })
        }
    }
}

/// The part of [`start_with`] that runs with MPI initialized.
fn join(
    mpi: &Arc<Mpi>,
    opts: &LaunchOptions,
    detected: LauncherEnv,
) -> Result<Started, LaunchError> {
    if let Some(size) = detected.size.filter(|&s| s != mpi.size()) {
        return Err(LaunchError::Usage(format!(
            "the launcher ({}) started {size} ranks but {} sees {} ranks: this ngauge \
             loaded the {} shim ({}); launch it with that library's mpirun/mpiexec, or \
             name the launcher's MPI in NGAUGE_MPI",
            detected.kind.describe(),
            mpi.library_version(),
            mpi.size(),
            ngauge_mpi::shim().flavor,
            ngauge_mpi::shim().mpiexec,
        )));
    }
    let mut control = MpiControl::new(mpi)
        .map_err(|e| LaunchError::Rendezvous(format!("MPI control plane: {e}")))?
        .with_timeout(Some(opts.timeout));
    let (rank, size) = (mpi.rank(), mpi.size());
    let host = hostname();

    // Who runs where: hosts first, so the data address can depend on it.
    let hosts = control.allgather(host.as_bytes())?;
    let single_host = hosts.iter().all(|h| h == host.as_bytes());
    let data_addr = match opts.data_addr {
        Some(addr) => addr,
        None if single_host => IpAddr::V4(Ipv4Addr::LOCALHOST),
        None => super::hostlist::resolve_non_loopback(&host).ok_or_else(|| {
            LaunchError::Usage(format!(
                "the ranks run on several hosts and {host:?} does not resolve to a \
                 non-loopback address: give --data-addr IP"
            ))
        })?,
    };
    let me = Peer {
        rank,
        data_addr,
        host: host.clone(),
        pid: std::process::id(),
    };
    let entries = control.allgather(&frame::encode_table(std::slice::from_ref(&me)))?;
    let mut peers = Vec::with_capacity(size);
    for (r, bytes) in entries.iter().enumerate() {
        let mut one = frame::decode_table(bytes, 1)
            .map_err(|e| LaunchError::Rendezvous(format!("rank {r}'s entry: {e}")))?;
        let mut peer = one.pop().expect("decode_table checked the count");
        peer.rank = r;
        peers.push(peer);
    }
    if size > 1 {
        let cores = super::world::liveness_cores(crate::clock::allowed_cores());
        let liveness = link_liveness(&mut control, &peers, opts.timeout, cores)?;
        control = control.with_watch(Box::new(liveness));
    }
    let ranks_on_host = peers.iter().filter(|p| p.host == host).count().max(1);
    let kind = match detected.kind {
        k @ (LauncherKind::OpenMpi | LauncherKind::Hydra | LauncherKind::Slurm) => k,
        _ => LauncherKind::OpenMpi,
    };
    Ok(Started::Rank(World {
        rank,
        size,
        control: Box::new(control),
        data_addr,
        env: LauncherEnv {
            kind,
            rank: Some(rank),
            size: Some(size),
            ..detected
        },
        pinned_core: crate::clock::pinned_core(),
        ranks_on_host,
        cores_on_host: super::local::job_cores(),
        peers,
    }))
}

/// Sets up the liveness links ([`super::liveness`]) along the binomial tree rooted
/// at rank 0 ([`Shape::Binomial`]), the tree [`MpiControl`]'s collectives at rank 0
/// run over, where each rank waits only for its neighbours: every rank with
/// children listens on an ephemeral port of its data address, one allgather
/// carries the ports and rank 0's fresh key, and each rank connects to its parent
/// (proving its rank with the key) before it accepts its children, so the setup
/// cannot deadlock: rank 0 only accepts. Collective.
fn link_liveness(
    control: &mut dyn Control,
    peers: &[Peer],
    timeout: Duration,
    cores: Vec<usize>,
) -> Result<Liveness, LaunchError> {
    use super::grow::{accept_proven, connect_proven, fail};
    use ngauge_transport::auth::AuthKey;
    use std::net::{SocketAddr, TcpListener};
    let (rank, size) = (control.rank(), control.size());
    let children = Shape::Binomial.children(rank, size);
    let mut offer = Vec::new();
    let listener = if children.is_empty() {
        None
    } else {
        let at = SocketAddr::new(peers[rank].data_addr, 0);
        let listener = TcpListener::bind(at).map_err(|e| fail("listen", &e))?;
        let port = listener.local_addr().map_err(|e| fail("listen", &e))?;
        offer.extend_from_slice(&port.port().to_le_bytes());
        Some(listener)
    };
    if rank == 0 {
        let key = AuthKey::random().map_err(|e| fail("key", &e))?;
        offer.extend_from_slice(key.as_bytes());
    }
    let offers = control.allgather(&offer)?;
    let malformed = || fail("the gathered ports", &"malformed");
    let key = (offers[0].get(2..))
        .and_then(AuthKey::from_bytes)
        .ok_or_else(malformed)?;
    let mut links: Vec<Option<std::net::TcpStream>> = (0..size).map(|_| None).collect();
    if let Some(parent) = Shape::Binomial.parent(rank) {
        let port = (offers[parent].get(..2))
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(malformed)?;
        let to = SocketAddr::new(peers[parent].data_addr, port);
        links[parent] = Some(connect_proven(to, &key, rank, parent, timeout)?);
    }
    if let Some(listener) = &listener {
        for (&c, s) in children
            .iter()
            .zip(accept_proven(listener, &key, rank, &children, timeout)?)
        {
            links[c] = Some(s);
        }
    }
    Liveness::start(links, super::liveness::probe_interval(timeout), cores)
        .map_err(|e| fail("thread", &e))
}

/// The liveness links tell [`MpiControl`] who still runs.
impl Watch for Liveness {
    fn silent_for(&self, rank: usize) -> Option<Duration> {
        Liveness::silent_for(self, rank)
    }

    fn probe(&mut self, rank: usize) {
        Liveness::probe(self, rank);
    }

    fn interval(&self) -> Duration {
        Liveness::interval(self)
    }
}

/// When MPI is running, ends the whole job with `MPI_Abort` after printing `message`:
/// a rank that fails must not wait in `MPI_Finalize` for ranks that wait for it.
/// Returns (doing nothing) when MPI is not running.
pub fn abort_job_on_error(message: &str, code: i32) {
    if let Some(mpi) = Mpi::live() {
        say_error(message);
        mpi.abort(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(rank: Option<usize>) -> LaunchOptions {
        LaunchOptions {
            np: 2,
            rank,
            size: rank.map(|_| 2),
            rendezvous: None,
            bind: None,
            job_token: None,
            data_addr: None,
            timeout: Duration::from_secs(1),
            verbose: false,
        }
    }

    #[test]
    fn asking_for_mpi_always_wants_the_mpi_bootstrap() {
        assert!(wanted(true, &opts(None)));
        assert!(wanted(true, &opts(Some(0))));
    }

    #[test]
    fn by_hand_ranks_keep_the_tcp_bootstrap() {
        assert!(!wanted(false, &opts(Some(1))));
    }
}
