//! Known data in, known data out: [`fill`] writes, before a call, bytes that depend
//! on (rank, offset); [`verify`] checks, after it, that every byte the operation
//! defines is what it must be. Bytes a rank is to receive are first filled with the
//! complement of what must arrive, so a step that never wrote them cannot pass, even
//! for a 1-byte message.
//!
//! - broadcast: the root's `Data` is [`pattern`]`(root, offset)`; afterwards every
//!   rank's is.
//! - gather: block `b` of rank `b`'s `Data` is `pattern(b, j)` at byte `j`;
//!   afterwards the root's `Data` has every block, and every rank still its own.
//! - allreduce: rank `r`'s vector is `word(r, i)` at word `i`
//!   ([`contribution`]); afterwards every rank holds the sum over ranks
//!   ([`crate::coll::allreduce::reduce_into`]).
//! - all-to-all and all-to-all-v: byte `x` of rank `i`'s `Data` is `pattern(i, x)`;
//!   afterwards the block from rank `i` in rank `j`'s `Out` is rank `i`'s block for
//!   `j` (at its offset in `i`'s `Data`), and `Data` is unchanged.
//! - reduce: as the allreduce; afterwards the root holds the sum (the others' `Data`
//!   is scratch).
//! - allgather: as the gather; afterwards every rank's `Data` has every block.
//! - scatter: block `b` of the root's `Data` is `pattern(b, j)`; afterwards block
//!   `r` of rank `r`'s is, and the root's are unchanged.
//! - reduce-scatter: block `k` of rank `r`'s `Data` is the vector
//!   [`block_vector`]`(r, k)`; afterwards block `r` of rank `r`'s `Data` is the sum
//!   over ranks of block `r`, each block summed as a vector of its own.
//! - barrier: no data (its tests check that no rank leaves early).

use super::allreduce::{reduce_into, WORD_BYTES};
use super::schedule::Buf;
use super::{CollBuffers, CollSpec, Collective};
use crate::rng::mix;
use ngauge_transport::{Rank, Transport, TransportError};

/// A byte of rank `rank`'s data at `offset`: the low byte of SplitMix64's output
/// for a seed made of both.
pub fn pattern(rank: Rank, offset: usize) -> u8 {
    mix(((rank as u64) << 40) ^ offset as u64) as u8
}

/// Word `index` of rank `rank`'s allreduce vector.
pub fn contribution(rank: Rank, index: usize) -> u64 {
    mix(((rank as u64) << 40) ^ index as u64 ^ 0xA11)
}

/// The first wrong byte after a collective.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rank {rank}: byte {offset} of the {buf} buffer is {got:#04x}, expected {expected:#04x}")]
pub struct DataError {
    /// The rank that holds it.
    pub rank: Rank,
    /// Which buffer (`data`, `out`).
    pub buf: &'static str,
    /// Its offset.
    pub offset: usize,
    /// What it must be.
    pub expected: u8,
    /// What it is.
    pub got: u8,
}

/// The allreduce vector of `rank` (`size` bytes).
fn vector(rank: Rank, size: usize) -> Vec<u8> {
    block_vector(rank, 0, size)
}

/// Block `block` of rank `rank`'s reduce-scatter input (`size` bytes; block 0 is
/// the allreduce vector).
pub fn block_vector(rank: Rank, block: usize, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size.next_multiple_of(WORD_BYTES));
    for i in 0..size.div_ceil(WORD_BYTES) {
        v.extend_from_slice(&contribution(rank, (block << 32) | i).to_le_bytes());
    }
    v.truncate(size);
    v
}

/// The sum over `np` ranks of block `block` of the reduce-scatter input.
fn block_sum(np: usize, block: usize, size: usize) -> Vec<u8> {
    let mut sum = block_vector(0, block, size);
    for r in 1..np {
        reduce_into(&mut sum, &block_vector(r, block, size));
    }
    sum
}

/// The allreduce result for `np` ranks.
pub fn allreduce_result(np: usize, size: usize) -> Vec<u8> {
    block_sum(np, 0, size)
}

/// Writes rank `rank`'s input (and the complement of what it must receive) for
/// `spec` into `bufs`.
pub fn fill(
    spec: &CollSpec,
    rank: Rank,
    t: &mut dyn Transport,
    bufs: &CollBuffers,
) -> Result<(), TransportError> {
    let size = spec.size_bytes;
    let np = spec.np;
    match spec.algorithm.collective() {
        Collective::Bcast => with(t, bufs, Buf::Data, |d| {
            for (o, b) in d.iter_mut().enumerate().take(size) {
                let p = pattern(spec.root, o);
                *b = if rank == spec.root { p } else { !p };
            }
        }),
        Collective::Gather | Collective::Allgather | Collective::Scatter => {
            let scatter = spec.algorithm.collective() == Collective::Scatter;
            with(t, bufs, Buf::Data, |d| {
                for (i, b) in d.iter_mut().enumerate().take(np * size) {
                    let (block, j) = (i / size, i % size);
                    let p = pattern(block, j);
                    let holds = if scatter {
                        rank == spec.root
                    } else {
                        block == rank
                    };
                    *b = if holds { p } else { !p };
                }
            })
        }
        Collective::Allreduce | Collective::Reduce => with(t, bufs, Buf::Data, |d| {
            d[..size].copy_from_slice(&vector(rank, size));
        }),
        Collective::ReduceScatter => with(t, bufs, Buf::Data, |d| {
            for (k, block) in d[..np * size].chunks_exact_mut(size.max(1)).enumerate() {
                block.copy_from_slice(&block_vector(rank, k, size));
            }
        }),
        Collective::Alltoall | Collective::Alltoallv => {
            with(t, bufs, Buf::Data, |d| {
                for (i, b) in d.iter_mut().enumerate().take(exchanged(spec, rank).0) {
                    *b = pattern(rank, i);
                }
            })?;
            with(t, bufs, Buf::Out, |d| {
                for (i, e) in received(spec, rank) {
                    d[i] = !e;
                }
            })
        }
        Collective::Barrier => Ok(()),
    }
}

/// Checks rank `rank`'s buffers after `spec` ran (see the module docs).
pub fn verify(
    spec: &CollSpec,
    rank: Rank,
    t: &dyn Transport,
    bufs: &CollBuffers,
) -> Result<(), super::CollError> {
    let size = spec.size_bytes;
    let np = spec.np;
    let data = bytes(t, bufs, Buf::Data)?;
    let first_wrong = |buf: Buf, got: &[u8], expect: &dyn Fn(usize) -> Option<u8>| {
        for (offset, &g) in got.iter().enumerate() {
            if let Some(e) = expect(offset) {
                if e != g {
                    return Err(DataError {
                        rank,
                        buf: buf.name(),
                        offset,
                        expected: e,
                        got: g,
                    });
                }
            }
        }
        Ok(())
    };
    match spec.algorithm.collective() {
        Collective::Bcast => {
            first_wrong(Buf::Data, &data[..size], &|o| Some(pattern(spec.root, o)))?
        }
        Collective::Gather | Collective::Scatter => {
            first_wrong(Buf::Data, &data[..np * size], &|i| {
                let block = i / size;
                (rank == spec.root || block == rank).then(|| pattern(block, i % size))
            })?
        }
        Collective::Allgather => first_wrong(Buf::Data, &data[..np * size], &|i| {
            Some(pattern(i / size, i % size))
        })?,
        Collective::Allreduce => {
            let sum = allreduce_result(np, size);
            first_wrong(Buf::Data, &data[..size], &|o| Some(sum[o]))?
        }
        Collective::Reduce if rank == spec.root => {
            let sum = allreduce_result(np, size);
            first_wrong(Buf::Data, &data[..size], &|o| Some(sum[o]))?
        }
        Collective::Reduce => {}
        Collective::ReduceScatter => {
            let sum = block_sum(np, rank, size);
            first_wrong(Buf::Data, &data[..np * size], &|i| {
                (i / size == rank).then(|| sum[i % size])
            })?
        }
        Collective::Alltoall | Collective::Alltoallv => {
            let (sent, got) = exchanged(spec, rank);
            first_wrong(Buf::Data, &data[..sent], &|i| Some(pattern(rank, i)))?;
            let mut expected = vec![0; got];
            for (i, e) in received(spec, rank) {
                expected[i] = e;
            }
            let out = bytes(t, bufs, Buf::Out)?;
            first_wrong(Buf::Out, &out[..got], &|i| Some(expected[i]))?
        }
        Collective::Barrier => {}
    }
    Ok(())
}

/// The bytes rank `rank` of an all-to-all(-v) sends and receives in all.
pub(crate) fn exchanged(spec: &CollSpec, rank: Rank) -> (usize, usize) {
    let c = spec.algorithm.counts().unwrap_or(super::Counts::Uniform);
    let np = spec.np;
    let units = (c.send_offset(rank, np), c.recv_offset(np, rank));
    (units.0 * spec.size_bytes, units.1 * spec.size_bytes)
}

/// Every byte rank `rank` of an all-to-all(-v) receives: (offset in `Out`, value).
fn received(spec: &CollSpec, rank: Rank) -> impl Iterator<Item = (usize, u8)> + '_ {
    let c = spec.algorithm.counts().unwrap_or(super::Counts::Uniform);
    let size = spec.size_bytes;
    (0..spec.np).flat_map(move |from| {
        let at = c.recv_offset(from, rank) * size;
        let sent_at = c.send_offset(from, rank) * size;
        (0..c.count(from, rank) * size).map(move |o| (at + o, pattern(from, sent_at + o)))
    })
}

fn with(
    t: &mut dyn Transport,
    bufs: &CollBuffers,
    buf: Buf,
    f: impl FnOnce(&mut [u8]),
) -> Result<(), TransportError> {
    match bufs.id(buf) {
        Some(id) => f(t.buffer_mut(id)?),
        None => f(&mut []),
    }
    Ok(())
}

fn bytes<'t>(
    t: &'t dyn Transport,
    bufs: &CollBuffers,
    buf: Buf,
) -> Result<&'t [u8], TransportError> {
    match bufs.id(buf) {
        Some(id) => t.buffer(id),
        None => Ok(&[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_differ_between_ranks_and_offsets() {
        let same_rank = (0..256)
            .filter(|&o| pattern(3, o) == pattern(3, o + 1))
            .count();
        let other_rank = (0..256).filter(|&o| pattern(3, o) == pattern(4, o)).count();
        // Independent bytes agree 1 time in 256; allow a few.
        assert!(same_rank < 8 && other_rank < 8, "{same_rank} {other_rank}");
    }

    #[test]
    fn allreduce_result_is_the_wrapping_sum() {
        let size = 19;
        let sum = allreduce_result(3, size);
        let w = |r, i| contribution(r, i);
        let word0 = w(0, 0).wrapping_add(w(1, 0)).wrapping_add(w(2, 0));
        assert_eq!(&sum[..8], &word0.to_le_bytes());
        // The tail (bytes 16..19) adds bytewise.
        let tail: Vec<u8> = (0..3)
            .map(|k| (0..3).fold(0u8, |acc, r| acc.wrapping_add(w(r, 2).to_le_bytes()[k])))
            .collect();
        assert_eq!(&sum[16..], &tail[..]);
        assert_eq!(allreduce_result(1, size), vector(0, size));
    }
}
