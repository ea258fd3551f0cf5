//! Allgather schedules as Open MPI's tuned component runs them
//! (`ompi/mca/coll/base/coll_base_allgather.c`).
//!
//! Layout: every rank's `Data` holds `np` blocks of `size` bytes; block `r` is rank
//! `r`'s contribution, in place, and afterwards every rank's `Data` holds every
//! block.
//!
//! - **ring** (`allgather_intra_ring`): in step `k = 0..np-1` rank `r` sends block
//!   `r - k` to `r + 1` and receives block `r - k - 1` from `r - 1`, a send-receive
//!   that waits for the step before (`allreduce::ring_allgather`, the
//!   second half of the ring allreduce).
//! - **recursive doubling** (`allgather_intra_recursivedoubling`): for `np` a power
//!   of two, in round `i` rank `r` swaps the `2^i` blocks it holds with rank
//!   `r ^ 2^i`'s (a send-receive). Otherwise Open MPI runs Bruck's algorithm, and
//!   so do we.
//! - **Bruck** (`allgather_intra_bruck`): rank `r` copies its block to the front of
//!   a scratch buffer; in round `i` (distance `d = 2^i`) it sends its first
//!   `min(d, np - d)` blocks to `r - d` and receives as many from `r + d` behind the
//!   `d` it holds; scratch block `j` is then rank `r + j`'s, rotated into place with
//!   two copies.

use super::schedule::{Buf, Builder, Slice, StepId};
use ngauge_transport::Rank;

/// Ring allgather (see the module docs).
pub(crate) fn ring(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    let block = |k: usize| Slice::new(Buf::Data, k * size, size);
    super::allreduce::ring_allgather(b, rank, np, &block, rank, 0, None);
}

/// Recursive-doubling allgather (see the module docs).
pub(crate) fn recursive_doubling(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if !np.is_power_of_two() {
        return bruck(b, rank, np, size);
    }
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    let mut prev: Vec<StepId> = Vec::new();
    let (mut distance, mut round) = (1usize, 0u32);
    while distance < np {
        let remote = rank ^ distance;
        let held = |r: Rank| Slice::new(Buf::Data, (r & !(distance - 1)) * size, distance * size);
        let r = b.recv(remote, held(remote), round, prev.clone());
        let s = b.send(remote, held(rank), round, prev);
        prev = vec![r, s];
        distance <<= 1;
        round += 1;
    }
}

/// Bruck's allgather (see the module docs).
pub(crate) fn bruck(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    if np == 1 {
        return;
    }
    let tmp = |from: usize, blocks: usize| Slice::new(Buf::Tmp0, from * size, blocks * size);
    let data = |from: usize, blocks: usize| Slice::new(Buf::Data, from * size, blocks * size);
    let mut prev = vec![b.copy(data(rank, 1), tmp(0, 1), 0, [])];
    let (mut distance, mut round) = (1usize, 1u32);
    while distance < np {
        let to = (rank + np - distance) % np;
        let from = (rank + distance) % np;
        let blocks = distance.min(np - distance);
        let r = b.recv(from, tmp(distance, blocks), round, prev.clone());
        let s = b.send(to, tmp(0, blocks), round, prev);
        prev = vec![r, s];
        distance <<= 1;
        round += 1;
    }
    // Scratch block j is rank (rank + j) % np's.
    let head = np - rank;
    b.copy(tmp(0, head), data(rank, head), round, prev.iter().copied());
    if rank > 0 {
        b.copy(tmp(head, rank), data(0, rank), round, prev);
    }
}
