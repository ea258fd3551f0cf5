//! The contract between ngauge's measurement core and its transports.
//!
//! A *pattern* (ping-pong, PRTT, clock sync, a collective schedule) is written once
//! against two traits and nothing else:
//!
//! - [`Transport`]: the data plane. Blocking and nonblocking point-to-point messages
//!   between ranks, used inside timed regions.
//! - [`Control`]: the control plane. Barrier, broadcast, gather and allgather of small
//!   messages, used *between* timed regions (never inside one) to agree on parameters
//!   and to collect results at rank 0.
//!
//! # Design decisions
//!
//! **Transports own message memory.** InfiniBand verbs can only send from memory that
//! was registered with the device, and registration is far too slow for a timed region.
//! So a pattern asks the transport for buffers up front ([`Transport::alloc_buffer`]),
//! receives a [`BufferId`], and names a [`Region`] of it in every operation. TCP, UDP
//! and MPI keep plain vectors behind the same handles; verbs keeps registered memory
//! regions. Because the transport owns the bytes, a nonblocking operation can keep a
//! buffer busy without any lifetime gymnastics, and touching a busy buffer is a
//! runtime error ([`TransportError::BufferBusy`]) instead of undefined behaviour.
//!
//! **The receiver knows the message size.** Every ngauge pattern knows how large the
//! next message is, so `recv` is posted with the exact size, as in MPI with a matching
//! count. Transports that keep message boundaries (UDP, verbs send/recv, MPI) check it
//! and report [`TransportError::SizeMismatch`]; a byte stream (TCP) sends no header
//! at all, so a 1-byte message costs one byte on the wire, like the C reference
//! ping-pong it is compared with.
//!
//! **Waiting is a property of the transport instance** ([`WaitMode`]): either spin on
//! nonblocking calls (lowest latency when every rank has a core of its own) or sleep
//! in the kernel (needed when ranks outnumber cores). Patterns never spin on their own
//! account; they call [`Transport::wait`].
//!
//! **Errors name the peer and the operation**, so "rank 3 closed the connection during
//! recv" reaches the user instead of "broken pipe".
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod auth;
// Test code: it lives beside the crate's tests (see its module docs).
#[cfg(any(test, feature = "conformance"))]
#[path = "../tests/conformance/mod.rs"]
pub mod conformance;
mod control;
mod error;
#[doc(hidden)]
pub mod forward;
mod handle;
pub mod one_sided;
// Test code, like `conformance`: the deterministic fake for unit tests.
#[cfg(any(test, feature = "conformance"))]
#[path = "../tests/inproc/mod.rs"]
pub mod inproc;
mod pool;
mod transport;
pub mod tree;
pub mod util;

pub use control::{pack, unpack, Control, ControlError};
pub use error::TransportError;
pub use one_sided::OneSided;
pub use pool::{available_memory_bytes, Access, BufferPool, Buffers, Holds};
pub use transport::{
    BufferId, Capabilities, Counters, NativeCollective, NativeRole, Rank, Region, RequestId,
    Transport, TscRead, UnknownWaitMode, WaitMode,
};
