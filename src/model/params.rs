//! The LogGP parameter file: what `ngauge loggp --params-out FILE.json` writes and
//! `ngauge simulate` reads (the simulator of Hoefler et al., sec. 4, takes one LogGP
//! parameter set per protocol range).
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
//!       "o_s_us": 2.3, "o_r_us": 1.9,
//!       "g_us": 4.2, "G_us_per_byte": 0.00031 }
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
//! Ranges are ascending, non-overlapping, with `from_bytes <= to_bytes`; all times are
//! finite. A message of `s` bytes uses the range with the largest `from_bytes <= s`
//! (sizes below the first range use the first; above the last, the last). Unknown
//! fields are ignored, so later versions may add some (`meta` is one).
//!
//! Files of schema `ngauge-loggp-params/1` are still read: their `L_us` is
//! `PRTT(1,0,1)/2`, and `wire_latency_us` is derived from it as above.

use serde::{Deserialize, Serialize};

/// The schema name and version written into every file.
pub const SCHEMA: &str = "ngauge-loggp-params/2";

/// The previous version, still read: `L_us` held `PRTT(1,0,1)/2`.
pub const SCHEMA_V1: &str = "ngauge-loggp-params/1";

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
    /// 0, us. Derived on reading a schema-1 file, which lacks it.
    pub wire_latency_us: f64,
    /// Send overhead `o_s`, us.
    pub o_s_us: f64,
    /// Receive overhead `o_r`, us.
    pub o_r_us: f64,
    /// Gap `g`, us.
    pub g_us: f64,
    /// Gap per byte `G`, us per byte.
    #[serde(rename = "G_us_per_byte")]
    pub big_g_us_per_byte: f64,
}

/// A parameter file. Deserializing checks it ([`ParamsFile::from_json`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawFile")]
pub struct ParamsFile {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The transport the parameters were measured on.
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
    #[error("params file has schema {found:?}, expected {SCHEMA:?}")]
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
        detail: String,
    },
}

/// A file as written, of either schema, before its checks.
#[derive(Deserialize)]
struct RawFile {
    schema: String,
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
    o_r_us: f64,
    g_us: f64,
    #[serde(rename = "G_us_per_byte")]
    big_g_us_per_byte: f64,
}

impl TryFrom<RawFile> for ParamsFile {
    type Error = ParamsError;

    fn try_from(raw: RawFile) -> Result<Self, ParamsError> {
        let v1 = match raw.schema.as_str() {
            SCHEMA => false,
            SCHEMA_V1 => true,
            _ => return Err(ParamsError::Schema { found: raw.schema }),
        };
        let ranges = raw
            .ranges
            .into_iter()
            .enumerate()
            .map(|(index, r)| {
                let wire_latency_us = match (v1, r.wire_latency_us) {
                    // Schema 1 had PRTT(1,0,1)/2 only: eq. (1) at s = 1.
                    (true, _) => (r.half_rtt_1b_us - r.o_s_us - r.o_r_us).max(0.0),
                    (false, Some(wire)) => wire,
                    (false, None) => {
                        return Err(ParamsError::Range {
                            index,
                            detail: "wire_latency_us is missing".into(),
                        })
                    }
                };
                Ok(ParamRange {
                    from_bytes: r.from_bytes,
                    to_bytes: r.to_bytes,
                    half_rtt_1b_us: r.half_rtt_1b_us,
                    wire_latency_us,
                    o_s_us: r.o_s_us,
                    o_r_us: r.o_r_us,
                    g_us: r.g_us,
                    big_g_us_per_byte: r.big_g_us_per_byte,
                })
            })
            .collect::<Result<_, _>>()?;
        let file = ParamsFile {
            schema: SCHEMA.into(),
            transport: raw.transport,
            ranges,
        };
        file.check()?;
        Ok(file)
    }
}

impl ParamsFile {
    /// Parses and checks a parameter file of schema 2 or 1 (schema 1 comes back as
    /// schema 2, its `wire_latency_us` derived).
    pub fn from_json(text: &str) -> Result<Self, ParamsError> {
        let raw: RawFile =
            serde_json::from_str(text).map_err(|e| ParamsError::Json(e.to_string()))?;
        ParamsFile::try_from(raw)
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
            let bad = |detail: &str| ParamsError::Range {
                index,
                detail: detail.to_string(),
            };
            let values = [
                r.half_rtt_1b_us,
                r.wire_latency_us,
                r.o_s_us,
                r.o_r_us,
                r.g_us,
                r.big_g_us_per_byte,
            ];
            if values.iter().any(|v| !v.is_finite()) {
                return Err(bad("a parameter is not a finite number"));
            }
            if r.wire_latency_us < 0.0 {
                return Err(bad("wire_latency_us is negative"));
            }
            if r.from_bytes > r.to_bytes {
                return Err(bad("from_bytes is larger than to_bytes"));
            }
            if index > 0 && self.ranges[index - 1].to_bytes >= r.from_bytes {
                return Err(bad("overlaps or precedes the previous range"));
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
            o_r_us: 2.0,
            g_us: g,
            big_g_us_per_byte: 0.001,
        }
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
        let v2_without_wire = v1.replace("params/1", "params/2");
        assert_eq!(
            ParamsFile::from_json(&v2_without_wire)
                .unwrap_err()
                .to_string(),
            "params file range 0: wire_latency_us is missing"
        );
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
            "params file range 1: overlaps or precedes the previous range"
        );
        file.ranges = vec![];
        assert_eq!(file.check(), Err(ParamsError::Empty));
    }
}
