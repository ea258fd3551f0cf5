//! `hca`: Hunold & Carpen-Amarie's hierarchical clock synchronization (MPI
//! benchmarking revisited, sec. 4.4, Algorithms 2-4), in its first variant ("HCA", not
//! "HCA2"): slopes hierarchically, intercepts linearly.
//!
//! 1. Drift models are learned pairwise in Netgauge's power-of-two tree plus remainder
//!    step ([`super::logp::tree`]; `Sync_Clocks_Pow2`, `Sync_Clocks_Remaining`), each
//!    pair by `Learn_Model_HCA` (Algorithm 4: fit points as in Jones & Koenig), and
//!    merged along the tree with `Merge_LMs`, equation (1) ([`ClockModel::then`]).
//!    Every round of the tree ends with a barrier on every rank, so a rank that is
//!    done early waits one round at a time (a round of 1000 x 100 ping-pongs takes
//!    seconds; waiting for all of them in one control call would outlast the
//!    launcher's timeout at a few dozen ranks).
//! 2. The merged intercepts carry the errors of every step, and regression intercepts
//!    are poorly determined anyway: from 1000 fit points the paper (sec. 4.4) finds
//!    95% confidence intervals of the slope at most 2e-8 long (a ratio of times: 0.02
//!    ppm, 20 ns of error per second of extrapolation), but of the intercept of the
//!    order of 100 ms (a time; their intercept is the line at local time 0, far
//!    outside the fit, where ours, anchored at the points' mean, is tighter). So each
//!    rank then re-measures its offset against
//!    the root with SKaMPI's estimator and moves its line through it, keeping the slope
//!    (`Compute_And_Set_All_Intercepts`, `Compute_And_Set_Intercept`, Fig. 5). These
//!    `p - 1` short measurements are O(p), but each is ~100 ping-pongs against the
//!    tree's `n_fitpts * n_exchanges`, so the tree dominates (the paper's sec. 4.5
//!    reaches the same conclusion).
//!
//! One refinement of step 2: the intercept measurement reads the local clock with the
//! learned drift already removed, so the SKaMPI bracket intersects intervals of one
//! constant offset instead of a moving one.

use super::logp::tree;
use super::model::{ClockModel, GlobalClock};
use super::pairwise::{learn_model, respond};
use super::{from_root_in_turn, measure_offset, Effort, SyncError, SyncOptions};
use crate::clock::Clock;
use ngauge_transport::{Control, Transport};

/// Runs `hca` on this rank; returns its model relative to rank 0 and its effort
/// (exchanges it took part in, brackets that crossed).
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    options: &SyncOptions,
) -> Result<(ClockModel, Effort), SyncError> {
    let (fitpoints, n_exchanges) = (options.fitpoints, options.exchanges);
    let (merged, mut effort) = tree(
        clock,
        t,
        control,
        |clock, t, wire, peer| learn_model(clock, t, wire, peer, fitpoints, n_exchanges),
        |clock, t, wire, peer| {
            let mut served = 0;
            for _ in 0..fitpoints {
                served += respond(clock, t, wire, peer)?;
            }
            Ok(served)
        },
    )?;

    // Step 2, after the tree: intercepts against the root, one rank at a time (each
    // pair after a barrier, the first one separating the phases).
    let (model, intercepts) = from_root_in_turn(clock, t, control, |clock, t, wire| {
        let anchor = clock.now();
        let drift_removed = ClockModel {
            anchor,
            offset_ticks: 0.0,
            drift: merged.drift,
        };
        let corrected = GlobalClock::new(clock, drift_removed);
        let (offset, _, n) =
            measure_offset(&corrected, t, wire, 0, options.offset_estimator(), options)?;
        // corrected(x) - root = offset for all x  <=>  x - root = offset + drift (x - anchor).
        Ok((merged.with_offset_at(anchor, offset), n))
    })?;
    effort += intercepts;
    Ok((model, effort))
}
