//! The LogGP parameter file: what `ngauge loggp --params-out FILE.json` writes and
//! `ngauge simulate` reads (the simulator of Hoefler et al., sec. 4, takes one LogGP
//! parameter set per protocol range).
//!
//! # Schema (`ngauge-loggp-params/1`)
//!
//! ```json
//! {
//!   "schema": "ngauge-loggp-params/1",
//!   "transport": "tcp",
//!   "ranges": [
//!     { "from_bytes": 1, "to_bytes": 65536,
//!       "L_us": 9.1, "o_s_us": 2.3, "o_r_us": 1.9,
//!       "g_us": 4.2, "G_us_per_byte": 0.00031 }
//!   ]
//! }
//! ```
//!
//! Ranges are ascending, non-overlapping, with `from_bytes <= to_bytes`; all times are
//! finite. A message of `s` bytes uses the range with the largest `from_bytes <= s`
//! (sizes below the first range use the first; above the last, the last). Unknown
//! fields are ignored, so later versions may add some (`meta` is one).

use serde::{Deserialize, Serialize};

/// The schema name and version written into every file.
pub const SCHEMA: &str = "ngauge-loggp-params/1";

/// One protocol range's LogGP parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamRange {
    /// First message size of the range, bytes.
    pub from_bytes: u64,
    /// Last message size measured in the range, bytes.
    pub to_bytes: u64,
    /// Latency `L`, us.
    #[serde(rename = "L_us")]
    pub l_us: f64,
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

/// A parameter file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

impl ParamsFile {
    /// Parses and checks a parameter file.
    pub fn from_json(text: &str) -> Result<Self, ParamsError> {
        let file: ParamsFile =
            serde_json::from_str(text).map_err(|e| ParamsError::Json(e.to_string()))?;
        file.check()?;
        Ok(file)
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
            let values = [r.l_us, r.o_s_us, r.o_r_us, r.g_us, r.big_g_us_per_byte];
            if values.iter().any(|v| !v.is_finite()) {
                return Err(bad("a parameter is not a finite number"));
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
            l_us: 10.0,
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
