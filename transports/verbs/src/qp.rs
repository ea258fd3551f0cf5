//! The attributes that bring a reliable-connected queue pair from RESET through
//! INIT and RTR (ready to receive) to RTS (ready to send), as plain values.
//!
//! This follows the RC connection sequence of the verbs API (`ibv_modify_qp(3)`,
//! and the InfiniBand Architecture Specification vol. 1, ch. 10.3 and 11.2.4.2,
//! table "QP state transition properties"): each transition has a set of required
//! attributes, named by the attribute mask. Building them here, without a device,
//! lets the required-attribute rules, MTU negotiation, address-vector choice (LID
//! or GRH) and 24-bit PSN handling be unit tested; the device code only copies
//! them into `struct ibv_qp_attr`.

use crate::wire::{Endpoint, QpAddr, MAX_24BIT};

/// `enum ibv_qp_attr_mask` bits (verbs.h); checked against the bindings when the
/// device code is compiled.
#[allow(missing_docs)]
pub mod mask {
    pub const STATE: u32 = 1 << 0;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// `enum ibv_access_flags` bits used here.
#[allow(missing_docs)]
pub mod access {
    pub const LOCAL_WRITE: u32 = 1;
    pub const REMOTE_WRITE: u32 = 2;
    pub const REMOTE_READ: u32 = 4;
    pub const REMOTE_ATOMIC: u32 = 8;
}

/// `enum ibv_qp_state` values used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpState {
    /// Initialized: receives may be posted, nothing is processed.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
}

/// The local port facts a connection needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalPort {
    /// Port number (1-based).
    pub port: u8,
    /// Active MTU (`ibv_mtu`: 1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// GID index to source from, when a global route header is used.
    pub gid_index: Option<u8>,
}

/// Timeouts and retry counts of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reliability {
    /// Local ACK timeout exponent: 4.096 us * 2^timeout (14: about 67 ms).
    pub timeout: u8,
    /// Transport retries before the QP fails (at most 7).
    pub retry_cnt: u8,
    /// Receiver-not-ready retries (7 = retry forever). Send credits keep every
    /// message within the receives the peer has posted, so an RNR NAK does not
    /// happen in normal operation; if one did, a wait without progress still ends
    /// in the transport's timeout.
    pub rnr_retry: u8,
    /// RNR NAK delay code the receiver asks for (1 = 0.01 ms, 12 = 0.64 ms).
    pub min_rnr_timer: u8,
}

impl Default for Reliability {
    fn default() -> Self {
        Reliability {
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            // Small: a pingpong whose receive is posted a little late should pay
            // microseconds, not most of a millisecond.
            min_rnr_timer: 1,
        }
    }
}

/// One `ibv_modify_qp` call: the target state, the attribute mask and the values
/// the mask names (the others are left zero).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transition {
    /// Target state (`qp_state`).
    pub state: u8,
    /// `ibv_qp_attr_mask` bits.
    pub mask: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `port_num` (INIT) and `ah_attr.port_num` (RTR).
    pub port: u8,
    /// `qp_access_flags`.
    pub access: u32,
    /// `path_mtu`.
    pub path_mtu: u8,
    /// `dest_qp_num`.
    pub dest_qpn: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `ah_attr.dlid`.
    pub dlid: u16,
    /// `ah_attr.is_global` with `grh.dgid` and `grh.sgid_index`.
    pub grh: Option<([u8; 16], u8)>,
}

/// Hop limit for the global route header (RoCE v2 may be routed).
pub const HOP_LIMIT: u8 = 64;

/// RESET -> INIT: port, partition key index 0, and what remote peers may do to our
/// memory (RDMA write for the write path, read and atomics for `rma`; local write
/// is always needed to receive).
pub fn to_init(local: &LocalPort) -> Transition {
    Transition {
        state: QpState::Init as u8,
        mask: mask::STATE | mask::PKEY_INDEX | mask::PORT | mask::ACCESS_FLAGS,
        pkey_index: 0,
        port: local.port,
        access: access::LOCAL_WRITE
            | access::REMOTE_WRITE
            | access::REMOTE_READ
            | access::REMOTE_ATOMIC,
        ..Transition::default()
    }
}

/// INIT -> RTR: where the remote QP is and which PSN its first packet carries.
///
/// `remote` is the peer's published endpoint and `remote_qp` its entry for us. The
/// path MTU is the smaller of the two ports' active MTUs. A global route header is
/// used when we have a GID index (RoCE always needs one; InfiniBand only across
/// subnets), otherwise the peer's LID addresses it.
pub fn to_rtr(
    local: &LocalPort,
    remote: &Endpoint,
    remote_qp: QpAddr,
    rel: &Reliability,
) -> Transition {
    Transition {
        state: QpState::Rtr as u8,
        mask: mask::STATE
            | mask::AV
            | mask::PATH_MTU
            | mask::DEST_QPN
            | mask::RQ_PSN
            | mask::MAX_DEST_RD_ATOMIC
            | mask::MIN_RNR_TIMER,
        port: local.port,
        path_mtu: local.mtu.min(remote.mtu),
        dest_qpn: remote_qp.qpn & MAX_24BIT,
        rq_psn: remote_qp.psn & MAX_24BIT,
        max_dest_rd_atomic: 1,
        min_rnr_timer: rel.min_rnr_timer,
        dlid: remote.lid,
        grh: local.gid_index.map(|index| (remote.gid, index)),
        ..Transition::default()
    }
}

/// RTR -> RTS: our starting send PSN (the one we published) and the retry policy.
pub fn to_rts(own_psn: u32, rel: &Reliability) -> Transition {
    Transition {
        state: QpState::Rts as u8,
        mask: mask::STATE
            | mask::TIMEOUT
            | mask::RETRY_CNT
            | mask::RNR_RETRY
            | mask::SQ_PSN
            | mask::MAX_QP_RD_ATOMIC,
        sq_psn: own_psn & MAX_24BIT,
        timeout: rel.timeout,
        retry_cnt: rel.retry_cnt.min(7),
        rnr_retry: rel.rnr_retry.min(7),
        max_rd_atomic: 1,
        ..Transition::default()
    }
}

/// A 24-bit starting PSN, different per rank, peer and run (not a secret: only to
/// make stale packets of an earlier run unlikely to be accepted).
pub fn initial_psn(rank: usize, peer: usize, seed: u64) -> u32 {
    // splitmix64 finaliser
    let mut z = seed
        .wrapping_add((rank as u64) << 32 | peer as u64)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z as u32) & MAX_24BIT
}

/// Bytes of an `ibv_mtu` code (1 = 256 .. 5 = 4096).
pub fn mtu_bytes(code: u8) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128u32 << code)
}

/// The RoCE version of a GID table entry, as the kernel lists it in
/// `/sys/class/infiniband/DEV/ports/PORT/gid_attrs/types/INDEX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// `IB/RoCE v1`: InfiniBand, or RoCE v1 (Ethernet frames, not routable) on an
    /// Ethernet port.
    IbOrRoceV1,
    /// `RoCE v2`: UDP/IP encapsulation (routable).
    RoceV2,
}

impl GidType {
    /// Parses the sysfs text; `None` for anything else (an empty entry).
    pub fn parse(text: &str) -> Option<GidType> {
        match text.trim() {
            "RoCE v2" => Some(GidType::RoceV2),
            "IB/RoCE v1" | "RoCE v1" | "IB" => Some(GidType::IbOrRoceV1),
            _ => None,
        }
    }
}

/// Whether a GID is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
pub fn ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
}

/// The GID index to use on a RoCE port, from its non-empty entries (index, GID,
/// type if the kernel says): RoCE v2 over IPv4 first, then RoCE v2 over IPv6,
/// then (a kernel that lists no types) the first IPv4-mapped GID, then RoCE v1
/// over IPv4, then the first entry. Drivers list each address as v1 and as v2
/// (mlx5: v1 at an even index, v2 right after it), so the first IPv4-mapped GID
/// alone would be RoCE v1.
pub fn choose_roce_gid(entries: &[(u8, [u8; 16], Option<GidType>)]) -> Option<u8> {
    entries
        .iter()
        .min_by_key(|(index, gid, ty)| {
            let rank = match (ty, ipv4_mapped(gid)) {
                (Some(GidType::RoceV2), true) => 0,
                (Some(GidType::RoceV2), false) => 1,
                (None, true) => 2,
                (Some(GidType::IbOrRoceV1), true) => 3,
                _ => 4,
            };
            (rank, *index)
        })
        .map(|(index, _, _)| *index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::VerbsOp;

    fn remote(mtu: u8) -> Endpoint {
        Endpoint {
            op: VerbsOp::Send,
            mtu,
            lid: 7,
            gid: [9; 16],
            qps: vec![QpAddr::default(); 2],
            bulk: vec![QpAddr::default(); 2],
            recv_depth: 16,
            ring: (0, 0),
        }
    }

    #[test]
    fn roce_v2_over_ipv4_is_preferred_whatever_the_order() {
        let link_local = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1];
        let v4 = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
        let (v1, v2) = (Some(GidType::IbOrRoceV1), Some(GidType::RoceV2));
        // mlx5: every address as v1, then as v2
        let mlx5 = [
            (0, link_local, v1),
            (1, link_local, v2),
            (2, v4, v1),
            (3, v4, v2),
        ];
        assert_eq!(choose_roce_gid(&mlx5), Some(3));
        // rxe on lo: link-local v2 at 0, the IPv4 address v2 at 1
        assert_eq!(
            choose_roce_gid(&[(0, link_local, v2), (1, v4, v2)]),
            Some(1)
        );
        // only IPv6: RoCE v2 beats v1
        assert_eq!(choose_roce_gid(&mlx5[..2]), Some(1));
        // no types known (old kernel): the first IPv4-mapped GID, as before
        assert_eq!(
            choose_roce_gid(&[(0, link_local, None), (1, v4, None), (2, v4, None)]),
            Some(1)
        );
        assert_eq!(choose_roce_gid(&[(5, link_local, v1)]), Some(5));
        assert_eq!(choose_roce_gid(&[]), None);
        assert_eq!(GidType::parse("RoCE v2\n"), v2);
        assert_eq!(GidType::parse("IB/RoCE v1\n"), v1);
        assert_eq!(GidType::parse(""), None);
    }

    #[test]
    fn init_names_port_pkey_and_access() {
        let t = to_init(&LocalPort {
            port: 2,
            mtu: 5,
            gid_index: None,
        });
        assert_eq!(t.state, 1);
        assert_eq!(t.mask, 0b11_1001);
        assert_eq!(t.port, 2);
        assert_ne!(t.access & access::REMOTE_WRITE, 0);
        assert_ne!(t.access & access::LOCAL_WRITE, 0);
    }

    #[test]
    fn rtr_takes_the_smaller_mtu_and_the_peer_address() {
        let local = LocalPort {
            port: 1,
            mtu: 5,
            gid_index: None,
        };
        let qp = QpAddr {
            qpn: 0x12,
            psn: 0x1_000_005, // 25 bits: masked to 24
        };
        let t = to_rtr(&local, &remote(3), qp, &Reliability::default());
        assert_eq!(t.state, 2);
        assert_eq!(t.path_mtu, 3);
        assert_eq!(t.dest_qpn, 0x12);
        assert_eq!(t.rq_psn, 5);
        assert_eq!(t.dlid, 7);
        assert_eq!(t.grh, None);
        // the IBA required attributes of INIT->RTR for RC
        for bit in [
            mask::STATE,
            mask::AV,
            mask::PATH_MTU,
            mask::DEST_QPN,
            mask::RQ_PSN,
            mask::MAX_DEST_RD_ATOMIC,
            mask::MIN_RNR_TIMER,
        ] {
            assert_ne!(t.mask & bit, 0, "missing mask bit {bit:#x}");
        }
        assert_eq!(t.mask & (mask::SQ_PSN | mask::TIMEOUT), 0);
        let t = to_rtr(
            &LocalPort { mtu: 2, ..local },
            &remote(5),
            qp,
            &Reliability::default(),
        );
        assert_eq!(t.path_mtu, 2);
    }

    #[test]
    fn rtr_uses_a_global_route_when_a_gid_index_is_set() {
        let local = LocalPort {
            port: 1,
            mtu: 3,
            gid_index: Some(1),
        };
        let t = to_rtr(
            &local,
            &remote(3),
            QpAddr::default(),
            &Reliability::default(),
        );
        assert_eq!(t.grh, Some(([9; 16], 1)));
    }

    #[test]
    fn rts_sets_own_psn_and_clamps_retries() {
        let rel = Reliability {
            retry_cnt: 9,
            rnr_retry: 200,
            ..Reliability::default()
        };
        let t = to_rts(0xff_123456, &rel);
        assert_eq!(t.state, 3);
        assert_eq!(t.sq_psn, 0x123456);
        assert_eq!((t.retry_cnt, t.rnr_retry), (7, 7));
        for bit in [
            mask::STATE,
            mask::TIMEOUT,
            mask::RETRY_CNT,
            mask::RNR_RETRY,
            mask::SQ_PSN,
            mask::MAX_QP_RD_ATOMIC,
        ] {
            assert_ne!(t.mask & bit, 0, "missing mask bit {bit:#x}");
        }
        assert_eq!(t.mask & (mask::AV | mask::DEST_QPN), 0);
    }

    #[test]
    fn psns_are_24_bit_and_differ_between_pairs() {
        let a = initial_psn(0, 1, 42);
        let b = initial_psn(1, 0, 42);
        let c = initial_psn(0, 1, 43);
        assert!(a <= MAX_24BIT && b <= MAX_24BIT && c <= MAX_24BIT);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }
}
