//! Issue 12: every command's `--json` output validates against its committed schema
//! (`docs/schemas/COMMAND.schema.json`), so scripts that read our JSON have a
//! contract. The schemas are generated from the document types
//! (`ngauge::report::schema`); a unit test keeps the committed files up to date.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn schema(command: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(format!("{command}.schema.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Runs `ngauge ARGS --json` and returns its document.
fn document(args: &[&str]) -> Value {
    let child = Command::new(env!("CARGO_BIN_EXE_ngauge"))
        .args(args)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = support::output_within(child, Duration::from_secs(240))
        .unwrap_or_else(|out| panic!("{args:?} timed out: {out:?}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn assert_valid(command: &str, doc: &Value) {
    let validator = jsonschema::validator_for(&schema(command)).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{command}: {errors:#?}\n{doc:#}");
}

#[test]
fn timer_and_info_validate() {
    assert_valid("timer", &document(&["timer", "--reads", "1000"]));
    let sampled = document(&["timer", "--reads", "1000", "--samples"]);
    assert_eq!(
        sampled["samples"]["overhead_ns"].as_array().map(Vec::len),
        Some(1000)
    );
    assert_valid("timer", &sampled);
    assert_valid("info", &document(&["--np", "2", "info"]));
}

#[test]
fn pingpong_validates_with_one_and_with_two_transports() {
    let args = [
        "pingpong", "--sizes", "1,1K", "--reps", "20", "--warmup", "2",
    ];
    assert_valid("pingpong", &document(&args));
    let both = document(&[&["-t", "udp,tcp"][..], &args].concat());
    assert!(both["comparison"].is_object(), "{both}");
    assert_valid("pingpong", &both);
}

#[test]
fn pingpong_with_two_pairs_at_once_validates_with_every_pair_checked() {
    let doc = document(&[
        "--np", "4", "pingpong", "--pairs", "2", "--sizes", "1,1K", "--reps", "5", "--warmup", "1",
        "--window", "2", "--check",
    ]);
    for r in doc["results"].as_array().unwrap() {
        let per_pair = r["pairs"]["per_pair"].as_array().unwrap();
        assert_eq!(per_pair.len(), 2, "{doc}");
        assert!(per_pair.iter().all(|p| p["data_check"] == true), "{doc}");
        assert!(r["pairs"]["total_msgs_per_s"].as_f64().unwrap() > 0.0);
    }
    assert_valid("pingpong", &doc);
}

/// Issue 35: `--pattern 1toN|Nto1` at np 4 on loopback: three flows at rank 0,
/// every payload checked, the totals and ratios consistent with the flows and
/// the one pair, the CSV a row per size.
#[test]
fn pingpong_congestion_patterns_validate_with_every_flow_checked() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("c.csv");
    for (pattern, root_sends) in [("1toN", true), ("Nto1", false)] {
        let doc = document(&[
            "--np",
            "4",
            "--csv",
            csv.to_str().unwrap(),
            "pingpong",
            "--pattern",
            pattern,
            "--sizes",
            "1K,4K",
            "--reps",
            "5",
            "--warmup",
            "1",
            "--window",
            "4",
            "--check",
        ]);
        for r in doc["results"].as_array().unwrap() {
            let p = &r["pairs"];
            let flows = p["per_pair"].as_array().unwrap();
            let ends: Vec<(u64, u64)> = flows
                .iter()
                .map(|f| (f["from"].as_u64().unwrap(), f["to"].as_u64().unwrap()))
                .collect();
            let want: Vec<(u64, u64)> = (1..4)
                .map(|peer| if root_sends { (0, peer) } else { (peer, 0) })
                .collect();
            assert_eq!(ends, want, "{doc}");
            assert!(flows.iter().all(|f| f["data_check"] == true), "{doc}");
            let bw: Vec<f64> = flows
                .iter()
                .map(|f| f["bandwidth_MBps"].as_f64().unwrap())
                .collect();
            let total = p["total_bandwidth_MBps"].as_f64().unwrap();
            assert!(
                (total - bw.iter().sum::<f64>()).abs() < 1e-6 * total,
                "{doc}"
            );
            let c = &p["congestion"];
            assert_eq!(c["pattern"], pattern, "{doc}");
            let one = c["one_pair_MBps"].as_f64().unwrap();
            assert!(one > 0.0, "{doc}");
            let ratio = c["total_ratio"].as_f64().unwrap();
            assert!((ratio * one - total).abs() < 1e-6 * total, "{doc}");
        }
        assert_valid("pingpong", &doc);
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.contains("pairs.congestion.total_ratio"), "{csv}");
}

#[test]
fn loggp_validates_with_one_and_with_two_transports() {
    let args = [
        "loggp",
        "--sizes",
        "1K,2K,3K,4K",
        "--reps",
        "3",
        "--warmup",
        "1",
    ];
    let one = document(&args);
    assert!(one["points"].is_array(), "{one}");
    assert_valid("loggp", &one);
    let both = document(&[&["-t", "udp,tcp"][..], &args].concat());
    assert_eq!(
        both["transports"].as_array().map(Vec::len),
        Some(2),
        "{both}"
    );
    assert_valid("loggp", &both);
}

#[test]
fn sync_validates() {
    let doc = document(&[
        "sync",
        "--sync",
        "jk",
        "--fitpoints",
        "10",
        "--exchanges",
        "2",
        "--check-after",
        "0s",
        "--reps",
        "2",
        "--samples",
    ]);
    assert_eq!(doc["reps"], 2);
    assert_eq!(
        doc["samples"]["max_abs_residual_ns"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_valid("sync", &doc);
}

/// One transport with two algorithms (a comparison), per-rank times, the window
/// scheme's fields; and the loop scheme's.
#[test]
fn coll_validates() {
    let fast = [
        "--reps",
        "3",
        "--warmup",
        "1",
        "--fitpoints",
        "10",
        "--exchanges",
        "2",
    ];
    let mut args = vec![
        "--np",
        "3",
        "coll",
        "--algo",
        "binomial,chain",
        "--sizes",
        "1,1K",
    ];
    args.extend(["--root", "rotate", "--per-rank", "--max-rounds", "10"]);
    args.extend(["--samples"]);
    args.extend(fast);
    let doc = document(&args);
    for r in doc["results"].as_array().unwrap() {
        assert_eq!(
            r["samples"]["runtime_us"].as_array().map(Vec::len),
            r["valid"].as_u64().map(|v| v as usize),
            "{r}"
        );
    }
    assert_valid("coll", &doc);
    let mut args = vec![
        "coll",
        "--op",
        "allreduce",
        "--scheme",
        "loop",
        "--sizes",
        "8",
    ];
    args.extend(fast);
    assert_valid("coll", &document(&args));
    alltoallv_records_its_count_matrix(&fast);
}

/// Issue 39: an alltoallv's records carry the count matrix and its total.
fn alltoallv_records_its_count_matrix(fast: &[&str]) {
    let mut args = vec!["--np", "3", "coll", "--op", "alltoallv", "--algo", "all"];
    args.extend(["--counts", "random:7", "--sizes", "8", "--scheme", "loop"]);
    args.extend(fast);
    let doc = document(&args);
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["counts"]["matrix"], "random:7", "{r}");
        assert!(r["counts"]["total"].as_u64().is_some(), "{r}");
    }
    assert_valid("coll", &doc);
}

/// Issue 35: `--np 8 matrix --json` lists the 56 ordered pairs and validates.
#[test]
fn matrix_validates_and_lists_every_ordered_pair() {
    let doc = document(&[
        "--np",
        "8",
        "matrix",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--bandwidth-size",
        "1K",
        "--window",
        "2",
    ]);
    assert_eq!(doc["links"].as_array().map(Vec::len), Some(56), "{doc}");
    assert_valid("matrix", &doc);
}

/// The schemas reject what is not a document: they can fail.
#[test]
fn a_document_without_meta_does_not_validate() {
    for command in ["timer", "info", "pingpong", "loggp", "sync", "simulate"] {
        let validator = jsonschema::validator_for(&schema(command)).unwrap();
        assert!(!validator.is_valid(&serde_json::json!({})), "{command}");
    }
    let mut doc = document(&["timer", "--reads", "1000"]);
    doc.as_object_mut().unwrap().remove("meta");
    let validator = jsonschema::validator_for(&schema("timer")).unwrap();
    assert!(!validator.is_valid(&doc));
}

#[test]
fn simulate_validates() {
    let doc = document(&[
        "simulate", "--op", "bcast", "--select", "--np", "4", "--sizes", "1,64K", "--L", "5",
        "--o", "1", "--g", "2", "--G", "0.001",
    ]);
    assert_valid("simulate", &doc);
    let one = document(&[
        "simulate", "--op", "bcast", "--algo", "binomial", "--np", "4", "--sizes", "1", "--L", "5",
        "--o", "1", "--g", "2", "--G", "0.001",
    ]);
    assert!(one["results"][0]["finish_us"].is_array(), "{one}");
    assert_valid("simulate", &one);
}

/// Issue 16: a run directory's `summary.json` and `ngauge compare --json` (with
/// the launch metadata of both sides) validate against their schemas.
#[test]
fn summary_and_compare_validate() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("s.toml");
    std::fs::write(
        &suite,
        "seed = 1\nlaunches = 2\n[[experiment]]\nname = \"t\"\ntimer = { reads = 1000 }\n\
         [[experiment]]\nname = \"sim\"\n[experiment.simulate]\nop = \"bcast\"\nnp = 8\n\
         sizes_bytes = [8, 64]\n\
         network = { loggp = { L_us = 5.0, o_s_us = 1.0, o_r_us = 1.0, g_us = 2.0, G_us_per_byte = 0.001 } }\n",
    )
    .unwrap();
    let dir = tmp.path().join("out");
    let suite_arg = suite.to_str().unwrap();
    let dir_arg = dir.to_str().unwrap();
    let run = document(&["run", suite_arg, "--output", dir_arg]);
    assert_eq!(run["done"], 4, "{run}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_valid("summary", &summary);
    let names: Vec<&str> = summary["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["experiment"].as_str())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("sim/")), "{names:?}");
    let c = document(&["compare", dir_arg, dir_arg]);
    assert_valid("compare", &c);
    // Both sides' launch metadata: one per run of the directory.
    assert_eq!(c["meta_a"].as_array().unwrap().len(), 4, "{c}");
    assert!(c["meta_a"][0]["meta"]["host"].is_string(), "{c}");
    assert!(c["meta"]["version"].is_string());
}
