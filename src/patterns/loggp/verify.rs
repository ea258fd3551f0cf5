//! Measures what a [`Plan`] asks for (issue 13: confirmation and location of
//! protocol changes, [`crate::model::refine`]): round after round, rank 0 asks
//! every pair's plan for its sizes, broadcasts them, and every rank measures them
//! with [`super::run`] (the same PRTT pattern as the sweep, with its
//! re-measurement of disturbed sizes); rank 0 feeds each pair's plan its readings.
//! An empty round ends the experiment on every rank.

use super::{run, Params, PatternError, Point};
use crate::clock::Clock;
use crate::model::confirm::Reading;
use crate::model::refine::Plan;
use ngauge_transport::{Control, Transport};

/// Absolute slack of the "still disturbed" test of a point, us (as the pattern's).
const SLACK_US: f64 = super::DISTURBED_SLACK_US;

/// The reading of a point for the confirmation: the lower quartile of each
/// series' repetitions (robust to a host that slows up to three quarters of them,
/// where the median is not), the derived series as [`Reading::of`] takes them from
/// the medians. Disturbed when a PRTT's lower quartile exceeds 1.5 times its
/// minimum plus the pattern's slack: even the better repetitions were slowed.
pub fn reading(point: &Point) -> Reading {
    let s = &point.samples;
    let q = |v: &[f64]| lower_quartile(v);
    let (p1, n0, nd) = (q(&s.prtt_1_0_us), q(&s.prtt_n_0_us), q(&s.prtt_n_d_us));
    let (Some(p1), Some(n0), Some(nd), Some(or)) = (p1, n0, nd, q(&s.or_us)) else {
        // No repetitions kept (a point built from summaries): the medians.
        return Reading::of(&point.sample(), point.n, false);
    };
    let disturbed = [
        (&s.prtt_1_0_us, p1),
        (&s.prtt_n_0_us, n0),
        (&s.prtt_n_d_us, nd),
    ]
    .iter()
    .any(|(v, q)| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        *q > 1.5 * min + SLACK_US
    });
    let sample = crate::model::loggp::Sample {
        size: point.size,
        prtt_1_0_us: p1,
        prtt_n_0_us: n0,
        prtt_n_d_us: nd,
        d_us: point.d_us,
        or_us: or,
        send_late_us: q(&s.send_late_us),
    };
    Reading::of(&sample, point.n, disturbed)
}

/// The lower quartile (the value of rank `(len - 1) / 4`); `None` when empty.
fn lower_quartile(values: &[f64]) -> Option<f64> {
    let sorted = crate::stats::sorted(values);
    sorted.get(sorted.len().checked_sub(1)? / 4).copied()
}

/// Runs the plans: `plans` is `Some` on rank 0 (one per pair, in the order of
/// [`super::run`]'s results) and `None` elsewhere. `params` gives everything but
/// the sizes. Every rank must call it, with the same `params`.
pub fn verify<C: Clock, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    params: &Params,
    mut plans: Option<&mut [Plan]>,
) -> Result<(), PatternError> {
    let rank = control.rank();
    loop {
        let mut spans = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        if let Some(plans) = plans.as_deref_mut() {
            for plan in plans.iter_mut() {
                let start = sizes.len();
                sizes.extend(plan.next().unwrap_or_default());
                spans.push(start..sizes.len());
            }
        }
        let mut data: Vec<u8> = sizes.iter().flat_map(|s| s.to_le_bytes()).collect();
        control.broadcast(0, &mut data)?;
        if data.len() % 8 != 0 {
            return Err(PatternError::Malformed { rank: 0 });
        }
        let sizes: Vec<u64> = data
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if sizes.is_empty() {
            return Ok(());
        }
        let round = Params {
            sizes,
            ..params.clone()
        };
        let results = run(clock, transport, control, &round, |_, _| {})?;
        if rank != 0 {
            continue;
        }
        if let Some(plans) = plans.as_deref_mut() {
            for ((plan, span), pair) in plans.iter_mut().zip(spans).zip(&results) {
                if span.is_empty() {
                    continue;
                }
                let readings: Vec<Reading> = pair.points[span].iter().map(reading).collect();
                plan.feed(&readings);
            }
        }
    }
}
