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

/// The times a wait keeps, read only when a spin found nothing.
pub(super) struct WaitClock {
    /// When the wait first read the clock (at most one spin after it began).
    started: Instant,
    /// When progress was last seen (or the wait started).
    idle_since: Instant,
}

/// How long a polling wait spins without progress before it starts yielding.
const SPIN_BEFORE_YIELD: Duration = Duration::from_micros(20);
/// Polls of one spin, between two readings of the clock. A wait that is answered
/// within one spin reads no clock at all: under the soft-RoCE VM (qemu TCG, `hpet`
/// clocksource) a reading is a system call of about 0.8 us, and 64 polls took
/// less than a 1-byte round trip's wait, so most waits paid one or more readings
/// that perftest's loop does not (the `wait_clock_reads` counter shows them).
/// On hardware, 256 polls of an empty CQ take a few microseconds: timeouts and the
/// yield of [`SPIN_BEFORE_YIELD`] are checked that often.
pub(super) const SPIN_POLLS: usize = 256;
/// A wait for a message in a peer's ring (write-poll path) reads that ring's
/// next flag byte on every spin, and polls the completion queue and the other
/// rings (a full [`VerbsTransport::poll`]) only when the flag is set or on every
/// `RING_CQ_EVERY`th spin. Under callgrind in the soft-RoCE VM a full poll cost
/// about 165 user-space instructions with nothing to find, the flag read about
/// ten; the completions it defers (sends signaled one in
/// [`crate::layout::signal_every`], a peer's advertisements and credits) are
/// handled a few spins later, and every message found polls the queue.
const RING_CQ_EVERY: usize = 16;
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
        if let Ok(b) = self.res.buf_mut(r.region.buffer) {
            let range = r.region.offset..r.region.offset + r.region.len;
            b.holds.release(range, access(r.is_send));
        }
        match r.state {
            State::Failed(e) => Err(e),
            _ => Ok(Some(())),
        }
    }

    /// Poll mode: polls up to [`SPIN_POLLS`] times without reading a clock;
    /// whether anything completed (or landed in a ring). Block mode: `false` at
    /// once (its wait polls before it sleeps).
    ///
    /// The clock stays out of this loop because a wait that is answered within
    /// a few microseconds should cost what perftest's loop costs: reading the
    /// time per poll (`clock_gettime`, a system call where the TSC is not usable,
    /// as under qemu's TCG) cost ngauge's verbs round trip several microseconds.
    fn spin(&mut self, peer: Rank) -> Result<bool, TransportError> {
        if self.wait == WaitMode::Block {
            return Ok(false);
        }
        // a receive from `peer`'s ring: only its flag byte, as ib_write_lat polls
        let ring_wait = self.rings.is_some()
            && (self.direct_waits(peer) || !self.peers[peer].awaiting_ring.is_empty());
        for i in 1..=SPIN_POLLS {
            if ring_wait && i % RING_CQ_EVERY != 0 && !self.ring_landed(peer) {
                std::hint::spin_loop();
                continue;
            }
            if self.poll(peer)? > 0 {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        Ok(false)
    }

    /// Reads the clock once for a wait: the peers that made progress since the
    /// last reading get it as their time of progress, and the wait's idle mark
    /// moves with them.
    fn stamp(&mut self, wait: &mut WaitClock) -> Instant {
        let now = self.read_clock();
        let mut any = false;
        for (peer, progressed) in self.progressed.iter_mut().enumerate() {
            if std::mem::take(progressed) {
                self.last_progress[peer] = now;
                any = true;
            }
        }
        if any {
            wait.idle_since = now;
        }
        now
    }

    /// The wait's clock reading (counted: where `clock_gettime` is a system call,
    /// as in the soft-RoCE VM, each costs about as much as a round trip's poll loop).
    fn read_clock(&mut self) -> Instant {
        self.wait_clock_reads += 1;
        Instant::now()
    }

    /// Makes progress once when a spin found nothing: yields (poll mode, after
    /// [`SPIN_BEFORE_YIELD`] without progress) or polls and sleeps on the
    /// completion channel for at most `limit` (block mode).
    fn progress_once(
        &mut self,
        peer: Rank,
        wait: &mut WaitClock,
        now: Instant,
        limit: Duration,
    ) -> Result<(), TransportError> {
        match self.wait {
            WaitMode::Poll => {
                // Nothing for a while: let anything runnable on this core go first
                // (a co-located rank, or the softirq thread through which soft-RoCE
                // moves its packets). A hardware device completes a small message
                // within the first microseconds, before any yield.
                if now.saturating_duration_since(wait.idle_since) >= SPIN_BEFORE_YIELD {
                    std::thread::yield_now();
                    self.wait_yields += 1;
                }
            }
            WaitMode::Block => {
                if self.poll(peer)? > 0 {
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

    /// Makes progress for requests of `pending` peers, after a spin found
    /// nothing. A peer that has had no completion for the whole timeout (since
    /// its last one, or since the wait started if later) is declared lost: its
    /// connection breaks and it is returned; a peer that progresses is never
    /// blamed for another's silence.
    pub(super) fn progress_for(
        &mut self,
        pending: &[Rank],
        wait: &mut Option<WaitClock>,
    ) -> Result<Vec<Rank>, TransportError> {
        let now = match wait {
            Some(w) => self.stamp(w),
            None => {
                // the first reading of this wait starts it (and the progress
                // flagged before it counts from here)
                let now = self.read_clock();
                for (peer, progressed) in self.progressed.iter_mut().enumerate() {
                    if std::mem::take(progressed) {
                        self.last_progress[peer] = now;
                    }
                }
                *wait = Some(WaitClock {
                    started: now,
                    idle_since: now,
                });
                now
            }
        };
        let wait = wait.as_mut().expect("set above");
        let started = wait.started;
        let left = layout::time_left(pending, &self.last_progress, started, now, self.timeout);
        self.progress_once(pending[0], wait, now, left)?;
        let now = if self.wait == WaitMode::Block {
            // it may have slept
            self.stamp(wait)
        } else {
            now
        };
        let stale = layout::stale_peers(pending, &self.last_progress, started, now, self.timeout);
        for &peer in &stale {
            self.break_peer(
                peer,
                format!("rank {peer} made no progress within {:?}", self.timeout),
            );
        }
        Ok(stale)
    }

    pub(super) fn timeout_error(&self, peer: Rank) -> TransportError {
        TransportError::Timeout {
            transport: NAME,
            peer,
            op: "wait",
            after: self.timeout,
        }
    }
    /// [`ngauge_transport::Transport::wait`].
    pub(super) fn wait_one(&mut self, request: RequestId) -> Result<(), TransportError> {
        if self.try_retire(request)?.is_some() {
            return Ok(());
        }
        let peer = self.requests[&request.0].peer;
        self.wait_for(peer, |t| t.try_retire(request))
    }

    /// Makes progress for `peer` (spinning, then yielding or sleeping) until
    /// `done` reports the end of the wait (`Some`) or an error; fails with a
    /// timeout when `peer` made no progress for the whole timeout.
    pub(super) fn wait_for(
        &mut self,
        peer: Rank,
        mut done: impl FnMut(&mut Self) -> Result<Option<()>, TransportError>,
    ) -> Result<(), TransportError> {
        let mut clock = None;
        loop {
            if done(self)?.is_some() {
                return Ok(());
            }
            if self.spin(peer)? {
                continue;
            }
            if !self.progress_for(&[peer], &mut clock)?.is_empty() {
                return Err(self.timeout_error(peer));
            }
        }
    }

    /// [`ngauge_transport::Transport::wait_all`]: a peer that makes no progress
    /// fails only its own requests; the others are still waited for.
    ///
    /// Requests are retired in order from the oldest pending one, which the
    /// spin polls for; one that finished behind it is retired when the scan gets
    /// there. A window of N requests that complete in order thus costs N
    /// retirements and a check per spin, not a pass over the window per spin.
    pub(super) fn wait_many(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        let mut pending: Vec<RequestId> = requests.to_vec();
        let mut head = 0;
        let mut clock = None;
        let mut first_error = None;
        loop {
            while let Some(&r) = pending.get(head) {
                match self.try_retire(r) {
                    Ok(Some(())) => head += 1,
                    Ok(None) => break,
                    Err(e) => {
                        first_error.get_or_insert(e);
                        head += 1;
                    }
                }
            }
            let Some(oldest) = pending.get(head) else {
                break;
            };
            match self.spin(self.requests[&oldest.0].peer) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => return Err(first_error.unwrap_or(e)),
            }
            let mut peers: Vec<Rank> = pending[head..]
                .iter()
                .map(|r| self.requests[&r.0].peer)
                .collect();
            peers.dedup();
            let stale = match self.progress_for(&peers, &mut clock) {
                Ok(stale) => stale,
                Err(e) => return Err(first_error.unwrap_or(e)),
            };
            if let Some(&peer) = stale.first() {
                // the lost peers' requests stay pending (their buffers busy) for the
                // caller; the others are still waited for
                first_error.get_or_insert_with(|| self.timeout_error(peer));
                pending.drain(..head);
                head = 0;
                pending.retain(|r| !stale.contains(&self.requests[&r.0].peer));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
