//! One driver for the rounds of windowed calls of `coll`, `late` and `nbc`, in the
//! shape of ReproMPI's process sync (`init_sync_round` / `start_sync` / `stop_sync`):
//! SKaMPI's loop (Hunold & Carpen-Amarie,
//! `../shared/papers/hunold-mpi-benchmarking-revisited.txt`, Appendix B, Algorithm
//! 10; Hoefler et al., `../shared/papers/hoefler-accurately-measuring-collectives.txt`,
//! sec. 4, Fig. 9) over the primitives of [`crate::sync::window`]: per round
//! [`WindowRounds::init_round`], per call [`WindowRounds::start`] and
//! [`WindowRounds::stop`], then [`WindowRounds::end_round`] and
//! [`WindowRounds::decide`]; each cites the algorithm's lines it implements.
//!
//! Nothing goes on the control channel between a `start` and its `stop`. The driver
//! lives in `patterns/`, not beside its primitives in `sync/`: it carries the calls'
//! records and the pattern's verdict, and its errors name the pattern.

use super::PatternError;
use crate::clock::{Clock, Ticks};
use crate::coll::{CollError, CollOp};
use crate::sync::model::ClockModel;
use crate::sync::window::{self, Slot, SlotStatus, Windows};
use ngauge_transport::{Control, WaitMode};

/// One rank's part of a call: its start and end readings. Global ticks (rank 0's
/// clock through the [`ClockModel`]) in windows, local ticks otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    /// When the rank started its part.
    pub start: Ticks,
    /// When it finished.
    pub end: Ticks,
}

impl Span {
    /// `end - start` in ticks.
    pub fn ticks(&self) -> u64 {
        self.end.since(self.start)
    }
}

/// The calls of a windowed measurement, the same in `coll`, `late` and `nbc`: how
/// many, the untimed ones first, and how a rank waits for its window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallPlan {
    /// Valid calls wanted per measurement point (`coll`'s barrier and loop schemes:
    /// calls to time; `late`: per delay; `nbc`: per stage).
    pub reps: usize,
    /// Untimed calls first (at least 1 in windows: they size the first window).
    pub warmup: usize,
    /// Fill the buffers with known data before each warm-up call and check the
    /// result after it ([`CollOp::fill`], [`CollOp::verify`]).
    pub check_data: bool,
    /// How a rank waits for a window to open: the transport's wait mode in a real
    /// run ([`window::wait_until`]).
    pub window_wait: WaitMode,
    /// Windows give up after this many rounds (a round: `reps` calls of each kind).
    pub max_rounds: usize,
}

/// What rank 0 saw in a round, for [`WindowRounds::decide`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// Fewer valid calls than wanted: another round, if the rounds allow.
    pub short: bool,
    /// The round's invalid calls.
    pub invalid: usize,
    /// The call length the window adapts to, ticks (SKaMPI's mean run time).
    pub op_ticks: f64,
}

/// A finished round.
#[derive(Clone, Debug, PartialEq)]
pub struct Round {
    /// Each call's status, agreed by every rank: valid only if valid on all.
    pub statuses: Vec<SlotStatus>,
    /// `records[rank][call]`: the words a rank recorded for a call (rank 0 only).
    pub records: Vec<Vec<Vec<u64>>>,
}

/// Records of [`WindowRounds::stop_span`] as spans, by rank, then by call.
pub fn spans_of(records: &[Vec<Vec<u64>>]) -> Vec<Vec<Span>> {
    let span = |w: &Vec<u64>| Span {
        start: Ticks(w[0]),
        end: Ticks(w[1]),
    };
    let calls = |calls: &Vec<Vec<u64>>| calls.iter().map(span).collect();
    records.iter().map(calls).collect()
}

/// The rounds of one measurement (see the module docs).
#[derive(Clone, Debug)]
pub struct WindowRounds {
    pattern: &'static str,
    model: ClockModel,
    wait: WaitMode,
    max_rounds: usize,
    calls: usize,
    first_ticks: u64,
    window_ticks: u64,
    rounds: usize,
    valid: usize,
    windows: Windows,
    statuses: Vec<SlotStatus>,
    records: Vec<u64>,
}

impl WindowRounds {
    /// Rounds of `calls` calls for `pattern` (its name in errors), at most
    /// `max_rounds`, the first window `first_window_ticks` (global; rank 0's
    /// counts); a rank waits as `wait` says, its clock mapped to global by `model`.
    pub fn new(
        pattern: &'static str,
        model: ClockModel,
        wait: WaitMode,
        max_rounds: usize,
        calls: usize,
        first_window_ticks: u64,
    ) -> WindowRounds {
        WindowRounds {
            pattern,
            model,
            wait,
            max_rounds,
            calls,
            first_ticks: first_window_ticks,
            window_ticks: first_window_ticks,
            rounds: 0,
            valid: 0,
            // Until the first round's announcement, every slot is late.
            windows: Windows::from_parts(model, Ticks(0), first_window_ticks),
            statuses: Vec::with_capacity(calls),
            records: Vec::new(),
        }
    }

    /// Collective: starts a round on rank 0's window ([`Windows::announce`];
    /// Algorithm 10 line 36).
    pub fn init_round<C: Clock + ?Sized>(
        &mut self,
        clock: &C,
        control: &mut dyn Control,
    ) -> Result<(), PatternError> {
        self.rounds += 1;
        self.windows = Windows::announce(clock, control, &self.model, self.window_ticks)?;
        self.window_ticks = self.windows.window_ticks();
        self.statuses.clear();
        self.records.clear();
        Ok(())
    }

    /// Waits for the next call's slot, entering `delay_ticks` (global) after its
    /// window opens ([`Windows::wait_delayed`]; `Start_Sync`, Algorithm 10 line 14).
    pub fn start<C: Clock + ?Sized>(&mut self, clock: &C, delay_ticks: u64) -> Slot {
        self.windows.wait_delayed(clock, self.wait, delay_ticks)
    }

    /// Closes `slot` after its call ([`Windows::finish`]; `Stop_Sync`, line 16) and
    /// keeps `record` for rank 0 (as many words for every call of a round).
    pub fn stop<C: Clock + ?Sized>(&mut self, clock: &C, slot: &Slot, record: &[u64]) {
        self.statuses.push(self.windows.finish(clock, slot));
        if self.records.capacity() == 0 {
            self.records.reserve(self.calls * record.len());
        }
        self.records.extend_from_slice(record);
    }

    /// [`WindowRounds::stop`] with the call's [`Span`] in global time as its record.
    pub fn stop_span<C: Clock + ?Sized>(&mut self, clock: &C, slot: &Slot) {
        let end = self.model.global(clock.now());
        let start = self.model.global(slot.started);
        self.stop(clock, slot, &[start.0, end.0]);
    }

    /// Collective: the round's statuses, a call valid only if valid on every rank
    /// (Algorithm 10 line 20), and every rank's records at rank 0 (line 18).
    pub fn end_round(&mut self, control: &mut dyn Control) -> Result<Round, PatternError> {
        let statuses = window::agree(control, &self.statuses)?;
        self.valid += statuses.iter().filter(|s| **s == SlotStatus::Valid).count();
        let width = self.records.len() / self.statuses.len().max(1);
        let records = gather_words(control, self.pattern, &self.records, width)?;
        Ok(Round { statuses, records })
    }

    /// Collective: whether another round runs (Algorithm 10 lines 31-35): rank 0
    /// (only) calls `verdict`; another round runs if it is short and rounds are
    /// left, on a window adapted to it (lines 24-25, [`window::adapt_window_capped`]),
    /// which the next [`WindowRounds::init_round`] announces.
    pub fn decide(
        &mut self,
        control: &mut dyn Control,
        verdict: impl FnOnce() -> Verdict,
    ) -> Result<bool, PatternError> {
        let mut more = false;
        if control.rank() == 0 {
            let v = verdict();
            more = v.short && self.rounds < self.max_rounds;
            if more {
                let (first, window) = (self.first_ticks, self.window_ticks);
                self.window_ticks =
                    window::adapt_window_capped(first, window, v.invalid, self.calls, v.op_ticks)
                        .unwrap_or(window);
            }
        }
        Ok(broadcast_word(control, self.pattern, "a round decision", more as u64)? == 1)
    }

    /// The window, global ticks (after the last round: the one it ran with).
    pub fn window_ticks(&self) -> u64 {
        self.window_ticks
    }

    /// Rounds started.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Calls valid on every rank, over the rounds ended.
    pub fn valid_calls(&self) -> usize {
        self.valid
    }
}

/// `plan.warmup` untimed calls of `op`, each after a control barrier, the data
/// filled before and checked after when `plan.check_data`: the slowest call of any
/// rank, at rank 0 (it sizes the first window).
pub fn warm_up<C: Clock + ?Sized>(
    clock: &C,
    control: &mut dyn Control,
    pattern: &'static str,
    op: &mut dyn CollOp,
    plan: &CallPlan,
    mut call: impl FnMut(&mut dyn CollOp) -> Result<(), CollError>,
) -> Result<u64, PatternError> {
    let mut longest = 0u64;
    for _ in 0..plan.warmup {
        if plan.check_data {
            op.fill()?;
        }
        control.barrier().map_err(PatternError::control(pattern))?;
        let start = clock.now();
        call(op)?;
        longest = longest.max(clock.now().since(start));
        if plan.check_data {
            op.verify()?;
        }
    }
    max_at_root(control, pattern, longest)
}

/// The largest of every rank's `value` at rank 0 (the others get their own): the
/// slowest warm-up call, which sizes the first window.
pub fn max_at_root(
    control: &mut dyn Control,
    pattern: &'static str,
    value: u64,
) -> Result<u64, PatternError> {
    let all = gather_words(control, pattern, &[value], 1)?;
    Ok(all.iter().map(|r| r[0][0]).max().unwrap_or(value))
}

/// Rank 0's `value` on every rank; `what` names it in a protocol error.
pub fn broadcast_word(
    control: &mut dyn Control,
    pattern: &'static str,
    what: &str,
    value: u64,
) -> Result<u64, PatternError> {
    let mut bytes = value.to_le_bytes().to_vec();
    control
        .broadcast(0, &mut bytes)
        .map_err(PatternError::control(pattern))?;
    let word = bytes.as_slice().try_into().map(u64::from_le_bytes);
    word.map_err(|_| PatternError::Protocol {
        pattern,
        rank: 0,
        detail: format!("{what} of {} bytes", bytes.len()),
    })
}

/// Every rank's `spans` at rank 0, by rank (the others get none).
pub fn gather_spans(
    control: &mut dyn Control,
    pattern: &'static str,
    spans: &[Span],
) -> Result<Vec<Vec<Span>>, PatternError> {
    let words: Vec<u64> = spans.iter().flat_map(|s| [s.start.0, s.end.0]).collect();
    Ok(spans_of(&gather_words(control, pattern, &words, 2)?))
}

/// Every rank's `words` at rank 0, by rank, in records of `width` words (the others
/// get none); a rank that sent another number of words broke the protocol.
fn gather_words(
    control: &mut dyn Control,
    pattern: &'static str,
    words: &[u64],
    width: usize,
) -> Result<Vec<Vec<Vec<u64>>>, PatternError> {
    let mine: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let gathered = control
        .gather(0, &mine)
        .map_err(PatternError::control(pattern))?;
    let records = |(rank, bytes): (usize, &Vec<u8>)| {
        if bytes.len() != mine.len() {
            let detail = format!("{} bytes of records, expected {}", bytes.len(), mine.len());
            return Err(PatternError::Protocol {
                pattern,
                rank,
                detail,
            });
        }
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .collect();
        Ok(words.chunks(width.max(1)).map(<[u64]>::to_vec).collect())
    };
    gathered.iter().enumerate().map(records).collect()
}

#[cfg(test)]
mod tests;
