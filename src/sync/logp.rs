//! `logp`: Netgauge's O(log p) group synchronization (Hoefler et al., accurately
//! measuring collectives, sec. 3.2 and Fig. 7; Hunold & Carpen-Amarie, Appendix B.2,
//! Algorithm 11 `Sync_Clocks_Pow2` / `Sync_Clocks_Remaining`), with Hoefler's min-RTT
//! pairwise offset (sec. 3.1, Algorithm 12) by default.
//!
//! The ranks split into group 1, the largest power of two `t <= p` (ranks `0..t`), and
//! group 2 (ranks `t..p`). Group 1 synchronizes in `log2 t` rounds: in round `k`
//! (`h = 2^(k-1)`), every rank `r` with `r mod 2h == 0` pairs with `r + h`, all pairs
//! at once; `r + h` then hands `r` the models it has collected for its `h` ranks, and
//! `r` rebases them onto itself. After the last round rank 0 knows ranks `0..t`; it
//! broadcasts them (on the control channel, between the phases), and in one more round
//! every group-2 rank `r` measures against `r - t` and composes with that rank's
//! model. So `ceil(log2 p)` rounds in all, against `p - 1` for `linear`.
//!
//! **A barrier ends every round of group 1**, on every rank. A rank that has handed
//! its subtree up (or a group-2 rank) has nothing to do until the remainder step, and
//! without the barriers it would wait for all remaining rounds in the one broadcast
//! between the phases. With HCA's fit points (1000 x 100 ping-pongs) one round takes
//! seconds, so around 32 ranks that single wait outlasts the launcher's `--timeout`
//! and is reported as a lost peer. With the barriers no control call waits longer
//! than one round; they cost `log2 t` control operations, nothing against a round.
//!
//! [`tree`] is the skeleton with the pairwise step as a parameter: `logp` plugs in an
//! offset measurement, [`super::hca`] a drift model (its Algorithm 3 is this tree).

use super::model::{pack_models, unpack_models, ClockModel, MODEL_BYTES};
use super::pairwise::{respond, Wire};
use super::{offset_model, Effort, SyncError, SyncOptions};
use crate::clock::Clock;
use ngauge_transport::{Control, Rank, Transport, WaitMode};

/// Runs `logp` on this rank; returns its model relative to rank 0 and its effort
/// (exchanges it took part in, brackets that crossed).
pub fn run<C: Clock + ?Sized, T: Transport + ?Sized>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    options: &SyncOptions,
) -> Result<(ClockModel, Effort), SyncError> {
    tree(
        clock,
        t,
        control,
        |clock, t, wire, peer| offset_model(clock, t, wire, peer, options),
        |clock, t, wire, peer| respond(clock, t, wire, peer),
    )
}

/// Largest power of two not above `size` (`size >= 1`).
pub fn largest_power_of_two(size: usize) -> usize {
    1 << (usize::BITS - 1 - size.max(1).leading_zeros())
}

/// The power-of-two tree plus remainder step, with `measure` run by the modelled rank
/// against its reference (returning its model relative to it and the effort made)
/// and `serve` run by the reference.
pub fn tree<C, T, M, S>(
    clock: &C,
    t: &mut T,
    control: &mut dyn Control,
    mut measure: M,
    mut serve: S,
) -> Result<(ClockModel, Effort), SyncError>
where
    C: Clock + ?Sized,
    T: Transport + ?Sized,
    M: FnMut(&C, &mut T, &Wire, Rank) -> Result<(ClockModel, Effort), SyncError>,
    S: FnMut(&C, &mut T, &Wire, Rank) -> Result<usize, SyncError>,
{
    let (rank, size) = (control.rank(), control.size());
    let pow2 = largest_power_of_two(size);
    let wire = Wire::new(t, pow2 / 2 * MODEL_BYTES)?;
    let mut effort = Effort::default();
    // With more ranks than cores (blocking waits), the pairs of a round take turns,
    // each turn ending with a barrier: two pairs exchanging at once on shared cores
    // measure the scheduler, and one pair alone can spin while the other ranks sleep
    // (`super::spin`, issue 13).
    let one_pair_at_a_time = t.wait_mode() == WaitMode::Block;

    // Group 1: `subtree[i]` is the model of rank `rank + i` relative to this rank.
    // Every rank, in the tree or not, ends each round (each turn) with a barrier, so
    // that no control call waits for more than one round (see the module doc).
    let mut subtree = vec![ClockModel::IDENTITY];
    let mut half = 1;
    while 2 * half <= pow2 {
        let pairs = pow2 / (2 * half);
        let turns = if one_pair_at_a_time { pairs } else { 1 };
        for turn in 0..turns {
            let my_turn = !one_pair_at_a_time || rank / (2 * half) == turn;
            if my_turn && rank < pow2 && rank % (2 * half) == 0 {
                let peer = rank + half;
                effort += Effort::exchanges(serve(clock, t, &wire, peer)?);
                let bytes = wire.recv_bytes(t, peer, half * MODEL_BYTES)?;
                let list = unpack_models(&bytes, half).ok_or_else(|| SyncError::Protocol {
                    peer,
                    detail: "malformed list of clock models".into(),
                })?;
                // list[0]: peer relative to us; list[i]: peer + i relative to peer.
                let peer_model = list[0];
                subtree.push(peer_model);
                subtree.extend(list[1..].iter().map(|m| m.then(&peer_model)));
            } else if my_turn && rank < pow2 && rank % (2 * half) == half {
                // The first round where we are not a reference: we hand our subtree up
                // and are done with group 1 (later rounds only pass their barriers).
                let peer = rank - half;
                let (own, n) = measure(clock, t, &wire, peer)?;
                effort += n;
                let mut list = vec![own];
                list.extend_from_slice(&subtree[1..]);
                wire.send_bytes(t, peer, &pack_models(&list))?;
            }
            control.barrier()?;
        }
        half *= 2;
    }

    // Between the phases: rank 0 tells everybody the models of group 1.
    let mut table = if rank == 0 {
        pack_models(&subtree)
    } else {
        Vec::new()
    };
    control.broadcast(0, &mut table)?;
    let table = unpack_models(&table, pow2).ok_or_else(|| SyncError::Protocol {
        peer: 0,
        detail: "malformed table of clock models".into(),
    })?;

    // Group 2: one more round against partner `rank - pow2`.
    let remainder_pairs = size - pow2;
    let turns = if one_pair_at_a_time && remainder_pairs > 1 {
        remainder_pairs
    } else {
        1
    };
    let mut model = if rank < pow2 {
        table[rank]
    } else {
        ClockModel::IDENTITY
    };
    for turn in 0..turns {
        let my_turn = !one_pair_at_a_time || remainder_pairs <= 1 || rank % pow2 == turn;
        if my_turn {
            if rank < pow2 {
                if rank + pow2 < size {
                    effort += Effort::exchanges(serve(clock, t, &wire, rank + pow2)?);
                }
                model = table[rank];
            } else {
                let peer = rank - pow2;
                let (own, n) = measure(clock, t, &wire, peer)?;
                effort += n;
                model = own.then(&table[peer]);
            }
        }
        if turns > 1 {
            control.barrier()?;
        }
    }
    wire.free(t)?;
    Ok((model, effort))
}

#[cfg(test)]
mod tests {
    use super::{largest_power_of_two, run};
    use crate::clock::{Clock, SystemClock, TickRate, Ticks};
    use crate::sync::{Algorithm, SyncOptions};
    use ngauge_transport::inproc;
    use std::sync::Mutex;
    use std::time::Instant;

    /// A real clock that notes when it is read.
    struct Noted<'a> {
        clock: SystemClock,
        reads: &'a Mutex<Vec<Instant>>,
    }

    impl Clock for Noted<'_> {
        fn now(&self) -> Ticks {
            self.reads.lock().unwrap().push(Instant::now());
            self.clock.now()
        }
        fn rate(&self) -> TickRate {
            self.clock.rate()
        }
    }

    /// Issue 13: with blocking waits (more ranks than cores) the pairs of a tree
    /// round take turns, so that the pair exchanging can spin while the others
    /// sleep. At 4 ranks, round 1 pairs 1 with 0 and 3 with 2; ranks 1 and 3 read
    /// their clocks only for their own exchanges, so their reading spans must not
    /// overlap (the in-process transport blocks, as TCP does with more ranks than
    /// cores).
    #[test]
    fn pairs_of_a_round_take_turns_when_waits_block() {
        let (clock, _) = SystemClock::calibrated();
        let reads: Vec<Mutex<Vec<Instant>>> = (0..4).map(|_| Mutex::new(Vec::new())).collect();
        std::thread::scope(|scope| {
            for (rank, (mut t, mut control)) in inproc::world(4).into_iter().enumerate() {
                let noted = Noted {
                    clock,
                    reads: &reads[rank],
                };
                scope.spawn(move || {
                    let options = SyncOptions::new(Algorithm::Logp);
                    run(&noted, &mut t, &mut control, &options).unwrap();
                });
            }
        });
        let span = |rank: usize| {
            let r = reads[rank].lock().unwrap();
            assert!(
                r.len() > 100,
                "rank {rank} read its clock {} times",
                r.len()
            );
            (r[0], r[r.len() - 1])
        };
        let (one, three) = (span(1), span(3));
        assert!(
            one.1 < three.0 || three.1 < one.0,
            "ranks 1 and 3 exchanged at the same time: {:?} and {:?} after rank 1 began",
            (one.1 - one.0),
            (three.0.max(one.0) - one.0, three.1.max(one.0) - one.0)
        );
    }

    #[test]
    fn powers_of_two() {
        let got: Vec<usize> = (1..=9).map(largest_power_of_two).collect();
        assert_eq!(got, vec![1, 2, 2, 4, 4, 4, 4, 8, 8]);
    }
}
