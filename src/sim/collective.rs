//! Collectives in the discrete-event simulator ([`crate::sim::engine`]): a
//! [`CollSpec`] as a [`Program`] of one call, of calls back to back (the loop
//! scheme), or of calls with the root rotating, and the predictions built on them.
//!
//! The loop-scheme error is section 4.2 of "LogGP in theory and practice": a
//! benchmark that runs `n` calls back to back and reports the total over `n` lets
//! call `i + 1` overlap call `i` down a pipeline or a tree, and so underestimates a
//! single call; rotating the root ("change-root") only mitigates it.

use crate::coll::{CollError, CollSpec, Collective, Schedule};
use crate::sim::engine::{simulate, Options, Outcome, Program, SimError};
use crate::sim::net::Network;
use crate::sim::time::Ps;
use ngauge_transport::Rank;

/// How calls follow each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    /// One call.
    Single,
    /// `n` calls back to back with the same root (the loop scheme).
    Loop(u32),
    /// `n` calls back to back, call `i` rooted at `(root + i) % np`
    /// ("change-root"; for unrooted operations the same as [`Calls::Loop`]).
    RotateRoot(u32),
}

impl Calls {
    /// Number of calls.
    pub fn count(self) -> u32 {
        match self {
            Calls::Single => 1,
            Calls::Loop(n) | Calls::RotateRoot(n) => n,
        }
    }
}

/// A collective as the simulator's [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollJob {
    /// The call (its root is the first call's).
    pub spec: CollSpec,
    /// How many calls, and their roots.
    pub calls: Calls,
}

impl CollJob {
    /// One call of `spec`.
    pub fn single(spec: CollSpec) -> Self {
        CollJob {
            spec,
            calls: Calls::Single,
        }
    }

    fn rotates(&self) -> bool {
        matches!(self.calls, Calls::RotateRoot(_))
            && self.spec.algorithm.collective().is_rooted()
            && self.spec.np > 1
    }

    fn spec_of(&self, call: u32) -> CollSpec {
        let mut spec = self.spec;
        if self.rotates() {
            spec.root = (spec.root + call as usize) % spec.np;
        }
        spec
    }
}

impl Program for CollJob {
    fn np(&self) -> usize {
        self.spec.np
    }

    fn calls(&self) -> u32 {
        self.calls.count()
    }

    fn schedule(&self, rank: Rank, call: u32) -> Result<Schedule, CollError> {
        self.spec_of(call).schedule(rank)
    }

    fn repeats(&self, _call: u32) -> bool {
        !self.rotates()
    }

    /// Every broadcast algorithm starts each non-root rank with a receive (the
    /// engine checks it).
    fn passive_at_start(&self, rank: Rank) -> bool {
        self.spec.algorithm.collective() == Collective::Bcast && rank != self.spec.root
    }
}

/// One call of `spec` with `options` (per-rank completion, trace).
pub fn run(spec: &CollSpec, net: &Network, options: Options) -> Result<Outcome, SimError> {
    spec.validate()?;
    simulate(&CollJob::single(*spec), net, options)
}

/// What three timing schemes report for one collective (LogGP paper, sec. 4.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SchemeTimes {
    /// One call: its true time.
    pub single: Ps,
    /// `calls` calls back to back, the slowest rank's total over `calls`.
    pub looped: Ps,
    /// The same with the root rotating.
    pub rotated: Ps,
    /// Calls per loop.
    pub calls: u32,
}

/// Simulates `spec` once, in a loop of `calls`, and in a loop with the root
/// rotating (sec. 4.2's three schemes; the loop's per-call time is the slowest
/// rank's completion of its last call over `calls`, as `patterns::coll`'s loop
/// scheme reports).
pub fn schemes(spec: &CollSpec, net: &Network, calls: u32) -> Result<SchemeTimes, SimError> {
    let calls = calls.max(1);
    Ok(SchemeTimes {
        single: per_call(spec, net, Calls::Single)?,
        looped: per_call(spec, net, Calls::Loop(calls))?,
        rotated: per_call(spec, net, Calls::RotateRoot(calls))?,
        calls,
    })
}

/// The time per call that a timing scheme reports, simulated: for
/// [`Calls::Single`] one call's time; for a loop, the slowest
/// rank's completion of its last call over the number of calls.
pub fn per_call(spec: &CollSpec, net: &Network, calls: Calls) -> Result<Ps, SimError> {
    spec.validate()?;
    let calls = match calls {
        Calls::Loop(0) => Calls::Loop(1),
        Calls::RotateRoot(0) => Calls::RotateRoot(1),
        c => c,
    };
    let n = u64::from(calls.count());
    let job = CollJob { spec: *spec, calls };
    let out = simulate(&job, net, Options::default())?;
    Ok(Ps(out.makespan.0 / n))
}

#[cfg(test)]
/// The simulated time of one call of `spec` on `net`: from the common start to
/// the last rank's completion (what the window scheme measures). The entry point
/// for the engine's tests.
pub fn predict(spec: &CollSpec, net: &Network) -> Result<Ps, SimError> {
    spec.validate()?;
    Ok(simulate(&CollJob::single(*spec), net, Options::default())?.makespan)
}

#[cfg(test)]
impl SchemeTimes {
    /// `looped / single - 1`: the loop scheme's relative error (negative: it
    /// underestimates).
    pub fn loop_error(&self) -> f64 {
        rel(self.looped, self.single)
    }

    /// `rotated / single - 1`.
    pub fn rotate_error(&self) -> f64 {
        rel(self.rotated, self.single)
    }
}

#[cfg(test)]
fn rel(a: Ps, b: Ps) -> f64 {
    a.0 as f64 / b.0 as f64 - 1.0
}
