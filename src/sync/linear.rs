//! `linear`: SKaMPI's synchronization, the root with each rank in turn (Hunold &
//! Carpen-Amarie, Appendix B.1, Algorithm 8 `Compute_And_Set_Clock_Offsets`, with the
//! pairwise estimator of Algorithm 7 `SKaMPI_PingPong` by default).
//!
//! `p - 1` sequential pairwise measurements: O(p) steps. Offsets only, no drift, so the
//! global time of every rank drifts away at the rate error of its clock (Hunold
//! sec. 4.2.2, Fig. 4). Each rank measures its own offset against rank 0 (SKaMPI's
//! root measures and broadcasts; the result is the same), and the root serves the
//! ranks in rank order, as Algorithm 8's loop does.
//!
//! Algorithm 8's `MPI_Barrier` before each pair is kept, on the control plane
//! (`super::from_root_in_turn`): rank `i` waits for the root to finish with ranks
//! `1..i`, a wait that grows with `p`, and a data-plane receive would give up on a
//! root that is alive and busy after `--timeout`. The `p - 1` barriers are outside
//! every timed exchange.

use super::model::ClockModel;
use super::{from_root_in_turn, offset_model, Effort, SyncError, SyncOptions};
use crate::clock::Clock;
use ngauge_transport::{Control, Transport};

/// Runs `linear` on this rank; returns its model relative to rank 0 and its effort
/// (exchanges it took part in, brackets that crossed).
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    options: &SyncOptions,
) -> Result<(ClockModel, Effort), SyncError> {
    from_root_in_turn(clock, t, control, |clock, t, wire| {
        offset_model(clock, t, wire, 0, options)
    })
}
