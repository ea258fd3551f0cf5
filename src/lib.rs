//! ngauge: what communication really costs, measured over raw transports and MPI with
//! one clock discipline and one statistics pipeline.
//!
//! The library runs every experiment from a plain spec ([`experiment`]); the
//! `ngauge` binary and TOML suites are two front ends that fill the spec and print
//! the document. The folders stand in one order (`docs/architecture.md`):
//!
//! - [`units`], [`build_facts`], [`time_format`], [`names`], [`sizes`]: leaf
//!   modules (units of time, what the build recorded, dates, names, size lists)
//!   that import nothing from the crate.
//! - [`clock`]: RDTSCP ticks, calibration, host facts, pinning.
//! - [`coll`]: collective algorithms as per-rank schedules, their executor over any
//!   transport, data checks.
//! - [`experiment`]: every measuring command's whole experiment, run from its spec
//!   on a rank's world; returns the command's document.
//! - [`job`]: job setup from a serde-named spec: starting, opening transports.
//! - [`launch`]: launcher detection, local launcher, rendezvous, control channel.
//! - [`model`]: least squares, change points, LogGP parameters.
//! - [`patterns`]: measurement procedures (ping-pong, PRTT for LogGP, collectives
//!   timed in windows, late arrivals, NBC overlap, noise).
//! - [`stats`]: medians, quantiles, summaries, the interval of the median, Tukey's
//!   filter.
//! - [`report`]: metadata, tables, JSON lines, SVG plots, comparisons.
//! - [`rng`]: the one random generator (SplitMix64), a leaf module.
//! - [`sim`]: the LogGP simulator of collectives (a discrete-event engine over
//!   per-rank schedules, Hockney models, model-based selection), and the
//!   virtual-time world it shares with exact tests.
//! - [`spec`]: what each measuring command measures, as serde specs the command
//!   line and suite files fill alike.
//! - [`suite`]: suites of experiments over launches, reading results back.
//! - [`sync`]: clock synchronization (pairwise, linear, log p tree, drift models) and
//!   window-based starts.
//!
//! Transports are separate crates implementing [`ngauge_transport::Transport`].
#![deny(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod build_facts;
pub mod clock;
pub mod coll;
pub mod experiment;
pub mod job;
pub mod launch;
pub mod model;
pub mod names;
pub mod patterns;
pub mod report;
pub mod rng;
pub mod sim;
pub mod sizes;
pub mod spec;
pub mod stats;
pub mod suite;
pub mod sync;
pub mod time_format;
pub mod units;

pub use ngauge_transport as transport;
