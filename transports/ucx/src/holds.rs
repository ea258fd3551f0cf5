//! Which bytes of a buffer pending requests use: any number of sends may read
//! overlapping bytes, a receive excludes every other use of its bytes (the rule
//! of `ngauge_transport::BufferPool`, for memory UCX allocated).

use ngauge_transport::Access;
use std::ops::Range;

/// The holds on one buffer; equal holds share an entry with a count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds(Vec<(Range<usize>, Access, u32)>);

impl Holds {
    /// Whether a hold of `range` with `access` would conflict with none held.
    pub fn allows(&self, range: &Range<usize>, access: Access) -> bool {
        self.0.iter().all(|(held, a, _)| {
            (*a == Access::Read && access == Access::Read)
                || held.is_empty()
                || range.is_empty()
                || held.end <= range.start
                || range.end <= held.start
        })
    }

    /// Takes a hold, unless it conflicts: then `false` and nothing changes.
    pub fn try_hold(&mut self, range: Range<usize>, access: Access) -> bool {
        if !self.allows(&range, access) {
            return false;
        }
        match self
            .0
            .iter_mut()
            .find(|(r, a, _)| *r == range && *a == access)
        {
            Some((_, _, n)) => *n += 1,
            None => self.0.push((range, access, 1)),
        }
        true
    }

    /// Gives back one hold taken by [`Holds::try_hold`].
    pub fn release(&mut self, range: &Range<usize>, access: Access) {
        if let Some(i) = self
            .0
            .iter()
            .position(|(r, a, _)| r == range && *a == access)
        {
            self.0[i].2 -= 1;
            if self.0[i].2 == 0 {
                self.0.swap_remove(i);
            }
        }
    }

    /// Whether no request holds any part of the buffer.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_and_a_writer_excludes() {
        let mut h = Holds::default();
        assert!(h.try_hold(0..8, Access::Read));
        assert!(h.try_hold(0..8, Access::Read));
        assert!(h.try_hold(4..12, Access::Read));
        assert!(!h.try_hold(7..9, Access::Write));
        assert!(h.try_hold(12..16, Access::Write));
        assert!(!h.allows(&(15..16), Access::Read));
        assert!(h.allows(&(15..15), Access::Write), "no bytes, no conflict");
        h.release(&(0..8), Access::Read);
        assert!(!h.try_hold(0..1, Access::Write), "one read of 0..8 is left");
        h.release(&(0..8), Access::Read);
        h.release(&(4..12), Access::Read);
        h.release(&(12..16), Access::Write);
        assert!(h.is_empty());
    }
}
