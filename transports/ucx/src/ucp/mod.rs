//! The UCX side: UCP calls through the generated bindings ([`sys`]) and the
//! [`Transport`] implementation on top of them. Every `unsafe` block of the crate
//! is in this module and its children, one job each:
//!
//! - [`context`]: the UCP context and worker, UCX's version and printed facts,
//!   `probe`;
//! - [`memory`]: memory UCX allocated and mapped, the user buffers on it and
//!   the holds pending requests keep;
//! - [`slots`]: the request memory handed to UCX, and the table of requests;
//! - [`connect`]: the address exchange and the endpoints (`open`), the goodbye
//!   and the teardown;
//! - [`listen`]: UCX's client-server connection (listeners, accepting);
//! - [`tagged`]: the two-sided path (`ucp_tag_send_nbx`, `ucp_tag_recv_nbx`);
//! - [`put`]: the one-sided path (`ucp_put_nbx` into the peers' rings);
//! - [`waiting`]: progress, sleeping on the event descriptor, timeouts and peers
//!   that went away;
//! - [`native`]: the timed ping-pong loop and the stream run of the tag path;
//! - [`window`]: one-sided operations on a window for `ngauge rma`.
//!
//! This file holds what they share: the transport's state, the translation of
//! UCX status codes into errors, and the [`Transport`] impl, which dispatches.

#![allow(unsafe_code)]

mod connect;
mod context;
mod listen;
mod memory;
mod native;
mod put;
mod slots;
mod sys;
mod tagged;
mod waiting;
mod window;

pub use connect::open;
pub use context::probe;
pub use window::{open_window, UcxWindow};

use crate::UcxOp;
use ngauge_transport::{
    Access, Buffers, Capabilities, NativeRole, Rank, Region, RequestId, Transport, TransportError,
    WaitMode,
};
use std::cell::Cell;
use std::os::raw::c_void;
use std::time::Duration;

const NAME: &str = "ucx";

/// Why a peer can no longer be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Gone {
    /// It said goodbye (its transport was dropped).
    Closed,
    /// UCX reported its endpoint failed, or an operation with it made no
    /// progress within the timeout: what happened.
    Broken(String),
}

/// What UCX's callbacks tell about a peer (written during progress, on this
/// thread).
#[derive(Debug)]
struct Alert {
    /// The status the endpoint error callback reported; `UCS_OK` while none.
    status: Cell<sys::ucs_status_t>,
    /// Its goodbye arrived.
    goodbye: Cell<bool>,
}

/// One peer: the endpoint to it and whether it is still there.
struct Peer {
    /// Null for this rank, and once the endpoint was closed.
    ep: sys::ucp_ep_h,
    /// The pending receive of its goodbye (request memory), null when none.
    goodbye: *mut c_void,
    gone: Option<Gone>,
}

/// Why a wait ended without its operation.
#[derive(Clone, Copy, Debug)]
enum Stop {
    /// Nothing within the timeout (how long it waited).
    Timeout(Duration),
    /// The peer said goodbye, or UCX reported its endpoint failed.
    Gone,
}

/// Where a request stands.
#[derive(Debug)]
enum State {
    /// UCX holds it: the request memory it was started with.
    Ucx(*mut c_void),
    /// The put path drives it (see [`put`]).
    Ring,
    /// Finished, not yet retired.
    Done(Result<(), TransportError>),
}

/// A pending `isend` or `irecv`.
#[derive(Debug)]
struct Request {
    peer: Rank,
    region: Region,
    access: Access,
    state: State,
}

/// A connected UCX transport (see the crate docs).
pub struct UcxTransport {
    rank: Rank,
    size: usize,
    op: UcxOp,
    wait: WaitMode,
    timeout: Duration,
    peers: Vec<Peer>,
    /// Per peer, what the callbacks reported; a boxed slice, so that the
    /// pointers the callbacks were given stay valid.
    alerts: Box<[Alert]>,
    requests: slots::Table<Request>,
    /// The put path's rings and queues.
    ring: Option<put::Ring>,
    memory: memory::Memory,
    slots: slots::Slots,
    /// Last: the worker and context outlive everything above.
    ctx: context::Context,
}

/// The error of a UCX call that failed with `status`, on the link to `peer`:
/// [`TransportError::PeerClosed`] when the status says the peer is gone,
/// otherwise [`TransportError::Io`] carrying `ucs_status_string`'s text.
fn failed(
    call: &'static str,
    peer: Rank,
    op: &'static str,
    status: sys::ucs_status_t,
) -> TransportError {
    match status {
        sys::UCS_ERR_ENDPOINT_TIMEOUT
        | sys::UCS_ERR_CONNECTION_RESET
        | sys::UCS_ERR_UNREACHABLE
        | sys::UCS_ERR_CANCELED => TransportError::PeerClosed {
            transport: NAME,
            peer,
            op,
        },
        _ => TransportError::Io {
            transport: NAME,
            peer,
            op,
            source: std::io::Error::other(format!("{call}: {}", context::status_text(status))),
        },
    }
}

fn setup_error(reason: impl Into<String>) -> TransportError {
    TransportError::Setup {
        transport: NAME,
        reason: reason.into(),
    }
}

impl UcxTransport {
    #[inline]
    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        ngauge_transport::util::check_peer(NAME, peer, self.rank, self.size)
    }
}

impl Transport for UcxTransport {
    fn name(&self) -> &'static str {
        NAME
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: None,
            may_split: true,
            needs_registered_memory: false,
            checks_message_size: true,
        }
    }

    fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    fn buffers(&self) -> &dyn Buffers {
        &self.memory
    }

    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.memory
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        match self.op {
            UcxOp::Send => self.tag_send(peer, region),
            UcxOp::Put => {
                let id = self.isend(peer, region)?;
                self.wait(id)
            }
        }
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        match self.op {
            UcxOp::Send => self.tag_recv(peer, region),
            UcxOp::Put => {
                let id = self.irecv(peer, region)?;
                self.wait_blocking_recv(id)
            }
        }
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, Access::Read)
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, Access::Write)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        self.known(request)?;
        self.progress_once();
        self.try_retire(request)
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        self.wait_for(request)
    }

    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        self.wait_for_all(requests)
    }

    fn native_round_trips(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        role: NativeRole<'_>,
    ) -> Option<Result<(), TransportError>> {
        self.native_loop(peer, send, recv, role)
    }

    fn native_stream(
        &mut self,
        peer: Rank,
        send: Region,
        recv: Region,
        window: usize,
        messages: usize,
        sender: bool,
    ) -> Option<Result<(), TransportError>> {
        self.native_stream_run(peer, send, recv, window, messages, sender)
    }
}

impl Drop for UcxTransport {
    fn drop(&mut self) {
        self.teardown();
    }
}
