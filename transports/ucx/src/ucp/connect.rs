//! `open`: the context and worker, the address exchange over the control
//! channel, one endpoint per peer, the goodbye receives, the put path's rings,
//! one message each way per pair before anything is timed, and the facts UCX
//! printed about every endpoint.
//!
//! Setup is checked in two rounds of `Control::allgather` (the addresses, then
//! whether every rank connected), each carrying a failed rank's reason, so that
//! a rank that cannot set up makes every rank fail naming it instead of waiting
//! for it.

use super::context::{self, Context};
use super::listen::{self, Listeners};
use super::memory::{Mapped, Memory};
use super::put::Ring;
use super::slots::{self, Slots, Table};
use super::tagged::params;
use super::{setup_error, sys, Alert, Peer, UcxTransport, NAME};
use crate::facts::{self, Facts};
use crate::ring::RingLayout;
use crate::tag::{self, Kind};
use crate::wire::{Listen, RingAddr, Setup};
use crate::{UcxConnect, UcxOp, UcxOptions};
use ngauge_transport::{Access, BufferId, Buffers, Control, Rank, TransportError, WaitMode};
use std::cell::Cell;
use std::os::raw::c_void;

/// The endpoint error callback: records `status` in the peer's [`Alert`].
unsafe extern "C" fn on_error(arg: *mut c_void, _ep: sys::ucp_ep_h, status: sys::ucs_status_t) {
    // SAFETY: `arg` points at the peer's Alert in the transport's boxed slice,
    // which outlives the worker (destroyed in teardown before the slice drops);
    // UCX calls this during progress, on the transport's thread.
    let alert = unsafe { &*arg.cast::<Alert>() };
    alert.status.set(status);
}

/// The goodbye receive's callback: the peer closed its transport.
unsafe extern "C" fn on_goodbye(
    request: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: UCX passes the goodbye's request memory, a slot, and its info.
    unsafe { slots::recv_done(request, status, info, user_data) };
    if status == sys::UCS_OK {
        // SAFETY: as in `on_error`.
        let alert = unsafe { &*user_data.cast::<Alert>() };
        alert.goodbye.set(true);
    }
}

/// What a rank sets up before it knows its peers.
struct Local {
    /// Before `ctx`: dropped before the worker they live on.
    listeners: Option<Listeners>,
    ctx: Context,
    worker: Vec<u8>,
    area: Option<(Mapped, Vec<u8>)>,
}

/// Why this rank cannot set up, and whether it is the user's to fix.
struct LocalError {
    reason: String,
    input: bool,
}

fn local(
    opts: &UcxOptions,
    rank: Rank,
    tls: Option<&str>,
    layout: RingLayout,
    extra_features: u64,
) -> Result<Local, LocalError> {
    let input = |reason: String| LocalError {
        reason,
        input: true,
    };
    let failure = |reason: String| LocalError {
        reason,
        input: false,
    };
    context::check_tls(tls).map_err(input)?;
    let mut features = u64::from(sys::UCP_FEATURE_TAG) | extra_features;
    if opts.op == UcxOp::Put {
        features |= u64::from(sys::UCP_FEATURE_RMA);
    }
    if opts.wait == WaitMode::Block {
        features |= u64::from(sys::UCP_FEATURE_WAKEUP);
    }
    let ctx = Context::new(tls, features, layout.ranks).map_err(input)?;
    let worker = ctx.address().map_err(failure)?;
    let listeners = match opts.connect {
        UcxConnect::Address => None,
        UcxConnect::Sockaddr => {
            let ip = opts.listen_ip.unwrap_or_else(listen::default_ip);
            Some(Listeners::new(&ctx, ip, rank, layout.ranks).map_err(input)?)
        }
    };
    let area = match opts.op {
        UcxOp::Send => None,
        UcxOp::Put => {
            let mapped = Mapped::new(ctx.ctx, layout.bytes()).map_err(failure)?;
            let rkey = mapped.rkey().map_err(failure)?;
            Some((mapped, rkey))
        }
    };
    Ok(Local {
        listeners,
        ctx,
        worker,
        area,
    })
}

/// Every rank's word on one setup round: `Ok` when all are ready, else the
/// error of this rank (its own failure first) or naming the rank that failed.
fn agree(
    control: &mut dyn Control,
    mine: &Setup,
    own: Option<&LocalError>,
) -> Result<Vec<Setup>, TransportError> {
    let gathered = control
        .allgather(&mine.encode())
        .map_err(|e| setup_error(format!("exchanging UCX addresses: {e}")))?;
    if let Some(e) = own {
        return Err(if e.input {
            TransportError::Unavailable {
                transport: NAME,
                reason: e.reason.clone(),
            }
        } else {
            setup_error(e.reason.clone())
        });
    }
    let mut all = Vec::with_capacity(gathered.len());
    for (rank, bytes) in gathered.iter().enumerate() {
        match Setup::decode(bytes) {
            Ok(Setup::Failed(reason)) => {
                return Err(setup_error(format!(
                    "rank {rank} could not set up: {reason}"
                )))
            }
            Ok(s) => all.push(s),
            Err(e) => return Err(setup_error(format!("rank {rank}: {e}"))),
        }
    }
    Ok(all)
}

/// See [`crate::open`].
pub fn open(control: &mut dyn Control, opts: &UcxOptions) -> Result<UcxTransport, TransportError> {
    open_with(control, opts, 0)
}

/// [`open`] with `extra_features` (`UCP_FEATURE_*`) in the context.
pub(super) fn open_with(
    control: &mut dyn Control,
    opts: &UcxOptions,
    extra_features: u64,
) -> Result<UcxTransport, TransportError> {
    let (rank, size) = (control.rank(), control.size());
    if size > tag::MAX_RANK + 1 {
        return Err(setup_error(format!(
            "{size} ranks do not fit UCX tags of ngauge"
        )));
    }
    if opts.op == UcxOp::Put && opts.wait == WaitMode::Block {
        return Err(setup_error(
            "the put path needs the poll wait mode: a put into the receiver's ring \
             raises no event to sleep on",
        ));
    }
    if opts.op == UcxOp::Put && opts.connect == UcxConnect::Sockaddr {
        return Err(setup_error(
            "--ucx-connect sockaddr connects the send path only (--ucx-op send)",
        ));
    }
    let tls = opts
        .tls
        .clone()
        .or_else(|| std::env::var("UCX_TLS").ok().filter(|v| !v.is_empty()));
    let layout = RingLayout::new(size);
    let (local, mine) = match local(opts, rank, tls.as_deref(), layout, extra_features) {
        Ok(l) => {
            let ring = l.area.as_ref().map(|(mapped, rkey)| RingAddr {
                addr: mapped.addr(),
                rkey: rkey.clone(),
                depth: layout.depth as u32,
                slot_bytes: layout.slot_bytes as u32,
            });
            let setup = Setup::Ready {
                op: opts.op,
                worker: l.worker.clone(),
                ring,
                listen: l.listeners.as_ref().map(|l| Listen {
                    ip: l.ip,
                    ports: l.ports.clone(),
                }),
            };
            (Ok(l), setup)
        }
        Err(e) => {
            let setup = Setup::Failed(e.reason.clone());
            (Err(e), setup)
        }
    };
    let all = agree(control, &mine, local.as_ref().err())?;
    let Ok(local) = local else {
        unreachable!("agree returns this rank's error")
    };
    let Local {
        listeners,
        ctx,
        area,
        ..
    } = local;
    let mut t = UcxTransport {
        rank,
        size,
        op: opts.op,
        wait: opts.wait,
        timeout: opts.timeout,
        peers: (0..size)
            .map(|_| Peer {
                ep: std::ptr::null_mut(),
                goodbye: std::ptr::null_mut(),
                gone: None,
            })
            .collect(),
        alerts: (0..size)
            .map(|_| Alert {
                status: Cell::new(sys::UCS_OK),
                goodbye: Cell::new(false),
            })
            .collect(),
        requests: Table::new(),
        ring: area.map(|(mapped, _)| Ring::new(layout, mapped)),
        memory: Memory::new(ctx.ctx),
        slots: Slots::new(ctx.request_size),
        ctx,
    };
    // A client endpoint reaches its server only while its worker progresses,
    // so in client-server mode the first messages come before the agreement,
    // which blocks in the control channel.
    let sockaddr = listeners.is_some();
    let connected =
        t.connect(&all, listeners.as_ref())
            .and_then(|()| if sockaddr { t.exchange() } else { Ok(()) });
    drop(listeners);
    let word = match &connected {
        Ok(()) => Setup::Ready {
            op: opts.op,
            worker: vec![1],
            ring: None,
            listen: None,
        },
        Err(reason) => Setup::Failed(reason.clone()),
    };
    let failure = connected.err().map(|reason| LocalError {
        reason,
        input: false,
    });
    agree(control, &word, failure.as_ref())?;
    if !sockaddr {
        t.exchange().map_err(setup_error)?;
    }
    facts::record(Facts {
        version: context::version(),
        op: opts.op.as_str(),
        connect: opts.connect.as_str(),
        tls,
        env: facts::ucx_env(),
        endpoints: t.endpoint_facts(),
    });
    Ok(t)
}

impl UcxTransport {
    /// Endpoints to every peer from their published setups, their rings'
    /// keys, and the goodbye receives. With `listeners` (client-server mode),
    /// this rank connects to the lower ranks' listeners first, then accepts
    /// the higher ranks' requests: every request is on its way before any rank
    /// waits for one.
    fn connect(&mut self, all: &[Setup], listeners: Option<&Listeners>) -> Result<(), String> {
        for (peer, setup) in all.iter().enumerate() {
            let Setup::Ready {
                op,
                worker,
                ring,
                listen,
            } = setup
            else {
                unreachable!("agree refused failed setups")
            };
            if *op != self.op {
                return Err(format!(
                    "rank {peer} runs --ucx-op {}, this rank --ucx-op {}",
                    op.as_str(),
                    self.op.as_str()
                ));
            }
            if peer == self.rank {
                continue;
            }
            // SAFETY: all-zero is a valid ucp_ep_params_t; the fields used are
            // marked in field_mask.
            let mut params: sys::ucp_ep_params_t = unsafe { std::mem::zeroed() };
            params.field_mask = u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE)
                | u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLER);
            // Read by ucp_ep_create below, so it lives in this scope.
            let server;
            match (listeners, listen) {
                (None, _) => {
                    params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS);
                    params.address = worker.as_ptr().cast();
                }
                (Some(ours), _) if peer > self.rank => {
                    params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_CONN_REQUEST);
                    params.conn_request = ours.request(&self.ctx, peer, self.timeout)?;
                }
                (Some(_), Some(theirs)) => {
                    let port = theirs.ports.get(self.rank).copied().unwrap_or(0);
                    if port == 0 {
                        return Err(format!("rank {peer} does not listen for this rank"));
                    }
                    server = listen::sockaddr(theirs.ip, port);
                    params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_FLAGS)
                        | u64::from(sys::UCP_EP_PARAM_FIELD_SOCK_ADDR);
                    params.flags = sys::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
                    params.sockaddr.addr = (&server as *const libc::sockaddr_in).cast();
                    params.sockaddr.addrlen = std::mem::size_of::<libc::sockaddr_in>() as _;
                }
                (Some(_), None) => {
                    return Err(format!(
                        "rank {peer} connects by worker address, this rank --ucx-connect sockaddr"
                    ))
                }
            }
            params.err_mode = sys::UCP_ERR_HANDLING_MODE_NONE;
            params.err_handler.cb = Some(on_error);
            params.err_handler.arg = (&self.alerts[peer] as *const Alert).cast_mut().cast();
            // SAFETY: the worker is live; `params.address` (the peer's worker
            // address) or `params.sockaddr` (`server`) is read during the call,
            // `params.conn_request` is a request the listener got and no endpoint
            // took yet; the error handler's argument outlives the worker (see
            // `on_error`).
            context::check("ucp_ep_create", unsafe {
                sys::ucp_ep_create(self.ctx.worker, &params, &mut self.peers[peer].ep)
            })
            .map_err(|e| format!("{e} (connecting to rank {peer})"))?;
            if let Some(ours) = self.ring.as_mut() {
                let Some(r) = ring else {
                    return Err(format!("rank {peer} published no ring for puts"));
                };
                if (r.depth as usize, r.slot_bytes as usize) != ours.geometry() {
                    return Err(format!("rank {peer} cuts its ring differently"));
                }
                ours.connect(peer, self.peers[peer].ep, r.addr, &r.rkey)?;
            }
            self.post_goodbye(peer)?;
        }
        Ok(())
    }

    /// Posts the receive of `peer`'s goodbye.
    fn post_goodbye(&mut self, peer: Rank) -> Result<(), String> {
        let request = self.slots.take();
        let mut p = params(request);
        p.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_CALLBACK | sys::UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.recv = Some(on_goodbye);
        p.user_data = (&self.alerts[peer] as *const Alert).cast_mut().cast();
        let mut dummy = 0u64;
        // SAFETY: the worker is live; a goodbye has no payload, so the 0-byte
        // buffer is never written; `request` is free request memory, armed, that
        // stays UCX's until the receive completes or teardown cancels it; the
        // callback's user data outlives the worker (see `on_error`).
        let status = unsafe {
            slots::arm(request);
            sys::ucp_tag_recv_nbx(
                self.ctx.worker,
                (&mut dummy as *mut u64).cast(),
                0,
                tag::tag(Kind::Close, peer),
                tag::FULL_MASK,
                &p,
            )
        };
        if sys::ptr_is_err(status) {
            self.slots.give(request);
            return context::check("ucp_tag_recv_nbx", sys::ptr_status(status));
        }
        if status.is_null() {
            self.slots.give(request);
        } else {
            self.peers[peer].goodbye = request;
        }
        Ok(())
    }

    /// On the put path a put into every peer's ring, flushed; then one empty
    /// message each way between every pair: connections are established here,
    /// not in the first timed message, and the endpoints' lanes are final. The
    /// messages come after the flush so that no rank leaves while a peer's
    /// flush still needs it to progress (over TCP a put completes only when
    /// the target's worker acknowledges it).
    fn exchange(&mut self) -> Result<(), String> {
        self.ring_warm()?;
        let buf: BufferId = self.memory.try_alloc(8).map_err(|e| e.to_string())?;
        let mut ids = Vec::new();
        let (rank, size) = (self.rank, self.size);
        let mut run = || -> Result<(), TransportError> {
            for peer in (0..size).filter(|&p| p != rank) {
                ids.push(self.tag_start(peer, buf.prefix(0), Access::Write)?);
            }
            for peer in (0..size).filter(|&p| p != rank) {
                ids.push(self.tag_start(peer, buf.prefix(0), Access::Read)?);
            }
            self.wait_for_all(&ids)
        };
        run().map_err(|e| format!("the first message to every peer: {e}"))?;
        self.memory.free(buf).map_err(|e| e.to_string())
    }

    /// What UCX prints about each endpoint.
    pub(super) fn endpoint_facts(&self) -> Vec<facts::Endpoint> {
        (0..self.size)
            .filter(|&p| !self.peers[p].ep.is_null())
            .map(|peer| {
                let ep = self.peers[peer].ep;
                // SAFETY: `ep` is a live endpoint and `stream` an open stream.
                let text = context::printed(|stream| unsafe { sys::ucp_ep_print_info(ep, stream) });
                facts::parse_endpoint(&text, peer)
            })
            .collect()
    }
}
