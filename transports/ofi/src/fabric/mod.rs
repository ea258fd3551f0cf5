//! The fabric side: libfabric calls and the [`Transport`] on top of them. Every
//! `unsafe` block of the crate is in this module and its children, one job each:
//!
//! - [`ffi`]: bindings (bindgen) and the C shim's functions;
//! - [`info`]: `fi_getinfo`, the provider chosen, what is offered, the facts;
//! - [`setup`]: fabric, domain, completion queue, address vector, endpoint, the
//!   address exchange and the teardown;
//! - [`memory`]: message buffers and their registrations;
//! - [`post`]: posting sends, receives, writes and advertisements;
//! - [`progress`]: reading the completion queue, what each completion means,
//!   waiting (poll or `fi_cq_sread`), timeouts, cancelling, closed peers;
//! - [`window`]: the one-sided window of `ngauge rma` beside a transport.
//!
//! This file holds the transport's state and the [`Transport`] impl, which only
//! dispatches.

#![allow(unsafe_code)]

mod ffi;
mod greet;
mod info;
mod memory;
mod post;
mod progress;
mod setup;
mod window;

use crate::{Facts, OfiOp, OfiOptions, Probe};
use memory::{Memory, Registration};
use ngauge_transport::{
    Access, BufferId, Buffers, Capabilities, Control, Rank, Region, RequestId, Transport,
    TransportError, WaitMode,
};
use setup::{Endpoint, ADVERT_BYTES};
use std::collections::{HashMap, VecDeque};
use std::os::raw::c_void;
use std::time::Duration;
pub use window::{open_window, OfiWindow};

pub(crate) const NAME: &str = "ofi";

fn unavailable(reason: impl Into<String>) -> TransportError {
    TransportError::Unavailable {
        transport: NAME,
        reason: reason.into(),
    }
}

fn setup_error(reason: impl Into<String>) -> TransportError {
    TransportError::Setup {
        transport: NAME,
        reason: reason.into(),
    }
}

/// Why a peer's messages can no longer be received after one of them was longer
/// than the receive posted for it, on `provider` with the environment's
/// `FI_OFI_RXM_ENABLE_DYN_RBUF` (`dynamic_rbuf`); `None` where the provider keeps
/// its stream. `ofi_rxm` over `tcp` with its dynamic receive buffers (on unless
/// that variable says 0, off, false or no) places a message straight into the
/// posted receive: a longer one fails the receive and leaves the rest of its
/// bytes in the connection, and what the peer sends after it never completes a
/// receive. Its receives then fail at once with this, instead of each waiting
/// for the timeout.
fn lost_after_truncation(provider: &str, dynamic_rbuf: Option<&str>) -> Option<String> {
    let dynamic = dynamic_rbuf
        .is_none_or(|v| !["0", "off", "false", "no"].contains(&v.to_ascii_lowercase().as_str()));
    (provider.starts_with("tcp") && provider.contains("ofi_rxm") && dynamic).then(|| {
        format!(
            "its messages no longer arrive: {provider} lost the connection's stream at a \
             message longer than the receive posted (dynamic receive buffers; \
             FI_OFI_RXM_ENABLE_DYN_RBUF=0 turns them off)"
        )
    })
}

/// See [`crate::default_stop_signals`].
pub fn default_stop_signals() {
    // SAFETY: signal(2) with SIG_DFL for two valid signal numbers, called before
    // any handler of ours is installed.
    unsafe { ffi::ngo_default_stop_signals() }
}

/// See [`crate::probe`].
pub fn probe(provider: Option<&str>, op: OfiOp) -> Result<Probe, String> {
    info::probe(provider, op)
}

/// The operation context handed to libfabric with every operation that
/// completes: room for `FI_CONTEXT2` (which providers such as `psm2` and `efa`
/// use as scratch space) and the id that tells what completed. Boxed, so that its
/// address stays put until the completion names it.
#[repr(C)]
struct Ctx {
    provider: [*mut c_void; 8],
    id: u64,
}

impl Ctx {
    fn boxed(id: u64) -> Box<Ctx> {
        Box::new(Ctx {
            provider: [std::ptr::null_mut(); 8],
            id,
        })
    }

    fn ptr(ctx: &mut Ctx) -> *mut c_void {
        (ctx as *mut Ctx).cast::<c_void>()
    }
}

/// What the id of a context names: a request (ids below [`KIND`]), or one of
/// the transport's own operations.
const KIND: u64 = 1 << 60;
/// A peer's goodbye (`BYE | peer`), received into nothing.
const BYE: u64 = KIND;
/// An advertisement slot (`ADVERT | slot`) of the write path.
const ADVERT: u64 = 2 * KIND;
/// This rank's goodbye sent to a peer (`FAREWELL | peer`).
const FAREWELL: u64 = 3 * KIND;
/// A peer's hello at open (`GREET | peer`), received into nothing.
const GREET: u64 = 4 * KIND;
/// This rank's hello sent to a peer at open (`GREETED | peer`).
const GREETED: u64 = 5 * KIND;
/// A one-sided operation of the window (`RMA | slot`).
const RMA: u64 = 6 * KIND;

/// Tags: the kind of message above bit 32, the sender's rank below.
const TAG_DATA: u64 = 0;
const TAG_BYE: u64 = 1 << 32;
const TAG_ADVERT: u64 = 2 << 32;
const TAG_GREET: u64 = 3 << 32;

/// Advertisement slots kept posted per peer on the write path (the provider
/// buffers advertisements beyond them as unexpected messages).
const ADVERT_SLOTS: usize = 16;

#[derive(Debug)]
enum State {
    /// Write path: waiting for the receiver's advertisement.
    Queued,
    /// Handed to libfabric; waiting for its completion.
    Posted,
    Done,
    Failed(TransportError),
}

struct Request {
    peer: Rank,
    region: Region,
    send: bool,
    state: State,
    /// While posted.
    ctx: Option<Box<Ctx>>,
    /// Cancelled (a timed-out blocking receive, a peer that closed).
    cancelling: bool,
    /// Its region stays held when it fails: the peer may still write into it
    /// (an advertised receive of a peer broken by a timeout).
    keep_hold: bool,
}

/// A region the peer advertised for our next write.
#[derive(Clone, Copy, Debug)]
struct Advert {
    addr: u64,
    key: u64,
    len: u64,
    seq: u16,
}

#[derive(Default)]
struct Peer {
    addr: ffi::fi_addr_t,
    /// The peer said goodbye: it closed its endpoint.
    closed: bool,
    /// It runs in this process (a thread of a test).
    same_process: bool,
    /// Write path: a timeout broke the exchange with it.
    broken: Option<String>,
    /// A completion concerning it was handled since a wait last looked.
    touched: bool,
    /// An operation with it ended (done, or a message of the wrong size) since
    /// the last hellos.
    talked: bool,
    /// Hellos (see `greet`): its hello to us has not arrived yet.
    hello_awaited: bool,
    /// Hellos: ours to it has not completed yet.
    hello_pending: bool,
    /// Why its messages can no longer be received (see [`lost_after_truncation`]).
    inbound_lost: Option<String>,
    /// Write path: its advertisements, oldest first.
    adverts: VecDeque<Advert>,
    /// Write path: our sends waiting for an advertisement, in order.
    queued_writes: VecDeque<u64>,
    /// Write path: our receives advertised to it, `(sequence number, request)`.
    awaiting: VecDeque<(u16, u64)>,
    next_seq: u16,
}

/// A libfabric RDM endpoint connected to every rank of the job (see the crate
/// docs).
pub struct OfiTransport {
    ep: Endpoint,
    memory: Memory,
    rank: Rank,
    size: usize,
    op: OfiOp,
    wait: WaitMode,
    timeout: Duration,
    tagged: bool,
    inject: usize,
    max_msg: usize,
    peers: Vec<Peer>,
    requests: HashMap<u64, Request>,
    next_id: u64,
    /// Contexts of the transport's own operations (goodbyes, advertisements,
    /// hellos), boxed: libfabric holds their addresses, which a growing `Vec`
    /// would move.
    #[allow(clippy::vec_box)]
    fixed: Vec<Box<Ctx>>,
    /// Write path: the advertisement slots (held for good, so nobody frees them).
    advert_buffer: Option<BufferId>,
    /// Goodbyes in flight at drop (boxed as `fixed`).
    #[allow(clippy::vec_box)]
    farewells: Vec<Box<Ctx>>,
    /// The first hello that failed.
    greeting_failed: Option<String>,
    /// Peers whose hello of ours found no connection ([`ffi::not_connected`]):
    /// sent again while the hellos' time lasts.
    hellos_to_resend: Vec<Rank>,
    /// The completions of a window's operations and fence messages.
    one_sided: window::Completions,
}

impl std::fmt::Debug for OfiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfiTransport")
            .field("provider", &self.ep.facts.provider)
            .field("rank", &self.rank)
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

/// See [`crate::open`].
pub fn open(control: &mut dyn Control, opts: &OfiOptions) -> Result<OfiTransport, TransportError> {
    open_with(control, opts, false)
}

/// [`open`], with RMA and atomics on the endpoint where `rma` (a window's).
fn open_with(
    control: &mut dyn Control,
    opts: &OfiOptions,
    rma: bool,
) -> Result<OfiTransport, TransportError> {
    let (ep, addrs) = setup::connect(control, opts, rma)?;
    let fi = ep.info.first().expect("chosen");
    // SAFETY: every entry fi_getinfo returns has these attributes.
    let (tx, epa, dom) = unsafe { (&*fi.tx_attr, &*fi.ep_attr, &*fi.domain_attr) };
    let write = opts.op == OfiOp::Write;
    let mr_local = dom.mr_mode as u32 & ffi::FI_MR_LOCAL != 0;
    let mut access = (ffi::FI_SEND | ffi::FI_RECV) as u64;
    if write {
        access |= (ffi::FI_WRITE | ffi::FI_REMOTE_WRITE) as u64;
    }
    let how = Registration {
        register: mr_local || write,
        access,
        virt_addr: dom.mr_mode as u32 & ffi::FI_MR_VIRT_ADDR != 0,
        endpoint: dom.mr_mode as u32 & ffi::FI_MR_ENDPOINT != 0,
    };
    let mut max_msg = epa.max_msg_size.min(isize::MAX as usize);
    if write {
        max_msg = max_msg.min(u32::MAX as usize);
    }
    let memory = Memory::new(ep.domain, ep.ep, how);
    let mut t = OfiTransport {
        rank: control.rank(),
        size: control.size(),
        op: opts.op,
        wait: opts.wait,
        timeout: opts.timeout,
        tagged: ep.tagged,
        inject: tx.inject_size,
        max_msg,
        peers: addrs
            .iter()
            .map(|a| Peer {
                addr: a.addr,
                same_process: a.same_process,
                ..Peer::default()
            })
            .collect(),
        requests: HashMap::new(),
        next_id: 0,
        fixed: Vec::new(),
        advert_buffer: None,
        farewells: Vec::new(),
        greeting_failed: None,
        hellos_to_resend: Vec::new(),
        one_sided: window::Completions::default(),
        memory,
        ep,
    };
    t.post_own_receives()?;
    control
        .barrier()
        .map_err(|e| setup_error(format!("barrier after opening the endpoints: {e}")))?;
    t.greet(true)?;
    Ok(t)
}

impl OfiTransport {
    /// What this transport runs on.
    pub fn facts(&self) -> &Facts {
        &self.ep.facts
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        ngauge_transport::util::check_peer(NAME, peer, self.rank, self.size)
    }

    /// Posts the goodbye receive of every peer and, on the write path, the
    /// advertisement slots.
    fn post_own_receives(&mut self) -> Result<(), TransportError> {
        if self.op == OfiOp::Write {
            let len = self.size * ADVERT_SLOTS * ADVERT_BYTES;
            let buffer = self.memory.try_alloc(len)?;
            // Held for good: no pattern can read, write or free it.
            self.memory
                .pool
                .acquire_write(buffer.prefix(len))
                .expect("a new buffer is free");
            self.advert_buffer = Some(buffer);
        }
        let me = self.rank;
        for peer in (0..self.size).filter(|&p| p != me) {
            if self.tagged {
                let mut ctx = Ctx::boxed(BYE | peer as u64);
                self.post_recv_raw(
                    peer,
                    TAG_BYE,
                    std::ptr::NonNull::<u8>::dangling().as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    Ctx::ptr(&mut ctx),
                )?;
                self.fixed.push(ctx);
            }
            if self.op == OfiOp::Write {
                for slot in 0..ADVERT_SLOTS {
                    self.post_advert_slot(peer * ADVERT_SLOTS + slot, None)?;
                }
            }
        }
        Ok(())
    }

    fn new_request(&mut self, peer: Rank, region: Region, send: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.requests.insert(
            id,
            Request {
                peer,
                region,
                send,
                state: State::Posted,
                ctx: None,
                cancelling: false,
                keep_hold: false,
            },
        );
        id
    }

    /// Starts a send or receive: checks the peer, the size and the region, holds
    /// the region, and posts (or queues) the operation.
    fn start(
        &mut self,
        peer: Rank,
        region: Region,
        send: bool,
    ) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        if region.len > self.max_msg {
            return Err(TransportError::TooLarge {
                transport: NAME,
                len_bytes: region.len,
                max_bytes: self.max_msg,
            });
        }
        let op = if send { "send" } else { "recv" };
        if send && self.peers[peer].closed {
            return Err(TransportError::PeerClosed {
                transport: NAME,
                peer,
                op,
            });
        }
        if let Some(why) = &self.peers[peer].broken {
            return Err(self.io(peer, op, why.clone()));
        }
        if let (false, Some(why)) = (send, &self.peers[peer].inbound_lost) {
            return Err(self.io(peer, op, why.clone()));
        }
        let access = if send { Access::Read } else { Access::Write };
        self.memory.pool.acquire_as(region, access)?;
        let id = self.new_request(peer, region, send);
        let posted = match (self.op, send) {
            (OfiOp::Send, true) => self.post_send(id),
            (OfiOp::Send, false) => self.post_recv(id),
            (OfiOp::Write, true) => self.queue_write(id),
            (OfiOp::Write, false) => self.advertise(id),
        };
        if let Err(e) = posted {
            self.requests.remove(&id);
            self.memory.pool.release_region(region, access);
            return Err(e);
        }
        Ok(RequestId(id))
    }

    fn io(&self, peer: Rank, op: &'static str, what: String) -> TransportError {
        TransportError::Io {
            transport: NAME,
            peer,
            op,
            source: std::io::Error::other(what),
        }
    }

    /// Removes a finished request and gives its region back: `Some(result)` when
    /// it has finished, `None` while it is pending.
    fn try_retire(
        &mut self,
        id: u64,
    ) -> Result<Option<Result<(), TransportError>>, TransportError> {
        let r = self
            .requests
            .get(&id)
            .ok_or(TransportError::UnknownRequest {
                transport: NAME,
                request: RequestId(id),
            })?;
        if !matches!(r.state, State::Done | State::Failed(_)) {
            return Ok(None);
        }
        let r = self.requests.remove(&id).expect("looked up");
        let access = if r.send { Access::Read } else { Access::Write };
        match r.state {
            State::Done => {
                self.peers[r.peer].talked = true;
                self.memory.pool.release_region(r.region, access);
                Ok(Some(Ok(())))
            }
            State::Failed(e) => {
                // A message that arrived with the wrong size was an exchange too.
                if !matches!(
                    e,
                    TransportError::Timeout { .. } | TransportError::PeerClosed { .. }
                ) {
                    self.peers[r.peer].talked = true;
                }
                if !r.keep_hold {
                    self.memory.pool.release_region(r.region, access);
                }
                Ok(Some(Err(e)))
            }
            _ => unreachable!("checked above"),
        }
    }
}

impl Drop for OfiTransport {
    /// Says goodbye to every peer still there (and waits up to a second for the
    /// goodbyes to leave), then closes the endpoint before the memory it may
    /// write into.
    fn drop(&mut self) {
        self.say_goodbye();
        let memory = &mut self.memory;
        self.ep.close(|| memory.close_all());
    }
}

impl Transport for OfiTransport {
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
            max_message_bytes: Some(self.max_msg),
            may_split: false,
            needs_registered_memory: self.memory_registered(),
            // `ofi_rxd` (1.17) cuts a longer message to the receive posted and
            // reports success: only shorter messages are seen.
            checks_message_size: !self.ep.facts.provider.contains("ofi_rxd"),
        }
    }

    fn wait_mode(&self) -> WaitMode {
        self.wait
    }

    fn buffers(&self) -> &dyn Buffers {
        &self.memory
    }

    fn buffers_mut(&mut self) -> &mut dyn Buffers {
        &mut self.memory
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let id = self.start(peer, region, true)?;
        self.wait_blocking(id.0, "send")
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let id = self.start(peer, region, false)?;
        self.wait_blocking(id.0, "recv")
    }

    fn isend(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, true)
    }

    fn irecv(&mut self, peer: Rank, region: Region) -> Result<RequestId, TransportError> {
        self.start(peer, region, false)
    }

    fn test(&mut self, request: RequestId) -> Result<bool, TransportError> {
        if let Some(done) = self.try_retire(request.0)? {
            return done.map(|()| true);
        }
        self.progress()?;
        self.cancel_for_closed_peers();
        match self.try_retire(request.0)? {
            Some(done) => done.map(|()| true),
            None => Ok(false),
        }
    }

    fn wait(&mut self, request: RequestId) -> Result<(), TransportError> {
        self.wait_for(request.0)
    }

    /// Hellos with the peers talked to (see `greet`): what this rank sent to
    /// them has completed and what they sent to it has been acknowledged.
    fn settle(&mut self) -> Result<(), TransportError> {
        self.greet(false)
    }
}
