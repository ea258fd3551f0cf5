//! Waiting: retires finished requests, makes progress by polling the completion
//! queue (spinning, then yielding) or sleeping on the completion channel, and,
//! when a wait runs out, names only the peers that made no progress for the
//! whole timeout ([`crate::layout::stale_peers`]).

use super::memory::access;
use super::{rc_error, State, VerbsTransport, NAME};
use crate::layout;
use ngauge_transport::{Rank, RequestId, TransportError, WaitMode};
use rdma_sys::*;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

/// How long a polling wait spins without progress before it starts yielding.
const SPIN_BEFORE_YIELD: Duration = Duration::from_micros(20);
/// Completion events received before they are acknowledged together.
const EVENTS_PER_ACK: u32 = 32;

impl VerbsTransport {
    /// Retires `id` if it finished: `Some(result)`; `None` while pending.
    pub(super) fn try_retire(&mut self, id: RequestId) -> Result<Option<()>, TransportError> {
        let r = self
            .requests
            .get(&id.0)
            .ok_or(TransportError::UnknownRequest {
                transport: NAME,
                request: id,
            })?;
        if matches!(r.state, State::Queued | State::Posted) {
            return Ok(None);
        }
        let r = self.requests.remove(&id.0).expect("present");
        if let Ok(b) = self.buf_mut(r.region.buffer) {
            let range = r.region.offset..r.region.offset + r.region.len;
            b.holds.release(range, access(r.is_send));
        }
        match r.state {
            State::Failed(e) => Err(e),
            _ => Ok(Some(())),
        }
    }

    /// Makes progress once: polls, and when nothing completed yields (poll mode,
    /// after a short spin) or sleeps on the completion channel for at most `limit`
    /// (block mode). `idle_since` is when the last completion of any peer was seen.
    fn progress_once(
        &mut self,
        peer: Rank,
        idle_since: &mut Instant,
        limit: Duration,
    ) -> Result<(), TransportError> {
        match self.wait {
            WaitMode::Poll => {
                for _ in 0..64 {
                    if self.poll(peer)? > 0 {
                        *idle_since = Instant::now();
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                // Nothing for a while: let anything runnable on this core go first
                // (a co-located rank, or the softirq thread through which soft-RoCE
                // moves its packets). A hardware device completes a small message
                // within the first microseconds, before any yield.
                if idle_since.elapsed() >= SPIN_BEFORE_YIELD {
                    std::thread::yield_now();
                }
            }
            WaitMode::Block => {
                if self.poll(peer)? > 0 {
                    *idle_since = Instant::now();
                    return Ok(());
                }
                // SAFETY: the CQ is live; arming it makes the next completion raise
                // an event on the channel.
                let rc = unsafe { ibv_req_notify_cq(self.res.cq, 0) };
                if rc != 0 {
                    return Err(self.io(peer, "arm completion channel", rc_error(rc)));
                }
                // a completion that raced with arming is found here
                if self.poll(peer)? > 0 {
                    *idle_since = Instant::now();
                    return Ok(());
                }
                // SAFETY: the channel is live (Block mode creates it).
                let fd = unsafe { (*self.res.channel).fd };
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = limit.as_millis().clamp(1, 1000) as c_int;
                // SAFETY: `pfd` is one valid pollfd.
                let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
                if ready > 0 {
                    let mut cq = std::ptr::null_mut();
                    let mut ctx = std::ptr::null_mut();
                    // SAFETY: the channel has an event (poll said readable), so this
                    // does not block; out-pointers are valid.
                    let rc = unsafe { ibv_get_cq_event(self.res.channel, &mut cq, &mut ctx) };
                    if rc == 0 {
                        self.cq_events += 1;
                        // Acknowledged in batches (each ack takes a lock); the rest
                        // before the CQ is destroyed (Resources::drop), which waits
                        // for every event to be acknowledged.
                        self.res.unacked_events += 1;
                        if self.res.unacked_events >= EVENTS_PER_ACK {
                            // SAFETY: that many events were received for our CQ
                            // (the only CQ on the channel) and not yet acknowledged.
                            unsafe { ibv_ack_cq_events(self.res.cq, self.res.unacked_events) };
                            self.res.unacked_events = 0;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Makes progress for requests of `pending` peers, a wait that began at
    /// `started`. A peer that has had no completion for the whole timeout (since
    /// its last one, or since `started` if later) is declared lost: its
    /// connection breaks and it is returned; a peer that progresses is never
    /// blamed for another's silence.
    fn progress_for(
        &mut self,
        pending: &[Rank],
        started: Instant,
        idle_since: &mut Instant,
    ) -> Result<Vec<Rank>, TransportError> {
        let now = Instant::now();
        let left = layout::time_left(pending, &self.last_progress, started, now, self.timeout);
        self.progress_once(pending[0], idle_since, left)?;
        let stale = layout::stale_peers(
            pending,
            &self.last_progress,
            started,
            Instant::now(),
            self.timeout,
        );
        for &peer in &stale {
            self.break_peer(
                peer,
                format!("rank {peer} made no progress within {:?}", self.timeout),
            );
        }
        Ok(stale)
    }

    fn timeout_error(&self, peer: Rank) -> TransportError {
        TransportError::Timeout {
            transport: NAME,
            peer,
            op: "wait",
            after: self.timeout,
        }
    }
    /// [`ngauge_transport::Transport::wait`].
    pub(super) fn wait_one(&mut self, request: RequestId) -> Result<(), TransportError> {
        let started = Instant::now();
        let mut idle_since = started;
        loop {
            if self.try_retire(request)?.is_some() {
                return Ok(());
            }
            let peer = self.requests[&request.0].peer;
            if !self
                .progress_for(&[peer], started, &mut idle_since)?
                .is_empty()
            {
                return Err(self.timeout_error(peer));
            }
        }
    }

    /// [`ngauge_transport::Transport::wait_all`]: a peer that makes no progress
    /// fails only its own requests; the others are still waited for.
    pub(super) fn wait_many(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        let mut pending: Vec<RequestId> = requests.to_vec();
        let started = Instant::now();
        let mut idle_since = started;
        let mut first_error = None;
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for r in pending {
                match self.try_retire(r) {
                    Ok(Some(())) => {}
                    Ok(None) => still.push(r),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            let mut peers: Vec<Rank> = pending.iter().map(|r| self.requests[&r.0].peer).collect();
            peers.dedup();
            let stale = match self.progress_for(&peers, started, &mut idle_since) {
                Ok(stale) => stale,
                Err(e) => return Err(first_error.unwrap_or(e)),
            };
            if let Some(&peer) = stale.first() {
                // the lost peers' requests stay pending (their buffers busy) for the
                // caller; the others are still waited for
                first_error.get_or_insert_with(|| self.timeout_error(peer));
                pending.retain(|r| !stale.contains(&self.requests[&r.0].peer));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
