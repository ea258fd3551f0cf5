//! `ngauge nbc` end to end (issue 17): NBCBench over our schedules on TCP (over
//! MPI's `MPI_Ibcast`/`MPI_Iallreduce` under mpirun: `tests/mpi.rs`).
//!
//! What is known without trusting a timing: every row's overlap is IMB-NBC's
//! formula of the row's own t_pure, t_CPU and t_ovrl; t_ovrl is the sum of its
//! parts; without progress calls there are none, with calls every 1 us during a
//! computation of t_b > 1 us there is at least one; the time-based computation lasts
//! at least t_b. How much overlap TCP or MPI give is a measurement
//! (docs/findings/2026-11-24-late-nbc-noise.md); the overlap of a chain with and
//! without progress calls is checked exactly in the virtual-time world
//! (`src/patterns/nbc/tests.rs`).

use crate::documents;
use crate::nbc_rows;
use crate::support;

use documents::{assert_valid, document_of};
use nbc_rows::{any_decided, check_rows, check_rows_said, f};
use serde_json::Value;
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

#[test]
fn bcast_over_tcp_time_and_work_with_and_without_progress() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("nbc.jsonl");
    let args = [
        &[
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
        ][..],
        nbc_rows::LIGHT,
        &["--output", jsonl.to_str().unwrap(), "--json"],
    ]
    .concat();
    // 3 ranks on 2 cores: under other load every call of a run can start late
    // (docs/findings/2026-11-25-sync-drift-verdicts.md), and the document then says
    // it cannot decide, which each attempt checks. A measurement that never decides
    // anything in three attempts fails.
    let mut doc = Value::Null;
    for _attempt in 0..3 {
        doc = document_of(&args, &ngauge(&args));
        check_rows_said(&doc);
        if any_decided(&doc) {
            break;
        }
    }
    assert_valid(&doc, "nbc");
    documents::check_sync_warnings(&doc, 3);
    assert_eq!(doc["op"], "bcast");
    assert_eq!(doc["algo"], "chain");
    assert_eq!(doc["transport"], "tcp");
    let rows = check_rows(&doc);
    assert_eq!(rows.len(), 4, "time/work x none/1us: {doc}");
    for row in &rows {
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
    assert_eq!(streamed, rows);
}

/// As in `late`: a sync whose drift fit on rank 1 was dropped (`--fitpoints 2`)
/// is in the document per rank, with `sync`'s warning.
#[test]
fn a_dropped_drift_of_the_sync_is_reported_per_rank_and_warned() {
    let args = [
        "--np",
        "2",
        "nbc",
        "--op",
        "allreduce",
        "--sizes",
        "8",
        "--compute",
        "work",
        "--reps",
        "5",
        "--warmup",
        "2",
        "--max-rounds",
        "4",
        "--sync",
        "hca",
        "--fitpoints",
        "2",
        "--exchanges",
        "2",
        "--json",
    ];
    let doc = document_of(&args, &ngauge(&args));
    assert_valid(&doc, "nbc");
    assert_eq!(
        documents::check_sync_warnings(&doc, 2),
        [1],
        "{}",
        doc["sync"]
    );
}

#[test]
fn allreduce_over_tcp_two_sizes_human_table() {
    let out = ngauge(
        &[
            &["--np", "2", "nbc", "--op", "allreduce", "--sizes", "8,4K"][..],
            nbc_rows::LIGHT,
        ]
        .concat(),
    );
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
