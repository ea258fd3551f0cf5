//! Statistics of repeated measurements: summaries, outlier filters, confidence
//! intervals and tests (Hunold & Carpen-Amarie, sec. 4-5).

mod summary;

pub use summary::{percentile_of_sorted, Summary};
