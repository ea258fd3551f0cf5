//! The virtual-time world and the LogGP simulator of collectives: deterministic
//! ranks over a modelled network, for tests whose truth must be exact, and a
//! discrete-event engine for `ngauge simulate` and `ngauge coll --predict`.
//!
//! A test on real time measures the scheduler of a loaded 2-core machine; in here
//! time is an integer per rank that advances only by what the rank does, so the
//! same run gives the same numbers every time and a model's parameters can be
//! asserted to the picosecond. One job per module:
//!
//! | module | job |
//! |---|---|
//! | [`time`] | virtual time ([`Ps`], per-rank [`RankTime`]) and the timers that read it ([`SimClock`]: offset, rate, injected [`crate::clock::Skew`], cost per read, closed-form `spin_until`) |
//! | [`net`] | the network model: LogGP parameters per protocol range ([`LogGp`], [`Network`]), a rank's network interface ([`Nic`]: `g + (s-1)G` between messages, sending and receiving), latency [`Noise`], a [`SlowLink`] |
//! | [`transport`] | a real [`ngauge_transport::Transport`] and [`ngauge_transport::Control`] over the model, so a pattern runs unchanged ([`SimTransport`], [`SimControl`]) |
//! | [`mod@world`] | a job of `P` such ranks from a [`WorldSpec`]; [`run`] gives each a thread |
//! | [`engine`] | the discrete-event simulator ([`simulate`]): every rank a queue of the steps of its [`crate::coll::Schedule`]s (a [`Program`]), one event queue in virtual time, no thread per rank |
//! | [`collective`] | a collective as a [`Program`]: one call, calls back to back (the loop-scheme error, sec. 4.2) or with the root rotating, and the predictions built on them |
//! | [`hockney`] | the analytic Hockney-model formulas of collective algorithms (Nuriyev's thesis, tables 3.2-3.7) and their fitted form, beside the simulation |
//! | [`params`] | a measured parameter file (`ngauge loggp --params-out`) as a [`Network`] |
//! | [`spec`] | [`spec::SimulateSpec`], what `ngauge simulate` and a suite ask, and [`spec::run`], one prediction per size, algorithm and segment |
//!
//! The model is LogGP as Hoefler, Schneider & Lumsdaine use it for simulation
//! ("LogGP in theory and practice", sec. 4.1, `../shared/papers/`): per message
//! `o_s` on the sender's CPU, `g` between consecutive messages on a network
//! interface, `(s-1)G` per message on the interface, `L` in flight, `o_r` on the
//! receiver's CPU; eager sends complete locally, rendezvous sends after the match
//! (a request-to-send and a clear-to-send, `L` each); parameters per protocol range
//! of message sizes. Its rules are spelled out in [`net`]; [`engine`] states how
//! its replay of the executor follows them.
//!
//! Who uses it: the clock-synchronization tests and the collective patterns' tests
//! (`sync::sim`: skewed 2.5 GHz clocks with a read cost, a noisy 20 us network,
//! control operations that align time), the LogGP tests (`patterns::loggp`'s test
//! world: two ranks with clocks of different offsets and rates, exact eager and
//! rendezvous protocols), which recover every parameter exactly through the real
//! PRTT pattern, model and confirmation; and, without threads, `ngauge simulate`
//! ([`spec`]), `ngauge coll --predict` ([`collective`], [`hockney`], [`params`])
//! and the timeline plot (`report::timeline`, the engine's [`Span`]s).
//!
//! # Two engines, one schedule
//!
//! A simulator of collectives over `2^20` ranks cannot afford a thread per rank.
//! [`engine`] takes from the threaded world only the parts that carry no threads:
//! [`Ps`] for every instant and duration (integer, so sums are exact and ties are
//! real ties), [`Network::at`] and [`LogGp`] for a message's protocol and
//! parameters, and one [`Nic`] per rank. Handled in global time order,
//! [`Nic::accept`] places receptions from several senders exactly; the threaded
//! [`SimTransport`] cannot (it sees receives in program order) and leaves the
//! receive-side gap out. With that gap switched off ([`Options::receive_gap`]), a
//! collective's completion times over [`SimTransport`] equal the engine's for eager
//! protocols (`tests_engine`).

pub mod collective;
pub mod engine;
pub mod hockney;
pub mod net;
pub mod params;
pub mod spec;
pub mod time;
pub mod transport;
pub mod world;

pub use collective::{Calls, CollJob, SchemeTimes};
pub use engine::{simulate, Options, Outcome, Program, SimError, Span, SpanKind, Stats};
pub use net::{LogGp, NetError, Network, Nic, Noise, SlowLink};
pub use time::{Ps, Quantum, RankTime, SimClock, TickMap};
pub use transport::{SimControl, SimTransport};
pub use world::{run, world, RankClock, SimRank, WorldSpec};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_engine;
