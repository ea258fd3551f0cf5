//! Rendering results: the typed document of every command, the metadata every
//! result carries, human tables, JSON lines.
//!
//! Exporters are pure functions from results to bytes (hyperfine's
//! `Exporter::serialize`); measuring and statistics live elsewhere. Every `--json`
//! document is a struct here, serialized by serde; its JSON Schema is generated from
//! the same struct ([`schema`]) and committed under `docs/schemas/`.

pub mod coll;
pub mod compare;
pub mod document;
pub mod ebb;
pub mod effort;
pub mod jsonl;
pub mod late;
pub mod loggp;
pub mod loggp_compare;
pub mod loggp_doc;
pub mod matrix;
pub mod meta;
pub mod nbc;
pub mod noise;
pub mod pingpong;
pub mod progress;
pub mod provenance;
pub mod rma;
pub mod schema;
pub mod side_by_side;
pub mod simulate;
pub mod svg;
pub mod sync;
pub mod table;
pub mod timeline;
pub mod timer;
pub mod warning;

pub use crate::build_facts::BuildFacts;
pub use document::Document;
pub use meta::{Meta, MetaBuilder};
pub use warning::{SetupWarning, Warned};
