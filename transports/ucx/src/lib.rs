//! UCX transport for ngauge: UCP, the layer under today's MPI libraries on
//! InfiniBand and RoCE clusters (MPICH's ch4:ucx, Open MPI's pml ucx), measured
//! directly, with bindings of our own generated against the system's UCX
//! (`build.rs`: bindgen over `ucp/api/ucp.h`, found with pkg-config; no crate
//! that builds a bundled UCX).
//!
//! # Design
//!
//! **The tag API, not active messages.** Two-sided messages are
//! `ucp_tag_send_nbx` and `ucp_tag_recv_nbx` ([`tag`]): it is what MPI over UCX
//! calls (every `MPI_Send` of MPICH's ch4:ucx is one `ucp_tag_send_nbx` of the
//! user's buffer, the MPI envelope in the tag), so `-t mpi,ucx` puts side by side
//! an MPI library and exactly the calls it makes, and the ratio is what the MPI
//! library adds; it is what `ucx_perftest -t tag_lat`/`tag_bw`, the C benchmark
//! `scripts/bench-ucx` compares against, times; and tag matching is the
//! contract's receive (the receiver names the sender and the size, messages
//! match in order, a receive posted early gets the data in place, rendezvous
//! included). Active messages would land in UCX's buffers for a callback, and
//! ngauge would have to add a matching layer of its own that neither UCX nor
//! an MPI library has: a third thing, not the raw layer.
//!
//! **One worker, one endpoint per peer**, connected by worker addresses
//! exchanged over the job's control channel ([`wire`], `Control::allgather`),
//! or with `--ucx-connect sockaddr` through UCX's connection manager (the
//! lower rank of each pair listens, its port goes over the control channel), and
//! exercised once at setup (a message each way per pair), so that connection
//! establishment (TCP's) happens before any timed region and the lanes UCX chose
//! are final when they are recorded ([`facts`]). The transport list is UCX's
//! own (`--ucx-tls`, given to the context as its `TLS` setting), checked first
//! against what UCX offers here ([`tls`]). Errors carry `ucs_status_string`'s
//! text.
//!
//! **Memory UCX allocated.** Buffers are `ucp_mem_map` allocations, made and
//! mapped once when a pattern allocates them, as `ucx_perftest` allocates its
//! buffers: page-aligned, and on shared-memory transports mappable by peers.
//! (A heap buffer that is not page-aligned makes a 64 KiB `cma` rendezvous
//! about 10% slower here.)
//!
//! **Nothing allocated per message.** Requests are the caller-provided kind
//! (`UCP_OP_ATTR_FIELD_REQUEST`): memory of UCP's request size, taken from slots
//! allocated at setup; an operation that completes at once returns `UCS_OK` and
//! gives its slot back.
//!
//! **Waiting**: `--wait poll` spins on `ucp_worker_progress`; `--wait block`
//! sleeps on the worker's event descriptor (`ucp_worker_get_efd`, armed with
//! `ucp_worker_arm`, then `poll(2)`), which the context asks for
//! (`UCP_FEATURE_WAKEUP`) only in that mode, as `ucx_perftest` does.
//!
//! **Two data paths** (`--ucx-op`): `send`, the tag API above; `put`, one-sided
//! `ucp_put_nbx` into a ring each rank mapped at setup and whose remote keys the
//! ranks exchanged with their addresses, the receiver polling a flag ([`ring`];
//! the counterpart of the verbs transport's write-poll path; poll mode only).
//! `ngauge rma` gets a third use of the RMA lanes, `open_window`: a window
//! for put, get and fetch-and-add completed by `ucp_ep_flush_nbx`.
//!
//! **Peers that go away**: a transport that is dropped tells its peers with a
//! tagged goodbye ([`tag::Kind::Close`]), so their operations with it fail
//! naming it; one that dies without a word is named by the timeout (no failure
//! handling mode of UCX works on shared memory: `UCP_ERR_HANDLING_MODE_PEER`
//! leaves no lane to a peer over posix or sysv in UCX 1.13), or by UCX's
//! endpoint error callback where the transport reports one (TCP).
//!
//! The UCX code needs UCX at build time (cargo feature `ucp`); without it this
//! crate is its pure parts and [`probe`] says UCX was not compiled in. Its
//! `unsafe` code is in the `ucp` module.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod facts;
pub mod ring;
pub mod tag;
pub mod tls;
pub mod wire;

#[cfg(feature = "ucp")]
mod ucp;

pub use ngauge_transport::WaitMode;
use std::time::Duration;

/// The data path (`--ucx-op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UcxOp {
    /// Two-sided: `ucp_tag_send_nbx` into a posted `ucp_tag_recv_nbx`.
    Send,
    /// One-sided: `ucp_put_nbx` into the receiver's ring, which it polls.
    Put,
}

impl UcxOp {
    /// `send` or `put`, as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            UcxOp::Send => "send",
            UcxOp::Put => "put",
        }
    }
}

/// How endpoints connect (`--ucx-connect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UcxConnect {
    /// Worker addresses exchanged over the control channel
    /// (`UCP_EP_PARAM_FIELD_REMOTE_ADDRESS`).
    Address,
    /// UCX's client-server mode through a connection manager: the lower rank
    /// of each pair listens (`ucp_listener_create`), the higher one connects
    /// to its socket address (`UCP_EP_PARAMS_FLAGS_CLIENT_SERVER`). RC over
    /// verbs needs it where UD, which address wireup relies on, does not work.
    Sockaddr,
}

impl UcxConnect {
    /// `address` or `sockaddr`, as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            UcxConnect::Address => "address",
            UcxConnect::Sockaddr => "sockaddr",
        }
    }
}

/// How to open the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UcxOptions {
    /// UCX's transport list (`posix,self`, `tcp`, `rc`, ...); `None`: the
    /// environment's `UCX_TLS`, or UCX's default.
    pub tls: Option<String>,
    /// The data path.
    pub op: UcxOp,
    /// Spin on the worker, or sleep on its event descriptor.
    pub wait: WaitMode,
    /// How endpoints connect.
    pub connect: UcxConnect,
    /// The address listeners bind in [`UcxConnect::Sockaddr`] mode; `None`:
    /// the host's first non-loopback IPv4 address, else 127.0.0.1.
    pub listen_ip: Option<std::net::Ipv4Addr>,
    /// How long an operation may make no progress before its peer is declared
    /// lost.
    pub timeout: Duration,
}

impl Default for UcxOptions {
    fn default() -> Self {
        UcxOptions {
            tls: None,
            op: UcxOp::Send,
            wait: WaitMode::Poll,
            connect: UcxConnect::Address,
            listen_ip: None,
            timeout: Duration::from_secs(60),
        }
    }
}

#[cfg(feature = "ucp")]
pub use ucp::{open_window, UcxTransport, UcxWindow};

/// Creates a UCP worker, connects one endpoint to every other rank (collective:
/// every rank of `control` calls it), and returns the connected transport.
///
/// Fails with `TransportError::Unavailable` when UCX cannot run here or the
/// transport list names something UCX does not offer (the reason lists what it
/// offers), and with `TransportError::Setup` when a rank could not set up
/// (every rank learns which).
#[cfg(feature = "ucp")]
pub fn open(
    control: &mut dyn ngauge_transport::Control,
    opts: &UcxOptions,
) -> Result<UcxTransport, ngauge_transport::TransportError> {
    ucp::open(control, opts)
}

/// Checks, without connecting anything, whether UCX runs here with the
/// transport list `tls`: `Ok` with its version and the transports and devices
/// it would use (`UCX 1.13.1: posix/memory, tcp/lo, ...`), or `Err` with the
/// reason the user can act on.
pub fn probe(tls: Option<&str>) -> Result<String, String> {
    #[cfg(feature = "ucp")]
    {
        ucp::probe(tls)
    }
    #[cfg(not(feature = "ucp"))]
    {
        let _ = tls;
        Err("ngauge-ucx was built without its `ucp` feature".into())
    }
}
