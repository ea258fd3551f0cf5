//! The device side: libibverbs calls through `rdma-sys`, and the [`Transport`]
//! implementation on top of them. Every `unsafe` block of the crate is in this
//! module and its children, one job each:
//!
//! - [`discovery`]: device, port and GID discovery; the device context; `probe`;
//! - [`memory`]: registered memory, user buffers and the holds pending requests
//!   keep on them;
//! - [`connection`]: protection domain, completion queue, queue-pair creation,
//!   the INIT/RTR/RTS transitions and the address exchange (`open`), and the
//!   teardown of what was allocated;
//! - [`post`]: the posting side of the data path: requests, send credits, eager
//!   sends, advertisements, RDMA writes;
//! - [`complete`]: the completion queue: what each completion means, eager
//!   messages delivered from their slots;
//! - [`direct`]: the blocking send and receive of a small message with nothing
//!   queued before it, without a request (from a staging slot when it does not
//!   go inline); the prepared work request of inline and staged sends;
//! - [`flat`]: the same with nothing of the peer's in flight, in one function
//!   each way (it hands everything else over to [`direct`]);
//! - [`progress`]: waiting (poll or completion channel), retiring requests, and
//!   naming the peer that made no progress;
//! - [`window`]: the one-sided window of `ngauge rma` on the same queue pairs.
//!
//! This file holds what they share: the transport's state, how a connection
//! breaks, and the [`Transport`] impl, which only dispatches.
//!
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` are
//! `static inline` in `verbs.h`: they call through the context's ops table
//! (`qp->context->ops.post_send`, ...). rdma-sys re-implements them that way in Rust,
//! so calling its functions is calling the provider directly, as C code does.

#![allow(unsafe_code)]

mod complete;
mod connection;
mod direct;
mod discovery;
mod flat;
mod memory;
mod post;
mod progress;
mod window;

pub use connection::open;
pub use discovery::probe;
pub use window::{open_window, VerbsWindow};

use crate::layout::{Credits, RingLayout, SlotLayout, StageSlots};
use crate::qp::LocalPort;
use crate::wire::{Advert, VerbsOp};
use connection::to_error;
use memory::Resources;
use ngauge_transport::{
    Buffers, Capabilities, Counters, Rank, Region, RequestId, Transport, TransportError, WaitMode,
};
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::time::{Duration, Instant};

const NAME: &str = "verbs";

fn unavailable(reason: impl Into<String>) -> TransportError {
    TransportError::Unavailable {
        transport: NAME,
        reason: reason.into(),
    }
}

fn setup(reason: impl Into<String>) -> TransportError {
    ngauge_transport::util::setup_error(NAME, reason)
}

/// A message of another size than the receive posted.
#[cold]
fn size_mismatch(peer: Rank, expected_bytes: usize, got_bytes: usize) -> TransportError {
    TransportError::SizeMismatch {
        transport: NAME,
        peer,
        expected_bytes,
        got_bytes,
    }
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Interprets a verbs return code (0, or an errno value; some providers return
/// -1 and set errno).
fn rc_error(rc: c_int) -> std::io::Error {
    if rc > 0 {
        std::io::Error::from_raw_os_error(rc)
    } else {
        last_os_error()
    }
}

#[derive(Debug)]
enum State {
    /// Not yet posted (queue full, or no advertisement yet).
    Queued,
    /// Posted; waiting for its completion.
    Posted,
    Done,
    Failed(TransportError),
}

#[derive(Debug)]
struct Request {
    peer: Rank,
    region: Region,
    is_send: bool,
    /// Posted on the bulk QP (send path, large message): its completion frees
    /// one send of the bulk QP, not of the message QP's signalling chain.
    bulk: bool,
    /// Write path: the advertised length differed; the write carried no data.
    mismatch: Option<u32>,
    state: State,
}

/// The blocking receive of the direct path ([`direct`]): the completion handler
/// copies the next message from `peer` into `region` and sets `outcome`.
#[derive(Debug)]
struct DirectRecv {
    peer: Rank,
    region: Region,
    outcome: Option<Result<(), TransportError>>,
}

#[derive(Debug, Default)]
struct Peer {
    /// Sends outstanding on both QPs together (each QP holds `depth`).
    sq_used: u32,
    rq_used: u32,
    adverts: VecDeque<Advert>,
    queued_sends: VecDeque<u64>,
    queued_recvs: VecDeque<u64>,
    /// Receives waiting for a message in a slot (eager on the send path, RDMA
    /// write with immediate on the write path), in posting order.
    awaiting: VecDeque<u64>,
    /// Send path: eager messages that arrived before their receive was posted,
    /// copied out of their slots (which were re-posted at once, so that held
    /// messages never keep credits from the peer), oldest first.
    unexpected: VecDeque<Vec<u8>>,
    next_send_slot: usize,
    /// Flow control of the message QP (see [`Credits`]).
    credits: Credits,
    broken: Option<String>,
    /// Selective signalling of the message QP: sends posted unsignaled since the
    /// last signaled one, and for every signaled send in flight how many sends its
    /// completion retires (see [`crate::layout::signal_every`]).
    unsignaled: u32,
    covers: VecDeque<u32>,
    /// Sends posted on the message QP so far, and how many of them (the first
    /// ones while the peer is not broken; after a failed completion only ever an
    /// undercount) are retired: what [`StageSlots`] checks a slot against.
    posted: u64,
    retired: u64,
    /// The staging slots of the blocking send's eager bounce buffers (see
    /// [`crate::layout::STAGE_SLOTS`]).
    stage: StageSlots,
    /// Receive slots handled and not yet re-posted (re-posted in batches).
    repost: Vec<usize>,
    /// Write-poll path ([`RingLayout`]): our messages written into the peer's
    /// ring, how many of them the peer has consumed (as far as we know), the
    /// peer's messages we consumed from ours and how many of those we told it of.
    ring_sent: u64,
    ring_acked: u64,
    ring_head: u64,
    ring_reported: u64,
    /// Where the flag of the peer's next message (number `ring_head`) will be
    /// in our ring, and its value ([`RingLayout::flag_at`], [`RingLayout::flag`]).
    ring_next: (usize, u8),
    /// Address and rkey of the peer's ring area.
    remote_ring: (u64, u32),
    /// Receives waiting for a message in our ring from this peer, in order.
    awaiting_ring: VecDeque<u64>,
}

/// A connected verbs transport (see the crate docs).
pub struct VerbsTransport {
    res: Resources,
    rank: Rank,
    size: usize,
    op: VerbsOp,
    wait: WaitMode,
    timeout: Duration,
    depth: u32,
    max_inline: u32,
    max_msg: u32,
    slots: SlotLayout,
    /// Write-poll path: the ring area's layout (the memory is `res.ring`).
    rings: Option<RingLayout>,
    /// See [`crate::layout::signal_every`].
    signal_every: u32,
    /// See [`crate::layout::repost_batch`].
    repost_batch: usize,
    /// The next send is signaled whatever its kind (the flush at drop).
    signal_next: bool,
    local: LocalPort,
    peers: Vec<Peer>,
    /// Per peer: when a completion concerning it was last handled.
    last_progress: Vec<Instant>,
    /// Per peer: a completion concerning it was handled since a wait last read
    /// the clock (which then sets `last_progress`).
    progressed: Vec<bool>,
    /// Per peer: the direct path's send work request (empty until connected).
    prepared: Vec<direct::PreparedSend>,
    requests: crate::slab::Slab<Request>,
    /// The direct receive waiting (only inside [`Transport::recv`]).
    direct: Option<DirectRecv>,
    device: String,
    inline_sends: u64,
    /// Blocking sends posted from a staging slot ([`crate::layout::StageSlots`]).
    staged_sends: u64,
    cq_events: u64,
    credit_messages: u64,
    signaled_sends: u64,
    ring_messages: u64,
    /// Clock readings of polling waits (one per spin that found nothing).
    wait_clock_reads: u64,
    /// `sched_yield`s of polling waits.
    wait_yields: u64,
}

impl std::fmt::Debug for VerbsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsTransport")
            .field("device", &self.device)
            .field("rank", &self.rank)
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

impl VerbsTransport {
    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        ngauge_transport::util::check_peer(NAME, peer, self.rank, self.size)
    }

    fn io(&self, peer: Rank, op: &'static str, source: std::io::Error) -> TransportError {
        TransportError::Io {
            transport: NAME,
            peer,
            op,
            source,
        }
    }

    fn fail(&mut self, id: u64, err: TransportError) {
        if let Some(r) = self.requests.get_mut(&id) {
            if !matches!(r.state, State::Failed(_)) {
                r.state = State::Failed(err);
            }
        }
    }

    /// Marks the connection to `peer` failed: its QPs go to the error state (the
    /// device flushes every posted request and writes nothing more into our
    /// buffers), and every request still queued or waiting fails with `reason`.
    fn break_peer(&mut self, peer: Rank, reason: String) {
        if self.peers[peer].broken.is_none() {
            self.peers[peer].broken = Some(reason);
            for qp in [self.res.qps[peer], self.res.bulk[peer]] {
                if !qp.is_null() {
                    // best effort: a QP that is already in error stays there
                    let _ = to_error(qp);
                }
            }
        }
        let reason = self.peers[peer].broken.clone().unwrap_or_default();
        let p = &mut self.peers[peer];
        let ids: Vec<u64> = p
            .queued_sends
            .drain(..)
            .chain(p.queued_recvs.drain(..))
            .chain(p.awaiting.drain(..))
            .chain(p.awaiting_ring.drain(..))
            .collect();
        if self.direct_waits(peer) {
            let err = self.io(peer, "recv", std::io::Error::other(reason.clone()));
            if let Some(d) = &mut self.direct {
                d.outcome = Some(Err(err));
            }
        }
        for id in ids {
            let op = if self.requests.get(&id).is_some_and(|r| r.is_send) {
                "send"
            } else {
                "recv"
            };
            let err = self.io(peer, op, std::io::Error::other(reason.clone()));
            self.fail(id, err);
        }
    }
}

impl Drop for VerbsTransport {
    /// Lets posted sends finish (inline sends return before their completion)
    /// before the queue pairs are destroyed: first the signaled ones, for at most
    /// a second; then, where unsignaled sends trail the last signaled one, a
    /// signaled empty RDMA write behind them, whose completion says they are done,
    /// for at most `FLUSH_WAIT` (100 ms) (the peer may have closed already: nothing then
    /// answers it, and the unsignaled sends were delivered before it closed, since
    /// it waited for them, or it did not need them).
    fn drop(&mut self) {
        let pending = |t: &VerbsTransport| {
            t.peers
                .iter()
                .any(|p| p.broken.is_none() && p.sq_used > p.unsignaled)
        };
        let start = Instant::now();
        while pending(self) && start.elapsed() < Duration::from_secs(1) {
            if self.poll(self.rank).is_err() {
                return;
            }
        }
        for peer in 0..self.size {
            let p = &self.peers[peer];
            if peer != self.rank && p.broken.is_none() && p.unsignaled > 0 && p.sq_used < self.depth
            {
                // best effort: a failure leaves nothing to wait for
                let _ = self.post_flush(peer);
            }
        }
        let start = Instant::now();
        while pending(self) && start.elapsed() < FLUSH_WAIT {
            if self.poll(self.rank).is_err() {
                return;
            }
        }
    }
}

/// How long [`VerbsTransport`]'s drop waits for the flush behind unsignaled sends.
const FLUSH_WAIT: Duration = Duration::from_millis(100);

impl Transport for VerbsTransport {
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
            max_message_bytes: Some(self.max_msg as usize),
            may_split: false,
            needs_registered_memory: true,
            checks_message_size: true,
        }
    }

    fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    fn buffers(&self) -> &dyn Buffers {
        &self.res
    }

    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.res
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        if let Some(done) = self.send_flat(peer, region) {
            return done;
        }
        if let Some(done) = self.send_direct(peer, region) {
            return done;
        }
        let r = self.isend(peer, region)?;
        self.wait(r)
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        if let Some(done) = self.recv_flat(peer, region) {
            return done;
        }
        if let Some(done) = self.recv_direct(peer, region) {
            return done;
        }
        let r = self.irecv(peer, region)?;
        self.wait(r)
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, true)
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, false)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        if self.try_retire(request)?.is_some() {
            return Ok(true);
        }
        let peer = self.requests.get(&request.0).map_or(self.rank, |r| r.peer);
        self.poll(peer)?;
        Ok(self.try_retire(request)?.is_some())
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        self.wait_one(request)
    }

    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
        self.wait_many(requests)
    }

    fn counters(&self) -> Counters {
        Counters {
            entries: vec![
                ("inline_sends", self.inline_sends),
                ("staged_sends", self.staged_sends),
                ("completion_events", self.cq_events),
                ("credit_messages", self.credit_messages),
                ("signaled_sends", self.signaled_sends),
                ("ring_messages", self.ring_messages),
                ("wait_clock_reads", self.wait_clock_reads),
                ("wait_yields", self.wait_yields),
            ],
        }
    }
}
