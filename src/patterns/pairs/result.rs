//! What the multi-pair engine ([`super::run`]) reports: one ordered pair's
//! measurement, and several pairs of one size measured at once.

use crate::stats::Summary;
use crate::transport::Rank;
use serde::Serialize;

/// The measurement of one ordered pair at one size (one JSON record).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PairResult {
    /// The initiator (the sender of a stream).
    pub from: Rank,
    /// The responder (the receiver of a stream).
    pub to: Rank,
    /// The step it was measured in (0-based; the pairs of one step ran at once).
    pub step: usize,
    /// Pairs measured at the same time in that step.
    pub concurrent_pairs: usize,
    /// Message size in bytes.
    pub size: usize,
    /// Messages in flight per timed round (1: ping-pong).
    pub window: usize,
    /// Half round-trip time (with a window: half a round) in microseconds.
    pub half_rtt_us: Summary,
    /// `window * size` over the median round (a ping-pong: `size` over the
    /// median half round trip; bidirectional: the bytes of both directions),
    /// MB/s with MB = 10^6 bytes, as `pingpong`'s.
    #[serde(rename = "bandwidth_MBps")]
    pub bandwidth_mbps: f64,
    /// Messages per second from the median round (`window` messages per round;
    /// a ping-pong's round trip counts one).
    pub msgs_per_s: f64,
    /// Whether the payloads were verified and found intact (`None`: not checked).
    pub data_check: Option<bool>,
}

/// Several pairs of one size measured at once (`pingpong --pairs N`, as
/// osu_multi_lat and osu_mbw_mr): each pair's result and the sums.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct MultiPair {
    /// Every pair's result, in the order of the pairs.
    pub per_pair: Vec<PairResult>,
    /// The pairs' bandwidths summed (osu_mbw_mr's aggregate), MB/s, MB = 10^6 bytes.
    #[serde(rename = "total_bandwidth_MBps")]
    pub total_bandwidth_mbps: f64,
    /// The pairs' message rates summed (osu_mbw_mr's messages/s).
    pub total_msgs_per_s: f64,
    /// With `--pattern` (the pairs are rank 0's flows): against the one pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<Congestion>,
}

crate::names::named_enum! {
    /// Which way the flows of a congestion run go.
    pub enum Fan("congestion pattern") {
        /// Rank 0 streams to every other rank at once.
        OneToN = "1toN",
        /// Every other rank streams to rank 0 at once.
        NToOne = "Nto1",
    }
}

/// A fan's flows against the one pair's stream (in `pingpong`'s `pairs`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Congestion {
    /// The pattern measured.
    pub pattern: Fan,
    /// The one pair's bandwidth, streaming alone in the same run, MB/s.
    #[serde(rename = "one_pair_MBps")]
    pub one_pair_mbps: f64,
    /// The median flow's bandwidth over the one pair's (1: no congestion).
    pub flow_ratio: f64,
    /// The flows' total over the one pair's (N: rank 0 keeps up with N flows).
    pub total_ratio: f64,
}

impl Congestion {
    /// The figures of `flows` (the fan's, one per peer) against `one_pair`
    /// (the reference's single result); `None` without either.
    pub fn of(pattern: Fan, flows: &[PairResult], one_pair: &[PairResult]) -> Option<Self> {
        let one = one_pair.first()?.bandwidth_mbps;
        let bw: Vec<f64> = flows.iter().map(|r| r.bandwidth_mbps).collect();
        let ratio = |v: f64| if one > 0.0 { v / one } else { 0.0 };
        Some(Congestion {
            pattern,
            one_pair_mbps: one,
            flow_ratio: ratio(crate::stats::median(&bw)?),
            total_ratio: ratio(bw.iter().sum()),
        })
    }
}
