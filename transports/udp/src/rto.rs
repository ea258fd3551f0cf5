//! The retransmission timeout (RTO): RFC 6298's estimator ("Computing TCP's
//! Retransmission Timer", Paxson, Allman, Chu, Sargent, 2011), with a floor and a
//! ceiling for a benchmark on a LAN instead of the Internet's 1 s and 60 s.
//!
//! A round trip is the time from the start of a blocking receive that waits for
//! an answer to the arrival of that answer (see `datagram::recv_direct`): what
//! the timer is compared with. Karn's algorithm (RFC 6298 sec. 3) is the caller's:
//! no round trip from a wait during which anything was sent again, nor from an
//! answer that was itself a copy sent again.
//!
//! Where we depart from the RFC, and why:
//!
//! - (2.1) the RTO before the first sample is [`crate::UdpOptions::retransmit_after`]
//!   (50 ms by default), not 1 s: a benchmark's peer is on the same LAN, and the
//!   first sample comes with the first round trip.
//! - (2.4) the floor is [`MIN_RTO`], not 1 s. The RFC's floor guards the Internet
//!   against spurious retransmissions that would add load; here a spurious
//!   retransmission costs one duplicate datagram (counted), while a 1 s floor
//!   would make a 5 % lossy link several hundred times slower than a loss-free
//!   one at a 20 us round trip.
//! - (2.5) the ceiling is [`MAX_RTO`], 1 s, not 60 s: a waiting rank gives up
//!   after its peer timeout anyway, and it should ask a silent peer again at
//!   least once a second until then.
//! - The measurement R of rules 2.2 and 2.3 is not one round trip but the median
//!   of [`GROUP`] consecutive ones ([`Rto::observe`]). The RFC's estimator assumes
//!   that round trips vary with the path; on a host shared by more runnable
//!   processes than cores they vary with the scheduler: most round trips take
//!   microseconds and one in a few hundred takes a whole time slice (4 to 50 ms,
//!   the peer was descheduled). One such round trip fed to rule 2.3 raises RTTVAR
//!   by a quarter of it, and with K = 4 the RTO by about its whole length, for
//!   hundreds of round trips (RTTVAR decays by 3/4 per sample): measured with
//!   5 % injected loss on a loaded 2-core host, the RTO sat at 10 to 50 ms
//!   instead of 200 us, every loss waited that long, and a loggp run took 5 to
//!   100 times its lossless time. The median of a group ignores up to
//!   `GROUP / 2` such outliers and still follows a path that really slows down
//!   (when most of the group does). A spurious retransmission, when the peer
//!   was descheduled for longer than the RTO, costs one duplicate datagram and
//!   its answer.
//! - The backed-off RTO collapses to the estimate not only with a new measurement
//!   (RFC 6298 5.7, the note after it) but with any in-order answer that was not
//!   sent again ([`Rto::collapse`]): a measurement comes every [`GROUP`] round
//!   trips, and a backoff kept until the next one would make every later loss
//!   cost two or four RTOs.

use std::time::Duration;

/// Lowest RTO (replaces RFC 6298's 1 s of rule 2.4; see the module docs).
pub(crate) const MIN_RTO: Duration = Duration::from_micros(200);
/// Highest RTO, also the cap of the backoff (rule 2.5 allows a cap of at least
/// 60 s; see the module docs).
pub(crate) const MAX_RTO: Duration = Duration::from_secs(1);
/// Round trips per measurement: the estimator takes the median of each group of
/// this many (see the module docs).
pub(crate) const GROUP: usize = 8;
/// Once the first measurement is made, one blocking receive in this many is timed
/// (each costs two clock reads; the estimator needs a handful of round trips per
/// second, not every one). Before it, every one is, so that the initial RTO
/// gives way after [`GROUP`] round trips.
pub(crate) const SAMPLE_EVERY: u32 = 8;
/// Clock granularity G of rule 2.2: `Instant` counts nanoseconds, but a wait is
/// not timed finer than the microseconds `poll(2)` and `SO_RCVTIMEO` sleep in.
const GRANULARITY: Duration = Duration::from_micros(1);
/// K of rule 2.2.
const K: u32 = 4;

/// One peer's retransmission timer: the smoothed round trip, its variation, and
/// the current (possibly backed-off) timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rto {
    /// SRTT and RTTVAR, once a sample was taken.
    estimate: Option<(Duration, Duration)>,
    /// The timeout the estimate gives (or the initial one), within the bounds.
    base: Duration,
    /// `base` after the backoffs since the last collapse.
    current: Duration,
    /// Round trips observed since the last measurement (the first `filled`).
    group: [Duration; GROUP],
    filled: usize,
    /// Samples and collapses change nothing (unit tests that need a fixed timer).
    pinned: bool,
}

impl Rto {
    /// The timer before any sample: `initial`, within [`MIN_RTO`] and [`MAX_RTO`]
    /// (RFC 6298 (2.1), with our initial value).
    pub(crate) fn new(initial: Duration) -> Rto {
        let base = initial.clamp(MIN_RTO, MAX_RTO);
        Rto {
            estimate: None,
            base,
            current: base,
            group: [Duration::ZERO; GROUP],
            filled: 0,
            pinned: false,
        }
    }

    /// A timer that ignores samples: `rto` and its backoffs (for unit tests whose
    /// injected losses must not be shifted by a spurious retransmission).
    #[cfg(test)]
    pub(crate) fn pinned(rto: Duration) -> Rto {
        Rto {
            pinned: true,
            ..Rto::new(rto)
        }
    }

    /// The timeout to wait for now.
    pub(crate) fn get(&self) -> Duration {
        self.current
    }

    /// Whether a measurement was made (the initial RTO has given way).
    pub(crate) fn measured(&self) -> bool {
        self.estimate.is_some()
    }

    /// The smoothed round trip, once measured.
    #[cfg(test)]
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.estimate.map(|(srtt, _)| srtt)
    }

    /// One round trip `r`; every [`GROUP`] of them, their median is a measurement
    /// for [`Rto::sample`] (see the module docs).
    pub(crate) fn observe(&mut self, r: Duration) {
        self.group[self.filled] = r;
        self.filled += 1;
        if self.filled == GROUP {
            self.filled = 0;
            self.group.sort_unstable();
            // The lower median: at least half of the group took no longer.
            self.sample(self.group[GROUP / 2 - 1]);
        }
    }

    /// Takes the measurement `r` (RFC 6298 2.2, 2.3).
    fn sample(&mut self, r: Duration) {
        if self.pinned {
            return;
        }
        let (srtt, rttvar) = match self.estimate {
            // (2.2) the first measurement R: SRTT <- R, RTTVAR <- R/2.
            None => (r, r / 2),
            // (2.3) a later measurement R', with alpha = 1/8 and beta = 1/4:
            //   RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
            //   SRTT <- (1 - alpha) * SRTT + alpha * R'
            // RTTVAR is updated with the SRTT from before this sample.
            Some((srtt, rttvar)) => {
                let deviation = srtt.abs_diff(r);
                (srtt * 7 / 8 + r / 8, rttvar * 3 / 4 + deviation / 4)
            }
        };
        self.estimate = Some((srtt, rttvar));
        // (2.2)/(2.3) RTO <- SRTT + max(G, K * RTTVAR), then (2.4) the floor and
        // (2.5) the ceiling (ours, see the module docs).
        self.base = (srtt + (rttvar * K).max(GRANULARITY)).clamp(MIN_RTO, MAX_RTO);
        // A new measurement collapses the backoff (the note after rule 5.7).
        self.current = self.base;
    }

    /// The timer expired: (5.5) RTO <- RTO * 2, bounded by (2.5)'s maximum.
    pub(crate) fn backoff(&mut self) {
        self.current = (self.current * 2).min(MAX_RTO);
    }

    /// An answer arrived in order without having been sent again: the path works
    /// at the estimated round trip, so the backoff ends (see the module docs).
    pub(crate) fn collapse(&mut self) {
        if self.pinned {
            return;
        }
        self.current = self.base;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Whether `rto` was measured and its timeout is what rules 2.2-2.5 give for
    /// its estimate (or a backoff of that).
    pub(crate) fn follows_its_estimate(rto: &Rto) -> bool {
        rto.estimate.is_some_and(|(srtt, rttvar)| {
            let base = (srtt + (rttvar * K).max(GRANULARITY)).clamp(MIN_RTO, MAX_RTO);
            rto.base == base && rto.current >= base
        })
    }

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn before_any_sample_the_initial_value_is_used_within_the_bounds() {
        assert_eq!(Rto::new(Duration::from_millis(50)).get(), 50_000 * US);
        assert_eq!(Rto::new(Duration::ZERO).get(), MIN_RTO);
        assert_eq!(Rto::new(Duration::from_secs(9)).get(), MAX_RTO);
    }

    #[test]
    fn first_sample_sets_srtt_and_half_of_it_as_rttvar() {
        // R = 1000 us: SRTT = 1000, RTTVAR = 500, RTO = 1000 + 4 * 500.
        let mut rto = Rto::new(Duration::from_millis(50));
        rto.sample(1000 * US);
        assert_eq!(rto.srtt(), Some(1000 * US));
        assert_eq!(rto.get(), 3000 * US);
    }

    #[test]
    fn later_samples_follow_rule_2_3_with_the_old_srtt_in_rttvar() {
        // After R = 1000: SRTT 1000, RTTVAR 500. R' = 2000:
        //   RTTVAR = 3/4 * 500 + 1/4 * |1000 - 2000| = 375 + 250 = 625
        //   SRTT = 7/8 * 1000 + 1/8 * 2000 = 875 + 250 = 1125
        //   RTO = 1125 + 4 * 625 = 3625
        let mut rto = Rto::new(Duration::from_millis(50));
        rto.sample(1000 * US);
        rto.sample(2000 * US);
        assert_eq!(rto.srtt(), Some(1125 * US));
        assert_eq!(rto.get(), 3625 * US);
    }

    #[test]
    fn steady_samples_converge_to_the_round_trip_and_the_floor_holds() {
        let mut rto = Rto::new(Duration::from_millis(50));
        for _ in 0..200 {
            rto.sample(20 * US);
        }
        assert_eq!(rto.srtt(), Some(20 * US));
        // RTTVAR decays towards 0: SRTT + max(G, 4 * RTTVAR) is below the floor.
        assert_eq!(rto.get(), MIN_RTO);
    }

    #[test]
    fn backoff_doubles_up_to_the_ceiling_and_a_sample_or_collapse_ends_it() {
        let mut rto = Rto::new(Duration::from_millis(50));
        rto.sample(1000 * US);
        rto.backoff();
        assert_eq!(rto.get(), 6000 * US);
        rto.backoff();
        assert_eq!(rto.get(), 12_000 * US);
        for _ in 0..20 {
            rto.backoff();
        }
        assert_eq!(rto.get(), MAX_RTO);
        rto.collapse();
        assert_eq!(rto.get(), 3000 * US);
        rto.backoff();
        rto.sample(1000 * US);
        // 7/8 * 1000 + 1/8 * 1000 = 1000; 3/4 * 500 + 0 = 375: 1000 + 1500.
        assert_eq!(rto.get(), 2500 * US);
    }

    #[test]
    fn a_measurement_is_the_median_of_a_group_and_outliers_do_not_move_it() {
        // Three descheduled round trips of 30 ms among five of 5 us: the first
        // measurement is 5 us (RTO at the floor), as if the outliers never were.
        let mut rto = Rto::new(Duration::from_millis(50));
        for r in [5, 30_000, 5, 5, 30_000, 5, 30_000, 5] {
            assert_eq!(rto.srtt(), None, "no measurement before a full group");
            rto.observe(r * US);
        }
        assert_eq!(rto.srtt(), Some(5 * US));
        assert_eq!(rto.get(), MIN_RTO);
        // A path that really slowed down (the whole group) moves it.
        for _ in 0..GROUP {
            rto.observe(2000 * US);
        }
        // SRTT = 7/8 * 5 + 1/8 * 2000 = 254.375; RTTVAR = 3/4 * 2.5 + 1/4 * 1995.
        assert_eq!(rto.srtt(), Some(Duration::from_nanos(254_375)));
        assert_eq!(rto.get(), Duration::from_nanos(254_375 + 4 * 500_625));
    }

    #[test]
    fn a_large_sample_is_capped() {
        let mut rto = Rto::new(Duration::from_millis(50));
        rto.sample(Duration::from_secs(5));
        assert_eq!(rto.get(), MAX_RTO);
    }
}
