//! The receiving side of one peer's sequence: messages are delivered in the order
//! they were sent (go-back-N). A datagram beyond a missing one is dropped, and the
//! sender is asked to send again from the missing one (a `NACK`, once per gap, or
//! at once when the datagram says its sender waits), since a receive posted for
//! the missing message must get that message and no other. Each arrival is
//! classified for the counters (see the crate docs, "Counters").

use crate::window::before;
use std::collections::VecDeque;

/// How many dropped early originals are remembered to tell "lost" from "sent
/// again after we dropped it".
const DISCARDED_MEMORY: usize = 4096;

/// Where an arriving sequence number stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Delivered before: a duplicate.
    Old,
    /// The next message: deliver it.
    Next,
    /// Beyond a missing message: drop it.
    Early,
}

/// What the delivery of the next message says about the path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Delivery {
    /// The delivered copy was sent again and its original never arrived.
    pub(crate) lost: bool,
    /// The original arrived after a later message (late, not lost).
    pub(crate) reordered: bool,
}

/// The sequence of messages from one peer.
#[derive(Debug, Default)]
pub(crate) struct Inbound {
    /// Sequence number of the next message to deliver.
    expected: u32,
    /// The highest sequence number that arrived.
    highest: Option<u32>,
    /// Early originals that were dropped (their copies sent again are not lost).
    discarded: VecDeque<u32>,
    /// The `expected` a `NACK` was last sent for.
    nacked: Option<u32>,
}

impl Inbound {
    /// Sequence number of the next message to deliver: how many were delivered.
    pub(crate) fn expected(&self) -> u32 {
        self.expected
    }

    /// Where `seq` stands.
    #[inline(always)]
    pub(crate) fn position(&self, seq: u32) -> Position {
        if seq == self.expected {
            Position::Next
        } else if before(seq, self.expected) {
            Position::Old
        } else {
            Position::Early
        }
    }

    /// Message `seq`, beyond a missing one, arrived and is dropped (`copy`: it was
    /// sent again; `waiting`: its sender waits for an answer). Returns whether to
    /// ask for the missing one now: once per gap, and whenever the sender waits.
    pub(crate) fn early(&mut self, seq: u32, copy: bool, waiting: bool) -> bool {
        self.see(seq);
        if !copy {
            if self.discarded.len() == DISCARDED_MEMORY {
                self.discarded.pop_front();
            }
            self.discarded.push_back(seq);
        }
        let ask = waiting || self.nacked != Some(self.expected);
        if ask {
            self.nacked = Some(self.expected);
        }
        ask
    }

    /// The next message is delivered (`copy`: the copy delivered was sent again).
    #[inline(always)]
    pub(crate) fn deliver(&mut self, copy: bool) -> Delivery {
        let seq = self.expected;
        let mut delivery = Delivery {
            lost: copy,
            reordered: !copy && self.highest.is_some_and(|h| before(seq, h)),
        };
        if !self.discarded.is_empty() {
            self.forget_discarded(seq, &mut delivery);
        }
        self.see(seq);
        self.expected = seq.wrapping_add(1);
        delivery
    }

    /// `seq` is delivered while early originals were dropped: one of them was its
    /// original (so its copy is not lost), and those before it are forgotten.
    #[cold]
    fn forget_discarded(&mut self, seq: u32, delivery: &mut Delivery) {
        if let Some(i) = self.discarded.iter().position(|&s| s == seq) {
            // Its original arrived early and was dropped by us: not lost.
            delivery.lost = false;
            self.discarded.remove(i);
        }
        self.discarded.retain(|&s| !before(s, seq));
    }

    #[inline(always)]
    fn see(&mut self, seq: u32) {
        if self.highest.is_none_or(|h| before(h, seq)) {
            self.highest = Some(seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_arrivals_are_delivered_and_counted_as_nothing() {
        let mut s = Inbound::default();
        for seq in 0..5 {
            assert_eq!(s.position(seq), Position::Next);
            assert_eq!(s.deliver(false), Delivery::default());
        }
        assert_eq!(s.position(3), Position::Old);
        assert_eq!(s.expected(), 5);
    }

    #[test]
    fn a_gap_is_asked_for_once_and_its_copy_counts_as_lost() {
        // 0 delivered; 1 lost; 2 and 3 arrive early.
        let mut s = Inbound::default();
        s.deliver(false);
        assert_eq!(s.position(2), Position::Early);
        assert!(s.early(2, false, false));
        assert!(!s.early(3, false, false), "one NACK per gap");
        // A waiting sender's probe is answered every time.
        assert!(s.early(3, true, true));
        // The copies: 1 was lost, 2 and 3 were dropped by us.
        assert_eq!(
            s.deliver(true),
            Delivery {
                lost: true,
                reordered: false
            }
        );
        assert_eq!(s.deliver(true), Delivery::default());
        assert_eq!(s.deliver(true), Delivery::default());
        assert_eq!(s.position(3), Position::Old);
    }

    #[test]
    fn a_late_original_is_reordered_not_lost() {
        let mut s = Inbound::default();
        assert!(s.early(1, false, false));
        assert_eq!(
            s.deliver(false),
            Delivery {
                lost: false,
                reordered: true
            }
        );
        // 1 was dropped early; the copy asked for is delivered, not lost.
        assert_eq!(s.deliver(true), Delivery::default());
        // The next gap is asked for again.
        assert!(s.early(5, false, false));
    }

    #[test]
    fn a_copy_whose_original_never_came_is_lost_at_the_tail_too() {
        // The last message of a flight is lost; the sender's probe brings it.
        let mut s = Inbound::default();
        s.deliver(false);
        assert_eq!(
            s.deliver(true),
            Delivery {
                lost: true,
                reordered: false
            }
        );
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = Inbound {
            expected: u32::MAX,
            ..Inbound::default()
        };
        assert_eq!(s.position(0), Position::Early);
        assert_eq!(s.position(u32::MAX - 1), Position::Old);
        s.deliver(false);
        assert_eq!(s.position(0), Position::Next);
    }
}
