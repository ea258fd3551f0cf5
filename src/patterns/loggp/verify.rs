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
    plans: Option<&mut [Plan]>,
) -> Result<(), PatternError> {
    verify_while(clock, transport, control, params, plans, || true).map(|_| ())
}

/// [`verify`], with rank 0 asking `more` before each round whether to go on
/// (a time budget; the plans' unfinished candidates stay as they are). Returns
/// the rounds measured, the same on every rank.
pub fn verify_while<C: Clock, T: Transport + ?Sized>(
    clock: &C,
    transport: &mut T,
    control: &mut dyn Control,
    params: &Params,
    mut plans: Option<&mut [Plan]>,
    mut more: impl FnMut() -> bool,
) -> Result<usize, PatternError> {
    let rank = control.rank();
    let mut rounds = 0;
    loop {
        let mut spans = Vec::new();
        let mut sizes: Vec<u64> = Vec::new();
        if let Some(plans) = plans.as_deref_mut().filter(|_| more()) {
            for plan in plans.iter_mut() {
                let start = sizes.len();
                sizes.extend(plan.next_round().unwrap_or_default());
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
            return Ok(rounds);
        }
        let round = Params {
            sizes,
            warm: true,
            ..params.clone()
        };
        let results = run(clock, transport, control, &round, |_, _| {})?;
        rounds += 1;
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

/// End to end in the virtual LogGP world ([`super::sim`]): the sweep, the
/// detector's candidates, the confirmation and location rounds over the control
/// plane, on both ranks.
#[cfg(test)]
mod tests {
    use super::super::sim::{ns, world, LogGp, Network, EAGER};
    use super::super::{DelayChoice, PairsMode};
    use super::*;
    use crate::model::confirm::{ChangeKind, Undecided, Verdict};
    use crate::model::loggp::{assess, AssessOptions};
    use crate::model::refine::{Change, RefineOptions};

    fn params(sizes: Vec<u64>) -> Params {
        Params {
            sizes,
            n: 6,
            reps: 3,
            warmup: 1,
            warm: true,
            delay: DelayChoice::OneRtt,
            pairs: PairsMode::InTurn,
            attempts: 2,
        }
    }

    /// Sweeps 1-32 KiB in 1 KiB steps, plans on rank 0 from the default
    /// detector's changes, and runs the plan on both ranks.
    fn sweep_and_verify(net: &Network) -> Vec<Change> {
        let sizes: Vec<u64> = (1..=32).map(|k| k * 1024).collect();
        let params = params(sizes);
        let handles: Vec<_> = world(net)
            .into_iter()
            .map(|mut r| {
                let params = params.clone();
                std::thread::spawn(move || {
                    let results = run(
                        &r.clock,
                        &mut r.transport,
                        &mut r.control,
                        &params,
                        |_, _| {},
                    )
                    .unwrap();
                    let mut plans: Option<Vec<Plan>> = results.first().map(|pair| {
                        let samples: Vec<_> = pair.points.iter().map(Point::sample).collect();
                        let opts = AssessOptions {
                            n: params.n,
                            ..AssessOptions::default()
                        };
                        let steps = assess(&samples, &opts).unwrap().changes;
                        let readings: Vec<Reading> = pair.points.iter().map(reading).collect();
                        vec![Plan::new(&readings, &steps, RefineOptions::default())]
                    });
                    verify(
                        &r.clock,
                        &mut r.transport,
                        &mut r.control,
                        &params,
                        plans.as_deref_mut(),
                    )
                    .unwrap();
                    plans.map(|mut p| p.remove(0).finish())
                })
            })
            .collect();
        let mut out: Vec<Option<Vec<Change>>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(out[1].is_none());
        out.swap_remove(0).unwrap()
    }

    fn reported(changes: &[Change]) -> Vec<&Change> {
        changes
            .iter()
            .filter(|c| c.verdict != Verdict::Rejected)
            .collect()
    }

    /// Eager to rendezvous at 15873 B, between the sweep's 15360 and 16384: the
    /// change is confirmed and its first byte found by bisection.
    #[test]
    fn a_rendezvous_switch_is_confirmed_and_located_to_the_byte() {
        const FIRST: u64 = 15_873;
        let rendezvous = LogGp {
            os_ps: ns(2500),
            or_ps: ns(3000),
            big_g_fs: 400_000,
            rendezvous: true,
            ..EAGER
        };
        let net = Network::new(vec![(1, EAGER), (FIRST, rendezvous)]).unwrap();
        let changes = sweep_and_verify(&net);
        let [c] = &reported(&changes)[..] else {
            panic!("{changes:?}")
        };
        assert_eq!(
            (c.kind, c.verdict),
            (ChangeKind::Step, Verdict::Confirmed),
            "{c:?}"
        );
        assert_eq!((c.last_old_bytes, c.bytes), (15360, 16384));
        assert_eq!(c.first_bytes, Some(FIRST), "{c:?}");
        assert!(c.shown_by.contains(&"send_late"), "{c:?}");
    }

    /// From 12289 B a zero-copy protocol moves each byte four times faster, and
    /// its setup costs exactly what the copy saved there: the round trip and the
    /// gap bend without a step. Found as a slope-only change near 12289 B. The
    /// same switch at 20481 B is undecided (`below_floor`): over the four sizes a
    /// side its round trip's lines part by 4.3 us, against a floor of 5.0 us (a
    /// tenth of the 50 us round trip there).
    #[test]
    fn a_switch_of_the_per_byte_cost_alone_is_found() {
        for (first, verdict) in [(12_289, Verdict::Confirmed), (20_481, Verdict::Undecided)] {
            let saved = (first - 1) * (EAGER.big_g_fs - 200_000) / 1000; // ps
            let zero_copy = LogGp {
                l_ps: EAGER.l_ps + saved,
                g_ps: EAGER.g_ps + saved,
                big_g_fs: 200_000,
                ..EAGER
            };
            let net = Network::new(vec![(1, EAGER), (first, zero_copy)]).unwrap();
            let changes = sweep_and_verify(&net);
            let [c] = &reported(&changes)[..] else {
                panic!("{changes:?}")
            };
            assert_eq!((c.kind, c.verdict), (ChangeKind::Slope, verdict), "{c:?}");
            assert!(c.last_old_bytes < first && first <= c.bytes, "{c:?}");
            if verdict == Verdict::Undecided {
                assert_eq!(c.undecided, Some(Undecided::BelowFloor), "{c:?}");
                continue;
            }
            let x = c.crossing_bytes.expect("where the lines cross");
            assert!((x - first as f64).abs() < 1024.0, "{c:?}");
        }
    }

    /// One protocol: whatever the detector proposes, nothing is reported.
    #[test]
    fn one_protocol_reports_no_change() {
        let net = Network::new(vec![(1, EAGER)]).unwrap();
        let changes = sweep_and_verify(&net);
        assert!(reported(&changes).is_empty(), "{changes:?}");
    }
}
