//! The PMIx client API as bindgen declares it from the system's `pmix.h`
//! (build.rs), and `PMIX_RANK_WILDCARD`, an expression bindgen cannot evaluate.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unused_imports,
    missing_docs,
    clippy::all
)]

include!(concat!(env!("OUT_DIR"), "/pmix.rs"));

/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1`): the whole namespace, for job-level keys.
pub const RANK_WILDCARD: pmix_rank_t = u32::MAX - 1;
