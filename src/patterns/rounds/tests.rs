//! The window-round driver on the virtual-time world: rounds, records at rank 0,
//! agreement, the decision and its window, on clocks whose truth is exact.

use super::*;
use crate::sync::sim::{self, NetModel, SIM_HZ};

const PATTERN: &str = "test rounds";

fn ticks(ns: f64) -> u64 {
    (ns * SIM_HZ / 1e9) as u64
}

fn rounds(calls: usize, max_rounds: usize, window_ns: f64) -> WindowRounds {
    let model = ClockModel::IDENTITY;
    WindowRounds::new(
        PATTERN,
        model,
        WaitMode::Poll,
        max_rounds,
        calls,
        ticks(window_ns),
    )
}

#[test]
fn calls_that_fit_are_valid_and_their_records_reach_rank_0_by_rank() {
    let out = sim::run(&[None, None, None], NetModel::default(), |mut r| {
        let rank = r.control.rank() as u64;
        let mut rounds = rounds(4, 5, 200_000.0);
        rounds.init_round(&r.clock, &mut r.control).unwrap();
        for k in 0..4 {
            let slot = rounds.start(&r.clock, 0);
            r.clock.advance_ns(10_000.0);
            rounds.stop(&r.clock, &slot, &[rank, k, 7]);
        }
        let round = rounds.end_round(&mut r.control).unwrap();
        let asked = std::cell::Cell::new(0);
        let more = rounds
            .decide(&mut r.control, || {
                asked.set(asked.get() + 1);
                Verdict {
                    short: false,
                    invalid: 0,
                    op_ticks: 0.0,
                }
            })
            .unwrap();
        (
            round,
            more,
            asked.get(),
            rounds.valid_calls(),
            rounds.rounds(),
        )
    });
    for (rank, (round, more, asked, valid, count)) in out.iter().enumerate() {
        assert_eq!(round.statuses, vec![SlotStatus::Valid; 4], "rank {rank}");
        assert!(!more);
        assert_eq!((*valid, *count), (4, 1));
        assert_eq!(
            *asked,
            usize::from(rank == 0),
            "only rank 0 judges the round"
        );
        if rank == 0 {
            let expected: Vec<Vec<Vec<u64>>> = (0..3)
                .map(|r| (0..4).map(|k| vec![r, k, 7]).collect())
                .collect();
            assert_eq!(round.records, expected);
        } else {
            assert!(round.records.is_empty());
        }
    }
}

#[test]
fn a_call_that_overruns_on_one_rank_is_invalid_on_every_rank() {
    let out = sim::run(&[None, None], NetModel::default(), |mut r| {
        let slow = r.control.rank() == 1;
        let mut rounds = rounds(3, 5, 100_000.0);
        rounds.init_round(&r.clock, &mut r.control).unwrap();
        for k in 0..3 {
            let slot = rounds.start(&r.clock, 0);
            let ns = if slow && k == 1 { 150_000.0 } else { 10_000.0 };
            r.clock.advance_ns(ns);
            rounds.stop_span(&r.clock, &slot);
        }
        let round = rounds.end_round(&mut r.control).unwrap();
        (round, rounds.valid_calls())
    });
    for (round, valid) in &out {
        assert_eq!(round.statuses[1], SlotStatus::Overran);
        assert_eq!(*valid, 1, "the call after the overrun starts late");
    }
    let spans = spans_of(&out[0].0.records);
    assert_eq!(spans.len(), 2);
    let ns = |t: u64| t as f64 * 1e9 / SIM_HZ;
    assert!(ns(spans[1][1].ticks()) >= 150_000.0, "{:?}", spans[1][1]);
    assert!(ns(spans[0][0].ticks()) >= 10_000.0, "{:?}", spans[0][0]);
}

#[test]
fn a_short_verdict_runs_rounds_on_the_adapted_window_until_none_are_left() {
    let out = sim::run(&[None, None], NetModel::default(), |mut r| {
        let mut rounds = rounds(2, 3, 100_000.0);
        let mut seen = Vec::new();
        let mut more = true;
        while more {
            rounds.init_round(&r.clock, &mut r.control).unwrap();
            seen.push(rounds.window_ticks());
            for _ in 0..2 {
                let slot = rounds.start(&r.clock, 0);
                rounds.stop(&r.clock, &slot, &[]);
            }
            rounds.end_round(&mut r.control).unwrap();
            // Every call invalid, short: the window doubles (SKaMPI's rule).
            more = rounds
                .decide(&mut r.control, || Verdict {
                    short: true,
                    invalid: 2,
                    op_ticks: 1.0,
                })
                .unwrap();
        }
        (seen, rounds.window_ticks(), rounds.rounds())
    });
    let w = ticks(100_000.0);
    for (seen, last, count) in out {
        assert_eq!(
            seen,
            vec![w, 2 * w, 4 * w],
            "every rank runs rank 0's window"
        );
        assert_eq!(
            (last, count),
            (4 * w, 3),
            "the last round's window is reported"
        );
    }
}

#[test]
fn records_of_another_length_name_the_pattern_and_the_rank() {
    let out = sim::run(&[None, None, None], NetModel::default(), |mut r| {
        let span = Span {
            start: Ticks(1),
            end: Ticks(2),
        };
        let n = if r.control.rank() == 2 { 1 } else { 2 };
        gather_spans(&mut r.control, PATTERN, &vec![span; n]).map_err(|e| e.to_string())
    });
    assert_eq!(
        out[0].as_ref().unwrap_err(),
        "test rounds: rank 2 sent 16 bytes of records, expected 32"
    );
    assert_eq!(out[1].as_ref().unwrap(), &Vec::<Vec<Span>>::new());
}
