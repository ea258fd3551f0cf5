//! Clock synchronization: every rank learns a model that maps its local ticks to
//! rank 0's time (the global time), so that ranks can start operations together
//! (window-based starts) and compare timestamps taken on different clocks.
//!
//! Methods, from `../shared/papers/`:
//!
//! | `--sync` | method | rounds | drift |
//! |---|---|---|---|
//! | `linear` | SKaMPI: root with each rank (Hunold & Carpen-Amarie, Algorithms 7, 8) | O(p) | no |
//! | `logp` | Netgauge/NBCBench: power-of-two tree plus remainder step (Hoefler et al., accurately measuring collectives, sec. 3.2, Fig. 7; Hunold Algorithm 11) | O(log p) | no |
//! | `jk` | Jones & Koenig: root learns a line per rank from fit points (Hunold sec. 4.3, Algorithm 15) | O(p) | yes |
//! | `hca` | Hunold & Carpen-Amarie: lines learned pairwise in the log p tree and merged (eq. 1), intercepts re-measured against the root (sec. 4.4, Algorithms 2-4) | O(log p) + O(p) short | yes |
//!
//! The pairwise estimators they build on are in [`pairwise`]; the model in [`model`];
//! the window-based start that uses the result in [`window`]; the injected test clock
//! in [`skew`]; the spin-then-sleep receives for more ranks than cores in [`spin`]; a
//! deterministic virtual-time world for tests in `sim` (`tests_sim.rs`).
//!
//! # Design decisions
//!
//! **Exchanges run over the data transport, never the control channel.** The offset
//! estimate is only as good as the round trip it is taken over; the control channel
//! is a blocking, general-purpose path and would measure itself. Control calls
//! (barrier, broadcast, gather) separate the phases only: before and after the sync,
//! between the rounds of the tree and the pairs of a root-with-each-rank loop, to
//! collect models.
//!
//! **The modelled rank initiates.** In every algorithm the rank whose clock is being
//! modelled sends the pings and computes its own offset to its reference (Jones &
//! Koenig and HCA do this; Netgauge's tree lets the reference measure instead, which
//! is equivalent). So one responder loop ([`pairwise::respond`]) serves every
//! estimator, and a rank always ends up holding its own model.
//!
//! **Everything is in ticks** (see [`model`]): rates enter only in reports.
//!
//! **Generic over [`Clock`] and [`Transport`]**, so unit tests run every algorithm on
//! skewed virtual clocks (`sim`, for tests only) whose truth is exact.

pub mod hca;
pub mod jk;
pub mod linear;
pub mod logp;
pub mod model;
pub mod pairwise;
pub mod skew;
pub mod spin;
pub mod window;

pub use model::{ClockModel, GlobalClock};

use crate::clock::{Clock, Ticks};
use ngauge_transport::{Control, ControlError, Rank, Transport, TransportError};
use pairwise::{defaults, Wire};

/// What went wrong during a synchronization.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The data transport failed (names the peer). Its text is in this error's
    /// (not a source as well: a chain printed in full would say it twice).
    #[error("clock sync: {0}")]
    Transport(TransportError),
    /// The control channel failed (names the rank); its text is in this error's.
    #[error("clock sync: {0}")]
    Control(ControlError),
    /// A peer sent something that does not follow the sync protocol.
    #[error("clock sync: rank {peer} broke the protocol: {detail}")]
    Protocol {
        /// The peer.
        peer: Rank,
        /// What was wrong.
        detail: String,
    },
    /// No drift model could be fitted.
    #[error("clock sync: cannot fit a drift model against rank {peer}: {detail}")]
    Fit {
        /// The reference rank.
        peer: Rank,
        /// Why.
        detail: String,
    },
    /// Options that cannot work.
    #[error("clock sync: {0}")]
    Options(String),
    /// A bug in ngauge.
    #[error("clock sync: internal error: {0}")]
    Internal(String),
}

impl From<TransportError> for SyncError {
    fn from(e: TransportError) -> Self {
        SyncError::Transport(e)
    }
}

impl From<ControlError> for SyncError {
    fn from(e: ControlError) -> Self {
        SyncError::Control(e)
    }
}

crate::names::named_enum! {
    /// The synchronization algorithm.
    pub enum Algorithm("sync algorithm") {
        /// SKaMPI: offsets, root with each rank in turn.
        Linear = "linear",
        /// Netgauge: offsets in a power-of-two tree, O(log p) rounds.
        Logp = "logp",
        /// Jones & Koenig: drift models, root with each rank.
        Jk = "jk",
        /// Hunold & Carpen-Amarie: drift models in the log p tree, intercepts from root.
        Hca = "hca",
    }
}

impl Algorithm {
    /// Whether the algorithm learns a drift.
    pub fn models_drift(self) -> bool {
        matches!(self, Algorithm::Jk | Algorithm::Hca)
    }
}

crate::names::named_enum! {
    /// How one offset between two clocks is measured.
    pub enum Estimator("offset estimator") {
        /// Hoefler's minimal RTT with the "N consecutive no-improvement" stop.
        MinRtt = "minrtt",
        /// SKaMPI's `[td_min, td_max]` bracket of a fixed number of ping-pongs.
        Skampi = "skampi",
    }
}

/// Parameters of a synchronization; [`SyncOptions::new`] fills in the papers'
/// defaults.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SyncOptions {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Offset estimator for `linear`, `logp` and HCA's intercepts; `None` picks each
    /// method's own (SKaMPI for `linear` and `hca`, min-RTT for `logp`).
    pub estimator: Option<Estimator>,
    /// Fit points per drift model (`n_fitpts`, default 1000).
    pub fitpoints: usize,
    /// Ping-pongs per fit point (`n_exchanges`, default 100; for `jk` see
    /// [`defaults::JK_EXCHANGES`]).
    pub exchanges: usize,
    /// Hoefler's `N` for the min-RTT estimator (default 100).
    pub stop_after: usize,
    /// Cap on one min-RTT measurement.
    pub max_exchanges: usize,
    /// Ping-pongs of one SKaMPI bracket (default 100).
    pub skampi_pingpongs: usize,
}

impl SyncOptions {
    /// `algorithm` with the papers' defaults.
    pub fn new(algorithm: Algorithm) -> Self {
        SyncOptions {
            algorithm,
            estimator: None,
            fitpoints: defaults::FITPOINTS,
            exchanges: match algorithm {
                Algorithm::Jk => defaults::JK_EXCHANGES,
                _ => defaults::EXCHANGES,
            },
            stop_after: defaults::STOP_AFTER,
            max_exchanges: defaults::MAX_EXCHANGES,
            skampi_pingpongs: defaults::SKAMPI_PINGPONGS,
        }
    }

    /// The offset estimator in effect.
    pub fn offset_estimator(&self) -> Estimator {
        self.estimator.unwrap_or(match self.algorithm {
            Algorithm::Logp => Estimator::MinRtt,
            _ => Estimator::Skampi,
        })
    }

    /// Rejects parameters no measurement can work with.
    pub fn validate(&self) -> Result<(), SyncError> {
        let fail = |what: &str| Err(SyncError::Options(what.to_string()));
        if self.algorithm.models_drift() && self.fitpoints < 2 {
            return fail("a drift model needs at least 2 fit points");
        }
        if self.exchanges == 0 {
            return fail("a fit point needs at least 1 exchange");
        }
        if self.stop_after == 0 || self.max_exchanges == 0 || self.skampi_pingpongs == 0 {
            return fail("an offset measurement needs at least 1 exchange");
        }
        Ok(())
    }
}

/// What one rank did during a synchronization, and what went wrong on the way.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Effort {
    /// Ping-pong exchanges this rank took part in.
    pub exchanges: usize,
    /// SKaMPI brackets this rank measured whose bounds crossed, and which it replaced
    /// by a min-RTT measurement ([`pairwise::bracket_or_min_rtt`]).
    pub crossed_brackets: usize,
    /// Drift models this rank fitted whose slope was not kept
    /// ([`pairwise::fit_model`]: unresolved or implausible).
    pub drifts_dropped: usize,
    /// The largest of those slopes, with what its fit saw.
    pub dropped_drift: Option<pairwise::DroppedDrift>,
}

impl Effort {
    /// `n` exchanges, nothing wrong.
    pub fn exchanges(n: usize) -> Self {
        Effort {
            exchanges: n,
            ..Effort::default()
        }
    }
}

impl std::ops::AddAssign for Effort {
    fn add_assign(&mut self, other: Effort) {
        self.exchanges += other.exchanges;
        self.crossed_brackets += other.crossed_brackets;
        self.drifts_dropped += other.drifts_dropped;
        self.dropped_drift = match (self.dropped_drift, other.dropped_drift) {
            (Some(a), Some(b)) if b.fitted.abs() > a.fitted.abs() => Some(b),
            (a, b) => a.or(b),
        };
    }
}

/// What one rank knows after a synchronization.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SyncOutcome {
    /// This rank's clock relative to rank 0 (the identity on rank 0).
    pub model: ClockModel,
    /// Local reading after the opening barrier.
    pub started: Ticks,
    /// Local reading after the closing barrier.
    pub finished: Ticks,
    /// What this rank did on the way: exchanges, crossed brackets, dropped
    /// drifts.
    pub effort: Effort,
}

impl SyncOutcome {
    /// Duration of the synchronization on this rank, in its ticks.
    pub fn duration_ticks(&self) -> u64 {
        self.finished.since(self.started)
    }
}

/// Synchronizes this rank's clock with rank 0's. Collective: every rank calls it with
/// the same options. The duration runs from the opening to the closing barrier, so at
/// rank 0 it covers the whole job's synchronization.
pub fn synchronize<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    options: &SyncOptions,
) -> Result<SyncOutcome, SyncError> {
    options.validate()?;
    if transport.rank() != control.rank() || transport.size() != control.size() {
        return Err(SyncError::Internal(format!(
            "transport is rank {} of {}, control rank {} of {}",
            transport.rank(),
            transport.size(),
            control.rank(),
            control.size()
        )));
    }
    if !transport.capabilities().reliable {
        return Err(SyncError::Options(format!(
            "the {} transport may lose messages, and clock sync needs every message delivered; use a reliable transport (-t tcp)",
            transport.name()
        )));
    }
    control.barrier()?;
    let started = clock.now();
    let (model, effort) = match options.algorithm {
        Algorithm::Linear => linear::run(clock, transport, control, options)?,
        Algorithm::Logp => logp::run(clock, transport, control, options)?,
        Algorithm::Jk => jk::run(clock, transport, control, options)?,
        Algorithm::Hca => hca::run(clock, transport, control, options)?,
    };
    control.barrier()?;
    let finished = clock.now();
    Ok(SyncOutcome {
        model,
        started,
        finished,
        effort,
    })
}

/// One offset of this rank's clock (as `clock` reads it) relative to `peer`'s, with
/// `estimator`: `(local - peer in ticks, the local reading it holds at, effort)`. A
/// SKaMPI bracket whose bounds crossed is replaced by a min-RTT measurement and
/// counted in the effort.
pub(crate) fn measure_offset<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    estimator: Estimator,
    options: &SyncOptions,
) -> Result<(f64, Ticks, Effort), SyncError> {
    let min_rtt = |m: pairwise::MinRtt| (m.best.offset(), m.best.midpoint(), m.exchanges);
    Ok(match estimator {
        Estimator::MinRtt => {
            let (offset, at, n) = min_rtt(pairwise::min_rtt(
                clock,
                t,
                wire,
                peer,
                options.stop_after,
                options.max_exchanges,
            )?);
            (offset, at, Effort::exchanges(n))
        }
        Estimator::Skampi => {
            let (b, fallback) = pairwise::bracket_or_min_rtt(
                clock,
                t,
                wire,
                peer,
                options.skampi_pingpongs,
                options.stop_after,
                options.max_exchanges,
            )?;
            match fallback {
                None => (b.offset(), b.at, Effort::exchanges(b.exchanges)),
                Some(m) => {
                    let (offset, at, n) = min_rtt(m);
                    let effort = Effort {
                        exchanges: b.exchanges + n,
                        crossed_brackets: 1,
                        ..Effort::default()
                    };
                    (offset, at, effort)
                }
            }
        }
    })
}

/// An offset-only model from one measured offset.
pub(crate) fn offset_model<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    wire: &Wire,
    peer: Rank,
    options: &SyncOptions,
) -> Result<(ClockModel, Effort), SyncError> {
    let (offset, at, effort) =
        measure_offset(clock, t, wire, peer, options.offset_estimator(), options)?;
    Ok((
        ClockModel {
            anchor: at,
            offset_ticks: offset,
            drift: 0.0,
        },
        effort,
    ))
}

/// The root against every other rank in rank order, one whole pairwise measurement
/// each (SKaMPI's loop, Hunold & Carpen-Amarie Algorithm 8, with its barrier before
/// each pair): the root serves rank `k`'s `measure` over one wire while every other
/// rank waits in a control-plane barrier. Returns this rank's model relative to the
/// root (the identity at the root) and its effort.
pub(crate) fn from_root_in_turn<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    measure: impl FnOnce(&C, &mut T, &Wire) -> Result<(ClockModel, Effort), SyncError>,
) -> Result<(ClockModel, Effort), SyncError> {
    let wire = Wire::new(t, 0)?;
    let turn = in_turn(clock, t, control, &wire, measure)?;
    wire.free(t)?;
    Ok(match turn {
        Turn::Served(exchanges) => (ClockModel::IDENTITY, Effort::exchanges(exchanges)),
        Turn::Measured(result) => result,
    })
}

/// What [`in_turn`] leaves on a rank.
pub(crate) enum Turn<R> {
    /// At the root: the exchanges it served.
    Served(usize),
    /// Elsewhere: this rank's measurement.
    Measured(R),
}

/// Rank `k` runs `measure` against the root over `wire` after the ranks `1..k`,
/// each pair after a barrier, while the root serves each in rank order.
///
/// Rank `k` waits for the measurements of ranks `1..k`, which grows with `p` and
/// with the exchanges each takes. That wait belongs on the control plane, which
/// tells a busy root from a lost one by its liveness probes and hears of a rank
/// lost anywhere in the job; a data-plane receive would give up after `--timeout`
/// on a root that is alive and serving others, and learn of no other loss. The
/// waiting ranks also leave the cores to the measuring pair when ranks share cores.
pub(crate) fn in_turn<C: Clock + ?Sized, T: Transport + ?Sized, R>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    wire: &Wire,
    measure: impl FnOnce(&C, &mut T, &Wire) -> Result<R, SyncError>,
) -> Result<Turn<R>, SyncError> {
    let me = control.rank();
    let mut served = 0;
    let mut measure = Some(measure);
    let mut mine = None;
    for peer in 1..control.size() {
        control.barrier()?;
        if me == 0 {
            served += pairwise::respond(clock, t, wire, peer)?;
        } else if let Some(measure) = measure.take_if(|_| me == peer) {
            mine = Some(measure(clock, t, wire)?);
        }
    }
    Ok(mine.map_or(Turn::Served(served), Turn::Measured))
}

/// The root against every other rank in rank order, `rounds` times over (Jones &
/// Koenig's loop, Hunold & Carpen-Amarie Algorithm 15, lines 10-15): the root serves
/// one round of each rank's `measure` after the other, every other rank runs its
/// rounds against the root over one wire. Returns this rank's model relative to the
/// root (the identity at the root) and its effort.
///
/// A rank waits in the data plane between its rounds, for one round of every other
/// rank: a bounded wait, unlike [`from_root_in_turn`]'s, and a barrier per round
/// and rank would cost `rounds * (p - 1)` control operations.
pub(crate) fn from_root_interleaved<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &dyn Control,
    rounds: usize,
    measure: impl FnOnce(&C, &mut T, &Wire) -> Result<(ClockModel, Effort), SyncError>,
) -> Result<(ClockModel, Effort), SyncError> {
    let wire = Wire::new(t, 0)?;
    let result = if control.rank() == 0 {
        let mut served = 0;
        for _ in 0..rounds {
            for peer in 1..control.size() {
                served += pairwise::respond(clock, t, &wire, peer)?;
            }
        }
        (ClockModel::IDENTITY, Effort::exchanges(served))
    } else {
        measure(clock, t, &wire)?
    };
    wire.free(t)?;
    Ok(result)
}

#[cfg(test)]
#[path = "tests_sim.rs"]
pub mod sim;
#[cfg(test)]
mod tests;
