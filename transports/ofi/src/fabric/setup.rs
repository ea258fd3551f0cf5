//! Opening the endpoint: fabric, domain, completion queue, address vector and
//! endpoint from the `fi_info` chosen ([`super::info::choose`]), the address
//! exchange over the job's control channel (`fi_getname`, allgather,
//! `fi_av_insert`), and their teardown in the reverse order.

use super::ffi::{self, fi_addr_t, fid, fid_av, fid_cntr, fid_cq, fid_domain, fid_ep, fid_fabric};
use super::info::{self, InfoList};
use super::{setup_error, unavailable, NAME};
use crate::{Facts, OfiOp, OfiOptions};
use ngauge_transport::{Control, TransportError, WaitMode};
use std::os::raw::c_void;
use std::ptr;

/// Bytes of an advertisement of the write path (address, key, length, sequence
/// number, each a little-endian u64), sent with `fi_inject`.
pub const ADVERT_BYTES: usize = 32;

/// The libfabric objects of one endpoint, closed in reverse order by
/// [`Endpoint::close`].
pub struct Endpoint {
    pub fabric: *mut fid_fabric,
    pub domain: *mut fid_domain,
    pub cq: *mut fid_cq,
    pub av: *mut fid_av,
    pub ep: *mut fid_ep,
    /// One-sided operations on a provider whose data progress is manual: a
    /// counter bound to the endpoint, whose reads progress it (the window's
    /// progress thread); null otherwise.
    pub cntr: *mut fid_cntr,
    /// The counter also counts other ranks' operations on this endpoint's
    /// memory (`FI_RMA_EVENT`): the progress thread sees when the window is idle.
    pub rma_event: bool,
    /// One-sided operations complete at the target (`FI_DELIVERY_COMPLETE`).
    pub delivery: bool,
    /// The chosen `fi_info` (kept for its attributes).
    pub info: InfoList,
    /// Tagged messages (else plain ones with directed receives).
    pub tagged: bool,
    /// The completion queue has a wait object (`fi_cq_sread` blocks on it).
    pub waitable: bool,
    pub facts: Facts,
}

fn fid_of<T>(object: *mut T) -> *mut fid {
    // Every fid_* struct starts with its `struct fid`.
    object.cast::<fid>()
}

fn check(call: &str, rc: i32) -> Result<(), TransportError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(setup_error(format!(
            "{call} failed: {}",
            ffi::strerror(rc as isize)
        )))
    }
}

impl Endpoint {
    /// Opens everything up to an enabled endpoint (no peer yet), with one-sided
    /// operations where `rma`.
    pub fn open(opts: &OfiOptions, ranks: usize, rma: bool) -> Result<Endpoint, TransportError> {
        let info::Chosen {
            list: info,
            tagged,
            delivery,
            rma_event,
        } = info::choose(opts, rma).map_err(unavailable)?;
        let fi = info.first().expect("chosen");
        // SAFETY: every entry fi_getinfo returns has these attributes.
        let (tx, domain_attr) = unsafe { (&*fi.tx_attr, &*fi.domain_attr) };
        if opts.op == OfiOp::Write {
            if domain_attr.cq_data_size < 8 {
                return Err(unavailable(format!(
                    "--ofi-op write needs 8 bytes of remote CQ data, {} offers {}; use --ofi-op send",
                    info::offer(fi).provider,
                    domain_attr.cq_data_size
                )));
            }
            if tx.inject_size < ADVERT_BYTES {
                return Err(unavailable(format!(
                    "--ofi-op write sends {ADVERT_BYTES}-byte advertisements with fi_inject, \
                     {} injects at most {} bytes; use --ofi-op send",
                    info::offer(fi).provider,
                    tx.inject_size
                )));
            }
        }
        let mut e = Endpoint {
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            ep: ptr::null_mut(),
            cntr: ptr::null_mut(),
            rma_event: false,
            delivery,
            tagged,
            waitable: false,
            facts: Facts::default(),
            info,
        };
        let fi = e.info.first_ptr();
        // SAFETY: `fi` is the chosen entry, alive as long as `e.info`; every out
        // pointer is a field of `e`, which closes what was opened if a later step
        // fails (Drop).
        unsafe {
            // Delivery completion was asked of fi_getinfo to learn whether the
            // provider has it; the window asks for it per operation, and the
            // endpoint's messages keep the provider's default completion.
            (*(*fi).tx_attr).op_flags = 0;
            check(
                "fi_fabric",
                ffi::fi_fabric((*fi).fabric_attr, &mut e.fabric, ptr::null_mut()),
            )?;
            check("fi_domain", ffi::ngo_domain(e.fabric, fi, &mut e.domain))?;
            let depth = ((*(*fi).tx_attr).size + (*(*fi).rx_attr).size).max(256);
            let mut attr = ffi::fi_cq_attr {
                size: depth,
                format: ffi::fi_cq_format_FI_CQ_FORMAT_TAGGED,
                wait_obj: ffi::fi_wait_obj_FI_WAIT_NONE,
                ..Default::default()
            };
            // A file descriptor the provider signals (sockets for tcp, udp; a
            // completion channel for verbs). `shm` signals none across processes
            // (its sread would sleep its whole timeout), and the wait object
            // FI_WAIT_UNSPEC picks may be a yield loop deaf to the timeout: shm
            // and providers without FI_WAIT_FD yield between polls instead.
            if opts.wait == WaitMode::Block && info::offer(&*fi).provider != "shm" {
                attr.wait_obj = ffi::fi_wait_obj_FI_WAIT_FD;
                e.waitable = ffi::ngo_cq_open(e.domain, &mut attr, &mut e.cq) == 0;
                attr.wait_obj = ffi::fi_wait_obj_FI_WAIT_NONE;
            }
            if !e.waitable {
                check(
                    "fi_cq_open",
                    ffi::ngo_cq_open(e.domain, &mut attr, &mut e.cq),
                )?;
            }
            let mut av_attr = ffi::fi_av_attr {
                type_: ffi::fi_av_type_FI_AV_TABLE,
                count: ranks,
                ..Default::default()
            };
            check(
                "fi_av_open",
                ffi::ngo_av_open(e.domain, &mut av_attr, &mut e.av),
            )?;
            check("fi_endpoint", ffi::ngo_endpoint(e.domain, fi, &mut e.ep))?;
            check("fi_ep_bind (av)", ffi::ngo_ep_bind(e.ep, fid_of(e.av), 0))?;
            let flags = (ffi::FI_TRANSMIT | ffi::FI_RECV) as u64;
            check(
                "fi_ep_bind (cq)",
                ffi::ngo_ep_bind(e.ep, fid_of(e.cq), flags),
            )?;
            if rma && (*(*fi).domain_attr).data_progress == ffi::fi_progress_FI_PROGRESS_MANUAL {
                check("fi_cntr_open", ffi::ngo_cntr_open(e.domain, &mut e.cntr))?;
                e.rma_event = rma_event;
                let remote = (ffi::FI_REMOTE_READ | ffi::FI_REMOTE_WRITE) as u64;
                let flags =
                    (ffi::FI_READ | ffi::FI_WRITE) as u64 | if rma_event { remote } else { 0 };
                check(
                    "fi_ep_bind (cntr)",
                    ffi::ngo_ep_bind(e.ep, fid_of(e.cntr), flags),
                )?;
            }
            check("fi_enable", ffi::ngo_enable(e.ep))?;
        }
        let wait_object = match (opts.wait, e.waitable) {
            (WaitMode::Poll, _) => "none (polled)",
            (WaitMode::Block, true) => "fi_cq_sread",
            (WaitMode::Block, false) => "yield",
        };
        e.facts = info::facts(
            e.info.first().expect("chosen"),
            tagged,
            opts.op,
            wait_object,
        );
        Ok(e)
    }

    /// This endpoint's name, as peers insert it into their address vectors.
    pub fn name(&self) -> Result<Vec<u8>, TransportError> {
        let mut name = vec![0u8; 512];
        let mut len = name.len();
        // SAFETY: `ep` is enabled; `name` has `len` writable bytes.
        let rc = unsafe {
            ffi::ngo_getname(
                fid_of(self.ep),
                name.as_mut_ptr().cast::<c_void>(),
                &mut len,
            )
        };
        check("fi_getname", rc)?;
        name.truncate(len);
        Ok(name)
    }

    /// Inserts every rank's name (indexed by rank, this one's included) and returns
    /// their addresses, indexed by rank.
    pub fn insert(&self, names: &[Vec<u8>]) -> Result<Vec<fi_addr_t>, TransportError> {
        let mut addrs = Vec::with_capacity(names.len());
        for (rank, name) in names.iter().enumerate() {
            let mut addr: fi_addr_t = ffi::ADDR_UNSPEC;
            // SAFETY: `av` is open; `name` is a name fi_getname wrote on `rank`'s
            // endpoint of the same provider (the control plane delivered it);
            // `addr` is one slot.
            let rc = unsafe {
                ffi::ngo_av_insert(self.av, name.as_ptr().cast::<c_void>(), 1, &mut addr)
            };
            if rc != 1 {
                return Err(setup_error(format!(
                    "fi_av_insert of rank {rank}'s address failed: {}",
                    if rc < 0 {
                        ffi::strerror(rc as isize)
                    } else {
                        "not inserted".into()
                    }
                )));
            }
            addrs.push(addr);
        }
        Ok(addrs)
    }

    /// Closes the endpoint first (nothing is written into message memory after
    /// it), then `before_domain` (the memory registrations), then the rest.
    pub fn close(&mut self, before_domain: impl FnOnce()) {
        // SAFETY: each object is closed once (set to null after) and after every
        // object opened from it.
        unsafe {
            if !self.ep.is_null() {
                ffi::ngo_close(fid_of(self.ep));
                self.ep = ptr::null_mut();
            }
            before_domain();
            for object in [
                fid_of(self.cntr),
                fid_of(self.av),
                fid_of(self.cq),
                fid_of(self.domain),
            ] {
                if !object.is_null() {
                    ffi::ngo_close(object);
                }
            }
            self.cntr = ptr::null_mut();
            self.av = ptr::null_mut();
            self.cq = ptr::null_mut();
            self.domain = ptr::null_mut();
            if !self.fabric.is_null() {
                ffi::ngo_close(fid_of(self.fabric));
                self.fabric = ptr::null_mut();
            }
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.close(|| {});
    }
}

/// A peer's address, and whether it runs in this process.
pub struct PeerAddr {
    pub addr: fi_addr_t,
    pub same_process: bool,
}

/// Opens this rank's endpoint (with one-sided operations where `rma`) and
/// exchanges names (and process ids) with every rank: every rank learns whether
/// every other one got its endpoint open, so none waits for a rank that failed.
pub fn connect(
    control: &mut dyn Control,
    opts: &OfiOptions,
    rma: bool,
) -> Result<(Endpoint, Vec<PeerAddr>), TransportError> {
    let local = Endpoint::open(opts, control.size(), rma).and_then(|e| Ok((e.name()?, e)));
    let pid = std::process::id().to_le_bytes();
    let word = match &local {
        Ok((name, _)) => [&[0u8][..], &pid, name].concat(),
        Err(e) => [&[1u8][..], e.to_string().as_bytes()].concat(),
    };
    let all = control
        .allgather(&word)
        .map_err(|e| setup_error(format!("exchanging endpoint names: {e}")))?;
    let (_, endpoint) = local?;
    let (mut names, mut pids) = (Vec::with_capacity(all.len()), Vec::new());
    for (rank, word) in all.into_iter().enumerate() {
        match word.split_first() {
            Some((0, rest)) if rest.len() > 4 => {
                pids.push(rest[..4] == pid);
                names.push(rest[4..].to_vec());
            }
            other => {
                let why = other.map_or_else(String::new, |(_, t)| {
                    String::from_utf8_lossy(t).into_owned()
                });
                return Err(setup_error(format!(
                    "rank {rank} could not open its {NAME} endpoint: {why}"
                )));
            }
        }
    }
    let addrs = endpoint.insert(&names)?;
    let peers = addrs
        .into_iter()
        .zip(pids)
        .map(|(addr, same_process)| PeerAddr { addr, same_process })
        .collect();
    Ok((endpoint, peers))
}
