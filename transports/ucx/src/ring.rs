//! The landing ring of the put path (`--ucx-op put`): where a sender's
//! `ucp_put_nbx` lands and what the receiver polls.
//!
//! Every rank maps one area at setup (`ucp_mem_map`, UCX's own allocation, so
//! that shared-memory transports can map it into the peers) and publishes its
//! address and remote key. The area holds one block per sender: `depth` slots of
//! `slot_bytes` payload, each followed by an 8-byte [`Trailer`], and after the
//! slots the sender's credit word. A message of `n` bytes travels as
//! [`RingLayout::fragments`]`(n)` slot-sized pieces, each put into the next slot of the
//! sender's block, then (after `ucp_worker_fence`, since UCX promises no order
//! of the bytes within one put) its trailer put with the length and the slot's
//! flag: the receiver polls the trailer of the next slot until the flag of that
//! use of the slot appears, copies the piece out into the posted region, and so
//! consumes the slot, as `ib_write_lat` and the verbs write-poll path poll the
//! last byte of theirs.
//!
//! Flow control counts slots: a sender puts into a peer's ring only while fewer
//! than `depth` of its pieces are unconsumed there. The receiver reports what it
//! consumed in every trailer it sends back (16 bits, widened by the sender,
//! [`widen_consumed`]) and, when no message of its own carries it, by putting
//! the count into the sender's credit word once half a ring is unreported.
//! Pieces that arrive before their receive is posted stay in the ring (their
//! slots are not consumed), so nothing is copied twice and a sender that fills
//! the ring waits for the receiver, like a rendezvous.

/// Bytes of a [`Trailer`].
pub const TRAILER_BYTES: usize = 8;
/// Payload bytes of a slot.
pub const SLOT_BYTES: usize = 64 * 1024;
/// Slots per sender.
pub const DEPTH: usize = 8;

/// The geometry of one rank's landing area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Ranks in the job (one block per rank; our own is unused).
    pub ranks: usize,
    /// Slots per sender, a power of two.
    pub depth: usize,
    /// Payload bytes of a slot, a multiple of 8.
    pub slot_bytes: usize,
}

impl RingLayout {
    /// The layout of a job of `ranks`, with [`DEPTH`] slots of [`SLOT_BYTES`].
    pub fn new(ranks: usize) -> RingLayout {
        RingLayout {
            ranks,
            depth: DEPTH,
            slot_bytes: SLOT_BYTES,
        }
    }

    fn stride(&self) -> usize {
        self.slot_bytes + TRAILER_BYTES
    }

    fn block_bytes(&self) -> usize {
        self.depth * self.stride() + 8
    }

    /// Bytes of the whole area.
    pub fn bytes(&self) -> usize {
        self.ranks * self.block_bytes()
    }

    /// Offset of the payload of `sender`'s piece number `seq`.
    pub fn slot(&self, sender: usize, seq: u64) -> usize {
        sender * self.block_bytes() + (seq as usize & (self.depth - 1)) * self.stride()
    }

    /// Offset of the trailer of `sender`'s piece number `seq` (8-aligned).
    pub fn trailer(&self, sender: usize, seq: u64) -> usize {
        self.slot(sender, seq) + self.slot_bytes
    }

    /// Offset of the credit word of `peer` in this rank's area: how many of this
    /// rank's pieces `peer` has consumed, put there by `peer` (8-aligned).
    pub fn credit(&self, peer: usize) -> usize {
        peer * self.block_bytes() + self.depth * self.stride()
    }

    /// The flag of piece `seq`: never 0 (the ring starts zeroed) and different
    /// from the flag of the previous use of the same slot.
    pub fn flag(&self, seq: u64) -> u16 {
        ((seq / self.depth as u64) % 0xffff) as u16 + 1
    }

    /// Pieces of a message of `len` bytes (a message of 0 bytes is one piece).
    pub fn fragments(&self, len: usize) -> usize {
        len.div_ceil(self.slot_bytes).max(1)
    }
}

/// What follows every piece in its slot, as one little-endian word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// Bytes of this piece.
    pub len: u32,
    /// The piece ends its message.
    pub last: bool,
    /// Pieces of the receiver's the sender has consumed, mod 2^16.
    pub consumed: u16,
    /// The slot's flag ([`RingLayout::flag`]).
    pub flag: u16,
}

impl Trailer {
    /// The word: length in bits 0..31, `last` in bit 31, `consumed` in 32..48,
    /// the flag in 48..64.
    pub fn word(&self) -> u64 {
        debug_assert!(self.len < 1 << 31);
        u64::from(self.len)
            | u64::from(self.last) << 31
            | u64::from(self.consumed) << 32
            | u64::from(self.flag) << 48
    }

    /// Inverse of [`Trailer::word`].
    pub fn from_word(word: u64) -> Trailer {
        Trailer {
            len: (word & 0x7fff_ffff) as u32,
            last: word & 1 << 31 != 0,
            consumed: (word >> 32) as u16,
            flag: (word >> 48) as u16,
        }
    }
}

/// The full count of pieces consumed, from a 16-bit report `reported`, given
/// what was known (`known`) and how many were sent (`sent`): the value nearest
/// above `known` with those low bits, or `known` when the report is stale or
/// claims more than was sent.
pub fn widen_consumed(known: u64, sent: u64, reported: u16) -> u64 {
    let mut full = (known & !0xffff) | u64::from(reported);
    if full < known {
        full += 0x1_0000;
    }
    if full > sent {
        known
    } else {
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_trailers_and_credits_tile_the_area() {
        let r = RingLayout {
            ranks: 3,
            depth: 4,
            slot_bytes: 64,
        };
        assert_eq!(r.slot(0, 0), 0);
        assert_eq!(r.trailer(0, 0), 64);
        assert_eq!(r.slot(0, 1), 72);
        assert_eq!(r.slot(0, 4), 0, "a slot is reused after depth pieces");
        assert_eq!(r.credit(0), 4 * 72);
        assert_eq!(r.slot(1, 0), r.credit(0) + 8);
        assert_eq!(r.credit(2) + 8, r.bytes());
        for peer in 0..3 {
            for seq in 0..9 {
                assert_eq!(r.trailer(peer, seq) % 8, 0);
            }
            assert_eq!(r.credit(peer) % 8, 0);
        }
        let real = RingLayout::new(2);
        assert!(real.depth.is_power_of_two() && real.slot_bytes.is_multiple_of(8));
    }

    #[test]
    fn flags_are_never_zero_and_change_between_uses_of_a_slot() {
        let r = RingLayout::new(2);
        for seq in 0..200_000u64 {
            assert_ne!(r.flag(seq), 0);
            assert_ne!(r.flag(seq), r.flag(seq + r.depth as u64));
        }
    }

    #[test]
    fn messages_are_cut_into_slot_sized_pieces() {
        let r = RingLayout::new(2);
        assert_eq!(r.fragments(0), 1);
        assert_eq!(r.fragments(1), 1);
        assert_eq!(r.fragments(SLOT_BYTES), 1);
        assert_eq!(r.fragments(SLOT_BYTES + 1), 2);
        assert_eq!(r.fragments(8 << 20), 128);
    }

    #[test]
    fn trailers_roundtrip() {
        let t = Trailer {
            len: 65536,
            last: true,
            consumed: 65535,
            flag: 0xfffe,
        };
        assert_eq!(Trailer::from_word(t.word()), t);
        let zero = Trailer::from_word(0);
        assert_eq!((zero.len, zero.last, zero.flag), (0, false, 0));
    }

    #[test]
    fn consumed_counts_widen_across_the_16_bit_wrap() {
        assert_eq!(widen_consumed(0, 10, 7), 7);
        assert_eq!(widen_consumed(65530, 65600, 20), 65536 + 20);
        assert_eq!(widen_consumed(70000, 70010, 69990u64 as u16), 70000);
        assert_eq!(widen_consumed(5, 5, 9), 5);
        assert_eq!(widen_consumed(5, 8, 8), 8);
    }
}
