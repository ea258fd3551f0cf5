//! A measured LogGP parameter file (what `ngauge loggp --params-out` writes) as the
//! simulator's [`Network`].
//!
//! Two schemas are read, with one rule for the latency. `PRTT(1,0,1)/2` is what
//! Hoefler et al. (sec. 2.5) and Netgauge report as `L`; by eq. (1),
//! `PRTT(1,0,s) = 2 (L + o_s + o_r + (s-1)G)`, it is the model's wire latency plus
//! both overheads. A simulator charges `o_s` and `o_r` on the CPUs, so it must not
//! charge them a second time in flight. The wire latency of a range is:
//!
//! 1. `wire_latency_us` when the file has it (schema `ngauge-loggp-params/2` always
//!    does: the writer kept it apart from `half_rtt_1b_us`);
//! 2. otherwise (schema `/1`, whose `L_us` is `PRTT(1,0,1)/2`) `L_us - o_s_us -
//!    o_r_us`, with a [`ParamsWarning::DerivedLatency`] (and
//!    [`ParamsWarning::NegativeLatency`], clamped to 0, when the overheads exceed
//!    `L_us`, which noise or an overlap of `o` and `L` can do).
//!
//! The reader is the simulator's own (not [`crate::model::params`]) so that it
//! takes both schemas and one field of its own per range: `protocol`, `"eager"`
//! (the default) or `"rendezvous"`. The measurement cannot tell the protocol, so a
//! user marks the ranges above an eager limit by hand. Other unknown fields are
//! ignored, as the file's rules say. The first range serves every size below it too
//! (the file's rule), so it starts at 1 byte here.

use crate::sim::net::{LogGp, NetError, Network};
use serde::Deserialize;

/// Schemas read.
pub const SCHEMAS: [&str; 2] = ["ngauge-loggp-params/1", "ngauge-loggp-params/2"];

/// How messages of a range travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The send completes locally.
    #[default]
    Eager,
    /// The send waits for the receiver (request-to-send, clear-to-send).
    Rendezvous,
}

#[derive(Deserialize)]
struct RawFile {
    schema: String,
    #[serde(default)]
    transport: String,
    ranges: Vec<RawRange>,
}

#[derive(Deserialize)]
struct RawRange {
    from_bytes: u64,
    to_bytes: u64,
    /// `PRTT(1,0,1)/2`: `L_us` in schema 1, `half_rtt_1b_us` in schema 2.
    #[serde(alias = "L_us")]
    half_rtt_1b_us: f64,
    wire_latency_us: Option<f64>,
    o_s_us: f64,
    o_r_us: f64,
    g_us: f64,
    #[serde(rename = "G_us_per_byte")]
    big_g_us_per_byte: f64,
    #[serde(default)]
    protocol: Protocol,
}

/// Why a parameter file was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamsError {
    /// Not JSON of the file's shape.
    #[error("params file is not valid: {0}")]
    Json(String),
    /// Another schema.
    #[error("params file has schema {found:?}, expected one of {SCHEMAS:?}")]
    Schema {
        /// What the file says.
        found: String,
    },
    /// No ranges.
    #[error("params file has no ranges")]
    Empty,
    /// A range is malformed or out of order.
    #[error("params file range {index}: {detail}")]
    Range {
        /// Index in `ranges`.
        index: usize,
        /// What is wrong.
        detail: &'static str,
    },
}

/// Something the reader assumed or changed.
#[derive(Clone, Debug, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamsWarning {
    /// The range has no `wire_latency_us`; `L` was derived from `PRTT(1,0,1)/2`.
    DerivedLatency {
        /// First size of the range.
        from_bytes: u64,
        /// The file's `PRTT(1,0,1)/2`.
        prtt_half_us: f64,
        /// `max(0, PRTT(1,0,1)/2 - o_s - o_r)`.
        wire_latency_us: f64,
    },
    /// The derived wire latency was negative and is taken as 0.
    NegativeLatency {
        /// First size of the range.
        from_bytes: u64,
        /// The negative value.
        derived_us: f64,
    },
}

impl std::fmt::Display for ParamsWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamsWarning::DerivedLatency {
                from_bytes,
                prtt_half_us,
                wire_latency_us,
            } => write!(
                f,
                "range from {from_bytes} B has no wire_latency_us: using L = L_us - o_s - o_r = {wire_latency_us:.3} us (L_us {prtt_half_us:.3} us is PRTT(1,0,1)/2, which includes both overheads)"
            ),
            ParamsWarning::NegativeLatency {
                from_bytes,
                derived_us,
            } => write!(
                f,
                "range from {from_bytes} B: L_us - o_s - o_r = {derived_us:.3} us is negative (noise, or o overlapping L); using L = 0"
            ),
        }
    }
}

/// The network a parameter file describes, and what the reader assumed.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The transport the parameters were measured on (empty if the file says none).
    pub transport: String,
    /// One protocol per range.
    pub network: Network,
    /// Derived or clamped latencies.
    pub warnings: Vec<ParamsWarning>,
}

/// Reads a parameter file's text as a network.
///
/// # Errors
/// [`ParamsError`] if the text is not a file of a schema in [`SCHEMAS`], has no
/// ranges, a time that is not a finite non-negative number, a range with
/// `from_bytes > to_bytes`, or ranges not ascending and disjoint.
pub fn parse(text: &str) -> Result<Loaded, ParamsError> {
    let raw: RawFile = serde_json::from_str(text).map_err(|e| ParamsError::Json(e.to_string()))?;
    if !SCHEMAS.contains(&raw.schema.as_str()) {
        return Err(ParamsError::Schema { found: raw.schema });
    }
    if raw.ranges.is_empty() {
        return Err(ParamsError::Empty);
    }
    let mut warnings = Vec::new();
    let mut protocols = Vec::with_capacity(raw.ranges.len());
    for (index, r) in raw.ranges.iter().enumerate() {
        let bad = |detail| ParamsError::Range { index, detail };
        let times = [
            r.half_rtt_1b_us,
            r.o_s_us,
            r.o_r_us,
            r.g_us,
            r.big_g_us_per_byte,
        ];
        if times
            .iter()
            .chain(&r.wire_latency_us)
            .any(|v| !v.is_finite() || *v < 0.0)
        {
            return Err(bad("a parameter is not a finite non-negative number"));
        }
        if r.from_bytes > r.to_bytes {
            return Err(bad("from_bytes > to_bytes"));
        }
        if index > 0 && r.from_bytes <= raw.ranges[index - 1].to_bytes {
            return Err(bad("starts at or before the end of the previous range"));
        }
        let l_us = match r.wire_latency_us {
            Some(l) => l,
            None => {
                // Eq. (1) at s = 1: PRTT(1,0,1)/2 = L + o_s + o_r.
                let derived = r.half_rtt_1b_us - r.o_s_us - r.o_r_us;
                warnings.push(ParamsWarning::DerivedLatency {
                    from_bytes: r.from_bytes,
                    prtt_half_us: r.half_rtt_1b_us,
                    wire_latency_us: derived.max(0.0),
                });
                if derived < 0.0 {
                    warnings.push(ParamsWarning::NegativeLatency {
                        from_bytes: r.from_bytes,
                        derived_us: derived,
                    });
                }
                derived.max(0.0)
            }
        };
        let p = LogGp::from_us(
            l_us,
            r.o_s_us,
            r.o_r_us,
            r.g_us,
            r.big_g_us_per_byte,
            r.protocol == Protocol::Rendezvous,
        );
        let from = if index == 0 { 1 } else { r.from_bytes };
        protocols.push((from, p));
    }
    let network =
        Network::new(protocols).map_err(|e: NetError| ParamsError::Json(e.to_string()))?;
    Ok(Loaded {
        transport: raw.transport,
        network,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(extra: &str) -> String {
        format!(
            r#"{{"schema": "ngauge-loggp-params/1", "transport": "tcp", "ranges": [
            {{"from_bytes": 8, "to_bytes": 1024, "L_us": 10, "o_s_us": 2, "o_r_us": 3,
             "g_us": 4, "G_us_per_byte": 0.0003}},
            {{"from_bytes": 2048, "to_bytes": 65536, "L_us": 10, "o_s_us": 2, "o_r_us": 3,
             "g_us": 4, "G_us_per_byte": 0.0003{extra}}}]}}"#
        )
    }

    #[test]
    fn schema_1_derives_the_wire_latency_and_says_so() {
        let loaded = parse(&v1(r#", "protocol": "rendezvous""#)).unwrap();
        assert_eq!(loaded.transport, "tcp");
        let small = loaded.network.at(1);
        assert_eq!(small.l_ps, 5_000_000, "10 - 2 - 3 us");
        assert_eq!(
            (small.os_ps, small.or_ps, small.g_ps),
            (2_000_000, 3_000_000, 4_000_000)
        );
        assert_eq!(small.big_g_fs, 300_000, "0.0003 us/B = 300 ps/B");
        assert!(!small.rendezvous);
        assert!(loaded.network.at(4096).rendezvous);
        assert_eq!(loaded.warnings.len(), 2);
        assert_eq!(
            loaded.warnings[0].to_string(),
            "range from 8 B has no wire_latency_us: using L = L_us - o_s - o_r = 5.000 us (L_us 10.000 us is PRTT(1,0,1)/2, which includes both overheads)"
        );
    }

    #[test]
    fn schema_2_takes_the_wire_latency_as_written() {
        let text = r#"{"schema": "ngauge-loggp-params/2", "transport": "tcp", "ranges": [
            {"from_bytes": 1, "to_bytes": 64, "half_rtt_1b_us": 9.5, "wire_latency_us": 4.25,
             "o_s_us": 1, "o_r_us": 1, "g_us": 2, "G_us_per_byte": 0.001, "meta": {}}]}"#;
        let loaded = parse(text).unwrap();
        assert_eq!(loaded.network.at(1).l_ps, 4_250_000);
        assert!(loaded.warnings.is_empty());
    }

    #[test]
    fn a_negative_derived_latency_is_clamped_and_said() {
        let text = v1("").replacen("\"L_us\": 10", "\"L_us\": 4", 1);
        let loaded = parse(&text).unwrap();
        assert_eq!(loaded.network.at(1).l_ps, 0);
        assert!(matches!(
            loaded.warnings[1],
            ParamsWarning::NegativeLatency { derived_us, .. } if derived_us == -1.0
        ));
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let err = |t: &str| parse(t).unwrap_err().to_string();
        assert!(err(&v1(r#", "protocol": "magic""#)).contains("unknown variant `magic`"));
        assert!(err(&v1("").replace("/1", "/9")).contains("schema \"ngauge-loggp-params/9\""));
        assert_eq!(
            err(&v1("").replace("\"from_bytes\": 2048", "\"from_bytes\": 512")),
            "params file range 1: starts at or before the end of the previous range"
        );
        assert_eq!(
            err(&v1("").replace("\"g_us\": 4,", "\"g_us\": -4,")),
            "params file range 0: a parameter is not a finite non-negative number"
        );
        assert_eq!(
            err(r#"{"schema": "ngauge-loggp-params/2", "ranges": []}"#),
            "params file has no ranges"
        );
        assert!(err("{").starts_with("params file is not valid"));
    }
}
