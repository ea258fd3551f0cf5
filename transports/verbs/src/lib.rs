//! InfiniBand / RoCE verbs transport for ngauge.
//!
//! One reliable-connected (RC) queue pair per pair of ranks, brought through
//! INIT/RTR/RTS ([`qp`]) with the addresses exchanged over the job's control channel
//! ([`wire`], `Control::allgather`; no rdmacm, no MPI). Message memory is registered
//! when a pattern allocates a buffer, never inside a timed region. Two data paths
//! (`--verbs-op`):
//!
//! - **send**: two-sided, with pre-posted receives. Messages up to
//!   [`layout::EAGER_BYTES`] are sent (inline up to the device's `max_inline_data`)
//!   into receive slots that are always posted, and copied out into the region of
//!   the matching `irecv` (or kept until it is posted). Send credits
//!   ([`layout::Credits`]) keep every message on this queue pair within the
//!   receives the peer has posted: a send without credit waits in the sender's
//!   queue, so a send never finds the receive queue empty, however many messages
//!   are in flight. Larger messages go zero-copy through a second RC queue
//!   pair per peer: `irecv` posts the receive straight into the target region and
//!   then advertises it (clear to send); `isend` waits for that advertisement, so
//!   the receive is always posted before the data arrives (no receiver-not-ready
//!   retries, which soft-RoCE times in scheduler ticks). Messages between one pair
//!   of ranks match in order, as in MPI.
//! - **write**: one-sided. `irecv` advertises the target region (address, rkey,
//!   length; a 20-byte inline send) and `isend` RDMA-writes into the oldest
//!   advertised region *with immediate data*, which completes a pre-posted receive
//!   on the target, so the receiver learns of the arrival from its completion queue.
//!   In a ping-pong the advertisement for the next message travels while the current
//!   one is in flight, so the measured latency is one RDMA write.
//!
//! Completion is detected by polling the completion queue ([`WaitMode::Poll`]) or by
//! sleeping on a completion channel ([`WaitMode::Block`]: `ibv_req_notify_cq`, poll
//! again, then wait for the event), which a rank that shares its core with another
//! needs.
//!
//! The device code needs libibverbs at build time (cargo feature `rdma`); without it
//! this crate is only its pure parts: `open` does not exist and [`probe`] says that
//! verbs was not compiled in. All `unsafe` code of the transport is in the `device` module.
//! ngauge itself (Netgauge's `ib` module is the reference) measures latency as half
//! the ping-pong round trip, `--verbs-op send` against perftest's `ib_send_lat` and
//! `write` against `ib_write_lat`.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod flat;
pub mod layout;
pub mod qp;
pub mod slab;
pub mod wire;

#[cfg(feature = "rdma")]
mod device;

pub use ngauge_transport::WaitMode;
pub use wire::VerbsOp;

use std::time::Duration;

/// How to open the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsOptions {
    /// Device name (`mlx5_0`, `rxe0`); the first device when `None`.
    pub device: Option<String>,
    /// Port number, 1-based.
    pub port: u8,
    /// GID table index for the global route header. `None`: no GRH on InfiniBand,
    /// and on RoCE a RoCE v2 GID over IPv4 if there is one (by the GID type the
    /// kernel lists in sysfs; see [`qp::choose_roce_gid`]).
    pub gid_index: Option<u8>,
    /// Data path.
    pub op: VerbsOp,
    /// Poll the completion queue, or sleep on the completion channel.
    pub wait: WaitMode,
    /// How long an operation may see no completion at all before the peer is
    /// declared lost.
    pub timeout: Duration,
    /// Send and receive queue depth per connection (clamped to the device limit).
    pub queue_depth: u32,
    /// Largest inline send to ask for; the device may grant less (the granted value
    /// is what is used).
    pub max_inline: u32,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        VerbsOptions {
            device: None,
            port: 1,
            gid_index: None,
            op: VerbsOp::Send,
            wait: WaitMode::Poll,
            timeout: Duration::from_secs(60),
            queue_depth: 128,
            max_inline: 256,
        }
    }
}

#[cfg(feature = "rdma")]
pub use device::{VerbsTransport, VerbsWindow};

/// Opens the device, connects one RC queue pair to every other rank (collective:
/// every rank of `control` calls it), and returns the connected transport.
///
/// Fails with `TransportError::Unavailable` when there is no usable device (the
/// reason says why, e.g. the kernel's missing RDMA support), and with
/// `TransportError::Setup` when a rank could not set up (every rank learns which).
#[cfg(feature = "rdma")]
pub fn open(
    control: &mut dyn ngauge_transport::Control,
    opts: &VerbsOptions,
) -> Result<VerbsTransport, ngauge_transport::TransportError> {
    device::open(control, opts)
}

/// Opens a transport (collective, as [`open`]) and a one-sided window of `bytes`
/// on every rank for `ngauge rma` (RDMA write, read and fetch-and-add on the same
/// queue pairs; see `ngauge_transport::OneSided`). Fails as [`open`] does, and
/// with `TransportError::Setup` when a rank could not register its window.
#[cfg(feature = "rdma")]
pub fn open_window(
    control: &mut dyn ngauge_transport::Control,
    opts: &VerbsOptions,
    bytes: usize,
) -> Result<VerbsWindow, ngauge_transport::TransportError> {
    device::open_window(control, opts, bytes)
}

#[cfg(not(feature = "rdma"))]
const NOT_COMPILED: &str = "ngauge-verbs was built without its `rdma` feature";

/// Checks, without connecting anything, whether a device and an active port are
/// there: `Ok` with a description (`rxe0 port 1: active, Ethernet (RoCE), GID index
/// 1, max inline ...`) or `Err` with the reason the user can act on.
pub fn probe(device: Option<&str>, port: u8) -> Result<String, String> {
    #[cfg(feature = "rdma")]
    {
        device::probe(device, port)
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = (device, port);
        Err(NOT_COMPILED.into())
    }
}
