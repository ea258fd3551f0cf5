//! The checks every `ngauge nbc` row passes whatever the timing, over our
//! transports (`tests/nbc.rs`) and under an MPI launcher (`tests/mpi.rs`), which
//! include this file themselves (`#[path]`).
#![allow(dead_code)]

use serde_json::Value;

/// The light measurement every `nbc` test runs with, over TCP and under mpirun:
/// few calls, few rounds, and the offset-only sync.
pub const LIGHT: &[&str] = &[
    "--reps",
    "10",
    "--warmup",
    "3",
    "--max-rounds",
    "8",
    "--sync",
    "logp",
];

pub fn f(row: &Value, key: &str) -> f64 {
    row[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key}: {row}"))
}

/// What holds for every row whatever the timing.
pub fn check_row(row: &Value) {
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
    // A stage without a valid call (every call started late or overran its
    // window, on a host loaded beyond its cores) leaves the row undecided, and
    // only then.
    let valid = |stage: &str| row[stage].as_u64().unwrap() > 0;
    assert_eq!(
        row["decided"].as_bool().unwrap(),
        valid("valid_pure") && valid("valid_ovrl"),
        "{row}"
    );
}

/// [`check_row`] for every row of `doc`, of which at least one is decided;
/// returns the rows.
pub fn check_rows(doc: &Value) -> Vec<Value> {
    let rows = doc["results"].as_array().expect("results").clone();
    assert!(!rows.is_empty(), "{doc}");
    for row in &rows {
        check_row(row);
    }
    assert!(
        rows.iter().any(|r| r["decided"] == true),
        "no row decided: {doc}"
    );
    rows
}
