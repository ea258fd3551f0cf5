//! Issue 32: the ofi (libfabric) transport through the real binary. `ngauge info`
//! lists the providers; an unknown provider is one line and status 2; pingpong
//! (with `--check`), loggp and coll (every bcast algorithm, data checked, 4
//! ranks) run over `shm` and `tcp;ofi_rxm` with the local launcher; the meta of
//! a result records the endpoint. Without the `ofi` feature the same command
//! names the missing feature.

use assert_cmd::Command;
#[cfg(feature = "ofi")]
use serde_json::Value;

#[cfg(feature = "ofi")]
use crate::coll_rows;

fn ngauge() -> Command {
    Command::cargo_bin("ngauge").unwrap()
}

#[cfg(feature = "ofi")]
fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[cfg(feature = "ofi")]
/// Runs `ngauge -t ofi --ofi-provider PROVIDER ARGS` on the local launcher.
fn over(provider: &str, args: &[&str]) -> Value {
    let out = ngauge()
        .args(["-t", "ofi", "--ofi-provider", provider, "--timeout", "60"])
        .args(args)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    json_of(&out)
}

#[cfg(not(feature = "ofi"))]
#[test]
fn without_the_feature_ofi_is_one_line_naming_it() {
    let out = ngauge()
        .args(["-t", "ofi", "pingpong", "--sizes", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--features ofi") && err.contains("libfabric-dev"),
        "{err}"
    );
}

#[cfg(feature = "ofi")]
#[test]
fn info_lists_the_providers_and_the_one_a_run_uses() {
    let out = ngauge()
        .args(["--np", "1", "info", "--json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let ofi = doc["transports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ofi")
        .expect("an ofi entry")
        .clone();
    assert_eq!(ofi["compiled"], true, "{ofi}");
    assert_eq!(ofi["usable"], true, "{ofi}");
    let detail = ofi["detail"].as_str().unwrap();
    assert!(detail.contains("a run uses"), "{detail}");
    for provider in ["shm", "tcp;ofi_rxm"] {
        assert!(detail.contains(&format!("offers {provider} ")), "{detail}");
    }
    let human = ngauge()
        .args(["--np", "1", "--ofi-provider", "shm", "info"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("a run uses shm"), "{text}");
}

#[cfg(feature = "ofi")]
#[test]
fn an_unknown_provider_is_one_line_naming_the_offers_and_status_2() {
    let out = ngauge()
        .args([
            "-t",
            "ofi",
            "--ofi-provider",
            "nosuch",
            "pingpong",
            "--sizes",
            "1",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("\"nosuch\"") && err.contains("fi_getinfo offers") && err.contains("shm"),
        "{err}"
    );
}

#[cfg(feature = "ofi")]
#[test]
fn pingpong_with_check_over_shm_and_tcp_rxm_records_the_endpoint() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        for op in ["send", "write"] {
            let doc = over(
                provider,
                &[
                    "--ofi-op", op, "pingpong", "--sizes", "1,4K,64K", "--reps", "20", "--json",
                    "--check",
                ],
            );
            let rs = doc["results"].as_array().expect("results");
            assert_eq!(rs.len(), 3, "{provider} {op}: {doc}");
            for r in rs {
                assert_eq!(r["data_check"], true, "{provider} {op}: {r}");
                assert_eq!(r["transport"], "ofi", "{r}");
                assert!(r["half_rtt_us"]["median"].as_f64().unwrap() > 0.0, "{r}");
            }
            let ofi = &doc["meta"]["ofi"];
            assert_eq!(ofi["provider"], provider, "{ofi}");
            assert_eq!(ofi["op"], op, "{ofi}");
            assert!(ofi["inject_size_bytes"].as_u64().is_some(), "{ofi}");
            assert!(ofi["libfabric_version"].as_str().is_some(), "{ofi}");
        }
    }
}

#[cfg(feature = "ofi")]
#[test]
fn loggp_over_shm_and_tcp_rxm() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let doc = over(
            provider,
            &[
                "loggp", "--json", "--sizes", "1K-8K:1K", "--reps", "3", "--warmup", "1",
            ],
        );
        let points = doc["points"].as_array().expect("points");
        assert_eq!(points.len(), 8, "{provider}: {doc}");
        assert!(!doc["ranges"].as_array().unwrap().is_empty(), "{doc}");
        assert_eq!(doc["meta"]["ofi"]["provider"], provider);
    }
}

#[cfg(feature = "ofi")]
#[test]
fn every_bcast_algorithm_with_data_checked_on_4_ranks_over_shm_and_tcp_rxm() {
    for provider in ["shm", "tcp;ofi_rxm"] {
        let mut args = vec![
            "--np",
            "4",
            "--json",
            "coll",
            "--op",
            "bcast",
            "--algo",
            "all",
            "--sizes",
            "1,100,4K",
            "--segment",
            "1K",
        ];
        args.extend_from_slice(coll_rows::FAST);
        let doc = over(provider, &args);
        coll_rows::check_rows(&doc, "bcast", 4);
        let algos: Vec<&str> = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["algo"].as_str().unwrap())
            .collect();
        for a in coll_rows::ALGOS_OF_ALL[0].1 {
            assert!(algos.contains(a), "{provider}: {a} missing from {algos:?}");
        }
    }
}

/// The `(op, sync, size)` of every result of an rma document, sorted, each
/// checked to be ofi's with a positive median and, for put and fetch-add, data
/// checked.
#[cfg(feature = "ofi")]
fn rma_points(doc: &Value) -> Vec<(String, String, u64)> {
    let mut points: Vec<(String, String, u64)> = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            assert_eq!(r["transport"], "ofi", "{r}");
            assert!(r["latency_us"]["median"].as_f64().unwrap() > 0.0, "{r}");
            if r["op"] == "put" || r["op"] == "fetch-add" {
                assert_eq!(r["checked"], true, "{r}");
            }
            (
                r["op"].as_str().unwrap().to_string(),
                r["sync"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    points.sort();
    points
}

/// Issue 39: `rma` over libfabric's RMA and atomics on `shm` and `tcp;ofi_rxm`
/// (both of manual data progress: the window's progress thread serves the
/// passive target): every op with the flush, put and get with the fence, the
/// data checked; tcp beside it is one warning, and only ofi is measured.
#[cfg(feature = "ofi")]
#[test]
fn issue39_rma_over_shm_and_tcp_rxm_checks_its_data() {
    let mut want: Vec<(String, String, u64)> = [
        ("accumulate", "flush", 8),
        ("accumulate", "flush", 1024),
        ("fetch-add", "flush", 8),
        ("get", "fence", 8),
        ("get", "fence", 1024),
        ("get", "flush", 8),
        ("get", "flush", 1024),
        ("put", "fence", 8),
        ("put", "fence", 1024),
        ("put", "flush", 8),
        ("put", "flush", 1024),
        ("put-bw", "flush", 8),
        ("put-bw", "flush", 1024),
        ("put-notify", "flush", 8),
        ("put-notify", "flush", 1024),
    ]
    .iter()
    .map(|&(op, sync, size)| (op.to_string(), sync.to_string(), size))
    .collect();
    want.sort();
    for provider in ["shm", "tcp;ofi_rxm"] {
        let out = ngauge()
            .args(["--np", "2", "-t", "ofi,tcp", "--ofi-provider", provider])
            .args(["--timeout", "60", "rma", "--sizes", "8,1K", "--reps", "20"])
            .args(["--warmup", "5", "--window", "4", "--check", "--json"])
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap();
        let doc = json_of(&out);
        assert_eq!(rma_points(&doc), want, "{provider}: {doc}");
        let warnings = doc["warnings"].to_string();
        assert!(
            warnings.contains("tcp has no one-sided operations"),
            "{warnings}"
        );
        assert_eq!(doc["meta"]["transport"], serde_json::json!(["ofi"]));
        assert_eq!(doc["meta"]["ofi"]["provider"], provider, "{doc}");
    }
}

/// Issue 39: `rma --csv FILE` holds one row per point, the fields of the JSON
/// results with their units in the header (`latency_us.median`,
/// `bandwidth_MBps`).
#[cfg(feature = "ofi")]
#[test]
fn issue39_rma_csv_has_a_row_per_point() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("rma.csv");
    let doc = over(
        "shm",
        &[
            "--np",
            "2",
            "rma",
            "--ops",
            "put,put-bw",
            "--sync",
            "flush",
            "--sizes",
            "8,64",
            "--reps",
            "5",
            "--warmup",
            "1",
            "--json",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    for column in [
        "transport",
        "op",
        "sync",
        "size",
        "reps",
        "latency_us.median",
        "latency_us.p99",
        "bandwidth_MBps",
        "checked",
    ] {
        assert!(header.contains(&column), "{column} in {header:?}");
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert_eq!(rows.len(), doc["results"].as_array().unwrap().len());
    assert!(rows[0].starts_with("ofi,put,flush,8,5,"), "{text}");
}

/// Issue 39: a suite's `[experiment.rma]` runs `rma` from its table; the run
/// directory's JSON Lines hold its points and the summary reads their latency.
#[cfg(feature = "ofi")]
#[test]
fn issue39_rma_runs_in_a_suite() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("rma.toml");
    let dir = tmp.path().join("out");
    std::fs::write(
        &suite,
        "[[experiment]]\nname = \"onesided\"\n\
         job = { transports = [\"ofi\"], ofi = { provider = \"shm\" } }\n\
         [experiment.rma]\nops = [\"put\", \"fetch-add\"]\nsync = [\"flush\"]\n\
         sizes = \"8,1K\"\nreps = 10\nwarmup = 2\ncheck = true\n",
    )
    .unwrap();
    let out = ngauge()
        .arg("run")
        .arg(&suite)
        .arg("--output")
        .arg(&dir)
        .arg("--json")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["done"].as_u64(), doc["runs"].as_u64(), "{doc}");
    let text = std::fs::read_to_string(dir.join("onesided.jsonl")).unwrap();
    let mut points: Vec<(String, u64)> = text
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            assert_eq!(r["checked"], true, "{r}");
            (
                r["op"].as_str().unwrap().into(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    points.sort();
    let want = [("fetch-add", 8), ("put", 8), ("put", 1024)];
    let want: Vec<(String, u64)> = want.iter().map(|&(o, s)| (o.into(), s)).collect();
    assert_eq!(points, want, "{text}");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let exps = summary["experiments"].as_array().unwrap();
    assert!(
        exps.iter().all(|e| e["metric"] == "latency_us"),
        "{summary}"
    );
    assert_eq!(
        exps.len(),
        2,
        "put and fetch-add, each with the flush: {summary}"
    );
}
