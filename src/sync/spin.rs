//! Spin, then sleep: the receives of the sync exchanges when ranks outnumber cores.
//!
//! With more ranks than cores the transports wait in the kernel
//! ([`WaitMode::Block`](ngauge_transport::WaitMode::Block)), so each message of a
//! ping-pong wakes a sleeping process, and the two directions
//! of a wake-up across cores are not equally fast: the midpoint estimate of
//! [`super::pairwise`] (offset at `sent + rtt/2`) then errs by half the difference,
//! up to ~12 us at `--np 4` on 2 cores (issue 13). Yet in `jk`, in `hca`'s intercept
//! phase and in the residual checks only one pair exchanges at a time while the
//! other ranks wait for their turn: the pair could spin, as at one rank per core.
//!
//! [`SpinThenSleep`] wraps the data transport so that every blocking receive first
//! spins on [`Transport::test`] for a short budget and only then sleeps
//! ([`Transport::wait`]). A ping-pong in progress answers within the budget, so both
//! ends of the exchanging pair poll; a rank waiting for its turn gives up spinning
//! after the budget and sleeps, leaving the cores to the pair (the classic
//! spin-then-block wait).
//!
//! The budget is fixed: one that adapts per peer did worse
//! (`docs/findings/2026-11-24-sync-np4.md`).
//!
//! Never with a peer pinned to this rank's own core: while this rank spins, that
//! peer cannot run to answer, so each exchange would cost the whole budget, on the
//! way back only (measured: a constant +50 us in the residual checks at `--np 4`,
//! and `jk` three times slower). Receives from such a peer sleep at once.
//!
//! Sends are passed through: an 8-byte send never waits for its receiver.

use ngauge_transport::{Rank, Region, Transport, TransportError};
use std::time::{Duration, Instant};

/// How long a receive spins before it sleeps: some ten round trips of a polling
/// TCP ping-pong between the two cores here (~11 us each), a tenth of the time a
/// rank waits for its turn (a fit point of another rank, 100 round trips).
pub const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(100);

/// A transport whose blocking receives spin for a budget before they sleep.
pub struct SpinThenSleep {
    inner: Box<dyn Transport>,
    /// Per rank: the spin budget (zero for ranks sharing this rank's core).
    budget: Vec<Duration>,
    spun: u64,
    slept: u64,
}

impl SpinThenSleep {
    /// Wraps `inner`; its receives spin for `spin` before they wait as `inner`
    /// does, except from the ranks in `same_core` (pinned to this rank's core).
    pub fn new(inner: Box<dyn Transport>, spin: Duration, same_core: &[Rank]) -> Self {
        let budget = (0..inner.size())
            .map(|r| {
                if same_core.contains(&r) {
                    Duration::ZERO
                } else {
                    spin
                }
            })
            .collect();
        SpinThenSleep {
            inner,
            budget,
            spun: 0,
            slept: 0,
        }
    }
}

impl Transport for SpinThenSleep {
    ngauge_transport::forward_transport!(inner, except recv);

    fn recv(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
        let budget = self.budget.get(peer).copied().unwrap_or(Duration::ZERO);
        if budget.is_zero() {
            self.inner.recv(peer, region)?;
            self.slept += 1;
            return Ok(());
        }
        let request = self.inner.irecv(peer, region)?;
        let start = Instant::now();
        loop {
            if self.inner.test(request)? {
                self.spun += 1;
                return Ok(());
            }
            if start.elapsed() >= budget {
                self.inner.wait(request)?;
                self.slept += 1;
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
impl SpinThenSleep {
    /// Receives completed while spinning, and after sleeping.
    fn receives(&self) -> (u64, u64) {
        (self.spun, self.slept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ngauge_transport::inproc;

    /// Rank 0 receives 8 bytes through the wrapper while rank 1 sends them after
    /// `delay`; returns what arrived and how the receive completed.
    fn receive_after(delay: Duration, spin: Duration, same_core: &[Rank]) -> (u64, (u64, u64)) {
        let mut world = inproc::world(2);
        let (mut one, _c1) = world.pop().unwrap();
        let (zero, _c0) = world.pop().unwrap();
        let sender = std::thread::spawn(move || {
            let b = one.alloc_buffer(8).unwrap();
            one.buffer_mut(b)
                .unwrap()
                .copy_from_slice(&42u64.to_le_bytes());
            std::thread::sleep(delay);
            one.send(0, b.region(0, 8)).unwrap();
        });
        let mut t = SpinThenSleep::new(Box::new(zero), spin, same_core);
        let b = t.alloc_buffer(8).unwrap();
        t.recv(1, b.region(0, 8)).unwrap();
        sender.join().unwrap();
        let value = u64::from_le_bytes(t.buffer(b).unwrap().try_into().unwrap());
        (value, t.receives())
    }

    /// Issue 13: an answer within the budget is taken while spinning, so an
    /// exchanging pair never sleeps between its messages.
    #[test]
    fn an_answer_within_the_budget_is_taken_spinning() {
        assert_eq!(
            receive_after(Duration::from_millis(5), Duration::from_secs(10), &[]),
            (42, (1, 0))
        );
    }

    /// A peer on this rank's own core cannot answer while this rank spins: its
    /// messages are waited for at once.
    #[test]
    fn a_peer_on_the_same_core_is_never_spun_for() {
        assert_eq!(
            receive_after(Duration::from_millis(5), Duration::from_secs(10), &[1]),
            (42, (0, 1))
        );
    }

    /// A rank waiting for its turn stops spinning after the budget and sleeps, and
    /// still receives its message.
    #[test]
    fn a_long_wait_sleeps_after_the_budget() {
        assert_eq!(
            receive_after(Duration::from_millis(200), Duration::from_micros(50), &[]),
            (42, (0, 1))
        );
    }
}
