//! An in-process transport and control plane: ranks are threads, links are channels.
//!
//! This is the deterministic fake for unit tests of patterns, clock sync and
//! collective schedules (the role smoltcp's loopback device plays). It is reliable and
//! ordered, checks message sizes, and never needs a socket. [`world`] builds one
//! connected `(InprocTransport, InprocControl)` pair per rank; move each into its own
//! thread.

use crate::control::{Control, ControlError};
use crate::error::TransportError;
use crate::pool::{Access, BufferPool, Buffers};
use crate::transport::{Capabilities, Rank, Region, RequestId, Transport, WaitMode};
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

const NAME: &str = "inproc";

/// Builds a job of `size` ranks connected all-to-all.
pub fn world(size: usize) -> Vec<(InprocTransport, InprocControl)> {
    let data = mesh(size);
    let control = mesh(size);
    data.into_iter()
        .zip(control)
        .enumerate()
        .map(|(rank, ((data_tx, data_rx), (ctl_tx, ctl_rx)))| {
            (
                InprocTransport {
                    rank,
                    size,
                    to: data_tx,
                    from: data_rx,
                    pool: BufferPool::new(NAME),
                    next_request: 0,
                    pending_recvs: vec![VecDeque::new(); size],
                    requests: HashMap::new(),
                },
                InprocControl {
                    rank,
                    size,
                    to: ctl_tx,
                    from: ctl_rx,
                },
            )
        })
        .collect()
}

type Links = (Vec<Option<Sender<Vec<u8>>>>, Vec<Option<Receiver<Vec<u8>>>>);

/// `size` ranks' senders to and receivers from every other rank (`None` for self).
fn mesh(size: usize) -> Vec<Links> {
    let mut links: Vec<Links> = (0..size)
        .map(|_| {
            (
                (0..size).map(|_| None).collect(),
                (0..size).map(|_| None).collect(),
            )
        })
        .collect();
    for from in 0..size {
        for to in 0..size {
            if from != to {
                let (tx, rx) = channel();
                links[from].0[to] = Some(tx);
                links[to].1[from] = Some(rx);
            }
        }
    }
    links
}

#[derive(Debug, Clone, Copy)]
enum Pending {
    SendDone,
    Recv { peer: Rank, region: Region },
    RecvDone,
}

/// One rank's end of the in-process data plane.
#[derive(Debug)]
pub struct InprocTransport {
    rank: Rank,
    size: usize,
    to: Vec<Option<Sender<Vec<u8>>>>,
    from: Vec<Option<Receiver<Vec<u8>>>>,
    pool: BufferPool,
    next_request: u64,
    /// Posted receives per peer, in posting order (matching is FIFO per peer).
    pending_recvs: Vec<VecDeque<RequestId>>,
    requests: HashMap<RequestId, Pending>,
}

impl InprocTransport {
    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        crate::util::check_peer(NAME, peer, self.rank, self.size)
    }

    fn closed(peer: Rank, op: &'static str) -> TransportError {
        TransportError::PeerClosed {
            transport: NAME,
            peer,
            op,
        }
    }

    fn deliver(
        &mut self,
        peer: Rank,
        region: Region,
        message: Vec<u8>,
    ) -> Result<(), TransportError> {
        if message.len() != region.len {
            return Err(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: region.len,
                got_bytes: message.len(),
            });
        }
        self.pool.region_mut(region)?.copy_from_slice(&message);
        Ok(())
    }

    fn new_request(&mut self, pending: Pending) -> RequestId {
        let id = RequestId(self.next_request);
        self.next_request += 1;
        self.requests.insert(id, pending);
        id
    }

    /// Matches arrived messages from `peer` to its posted receives, in order. A
    /// receive that fails (the wrong size, a peer that has gone) is forgotten and
    /// gives its bytes back.
    fn progress(&mut self, peer: Rank, block_for_first: bool) -> Result<(), TransportError> {
        let mut block = block_for_first;
        while let Some(&request) = self.pending_recvs[peer].front() {
            let rx = self.from[peer].as_ref().expect("checked peer");
            let message = if block {
                block = false;
                rx.recv().ok()
            } else {
                match rx.try_recv() {
                    Ok(message) => Some(message),
                    Err(TryRecvError::Empty) => return Ok(()),
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            let Some(Pending::Recv { region, .. }) = self.requests.get(&request).copied() else {
                unreachable!("pending_recvs holds only receive requests");
            };
            self.pending_recvs[peer].pop_front();
            self.pool.release_region(region, Access::Write);
            let delivered = match message {
                Some(message) => self.deliver(peer, region, message),
                None => Err(Self::closed(peer, "recv")),
            };
            if let Err(e) = delivered {
                self.requests.remove(&request);
                return Err(e);
            }
            self.requests.insert(request, Pending::RecvDone);
        }
        Ok(())
    }
}

impl Transport for InprocTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            max_message_bytes: None,
            may_split: false,
            needs_registered_memory: false,
            checks_message_size: true,
        }
    }
    fn wait_mode(&self) -> WaitMode {
        WaitMode::Block
    }
    fn buffers(&self) -> &dyn Buffers {
        &self.pool
    }
    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.pool
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        self.check_peer(peer)?;
        let message = self.pool.region_for_read(region)?.to_vec();
        self.to[peer]
            .as_ref()
            .expect("checked peer")
            .send(message)
            .map_err(|_| Self::closed(peer, "send"))
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let request = self.irecv(peer, region)?;
        self.wait(request)
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.send(peer, region)?;
        Ok(self.new_request(Pending::SendDone))
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        self.pool.acquire_write(region)?;
        let request = self.new_request(Pending::Recv { peer, region });
        self.pending_recvs[peer].push_back(request);
        Ok(request)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        let state = *self
            .requests
            .get(&request)
            .ok_or(TransportError::UnknownRequest {
                transport: NAME,
                request,
            })?;
        if let Pending::Recv { peer, .. } = state {
            self.progress(peer, false)?;
        }
        match self.requests[&request] {
            Pending::SendDone | Pending::RecvDone => {
                self.requests.remove(&request);
                Ok(true)
            }
            Pending::Recv { .. } => Ok(false),
        }
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        loop {
            if self.test(request)? {
                return Ok(());
            }
            if let Some(Pending::Recv { peer, .. }) = self.requests.get(&request).copied() {
                self.progress(peer, true)?;
            }
        }
    }
}

/// One rank's end of the in-process control plane (rank 0 is the hub).
#[derive(Debug)]
pub struct InprocControl {
    rank: Rank,
    size: usize,
    to: Vec<Option<Sender<Vec<u8>>>>,
    from: Vec<Option<Receiver<Vec<u8>>>>,
}

impl InprocControl {
    fn send_to(&self, peer: Rank, op: &'static str, data: Vec<u8>) -> Result<(), ControlError> {
        self.to[peer]
            .as_ref()
            .expect("peer is another rank")
            .send(data)
            .map_err(|_| lost(peer, op))
    }

    fn recv_from(&self, peer: Rank, op: &'static str) -> Result<Vec<u8>, ControlError> {
        self.from[peer]
            .as_ref()
            .expect("peer is another rank")
            .recv()
            .map_err(|_| lost(peer, op))
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
}

fn lost(rank: Rank, op: &'static str) -> ControlError {
    ControlError::LostRank {
        rank,
        op,
        detail: "its thread has ended".into(),
    }
}

impl Control for InprocControl {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn barrier(&mut self) -> Result<(), ControlError> {
        self.gather(0, &[])?;
        self.broadcast(0, &mut Vec::new())
    }
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<(), ControlError> {
        self.check_root(root)?;
        if self.rank == root {
            for peer in (0..self.size).filter(|&p| p != root) {
                self.send_to(peer, "broadcast", data.clone())?;
            }
        } else {
            *data = self.recv_from(root, "broadcast")?;
        }
        Ok(())
    }
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Vec<Vec<u8>>, ControlError> {
        self.check_root(root)?;
        if self.rank != root {
            self.send_to(root, "gather", data.to_vec())?;
            return Ok(Vec::new());
        }
        (0..self.size)
            .map(|peer| {
                if peer == root {
                    Ok(data.to_vec())
                } else {
                    self.recv_from(peer, "gather")
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn run<T: Send + 'static>(
        size: usize,
        body: impl Fn(InprocTransport, InprocControl) -> T + Send + Sync + Copy + 'static,
    ) -> Vec<T> {
        let handles: Vec<_> = world(size)
            .into_iter()
            .map(|(t, c)| thread::spawn(move || body(t, c)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn pingpong_moves_bytes_and_checks_size() {
        let results = run(2, |mut t, _| {
            let buf = t.alloc_buffer(4).unwrap();
            if t.rank() == 0 {
                t.buffer_mut(buf).unwrap().copy_from_slice(b"ping");
                t.send(1, buf.prefix(4)).unwrap();
                t.recv(1, buf.prefix(4)).unwrap();
                let err = t.recv(1, buf.prefix(4)).unwrap_err();
                assert!(matches!(
                    err,
                    TransportError::SizeMismatch { got_bytes: 2, .. }
                ));
            } else {
                t.recv(0, buf.prefix(4)).unwrap();
                t.buffer_mut(buf).unwrap()[..2].copy_from_slice(b"PO");
                t.send(0, buf.prefix(4)).unwrap();
                t.send(0, buf.prefix(2)).unwrap();
            }
            t.buffer(buf).unwrap().to_vec()
        });
        assert_eq!(results[0], b"POng");
    }

    #[test]
    fn nonblocking_receives_match_in_posting_order() {
        let results = run(2, |mut t, _| {
            let buf = t.alloc_buffer(2).unwrap();
            if t.rank() == 0 {
                for byte in [7u8, 9] {
                    t.buffer_mut(buf).unwrap()[0] = byte;
                    let r = t.isend(1, buf.prefix(1)).unwrap();
                    t.wait(r).unwrap();
                }
                vec![]
            } else {
                let first = t.irecv(0, buf.region(0, 1)).unwrap();
                let second = t.irecv(0, buf.region(1, 1)).unwrap();
                assert!(t.buffer(buf).is_err(), "busy while receiving");
                t.wait_all(&[second, first]).unwrap();
                assert!(matches!(
                    t.test(first),
                    Err(TransportError::UnknownRequest { .. })
                ));
                t.buffer(buf).unwrap().to_vec()
            }
        });
        assert_eq!(results[1], vec![7, 9]);
    }

    #[test]
    fn control_collectives_agree() {
        let results = run(4, |_, mut c| {
            c.barrier().unwrap();
            let mut data = if c.rank() == 2 {
                b"hi".to_vec()
            } else {
                vec![]
            };
            c.broadcast(2, &mut data).unwrap();
            let all = c.allgather(&[c.rank() as u8]).unwrap();
            (data, all)
        });
        for (data, all) in results {
            assert_eq!(data, b"hi");
            assert_eq!(all, vec![vec![0], vec![1], vec![2], vec![3]]);
        }
    }

    #[test]
    fn keeps_the_transport_contract() {
        let profile = crate::conformance::Profile {
            modes: vec![WaitMode::Block],
            timeout: std::time::Duration::from_secs(10),
            short_timeout: None,
            timeouts_keep_requests: false,
            reports_closed_peers: true,
        };
        crate::conformance::run_threads(&profile, |s| crate::conformance::ready(world(s.ranks)))
            .assert_passed();
    }

    #[test]
    fn dead_peer_is_named() {
        let mut ranks = world(2);
        let (_, c1) = ranks.pop().unwrap();
        drop(c1);
        let (mut t0, mut c0) = ranks.pop().unwrap();
        let err = c0.barrier().unwrap_err();
        assert!(err.to_string().contains("rank 1"), "{err}");
        let buf = t0.alloc_buffer(1).unwrap();
        assert!(t0.send(0, buf.prefix(1)).is_err(), "self is no peer");
    }
}
