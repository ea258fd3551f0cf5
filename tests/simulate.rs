//! `ngauge simulate` end to end: the LogGP simulator's predictions against closed
//! forms of plain LogGP, parameter files of both schemas, selection, timelines,
//! `--select --measure` in a live job (the local launcher's and mpirun's), and
//! bad input (one line, exit status 2).

use crate::support;

use assert_cmd::Command;
use serde_json::Value;

fn ngauge() -> Command {
    Command::cargo_bin("ngauge").unwrap()
}

const FLAGS: [&str; 8] = ["--L", "5", "--o", "1", "--g", "2", "--G", "0.001"];

/// Runs `ngauge simulate ARGS --json` and returns its document.
fn simulate(args: &[&str]) -> Value {
    let out = ngauge()
        .arg("simulate")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn us(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn one_message_takes_o_plus_l_plus_g_per_byte_plus_o() {
    let doc = simulate(
        &[
            &[
                "--op", "bcast", "--algo", "binomial", "--np", "2", "--sizes", "1,1001",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    // o + L + (s-1)G + o.
    assert!(close(us(&rows[0]["predicted_us"]), 1.0 + 5.0 + 1.0));
    assert!(close(
        us(&rows[1]["predicted_us"]),
        1.0 + 5.0 + 1000.0 * 0.001 + 1.0
    ));
    assert_eq!(rows[0]["slowest_rank"], 1);
    assert_eq!(doc["ranges"][0]["protocol"], "eager");
    assert_eq!(doc["meta"]["np"], 2);
    assert!(doc["events"].as_u64().unwrap() > 0);
}

#[test]
fn the_human_table_shows_every_rank_of_a_small_job() {
    let out = ngauge()
        .args(
            [
                &[
                    "simulate", "--op", "bcast", "--algo", "linear", "--np", "4", "--sizes", "1",
                ][..],
                &FLAGS,
            ]
            .concat(),
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // The root's three sends leave g = 2 us apart (g > o): rank i's message leaves
    // at o + (i-1) g and is in o + L after; the root is done after its 3 o_s.
    let expected: Vec<f64> = (1..4)
        .map(|i| 1.0 + 2.0 * (i - 1) as f64 + 5.0 + 1.0)
        .collect();
    let root = format!("\n0     {:>15.3}\n", 3.0);
    assert!(text.contains(&root), "{text}");
    for (i, t) in expected.iter().enumerate() {
        assert!(
            text.contains(&format!("\n{:<4}  {t:>15.3}\n", i + 1)),
            "{text}"
        );
    }
}

#[test]
fn os_and_or_are_charged_on_their_own_sides() {
    let doc = simulate(&[
        "--op", "bcast", "--algo", "linear", "--np", "2", "--sizes", "1", "--L", "5", "--os", "1",
        "--or", "3", "--g", "0", "--G", "0",
    ]);
    let finish = doc["results"][0]["finish_us"].as_array().unwrap();
    assert!(close(us(&finish[0]), 1.0), "the root pays o_s");
    assert!(close(us(&finish[1]), 1.0 + 5.0 + 3.0), "o_s + L + o_r");
}

#[test]
fn rendezvous_waits_for_the_receiver() {
    let eager = simulate(
        &[
            &[
                "--op", "bcast", "--algo", "linear", "--np", "2", "--sizes", "1",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let rdv = simulate(
        &[
            &[
                "--op",
                "bcast",
                "--algo",
                "linear",
                "--np",
                "2",
                "--sizes",
                "1",
                "--protocol",
                "rendezvous",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let e = us(&eager["results"][0]["predicted_us"]);
    let r = us(&rdv["results"][0]["predicted_us"]);
    // A request-to-send and a clear-to-send before the data: 2 L more.
    assert!(close(r - e, 2.0 * 5.0), "eager {e}, rendezvous {r}");
    assert_eq!(rdv["ranges"][0]["protocol"], "rendezvous");
}

fn params_file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

#[test]
fn parameter_files_of_both_schemas_give_the_wire_latency() {
    // Schema 1: L_us is PRTT(1,0,1)/2 = L + o_s + o_r, so L = 7 - 1 - 1 = 5.
    let v1 = params_file(
        r#"{"schema": "ngauge-loggp-params/1", "transport": "tcp", "ranges": [
        {"from_bytes": 1, "to_bytes": 65536, "L_us": 7, "o_s_us": 1, "o_r_us": 1,
         "g_us": 2, "G_us_per_byte": 0.001}]}"#,
    );
    let out = ngauge()
        .args([
            "simulate", "--op", "bcast", "--algo", "linear", "--np", "2", "--sizes", "1", "--json",
            "--params",
        ])
        .arg(v1.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(close(us(&doc["results"][0]["predicted_us"]), 7.0));
    assert_eq!(doc["params_transport"], "tcp");
    assert_eq!(doc["warnings"][0]["kind"], "derived_latency");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: range from 1 B has no wire_latency_us"),
        "{stderr}"
    );
    // Schema 2 keeps them apart; two ranges, the second rendezvous.
    let v2 = params_file(
        r#"{"schema": "ngauge-loggp-params/2", "transport": "tcp", "ranges": [
        {"from_bytes": 1, "to_bytes": 1024, "half_rtt_1b_us": 9, "wire_latency_us": 5,
         "o_s_us": 1, "o_r_us": 1, "g_us": 2, "G_us_per_byte": 0.001},
        {"from_bytes": 2048, "to_bytes": 65536, "half_rtt_1b_us": 9, "wire_latency_us": 5,
         "o_s_us": 1, "o_r_us": 1, "g_us": 2, "G_us_per_byte": 0.001, "protocol": "rendezvous"}]}"#,
    );
    let doc = simulate(&[
        "--op",
        "bcast",
        "--algo",
        "linear",
        "--np",
        "2",
        "--sizes",
        "1,4097",
        "--params",
        v2.path().to_str().unwrap(),
    ]);
    assert!(doc["warnings"].as_array().unwrap().is_empty());
    assert!(close(us(&doc["results"][0]["predicted_us"]), 7.0));
    assert!(
        close(us(&doc["results"][1]["predicted_us"]), 7.0 + 4.096 + 10.0),
        "{doc}"
    );
}

/// The overlaps and O of a parameter file: shown in the document's ranges and
/// the table, and charged where they fall. A 2-rank broadcast ends at the later
/// of the root's send call and the receiver's completion (what `coll` measures):
/// with a send overlap longer than the rest of the message's way, the root.
#[test]
fn overlaps_and_o_are_shown_and_the_broadcast_ends_with_its_last_rank() {
    let file = params_file(
        r#"{"schema": "ngauge-loggp-params/2", "transport": "tcp", "ranges": [
        {"from_bytes": 1, "to_bytes": 65536, "half_rtt_1b_us": 5, "wire_latency_us": 2,
         "o_s_us": 6, "o_r_us": 3, "send_overlap_us": 5, "recv_overlap_us": 1,
         "g_us": 1, "G_us_per_byte": 0.001, "O_us_per_byte": 0.0005}]}"#,
    );
    let path = file.path().to_str().unwrap();
    let args = [
        "--op",
        "bcast",
        "--algo",
        "linear",
        "--np",
        "2",
        "--sizes",
        "1,1001",
        "--per-rank",
        "--params",
        path,
    ];
    let doc = simulate(&args);
    let range = &doc["ranges"][0];
    assert!(close(us(&range["send_overlap_us"]), 5.0), "{range}");
    assert!(close(us(&range["recv_overlap_us"]), 1.0), "{range}");
    assert!(close(us(&range["O_us_per_byte"]), 0.0005), "{range}");
    // 1 B: the message leaves at o_s - send_overlap = 1, is in at 1 + L = 3; the
    // waiting receiver starts o_r 1 us before that and ends at 5. The root's call
    // ends at o_s = 6, after the receiver.
    let one = &doc["results"][0];
    assert!(close(us(&one["finish_us"][0]), 6.0), "{one}");
    assert!(close(us(&one["finish_us"][1]), 5.0), "{one}");
    assert!(close(us(&one["predicted_us"]), 6.0), "{one}");
    assert_eq!(one["slowest_rank"], 0);
    // 1001 B: the root's call is o_s + 1000 O = 6.5 and the message leaves at 1.5;
    // its last byte is in 1000 G + L later, at 4.5; the receive runs from 3.5 for
    // o_r + 1000 O, to 7.0.
    let big = &doc["results"][1];
    assert!(close(us(&big["finish_us"][0]), 6.5), "{big}");
    assert!(close(us(&big["finish_us"][1]), 7.0), "{big}");
    assert!(close(us(&big["predicted_us"]), 7.0), "{big}");
    assert_eq!(big["slowest_rank"], 1);
    let out = ngauge().arg("simulate").args(args).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("send overlap 5 us, receive overlap 1 us, O 0.0005 us/B"),
        "{table}"
    );
}

#[test]
fn select_ranks_every_algorithm_and_segment_per_size() {
    let doc = simulate(
        &[
            &[
                "--op",
                "bcast",
                "--select",
                "--np",
                "16",
                "--sizes",
                "1,1M",
                "--segment",
                "0,8K",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let rows = doc["results"].as_array().unwrap();
    // linear once; binomial, chain, binary, split-binary, kchain:4 with 2 segments.
    assert_eq!(rows.len(), 2 * 11);
    let best = doc["best"].as_array().unwrap();
    assert_eq!(best.len(), 2);
    for b in best {
        let min = rows
            .iter()
            .filter(|r| r["size"] == b["size"])
            .map(|r| us(&r["predicted_us"]))
            .fold(f64::INFINITY, f64::min);
        assert!(close(us(&b["predicted_us"]), min), "{b}");
        assert!(us(&b["margin"]) >= 1.0);
    }
}

#[test]
fn a_million_ranks_of_a_binomial_broadcast() {
    let doc = simulate(
        &[
            &[
                "--op", "bcast", "--algo", "binomial", "--np", "1048576", "--sizes", "1",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let row = &doc["results"][0];
    // g > o: a rank's k-th child gets the message 2k us later than its first, and
    // its subtree is k levels shallower; the path through first children, 20
    // hops of o + L + o, is the longest.
    assert!(close(us(&row["predicted_us"]), 20.0 * 7.0), "{row}");
    assert_eq!(row["messages"], 1048575);
    assert!(row.get("finish_us").is_none(), "per rank only when asked");
}

#[test]
fn a_timeline_draws_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("t.svg");
    let out = ngauge()
        .args(
            [
                &[
                    "simulate",
                    "--op",
                    "bcast",
                    "--algo",
                    "binomial",
                    "--np",
                    "8",
                    "--sizes",
                    "1",
                    "--timeline",
                ][..],
                &[svg.to_str().unwrap()],
                &FLAGS,
            ]
            .concat(),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("o_s (CPU)"));
    assert!(text.contains("bcast binomial np 8 size 1 B"));
}

fn bad(args: &[&str], message: &str) {
    let out = ngauge().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(message), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    let with = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["simulate", "--np", "4", "--sizes", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str], message: &str| {
        let args = with(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        bad(&refs, message);
    };
    run(
        &[&["--op", "bcst", "--algo", "linear"][..], &FLAGS].concat(),
        "unknown collective `bcst`",
    );
    run(
        &[&["--op", "bcast", "--algo", "ring"][..], &FLAGS].concat(),
        "unknown bcast algorithm `ring`",
    );
    run(
        &[
            "--op", "bcast", "--algo", "linear", "--L", "5", "--g", "2", "--G", "0",
        ],
        "--L needs --o",
    );
    run(
        &[
            &["--op", "bcast", "--algo", "linear", "--root", "4"][..],
            &FLAGS,
        ]
        .concat(),
        "root 4 is not a rank",
    );
    run(
        &[
            "--op", "bcast", "--algo", "linear", "--L=-5", "--o", "1", "--g", "2", "--G", "0",
        ],
        "L_us = -5",
    );
    run(
        &[
            "--op",
            "bcast",
            "--algo",
            "linear",
            "--params",
            "/nonexistent/p.json",
        ],
        "cannot read /nonexistent/p.json",
    );
    let junk = params_file(r#"{"schema": "ngauge-loggp-params/1", "ranges": []}"#);
    run(
        &[
            "--op",
            "bcast",
            "--algo",
            "linear",
            "--params",
            junk.path().to_str().unwrap(),
        ],
        "params file has no ranges",
    );
    bad(
        &[
            &[
                "simulate",
                "--op",
                "bcast",
                "--algo",
                "linear",
                "--np",
                "65",
                "--sizes",
                "1",
                "--timeline",
                "x.svg",
            ][..],
            &FLAGS,
        ]
        .concat(),
        "--timeline draws at most 64 ranks",
    );
    bad(
        &["--np", "5000", "info"],
        "--np 5000: at most 4096 ranks can be started",
    );
}

#[test]
fn a_loop_of_calls_underestimates_a_pipelined_broadcast() {
    let doc = simulate(
        &[
            &[
                "--op", "bcast", "--algo", "chain", "--np", "8", "--sizes", "1", "--loop", "20",
            ][..],
            &FLAGS,
        ]
        .concat(),
    );
    let row = &doc["results"][0];
    let single = us(&row["predicted_us"]);
    // One call: 7 hops of o + L + o down the chain.
    assert!(close(single, 7.0 * 7.0), "{row}");
    // Back to back, call i + 1 enters the chain while call i is still in it: the
    // per-call time tends to the root's gap, far below one call (sec. 4.2).
    let looped = us(&row["looped_us"]);
    assert!(looped < single / 2.0, "{row}");
    assert!(
        us(&row["rotated_us"]) > looped,
        "rotating the root mitigates: {row}"
    );
}

/// Few calls, the barrier scheme: a measured selection in seconds on a loaded
/// 2-core host (the window scheme would first synchronize the clocks).
const MEASURE: &[&str] = &[
    "simulate",
    "--op",
    "bcast",
    "--select",
    "--measure",
    "--segment",
    "0,1K",
    // Four sizes: the fewest a per-algorithm Hockney fit rests on.
    "--sizes",
    "1,64,1K,4K",
    "--scheme",
    "barrier",
    "--reps",
    "5",
    "--warmup",
    "2",
    "--L",
    "5",
    "--o",
    "1",
    "--g",
    "2",
    "--G",
    "0.001",
];

/// The candidates of a bcast `--select` with segments 0 and 1K: linear once, the
/// five segmented algorithms twice.
const CANDIDATES: usize = 11;

/// `simulate --select --measure` in a job of `np` ranks started by `launcher`
/// exited 0 and printed a document that passes [`check_measured_selection`].
fn check_measured_job(out: &std::process::Output, np: usize, launcher: &str) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    check_measured_selection(&doc, np);
    let started_by = doc["meta"]["launcher"].as_str().unwrap();
    assert!(started_by.starts_with(launcher), "{started_by}");
}

/// Checks a `simulate --select --measure` document of a job of `np` ranks: the
/// predictions are of the job's size, every candidate was measured at every size,
/// and each model's choice is charged its own measured median against the best.
fn check_measured_selection(doc: &Value, np: usize) {
    assert_eq!(doc["meta"]["np"], np);
    let predicted = doc["results"].as_array().unwrap();
    assert_eq!(predicted.len(), 4 * CANDIDATES);
    assert!(
        predicted.iter().all(|r| r["np"] == np),
        "simulated P is the job's"
    );
    let m = &doc["measurement"];
    assert_eq!(m["scheme"], "barrier");
    let records = m["results"].as_array().unwrap();
    assert_eq!(records.len(), 4 * CANDIDATES);
    let segments: Vec<u64> = records
        .iter()
        .filter(|r| r["algo"] == "chain")
        .map(|r| r["segment"].as_u64().unwrap())
        .collect();
    assert_eq!(segments, [0, 1024, 0, 1024, 0, 1024, 0, 1024]);
    let median = |size: u64, algo: &Value, segment: &Value| -> f64 {
        let r = records
            .iter()
            .find(|r| r["size"] == size && r["algo"] == *algo && r["segment"] == *segment)
            .unwrap_or_else(|| panic!("no record of {algo}/{segment} at {size} B"));
        assert_eq!(r["np"], np);
        us(&r["runtime_us"]["median"])
    };
    let s = &m["selection"];
    let rows = s["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{s}");
    for row in rows {
        let size = row["size"].as_u64().unwrap();
        assert_eq!(row["candidates"], CANDIDATES);
        let here: Vec<&Value> = records.iter().filter(|r| r["size"] == size).collect();
        let best = us(&row["best"]["median_us"]);
        let fastest = here
            .iter()
            .map(|r| us(&r["runtime_us"]["median"]))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(best, fastest, "{row}");
        assert_eq!(us(&row["best"]["loss"]), 0.0);
        // LogGP's choice is the candidate with the smallest simulated time.
        let loggp_min = here
            .iter()
            .map(|r| us(&r["predicted"]["loggp_us"]))
            .fold(f64::INFINITY, f64::min);
        let c = &row["loggp"];
        let chosen = here
            .iter()
            .find(|r| r["algo"] == c["algo"] && r["segment"] == c["segment"])
            .unwrap();
        assert_eq!(us(&chosen["predicted"]["loggp_us"]), loggp_min, "{row}");
        for model in ["loggp", "hockney", "hockney_fitted"] {
            let c = &row[model];
            if c.is_null() {
                assert_eq!(model, "hockney_fitted");
                continue;
            }
            let t = median(size, &c["algo"], &c["segment"]);
            assert_eq!(us(&c["median_us"]), t, "{model}: {row}");
            let loss = us(&c["loss"]);
            assert!(loss >= 0.0, "{model}: {row}");
            assert!(
                (loss - (t / best - 1.0)).abs() < 1e-9,
                "degradation = choice / best - 1: {model}: {row}"
            );
        }
    }
    for model in ["loggp", "hockney"] {
        let score = &s[model];
        assert!(score["best_chosen"].as_u64().unwrap() <= 4);
        assert!(us(&score["mean_loss"]) <= us(&score["max_loss"]));
    }
    // One fit per algorithm and segment, each over the four sizes.
    assert_eq!(s["fits"].as_array().unwrap().len(), CANDIDATES);
}

#[test]
fn select_measure_in_a_local_job_charges_each_model_its_choice() {
    let out = ngauge()
        .args(["--np", "3", "-t", "tcp", "--json"])
        .args(MEASURE)
        .env_remove("NGAUGE_TEST_CLOCK_SKEW")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    check_measured_job(&out, 3, "local");
}

#[test]
fn select_measure_under_mpirun_simulates_the_jobs_size() {
    const TEST: &str = "select_measure_under_mpirun_simulates_the_jobs_size";
    let probe = std::process::Command::new("mpirun")
        .arg("--version")
        .output();
    let Ok(probe) = probe else {
        return support::skip(TEST, support::Lack::Installed, "no mpirun on PATH");
    };
    if !String::from_utf8_lossy(&probe.stdout).contains("Open MPI") {
        return support::skip(
            TEST,
            support::Lack::Host,
            "mpirun on PATH is not Open MPI's",
        );
    }
    // --np 2 is the local launcher's; under mpirun the job has 3 ranks, and 3 is
    // what is simulated.
    let mut cmd = std::process::Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "3"])
        .arg(env!("CARGO_BIN_EXE_ngauge"))
        .args(["--np", "2", "--json"])
        .args(MEASURE)
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .env_remove("NGAUGE_RENDEZVOUS")
        .env_remove("NGAUGE_JOB_TOKEN")
        .env_remove("NGAUGE_TEST_CLOCK_SKEW");
    // support::mpi needs the `mpi` feature; this test runs without it.
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = support::output_within(child, std::time::Duration::from_secs(300))
        .unwrap_or_else(|out| panic!("hung: {}", String::from_utf8_lossy(&out.stderr)));
    // With the pmix feature, Open MPI's mpirun is a PMIx launcher.
    let launcher = if cfg!(feature = "pmix") {
        "pmix"
    } else {
        "mpirun"
    };
    check_measured_job(&out, 3, launcher);
}

#[test]
fn measure_needs_a_live_job() {
    let mut args = vec!["--np", "1048576"];
    args.extend_from_slice(MEASURE);
    let out = ngauge()
        .args(&args)
        .env_remove("NGAUGE_RANK")
        .env_remove("NGAUGE_SIZE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--measure needs a live job, and 1048576 ranks cannot be started"),
        "{stderr}"
    );
    // The measuring flags mean nothing without --measure.
    bad(
        &[
            &[
                "simulate", "--op", "bcast", "--select", "--sizes", "1", "--reps", "5",
            ][..],
            &FLAGS,
        ]
        .concat(),
        "--measure",
    );
}

/// Issue 37: the parameters `loggp --params-out` writes are what `simulate
/// --params` and `coll --predict` read, over TCP; sizes outside the measured
/// ones are simulated with a warning naming them.
#[test]
fn issue_37_loggp_params_feed_simulate_and_coll_predict_over_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.json");
    let p = p.to_str().unwrap();
    let out = ngauge()
        .args([
            "loggp", "--sizes", "1K-4K:1K", "--reps", "3", "--warmup", "1",
        ])
        .args(["--params-out", p])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "loggp: {stderr}");
    let doc = simulate(&[
        "--params", p, "--op", "bcast", "--algo", "binomial", "--np", "4", "--sizes", "1,2K,64K",
    ]);
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{doc}");
    assert!(rows.iter().all(|r| us(&r["predicted_us"]) > 0.0), "{doc}");
    let kinds: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"below_first_range"), "{doc}");
    assert!(kinds.contains(&"extrapolated"), "{doc}");
    let out = ngauge()
        .args(["--json", "coll", "--op", "bcast", "--sizes", "2K"])
        .args(["--reps", "5", "--warmup", "1", "--predict", p])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "coll --predict: {stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let predicted = &doc["results"][0]["predicted"]["loggp_us"];
    assert!(us(predicted) > 0.0, "{doc}");
}
