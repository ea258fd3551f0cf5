//! Gather schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_gather.c`; Nuriyev, "Model-based selection of
//! optimal MPI broadcast algorithms", sec. 4.1.2 for the algorithms and sec. 4.2.2
//! for how each is implemented).
//!
//! Layout: every rank's `Data` holds `np` blocks of `size` bytes; block `r` is rank
//! `r`'s contribution, and after the gather the root's `Data` holds every block
//! (rank `r`'s own block is its send buffer, so the root gathers in place).
//!
//! - **linear** (sec. 4.2.2.1, `gather_intra_basic_linear`, "linear without
//!   synchronisation"): every rank sends its block to the root, which receives them
//!   one after the other in rank order with blocking receives.
//! - **binomial** (sec. 4.2.2.3, `gather_intra_binomial`): over the in-order
//!   binomial tree ([`crate::coll::topo::in_order_binomial`]) a leaf (odd shifted
//!   rank) sends its block to its parent; an inner node copies its block into a
//!   scratch buffer, receives its children's subtrees behind it one after the other
//!   (blocking receives, smallest subtree first), and sends the lot to its parent
//!   with one blocking send. The root receives straight into `Data` when it is rank
//!   0; otherwise into scratch in shifted order, then rotates the blocks into place
//!   with two copies ("a local data shift operation", sec. 4.1.2).

use super::schedule::{Buf, Builder, Slice};
use super::topo::{self, shifted};
use ngauge_transport::Rank;

/// Linear gather (see the module docs).
pub(crate) fn linear(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    if rank == root {
        let mut last = None;
        for (round, peer) in (0..np).filter(|&p| p != root).enumerate() {
            let block = Slice::new(Buf::Data, peer * size, size);
            last = Some(b.recv(peer, block, round as u32, last));
        }
    } else {
        b.send(root, Slice::new(Buf::Data, rank * size, size), 0, []);
    }
}

/// Binomial gather (see the module docs).
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
    if v % 2 == 1 {
        let parent = t.parent.expect("odd shifted ranks are not the root");
        b.send(parent, own, 0, []);
        return;
    }
    let direct = rank == root && root == 0;
    let into = if direct { Buf::Data } else { Buf::Tmp0 };
    let mut last = if direct {
        None
    } else {
        Some(b.copy(own, Slice::new(Buf::Tmp0, 0, size), 0, []))
    };
    let mut blocks = 1;
    for (round, &child) in t.children.iter().enumerate() {
        let vkid = shifted(child, root, np);
        let count = (vkid - v).min(np - vkid);
        let at = Slice::new(into, blocks * size, count * size);
        last = Some(b.recv(child, at, round as u32, last));
        blocks += count;
    }
    let rounds = t.children.len() as u32;
    match t.parent {
        Some(parent) => {
            b.send(
                parent,
                Slice::new(Buf::Tmp0, 0, blocks * size),
                rounds,
                last,
            );
        }
        None if !direct => {
            // Shifted block j is rank (j + root) % np's: rotate into rank order.
            let tail = (np - root) * size;
            let a = Slice::new(Buf::Tmp0, 0, tail);
            b.copy(a, Slice::new(Buf::Data, root * size, tail), rounds, last);
            let c = Slice::new(Buf::Tmp0, tail, root * size);
            b.copy(c, Slice::new(Buf::Data, 0, root * size), rounds, last);
        }
        None => {}
    }
}
