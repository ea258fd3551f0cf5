//! `ngauge late` end to end (issue 17): late arrivals over TCP on this host (over
//! MPI's own collectives under mpirun: `tests/mpi.rs`).
//!
//! What is known without trusting a timing: every row's benefit is eq. (5) of
//! Niethammer et al. of the row's own t0, d and td; the delay 0 row is the baseline
//! (td = t0, b = 0); the delayed ranks are the ones asked for; the document
//! validates against its schema. That a hidden delay gives b = d / td and a delay
//! that adds gives b = 0 is checked exactly in the virtual-time world
//! (`src/patterns/late/tests.rs`); how large b is over TCP is a measurement
//! (docs/findings/2026-11-24-late-nbc-noise.md).

use crate::documents;
use crate::late_rows;
use crate::support;

use documents::{assert_valid, document_of};
use late_rows::check_rows;
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
fn four_ranks_allreduce_over_tcp_with_three_delays() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("late.svg");
    let jsonl = dir.path().join("late.jsonl");
    let args = [
        &[
            "--np",
            "4",
            "late",
            "--op",
            "allreduce",
            "--delay",
            "0,50us,500us",
            "--sizes",
            "8",
        ][..],
        late_rows::LIGHT,
        &[
            "--plot",
            plot.to_str().unwrap(),
            "--output",
            jsonl.to_str().unwrap(),
            "--json",
        ],
    ]
    .concat();
    let doc = document_of(&args, &ngauge(&args));
    assert_valid(&doc, "late");
    documents::check_sync_warnings(&doc, 4);
    assert_eq!(doc["op"], "allreduce");
    assert_eq!(doc["algo"], "recursive-doubling");
    assert_eq!(doc["transport"], "tcp");
    assert_eq!(doc["np"], 4);
    assert_eq!(doc["meta"]["np"], 4);
    let rows = check_rows(&doc, &[0.0, 50.0, 500.0], &[0]);
    assert_eq!(rows.len(), 3, "3 delays: {doc}");
    // The stream carries the same rows, one a line.
    let streamed: Vec<Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(streamed, rows);
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    assert!(svg.contains("<svg"), "{svg:.200}");
}

#[test]
fn the_last_rank_late_under_injected_noise_both_call_modes() {
    let args = [
        &[
            "--np",
            "3",
            "late",
            "--op",
            "bcast",
            "--algo",
            "chain",
            "--delayed-ranks",
            "last",
            "--delay",
            "20us",
            "--mode",
            "blocking,nonblocking",
            "--inject",
            "1ms:20us",
            "--inject-rank",
            "1",
        ][..],
        late_rows::LIGHT,
        &["--json"],
    ]
    .concat();
    let doc = document_of(&args, &ngauge(&args));
    assert_valid(&doc, "late");
    assert_eq!(doc["algo"], "chain");
    assert_eq!(doc["inject"]["rank"], 1);
    assert_eq!(doc["inject"]["period_us"], 1000.0);
    let rows = check_rows(&doc, &[20.0], &[2]);
    let modes: Vec<&str> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["blocking", "nonblocking"], "{doc}");
}

/// The window starts rest on a model without drift: `--fitpoints 2` leaves rank
/// 1's drift fit no error estimate, so it drops its drift, and the document says
/// so on rank 1 and warns as `sync` does.
#[test]
fn a_dropped_drift_of_the_sync_is_reported_per_rank_and_warned() {
    let args = [
        "--np",
        "2",
        "late",
        "--op",
        "barrier",
        "--delay",
        "10us",
        "--reps",
        "5",
        "--warmup",
        "2",
        "--sync",
        "hca",
        "--fitpoints",
        "2",
        "--exchanges",
        "2",
        "--json",
    ];
    let doc = document_of(&args, &ngauge(&args));
    assert_valid(&doc, "late");
    assert_eq!(
        documents::check_sync_warnings(&doc, 2),
        [1],
        "{}",
        doc["sync"]
    );
}

#[test]
fn a_random_delayed_rank_is_the_same_for_the_same_seed() {
    let args = [
        "--np",
        "3",
        "late",
        "--op",
        "barrier",
        "--delayed-ranks",
        "random",
        "--seed",
        "7",
        "--delay",
        "10us",
        "--reps",
        "5",
        "--warmup",
        "2",
        "--sync",
        "logp",
        "--json",
    ];
    let a = document_of(&args, &ngauge(&args));
    let b = document_of(&args, &ngauge(&args));
    let ranks = &a["results"][0]["delayed_ranks"];
    assert_eq!(ranks.as_array().map(|r| r.len()), Some(1), "{a}");
    assert!(ranks[0].as_u64().unwrap() < 3, "{a}");
    assert_eq!(ranks, &b["results"][0]["delayed_ranks"]);
}

#[test]
fn bad_options_are_usage_errors() {
    for (args, needle) in [
        (&["late", "--delay", "5"][..], "--delay"),
        (&["late", "--op", "scan"][..], "--op"),
        (&["late", "--algo", "ring", "--op", "bcast"][..], "--algo"),
        (&["late", "--algo", "mpi"][..], "--algo mpi"),
        (&["late", "--seed", "3"][..], "--seed"),
        (&["late", "--delayed-ranks", "5"][..], "--delayed-ranks"),
        (&["late", "--root", "2", "--op", "bcast"][..], "--root"),
        (
            &["late", "--inject-rank", "4", "--inject", "1ms:10us"][..],
            "--inject-rank",
        ),
        (&["-t", "tcp,udp", "late"][..], "--transport"),
    ] {
        let out = ngauge(&[&["--np", "2"][..], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or("");
        assert!(first.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
