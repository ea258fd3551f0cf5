//! The PMIx calls, through the generated bindings ([`sys`]). Every `unsafe` block
//! of the crate is here: values go in through `PMIx_Value_load` (which copies) and
//! come out of `PMIx_Get` as owned Rust values, the C value freed at once.

#![allow(unsafe_code)]

mod sys;

use crate::{parse_ranks, PmixError, ServerFacts};
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::time::Duration;

/// A PMIx value, copied out of the C one.
enum Value {
    Str(String),
    Bytes(Vec<u8>),
    U16(u16),
    U32(u32),
    Other(u16),
}

/// `PMIx_Error_string`'s text for `status`.
fn status_text(status: sys::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string returns a pointer to a static NUL-terminated
    // string for every status (an "UNKNOWN" text for values it does not know).
    unsafe { CStr::from_ptr(sys::PMIx_Error_string(status)) }
        .to_string_lossy()
        .into_owned()
}

fn check(call: impl FnOnce() -> String, status: sys::pmix_status_t) -> Result<(), PmixError> {
    if status == sys::PMIX_SUCCESS as sys::pmix_status_t {
        Ok(())
    } else {
        Err(PmixError::Call {
            call: call(),
            status,
            text: status_text(status),
        })
    }
}

/// A key as C wants it: no NUL inside, at most `PMIX_MAX_KEYLEN` bytes.
fn c_key(key: &str) -> Result<CString, PmixError> {
    if key.len() > sys::PMIX_MAX_KEYLEN as usize {
        return Err(PmixError::Invalid(format!(
            "PMIx key {key:?} is longer than {} bytes",
            sys::PMIX_MAX_KEYLEN
        )));
    }
    CString::new(key).map_err(|_| PmixError::Invalid(format!("PMIx key {key:?} contains NUL")))
}

/// A standard key constant of the bindings (`b"pmix.job.size\0"`) as a `&str`.
fn std_key(key: &'static [u8]) -> &'static str {
    CStr::from_bytes_with_nul(key)
        .ok()
        .and_then(|k| k.to_str().ok())
        .expect("pmix.h keys are NUL-terminated ASCII")
}

/// An info array entry: `key` set to the boolean or integer `value`.
struct Info(Vec<sys::pmix_info_t>);

impl Info {
    fn new() -> Info {
        Info(Vec::new())
    }

    fn load(mut self, key: &'static [u8], data: *const c_void, kind: u32) -> Info {
        // SAFETY: pmix_info_t is plain data (a key array, flags, a tagged union)
        // for which all-zero is the PMIX_INFO_CONSTRUCT state.
        let mut info: sys::pmix_info_t = unsafe { std::mem::zeroed() };
        // SAFETY: `key` is a NUL-terminated constant of pmix.h; `data` points to a
        // value of the type `kind` names, which PMIx_Info_load copies.
        let status = unsafe {
            sys::PMIx_Info_load(
                &mut info,
                key.as_ptr().cast::<c_char>(),
                data,
                kind as sys::pmix_data_type_t,
            )
        };
        debug_assert_eq!(status, sys::PMIX_SUCCESS as sys::pmix_status_t);
        self.0.push(info);
        self
    }

    fn flag(self, key: &'static [u8], value: bool) -> Info {
        self.load(key, (&value as *const bool).cast(), sys::PMIX_BOOL)
    }

    fn int(self, key: &'static [u8], value: i32) -> Info {
        self.load(key, (&value as *const i32).cast(), sys::PMIX_INT)
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        for info in &mut self.0 {
            // SAFETY: each entry was loaded by PMIx_Info_load and is destructed once.
            unsafe { sys::PMIx_Value_destruct(&mut info.value) };
        }
    }
}

/// This process's PMIx client: connected to the launcher's server from
/// [`Pmix::init`] until dropped (`PMIx_Finalize`).
pub struct Pmix {
    me: sys::pmix_proc_t,
    size: u32,
}

impl std::fmt::Debug for Pmix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmix")
            .field("namespace", &self.namespace())
            .field("rank", &self.rank())
            .field("size", &self.size)
            .finish()
    }
}

impl Pmix {
    /// `PMIx_Init`: connects to the local PMIx server the launcher started (found
    /// through the `PMIX_*` environment) and reads the job size.
    pub fn init() -> Result<Pmix, PmixError> {
        // SAFETY: all-zero is a valid pmix_proc_t (empty namespace, rank 0).
        let mut me: sys::pmix_proc_t = unsafe { std::mem::zeroed() };
        // SAFETY: `me` is a valid out pointer; no info array (null, 0).
        let status = unsafe { sys::PMIx_Init(&mut me, std::ptr::null_mut(), 0) };
        check(|| "PMIx_Init".into(), status)?;
        let mut pmix = Pmix { me, size: 0 };
        pmix.size = match pmix.job_value(sys::PMIX_JOB_SIZE)? {
            Value::U32(n) => n,
            other => return Err(type_error(std_key(sys::PMIX_JOB_SIZE), "uint32", &other)),
        };
        if pmix.size == 0 || pmix.rank() >= pmix.size {
            return Err(PmixError::Invalid(format!(
                "the PMIx server says rank {} of a job of {} ranks",
                pmix.rank(),
                pmix.size
            )));
        }
        Ok(pmix)
    }

    /// This process's rank in its namespace.
    pub fn rank(&self) -> u32 {
        self.me.rank
    }

    /// The number of ranks in the namespace (`PMIX_JOB_SIZE`).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The namespace (the launcher's job id: `570818561`, `slurm.pmix.77.0`).
    pub fn namespace(&self) -> String {
        // SAFETY: PMIx_Init filled `nspace` with a NUL-terminated string within
        // the array (PMIX_MAX_NSLEN + 1 bytes).
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// The ranks on this host, this one included, in increasing order:
    /// `PMIX_LOCAL_PEERS` when the server offers it, else every rank whose
    /// `PMIX_NODEID` is this rank's.
    pub fn local_peers(&self) -> Result<Vec<u32>, PmixError> {
        let mut ranks = match self.job_value(sys::PMIX_LOCAL_PEERS) {
            Ok(Value::Str(list)) => parse_ranks(&list)?,
            Ok(other) => return Err(type_error(std_key(sys::PMIX_LOCAL_PEERS), "string", &other)),
            Err(_) => {
                let node = |rank| match self.value(rank, sys::PMIX_NODEID) {
                    Ok(Value::U32(id)) => Ok(id),
                    Ok(other) => Err(type_error(std_key(sys::PMIX_NODEID), "uint32", &other)),
                    Err(e) => Err(e),
                };
                let mine = node(self.rank())?;
                let mut ranks = Vec::new();
                for rank in 0..self.size {
                    if node(rank)? == mine {
                        ranks.push(rank);
                    }
                }
                ranks
            }
        };
        ranks.sort_unstable();
        if !ranks.contains(&self.rank()) || ranks.iter().any(|&r| r >= self.size) {
            return Err(PmixError::Invalid(format!(
                "the PMIx server's local peers {ranks:?} do not fit rank {} of {}",
                self.rank(),
                self.size
            )));
        }
        Ok(ranks)
    }

    /// This rank's place among the ranks on its host (`PMIX_LOCAL_RANK`), when
    /// offered.
    pub fn local_rank(&self) -> Option<u32> {
        match self.value(self.rank(), sys::PMIX_LOCAL_RANK) {
            Ok(Value::U16(r)) => Some(u32::from(r)),
            _ => None,
        }
    }

    /// The number of hosts in the job (`PMIX_NUM_NODES`), when offered.
    pub fn nodes(&self) -> Option<u32> {
        match self.job_value(sys::PMIX_NUM_NODES) {
            Ok(Value::U32(n)) => Some(n),
            _ => None,
        }
    }

    /// `PMIx_Put` of `bytes` under `key`, visible to every rank of the job
    /// (`PMIX_GLOBAL`) once committed and fenced.
    pub fn put(&self, key: &str, bytes: &[u8]) -> Result<(), PmixError> {
        let c = c_key(key)?;
        let object = sys::pmix_byte_object_t {
            bytes: bytes.as_ptr() as *mut c_char,
            size: bytes.len(),
        };
        // SAFETY: all-zero is PMIX_VALUE_CONSTRUCT's state (undefined type).
        let mut value: sys::pmix_value_t = unsafe { std::mem::zeroed() };
        // SAFETY: `object` describes `bytes`, alive for the call; PMIx_Value_load
        // copies them into memory of its own.
        let status = unsafe {
            sys::PMIx_Value_load(
                &mut value,
                (&object as *const sys::pmix_byte_object_t).cast(),
                sys::PMIX_BYTE_OBJECT as sys::pmix_data_type_t,
            )
        };
        check(|| format!("PMIx_Value_load({key})"), status)?;
        // SAFETY: `c` is a NUL-terminated key, `value` a loaded value; PMIx_Put
        // copies it into the client's store.
        let status = unsafe { sys::PMIx_Put(sys::PMIX_GLOBAL as u8, c.as_ptr(), &mut value) };
        // SAFETY: `value` was loaded above and is destructed once.
        unsafe { sys::PMIx_Value_destruct(&mut value) };
        check(|| format!("PMIx_Put({key})"), status)
    }

    /// `PMIx_Commit`: hands what was put to the local server.
    pub fn commit(&self) -> Result<(), PmixError> {
        // SAFETY: no arguments; valid between init and finalize.
        check(|| "PMIx_Commit".into(), unsafe { sys::PMIx_Commit() })
    }

    /// `PMIx_Fence` over every rank of the job, collecting the data they
    /// committed (`PMIX_COLLECT_DATA`), so that [`Pmix::get`] answers from the
    /// local store afterwards; gives up after `timeout` (`PMIX_TIMEOUT`, whole
    /// seconds, at least 1) where the server supports it.
    pub fn fence(&self, timeout: Duration) -> Result<(), PmixError> {
        let mut all = self.me;
        all.rank = sys::RANK_WILDCARD;
        let seconds = i32::try_from(timeout.as_secs().max(1)).unwrap_or(i32::MAX);
        let info = Info::new()
            .flag(sys::PMIX_COLLECT_DATA, true)
            .int(sys::PMIX_TIMEOUT, seconds);
        // SAFETY: one valid proc (the namespace, wildcard rank); `info` holds
        // `info.0.len()` loaded entries alive for the call.
        let status = unsafe { sys::PMIx_Fence(&all, 1, info.0.as_ptr(), info.0.len()) };
        check(|| "PMIx_Fence".into(), status)
    }

    /// `PMIx_Get` of the bytes `rank` put under `key`.
    pub fn get(&self, rank: u32, key: &str) -> Result<Vec<u8>, PmixError> {
        let c = c_key(key)?;
        match self.get_c(rank, &c)? {
            Value::Bytes(b) => Ok(b),
            other => Err(type_error(key, "byte object", &other)),
        }
    }

    /// What the server says about itself (see [`ServerFacts`]).
    pub fn server(&self) -> ServerFacts {
        // SAFETY: PMIx_Get_version returns a pointer to a static NUL-terminated
        // string.
        let library_version = unsafe { CStr::from_ptr(sys::PMIx_Get_version()) }
            .to_string_lossy()
            .into_owned();
        let text = |key| match self.job_value(key) {
            Ok(Value::Str(s)) if !s.is_empty() => Some(s),
            _ => None,
        };
        ServerFacts {
            library_version,
            rm_name: text(sys::PMIX_RM_NAME),
            rm_version: text(sys::PMIX_RM_VERSION),
            server_pmix_version: std::env::var("PMIX_VERSION").ok(),
        }
    }

    /// `PMIx_Abort`: asks the launcher to end the whole job with `status`,
    /// `message` in its report; exits this process should the call return.
    pub fn abort(&self, status: i32, message: &str) -> ! {
        let text = CString::new(message.replace('\0', " ")).expect("NULs replaced");
        // SAFETY: `text` is NUL-terminated; no procs (null, 0) means the whole job.
        unsafe { sys::PMIx_Abort(status, text.as_ptr(), std::ptr::null_mut(), 0) };
        std::process::exit(status)
    }

    fn job_value(&self, key: &'static [u8]) -> Result<Value, PmixError> {
        self.value(sys::RANK_WILDCARD, key)
    }

    fn value(&self, rank: u32, key: &'static [u8]) -> Result<Value, PmixError> {
        let c = CStr::from_bytes_with_nul(key).expect("pmix.h keys are NUL-terminated");
        self.get_c(rank, c)
    }

    fn get_c(&self, rank: u32, key: &CStr) -> Result<Value, PmixError> {
        let mut proc_ = self.me;
        proc_.rank = rank;
        let mut out: *mut sys::pmix_value_t = std::ptr::null_mut();
        // SAFETY: valid proc and NUL-terminated key; no info; `out` receives a
        // value PMIx allocated, owned by us on success.
        let status = unsafe { sys::PMIx_Get(&proc_, key.as_ptr(), std::ptr::null(), 0, &mut out) };
        check(
            || format!("PMIx_Get({}, rank {rank})", key.to_string_lossy()),
            status,
        )?;
        if out.is_null() {
            return Err(PmixError::Invalid(format!(
                "PMIx_Get({}) returned no value",
                key.to_string_lossy()
            )));
        }
        // SAFETY: `out` is a valid value PMIx_Get allocated; the union member read
        // is the one its type tag names; the value is destructed and freed once
        // (PMIX_VALUE_RELEASE: destruct, then free).
        unsafe {
            let v = &*out;
            let value = match u32::from(v.type_) {
                sys::PMIX_STRING if !v.data.string.is_null() => {
                    Value::Str(CStr::from_ptr(v.data.string).to_string_lossy().into_owned())
                }
                sys::PMIX_BYTE_OBJECT => {
                    let bo = &v.data.bo;
                    Value::Bytes(if bo.bytes.is_null() || bo.size == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec()
                    })
                }
                sys::PMIX_UINT16 => Value::U16(v.data.uint16),
                sys::PMIX_UINT32 => Value::U32(v.data.uint32),
                _ => Value::Other(v.type_),
            };
            sys::PMIx_Value_destruct(out);
            libc::free(out.cast());
            Ok(value)
        }
    }
}

impl Drop for Pmix {
    fn drop(&mut self) {
        // SAFETY: the client was initialized by `init`; finalized once, here.
        unsafe { sys::PMIx_Finalize(std::ptr::null(), 0) };
    }
}

fn type_error(key: &str, expected: &'static str, found: &Value) -> PmixError {
    let found = match found {
        Value::Str(_) => sys::PMIX_STRING as u16,
        Value::Bytes(_) => sys::PMIX_BYTE_OBJECT as u16,
        Value::U16(_) => sys::PMIX_UINT16 as u16,
        Value::U32(_) => sys::PMIX_UINT32 as u16,
        Value::Other(t) => *t,
    };
    PmixError::Type {
        key: key.to_string(),
        expected,
        found,
    }
}
