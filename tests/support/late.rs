//! The checks every `ngauge late` document passes whatever the timing, over our
//! transports (`tests/late.rs`) and under an MPI launcher (`tests/mpi.rs`), which
//! include this file themselves (`#[path]`).
#![allow(dead_code)]

use serde_json::Value;

/// The light measurement every `late` test runs with, over TCP and under mpirun:
/// few calls and the offset-only sync.
pub const LIGHT: &[&str] = &["--reps", "10", "--warmup", "3", "--sync", "logp"];

/// Eq. (5) of every row, from the minima and from the medians, and the baseline
/// row of delay 0; returns the rows.
pub fn check_rows(doc: &Value, delays_us: &[f64], delayed: &[u64]) -> Vec<Value> {
    let rows = doc["results"].as_array().expect("results").clone();
    assert!(!rows.is_empty(), "{doc}");
    for row in &rows {
        let d = row["delay_us"].as_f64().unwrap();
        assert!(delays_us.contains(&d), "{row}");
        let ranks: Vec<u64> = row["delayed_ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_u64().unwrap())
            .collect();
        assert_eq!(ranks, delayed, "{row}");
        let valid = row["valid"].as_u64().unwrap();
        assert!(
            row["missed_delay"].as_u64().unwrap() <= row["invalid"].as_u64().unwrap(),
            "{row}"
        );
        if valid > 0 {
            assert!(row["effective_delay_us"].is_number(), "{row}");
        }
        if row["decided"] == false {
            // A run that cannot decide says so: no b, and a warning for the row.
            assert!(
                row["benefit"].is_null() && row["benefit_median"].is_null(),
                "{row}"
            );
            let warned = doc["warnings"].as_array().unwrap().iter().any(|w| {
                w["kind"] == "undecided"
                    && w["delay_us"] == row["delay_us"]
                    && w["size"] == row["size"]
                    && w["mode"] == row["mode"]
            });
            assert!(warned, "undecided row without its warning: {row}\n{doc}");
            continue;
        }
        assert_eq!(row["decided"], true, "{row}");
        for (t0, td, b, delay) in [
            ("t0_us", "td_us", "benefit", "benefit_delay_us"),
            (
                "t0_median_us",
                "td_median_us",
                "benefit_median",
                "benefit_delay_median_us",
            ),
        ] {
            let (t0, td, b, effective) = (
                row[t0].as_f64().unwrap(),
                row[td].as_f64().unwrap(),
                row[b].as_f64().unwrap(),
                row[delay].as_f64().unwrap(),
            );
            assert!(t0 > 0.0 && td > 0.0, "{row}");
            // Eq. (5) with the delay the calls had (measured), within the
            // delay tolerance of the one asked for.
            if d == 0.0 {
                assert_eq!(effective, 0.0, "{row}");
            } else {
                assert!(
                    (effective - d).abs() <= (d / 10.0).max(10.0) + 1e-6,
                    "{row}"
                );
            }
            let eq5 = (t0 + effective - td) / td;
            assert!(
                (b - eq5).abs() <= 1e-9 * eq5.abs().max(1.0),
                "{b} vs {eq5}: {row}"
            );
            if d == 0.0 {
                assert_eq!(t0, td, "delay 0 is the baseline: {row}");
                assert_eq!(b, 0.0, "{row}");
            }
        }
        assert!(valid > 0, "{row}");
    }
    // Every size and mode has one row per delay, in the order given.
    let per_point: Vec<f64> = rows
        .iter()
        .take(delays_us.len())
        .map(|r| r["delay_us"].as_f64().unwrap())
        .collect();
    assert_eq!(per_point, delays_us, "{doc}");
    rows
}
