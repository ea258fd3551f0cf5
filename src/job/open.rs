//! Opening the data transports of a running job: one match arm per transport.

use super::{JobError, JobSpec, OfiSpec, TransportName, UcxSpec, VerbsSpec, WaitPolicy};
use crate::launch::World;
use ngauge_transport::{Transport, WaitMode};
use serde::Serialize;
use std::time::Duration;

/// Test hook: drop every n-th outgoing UDP datagram (loss on loopback). Read from
/// the process environment by [`open`], for the integration tests only.
pub const UDP_DROP_VAR: &str = "NGAUGE_TEST_UDP_DROP_ONE_IN";
/// With [`UDP_DROP_VAR`] = n: drop each datagram with probability 1/n from a
/// generator seeded with this value (and the rank) instead of every n-th.
pub const UDP_DROP_SEED_VAR: &str = "NGAUGE_TEST_UDP_DROP_SEED";

/// A spec's transport settings resolved for one rank: the wait mode decided.
#[derive(Clone, Debug, PartialEq)]
pub struct TransportOptions {
    /// Spin or sleep while waiting.
    pub wait: WaitMode,
    /// `SO_SNDBUF`.
    pub send_buffer_bytes: Option<usize>,
    /// `SO_RCVBUF`.
    pub recv_buffer_bytes: Option<usize>,
    /// How long an operation may make no progress before the peer is declared lost.
    pub timeout: Duration,
    /// Verbs settings.
    pub verbs: VerbsSpec,
    /// ofi settings.
    pub ofi: OfiSpec,
    /// UCX settings.
    pub ucx: UcxSpec,
}

impl TransportOptions {
    /// `spec` on `world`: `auto` waits as the launcher says
    /// ([`World::default_wait_mode`]).
    pub fn new(spec: &JobSpec, world: &World) -> Self {
        TransportOptions {
            wait: match spec.wait {
                WaitPolicy::Poll => WaitMode::Poll,
                WaitPolicy::Block => WaitMode::Block,
                WaitPolicy::Auto => world.default_wait_mode(),
            },
            send_buffer_bytes: spec.send_buffer_bytes,
            recv_buffer_bytes: spec.recv_buffer_bytes,
            timeout: spec.timeout(),
            verbs: spec.verbs.clone(),
            ofi: spec.ofi.clone(),
            ucx: spec.ucx.clone(),
        }
    }
}

/// Something about the job's setup that threatens its figures.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobWarning {
    /// Polling forced with more ranks on this host than cores: spinning ranks steal
    /// the core the rank they wait for needs.
    #[error(
        "wait mode poll with {ranks_on_host} ranks on {cores} cores: spinning ranks delay the \
         peers they wait for"
    )]
    PollOversubscribed {
        /// Ranks on this host.
        ranks_on_host: usize,
        /// Cores they share.
        cores: usize,
    },
}

/// The warning about `wait` on `world`, if any.
pub fn wait_warning(wait: WaitMode, world: &World) -> Option<JobWarning> {
    (wait == WaitMode::Poll && world.ranks_on_host > world.cores_on_host).then_some(
        JobWarning::PollOversubscribed {
            ranks_on_host: world.ranks_on_host,
            cores: world.cores_on_host,
        },
    )
}

/// One connected transport of a job.
pub struct Opened {
    /// Which transport.
    pub name: TransportName,
    /// The connected transport.
    pub transport: Box<dyn Transport>,
    /// Its wait mode.
    pub wait: WaitMode,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("name", &self.name)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// A job's opened transports, and what their setup warns about.
#[derive(Debug)]
pub struct Job {
    /// The transports, in the spec's order.
    pub transports: Vec<Opened>,
    /// Setup warnings (each once).
    pub warnings: Vec<JobWarning>,
}

impl Job {
    /// Opens every transport of `spec` in order (a collective call on every rank).
    /// `adjust` may change the options per transport before it is opened (a pattern
    /// sizing a UDP receive buffer, say).
    pub fn open(
        spec: &JobSpec,
        world: &mut World,
        mut adjust: impl FnMut(TransportName, &mut TransportOptions),
    ) -> Result<Job, JobError> {
        spec.validate()?;
        let mut job = Job {
            transports: Vec::new(),
            warnings: Vec::new(),
        };
        for &name in &spec.transports {
            let mut opts = TransportOptions::new(spec, world);
            if let Some(w) = wait_warning(opts.wait, world) {
                if !job.warnings.contains(&w) {
                    job.warnings.push(w);
                }
            }
            adjust(name, &mut opts);
            let transport = open(name, world, &opts)?;
            job.transports.push(Opened {
                name,
                wait: transport.wait_mode(),
                transport,
            });
        }
        Ok(job)
    }
}

/// Connects `name` among all ranks of `world` (a collective call).
///
/// Reads [`UDP_DROP_VAR`] and [`UDP_DROP_SEED_VAR`] from the process environment
/// (a test hook).
pub fn open(
    name: TransportName,
    world: &mut World,
    opts: &TransportOptions,
) -> Result<Box<dyn Transport>, JobError> {
    let failed = |error| JobError::Open {
        transport: name,
        error,
    };
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
            Box::new(ngauge_tcp::TcpTransport::connect(control, addr, &o).map_err(failed)?)
        }
        TransportName::Udp => {
            let mut o = ngauge_udp::UdpOptions {
                wait: opts.wait,
                send_buffer_bytes: opts.send_buffer_bytes,
                recv_buffer_bytes: opts.recv_buffer_bytes,
                timeout: opts.timeout,
                drop_one_in: test_hook(UDP_DROP_VAR)?,
                drop_seed: test_hook(UDP_DROP_SEED_VAR)?,
                ..ngauge_udp::UdpOptions::default()
            };
            if o.drop_one_in.is_some() {
                o.retransmit_after = Duration::from_millis(5);
            }
            Box::new(ngauge_udp::UdpTransport::connect(control, addr, &o).map_err(failed)?)
        }
        #[cfg(feature = "verbs")]
        TransportName::Verbs => open_verbs(control, opts).map_err(failed)?,
        #[cfg(not(feature = "verbs"))]
        TransportName::Verbs => return Err(not_compiled(TransportName::Verbs)),
        #[cfg(feature = "mpi")]
        TransportName::Mpi => Box::new(
            ngauge_mpi::MpiTransport::connect(control, ngauge_mpi::MpiOptions { wait: opts.wait })
                .map_err(failed)?,
        ),
        #[cfg(not(feature = "mpi"))]
        TransportName::Mpi => return Err(not_compiled(TransportName::Mpi)),
        #[cfg(feature = "ofi")]
        TransportName::Ofi => {
            super::ofi::open(control, &opts.ofi, opts.wait, opts.timeout).map_err(failed)?
        }
        #[cfg(not(feature = "ofi"))]
        TransportName::Ofi => return Err(not_compiled(TransportName::Ofi)),
        #[cfg(feature = "ucx")]
        TransportName::Ucx => open_ucx(control, opts).map_err(failed)?,
        #[cfg(not(feature = "ucx"))]
        TransportName::Ucx => return Err(not_compiled(TransportName::Ucx)),
    };
    Ok(transport)
}

/// The number in the test hook variable `var`, if set.
fn test_hook(var: &'static str) -> Result<Option<u64>, JobError> {
    let parse = |value: String| (value.parse().ok()).ok_or(JobError::TestHook { var, value });
    std::env::var(var).ok().map(parse).transpose()
}

/// The error for a transport this build lacks.
pub fn not_compiled(transport: TransportName) -> JobError {
    JobError::NotCompiled {
        transport,
        needs: match transport {
            TransportName::Mpi => " (needs libopenmpi-dev or libmpich-dev)",
            TransportName::Verbs => " (needs libibverbs-dev, librdmacm-dev and libclang)",
            TransportName::Ofi => " (needs libfabric-dev, pkg-config and libclang)",
            TransportName::Ucx => " (needs libucx-dev, pkg-config and libclang)",
            _ => "",
        },
    }
}

#[cfg(feature = "verbs")]
fn open_verbs(
    control: &mut dyn ngauge_transport::Control,
    opts: &TransportOptions,
) -> Result<Box<dyn Transport>, ngauge_transport::TransportError> {
    let o = ngauge_verbs::VerbsOptions {
        device: opts.verbs.device.clone(),
        port: opts.verbs.port,
        gid_index: opts.verbs.gid_index,
        op: match opts.verbs.op {
            super::VerbsOp::Send => ngauge_verbs::VerbsOp::Send,
            super::VerbsOp::Write => ngauge_verbs::VerbsOp::Write,
            super::VerbsOp::WritePoll => ngauge_verbs::VerbsOp::WritePoll,
        },
        wait: opts.wait,
        timeout: opts.timeout,
        ..ngauge_verbs::VerbsOptions::default()
    };
    Ok(Box::new(ngauge_verbs::open(control, &o)?))
}

#[cfg(feature = "ucx")]
fn open_ucx(
    control: &mut dyn ngauge_transport::Control,
    opts: &TransportOptions,
) -> Result<Box<dyn Transport>, ngauge_transport::TransportError> {
    let o = ngauge_ucx::UcxOptions {
        tls: opts.ucx.tls.clone(),
        op: match opts.ucx.op {
            super::UcxOp::Send => ngauge_ucx::UcxOp::Send,
            super::UcxOp::Put => ngauge_ucx::UcxOp::Put,
        },
        connect: match opts.ucx.connect {
            super::UcxConnect::Address => ngauge_ucx::UcxConnect::Address,
            super::UcxConnect::Sockaddr => ngauge_ucx::UcxConnect::Sockaddr,
        },
        listen_ip: opts.ucx.listen_ip,
        wait: opts.wait,
        timeout: opts.timeout,
    };
    Ok(Box::new(ngauge_ucx::open(control, &o)?))
}
