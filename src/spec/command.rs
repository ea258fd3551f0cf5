//! [`CommandSpec`]: one measuring command with its spec. With a
//! [`crate::job::JobSpec`] and a number of ranks it is an experiment: what a
//! suite's `[[experiment]]` table names ([`crate::suite::file`]), what `ngauge
//! exec` runs, and what [`crate::experiment`] runs on a rank.

use super::{
    CollCmdSpec, EbbSpec, LateCmdSpec, LoggpSpec, MatrixSpec, NbcCmdSpec, NoiseSpec, PingpongSpec,
    RmaSpec, SyncSpec, TimerSpec,
};
use crate::sim::spec::SimulateSpec;

/// A measuring command and its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandSpec {
    /// `ngauge timer`.
    Timer(TimerSpec),
    /// `ngauge pingpong`.
    Pingpong(PingpongSpec),
    /// `ngauge loggp`.
    Loggp(LoggpSpec),
    /// `ngauge sync`.
    Sync(SyncSpec),
    /// `ngauge coll`.
    Coll(CollCmdSpec),
    /// `ngauge simulate`: the LogGP simulation of a collective, in one process
    /// (the simulated job's size is the spec's `np`).
    Simulate(SimulateSpec),
    /// `ngauge noise`.
    Noise(NoiseSpec),
    /// `ngauge late`.
    Late(LateCmdSpec),
    /// `ngauge nbc`.
    Nbc(NbcCmdSpec),
    /// `ngauge matrix`.
    Matrix(MatrixSpec),
    /// `ngauge ebb`.
    Ebb(EbbSpec),
    /// `ngauge rma`.
    Rma(RmaSpec),
}

impl CommandSpec {
    /// Every command's name, in the order of the variants.
    pub const NAMES: &'static [&'static str] = &[
        "timer", "pingpong", "loggp", "sync", "coll", "simulate", "noise", "late", "nbc", "matrix",
        "ebb", "rma",
    ];

    /// The command's name, as on the command line and as a suite's table key.
    pub fn command(&self) -> &'static str {
        match self {
            CommandSpec::Timer(_) => "timer",
            CommandSpec::Pingpong(_) => "pingpong",
            CommandSpec::Loggp(_) => "loggp",
            CommandSpec::Sync(_) => "sync",
            CommandSpec::Coll(_) => "coll",
            CommandSpec::Simulate(_) => "simulate",
            CommandSpec::Noise(_) => "noise",
            CommandSpec::Late(_) => "late",
            CommandSpec::Nbc(_) => "nbc",
            CommandSpec::Matrix(_) => "matrix",
            CommandSpec::Ebb(_) => "ebb",
            CommandSpec::Rma(_) => "rma",
        }
    }

    /// Whether the command runs in one process, without a job (its experiment's
    /// `np` is 1).
    pub fn one_process(&self) -> bool {
        matches!(self, CommandSpec::Timer(_) | CommandSpec::Simulate(_))
    }

    /// Makes the command keep every repetition in its document, for the
    /// statistics across launches (`ngauge run` asks it of every run); a
    /// simulation is deterministic, and a noise loop, `late`, `nbc`, `matrix`,
    /// `ebb` and `rma` report summaries without their repetitions: unchanged.
    pub fn keep_samples(&mut self) {
        match self {
            CommandSpec::Timer(s) => s.samples = true,
            CommandSpec::Pingpong(s) => s.samples = true,
            CommandSpec::Loggp(s) => s.samples = true,
            CommandSpec::Sync(s) => s.samples = true,
            CommandSpec::Coll(s) => s.samples = true,
            CommandSpec::Simulate(_)
            | CommandSpec::Noise(_)
            | CommandSpec::Late(_)
            | CommandSpec::Nbc(_)
            | CommandSpec::Matrix(_)
            | CommandSpec::Ebb(_)
            | CommandSpec::Rma(_) => {}
        }
    }
}
