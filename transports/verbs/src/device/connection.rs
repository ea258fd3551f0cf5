//! Queue-pair setup and the connection exchange: protection domain, completion
//! queue (and channel in block mode), one RC queue pair per peer (two on the send
//! path), the INIT/RTR/RTS transitions built by [`crate::qp`], and [`open`], which
//! exchanges the addresses over the control channel so that every rank learns
//! whether every other one could set up, into the [`Resources`] that own what
//! was allocated from the device.

use super::direct::PreparedSend;
use super::discovery::{choose_gid, open_device};
use super::memory::{Registered, Resources};
use super::{last_os_error, rc_error, setup, unavailable, Peer, VerbsTransport};
use crate::layout::{self, Credits, SlotLayout, SLOT_BYTES};
use crate::qp::{self, LocalPort, Reliability, Transition};
use crate::wire::{self, Endpoint, QpAddr, VerbsOp};
use crate::VerbsOptions;
use ngauge_transport::{Control, Rank, TransportError, WaitMode};
use rdma_sys::*;
use std::os::raw::c_int;
use std::time::Instant;

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
    assert!(qp::access::REMOTE_ATOMIC == ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC.0);
    assert!(qp::QpState::Init as u32 == ibv_qp_state::IBV_QPS_INIT);
    assert!(qp::QpState::Rtr as u32 == ibv_qp_state::IBV_QPS_RTR);
    assert!(qp::QpState::Rts as u32 == ibv_qp_state::IBV_QPS_RTS);
};

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
pub(super) fn to_error(qp: *mut ibv_qp) -> std::io::Result<()> {
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
    for (peer, ep) in endpoints.iter().enumerate() {
        t.peers[peer].remote_ring = ep.ring;
    }
    t.connect(&endpoints)?;
    t.prepared = (0..size)
        .map(|peer| PreparedSend::new(t.op, t.peer_wr_id(peer), t.peers[peer].remote_ring.1))
        .collect();
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
        ring: None,
        stage: None,
        unacked_events: 0,
    };
    if opts.op == VerbsOp::WritePoll && opts.wait == WaitMode::Block {
        return Err(setup(
            "the write-poll data path needs the poll wait mode: a write into the \
             receiver's ring raises no completion to sleep on"
                .to_string(),
        ));
    }
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
            if is_bulk && opts.op != VerbsOp::Send {
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
            VerbsOp::Write | VerbsOp::WritePoll => SLOT_BYTES,
        },
        send_depth: depth as usize,
    };
    let rings = (opts.op == VerbsOp::WritePoll).then(|| layout::RingLayout::new(size, depth));
    let mut endpoint = Endpoint {
        op: opts.op,
        mtu: local.mtu,
        lid: o.port_attr.lid,
        gid: gid.map(|(_, g)| g).unwrap_or([0; 16]),
        qps,
        bulk,
        recv_depth: depth,
        ring: (0, 0),
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
        rings,
        signal_every: layout::signal_every(depth),
        repost_batch: layout::repost_batch(depth),
        signal_next: false,
        local,
        peers,
        last_progress: vec![Instant::now(); size],
        progressed: vec![false; size],
        prepared: Vec::new(),
        requests: Default::default(),
        direct: None,
        device: o.name.clone(),
        inline_sends: 0,
        staged_sends: 0,
        cq_events: 0,
        credit_messages: 0,
        signaled_sends: 0,
        ring_messages: 0,
        wait_clock_reads: 0,
        wait_yields: 0,
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
        if let Some(rings) = rings {
            // zeroed by allocation: no slot shows a flag yet
            let ring = Registered::new(
                t.res.pd,
                rings.bytes(),
                qp::access::LOCAL_WRITE | qp::access::REMOTE_WRITE,
            )?;
            endpoint.ring = (ring.addr(0), ring.rkey());
            t.res.ring = Some(ring);
            for (peer, p) in t.peers.iter_mut().enumerate() {
                p.ring_next = (rings.flag_at(peer, 0), rings.flag(0));
            }
        }
        if opts.op != VerbsOp::Write {
            // only the device reads it (the sources of staged sends)
            t.res.stage = Some(Registered::new(
                t.res.pd,
                layout::stage_bytes(size),
                qp::access::LOCAL_WRITE,
            )?);
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
        // two: a write-poll message and its trailer
        init.cap.max_send_sge = 2;
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
}
