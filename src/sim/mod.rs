//! The virtual-time world: deterministic ranks over a modelled network, for tests
//! whose truth must be exact and for the LogGP simulator of collectives.
//!
//! A test on real time measures the scheduler of a loaded 2-core machine; in here
//! time is an integer per rank that advances only by what the rank does, so the
//! same run gives the same numbers every time and a model's parameters can be
//! asserted to the picosecond. Three modules, one job each:
//!
//! | module | job |
//! |---|---|
//! | [`time`] | virtual time ([`Ps`], per-rank [`RankTime`]) and the timers that read it ([`SimClock`]: offset, rate, injected [`crate::clock::Skew`], cost per read, closed-form `spin_until`) |
//! | [`net`] | the network model: LogGP parameters per protocol range ([`LogGp`], [`Network`]), a rank's network interface ([`Nic`]: `g + (s-1)G` between messages, sending and receiving), latency [`Noise`] |
//! | [`transport`] | a real [`ngauge_transport::Transport`] and [`ngauge_transport::Control`] over the model, so a pattern runs unchanged ([`SimTransport`], [`SimControl`]) |
//! | [`mod@world`] | a job of `P` such ranks from a [`WorldSpec`]; [`run`] gives each a thread |
//!
//! The model is LogGP as Hoefler, Schneider & Lumsdaine use it for simulation
//! ("LogGP in theory and practice", sec. 4.1, `../shared/papers/`): per message
//! `o_s` on the sender's CPU, `g` between consecutive messages on a network
//! interface, `(s-1)G` per message on the interface, `L` in flight, `o_r` on the
//! receiver's CPU; eager sends complete locally, rendezvous sends after the match
//! (a request-to-send and a clear-to-send, `L` each); parameters per protocol range
//! of message sizes. Its rules are spelled out in [`net`].
//!
//! Who uses it: the clock-synchronization tests (`sync::sim`: skewed 2.5 GHz
//! clocks with a read cost, a noisy 20 us network, control operations that align
//! time) and the LogGP tests (`patterns::loggp`'s test world: two ranks with
//! clocks of different offsets and rates, exact eager and rendezvous protocols),
//! which recover every parameter exactly through the real PRTT pattern and model.
//!
//! # For a discrete-event simulator
//!
//! A simulator of collectives over `2^20` ranks cannot afford a thread per rank;
//! it keeps a queue of operations per rank and an event queue ordered by virtual
//! time, and takes from here the parts that carry no threads:
//!
//! - [`Ps`] for every instant and duration (integer, so sums are exact and ties
//!   are real ties);
//! - [`Network::at`] for the protocol of a message size, [`LogGp`] for its
//!   parameters ([`LogGp::transfer_ps`] is `(s-1)G`, [`LogGp::busy_ps`] is
//!   `g + (s-1)G`), [`Network::latency`] for the wire time of the `seq`-th message
//!   of a pair;
//! - one [`Nic`] per rank: [`Nic::inject`] gives when a message ready at `t`
//!   leaves, [`Nic::accept`] when one whose first byte reaches the rank at `t` is
//!   in, each keeping the interface's gap. Handled in global time order, as an
//!   event queue does, `accept` places receptions from several senders exactly;
//!   the threaded [`SimTransport`] cannot (it sees receives in program order) and
//!   leaves the receive-side gap out;
//! - a rank's CPU is its own [`Ps`]: `o_s`, `o_r` advance it; a receive ends at
//!   `max(CPU free, last byte in) + o_r`.
//!
//! The threaded world then serves as a second engine for the same schedules: run
//! over [`SimTransport`], a collective's completion times must equal the event
//! simulator's wherever the receive-side gap does not bind.

pub mod collective;
pub mod engine;
pub mod hockney;
pub mod net;
pub mod params;
pub mod select;
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
