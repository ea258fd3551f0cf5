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
//! the liveness links of the local launcher ([`super::liveness`], rank 0's listener
//! on its data address, its port and key broadcast over MPI) are
//! [`MpiControl`]'s [`Watch`], so `--timeout` bounds how long a rank may be stopped
//! or unreachable, not how long the others may wait for it to finish its work.

use super::env::{self, LauncherEnv, LauncherKind};
use super::error::say_error;
use super::frame::{self, Peer};
use super::liveness::Liveness;
use super::world::{hostname, Started, World};
use super::{LaunchError, LaunchOptions};
use ngauge_mpi::{Mpi, MpiControl, MpiError, Watch};
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
             was built against {} ({}); launch it with that library's mpirun/mpiexec",
            detected.kind.describe(),
            mpi.library_version(),
            mpi.size(),
            ngauge_mpi::BUILD_FLAVOR,
            ngauge_mpi::BUILD_MPIEXEC,
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
        let liveness = link_liveness(&mut control, peers[0].data_addr, opts.timeout, cores)?;
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

/// Sets up the liveness links ([`super::liveness`]) over MPI's control plane: rank 0
/// listens on an ephemeral port of `rendezvous_ip`, broadcasts port and a fresh key,
/// and accepts one authenticated connection from every other rank (a star, as
/// [`MpiControl`]'s collectives are linear through rank 0, which so watches every
/// rank it waits for). Collective.
fn link_liveness(
    control: &mut dyn Control,
    rendezvous_ip: IpAddr,
    timeout: Duration,
    cores: Vec<usize>,
) -> Result<Liveness, LaunchError> {
    use super::grow::{accept_proven, connect_proven, fail};
    use ngauge_transport::auth::{self, AuthKey};
    use std::net::{SocketAddr, TcpListener};
    let (rank, size) = (control.rank(), control.size());
    let mut links: Vec<Option<std::net::TcpStream>> = (0..size).map(|_| None).collect();
    if rank == 0 {
        let listener =
            TcpListener::bind(SocketAddr::new(rendezvous_ip, 0)).map_err(|e| fail("listen", &e))?;
        let port = listener
            .local_addr()
            .map_err(|e| fail("listen", &e))?
            .port();
        let key = AuthKey::random().map_err(|e| fail("key", &e))?;
        let mut offer = key.as_bytes().to_vec();
        offer.extend_from_slice(&port.to_le_bytes());
        control.broadcast(0, &mut offer)?;
        let others: Vec<usize> = (1..size).collect();
        for (&r, s) in others
            .iter()
            .zip(accept_proven(&listener, &key, 0, &others, timeout)?)
        {
            links[r] = Some(s);
        }
    } else {
        let mut offer = Vec::new();
        control.broadcast(0, &mut offer)?;
        let (key, port) = offer.split_at(offer.len().min(auth::KEY_LEN));
        let port = <[u8; 2]>::try_from(port).ok().map(u16::from_le_bytes);
        let (Some(key), Some(port)) = (AuthKey::from_bytes(key), port) else {
            return Err(fail("rank 0's offer", &"malformed"));
        };
        let to = SocketAddr::new(rendezvous_ip, port);
        links[0] = Some(connect_proven(to, &key, rank, 0, timeout)?);
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
