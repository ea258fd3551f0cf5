//! The control channel over the rendezvous connections: a star through rank 0.
//!
//! Every collective is a round through rank 0: the other ranks send their part to
//! rank 0 and (where the operation needs it) wait for rank 0's answer. Rank 0 waits
//! for the parts with one blocking `poll` over the connections it still expects, so a
//! rank that dies is noticed as soon as the kernel sees its connection close, in
//! whatever order the ranks arrive. Every frame carries a sequence number counted
//! alike on all ranks, so a rank that makes a different call is a protocol error,
//! not a silent mix-up.
//!
//! When rank 0 loses a rank it sends every surviving rank an `Abort` frame naming
//! the lost one before returning its error, so that every rank's error names the rank
//! that actually died, not just "rank 0 went away".
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
use ngauge_transport::{pack, unpack, Control, ControlError, Rank};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long rank 0 tries to deliver an abort notice to a surviving rank.
const ABORT_WRITE: Duration = Duration::from_millis(500);
/// How long a failing rank waits for the last word (an abort notice, or the end of
/// its connection) of a rank whose link broke, to learn whether that rank failed
/// because of another (at most the job's timeout).
const LAST_WORD: Duration = Duration::from_secs(1);

enum Links {
    /// Rank 0: one connection per other rank (`None` at index 0 and for lost ranks).
    Root(Vec<Option<TcpStream>>),
    /// Any other rank: the connection to rank 0.
    Leaf(TcpStream),
}

/// [`Control`] over TCP connections to rank 0.
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
    /// Rank 0's side: `streams[r]` is rank r's connection (`None` at 0).
    pub fn root(streams: Vec<Option<TcpStream>>, timeout: Duration) -> Self {
        Self::new(0, streams.len(), Links::Root(streams), timeout)
    }

    /// Rank `rank`'s side: `stream` is its connection to rank 0.
    pub fn leaf(rank: Rank, size: usize, stream: TcpStream, timeout: Duration) -> Self {
        Self::new(rank, size, Links::Leaf(stream), timeout)
    }

    fn new(rank: Rank, size: usize, links: Links, timeout: Duration) -> Self {
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

    /// The control connection to `rank` (rank 0: to any other; others: to 0).
    fn stream_of(&self, rank: Rank) -> Option<&TcpStream> {
        match &self.links {
            Links::Leaf(s) => (rank == 0).then_some(s),
            Links::Root(streams) => streams.get(rank).and_then(Option::as_ref),
        }
    }

    /// The connection a frame to or from `peer` goes over (a leaf has one).
    fn link(&mut self, peer: Rank, op: &'static str) -> Result<&mut TcpStream, ControlError> {
        match &mut self.links {
            Links::Leaf(s) => Ok(s),
            Links::Root(streams) => (streams.get_mut(peer).and_then(Option::as_mut))
                .ok_or_else(|| lost(peer, op, "already lost".into())),
        }
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

    /// A rank other than 0: waits for rank 0's next frame, then reads it.
    fn recv_from_root(
        &mut self,
        op: &'static str,
        kind: Kind,
        seq: u32,
    ) -> Result<(Rank, Vec<u8>), ControlError> {
        self.wait_for(&[0], op)?;
        let timeout = self.timeout;
        self.recv(0, op, kind, seq, timeout)
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

    /// Turns an error into the job's failure: rank 0 tells every survivor.
    fn fail(&mut self, err: ControlError) -> ControlError {
        let (rank, detail) = match &err {
            ControlError::LostRank { rank, detail, .. } => (*rank, detail.clone()),
            ControlError::Timeout { rank, op, after } => {
                (*rank, format!("did not answer {op} within {after:?}"))
            }
            ControlError::Protocol { rank, detail } => (*rank, detail.clone()),
            ControlError::Invalid(_) => return err,
        };
        if let Links::Root(streams) = &mut self.links {
            let notice = Abort {
                rank: rank as u32,
                detail: detail.clone(),
            }
            .encode();
            for (r, s) in streams.iter_mut().enumerate() {
                if r != rank {
                    if let Some(s) = s {
                        let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
                    }
                }
            }
        }
        self.failed = Some((rank, detail));
        err
    }

    /// The rank a broken link to `suspect` is blamed on (the rank where the
    /// failure was first detected): the rank named by `suspect`'s last word (an
    /// abort notice: it failed because of that one), followed from rank to rank;
    /// then, if the rank so found still runs (its liveness link is up: not a rank
    /// to blame for a broken link) while another rank's link closed, the rank whose
    /// link closed first.
    fn blame(&mut self, suspect: Rank) -> Rank {
        let mut blamed = suspect;
        for _ in 0..self.size {
            match self.last_word(blamed) {
                Some(next) if next != blamed && next != self.rank && next < self.size => {
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

    /// The rank `rank`'s abort notice names, read from its control connection (a
    /// frame of a call this failing rank will not make is skipped); `None` when
    /// the connection ends (the process was killed), fails, or brings no notice
    /// within [`LAST_WORD`]. Only rank 0 hears every rank; another rank only 0.
    fn last_word(&mut self, rank: Rank) -> Option<Rank> {
        let wait = LAST_WORD.min(self.timeout);
        let deadline = Instant::now() + wait;
        let stream = match &mut self.links {
            Links::Leaf(s) => (rank == 0).then_some(s)?,
            Links::Root(streams) => streams.get_mut(rank)?.as_mut()?,
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match wire::read_frame(stream, MAX_CONTROL_PAYLOAD, left) {
                Ok((Kind::Abort, payload)) => {
                    return Abort::decode(&payload).ok().map(|a| a.rank as usize)
                }
                Ok(_) => {}
                Err(_) => return None,
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

    /// Sends one control frame to `peer` (rank 0) or from rank 0 to `peer`.
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
            // From rank 0: its verdict on some rank (maybe itself). From another
            // rank: that rank's own last words.
            let detail = if peer == 0 && abort.rank != 0 {
                format!("{} (reported by rank 0)", abort.detail)
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

    /// Rank 0: receives one `kind` message from every rank in `from`, in whatever
    /// order they arrive, blocking in `poll`. Returns the data indexed by rank.
    fn collect(
        &mut self,
        from: &[Rank],
        op: &'static str,
        kind: Kind,
        seq: u32,
    ) -> Result<Vec<Vec<u8>>, ControlError> {
        let mut parts = vec![Vec::new(); self.size];
        let mut waiting: Vec<Rank> = from.to_vec();
        while !waiting.is_empty() {
            let ready = self.wait_for(&waiting, op)?;
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
                parts[rank] = data;
                waiting.retain(|&r| r != rank);
            }
        }
        Ok(parts)
    }

    fn others(&self) -> Vec<Rank> {
        (1..self.size).collect()
    }

    fn barrier_inner(&mut self, seq: u32) -> Result<(), ControlError> {
        const OP: &str = "barrier";
        if self.size == 1 {
            return Ok(());
        }
        if self.rank == 0 {
            self.collect(&self.others(), OP, Kind::Barrier, seq)?;
            for r in 1..self.size {
                self.send(r, OP, Kind::Barrier, seq, 0, &[])?;
            }
        } else {
            self.send(0, OP, Kind::Barrier, seq, self.rank, &[])?;
            self.recv_from_root(OP, Kind::Barrier, seq)?;
        }
        Ok(())
    }

    fn broadcast_inner(
        &mut self,
        root: Rank,
        data: &mut Vec<u8>,
        seq: u32,
    ) -> Result<(), ControlError> {
        const OP: &str = "broadcast";
        if self.size == 1 {
            return Ok(());
        }
        if self.rank == 0 {
            if root != 0 {
                *data = self
                    .collect(&[root], OP, Kind::Broadcast, seq)?
                    .swap_remove(root);
            }
            for r in (1..self.size).filter(|&r| r != root) {
                self.send(r, OP, Kind::Broadcast, seq, root, data)?;
            }
        } else if self.rank == root {
            self.send(0, OP, Kind::Broadcast, seq, root, data)?;
        } else {
            *data = self.recv_from_root(OP, Kind::Broadcast, seq)?.1;
        }
        Ok(())
    }

    fn gather_inner(
        &mut self,
        root: Rank,
        data: &[u8],
        seq: u32,
    ) -> Result<Vec<Vec<u8>>, ControlError> {
        const OP: &str = "gather";
        if self.size == 1 {
            return Ok(vec![data.to_vec()]);
        }
        if self.rank == 0 {
            let mut parts = self.collect(&self.others(), OP, Kind::Gather, seq)?;
            parts[0] = data.to_vec();
            if root == 0 {
                return Ok(parts);
            }
            self.send(root, OP, Kind::Gather, seq, 0, &pack(&parts))?;
            Ok(Vec::new())
        } else {
            self.send(0, OP, Kind::Gather, seq, self.rank, data)?;
            if self.rank != root {
                return Ok(Vec::new());
            }
            let packed = self.recv_from_root(OP, Kind::Gather, seq)?.1;
            unpack(&packed, self.size).ok_or_else(|| ControlError::Protocol {
                rank: 0,
                detail: "malformed gather table".into(),
            })
        }
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
        let notice = Abort {
            rank: blamed as u32,
            detail: detail.clone(),
        }
        .encode();
        match &mut self.links {
            Links::Leaf(s) => {
                let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
            }
            Links::Root(streams) => {
                for (r, s) in streams.iter_mut().enumerate() {
                    if let Some(s) = s.as_mut().filter(|_| r != blamed) {
                        let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
                    }
                }
            }
        }
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
