//! [`start`]: from flags and environment to a running rank with a control channel.
//!
//! Who we are, in order of precedence:
//! 1. `--rank`/`--size` (or `NGAUGE_RANK`/`NGAUGE_SIZE`): started by hand, or by our
//!    own local launcher (which also sets `NGAUGE_LAUNCHER=local`);
//! 2. a launcher's environment (Open MPI, MPICH Hydra, Slurm), no MPI linked;
//! 3. nothing: we are the local launcher and start `--np` ranks ourselves.
//!
//! Where rank 0 listens and the others connect: `--rendezvous HOST:PORT` when given
//! (rank 0 binds it, or `--bind`); under a launcher with every rank on one host,
//! `127.0.0.1` and a port derived from the job id; under Slurm across hosts, the
//! first host of `SLURM_JOB_NODELIST` and that port. The job token: `--job-token`,
//! else derived from the launcher's job id, else (rank 0 by hand) random and printed
//! with the command line that starts the other ranks.
//!
//! **This module reads the process's arguments and environment, and names the
//! command line's flags** (`--rank`, `--rendezvous`, ...): starting ranks by hand
//! and under launchers requires it (the environment carries rank, size, token and
//! core; rank 0 prints the command line for the others). It is the one part of
//! the library that knows the binary's flags.

use super::control::TcpControl;
use super::env::{self, LauncherEnv, LauncherKind};
use super::error::LaunchError;
use super::frame::{self, Peer};
use super::rendezvous::{self, Expect, Joiner};
use super::{hostlist, local, LaunchOptions};
use ngauge_transport::{Control, ControlError};
use serde::{de::DeserializeOwned, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};

/// What [`start`] turned this process into.
// One value per process, moved once: boxing the World would only obscure the contract.
#[allow(clippy::large_enum_variant)]
pub enum Started {
    /// The local launcher: the ranks ran as children; the worst exit code.
    Launcher(i32),
    /// One rank of a running job.
    Rank(World),
}

/// One rank's view of the job.
pub struct World {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Barrier, broadcast, gather over the rendezvous connections.
    pub control: Box<dyn Control>,
    /// Where this rank's data transports listen: the local address of its control
    /// connection to rank 0 (rank 0: the address the others reached it at), or
    /// `--data-addr`.
    pub data_addr: IpAddr,
    /// Which launcher started the job.
    pub env: LauncherEnv,
    /// The core this rank is pinned to, if any.
    pub pinned_core: Option<usize>,
    /// Ranks on this host (for the poll/block default).
    pub ranks_on_host: usize,
    /// Cores this host's ranks share ([`local::job_cores`]).
    pub cores_on_host: usize,
    /// Every rank's entry: data address, host, pid.
    pub peers: Vec<Peer>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("data_addr", &self.data_addr)
            .field("env", &self.env)
            .field("pinned_core", &self.pinned_core)
            .field("ranks_on_host", &self.ranks_on_host)
            .field("cores_on_host", &self.cores_on_host)
            .finish()
    }
}

impl World {
    /// How data transports should wait when nothing says otherwise: poll when this
    /// host's ranks fit on its cores, block otherwise (spinning ranks that share a
    /// core would steal it from the peer they wait for).
    pub fn default_wait_mode(&self) -> ngauge_transport::WaitMode {
        wait_mode_for(self.ranks_on_host, self.cores_on_host)
    }

    /// Every rank's pinned core (`None`: unpinned), indexed by rank, at rank 0; an
    /// empty vector elsewhere (a collective call).
    pub fn gather_pinning(&mut self) -> Result<Vec<Option<usize>>, ControlError> {
        let core = self.pinned_core;
        self.gather_json(&core, "pinned core")
    }

    /// Every rank's `value`, indexed by rank, at rank 0; an empty vector elsewhere
    /// (a collective call). `what` names it in the error about a rank that sent
    /// something else.
    pub fn gather_json<T: Serialize + DeserializeOwned>(
        &mut self,
        value: &T,
        what: &str,
    ) -> Result<Vec<T>, ControlError> {
        let mine = serde_json::to_vec(value).expect("plain data serializes");
        decode_json(self.control.gather(0, &mine)?, what)
    }

    /// Every rank's `value`, indexed by rank, on every rank (a collective call).
    pub fn allgather_json<T: Serialize + DeserializeOwned>(
        &mut self,
        value: &T,
        what: &str,
    ) -> Result<Vec<T>, ControlError> {
        let mine = serde_json::to_vec(value).expect("plain data serializes");
        decode_json(self.control.allgather(&mine)?, what)
    }

    /// Ends the job in step: a last barrier, so that a rank that failed is reported
    /// by everyone instead of silently missing.
    pub fn finish(mut self) -> Result<(), ngauge_transport::ControlError> {
        self.control.barrier()
    }
}

/// Every rank's JSON `parts`, decoded; a part that is no `what` names its rank.
fn decode_json<T: DeserializeOwned>(
    parts: Vec<Vec<u8>>,
    what: &str,
) -> Result<Vec<T>, ControlError> {
    parts
        .iter()
        .enumerate()
        .map(|(rank, bytes)| {
            serde_json::from_slice(bytes).map_err(|e| ControlError::Protocol {
                rank,
                detail: format!("malformed {what}: {e}"),
            })
        })
        .collect()
}

/// Poll when `ranks` fit on `cores`, block otherwise.
fn wait_mode_for(ranks: usize, cores: usize) -> ngauge_transport::WaitMode {
    if ranks <= cores {
        ngauge_transport::WaitMode::Poll
    } else {
        ngauge_transport::WaitMode::Block
    }
}

/// This host's name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Starts the job: either runs the local launcher (returns [`Started::Launcher`]
/// when its ranks are done) or joins this process to a job as one rank.
pub fn start(opts: &LaunchOptions) -> Result<Started, LaunchError> {
    start_with(opts, env::detect())
}

/// [`start`] with the launcher environment given (testable). Reads `NGAUGE_CORE`
/// (the core the local launcher assigned) and `NGAUGE_ANNOUNCE` (rank 0 tells the
/// local launcher its address) from the process environment: launching needs.
pub fn start_with(opts: &LaunchOptions, detected: LauncherEnv) -> Result<Started, LaunchError> {
    if let Some(token) = &opts.job_token {
        check_token(token)?;
    }
    let env = identify(opts, detected)?;
    super::limits::check_descriptors(env.size.unwrap_or(opts.np))?;
    if env.rank.is_none() {
        return local::run(opts).map(Started::Launcher);
    }
    if env.kind == LauncherKind::Local {
        local::die_with_launcher();
    }
    // The liveness thread runs on these, off the core the rank measures on.
    let cores_before_pinning = crate::clock::allowed_cores();
    if let Some(core) = std::env::var("NGAUGE_CORE")
        .ok()
        .filter(|_| env.kind == LauncherKind::Local)
        .and_then(|c| c.parse::<usize>().ok())
    {
        if let Err(e) = crate::clock::pin_to(core) {
            eprintln!("ngauge: warning: {e}");
        }
    }
    let rank = env.rank.expect("checked");
    let size = env.size.expect("identify sets both");
    if let Err(e) = super::signals::install_rank(rank) {
        eprintln!("ngauge: warning: SIGINT/SIGTERM will not be reported: {e}");
    }
    let host = hostname();
    let (mut control, data_addr, mut peers, _) = if rank == 0 {
        start_root(opts, &env, size, &host)?
    } else {
        start_leaf(opts, &env, rank, size, &host)?
    };
    if size > 1 {
        let free = liveness_cores(cores_before_pinning);
        control = super::grow::grow(control, data_addr, &peers, opts.timeout, free)?;
        peers = share_table(&mut control, peers)?;
    }
    let control: Box<dyn Control> = Box::new(control);
    let ranks_on_host = peers.iter().filter(|p| p.host == host).count().max(1);
    Ok(Started::Rank(World {
        rank,
        size,
        control,
        data_addr,
        pinned_core: crate::clock::pinned_core(),
        ranks_on_host,
        cores_on_host: local::job_cores(),
        peers,
        env,
    }))
}

/// Shortest job token accepted: 16 characters (the generated ones have 32 hex
/// digits, 128 bits). An empty token would let anyone join.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Refuses a job token too short to keep strangers out.
pub fn check_token(token: &str) -> Result<(), LaunchError> {
    let chars = token.chars().count();
    if chars < MIN_TOKEN_CHARS {
        let what = if chars == 0 {
            "is empty".to_string()
        } else {
            format!("has {chars} characters")
        };
        return Err(LaunchError::Usage(format!(
            "the job token (--job-token or NGAUGE_JOB_TOKEN) {what}; it needs at least \
             {MIN_TOKEN_CHARS} characters: leave it unset and rank 0 generates one"
        )));
    }
    Ok(())
}

/// Combines flags and environment into one launcher description.
fn identify(opts: &LaunchOptions, mut env: LauncherEnv) -> Result<LauncherEnv, LaunchError> {
    match (opts.rank, opts.size) {
        (Some(rank), Some(size)) => {
            if size == 0 || rank >= size {
                return Err(LaunchError::Usage(format!(
                    "--rank {rank} is outside a job of --size {size} (ranks are 0..{})",
                    size.saturating_sub(1)
                )));
            }
            // Our own children keep the `Local` kind; anything else is by hand.
            let local = env.kind == LauncherKind::Local && env.rank.is_some();
            if !local {
                env = LauncherEnv {
                    kind: LauncherKind::Manual,
                    ..LauncherEnv::default()
                };
            }
            env.rank = Some(rank);
            env.size = Some(size);
        }
        (Some(_), None) => {
            return Err(LaunchError::Usage(
                "--rank needs --size (or NGAUGE_SIZE) as well".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(LaunchError::Usage(
                "--size needs --rank (or NGAUGE_RANK) as well".into(),
            ))
        }
        (None, None) => {
            if let (Some(rank), Some(size)) = (env.rank, env.size) {
                if size == 0 || rank >= size {
                    return Err(LaunchError::Usage(format!(
                        "the launcher says rank {rank} of {size}, which is not a rank of the job"
                    )));
                }
            }
        }
    }
    Ok(env)
}

/// The job id a launcher gives, or the parent pid when every rank is a child of the
/// same launcher daemon on this host.
fn job_id(env: &LauncherEnv) -> Option<String> {
    env.job_id.clone().or_else(|| {
        (env.single_host() == Some(true) && env.kind != LauncherKind::Manual)
            .then(|| rustix::process::getppid().map(|p| format!("ppid:{}", p.as_raw_nonzero())))
            .flatten()
    })
}

fn derived_addr(env: &LauncherEnv, host: Option<&str>) -> Result<String, LaunchError> {
    let id = job_id(env).ok_or_else(|| {
        LaunchError::Usage(format!(
            "under {} without a job id ngauge cannot agree on a rendezvous: give --rendezvous HOST:PORT and --job-token TOKEN",
            env.kind.describe()
        ))
    })?;
    let port = env::derived_port(&id);
    Ok(match host {
        Some(h) => format!("{h}:{port}"),
        None => format!("127.0.0.1:{port}"),
    })
}

/// Where the other ranks connect (their `--rendezvous`).
fn connect_addr(opts: &LaunchOptions, env: &LauncherEnv) -> Result<String, LaunchError> {
    if let Some(r) = &opts.rendezvous {
        return Ok(r.clone());
    }
    match (env.kind, env.single_host()) {
        (LauncherKind::Manual, _) => Err(LaunchError::Usage(
            "ranks other than 0 started by hand need --rendezvous HOST:PORT (rank 0 prints the command line)".into(),
        )),
        (LauncherKind::Slurm, Some(false)) | (LauncherKind::Slurm, None) => {
            let list = env.nodelist.as_deref().unwrap_or("");
            match hostlist::first(list) {
                Ok(Some(first)) => derived_addr(env, Some(&first)),
                Ok(None) => derived_addr(env, None),
                Err(e) => Err(LaunchError::Usage(format!(
                    "{e}; give --rendezvous HOST:PORT"
                ))),
            }
        }
        (_, Some(false)) => Err(LaunchError::Usage(format!(
            "the ranks run on several hosts under {}: give --rendezvous HOST:PORT naming rank 0's host",
            env.kind.describe()
        ))),
        _ => derived_addr(env, None),
    }
}

/// Where rank 0 listens.
fn listen_addr(opts: &LaunchOptions, env: &LauncherEnv) -> Result<String, LaunchError> {
    if let Some(b) = &opts.bind {
        return Ok(b.clone());
    }
    if let Some(r) = &opts.rendezvous {
        // An address of ours: bind exactly it. A host name: all interfaces, its port.
        if r.parse::<SocketAddr>().is_ok() {
            return Ok(r.clone());
        }
        let port = r.rsplit_once(':').map(|(_, p)| p).unwrap_or("");
        if port.parse::<u16>().is_err() {
            return Err(LaunchError::Usage(format!(
                "--rendezvous {r:?} is not HOST:PORT"
            )));
        }
        return Ok(format!("0.0.0.0:{port}"));
    }
    if env.kind == LauncherKind::Manual {
        return Ok("0.0.0.0:0".into());
    }
    let addr = connect_addr(opts, env)?;
    if env.single_host() == Some(true) || addr.starts_with("127.0.0.1:") {
        Ok(addr)
    } else {
        let port = addr.rsplit_once(':').map_or("0", |(_, p)| p);
        Ok(format!("0.0.0.0:{port}"))
    }
}

fn token_for_leaf(opts: &LaunchOptions, env: &LauncherEnv) -> Result<String, LaunchError> {
    if let Some(t) = &opts.job_token {
        return Ok(t.clone());
    }
    match (env.kind, job_id(env)) {
        (LauncherKind::Manual, _) | (_, None) => Err(LaunchError::Usage(
            "this rank needs --job-token TOKEN (or NGAUGE_JOB_TOKEN): rank 0 prints it when it starts".into(),
        )),
        (_, Some(id)) => Ok(env::job_token(&id)),
    }
}

/// The control channel, this rank's data address, the job table (rank 0; empty
/// elsewhere until [`share_table`]), and the address of rank 0's rendezvous
/// listener (rank 0: the one it listens on).
type Joined = (TcpControl, IpAddr, Vec<Peer>, IpAddr);

/// The cores the liveness thread runs on: those of `before` (the process's cores
/// before it pinned itself) but the one it measures on, or all of them if that is
/// the only one.
pub(super) fn liveness_cores(before: Vec<usize>) -> Vec<usize> {
    let pinned = crate::clock::pinned_core();
    let free: Vec<usize> = before
        .iter()
        .copied()
        .filter(|&c| Some(c) != pinned)
        .collect();
    if free.is_empty() {
        before
    } else {
        free
    }
}

fn start_root(
    opts: &LaunchOptions,
    env: &LauncherEnv,
    size: usize,
    host: &str,
) -> Result<Joined, LaunchError> {
    let listen = listen_addr(opts, env)?;
    let (token, generated) = match (&opts.job_token, env.kind, job_id(env)) {
        (Some(t), _, _) => (t.clone(), false),
        (None, LauncherKind::Manual, _) | (None, _, None) => (local::random_token(), true),
        (None, _, Some(id)) => (env::job_token(&id), false),
    };
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| LaunchError::Usage(format!("cannot use {listen:?} as a listen address: {e}")))?
        .collect();
    let listener = addrs
        .iter()
        .find_map(|a| TcpListener::bind(a).ok())
        .ok_or_else(|| LaunchError::Bind {
            addr: listen.clone(),
            error: addrs
                .first()
                .map(|a| TcpListener::bind(a).err())
                .and_then(|e| e)
                .unwrap_or_else(|| std::io::Error::other("no address")),
        })?;
    let bound = listener
        .local_addr()
        .map_err(LaunchError::io("listener address"))?;
    if std::env::var_os("NGAUGE_ANNOUNCE").is_some() {
        eprintln!("{}{bound}", local::ANNOUNCE);
    }
    if generated && size > 1 {
        let shown = match &opts.rendezvous {
            Some(r) => r.clone(),
            None if bound.ip().is_unspecified() => format!("{host}:{}", bound.port()),
            None => bound.to_string(),
        };
        eprintln!("ngauge: rank 0 listens on {bound}; start the other ranks with:");
        for line in other_ranks_command(size, &shown, &token) {
            eprintln!("  {line}");
        }
    }
    let me = Peer {
        rank: 0,
        data_addr: opts.data_addr.unwrap_or(if bound.ip().is_unspecified() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            bound.ip()
        }),
        host: host.to_string(),
        pid: std::process::id(),
    };
    let expect = Expect {
        size,
        token,
        timeout: opts.timeout,
    };
    let hub = rendezvous::serve(&listener, &expect, me, opts.data_addr.is_some())?;
    drop(listener);
    let data_addr = hub.peers[0].data_addr;
    let control = TcpControl::root(hub.streams, opts.timeout);
    Ok((control, data_addr, hub.peers, bound.ip()))
}

fn start_leaf(
    opts: &LaunchOptions,
    env: &LauncherEnv,
    rank: usize,
    size: usize,
    host: &str,
) -> Result<Joined, LaunchError> {
    let addr = connect_addr(opts, env)?;
    let token = token_for_leaf(opts, env)?;
    let joiner = Joiner {
        addr: &addr,
        rank,
        size,
        token: &token,
        data_addr: opts.data_addr,
        host: host.to_string(),
        timeout: opts.timeout,
    };
    let (stream, data_addr) = joiner.join()?;
    let root_ip = stream
        .peer_addr()
        .map_err(LaunchError::io("rank 0's address"))?;
    let control = TcpControl::leaf(rank, size, stream, opts.timeout);
    Ok((control, data_addr, Vec::new(), root_ip.ip()))
}

/// The job table, from rank 0 (the only rank that holds it after the rendezvous
/// or the PMIx fence) to every rank, down the control tree: rank 0 sends it
/// O(log p) times, not p - 1.
pub(super) fn share_table(
    control: &mut TcpControl,
    peers: Vec<Peer>,
) -> Result<Vec<Peer>, LaunchError> {
    let mut bytes = match control.rank() {
        0 => frame::encode_table(&peers),
        _ => Vec::new(),
    };
    control.broadcast(0, &mut bytes)?;
    match control.rank() {
        0 => Ok(peers),
        _ => frame::decode_table(&bytes, control.size())
            .map_err(|e| LaunchError::Rendezvous(format!("the job table from rank 0: {e}"))),
    }
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The command lines that start ranks 1..size of a job begun by hand: this
/// process's command line with `--rank/--size/--rendezvous/--job-token` replaced.
/// Reads the process's arguments (a launching need: the other ranks run the same
/// command).
pub fn other_ranks_command(size: usize, rendezvous: &str, token: &str) -> Vec<String> {
    let mut args = std::env::args();
    let program = args.next().unwrap_or_else(|| "ngauge".into());
    let rest = strip_job_flags(args.collect());
    let line = |rank: &str| {
        let mut words = vec![
            program.clone(),
            "--rank".into(),
            rank.to_string(),
            "--size".into(),
            size.to_string(),
            "--rendezvous".into(),
            rendezvous.to_string(),
            "--job-token".into(),
            token.to_string(),
        ];
        words.extend(rest.iter().cloned());
        words
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if size <= 9 {
        (1..size).map(|r| line(&r.to_string())).collect()
    } else {
        vec![format!("{}   (R = 1..{})", line("R"), size - 1)]
    }
}

/// Removes the flags that differ between ranks (and their values).
fn strip_job_flags(args: Vec<String>) -> Vec<String> {
    const FLAGS: [&str; 5] = ["--rank", "--size", "--rendezvous", "--job-token", "--bind"];
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if FLAGS.contains(&a.as_str()) {
            skip_value = true;
            continue;
        }
        if FLAGS
            .iter()
            .any(|f| a.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
        {
            continue;
        }
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn opts() -> LaunchOptions {
        LaunchOptions {
            np: 2,
            rank: None,
            size: None,
            rendezvous: None,
            bind: None,
            job_token: None,
            data_addr: None,
            timeout: Duration::from_secs(5),
            verbose: false,
        }
    }

    fn ompi(single: bool) -> LauncherEnv {
        LauncherEnv {
            kind: LauncherKind::OpenMpi,
            rank: Some(1),
            size: Some(4),
            local_rank: Some(1),
            job_id: Some("1218314241".into()),
            local_size: Some(if single { 4 } else { 2 }),
            nodes: None,
            nodelist: None,
        }
    }

    #[test]
    fn ranks_poll_when_they_fit_on_the_cores() {
        use ngauge_transport::WaitMode::{Block, Poll};
        assert_eq!(wait_mode_for(2, 2), Poll);
        assert_eq!(wait_mode_for(1, 8), Poll);
        assert_eq!(wait_mode_for(3, 2), Block);
    }

    #[test]
    fn rank_and_size_flags_are_checked_together() {
        let env = env::detect_from(|_| None);
        let mut o = opts();
        o.rank = Some(1);
        assert!(identify(&o, env.clone()).unwrap_err().is_usage());
        o.size = Some(1);
        assert!(identify(&o, env.clone()).unwrap_err().is_usage());
        o.size = Some(2);
        let e = identify(&o, env).unwrap();
        assert_eq!(
            (e.kind, e.rank, e.size),
            (LauncherKind::Manual, Some(1), Some(2))
        );
        // Flags override a launcher's environment.
        let e = identify(&o, ompi(true)).unwrap();
        assert_eq!(e.kind, LauncherKind::Manual);
    }

    #[test]
    fn one_host_launcher_jobs_derive_address_and_token() {
        let env = ompi(true);
        let port = env::derived_port("1218314241");
        assert_eq!(
            connect_addr(&opts(), &env).unwrap(),
            format!("127.0.0.1:{port}")
        );
        assert_eq!(
            listen_addr(&opts(), &env).unwrap(),
            format!("127.0.0.1:{port}")
        );
        assert_eq!(
            token_for_leaf(&opts(), &env).unwrap(),
            env::job_token("1218314241")
        );
        let mut o = opts();
        o.rendezvous = Some("10.0.0.1:5000".into());
        assert_eq!(connect_addr(&o, &env).unwrap(), "10.0.0.1:5000");
        assert_eq!(listen_addr(&o, &env).unwrap(), "10.0.0.1:5000");
        o.rendezvous = Some("node7:5000".into());
        assert_eq!(listen_addr(&o, &env).unwrap(), "0.0.0.0:5000");
    }

    #[test]
    fn multi_host_needs_rendezvous_except_under_slurm() {
        assert!(connect_addr(&opts(), &ompi(false)).unwrap_err().is_usage());
        let slurm = LauncherEnv {
            kind: LauncherKind::Slurm,
            rank: Some(0),
            size: Some(4),
            local_rank: Some(0),
            job_id: Some("77.0".into()),
            local_size: None,
            nodes: Some(2),
            nodelist: Some("node[01-03,7],gpu-a[1-2]".into()),
        };
        let port = env::derived_port("77.0");
        assert_eq!(
            connect_addr(&opts(), &slurm).unwrap(),
            format!("node01:{port}")
        );
        assert_eq!(
            listen_addr(&opts(), &slurm).unwrap(),
            format!("0.0.0.0:{port}")
        );
    }

    #[test]
    fn manual_leaves_need_rendezvous_and_token() {
        let env = identify(
            &LaunchOptions {
                rank: Some(1),
                size: Some(2),
                ..opts()
            },
            env::detect_from(|_| None),
        )
        .unwrap();
        assert!(connect_addr(&opts(), &env).unwrap_err().is_usage());
        assert!(token_for_leaf(&opts(), &env).unwrap_err().is_usage());
        assert_eq!(listen_addr(&opts(), &env).unwrap(), "0.0.0.0:0");
    }

    #[test]
    fn job_flags_are_stripped_and_words_quoted() {
        let args = [
            "--rank",
            "0",
            "--size=2",
            "info",
            "--json",
            "--job-token",
            "x",
            "--bind=1:2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(strip_job_flags(args), ["info", "--json"]);
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("10.0.0.1:5"), "10.0.0.1:5");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
