//! What UCX says it chose, for every result's metadata: the lanes of each
//! endpoint (transport, device, what each lane carries) and the message sizes at
//! which its tag send switches protocol, parsed from the text of
//! `ucp_ep_print_info` (UCX 1.13 has no structured query of either:
//! `ucp_ep_query` returns names and socket addresses only); and the resources
//! a context may use, from `ucp_context_print_info`.
//!
//! The thresholds printed are first bytes: `0..<egr/short>..93..<egr/bcopy>..8256
//! ..<rndv>..(inf)` means that messages of 93 bytes and more go by buffered copy
//! and of 8256 bytes and more by rendezvous (`ucp_ep_config_print_proto` in
//! UCX's `src/ucp/core/ucp_ep.c` prints `max_short + 1` and the smallest size of
//! each next protocol), in the user's bytes: UCP puts its tag outside the
//! payload, so no header counts into them. They are the known answers `loggp`'s
//! protocol detection is checked against (`tests/ucx.rs`).
//!
//! The facts of the transport opened last in this process are kept
//! ([`record`], [`recorded`]): the metadata is written on rank 0 by code that
//! knows the transports by name only.

use std::sync::Mutex;

/// One lane of an endpoint: a UCT transport on a device, and its uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    /// UCT transport (`posix`, `tcp`, `cma`, `rc_verbs`, ...).
    pub transport: String,
    /// Its device (`memory`, `lo`, `mlx5_0:1`, ...).
    pub device: String,
    /// What UCP uses the lane for (`am`, `am_bw`, `rma_bw`, `wireup`, ...).
    pub roles: Vec<String>,
}

/// A protocol of the tag send and the first message size it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Smallest message, in bytes, sent with `protocol`.
    pub first_bytes: u64,
    /// `egr/short`, `egr/bcopy`, `egr/zcopy` or `rndv`.
    pub protocol: String,
}

/// One endpoint of this rank: to which peer, over which lanes, switching where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The peer rank.
    pub peer: usize,
    /// Its lanes, in UCX's order.
    pub lanes: Vec<Lane>,
    /// `ucp_tag_send_nbx`'s protocols by message size.
    pub tag_send: Vec<Switch>,
}

/// What a connected UCX transport used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// UCX's version at run time (`ucp_get_version_string`).
    pub version: String,
    /// The data path (`send` or `put`).
    pub op: &'static str,
    /// How the endpoints connected (`address` or `sockaddr`).
    pub connect: &'static str,
    /// The transport list the context was given (`--ucx-tls`, else `UCX_TLS`),
    /// `None` for UCX's default.
    pub tls: Option<String>,
    /// The `UCX_*` variables of the environment, sorted.
    pub env: Vec<(String, String)>,
    /// This rank's endpoints, by peer.
    pub endpoints: Vec<Endpoint>,
}

static RECORDED: Mutex<Option<Facts>> = Mutex::new(None);

/// Keeps `facts` as those of the transport opened last.
pub fn record(facts: Facts) {
    *RECORDED.lock().unwrap_or_else(|e| e.into_inner()) = Some(facts);
}

/// The facts of the UCX transport opened last in this process, if any.
pub fn recorded() -> Option<Facts> {
    RECORDED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The `UCX_*` variables of this process's environment, sorted by name.
pub fn ucx_env() -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("UCX_"))
        .collect();
    env.sort();
    env
}

/// The lanes and tag-send switches in the text of `ucp_ep_print_info`.
pub fn parse_endpoint(text: &str, peer: usize) -> Endpoint {
    let mut ep = Endpoint {
        peer,
        lanes: Vec::new(),
        tag_send: Vec::new(),
    };
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(rest) = line.strip_prefix("lane[") {
            if let Some(lane) = rest.split_once("]:").and_then(|(_, l)| parse_lane(l)) {
                ep.lanes.push(lane);
            }
        } else if let Some(proto) = line.strip_prefix("tag_send:") {
            ep.tag_send = parse_switches(proto.trim());
        }
    }
    ep
}

/// `1:posix/memory.0 md[1]  -> md[1]/posix/sysdev[255] am am_bw#0`.
fn parse_lane(text: &str) -> Option<Lane> {
    let mut words = text.split_whitespace();
    let resource = words.next()?.split_once(':')?.1;
    let (transport, device) = resource.split_once('/')?;
    // The device name ends with `.N`, the index of the path to it.
    let device = match device.rsplit_once('.') {
        Some((d, path)) if path.chars().all(|c| c.is_ascii_digit()) => d,
        _ => device,
    };
    let roles = words
        .skip_while(|w| *w != "->")
        .skip(2)
        .map(|w| w.split('#').next().unwrap_or(w).to_string())
        .collect();
    Some(Lane {
        transport: transport.into(),
        device: device.into(),
        roles,
    })
}

/// `0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)`: each protocol with
/// the size before it; a protocol whose range is empty (the next starts at the
/// same size) is left out.
pub fn parse_switches(text: &str) -> Vec<Switch> {
    let parts: Vec<&str> = text.split("..").collect();
    let mut out: Vec<Switch> = Vec::new();
    for pair in parts.windows(2) {
        let (Ok(first_bytes), Some(protocol)) = (
            pair[0].parse::<u64>(),
            pair[1].strip_prefix('<').and_then(|p| p.strip_suffix('>')),
        ) else {
            continue;
        };
        if out.last().is_some_and(|s| s.first_bytes == first_bytes) {
            out.pop();
        }
        out.push(Switch {
            first_bytes,
            protocol: protocol.into(),
        });
    }
    out
}

/// The `transport/device` resources in the text of `ucp_context_print_info`, in
/// its order.
pub fn parse_resources(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| {
            l.trim_start_matches('#')
                .trim_start()
                .starts_with("resource")
        })
        .filter_map(|l| l.split_whitespace().last())
        .filter_map(|r| r.split_once('/'))
        .map(|(t, d)| (t.to_string(), d.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ucp_ep_print_info` of UCX 1.13.1 between two processes, `UCX_TLS` unset.
    const SHM: &str = "#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0
#                 lane[1]:  4:posix/memory.0 md[3]          -> md[3]/posix/sysdev[255]
#                 lane[2]:  5:cma/memory.0 md[4]            -> md[4]/cma/sysdev[255] rma_bw#0
#
#                tag_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..93..<egr/bcopy>..262144..<rndv>..(inf)
#                  put[0]: 0..<short>..4294967296..<bcopy>..(inf)
#
#                  rma_bw: mds rndv_rkey_size 9
";

    #[test]
    fn endpoint_lanes_and_tag_switches_are_read() {
        let ep = parse_endpoint(SHM, 1);
        let names: Vec<(&str, &str)> = ep
            .lanes
            .iter()
            .map(|l| (l.transport.as_str(), l.device.as_str()))
            .collect();
        assert_eq!(
            names,
            [("sysv", "memory"), ("posix", "memory"), ("cma", "memory")]
        );
        assert_eq!(ep.lanes[0].roles, ["am", "am_bw"]);
        assert!(ep.lanes[1].roles.is_empty());
        assert_eq!(ep.lanes[2].roles, ["rma_bw"]);
        let switches: Vec<(u64, &str)> = ep
            .tag_send
            .iter()
            .map(|s| (s.first_bytes, s.protocol.as_str()))
            .collect();
        assert_eq!(
            switches,
            [(0, "egr/short"), (93, "egr/bcopy"), (8256, "rndv")]
        );
    }

    #[test]
    fn tcp_lanes_and_empty_ranges() {
        let tcp = "#                 lane[0]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0 keepalive wireup\n\
                   #                tag_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)\n";
        let ep = parse_endpoint(tcp, 3);
        assert_eq!(ep.peer, 3);
        assert_eq!(ep.lanes[0].device, "lo");
        assert_eq!(
            ep.lanes[0].roles,
            ["rma_bw", "am", "am_bw", "keepalive", "wireup"]
        );
        assert_eq!(ep.tag_send[1].first_bytes, 8185);
        assert_eq!(ep.tag_send[2].first_bytes, 20553);
        // A short protocol of no bytes: the range is empty.
        let none = parse_switches("0..<egr/short>..0..<egr/bcopy>..100..<rndv>..(inf)");
        assert_eq!(none.len(), 2);
        assert_eq!(none[0].protocol, "egr/bcopy");
        assert_eq!(parse_switches("0..<egr/short>..(inf)").len(), 1);
        assert!(parse_endpoint("nonsense", 0).lanes.is_empty());
    }

    #[test]
    fn context_resources_are_read() {
        let text = "#\n# UCP context\n#\n#            md 0  :  component 0  self \n\
                    #      resource 0  :  md 0  dev 0  flags -- self/memory0\n\
                    #      resource 1  :  md 1  dev 1  flags -- tcp/lo\n";
        assert_eq!(
            parse_resources(text),
            [
                ("self".to_string(), "memory0".to_string()),
                ("tcp".to_string(), "lo".to_string())
            ]
        );
    }
}
