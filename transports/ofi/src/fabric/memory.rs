//! Message memory: a [`BufferPool`] (bytes and the holds of pending requests),
//! each buffer registered with the domain when it is allocated, where the
//! provider's `mr_mode` asks for local registration (`FI_MR_LOCAL`) or the data
//! path writes into it remotely (`--ofi-op write`), and deregistered before it
//! is freed. Never in a timed region.

use super::ffi::{self, fid_domain, fid_ep, fid_mr};
use super::NAME;
use ngauge_transport::{BufferId, BufferPool, Buffers, Region, TransportError};
use std::os::raw::c_void;
use std::ptr;

/// One registration.
pub struct Mr {
    mr: *mut fid_mr,
    pub desc: *mut c_void,
    pub key: u64,
    /// What a remote writer names the buffer's first byte with: its virtual
    /// address under `FI_MR_VIRT_ADDR`, else 0 (offsets).
    pub base: u64,
}

impl Mr {
    /// Registers `len` bytes at `addr` with `domain` as `how` says (bound to `ep`
    /// and enabled under `FI_MR_ENDPOINT`), asking for `key` where the provider
    /// does not choose keys itself.
    ///
    /// # Safety
    /// `domain` and `ep` are live, and `len` bytes at `addr` stay allocated until
    /// the registration is closed ([`Mr::close`]).
    pub unsafe fn register(
        domain: *mut fid_domain,
        ep: *mut fid_ep,
        how: Registration,
        addr: *mut u8,
        len: usize,
        key: u64,
    ) -> Result<Mr, TransportError> {
        let mut mr: *mut fid_mr = ptr::null_mut();
        // SAFETY: the caller's promise.
        let rc = unsafe {
            ffi::ngo_mr_reg(domain, addr.cast::<c_void>(), len, how.access, key, &mut mr)
        };
        if rc != 0 {
            return Err(reg_error(len, "fi_mr_reg", rc));
        }
        if how.endpoint {
            // SAFETY: `mr` was just registered, `ep` is live.
            let rc = unsafe {
                let rc = ffi::ngo_mr_bind(mr, ptr::addr_of_mut!((*ep).fid));
                if rc == 0 {
                    ffi::ngo_mr_enable(mr)
                } else {
                    rc
                }
            };
            if rc != 0 {
                // SAFETY: registered above, closed once.
                unsafe { ffi::ngo_close(ptr::addr_of_mut!((*mr).fid)) };
                return Err(reg_error(len, "fi_mr_bind/fi_mr_enable", rc));
            }
        }
        // SAFETY: `mr` is a live registration.
        let (desc, key) = unsafe { (ffi::ngo_mr_desc(mr), ffi::ngo_mr_key(mr)) };
        let base = if how.virt_addr { addr as u64 } else { 0 };
        Ok(Mr {
            mr,
            desc,
            key,
            base,
        })
    }

    /// Closes the registration.
    pub fn close(self) {
        // SAFETY: a live registration (made by `register`), closed once (moved).
        unsafe { ffi::ngo_close(ptr::addr_of_mut!((*self.mr).fid)) };
    }
}

/// What the domain asks of registrations.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    /// Register at all.
    pub register: bool,
    /// `FI_SEND | FI_RECV`, and the RMA bits for the write path.
    pub access: u64,
    /// Remote addresses are virtual addresses.
    pub virt_addr: bool,
    /// Registrations are bound to the endpoint and enabled (`FI_MR_ENDPOINT`).
    pub endpoint: bool,
}

/// The transport's buffers (see the module docs).
pub struct Memory {
    pub pool: BufferPool,
    regs: Vec<Option<Mr>>,
    domain: *mut fid_domain,
    ep: *mut fid_ep,
    how: Registration,
    next_key: u64,
}

impl Memory {
    pub fn new(domain: *mut fid_domain, ep: *mut fid_ep, how: Registration) -> Memory {
        Memory {
            pool: BufferPool::new(NAME),
            regs: Vec::new(),
            domain,
            ep,
            how,
            next_key: 1,
        }
    }

    /// The descriptor `fi_send` and friends take for `region` (null where nothing
    /// is registered).
    #[inline]
    pub fn desc(&self, region: Region) -> *mut c_void {
        match self.regs.get(region.buffer.0 as usize) {
            Some(Some(mr)) => mr.desc,
            _ => ptr::null_mut(),
        }
    }

    /// Whether buffers are registered.
    pub fn desc_needed(&self) -> bool {
        self.how.register
    }

    /// Remote address and key of `region` for a remote writer.
    pub fn remote(&self, region: Region) -> Option<(u64, u64)> {
        let mr = self.regs.get(region.buffer.0 as usize)?.as_ref()?;
        Some((mr.base + region.offset as u64, mr.key))
    }

    fn register(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        let bytes = self.pool.get_mut(buffer)?;
        // An empty buffer is registered as one byte (the pool reserves at least a
        // cache line behind every buffer), so that a 0-byte message has a key too.
        let (addr, len) = (bytes.as_mut_ptr(), bytes.len().max(1));
        let key = self.next_key;
        self.next_key += 1;
        // SAFETY: [addr, addr+len) is a pool buffer whose heap allocation stays
        // put until it is freed, which `free` does only after closing this
        // registration.
        let mr = unsafe { Mr::register(self.domain, self.ep, self.how, addr, len, key)? };
        let slot = buffer.0 as usize;
        if self.regs.len() <= slot {
            self.regs.resize_with(slot + 1, || None);
        }
        self.regs[slot] = Some(mr);
        Ok(())
    }

    fn deregister(&mut self, buffer: BufferId) {
        if let Some(mr) = self.regs.get_mut(buffer.0 as usize).and_then(Option::take) {
            mr.close();
        }
    }

    /// Registers `len` bytes at `addr`, which the pool does not own, as its
    /// buffers are but with `access` (a window's memory).
    ///
    /// # Safety
    /// `len` bytes at `addr` stay allocated until the registration is closed,
    /// which happens before the domain closes.
    pub unsafe fn register_raw(
        &mut self,
        addr: *mut u8,
        len: usize,
        access: u64,
    ) -> Result<Mr, TransportError> {
        let key = self.next_key;
        self.next_key += 1;
        let how = Registration { access, ..self.how };
        // SAFETY: the caller's promise; the domain and endpoint are live.
        unsafe { Mr::register(self.domain, self.ep, how, addr, len, key) }
    }

    /// Closes every registration (before the endpoint and domain close).
    pub fn close_all(&mut self) {
        for slot in 0..self.regs.len() {
            self.deregister(BufferId(slot as u32));
        }
    }
}

fn reg_error(len: usize, call: &str, rc: i32) -> TransportError {
    TransportError::Setup {
        transport: NAME,
        reason: format!(
            "{call} of {len} bytes failed: {} (the locked-memory limit, `ulimit -l`?)",
            ffi::strerror(rc as isize)
        ),
    }
}

impl Buffers for Memory {
    fn try_alloc(&mut self, len: usize) -> Result<BufferId, TransportError> {
        let id = self.pool.try_alloc(len)?;
        if self.how.register {
            if let Err(e) = self.register(id) {
                let _ = self.pool.free(id);
                return Err(e);
            }
        }
        Ok(id)
    }

    fn free(&mut self, buffer: BufferId) -> Result<(), TransportError> {
        // Unknown and busy buffers are refused before the registration goes.
        self.pool.get(buffer)?;
        self.deregister(buffer);
        self.pool.free(buffer)
    }

    fn get(&self, buffer: BufferId) -> Result<&[u8], TransportError> {
        self.pool.get(buffer)
    }

    fn get_mut(&mut self, buffer: BufferId) -> Result<&mut [u8], TransportError> {
        self.pool.get_mut(buffer)
    }
}
