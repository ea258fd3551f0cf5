//! `ngauge coll` end to end through real processes: every operation and algorithm
//! with its data checked (the warm-up calls fill known data and verify it; a wrong
//! byte fails the run) at np = 1..9 over TCP, over UDP, every timing scheme, root
//! rotation, the JSON rows, `-o` streaming, the plot and bad input. MPI's own
//! collectives beside ours under mpirun (feature `mpi`) are in `tests/mpi.rs`, which
//! `scripts/test` runs against each MPI.
//!
//! Few calls per point: these tests check correctness and the report, not speed.
//! The direction of the loop scheme's error is checked on the LogGP simulator's
//! virtual time in `src/patterns/coll/tests.rs` (a timing claim on this loaded
//! host would be a flaky test); `scripts/bench-coll` measures it for real.

use assert_cmd::Command;

use crate::coll_rows;
use crate::documents;
use crate::support;
use serde_json::Value;
// Every row has the contract's fields and a plausible run-time.
use coll_rows::check_rows;

fn ngauge() -> Command {
    let mut cmd = Command::cargo_bin("ngauge").unwrap();
    cmd.env_remove("NGAUGE_TEST_CLOCK_SKEW")
        .env_remove("NGAUGE_TEST_CLOCK_EPOCH");
    cmd
}

fn coll_json(np: usize, transport: &str, args: &[&str]) -> Value {
    let mut cmd = ngauge();
    cmd.args(["--np", &np.to_string(), "-t", transport, "--json", "coll"])
        .args(coll_rows::FAST)
        .args(args);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "np={np} -t {transport} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn results(doc: &Value) -> &Vec<Value> {
    doc["results"].as_array().expect("results")
}

/// Every algorithm of every operation, with data checks, over TCP on 4 ranks
/// (the acceptance run, with fewer sizes).
#[test]
fn every_op_and_algorithm_over_tcp_on_4_ranks() {
    for op in ["bcast", "gather", "allreduce", "barrier", "alltoall"] {
        let doc = coll_json(
            4,
            "tcp",
            &[
                "--op",
                op,
                "--algo",
                "all",
                "--sizes",
                "1,100,4K",
                "--segment",
                "1K",
            ],
        );
        check_rows(&doc, op, 4);
        let algos: Vec<&str> = results(&doc)
            .iter()
            .map(|r| r["algo"].as_str().unwrap())
            .collect();
        let expected = coll_rows::ALGOS_OF_ALL
            .iter()
            .find(|(o, _)| *o == op)
            .map(|(_, algos)| *algos)
            .expect("an operation of ALGOS_OF_ALL");
        for a in expected {
            assert!(algos.contains(a), "{op}: {a} missing from {algos:?}");
        }
        let sizes = if op == "barrier" { 1 } else { 3 };
        assert_eq!(algos.len(), expected.len() * sizes, "{op}: {algos:?}");
        // With several algorithms, one comparison row per size.
        if expected.len() > 1 {
            assert_eq!(doc["comparison"]["rows"].as_array().unwrap().len(), sizes);
        }
        assert_eq!(doc["meta"]["sync"], "hca", "{}", doc["meta"]);
    }
}

/// np = 1..9 for every algorithm (each run checks the data of its warm-up calls on
/// every rank): the odd, non-power-of-two and single-rank jobs where the trees, the
/// recursive-doubling fold and the ring differ. The barrier scheme: no clock sync,
/// so nine ranks stay quick.
#[test]
fn every_algorithm_on_1_to_9_ranks() {
    for np in 1..=9 {
        for (op, sizes) in [
            ("bcast", "1,1000"),
            ("gather", "3"),
            ("allreduce", "24,1000"),
            ("barrier", "1"),
            ("alltoall", "5"),
        ] {
            let doc = coll_json(
                np,
                "tcp",
                &[
                    "--op",
                    op,
                    "--algo",
                    "all",
                    "--sizes",
                    sizes,
                    "--segment",
                    "256",
                    "--scheme",
                    "barrier",
                    "--root",
                    "rotate",
                ],
            );
            check_rows(&doc, op, np);
        }
    }
}

/// A `coll` result whose windows rest on a model without drift says so per rank,
/// and warns in `sync`'s words. `--fitpoints 2` leaves a drift fit no error
/// estimate, so every rank that fits (all but rank 0) drops its drift
/// (`fit_model`): the facts and the warning must be there. With 10 fit points of
/// 2 exchanges some fits drop their drift and some may not: the warning must
/// name exactly the ranks that did. The loop scheme does not synchronize: no
/// `sync`, no warning.
#[test]
fn a_dropped_drift_of_the_window_sync_is_reported_per_rank_and_warned() {
    let run = |fitpoints: &str, scheme: &str| {
        let mut cmd = ngauge();
        cmd.args(["--np", "3", "-t", "tcp", "--json", "coll", "--op", "bcast"])
            .args(["--sizes", "8", "--reps", "5", "--warmup", "2"])
            .args(["--max-rounds", "10", "--scheme", scheme, "--sync", "hca"])
            .args(["--fitpoints", fitpoints, "--exchanges", "2"]);
        let out = cmd.output().unwrap();
        let doc = documents::document_of(&["coll", "--fitpoints", fitpoints], &out);
        documents::assert_valid(&doc, "coll");
        (doc, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (doc, stderr) = run("2", "window");
    assert_eq!(doc["sync"]["algo"], "hca", "{}", doc["sync"]);
    assert_eq!(
        documents::check_sync_warnings(&doc, 3),
        [1, 2],
        "{}",
        doc["sync"]
    );
    for r in &doc["sync"]["ranks"].as_array().unwrap()[1..] {
        let d = &r["dropped_drift"];
        assert_eq!(d["reason"], "unresolved", "{r}");
        assert_eq!(d["fitpoints"], 2, "{r}");
    }
    // The command line prints it with sync's hint.
    assert!(
        stderr.contains("drift fits kept no drift: rank 1 against rank"),
        "{stderr}"
    );
    assert!(
        stderr.contains("more --fitpoints or --exchanges"),
        "{stderr}"
    );

    let (doc, _) = run("10", "window");
    let dropped = documents::check_sync_warnings(&doc, 3);
    println!("fitpoints 10: ranks {dropped:?} dropped their drift");

    let (doc, _) = run("2", "loop");
    assert!(doc.get("sync").is_none(), "{doc}");
    let kinds: Vec<&Value> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| &w["kind"])
        .collect();
    assert!(!kinds.contains(&&Value::from("dropped_drift")), "{kinds:?}");
}

/// A root other than 0 and the window scheme's counts over UDP (the clocks then
/// sync over TCP, with a warning); sizes above UDP's datagram limit are skipped.
#[test]
fn over_udp_with_root_2() {
    let doc = coll_json(
        3,
        "udp",
        &[
            "--op",
            "bcast",
            "--algo",
            "binomial,chain",
            "--sizes",
            "1,1K,64K",
            "--root",
            "2",
        ],
    );
    check_rows(&doc, "bcast", 3);
    assert!(results(&doc)
        .iter()
        .all(|r| r["transport"] == "udp" && r["root"] == 2));
    let kinds: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"synced_over"), "{kinds:?}");
    // 64 KiB in one datagram is above UDP's limit: skipped, with a warning each.
    assert_eq!(
        kinds.iter().filter(|k| **k == "size_skipped").count(),
        2,
        "{kinds:?}"
    );
    assert!(results(&doc).iter().all(|r| r["size"] != 65536));
    assert_eq!(results(&doc).len(), 4);
}

/// The three schemes report what they are: the window its last window and rounds,
/// the loop its calls per loop and one "valid" loop; `--per-rank` every rank's
/// local times.
#[test]
fn schemes_and_per_rank_times() {
    for scheme in ["window", "barrier", "loop"] {
        let doc = coll_json(
            3,
            "tcp",
            &[
                "--op",
                "allreduce",
                "--sizes",
                "64",
                "--scheme",
                scheme,
                "--per-rank",
            ],
        );
        check_rows(&doc, "allreduce", 3);
        let r = &results(&doc)[0];
        assert_eq!(r["scheme"], scheme);
        match scheme {
            "window" => {
                assert!(r["window_us"].as_f64().unwrap() > 0.0, "{r}");
                let (valid, rounds) = (r["valid"].as_u64().unwrap(), r["rounds"].as_u64().unwrap());
                // Rounds of 5 calls until 5 are valid (or --max-rounds).
                assert!(valid >= 5 || rounds == 10, "{r}");
                assert_eq!(valid + r["invalid"].as_u64().unwrap(), 5 * rounds, "{r}");
            }
            "loop" => {
                assert_eq!(r["calls_per_loop"], 5, "{r}");
                assert_eq!(r["valid"], 1, "{r}");
            }
            _ => assert_eq!(r["valid"], 5, "{r}"),
        }
        let ranks = r["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 3);
        for (i, rank) in ranks.iter().enumerate() {
            assert_eq!(rank["rank"], i);
            assert_eq!(
                rank["local_us"].as_array().unwrap().len(),
                r["valid"].as_u64().unwrap() as usize
            );
        }
    }
}

/// The human table, `-o` streaming one record per point, and the plot.
#[test]
fn table_output_file_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("coll.jsonl");
    let svg = dir.path().join("coll.svg");
    let out = ngauge()
        .args(["--np", "2", "coll"])
        .args(coll_rows::FAST)
        .args(["--algo", "binomial,linear", "--sizes", "1,2K"])
        .arg("-o")
        .arg(&jsonl)
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("bcast tcp/binomial on 2 ranks"), "{stdout}");
    assert!(stdout.contains("median [us]"), "{stdout}");
    assert!(stdout.contains("ratio to tcp/linear"), "{stdout}");
    let lines: Vec<Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["algo"], "binomial");
    assert_eq!(lines[1]["algo"], "linear");
    assert_eq!(lines[2]["size"], 2048);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("tcp/binomial") && plot.contains("tcp/linear"));
}

/// A parameter file of `L = 5`, `o = 1`, `g = 2`, `G = 0.001` us/B, measured on
/// `transport`.
fn params_file(dir: &std::path::Path, transport: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{transport}.json"));
    std::fs::write(
        &path,
        format!(
            r#"{{"schema": "ngauge-loggp-params/2", "transport": "{transport}", "ranges": [
            {{"from_bytes": 1, "to_bytes": 65536, "half_rtt_1b_us": 7.0,
              "wire_latency_us": 5.0, "o_s_us": 1.0, "o_r_us": 1.0, "g_us": 2.0,
              "G_us_per_byte": 0.001}}]}}"#
        ),
    )
    .unwrap();
    path
}

fn close(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-6
}

/// `--predict`: beside every point the LogGP simulation of the same schedule
/// (`o + L + (s-1)G + o` for one message) and Hockney's `alpha + beta m`, the
/// ratios of the measured median to them, and with two algorithms the models'
/// choice per size against the measured best.
#[test]
fn predictions_beside_measurements_and_selection() {
    let dir = tempfile::tempdir().unwrap();
    let tcp = params_file(dir.path(), "tcp");
    let tcp = tcp.to_str().unwrap();
    let doc = coll_json(
        2,
        "tcp",
        &[
            "--algo",
            "linear,binomial",
            "--sizes",
            "1,64,1K,4K",
            "--predict",
            tcp,
        ],
    );
    for r in results(&doc) {
        let p = &r["predicted"];
        let size = r["size"].as_f64().unwrap();
        // Two ranks: one alpha and the message's bytes times beta.
        assert_eq!(p["hockney_terms"], serde_json::json!([1.0, size]), "{r}");
        // Two ranks: one message, whatever the algorithm.
        assert!(close(&p["loggp_us"], 7.0 + (size - 1.0) * 0.001), "{r}");
        assert!(close(&p["hockney_us"], 7.0 + size * 0.001), "{r}");
        let median = r["runtime_us"]["median"].as_f64().unwrap();
        assert!(
            close(
                &p["measured_over_loggp"],
                median / p["loggp_us"].as_f64().unwrap()
            ),
            "{r}"
        );
    }
    let s = &doc["selection"];
    let rows = s["rows"].as_array().expect("a selection");
    assert_eq!(rows.len(), 4, "{s}");
    // Four sizes per algorithm: each gets its own Hockney fit (Huber regression),
    // and every row a fitted choice.
    let fits = s["fits"].as_array().expect("fits");
    assert_eq!(fits.len(), 2, "{s}");
    for f in fits {
        assert_eq!(f["sizes"], 4, "{f}");
        assert!(f["params"]["alpha_us"].as_f64().unwrap().is_finite(), "{f}");
    }
    assert!(s["hockney_fitted"]["mean_loss"].as_f64().is_some(), "{s}");
    for row in rows {
        assert_eq!(row["candidates"], 2, "{row}");
        assert_eq!(row["best"]["loss"], 0.0, "{row}");
        for model in ["loggp", "hockney", "hockney_fitted"] {
            let loss = row[model]["loss"].as_f64().unwrap();
            assert!(loss >= 0.0, "{row}");
            let algo = row[model]["algo"].as_str().unwrap();
            assert!(["linear", "binomial"].contains(&algo), "{row}");
        }
    }
    // Nothing to warn about but what the sync's effort calls for (a short fit
    // often drops its drift), which follows the sync's per-rank facts.
    documents::check_sync_warnings(&doc, 2);
    let others: Vec<&Value> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] != "dropped_drift" && w["kind"] != "crossed_brackets")
        .collect();
    assert!(others.is_empty(), "{doc}");

    // The loop scheme is predicted as a loop: a chain's calls overlap, so its
    // per-call time is below the single call's (P - 1)(o + L + o) = 21 us.
    let doc = coll_json(
        4,
        "tcp",
        &[
            "--algo",
            "chain",
            "--sizes",
            "1",
            "--scheme",
            "loop",
            "--predict",
            tcp,
        ],
    );
    let p = &results(&doc)[0]["predicted"];
    assert!(p["loggp_us"].as_f64().unwrap() < 21.0, "{p}");
    assert!(close(&p["hockney_us"], 21.003), "{p}");

    // Parameters of another transport: a warning says so; the table has the columns.
    let udp = params_file(dir.path(), "udp");
    let out = ngauge()
        .args(["--np", "2", "-t", "tcp", "coll"])
        .args(coll_rows::FAST)
        .args(["--sizes", "1", "--predict", udp.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("median / LogGP"), "{stdout}");
    assert!(stderr.contains("measured on udp"), "{stderr}");
}

/// Issue 14's reported all-to-all stall over TCP at 32 and 64 KiB: the pairwise
/// exchange of blocks at and above the socket buffers (64 KiB is more than
/// loopback's initial receive window of one 65483-byte segment), in both wait
/// modes, on 2 to 5 ranks, its data checked, finishes instead of deadlocking on
/// two ranks that both send (the transport's 30 s peer timeout would turn a
/// deadlock into an error naming the rank; the job is also given a limit).
#[test]
fn regression_issue_14_alltoall_of_32_and_64_kib_over_tcp_completes() {
    for np in 2..=5 {
        for wait in ["block", "poll"] {
            let np_s = np.to_string();
            let args = [
                "--np", &np_s, "--wait", wait, "-t", "tcp", "--json", "coll", "--op", "alltoall",
                "--sizes", "32K,64K", "--scheme", "barrier", "--reps", "10", "--warmup", "3",
            ];
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_ngauge"))
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let out = support::output_within(child, std::time::Duration::from_secs(120))
                .unwrap_or_else(|out| {
                    panic!(
                        "{args:?} hung; stderr:\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                });
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{args:?}: {stderr}");
            let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
            check_rows(&doc, "alltoall", np);
            let sizes: Vec<u64> = results(&doc)
                .iter()
                .map(|r| r["size"].as_u64().unwrap())
                .collect();
            assert_eq!(sizes, [32768, 65536], "{doc}");
            for r in results(&doc) {
                assert_eq!(r["valid"], 10, "{r}");
            }
        }
    }
}

/// Bad input: one line, exit status 2.
#[test]
fn bad_input_is_a_usage_error() {
    for args in [
        &["coll", "--op", "scatterv"][..],
        &["coll", "--algo", "ring"],
        &["coll", "--algo", "mpi"],
        &["coll", "--scheme", "fast"],
        &["coll", "--root", "x"],
        &["--np", "2", "coll", "--root", "5", "--sizes", "1"],
        &["coll", "--sizes", "0,1"],
        &["coll", "--mpi-algo", "3"],
        &["coll", "--plot", "/nonexistent-dir/coll.svg"],
        &["coll", "--predict", "/nonexistent-dir/params.json"],
        &["coll", "--predict", "Cargo.toml"],
    ] {
        let out = ngauge().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
