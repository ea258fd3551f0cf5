//! Runs the MPI backend's self-test (`ngauge-mpi-check`) under the real MPI launcher
//! that belongs to the library this build linked (Open MPI's `mpirun` or MPICH's
//! `mpiexec.hydra`), with 2 and 4 ranks: the transport contract suite
//! (`ngauge_transport::conformance`), truncation and buffer holds, MPI collectives
//! blocking and nonblocking, and the MPI control plane. Skips (with a message) in a
//! build without MPI, unless `NGAUGE_REQUIRE_MPI=1` (set by `scripts/test` where it
//! installed MPI) makes the skip a failure.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

// The workspace's one skip helper (`tests/support`), shared with ngauge's tests.
// Its `mpi` submodule is for ngauge's `mpi` feature, which this crate does not have.
#[allow(unexpected_cfgs)]
#[path = "../../../tests/support/mod.rs"]
mod support;

const CHECKS: &[&str] = &[
    "identity",
    "timer",
    "control",
    "errors-poll",
    "native-poll",
    "collectives-poll",
    "errors-block",
    "native-block",
    "collectives-block",
    "conformance",
    "no-leaked-requests",
];

/// The launcher command for `np` ranks, with what it needs on this machine: Open MPI
/// refuses root and more ranks than cores unless told.
fn launcher(np: usize) -> Command {
    let mut cmd = Command::new(ngauge_mpi::shim().mpiexec);
    if ngauge_mpi::shim().flavor == "openmpi" {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .arg("--oversubscribe");
    }
    cmd.arg("-n").arg(np.to_string());
    cmd
}

/// Runs `cmd` to completion, killing it after `limit` (a hung MPI job must fail the
/// test, not the suite).
fn run_with_limit(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
    let began = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if began.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{:?} hung for {limit:?}; stdout:\n{}\nstderr:\n{}",
                cmd,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// True (after saying so where the user sees it) when this build has no MPI and
/// `test` must be skipped; a failure instead under `CI=true` or when
/// `NGAUGE_REQUIRE_MPI=1` says MPI must be there.
fn skip(test: &str) -> bool {
    let Err(why) = ngauge_mpi::shims::selected() else {
        return false;
    };
    support::skip(
        test,
        support::Lack::InstalledOrRequired("NGAUGE_REQUIRE_MPI"),
        why,
    );
    true
}

/// The self-test, an example of this crate: `cargo test` builds the examples
/// before it runs the tests, beside their `deps/` directory.
fn check_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/PROFILE/deps");
    let binary = profile_dir.join("examples").join("ngauge-mpi-check");
    assert!(
        binary.exists(),
        "{} not built (cargo test builds examples)",
        binary.display()
    );
    binary
}

fn self_test(np: usize) {
    if skip(&format!("backend_under_mpirun_with_{np}_ranks")) {
        return;
    }
    let mut cmd = launcher(np);
    cmd.arg(check_binary());
    let out = run_with_limit(cmd, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} -n {np} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        ngauge_mpi::shim().mpiexec,
        out.status
    );
    assert!(
        stdout.contains(&format!("{np} ranks")),
        "not {np} ranks:\n{stdout}"
    );
    for check in CHECKS {
        assert!(
            stdout.lines().any(|l| l == format!("PASS {check}")),
            "check {check} did not pass with {np} ranks:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    // Every check of the transport contract, in both wait modes, passed or (not
    // enough ranks, no timeouts or closed peers under MPI) was skipped.
    for check in ngauge_transport::conformance::checks() {
        for wait in ["poll", "block"] {
            let ran = |verdict: &str| format!("conformance: {verdict} {} ({wait}", check.name);
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with(&ran("PASS")) || l.starts_with(&ran("SKIP"))),
                "conformance check {} ({wait}) with {np} ranks:\n{stdout}",
                check.name
            );
        }
    }
}

#[test]
fn backend_under_mpirun_with_2_ranks() {
    self_test(2);
}

#[test]
fn backend_under_mpirun_with_4_ranks() {
    self_test(4);
}

/// Review findings 4 and 10: an `MpiTransport` dropped with a receive pending leaks
/// the buffer MPI will write into (memory allocated afterwards stays intact), and
/// the end of MPI aborts the job instead of calling `MPI_Finalize` with a request
/// in flight (which may wait forever).
#[test]
fn a_transport_dropped_with_a_receive_pending_leaks_and_the_job_aborts() {
    if skip("a_transport_dropped_with_a_receive_pending_leaks_and_the_job_aborts") {
        return;
    }
    let mut cmd = launcher(2);
    cmd.arg(check_binary()).arg("--drop-pending");
    let out = support::run_aborting_job(cmd, "ngauge-mpi-check", Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.lines().any(|l| l == "PASS drop-pending"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("requests in flight: 1"),
        "stdout:\n{stdout}"
    );
    assert!(!out.status.success(), "stderr:\n{stderr}");
    assert!(
        stderr.contains("still in flight") && stderr.contains("aborting the job"),
        "stderr:\n{stderr}"
    );
}

#[test]
fn mpi_outside_a_launcher_is_a_clear_error() {
    if skip("mpi_outside_a_launcher_is_a_clear_error") {
        return;
    }
    let mut cmd = Command::new(check_binary());
    cmd.arg("--require-launcher");
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"] {
        cmd.env_remove(var);
    }
    let out = run_with_limit(cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("needs an MPI launcher"), "stderr: {stderr}");
    assert!(stderr.contains("mpirun -np 2"), "stderr: {stderr}");
}

/// The launcher check of [`support::run_aborting_job`] on a stand-in launcher (`sh`) whose one
/// rank (`sleep`) ends after a second while the launcher itself hangs (`tail -f`),
/// as Open MPI's `mpirun` sometimes does after `MPI_Abort`: it is killed once its
/// rank has been gone for the grace, long before the limit.
#[test]
fn a_launcher_that_outlives_its_ranks_is_ended_after_the_grace() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "sleep 1; echo rank ended; exec tail -f /dev/null"]);
    let began = Instant::now();
    let out = support::run_aborting_job(cmd, "sleep", Duration::from_secs(120));
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "{:?}",
        began.elapsed()
    );
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "rank ended\n");
}

/// ... and a job whose rank is still alive at the limit is a hung job.
#[test]
fn a_job_whose_rank_outlives_the_limit_is_hung() {
    let hung = std::panic::catch_unwind(|| {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 20; true"]);
        support::run_aborting_job(cmd, "sleep", Duration::from_secs(3))
    });
    let message = hung.expect_err("a live rank at the limit fails the test");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(message.contains("hung for 3s"), "{message}");
}
