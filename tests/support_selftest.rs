//! The integration tests' shared helpers (tests/support) tested once here, not in
//! every test crate that includes them (one of them waits out the helpers' grace
//! periods, 4.5 s).

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn sh(script: &str) -> Child {
    Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh")
}

#[test]
fn a_skip_fails_under_ci_only_for_what_scripts_test_installs() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    let ci = env(&[("CI", "true")]);
    let quiet = env(&[("CI", "false")]);
    let required = env(&[("NGAUGE_REQUIRE_VM", "1")]);
    let vm = Lack::InstalledOrRequired("NGAUGE_REQUIRE_VM");
    assert!(skip_is_failure(Lack::Installed, ci));
    assert!(!skip_is_failure(Lack::Installed, quiet));
    assert!(!skip_is_failure(Lack::Host, ci));
    assert!(skip_is_failure(vm, ci));
    assert!(skip_is_failure(vm, required));
    assert!(!skip_is_failure(vm, quiet));
    assert!(!skip_is_failure(Lack::Installed, required));
    assert_eq!(skip_line("t", "no tc"), "t: SKIPPED (no tc)");
}

/// The skip line reaches the test binary's stdout although libtest captures
/// the test's output: run this file's own test binary on one test and read it.
#[test]
fn a_skip_is_printed_past_the_capture() {
    if std::env::var("NGAUGE_SUPPORT_SKIP_PROBE").is_ok() {
        skip("probe", Lack::Host, "the probe skips");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "--test-threads", "1"])
        .arg(test_path(
            module_path!(),
            "a_skip_is_printed_past_the_capture",
        ))
        .env("NGAUGE_SUPPORT_SKIP_PROBE", "1")
        .env_remove("CI")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("\nprobe: SKIPPED (the probe skips)\n"),
        "{stdout}"
    );
}

#[test]
fn more_than_a_pipe_holds_is_read_while_waiting() {
    let child = sh("head -c 1048576 /dev/zero; head -c 1048577 /dev/zero >&2");
    let out = output_within(child, Duration::from_secs(60)).expect("in time");
    assert!(out.status.success());
    assert_eq!(
        (out.stdout.len(), out.stderr.len()),
        (1 << 20, (1 << 20) + 1)
    );
}

#[test]
fn a_child_past_the_limit_is_killed_even_if_its_children_hold_the_pipes() {
    let began = Instant::now();
    let child = sh("echo started; sleep 30 & sleep 30");
    let out = output_within(child, Duration::from_millis(500)).expect_err("killed");
    assert!(!out.status.success());
    assert_eq!(out.stdout, b"started\n");
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn a_test_path_is_the_module_path_without_the_crate() {
    assert_eq!(
        test_path("integration::udp_loss", "forge_datagrams"),
        "udp_loss::forge_datagrams"
    );
    assert_eq!(test_path("mpi", "one"), "one");
}
