//! The UCP API as bindgen declares it from the system's `ucp/api/ucp.h`
//! (build.rs), and the status-pointer macros of `ucs/type/status.h`, which C
//! code gets as macros and bindgen cannot translate.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unused_imports,
    missing_docs,
    clippy::all
)]

include!(concat!(env!("OUT_DIR"), "/ucp.rs"));

/// `UCS_PTR_IS_ERR`: the pointer a `*_nbx` call returned carries an error status.
pub fn ptr_is_err(ptr: ucs_status_ptr_t) -> bool {
    ptr as usize >= UCS_ERR_LAST as isize as usize
}

/// `UCS_PTR_IS_PTR`: the pointer is a request (neither `UCS_OK` nor an error).
pub fn ptr_is_ptr(ptr: ucs_status_ptr_t) -> bool {
    (ptr as usize).wrapping_sub(1) < (UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_STATUS`: the status a non-request pointer carries.
pub fn ptr_status(ptr: ucs_status_ptr_t) -> ucs_status_t {
    ptr as isize as ucs_status_t
}
