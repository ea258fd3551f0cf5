//! The UCP context and its one worker, what UCX prints about itself, where
//! its log goes, and `probe`.

use super::sys;
use crate::{facts, tls};
use std::ffi::{CStr, CString};
use std::os::raw::c_void;

/// `ucs_status_string`'s text for `status`.
pub(super) fn status_text(status: sys::ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a pointer to a static NUL-terminated
    // string for every value (an "unknown" text for values it does not know).
    unsafe { CStr::from_ptr(sys::ucs_status_string(status)) }
        .to_string_lossy()
        .into_owned()
}

/// `call: text` when `status` is an error, else `Ok`.
pub(super) fn check(call: &str, status: sys::ucs_status_t) -> Result<(), String> {
    if status == sys::UCS_OK {
        Ok(())
    } else {
        Err(format!("{call}: {}", status_text(status)))
    }
}

/// UCX's version at run time (`1.13.1`).
pub(super) fn version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::ucp_get_version_string()) }
        .to_string_lossy()
        .into_owned()
}

/// What `print` writes to a C stream, as text (through `open_memstream`).
pub(super) fn printed(print: impl FnOnce(*mut sys::FILE)) -> String {
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream gets valid out pointers; it returns null on failure.
    let stream = unsafe { libc::open_memstream(&mut buf, &mut len) };
    if stream.is_null() {
        return String::new();
    }
    print(stream.cast::<sys::FILE>());
    // SAFETY: `stream` is the open stream from above, closed once; after fclose
    // `buf` holds `len` bytes (NUL-terminated) that we own and free once.
    unsafe {
        libc::fclose(stream);
        let text = if buf.is_null() {
            String::new()
        } else {
            let bytes = std::slice::from_raw_parts(buf.cast::<u8>(), len);
            String::from_utf8_lossy(bytes).into_owned()
        };
        libc::free(buf.cast::<c_void>());
        text
    }
}

/// UCX's log handler for this process: the message on stderr, as UCX's own
/// handler would print it on stdout (its default `UCX_LOG_FILE`), where
/// ngauge writes its results. Messages of a level the component does not log
/// are left to the next handler (which drops them too).
unsafe extern "C" fn log_to_stderr(
    file: *const libc::c_char,
    line: libc::c_uint,
    _function: *const libc::c_char,
    level: sys::ucs_log_level_t,
    comp: *const sys::ucs_log_component_config_t,
    format: *const libc::c_char,
    ap: *mut sys::__va_list_tag,
) -> sys::ucs_log_func_rc_t {
    // SAFETY: UCX passes its component's live configuration.
    let enabled = comp.is_null() || level <= unsafe { (*comp).log_level };
    if !enabled && level != sys::UCS_LOG_LEVEL_PRINT {
        return sys::UCS_LOG_FUNC_RC_CONTINUE;
    }
    let mut text = [0u8; 512];
    // SAFETY: `format` and `ap` are the printf format and arguments UCX passes
    // for this one call; vsnprintf writes at most `len` bytes, NUL-terminated.
    unsafe { sys::vsnprintf(text.as_mut_ptr().cast(), text.len() as _, format, ap) };
    let text = CStr::from_bytes_until_nul(&text).map_or_else(|_| "".into(), CStr::to_string_lossy);
    let file = if file.is_null() {
        "".into()
    } else {
        // SAFETY: a static NUL-terminated file name.
        unsafe { CStr::from_ptr(file) }.to_string_lossy()
    };
    let name = match level {
        sys::UCS_LOG_LEVEL_FATAL => "FATAL",
        sys::UCS_LOG_LEVEL_ERROR => "ERROR",
        sys::UCS_LOG_LEVEL_WARN => "WARN",
        sys::UCS_LOG_LEVEL_DIAG => "DIAG",
        sys::UCS_LOG_LEVEL_INFO => "INFO",
        _ => "DEBUG",
    };
    eprintln!("[UCX {name}] {file}:{line} {text}");
    sys::UCS_LOG_FUNC_RC_STOP
}

/// Installs [`log_to_stderr`] once per process.
fn log_to_stderr_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: the handler is a function with the type UCX expects, valid for
    // the life of the process.
    ONCE.call_once(|| unsafe { sys::ucs_log_push_handler(Some(log_to_stderr)) });
}

/// A UCP context and one single-threaded worker on it.
pub(super) struct Context {
    pub(super) ctx: sys::ucp_context_h,
    pub(super) worker: sys::ucp_worker_h,
    /// Bytes of UCP's request structure (`UCP_ATTR_FIELD_REQUEST_SIZE`).
    pub(super) request_size: usize,
    /// The worker's event descriptor, when it was created for sleeping.
    pub(super) efd: Option<i32>,
}

impl Context {
    /// A context with UCX's configuration from the environment and, when `tls`
    /// is given, that transport list; `features` of `UCP_FEATURE_*`; sized for
    /// `ranks` endpoints. With `UCP_FEATURE_WAKEUP` it fetches the worker's
    /// event descriptor.
    pub(super) fn new(tls: Option<&str>, features: u64, ranks: usize) -> Result<Context, String> {
        let ctx = init(tls, features, ranks)?;
        let mut context = Context {
            ctx,
            worker: std::ptr::null_mut(),
            request_size: 0,
            efd: None,
        };
        // SAFETY: all-zero is a valid ucp_context_attr_t (integers and an array),
        // and `ctx` is a live context.
        let mut attr: sys::ucp_context_attr_t = unsafe { std::mem::zeroed() };
        attr.field_mask = u64::from(sys::UCP_ATTR_FIELD_REQUEST_SIZE);
        // SAFETY: `ctx` is live and `attr` a valid out structure.
        check("ucp_context_query", unsafe {
            sys::ucp_context_query(ctx, &mut attr)
        })?;
        context.request_size = attr.request_size;
        // SAFETY: all-zero is a valid ucp_worker_params_t (integers, pointers, a
        // CPU mask); only the thread mode is marked as set.
        let mut params: sys::ucp_worker_params_t = unsafe { std::mem::zeroed() };
        params.field_mask = u64::from(sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE);
        params.thread_mode = sys::UCS_THREAD_MODE_SINGLE;
        // SAFETY: `ctx` is live; `params` is valid for the call; the worker is
        // destroyed before the context (Drop).
        check("ucp_worker_create", unsafe {
            sys::ucp_worker_create(ctx, &params, &mut context.worker)
        })?;
        if features & u64::from(sys::UCP_FEATURE_WAKEUP) != 0 {
            let mut fd = -1;
            // SAFETY: the worker is live and was created with the wakeup feature.
            check("ucp_worker_get_efd", unsafe {
                sys::ucp_worker_get_efd(context.worker, &mut fd)
            })?;
            context.efd = Some(fd);
        }
        Ok(context)
    }

    /// One call of `ucp_worker_progress`: how many events it handled.
    #[inline(always)]
    pub(super) fn progress(&self) -> u32 {
        // SAFETY: the worker is live, used by this thread only (single-threaded
        // mode: the transport is not Send).
        unsafe { sys::ucp_worker_progress(self.worker) }
    }

    /// The worker's address, as peers connect to it.
    pub(super) fn address(&self) -> Result<Vec<u8>, String> {
        let mut addr: *mut sys::ucp_address_t = std::ptr::null_mut();
        let mut len: usize = 0;
        // SAFETY: the worker is live; UCX allocates the address, which we copy
        // and release once.
        unsafe {
            check(
                "ucp_worker_get_address",
                sys::ucp_worker_get_address(self.worker, &mut addr, &mut len),
            )?;
            let bytes = std::slice::from_raw_parts(addr.cast::<u8>(), len).to_vec();
            sys::ucp_worker_release_address(self.worker, addr);
            Ok(bytes)
        }
    }

    /// Destroys the worker (teardown: before the memory mapped on the context
    /// is unmapped); the context stays until drop.
    pub(super) fn destroy_worker(&mut self) {
        let worker = std::mem::replace(&mut self.worker, std::ptr::null_mut());
        if !worker.is_null() {
            // SAFETY: a live worker, destroyed once (the field was cleared).
            unsafe { sys::ucp_worker_destroy(worker) };
        }
    }

    /// The `transport/device` resources this context may use.
    pub(super) fn resources(&self) -> Vec<(String, String)> {
        // SAFETY: the context is live and `stream` an open stream.
        let text = printed(|stream| unsafe { sys::ucp_context_print_info(self.ctx, stream) });
        facts::parse_resources(&text)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the worker (if created) and context are live and destroyed once,
        // the worker first; everything made from them (endpoints, requests,
        // mapped memory) was released before (the transport's teardown).
        unsafe {
            if !self.worker.is_null() {
                sys::ucp_worker_destroy(self.worker);
            }
            sys::ucp_cleanup(self.ctx);
        }
    }
}

/// `ucp_init` (the header's inline wrapper of `ucp_init_version`) with the
/// environment's configuration, `tls` in place of its transport list.
fn init(tls: Option<&str>, features: u64, ranks: usize) -> Result<sys::ucp_context_h, String> {
    log_to_stderr_once();
    let mut config: *mut sys::ucp_config_t = std::ptr::null_mut();
    // SAFETY: null prefix and file name mean the defaults (`UCX_` variables);
    // `config` receives a configuration we release below.
    check("ucp_config_read", unsafe {
        sys::ucp_config_read(std::ptr::null(), std::ptr::null(), &mut config)
    })?;
    let result = (|| {
        if let Some(list) = tls {
            let value =
                CString::new(list).map_err(|_| "a transport list with a NUL byte".to_string())?;
            // SAFETY: `config` is live; both strings are NUL-terminated and
            // outlive the call (UCX copies the value).
            check("ucp_config_modify(TLS)", unsafe {
                sys::ucp_config_modify(config, c"TLS".as_ptr(), value.as_ptr())
            })?;
        }
        // SAFETY: all-zero is a valid ucp_params_t (integers, null pointers, no
        // callbacks); the fields used are marked in field_mask.
        let mut params: sys::ucp_params_t = unsafe { std::mem::zeroed() };
        params.field_mask = u64::from(sys::UCP_PARAM_FIELD_FEATURES)
            | u64::from(sys::UCP_PARAM_FIELD_ESTIMATED_NUM_EPS);
        params.features = features;
        params.estimated_num_eps = ranks;
        let mut ctx: sys::ucp_context_h = std::ptr::null_mut();
        // SAFETY: `params` and `config` are valid for the call; the context is
        // cleaned up by its owner.
        check("ucp_init", unsafe {
            sys::ucp_init_version(
                sys::UCP_API_MAJOR,
                sys::UCP_API_MINOR,
                &params,
                config,
                &mut ctx,
            )
        })?;
        Ok(ctx)
    })();
    // SAFETY: read above, released once; the context keeps its own copy.
    unsafe { sys::ucp_config_release(config) };
    result
}

/// The transports UCX offers on this machine (every resource of a context with
/// the list `all`), deduplicated, in UCX's order.
pub(super) fn offered() -> Result<Vec<String>, String> {
    let ctx = init(Some("all"), u64::from(sys::UCP_FEATURE_TAG), 1)?;
    // SAFETY: `ctx` is live and `stream` an open stream.
    let text = printed(|stream| unsafe { sys::ucp_context_print_info(ctx, stream) });
    // SAFETY: made above, cleaned up once.
    unsafe { sys::ucp_cleanup(ctx) };
    let mut names: Vec<String> = Vec::new();
    for (transport, _) in facts::parse_resources(&text) {
        if !names.contains(&transport) {
            names.push(transport);
        }
    }
    Ok(names)
}

/// The check of `tls` against what UCX offers, when a list is given.
pub(super) fn check_tls(tls: Option<&str>) -> Result<(), String> {
    match tls {
        Some(list) => tls::check(list, &offered()?),
        None => Ok(()),
    }
}

/// See [`crate::probe`].
pub fn probe(tls: Option<&str>) -> Result<String, String> {
    check_tls(tls)?;
    let ctx = Context::new(tls, u64::from(sys::UCP_FEATURE_TAG), 1)?;
    let resources: Vec<String> = ctx
        .resources()
        .into_iter()
        .map(|(t, d)| format!("{t}/{d}"))
        .collect();
    if resources.is_empty() {
        return Err(format!("UCX {} offers no transport here", version()));
    }
    Ok(format!("UCX {}: {}", version(), resources.join(", ")))
}
