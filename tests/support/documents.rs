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
