//! A command's JSON document and its schema, for the tests of `nbc` and `late`
//! over our transports (`tests/nbc.rs`, `tests/late.rs`) and under an MPI launcher
//! (`tests/mpi.rs`), which include this file themselves (`#[path]`), as
//! `support/coll.rs`.
#![allow(dead_code)]

use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// The one JSON document a successful run of `args` printed.
pub fn document_of(args: &[&str], out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// `doc` validates against `docs/schemas/COMMAND.schema.json`.
pub fn assert_valid(doc: &Value, command: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(format!("{command}.schema.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
}

/// The clock synchronization a document's timings rest on (`coll`'s window
/// scheme, `late`, `nbc`): `sync.ranks[]` has every rank of `np`, and the
/// warnings `dropped_drift` and `crossed_brackets` name exactly the ranks whose
/// entries report a dropped drift or crossed brackets, with the same figures, as
/// `ngauge sync` does. Returns the ranks with a dropped drift.
pub fn check_sync_warnings(doc: &Value, np: usize) -> Vec<u64> {
    let ranks = doc["sync"]["ranks"].as_array().expect("sync.ranks[]");
    assert_eq!(ranks.len(), np, "{}", doc["sync"]);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i, "{r}");
        assert!(r["sync_exchanges"].as_u64().unwrap() > 0 || i == 0, "{r}");
    }
    let warning = |kind: &str| -> Option<&Value> {
        let of_kind: Vec<&Value> = doc["warnings"]
            .as_array()
            .expect("warnings[]")
            .iter()
            .filter(|w| w["kind"] == kind)
            .collect();
        assert!(of_kind.len() <= 1, "{kind}: {of_kind:?}");
        of_kind.first().copied()
    };
    let dropped: Vec<&Value> = ranks
        .iter()
        .filter(|r| r.get("dropped_drift").is_some())
        .collect();
    match warning("dropped_drift") {
        None => assert!(
            dropped.is_empty(),
            "no dropped_drift warning for {dropped:?}"
        ),
        Some(w) => {
            let named = w["ranks"].as_array().unwrap();
            assert_eq!(named.len(), dropped.len(), "{w}\n{}", doc["sync"]);
            for (n, r) in named.iter().zip(&dropped) {
                assert_eq!(n["rank"], r["rank"], "{w}");
                for field in ["fitted_ppm", "stderr_ppm", "fitpoints", "peer", "reason"] {
                    assert_eq!(n[field], r["dropped_drift"][field], "{field}: {w}");
                }
                let text = format!("rank {} against rank {}", n["rank"], n["peer"]);
                assert!(w["message"].as_str().unwrap().contains(&text), "{w}");
            }
        }
    }
    let crossed: Vec<&Value> = ranks
        .iter()
        .filter(|r| r["crossed_brackets"].as_u64().unwrap() > 0)
        .collect();
    match warning("crossed_brackets") {
        None => assert!(
            crossed.is_empty(),
            "no crossed_brackets warning for {crossed:?}"
        ),
        Some(w) => {
            let named: Vec<(&Value, &Value)> = w["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| (&n["rank"], &n["brackets"]))
                .collect();
            let reported: Vec<(&Value, &Value)> = crossed
                .iter()
                .map(|r| (&r["rank"], &r["crossed_brackets"]))
                .collect();
            assert_eq!(named, reported, "{w}");
        }
    }
    dropped
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect()
}
