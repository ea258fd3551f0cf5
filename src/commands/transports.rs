//! Opening a data transport for a rank of a running job: one match arm per transport.

use crate::cli::{GlobalArgs, TransportName, WaitArg};
use anyhow::Context;
use ngauge::clock::{available_cores, parse_cpu_list};
use ngauge::launch::World;
use ngauge::transport::{Transport, WaitMode};
use std::time::Duration;

/// Options every data transport understands.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    /// Spin or sleep while waiting (`--wait`).
    pub wait: WaitMode,
    /// `SO_SNDBUF` (`--sndbuf`).
    pub send_buffer_bytes: Option<usize>,
    /// `SO_RCVBUF` (`--rcvbuf`).
    pub recv_buffer_bytes: Option<usize>,
    /// How long an operation may make no progress before the peer is declared lost
    /// (`--timeout`).
    pub timeout: Duration,
    /// `--device`, `--port`, `--gid-index`, `--verbs-op`.
    pub verbs: crate::cli::VerbsArgs,
}

impl TransportOptions {
    /// The options from the command line; `--wait` defaults to poll when this host's
    /// ranks fit on its cores, block otherwise (spinning ranks that share a core
    /// would steal it from the peer they wait for).
    pub fn new(global: &GlobalArgs, world: &World) -> Self {
        let wait = match global.wait {
            Some(WaitArg::Poll) => WaitMode::Poll,
            Some(WaitArg::Block) => WaitMode::Block,
            None if world.ranks_on_host <= job_cores() => WaitMode::Poll,
            None => WaitMode::Block,
        };
        TransportOptions {
            wait,
            send_buffer_bytes: global.sndbuf,
            recv_buffer_bytes: global.rcvbuf,
            timeout: Duration::from_secs_f64(global.timeout),
            verbs: global.verbs.clone(),
        }
    }
}

impl TransportOptions {
    /// A warning when `--wait poll` was forced with more ranks on this host than
    /// cores: spinning ranks then steal the core the rank they wait for needs.
    pub fn warning(&self, world: &World) -> Option<String> {
        let cores = job_cores();
        (self.wait == WaitMode::Poll && world.ranks_on_host > cores).then(|| {
            format!(
                "--wait poll with {} ranks on {cores} cores: spinning ranks delay the \
                 peers they wait for; use --wait block (the default here)",
                world.ranks_on_host
            )
        })
    }
}

/// Connects `name` among all ranks of `world` (a collective call).
pub fn open(
    name: TransportName,
    world: &mut World,
    opts: &TransportOptions,
) -> anyhow::Result<Box<dyn Transport>> {
    if name == TransportName::Verbs {
        return super::verbs::open(world, opts);
    }
    let control = world.control.as_mut();
    let addr = world.data_addr;
    let transport: Box<dyn Transport> = match name {
        TransportName::Tcp => {
            let o = ngauge_tcp::TcpOptions {
                wait: opts.wait,
                send_buffer_bytes: opts.send_buffer_bytes,
                recv_buffer_bytes: opts.recv_buffer_bytes,
                timeout: opts.timeout,
            };
            Box::new(ngauge_tcp::TcpTransport::connect(control, addr, &o)?)
        }
        TransportName::Udp => {
            let mut o = ngauge_udp::UdpOptions {
                wait: opts.wait,
                send_buffer_bytes: opts.send_buffer_bytes,
                recv_buffer_bytes: opts.recv_buffer_bytes,
                timeout: opts.timeout,
                ..ngauge_udp::UdpOptions::default()
            };
            // Hidden test hook: drop every n-th outgoing datagram (loss on loopback).
            if let Ok(n) = std::env::var("NGAUGE_TEST_UDP_DROP_ONE_IN") {
                o.drop_one_in = Some(n.parse().context("NGAUGE_TEST_UDP_DROP_ONE_IN")?);
                o.retransmit_after = Duration::from_millis(5);
            }
            Box::new(ngauge_udp::UdpTransport::connect(control, addr, &o)?)
        }
        #[cfg(feature = "mpi")]
        TransportName::Mpi => Box::new(ngauge_mpi::MpiTransport::connect(
            control,
            ngauge_mpi::MpiOptions { wait: opts.wait },
        )?),
        other => anyhow::bail!(
            "transport {} is not available in this build",
            other.as_str()
        ),
    };
    Ok(transport)
}

/// Cores the ranks on this host may share: what the local launcher spread them over
/// (it may itself run under `taskset` or in a cpuset), else the host's online CPUs
/// (a pinned rank's own affinity shows only its core).
fn job_cores() -> usize {
    std::env::var(ngauge::launch::local::JOB_CORES_VAR)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(host_cores)
}

/// Cores of this host (online CPUs), not just the ones this pinned rank may use.
fn host_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .map_or_else(available_cores, |cpus| cpus.len().max(1))
}
