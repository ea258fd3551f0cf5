//! The loss-injection test hook ([`crate::UdpOptions::drop_one_in`]): which outgoing
//! datagrams are silently dropped, either every n-th (a fixed place in the
//! pattern, for tests that aim at one) or each with probability 1/n from a seeded
//! generator (loss at places no test chose, the same places again for the same
//! seed and the same sequence of datagrams).

/// Decides, datagram by datagram, whether the hook drops it.
#[derive(Debug)]
pub(crate) struct DropHook {
    one_in: u64,
    /// `None`: every `one_in`-th datagram.
    random: Option<fastrand::Rng>,
}

impl DropHook {
    /// The hook for `one_in` (none for `None` or 0) and `seed` (random when given),
    /// on `rank`: ranks seeded alike draw different sequences.
    pub(crate) fn new(one_in: Option<u64>, seed: Option<u64>, rank: usize) -> Option<Self> {
        let one_in = one_in.filter(|&n| n > 0)?;
        // The rank through a 64-bit odd multiplier (the golden ratio's), so that
        // seeds s and s + 1 on neighbouring ranks do not coincide.
        let random = seed.map(|s| {
            fastrand::Rng::with_seed(s ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        });
        Some(DropHook { one_in, random })
    }

    /// Whether to drop the `sent`-th datagram (counted from 1).
    pub(crate) fn drops(&mut self, sent: u64) -> bool {
        match &mut self.random {
            Some(rng) => rng.u64(0..self.one_in) == 0,
            None => sent % self.one_in == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(hook: &mut DropHook, datagrams: u64) -> Vec<u64> {
        (1..=datagrams).filter(|&k| hook.drops(k)).collect()
    }

    #[test]
    fn without_a_seed_every_nth_datagram_is_dropped() {
        let mut hook = DropHook::new(Some(3), None, 0).unwrap();
        assert_eq!(pattern(&mut hook, 10), [3, 6, 9]);
        assert!(DropHook::new(Some(0), None, 0).is_none());
        assert!(DropHook::new(None, Some(1), 0).is_none());
    }

    #[test]
    fn a_seed_gives_the_same_random_drops_again() {
        let run = |seed, rank| {
            pattern(
                &mut DropHook::new(Some(20), Some(seed), rank).unwrap(),
                20_000,
            )
        };
        let drops = run(7, 0);
        assert_eq!(drops, run(7, 0));
        // About 1 in 20 (1000 expected; the binomial's sd is 31).
        assert!((850..1150).contains(&drops.len()), "{}", drops.len());
        // Not every n-th: the gaps vary.
        let gaps: std::collections::BTreeSet<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() > 10, "{gaps:?}");
        // Another seed, or another rank with the same seed, drops other datagrams.
        assert_ne!(drops, run(8, 0));
        assert_ne!(drops, run(7, 1));
    }
}
