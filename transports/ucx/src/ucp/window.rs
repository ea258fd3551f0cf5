//! One-sided operations for `ngauge rma` ([`OneSided`]): a window UCX mapped on
//! every rank (`ucp_mem_map`), whose address and packed remote key the ranks
//! exchange over the control channel, beside a transport opened on the put path
//! (context with `UCP_FEATURE_RMA` and `UCP_FEATURE_AMO64`, endpoints connected
//! and their RMA lanes warmed).
//!
//! Put and get are `ucp_put_nbx` and `ucp_get_nbx`, fetch-and-add is
//! `ucp_atomic_op_nbx` (`UCP_ATOMIC_OP_ADD`, 64 bits, the old value in the result
//! buffer); each request is released at once (`ucp_request_free`: UCX finishes
//! it). The flush is `ucp_ep_flush_nbx`, which completes every operation to the
//! peer at the origin and at the target, as `MPI_Win_flush` does. UCP has no
//! floating-point atomics and no collective epoch: no accumulate, no fence.

use super::context;
use super::memory::Mapped;
use super::{failed, setup_error, sys, UcxTransport, NAME};
use crate::{UcxOp, UcxOptions};
use ngauge_transport::one_sided::exchange_keys;
use ngauge_transport::{Control, OneSided, Rank, TransportError, WaitMode};
use std::os::raw::c_void;
use std::time::Instant;

/// A peer's window: where it lies and the key to reach it.
struct Remote {
    addr: u64,
    rkey: sys::ucp_rkey_h,
}

/// The window of every rank, with this rank's origin and result buffers.
pub struct UcxWindow {
    remote: Vec<Option<Remote>>,
    bytes: usize,
    window: Mapped,
    origin: Mapped,
    result: Mapped,
    /// The operand of fetch-and-add (1), read by UCX until the operation ends.
    one: Box<u64>,
    /// Operations started and not completed by a flush.
    pending: usize,
    /// Last: the endpoints and the context outlive the mappings and keys.
    t: UcxTransport,
}

/// Opens a transport on the put path (collective: every rank of `control` calls
/// it) and a window of `bytes` on every rank.
pub fn open_window(
    control: &mut dyn Control,
    opts: &UcxOptions,
    bytes: usize,
) -> Result<UcxWindow, TransportError> {
    let opts = UcxOptions {
        op: UcxOp::Put,
        wait: WaitMode::Poll,
        ..opts.clone()
    };
    let t = super::connect::open_with(control, &opts, u64::from(sys::UCP_FEATURE_AMO64))?;
    let map = || Mapped::new(t.ctx.ctx, bytes.max(8));
    let mapped = emulated(&t).and_then(|()| Ok((map()?, map()?, map()?)));
    let mine = match &mapped {
        Ok((window, _, _)) => window
            .rkey()
            .map(|rkey| [&window.addr().to_le_bytes()[..], &rkey].concat()),
        Err(e) => Err(e.clone()),
    };
    let keys = exchange_keys(
        control,
        NAME,
        mine.as_deref().map_err(String::as_str),
        |k| {
            let addr = u64::from_le_bytes(k.get(..8)?.try_into().ok()?);
            (k.len() > 8).then(|| (addr, k[8..].to_vec()))
        },
    );
    let (window, origin, result) = mapped.map_err(|reason| TransportError::Unavailable {
        transport: NAME,
        reason,
    })?;
    let mut w = UcxWindow {
        remote: Vec::new(),
        bytes,
        window,
        origin,
        result,
        one: Box::new(1),
        pending: 0,
        t,
    };
    for (peer, (addr, packed)) in keys?.into_iter().enumerate() {
        if peer == w.t.rank {
            w.remote.push(None);
            continue;
        }
        let mut rkey: sys::ucp_rkey_h = std::ptr::null_mut();
        // SAFETY: the endpoint to `peer` is live; the packed key is read during
        // the call only; the handle is destroyed in `drop`, before the transport
        // closes the endpoint.
        let rc = unsafe {
            sys::ucp_ep_rkey_unpack(w.t.peers[peer].ep, packed.as_ptr().cast(), &mut rkey)
        };
        context::check("ucp_ep_rkey_unpack", rc).map_err(setup_error)?;
        w.remote.push(Some(Remote { addr, rkey }));
    }
    Ok(w)
}

/// Refuses endpoints with no atomic lane (`amo`): there UCX emulates one-sided
/// operations with messages the target handles in its progress (TCP), and a
/// passive target does not progress while the origin works.
fn emulated(t: &UcxTransport) -> Result<(), String> {
    let facts = t.endpoint_facts();
    let Some(ep) = facts
        .iter()
        .find(|e| !e.lanes.iter().any(|l| l.roles.iter().any(|r| r == "amo")))
    else {
        return Ok(());
    };
    let mut lanes: Vec<String> = ep.lanes.iter().map(|l| l.transport.clone()).collect();
    lanes.dedup();
    Err(format!(
        "UCX has no atomic lane to rank {} (lanes over {}): it would emulate one-sided \
         operations in the target's progress, which a passive target does not give; \
         use --ucx-tls posix,self on one host, or an RDMA transport (rc, dc)",
        ep.peer,
        lanes.join(",")
    ))
}

impl UcxWindow {
    /// The endpoint and window of `peer`, with `offset + len` checked against
    /// the window.
    fn target(
        &self,
        peer: Rank,
        offset: usize,
        len: usize,
        op: &'static str,
    ) -> Result<(sys::ucp_ep_h, u64, sys::ucp_rkey_h), TransportError> {
        self.t.check_peer(peer)?;
        if offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(TransportError::Io {
                transport: NAME,
                peer,
                op,
                source: std::io::Error::other(format!(
                    "{offset}+{len} bytes outside the window of {} bytes",
                    self.bytes
                )),
            });
        }
        let r = self.remote[peer].as_ref().expect("a key per peer");
        Ok((self.t.peers[peer].ep, r.addr + offset as u64, r.rkey))
    }

    /// The outcome of a started operation: its request released (UCX completes
    /// it; the flush waits for that), counted as pending.
    fn started(
        &mut self,
        call: &'static str,
        peer: Rank,
        op: &'static str,
        status: sys::ucs_status_ptr_t,
    ) -> Result<(), TransportError> {
        if sys::ptr_is_err(status) {
            return Err(failed(call, peer, op, sys::ptr_status(status)));
        }
        if sys::ptr_is_ptr(status) {
            // SAFETY: a request UCX allocated (no request memory was given);
            // freed once, UCX completes the operation on its own.
            unsafe { sys::ucp_request_free(status) };
        }
        self.pending += 1;
        Ok(())
    }

    /// Progresses until the flush request `status` of `peer` (or of the worker)
    /// ends, within the transport's timeout.
    fn complete(
        &mut self,
        call: &'static str,
        peer: Rank,
        status: sys::ucs_status_ptr_t,
    ) -> Result<(), TransportError> {
        if sys::ptr_is_err(status) {
            return Err(failed(call, peer, "flush", sys::ptr_status(status)));
        }
        if sys::ptr_is_ptr(status) {
            let start = Instant::now();
            let outcome = loop {
                // SAFETY: a request UCX allocated and not freed yet.
                let s = unsafe { sys::ucp_request_check_status(status) };
                if s != sys::UCS_INPROGRESS {
                    break (s == sys::UCS_OK)
                        .then_some(())
                        .ok_or_else(|| failed(call, peer, "flush", s));
                }
                if start.elapsed() > self.t.timeout {
                    break Err(TransportError::Timeout {
                        transport: NAME,
                        peer,
                        op: "flush",
                        after: self.t.timeout,
                    });
                }
                self.t.ctx.progress();
            };
            // SAFETY: as above; freed once (UCX releases it when it ends).
            unsafe { sys::ucp_request_free(status) };
            outcome?;
        }
        self.pending = 0;
        Ok(())
    }

    fn idle(&self, what: &'static str) -> Result<(), TransportError> {
        if self.pending == 0 {
            return Ok(());
        }
        Err(TransportError::Io {
            transport: NAME,
            peer: self.t.rank,
            op: what,
            source: std::io::Error::other(format!(
                "{} operations in flight use the buffer; flush first",
                self.pending
            )),
        })
    }

    /// Completes every operation of this rank (`ucp_worker_flush_nbx`).
    fn flush_all(&mut self) -> Result<(), TransportError> {
        // SAFETY: all-zero is a valid request parameter (nothing marked: UCX
        // allocates the request); the worker is live.
        let p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let status = unsafe { sys::ucp_worker_flush_nbx(self.t.ctx.worker, &p) };
        self.complete("ucp_worker_flush_nbx", self.t.rank, status)
    }
}

impl OneSided for UcxWindow {
    fn window_bytes(&self) -> usize {
        self.bytes
    }

    fn has_fence(&self) -> bool {
        false
    }

    fn has_accumulate(&self) -> bool {
        false
    }

    fn end_passive(&mut self) -> Result<(), TransportError> {
        self.flush_all()
    }

    fn fill_origin(&mut self, byte: u8) -> Result<(), TransportError> {
        self.idle("fill")?;
        // SAFETY: `bytes` bytes of a live mapping that no operation reads (idle).
        unsafe { std::ptr::write_bytes(self.origin.ptr(), byte, self.bytes) };
        Ok(())
    }

    fn fill_origin_f64(&mut self, value: f64) -> Result<(), TransportError> {
        self.idle("fill")?;
        for i in 0..self.bytes / 8 {
            // SAFETY: in bounds; the mapping is page-aligned, so every word is
            // aligned; no operation reads it (idle).
            unsafe { self.origin.ptr().cast::<f64>().add(i).write(value) };
        }
        Ok(())
    }

    fn put(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (ep, addr, rkey) = self.target(peer, offset, len, "put")?;
        // SAFETY: all-zero is a valid request parameter (UCX allocates the
        // request).
        let p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        // SAFETY: `ep` is live and `rkey` unpacked for it; `len` bytes of the
        // origin mapping stay unwritten until the flush (`pending`); `addr + len`
        // lies inside the peer's window (checked).
        let status = unsafe { sys::ucp_put_nbx(ep, self.origin.ptr().cast(), len, addr, rkey, &p) };
        self.started("ucp_put_nbx", peer, "put", status)
    }

    fn get(&mut self, peer: Rank, offset: usize, len: usize) -> Result<(), TransportError> {
        let (ep, addr, rkey) = self.target(peer, offset, len, "get")?;
        // SAFETY: as in `put`.
        let p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        // SAFETY: as in `put`, for the result mapping UCX writes until the flush.
        let status = unsafe { sys::ucp_get_nbx(ep, self.result.ptr().cast(), len, addr, rkey, &p) };
        self.started("ucp_get_nbx", peer, "get", status)
    }

    fn accumulate_sum_f64(
        &mut self,
        peer: Rank,
        _offset: usize,
        _count: usize,
    ) -> Result<(), TransportError> {
        Err(TransportError::Io {
            transport: NAME,
            peer,
            op: "accumulate",
            source: std::io::Error::other("UCP has no floating-point atomics"),
        })
    }

    fn fetch_add_u64(&mut self, peer: Rank, offset: usize) -> Result<(), TransportError> {
        let (ep, addr, rkey) = self.target(peer, offset, 8, "fetch_add")?;
        self.idle("fetch_add")?;
        // SAFETY: all-zero is a valid request parameter; the fields used are
        // marked.
        let mut p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_DATATYPE | sys::UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        // ucp_dt_make_contig(8): 8-byte elements.
        p.datatype = (8 << sys::UCP_DATATYPE_SHIFT) | u64::from(sys::UCP_DATATYPE_CONTIG);
        p.reply_buffer = self.result.ptr().cast::<c_void>();
        let operand: *const u64 = &*self.one;
        // SAFETY: as in `put`; the operand lives in the window (boxed) and the
        // reply lands in the result mapping, untouched until the flush; `addr`
        // is 8-aligned when `offset` is (the window is page-aligned).
        let status = unsafe {
            sys::ucp_atomic_op_nbx(
                ep,
                sys::UCP_ATOMIC_OP_ADD,
                operand.cast(),
                1,
                addr,
                rkey,
                &p,
            )
        };
        self.started("ucp_atomic_op_nbx", peer, "fetch_add", status)
    }

    fn flush(&mut self, peer: Rank) -> Result<(), TransportError> {
        self.t.check_peer(peer)?;
        // SAFETY: all-zero is a valid request parameter (UCX allocates the
        // request).
        let p: sys::ucp_request_param_t = unsafe { std::mem::zeroed() };
        // SAFETY: the endpoint is live.
        let status = unsafe { sys::ucp_ep_flush_nbx(self.t.peers[peer].ep, &p) };
        self.complete("ucp_ep_flush_nbx", peer, status)
    }

    fn fence(&mut self) -> Result<(), TransportError> {
        Err(setup_error("UCP has no collective epoch (fence)"))
    }

    fn poll_byte(&mut self, offset: usize) -> Result<u8, TransportError> {
        // Transports that emulate RMA (TCP) land a put only inside progress.
        self.t.ctx.progress();
        Ok(self.local_byte(offset))
    }

    fn local_byte(&self, offset: usize) -> u8 {
        assert!(offset < self.bytes, "offset {offset} outside the window");
        // SAFETY: in bounds (asserted) of a live mapping a peer may be writing:
        // a volatile byte load, any value valid.
        unsafe { self.window.ptr().add(offset).read_volatile() }
    }

    fn result_u64(&self) -> Result<u64, TransportError> {
        self.idle("result")?;
        // SAFETY: 8 aligned bytes of the live, idle result mapping (at least 8).
        Ok(unsafe { self.result.ptr().cast::<u64>().read() })
    }

    fn close(mut self: Box<Self>) -> Result<(), TransportError> {
        self.flush_all()
    }
}

impl Drop for UcxWindow {
    fn drop(&mut self) {
        for r in self.remote.iter_mut().filter_map(Option::take) {
            // SAFETY: unpacked in `open_window` for a live endpoint, destroyed
            // once (taken), before the transport closes the endpoints.
            unsafe { sys::ucp_rkey_destroy(r.rkey) };
        }
    }
}
