//! The 64-bit UCP tags of the two-sided path.
//!
//! A receive names its sender, so the tag carries the sender's rank and the
//! receiver matches it with the full mask: UCP matches receives posted for one
//! tag in posting order and delivers one sender's messages in the order they
//! were sent, which is the order the [`Transport`](ngauge_transport::Transport)
//! contract promises (MPI's non-overtaking rule, which MPICH's ch4:ucx gets the
//! same way). The top byte is the kind, so the goodbye a closing transport sends
//! ([`Kind::Close`]) never matches a data receive.
//!
//! Layout: bits 56..64 the [`Kind`], bits 0..32 the sender's rank, the rest 0.

/// What a tagged message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A message of the data plane.
    Data = 0,
    /// The sender is closing its transport: nothing more will come from it.
    Close = 1,
}

/// Largest rank a tag carries.
pub const MAX_RANK: usize = u32::MAX as usize;

/// Every bit compared: receives name their sender and kind exactly.
pub const FULL_MASK: u64 = u64::MAX;

/// The tag of a `kind` message sent by rank `sender` (at most [`MAX_RANK`]).
#[inline]
pub fn tag(kind: Kind, sender: usize) -> u64 {
    debug_assert!(sender <= MAX_RANK);
    (kind as u64) << 56 | (sender as u64 & 0xffff_ffff)
}

/// The kind and sender of a tag built by [`tag`]; `None` for any other tag.
pub fn parse(tag: u64) -> Option<(Kind, usize)> {
    if tag & 0x00ff_ffff_0000_0000 != 0 {
        return None;
    }
    let kind = match tag >> 56 {
        0 => Kind::Data,
        1 => Kind::Close,
        _ => return None,
    };
    Some((kind, (tag & 0xffff_ffff) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_carry_kind_and_sender_and_nothing_else() {
        for (kind, sender) in [(Kind::Data, 0), (Kind::Close, 7), (Kind::Data, MAX_RANK)] {
            assert_eq!(parse(tag(kind, sender)), Some((kind, sender)));
        }
        assert_ne!(tag(Kind::Data, 3), tag(Kind::Close, 3));
        assert_ne!(tag(Kind::Data, 3), tag(Kind::Data, 4));
        assert_eq!(parse(2 << 56), None);
        assert_eq!(parse(1 << 40), None);
    }
}
