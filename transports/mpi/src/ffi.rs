//! The C ABI of `shim/ngauge_mpi.h`, declared by hand.
//!
//! Only `c_int`, `c_double` and raw pointers cross: communicators and requests are
//! indices into the shim's tables, so no MPI handle type (a pointer in Open MPI, an
//! int in MPICH) ever reaches Rust. The functions are those of the shim's shared
//! object that [`load`] opened (`crate::shims`); before that, and in a build
//! without MPI, they fail with [`E_NOT_BUILT`]: nothing calls them then, because
//! `Mpi::init` loads first or refuses.

use crate::shims::{self, Shim};
use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::raw::{c_char, c_double, c_int, c_longlong, c_ulonglong, c_void};
use std::sync::OnceLock;

pub const OK: c_int = 0;
pub const E_TRUNCATE: c_int = -1;
#[allow(dead_code)]
pub const E_HANDLE: c_int = -2;
#[allow(dead_code)]
pub const E_NOMEM: c_int = -3;
#[allow(dead_code)]
pub const E_ARG: c_int = -4;
/// `ngm_pingpong`: a message shorter than the receive posted.
pub const E_COUNT: c_int = -5;
/// `ngm_pingpong`: no native loop in this build or on this CPU.
pub const E_UNSUPPORTED: c_int = -6;
/// No shim is loaded: before [`load`], or in a build without MPI.
pub const E_NOT_BUILT: c_int = -100;

/// What a function returns while no shim is loaded.
trait Stub {
    fn stub() -> Self;
}
impl Stub for c_int {
    fn stub() -> Self {
        E_NOT_BUILT
    }
}
impl Stub for c_double {
    fn stub() -> Self {
        0.0
    }
}
impl Stub for () {
    fn stub() -> Self {}
}

macro_rules! shim {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {
        /// The shim's functions, looked up in the shared object loaded.
        struct Table {
            $($name: unsafe extern "C" fn($($ty),*) -> $ret,)*
        }

        impl Table {
            /// Looks every function up in `library`.
            fn from(library: &Library) -> Result<Table, libloading::Error> {
                // SAFETY: each symbol is the shim's function of that name, whose C
                // prototype (`shim/ngauge_mpi.h`) is the type it is read as.
                unsafe {
                    Ok(Table {
                        $($name: *library.get(concat!(stringify!($name), "\0").as_bytes())?,)*
                    })
                }
            }
        }

        $(
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            #[inline]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                match TABLE.get() {
                    // SAFETY: the caller upholds the C function's contract.
                    Some(Ok(table)) => unsafe { (table.$name)($($arg),*) },
                    _ => <$ret as Stub>::stub(),
                }
            }
        )*
    };
}

/// The loaded shim's functions, or why it could not be loaded.
static TABLE: OnceLock<Result<Table, String>> = OnceLock::new();

/// Loads the shim [`shims::selected`] names (once per process) and makes it the
/// one every function of this module calls; until then, and in a build without
/// MPI, they return [`E_NOT_BUILT`] as a stub would.
pub fn load() -> Result<&'static Shim, String> {
    let shim = shims::selected().map_err(|e| e.to_string())?;
    TABLE
        .get_or_init(|| open(shim).map_err(|e| format!("loading the {} shim: {e}", shim.flavor)))
        .as_ref()
        .map(|_| shim)
        .map_err(Clone::clone)
}

/// Opens `shim`'s shared object from memory (an anonymous `memfd`, so the binary
/// needs no file beside it) with `RTLD_GLOBAL`: Open MPI's components, which it
/// loads itself, resolve their symbols against the `libmpi` the shim brought in.
/// The library is never closed: the table's pointers stay valid for the process.
fn open(shim: &Shim) -> Result<Table, String> {
    let memfd = rustix::fs::memfd_create(
        format!("ngauge_mpi_{}", shim.flavor),
        rustix::fs::MemfdFlags::CLOEXEC,
    )
    .map_err(|e| format!("memfd_create: {e}"))?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(shim.object)
        .map_err(|e| format!("writing the shared object: {e}"))?;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    // SAFETY: the object is the shim `build.rs` compiled; its initializers are
    // those of the C runtime and the MPI library it links, which run no code of
    // ours and expect to be loaded into a process like this one.
    let library =
        unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
    let table = Table::from(&library).map_err(|e| e.to_string())?;
    std::mem::forget(library);
    Ok(table)
}

shim! {
    fn ngm_init(required: c_int, provided: *mut c_int) -> c_int;
    fn ngm_finalize() -> c_int;
    fn ngm_abort(code: c_int) -> c_int;
    fn ngm_initialized() -> c_int;
    fn ngm_finalized() -> c_int;
    fn ngm_library_version(buf: *mut c_char, cap: c_int) -> ();
    fn ngm_error_string(code: c_int, buf: *mut c_char, cap: c_int) -> ();
    fn ngm_flavor() -> c_int;
    fn ngm_wtime() -> c_double;
    fn ngm_wtick() -> c_double;

    fn ngm_comm_rank(comm: c_int, rank: *mut c_int) -> c_int;
    fn ngm_comm_size(comm: c_int, size: *mut c_int) -> c_int;

    fn ngm_send(comm: c_int, buf: *const c_void, len: c_int, peer: c_int, tag: c_int) -> c_int;
    fn ngm_recv(comm: c_int, buf: *mut c_void, len: c_int, peer: c_int, tag: c_int, got: *mut c_int) -> c_int;
    fn ngm_isend(comm: c_int, buf: *const c_void, len: c_int, peer: c_int, tag: c_int, req: *mut c_int) -> c_int;
    fn ngm_irecv(comm: c_int, buf: *mut c_void, len: c_int, peer: c_int, tag: c_int, req: *mut c_int) -> c_int;
    fn ngm_test(req: c_int, done: *mut c_int, got: *mut c_int) -> c_int;
    fn ngm_wait(req: c_int, done: *mut c_int, got: *mut c_int) -> c_int;
    fn ngm_pingpong(initiator: c_int, plain: c_int, peer: c_int, sbuf: *const c_void, slen: c_int, rbuf: *mut c_void, rlen: c_int, warmup: c_longlong, count: c_longlong, ticks: *mut c_ulonglong, got: *mut c_int, in_recv: *mut c_int) -> c_int;
    fn ngm_requests_in_flight() -> c_int;

    fn ngm_barrier(comm: c_int) -> c_int;
    fn ngm_ibarrier(comm: c_int, req: *mut c_int) -> c_int;
    fn ngm_bcast(comm: c_int, buf: *mut c_void, len: c_int, root: c_int) -> c_int;
    fn ngm_ibcast(comm: c_int, buf: *mut c_void, len: c_int, root: c_int, req: *mut c_int) -> c_int;
    fn ngm_reduce(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int, root: c_int) -> c_int;
    fn ngm_ireduce(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int, root: c_int, req: *mut c_int) -> c_int;
    fn ngm_allreduce(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int) -> c_int;
    fn ngm_iallreduce(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int, req: *mut c_int) -> c_int;
    fn ngm_gather(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, root: c_int) -> c_int;
    fn ngm_igather(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, root: c_int, req: *mut c_int) -> c_int;
    fn ngm_allgather(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void) -> c_int;
    fn ngm_iallgather(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, req: *mut c_int) -> c_int;
    fn ngm_alltoall(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void) -> c_int;
    fn ngm_ialltoall(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, req: *mut c_int) -> c_int;
    fn ngm_alltoallv(comm: c_int, send: *const c_void, layout: *const c_int, recv: *mut c_void) -> c_int;
    fn ngm_ialltoallv(comm: c_int, send: *const c_void, layout: *const c_int, recv: *mut c_void, req: *mut c_int) -> c_int;
    fn ngm_scatter(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, root: c_int) -> c_int;
    fn ngm_iscatter(comm: c_int, send: *const c_void, len: c_int, recv: *mut c_void, root: c_int, req: *mut c_int) -> c_int;
    fn ngm_reduce_scatter_block(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int) -> c_int;
    fn ngm_ireduce_scatter_block(comm: c_int, send: *const c_void, recv: *mut c_void, count: c_int, dtype: c_int, op: c_int, req: *mut c_int) -> c_int;

    // One-sided communication (`shim/ngauge_mpi_rma.h`), used by `crate::window`.
    fn ngm_win_allocate(bytes: c_longlong, base: *mut *mut c_void, win: *mut c_int) -> c_int;
    fn ngm_win_free(win: c_int) -> c_int;
    fn ngm_win_lock_all(win: c_int) -> c_int;
    fn ngm_win_unlock_all(win: c_int) -> c_int;
    fn ngm_win_flush(win: c_int, peer: c_int) -> c_int;
    fn ngm_win_sync(win: c_int) -> c_int;
    fn ngm_win_fence(win: c_int) -> c_int;
    fn ngm_put(win: c_int, buf: *const c_void, len: c_int, peer: c_int, disp: c_longlong) -> c_int;
    fn ngm_get(win: c_int, buf: *mut c_void, len: c_int, peer: c_int, disp: c_longlong) -> c_int;
    fn ngm_accumulate(win: c_int, buf: *const c_void, count: c_int, dtype: c_int, op: c_int, peer: c_int, disp: c_longlong) -> c_int;
    fn ngm_fetch_and_op(win: c_int, origin: *const c_void, result: *mut c_void, dtype: c_int, op: c_int, peer: c_int, disp: c_longlong) -> c_int;
}
