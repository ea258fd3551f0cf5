//! Scatter schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_scatter.c`).
//!
//! Layout (the gather's, reversed): the root's `Data` holds `np` blocks of `size`
//! bytes, block `r` for rank `r`; afterwards block `r` of rank `r`'s `Data` is it
//! (the root's own block stays in place).
//!
//! - **linear** (`scatter_intra_basic_linear`): the root sends block `r` to every
//!   rank `r` in rank order, one blocking send after the other.
//! - **binomial** (`scatter_intra_binomial`): down the in-order binomial tree
//!   ([`topo::in_order_binomial`], the binomial gather's): the root (after rotating
//!   the blocks into shifted order in scratch when it is not rank 0) and every
//!   inner node send each child its subtree's contiguous blocks, largest subtree
//!   first, with blocking sends; an inner node first receives its own subtree's
//!   blocks into scratch and copies its block out; a leaf receives its block in
//!   place.

use super::schedule::{Buf, Builder, Slice, StepId};
use super::topo::{self, shifted};
use ngauge_transport::Rank;

/// Linear scatter (see the module docs).
pub(crate) fn linear(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    let block = |r: Rank| Slice::new(Buf::Data, r * size, size);
    if rank == root {
        let mut last = None;
        for (round, peer) in (0..np).filter(|&p| p != root).enumerate() {
            last = Some(b.send(peer, block(peer), round as u32, last));
        }
    } else {
        b.recv(root, block(rank), 0, []);
    }
}

/// Binomial scatter (see the module docs).
pub(crate) fn binomial(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    let t = topo::in_order_binomial(rank, root, np);
    let v = shifted(rank, root, np);
    let own = Slice::new(Buf::Data, rank * size, size);
    let tmp = |from: usize, blocks: usize| Slice::new(Buf::Tmp0, from * size, blocks * size);
    let (src, mut last): (Buf, Vec<StepId>) = match t.parent {
        Some(parent) if t.children.is_empty() => {
            b.recv(parent, own, 0, []);
            return;
        }
        Some(parent) => {
            let blocks = (v & v.wrapping_neg()).min(np - v);
            let r = b.recv(parent, tmp(0, blocks), 0, []);
            (Buf::Tmp0, vec![b.copy(tmp(0, 1), own, 0, [r])])
        }
        None if root == 0 => (Buf::Data, Vec::new()),
        None => {
            // Rotate into shifted order: scratch block j is rank (j + root) % np's.
            let head = np - root;
            let data =
                |from: usize, blocks: usize| Slice::new(Buf::Data, from * size, blocks * size);
            let a = b.copy(data(root, head), tmp(0, head), 0, []);
            let c = b.copy(data(0, root), tmp(head, root), 0, []);
            (Buf::Tmp0, vec![a, c])
        }
    };
    for (round, &child) in t.children.iter().rev().enumerate() {
        let vkid = shifted(child, root, np);
        let blocks = (vkid - v).min(np - vkid);
        let from = Slice::new(src, (vkid - v) * size, blocks * size);
        last = vec![b.send(child, from, round as u32 + 1, last)];
    }
}
