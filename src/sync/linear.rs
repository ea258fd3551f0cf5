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
//! Algorithm 8 puts an `MPI_Barrier` before each pair; we leave it out on purpose. It
//! lines the pair up for its first ping-pong, but here every exchange is timed on its
//! own: rank `i`'s first ping waits in the transport until the root has finished with
//! rank `i - 1`, and that one exchange with a long round trip widens no SKaMPI bracket
//! (intervals are intersected) and is never the min-RTT one. The barriers would cost
//! `p - 1` control operations on every rank and buy nothing.

use super::model::ClockModel;
use super::{from_root, offset_model, Effort, SyncError, SyncOptions};
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
    from_root(clock, t, control, 1, |clock, t, wire| {
        offset_model(clock, t, wire, 0, options)
    })
}
