//! Opening the data transport a command measures (`--transport`). Each transport
//! owner adds its match arm here.

use crate::cli::{GlobalArgs, TransportName};
use ngauge::launch::World;
use ngauge_transport::{Transport, WaitMode};
use std::time::Duration;

/// How every transport of a run is set up.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    /// Spin or sleep while waiting for the data plane.
    pub wait: WaitMode,
    /// How long an operation may make no progress before the peer is declared lost.
    pub timeout: Duration,
}

impl TransportOptions {
    /// The defaults for this rank: poll when every rank on this host has a core of
    /// its own, block otherwise (so co-located ranks are not starved).
    pub fn for_world(global: &GlobalArgs, world: &World) -> Self {
        // Not `available_cores()`: a pinned rank's affinity mask holds one core, but
        // the question is whether the host has a core for every rank.
        let cores = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|list| ngauge::clock::parse_cpu_list(list.trim()))
            .map_or_else(ngauge::clock::available_cores, |c| c.len());
        TransportOptions {
            wait: if world.ranks_on_host <= cores {
                WaitMode::Poll
            } else {
                WaitMode::Block
            },
            timeout: Duration::from_secs_f64(global.timeout),
        }
    }
}

/// Connects `name` among all ranks of `world` (a collective call).
pub fn open(
    name: TransportName,
    world: &mut World,
    opts: &TransportOptions,
) -> anyhow::Result<Box<dyn Transport>> {
    match name {
        TransportName::Tcp => {
            let tcp = ngauge_tcp::TcpOptions {
                wait: opts.wait,
                timeout: opts.timeout,
                ..ngauge_tcp::TcpOptions::default()
            };
            Ok(Box::new(ngauge_tcp::TcpTransport::connect(
                world.control.as_mut(),
                world.data_addr,
                &tcp,
            )?))
        }
        TransportName::Udp => {
            let udp = ngauge_udp::UdpOptions {
                wait: opts.wait,
                timeout: opts.timeout,
                ..ngauge_udp::UdpOptions::default()
            };
            Ok(Box::new(ngauge_udp::UdpTransport::connect(
                world.control.as_mut(),
                world.data_addr,
                &udp,
            )?))
        }
        other => Err(crate::UsageError(format!(
            "transport {} is not built into this ngauge (see `ngauge info`)",
            other.as_str()
        ))
        .into()),
    }
}
