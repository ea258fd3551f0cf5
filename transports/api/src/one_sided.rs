//! One-sided communication (remote memory access): the operations `ngauge rma`
//! times, over a window of memory every rank exposes.
//!
//! A transport with one-sided operations opens a [`OneSided`] window beside its
//! [`Transport`](crate::Transport); a pattern starts operations on a peer's window
//! and completes them with [`OneSided::flush`] (passive target: the origin alone
//! decides, as `MPI_Win_flush` or a verbs completion) or [`OneSided::fence`]
//! (active target: a collective epoch end, as `MPI_Win_fence`, where the transport
//! has one).
//!
//! # Design decisions
//!
//! **The window owns the origin and result buffers,** as a transport owns message
//! memory: an operation reads or writes them until its completion, and only the
//! window can tell when that is. The pattern fills the origin buffer with a byte
//! or a double and never borrows it.
//!
//! **The local window memory is read a byte at a time** ([`OneSided::poll_byte`]):
//! a peer writes it with no borrow in sight, so it is never handed out as a slice.

use crate::{Rank, TransportError};

/// A window of `bytes` on every rank, with origin and result buffers as large.
pub trait OneSided {
    /// Bytes of the window on each rank.
    fn window_bytes(&self) -> usize;
    /// Whether [`OneSided::fence`] exists (active-target synchronization).
    fn has_fence(&self) -> bool;
    /// Whether [`OneSided::accumulate_sum_f64`] exists (floating-point atomics).
    fn has_accumulate(&self) -> bool;
    /// Opens a passive-target epoch to every rank (`MPI_Win_lock_all`); a no-op
    /// where every operation is passive.
    fn begin_passive(&mut self) -> Result<(), TransportError>;
    /// Closes it (`MPI_Win_unlock_all`), completing every operation.
    fn end_passive(&mut self) -> Result<(), TransportError>;
    /// Fills the origin buffer with `byte` (refused while operations are pending).
    fn fill_origin(&mut self, byte: u8) -> Result<(), TransportError>;
    /// Fills the origin buffer with the double `value` (for accumulates).
    fn fill_origin_f64(&mut self, value: f64) -> Result<(), TransportError>;
    /// Starts a put of the origin buffer's first `len` bytes to `offset` of
    /// `peer`'s window.
    fn put(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError>;
    /// Starts a get of `len` bytes at `offset` of `peer`'s window into the result
    /// buffer.
    fn get(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError>;
    /// Starts an accumulate (sum) of the origin buffer's first `count` doubles into
    /// `offset` of `peer`'s window.
    fn accumulate_sum_f64(
        &mut self,
        peer: Rank,
        offset: usize,
        count: usize,
    ) -> Result<(), TransportError>;
    /// Starts a fetch-and-add of 1 to the unsigned 64-bit integer at `offset` of
    /// `peer`'s window; the old value lands in the result buffer.
    fn fetch_add_u64(&mut self, peer: Rank, offset: usize) -> Result<(), TransportError>;
    /// Completes every operation started to `peer`, at origin and target.
    fn flush(&mut self, peer: Rank) -> Result<(), TransportError>;
    /// Ends the active-target epoch (collective: every rank calls it), completing
    /// every operation.
    fn fence(&mut self) -> Result<(), TransportError>;
    /// The byte at `offset` of this rank's window, after whatever the transport
    /// needs so that a peer's completed writes show (`MPI_Win_sync`).
    fn poll_byte(&mut self, offset: usize) -> Result<u8, TransportError>;
    /// A copy of `len` bytes at `offset` of this rank's window (data checks, after
    /// the peer completed its writes and a barrier).
    fn local_copy(&self, offset: usize, len: usize) -> Vec<u8>;
    /// The first 8 bytes of the result buffer (the old value of a fetch-and-add),
    /// refused while operations are pending.
    fn result_u64(&self) -> Result<u64, TransportError>;
    /// Releases the window (collective where the transport's free is).
    fn close(self: Box<Self>) -> Result<(), TransportError>;
}
