//! `ngauge pingpong` end to end: real processes started by the local launcher, real
//! TCP and UDP sockets on loopback. No timing figure is asserted beyond "a megabyte
//! takes longer than a byte".

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

use crate::support;
use support::Lack;

fn ngauge() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ngauge"));
    cmd.env_remove("NGAUGE_TEST_DIE_AFTER_SIZE")
        .env_remove("NGAUGE_TEST_UDP_DROP_ONE_IN")
        .timeout(std::time::Duration::from_secs(120));
    cmd
}

fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out).expect("one JSON document on stdout")
}

fn results(doc: &Value) -> &Vec<Value> {
    doc["results"].as_array().expect("results array")
}

fn median(r: &Value) -> f64 {
    r["half_rtt_us"]["median"].as_f64().unwrap()
}

#[test]
fn tcp_sweep_gives_finite_latencies_and_bandwidth_per_size() {
    let out = ngauge()
        .args([
            "pingpong", "--sizes", "1-1M", "--reps", "20", "--warmup", "2", "--json", "--check",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json_of(&out);
    let rs = results(&doc);
    let sizes: Vec<u64> = rs.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, (0..=20).map(|p| 1u64 << p).collect::<Vec<_>>());
    for r in rs {
        let h = &r["half_rtt_us"];
        for k in ["min", "median", "mean", "p99", "max"] {
            let v = h[k].as_f64().unwrap();
            assert!(v.is_finite() && v > 0.0, "{k} = {v} in {r}");
        }
        assert!(h["min"].as_f64() <= h["median"].as_f64());
        assert!(h["median"].as_f64() <= h["max"].as_f64());
        assert!(r["bandwidth_MBps"].as_f64().unwrap() > 0.0);
        assert_eq!(r["reps"], 20);
        assert_eq!(r["data_check"], true);
        assert_eq!(r["transport"], "tcp");
    }
    assert!(
        median(&rs[20]) > median(&rs[0]),
        "1 MiB faster than 1 byte?"
    );
    let meta = &doc["meta"];
    assert_eq!(meta["np"], 2);
    assert_eq!(meta["transport"][0], "tcp");
    assert!(meta["wait"].as_str().unwrap().starts_with("tcp="));
    assert_eq!(meta["pinning"].as_array().unwrap().len(), 2);
    assert_eq!(doc["pair"], serde_json::json!([0, 1]));
}

/// Issue 37, `--precision`: batches of `--reps` until the median's interval
/// is within the target or `--max-reps`. No timing is judged: an unreachable
/// target (1e-9) must stop at the cap with one warning line for both sizes, and
/// a generous one must stop on a batch boundary with a verdict that matches
/// the width it reports.
#[test]
fn issue_37_precision_stops_at_the_target_or_at_max_reps() {
    let out = ngauge()
        .args([
            "pingpong",
            "--sizes",
            "1,8",
            "--reps",
            "10",
            "--warmup",
            "2",
            "--precision",
            "1e-9",
            "--max-reps",
            "30",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let doc = json_of(&out.stdout);
    for r in results(&doc) {
        assert_eq!(
            (r["reps"].as_u64(), r["half_rtt_us"]["n"].as_u64()),
            (Some(30), Some(30))
        );
        assert_eq!(r["precision"]["met"], false, "{r}");
        assert_eq!(r["precision"]["max_reps"], 30);
    }
    let kinds: Vec<&Value> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "precision_not_met")
        .collect();
    assert_eq!(kinds.len(), 2, "{doc:#}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("95% interval"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("1 more like it") && lines[0].contains("--max-reps"),
        "{stderr}"
    );

    let out = ngauge()
        .args([
            "pingpong",
            "--sizes",
            "8",
            "--reps",
            "10",
            "--warmup",
            "2",
            "--precision",
            "50%",
            "--max-reps",
            "40",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let table = String::from_utf8_lossy(&out);
    let header = table
        .lines()
        .find(|l| l.trim_start().starts_with("size [B]"))
        .unwrap();
    assert!(
        header.contains("median CI95 [+-%]") && header.trim_end().ends_with("met"),
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.trim_start().starts_with("8 "))
        .unwrap()
        .split_whitespace()
        .collect();
    let reps: u64 = row[1].parse().unwrap();
    let width: f64 = row[row.len() - 2].parse().unwrap();
    let met = row[row.len() - 1];
    assert!(reps % 10 == 0 && (10..=40).contains(&reps), "{table}");
    assert_eq!(met == "yes", width <= 50.0, "{table}");
    assert!(met == "yes" || reps == 40, "{table}");
}

#[test]
fn window_streams_over_tcp_and_udp_with_every_message_checked() {
    for transport in ["tcp", "udp"] {
        let out = ngauge()
            .args([
                "-t", transport, "pingpong", "--sizes", "1,4K,32K", "--reps", "5", "--warmup", "1",
                "--window", "16", "--json", "--check",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let doc = json_of(&out);
        let rs = results(&doc);
        assert_eq!(rs.len(), 3, "{transport}: {doc}");
        for r in rs {
            assert_eq!(r["window"], 16, "{transport}: {r}");
            assert_eq!(r["data_check"], true, "{transport}: {r}");
            // the bandwidth is 16 messages over the median round (2 half rounds)
            let size = r["size"].as_f64().unwrap();
            let want = 16.0 * size / (2.0 * median(r));
            let got = r["bandwidth_MBps"].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{transport}: {got} != {want}"
            );
        }
    }
    let bad = ngauge()
        .args(["pingpong", "--window", "0"])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&bad).contains("--window"));
}

#[test]
fn udp_sweep_stops_at_the_datagram_limit_with_counters() {
    let assert = ngauge()
        .args([
            "-t", "udp", "pingpong", "--sizes", "1-1M", "--reps", "10", "--warmup", "1", "--json",
            "--check",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "udp carries at most 65491 bytes per message: sizes 65536, 131072",
        ));
    let doc = json_of(&assert.get_output().stdout);
    let rs = results(&doc);
    assert_eq!(rs.last().unwrap()["size"], 32768);
    assert_eq!(rs.len(), 16);
    for r in rs {
        for k in [
            "lost_datagrams",
            "duplicated_datagrams",
            "reordered_datagrams",
            "retransmissions",
            "out_of_order_datagrams",
            "resend_requests",
        ] {
            assert!(r["counters"][k].is_u64(), "{k} missing in {r}");
        }
        assert!(median(r).is_finite());
    }
    assert_eq!(doc["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn udp_recovers_from_injected_loss_and_counts_it() {
    for wait in ["poll", "block"] {
        let out = ngauge()
            .env("NGAUGE_TEST_UDP_DROP_ONE_IN", "5")
            .args([
                "-t", "udp", "--wait", wait, "pingpong", "--sizes", "1,1K,16K", "--reps", "20",
                "--warmup", "2", "--json", "--check",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let doc = json_of(&out);
        let sum = |k: &str| -> u64 {
            results(&doc)
                .iter()
                .map(|r| r["counters"][k].as_u64().unwrap())
                .sum()
        };
        assert!(sum("test_dropped_datagrams") >= 10);
        assert!(sum("lost_datagrams") >= 1);
        assert!(sum("retransmissions") >= sum("lost_datagrams"));
        assert!(sum("resend_requests") + sum("receive_timeouts") >= 1);
        assert!(results(&doc).iter().all(|r| r["data_check"] == true));
        assert_eq!(doc["meta"]["wait"], format!("udp={wait}"));
    }
}

/// Rank 1 is killed (SIGKILL) right after size 64: rank 0 reports it by rank, the
/// sizes finished before are in the JSON-lines file, each line valid.
fn killed_peer(transport: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.jsonl");
    ngauge()
        .env("NGAUGE_TEST_DIE_AFTER_SIZE", "64")
        .args([
            "-t", transport, "pingpong", "--sizes", "1-4K", "--reps", "20",
        ])
        .args(["--warmup", "2", "-o"])
        .arg(&path)
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{transport}: rank 1 closed the connection"
        )))
        .stderr(predicate::str::contains("rank 1 was killed by signal 9"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let sizes: Vec<u64> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("every line is a JSON record");
            assert_eq!(v["transport"], transport);
            v["size"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(sizes, vec![1, 2, 4, 8, 16, 32, 64]);
}

#[test]
fn killed_peer_is_named_and_finished_sizes_are_kept_tcp() {
    killed_peer("tcp");
}

#[test]
fn killed_peer_is_named_and_finished_sizes_are_kept_udp() {
    killed_peer("udp");
}

#[test]
fn blocking_wait_and_human_table() {
    ngauge()
        .args([
            "--wait", "block", "pingpong", "--sizes", "1,4K", "--reps", "10",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("wait block"))
        .stdout(predicate::str::contains("median [us]"))
        .stdout(predicate::str::contains("bandwidth [MB/s]"))
        .stdout(predicate::str::contains("\n4096 "));
}

/// Three ranks: the pair (0, 1) measures, rank 2 idles; the default wait mode is
/// block exactly when the host's ranks outnumber its cores.
#[test]
fn three_ranks_measure_the_first_pair() {
    let out = ngauge()
        .args([
            "--np", "3", "pingpong", "--sizes", "8", "--reps", "5", "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json_of(&out);
    assert_eq!(results(&doc).len(), 1);
    assert_eq!(doc["meta"]["np"], 3);
    assert_eq!(doc["meta"]["pinning"].as_array().unwrap().len(), 3);
    let cores: usize = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| {
            s.trim()
                .split(',')
                .map(|r| match r.split_once('-') {
                    Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                    None => 1,
                })
                .sum()
        })
        .unwrap_or(1);
    let expect = if 3 > cores { "tcp=block" } else { "tcp=poll" };
    assert_eq!(doc["meta"]["wait"], expect);

    // Forcing poll on too few cores works but says what it costs.
    let out = ngauge()
        .args([
            "--np", "3", "--wait", "poll", "pingpong", "--sizes", "8", "--reps", "5",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let warned = String::from_utf8_lossy(&out.stderr).contains("wait mode poll with 3 ranks");
    assert_eq!(warned, 3 > cores);
}

/// Tiny socket buffers force partial reads and writes of a 1 MiB message between
/// real processes; the payload check still passes. Two transports, one after the other.
#[test]
fn small_socket_buffers_and_two_transports_in_one_run() {
    let out = ngauge()
        .args([
            "-t", "tcp,udp", "--sndbuf", "4K", "--rcvbuf", "4K", "pingpong",
        ])
        .args([
            "--sizes", "1,1M", "--reps", "5", "--warmup", "1", "--check", "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json_of(&out);
    let got: Vec<(String, u64)> = results(&doc)
        .iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("tcp".into(), 1),
            ("tcp".into(), 1 << 20),
            ("udp".into(), 1)
        ]
    );
    assert!(results(&doc).iter().all(|r| r["data_check"] == true));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for args in [
        vec!["pingpong", "--sizes", "1-x"],
        vec!["--np", "1", "pingpong"],
        vec!["pingpong", "--reps", "0"],
        vec!["--wait", "sometimes", "pingpong"],
        vec!["--sndbuf", "0", "pingpong"],
    ] {
        let out = ngauge().args(&args).assert().code(2).get_output().clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// Rank 1 stops (SIGSTOP) after size 64: a peer that hangs instead of dying. Rank 0
/// names it within --timeout, and the finished sizes are kept.
fn hung_peer(transport: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sweep.jsonl");
    ngauge()
        .env("NGAUGE_TEST_DIE_AFTER_SIZE", "64")
        .env("NGAUGE_TEST_DIE_SIGNAL", "STOP")
        .args([
            "-t",
            transport,
            "--timeout",
            "1",
            "pingpong",
            "--sizes",
            "1-4K",
        ])
        .args(["--reps", "20", "--warmup", "2", "-o"])
        .arg(&path)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "{transport}: rank 1 did not answer within 1s during recv"
        )));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 7, "{text}");
}

#[test]
fn hung_peer_is_named_within_the_timeout_tcp() {
    hung_peer("tcp");
}

#[test]
fn hung_peer_is_named_within_the_timeout_udp() {
    hung_peer("udp");
}

#[test]
fn tcp_skips_size_0_udp_measures_it() {
    let out = ngauge()
        .args([
            "-t", "tcp,udp", "pingpong", "--sizes", "0,1", "--reps", "5", "--json",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("tcp has no 0-byte messages"))
        .get_output()
        .stdout
        .clone();
    let doc = json_of(&out);
    let got: Vec<String> = results(&doc)
        .iter()
        .map(|r| format!("{} {}", r["transport"].as_str().unwrap(), r["size"]))
        .collect();
    assert_eq!(got, vec!["tcp 1", "udp 0", "udp 1"]);
}

/// Review finding: under `taskset -c 0` both ranks share one core, and two spinning
/// ranks on one core measure the scheduler's time slice. The default wait must then
/// be `block`, decided from the cores the launcher had, not the host's.
#[test]
fn ranks_sharing_one_core_default_to_blocking_waits() {
    if std::process::Command::new("taskset")
        .arg("-V")
        .output()
        .is_err()
    {
        return support::skip(
            "ranks_sharing_one_core_default_to_blocking_waits",
            Lack::Installed,
            "no taskset (util-linux) on PATH",
        );
    }
    let out = std::process::Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_ngauge")])
        .args(["pingpong", "--sizes", "1", "--reps", "20", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out.stdout);
    assert_eq!(doc["meta"]["pinning"], serde_json::json!([0, 0]));
    assert_eq!(doc["meta"]["wait"], "tcp=block");
}

/// Review finding: rank 0's stderr is a pipe to the local launcher, so the progress
/// display never showed. On a terminal (a pty made by `script`) it must.
#[test]
fn progress_reaches_a_terminal_through_the_local_launcher() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        return support::skip(
            "progress_reaches_a_terminal_through_the_local_launcher",
            Lack::Installed,
            "no script (bsdutils) on PATH",
        );
    }
    let command = format!(
        "{} pingpong --sizes 1-64 --reps 20 --warmup 2",
        env!("CARGO_BIN_EXE_ngauge")
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // A progress line reached the terminal (indicatif draws at most 20 times a
    // second, so which point's line is the last one drawn depends on the speed).
    assert!(
        text.contains(" points (") && text.contains(" B done)"),
        "no progress line in: {text}"
    );
    // Without a terminal there is no progress on stderr.
    let plain = ngauge()
        .args(["pingpong", "--sizes", "1-64", "--reps", "20"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("points ("));
}
