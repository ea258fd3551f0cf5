//! Device, port and GID discovery: lists the devices, opens the chosen one (the
//! device context), checks that its port is active, and picks the GID the global
//! route header uses on RoCE. [`probe`] does the same without connecting anything,
//! for `ngauge info`.

use super::{last_os_error, rc_error, unavailable};
use crate::qp;
use ngauge_transport::TransportError;
use rdma_sys::*;
use std::ffi::CStr;
use std::os::raw::c_int;

/// `IBV_LINK_LAYER_ETHERNET` (a #define in verbs.h, not in the bindings).
const LINK_LAYER_ETHERNET: u8 = 2;

/// An open device context with its port facts.
pub(super) struct Opened {
    pub(super) ctx: *mut ibv_context,
    pub(super) name: String,
    pub(super) port: u8,
    pub(super) port_attr: ibv_port_attr,
    pub(super) dev_attr: ibv_device_attr,
}

/// Lists devices, opens the chosen one and checks its port.
pub(super) fn open_device(wanted: Option<&str>, port: u8) -> Result<Opened, TransportError> {
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
pub(super) fn choose_gid(
    o: &Opened,
    requested: Option<u8>,
) -> Result<Option<(u8, [u8; 16])>, String> {
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
