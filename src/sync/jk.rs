//! `jk`: Jones & Koenig's drift-aware synchronization (Hunold & Carpen-Amarie,
//! sec. 4.3 and Appendix B.3, Algorithm 15 `Learn_Model`).
//!
//! Every rank learns a line `local - global = slope * local + intercept` against the
//! root from `n_fitpts` fit points, each the median offset of `n_exchanges`
//! ping-pongs, and normalizes its time with it (Algorithm 16). The root serves the
//! ranks fit point by fit point (`for idx { for r { n_exchanges } }`, lines 10-15), so
//! every rank's points spread over the whole synchronization and its slope is fitted
//! over the longest span. The intercept is the regression's (JK does not re-measure
//! it; HCA does). O(p * n_fitpts * n_exchanges) ping-pongs at the root: slow but, in
//! the paper's measurements, the most accurate after a few seconds (Figs. 7, 8).
//!
//! Alg. 15's `Sync_Clocks` starts with `warmup_rounds()` (dummy ping-pongs) and a mean
//! RTT per rank (`Compute_Rtt`, Algorithm 17) that corrects every exchange. We run
//! neither, on purpose: each exchange here is corrected by its own round trip (see
//! [`super::pairwise`]), so there is no RTT measured beforehand for a cold link to
//! spoil, and a slow first exchange or two (connection set-up, cold caches) are
//! outliers that the median of the first fit point votes out.
//!
//! `n_exchanges` defaults to 100 as for HCA, not the 20 of the paper's own JK runs
//! (Appendix C.13, C.15): see [`super::pairwise::defaults::JK_EXCHANGES`] for the
//! accuracy that 20 costs on this machine.

use super::model::ClockModel;
use super::pairwise::learn_model;
use super::{from_root_interleaved, Effort, SyncError, SyncOptions};
use crate::clock::Clock;
use ngauge_transport::{Control, Transport};

/// Runs `jk` on this rank; returns its model relative to rank 0 and its effort
/// (exchanges it took part in, brackets that crossed).
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    options: &SyncOptions,
) -> Result<(ClockModel, Effort), SyncError> {
    from_root_interleaved(clock, t, control, options.fitpoints, |clock, t, wire| {
        learn_model(clock, t, wire, 0, options.fitpoints, options.exchanges)
    })
}
