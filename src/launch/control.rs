//! The control channel: barrier, broadcast and gather over a tree of TCP
//! connections rooted at rank 0 ([`Shape`]: the star the rendezvous leaves, or the
//! binomial tree [`super::grow`] links so that rank 0 handles O(log p) frames).
//!
//! Every collective is an upward phase (each rank waits for its children's parts,
//! then sends its subtree's to its parent) and a downward one (each rank waits for
//! its parent's frame and passes it to its children), each as far as the operation
//! needs it. A rank waits for its children with one blocking `poll` over the
//! connections it still expects (and its parent's, where only an abort can come
//! from), so a rank that dies is noticed as soon as the kernel sees its connection
//! close, in whatever order the ranks arrive. Every frame carries a sequence number
//! counted alike on all ranks, so a rank that makes a different call is a protocol
//! error, not a silent mix-up.
//!
//! When a rank loses a neighbour it sends its other neighbours an `Abort` frame
//! naming the lost one before returning its error, and every rank that receives one
//! passes it on the same way, so that every rank's error names the rank that
//! actually died, not just "my parent went away".
//!
//! Waits block in the kernel. Once the liveness links are up
//! ([`super::liveness`]), a wait lasts as long as the ranks waited for still run
//! (a rank idle in a barrier while others measure for an hour is fine) and ends,
//! naming the rank, when one of them answers no liveness probe for the job's
//! `--timeout`. Before that (and in unit tests without links) every rank must enter
//! each collective within the timeout of the others.

use super::frame::{self, Abort, Kind, MAX_CONTROL_PAYLOAD};
use super::liveness::Liveness;
use super::wire::{self, WireError};
use ngauge_transport::tree::Shape;
use ngauge_transport::{pack, unpack, Control, ControlError, Rank};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long a rank tries to deliver an abort notice to a neighbour.
const ABORT_WRITE: Duration = Duration::from_millis(500);
/// How long a failing rank waits for the last word (an abort notice, or the end of
/// its connection) of a rank whose link broke, to learn whether that rank failed
/// because of another (at most the job's timeout).
const LAST_WORD: Duration = Duration::from_secs(1);
/// How long a failing rank looks at a neighbour's connection for what that
/// neighbour has already said.
const ALREADY: Duration = Duration::from_millis(10);

/// What a failing rank reads last from a neighbour's control connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastWord {
    /// An abort notice naming the rank it blames.
    Names(Rank),
    /// The connection ended without a notice.
    Ended,
    /// Nothing within the wait, or no connection to it.
    Silent,
}

/// This rank's control connections in the tree.
pub(super) struct Links {
    /// How the job's ranks are linked.
    pub shape: Shape,
    /// The connection to the parent (`None` at rank 0).
    pub parent: Option<(Rank, TcpStream)>,
    /// The connections to the children, in rank order.
    pub children: Vec<(Rank, TcpStream)>,
}

/// [`Control`] over a tree of TCP connections rooted at rank 0.
pub struct TcpControl {
    rank: Rank,
    size: usize,
    timeout: Duration,
    seq: u32,
    links: Links,
    failed: Option<(Rank, String)>,
    liveness: Option<Liveness>,
}

impl std::fmt::Debug for TcpControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpControl")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("seq", &self.seq)
            .finish()
    }
}

impl TcpControl {
    /// Rank 0's side of a star: `streams[r]` is rank r's connection (`None` at 0).
    pub fn root(streams: Vec<Option<TcpStream>>, timeout: Duration) -> Self {
        let size = streams.len();
        let children = (streams.into_iter().enumerate())
            .filter_map(|(r, s)| s.map(|s| (r, s)))
            .collect();
        let links = Links {
            shape: Shape::Star,
            parent: None,
            children,
        };
        Self::new(0, size, links, timeout)
    }

    /// Rank `rank`'s side of a star: `stream` is its connection to rank 0.
    pub fn leaf(rank: Rank, size: usize, stream: TcpStream, timeout: Duration) -> Self {
        let links = Links {
            shape: Shape::Star,
            parent: Some((0, stream)),
            children: Vec::new(),
        };
        Self::new(rank, size, links, timeout)
    }

    /// This rank's place in a tree of `shape`, over the connections given.
    pub(super) fn new(rank: Rank, size: usize, links: Links, timeout: Duration) -> Self {
        TcpControl {
            rank,
            size,
            timeout,
            seq: 0,
            links,
            failed: None,
            liveness: None,
        }
    }

    /// From now on, waits last as long as the ranks waited for answer liveness
    /// probes ([`super::liveness`]) instead of at most the timeout.
    pub fn set_liveness(&mut self, liveness: Liveness) {
        self.liveness = Some(liveness);
    }

    /// Gives the connections back (to link another shape over them).
    pub(super) fn into_links(self) -> Links {
        self.links
    }

    /// In a star: rank 0 sends `parts[r]` to every rank r and keeps `parts[0]`;
    /// the others return what they got (and pass no `parts`). Collective.
    pub(super) fn scatter(&mut self, parts: &[Vec<u8>]) -> Result<Vec<u8>, ControlError> {
        const OP: &str = "scatter";
        debug_assert_eq!(self.links.shape, Shape::Star);
        let seq = self.begin(OP)?;
        let run = |c: &mut Self| {
            if c.rank != 0 {
                return c.recv_from_parent(OP, Kind::Broadcast, seq);
            }
            for r in c.children() {
                let part = parts.get(r).map_or(&[][..], Vec::as_slice);
                c.send(r, OP, Kind::Broadcast, seq, 0, part)?;
            }
            Ok(parts.first().cloned().unwrap_or_default())
        };
        run(self).map_err(|e| self.fail(e))
    }

    /// The control connection to `rank`, a neighbour in the tree.
    fn stream_of(&self, rank: Rank) -> Option<&TcpStream> {
        let links = &self.links;
        (links.parent.iter().chain(&links.children))
            .find(|(r, _)| *r == rank)
            .map(|(_, s)| s)
    }

    /// The connection a frame to or from `peer` (a neighbour) goes over.
    fn link(&mut self, peer: Rank, op: &'static str) -> Result<&mut TcpStream, ControlError> {
        let links = &mut self.links;
        (links.parent.iter_mut().chain(&mut links.children))
            .find(|(r, _)| *r == peer)
            .map(|(_, s)| s)
            .ok_or_else(|| lost(peer, op, "not linked to this rank".into()))
    }

    fn parent(&self) -> Option<Rank> {
        self.links.parent.as_ref().map(|(r, _)| *r)
    }

    fn children(&self) -> Vec<Rank> {
        self.links.children.iter().map(|(r, _)| *r).collect()
    }

    /// Whether `root` lies in the subtree under `rank`.
    fn under(&self, rank: Rank, root: Rank) -> bool {
        self.links.shape.contains(rank, root)
    }

    /// The child whose subtree holds `root` (which lies under this rank, not at it).
    fn child_towards(&self, root: Rank) -> Rank {
        (self.children().into_iter())
            .find(|&c| self.under(c, root))
            .expect("a rank under this one lies under one of its children")
    }

    /// Blocks until the control connection of at least one of `ranks` is readable
    /// (a frame, its end, or an error) and says which are.
    ///
    /// Without liveness links a wait lasts at most the timeout. With them it lasts as
    /// long as every rank waited for shows it still runs; a rank that answers no
    /// probe for the whole timeout (counted from the start of the wait at the
    /// earliest) is lost. Probes go out only after an interval of waiting, so short
    /// waits send nothing.
    fn wait_for(&mut self, ranks: &[Rank], op: &'static str) -> Result<Vec<bool>, ControlError> {
        let started = Instant::now();
        let timeout = self.timeout;
        loop {
            let waited = started.elapsed();
            let mut step = match &self.liveness {
                Some(l) => l.interval(),
                None => timeout.saturating_sub(waited),
            };
            for &r in ranks {
                // Silent since the later of the wait's start and the last word heard.
                let silent = match self.liveness.as_ref().and_then(|l| l.silent_for(r)) {
                    Some(s) => s.min(waited),
                    None => waited,
                };
                if silent >= timeout {
                    return Err(if self.liveness.as_ref().is_some_and(|l| l.has_link(r)) {
                        lost(
                            r,
                            op,
                            format!(
                                "answered no liveness probe for {timeout:?} (stopped, or its \
                                 host frozen or unreachable?)"
                            ),
                        )
                    } else {
                        ControlError::Timeout {
                            rank: r,
                            op,
                            after: timeout,
                        }
                    });
                }
                step = step.min(timeout - silent);
            }
            let ready = {
                let mut fds = Vec::with_capacity(ranks.len());
                for &r in ranks {
                    match self.stream_of(r) {
                        Some(s) => fds.push(s),
                        None => return Err(lost(r, op, "already lost".into())),
                    }
                }
                wire::wait_readable(&fds, step.max(Duration::from_millis(1)))
                    .map_err(|e| lost(ranks[0], op, e.to_string()))?
            };
            if ready.iter().any(|&r| r) {
                return Ok(ready);
            }
            if let Some(l) = &mut self.liveness {
                for &r in ranks {
                    l.probe(r);
                }
            }
        }
    }

    /// A rank other than 0: waits for its parent's next frame, then reads it.
    fn recv_from_parent(
        &mut self,
        op: &'static str,
        kind: Kind,
        seq: u32,
    ) -> Result<Vec<u8>, ControlError> {
        let parent = self.parent().expect("only rank 0 has no parent");
        self.wait_for(&[parent], op)?;
        let timeout = self.timeout;
        Ok(self.recv(parent, op, kind, seq, timeout)?.1)
    }

    fn check_root(&self, root: Rank) -> Result<(), ControlError> {
        if root >= self.size {
            return Err(ControlError::Invalid(format!(
                "root {root} outside a job of {} ranks",
                self.size
            )));
        }
        Ok(())
    }

    /// Starts a collective: fails fast once the job is broken, counts the call.
    fn begin(&mut self, op: &'static str) -> Result<u32, ControlError> {
        if let Some((rank, detail)) = &self.failed {
            return Err(lost(*rank, op, detail.clone()));
        }
        self.seq = self.seq.wrapping_add(1);
        Ok(self.seq)
    }

    /// Turns an error into the job's failure: the neighbours hear of it (and pass
    /// it on), all but the lost rank.
    fn fail(&mut self, err: ControlError) -> ControlError {
        let (rank, detail) = match &err {
            ControlError::LostRank { rank, detail, .. } => (*rank, detail.clone()),
            ControlError::Timeout { rank, op, after } => {
                (*rank, format!("did not answer {op} within {after:?}"))
            }
            ControlError::Protocol { rank, detail } => (*rank, detail.clone()),
            ControlError::Invalid(_) => return err,
        };
        self.tell_neighbours(rank, &detail);
        self.failed = Some((rank, detail));
        err
    }

    /// The rank a broken link to `suspect` is blamed on (the rank where the
    /// failure was first detected): the rank named by `suspect`'s last word (an
    /// abort notice: it failed because of that one), followed from rank to rank;
    /// then, if the rank so found still runs (its liveness link is up: not a rank
    /// to blame for a broken link) while another rank's link closed, the rank whose
    /// link closed first.
    ///
    /// A `suspect` that is not a tree neighbour (a data-plane peer) is first looked
    /// for through the neighbour on the way to it, in what that neighbour has
    /// already said: a notice names the rank it blames, and its connection ended
    /// without one means it is gone and the failure reached `suspect` through it (a
    /// killed inner node whose subtree never left a barrier that this rank had
    /// passed, while this rank measured with one of that subtree). Only what is
    /// there already: waiting would hold this rank's own notice back while the
    /// ranks it would have told fail on their own, naming others.
    fn blame(&mut self, suspect: Rank) -> Rank {
        let mut blamed = suspect;
        let via = self.neighbour_towards(suspect);
        if via != suspect {
            match self.last_word(via, ALREADY) {
                LastWord::Ended => return via,
                LastWord::Names(named) if named != self.rank && named < self.size => blamed = named,
                _ => {}
            }
        }
        for _ in 0..self.size {
            match self.last_word(blamed, LAST_WORD) {
                LastWord::Names(next)
                    if next != blamed && next != self.rank && next < self.size =>
                {
                    blamed = next
                }
                _ => break,
            }
        }
        match &self.liveness {
            Some(l) if l.has_link(blamed) => l.first_closed().unwrap_or(blamed),
            _ => blamed,
        }
    }

    /// `rank` when it is a tree neighbour of this rank, else the neighbour on the
    /// tree's path to it.
    fn neighbour_towards(&self, rank: Rank) -> Rank {
        if self.parent() == Some(rank) || self.children().contains(&rank) {
            rank
        } else if self.under(self.rank, rank) {
            self.child_towards(rank)
        } else {
            self.parent().unwrap_or(rank)
        }
    }

    /// The last word of `rank` on its control connection: its abort notice, read
    /// for at most `wait` (a frame of a call this failing rank will not make
    /// is skipped), or the end of the connection (the process exited or was
    /// killed); [`LastWord::Silent`] where `rank` is no tree neighbour.
    fn last_word(&mut self, rank: Rank, wait: Duration) -> LastWord {
        let wait = wait.min(self.timeout);
        let deadline = Instant::now() + wait;
        let links = &mut self.links;
        let Some((_, stream)) = links
            .parent
            .iter_mut()
            .chain(&mut links.children)
            .find(|(r, _)| *r == rank)
        else {
            return LastWord::Silent;
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return LastWord::Silent;
            }
            match wire::read_frame(stream, MAX_CONTROL_PAYLOAD, left) {
                Ok((Kind::Abort, payload)) => {
                    return Abort::decode(&payload)
                        .map_or(LastWord::Silent, |a| LastWord::Names(a.rank as usize))
                }
                Ok(_) => {}
                Err(WireError::Closed | WireError::Io(_)) => return LastWord::Ended,
                Err(WireError::TimedOut(_) | WireError::Frame(_)) => return LastWord::Silent,
            }
        }
    }

    /// Sends every neighbour but `rank` an abort notice naming `rank`.
    fn tell_neighbours(&mut self, rank: Rank, detail: &str) {
        let notice = Abort {
            rank: rank as u32,
            detail: detail.to_string(),
        }
        .encode();
        let links = &mut self.links;
        for (r, s) in links.parent.iter_mut().chain(&mut links.children) {
            if *r != rank {
                let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
            }
        }
    }

    fn wire_error(&self, peer: Rank, op: &'static str, e: WireError) -> ControlError {
        match e {
            WireError::Closed => lost(
                peer,
                op,
                "connection closed (process exited or was killed)".into(),
            ),
            WireError::TimedOut(after) => ControlError::Timeout {
                rank: peer,
                op,
                after,
            },
            WireError::Io(e) => lost(peer, op, e.to_string()),
            WireError::Frame(e) => ControlError::Protocol {
                rank: peer,
                detail: e.to_string(),
            },
        }
    }

    /// Sends one control frame to `peer`, a neighbour.
    fn send(
        &mut self,
        peer: Rank,
        op: &'static str,
        kind: Kind,
        seq: u32,
        from: Rank,
        data: &[u8],
    ) -> Result<(), ControlError> {
        let payload = frame::Control {
            seq,
            rank: from as u32,
            data,
        }
        .encode();
        let timeout = self.timeout;
        let stream = self.link(peer, op)?;
        wire::write_frame(stream, kind, &payload, timeout).map_err(|e| self.wire_error(peer, op, e))
    }

    /// Reads one frame from `peer` and checks it is the expected control message.
    fn recv(
        &mut self,
        peer: Rank,
        op: &'static str,
        kind: Kind,
        seq: u32,
        timeout: Duration,
    ) -> Result<(Rank, Vec<u8>), ControlError> {
        let stream = self.link(peer, op)?;
        let (got, payload) = wire::read_frame(stream, MAX_CONTROL_PAYLOAD, timeout)
            .map_err(|e| self.wire_error(peer, op, e))?;
        if got == Kind::Abort {
            let abort = Abort::decode(&payload).map_err(|e| ControlError::Protocol {
                rank: peer,
                detail: e.to_string(),
            })?;
            // From a neighbour: its verdict on some rank (maybe itself), or that
            // rank's own last words; the first relay names itself.
            let detail = if abort.rank as usize != peer && !abort.detail.contains(RELAYED) {
                format!("{} ({RELAYED} {peer})", abort.detail)
            } else {
                abort.detail
            };
            return Err(lost(abort.rank as usize, op, detail));
        }
        if got != kind {
            return Err(ControlError::Protocol {
                rank: peer,
                detail: format!(
                    "sent a {} frame during {op} (ranks made different control calls)",
                    got.name()
                ),
            });
        }
        let msg = frame::Control::decode(&payload, kind).map_err(|e| ControlError::Protocol {
            rank: peer,
            detail: e.to_string(),
        })?;
        if msg.seq != seq {
            return Err(ControlError::Protocol {
                rank: peer,
                detail: format!(
                    "is at control call {} during {op}, this rank at {seq} (ranks made different control calls)",
                    msg.seq
                ),
            });
        }
        Ok((msg.rank as usize, msg.data.to_vec()))
    }

    /// Receives one `kind` message from every child in `from`, in whatever order
    /// they arrive, blocking in `poll` (on the parent's connection too: an abort may
    /// come down meanwhile). Returns the data in the order of `from`.
    fn collect(
        &mut self,
        from: &[Rank],
        op: &'static str,
        kind: Kind,
        seq: u32,
    ) -> Result<Vec<Vec<u8>>, ControlError> {
        let mut parts = vec![Vec::new(); from.len()];
        let mut waiting: Vec<Rank> = from.to_vec();
        while !waiting.is_empty() {
            let mut watch = waiting.clone();
            watch.extend(self.parent());
            let ready = self.wait_for(&watch, op)?;
            if let Some(parent) = self.parent().filter(|_| ready[waiting.len()]) {
                let timeout = self.timeout;
                self.recv(parent, op, kind, seq, timeout)?;
                return Err(ControlError::Protocol {
                    rank: parent,
                    detail: format!("sent its {op} frame before this rank's part"),
                });
            }
            let arrived: Vec<Rank> = waiting
                .iter()
                .zip(&ready)
                .filter(|(_, &r)| r)
                .map(|(&rank, _)| rank)
                .collect();
            for rank in arrived {
                // A frame began to arrive: all of it follows within the timeout.
                let timeout = self.timeout;
                let (claimed, data) = self.recv(rank, op, kind, seq, timeout)?;
                if claimed != rank {
                    return Err(ControlError::Protocol {
                        rank,
                        detail: format!("claims to be rank {claimed}"),
                    });
                }
                parts[from.iter().position(|&r| r == rank).expect("waited for")] = data;
                waiting.retain(|&r| r != rank);
            }
        }
        Ok(parts)
    }

    fn barrier_inner(&mut self, seq: u32) -> Result<(), ControlError> {
        const OP: &str = "barrier";
        let children = self.children();
        self.collect(&children, OP, Kind::Barrier, seq)?;
        if let Some(parent) = self.parent() {
            self.send(parent, OP, Kind::Barrier, seq, self.rank, &[])?;
            self.recv_from_parent(OP, Kind::Barrier, seq)?;
        }
        for c in children {
            self.send(c, OP, Kind::Barrier, seq, self.rank, &[])?;
        }
        Ok(())
    }

    /// Up from `root` along its ancestors to rank 0, then down to every rank that
    /// does not have the data yet (a rank on the way up passes it to its other
    /// children at once).
    fn broadcast_inner(
        &mut self,
        root: Rank,
        data: &mut Vec<u8>,
        seq: u32,
    ) -> Result<(), ControlError> {
        const OP: &str = "broadcast";
        let me = self.rank;
        if self.under(me, root) {
            if me != root {
                let from = self.child_towards(root);
                *data = self
                    .collect(&[from], OP, Kind::Broadcast, seq)?
                    .swap_remove(0);
            }
            if let Some(parent) = self.parent() {
                self.send(parent, OP, Kind::Broadcast, seq, me, data)?;
            }
        } else {
            *data = self.recv_from_parent(OP, Kind::Broadcast, seq)?;
        }
        for c in self.children() {
            if !self.under(c, root) {
                self.send(c, OP, Kind::Broadcast, seq, me, data)?;
            }
        }
        Ok(())
    }

    /// Every subtree's parts up to rank 0; the full table then down the path to
    /// `root` when that is another rank.
    fn gather_inner(
        &mut self,
        root: Rank,
        data: &[u8],
        seq: u32,
    ) -> Result<Vec<Vec<u8>>, ControlError> {
        const OP: &str = "gather";
        let me = self.rank;
        let children = self.children();
        let mut entries = encode_entry(me, data);
        for (c, part) in children
            .iter()
            .zip(self.collect(&children, OP, Kind::Gather, seq)?)
        {
            if decode_entries(&part).is_none() {
                return Err(malformed(*c, "gather part"));
            }
            entries.extend_from_slice(&part);
        }
        let table = match self.parent() {
            Some(parent) => {
                self.send(parent, OP, Kind::Gather, seq, me, &entries)?;
                if !self.under(me, root) {
                    return Ok(Vec::new());
                }
                let table = self.recv_from_parent(OP, Kind::Gather, seq)?;
                unpack(&table, self.size).ok_or_else(|| malformed(parent, "gather table"))?
            }
            None => {
                let mut table = vec![Vec::new(); self.size];
                for (rank, part) in decode_entries(&entries).expect("checked above") {
                    *table
                        .get_mut(rank)
                        .ok_or_else(|| malformed(rank, "gather part"))? = part;
                }
                table
            }
        };
        if me == root {
            return Ok(table);
        }
        let next = self.child_towards(root);
        self.send(next, OP, Kind::Gather, seq, me, &pack(&table))?;
        Ok(Vec::new())
    }
}

/// A name for the neighbour that relayed an abort notice.
const RELAYED: &str = "reported by rank";

/// One rank's part of a gather on its way up: `rank:u32, len:u32, bytes`.
fn encode_entry(rank: Rank, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + data.len());
    out.extend_from_slice(&(rank as u32).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The parts in a subtree's gather frame (`None`: malformed).
fn decode_entries(mut bytes: &[u8]) -> Option<Vec<(Rank, Vec<u8>)>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (rank, rest) = bytes.split_first_chunk::<4>()?;
        let (len, rest) = rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let part = rest.get(..len)?;
        out.push((u32::from_le_bytes(*rank) as Rank, part.to_vec()));
        bytes = &rest[len..];
    }
    Some(out)
}

fn malformed(rank: Rank, what: &str) -> ControlError {
    ControlError::Protocol {
        rank,
        detail: format!("malformed {what}"),
    }
}

fn lost(rank: Rank, op: &'static str, detail: String) -> ControlError {
    ControlError::LostRank { rank, op, detail }
}

impl Control for TcpControl {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&mut self) -> Result<(), ControlError> {
        let seq = self.begin("barrier")?;
        self.barrier_inner(seq).map_err(|e| self.fail(e))
    }

    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        self.check_root(root)?;
        let seq = self.begin("broadcast")?;
        self.broadcast_inner(root, data, seq)
            .map_err(|e| self.fail(e))
    }

    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        self.check_root(root)?;
        let seq = self.begin("gather")?;
        self.gather_inner(root, data, seq).map_err(|e| self.fail(e))
    }

    fn abort(&mut self, suspect: Option<Rank>, reason: &str) -> Rank {
        if let Some((rank, _)) = &self.failed {
            return *rank;
        }
        let blamed = match suspect {
            Some(s) if s != self.rank && s < self.size => self.blame(s),
            _ => self.rank,
        };
        let detail = if blamed == self.rank {
            format!("failed: {reason}")
        } else {
            format!("rank {} failed after losing it: {reason}", self.rank)
        };
        self.tell_neighbours(blamed, &detail);
        self.failed = Some((blamed, detail));
        blamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A job of `size` ranks over loopback TCP, one control per rank.
    fn star(size: usize, timeout: Duration) -> Vec<TcpControl> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut leaves = Vec::new();
        let mut streams = vec![None];
        for rank in 1..size {
            let c = TcpStream::connect(addr).unwrap();
            let (s, _) = listener.accept().unwrap();
            streams.push(Some(s));
            leaves.push(TcpControl::leaf(rank, size, c, timeout));
        }
        let mut all = vec![TcpControl::root(streams, timeout)];
        all.extend(leaves);
        all
    }

    fn run_all<T: Send + 'static>(
        controls: Vec<TcpControl>,
        body: impl Fn(&mut TcpControl) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let body = std::sync::Arc::new(body);
        let handles: Vec<_> = controls
            .into_iter()
            .map(|mut c| {
                let body = body.clone();
                std::thread::spawn(move || body(&mut c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn collectives_deliver_the_right_data() {
        let results = run_all(star(4, Duration::from_secs(10)), |c| {
            c.barrier().unwrap();
            let r = c.rank();
            let mut b = if r == 2 {
                b"from two".to_vec()
            } else {
                Vec::new()
            };
            c.broadcast(2, &mut b).unwrap();
            assert_eq!(b, b"from two");
            let mut b0 = if r == 0 { vec![7; 100_000] } else { Vec::new() };
            c.broadcast(0, &mut b0).unwrap();
            assert_eq!(b0, vec![7; 100_000]);
            let g = c.gather(3, &[r as u8; 3]).unwrap();
            if r == 3 {
                assert_eq!(g, (0..4).map(|i| vec![i as u8; 3]).collect::<Vec<_>>());
            } else {
                assert!(g.is_empty());
            }
            let all = c.allgather(&[r as u8]).unwrap();
            assert_eq!(all, vec![vec![0], vec![1], vec![2], vec![3]]);
            c.barrier().unwrap();
            r
        });
        assert_eq!(results, [0, 1, 2, 3]);
    }

    #[test]
    fn a_lost_rank_is_named_on_every_survivor() {
        let mut controls = star(4, Duration::from_secs(10));
        let dead = controls.remove(2); // rank 2
        drop(dead);
        let errors = run_all(controls, |c| c.barrier().unwrap_err().to_string());
        for e in errors {
            assert!(e.contains("lost rank 2"), "{e}");
        }
    }

    #[test]
    fn an_aborting_rank_is_named_with_its_reason() {
        let errors = run_all(star(3, Duration::from_secs(10)), |c| {
            if c.rank() == 1 {
                c.abort(None, "disk on fire");
                String::new()
            } else {
                c.barrier().unwrap_err().to_string()
            }
        });
        for e in [&errors[0], &errors[2]] {
            assert!(
                e.contains("lost rank 1") && e.contains("disk on fire"),
                "{e}"
            );
        }
        assert!(errors[2].contains("reported by rank 0"), "{}", errors[2]);
        let errors = run_all(star(2, Duration::from_secs(10)), |c| {
            if c.rank() == 0 {
                c.abort(None, "bad fit");
                String::new()
            } else {
                c.barrier().unwrap_err().to_string()
            }
        });
        assert!(
            errors[1].contains("lost rank 0") && errors[1].contains("bad fit"),
            "{}",
            errors[1]
        );
    }

    #[test]
    fn mismatched_calls_are_protocol_errors() {
        let errors = run_all(star(2, Duration::from_secs(10)), |c| {
            if c.rank() == 0 {
                c.barrier().err().map(|e| e.to_string())
            } else {
                c.gather(0, b"x").err().map(|e| e.to_string())
            }
        });
        assert!(
            errors[0].as_deref().unwrap_or("").contains("gather"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_silent_rank_times_out() {
        let mut controls = star(2, Duration::from_millis(200));
        let _silent = controls.pop();
        let err = controls[0].barrier().unwrap_err();
        assert!(
            matches!(err, ControlError::Timeout { rank: 1, .. }),
            "{err}"
        );
        // And the job stays failed.
        assert!(controls[0].barrier().is_err());
    }

    /// Liveness links between rank 0 and each leaf; a leaf in `stopped` keeps its
    /// end of the link but runs no thread to answer (as if stopped with SIGSTOP).
    fn with_liveness(controls: &mut [TcpControl], stopped: &[Rank], keep: &mut Vec<TcpStream>) {
        let interval = super::super::liveness::probe_interval(controls[0].timeout);
        let size = controls.len();
        let mut root_links: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        for (rank, c) in controls.iter_mut().enumerate().skip(1) {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (b, _) = l.accept().unwrap();
            root_links[rank] = Some(a);
            if stopped.contains(&rank) {
                keep.push(b);
            } else {
                let mut links: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
                links[0] = Some(b);
                c.set_liveness(Liveness::start(links, interval, vec![]).unwrap());
            }
        }
        controls[0].set_liveness(Liveness::start(root_links, interval, vec![]).unwrap());
    }

    #[test]
    fn issue18_a_busy_rank_does_not_time_out_the_ranks_waiting_for_it() {
        let timeout = Duration::from_millis(300);
        let mut controls = star(3, timeout);
        let mut keep = Vec::new();
        with_liveness(&mut controls, &[], &mut keep);
        // Rank 1 "measures" for 4 timeouts before it joins the barrier; rank 2 and
        // rank 0 wait for it, and then rank 2 waits on rank 0 which is busy too.
        let results = run_all(controls, move |c| {
            if c.rank() == 1 {
                std::thread::sleep(timeout * 4);
            }
            c.barrier().map_err(|e| e.to_string())?;
            if c.rank() == 0 {
                std::thread::sleep(timeout * 4);
            }
            c.barrier().map_err(|e| e.to_string())
        });
        for r in results {
            r.unwrap();
        }
    }

    #[test]
    fn issue18_a_stopped_rank_is_named_within_the_timeout() {
        let timeout = Duration::from_millis(400);
        let mut controls = star(3, timeout);
        let mut keep = Vec::new();
        with_liveness(&mut controls, &[2], &mut keep);
        let _stopped = controls.pop().unwrap();
        let started = Instant::now();
        let errors = run_all(controls, |c| c.barrier().unwrap_err().to_string());
        let took = started.elapsed();
        for e in errors {
            assert!(e.contains("lost rank 2") && e.contains("liveness"), "{e}");
        }
        assert!(took >= timeout, "{took:?}");
        assert!(took < timeout * 3, "named after {took:?}");
    }

    /// A job of `size` ranks linked as the binomial tree, over loopback TCP.
    fn binomial(size: usize, timeout: Duration) -> Vec<TcpControl> {
        let shape = Shape::Binomial;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut children: Vec<Vec<(Rank, TcpStream)>> = (0..size).map(|_| Vec::new()).collect();
        let parents: Vec<Option<(Rank, TcpStream)>> = (0..size)
            .map(|rank| {
                let parent = shape.parent(rank)?;
                let up = TcpStream::connect(addr).unwrap();
                children[parent].push((rank, listener.accept().unwrap().0));
                Some((parent, up))
            })
            .collect();
        (parents.into_iter().zip(children).enumerate())
            .map(|(rank, (parent, children))| {
                let links = Links {
                    shape,
                    parent,
                    children,
                };
                TcpControl::new(rank, size, links, timeout)
            })
            .collect()
    }

    #[test]
    fn issue34_collectives_over_the_binomial_tree_deliver_from_every_root() {
        let size = 13;
        let results = run_all(binomial(size, Duration::from_secs(20)), move |c| {
            let r = c.rank();
            for root in 0..size {
                c.barrier().unwrap();
                let mut b = if r == root {
                    vec![root as u8; 70_000]
                } else {
                    Vec::new()
                };
                c.broadcast(root, &mut b).unwrap();
                assert_eq!(b, vec![root as u8; 70_000], "broadcast from {root} at {r}");
                let g = c.gather(root, &[r as u8, root as u8]).unwrap();
                if r == root {
                    let want: Vec<Vec<u8>> = (0..size).map(|i| vec![i as u8, root as u8]).collect();
                    assert_eq!(g, want, "gather to {root}");
                } else {
                    assert!(g.is_empty());
                }
            }
            let all = c.allgather(&[r as u8]).unwrap();
            assert_eq!(all, (0..size).map(|i| vec![i as u8]).collect::<Vec<_>>());
            r
        });
        assert_eq!(results, (0..size).collect::<Vec<_>>());
    }

    #[test]
    fn issue34_a_lost_leaf_or_inner_rank_is_named_on_every_survivor_of_the_tree() {
        // 15 is a leaf; 2 relays for 6, 10 and 14.
        for dead in [15, 2] {
            let mut controls = binomial(16, Duration::from_secs(20));
            drop(controls.remove(dead));
            let errors = run_all(controls, |c| c.barrier().unwrap_err().to_string());
            assert_eq!(errors.len(), 15);
            for e in errors {
                assert!(e.contains(&format!("lost rank {dead} ")), "{dead}: {e}");
            }
        }
    }

    /// Rank 0 measures with rank 14 when rank 14 leaves: it is not linked to 14 and
    /// hears it through rank 2, the neighbour on the way. Rank 2 killed (its
    /// connection ends without a notice: 14's subtree lost it, the failure began
    /// there) is blamed; rank 2 alive, saying it failed after losing 14, leaves
    /// the blame on 14.
    #[test]
    fn issue34_a_suspect_that_is_no_neighbour_is_heard_through_the_tree() {
        let mut controls = binomial(16, Duration::from_secs(20));
        drop(controls.remove(2));
        let blamed = controls[0].abort(Some(14), "tcp: rank 14 closed the connection");
        assert_eq!(blamed, 2);

        let mut controls = binomial(16, Duration::from_secs(20));
        let mut two = controls.remove(2);
        assert_eq!(two.abort(Some(14), "lost rank 14"), 14);
        let blamed = controls[0].abort(Some(14), "tcp: rank 14 closed the connection");
        assert_eq!(blamed, 14);
    }

    #[test]
    fn bad_roots_are_invalid() {
        let mut c = star(1, Duration::from_secs(1)).pop().unwrap();
        assert!(matches!(c.gather(1, b""), Err(ControlError::Invalid(_))));
        assert_eq!(c.gather(0, b"me").unwrap(), vec![b"me".to_vec()]);
    }

    #[test]
    fn pack_roundtrip() {
        let parts = vec![b"abc".to_vec(), Vec::new()];
        assert_eq!(unpack(&pack(&parts), 2), Some(parts));
        assert_eq!(unpack(&[1, 0, 0], 1), None);
    }
}
