//! The device side: libibverbs calls through `rdma-sys`, and the [`Transport`]
//! implementation on top of them. Every `unsafe` block of the crate is here.
//!
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq` are
//! `static inline` in `verbs.h`: they call through the context's ops table
//! (`qp->context->ops.post_send`, ...). rdma-sys re-implements them that way in Rust,
//! so calling its functions is calling the provider directly, as C code does.

#![allow(unsafe_code)]

use crate::layout::{self, Access, Credits, Holds, MsgKind, SlotLayout, WrKind, SLOT_BYTES};
use crate::qp::{self, LocalPort, Reliability, Transition};
use crate::wire::{self, Advert, Endpoint, QpAddr, VerbsOp, ADVERT_BYTES};
use crate::VerbsOptions;
use ngauge_transport::{
    BufferId, Capabilities, Control, Counters, Rank, Region, RequestId, Transport, TransportError,
    WaitMode,
};
use rdma_sys::*;
use std::alloc::Layout;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

const NAME: &str = "verbs";
/// How long a polling wait spins without progress before it starts yielding.
const SPIN_BEFORE_YIELD: Duration = Duration::from_micros(20);
/// Completion events received before they are acknowledged together.
const EVENTS_PER_ACK: u32 = 32;
/// `IBV_LINK_LAYER_ETHERNET` (a #define in verbs.h, not in the bindings).
const LINK_LAYER_ETHERNET: u8 = 2;

// The pure attribute builders use the verbs.h values; make sure they are the ones
// these bindings were generated from.
const _: () = {
    assert!(qp::mask::STATE == ibv_qp_attr_mask::IBV_QP_STATE.0);
    assert!(qp::mask::ACCESS_FLAGS == ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0);
    assert!(qp::mask::PKEY_INDEX == ibv_qp_attr_mask::IBV_QP_PKEY_INDEX.0);
    assert!(qp::mask::PORT == ibv_qp_attr_mask::IBV_QP_PORT.0);
    assert!(qp::mask::AV == ibv_qp_attr_mask::IBV_QP_AV.0);
    assert!(qp::mask::PATH_MTU == ibv_qp_attr_mask::IBV_QP_PATH_MTU.0);
    assert!(qp::mask::TIMEOUT == ibv_qp_attr_mask::IBV_QP_TIMEOUT.0);
    assert!(qp::mask::RETRY_CNT == ibv_qp_attr_mask::IBV_QP_RETRY_CNT.0);
    assert!(qp::mask::RNR_RETRY == ibv_qp_attr_mask::IBV_QP_RNR_RETRY.0);
    assert!(qp::mask::RQ_PSN == ibv_qp_attr_mask::IBV_QP_RQ_PSN.0);
    assert!(qp::mask::MAX_QP_RD_ATOMIC == ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC.0);
    assert!(qp::mask::MIN_RNR_TIMER == ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER.0);
    assert!(qp::mask::SQ_PSN == ibv_qp_attr_mask::IBV_QP_SQ_PSN.0);
    assert!(qp::mask::MAX_DEST_RD_ATOMIC == ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC.0);
    assert!(qp::mask::DEST_QPN == ibv_qp_attr_mask::IBV_QP_DEST_QPN.0);
    assert!(qp::access::LOCAL_WRITE == ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0);
    assert!(qp::access::REMOTE_WRITE == ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0);
    assert!(qp::access::REMOTE_READ == ibv_access_flags::IBV_ACCESS_REMOTE_READ.0);
    assert!(qp::QpState::Init as u32 == ibv_qp_state::IBV_QPS_INIT);
    assert!(qp::QpState::Rtr as u32 == ibv_qp_state::IBV_QPS_RTR);
    assert!(qp::QpState::Rts as u32 == ibv_qp_state::IBV_QPS_RTS);
};

fn unavailable(reason: impl Into<String>) -> TransportError {
    TransportError::Unavailable {
        transport: NAME,
        reason: reason.into(),
    }
}

fn setup(reason: impl Into<String>) -> TransportError {
    TransportError::Setup {
        transport: NAME,
        reason: reason.into(),
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

// ---------------------------------------------------------------------------
// Device discovery

/// An open device context with its port facts.
struct Opened {
    ctx: *mut ibv_context,
    name: String,
    port: u8,
    port_attr: ibv_port_attr,
    dev_attr: ibv_device_attr,
}

/// Lists devices, opens the chosen one and checks its port.
fn open_device(wanted: Option<&str>, port: u8) -> Result<Opened, TransportError> {
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut count) };
    if list.is_null() {
        let err = last_os_error();
        let hint = if err.raw_os_error() == Some(libc::ENOSYS) {
            " (this kernel has no RDMA support: no InfiniBand/RoCE driver, no rdma_rxe)"
        } else {
            ""
        };
        return Err(unavailable(format!(
            "no RDMA device: ibv_get_device_list failed: {err}{hint}"
        )));
    }
    let mut names = Vec::new();
    let mut chosen = None;
    for i in 0..count.max(0) as usize {
        // SAFETY: the list holds `count` valid device pointers.
        let dev = unsafe { *list.add(i) };
        // SAFETY: `dev` is a listed device; the name is a NUL-terminated string
        // owned by libibverbs that lives as long as the list.
        let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        if chosen.is_none() && wanted.is_none_or(|w| w == name) {
            chosen = Some((dev, name.clone()));
        }
        names.push(name);
    }
    let result = match chosen {
        None if names.is_empty() => Err(unavailable(
            "no RDMA device found (ibv_get_device_list returned an empty list; is the \
             provider library for this device installed?)",
        )),
        None => Err(unavailable(format!(
            "no RDMA device named `{}` (devices: {})",
            wanted.unwrap_or(""),
            names.join(", ")
        ))),
        Some((dev, name)) => {
            // SAFETY: `dev` is a valid device of the live list; ibv_open_device may
            // be called before the list is freed.
            let ctx = unsafe { ibv_open_device(dev) };
            if ctx.is_null() {
                Err(unavailable(format!(
                    "cannot open RDMA device {name}: {}",
                    last_os_error()
                )))
            } else {
                Ok((ctx, name))
            }
        }
    };
    // SAFETY: `list` came from ibv_get_device_list; an opened context stays valid.
    unsafe { ibv_free_device_list(list) };
    let (ctx, name) = result?;
    let close = |e: TransportError| {
        // SAFETY: `ctx` was opened above and nothing else refers to it yet.
        unsafe { ibv_close_device(ctx) };
        e
    };
    // SAFETY: ibv_device_attr is plain data; all-zero is a valid value.
    let mut dev_attr: ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `ctx` is open, `dev_attr` a valid out-pointer.
    let rc = unsafe { ibv_query_device(ctx, &mut dev_attr) };
    if rc != 0 {
        return Err(close(unavailable(format!(
            "cannot query RDMA device {name}: {}",
            rc_error(rc)
        ))));
    }
    if port == 0 || port > dev_attr.phys_port_cnt {
        return Err(close(unavailable(format!(
            "RDMA device {name} has no port {port} (ports 1..={})",
            dev_attr.phys_port_cnt
        ))));
    }
    // SAFETY: plain data, all-zero is valid.
    let mut port_attr: ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: `ctx` is open; ___ibv_query_port is verbs.h's inline ibv_query_port
    // (it passes the size of our struct to the provider).
    let rc = unsafe { ___ibv_query_port(ctx, port, &mut port_attr) };
    if rc != 0 {
        return Err(close(unavailable(format!(
            "cannot query port {port} of {name}: {}",
            rc_error(rc)
        ))));
    }
    if port_attr.state != ibv_port_state::IBV_PORT_ACTIVE {
        return Err(close(unavailable(format!(
            "port {port} of {name} is not active (state {}); check the link and the \
             subnet manager (`ibv_devinfo -d {name}`)",
            port_state_name(port_attr.state)
        ))));
    }
    Ok(Opened {
        ctx,
        name,
        port,
        port_attr,
        dev_attr,
    })
}

fn port_state_name(state: ibv_port_state::Type) -> &'static str {
    match state {
        ibv_port_state::IBV_PORT_DOWN => "DOWN",
        ibv_port_state::IBV_PORT_INIT => "INIT",
        ibv_port_state::IBV_PORT_ARMED => "ARMED",
        ibv_port_state::IBV_PORT_ACTIVE => "ACTIVE",
        ibv_port_state::IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

fn query_gid(ctx: *mut ibv_context, port: u8, index: u8) -> Option<[u8; 16]> {
    // SAFETY: ibv_gid is a union of plain bytes; all-zero is valid.
    let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
    // SAFETY: `ctx` is open, `gid` a valid out-pointer.
    let rc = unsafe { ibv_query_gid(ctx, port, c_int::from(index), &mut gid) };
    // SAFETY: every bit pattern is a valid `[u8; 16]`.
    let raw = unsafe { gid.raw };
    (rc == 0).then_some(raw)
}

/// The RoCE version of GID `index`, from sysfs (libibverbs' `ibv_query_gid_type`
/// is not in the bindings); `None` when the kernel does not say.
fn gid_type(device: &str, port: u8, index: u8) -> Option<qp::GidType> {
    let path = format!("/sys/class/infiniband/{device}/ports/{port}/gid_attrs/types/{index}");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| qp::GidType::parse(&t))
}

/// The GID index to use: the requested one, or on RoCE the one
/// [`qp::choose_roce_gid`] prefers (RoCE v2 over IPv4), or none on InfiniBand.
fn choose_gid(o: &Opened, requested: Option<u8>) -> Result<Option<(u8, [u8; 16])>, String> {
    let roce = o.port_attr.link_layer == LINK_LAYER_ETHERNET;
    let table = o.port_attr.gid_tbl_len.clamp(0, 256) as usize;
    match requested {
        Some(index) => match query_gid(o.ctx, o.port, index) {
            Some(gid) if gid != [0; 16] => Ok(Some((index, gid))),
            _ => Err(format!(
                "GID index {index} of {} port {} is empty or invalid (table has {table} \
                 entries; list them with `ibv_devinfo -v -d {}`)",
                o.name, o.port, o.name
            )),
        },
        None if !roce => Ok(None),
        None => {
            let entries: Vec<(u8, [u8; 16], Option<qp::GidType>)> = (0..table)
                .filter_map(|index| {
                    let index = index as u8;
                    let gid = query_gid(o.ctx, o.port, index).filter(|g| *g != [0; 16])?;
                    Some((index, gid, gid_type(&o.name, o.port, index)))
                })
                .collect();
            let index = qp::choose_roce_gid(&entries).ok_or_else(|| {
                format!(
                    "{} port {} is RoCE but has no GID (is the interface up with an \
                     address?)",
                    o.name, o.port
                )
            })?;
            let gid = entries.iter().find(|e| e.0 == index).map(|e| e.1);
            Ok(gid.map(|g| (index, g)))
        }
    }
}

/// See [`crate::probe`].
pub fn probe(device: Option<&str>, port: u8) -> Result<String, String> {
    let o = open_device(device, port).map_err(|e| match e {
        TransportError::Unavailable { reason, .. } => reason,
        other => other.to_string(),
    })?;
    let roce = o.port_attr.link_layer == LINK_LAYER_ETHERNET;
    let gid = choose_gid(&o, None);
    // SAFETY: `o.ctx` was opened by open_device and is closed exactly once here.
    unsafe { ibv_close_device(o.ctx) };
    let gid = gid?;
    let mtu = qp::mtu_bytes(o.port_attr.active_mtu as u8).unwrap_or(0);
    Ok(format!(
        "{} port {}: active, {}, MTU {mtu}, {}",
        o.name,
        o.port,
        if roce {
            "Ethernet (RoCE)"
        } else {
            "InfiniBand"
        },
        match gid {
            Some((index, _)) => format!("GID index {index}"),
            None => format!("LID {}", o.port_attr.lid),
        }
    ))
}

// ---------------------------------------------------------------------------
// Owned resources

/// Page-aligned memory registered with the protection domain.
struct Registered {
    mem: *mut u8,
    layout: Layout,
    mr: *mut ibv_mr,
}

impl Registered {
    fn new(pd: *mut ibv_pd, len: usize, access: u32) -> Result<Registered, TransportError> {
        let bytes = layout::alloc_bytes(len).ok_or(TransportError::TooLarge {
            transport: NAME,
            len_bytes: len,
            max_bytes: isize::MAX as usize,
        })?;
        let layout = Layout::from_size_align(bytes, layout::BUFFER_ALIGN).map_err(|_| {
            TransportError::TooLarge {
                transport: NAME,
                len_bytes: len,
                max_bytes: isize::MAX as usize,
            }
        })?;
        // SAFETY: `layout` has a non-zero size (alloc_bytes never returns 0).
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(setup(format!("cannot allocate {bytes} bytes")));
        }
        // SAFETY: `pd` is a live protection domain; [mem, mem+bytes) is our
        // allocation and stays allocated until the MR is deregistered (Drop).
        let mr = unsafe { ibv_reg_mr(pd, mem.cast::<c_void>(), bytes, access as c_int) };
        if mr.is_null() {
            let err = last_os_error();
            // SAFETY: allocated above with this layout, never registered.
            unsafe { std::alloc::dealloc(mem, layout) };
            let hint = if err.raw_os_error() == Some(libc::ENOMEM) {
                " (the locked-memory limit is too small: raise `ulimit -l`)"
            } else {
                ""
            };
            return Err(setup(format!(
                "memory registration of {bytes} bytes failed: {err}{hint}"
            )));
        }
        Ok(Registered { mem, layout, mr })
    }

    fn addr(&self, offset: usize) -> u64 {
        self.mem as u64 + offset as u64
    }

    fn lkey(&self) -> u32 {
        // SAFETY: `mr` is valid until Drop.
        unsafe { (*self.mr).lkey }
    }

    fn rkey(&self) -> u32 {
        // SAFETY: `mr` is valid until Drop.
        unsafe { (*self.mr).rkey }
    }

    /// The first `len` bytes, for a user buffer that no request refers to.
    fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= self.layout.size());
        // SAFETY: `mem` is a live allocation of layout.size() >= len initialized
        // (zeroed) bytes. Only `buffer()` calls this, for a buffer no request holds
        // any part of, so no work request that the device could write (or, for
        // `bytes_mut`, read) through is outstanding on it (inline sends were
        // copied at post time; a broken connection's QPs are in the error state,
        // where the device writes nothing).
        unsafe { std::slice::from_raw_parts(self.mem, len) }
    }

    fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.layout.size());
        // SAFETY: as in `bytes` (only `buffer_mut()` calls this, for a buffer no
        // request holds any part of), and `&mut self` makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem, len) }
    }

    /// Copies `len` bytes at `from` in this memory to `to` in `dst`, through raw
    /// pointers: no reference is made over bytes the device may be filling (other
    /// receive slots, other regions of a busy buffer).
    ///
    /// # Safety
    /// The device neither writes `[from, from+len)` nor touches `[to, to+len)` of
    /// `dst` while the copy runs (a slot whose receive has completed and is not
    /// re-posted yet; the region of a receive that holds it exclusively and has
    /// nothing posted on it).
    unsafe fn copy_to(&self, from: usize, dst: &Registered, to: usize, len: usize) {
        assert!(from
            .checked_add(len)
            .is_some_and(|e| e <= self.layout.size()));
        assert!(to.checked_add(len).is_some_and(|e| e <= dst.layout.size()));
        // SAFETY: both ranges lie inside live allocations (asserted above); they do
        // not overlap (slot area and user buffers are separate allocations, and the
        // caller copies between them); the caller guarantees the device leaves them
        // alone.
        unsafe { std::ptr::copy_nonoverlapping(self.mem.add(from), dst.mem.add(to), len) }
    }

    /// Writes `data` at `offset`.
    ///
    /// # Safety
    /// The device does not read or write `[offset, offset+data.len())` while this
    /// runs (a send slot whose previous send has completed; the region of a
    /// receive that holds it exclusively and has nothing posted on it).
    unsafe fn write_at(&self, offset: usize, data: &[u8]) {
        assert!(offset
            .checked_add(data.len())
            .is_some_and(|e| e <= self.layout.size()));
        // SAFETY: in bounds (asserted), `data` is another allocation, and the caller
        // guarantees the device leaves the range alone.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.mem.add(offset), data.len()) }
    }

    /// Reads `out.len()` bytes at `offset`.
    ///
    /// # Safety
    /// The device does not write `[offset, offset+out.len())` while this runs (a
    /// receive slot whose receive has completed and is not re-posted yet).
    unsafe fn read_at(&self, offset: usize, out: &mut [u8]) {
        assert!(offset
            .checked_add(out.len())
            .is_some_and(|e| e <= self.layout.size()));
        // SAFETY: in bounds (asserted), `out` is another allocation, and the caller
        // guarantees the device does not write the range.
        unsafe { std::ptr::copy_nonoverlapping(self.mem.add(offset), out.as_mut_ptr(), out.len()) }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // SAFETY: `mr` registered `mem`; deregister first, then free the memory.
        unsafe {
            ibv_dereg_mr(self.mr);
            std::alloc::dealloc(self.mem, self.layout);
        }
    }
}

/// Everything allocated from the device, destroyed in dependency order.
struct Resources {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    channel: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
    /// Message QPs, indexed by rank; null for this rank.
    qps: Vec<*mut ibv_qp>,
    /// Bulk QPs (send path), indexed by rank; null for this rank and on the write path.
    bulk: Vec<*mut ibv_qp>,
    buffers: Vec<Option<Buffer>>,
    slots: Option<Registered>,
    unacked_events: u32,
}

struct Buffer {
    reg: Registered,
    len: usize,
    /// The regions pending requests read or write (see [`Holds`]).
    holds: Holds,
}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: each handle was created from the ones after it in this list and is
        // destroyed once, children before parents (QPs and MRs before the CQ and the
        // PD, the CQ before its channel, everything before the context).
        unsafe {
            for qp in self.qps.drain(..).chain(self.bulk.drain(..)) {
                if !qp.is_null() {
                    ibv_destroy_qp(qp);
                }
            }
            self.buffers.clear();
            self.slots = None;
            if !self.cq.is_null() {
                if self.unacked_events > 0 {
                    ibv_ack_cq_events(self.cq, self.unacked_events);
                }
                ibv_destroy_cq(self.cq);
            }
            if !self.channel.is_null() {
                ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
            if !self.ctx.is_null() {
                ibv_close_device(self.ctx);
            }
        }
    }
}

fn modify(qp: *mut ibv_qp, t: &Transition, port: u8) -> std::io::Result<()> {
    // SAFETY: ibv_qp_attr is plain data; all-zero is valid and means "not set".
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = u32::from(t.state);
    attr.pkey_index = t.pkey_index;
    attr.port_num = t.port;
    attr.qp_access_flags = t.access;
    attr.path_mtu = u32::from(t.path_mtu);
    attr.dest_qp_num = t.dest_qpn;
    attr.rq_psn = t.rq_psn;
    attr.sq_psn = t.sq_psn;
    attr.max_dest_rd_atomic = t.max_dest_rd_atomic;
    attr.max_rd_atomic = t.max_rd_atomic;
    attr.min_rnr_timer = t.min_rnr_timer;
    attr.timeout = t.timeout;
    attr.retry_cnt = t.retry_cnt;
    attr.rnr_retry = t.rnr_retry;
    if t.mask & qp::mask::AV != 0 {
        attr.ah_attr.dlid = t.dlid;
        attr.ah_attr.port_num = port;
        if let Some((dgid, sgid_index)) = t.grh {
            attr.ah_attr.is_global = 1;
            attr.ah_attr.grh.dgid = ibv_gid { raw: dgid };
            attr.ah_attr.grh.sgid_index = sgid_index;
            attr.ah_attr.grh.hop_limit = qp::HOP_LIMIT;
        }
    }
    // SAFETY: `qp` is a live QP, `attr` is initialized for every bit in the mask.
    let rc = unsafe { ibv_modify_qp(qp, &mut attr, t.mask as c_int) };
    if rc == 0 {
        Ok(())
    } else {
        Err(rc_error(rc))
    }
}

/// Moves a QP to the error state (any state may go there).
fn to_error(qp: *mut ibv_qp) -> std::io::Result<()> {
    // SAFETY: plain data, all-zero is valid.
    let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = ibv_qp_state::IBV_QPS_ERR;
    // SAFETY: `qp` is live; the mask names only the state, which is set.
    let rc = unsafe { ibv_modify_qp(qp, &mut attr, qp::mask::STATE as c_int) };
    if rc == 0 {
        Ok(())
    } else {
        Err(rc_error(rc))
    }
}

// ---------------------------------------------------------------------------
// The transport

/// How a request uses its region: a send reads it, a receive writes it.
fn access(is_send: bool) -> Access {
    if is_send {
        Access::Read
    } else {
        Access::Write
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
    /// Write path: the advertised length differed; the write carried no data.
    mismatch: Option<u32>,
    state: State,
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
    local: LocalPort,
    peers: Vec<Peer>,
    /// Per peer: when a completion concerning it was last handled.
    last_progress: Vec<Instant>,
    requests: HashMap<u64, Request>,
    /// Inline sends retired at post time whose completion is still due: request
    /// id to peer.
    detached: HashMap<u64, Rank>,
    next_request: u64,
    device: String,
    inline_sends: u64,
    cq_events: u64,
    credit_messages: u64,
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

/// See [`crate::open`].
pub fn open(
    control: &mut dyn Control,
    opts: &VerbsOptions,
) -> Result<VerbsTransport, TransportError> {
    let rank = control.rank();
    let size = control.size();
    // Set up locally, then tell everybody whether it worked: a rank that failed
    // must still take part in the exchange, or the others would wait for it.
    let local = prepare(rank, size, opts);
    let message = match &local {
        Ok((_, ep)) => wire::setup_message(Ok(ep)),
        Err(e) => wire::setup_message(Err(&e.to_string())),
    };
    let all = control
        .allgather(&message)
        .map_err(|e| setup(format!("exchanging queue-pair addresses: {e}")))?;
    let (mut t, _own) = local?;
    let endpoints = wire::endpoints_from(&all, size, rank, t.op).map_err(setup)?;
    t.connect(&endpoints)?;
    control
        .barrier()
        .map_err(|e| setup(format!("barrier after connecting: {e}")))?;
    Ok(t)
}

/// Opens the device, creates PD, CQ, one QP per peer (in INIT, receives posted on
/// the write path) and returns the endpoint to publish.
fn prepare(
    rank: Rank,
    size: usize,
    opts: &VerbsOptions,
) -> Result<(VerbsTransport, Endpoint), TransportError> {
    let o = open_device(opts.device.as_deref(), opts.port)?;
    let mut res = Resources {
        ctx: o.ctx,
        pd: std::ptr::null_mut(),
        channel: std::ptr::null_mut(),
        cq: std::ptr::null_mut(),
        qps: vec![std::ptr::null_mut(); size],
        bulk: vec![std::ptr::null_mut(); size],
        buffers: Vec::new(),
        slots: None,
        unacked_events: 0,
    };
    let gid = choose_gid(&o, opts.gid_index).map_err(unavailable)?;
    let peers_n = size.saturating_sub(1).max(1);
    let depth = layout::queue_depth(
        opts.queue_depth,
        o.dev_attr.max_qp_wr.max(0) as u32,
        o.dev_attr.max_cqe.max(0) as usize,
        peers_n,
    )
    .map_err(|e| setup(format!("{}: {e}", o.name)))?;
    // every work request that can be outstanding has room for its completion
    let cqe = layout::cq_entries(depth, peers_n);

    // SAFETY: `res.ctx` is open; the PD is released by Resources::drop.
    res.pd = unsafe { ibv_alloc_pd(res.ctx) };
    if res.pd.is_null() {
        return Err(setup(format!(
            "cannot allocate a protection domain: {}",
            last_os_error()
        )));
    }
    if opts.wait == WaitMode::Block {
        // SAFETY: `res.ctx` is open; destroyed by Resources::drop after the CQ.
        res.channel = unsafe { ibv_create_comp_channel(res.ctx) };
        if res.channel.is_null() {
            return Err(setup(format!(
                "cannot create a completion channel: {}",
                last_os_error()
            )));
        }
    }
    // SAFETY: `res.ctx` is open, `res.channel` is null or a live channel of it.
    res.cq = unsafe { ibv_create_cq(res.ctx, cqe as c_int, std::ptr::null_mut(), res.channel, 0) };
    if res.cq.is_null() {
        return Err(setup(format!(
            "cannot create a completion queue of {cqe} entries: {}",
            last_os_error()
        )));
    }

    let local = LocalPort {
        port: o.port,
        mtu: o.port_attr.active_mtu as u8,
        gid_index: gid.map(|(i, _)| i),
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id());
    let mut max_inline = u32::MAX;
    let mut qps = vec![QpAddr::default(); size];
    let mut bulk = vec![QpAddr::default(); size];
    let peers: Vec<Peer> = (0..size).map(|_| Peer::default()).collect();
    for peer in (0..size).filter(|&p| p != rank) {
        for is_bulk in [false, true] {
            if is_bulk && opts.op == VerbsOp::Write {
                continue;
            }
            let (qp, granted) = create_qp(&res, depth, opts.max_inline)?;
            if is_bulk {
                res.bulk[peer] = qp;
            } else {
                res.qps[peer] = qp;
            }
            max_inline = max_inline.min(granted);
            modify(qp, &qp::to_init(&local), o.port)
                .map_err(|e| setup(format!("queue pair for rank {peer} RESET->INIT: {e}")))?;
            let addr = QpAddr {
                // SAFETY: `qp` is live.
                qpn: unsafe { (*qp).qp_num },
                psn: qp::initial_psn(rank, peer + usize::from(is_bulk) * size, seed),
            };
            if is_bulk {
                bulk[peer] = addr;
            } else {
                qps[peer] = addr;
            }
        }
    }
    if max_inline == u32::MAX {
        max_inline = 0;
    }
    let slots = SlotLayout {
        ranks: size,
        recv_depth: depth as usize,
        recv_bytes: match opts.op {
            VerbsOp::Send => layout::EAGER_BYTES,
            VerbsOp::Write => SLOT_BYTES,
        },
        send_depth: depth as usize,
    };
    let endpoint = Endpoint {
        op: opts.op,
        mtu: local.mtu,
        lid: o.port_attr.lid,
        gid: gid.map(|(_, g)| g).unwrap_or([0; 16]),
        qps,
        bulk,
        recv_depth: depth,
    };
    let mut t = VerbsTransport {
        res,
        rank,
        size,
        op: opts.op,
        wait: opts.wait,
        timeout: opts.timeout,
        depth,
        max_inline,
        max_msg: layout::max_message(o.port_attr.max_msg_sz),
        slots,
        local,
        peers,
        last_progress: vec![Instant::now(); size],
        requests: HashMap::new(),
        detached: HashMap::new(),
        next_request: 0,
        device: o.name.clone(),
        inline_sends: 0,
        cq_events: 0,
        credit_messages: 0,
    };
    if size > 1 {
        t.res.slots = Some(Registered::new(
            t.res.pd,
            slots.bytes(),
            qp::access::LOCAL_WRITE,
        )?);
        for peer in (0..size).filter(|&p| p != rank) {
            for i in 0..slots.recv_depth {
                t.post_slot_recv(peer, slots.recv_slot(peer, i))?;
            }
        }
    }
    Ok((t, endpoint))
}

/// Creates an RC QP on the shared CQ, asking for `want_inline` bytes of inline
/// data and settling for less (halving down to 0) if the device refuses.
fn create_qp(
    res: &Resources,
    depth: u32,
    want_inline: u32,
) -> Result<(*mut ibv_qp, u32), TransportError> {
    let mut inline = want_inline;
    loop {
        // SAFETY: plain data, all-zero is valid.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = res.cq;
        init.recv_cq = res.cq;
        init.qp_type = ibv_qp_type::IBV_QPT_RC;
        init.sq_sig_all = 0;
        init.cap.max_send_wr = depth;
        init.cap.max_recv_wr = depth;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = inline;
        // SAFETY: `res.pd` and `res.cq` are live; `init` is initialized. On success
        // the library writes the granted capabilities back into `init.cap`.
        let qp = unsafe { ibv_create_qp(res.pd, &mut init) };
        if !qp.is_null() {
            return Ok((qp, init.cap.max_inline_data));
        }
        let err = last_os_error();
        if inline == 0 {
            return Err(setup(format!(
                "cannot create a reliable-connected queue pair of depth {depth}: {err}"
            )));
        }
        inline /= 2;
    }
}

impl VerbsTransport {
    fn connect(&mut self, endpoints: &[Endpoint]) -> Result<(), TransportError> {
        let own = &endpoints[self.rank];
        let rel = Reliability::default();
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            let qp = self.res.qps[peer];
            let remote = &endpoints[peer];
            self.peers[peer].credits =
                Credits::new(remote.recv_depth, self.slots.recv_depth as u32);
            let rtr = qp::to_rtr(&self.local, remote, remote.qps[self.rank], &rel);
            modify(qp, &rtr, self.local.port)
                .map_err(|e| setup(format!("queue pair for rank {peer} INIT->RTR: {e}")))?;
            let rts = qp::to_rts(own.qps[peer].psn, &rel);
            modify(qp, &rts, self.local.port)
                .map_err(|e| setup(format!("queue pair for rank {peer} RTR->RTS: {e}")))?;
            let bulk = self.res.bulk[peer];
            if !bulk.is_null() {
                let rtr = qp::to_rtr(&self.local, remote, remote.bulk[self.rank], &rel);
                modify(bulk, &rtr, self.local.port).map_err(|e| {
                    setup(format!("bulk queue pair for rank {peer} INIT->RTR: {e}"))
                })?;
                let rts = qp::to_rts(own.bulk[peer].psn, &rel);
                modify(bulk, &rts, self.local.port)
                    .map_err(|e| setup(format!("bulk queue pair for rank {peer} RTR->RTS: {e}")))?;
            }
        }
        Ok(())
    }

    fn check_peer(&self, peer: Rank) -> Result<(), TransportError> {
        if peer >= self.size || peer == self.rank {
            return Err(TransportError::NoSuchPeer {
                transport: NAME,
                peer,
                size: self.size,
                me: self.rank,
            });
        }
        Ok(())
    }

    fn buf(&self, buffer: BufferId) -> Result<&Buffer, TransportError> {
        self.res
            .buffers
            .get(buffer.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            })
    }

    fn buf_mut(&mut self, buffer: BufferId) -> Result<&mut Buffer, TransportError> {
        self.res
            .buffers
            .get_mut(buffer.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(TransportError::UnknownBuffer {
                transport: NAME,
                buffer,
            })
    }

    fn post_slot_recv(&mut self, peer: Rank, slot: usize) -> Result<(), TransportError> {
        let slots = self.res.slots.as_ref().expect("slots");
        let mut sge = ibv_sge {
            addr: slots.addr(self.slots.offset(slot)),
            length: self.slots.slot_bytes(slot) as u32,
            lkey: slots.lkey(),
        };
        // SAFETY: plain data, all-zero is valid.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = layout::wr_id(WrKind::SlotRecv, slot as u64);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live; `wr` and `sge` are valid for the call (the
        // provider copies them); the slot memory is registered and outlives the QP.
        let rc = unsafe { ibv_post_recv(self.res.qps[peer], &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post receive", rc_error(rc)));
        }
        Ok(())
    }

    fn io(&self, peer: Rank, op: &'static str, source: std::io::Error) -> TransportError {
        TransportError::Io {
            transport: NAME,
            peer,
            op,
            source,
        }
    }

    fn start(
        &mut self,
        peer: Rank,
        region: Region,
        is_send: bool,
    ) -> Result<RequestId, TransportError> {
        self.check_peer(peer)?;
        let capacity = self.buf(region.buffer)?.len;
        let range = layout::region_range(region, capacity)?;
        layout::check_len(region.len, self.max_msg)?;
        if let Some(reason) = &self.peers[peer].broken {
            return Err(self.io(
                peer,
                if is_send { "send" } else { "recv" },
                std::io::Error::other(reason.clone()),
            ));
        }
        // A receive has its bytes to itself, sends share theirs: the CPU may then
        // copy an eager message into a receive's region while other requests on
        // the buffer are in flight (no work request covers those bytes).
        if !self
            .buf_mut(region.buffer)?
            .holds
            .try_hold(range, access(is_send))
        {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer: region.buffer,
            });
        }
        let id = self.next_request;
        self.next_request += 1;
        self.requests.insert(
            id,
            Request {
                peer,
                region,
                is_send,
                mismatch: None,
                state: State::Queued,
            },
        );
        if is_send {
            self.peers[peer].queued_sends.push_back(id);
        } else if self.is_eager(region.len) {
            // nothing to post: the message lands in a pre-posted slot, or has
            // already arrived and waits in a copy
            match self.peers[peer].unexpected.pop_front() {
                Some(data) => self.deliver_unexpected(id, &data),
                None => {
                    self.requests.get_mut(&id).expect("request").state = State::Posted;
                    self.peers[peer].awaiting.push_back(id);
                }
            }
        } else {
            self.peers[peer].queued_recvs.push_back(id);
        }
        self.pump(peer);
        Ok(RequestId(id))
    }

    /// Send path: whether a message of `len` bytes goes eagerly through a slot.
    fn is_eager(&self, len: usize) -> bool {
        self.op == VerbsOp::Send && len <= self.slots.recv_bytes
    }

    /// Copies an eager message out of its slot into the oldest waiting receive,
    /// completes that receive, and re-posts the slot.
    fn deliver_eager(&mut self, peer: Rank, slot: usize, len: usize) {
        let id = self.peers[peer]
            .awaiting
            .pop_front()
            .expect("a waiting receive");
        let region = self.requests[&id].region;
        let state = if len != region.len {
            State::Failed(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: region.len,
                got_bytes: len,
            })
        } else {
            let offset = self.slots.offset(slot);
            let slots = self.res.slots.as_ref().expect("slots");
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("busy buffer");
            // SAFETY: the slot's receive has completed and is re-posted only below,
            // after the copy. This receive holds its region exclusively (start()
            // refused every request whose region overlaps it, and accepts none
            // until it retires) and, being eager, posted nothing into it: no work
            // request the device could read or write through covers those bytes.
            // Other slots and other regions of the buffer may be in flight: no
            // reference is made over them.
            unsafe { slots.copy_to(offset, &b.reg, region.offset, len) };
            State::Done
        };
        self.requests.get_mut(&id).expect("request").state = state;
        self.repost_slot(peer, slot);
    }

    /// Completes eager receive `id` with a message that arrived before it and was
    /// copied out of its slot.
    fn deliver_unexpected(&mut self, id: u64, data: &[u8]) {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let state = if data.len() != region.len {
            State::Failed(TransportError::SizeMismatch {
                transport: NAME,
                peer,
                expected_bytes: region.len,
                got_bytes: data.len(),
            })
        } else {
            let b = self.res.buffers[region.buffer.0 as usize]
                .as_ref()
                .expect("busy buffer");
            // SAFETY: this receive holds its region exclusively (start() refused
            // every request whose region overlaps it) and, being eager, posted
            // nothing into it: no work request the device could read or write
            // through covers those bytes. Other regions of the buffer may be in
            // flight: no reference is made over them.
            unsafe { b.reg.write_at(region.offset, data) };
            State::Done
        };
        self.requests.get_mut(&id).expect("request").state = state;
    }

    /// Send path: an eager message of `len` bytes in `slot` arrived before any
    /// receive for it: copies it out, so that the slot is re-posted at once and
    /// the peer gets its credit back. Keeping the message in its slot until the
    /// receive came would hold that credit, and a peer that sent enough of them
    /// would be left unable to advertise a receive this rank's send waits for.
    fn keep_unexpected(&mut self, peer: Rank, slot: usize, len: usize) {
        let mut data = vec![0u8; len];
        let offset = self.slots.offset(slot);
        // SAFETY: this slot's receive has completed and is re-posted only after
        // this copy (by the caller); the device does not write it meanwhile.
        unsafe {
            self.res
                .slots
                .as_ref()
                .expect("slots")
                .read_at(offset, &mut data)
        };
        self.peers[peer].unexpected.push_back(data);
    }

    /// Re-posts a receive slot whose message has been handled; a failure breaks
    /// the connection (the slot would be missing from then on).
    fn repost_slot(&mut self, peer: Rank, slot: usize) {
        if self.peers[peer].broken.is_some() {
            return;
        }
        match self.post_slot_recv(peer, slot) {
            Ok(()) => self.peers[peer].credits.reposted(),
            Err(e) => self.break_peer(peer, format!("re-posting a receive slot failed: {e}")),
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
            .collect();
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

    /// Posts what is queued for `peer` as far as queue space, send credits (and
    /// advertisements) allow, then returns owed credits nothing carried back.
    fn pump(&mut self, peer: Rank) {
        if self.peers[peer].broken.is_some() {
            let reason = self.peers[peer].broken.clone().unwrap_or_default();
            self.break_peer(peer, reason);
            return;
        }
        // receives first: their advertisements unblock the peer
        loop {
            let p = &self.peers[peer];
            let Some(&id) = p.queued_recvs.front() else {
                break;
            };
            // the advertisement takes a credit, the bulk receive (send path) room
            let room = p.sq_used < self.depth
                && p.credits.can_send_data()
                && (self.op == VerbsOp::Write || p.rq_used < self.depth);
            if !room {
                break;
            }
            self.peers[peer].queued_recvs.pop_front();
            if let Err(e) = self.post_recv_and_advert(id) {
                self.post_failed(peer, id, e);
                return;
            }
        }
        loop {
            let p = &self.peers[peer];
            let Some(&id) = p.queued_sends.front() else {
                break;
            };
            let eager = self.is_eager(self.requests[&id].region.len);
            // everything but the send path's bulk transfers lands in a receive slot
            let needs_credit = eager || self.op == VerbsOp::Write;
            if p.sq_used >= self.depth
                || (!eager && p.adverts.is_empty())
                || (needs_credit && !p.credits.can_send_data())
            {
                break;
            }
            self.peers[peer].queued_sends.pop_front();
            if let Err(e) = self.post_data_send(id) {
                self.post_failed(peer, id, e);
                return;
            }
        }
        while self.peers[peer].broken.is_none()
            && self.peers[peer].credits.credit_due()
            && self.peers[peer].sq_used < self.depth
        {
            if let Err(e) = self.post_credit(peer) {
                self.break_peer(peer, format!("sending credits failed: {e}"));
            }
        }
    }

    /// A post for request `id` failed: the request fails with that error, and the
    /// connection breaks. Part of the exchange may have happened (a bulk receive
    /// posted but not advertised, an advertisement used up but nothing written, a
    /// credit spent): the next message would land in the wrong place, so nothing
    /// more may go over this connection.
    fn post_failed(&mut self, peer: Rank, id: u64, err: TransportError) {
        let reason = format!("a post failed: {err}");
        self.fail(id, err);
        self.break_peer(peer, reason);
    }

    /// A credit message: a send with immediate and no payload that returns the
    /// credits owed to `peer`.
    fn post_credit(&mut self, peer: Rank) -> Result<(), TransportError> {
        let credits = self.peers[peer].credits.consume(true);
        let mut sge = ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        };
        // no payload: the wr_id names the peer through its first send slot
        let wr_id = layout::wr_id(WrKind::SlotSend, self.slots.send_slot(peer, 0) as u64);
        let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        let imm = Some(layout::msg_imm(MsgKind::Credit, credits, 0));
        self.post_send(peer, false, wr_id, &mut sge, op, false, imm, None)?;
        self.credit_messages += 1;
        Ok(())
    }

    /// A receive that is not eager: on the send path post it on the bulk QP, then
    /// advertise it (so the send cannot arrive before it); on the write path only
    /// advertise the region.
    fn post_recv_and_advert(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        if self.op == VerbsOp::Send {
            self.post_data_recv(id)?;
        } else {
            self.peers[peer].awaiting.push_back(id);
        }
        let b = self.buf(region.buffer)?;
        let advert = Advert {
            addr: b.reg.addr(region.offset),
            rkey: b.reg.rkey(),
            len: region.len as u32,
        };
        let p = &mut self.peers[peer];
        let slot = self.slots.send_slot(peer, p.next_send_slot);
        p.next_send_slot = (p.next_send_slot + 1) % self.slots.send_depth;
        let offset = self.slots.offset(slot);
        let slots = self.res.slots.as_ref().expect("slots");
        // SAFETY: the send slot is free: at most `depth` sends are outstanding, the
        // ring has `depth` slots and one QP's sends complete in order, so the send
        // that used this slot last has completed; nothing else uses send slots.
        unsafe { slots.write_at(offset, &advert.encode()) };
        let mut sge = ibv_sge {
            addr: slots.addr(offset),
            length: ADVERT_BYTES as u32,
            lkey: slots.lkey(),
        };
        let inline = layout::goes_inline(ADVERT_BYTES, self.max_inline);
        let wr_id = layout::wr_id(WrKind::SlotSend, slot as u64);
        let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        let credits = self.peers[peer].credits.consume(true);
        let imm = Some(layout::msg_imm(MsgKind::Advert, credits, 0));
        self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, None)?;
        self.requests.get_mut(&id).expect("request").state = State::Posted;
        Ok(())
    }

    /// Send path, large message: a receive straight into the region, on the bulk QP.
    fn post_data_recv(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let b = self.buf(region.buffer)?;
        let mut sge = ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        };
        // SAFETY: plain data, all-zero is valid.
        let mut wr: ibv_recv_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = layout::wr_id(WrKind::DataRecv, id);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad = std::ptr::null_mut();
        // SAFETY: the bulk QP is live; the region lies inside a registered buffer
        // and is held by this receive exclusively until it retires (the buffer
        // cannot be freed or viewed, no other request's region overlaps it).
        let rc = unsafe { ibv_post_recv(self.res.bulk[peer], &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post receive", rc_error(rc)));
        }
        self.peers[peer].rq_used += 1;
        Ok(())
    }

    fn post_data_send(&mut self, id: u64) -> Result<(), TransportError> {
        let r = &self.requests[&id];
        let (peer, region) = (r.peer, r.region);
        let b = self.buf(region.buffer)?;
        let mut sge = ibv_sge {
            addr: b.reg.addr(region.offset),
            length: region.len as u32,
            lkey: b.reg.lkey(),
        };
        let len = region.len as u32;
        let inline = layout::goes_inline(region.len, self.max_inline);
        let wr_id = layout::wr_id(WrKind::DataSend, id);
        let mut mismatch = None;
        if self.is_eager(region.len) {
            // into the peer's next pre-posted slot; the immediate marks it as data
            // and returns owed credits
            let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
            let credits = self.peers[peer].credits.consume(true);
            let imm = Some(layout::msg_imm(MsgKind::Eager, credits, len));
            self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, None)?;
        } else {
            let advert = self.peers[peer]
                .adverts
                .pop_front()
                .expect("checked by pump");
            if advert.len != len {
                mismatch = Some(advert.len);
            }
            match self.op {
                // into the receive posted on the bulk QP before this advertisement
                VerbsOp::Send if mismatch.is_none() => {
                    let op = ibv_wr_opcode::IBV_WR_SEND;
                    self.post_send(peer, true, wr_id, &mut sge, op, inline, None, None)?;
                }
                // Send nothing of a message whose length differs from the posted
                // receive (a longer one would fail the receive with a local length
                // error and break the connection), but complete that receive with
                // the length and the refusal in the immediate, so that both sides
                // report the mismatch, as on the write path.
                VerbsOp::Send => {
                    sge.length = 0;
                    let op = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                    let imm = Some(layout::write_imm(len, true));
                    self.post_send(peer, true, wr_id, &mut sge, op, false, imm, None)?;
                }
                VerbsOp::Write => {
                    // completes a receive slot: one credit (the immediate is the length)
                    self.peers[peer].credits.consume(false);
                    let op = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                    let remote = Some((advert.addr, advert.rkey));
                    if mismatch.is_none() {
                        let imm = Some(layout::write_imm(len, false));
                        self.post_send(peer, false, wr_id, &mut sge, op, inline, imm, remote)?;
                    } else {
                        // write nothing, but tell the receiver, so both sides fail
                        sge.length = 0;
                        let imm = Some(layout::write_imm(len, true));
                        self.post_send(peer, false, wr_id, &mut sge, op, false, imm, remote)?;
                    }
                }
            }
        }
        let r = self.requests.get_mut(&id).expect("request");
        r.mismatch = mismatch;
        if inline && mismatch.is_none() {
            // The data was copied into the work request: the buffer is free now, as
            // in C verbs code. The completion is still reaped (every send is
            // signaled) to account for send-queue space.
            r.state = State::Done;
            self.inline_sends += 1;
            self.detached.insert(id, peer);
        } else {
            r.state = State::Posted;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn post_send(
        &mut self,
        peer: Rank,
        bulk: bool,
        wr_id: u64,
        sge: &mut ibv_sge,
        opcode: ibv_wr_opcode::Type,
        inline: bool,
        imm: Option<u32>,
        remote: Option<(u64, u32)>,
    ) -> Result<(), TransportError> {
        // SAFETY: plain data (unions of plain data), all-zero is valid.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = sge;
        wr.num_sge = if sge.length == 0 { 0 } else { 1 };
        wr.opcode = opcode;
        wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0
            | if inline {
                ibv_send_flags::IBV_SEND_INLINE.0
            } else {
                0
            };
        if let Some(imm) = imm {
            // immediate data travels in network byte order
            wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        if let Some((addr, rkey)) = remote {
            wr.wr.rdma.remote_addr = addr;
            wr.wr.rdma.rkey = rkey;
        }
        let qp = if bulk {
            self.res.bulk[peer]
        } else {
            self.res.qps[peer]
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: the QP is live and in RTS; `wr` and the sge it points to are valid
        // for the call; the source memory is registered and stays allocated (the
        // request's held region, or the slot ring) until the completion is polled,
        // or was copied into the work request (inline). ibv_post_send is the
        // verbs.h inline that calls the provider through the context ops table.
        let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(self.io(peer, "post send", rc_error(rc)));
        }
        self.peers[peer].sq_used += 1;
        Ok(())
    }

    /// Polls the CQ once, handles what it found; returns the number of completions.
    /// A failed poll (the CQ is unusable: completions may be lost) breaks every
    /// connection; the error is reported as an I/O error with `peer`, the rank the
    /// caller waits for.
    fn poll(&mut self, peer: Rank) -> Result<usize, TransportError> {
        const BATCH: usize = 16;
        // SAFETY: ibv_wc is plain data; all-zero is valid.
        let mut wcs: [ibv_wc; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is live and `wcs` has room for BATCH entries. ibv_poll_cq
        // is the verbs.h inline that calls the provider through the ops table.
        let n = unsafe { ibv_poll_cq(self.res.cq, BATCH as c_int, wcs.as_mut_ptr()) };
        if n < 0 {
            let reason = format!("polling the completion queue failed (ibv_poll_cq returned {n})");
            let me = self.rank;
            for p in (0..self.size).filter(|&p| p != me) {
                self.break_peer(p, reason.clone());
            }
            return Err(self.io(peer, "poll completion queue", std::io::Error::other(reason)));
        }
        let mut touched = Vec::new();
        let now = Instant::now();
        // Every completion of the batch is handled, whatever happens to one of them:
        // a failure breaks that peer's connection, never the loop (the batch has
        // been dequeued; dropping part of it would leave queue space and requests
        // unaccounted for).
        for wc in &wcs[..n as usize] {
            if let Some(peer) = self.complete(wc) {
                self.last_progress[peer] = now;
                if !touched.contains(&peer) {
                    touched.push(peer);
                }
            }
        }
        for peer in touched {
            self.pump(peer);
        }
        Ok(n as usize)
    }

    fn wc_error(&self, wc: &ibv_wc) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        let text = unsafe { CStr::from_ptr(ibv_wc_status_str(wc.status)) }.to_string_lossy();
        format!(
            "work completion failed: {text} (status {}, vendor error {:#x})",
            wc.status, wc.vendor_err
        )
    }

    /// Handles one completion; returns the peer whose queues changed.
    fn complete(&mut self, wc: &ibv_wc) -> Option<Rank> {
        let ok = wc.status == ibv_wc_status::IBV_WC_SUCCESS;
        let (kind, index) = layout::split_wr_id(wc.wr_id);
        match kind {
            WrKind::DataSend | WrKind::DataRecv => {
                let Some(r) = self.requests.get(&index) else {
                    // an inline send, retired when it was posted
                    let peer = self.detached.remove(&index)?;
                    self.peers[peer].sq_used -= 1;
                    if !ok {
                        let reason = self.wc_error(wc);
                        self.break_peer(peer, reason);
                    }
                    return Some(peer);
                };
                let (peer, len, mismatch) = (r.peer, r.region.len, r.mismatch);
                if kind == WrKind::DataSend {
                    self.detached.remove(&index);
                    self.peers[peer].sq_used -= 1;
                } else {
                    self.peers[peer].rq_used -= 1;
                }
                let state = if !ok {
                    let reason = self.wc_error(wc);
                    let err = if wc.status == ibv_wc_status::IBV_WC_LOC_LEN_ERR {
                        self.io(
                            peer,
                            "recv",
                            std::io::Error::other(format!(
                                "a message longer than the {len} bytes posted arrived"
                            )),
                        )
                    } else {
                        self.io(
                            peer,
                            if kind == WrKind::DataSend {
                                "send"
                            } else {
                                "recv"
                            },
                            std::io::Error::other(reason.clone()),
                        )
                    };
                    self.break_peer(peer, reason);
                    State::Failed(err)
                } else if let Some(expected) = mismatch {
                    State::Failed(TransportError::SizeMismatch {
                        transport: NAME,
                        peer,
                        expected_bytes: expected as usize,
                        got_bytes: len,
                    })
                } else if kind == WrKind::DataRecv
                    && wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0
                {
                    // the sender refused: the immediate carries its length
                    // SAFETY: reading the imm member of a completion that has one.
                    let imm = u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data });
                    State::Failed(TransportError::SizeMismatch {
                        transport: NAME,
                        peer,
                        expected_bytes: len,
                        got_bytes: layout::split_write_imm(imm).0 as usize,
                    })
                } else if kind == WrKind::DataRecv && wc.byte_len as usize != len {
                    State::Failed(TransportError::SizeMismatch {
                        transport: NAME,
                        peer,
                        expected_bytes: len,
                        got_bytes: wc.byte_len as usize,
                    })
                } else {
                    State::Done
                };
                if let Some(r) = self.requests.get_mut(&index) {
                    if !matches!(r.state, State::Failed(_)) {
                        r.state = state;
                    }
                }
                Some(peer)
            }
            WrKind::SlotSend => {
                let (peer, _) = self.slots.owner(index as usize)?;
                self.peers[peer].sq_used -= 1;
                if !ok {
                    let reason = self.wc_error(wc);
                    self.break_peer(peer, reason);
                }
                Some(peer)
            }
            WrKind::SlotRecv => {
                let Some((peer, true)) = self.slots.owner(index as usize) else {
                    return None;
                };
                if !ok {
                    let reason = self.wc_error(wc);
                    self.break_peer(peer, reason);
                    return Some(peer);
                }
                let slot = index as usize;
                let with_imm = wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
                let imm = with_imm.then(|| {
                    // SAFETY: reading the imm member of a completion that has one
                    // (its flags say so).
                    u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data })
                });
                if wc.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM {
                    let Some(imm) = imm else {
                        self.break_peer(peer, format!("rank {peer} wrote without immediate data"));
                        return Some(peer);
                    };
                    let (got, refused) = layout::split_write_imm(imm);
                    match self.peers[peer].awaiting.pop_front() {
                        Some(id) => {
                            let len = self.requests[&id].region.len;
                            let state = if refused || got as usize != len {
                                State::Failed(TransportError::SizeMismatch {
                                    transport: NAME,
                                    peer,
                                    expected_bytes: len,
                                    got_bytes: got as usize,
                                })
                            } else {
                                State::Done
                            };
                            self.requests.get_mut(&id).expect("request").state = state;
                        }
                        None => self.break_peer(
                            peer,
                            format!("rank {peer} wrote {got} bytes that no receive had advertised"),
                        ),
                    }
                } else {
                    let Some((kind, credits, _)) = imm.and_then(layout::split_msg_imm) else {
                        self.break_peer(peer, format!("rank {peer} sent a malformed message"));
                        return Some(peer);
                    };
                    self.peers[peer].credits.granted(credits);
                    match kind {
                        MsgKind::Eager if self.op == VerbsOp::Send => {
                            // to the oldest waiting receive, or copied out until one
                            // is posted; the slot is re-posted either way
                            let len = (wc.byte_len as usize).min(self.slots.recv_bytes);
                            if self.peers[peer].awaiting.is_empty() {
                                self.keep_unexpected(peer, slot, len);
                            } else {
                                self.deliver_eager(peer, slot, len);
                                return Some(peer);
                            }
                        }
                        MsgKind::Eager => {
                            self.break_peer(
                                peer,
                                format!("rank {peer} sent an eager message on the write path"),
                            );
                            return Some(peer);
                        }
                        MsgKind::Advert => {
                            let offset = self.slots.offset(slot);
                            let len = (wc.byte_len as usize).min(SLOT_BYTES);
                            let mut bytes = [0u8; SLOT_BYTES];
                            // SAFETY: this slot's receive has completed and is re-posted
                            // only below; the device does not write it meanwhile.
                            unsafe {
                                self.res
                                    .slots
                                    .as_ref()
                                    .expect("slots")
                                    .read_at(offset, &mut bytes[..len])
                            };
                            match Advert::decode(&bytes[..len]) {
                                Some(advert) => self.peers[peer].adverts.push_back(advert),
                                None => self.break_peer(
                                    peer,
                                    format!("rank {peer} sent a malformed receive advertisement"),
                                ),
                            }
                        }
                        MsgKind::Credit => {}
                    }
                }
                self.repost_slot(peer, slot);
                Some(peer)
            }
        }
    }

    /// Retires `id` if it finished: `Some(result)`; `None` while pending.
    fn try_retire(&mut self, id: RequestId) -> Result<Option<()>, TransportError> {
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
}

impl Drop for VerbsTransport {
    /// Lets posted sends finish (inline sends return before their completion)
    /// before the queue pairs are destroyed, for at most a second.
    fn drop(&mut self) {
        let start = Instant::now();
        while self
            .peers
            .iter()
            .any(|p| p.sq_used > 0 && p.broken.is_none())
            && start.elapsed() < Duration::from_secs(1)
        {
            if self.poll(self.rank).is_err() {
                break;
            }
        }
    }
}

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

    fn alloc_buffer(&mut self, len: usize) -> Result<BufferId, TransportError> {
        let access = qp::access::LOCAL_WRITE | qp::access::REMOTE_WRITE | qp::access::REMOTE_READ;
        let reg = Registered::new(self.res.pd, len, access)?;
        let buffer = Buffer {
            reg,
            len,
            holds: Holds::default(),
        };
        let slot = self.res.buffers.iter().position(Option::is_none);
        let index = match slot {
            Some(i) => {
                self.res.buffers[i] = Some(buffer);
                i
            }
            None => {
                self.res.buffers.push(Some(buffer));
                self.res.buffers.len() - 1
            }
        };
        Ok(BufferId(index as u32))
    }

    fn free_buffer(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        if !self.buf(buffer)?.holds.is_empty() {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer,
            });
        }
        self.res.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn buffer(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        let b = self.buf(buffer)?;
        if !b.holds.is_empty() {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer,
            });
        }
        Ok(b.reg.bytes(b.len))
    }

    fn buffer_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        let b = self.buf_mut(buffer)?;
        if !b.holds.is_empty() {
            return Err(TransportError::BufferBusy {
                transport: NAME,
                buffer,
            });
        }
        let len = b.len;
        Ok(b.reg.bytes_mut(len))
    }

    fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let r = self.isend(peer, region)?;
        self.wait(r)
    }

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
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

    fn wait_all(&mut self, requests: &[RequestId]) -> Result<(), TransportError> {
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

    fn counters(&self) -> Counters {
        Counters {
            entries: vec![
                ("inline_sends", self.inline_sends),
                ("completion_events", self.cq_events),
                ("credit_messages", self.credit_messages),
            ],
        }
    }
}
