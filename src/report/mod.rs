//! Rendering results: metadata every result carries, human tables, JSON, JSON lines.
//!
//! Exporters are pure functions from results to bytes (hyperfine's
//! `Exporter::serialize`); measuring and statistics live elsewhere.

pub mod compare;
pub mod jsonl;
pub mod loggp;
pub mod loggp_compare;
pub mod meta;
pub mod progress;
pub mod svg;
pub mod table;

pub use meta::{BuildFacts, Meta};
