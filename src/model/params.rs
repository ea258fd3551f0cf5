//! The LogGP parameter file: what `ngauge loggp --params-out FILE.json` writes
//! ([`ParamsFile::measured`]) and `ngauge simulate --params` and `ngauge coll
//! --predict` read ([`ParamsFile::read`], through [`crate::sim::params`]): the
//! simulator of Hoefler et al., sec. 4, takes one LogGP parameter set per protocol
//! range.
//!
//! # Schema (`ngauge-loggp-params/2`)
//!
//! ```json
//! {
//!   "schema": "ngauge-loggp-params/2",
//!   "transport": "tcp",
//!   "ranges": [
//!     { "from_bytes": 1, "to_bytes": 65536,
//!       "half_rtt_1b_us": 9.1, "wire_latency_us": 4.9,
//!       "o_s_us": 2.3, "send_call_us": 2.1, "o_r_us": 1.9, "send_overlap_us": 0.0,
//!       "g_us": 4.2, "G_us_per_byte": 0.00031, "O_us_per_byte": 0.00002 }
//!   ]
//! }
//! ```
//!
//! Two latencies, because the paper's `L` is not LogGP's: `half_rtt_1b_us` is
//! `PRTT(1,0,1)/2` (what Hoefler et al., sec. 2.5, and Netgauge report as `L`),
//! which by eq. (1) is `L + o_s + o_r`; `wire_latency_us` is LogGP's `L` itself,
//! `half_rtt_1b_us - o_s_us - o_r_us`, at least 0 (the measurement warns when the
//! overheads exceed `PRTT(1,0,1)/2`). A simulator charges `o_s + L + (s-1)G + o_r`
//! per message, so it reads `wire_latency_us`; charging `half_rtt_1b_us` as `L`
//! would count both overheads twice.
//!
//! Two fields extend LogGP where a measured stack needs it (both 0 when absent, so
//! older files read as plain LogGP): `send_overlap_us`, the end of `o_s` that comes
//! after the message left (TCP over loopback delivers inside the send call), and
//! `O_us_per_byte`, LogGOPS's CPU overhead per byte at each end. A message of `s`
//! bytes then reaches its receiver's `o_r` at `o_s - send_overlap + L + (s-1)G +
//! (s-1)O` after its send began, and `loggp` fits them so that this plus `o_r +
//! (s-1)O` is the range's `PRTT(1,0,s)/2`.
//!
//! A third is optional: `send_call_us`, the time a lone send call blocks (the
//! send while its receiver is late), where `o_s_us` is eq. (4)'s CPU cost of a
//! send in a train, which over loopback TCP reads above the call it stands for.
//! An eager send's call then ends `send_call_us + (s-1)O` after it began, no
//! sooner than its message left and no later than `o_s + (s-1)O`: a single message's
//! sender (a broadcast's root) finishes with its call, its receiver as before.
//!
//! Ranges are ascending, non-overlapping, with `from_bytes <= to_bytes`; all times are
//! finite, non-negative and at most [`MAX_TIME_US`] (`G` at most
//! [`MAX_G_US_PER_BYTE`]): values past that are refused, never clamped. Errors number
//! the ranges from 1, in the order of the file and of `loggp`'s table, and name the
//! parameter and its value. A message of `s` bytes uses the range with the largest
//! `from_bytes <= s` (sizes below the first range use the first; above the last, the
//! last; [`coverage`] says when either happens). A range may say `"protocol": "rendezvous"` (the default is `"eager"`): the
//! measurement cannot tell the protocol, so a user marks the ranges above an eager
//! limit by hand. Other unknown fields are ignored, so later versions may add some
//! (`meta` is one).
//!
//! A range without `wire_latency_us` (every range of schema `ngauge-loggp-params/1`,
//! whose `L_us` is `PRTT(1,0,1)/2`) is read with it derived by eq. (1) at `s = 1`,
//! `max(0, L_us - o_s_us - o_r_us)`, and a [`ParamsWarning`] saying so.

use super::loggp::RangeParams;
use serde::{Deserialize, Serialize};

/// The schema name and version written into every file.
pub const SCHEMA: &str = "ngauge-loggp-params/2";

/// The schemas read: the previous version (`L_us` held `PRTT(1,0,1)/2`) and this.
pub const SCHEMAS: [&str; 2] = ["ngauge-loggp-params/1", SCHEMA];

/// The largest time a parameter may hold, us (1000 s): more is a unit mistake or a
/// broken fit, not a network, and the simulator counts picoseconds in 64 bits.
pub const MAX_TIME_US: f64 = 1e9;

/// The largest `G`, us per byte (1 KB/s): a 1 GiB message then takes 1e12 us, within
/// the simulator's 64-bit picoseconds.
pub const MAX_G_US_PER_BYTE: f64 = 1e3;

/// Why the value of the parameter `name` (`G_us_per_byte` or a time in us) is
/// outside LogGP's domain or the simulator's range, if it is.
pub fn out_of_domain(name: &str, value: f64) -> Option<String> {
    let max = if name.ends_with("per_byte") {
        MAX_G_US_PER_BYTE
    } else {
        MAX_TIME_US
    };
    if !value.is_finite() || value < 0.0 {
        Some(format!(
            "{name} = {value} is not a finite non-negative number"
        ))
    } else if value > max {
        Some(format!(
            "{name} = {value:e} exceeds {max:e}, the simulator's range (give times in us \
             and G in us per byte)"
        ))
    } else {
        None
    }
}

/// How messages of a range travel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The send completes locally.
    #[default]
    Eager,
    /// The send waits for the receiver (request-to-send, clear-to-send).
    Rendezvous,
}

/// One protocol range's LogGP parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ParamRange {
    /// First message size of the range, bytes.
    pub from_bytes: u64,
    /// Last message size measured in the range, bytes.
    pub to_bytes: u64,
    /// `PRTT(1,0,1)/2` = `L + o_s + o_r` (the paper's reported `L`), us. Schema 1
    /// called it `L_us`.
    pub half_rtt_1b_us: f64,
    /// LogGP's `L`, the wire latency: `half_rtt_1b_us - o_s_us - o_r_us`, at least
    /// 0, us. Derived on reading a range that lacks it.
    pub wire_latency_us: f64,
    /// Send overhead `o_s`, us: the CPU cost of a send by eq. (4), what each send
    /// of a train adds to the sender's round trip.
    pub o_s_us: f64,
    /// The time a lone send call blocks, us (the send while its receiver is
    /// late), when measured: an eager send's call ends this long after it began,
    /// no sooner than its message left and no later than `o_s_us` (absent: `o_s_us`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_call_us: Option<f64>,
    /// Receive overhead `o_r`, us: the CPU cost of a receive, the time the receive
    /// call takes with its message there.
    pub o_r_us: f64,
    /// The end of `o_s` after the message left, which the receiver does not wait
    /// for, us (at most `o_s_us`; 0 when absent).
    pub send_overlap_us: f64,
    /// The start of `o_r_us` that a waiting receive runs before the last byte is
    /// in, us (at most `o_r_us`; 0 when absent).
    pub recv_overlap_us: f64,
    /// `O`: CPU overhead per byte at each end (LogGOPS), us per byte (0 when absent).
    #[serde(rename = "O_us_per_byte")]
    pub big_o_us_per_byte: f64,
    /// Gap `g`, us.
    pub g_us: f64,
    /// Gap per byte `G`, us per byte.
    #[serde(rename = "G_us_per_byte")]
    pub big_g_us_per_byte: f64,
    /// Eager unless the user marked the range (not written when eager).
    #[serde(skip_serializing_if = "Protocol::is_eager")]
    pub protocol: Protocol,
}

impl Protocol {
    fn is_eager(&self) -> bool {
        *self == Protocol::Eager
    }
}

/// A parameter file. Deserializing checks it ([`ParamsFile::from_json`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawFile")]
pub struct ParamsFile {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The transport the parameters were measured on (empty if the file says none).
    pub transport: String,
    /// Ascending protocol ranges.
    pub ranges: Vec<ParamRange>,
}

/// Why a parameter file was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamsError {
    /// Not JSON of this shape.
    #[error("params file is not valid: {0}")]
    Json(String),
    /// Another schema or version.
    #[error("params file has schema {found:?}, expected one of {SCHEMAS:?}")]
    Schema {
        /// What the file says.
        found: String,
    },
    /// No ranges.
    #[error("params file has no ranges")]
    Empty,
    /// A range is malformed or out of order.
    #[error("params file range {number} ({from_bytes}-{to_bytes} B): {detail}")]
    Range {
        /// Position in `ranges`, from 1 (the row of `loggp`'s table).
        number: usize,
        /// The range's first size.
        from_bytes: u64,
        /// The range's last size.
        to_bytes: u64,
        /// What is wrong, with the parameter and its value.
        detail: String,
    },
}

/// Something the reader assumed or changed.
#[derive(Clone, Debug, PartialEq, serde::Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamsWarning {
    /// The range has no `wire_latency_us`; `L` was derived from `PRTT(1,0,1)/2`.
    #[error("range from {from_bytes} B has no wire_latency_us: using L = L_us - o_s - o_r = {wire_latency_us:.3} us (L_us {prtt_half_us:.3} us is PRTT(1,0,1)/2, which includes both overheads)")]
    DerivedLatency {
        /// First size of the range.
        from_bytes: u64,
        /// The file's `PRTT(1,0,1)/2`.
        prtt_half_us: f64,
        /// `max(0, PRTT(1,0,1)/2 - o_s - o_r)`.
        wire_latency_us: f64,
    },
    /// Simulated sizes beyond the last range's measured sizes: its parameters are
    /// extrapolated.
    #[error("sizes {} B lie above the measured sizes (the last range ends at {to_bytes} B): its parameters are extrapolated", few(.sizes_bytes))]
    Extrapolated {
        /// The sizes above `to_bytes`.
        sizes_bytes: Vec<u64>,
        /// The last range's last measured size.
        to_bytes: u64,
    },
    /// Simulated sizes below the first range's first size: its parameters, measured
    /// on larger messages, are used for them.
    #[error("sizes {} B lie below the first range, which starts at {from_bytes} B: its parameters are used for them", few(.sizes_bytes))]
    BelowFirstRange {
        /// The sizes below `from_bytes`.
        sizes_bytes: Vec<u64>,
        /// The first range's first size.
        from_bytes: u64,
    },
    /// The derived wire latency was negative and is taken as 0.
    #[error("range from {from_bytes} B: L_us - o_s - o_r = {derived_us:.3} us is negative (noise, or o overlapping L); using L = 0")]
    NegativeLatency {
        /// First size of the range.
        from_bytes: u64,
        /// The negative value.
        derived_us: f64,
    },
}

/// Up to six sizes, and how many more.
fn few(sizes: &[u64]) -> String {
    let shown: Vec<String> = sizes.iter().take(6).map(u64::to_string).collect();
    let shown = shown.join(", ");
    match sizes.len().saturating_sub(6) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A file as written, of either schema, before its checks.
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
    #[serde(alias = "L_us")]
    half_rtt_1b_us: f64,
    wire_latency_us: Option<f64>,
    o_s_us: f64,
    #[serde(default)]
    send_call_us: Option<f64>,
    o_r_us: f64,
    #[serde(default)]
    send_overlap_us: f64,
    #[serde(default)]
    recv_overlap_us: f64,
    #[serde(default, rename = "O_us_per_byte")]
    big_o_us_per_byte: f64,
    g_us: f64,
    #[serde(rename = "G_us_per_byte")]
    big_g_us_per_byte: f64,
    #[serde(default)]
    protocol: Protocol,
}

impl TryFrom<RawFile> for ParamsFile {
    type Error = ParamsError;

    fn try_from(raw: RawFile) -> Result<Self, ParamsError> {
        checked(raw).map(|(file, _)| file)
    }
}

/// The file of `raw`, its missing wire latencies derived (said in the warnings),
/// checked.
fn checked(raw: RawFile) -> Result<(ParamsFile, Vec<ParamsWarning>), ParamsError> {
    if !SCHEMAS.contains(&raw.schema.as_str()) {
        return Err(ParamsError::Schema { found: raw.schema });
    }
    let mut warnings = Vec::new();
    let ranges = raw
        .ranges
        .into_iter()
        .map(|r| {
            let wire_latency_us = r.wire_latency_us.unwrap_or_else(|| {
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
            });
            ParamRange {
                from_bytes: r.from_bytes,
                to_bytes: r.to_bytes,
                half_rtt_1b_us: r.half_rtt_1b_us,
                wire_latency_us,
                o_s_us: r.o_s_us,
                send_call_us: r.send_call_us,
                o_r_us: r.o_r_us,
                send_overlap_us: r.send_overlap_us,
                recv_overlap_us: r.recv_overlap_us,
                big_o_us_per_byte: r.big_o_us_per_byte,
                g_us: r.g_us,
                big_g_us_per_byte: r.big_g_us_per_byte,
                protocol: r.protocol,
            }
        })
        .collect();
    let file = ParamsFile {
        schema: SCHEMA.into(),
        transport: raw.transport,
        ranges,
    };
    file.check()?;
    Ok((file, warnings))
}

impl ParamsFile {
    /// The file of a measurement's protocol ranges, eager all (the writer of
    /// `ngauge loggp --params-out`).
    pub fn measured(transport: &str, ranges: &[RangeParams]) -> ParamsFile {
        ParamsFile {
            schema: SCHEMA.into(),
            transport: transport.into(),
            ranges: ranges
                .iter()
                .map(|r| ParamRange {
                    from_bytes: r.from,
                    to_bytes: r.to,
                    half_rtt_1b_us: r.half_rtt_1b_us,
                    wire_latency_us: r.wire_latency_us,
                    o_s_us: r.os_us,
                    send_call_us: r.send_call_us,
                    o_r_us: r.or_us,
                    send_overlap_us: r.send_overlap_us,
                    recv_overlap_us: r.recv_overlap_us,
                    big_o_us_per_byte: r.big_o_us_per_byte,
                    g_us: r.g_us,
                    big_g_us_per_byte: r.big_g_us_per_byte,
                    protocol: Protocol::Eager,
                })
                .collect(),
        }
    }

    /// Parses and checks a parameter file of either schema in [`SCHEMAS`] (it
    /// comes back as [`SCHEMA`]), with the warnings of the latencies derived.
    ///
    /// # Errors
    /// [`ParamsError`] if the text is not a file of a schema in [`SCHEMAS`] or
    /// breaks a rule of [`ParamsFile::check`].
    pub fn read(text: &str) -> Result<(Self, Vec<ParamsWarning>), ParamsError> {
        let raw: RawFile =
            serde_json::from_str(text).map_err(|e| ParamsError::Json(e.to_string()))?;
        checked(raw)
    }

    /// [`ParamsFile::read`] without the warnings.
    pub fn from_json(text: &str) -> Result<Self, ParamsError> {
        Self::read(text).map(|(file, _)| file)
    }

    /// Checks the invariants stated in the module docs.
    pub fn check(&self) -> Result<(), ParamsError> {
        if self.schema != SCHEMA {
            return Err(ParamsError::Schema {
                found: self.schema.clone(),
            });
        }
        if self.ranges.is_empty() {
            return Err(ParamsError::Empty);
        }
        for (index, r) in self.ranges.iter().enumerate() {
            let bad = |detail: String| ParamsError::Range {
                number: index + 1,
                from_bytes: r.from_bytes,
                to_bytes: r.to_bytes,
                detail,
            };
            let named = [
                ("half_rtt_1b_us", r.half_rtt_1b_us),
                ("wire_latency_us", r.wire_latency_us),
                ("o_s_us", r.o_s_us),
                ("o_r_us", r.o_r_us),
                ("send_overlap_us", r.send_overlap_us),
                ("recv_overlap_us", r.recv_overlap_us),
                ("g_us", r.g_us),
                ("G_us_per_byte", r.big_g_us_per_byte),
                ("O_us_per_byte", r.big_o_us_per_byte),
            ];
            let call = r.send_call_us.map(|v| ("send_call_us", v));
            if let Some(why) =
                (named.iter().copied().chain(call)).find_map(|(n, v)| out_of_domain(n, v))
            {
                return Err(bad(why));
            }
            if r.send_overlap_us > r.o_s_us {
                return Err(bad(format!(
                    "send_overlap_us = {} exceeds o_s_us = {}: only a part of the send \
                     call can come after the message left",
                    r.send_overlap_us, r.o_s_us
                )));
            }
            if r.recv_overlap_us > r.o_r_us {
                return Err(bad(format!(
                    "recv_overlap_us = {} exceeds o_r_us = {}: only a part of the \
                     receive call can come before the message is in",
                    r.recv_overlap_us, r.o_r_us
                )));
            }
            if r.from_bytes > r.to_bytes {
                return Err(bad("from_bytes > to_bytes".into()));
            }
            if index > 0 && r.from_bytes <= self.ranges[index - 1].to_bytes {
                return Err(bad(
                    "starts at or before the end of the previous range".into()
                ));
            }
        }
        Ok(())
    }

    /// The parameters for a message of `size` bytes.
    ///
    /// # Panics
    /// If the file has no ranges (impossible after [`ParamsFile::from_json`]).
    pub fn for_size(&self, size: u64) -> &ParamRange {
        self.ranges
            .iter()
            .rev()
            .find(|r| r.from_bytes <= size)
            .unwrap_or(&self.ranges[0])
    }

    /// Pretty JSON text of this file.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes")
    }
}

/// The warnings for simulating `sizes` with the ranges measured over
/// `ranges_bytes` (ascending `(from, to)`; none: no warning): sizes below the first
/// range ([`ParamsWarning::BelowFirstRange`]) and above the last
/// ([`ParamsWarning::Extrapolated`]).
pub fn coverage(ranges_bytes: &[(u64, u64)], sizes: &[u64]) -> Vec<ParamsWarning> {
    let (Some(&(first, _)), Some(&(_, last))) = (ranges_bytes.first(), ranges_bytes.last()) else {
        return Vec::new();
    };
    let outside = |keep: &dyn Fn(u64) -> bool| -> Vec<u64> {
        sizes.iter().copied().filter(|&s| keep(s)).collect()
    };
    let below = outside(&|s| s < first);
    let above = outside(&|s| s > last);
    let mut warnings = Vec::new();
    if !below.is_empty() {
        warnings.push(ParamsWarning::BelowFirstRange {
            sizes_bytes: below,
            from_bytes: first,
        });
    }
    if !above.is_empty() {
        warnings.push(ParamsWarning::Extrapolated {
            sizes_bytes: above,
            to_bytes: last,
        });
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(from: u64, to: u64, g: f64) -> ParamRange {
        ParamRange {
            from_bytes: from,
            to_bytes: to,
            half_rtt_1b_us: 10.0,
            wire_latency_us: 7.0,
            o_s_us: 1.0,
            send_call_us: None,
            o_r_us: 2.0,
            send_overlap_us: 0.0,
            recv_overlap_us: 0.0,
            big_o_us_per_byte: 0.0,
            g_us: g,
            big_g_us_per_byte: 0.001,
            protocol: Protocol::Eager,
        }
    }

    #[test]
    fn the_overlap_and_o_are_read_as_0_when_absent_and_checked_when_given() {
        let text = |extra: &str| {
            format!(
                r#"{{"schema": "{SCHEMA}", "ranges": [{{"from_bytes": 1, "to_bytes": 64,
                "half_rtt_1b_us": 3, "wire_latency_us": 0, "o_s_us": 2, "o_r_us": 1.5,
                "g_us": 2, "G_us_per_byte": 0.001{extra}}}]}}"#
            )
        };
        let plain = ParamsFile::from_json(&text("")).unwrap();
        assert_eq!(plain.ranges[0].send_overlap_us, 0.0);
        assert_eq!(plain.ranges[0].big_o_us_per_byte, 0.0);
        assert_eq!(plain.ranges[0].recv_overlap_us, 0.0);
        let given = ParamsFile::from_json(&text(
            r#", "send_overlap_us": 0.5, "recv_overlap_us": 1.5, "O_us_per_byte": 0.0002"#,
        ))
        .unwrap();
        assert_eq!(given.ranges[0].send_overlap_us, 0.5);
        assert_eq!(given.ranges[0].recv_overlap_us, 1.5);
        assert!(given.to_json().contains("\"recv_overlap_us\": 1.5"));
        assert_eq!(given.ranges[0].big_o_us_per_byte, 0.0002);
        assert_eq!(plain.ranges[0].send_call_us, None);
        assert!(!plain.to_json().contains("send_call_us"));
        let call = ParamsFile::from_json(&text(r#", "send_call_us": 1.25"#)).unwrap();
        assert_eq!(call.ranges[0].send_call_us, Some(1.25));
        assert!(call.to_json().contains("\"send_call_us\": 1.25"));
        let refused = ParamsFile::from_json(&text(r#", "send_call_us": -1"#)).unwrap_err();
        assert!(
            refused.to_string().contains("send_call_us = -1"),
            "{refused}"
        );
        assert!(given.to_json().contains("\"O_us_per_byte\": 0.0002"));
        let err = ParamsFile::from_json(&text(r#", "send_overlap_us": 2.5"#)).unwrap_err();
        assert!(
            err.to_string()
                .contains("send_overlap_us = 2.5 exceeds o_s_us = 2"),
            "{err}"
        );
        let err = ParamsFile::from_json(&text(r#", "recv_overlap_us": 1.6"#)).unwrap_err();
        assert!(
            err.to_string()
                .contains("recv_overlap_us = 1.6 exceeds o_r_us = 1.5"),
            "{err}"
        );
        let err = ParamsFile::from_json(&text(r#", "O_us_per_byte": -1"#)).unwrap_err();
        assert!(err.to_string().contains("O_us_per_byte = -1"), "{err}");
    }

    #[test]
    fn roundtrip_and_lookup() {
        let file = ParamsFile {
            schema: SCHEMA.into(),
            transport: "tcp".into(),
            ranges: vec![range(1, 8192, 3.0), range(9216, 65536, 30.0)],
        };
        let back = ParamsFile::from_json(&file.to_json()).unwrap();
        assert_eq!(back, file);
        assert_eq!(back.for_size(1).g_us, 3.0);
        assert_eq!(back.for_size(9000).g_us, 3.0);
        assert_eq!(back.for_size(9216).g_us, 30.0);
        assert_eq!(back.for_size(1 << 30).g_us, 30.0);
        assert!(file.to_json().contains("\"G_us_per_byte\""));
        let json = file.to_json();
        assert!(json.contains("\"half_rtt_1b_us\"") && json.contains("\"wire_latency_us\""));
        assert!(!json.contains("L_us"), "{json}");
        // Deserializing checks, as from_json does.
        let bad = json.replace("\"wire_latency_us\": 7.0", "\"wire_latency_us\": -1.0");
        assert!(serde_json::from_str::<ParamsFile>(&bad).is_err());
        assert_eq!(serde_json::from_str::<ParamsFile>(&json).unwrap(), file);
    }

    /// Schema 1 named PRTT(1,0,1)/2 `L_us`; reading it must not hand a simulator
    /// that as the wire latency.
    #[test]
    fn a_schema_1_file_is_read_with_its_wire_latency_derived() {
        let v1 = r#"{"schema": "ngauge-loggp-params/1", "transport": "tcp", "ranges": [
            {"from_bytes": 1, "to_bytes": 1024, "L_us": 5.0, "o_s_us": 1.5,
             "o_r_us": 2.0, "g_us": 3.0, "G_us_per_byte": 0.001},
            {"from_bytes": 2048, "to_bytes": 4096, "L_us": 5.0, "o_s_us": 4.0,
             "o_r_us": 3.0, "g_us": 3.0, "G_us_per_byte": 0.001}]}"#;
        let file = ParamsFile::from_json(v1).unwrap();
        assert_eq!(file.schema, SCHEMA);
        assert_eq!(file.ranges[0].half_rtt_1b_us, 5.0);
        assert_eq!(file.ranges[0].wire_latency_us, 1.5);
        assert_eq!(file.ranges[1].wire_latency_us, 0.0, "clamped");
        // One reader for both schemas: a schema-2 range without the field is
        // read the same way, and the warnings say so (the simulator's rule).
        let v2_without_wire = v1.replace("params/1", "params/2");
        let (file, warnings) = ParamsFile::read(&v2_without_wire).unwrap();
        assert_eq!(file.ranges[0].wire_latency_us, 1.5);
        assert!(matches!(
            warnings[..],
            [
                ParamsWarning::DerivedLatency { from_bytes: 1, .. },
                ParamsWarning::DerivedLatency {
                    from_bytes: 2048,
                    ..
                },
                ParamsWarning::NegativeLatency {
                    from_bytes: 2048,
                    ..
                },
            ]
        ));
    }

    /// Issue 37: an error names the range as `loggp`'s table counts it, the
    /// parameter and its value; a huge value is refused, not clamped.
    #[test]
    fn issue_37_errors_name_the_range_the_parameter_and_its_value() {
        let mut file = ParamsFile {
            schema: SCHEMA.into(),
            transport: "mpi".into(),
            ranges: vec![range(1, 8192, 3.0), range(9216, 65536, 30.0)],
        };
        file.ranges[1].big_g_us_per_byte = -0.00028;
        assert_eq!(
            file.check().unwrap_err().to_string(),
            "params file range 2 (9216-65536 B): G_us_per_byte = -0.00028 is not a finite \
             non-negative number"
        );
        file.ranges[1].big_g_us_per_byte = 0.001;
        file.ranges[0].g_us = 1e308;
        assert_eq!(
            file.check().unwrap_err().to_string(),
            "params file range 1 (1-8192 B): g_us = 1e308 exceeds 1e9, the simulator's \
             range (give times in us and G in us per byte)"
        );
        file.ranges[0].g_us = MAX_TIME_US;
        file.check().unwrap();
    }

    /// Issue 37: sizes outside the measured ones are said, the ranges too.
    #[test]
    fn issue_37_sizes_outside_the_measured_ones_are_said() {
        let ranges = [(1000, 8192), (9216, 65536)];
        let w = coverage(&ranges, &[1, 8, 1000, 4096, 65536, 1 << 20]);
        assert_eq!(
            w.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "sizes 1, 8 B lie below the first range, which starts at 1000 B: its \
                 parameters are used for them",
                "sizes 1048576 B lie above the measured sizes (the last range ends at \
                 65536 B): its parameters are extrapolated"
            ]
        );
        assert!(coverage(&ranges, &[1000, 65536]).is_empty());
        assert!(coverage(&[], &[1]).is_empty());
        let many: Vec<u64> = (1..=10).map(|k| 65536 + k).collect();
        assert!(coverage(&ranges, &many)[0]
            .to_string()
            .contains("65542 and 4 more"));
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(matches!(
            ParamsFile::from_json("{"),
            Err(ParamsError::Json(_))
        ));
        let mut file = ParamsFile {
            schema: "other/2".into(),
            transport: "tcp".into(),
            ranges: vec![range(1, 10, 1.0)],
        };
        assert!(matches!(file.check(), Err(ParamsError::Schema { .. })));
        file.schema = SCHEMA.into();
        file.ranges.push(range(5, 20, 1.0));
        assert_eq!(
            file.check().unwrap_err().to_string(),
            "params file range 2 (5-20 B): starts at or before the end of the previous range"
        );
        file.ranges = vec![];
        assert_eq!(file.check(), Err(ParamsError::Empty));
    }
}
