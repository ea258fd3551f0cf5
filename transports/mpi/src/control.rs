//! [`MpiControl`]: ngauge's control plane over MPI point-to-point messages on
//! `MPI_COMM_WORLD`, with tags of its own (1 and 2; the data plane uses 0).
//!
//! Under `mpirun` this replaces the TCP rendezvous of the local launcher: rank and
//! size come from MPI, and broadcast and gather run down and up the binomial tree
//! of [`ngauge_transport::tree`] over ranks renumbered relative to the root, so the
//! root handles O(log p) messages per operation, not p - 1 (a barrier is a gather
//! and a broadcast at rank 0; the allgather, the [`Control`] default, one of each
//! too). Each hop is a length message, then the bytes, over
//! `MPI_Isend`/`MPI_Irecv`, completed with `MPI_Test` and a backoff that yields and
//! then sleeps, because the [`Control`] contract says waits must not spin: a
//! control-plane wait on an oversubscribed host must leave the core to the rank
//! being waited for. A gather hop carries the parts of the sender's whole subtree
//! ([`ngauge_transport::pack`]), in rank order, which the receiver knows from the
//! tree alone.
//!
//! Why not MPI's nonblocking collectives (`MPI_Ibarrier`, `MPI_Igatherv`, ...)? In
//! Open MPI 4.1 the first one hooks libnbc's progress function into every later
//! progress loop: a 1-byte ping-pong measured after a single `MPI_Ibarrier` spends
//! 6% of its time in `mca_coll_libnbc` and is that much slower than the C benchmark.
//! `MPI_Comm_dup` does the same (its context-id agreement is a nonblocking
//! allreduce). The control plane must not change what the data plane measures, so it
//! uses point-to-point requests on the world communicator, which leave nothing
//! behind, and tags the data plane never uses.
//!
//! # How long a wait lasts
//!
//! A control-plane wait has no deadline of its own once a [`Watch`] is given
//! ([`MpiControl::with_watch`]; the launcher gives its liveness links, issue 18):
//! rank 2 idle in a barrier while ranks 0 and 1 measure for minutes is a healthy job.
//! A rank waits only for its tree neighbours (its parent in a broadcast, its
//! children in a gather), so the launcher's links run along the same tree rooted at
//! rank 0. The wait loop asks the watch about every rank it still waits for, probes them
//! once per [`Watch::interval`] of waiting, and gives up on a rank that has shown no
//! sign of running for the whole timeout (stopped with SIGSTOP, its host frozen or
//! cut off), naming it. A rank the watch cannot tell about (no link to it) and every
//! rank without a watch keep the plain deadline: the timeout from the start of the
//! wait. A rank that exits is the MPI launcher's to notice: it ends the job.

use crate::ffi;
use crate::runtime::{Caller, Comm, Mpi, MpiError};
use crate::transport::Backoff;
use ngauge_transport::tree::Shape;
use ngauge_transport::{pack, unpack, Control, ControlError, Rank};
use std::cell::{Cell, RefCell};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tells a waiting control plane whether the ranks it waits for still run (the
/// launcher's liveness links).
pub trait Watch: Send + std::fmt::Debug {
    /// How long since `rank` last showed it runs (`None`: this watch cannot tell).
    fn silent_for(&self, rank: Rank) -> Option<Duration>;
    /// Asks `rank` to show it runs, unless it was asked less than an interval ago
    /// (called on every turn of a wait longer than one [`Watch::interval`]).
    fn probe(&mut self, rank: Rank);
    /// How often a waiting rank probes.
    fn interval(&self) -> Duration;
}

/// The control plane over MPI.
#[derive(Debug)]
pub struct MpiControl {
    comm: Comm,
    rank: Rank,
    size: usize,
    timeout: Option<Duration>,
    /// Who still runs: with it, the timeout bounds a waited-for rank's silence, not
    /// the wait.
    watch: RefCell<Option<Box<dyn Watch>>>,
    /// Set when a collective failed (timed out, lost a rank, broke the protocol)
    /// after posting requests: some may still be in MPI's hands, and a receive left
    /// posted on tags 1-2 of `MPI_COMM_WORLD` would match a later control message,
    /// so the control plane cannot be used again.
    broken: Cell<bool>,
}

// The `Control` trait requires `Send`. Moving the control plane to another thread is
// allowed; calling MPI from there is not, and every operation checks it first
// (`Caller::checked`), failing with `ControlError::Invalid`.

/// A posted request: the shim's slot, the peer, and the length a receive expects
/// (`None` for sends).
type Posted = (c_int, Rank, Option<usize>);

/// The requests of one exchange step and the memory they read or write (`keep`).
///
/// Every request is recorded here as soon as MPI accepted it, before anything else
/// can fail. [`InFlight::finish`] hands `keep` back once all of them completed; if
/// the step is dropped before (an error returned early), it marks the control plane
/// broken and, while requests are still pending, leaks `keep` instead of freeing
/// memory MPI may still write into.
struct InFlight<'a, K> {
    broken: &'a Cell<bool>,
    keep: Option<K>,
    reqs: Vec<Posted>,
}

impl<'a, K> InFlight<'a, K> {
    fn new(broken: &'a Cell<bool>, keep: K) -> Self {
        InFlight {
            broken,
            keep: Some(keep),
            reqs: Vec::new(),
        }
    }

    /// Records a request MPI accepted, or passes on the error of one it refused.
    fn post(
        &mut self,
        started: Result<c_int, ControlError>,
        rank: Rank,
        expected: Option<usize>,
    ) -> Result<(), ControlError> {
        self.reqs.push((started?, rank, expected));
        Ok(())
    }

    /// The memory back, after every request completed (`wait_all`).
    fn finish(mut self) -> K {
        assert!(self.reqs.is_empty(), "finish with requests in flight");
        self.keep.take().expect("kept until finished")
    }
}

impl<K> Drop for InFlight<'_, K> {
    fn drop(&mut self) {
        let Some(keep) = self.keep.take() else {
            return; // finished
        };
        self.broken.set(true);
        if !self.reqs.is_empty() {
            // MPI still holds pointers into `keep` (receives may write into it).
            std::mem::forget(keep);
        }
    }
}

impl MpiControl {
    /// The control plane on `MPI_COMM_WORLD` (fails off the MPI thread).
    pub fn new(mpi: &Arc<Mpi>) -> Result<Self, MpiError> {
        Ok(MpiControl {
            comm: mpi.world()?,
            rank: mpi.rank(),
            size: mpi.size(),
            timeout: None,
            watch: RefCell::new(None),
            broken: Cell::new(false),
        })
    }

    /// From now on a wait lasts as long as `watch` shows that the ranks waited for
    /// run, and ends naming the first one silent for the whole timeout (see the
    /// module doc). Without a timeout the watch is not consulted.
    pub fn with_watch(self, watch: Box<dyn Watch>) -> Self {
        *self.watch.borrow_mut() = Some(watch);
        self
    }

    /// The waits' timeout (`None`: wait forever).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Gives up on a collective after `timeout` (default: wait forever, as a lost
    /// rank makes the MPI launcher end the whole job anyway). After a timeout, or
    /// any other failure of a collective, the control plane refuses further calls.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The MPI library.
    pub fn mpi(&self) -> &Arc<Mpi> {
        self.comm.mpi()
    }

    fn check_root(&self, root: Rank) -> Result<c_int, ControlError> {
        if root >= self.size {
            return Err(ControlError::Invalid(format!(
                "root {root} outside a job of {} ranks",
                self.size
            )));
        }
        Ok(root as c_int)
    }

    fn usable(&self, op: &'static str) -> Result<(), ControlError> {
        Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
        if self.broken.get() {
            return Err(ControlError::Invalid(format!(
                "{op} on an MPI control plane that failed earlier (timeout or lost rank)"
            )));
        }
        Ok(())
    }

    /// Waits with backoff until every request of `step` completed, removing each
    /// from `step` as it does. A receive that got another length than posted is a
    /// protocol error. On any error the requests still pending stay in `step`, whose
    /// drop then leaks the memory and marks the control plane broken.
    fn wait_all<K>(
        &self,
        op: &'static str,
        step: &mut InFlight<'_, K>,
    ) -> Result<(), ControlError> {
        let began = Instant::now();
        let mut backoff = Backoff::default();
        while !step.reqs.is_empty() {
            let caller =
                Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
            let mut i = 0;
            while i < step.reqs.len() {
                let (req, rank, expected) = step.reqs[i];
                let (mut done, mut got): (c_int, c_int) = (0, -1);
                // SAFETY: `req` is a request this control plane started and that has
                // not completed (completed ones leave `step.reqs`); out pointers are
                // valid; on the MPI thread.
                let rc = unsafe { ffi::ngm_test(req, &mut done, &mut got) };
                if done != 0 {
                    // Retired by the shim, with or without an error.
                    step.reqs.swap_remove(i);
                } else {
                    i += 1;
                }
                caller.check(op, rc).map_err(|e| lost(rank, op, e))?;
                if done != 0 {
                    if let Some(len) = expected.filter(|&len| got as usize != len) {
                        return Err(ControlError::Protocol {
                            rank,
                            detail: format!("{op}: {got} bytes arrived where {len} were announced"),
                        });
                    }
                }
            }
            if step.reqs.is_empty() {
                break;
            }
            if let Some(limit) = self.timeout {
                let pending = step.reqs.iter().map(|&(_, rank, _)| rank);
                let mut watch = self.watch.borrow_mut();
                check_pending(watch.as_deref_mut(), op, pending, began.elapsed(), limit)?;
            }
            backoff.pause();
        }
        Ok(())
    }

    /// Sends `data` to every rank of `to` (a length message, then the bytes) and
    /// hands it back once every send completed.
    fn send_all(
        &self,
        op: &'static str,
        to: &[Rank],
        data: Vec<u8>,
    ) -> Result<Vec<u8>, ControlError> {
        if to.is_empty() {
            return Ok(data);
        }
        let header = (data.len() as u64).to_le_bytes().to_vec();
        let (header_ptr, body_ptr, len) = (header.as_ptr(), data.as_ptr(), data.len());
        let mut step = InFlight::new(&self.broken, (header, data));
        for &peer in to {
            step.post(self.isend(op, peer, TAG_LEN, header_ptr, 8), peer, None)?;
            step.post(self.isend(op, peer, TAG_DATA, body_ptr, len), peer, None)?;
        }
        self.wait_all(op, &mut step)?;
        Ok(step.finish().1)
    }

    /// Receives one message (its length, then its bytes) from every rank of `from`,
    /// in that order.
    fn recv_all(&self, op: &'static str, from: &[Rank]) -> Result<Vec<Vec<u8>>, ControlError> {
        if from.is_empty() {
            return Ok(Vec::new());
        }
        let mut headers = vec![vec![0u8; 8]; from.len()];
        let ptrs: Vec<*mut u8> = headers.iter_mut().map(|h| h.as_mut_ptr()).collect();
        let mut step = InFlight::new(&self.broken, headers);
        for (&ptr, &peer) in ptrs.iter().zip(from) {
            step.post(self.irecv(op, peer, TAG_LEN, ptr, 8), peer, Some(8))?;
        }
        self.wait_all(op, &mut step)?;
        let mut bodies: Vec<Vec<u8>> = (step.finish().iter())
            .map(|h| vec![0u8; le_u64(h) as usize])
            .collect();
        let ptrs: Vec<(*mut u8, usize)> = (bodies.iter_mut())
            .map(|b| (b.as_mut_ptr(), b.len()))
            .collect();
        let mut step = InFlight::new(&self.broken, bodies);
        for (&(ptr, len), &peer) in ptrs.iter().zip(from) {
            step.post(self.irecv(op, peer, TAG_DATA, ptr, len), peer, Some(len))?;
        }
        self.wait_all(op, &mut step)?;
        Ok(step.finish())
    }

    /// Starts a send of `len` bytes at `ptr` to `peer` (the caller keeps the memory
    /// alive until the request completes).
    fn isend(
        &self,
        op: &'static str,
        peer: Rank,
        tag: c_int,
        ptr: *const u8,
        len: usize,
    ) -> Result<c_int, ControlError> {
        let comm = self.comm.index;
        // SAFETY: `ptr` points at `len` bytes the caller keeps alive and unchanged
        // until the request completes (an `InFlight` owns them, and leaks them if it
        // is dropped before); on the MPI thread.
        self.start(op, peer, len, |len, req| unsafe {
            ffi::ngm_isend(comm, ptr.cast::<c_void>(), len, peer as c_int, tag, req)
        })
    }

    /// Starts a receive of `len` bytes into `ptr` from `peer`.
    fn irecv(
        &self,
        op: &'static str,
        peer: Rank,
        tag: c_int,
        ptr: *mut u8,
        len: usize,
    ) -> Result<c_int, ControlError> {
        let comm = self.comm.index;
        // SAFETY: `ptr` points at `len` writable bytes the caller keeps alive and
        // otherwise unreferenced until the request completes (an `InFlight` owns
        // them, and leaks them if it is dropped before); on the MPI thread.
        self.start(op, peer, len, |len, req| unsafe {
            ffi::ngm_irecv(comm, ptr.cast::<c_void>(), len, peer as c_int, tag, req)
        })
    }

    /// Starts the send or receive `call` makes of `len` bytes (as MPI's count) with
    /// `peer`, returning the request it wrote.
    fn start(
        &self,
        op: &'static str,
        peer: Rank,
        len: usize,
        call: impl FnOnce(c_int, &mut c_int) -> c_int,
    ) -> Result<c_int, ControlError> {
        let len = c_len(op, len)?;
        let caller = Caller::checked().map_err(|e| ControlError::Invalid(format!("{op}: {e}")))?;
        let mut req: c_int = -1;
        let rc = call(len, &mut req);
        caller.check(op, rc).map_err(|e| lost(peer, op, e))?;
        Ok(req)
    }
}

/// Whether waiting `waited` for the `pending` ranks (repeats allowed) is over: the
/// first rank silent for the whole `limit` (counted from the start of the wait at
/// the earliest) ends it, named as lost when `watch` could tell, as timed out when
/// not. Probes the pending ranks once the wait is an interval long.
fn check_pending(
    mut watch: Option<&mut (dyn Watch + 'static)>,
    op: &'static str,
    pending: impl Iterator<Item = Rank> + Clone,
    waited: Duration,
    limit: Duration,
) -> Result<(), ControlError> {
    for rank in pending.clone() {
        let heard = watch.as_ref().and_then(|w| w.silent_for(rank));
        let silent = heard.map_or(waited, |s| s.min(waited));
        if silent > limit {
            return Err(match heard {
                Some(_) => ControlError::LostRank {
                    rank,
                    op,
                    detail: format!(
                        "answered no liveness probe for {limit:?} (stopped, or its host \
                         frozen or unreachable?)"
                    ),
                },
                None => ControlError::Timeout {
                    rank,
                    op,
                    after: limit,
                },
            });
        }
    }
    if let Some(w) = watch.as_mut().filter(|w| waited >= w.interval()) {
        for rank in pending {
            w.probe(rank);
        }
    }
    Ok(())
}

const TAG_LEN: c_int = 1;
const TAG_DATA: c_int = 2;

fn c_len(op: &'static str, len: usize) -> Result<c_int, ControlError> {
    c_int::try_from(len).map_err(|_| {
        ControlError::Invalid(format!(
            "{op} of {len} bytes exceeds MPI's 2 GiB count limit"
        ))
    })
}

/// A little-endian length header (8 bytes: `wait_all` checked the count).
fn le_u64(header: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&header[..8]);
    u64::from_le_bytes(bytes)
}

fn lost(rank: Rank, op: &'static str, e: MpiError) -> ControlError {
    ControlError::LostRank {
        rank,
        op,
        detail: e.to_string(),
    }
}

impl Control for MpiControl {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&mut self) -> Result<(), ControlError> {
        self.usable("barrier")?;
        self.gather(0, &[])?;
        self.broadcast(0, &mut Vec::new())
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        const OP: &str = "broadcast";
        self.usable(OP)?;
        self.check_root(root)?;
        let tree = Neighbours::of(self.rank, root, self.size);
        if let Some(parent) = tree.parent {
            *data = self.recv_all(OP, &[parent])?.pop().expect("one message");
        }
        *data = self.send_all(OP, &tree.children, std::mem::take(data))?;
        Ok(())
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        const OP: &str = "gather";
        self.usable(OP)?;
        self.check_root(root)?;
        let tree = Neighbours::of(self.rank, root, self.size);
        let received = self.recv_all(OP, &tree.children)?;
        let parts = tree.merge(data, received)?;
        match tree.parent {
            Some(parent) => {
                self.send_all(OP, &[parent], pack(&parts))?;
                Ok(Vec::new())
            }
            None => Ok(tree.in_rank_order(parts)),
        }
    }
}

/// A rank's place in the binomial tree of a collective rooted at `root`: the tree
/// of [`Shape::Binomial`] over ranks renumbered relative to the root (root 0 keeps
/// the numbers).
#[derive(Debug, PartialEq, Eq)]
struct Neighbours {
    rank: Rank,
    root: Rank,
    size: usize,
    /// Where this rank's gather goes and its broadcast comes from (`None` at the root).
    parent: Option<Rank>,
    /// Where this rank's broadcast goes and its gather comes from.
    children: Vec<Rank>,
}

impl Neighbours {
    fn of(rank: Rank, root: Rank, size: usize) -> Self {
        let relative = (rank + size - root) % size;
        let real = |r: Rank| (r + root) % size;
        Neighbours {
            rank,
            root,
            size,
            parent: Shape::Binomial.parent(relative).map(real),
            children: (Shape::Binomial.children(relative, size).into_iter())
                .map(real)
                .collect(),
        }
    }

    /// The ranks under `top` (included), in the order a gather hop carries them:
    /// increasing relative to the root.
    fn subtree(&self, top: Rank) -> Vec<Rank> {
        let relative = (top + self.size - self.root) % self.size;
        (Shape::Binomial.subtree(relative, self.size).into_iter())
            .map(|r| (r + self.root) % self.size)
            .collect()
    }

    /// This rank's subtree's parts, in [`Neighbours::subtree`] order: its own `data`
    /// and what each child sent (`received`, one message per child, as packed by
    /// the child). A message without one part per rank under its sender breaks the
    /// protocol.
    fn merge(&self, data: &[u8], received: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ControlError> {
        let mut parts: Vec<(Rank, Vec<u8>)> = vec![(self.rank, data.to_vec())];
        for (&child, message) in self.children.iter().zip(received) {
            let under = self.subtree(child);
            let got = unpack(&message, under.len()).ok_or_else(|| ControlError::Protocol {
                rank: child,
                detail: format!(
                    "gather: malformed parts of the {} ranks under it",
                    under.len()
                ),
            })?;
            parts.extend(under.into_iter().zip(got));
        }
        let relative = |r: Rank| (r + self.size - self.root) % self.size;
        parts.sort_by_key(|&(r, _)| relative(r));
        Ok(parts.into_iter().map(|(_, part)| part).collect())
    }

    /// The root's merged parts (every rank's, in relative order) indexed by rank.
    fn in_rank_order(&self, mut parts: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        parts.rotate_right(self.root);
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch with fixed answers that records its probes.
    #[derive(Debug)]
    struct Fixed {
        silent: Vec<Option<Duration>>,
        probed: Vec<Rank>,
    }

    impl Watch for Fixed {
        fn silent_for(&self, rank: Rank) -> Option<Duration> {
            self.silent[rank]
        }
        fn probe(&mut self, rank: Rank) {
            self.probed.push(rank);
        }
        fn interval(&self) -> Duration {
            Duration::from_millis(500)
        }
    }

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    #[test]
    fn a_wait_for_running_ranks_never_ends_and_probes_after_an_interval() {
        let mut w = Fixed {
            silent: vec![None, Some(s(0.2)), Some(s(0.9))],
            probed: Vec::new(),
        };
        let pending = [1, 2, 2].into_iter();
        check_pending(Some(&mut w), "gather", pending.clone(), s(0.1), s(2.0)).unwrap();
        assert!(w.probed.is_empty(), "a short wait sends nothing");
        check_pending(Some(&mut w), "gather", pending, s(3600.0), s(2.0)).unwrap();
        assert_eq!(w.probed, [1, 2, 2]);
    }

    #[test]
    fn a_silent_rank_is_lost_and_one_the_watch_cannot_tell_about_times_out() {
        let mut w = Fixed {
            silent: vec![None, Some(s(0.1)), Some(s(2.5))],
            probed: Vec::new(),
        };
        // Rank 2 silent for longer than the timeout, but the wait only began 1 s ago.
        check_pending(Some(&mut w), "barrier", [1, 2].into_iter(), s(1.0), s(2.0)).unwrap();
        let err = check_pending(Some(&mut w), "barrier", [1, 2].into_iter(), s(2.1), s(2.0));
        assert!(
            matches!(&err, Err(ControlError::LostRank { rank: 2, detail, .. }) if detail.contains("liveness")),
            "{err:?}"
        );
        let err = check_pending(Some(&mut w), "barrier", [0].into_iter(), s(2.1), s(2.0));
        assert!(
            matches!(err, Err(ControlError::Timeout { rank: 0, .. })),
            "{err:?}"
        );
        // No watch: the plain deadline names the first rank waited for.
        check_pending(None, "barrier", [1, 2].into_iter(), s(1.9), s(2.0)).unwrap();
        let err = check_pending(None, "barrier", [1, 2].into_iter(), s(2.1), s(2.0));
        assert!(
            matches!(err, Err(ControlError::Timeout { rank: 1, .. })),
            "{err:?}"
        );
    }

    #[test]
    fn lengths_beyond_int_are_refused() {
        assert!(c_len("gather", c_int::MAX as usize).is_ok());
        assert!(matches!(
            c_len("gather", c_int::MAX as usize + 1),
            Err(ControlError::Invalid(_))
        ));
    }

    /// ceil(log2 size): the children of a binomial tree's root.
    fn log2_up(size: usize) -> usize {
        size.next_power_of_two().trailing_zeros() as usize
    }

    #[test]
    fn every_rank_handles_at_most_log_p_hops_per_operation() {
        for size in 1..=17 {
            for root in 0..size {
                let trees: Vec<Neighbours> =
                    (0..size).map(|r| Neighbours::of(r, root, size)).collect();
                // A broadcast reaches every rank but the root exactly once.
                let mut reached = vec![0usize; size];
                for t in &trees {
                    for &c in &t.children {
                        assert_eq!(trees[c].parent, Some(t.rank), "{c} of {size}/{root}");
                        reached[c] += 1;
                    }
                }
                let once: Vec<usize> = (0..size).map(|r| usize::from(r != root)).collect();
                assert_eq!(reached, once, "size {size} root {root}");
                // Hops per rank and operation (each is two MPI messages: length,
                // bytes): from the parent and to the children, or the reverse.
                let hops: Vec<usize> = (trees.iter())
                    .map(|t| t.children.len() + usize::from(t.parent.is_some()))
                    .collect();
                assert_eq!(hops[root], log2_up(size), "size {size} root {root}");
                assert!(
                    hops.iter().all(|&h| h <= log2_up(size)),
                    "size {size} root {root}: {hops:?}"
                );
            }
        }
        // The star this replaces: the root handled p - 1 hops.
        assert_eq!(Neighbours::of(0, 0, 4096).children.len(), 12);
    }

    /// What `rank` sends its parent in a gather of `data(r)` at `root`, its
    /// children's messages merged first (the MPI hops replaced by calls).
    fn gathered(trees: &[Neighbours], rank: Rank, data: &dyn Fn(Rank) -> Vec<u8>) -> Vec<Vec<u8>> {
        let t = &trees[rank];
        let received = (t.children.iter())
            .map(|&c| pack(&gathered(trees, c, data)))
            .collect();
        t.merge(&data(rank), received).unwrap()
    }

    #[test]
    fn a_tree_gather_delivers_every_part_in_rank_order_at_any_root() {
        let data = |r: Rank| vec![r as u8; r % 3];
        for size in 1..=17 {
            for root in 0..size {
                let trees: Vec<Neighbours> =
                    (0..size).map(|r| Neighbours::of(r, root, size)).collect();
                let parts = trees[root].in_rank_order(gathered(&trees, root, &data));
                let want: Vec<Vec<u8>> = (0..size).map(data).collect();
                assert_eq!(parts, want, "size {size} root {root}");
            }
        }
    }

    #[test]
    fn a_gather_hop_without_one_part_per_rank_under_its_sender_is_refused() {
        let tree = Neighbours::of(0, 0, 8);
        // Rank 1 heads ranks 1, 3, 5 and 7; its message carries three parts.
        let short = pack(&[vec![1], vec![3], vec![5]]);
        let received = vec![short, pack(&[vec![2], vec![6]]), pack(&[vec![4]])];
        let err = tree.merge(&[0], received);
        assert!(
            matches!(&err, Err(ControlError::Protocol { rank: 1, detail }) if detail.contains("4 ranks")),
            "{err:?}"
        );
    }

    /// Counts its drops, to see whether a step freed or leaked its memory.
    struct Tracked<'a>(&'a Cell<usize>);
    impl Drop for Tracked<'_> {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn a_step_dropped_with_requests_pending_leaks_its_memory_and_breaks_the_plane() {
        let (broken, drops) = (Cell::new(false), Cell::new(0));
        let mut step = InFlight::new(&broken, Tracked(&drops));
        step.post(Ok(3), 1, Some(8)).unwrap();
        // The second request fails to start: the first one stays recorded.
        let failed = step.post(Err(ControlError::Invalid("refused".into())), 2, None);
        assert!(failed.is_err());
        assert_eq!(step.reqs.len(), 1);
        drop(step);
        assert!(broken.get(), "the control plane must refuse further use");
        assert_eq!(drops.get(), 0, "memory MPI may write into was freed");
    }

    #[test]
    fn a_failed_step_without_pending_requests_frees_but_still_breaks() {
        let (broken, drops) = (Cell::new(false), Cell::new(0));
        let step = InFlight::new(&broken, Tracked(&drops));
        drop(step);
        assert!(broken.get());
        assert_eq!(drops.get(), 1);
    }

    #[test]
    fn a_finished_step_returns_its_memory_and_leaves_the_plane_usable() {
        let (broken, drops) = (Cell::new(false), Cell::new(0));
        let step = InFlight::new(&broken, Tracked(&drops));
        let kept = step.finish();
        assert_eq!(drops.get(), 0);
        drop(kept);
        assert_eq!(drops.get(), 1);
        assert!(!broken.get());
    }
}
