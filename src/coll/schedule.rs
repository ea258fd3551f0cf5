//! One rank's part of a collective as data: the ordered steps (sends, receives, local
//! reductions and copies) and what each waits for.
//!
//! # Semantics (what every engine that runs a [`Schedule`] must honour)
//!
//! - **Dependencies point backwards.** Step `i` may start once every step in
//!   [`Schedule::deps`]`(i)` has *completed*; every dependency has a smaller index, so
//!   the list order is a topological order.
//! - **Per-pair order.** Messages carry no tag: between two ranks they match in order
//!   (the transport contract). So a send (receive) to (from) a peer may start only
//!   after every earlier send (receive) to (from) the same peer in the list has
//!   started. The generators list the steps so that the k-th send from `a` to `b` and
//!   the k-th receive at `b` from `a` are the same message, with the same length
//!   (the tests' `check_matching` proves it for small jobs).
//! - **Buffers.** A step names a [`Slice`] of one of up to four per-rank buffers
//!   ([`Buf`]); [`Schedule::buffer_bytes`] says how long each must be. Overlapping
//!   transfers with a writer among them, and a local step and any transfer on the same
//!   buffer, are always ordered by dependencies (the transports' busy-buffer rule
//!   refuses a whole buffer to local access while a transfer holds part of it;
//!   the tests' `check_hazards` proves it).
//! - **No empty messages.** No schedule sends 0 bytes (TCP carries no header, so an
//!   empty message would not exist on the wire); an operation on 0 bytes has no
//!   steps, and the barrier sends 1 byte.
//!
//! # Memory
//!
//! A [`Step`] is 72 bytes on a 64-bit target, a dependency edge 4 bytes and the
//! [`Schedule`] itself 96, so a rank's schedule takes `96 + 72 * steps + 4 * edges`
//! bytes (`docs/coll.md` has figures per algorithm). Schedules are generated per rank on demand
//! ([`crate::coll::CollSpec::schedule`]), never for the whole job at once.

use ngauge_transport::Rank;
use std::ops::Range;

/// One of a rank's buffers for a collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Buf {
    /// The user's buffer: the message of a broadcast, the blocks of a gather (block
    /// `r` is rank `r`'s contribution), the vector of an allreduce (reduced in
    /// place), the send blocks of an all-to-all.
    Data,
    /// The receive blocks of an all-to-all.
    Out,
    /// Scratch: incoming operands of a reduction, a gather's subtree blocks.
    Tmp0,
    /// Second scratch buffer (the ring allreduce's double buffering).
    Tmp1,
}

impl Buf {
    /// Every buffer, in index order.
    pub const ALL: [Buf; BUFFERS] = [Buf::Data, Buf::Out, Buf::Tmp0, Buf::Tmp1];

    /// Position in [`Buf::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Lowercase name for messages: `data`, `out`, `tmp0`, `tmp1`.
    pub fn name(self) -> &'static str {
        match self {
            Buf::Data => "data",
            Buf::Out => "out",
            Buf::Tmp0 => "tmp0",
            Buf::Tmp1 => "tmp1",
        }
    }
}

/// How many buffers a schedule may use.
pub const BUFFERS: usize = 4;

/// A byte range of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Which buffer.
    pub buf: Buf,
    /// First byte.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Slice {
    /// `len` bytes of `buf` from `offset`.
    pub fn new(buf: Buf, offset: usize, len: usize) -> Slice {
        Slice { buf, offset, len }
    }

    /// One past the last byte.
    pub fn end(&self) -> usize {
        self.offset + self.len
    }
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `from` to `peer`.
    Send {
        /// Destination rank.
        peer: Rank,
        /// Bytes sent.
        from: Slice,
    },
    /// Receive exactly `into.len` bytes from `peer` into `into`.
    Recv {
        /// Source rank.
        peer: Rank,
        /// Where the bytes land.
        into: Slice,
    },
    /// `into = into (+) from` with the allreduce's reduction
    /// ([`crate::coll::allreduce::reduce_into`]); both slices have the same length.
    Reduce {
        /// Operand (usually a received segment).
        from: Slice,
        /// Accumulator.
        into: Slice,
    },
    /// `into = from`; both slices have the same length.
    Copy {
        /// Source.
        from: Slice,
        /// Destination.
        into: Slice,
    },
}

/// The kind of a step, without its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// [`Action::Send`].
    Send,
    /// [`Action::Recv`].
    Recv,
    /// [`Action::Reduce`].
    Reduce,
    /// [`Action::Copy`].
    Copy,
}

impl Action {
    /// The kind of step.
    pub fn kind(&self) -> Kind {
        match self {
            Action::Send { .. } => Kind::Send,
            Action::Recv { .. } => Kind::Recv,
            Action::Reduce { .. } => Kind::Reduce,
            Action::Copy { .. } => Kind::Copy,
        }
    }

    /// The peer of a transfer; `None` for a local step.
    pub fn peer(&self) -> Option<Rank> {
        match *self {
            Action::Send { peer, .. } | Action::Recv { peer, .. } => Some(peer),
            _ => None,
        }
    }

    /// Bytes moved (sent, received, reduced or copied).
    pub fn bytes(&self) -> usize {
        match self {
            Action::Send { from, .. } => from.len,
            Action::Recv { into, .. } => into.len,
            Action::Reduce { into, .. } | Action::Copy { into, .. } => into.len,
        }
    }

    /// Whether it is a send or receive (runs on the transport) rather than a local
    /// step (runs on the CPU, in the executor).
    pub fn is_transfer(&self) -> bool {
        matches!(self, Action::Send { .. } | Action::Recv { .. })
    }

    /// The slices read (`.0`) and written (`.1`); a reduction's accumulator is both.
    pub fn slices(&self) -> (Option<Slice>, Option<Slice>) {
        match *self {
            Action::Send { from, .. } => (Some(from), None),
            Action::Recv { into, .. } => (None, Some(into)),
            Action::Reduce { from, into } | Action::Copy { from, into } => (Some(from), Some(into)),
        }
    }
}

/// Index of a step in its schedule.
pub type StepId = u32;

/// One step of a rank's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// What it does.
    pub action: Action,
    /// Which segment (pipelined broadcasts) or round (exchanges, reductions) the
    /// step belongs to; informative for timelines and tests.
    pub segment: u32,
    deps_start: u32,
    deps_len: u32,
}

/// One rank's part of a collective (see the module docs for the rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    rank: Rank,
    np: usize,
    steps: Vec<Step>,
    deps: Vec<StepId>,
    buffer_bytes: [usize; BUFFERS],
}

impl Schedule {
    /// The rank this schedule is for.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the job.
    pub fn np(&self) -> usize {
        self.np
    }

    /// The steps in list order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the rank has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The steps step `id` waits for (all earlier in the list).
    ///
    /// # Panics
    ///
    /// If `id` is not a step of this schedule.
    pub fn deps(&self, id: StepId) -> &[StepId] {
        let s = &self.steps[id as usize];
        &self.deps[s.deps_start as usize..(s.deps_start + s.deps_len) as usize]
    }

    /// Total number of dependency edges.
    pub fn edges(&self) -> usize {
        self.deps.len()
    }

    /// Bytes `buf` must hold (0: unused).
    pub fn buffer_bytes(&self, buf: Buf) -> usize {
        self.buffer_bytes[buf.index()]
    }
}

/// Builds a [`Schedule`] step by step, in list order.
#[derive(Debug)]
pub(crate) struct Builder {
    schedule: Schedule,
}

impl Builder {
    pub(crate) fn new(rank: Rank, np: usize) -> Builder {
        Builder {
            schedule: Schedule {
                rank,
                np,
                steps: Vec::new(),
                deps: Vec::new(),
                buffer_bytes: [0; BUFFERS],
            },
        }
    }

    /// Makes sure `buf` is at least `bytes` long.
    pub(crate) fn need(&mut self, buf: Buf, bytes: usize) {
        let b = &mut self.schedule.buffer_bytes[buf.index()];
        *b = (*b).max(bytes);
    }

    /// Appends a step waiting for `deps` (earlier steps; duplicates are dropped).
    fn push(
        &mut self,
        action: Action,
        segment: u32,
        deps: impl IntoIterator<Item = StepId>,
    ) -> StepId {
        let id = self.schedule.steps.len() as StepId;
        let start = self.schedule.deps.len();
        self.schedule.deps.extend(deps);
        let mine = &mut self.schedule.deps[start..];
        mine.sort_unstable();
        let mut kept = 0;
        for i in 0..mine.len() {
            debug_assert!(mine[i] < id, "step {id} depends on later step {}", mine[i]);
            if i == 0 || mine[i] != mine[kept - 1] {
                mine[kept] = mine[i];
                kept += 1;
            }
        }
        self.schedule.deps.truncate(start + kept);
        let (read, written) = action.slices();
        for s in read.into_iter().chain(written) {
            self.need(s.buf, s.end());
        }
        debug_assert!(
            !action.is_transfer() || action.bytes() > 0,
            "empty message in a schedule"
        );
        self.schedule.steps.push(Step {
            action,
            segment,
            deps_start: start as u32,
            deps_len: kept as u32,
        });
        id
    }

    pub(crate) fn send(
        &mut self,
        peer: Rank,
        from: Slice,
        segment: u32,
        deps: impl IntoIterator<Item = StepId>,
    ) -> StepId {
        self.push(Action::Send { peer, from }, segment, deps)
    }

    pub(crate) fn recv(
        &mut self,
        peer: Rank,
        into: Slice,
        segment: u32,
        deps: impl IntoIterator<Item = StepId>,
    ) -> StepId {
        self.push(Action::Recv { peer, into }, segment, deps)
    }

    pub(crate) fn reduce(
        &mut self,
        from: Slice,
        into: Slice,
        segment: u32,
        deps: impl IntoIterator<Item = StepId>,
    ) -> StepId {
        debug_assert_eq!(from.len, into.len);
        self.push(Action::Reduce { from, into }, segment, deps)
    }

    pub(crate) fn copy(
        &mut self,
        from: Slice,
        into: Slice,
        segment: u32,
        deps: impl IntoIterator<Item = StepId>,
    ) -> StepId {
        debug_assert_eq!(from.len, into.len);
        self.push(Action::Copy { from, into }, segment, deps)
    }

    pub(crate) fn finish(self) -> Schedule {
        self.schedule
    }
}

/// `0..n` segments of `len` bytes starting at `offset`, each `segment` bytes but the
/// last (Open MPI's `COLL_BASE_COMPUTED_SEGCOUNT`: a segment of 0, or one not
/// smaller than the message, means a single segment).
pub(crate) fn segments(offset: usize, len: usize, segment: usize) -> Segments {
    let seg = if segment == 0 || segment >= len {
        len.max(1)
    } else {
        segment
    };
    Segments {
        end: offset + len,
        seg,
        at: offset,
    }
}

/// Iterator of [`segments`]: byte ranges.
#[derive(Clone, Debug)]
pub(crate) struct Segments {
    end: usize,
    seg: usize,
    at: usize,
}

impl Iterator for Segments {
    type Item = Range<usize>;
    fn next(&mut self) -> Option<Range<usize>> {
        if self.at >= self.end {
            return None;
        }
        let r = self.at..(self.at + self.seg).min(self.end);
        self.at = r.end;
        Some(r)
    }
}

#[cfg(test)]
impl Slice {
    /// Whether the two slices share a byte.
    pub(crate) fn overlaps(&self, other: &Slice) -> bool {
        self.buf == other.buf
            && self.len > 0
            && other.len > 0
            && self.offset < other.end()
            && other.offset < self.end()
    }
}

#[cfg(test)]
impl Schedule {
    /// Bytes this schedule occupies (the struct and its two vectors' elements).
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Schedule>()
            + self.steps.len() * std::mem::size_of::<Step>()
            + self.deps.len() * std::mem::size_of::<StepId>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_size_is_what_the_docs_say() {
        assert_eq!(std::mem::size_of::<Step>(), 72);
        assert_eq!(std::mem::size_of::<StepId>(), 4);
        assert_eq!(std::mem::size_of::<Schedule>(), 96);
    }

    #[test]
    fn segments_cover_the_range_exactly() {
        let v: Vec<_> = segments(10, 25, 10).collect();
        assert_eq!(v, vec![10..20, 20..30, 30..35]);
        assert_eq!(segments(10, 25, 10).count(), 3);
        assert_eq!(segments(0, 25, 0).collect::<Vec<_>>(), vec![0..25]);
        assert_eq!(segments(0, 25, 25).collect::<Vec<_>>(), vec![0..25]);
        assert_eq!(segments(0, 25, 99).count(), 1);
        assert_eq!(segments(0, 0, 4).count(), 0);
        assert_eq!(segments(0, 0, 4).next(), None);
        assert_eq!(segments(0, 8, 1).count(), 8);
    }

    #[test]
    fn builder_sorts_and_dedups_dependencies_and_sizes_buffers() {
        let mut b = Builder::new(0, 2);
        let a = b.recv(1, Slice::new(Buf::Tmp0, 0, 8), 0, []);
        let c = b.copy(
            Slice::new(Buf::Data, 8, 4),
            Slice::new(Buf::Out, 0, 4),
            0,
            [],
        );
        let d = b.reduce(
            Slice::new(Buf::Tmp0, 0, 8),
            Slice::new(Buf::Data, 0, 8),
            0,
            [c, a, c],
        );
        let s = b.finish();
        assert_eq!(s.deps(d), &[a, c]);
        assert_eq!(s.deps(a), &[] as &[StepId]);
        assert_eq!(s.edges(), 2);
        assert_eq!(s.buffer_bytes(Buf::Data), 12);
        assert_eq!(s.buffer_bytes(Buf::Out), 4);
        assert_eq!(s.buffer_bytes(Buf::Tmp0), 8);
        assert_eq!(s.buffer_bytes(Buf::Tmp1), 0);
        assert_eq!(
            s.heap_bytes(),
            std::mem::size_of::<Schedule>() + 3 * 72 + 2 * 4
        );
    }

    #[test]
    fn slices_overlap_only_on_shared_bytes_of_one_buffer() {
        let a = Slice::new(Buf::Data, 0, 8);
        assert!(a.overlaps(&Slice::new(Buf::Data, 7, 1)));
        assert!(!a.overlaps(&Slice::new(Buf::Data, 8, 1)));
        assert!(!a.overlaps(&Slice::new(Buf::Tmp0, 0, 8)));
        assert!(!a.overlaps(&Slice::new(Buf::Data, 3, 0)));
    }
}
