//! The unrooted exchanges: the dissemination barrier and the pairwise all-to-all,
//! as Open MPI's tuned component runs them (`coll_base_barrier.c`
//! `barrier_intra_bruck`; `coll_base_alltoall.c` `alltoall_intra_pairwise`).
//!
//! - **dissemination barrier** (Hensgen, Finkel and Manber; Open MPI calls it
//!   "bruck"): in round `i` rank `r` sends to `r + 2^i` and receives from
//!   `r - 2^i` (modulo `np`), `ceil(log2 np)` rounds, each a send-receive (receive
//!   posted, blocking send, wait) that waits for the round before. Open MPI's
//!   messages are empty; ours carry 1 byte (`Data[0]` out, `Data[1]` in), since a
//!   TCP message without bytes does not exist.
//! - **pairwise all-to-all**: `Data` holds `np` send blocks (block `j` goes to rank
//!   `j`), `Out` the `np` receive blocks (block `i` comes from rank `i`). In step
//!   `s = 1..np` rank `r` sends block `r + s` to rank `r + s` and receives block
//!   `r - s` from rank `r - s` (a send-receive that waits for the step before); the
//!   last step, `s = np`, is the copy of its own block ("starting from 1 so the local
//!   copy is last").

use super::schedule::{Buf, Builder, Slice, StepId};
use ngauge_transport::Rank;

/// Dissemination barrier (see the module docs).
pub(crate) fn dissemination(b: &mut Builder, rank: Rank, np: usize) {
    b.need(Buf::Data, 2);
    let mut prev: Vec<StepId> = Vec::new();
    let mut distance = 1;
    let mut round = 0;
    while distance < np {
        let to = (rank + distance) % np;
        let from = (rank + np - distance) % np;
        let r = b.recv(
            from,
            Slice::new(Buf::Data, 1, 1),
            round,
            prev.iter().copied(),
        );
        let s = b.send(to, Slice::new(Buf::Data, 0, 1), round, prev.iter().copied());
        prev = vec![r, s];
        distance <<= 1;
        round += 1;
    }
}

/// Pairwise all-to-all (see the module docs).
pub(crate) fn pairwise(b: &mut Builder, rank: Rank, np: usize, size: usize) {
    if size == 0 {
        return;
    }
    b.need(Buf::Data, np * size);
    b.need(Buf::Out, np * size);
    let mut prev: Vec<StepId> = Vec::new();
    for step in 1..np {
        let to = (rank + step) % np;
        let from = (rank + np - step) % np;
        let deps = prev.clone();
        let r = b.recv(
            from,
            Slice::new(Buf::Out, from * size, size),
            step as u32,
            deps,
        );
        let s = b.send(
            to,
            Slice::new(Buf::Data, to * size, size),
            step as u32,
            prev,
        );
        prev = vec![r, s];
    }
    let own = |buf| Slice::new(buf, rank * size, size);
    b.copy(own(Buf::Data), own(Buf::Out), np as u32, prev);
}
