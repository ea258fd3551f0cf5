//! What ranks tell each other to connect reliable-connected queue pairs, and the
//! receive advertisements of the RDMA-write data path.
//!
//! Connecting an RC queue pair needs, from the remote side, its queue-pair number,
//! its port's LID (InfiniBand) or GID (RoCE, or routed InfiniBand), the MTU it can
//! use and the packet sequence number it starts receiving at (the verbs
//! `ibv_modify_qp` RTR attributes `dest_qp_num`, `ah_attr.dlid`/`ah_attr.grh.dgid`,
//! `path_mtu`, `rq_psn`). Each rank creates one QP per peer, sends one
//! [`Endpoint`] through `Control::allgather`, and reads its own entry out of every
//! peer's list. Everything is little endian and checked on decode like a packet
//! from the network: a peer built from other source, or a corrupted control
//! message, gets a one-line error naming what is wrong, never a panic.

use std::fmt;

/// First bytes of every [`Endpoint`] message.
pub const MAGIC: [u8; 4] = *b"NGVB";
/// Version of the endpoint format (2: the receive depth, for flow control; 3: the
/// landing ring of the write-poll path).
pub const VERSION: u8 = 3;
/// Fixed part of an encoded endpoint: magic, version, op, mtu, reserved, lid,
/// gid, rank count, receive depth, ring address and rkey.
pub const HEADER_BYTES: usize = 4 + 1 + 1 + 1 + 1 + 2 + 16 + 4 + 4 + 8 + 4;
/// The smallest receive depth a peer may publish: flow control keeps one receive
/// for credit messages and needs at least one for data.
pub const MIN_RECV_DEPTH: u32 = 2;
/// Bytes per peer entry: qpn, psn of the message QP, then of the bulk QP.
pub const ENTRY_BYTES: usize = 16;
/// Queue-pair numbers and packet sequence numbers are 24-bit quantities.
pub const MAX_24BIT: u32 = 0x00FF_FFFF;

/// The data path both ends of every connection must agree on (`--verbs-op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerbsOp {
    /// Two-sided: the receiver posts a receive work request into the target region
    /// (pre-posted by `irecv`), the sender posts a send.
    Send,
    /// One-sided: the receiver advertises the target region (address, rkey, length)
    /// with a small send, the sender RDMA-writes into it with immediate data, which
    /// completes a receive on the target side.
    Write,
    /// One-sided, measured as `ib_write_lat` does: messages up to
    /// [`crate::layout::EAGER_BYTES`] are RDMA-written, without immediate data, into
    /// a ring the receiver registered at setup, and the receiver polls the last
    /// byte of the slot ([`crate::layout::RingLayout`]); no completion at the
    /// receiver, no advertisement per message. Larger messages go as on
    /// [`VerbsOp::Write`]. Needs the poll wait mode (a ring write raises no event).
    WritePoll,
}

impl VerbsOp {
    /// `"send"` or `"write"`, as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            VerbsOp::Send => "send",
            VerbsOp::Write => "write",
            VerbsOp::WritePoll => "write-poll",
        }
    }

    fn code(self) -> u8 {
        match self {
            VerbsOp::Send => 1,
            VerbsOp::Write => 2,
            VerbsOp::WritePoll => 3,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(VerbsOp::Send),
            2 => Some(VerbsOp::Write),
            3 => Some(VerbsOp::WritePoll),
            _ => None,
        }
    }
}

impl std::str::FromStr for VerbsOp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "send" => Ok(VerbsOp::Send),
            "write" => Ok(VerbsOp::Write),
            "write-poll" => Ok(VerbsOp::WritePoll),
            other => Err(format!(
                "unknown verbs op `{other}` (expected send, write or write-poll)"
            )),
        }
    }
}

/// One queue pair's address as its owner publishes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAddr {
    /// Queue-pair number (24 bits).
    pub qpn: u32,
    /// The PSN the owner starts sending with; the peer receives from it (24 bits).
    pub psn: u32,
}

/// What one rank publishes: its port address and, per rank of the job, the QPs it
/// created for that rank (the entry for itself is all zero): the message QP (eager
/// messages, receive advertisements, RDMA writes) and, on the send path, the bulk QP
/// (large sends into receives posted before their advertisement went out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The data path this rank runs.
    pub op: VerbsOp,
    /// Active MTU of the port, as the verbs `ibv_mtu` enum (1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// GID at the chosen index (all zero when no GID is used).
    pub gid: [u8; 16],
    /// Indexed by rank: the message QP this rank created for that rank.
    pub qps: Vec<QpAddr>,
    /// Indexed by rank: the bulk QP (all zero on the write path).
    pub bulk: Vec<QpAddr>,
    /// Receives this rank keeps posted on each message QP: the send credits every
    /// peer starts with.
    pub recv_depth: u32,
    /// Write-poll path: address and rkey of this rank's ring area
    /// ([`crate::layout::RingLayout`]); zero on the other paths.
    pub ring: (u64, u32),
}

/// Why an endpoint message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than its own header says.
    #[error("endpoint message truncated: {got} bytes, need {need}")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Longer than its header says.
    #[error("endpoint message has {extra} trailing bytes")]
    Trailing {
        /// Bytes past the end.
        extra: usize,
    },
    /// Not an ngauge verbs endpoint at all.
    #[error("endpoint message has bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// Another format version (a different ngauge build).
    #[error("endpoint format version {0}, this build speaks {VERSION}")]
    BadVersion(u8),
    /// Unknown data path code.
    #[error("unknown verbs op code {0}")]
    BadOp(u8),
    /// MTU outside the verbs enum.
    #[error("MTU code {0} is not one of 1 (256 B) .. 5 (4096 B)")]
    BadMtu(u8),
    /// The message was made for a job of another size.
    #[error("endpoint lists {got} ranks, the job has {expected}")]
    RankCount {
        /// Ranks in the message.
        got: usize,
        /// Ranks in the job.
        expected: usize,
    },
    /// A receive depth too small for flow control.
    #[error("receive depth {0} is below the minimum of {MIN_RECV_DEPTH}")]
    BadDepth(u32),
    /// A 24-bit field holds a larger number.
    #[error("{field} {value:#x} for rank {rank} does not fit in 24 bits")]
    Not24Bit {
        /// `qpn` or `psn`.
        field: &'static str,
        /// The entry.
        rank: usize,
        /// The value.
        value: u32,
    },
}

impl Endpoint {
    /// Encodes as `magic, version, op, mtu, 0, lid:u16, gid[16], count:u32,
    /// recv_depth:u32, ring_addr:u64, ring_rkey:u32, (qpn:u32, psn:u32, bulk_qpn:u32, bulk_psn:u32) * count`,
    /// little endian.
    ///
    /// # Panics
    /// If `bulk` and `qps` differ in length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + ENTRY_BYTES * self.qps.len());
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.op.code());
        out.push(self.mtu);
        out.push(0);
        out.extend_from_slice(&self.lid.to_le_bytes());
        out.extend_from_slice(&self.gid);
        out.extend_from_slice(&(self.qps.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.recv_depth.to_le_bytes());
        out.extend_from_slice(&self.ring.0.to_le_bytes());
        out.extend_from_slice(&self.ring.1.to_le_bytes());
        assert_eq!(self.qps.len(), self.bulk.len(), "one bulk entry per rank");
        for (qp, bulk) in self.qps.iter().zip(&self.bulk) {
            for v in [qp.qpn, qp.psn, bulk.qpn, bulk.psn] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// Decodes and checks a message for a job of `expected_ranks` ranks.
    pub fn decode(bytes: &[u8], expected_ranks: usize) -> Result<Endpoint, WireError> {
        if bytes.len() < HEADER_BYTES {
            return Err(WireError::Truncated {
                got: bytes.len(),
                need: HEADER_BYTES,
            });
        }
        let magic: [u8; 4] = bytes[0..4].try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        if bytes[4] != VERSION {
            return Err(WireError::BadVersion(bytes[4]));
        }
        let op = VerbsOp::from_code(bytes[5]).ok_or(WireError::BadOp(bytes[5]))?;
        let mtu = bytes[6];
        if !(1..=5).contains(&mtu) {
            return Err(WireError::BadMtu(mtu));
        }
        let lid = u16::from_le_bytes([bytes[8], bytes[9]]);
        let gid: [u8; 16] = bytes[10..26].try_into().expect("16 bytes");
        let count = u32::from_le_bytes(bytes[26..30].try_into().expect("4 bytes")) as usize;
        if count != expected_ranks {
            return Err(WireError::RankCount {
                got: count,
                expected: expected_ranks,
            });
        }
        let recv_depth = u32::from_le_bytes(bytes[30..34].try_into().expect("4 bytes"));
        if recv_depth < MIN_RECV_DEPTH {
            return Err(WireError::BadDepth(recv_depth));
        }
        let ring = (
            u64::from_le_bytes(bytes[34..42].try_into().expect("8 bytes")),
            u32::from_le_bytes(bytes[42..46].try_into().expect("4 bytes")),
        );
        // count == expected_ranks, which the caller bounds: no overflow here.
        let need = HEADER_BYTES + ENTRY_BYTES * count;
        if bytes.len() < need {
            return Err(WireError::Truncated {
                got: bytes.len(),
                need,
            });
        }
        if bytes.len() > need {
            return Err(WireError::Trailing {
                extra: bytes.len() - need,
            });
        }
        let mut qps = Vec::with_capacity(count);
        let mut bulk = Vec::with_capacity(count);
        for (rank, entry) in bytes[HEADER_BYTES..].chunks_exact(ENTRY_BYTES).enumerate() {
            let word =
                |i: usize| u32::from_le_bytes(entry[4 * i..4 * i + 4].try_into().expect("4"));
            let (qpn, psn, bqpn, bpsn) = (word(0), word(1), word(2), word(3));
            for (field, value) in [
                ("qpn", qpn),
                ("psn", psn),
                ("bulk qpn", bqpn),
                ("bulk psn", bpsn),
            ] {
                if value > MAX_24BIT {
                    return Err(WireError::Not24Bit { field, rank, value });
                }
            }
            qps.push(QpAddr { qpn, psn });
            bulk.push(QpAddr {
                qpn: bqpn,
                psn: bpsn,
            });
        }
        Ok(Endpoint {
            op,
            mtu,
            lid,
            gid,
            qps,
            bulk,
            recv_depth,
            ring,
        })
    }
}

/// A receive advertisement of the RDMA-write path: "write your next message to me
/// here". Sent by the receiver when it posts `irecv`; the sender consumes them in
/// order (an RC connection delivers in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advert {
    /// Virtual address of the target region in the receiver's registered memory.
    pub addr: u64,
    /// Remote key of the memory region that holds it.
    pub rkey: u32,
    /// Exact length the receiver expects.
    pub len: u32,
}

/// Magic word of an advertisement (catches a control-slot mix-up).
pub const ADVERT_MAGIC: u32 = 0x4e47_4144; // "NGAD"
/// Encoded size of an [`Advert`].
pub const ADVERT_BYTES: usize = 20;

impl Advert {
    /// `magic:u32, addr:u64, rkey:u32, len:u32`, little endian.
    pub fn encode(&self) -> [u8; ADVERT_BYTES] {
        let mut out = [0u8; ADVERT_BYTES];
        out[0..4].copy_from_slice(&ADVERT_MAGIC.to_le_bytes());
        out[4..12].copy_from_slice(&self.addr.to_le_bytes());
        out[12..16].copy_from_slice(&self.rkey.to_le_bytes());
        out[16..20].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Decodes exactly [`ADVERT_BYTES`] bytes; `None` for anything else.
    pub fn decode(bytes: &[u8]) -> Option<Advert> {
        if bytes.len() != ADVERT_BYTES {
            return None;
        }
        let word = |r: std::ops::Range<usize>| -> u32 {
            u32::from_le_bytes(bytes[r].try_into().expect("4 bytes"))
        };
        if word(0..4) != ADVERT_MAGIC {
            return None;
        }
        Some(Advert {
            addr: u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes")),
            rkey: word(12..16),
            len: word(16..20),
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let groups: Vec<String> = self
            .gid
            .chunks(2)
            .map(|pair| format!("{:02x}{:02x}", pair[0], pair[1]))
            .collect();
        write!(f, "lid {} gid {}", self.lid, groups.join(":"))
    }
}

/// What a rank contributes to the setup exchange: `1` and its endpoint, or `0` and
/// the reason it could not set up (it still takes part, so nobody waits for it).
pub fn setup_message(local: Result<&Endpoint, &str>) -> Vec<u8> {
    match local {
        Ok(ep) => {
            let mut m = vec![1u8];
            m.extend_from_slice(&ep.encode());
            m
        }
        Err(reason) => {
            let mut m = vec![0u8];
            m.extend_from_slice(reason.as_bytes());
            m
        }
    }
}

/// Every rank's endpoint from the gathered [`setup_message`]s, or a one-line reason
/// naming the first rank that could not set up, sent something malformed, or runs
/// another data path than `op` (this rank, `me`, runs `op`).
pub fn endpoints_from(
    all: &[Vec<u8>],
    size: usize,
    me: usize,
    op: VerbsOp,
) -> Result<Vec<Endpoint>, String> {
    if all.len() != size {
        return Err(format!("{} setup messages for {size} ranks", all.len()));
    }
    let mut endpoints = Vec::with_capacity(size);
    for (rank, m) in all.iter().enumerate() {
        match m.split_first() {
            Some((1, rest)) => endpoints.push(
                Endpoint::decode(rest, size)
                    .map_err(|e| format!("rank {rank} sent a bad endpoint: {e}"))?,
            ),
            Some((0, rest)) => {
                return Err(format!(
                    "rank {rank} could not set up: {}",
                    String::from_utf8_lossy(rest)
                ))
            }
            _ => return Err(format!("rank {rank} sent a malformed setup message")),
        }
    }
    if let Some((rank, ep)) = endpoints.iter().enumerate().find(|(_, ep)| ep.op != op) {
        return Err(format!(
            "rank {rank} runs --verbs-op {}, rank {me} runs --verbs-op {}",
            ep.op.as_str(),
            op.as_str()
        ));
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ranks: usize) -> Endpoint {
        Endpoint {
            op: VerbsOp::Write,
            mtu: 3,
            lid: 0x1234,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
            qps: (0..ranks)
                .map(|r| QpAddr {
                    qpn: 0x11 * r as u32,
                    psn: 0xabcdef - r as u32,
                })
                .collect(),
            bulk: (0..ranks)
                .map(|r| QpAddr {
                    qpn: 0x22 * r as u32,
                    psn: 0x123456 + r as u32,
                })
                .collect(),
            recv_depth: 0x0102_0304,
            ring: (0x1122_3344_5566_7788, 0xaabb_ccdd),
        }
    }

    #[test]
    fn endpoint_roundtrip_and_fixed_bytes() {
        let ep = sample(2);
        let bytes = ep.encode();
        assert_eq!(bytes.len(), HEADER_BYTES + 2 * ENTRY_BYTES);
        assert_eq!(&bytes[0..8], b"NGVB\x03\x02\x03\x00");
        assert_eq!(&bytes[8..10], &[0x34, 0x12]);
        assert_eq!(&bytes[26..30], &[2, 0, 0, 0]);
        assert_eq!(&bytes[30..34], &[4, 3, 2, 1]);
        assert_eq!(
            &bytes[34..46],
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xdd, 0xcc, 0xbb, 0xaa]
        );
        // rank 1: qpn 0x11, psn 0xabcdee, bulk qpn 0x22, bulk psn 0x123457
        assert_eq!(
            &bytes[62..78],
            &[0x11, 0, 0, 0, 0xee, 0xcd, 0xab, 0, 0x22, 0, 0, 0, 0x57, 0x34, 0x12, 0]
        );
        assert_eq!(Endpoint::decode(&bytes, 2), Ok(ep));
    }

    #[test]
    fn endpoint_decode_rejects_hostile_input() {
        let good = sample(3).encode();
        for cut in 0..good.len() {
            assert!(
                Endpoint::decode(&good[..cut], 3).is_err(),
                "accepted a {cut}-byte prefix"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            Endpoint::decode(&long, 3),
            Err(WireError::Trailing { extra: 1 })
        );
        assert!(matches!(
            Endpoint::decode(&good, 4),
            Err(WireError::RankCount {
                got: 3,
                expected: 4
            })
        ));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(
            Endpoint::decode(&bad, 3),
            Err(WireError::BadMagic(_))
        ));
        let mut bad = good.clone();
        bad[30..34].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(Endpoint::decode(&bad, 3), Err(WireError::BadDepth(1)));
        let mut bad = good.clone();
        bad[4] = 9;
        assert_eq!(Endpoint::decode(&bad, 3), Err(WireError::BadVersion(9)));
        let mut bad = good.clone();
        bad[5] = 0;
        assert_eq!(Endpoint::decode(&bad, 3), Err(WireError::BadOp(0)));
        for mtu in [0u8, 6, 255] {
            let mut bad = good.clone();
            bad[6] = mtu;
            assert_eq!(Endpoint::decode(&bad, 3), Err(WireError::BadMtu(mtu)));
        }
        let mut bad = good.clone();
        bad[HEADER_BYTES + ENTRY_BYTES + 15] = 1; // rank 1 bulk psn >= 2^24
        assert!(matches!(
            Endpoint::decode(&bad, 3),
            Err(WireError::Not24Bit {
                field: "bulk psn",
                rank: 1,
                ..
            })
        ));
        let mut bad = good.clone();
        bad[HEADER_BYTES + ENTRY_BYTES + 3] = 1; // rank 1 qpn >= 2^24
        assert!(matches!(
            Endpoint::decode(&bad, 3),
            Err(WireError::Not24Bit {
                field: "qpn",
                rank: 1,
                ..
            })
        ));
        // a count that would overflow the length computation if not checked first
        let mut bad = good.clone();
        bad[26..30].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Endpoint::decode(&bad, 3),
            Err(WireError::RankCount { .. })
        ));
    }

    #[test]
    fn advert_roundtrip_and_rejects() {
        let ad = Advert {
            addr: 0x7f00_1234_5678,
            rkey: 0xdead_beef,
            len: 1 << 20,
        };
        let bytes = ad.encode();
        assert_eq!(&bytes[0..4], b"DAGN");
        assert_eq!(Advert::decode(&bytes), Some(ad));
        assert_eq!(Advert::decode(&bytes[..19]), None);
        let mut bad = bytes;
        bad[0] ^= 1;
        assert_eq!(Advert::decode(&bad), None);
        assert_eq!(Advert::decode(&[0u8; 21]), None);
    }

    #[test]
    fn setup_exchange_names_the_rank_that_failed_or_disagrees() {
        let ok = |op| {
            let mut ep = sample(3);
            ep.op = op;
            setup_message(Ok(&ep))
        };
        let all = vec![ok(VerbsOp::Write), ok(VerbsOp::Write), ok(VerbsOp::Write)];
        assert_eq!(endpoints_from(&all, 3, 0, VerbsOp::Write).unwrap().len(), 3);

        let mut failed = all.clone();
        failed[2] = setup_message(Err("verbs is not usable: no RDMA device"));
        let err = endpoints_from(&failed, 3, 0, VerbsOp::Write).unwrap_err();
        assert_eq!(
            err,
            "rank 2 could not set up: verbs is not usable: no RDMA device"
        );

        let mut other_op = all.clone();
        other_op[1] = ok(VerbsOp::Send);
        let err = endpoints_from(&other_op, 3, 0, VerbsOp::Write).unwrap_err();
        assert_eq!(
            err,
            "rank 1 runs --verbs-op send, rank 0 runs --verbs-op write"
        );

        for garbage in [vec![], vec![7u8, 1, 2], vec![1u8, 0, 0]] {
            let mut bad = all.clone();
            bad[1] = garbage;
            let err = endpoints_from(&bad, 3, 0, VerbsOp::Write).unwrap_err();
            assert!(err.starts_with("rank 1 "), "{err}");
        }
        assert!(endpoints_from(&all[..2], 3, 0, VerbsOp::Write).is_err());
    }

    #[test]
    fn op_parses_and_names() {
        assert_eq!("send".parse::<VerbsOp>(), Ok(VerbsOp::Send));
        assert_eq!("write".parse::<VerbsOp>().unwrap().as_str(), "write");
        assert!("read".parse::<VerbsOp>().unwrap_err().contains("read"));
    }
}
