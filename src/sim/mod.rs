//! The LogGP simulator of collectives, and the virtual time it shares with the
//! threaded test world.
//!
//! The model is LogGP as Hoefler, Schneider & Lumsdaine use it for simulation
//! ("LogGP in theory and practice", sec. 4.1, `../shared/papers/`): per message
//! `o_s` on the sender's CPU, `g` between consecutive messages on a network
//! interface, `(s-1)G` per message on the interface, `L` in flight, `o_r` on the
//! receiver's CPU; eager sends complete locally, rendezvous sends after the match
//! (a request-to-send and a clear-to-send, `L` each); parameters per protocol range
//! of message sizes. Its rules are spelled out in [`net`]. Time is integer
//! picoseconds ([`Ps`]), so sums are exact, ties are real ties, and the same run
//! gives the same numbers every time.
//!
//! | module | job |
//! |---|---|
//! | [`time`], [`net`] | virtual time; the network model ([`LogGp`], [`Network`]) and a rank's interface ([`Nic`]) |
//! | [`engine`] | the discrete-event simulator of per-rank schedules |
//! | [`collective`] | collectives as engine programs: one call, loops, rotating roots |
//! | [`hockney`] | the analytic Hockney models the predictions are compared with |
//! | [`select`] | models beside measurements (`coll --predict`, `simulate --measure`) and the model-based selection judged against the measured best (Nuriyev sec. 6.3) |
//! | [`params`] | a measured parameter file as a [`Network`] |
//! | [`spec`] | what `ngauge simulate` asks, and its answer |
//!
//! The threaded world, built for tests only (`tests_*.rs`), runs real patterns
//! over the same model: per-rank virtual clocks (`SimClock`: offset, rate, injected
//! [`crate::clock::Skew`], cost per read, closed-form `spin_until`), a real
//! [`ngauge_transport::Transport`] and [`ngauge_transport::Control`] whose calls
//! advance the rank's time (`SimTransport`, `SimControl`, with latency noise), and
//! a job of `P` ranks on threads (`WorldSpec`, `run`). The clock-sync tests
//! (`sync::sim`) and the LogGP tests (`patterns::loggp`'s test world) recover their
//! truths exactly on it, and it is a second engine for the same schedules: a
//! collective's completion times over `SimTransport` must equal the engine's
//! wherever the receive-side gap ([`Nic::accept`], which only a global event order
//! places) does not bind.

pub mod collective;
pub mod engine;
pub mod hockney;
pub mod net;
pub mod params;
pub mod select;
pub mod spec;
pub mod time;

pub use collective::{Calls, CollJob, SchemeTimes};
pub use engine::{simulate, Options, Outcome, Program, SimError, Span, SpanKind, Stats};
pub use net::{LogGp, NetError, Network, Nic};
pub use time::Ps;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_clock;
#[cfg(test)]
mod tests_transport;
#[cfg(test)]
mod tests_world;
#[cfg(test)]
pub use tests_clock::{Quantum, RankTime, SimClock, TickMap};
#[cfg(test)]
pub use tests_transport::{Noise, SimControl, SimTransport, SlowLink, TimeShift};
#[cfg(test)]
pub use tests_world::{run, world, RankClock, SimRank, WorldSpec};
#[cfg(test)]
mod tests_engine;
