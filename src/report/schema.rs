//! JSON Schemas of the `--json` documents (and of a run directory's
//! `summary.json`), generated from their types with
//! `schemars`, so the schema cannot drift from what is serialized.
//!
//! The committed copies live in `docs/schemas/COMMAND.schema.json`. A unit test
//! compares them with `documents` and fails when they differ; run it with
//! `NGAUGE_UPDATE_SCHEMAS=1` (`NGAUGE_UPDATE_SCHEMAS=1 cargo test --lib
//! report::schema`) to rewrite them. `tests/schemas.rs` validates real outputs of
//! the binary against the committed files.
//!
//! The types derive `schemars::JsonSchema` under `cfg(test)` only
//! (`#[cfg_attr(test, derive(schemars::JsonSchema))]`; `schemars` is a
//! dev-dependency): nothing the library or the binary ships asks for a schema, and
//! the derived impls were about an eighth of the library's LLVM IR, compiled in
//! every build (docs/findings/2026-11-24-suite-time.md).

#[cfg(test)]
use schemars::Schema;

/// Every command's document schema: `(command, schema)`.
#[cfg(test)]
pub fn documents() -> Vec<(&'static str, Schema)> {
    vec![
        ("timer", schemars::schema_for!(super::timer::TimerDoc)),
        ("info", schemars::schema_for!(super::timer::InfoDoc)),
        (
            "pingpong",
            schemars::schema_for!(super::pingpong::PingpongDoc),
        ),
        ("loggp", schemars::schema_for!(super::loggp_doc::LoggpDoc)),
        ("sync", schemars::schema_for!(super::sync::SyncDoc)),
        ("coll", schemars::schema_for!(super::coll::CollDoc)),
        ("rma", schemars::schema_for!(super::rma::RmaDoc)),
        (
            "simulate",
            schemars::schema_for!(super::simulate::SimulateDoc),
        ),
        ("late", schemars::schema_for!(super::late::LateDoc)),
        ("nbc", schemars::schema_for!(super::nbc::NbcDoc)),
        ("noise", schemars::schema_for!(super::noise::NoiseDoc)),
        ("matrix", schemars::schema_for!(super::matrix::MatrixDoc)),
        ("ebb", schemars::schema_for!(super::ebb::EbbDoc)),
        ("compare", schemars::schema_for!(super::compare::CompareDoc)),
        (
            "summary",
            schemars::schema_for!(crate::suite::summary::Summary),
        ),
    ]
}

/// The text of a committed schema file.
#[cfg(test)]
pub fn to_text(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("a schema serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Test hook: rewrite the committed schemas instead of comparing.
    const UPDATE_VAR: &str = "NGAUGE_UPDATE_SCHEMAS";

    #[test]
    fn committed_schemas_match_the_document_types() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas");
        let update = std::env::var_os(UPDATE_VAR).is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for (command, schema) in documents() {
            let path = dir.join(format!("{command}.schema.json"));
            let text = to_text(&schema);
            if update {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "schemas out of date: {stale:?}; regenerate them with \
             `{UPDATE_VAR}=1 cargo test --lib report::schema` and commit the result"
        );
    }

    /// The fields DESIGN.md's command table promises, required in each schema.
    #[test]
    fn contract_fields_are_required() {
        let contract: &[(&str, &[&str])] = &[
            (
                "timer",
                &[
                    "source",
                    "hz",
                    "overhead_ns",
                    "invariant_tsc",
                    "warnings",
                    "meta",
                ],
            ),
            ("info", &["transports", "launcher", "timer", "meta"]),
            ("pingpong", &["results", "meta"]),
            ("loggp", &["detector", "n", "dg", "meta"]),
            ("sync", &["algo", "np", "duration_us", "ranks", "meta"]),
            ("coll", &["results", "meta"]),
            ("simulate", &["results", "events", "events_per_s", "meta"]),
            ("late", &["results", "warnings", "meta"]),
            ("nbc", &["results", "warnings", "meta"]),
            ("rma", &["results", "warnings", "meta"]),
            ("noise", &["cores", "warnings", "meta"]),
            (
                "matrix",
                &["links", "latency_us", "bandwidth_MBps", "outliers", "meta"],
            ),
            (
                "ebb",
                &["bisections", "seed", "per_bisection", "results", "meta"],
            ),
            ("compare", &["rows", "meta", "meta_a", "meta_b"]),
            ("summary", &["level", "experiments"]),
        ];
        for (command, schema) in documents() {
            let value = schema.as_value();
            let required: Vec<&str> = value["required"]
                .as_array()
                .map(|r| r.iter().filter_map(|f| f.as_str()).collect())
                .unwrap_or_default();
            let (_, fields) = contract.iter().find(|(c, _)| *c == command).unwrap();
            for field in *fields {
                assert!(required.contains(field), "{command}: {field} not required");
            }
        }
    }
}
