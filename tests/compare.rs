//! `ngauge compare` through the binary, on results whose truth is known: run
//! directories and documents written here with fixed values, so the medians, the
//! ratio and the exact rank-sum p-value are known in advance (two samples of 5
//! that do not overlap: p = 2 / C(10, 5) = 2/252).

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn compare(args: &[&Path], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ngauge"))
        .arg("compare")
        .args(args)
        .args(extra)
        .output()
        .expect("run ngauge")
}

/// A run directory holding experiment `pp`: 5 launches, at size 8 the per-launch
/// medians `base + k`, at size 16 the value 5 in every launch.
fn run_dir(root: &Path, base: f64) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join("plan.json"), "{}").unwrap();
    let mut lines = String::new();
    for k in 0..5 {
        for (size, median) in [(8, base + k as f64), (16, 5.0)] {
            lines += &json!({"launch": k, "transport": "tcp", "size": size,
                             "half_rtt_us": {"median": median}})
            .to_string();
            lines.push('\n');
        }
    }
    std::fs::write(root.join("pp.jsonl"), lines).unwrap();
}

const P_EXACT_5_5: f64 = 2.0 / 252.0;

#[test]
fn two_run_directories_are_compared_on_their_launch_medians() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    run_dir(&a, 10.0);
    run_dir(&b, 20.0);
    let svg = tmp.path().join("ratio.svg");
    let out = compare(&[&a, &b], &["--json", "--plot", svg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let r8 = &rows[0];
    assert_eq!(
        (r8["experiment"].as_str(), r8["size"].as_u64()),
        (Some("pp"), Some(8))
    );
    assert_eq!(
        (r8["median_a"].as_f64(), r8["median_b"].as_f64()),
        (Some(12.0), Some(22.0))
    );
    assert!((r8["ratio"].as_f64().unwrap() - 22.0 / 12.0).abs() < 1e-12);
    assert!(
        (r8["p_value"].as_f64().unwrap() - P_EXACT_5_5).abs() < 1e-12,
        "{r8}"
    );
    assert_eq!(r8["stars"], "**");
    assert_eq!(r8["basis"], "launch_medians");
    let r16 = &rows[1];
    assert_eq!(r16["ratio"], 1.0);
    assert_eq!(r16["stars"], "");
    assert!(r16["p_value"].as_f64().unwrap() > 0.5, "{r16}");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("**"),
        "the plot marks the significant size"
    );

    // The table says the same.
    let out = compare(&[&a, &b], &[]);
    let table = String::from_utf8_lossy(&out.stdout);
    let line = table
        .lines()
        .find(|l| l.starts_with("pp") && l.contains(" 8 "))
        .unwrap();
    assert!(
        line.contains("12.000") && line.contains("22.000") && line.contains("1.833"),
        "{table}"
    );
    assert!(
        line.contains("0.0079") && line.contains("**") && line.contains("launches 5:5"),
        "{table}"
    );
}

#[test]
fn two_documents_of_one_launch_are_compared_on_their_repetitions_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = |reps: [f64; 5]| {
        json!({"meta": {}, "results": [{"transport": "tcp", "size": 1,
            "half_rtt_us": {"median": reps[2]}, "samples": {"half_rtt_us": reps}}]})
    };
    let (a, b) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
    std::fs::write(&a, doc([1.0, 2.0, 3.0, 4.0, 5.0]).to_string()).unwrap();
    std::fs::write(&b, doc([6.0, 7.0, 8.0, 9.0, 10.0]).to_string()).unwrap();
    let out = compare(&[&a, &b], &["--json"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["rows"][0];
    assert_eq!(r["basis"], "repetitions");
    assert_eq!(
        (r["median_a"].as_f64(), r["median_b"].as_f64()),
        (Some(3.0), Some(8.0))
    );
    assert!(
        (r["p_value"].as_f64().unwrap() - P_EXACT_5_5).abs() < 1e-12,
        "{r}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("single launch"), "{stderr}");
}

#[test]
fn bad_input_is_one_line_with_status_2() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    run_dir(&a, 1.0);
    let missing = tmp.path().join("missing.json");
    let not_a_run = tmp.path().join("empty");
    std::fs::create_dir(&not_a_run).unwrap();
    let not_json = tmp.path().join("x.json");
    std::fs::write(&not_json, "hello").unwrap();
    for (b, extra, says) in [
        (&missing, &[][..], "cannot read"),
        (&not_a_run, &[], "not a run directory"),
        (&not_json, &[], "not JSON"),
        (&a, &["--metric", "nope"], "no record has the metric `nope`"),
    ] {
        let out = compare(&[&a, b], extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
