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
//! Waits block in the kernel and are bounded by the job's `--timeout`: every rank
//! must enter each collective within that time of the others.

use super::frame::{self, Abort, Kind, MAX_CONTROL_PAYLOAD};
use super::wire::{self, WireError};
use ngauge_transport::{pack, unpack, Control, ControlError, Rank};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long rank 0 tries to deliver an abort notice to a surviving rank.
const ABORT_WRITE: Duration = Duration::from_millis(500);

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
        TcpControl {
            rank: 0,
            size: streams.len(),
            timeout,
            seq: 0,
            links: Links::Root(streams),
            failed: None,
        }
    }

    /// Rank `rank`'s side: `stream` is its connection to rank 0.
    pub fn leaf(rank: Rank, size: usize, stream: TcpStream, timeout: Duration) -> Self {
        TcpControl {
            rank,
            size,
            timeout,
            seq: 0,
            links: Links::Leaf(stream),
            failed: None,
        }
    }

    fn lost(&self, rank: Rank, op: &'static str, detail: String) -> ControlError {
        ControlError::LostRank { rank, op, detail }
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
            return Err(self.lost(*rank, op, detail.clone()));
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

    fn wire_error(&self, peer: Rank, op: &'static str, e: WireError) -> ControlError {
        match e {
            WireError::Closed => self.lost(
                peer,
                op,
                "connection closed (process exited or was killed)".into(),
            ),
            WireError::TimedOut(after) => ControlError::Timeout {
                rank: peer,
                op,
                after,
            },
            WireError::Io(e) => self.lost(peer, op, e.to_string()),
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
        let stream = match &mut self.links {
            Links::Leaf(s) => s,
            Links::Root(streams) => match streams.get_mut(peer).and_then(Option::as_mut) {
                Some(s) => s,
                None => return Err(self.lost(peer, op, "already lost".into())),
            },
        };
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
        let stream = match &mut self.links {
            Links::Leaf(s) => s,
            Links::Root(streams) => match streams.get_mut(peer).and_then(Option::as_mut) {
                Some(s) => s,
                None => return Err(self.lost(peer, op, "already lost".into())),
            },
        };
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
            return Err(self.lost(abort.rank as usize, op, detail));
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
        let deadline = Instant::now() + self.timeout;
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout {
                    rank: waiting[0],
                    op,
                    after: self.timeout,
                });
            }
            let ready = {
                let Links::Root(streams) = &self.links else {
                    unreachable!("collect runs on rank 0 only")
                };
                let mut fds = Vec::with_capacity(waiting.len());
                for &r in &waiting {
                    match streams.get(r).and_then(Option::as_ref) {
                        Some(s) => fds.push(s),
                        None => return Err(self.lost(r, op, "already lost".into())),
                    }
                }
                wire::wait_readable(&fds, left)
                    .map_err(|e| self.lost(waiting[0], op, e.to_string()))?
            };
            let arrived: Vec<Rank> = waiting
                .iter()
                .zip(&ready)
                .filter(|(_, &r)| r)
                .map(|(&rank, _)| rank)
                .collect();
            for rank in arrived {
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(100));
                let (claimed, data) = self.recv(rank, op, kind, seq, left)?;
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
            self.recv(0, OP, Kind::Barrier, seq, self.timeout)?;
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
            let timeout = self.timeout;
            *data = self.recv(0, OP, Kind::Broadcast, seq, timeout)?.1;
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
            let timeout = self.timeout;
            let packed = self.recv(0, OP, Kind::Gather, seq, timeout)?.1;
            unpack(&packed, self.size).ok_or_else(|| ControlError::Protocol {
                rank: 0,
                detail: "malformed gather table".into(),
            })
        }
    }
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

    fn abort(&mut self, reason: &str) {
        if self.failed.is_some() {
            return;
        }
        let notice = Abort {
            rank: self.rank as u32,
            detail: format!("failed: {reason}"),
        }
        .encode();
        match &mut self.links {
            Links::Leaf(s) => {
                let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
            }
            Links::Root(streams) => {
                for s in streams.iter_mut().flatten() {
                    let _ = wire::write_frame(s, Kind::Abort, &notice, ABORT_WRITE);
                }
            }
        }
        self.failed = Some((self.rank, format!("failed: {reason}")));
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
                c.abort("disk on fire");
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
                c.abort("bad fit");
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
