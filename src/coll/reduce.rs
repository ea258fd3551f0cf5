//! Reduce and reduce-scatter schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_reduce.c`, `coll_base_reduce_scatter.c`), with
//! the reduction of [`super::allreduce::reduce_into`].
//!
//! Reduce: the vector is `Data[0..size]` on every rank, summed into the root's
//! `Data` (in place; an inner node's `Data` holds its subtree's partial sum).
//!
//! - **binomial** (`reduce_intra_binomial`): `reduce_generic` over the in-order
//!   binomial tree ([`topo::in_order_binomial`]): a leaf sends its vector to its
//!   parent; an inner node receives its children's partial sums one after the
//!   other, smallest subtree first, into two alternating scratch buffers (the next
//!   receive posted before the reduction of the one before), adds each into its
//!   vector, and sends the sum on. One segment: Open MPI cuts it into segments
//!   only where its decision rules pass a segment size.
//! - **in-order binary** (`reduce_intra_in_order_binary`): `reduce_generic` over
//!   the in-order binary tree ([`topo::in_order_binary`]), rooted at rank `np - 1`
//!   whatever the root; when the root is another rank, rank `np - 1` sends it the
//!   result at the end.
//!
//! Reduce-scatter (equal blocks, `MPI_Reduce_scatter_block`): `Data` holds `np`
//! blocks of `size` bytes on every rank; afterwards block `r` of rank `r`'s `Data`
//! is the sum over ranks of block `r`. Each block is reduced as a vector of its
//! own (a reduction never crosses a block boundary), so the result does not depend
//! on where a word would straddle two blocks.
//!
//! - **ring** (`reduce_scatter_intra_ring`): the reduce-scatter half of the ring
//!   allreduce (`allreduce::ring_reduce_scatter`), started one block
//!   earlier so that rank `r` ends with block `r`.
//! - **recursive halving** (`reduce_scatter_intra_basic_recursivehalving`): with
//!   `2^k` the largest power of two not above `np` and `e = np - 2^k`, the first
//!   `2e` ranks fold in pairs (even rank `2j` sends its whole vector to `2j + 1`,
//!   which adds it and takes part as rank `j`, standing for the blocks of both);
//!   then with `mask = 2^(k-1), ..., 1` each remaining rank keeps the half of its
//!   current block range on its side of the partner `v ^ mask`, sends the other half
//!   to it and adds the half received (receive posted, blocking send, wait,
//!   reduce); at the end every odd rank below `2e` sends its even partner's block.

use super::schedule::{Buf, Builder, Slice, StepId};
use super::topo::{self, Tree};
use ngauge_transport::Rank;

/// Binomial reduce (see the module docs).
pub(crate) fn binomial(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 || np == 1 {
        return;
    }
    generic(b, &topo::in_order_binomial(rank, root, np), size);
}

/// In-order binary reduce (see the module docs).
pub(crate) fn in_order_binary(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 || np == 1 {
        return;
    }
    let io_root = np - 1;
    let tree = topo::in_order_binary(rank, np);
    let last = generic(b, &tree, size);
    let all = Slice::new(Buf::Data, 0, size);
    let round = tree.children.len() as u32 + 2;
    if root != io_root && rank == root {
        b.recv(io_root, all, round, last);
    } else if root != io_root && rank == io_root {
        b.send(root, all, round, last);
    }
}

/// `reduce_generic` of one segment over `t`: returns the step after which this
/// rank is done with its part (its send to the parent, or its last reduction).
fn generic(b: &mut Builder, t: &Tree, size: usize) -> Option<StepId> {
    let all = Slice::new(Buf::Data, 0, size);
    let scratch = |i: usize| {
        let buf = if i % 2 == 0 { Buf::Tmp0 } else { Buf::Tmp1 };
        Slice::new(buf, 0, size)
    };
    let mut reduces: Vec<StepId> = Vec::new();
    let mut recvs: Vec<StepId> = Vec::new();
    for (i, &child) in t.children.iter().enumerate() {
        // The scratch buffer of child `i` is free once child `i - 2` was added.
        let free = i.checked_sub(2).map(|j| reduces[j]);
        recvs.push(b.recv(child, scratch(i), i as u32, free));
        if i >= 1 {
            let r = b.reduce(
                scratch(i - 1),
                all,
                i as u32,
                [recvs[i - 1]].into_iter().chain(reduces.last().copied()),
            );
            reduces.push(r);
        }
    }
    if let Some(&r) = recvs.last() {
        let i = recvs.len() - 1;
        let sum = b.reduce(
            scratch(i),
            all,
            recvs.len() as u32,
            [r].into_iter().chain(reduces.last().copied()),
        );
        reduces.push(sum);
    }
    let last = reduces.last().copied();
    match t.parent {
        Some(parent) => Some(b.send(parent, all, t.children.len() as u32 + 1, last)),
        None => last,
    }
}

/// Ring reduce-scatter (see the module docs).
pub(crate) fn scatter_ring(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    let block = |k: usize| Slice::new(Buf::Data, k * size, size);
    super::allreduce::ring_reduce_scatter(b, rank, np, &block, rank + np - 1);
}

/// Recursive-halving reduce-scatter (see the module docs).
pub(crate) fn scatter_recursive_halving(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    let pof2 = 1usize << (usize::BITS - 1 - np.leading_zeros());
    let extra = np - pof2;
    // Adds `Tmp0` into `Data` over blocks `[from, to)`, one reduction per block.
    let add = |b: &mut Builder, from: usize, to: usize, round: u32, deps: &[StepId]| {
        (from..to)
            .map(|k| {
                let at = |buf| Slice::new(buf, k * size, size);
                b.reduce(at(Buf::Tmp0), at(Buf::Data), round, deps.iter().copied())
            })
            .collect::<Vec<StepId>>()
    };
    let mut last: Vec<StepId> = Vec::new();
    let vrank = if rank < 2 * extra {
        if rank % 2 == 0 {
            last = vec![b.send(rank + 1, Slice::new(Buf::Data, 0, np * size), 0, [])];
            None
        } else {
            let r = b.recv(rank - 1, Slice::new(Buf::Tmp0, 0, np * size), 0, []);
            last = add(b, 0, np, 0, &[r]);
            Some(rank / 2)
        }
    } else {
        Some(rank - extra)
    };
    // Virtual rank `v` stands for real blocks [start(v), start(v + 1)).
    let start = |v: usize| if v < extra { 2 * v } else { v + extra };
    let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
    if let Some(v) = vrank {
        let (mut lo, mut hi) = (0, pof2);
        let mut mask = pof2 >> 1;
        let mut round = 1;
        while mask > 0 {
            let peer = v ^ mask;
            let mid = lo + mask;
            let (keep, give) = if v < peer {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let bytes = |(a, z): (usize, usize)| (start(a) * size, (start(z) - start(a)) * size);
            let (k_at, k_len) = bytes(keep);
            let (g_at, g_len) = bytes(give);
            let r = b.recv(
                real(peer),
                Slice::new(Buf::Tmp0, k_at, k_len),
                round,
                last.iter().copied(),
            );
            let s = b.send(
                real(peer),
                Slice::new(Buf::Data, g_at, g_len),
                round,
                last.iter().copied(),
            );
            last = add(b, start(keep.0), start(keep.1), round, &[r, s]);
            (lo, hi) = keep;
            mask >>= 1;
            round += 1;
        }
    }
    if rank < 2 * extra {
        let round = pof2.trailing_zeros() + 1;
        if rank % 2 == 0 {
            b.recv(
                rank + 1,
                Slice::new(Buf::Data, rank * size, size),
                round,
                last,
            );
        } else {
            b.send(
                rank - 1,
                Slice::new(Buf::Data, (rank - 1) * size, size),
                round,
                last,
            );
        }
    }
}
