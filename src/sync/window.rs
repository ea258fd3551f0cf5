//! Window-based starts: the process synchronization of SKaMPI and Netgauge/NBCBench
//! (Hunold & Carpen-Amarie, sec. 3.3 and scheme MS4; Appendix B, Algorithm 8
//! `Start_Sync`/`Stop_Sync`, Algorithm 10, Algorithm 11
//! `Initialize_First_Sync_Window`, Algorithm 13 `Sync`; Hoefler et al., accurately
//! measuring collectives, sec. 4 and Fig. 9).
//!
//! After the clocks are synchronized, rank 0 picks a start time in the future and
//! broadcasts it; measurement `i` starts on every rank at global time
//! `start + i * window`, each rank busy-waiting until the local reading that its clock
//! model maps to that instant. So all ranks enter the operation together, without a
//! barrier whose exit skew would leak into the measurement (Hunold sec. 4.6).
//!
//! - **The lead is measured, not guessed** ([`Windows::announce`]): as Netgauge's
//!   `Initialize_First_Sync_Window` does, every rank times 10 broadcasts on the control
//!   channel, rank 0 takes the slowest and starts that far ahead, which leaves the one
//!   broadcast that carries the start time a tenfold margin.
//! - **Invalid measurements are flagged and counted**: a rank that reaches a window
//!   after its start, or whose wait ends more than [`max_start_lag`] (a tenth of the
//!   window) after it opened, has STARTED_LATE; a measurement that is still running when the
//!   next window opens TOOK_TOO_LONG (SKaMPI's `Start_Sync`/`Stop_Sync`). A slot is
//!   valid only if it was valid on every rank ([`agree`], Algorithm 10 line 20: an
//!   allreduce of the error flags).
//! - **The window adapts to the operation's measured time**: it starts at 1.5 times
//!   the slowest rank's measured run time ([`initial_window`]), and when a quarter or
//!   more of a round's measurements were invalid it becomes
//!   `max(2 * window, 1.5 * mean run time)` ([`adapt_window`], Algorithm 10 lines
//!   24-25; NBCBench's Algorithm 14 line 26 grows by 1.5 instead).
//!
//! The patterns run their rounds of windows through one driver, `patterns::rounds`.

use super::model::{ClockModel, GlobalClock};
use super::SyncError;
use crate::clock::{spin_until, Clock, Ticks};
use ngauge_transport::{Control, WaitMode};

/// Broadcasts timed to measure the announcement lead (Netgauge's `N = 10`).
pub const LEAD_BROADCASTS: usize = 10;

/// The latest a measurement may start after its window opened, in ticks: a tenth of
/// the window (at least 1 tick).
///
/// SKaMPI's `Start_Sync` checks lateness only on arrival, before the wait; but a wait
/// can itself end late (a blocking wait oversleeps, the rank is preempted while it
/// yields), and then the ranks no longer start together. The bound is a fraction of
/// the window, not a fixed time, because what a late start costs is the slack the
/// window leaves the operation (a third of the window at SKaMPI's 1.5 x the run
/// time): a tenth keeps a late start well inside that slack, while the normal end of
/// a wait (one clock read after the deadline when polling, one `yield` when blocking)
/// stays far below it for any window worth measuring with.
pub fn max_start_lag(window_ticks: u64) -> u64 {
    (window_ticks / 10).max(1)
}

/// Why a measurement is not valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotStatus {
    /// Started on time and ended before the next window.
    Valid,
    /// Still running when the next window opened (SKaMPI's TOOK_TOO_LONG).
    Overran,
    /// Reached the window after it had opened (SKaMPI's STARTED_LATE).
    StartedLate,
}

impl SlotStatus {
    fn from_byte(b: u8) -> Option<SlotStatus> {
        [
            SlotStatus::Valid,
            SlotStatus::Overran,
            SlotStatus::StartedLate,
        ]
        .get(b as usize)
        .copied()
    }
}

/// One measurement's window, as a rank saw it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    /// Index of the window since the announcement.
    pub index: u64,
    /// Local reading at which the window opened.
    pub opens: Ticks,
    /// Local reading at which the wait ended (the measurement's start).
    pub started: Ticks,
    /// Whether the rank arrived after the window had opened, or its wait ended more
    /// than [`max_start_lag`] after it.
    pub late: bool,
}

/// The schedule of windows after an announcement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Windows {
    model: ClockModel,
    start: Ticks,
    window_ticks: u64,
    next: u64,
    lead_ticks: Option<u64>,
}

impl Windows {
    /// Collective: rank 0 measures the announcement lead, picks the first start that
    /// far ahead in global time, and broadcasts it; every rank gets the schedule of
    /// windows of `window_ticks` (global ticks; rank 0's value is used).
    pub fn announce<C: Clock + ?Sized>(
        clock: &C,
        control: &mut dyn Control,
        model: &ClockModel,
        window_ticks: u64,
    ) -> Result<Windows, SyncError> {
        let global = GlobalClock::new(clock, *model);
        let began = global.now();
        for _ in 0..LEAD_BROADCASTS {
            let mut probe = vec![0u8; 16];
            control.broadcast(0, &mut probe)?;
        }
        let took = global.now().since(began);
        let gathered = control.gather(0, &took.to_le_bytes())?;
        let mut message = Vec::new();
        if control.rank() == 0 {
            let lead = gathered
                .iter()
                .filter_map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
                .max()
                .unwrap_or(took);
            let start = global.now().plus(lead);
            message.extend_from_slice(&start.0.to_le_bytes());
            message.extend_from_slice(&window_ticks.to_le_bytes());
            message.extend_from_slice(&lead.to_le_bytes());
        }
        control.broadcast(0, &mut message)?;
        let field = |i: usize| -> Result<u64, SyncError> {
            message
                .get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| SyncError::Protocol {
                    peer: 0,
                    detail: "malformed window announcement".into(),
                })
        };
        Ok(Windows {
            model: *model,
            start: Ticks(field(0)?),
            window_ticks: field(1)?,
            next: 0,
            lead_ticks: Some(field(2)?),
        })
    }

    /// A schedule known without an announcement (tests, or a caller that already
    /// agreed on `start`).
    pub fn from_parts(model: ClockModel, start: Ticks, window_ticks: u64) -> Windows {
        Windows {
            model,
            start,
            window_ticks,
            next: 0,
            lead_ticks: None,
        }
    }

    /// The longest wait the schedule can explain for a slot entered `delay_ticks`
    /// after its window opens, in global ticks, if the lead is known: twice the
    /// lead plus a window plus the delay. A rank reaches slot 0 at most the lead
    /// before it opens (the announcement took some of the lead to arrive), and slot
    /// `i` at most a window (plus the delay) before it opens, having started slot
    /// `i - 1` no earlier than that opened; the factor 2 leaves room for the ranks'
    /// clocks and broadcast times.
    pub fn max_wait_ticks(&self, delay_ticks: u64) -> Option<u64> {
        self.lead_ticks.map(|lead| {
            lead.saturating_add(self.window_ticks)
                .saturating_add(delay_ticks)
                .saturating_mul(2)
        })
    }

    /// Global time at which window `index` opens.
    pub fn opens_global(&self, index: u64) -> Ticks {
        self.start.plus(index.saturating_mul(self.window_ticks))
    }

    /// The window length in global ticks.
    pub fn window_ticks(&self) -> u64 {
        self.window_ticks
    }

    /// Waits until the next window opens on this rank's clock, plus `delay_ticks`
    /// (global ticks), and returns its slot (SKaMPI's `Start_Sync`). With
    /// [`WaitMode::Block`] the wait sleeps until shortly before the window and yields
    /// the core while spinning the rest, so co-located ranks that outnumber the cores
    /// still run; [`WaitMode::Poll`] spins. The slot is late if the rank arrived
    /// after the window opened or the wait ended more than [`max_start_lag`] after
    /// it (an overslept or preempted wait).
    ///
    /// A delay is a late arrival injected through the start time
    /// (Niethammer et al., sec. III-D: "shifting the internal start time point by
    /// the desired delay time", so the delay is as exact as the synchronization).
    /// The slot opens at the delayed instant; lateness is judged against it.
    ///
    /// When this rank's clock model puts the window further ahead than the schedule
    /// allows ([`Windows::max_wait_ticks`]), the model is wrong (a drift fitted from
    /// noise, a clock that jumped), not the schedule: waiting would leave the peers
    /// waiting in the operation, up to their timeout, and the call would not start
    /// with theirs either way. So the wait ends at once and the slot is late (its
    /// measurement is invalid on every rank after [`agree`]).
    pub fn wait_delayed<C: Clock + ?Sized>(
        &mut self,
        clock: &C,
        mode: WaitMode,
        delay_ticks: u64,
    ) -> Slot {
        let index = self.next;
        self.next += 1;
        let opens = self.model.local(self.opens_global(index).plus(delay_ticks));
        let arrived = clock.now();
        let unexplained = self
            .max_wait_ticks(delay_ticks)
            .is_some_and(|max| opens.since(arrived) > max);
        let mut late = arrived > opens || unexplained;
        let started = if late {
            arrived
        } else {
            wait_until(clock, opens, mode)
        };
        late |= started.since(opens) > max_start_lag(self.window_ticks);
        Slot {
            index,
            opens,
            started,
            late,
        }
    }

    /// Closes a slot after the measurement (SKaMPI's `Stop_Sync`): its status on this
    /// rank.
    pub fn finish<C: Clock + ?Sized>(&self, clock: &C, slot: &Slot) -> SlotStatus {
        let ended = clock.now();
        if slot.late {
            SlotStatus::StartedLate
        } else if ended > self.model.local(self.opens_global(slot.index + 1)) {
            SlotStatus::Overran
        } else {
            SlotStatus::Valid
        }
    }
}

/// Waits until `clock` reads `deadline`; returns the reading that ended the wait.
pub fn wait_until<C: Clock + ?Sized>(clock: &C, deadline: Ticks, mode: WaitMode) -> Ticks {
    if mode == WaitMode::Poll {
        return spin_until(clock, deadline);
    }
    // Sleep while more than 1 ms remains (to within 0.5 ms), then spin politely.
    let rate = clock.rate();
    loop {
        let now = clock.now();
        if now >= deadline {
            return now;
        }
        let remaining_ns = rate.to_nanos(deadline.since(now)).0;
        if remaining_ns > 1e6 {
            std::thread::sleep(std::time::Duration::from_nanos((remaining_ns - 5e5) as u64));
        } else {
            std::thread::yield_now();
        }
    }
}

/// Combines every rank's slot statuses: a slot is valid only if it was valid on every
/// rank; otherwise it carries the worst status any rank saw (SKaMPI's allreduce of
/// error flags). Collective; every rank passes the same number of slots.
pub fn agree(
    control: &mut dyn Control,
    statuses: &[SlotStatus],
) -> Result<Vec<SlotStatus>, SyncError> {
    let mine: Vec<u8> = statuses.iter().map(|s| *s as u8).collect();
    let gathered = control.gather(0, &mine)?;
    let mut combined = if control.rank() == 0 {
        let mut worst = mine.clone();
        for (rank, theirs) in gathered.iter().enumerate() {
            if theirs.len() != worst.len() {
                return Err(SyncError::Protocol {
                    peer: rank,
                    detail: format!(
                        "reported {} window slots where {} were expected",
                        theirs.len(),
                        worst.len()
                    ),
                });
            }
            for (w, t) in worst.iter_mut().zip(theirs) {
                *w = (*w).max(*t);
            }
        }
        worst
    } else {
        Vec::new()
    };
    control.broadcast(0, &mut combined)?;
    combined
        .iter()
        .map(|&b| {
            SlotStatus::from_byte(b).ok_or_else(|| SyncError::Protocol {
                peer: 0,
                detail: format!("unknown window status {b}"),
            })
        })
        .collect()
}

/// Counts of slot statuses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Valid measurements.
    pub valid: usize,
    /// Measurements that started late.
    pub started_late: usize,
    /// Measurements that overran their window.
    pub overran: usize,
}

impl Tally {
    /// Counts `statuses`.
    pub fn of(statuses: &[SlotStatus]) -> Tally {
        let mut t = Tally::default();
        for s in statuses {
            match s {
                SlotStatus::Valid => t.valid += 1,
                SlotStatus::StartedLate => t.started_late += 1,
                SlotStatus::Overran => t.overran += 1,
            }
        }
        t
    }

    /// Invalid measurements.
    pub fn invalid(&self) -> usize {
        self.started_late + self.overran
    }
}

/// The first window for an operation whose slowest rank measured `max_op_ticks`:
/// 1.5 times that (SKaMPI's factor), at least 1 tick.
pub fn initial_window(max_op_ticks: u64) -> u64 {
    (max_op_ticks.saturating_mul(3) / 2).max(1)
}

/// Most a window grows over the first one of its measurement: six doublings.
/// SKaMPI's rule has no bound, and with a generous `--max-rounds` on a host that
/// keeps invalidating calls the window would double round after round (to hours,
/// then to the end of `u64`); past this size the calls are disturbed, not too
/// short for their window, and the rounds left are better spent at this size.
pub const MAX_WINDOW_GROWTH: u64 = 64;

/// [`adapt_window`], never beyond [`MAX_WINDOW_GROWTH`] times `first_ticks` (the
/// measurement's first window); `None` when the window stays as it is.
pub fn adapt_window_capped(
    first_ticks: u64,
    window_ticks: u64,
    invalid: usize,
    total: usize,
    mean_op_ticks: f64,
) -> Option<u64> {
    let cap = first_ticks.max(1).saturating_mul(MAX_WINDOW_GROWTH);
    let next = adapt_window(window_ticks, invalid, total, mean_op_ticks)?.min(cap);
    (next > window_ticks).then_some(next)
}

/// SKaMPI's adaptation (Algorithm 10, lines 24-25): when at least a quarter of
/// `total` measurements were invalid, the window becomes
/// `max(2 * window, 1.5 * mean_op_ticks)`; otherwise it stays (`None`).
pub fn adapt_window(
    window_ticks: u64,
    invalid: usize,
    total: usize,
    mean_op_ticks: f64,
) -> Option<u64> {
    if total == 0 || invalid * 4 < total {
        return None;
    }
    let grown = window_ticks.saturating_mul(2).max(1);
    let from_mean = (mean_op_ticks * 1.5).ceil().max(0.0) as u64;
    Some(grown.max(from_mean))
}

#[cfg(test)]
impl Windows {
    /// The same schedule, announced `lead_ticks` (global) before its first window,
    /// as [`Windows::announce`] makes it: a wait longer than the schedule allows is
    /// then cut short.
    pub(crate) fn with_lead(mut self, lead_ticks: u64) -> Windows {
        self.lead_ticks = Some(lead_ticks);
        self
    }

    /// [`Windows::wait_delayed`] without a delay.
    pub(crate) fn wait<C: Clock + ?Sized>(&mut self, clock: &C, mode: WaitMode) -> Slot {
        self.wait_delayed(clock, mode, 0)
    }
}
