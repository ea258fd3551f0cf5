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
#[path = "support/coll.rs"]
mod coll_rows;

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
