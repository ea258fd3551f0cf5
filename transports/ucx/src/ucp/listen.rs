//! UCX's client-server connection (`--ucx-connect sockaddr`): listeners
//! (`ucp_listener_create` on an ephemeral port, one per higher rank, so that a
//! connection request names its peer by the port it arrived on), accepting a
//! request (`UCP_EP_PARAM_FIELD_CONN_REQUEST`), and the client's endpoint
//! parameters (`UCP_EP_PARAM_FIELD_SOCK_ADDR`,
//! `UCP_EP_PARAMS_FLAGS_CLIENT_SERVER`). UCX wires the lanes through its
//! connection manager (`UCX_SOCKADDR_TLS_PRIORITY`: `rdmacm`, `tcp`), so RC
//! over verbs needs no UD transport for its wireup.

use super::context::{self, Context};
use super::sys;
use std::cell::Cell;
use std::net::Ipv4Addr;
use std::os::raw::c_void;
use std::time::{Duration, Instant};

/// The connection handler: keeps the request for the rank whose listener got it.
unsafe extern "C" fn on_request(request: sys::ucp_conn_request_h, arg: *mut c_void) {
    // SAFETY: `arg` points at a cell of the listeners' boxed slice, which
    // outlives them (`Listeners` destroys them before its fields drop); UCX
    // calls this during progress, on the transport's thread.
    let slot = unsafe { &*arg.cast::<Cell<sys::ucp_conn_request_h>>() };
    slot.set(request);
}

/// The socket address `ip:port`.
pub(super) fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    sa
}

/// The host's first non-loopback IPv4 address (`getifaddrs` order), else 127.0.0.1.
pub(super) fn default_ip() -> Ipv4Addr {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `list` is an out pointer, freed below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Ipv4Addr::LOCALHOST;
    }
    let mut found = Ipv4Addr::LOCALHOST;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*at };
        at = entry.ifa_next;
        // SAFETY: a non-null ifa_addr points at a sockaddr of its family,
        // here AF_INET, so at a sockaddr_in.
        let ip = (!entry.ifa_addr.is_null()
            && i32::from(unsafe { (*entry.ifa_addr).sa_family }) == libc::AF_INET)
            .then(|| unsafe { &*entry.ifa_addr.cast::<libc::sockaddr_in>() })
            .map(|sa| Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)));
        if let Some(ip) = ip.filter(|ip| !ip.is_loopback()) {
            found = ip;
            break;
        }
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// One listener per higher rank, on `ip`, each on a port of its own.
pub(super) struct Listeners {
    listeners: Vec<sys::ucp_listener_h>,
    requests: Box<[Cell<sys::ucp_conn_request_h>]>,
    /// The address they are bound to.
    pub(super) ip: Ipv4Addr,
    /// The port of the listener for each rank (0: none).
    pub(super) ports: Vec<u16>,
}

impl Listeners {
    /// Listeners on `ctx`'s worker for ranks `rank + 1 .. size`, at `ip`.
    pub(super) fn new(
        ctx: &Context,
        ip: Ipv4Addr,
        rank: usize,
        size: usize,
    ) -> Result<Listeners, String> {
        let mut l = Listeners {
            listeners: Vec::new(),
            requests: (0..size).map(|_| Cell::new(std::ptr::null_mut())).collect(),
            ip,
            ports: vec![0; size],
        };
        for peer in rank + 1..size {
            let sa = sockaddr(ip, 0);
            // SAFETY: all-zero is a valid ucp_listener_params_t; the fields used
            // are marked in field_mask.
            let mut params: sys::ucp_listener_params_t = unsafe { std::mem::zeroed() };
            params.field_mask = u64::from(sys::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR)
                | u64::from(sys::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER);
            params.sockaddr.addr = (&sa as *const libc::sockaddr_in).cast();
            params.sockaddr.addrlen = std::mem::size_of::<libc::sockaddr_in>() as _;
            params.conn_handler.cb = Some(on_request);
            params.conn_handler.arg = (&l.requests[peer] as *const Cell<_>).cast_mut().cast();
            let mut listener = std::ptr::null_mut();
            // SAFETY: the worker is live; `sa` is read during the call; the
            // handler's argument outlives the listener (see `on_request`).
            context::check("ucp_listener_create", unsafe {
                sys::ucp_listener_create(ctx.worker, &params, &mut listener)
            })
            .map_err(|e| {
                format!(
                    "{e} (listening on {ip} for rank {peer}: is a connection manager \
                     available, UCX_SOCKADDR_TLS_PRIORITY?)"
                )
            })?;
            l.listeners.push(listener);
            // SAFETY: all-zero is a valid ucp_listener_attr_t.
            let mut attr: sys::ucp_listener_attr_t = unsafe { std::mem::zeroed() };
            attr.field_mask = u64::from(sys::UCP_LISTENER_ATTR_FIELD_SOCKADDR);
            // SAFETY: the listener is live and `attr` a valid out structure.
            context::check("ucp_listener_query", unsafe {
                sys::ucp_listener_query(listener, &mut attr)
            })?;
            // SAFETY: the listener is bound to an IPv4 address, so its
            // sockaddr_storage holds a sockaddr_in.
            let bound = unsafe {
                &*(&attr.sockaddr as *const sys::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            l.ports[peer] = u16::from_be(bound.sin_port);
        }
        Ok(l)
    }

    /// Progresses `ctx` until `peer`'s connection request arrived, at most
    /// `timeout`.
    pub(super) fn request(
        &self,
        ctx: &Context,
        peer: usize,
        timeout: Duration,
    ) -> Result<sys::ucp_conn_request_h, String> {
        let start = Instant::now();
        while self.requests[peer].get().is_null() {
            ctx.progress();
            if start.elapsed() > timeout {
                return Err(format!(
                    "rank {peer} did not connect to {}:{} within {} s",
                    self.ip,
                    self.ports[peer],
                    timeout.as_secs()
                ));
            }
        }
        Ok(self.requests[peer].get())
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for &listener in &self.listeners {
            // SAFETY: made in `new` on the worker, which is still live (the
            // listeners are dropped before the context), destroyed once.
            unsafe { sys::ucp_listener_destroy(listener) };
        }
    }
}
