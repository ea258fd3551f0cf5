//! One-sided communication (remote memory access): the operations `ngauge rma`
//! times, over a window of memory every rank exposes.
//!
//! A transport with one-sided operations opens a [`OneSided`] window beside its
//! [`Transport`]; a pattern starts operations on a peer's window
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
//!
//! **What every window does alike lives here:** the exchange of window keys at
//! opening ([`exchange_keys`]) and the barrier of a fence over the data plane
//! ([`fence_barrier`]).

use crate::util::setup_error;
use crate::{BufferId, Control, Rank, Region, Transport, TransportError};

/// A window of `bytes` on every rank, with origin and result buffers as large.
pub trait OneSided {
    /// Bytes of the window on each rank.
    fn window_bytes(&self) -> usize;
    /// Whether [`OneSided::fence`] exists (active-target synchronization).
    fn has_fence(&self) -> bool;
    /// Whether [`OneSided::accumulate_sum_f64`] exists (floating-point atomics).
    fn has_accumulate(&self) -> bool;
    /// Opens a passive-target epoch to every rank (`MPI_Win_lock_all`); a no-op
    /// (the default) where every operation is passive.
    fn begin_passive(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
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
    /// The byte at `offset` of this rank's window as it is (a volatile load: a
    /// peer may be writing it); panics outside the window.
    fn local_byte(&self, offset: usize) -> u8;
    /// A copy of `len` bytes at `offset` of this rank's window (data checks, after
    /// the peer completed its writes and a barrier).
    fn local_copy(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset + len <= self.window_bytes(), "outside the window");
        (offset..offset + len).map(|i| self.local_byte(i)).collect()
    }
    /// The first 8 bytes of the result buffer (the old value of a fetch-and-add),
    /// refused while operations are pending.
    fn result_u64(&self) -> Result<u64, TransportError>;
    /// Releases the window (collective where the transport's free is).
    fn close(self: Box<Self>) -> Result<(), TransportError>;
}

/// Every rank's window key, exchanged over `control` (collective) when the
/// windows of `transport` open: each rank publishes 1 and its key (`mine`), or 0
/// and why it has no window, so that no rank waits for one that failed; `parse`
/// reads a key (`None`: malformed).
///
/// # Errors
/// [`TransportError::Setup`]: the control plane failed, or a rank has no window
/// (naming it and its reason) or published a malformed key.
pub fn exchange_keys<K>(
    control: &mut dyn Control,
    transport: &'static str,
    mine: Result<&[u8], &str>,
    parse: impl Fn(&[u8]) -> Option<K>,
) -> Result<Vec<K>, TransportError> {
    let published = match mine {
        Ok(key) => [&[1u8][..], key].concat(),
        Err(reason) => [&[0u8][..], reason.as_bytes()].concat(),
    };
    let all = control
        .allgather(&published)
        .map_err(|e| setup_error(transport, format!("exchanging window keys: {e}")))?;
    let read = |(peer, word): (usize, &Vec<u8>)| match word.split_first() {
        Some((&1, key)) => {
            parse(key).ok_or_else(|| format!("rank {peer} published a bad window key"))
        }
        Some((&0, reason)) => Err(format!(
            "rank {peer} has no window: {}",
            String::from_utf8_lossy(reason)
        )),
        _ => Err(format!("rank {peer} published a bad window key")),
    };
    all.iter()
        .enumerate()
        .map(read)
        .collect::<Result<_, _>>()
        .map_err(|reason| setup_error(transport, reason))
}

/// The barrier of a fence over `t`'s data plane, where the fence is timed and so
/// may not use the control channel: dissemination, ceil(log2 p) rounds of 1-byte
/// messages, byte 0 of `token` sent and byte 1 received (both rounds' messages
/// of a pair go in order).
///
/// # Errors
/// A send or receive of a round failed.
pub fn fence_barrier(t: &mut dyn Transport, token: BufferId) -> Result<(), TransportError> {
    let (rank, size) = (t.rank(), t.size());
    let byte = |offset| Region {
        buffer: token,
        offset,
        len: 1,
    };
    let mut step = 1;
    while step < size {
        let r = t.irecv((rank + size - step) % size, byte(1))?;
        let s = t.isend((rank + step) % size, byte(0))?;
        t.wait(s)?;
        t.wait(r)?;
        step *= 2;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inproc;

    /// Runs `f` on every rank of an in-process world of `n`, in threads.
    fn on_ranks<T: Send + 'static>(
        n: usize,
        f: impl Fn(inproc::InprocTransport, inproc::InprocControl) -> T + Send + Clone + 'static,
    ) -> Vec<T> {
        let threads: Vec<_> = inproc::world(n)
            .into_iter()
            .map(|(t, c)| {
                let f = f.clone();
                std::thread::spawn(move || f(t, c))
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn every_rank_gets_every_key_in_rank_order() {
        let keys = on_ranks(3, |_, mut c| {
            let mine = [c.rank() as u8; 4];
            exchange_keys(&mut c, "test", Ok(&mine), |k| (k.len() == 4).then(|| k[0])).unwrap()
        });
        assert!(keys.iter().all(|k| k == &[0, 1, 2]), "{keys:?}");
    }

    #[test]
    fn a_rank_without_a_window_is_named_by_every_rank() {
        let errors = on_ranks(3, |_, mut c| {
            let mine: Result<&[u8], &str> = if c.rank() == 1 {
                Err("no memory")
            } else {
                Ok(&[7])
            };
            exchange_keys(&mut c, "test", mine, |k| Some(k.to_vec()))
                .unwrap_err()
                .to_string()
        });
        for e in errors {
            assert!(e.contains("rank 1 has no window: no memory"), "{e}");
        }
    }

    #[test]
    fn a_malformed_key_is_named() {
        let errors = on_ranks(2, |_, mut c| {
            let mine = vec![0u8; 1 + c.rank()];
            exchange_keys(&mut c, "test", Ok(&mine), |k| (k.len() == 1).then_some(()))
                .unwrap_err()
                .to_string()
        });
        assert!(errors
            .iter()
            .all(|e| e.contains("rank 1 published a bad window key")));
    }

    #[test]
    fn the_fence_barrier_completes_on_every_size_and_repeats() {
        for n in 1..=5 {
            on_ranks(n, |mut t, _| {
                let token = t.alloc_buffer(2).unwrap();
                for _ in 0..3 {
                    fence_barrier(&mut t, token).unwrap();
                }
            });
        }
    }
}
