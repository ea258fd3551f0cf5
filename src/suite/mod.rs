//! Suites of experiments (`ngauge run`) and what they leave behind: Hunold &
//! Carpen-Amarie's experimental design (sec. 6.1, Algorithms 5 and 6) as the
//! default way to measure.
//!
//! - [`results`]: reading measurements back from documents, streams and run
//!   directories, for `ngauge compare` and the suite summary.

pub mod results;
