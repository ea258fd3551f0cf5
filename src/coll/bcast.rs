//! Broadcast schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_bcast.c`; Nuriyev, "Model-based selection of
//! optimal MPI broadcast algorithms", sec. 4.1.1 for the algorithms and sec. 4.2.1
//! for how each is implemented, Algorithms 1 and 2).
//!
//! The message is `Data[0..size]` on every rank; the root's is sent.
//!
//! - **linear** (sec. 4.2.1.1, `bcast_intra_basic_linear`): the root posts one send
//!   of the whole message per rank, in rank order, all at once; the others receive.
//!   (The thesis describes blocking sends, Open MPI's code posts them all.)
//! - **binomial, binary, chain, k-chain** (sec. 4.2.1.2, .5, .3, .6; Algorithm 1,
//!   `bcast_intra_generic`) are one pipelined tree broadcast over different trees
//!   ([`crate::coll::topo`]): the message is cut into segments; the root sends
//!   segment `i` to all children at once and waits for those sends before segment
//!   `i + 1`; an inner node keeps two receives from its parent posted, forwards
//!   segment `i` to all children once it arrived and waits for those sends before
//!   the next; a leaf keeps two receives posted.
//! - **split-binary** (sec. 4.2.1.4, `bcast_intra_split_bintree`): the message is
//!   split into halves (the first one byte longer when the size is odd); the root
//!   sends the first half down the left subtree of the binary tree (odd shifted
//!   ranks) and the second down the right (even), segment by segment with blocking
//!   sends; then every rank swaps halves with its pair in the other subtree
//!   (shifted ranks `2j - 1` and `2j`); with an even number of ranks the last rank
//!   has no pair and gets the second half from the root. Too small a message to
//!   split (a half empty or shorter than a segment) falls back to the chain, as in
//!   Open MPI.

use super::schedule::{segments, Buf, Builder, Slice, StepId};
use super::topo::{self, shifted, unshifted, Tree};
use ngauge_transport::Rank;

/// Linear broadcast (see the module docs).
pub(crate) fn linear(b: &mut Builder, rank: Rank, np: usize, root: Rank, size: usize) {
    if size == 0 || np == 1 {
        return;
    }
    let all = Slice::new(Buf::Data, 0, size);
    if rank == root {
        for peer in (0..np).filter(|&p| p != root) {
            b.send(peer, all, 0, []);
        }
    } else {
        b.recv(root, all, 0, []);
    }
}

/// The pipelined tree broadcast of Open MPI's `bcast_intra_generic` (Nuriyev,
/// Algorithm 1) over `tree`, for `Data[offset..offset + len]` cut into `segment`-byte
/// segments.
pub(crate) fn tree(b: &mut Builder, tree: &Tree, offset: usize, len: usize, segment: usize) {
    if len == 0 || (tree.parent.is_none() && tree.children.is_empty()) {
        return;
    }
    let segs: Vec<Slice> = segments(offset, len, segment)
        .map(|r| Slice::new(Buf::Data, r.start, r.len()))
        .collect();
    // Sends of the previous segment, which the next sends (and receives) wait for.
    let mut sent: Vec<StepId> = Vec::new();
    let forward = |b: &mut Builder, i: usize, after: &mut Vec<StepId>, deps: &[StepId]| {
        let ids: Vec<StepId> = tree
            .children
            .iter()
            .map(|&c| b.send(c, segs[i], i as u32, deps.iter().copied()))
            .collect();
        *after = ids;
    };
    match tree.parent {
        None => {
            // Root: isend segment i to every child, wait for all, next segment.
            for i in 0..segs.len() {
                let deps = sent.clone();
                forward(b, i, &mut sent, &deps);
            }
        }
        Some(parent) if !tree.children.is_empty() => {
            // Inner node: irecv 0; for i in 1..n { irecv i; wait i - 1; isend i - 1
            // to all; waitall } then wait n - 1, isend it, waitall.
            let mut recvs = vec![b.recv(parent, segs[0], 0, [])];
            for i in 1..segs.len() {
                recvs.push(b.recv(parent, segs[i], i as u32, sent.iter().copied()));
                let mut deps = sent.clone();
                deps.push(recvs[i - 1]);
                forward(b, i - 1, &mut sent, &deps);
            }
            let last = segs.len() - 1;
            let mut deps = sent.clone();
            deps.push(recvs[last]);
            forward(b, last, &mut sent, &deps);
        }
        Some(parent) => {
            // Leaf: two receives in flight, each posted once the one two back is in.
            let mut recvs: Vec<StepId> = Vec::with_capacity(segs.len());
            for (i, &seg) in segs.iter().enumerate() {
                let deps = i.checked_sub(2).map(|j| recvs[j]);
                recvs.push(b.recv(parent, seg, i as u32, deps));
            }
        }
    }
}

/// Split-binary broadcast (see the module docs).
pub(crate) fn split_binary(
    b: &mut Builder,
    rank: Rank,
    np: usize,
    root: Rank,
    size: usize,
    segment: usize,
) {
    if size == 0 || np == 1 {
        return;
    }
    let halves = [
        (0, size.div_ceil(2)),
        (size.div_ceil(2), size - size.div_ceil(2)),
    ];
    if halves[1].1 == 0 || segment > halves[0].1 || segment > halves[1].1 {
        // Open MPI: "the message is too small to be split into segments", so it
        // calls the chain broadcast with one chain.
        return tree(b, &topo::chain(1, rank, root, np), 0, size, segment);
    }
    let t = topo::kary(2, rank, root, np);
    let s = shifted(rank, root, np);
    // Left (0) is the subtree of shifted rank 1 (odd ranks); the root counts as right.
    let lr = (s + 1) % 2;
    let half = |i: usize| Slice::new(Buf::Data, halves[i].0, halves[i].1);
    let segs = |i: usize| -> Vec<Slice> {
        segments(halves[i].0, halves[i].1, segment)
            .map(|r| Slice::new(Buf::Data, r.start, r.len()))
            .collect()
    };
    // Phase 1, blocking sends and receives: each step waits for the previous one.
    let mut last: Option<StepId> = None;
    match t.parent {
        None => {
            let segs = [segs(0), segs(1)];
            for i in 0..segs[0].len() {
                for (child, segs) in t.children.iter().zip(&segs) {
                    if let Some(&seg) = segs.get(i) {
                        last = Some(b.send(*child, seg, i as u32, last));
                    }
                }
            }
        }
        Some(parent) if !t.children.is_empty() => {
            // irecv 0; for i in 1..n { irecv i; wait i - 1; send i - 1 to each
            // child } then wait n - 1 and send it.
            let segs = segs(lr);
            let mut recvs = vec![b.recv(parent, segs[0], 0, [])];
            for i in 1..=segs.len() {
                if i < segs.len() {
                    recvs.push(b.recv(parent, segs[i], i as u32, last));
                }
                for &child in &t.children {
                    let deps = last.into_iter().chain([recvs[i - 1]]);
                    last = Some(b.send(child, segs[i - 1], (i - 1) as u32, deps));
                }
            }
        }
        Some(parent) => {
            for (i, seg) in segs(lr).into_iter().enumerate() {
                last = Some(b.recv(parent, seg, i as u32, last));
            }
        }
    }
    // Phase 2: swap halves with the pair in the other subtree; its steps are labelled
    // with the segment after the first half's last.
    let exchange = segments(halves[0].0, halves[0].1, segment).count() as u32;
    if np % 2 == 0 && s == 0 {
        b.send(unshifted(np - 1, root, np), half(1), exchange, last);
    } else if np % 2 == 0 && s == np - 1 {
        b.recv(root, half(1), exchange, last);
    } else if s != 0 {
        let pair = if lr == 0 {
            unshifted(s + 1, root, np)
        } else {
            unshifted(s - 1, root, np)
        };
        // ompi_coll_base_sendrecv: irecv, blocking send, wait.
        b.recv(pair, half(1 - lr), exchange, last);
        b.send(pair, half(lr), exchange, last);
    }
}
