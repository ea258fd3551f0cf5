//! Starting a rank under a PMIx launcher (cargo feature `pmix`): Slurm's
//! `srun --mpi=pmix`, Open MPI's `mpirun`, PRRTE's `prterun`.
//!
//! Rank, size and the ranks on this host come from the launcher's PMIx server
//! ([`ngauge_pmix::Pmix`]: `PMIX_JOB_SIZE`, `PMIX_LOCAL_PEERS`), and the
//! endpoints the TCP rendezvous collects at rank 0 ([`super::rendezvous`]) go
//! through the server's key-value store instead, in one round:
//!
//! 1. every rank puts its table entry (data address, host, pid; the
//!    [`frame::encode_table`] format of one entry) under [`PEER_KEY`]; rank 0
//!    also listens on an ephemeral port of its data address and puts that port
//!    and a fresh authentication key under [`OFFER_KEY`];
//! 2. `PMIx_Commit`, then one `PMIx_Fence` that collects the data (bounded by
//!    `--timeout`);
//! 3. rank 0 reads every entry with `PMIx_Get`, the others only rank 0's; they
//!    connect to rank 0's port and prove the key ([`ngauge_transport::auth`]),
//!    and those connections grow into the control tree with its liveness links,
//!    which then carries the table to every rank, as after a TCP rendezvous
//!    (p reads in all, not p per rank).
//!
//! No port is derived from a job id and no token from a public name: the key is
//! random and only the job's ranks can read it from their server. Data
//! addresses follow `launch::mpi`'s rule (feature `mpi`): `--data-addr` when given; loopback
//! when every rank runs on this host; otherwise the address this host's name
//! resolves to.
//!
//! PMIx takes precedence over the environment detection of [`super::env`] (Open
//! MPI's `mpirun` sets both `OMPI_*` and `PMIX_*`), and over MPI's bootstrap
//! unless `-t mpi` asks for MPI; `--rank` or `--rendezvous` keep the TCP
//! rendezvous. The client is finalized once the control channel stands: nothing
//! later needs the server.

use super::control::TcpControl;
use super::env::{self, LauncherEnv, LauncherKind};
use super::error::say_error;
use super::frame::{self, Peer};
use super::world::{hostname, Started, World};
use super::{hostlist, LaunchError, LaunchOptions};
use ngauge_pmix::{Pmix, PmixError};
use ngauge_transport::auth::{self, AcceptLimits, AuthKey, RefusalLog};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

/// The key of every rank's table entry.
pub const PEER_KEY: &str = "ngauge.v1.peer";
/// The key of rank 0's offer: its control port (2 bytes, little-endian) and the
/// key the others prove ([`auth::KEY_LEN`] bytes).
pub const OFFER_KEY: &str = "ngauge.v1.offer";

/// What the PMIx server of this job said about itself, for `meta`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmixFacts {
    /// The server: the resource manager's name when the server offers it
    /// (`PMIX_RM_NAME`), else the launcher its environment shows.
    pub server: String,
    /// The resource manager's version when offered, else the server's PMIx
    /// version.
    pub server_version: Option<String>,
    /// The PMIx client library ngauge runs with (`PMIx_Get_version`).
    pub library_version: String,
    /// The job's namespace.
    pub namespace: String,
}

static FACTS: OnceLock<PmixFacts> = OnceLock::new();

/// The facts of the PMIx server this process bootstrapped through, if it did.
pub fn recorded() -> Option<&'static PmixFacts> {
    FACTS.get()
}

/// Whether this process should bootstrap through PMIx: a PMIx server started it
/// and no `--rank`/`--size`/`--rendezvous` says otherwise.
pub fn wanted(opts: &LaunchOptions) -> bool {
    opts.rank.is_none()
        && opts.size.is_none()
        && opts.rendezvous.is_none()
        && std::env::var_os("NGAUGE_RANK").is_none()
        && ngauge_pmix::launched_by_pmix(|name| std::env::var(name).ok())
}

/// Joins this process to the job as one rank, through the launcher's PMIx server.
pub fn start(opts: &LaunchOptions) -> Result<Started, LaunchError> {
    let pmix = Pmix::init().map_err(|e| {
        LaunchError::Rendezvous(format!(
            "the PMIx variables (PMIX_RANK, PMIX_NAMESPACE) are set but the PMIx server \
             cannot be reached: {e}"
        ))
    })?;
    match join(&pmix, opts, env::detect()) {
        Ok(started) => Ok(started),
        Err(e) => {
            // The others wait in the fence or for this rank's connection: end the
            // job at once rather than after their timeout.
            say_error(&e.to_string());
            pmix.abort(if e.is_usage() { 2 } else { 1 }, &e.to_string())
        }
    }
}

fn failed(what: &str) -> impl FnOnce(PmixError) -> LaunchError + '_ {
    move |e| LaunchError::Rendezvous(format!("PMIx {what}: {e}"))
}

/// The part of [`start`] that runs with the client initialized.
fn join(pmix: &Pmix, opts: &LaunchOptions, detected: LauncherEnv) -> Result<Started, LaunchError> {
    let (rank, size) = (pmix.rank() as usize, pmix.size() as usize);
    super::limits::check_descriptors(size)?;
    if let Err(e) = super::signals::install_rank(rank) {
        eprintln!("ngauge: warning: SIGINT/SIGTERM will not be reported: {e}");
    }
    let local = pmix.local_peers().map_err(failed("local peers"))?;
    let host = hostname();
    let data_addr = match opts.data_addr {
        Some(ip) => ip,
        None if local.len() == size => IpAddr::V4(Ipv4Addr::LOCALHOST),
        None => hostlist::resolve_non_loopback(&host).ok_or_else(|| {
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
    pmix.put(PEER_KEY, &frame::encode_table(std::slice::from_ref(&me)))
        .map_err(failed("put"))?;
    let offer = if rank == 0 && size > 1 {
        let listener = TcpListener::bind(SocketAddr::new(data_addr, 0)).map_err(|e| {
            LaunchError::Usage(format!(
                "rank 0 cannot listen on its data address {data_addr}: {e}; give \
                 --data-addr an address of this host"
            ))
        })?;
        let port = listener
            .local_addr()
            .map_err(LaunchError::io("listener address"))?
            .port();
        let key = AuthKey::random().map_err(LaunchError::io("authentication key"))?;
        let mut bytes = port.to_le_bytes().to_vec();
        bytes.extend_from_slice(key.as_bytes());
        pmix.put(OFFER_KEY, &bytes).map_err(failed("put"))?;
        Some((listener, key))
    } else {
        None
    };
    pmix.commit().map_err(failed("commit"))?;
    pmix.fence(opts.timeout).map_err(|e| {
        LaunchError::Rendezvous(format!(
            "PMIx fence (every rank publishes its endpoints) did not complete: {e}; \
             did every rank start? raise --timeout if they start slowly"
        ))
    })?;
    let mut peers = table(pmix, if rank == 0 { size } else { 1 })?;
    let mut control = match offer {
        Some((listener, key)) => accept(&listener, &key, size, opts.timeout)?,
        None if size == 1 => TcpControl::root(vec![None], opts.timeout),
        None => connect(pmix, &peers[0], rank, size, opts.timeout)?,
    };
    if size > 1 {
        let cores = super::world::liveness_cores(crate::clock::allowed_cores());
        control = super::grow::grow(control, data_addr, &peers, opts.timeout, cores)?;
        peers = super::world::share_table(&mut control, peers)?;
    }
    record(pmix, &detected);
    Ok(Started::Rank(World {
        rank,
        size,
        control: Box::new(control),
        data_addr,
        env: LauncherEnv {
            kind: LauncherKind::Pmix,
            rank: Some(rank),
            size: Some(size),
            local_rank: pmix.local_rank().map(|r| r as usize),
            job_id: Some(pmix.namespace()),
            local_size: Some(local.len()),
            nodes: pmix.nodes().map(|n| n as usize),
            nodelist: detected.nodelist,
        },
        pinned_core: crate::clock::pinned_core(),
        ranks_on_host: local.len(),
        cores_on_host: super::local::job_cores(),
        peers,
    }))
}

/// The entries of ranks 0..`ranks`, read from the server after the fence.
fn table(pmix: &Pmix, ranks: usize) -> Result<Vec<Peer>, LaunchError> {
    (0..ranks)
        .map(|r| {
            let bytes = pmix.get(r as u32, PEER_KEY).map_err(failed("get"))?;
            let mut one = frame::decode_table(&bytes, 1)
                .map_err(|e| LaunchError::Rendezvous(format!("rank {r}'s PMIx entry: {e}")))?;
            let mut peer = one.pop().expect("decode_table checked the count");
            peer.rank = r;
            Ok(peer)
        })
        .collect()
}

/// Rank 0: accepts every other rank's authenticated control connection.
fn accept(
    listener: &TcpListener,
    key: &AuthKey,
    size: usize,
    timeout: Duration,
) -> Result<TcpControl, LaunchError> {
    let expected: Vec<u32> = (1..size as u32).collect();
    let limits = AcceptLimits {
        handshake: timeout.min(Duration::from_secs(5)),
        total: timeout,
    };
    let mut log = RefusalLog::new("ngauge: control listener");
    let streams = auth::accept_authenticated(listener, key, 0, &expected, &limits, &mut log)
        .map_err(|e| LaunchError::Rendezvous(format!("control connections: {e}")))?;
    let mut links: Vec<Option<TcpStream>> = vec![None];
    for s in streams {
        let _ = s.set_nodelay(true);
        links.push(Some(s));
    }
    Ok(TcpControl::root(links, timeout))
}

/// A rank other than 0: connects to rank 0's port (read from the server) and
/// proves the key.
fn connect(
    pmix: &Pmix,
    root: &Peer,
    rank: usize,
    size: usize,
    timeout: Duration,
) -> Result<TcpControl, LaunchError> {
    let offer = pmix.get(0, OFFER_KEY).map_err(failed("get"))?;
    let (port, key) = offer.split_at(offer.len().min(2));
    let port = <[u8; 2]>::try_from(port).ok().map(u16::from_le_bytes);
    let (Some(port), Some(key)) = (port, AuthKey::from_bytes(key)) else {
        return Err(LaunchError::Rendezvous(
            "rank 0's PMIx offer is malformed".into(),
        ));
    };
    let to = SocketAddr::new(root.data_addr, port);
    let fail = |what: &str, e: &dyn std::fmt::Display| LaunchError::Connect {
        addr: to.to_string(),
        after: timeout,
        detail: format!("{what}: {e}"),
    };
    let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| fail("connect", &e))?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| fail("socket", &e))?;
    auth::prove(&mut s, &key, rank as u32, 0).map_err(|e| fail("proof", &e))?;
    s.set_read_timeout(None)
        .and_then(|()| s.set_write_timeout(None))
        .map_err(|e| fail("socket", &e))?;
    let _ = s.set_nodelay(true);
    Ok(TcpControl::leaf(rank, size, s, timeout))
}

/// Records the server's facts for `meta`.
fn record(pmix: &Pmix, detected: &LauncherEnv) {
    let server = pmix.server();
    let by_env = match detected.kind {
        LauncherKind::Slurm | LauncherKind::OpenMpi => detected.kind.describe(),
        _ if std::env::var_os("PRTE_LAUNCHED").is_some() => "prterun (PRRTE)",
        _ => "unknown",
    };
    let _ = FACTS.set(PmixFacts {
        server: server.rm_name.unwrap_or_else(|| by_env.to_string()),
        server_version: server.rm_version.or(server.server_pmix_version),
        library_version: server.library_version,
        namespace: pmix.namespace(),
    });
}
