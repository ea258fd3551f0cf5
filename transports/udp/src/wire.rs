//! The datagram header: the 16 bytes in front of every payload (magic, flags,
//! acknowledgement, sequence number, connection id; see the crate docs, "Wire
//! format"), written by [`Header::encode`] and read back by [`Header::parse`],
//! which refuses every datagram that does not carry the connection id the
//! receiver drew for its link (a 64-bit random value exchanged over the
//! authenticated control plane; see `docs/reliability.md`, "UDP datagrams").

/// First two bytes of every ngauge datagram.
pub(crate) const MAGIC: [u8; 2] = *b"NU";
/// Bytes of the ngauge header in front of every datagram's payload.
pub const HEADER_BYTES: usize = 16;
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
    /// The header's bytes: magic, flags, acknowledgement, `seq` and the
    /// receiver's connection id `conn_id`, both little-endian.
    #[inline(always)]
    pub(crate) fn encode(self, conn_id: u64) -> [u8; HEADER_BYTES] {
        let s = self.seq.to_le_bytes();
        let c = conn_id.to_le_bytes();
        [
            MAGIC[0], MAGIC[1], self.flags, self.ack, s[0], s[1], s[2], s[3], c[0], c[1], c[2],
            c[3], c[4], c[5], c[6], c[7],
        ]
    }

    /// The header at the start of `bytes`; `None` when there are fewer than
    /// [`HEADER_BYTES`] or they do not start with the magic and `conn_id` (not
    /// this link's: a stray or forged datagram, never acted on).
    #[inline(always)]
    pub(crate) fn parse(bytes: &[u8], conn_id: u64) -> Option<Header> {
        let hdr: &[u8; HEADER_BYTES] = bytes.get(..HEADER_BYTES)?.try_into().ok()?;
        // One 8-byte comparison (a fixed-size array: no length check, no memcmp).
        let id = u64::from_le_bytes([
            hdr[8], hdr[9], hdr[10], hdr[11], hdr[12], hdr[13], hdr[14], hdr[15],
        ]);
        if hdr[..2] != MAGIC || id != conn_id {
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

    const ID: u64 = 0x9e37_79b9_7f4a_7c15;

    #[test]
    fn encodes_magic_flags_ack_and_little_endian_seq() {
        let h = Header {
            flags: FLAG_RETX | FLAG_REPLAY,
            ack: 0x99,
            seq: 0x0403_0201,
        };
        assert_eq!(
            h.encode(0x0807_0605_0403_0201),
            [b'N', b'U', 3, 0x99, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(Header::parse(&h.encode(ID), ID), Some(h));
    }

    #[test]
    fn parses_the_header_in_front_of_a_payload() {
        let mut bytes = Header {
            flags: FLAG_NACK,
            ack: 7,
            seq: u32::MAX,
        }
        .encode(ID)
        .to_vec();
        bytes.extend_from_slice(&[42, 43]);
        assert_eq!(
            Header::parse(&bytes, ID),
            Some(Header {
                flags: FLAG_NACK,
                ack: 7,
                seq: u32::MAX
            })
        );
    }

    #[test]
    fn refuses_short_and_foreign_datagrams() {
        let good = Header {
            flags: FLAG_BYE,
            ack: 0,
            seq: 1,
        }
        .encode(ID);
        assert_eq!(Header::parse(&[], ID), None);
        assert_eq!(Header::parse(&good[..HEADER_BYTES - 1], ID), None);
        assert_eq!(Header::parse(&[0; 64], ID), None);
        let mut other_magic = good;
        other_magic[1] = b'X';
        assert_eq!(Header::parse(&other_magic, ID), None);
        // The magic and a valid-looking header with another link's id (or none):
        // a forged datagram.
        assert_eq!(Header::parse(&good, ID ^ 1), None);
        assert_eq!(Header::parse(&good[..8], ID), None);
        assert_eq!(Header::parse(&good, ID).map(|h| h.flags), Some(FLAG_BYE));
    }
}
