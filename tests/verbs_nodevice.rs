//! Issue 8: on a machine without an RDMA device, `ngauge info` says verbs is compiled
//! but not usable (with the reason), and `-t verbs` fails with one line, status 2.
//! Without the `verbs` feature the same command names the missing feature instead.

use assert_cmd::Command;
use serde_json::Value;

use crate::support;
use support::Lack;

fn ngauge() -> Command {
    Command::cargo_bin("ngauge").unwrap()
}

/// An RDMA device of any kind registered with the kernel.
fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

#[test]
fn info_reports_verbs_state_with_a_reason() {
    let out = ngauge()
        .args(["--np", "1", "info", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let verbs = doc["transports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "verbs")
        .expect("a verbs entry");
    assert_eq!(verbs["compiled"], cfg!(feature = "verbs"), "{verbs}");
    if has_rdma_device() {
        return support::skip(
            "info_reports_verbs_state_with_a_reason",
            Lack::Host,
            "the no-device checks: this machine has an RDMA device",
        );
    }
    assert_eq!(verbs["usable"], false, "{verbs}");
    let reason = verbs["reason"].as_str().unwrap();
    if cfg!(feature = "verbs") {
        assert!(reason.contains("no RDMA device"), "{reason}");
    } else {
        assert!(reason.contains("feature"), "{reason}");
    }
}

#[test]
fn transport_verbs_without_a_device_is_one_line_and_status_2() {
    if has_rdma_device() {
        return support::skip(
            "transport_verbs_without_a_device_is_one_line_and_status_2",
            Lack::Host,
            "this machine has an RDMA device",
        );
    }
    let out = ngauge()
        .args(["--np", "2", "-t", "verbs", "pingpong", "--sizes", "8"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    if cfg!(feature = "verbs") {
        assert!(
            lines[0].contains("verbs is not usable: no RDMA device"),
            "{stderr}"
        );
    } else {
        assert!(lines[0].contains("--features verbs"), "{stderr}");
    }
}
