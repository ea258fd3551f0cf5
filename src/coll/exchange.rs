//! The unrooted exchanges: the dissemination barrier and the pairwise all-to-all,
//! as Open MPI's tuned component runs them (`coll_base_barrier.c`
//! `barrier_intra_bruck`; `coll_base_alltoall.c` `alltoall_intra_pairwise`,
//! `coll_base_alltoallv.c`).
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
//! - **all-to-all-v** (`coll_base_alltoallv.c`): the blocks have per-pair lengths
//!   ([`Counts`]), each at MPI's displacement (the sum of the blocks before it).
//!   *Pairwise* (`alltoallv_intra_pairwise`) is the all-to-all's, with the own
//!   block copied at step 0, first; *linear* (`alltoallv_intra_basic_linear`) copies
//!   its own block, then posts every receive (ranks in order), then every send, all
//!   at once, and waits for all. Open MPI sends empty blocks as empty messages; we
//!   skip them (no schedule sends 0 bytes), so a pairwise step with nothing to send
//!   or receive waits for nothing either.
//!
//! The all-to-all is the all-to-all-v of [`Counts::Uniform`] with the own copy
//! last: one generator for both.

use super::counts::Counts;
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

/// Bytes and offsets of one rank's blocks: `counts` in units of `size` bytes.
struct Blocks<'c> {
    counts: &'c Counts,
    rank: Rank,
    size: usize,
}

impl Blocks<'_> {
    /// The block sent to `to` (in `Data`).
    fn to(&self, to: Rank) -> Slice {
        let (c, r) = (self.counts, self.rank);
        Slice::new(
            Buf::Data,
            c.send_offset(r, to) * self.size,
            c.count(r, to) * self.size,
        )
    }
    /// The block received from `from` (in `Out`).
    fn from(&self, from: Rank) -> Slice {
        let (c, r) = (self.counts, self.rank);
        Slice::new(
            Buf::Out,
            c.recv_offset(from, r) * self.size,
            c.count(from, r) * self.size,
        )
    }
    /// The copy of the rank's own block, after `deps`; `None` when it is empty.
    fn own(&self, b: &mut Builder, segment: u32, deps: Vec<StepId>) -> Option<StepId> {
        let (from, into) = (self.to(self.rank), self.from(self.rank));
        (from.len > 0).then(|| b.copy(from, into, segment, deps))
    }
}

/// Pairwise all-to-all(-v) (see the module docs): the all-to-all's own copy comes
/// last, the all-to-all-v's first (`own_first`, its step 0). An empty block is
/// neither sent nor received, and the next step waits for the last non-empty one.
pub(crate) fn pairwise(
    b: &mut Builder,
    rank: Rank,
    np: usize,
    blocks: (&Counts, usize),
    own_first: bool,
) {
    let blocks = Blocks {
        counts: blocks.0,
        rank,
        size: blocks.1,
    };
    let mut prev: Vec<StepId> = Vec::new();
    if own_first {
        prev.extend(blocks.own(b, 0, Vec::new()));
    }
    for step in 1..np {
        let to = (rank + step) % np;
        let from = (rank + np - step) % np;
        let (into, out) = (blocks.from(from), blocks.to(to));
        let mut now = Vec::new();
        if into.len > 0 {
            now.push(b.recv(from, into, step as u32, prev.clone()));
        }
        if out.len > 0 {
            now.push(b.send(to, out, step as u32, prev.clone()));
        }
        if !now.is_empty() {
            prev = now;
        }
    }
    if !own_first {
        blocks.own(b, np as u32, prev);
    }
}

/// Linear all-to-all-v (see the module docs).
pub(crate) fn linear(b: &mut Builder, rank: Rank, np: usize, counts: &Counts, size: usize) {
    let blocks = Blocks { counts, rank, size };
    let own: Vec<StepId> = blocks.own(b, 0, Vec::new()).into_iter().collect();
    let others = (0..np).filter(|&i| i != rank);
    for from in others.clone() {
        let into = blocks.from(from);
        if into.len > 0 {
            b.recv(from, into, 1, own.clone());
        }
    }
    for to in others {
        let out = blocks.to(to);
        if out.len > 0 {
            b.send(to, out, 1, own.clone());
        }
    }
}
