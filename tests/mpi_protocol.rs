//! Protocol switches inside MPI must show up in `ngauge loggp` (issue #6): the test
//! sets an eager limit, sweeps sizes across it over MPI, and checks that the detector
//! reports exactly one change, within one sweep step of the limit. The limits are
//! chosen by the test, not the library defaults: Open MPI's TCP path
//! (`--mca btl_tcp_eager_limit`), Open MPI's shared-memory path
//! (`--mca btl_vader_eager_limit`), and MPICH's (ch4:ucx in Debian, where the CH3
//! variable `MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE` has no effect; `UCX_RNDV_THRESH` sets
//! the switch there, and by default UCX's shared-memory segment size
//! `UCX_MM_SEG_SIZE` does).
//!
//! The switches show in different series: Open MPI's TCP rendezvous in all of them;
//! the shared-memory and MPICH switches as a 20-25% drop of `PRTT(1,0,s)` and in
//! the overheads, hardly in the gap per message that the paper's look-ahead fits
//! (eq. 5). The detector therefore cuts the gap, `PRTT(1,0,s)`, `o_s` and `o_r`
//! jointly (see `ngauge::model::segment::detect_joint`). Run with `cargo test
//! --release --features mpi --test mpi_protocol`.
#![cfg(feature = "mpi")]

use std::process::{Command, Stdio};
use std::time::Duration;

mod support;

const NGAUGE: &str = env!("CARGO_BIN_EXE_ngauge");

/// Runs `ngauge -t mpi loggp` over 2 ranks with launcher arguments `mpi_args`
/// and environment `env`, and returns the confirmed protocol changes (first
/// sizes of new ranges, with `first_bytes` where located to the byte).
///
/// The tests sweep in the default's shuffled passes: in one ascending sweep a
/// level flip of this VM that lasts seconds (every series 20-30% lower from one
/// size on) looks like a protocol switch; shuffled, it scatters over sizes and
/// passes (docs/findings/2026-11-22-mpi-protocol-switches.md).
fn changes(mpi_args: &[&str], env: &[(&str, &str)], sizes: &str) -> Vec<Found> {
    changes_in_passes(mpi_args, env, sizes, None, &[])
}

/// As [`changes`], confirmed but not bisected to the byte (`--no-refine`), for the
/// tests that check the change's sweep step only: the bisection's rounds would
/// measure what they do not assert.
fn changes_at_sweep_steps(mpi_args: &[&str], env: &[(&str, &str)], sizes: &str) -> Vec<Found> {
    changes_in_passes(mpi_args, env, sizes, None, &["--no-refine"])
}

/// A confirmed change: its first sweep size and, when bisected to the byte, the
/// first byte count of the new protocol.
#[derive(Clone, Copy, Debug)]
struct Found {
    bytes: u64,
    first_bytes: Option<u64>,
}

fn changes_in_passes(
    mpi_args: &[&str],
    env: &[(&str, &str)],
    sizes: &str,
    passes: Option<u32>,
    loggp_args: &[&str],
) -> Vec<Found> {
    // One sweep at a time: two jobs on two cores would measure each other.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new(ngauge_mpi::shim().mpiexec);
    if ngauge_mpi::shim().flavor == "openmpi" {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    cmd.args(mpi_args)
        .args([
            "-n", "2", NGAUGE, "-t", "mpi", "loggp", "--sizes", sizes, "--json",
        ])
        .args(
            passes
                .map(|p| ["--passes".to_string(), p.to_string()])
                .into_iter()
                .flatten(),
        )
        // The libraries' eager limits are what these tests locate; the doubt
        // rounds (tests/loggp.rs, the lib's experiment tests) would add time.
        .args(["--doubt-budget", "0s"])
        .args(loggp_args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start the MPI launcher");
    let out = support::output_within(child, Duration::from_secs(300)).unwrap_or_else(|out| {
        panic!(
            "loggp over MPI hung; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Shown when the test fails: the curves the detector cut.
    eprintln!(
        "size, PRTT(1,0,s), gap, o_s, o_r [us]; ranges {}",
        doc["ranges"]
    );
    for p in doc["points"].as_array().into_iter().flatten() {
        eprintln!(
            "{} {:.2} {:.2} {:.2} {:.2}",
            p["size"],
            p["prtt_1_0_us"].as_f64().unwrap_or(f64::NAN),
            p["gap_us"].as_f64().unwrap_or(f64::NAN),
            p["os_us"].as_f64().unwrap_or(f64::NAN),
            p["or_us"].as_f64().unwrap_or(f64::NAN)
        );
    }
    let changes = doc["changes"].as_array().expect("changes[]");
    eprintln!("changes: {}", serde_json::Value::Array(changes.clone()));
    changes
        .iter()
        .filter(|c| c["verdict"] == "confirmed")
        .map(|c| Found {
            bytes: c["bytes"].as_u64().expect("changes[].bytes"),
            first_bytes: c["first_bytes"].as_u64(),
        })
        .collect()
}

/// Whether this run uses the `flavour` shim (`openmpi` or `mpich`); if not, `test`
/// skips, saying so: a run launches one MPI, so the other flavour's tests skip in
/// every run, CI included (`scripts/test` runs this file once per MPI installed,
/// naming it in `NGAUGE_MPI`).
fn built_for(test: &str, flavour: &str) -> bool {
    if ngauge_mpi::shim().flavor == flavour {
        return true;
    }
    let reason = format!(
        "needs the {flavour} shim, this run uses {} (NGAUGE_MPI={flavour} selects it)",
        ngauge_mpi::shim().flavor
    );
    support::skip(test, support::Lack::Host, reason);
    false
}

/// Exactly one change, within one sweep step of `limit`.
fn assert_one_switch_near(found: &[Found], limit: u64, step: u64) {
    assert_eq!(
        found.len(),
        1,
        "expected one protocol change near {limit} B, found {found:?}"
    );
    assert!(
        found[0].bytes.abs_diff(limit) <= step,
        "the change at {} B is more than one step ({step} B) from the eager limit {limit} B",
        found[0].bytes
    );
}

/// The one change located to the byte at `limit - header + 1`, within
/// `slack` bytes: the library counts its `header` into the eager limit (see
/// docs/commands/loggp.md, "Configured eager limit and first byte").
fn assert_first_byte(found: &[Found], limit: u64, header: u64, slack: u64) {
    let expected = limit - header + 1;
    assert_first_byte_at(
        found,
        expected,
        &format!("eager limit {limit} B minus a {header}-byte header, plus one"),
        slack,
    );
}

/// The one change located to the byte at `expected` within `slack` bytes; `why`
/// says where `expected` comes from.
fn assert_first_byte_at(found: &[Found], expected: u64, why: &str, slack: u64) {
    let Some(first) = found[0].first_bytes else {
        panic!("the change near {expected} B was not located to the byte: {found:?}")
    };
    assert!(
        first.abs_diff(expected) <= slack,
        "first byte {first} B, expected {expected} B ({why}) within {slack} B"
    );
}

/// Slack of the first-byte checks: the bisection's last bracket may straddle a
/// few bytes when a round near the switch is disturbed.
const FIRST_BYTE_SLACK: u64 = 8;

#[test]
fn open_mpi_tcp_eager_limit_20000_is_found() {
    if !built_for("open_mpi_tcp_eager_limit_20000_is_found", "openmpi") {
        return;
    }
    let found = changes_at_sweep_steps(
        &[
            "--mca",
            "btl",
            "self,tcp",
            "--mca",
            "btl_tcp_eager_limit",
            "20000",
        ],
        &[],
        "12K-28K:1K",
    );
    assert_one_switch_near(&found, 20000, 1024);
}

/// Open MPI's TCP path with its default eager limit (64 KiB; the reference
/// implementation never found it): the round trip jumps from ~34 to ~50 us at
/// 65536 B. Found in 18 of 18 single-pass runs and 20 of 20 with three passes
/// over 32-128 KiB (2026-11-22). The sweep spans 16 KiB on either side: each
/// size costs about 0.3 s in three passes, and a change invented far from a
/// switch is the business of the TCP loopback tests.
#[test]
fn open_mpi_tcp_default_eager_limit_is_found() {
    if !built_for("open_mpi_tcp_default_eager_limit_is_found", "openmpi") {
        return;
    }
    let found = changes_at_sweep_steps(&["--mca", "btl", "self,tcp"], &[], "48K-96K:2K");
    assert_one_switch_near(&found, 65536, 2048);
}

/// Open MPI's shared memory with the eager limit at 16 KiB: above it vader moves
/// the data with one copy by the receiver (CMA) instead of two through shared
/// fragments, and the round trip drops by ~45% at 16384 B (6.7 -> 3.8 us). Found
/// in 40 of 40 single-pass runs on 2026-11-22, but a level flip added a second
/// change in 1 of ~25 test runs; with three shuffled passes, 60 of 60.
#[test]
fn open_mpi_shared_memory_eager_limit_16384_is_found() {
    if !built_for(
        "open_mpi_shared_memory_eager_limit_16384_is_found",
        "openmpi",
    ) {
        return;
    }
    let found = changes(
        &[
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "btl_vader_eager_limit",
            "16384",
        ],
        &[],
        "8K-24K:512",
    );
    assert_one_switch_near(&found, 16384, 512);
    assert_first_byte(&found, 16384, VADER_HEADER, FIRST_BYTE_SLACK);
}

/// Bytes of its own that Open MPI's shared-memory path counts into
/// `btl_vader_eager_limit` (measured: docs/commands/loggp.md).
const VADER_HEADER: u64 = 56;

/// At 8 KiB the two protocols cost nearly the same (two 8 KiB copies against one
/// copy plus a system call), so the switch steps by only 7-16% (the round trip
/// from ~4.1 to ~3.6 us, the gap and o_s by ~15%, o_r up by ~20%), at the
/// detector's resolution: a step must reach two noise levels with the noise
/// floored at 10% of the value.
///
/// Ignored: not yet every run. A launch's step ranges 3-16%, and beside sizes
/// the host disturbed the change can read bent and stay `undecided` (runs in
/// docs/findings/2026-12-02-four-passes-default.md). The bar of issue #6 is
/// every run; run it with `-- --ignored`.
#[test]
#[ignore = "not every run: a vader step of 3-16% beside disturbed sizes can stay undecided (issue #6)"]
fn open_mpi_shared_memory_eager_limit_8192_is_found() {
    if !built_for(
        "open_mpi_shared_memory_eager_limit_8192_is_found",
        "openmpi",
    ) {
        return;
    }
    let found = changes_in_passes(
        &[
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "btl_vader_eager_limit",
            "8192",
        ],
        &[],
        "2K-16K:512",
        None,
        &[],
    );
    assert_one_switch_near(&found, 8192, 512);
}

#[test]
fn mpich_rendezvous_threshold_20000_is_found() {
    if !built_for("mpich_rendezvous_threshold_20000_is_found", "mpich") {
        return;
    }
    let found = changes(
        &[],
        &[
            ("UCX_RNDV_THRESH", "20000"),
            ("MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE", "20000"),
        ],
        "8K-32K:1K",
    );
    assert_one_switch_near(&found, 20000, 1024);
    // UCX compares the user's message with the threshold, no header counted.
    assert_first_byte_at(
        &found,
        20000,
        "UCX_RNDV_THRESH, the first rendezvous size",
        FIRST_BYTE_SLACK,
    );
}

/// MPICH's default switch on one node (first byte 8256 = 8 KiB + 64) is UCX's
/// rendezvous threshold, which UCX sets no lower than the shared-memory
/// transport's largest buffered-copy send, its segment size `UCX_MM_SEG_SIZE`
/// (default 8256): docs/commands/loggp.md, "Configured eager limit and first
/// byte". A known answer: with the segment at 4160 B the first rendezvous byte
/// moves to 4160. A short bracketed sweep (about 1 s at load 5).
#[test]
fn mpich_switch_follows_the_ucx_shared_memory_segment_size() {
    if !built_for(
        "mpich_switch_follows_the_ucx_shared_memory_segment_size",
        "mpich",
    ) {
        return;
    }
    let found = changes(&[], &[("UCX_MM_SEG_SIZE", "4160")], "2K-6K:512");
    assert_one_switch_near(&found, 4160, 512);
    assert_first_byte_at(
        &found,
        4160,
        "UCX_MM_SEG_SIZE, the rendezvous threshold's floor",
        FIRST_BYTE_SLACK,
    );
}

/// Open MPI forced onto UCX (`--mca pml ucx`; `pml_ucx_tls` and
/// `pml_ucx_devices` set to `any`, since by default 4.1 lets UCX use only verbs
/// and mlx devices): its blocking `MPI_Send` is UCX's `ucp_tag_send_nbr`, whose
/// rendezvous threshold is `UCX_RNDV_SEND_NBR_THRESH` (256 KiB by default), not
/// the `UCX_RNDV_THRESH` that MPICH's sends and `-t ucx` follow (the segment
/// size on shared memory, 8256 B): docs/findings/2026-11-28-ucx.md. A known
/// answer at 20000 B, bracketed away from the eager steps at 8249 and 16473 B.
#[test]
fn open_mpi_over_ucx_rendezvous_follows_the_send_nbr_threshold() {
    if !built_for(
        "open_mpi_over_ucx_rendezvous_follows_the_send_nbr_threshold",
        "openmpi",
    ) {
        return;
    }
    let found = changes(
        &[
            "--mca",
            "pml",
            "ucx",
            "--mca",
            "pml_ucx_tls",
            "any",
            "--mca",
            "pml_ucx_devices",
            "any",
            "-x",
            "UCX_TLS=posix,self",
            "-x",
            "UCX_RNDV_SEND_NBR_THRESH=20000",
        ],
        &[],
        "17K-23K:512",
    );
    assert_one_switch_near(&found, 20000, 512);
    assert_first_byte_at(
        &found,
        20000,
        "UCX_RNDV_SEND_NBR_THRESH, the first rendezvous size of ucp_tag_send_nbr",
        FIRST_BYTE_SLACK,
    );
}
