//! Allreduce schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_allreduce.c`), and the reduction they compute.
//!
//! The vector is `Data[0..size]` on every rank, reduced in place with
//! [`reduce_into`]: element-wise wrapping addition of little-endian `u64` words; a
//! final partial word (`size % 8` bytes) is added byte by byte (wrapping `u8`).
//! Every slice the schedules reduce starts on a word boundary, so the result does
//! not depend on how the vector was cut. Wrapping addition is exact, associative and
//! commutative, so every algorithm must produce the same bytes, and a test knows
//! them.
//!
//! - **recursive doubling** (`allreduce_intra_recursivedoubling`): with `2^k` the
//!   largest power of two not above `np` and `e = np - 2^k`, the first `2e` ranks
//!   fold in pairs (even rank `2j` sends its vector to `2j + 1`, which adds it and
//!   takes part as rank `j`; the others take part as `rank - e`); then in round `i`
//!   each remaining rank swaps its vector with the rank whose number differs in bit
//!   `i` and adds it (receive posted, blocking send, wait, reduce); at the end every
//!   odd rank below `2e` sends the result back to its even partner.
//! - **ring** (`allreduce_intra_ring`): the vector is cut into `np` blocks of whole
//!   words (the first `n % np` one word longer); a reduce-scatter in `np - 1` steps
//!   (rank `r` sends block `r`, then each step adds the block that arrived from the
//!   left into its own copy and sends it right, with two scratch buffers so that the
//!   next receive is posted before the reduction) leaves rank `r` with the sum of
//!   block `r + 1`; an allgather in `np - 1` steps (receive posted, blocking send,
//!   wait) hands the sums around. With fewer words than ranks Open MPI uses recursive
//!   doubling instead, and so do we.

use super::schedule::{Buf, Builder, Slice, StepId};
use ngauge_transport::Rank;

/// Bytes per element of the reduction.
pub const WORD_BYTES: usize = 8;

/// `acc = acc + operand`, element-wise (see the module docs).
///
/// # Panics
///
/// If the slices differ in length.
pub fn reduce_into(acc: &mut [u8], operand: &[u8]) {
    assert_eq!(acc.len(), operand.len(), "reduction of unequal slices");
    let mut a = acc.chunks_exact_mut(WORD_BYTES);
    let mut o = operand.chunks_exact(WORD_BYTES);
    for (x, y) in (&mut a).zip(&mut o) {
        let sum = word(x).wrapping_add(word(y));
        x.copy_from_slice(&sum.to_le_bytes());
    }
    for (x, y) in a.into_remainder().iter_mut().zip(o.remainder()) {
        *x = x.wrapping_add(*y);
    }
}

fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("a whole word"))
}

/// Recursive doubling (see the module docs).
pub(crate) fn recursive_doubling(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 || np == 1 {
        return;
    }
    let all = Slice::new(Buf::Data, 0, size);
    let tmp = Slice::new(Buf::Tmp0, 0, size);
    let adj = 1usize << (usize::BITS - 1 - np.leading_zeros());
    let extra = np - adj;
    let mut last: Option<StepId> = None;
    let newrank = if rank < 2 * extra {
        if rank % 2 == 0 {
            last = Some(b.send(rank + 1, all, 0, []));
            None
        } else {
            let r = b.recv(rank - 1, tmp, 0, []);
            last = Some(b.reduce(tmp, all, 0, [r]));
            Some(rank / 2)
        }
    } else {
        Some(rank - extra)
    };
    let rounds = adj.trailing_zeros();
    if let Some(newrank) = newrank {
        for round in 1..=rounds {
            let newremote = newrank ^ (1 << (round - 1));
            let remote = if newremote < extra {
                newremote * 2 + 1
            } else {
                newremote + extra
            };
            let r = b.recv(remote, tmp, round, last);
            let s = b.send(remote, all, round, last);
            last = Some(b.reduce(tmp, all, round, [r, s]));
        }
    }
    if rank < 2 * extra {
        if rank % 2 == 0 {
            b.recv(rank + 1, all, rounds + 1, last);
        } else {
            b.send(rank - 1, all, rounds + 1, last);
        }
    }
}

/// Ring (see the module docs).
pub(crate) fn ring(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 || np == 1 {
        return;
    }
    let words = size.div_ceil(WORD_BYTES);
    if words < np {
        return recursive_doubling(b, rank, np, size);
    }
    // COLL_BASE_COMPUTE_BLOCKCOUNT: the first `words % np` blocks get a word more.
    let (late, split) = (words / np, words % np);
    let early = if split != 0 { late + 1 } else { late };
    let block = |k: usize| -> Slice {
        let (start, count) = if k < split {
            (k * early, early)
        } else {
            (k * late + split, late)
        };
        let from = start * WORD_BYTES;
        let to = ((start + count) * WORD_BYTES).min(size);
        Slice::new(Buf::Data, from, to - from)
    };
    let last = ring_reduce_scatter(b, rank, np, &block, rank);
    ring_allgather(b, rank, np, &block, rank + 1, np as u32, Some(last));
}

/// The ring reduce-scatter of `allreduce_intra_ring` (and of
/// `reduce_scatter_intra_ring`): with `block(k)` the `k`-th of `np` blocks (any
/// index, taken modulo `np`), rank `rank` first sends block `first`, then in each of
/// `np - 2` steps adds the block that arrived from the left into its own copy of
/// it and sends that right; its last reduction completes block `first + 1`, whose
/// step it returns. Two scratch buffers let the next receive be posted before the
/// reduction. Needs `np >= 2`.
pub(crate) fn ring_reduce_scatter(
    b: &mut Builder,
    rank: Rank,
    np: usize,
    block: &dyn Fn(usize) -> Slice,
    first: usize,
) -> StepId {
    let block = |k: usize| block(k % np);
    let scratch = |i: usize, len: usize| {
        let buf = if i == 0 { Buf::Tmp0 } else { Buf::Tmp1 };
        Slice::new(buf, 0, len)
    };
    let (right, left) = ((rank + 1) % np, (rank + np - 1) % np);
    let mut inbi = 0;
    let incoming = block(first + np - 1);
    let mut recv = b.recv(left, scratch(0, incoming.len), 0, []);
    let mut send = b.send(right, block(first), 0, []);
    for k in 2..np {
        let prev = block(first + np - k + 1);
        inbi ^= 1;
        let incoming = block(first + np - k);
        let step = (k - 1) as u32;
        let next = b.recv(left, scratch(inbi, incoming.len), step, [send]);
        let sum = b.reduce(scratch(inbi ^ 1, prev.len), prev, step, [recv, send]);
        send = b.send(right, prev, step, [sum]);
        recv = next;
    }
    let mine = block(first + 1);
    b.reduce(scratch(inbi, mine.len), mine, (np - 1) as u32, [recv, send])
}

/// The ring allgather (`allgather_intra_ring`, and the second half of
/// `allreduce_intra_ring`): in step `k = 0..np-1` rank `rank` sends block
/// `first - k` right and receives block `first - k - 1` from the left (receive
/// posted, blocking send, wait), each step after the one before (`prev` for the
/// first; rounds numbered from `round0`).
pub(crate) fn ring_allgather(
    b: &mut Builder,
    rank: Rank,
    np: usize,
    block: &dyn Fn(usize) -> Slice,
    first: usize,
    round0: u32,
    after: Option<StepId>,
) {
    let block = |k: usize| block(k % np);
    let mut prev: Vec<StepId> = after.into_iter().collect();
    let (right, left) = ((rank + 1) % np, (rank + np - 1) % np);
    for k in 0..np - 1 {
        let step = round0 + k as u32;
        let r = b.recv(left, block(first + 2 * np - k - 1), step, prev.clone());
        let s = b.send(right, block(first + np - k), step, prev);
        prev = vec![r, s];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_and_the_tail_adds_bytewise() {
        let mut acc = Vec::new();
        acc.extend_from_slice(&u64::MAX.to_le_bytes());
        acc.extend_from_slice(&[0xff, 0x01, 0x80]);
        let mut op = Vec::new();
        op.extend_from_slice(&2u64.to_le_bytes());
        op.extend_from_slice(&[0x01, 0xff, 0x80]);
        reduce_into(&mut acc, &op);
        assert_eq!(&acc[..8], &1u64.to_le_bytes());
        // Bytewise: no carry from 0xff + 0x01 into the next byte.
        assert_eq!(&acc[8..], &[0x00, 0x00, 0x00]);
    }

    #[test]
    fn cutting_on_word_boundaries_does_not_change_the_sum() {
        let a: Vec<u8> = (0..29u8).map(|i| i.wrapping_mul(97)).collect();
        let o: Vec<u8> = (0..29u8).map(|i| 255 - i.wrapping_mul(13)).collect();
        let mut whole = a.clone();
        reduce_into(&mut whole, &o);
        let mut parts = a.clone();
        for r in [0..8, 8..24, 24..29] {
            reduce_into(&mut parts[r.clone()], &o[r]);
        }
        assert_eq!(whole, parts);
    }

    #[test]
    #[should_panic(expected = "unequal")]
    fn unequal_slices_panic() {
        reduce_into(&mut [0u8; 3], &[0u8; 2]);
    }
}
