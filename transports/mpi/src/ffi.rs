//! The C ABI of `shim/ngauge_mpi.h`, declared by hand.
//!
//! Only `c_int`, `c_double` and raw pointers cross: communicators and requests are
//! indices into the shim's tables, so no MPI handle type (a pointer in Open MPI, an
//! int in MPICH) ever reaches Rust. In a build without MPI (cfg `ngauge_mpi_stub`)
//! the same functions exist as stubs that fail with [`E_NOT_BUILT`]; nothing calls
//! them because `Mpi::init` refuses first.

use std::os::raw::{c_char, c_double, c_int, c_longlong, c_ulonglong, c_void};

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
/// Stub builds only: the function does not exist in this build.
#[allow(dead_code)]
pub const E_NOT_BUILT: c_int = -100;

/// What a stub returns.
#[allow(dead_code)]
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
        #[cfg(not(ngauge_mpi_stub))]
        extern "C" {
            $(pub fn $name($($arg: $ty),*) -> $ret;)*
        }
        $(
            #[cfg(ngauge_mpi_stub)]
            #[allow(unused_variables, clippy::missing_safety_doc, clippy::too_many_arguments)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                <$ret as Stub>::stub()
            }
        )*
    };
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
}

// One-sided communication (`shim/ngauge_mpi_rma.h`), used by `crate::window`.
shim! {
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
