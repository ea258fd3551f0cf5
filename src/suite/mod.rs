//! Suites of experiments (`ngauge run`) and what they leave behind: Hunold &
//! Carpen-Amarie's experimental design (sec. 6.1, Algorithms 5 and 6) as the
//! default way to measure.
//!
//! - [`file`]: the suite file, read into the commands' specs and checked.
//! - [`plan`]: which experiment each launch runs when (seeded shuffles).
//! - [`dir`]: the run directory's layout, which runs are done, the combined
//!   records per experiment (JSON Lines and CSV).
//! - [`results`]: reading measurements back from documents, streams and run
//!   directories, for `ngauge compare` and the suite summary.
//! - [`runner`]: running the plan, one child job per launch and experiment.
//! - [`summary`]: `summary.json`/`summary.csv`, Algorithm 6 over the launches.

pub mod dir;
pub mod file;
pub mod plan;
pub mod results;
pub mod runner;
pub mod summary;
