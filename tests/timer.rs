//! `ngauge timer` end to end: every field present and sane.

use assert_cmd::Command;
use serde_json::Value;

use crate::support;
use support::Lack;

fn ngauge() -> Command {
    Command::cargo_bin("ngauge").unwrap()
}

/// The JSON document of `ngauge args`, which must succeed.
fn document(args: &[&str]) -> Value {
    let out = ngauge().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn timer_json_fields_are_present_and_sane() {
    let out = ngauge()
        .args(["timer", "--json", "--reads", "100000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let source = doc["source"].as_str().unwrap();
    assert!(
        source == "rdtscp" || source == "clock_monotonic_raw",
        "{source}"
    );
    let hz = doc["hz"].as_f64().unwrap();
    assert!(hz.is_finite() && hz > 0.0);
    if let Some(kernel_hz) = doc["kernel_hz"].as_f64() {
        assert!(
            (hz / kernel_hz - 1.0).abs() < 0.10,
            "hz {hz} vs kernel {kernel_hz}"
        );
    }
    let overhead = &doc["overhead_ns"];
    for field in ["min", "median", "p99", "mean", "max"] {
        assert!(
            overhead[field].as_f64().unwrap() >= 0.0,
            "overhead_ns.{field}"
        );
    }
    assert!(overhead["median"].as_f64().unwrap() > 0.0);
    assert!(doc["resolution_ns"].as_f64().unwrap() > 0.0);
    assert!(doc["invariant_tsc"].is_boolean());
    assert!(doc["warnings"].is_array());
    assert!(doc["frequency"]["description"].is_string());
    assert_eq!(doc["meta"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["meta"]["date"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn timer_on_this_machine_reads_the_invariant_tsc() {
    // Holds on x86-64 Linux machines with an invariant TSC (this project's CI);
    // elsewhere it checks the fallback is named.
    let out = ngauge()
        .args(["timer", "--json", "--reads", "10000"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The source depends on the rdtscp flag alone (`TimerSource::detect`); the
    // invariance on constant_tsc and nonstop_tsc, whichever source was picked.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = |flag: &str| {
        cpuinfo
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == flag))
    };
    if cfg!(target_arch = "x86_64") && has("rdtscp") {
        assert_eq!(doc["source"], "rdtscp");
    } else {
        assert_eq!(doc["source"], "clock_monotonic_raw");
    }
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            doc["invariant_tsc"],
            has("constant_tsc") && has("nonstop_tsc")
        );
    }
}

#[test]
fn unknown_flag_is_one_line_and_status_2() {
    let out = ngauge().args(["timer", "--frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().next().unwrap().contains("--frobnicate"),
        "{stderr}"
    );
}

/// `--timer rdtsc` (issue 33): `timer` measures the plain reading and says so,
/// with its warning; a pingpong records it in `meta`. An unknown reading, and
/// `--timer` given to `run` (whose suites time with the house timer), exit 2
/// with one line naming the flag.
#[test]
fn the_timer_flag_is_measured_recorded_and_refused_when_wrong() {
    let out = ngauge()
        .args(["--timer", "rdtsx", "timer"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--timer") && stderr.contains("rdtsc"),
        "{stderr}"
    );
    let out = ngauge()
        .args(["--timer", "clock_monotonic_raw", "timer"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "only the counter's readings are a choice"
    );
    let out = ngauge()
        .args(["run", "--timer", "rdtsc", "no-such-suite.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().next().unwrap().contains("--timer"),
        "{stderr}"
    );
    if ngauge::clock::TimerSource::Rdtsc.usable().is_err() {
        let out = ngauge()
            .args(["--timer", "rdtsc", "timer"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        return;
    }
    let doc = document(&["timer", "--timer", "rdtsc", "--json", "--reads", "10000"]);
    assert_eq!(doc["source"], "rdtsc");
    assert_eq!(doc["meta"]["timer"], "rdtsc");
    assert!(doc["overhead_ns"]["median"].as_f64().unwrap() > 0.0);
    let kinds: Vec<&str> = (doc["warnings"].as_array().unwrap().iter())
        .filter_map(|w| w["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"unordered_timer"), "{kinds:?}");
    let doc = document(&[
        "--np", "2", "--timer", "rdtsc", "pingpong", "--sizes", "1", "--reps", "20", "--json",
    ]);
    assert_eq!(doc["meta"]["timer"], "rdtsc", "{doc}");
    // The house timer stays the default.
    let doc = document(&[
        "--np", "2", "pingpong", "--sizes", "1", "--reps", "20", "--json",
    ]);
    assert_eq!(
        doc["meta"]["timer"],
        ngauge::clock::TimerSource::detect().to_string()
    );
}

#[test]
fn unknown_transport_value_is_status_2() {
    let out = ngauge()
        .args(["-t", "smoke-signals", "info"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn version_names_the_build() {
    let out = ngauge().arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("transports: tcp,udp"), "{text}");
    assert!(text.contains("rustc"), "{text}");
}

#[test]
fn timer_reports_the_pinning_it_was_started_with_not_its_own() {
    // `ngauge timer` pins itself to measure the read cost; that pin is not a host fact.
    if ngauge::clock::allowed_cores().len() > 1 {
        let out = ngauge().args(["timer", "--json"]).output().unwrap();
        assert!(out.status.success());
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["pinned_core"], Value::Null, "{doc}");
        assert_eq!(doc["meta"]["pinning"][0], Value::Null, "{doc}");
        let kinds: Vec<&str> = doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["kind"].as_str())
            .collect();
        assert!(kinds.contains(&"unpinned"), "{kinds:?}");
        if doc["source"] == "rdtscp" {
            assert!(doc["measured_on_core"].is_u64(), "{doc}");
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not pinned"), "{stderr}");
    }
    // Started pinned (taskset), it says so and does not warn.
    let core = ngauge::clock::allowed_cores()[0];
    let Ok(out) = std::process::Command::new("taskset")
        .args(["-c", &core.to_string()])
        .arg(env!("CARGO_BIN_EXE_ngauge"))
        .args(["timer", "--json"])
        .output()
    else {
        return support::skip(
            "timer_reports_the_pinning_it_was_started_with_not_its_own",
            Lack::Installed,
            "the pinned half: no taskset (util-linux) on PATH",
        );
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pinned_core"], core, "{doc}");
    assert_eq!(doc["measured_on_core"], core, "{doc}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("not pinned"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
