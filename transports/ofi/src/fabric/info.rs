//! `fi_getinfo`: the hints ngauge asks with, the provider chosen, what else is
//! offered (`ngauge info`, and the error for a provider that is not there), and
//! the [`Facts`] of the chosen one.

use super::ffi::{self, fi_info};
use crate::{Facts, Offer, OfiOp, OfiOptions, Probe};
use std::ffi::{CStr, CString};
use std::ptr;

/// The API version ngauge is written against (the headers it was built with).
fn api_version() -> u32 {
    (ffi::FI_MAJOR_VERSION << 16) | ffi::FI_MINOR_VERSION
}

/// The library's version (`1.17`), which may be newer than the headers'.
pub fn library_version() -> String {
    // SAFETY: fi_version takes nothing and returns a number.
    let v = unsafe { ffi::fi_version() };
    format!("{}.{}", v >> 16, v & 0xffff)
}

/// A list of `fi_info` that libfabric allocated, freed on drop.
pub struct InfoList(*mut fi_info);

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a list fi_getinfo (or fi_allocinfo/fi_dupinfo) returned,
            // freed once.
            unsafe { ffi::fi_freeinfo(self.0) }
        }
    }
}

impl InfoList {
    /// The first entry (`None` for an empty list).
    pub fn first(&self) -> Option<&fi_info> {
        // SAFETY: null or a valid fi_info that lives as long as the list.
        unsafe { self.0.as_ref() }
    }

    /// The first entry as the pointer libfabric's calls take.
    pub fn first_ptr(&self) -> *mut fi_info {
        self.0
    }

    fn iter(&self) -> impl Iterator<Item = &fi_info> {
        let mut next = self.0;
        std::iter::from_fn(move || {
            // SAFETY: each `next` is null or a valid entry of this list.
            let info = unsafe { next.as_ref() }?;
            next = info.next;
            Some(info)
        })
    }
}

/// What to ask `fi_getinfo` for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want<'a> {
    pub provider: Option<&'a str>,
    pub op: OfiOp,
    pub tagged: bool,
    /// One-sided operations for `ngauge rma`: RMA and atomics, thread safety (a
    /// progress thread beside the caller), and remote completion asked for
    /// where `delivery` (`FI_DELIVERY_COMPLETE`).
    pub rma: bool,
    pub delivery: bool,
    /// With `rma`: counters that count other ranks' operations on this
    /// endpoint's memory too (`FI_RMA_EVENT`).
    pub rma_event: bool,
}

/// `fi_getinfo` for an RDM endpoint as `want` says: the list, or `Err` with its
/// return code (`ENODATA` when nothing fits).
pub fn getinfo(want: Want<'_>) -> Result<InfoList, i32> {
    // SAFETY: fi_allocinfo returns a zeroed fi_info with its attribute structs
    // allocated (or null on failure, checked).
    let hints = InfoList(unsafe { ffi::ngo_allocinfo() });
    let h = hints.0;
    if h.is_null() {
        return Err(-(ffi::FI_ENOMEM as i32));
    }
    let prov = want.provider.map(|p| CString::new(p).unwrap_or_default());
    // SAFETY: `h` and its attribute pointers were allocated by fi_allocinfo; the
    // provider name is ours and is taken back (set to null) before the hints are
    // freed, so fi_freeinfo never frees memory libfabric did not allocate.
    unsafe {
        let mut caps = if want.tagged {
            ffi::FI_TAGGED as u64
        } else {
            ffi::FI_MSG as u64 | ffi::FI_DIRECTED_RECV
        };
        if want.op == OfiOp::Write {
            caps |= (ffi::FI_RMA | ffi::FI_WRITE | ffi::FI_REMOTE_WRITE) as u64;
        }
        let mut threading = ffi::fi_threading_FI_THREAD_DOMAIN;
        if want.rma {
            caps |= (ffi::FI_RMA
                | ffi::FI_ATOMIC
                | ffi::FI_READ
                | ffi::FI_WRITE
                | ffi::FI_REMOTE_READ
                | ffi::FI_REMOTE_WRITE) as u64;
            threading = ffi::fi_threading_FI_THREAD_SAFE;
            if want.delivery {
                (*(*h).tx_attr).op_flags = u64::from(ffi::FI_DELIVERY_COMPLETE);
            }
            if want.rma_event {
                caps |= ffi::FI_RMA_EVENT;
            }
        }
        (*h).caps = caps;
        (*h).mode = ffi::FI_CONTEXT | ffi::FI_CONTEXT2;
        (*(*h).ep_attr).type_ = ffi::fi_ep_type_FI_EP_RDM;
        (*(*h).domain_attr).mr_mode = (ffi::FI_MR_LOCAL
            | ffi::FI_MR_VIRT_ADDR
            | ffi::FI_MR_ALLOCATED
            | ffi::FI_MR_PROV_KEY
            | ffi::FI_MR_ENDPOINT) as i32;
        (*(*h).domain_attr).threading = threading;
        (*(*h).tx_attr).msg_order = ffi::FI_ORDER_SAS as u64;
        (*(*h).rx_attr).msg_order = ffi::FI_ORDER_SAS as u64;
        if let Some(p) = &prov {
            (*(*h).fabric_attr).prov_name = p.as_ptr().cast_mut();
        }
        let mut out: *mut fi_info = ptr::null_mut();
        let rc = ffi::fi_getinfo(api_version(), ptr::null(), ptr::null(), 0, h, &mut out);
        (*(*h).fabric_attr).prov_name = ptr::null_mut();
        if rc == 0 {
            Ok(InfoList(out))
        } else {
            Err(rc)
        }
    }
}

/// `text` of a C string pointer (empty for null).
fn text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string of an fi_info that outlives this call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Provider, fabric and domain of an entry.
pub fn offer(info: &fi_info) -> Offer {
    // SAFETY: every entry fi_getinfo returns has its fabric and domain attributes.
    let (fabric, domain) = unsafe { (&*info.fabric_attr, &*info.domain_attr) };
    Offer {
        provider: text(fabric.prov_name),
        fabric: text(fabric.name),
        domain: text(domain.name),
    }
}

/// The entry `fi_getinfo` chose and what was asked for to get it.
pub struct Chosen {
    pub list: InfoList,
    /// Tagged messages (else plain ones with directed receives).
    pub tagged: bool,
    /// With `rma`: operations complete at the target (`FI_DELIVERY_COMPLETE`).
    pub delivery: bool,
    /// With `rma`: the endpoint counts other ranks' operations on its memory
    /// (`FI_RMA_EVENT`).
    pub rma_event: bool,
}

/// The chosen entry for `opts` (and one-sided operations where `rma`): tagged
/// where offered (unless plain messages were asked for), else plain messages
/// with directed receives; with `rma`, delivery completion where offered, and
/// `FI_RMA_EVENT` where the provider chosen without it offers it (asked for
/// after the choice, so that it never changes which provider is chosen). `Err`
/// says what `fi_getinfo` offers instead.
pub fn choose(opts: &OfiOptions, rma: bool) -> Result<Chosen, String> {
    let provider = opts.provider.as_deref();
    let mut last = 0;
    for (tagged, delivery) in [(true, true), (true, false), (false, true), (false, false)] {
        if (tagged && opts.plain_messages) || (delivery && !rma) {
            continue;
        }
        let want = |provider, rma_event| Want {
            provider,
            op: opts.op,
            tagged,
            rma,
            delivery,
            rma_event,
        };
        match getinfo(want(provider, false)) {
            Ok(list) if list.first().is_some() => {
                let name = offer(list.first().expect("one")).provider;
                let with_events = rma
                    .then(|| getinfo(want(Some(&name), true)).ok())
                    .flatten()
                    .filter(|l| l.first().is_some());
                let rma_event = with_events.is_some();
                return Ok(Chosen {
                    list: with_events.unwrap_or(list),
                    tagged,
                    delivery,
                    rma_event,
                });
            }
            Ok(_) => {}
            Err(rc) => last = rc,
        }
    }
    if last != ffi::ENODATA && last != 0 {
        return Err(format!(
            "fi_getinfo failed: {}",
            ffi::strerror(last as isize)
        ));
    }
    let offered = offered_providers(opts.op, rma);
    let what = match (rma, opts.op) {
        (true, _) => "RDM endpoint with RMA and atomics (FI_RMA, FI_ATOMIC) for rma",
        (_, OfiOp::Send) => "RDM endpoint with tagged or directed messages",
        (_, OfiOp::Write) => "RDM endpoint with RMA writes",
    };
    let asked = provider.map_or_else(String::new, |p| format!("provider {p:?} offers no "));
    let asked = if asked.is_empty() {
        format!("no provider offers an {what}")
    } else {
        format!("{asked}{what}")
    };
    Err(format!(
        "{asked} here; fi_getinfo offers: {} (choose one with --ofi-provider)",
        if offered.is_empty() {
            "nothing".to_string()
        } else {
            offered.join(", ")
        }
    ))
}

/// The distinct providers of RDM endpoints for `op` (and `rma`), in
/// `fi_getinfo`'s order.
fn offered_providers(op: OfiOp, rma: bool) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for tagged in [true, false] {
        if let Ok(list) = getinfo(Want {
            provider: None,
            op,
            tagged,
            rma,
            delivery: false,
            rma_event: false,
        }) {
            for o in list.iter().map(offer) {
                if !names.contains(&o.provider) {
                    names.push(o.provider);
                }
            }
        }
    }
    names
}

/// `ngauge info`: what a run would use and everything offered.
pub fn probe(provider: Option<&str>, op: OfiOp) -> Result<Probe, String> {
    let opts = OfiOptions {
        provider: provider.map(str::to_string),
        op,
        ..OfiOptions::default()
    };
    let chosen = choose(&opts, false)?;
    let uses = offer(chosen.list.first().expect("chosen"));
    let mut offers: Vec<Offer> = Vec::new();
    for tagged in [true, false] {
        if let Ok(list) = getinfo(Want {
            provider: None,
            op,
            tagged,
            rma: false,
            delivery: false,
            rma_event: false,
        }) {
            for o in list.iter().map(offer) {
                if !offers.contains(&o) {
                    offers.push(o);
                }
            }
        }
    }
    Ok(Probe {
        uses,
        libfabric_version: library_version(),
        offers,
    })
}

/// The memory-registration mode bits' names (`FI_MR_LOCAL`, ...).
fn mr_mode_names(mode: i32) -> Vec<String> {
    const NAMES: &[(u32, &str)] = &[
        (ffi::FI_MR_LOCAL, "FI_MR_LOCAL"),
        (ffi::FI_MR_RAW, "FI_MR_RAW"),
        (ffi::FI_MR_VIRT_ADDR, "FI_MR_VIRT_ADDR"),
        (ffi::FI_MR_ALLOCATED, "FI_MR_ALLOCATED"),
        (ffi::FI_MR_PROV_KEY, "FI_MR_PROV_KEY"),
        (ffi::FI_MR_MMU_NOTIFY, "FI_MR_MMU_NOTIFY"),
        (ffi::FI_MR_RMA_EVENT, "FI_MR_RMA_EVENT"),
        (ffi::FI_MR_ENDPOINT, "FI_MR_ENDPOINT"),
        (ffi::FI_MR_HMEM, "FI_MR_HMEM"),
        (ffi::FI_MR_COLLECTIVE, "FI_MR_COLLECTIVE"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| mode as u32 & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// The facts of the chosen entry.
pub fn facts(info: &fi_info, tagged: bool, op: OfiOp, wait_object: &'static str) -> Facts {
    let o = offer(info);
    // SAFETY: every entry fi_getinfo returns has these attributes.
    let (tx, ep, domain) = unsafe { (&*info.tx_attr, &*info.ep_attr, &*info.domain_attr) };
    Facts {
        provider: o.provider,
        fabric: o.fabric,
        domain: o.domain,
        libfabric_version: library_version(),
        inject_size_bytes: tx.inject_size,
        max_msg_size_bytes: ep.max_msg_size as u64,
        mr_mode: mr_mode_names(domain.mr_mode),
        messages: if tagged { "tagged" } else { "msg" },
        op: op.as_str(),
        wait_object,
        env: crate::fi_environment(),
    }
}
