//! Every integration test but MPI's, in one test binary: one build and one link
//! of the test code instead of one per file, and the runner's two threads go from
//! one file's tests to the next instead of waiting at each file's slowest test.
//! Each file is a module (`cargo test --test integration loggp::` runs one); the
//! MPI files (`tests/mpi.rs`, `tests/mpi_protocol.rs`) stay binaries of their own,
//! which `scripts/test` runs once per MPI library.
//!
//! Tests that load the host for long or need it for timing hold
//! [`support::heavy`], so that no two of them run at once.

mod support;

#[path = "support/coll.rs"]
mod coll_rows;
#[path = "support/documents.rs"]
mod documents;
#[path = "support/late.rs"]
mod late_rows;
#[path = "support/nbc.rs"]
mod nbc_rows;
#[path = "support/netns.rs"]
mod netns;
#[path = "support/rdtsc.rs"]
mod rdtsc;
#[path = "support/slurm.rs"]
mod slurm_cluster;

mod bench_scripts;
mod coll;
mod compare;
mod docs_examples;
mod docs_links;
mod experiment;
mod faults;
mod hostile;
mod job;
mod late;
mod launch;
mod layout;
mod loggp;
mod loggp_shaped;
mod nbc;
mod network;
mod noise;
mod ofi;
mod outputs;
mod pingpong;
mod pmix;
mod run;
mod scale;
mod schemas;
mod simulate;
mod slurm;
mod stats_bin;
mod support_selftest;
mod sync;
mod timer;
mod ucx;
mod udp_loss;
mod verbs_nodevice;
// The soft-RoCE VM test runs about 100 s on a little more than one core;
// libtest starts tests in the order of their names, so under its own name it
// started last and ran alone at the end. This name sorts first: it runs beside
// the others. (`cargo test --test integration a_verbs_vm::` runs it.)
#[path = "verbs_vm.rs"]
mod a_verbs_vm;

/// A file added to `tests/` runs: it is a module above or one of the MPI binaries
/// (`autotests = false` in Cargo.toml: cargo does not look for test files itself).
#[test]
fn every_test_file_is_a_module_here_or_a_binary_of_its_own() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let root = std::fs::read_to_string(dir.join("integration.rs")).unwrap();
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"),
    )
    .unwrap();
    let mut unrun = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path
            .extension()
            .filter(|e| *e == "rs")
            .and(path.file_stem())
            .and_then(|s| s.to_str())
        else {
            continue;
        };
        let module = root.contains(&format!("\nmod {stem};\n"))
            || root.contains(&format!("#[path = \"{stem}.rs\"]\nmod "));
        let binary = manifest.contains(&format!("path = \"tests/{stem}.rs\""));
        if !module && !binary {
            unrun.push(stem.to_string());
        }
    }
    assert!(unrun.is_empty(), "tests/ files run by nothing: {unrun:?}");
}
