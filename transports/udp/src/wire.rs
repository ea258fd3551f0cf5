//! The datagram header: the 8 bytes in front of every payload (magic, flags,
//! acknowledgement, sequence number; see the crate docs, "Wire format"), written
//! by [`Header::encode`] and read back, stray datagrams refused, by
//! [`Header::parse`].

/// First two bytes of every ngauge datagram.
pub(crate) const MAGIC: [u8; 2] = *b"NU";
/// Bytes of the ngauge header in front of every datagram's payload.
pub const HEADER_BYTES: usize = 8;
/// Flag: sent again after a retransmission timeout (the sender waits for an answer).
pub(crate) const FLAG_RETX: u8 = 1;
/// Flag: sent again because the receiver asked (`NACK`).
pub(crate) const FLAG_REPLAY: u8 = 2;
/// Flag: the sender dropped its transport (header only; `seq` is how many
/// messages it delivered from the receiver).
pub(crate) const FLAG_BYE: u8 = 4;
/// Flag: "send again from `seq`", the sender's count of messages it delivered from
/// the receiver (header only).
pub(crate) const FLAG_NACK: u8 = 8;
/// Flag: "I delivered every message before `seq`" (header only; sent when a rank
/// settles, see `Transport::settle`).
pub(crate) const FLAG_ACK: u8 = 16;
/// Largest UDP payload over IPv4 (65 535 − 20 IP − 8 UDP).
pub const MAX_DATAGRAM_V4: usize = 65_507;
/// Largest UDP payload over IPv6 without jumbograms (65 535 − 8 UDP).
pub const MAX_DATAGRAM_V6: usize = 65_527;

/// One datagram header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// `FLAG_*` bits.
    pub(crate) flags: u8,
    /// The low byte of how many messages the sender delivered from the receiver
    /// (an acknowledgement; see `window`).
    pub(crate) ack: u8,
    /// The message's number: how many the sender sent to this peer before it
    /// (wrapping); in `BYE`, `NACK` and `ACK`, the sender's count of messages
    /// delivered from the receiver.
    pub(crate) seq: u32,
}

impl Header {
    /// The header's bytes: magic, flags, acknowledgement, `seq` little-endian.
    pub(crate) fn encode(self) -> [u8; HEADER_BYTES] {
        let s = self.seq.to_le_bytes();
        [
            MAGIC[0], MAGIC[1], self.flags, self.ack, s[0], s[1], s[2], s[3],
        ]
    }

    /// The header at the start of `bytes`; `None` when there are fewer than
    /// [`HEADER_BYTES`] or they do not start with the magic (not ours: a stray
    /// datagram on the port).
    pub(crate) fn parse(bytes: &[u8]) -> Option<Header> {
        let hdr = bytes.get(..HEADER_BYTES)?;
        if hdr[..2] != MAGIC {
            return None;
        }
        Some(Header {
            flags: hdr[2],
            ack: hdr[3],
            seq: u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_magic_flags_ack_and_little_endian_seq() {
        let h = Header {
            flags: FLAG_RETX | FLAG_REPLAY,
            ack: 0x99,
            seq: 0x0403_0201,
        };
        assert_eq!(h.encode(), [b'N', b'U', 3, 0x99, 1, 2, 3, 4]);
        assert_eq!(Header::parse(&h.encode()), Some(h));
    }

    #[test]
    fn parses_the_header_in_front_of_a_payload() {
        let bytes = [b'N', b'U', FLAG_NACK, 7, 0xff, 0xff, 0xff, 0xff, 42, 43];
        assert_eq!(
            Header::parse(&bytes),
            Some(Header {
                flags: FLAG_NACK,
                ack: 7,
                seq: u32::MAX
            })
        );
    }

    #[test]
    fn refuses_short_and_foreign_datagrams() {
        assert_eq!(Header::parse(&[]), None);
        assert_eq!(Header::parse(&[b'N', b'U', 0, 0, 1, 2, 3]), None);
        assert_eq!(Header::parse(&[b'N', b'X', 0, 0, 1, 2, 3, 4]), None);
        assert_eq!(Header::parse(&[0; 64]), None);
    }
}
