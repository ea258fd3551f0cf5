//! The checks every `ngauge coll` report passes, over our transports
//! (`tests/coll.rs`) and under an MPI launcher (`tests/mpi.rs`). Those two include
//! this file themselves (`#[path]`), not through `support/mod.rs`: ngauge-mpi's
//! tests include that one too, without serde_json.
#![allow(dead_code)]

use serde_json::Value;

/// Light sync and few calls for `coll`: these tests check the report, not speed;
/// a whole sweep takes seconds on a loaded 2-core host.
pub const FAST: &[&str] = &[
    "--reps",
    "5",
    "--warmup",
    "2",
    "--fitpoints",
    "10",
    "--exchanges",
    "3",
    "--max-rounds",
    "10",
];

/// The algorithms `ngauge coll --algo all` measures for each operation, as the
/// report names them (over TCP in `tests/coll.rs`, over verbs in
/// `tests/verbs_vm.rs`).
pub const ALGOS_OF_ALL: [(&str, &[&str]); 5] = [
    (
        "bcast",
        &[
            "linear",
            "binomial",
            "chain",
            "binary",
            "split-binary",
            "kchain:4",
        ],
    ),
    ("gather", &["linear", "binomial"]),
    ("allreduce", &["recursive-doubling", "ring"]),
    ("barrier", &["dissemination"]),
    ("alltoall", &["pairwise"]),
];

/// Every row of a `coll` document has the contract's fields, `op` and `np`, and a
/// plausible run-time (`0 < min <= median <= max`). A row without valid calls
/// (the window scheme on a host loaded beyond its cores: every call started late
/// in every round) has no figures, and a `few_valid` warning says so.
pub fn check_rows(doc: &Value, op: &str, np: usize) {
    for r in doc["results"].as_array().expect("results") {
        assert_eq!(r["op"], op, "{r}");
        assert_eq!(r["np"], np, "{r}");
        for field in ["algo", "segment", "size", "scheme", "valid", "invalid"] {
            assert!(!r[field].is_null(), "{field} missing: {r}");
        }
        if r["valid"] == 0 {
            assert_eq!(r["scheme"], "window", "{r}");
            assert!(r["runtime_us"].is_null(), "{r}");
            let warned = doc["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["kind"] == "few_valid" && w["size"] == r["size"] && w["valid"] == 0);
            assert!(warned, "no few_valid warning for {r}");
            println!("note: no valid call in {r}");
            continue;
        }
        let t = &r["runtime_us"];
        let (min, median, max) = (
            t["min"].as_f64().unwrap(),
            t["median"].as_f64().unwrap(),
            t["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= median && median <= max, "{r}");
    }
}
