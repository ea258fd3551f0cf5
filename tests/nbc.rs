//! `ngauge nbc` end to end (issue 17): NBCBench over our schedules on TCP, and over
//! MPI's `MPI_Ibcast`/`MPI_Iallreduce` under mpirun (cargo feature `mpi`).
//!
//! What is known without trusting a timing: every row's overlap is IMB-NBC's
//! formula of the row's own t_pure, t_CPU and t_ovrl; t_ovrl is the sum of its
//! parts; without progress calls there are none, with calls every 1 us during a
//! computation of t_b > 1 us there is at least one; the time-based computation lasts
//! at least t_b. How much overlap TCP or MPI give is a measurement
//! (docs/findings/2026-11-24-late-nbc-noise.md); the overlap of a chain with and
//! without progress calls is checked exactly in the virtual-time world
//! (`src/patterns/nbc/tests.rs`).

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn ngauge(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_ngauge"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::output_within(child, Duration::from_secs(300))
        .unwrap_or_else(|out| panic!("{args:?} timed out: {out:?}"))
}

fn document_of(args: &[&str], out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn assert_valid(doc: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas/nbc.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
}

fn f(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key}: {row}"))
}

/// What holds for every row whatever the timing.
fn check_row(row: &Value) {
    let (pure, ovrl, cpu) = (f(row, "t_pure_us"), f(row, "t_ovrl_us"), f(row, "t_cpu_us"));
    assert!(pure > 0.0 && ovrl > 0.0 && cpu > 0.0, "{row}");
    let overlap = 100.0 * ((pure + cpu - ovrl) / pure.min(cpu)).clamp(0.0, 1.0);
    assert!((f(row, "overlap_pct") - overlap).abs() < 1e-9, "{row}");
    assert!((0.0..=100.0).contains(&overlap), "{row}");
    for part in ["t_init_us", "t_wait_us", "t_test_us"] {
        assert!(f(row, part) >= 0.0, "{row}");
    }
    assert!(f(row, "t_test_us") <= cpu, "{row}");
    match row["test_every_us"].as_f64() {
        None => {
            assert_eq!(f(row, "tests"), 0.0, "{row}");
            assert_eq!(f(row, "t_test_us"), 0.0, "{row}");
        }
        Some(every) => assert!(every > 0.0, "{row}"),
    }
    match row["compute"].as_str().unwrap() {
        // Time-based: the computation ran until t_b had passed (each rank converts
        // t_b with its own calibrated rate; they differ by far less than 0.1 %).
        "time" => {
            assert!(row["work_units"].is_null(), "{row}");
            assert!(cpu >= f(row, "t_b_us") * 0.999, "{row}");
        }
        "work" => assert!(row["work_units"].as_u64().unwrap() >= 1, "{row}"),
        other => panic!("compute {other}: {row}"),
    }
    assert!(row["valid_pure"].as_u64().unwrap() > 0, "{row}");
    assert!(row["valid_ovrl"].as_u64().unwrap() > 0, "{row}");
}

#[test]
fn bcast_over_tcp_time_and_work_with_and_without_progress() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("nbc.jsonl");
    let args = [
        "--np",
        "3",
        "nbc",
        "--op",
        "bcast",
        "--algo",
        "chain",
        "--sizes",
        "64K",
        "--compute",
        "time,work",
        "--test-every",
        "none,1us",
        "--reps",
        "10",
        "--warmup",
        "3",
        "--max-rounds",
        "8",
        "--sync",
        "logp",
        "--output",
        jsonl.to_str().unwrap(),
        "--json",
    ];
    let doc = document_of(&args, &ngauge(&args));
    assert_valid(&doc);
    assert_eq!(doc["op"], "bcast");
    assert_eq!(doc["algo"], "chain");
    assert_eq!(doc["transport"], "tcp");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "time/work x none/1us: {doc}");
    for row in rows {
        check_row(row);
        assert_eq!(row["size"], 65536, "{row}");
        // Progress calls every 1 us in a computation of t_b (a 64 KiB chain over
        // TCP: tens of microseconds at least): one at least, unless the first one
        // already completed the collective.
        if row["test_every_us"] == 1.0 && row["compute"] == "time" {
            assert!(f(row, "tests") >= 1.0, "{row}");
        }
    }
    let streamed: Vec<Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&streamed, rows);
}

#[test]
fn allreduce_over_tcp_two_sizes_human_table() {
    let out = ngauge(&[
        "--np",
        "2",
        "nbc",
        "--op",
        "allreduce",
        "--sizes",
        "8,4K",
        "--reps",
        "10",
        "--warmup",
        "3",
        "--max-rounds",
        "8",
        "--sync",
        "logp",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for column in ["t_pure [us]", "t_ovrl [us]", "t_CPU [us]", "overlap [%]"] {
        assert!(stdout.contains(column), "{stdout}");
    }
    assert!(stdout.contains("recursive-doubling"), "{stdout}");
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, needle) in [
        (&["nbc", "--test-every", "0us"][..], "--test-every"),
        (&["nbc", "--compute", "idle"][..], "--compute"),
        (&["nbc", "--algo", "mpi"][..], "--algo mpi"),
        (&["nbc", "--sizes", "1-"][..], "--sizes"),
        (&["-t", "tcp,udp", "nbc"][..], "--transport"),
        (&["nbc", "--reps", "0"][..], "--reps"),
    ] {
        let out = ngauge(&[&["--np", "2"][..], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or("");
        assert!(first.contains(needle), "{args:?}: {stderr}");
    }
}

/// MPI's own nonblocking broadcast and allreduce under mpirun, and our binomial
/// broadcast over the MPI transport in the same way.
#[cfg(feature = "mpi")]
#[test]
fn mpi_ibcast_and_iallreduce_under_mpirun() {
    use support::mpi;
    if mpi::skip("mpi_ibcast_and_iallreduce_under_mpirun") {
        return;
    }
    for (op, algo) in [
        ("bcast", "mpi"),
        ("allreduce", "mpi"),
        ("bcast", "binomial"),
    ] {
        let args = [
            "-t",
            "mpi",
            "nbc",
            "--op",
            op,
            "--algo",
            algo,
            "--sizes",
            "8,16K",
            "--test-every",
            "none,5us",
            "--reps",
            "10",
            "--warmup",
            "3",
            "--max-rounds",
            "8",
            "--sync",
            "logp",
            "--json",
        ];
        let out = mpi::run(mpi::mpirun(2, &args), Duration::from_secs(300));
        let doc = document_of(&args, &out);
        assert_valid(&doc);
        assert_eq!(doc["algo"], algo, "{doc}");
        assert_eq!(doc["transport"], "mpi", "{doc}");
        let rows = doc["results"].as_array().unwrap();
        assert_eq!(rows.len(), 4, "2 sizes x 2 intervals: {doc}");
        for row in rows {
            check_row(row);
            assert_eq!(row["op"], op, "{row}");
        }
    }
}
