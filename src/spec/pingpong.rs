//! [`PingpongSpec`]: what `ngauge pingpong` measures.

use super::{SizeList, SpecError};
use crate::job::TransportName;
use crate::patterns::pingpong::{Params, SizeResult};
use crate::stats::precision::Target;
use serde::{Deserialize, Serialize};

/// The most messages a streaming round keeps in flight (`window`).
pub const MAX_WINDOW: u64 = 4096;

/// The parameters of a ping-pong sweep (the flags of `ngauge pingpong`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, default)]
pub struct PingpongSpec {
    /// Message sizes in bytes.
    pub sizes: SizeList,
    /// Timed round trips per size.
    pub reps: u64,
    /// Untimed round trips before the timed ones, per size (at least
    /// `patterns::FIRST_SIZE_WARMUP` before the first).
    pub warmup: u64,
    /// Verify every size's payloads (outside the timed region).
    pub check: bool,
    /// Let a transport that has its own loop (MPI in poll mode) run the timed
    /// round trips.
    pub native_loop: bool,
    /// Keep every repetition in the document (`samples.half_rtt_us`).
    pub samples: bool,
    /// Add each size's half round trips in log-spaced bins (`histogram`).
    pub histogram: bool,
    /// Show the bandwidth in Gb/s in the table.
    pub gbps: bool,
    /// Messages in flight per timed round: 1 ping-pongs, more streams (rank 0
    /// sends `window` messages back to back, rank 1 replies with one byte).
    pub window: u64,
    /// Messages per timed round of a stream run, `window` in flight at a time
    /// and one reply at the end (`ucx_perftest -t tag_bw`'s pattern); 0 ends
    /// every window with a reply.
    pub stream: u64,
    /// Both ranks stream `window` messages to each other at once (osu_bibw).
    pub bidirectional: bool,
    /// Disjoint pairs measured at once, `(0,1), (2,3), ...` (osu_multi_lat,
    /// osu_mbw_mr); 1 is the single pair.
    pub pairs: u64,
    /// Repeat batches of `reps` until the 95% interval of the median half round
    /// trip is within this relative half-width (0.01: +-1%), or `max_reps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    /// Repetitions at most with `precision` (default: 10 x `reps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_reps: Option<u64>,
    /// Congestion at rank 0 (Netgauge's 1toN, Nto1): every other rank's flow
    /// at once, against the one pair measured alone in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<crate::patterns::fan::Fan>,
}

impl Default for PingpongSpec {
    fn default() -> Self {
        PingpongSpec {
            sizes: SizeList(crate::sizes::parse_sizes("1-1M").expect("a valid spec")),
            reps: 1000,
            warmup: 100,
            check: false,
            native_loop: true,
            samples: false,
            histogram: false,
            gbps: false,
            window: 1,
            stream: 0,
            bidirectional: false,
            pairs: 1,
            precision: None,
            max_reps: None,
            pattern: None,
        }
    }
}

impl PingpongSpec {
    /// Rejects what no sweep can do: no timed round trip, absurd counts.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), SpecError> {
        SpecError::range("reps", self.reps, 1, 100_000_000)?;
        if self.warmup > 100_000_000 {
            return Err(SpecError::new(
                "warmup",
                format!("must be at most 100000000, got {}", self.warmup),
            ));
        }
        SpecError::range("window", self.window, 1, MAX_WINDOW)?;
        if self.stream > 0 && (self.window < 2 || self.stream < self.window) {
            return Err(SpecError::new(
                "stream",
                format!(
                    "a stream run needs a window of 2 or more and at least as many messages \
                     (window {}, stream {})",
                    self.window, self.stream
                ),
            ));
        }
        SpecError::range("stream", self.stream, 0, 100_000_000)?;
        if self.stream > 0 && (self.bidirectional || self.pairs > 1) {
            return Err(SpecError::new(
                "stream",
                "a stream run is one direction of one pair: not with --bidirectional or --pairs",
            ));
        }
        if self.pattern.is_some()
            && (self.window < 2 || self.stream > 0 || self.bidirectional || self.pairs > 1)
        {
            return Err(SpecError::new(
                "pattern",
                "a congestion pattern streams windows one way: it needs --window 2 or more, \
                 not --stream, --bidirectional or --pairs",
            ));
        }
        self.validate_precision()?;
        SpecError::range("pairs", self.pairs, 1, 1 << 16)
    }

    /// `precision` a fraction in (0, 1), `max_reps` at least `reps`, both for
    /// the single pair only.
    fn validate_precision(&self) -> Result<(), SpecError> {
        if let Some(p) = self.precision {
            if !(p > 0.0 && p < 1.0) {
                return Err(SpecError::new(
                    "precision",
                    format!("a relative half-width between 0 and 1 (0.01 or 1%), got {p}"),
                ));
            }
            if self.pairs > 1 || self.pattern.is_some() {
                return Err(SpecError::new(
                    "precision",
                    "repeats the single pair only: not with --pairs or --pattern",
                ));
            }
        }
        match self.max_reps {
            Some(_) if self.precision.is_none() => Err(SpecError::new(
                "max_reps",
                "bounds --precision: give --precision too",
            )),
            Some(m) if m < self.reps || m > 100_000_000 => Err(SpecError::new(
                "max_reps",
                format!("between --reps ({}) and 100000000, got {m}", self.reps),
            )),
            _ => Ok(()),
        }
    }

    /// A size's result as this spec reports it: with its histogram when asked
    /// for, without the repetitions drawn only for it.
    pub fn finish(&self, mut result: SizeResult) -> SizeResult {
        if self.histogram {
            let samples = result.samples.as_ref();
            result.histogram = samples.map(|s| crate::stats::Histogram::of(&s.half_rtt_us));
        }
        if !self.samples {
            result.samples = None;
        }
        result
    }

    /// Rejects a sweep the job's transports cannot measure at all: only empty
    /// messages over a byte stream (tcp, the default transport).
    ///
    /// # Errors
    /// `sizes`.
    pub fn validate_for_job(&self, transports: &[TransportName]) -> Result<(), SpecError> {
        if self.sizes.0.iter().all(|&s| s == 0)
            && (transports.is_empty() || transports.contains(&TransportName::Tcp))
        {
            return Err(SpecError::new(
                "sizes",
                "only empty messages, which a byte stream (tcp) cannot carry: nothing to measure",
            ));
        }
        Ok(())
    }

    /// The pattern's parameters for the sizes `sizes` (a part of [`Self::sizes`]).
    pub fn params(&self, sizes: Vec<usize>) -> Params {
        Params {
            sizes,
            reps: self.reps as usize,
            warmup: self.warmup as usize,
            check: self.check,
            native_loop: self.native_loop,
            // The histogram is drawn from the repetitions.
            samples: self.samples || self.histogram,
            window: self.window as usize,
            stream: self.stream as usize,
            bidirectional: self.bidirectional,
            precision: self.precision.map(|rel_half_width| Target {
                rel_half_width,
                max_reps: self.max_reps.unwrap_or(10 * self.reps) as usize,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_commands_and_fields_are_checked() {
        let s: PingpongSpec = serde_json::from_str(r#"{"sizes": "1-4", "reps": 10}"#).unwrap();
        assert_eq!(s.sizes.0, [1, 2, 4]);
        assert_eq!((s.reps, s.warmup, s.native_loop), (10, 100, true));
        assert!(s.validate().is_ok());
        assert!(serde_json::from_str::<PingpongSpec>(r#"{"rep": 10}"#).is_err());
        let bad = PingpongSpec {
            reps: 0,
            ..PingpongSpec::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "reps");
        let wide = PingpongSpec {
            window: MAX_WINDOW + 1,
            ..PingpongSpec::default()
        };
        assert_eq!(wide.validate().unwrap_err().field, "window");
        assert_eq!(s.window, 1);
        let p = s.params(vec![2]);
        assert_eq!((p.sizes, p.reps, p.samples), (vec![2], 10, false));
    }

    /// Issue 37, `--precision`: a fraction in (0, 1), a cap of at least
    /// `reps` (default 10 x `reps`), the single pair only.
    #[test]
    fn issue_37_precision_fields_are_checked() {
        let spec = |precision, max_reps, pairs| PingpongSpec {
            reps: 100,
            precision,
            max_reps,
            pairs,
            ..PingpongSpec::default()
        };
        let p = spec(Some(0.01), None, 1).params(vec![1]).precision.unwrap();
        assert_eq!((p.rel_half_width, p.max_reps), (0.01, 1000));
        assert!(spec(Some(0.01), Some(100), 1).validate().is_ok());
        assert_eq!(spec(None, None, 1).params(vec![1]).precision, None);
        for (precision, max_reps, pairs, field) in [
            (Some(0.0), None, 1, "precision"),
            (Some(1.0), None, 1, "precision"),
            (Some(f64::NAN), None, 1, "precision"),
            (Some(0.01), None, 2, "precision"),
            (Some(0.01), Some(99), 1, "max_reps"),
            (None, Some(1000), 1, "max_reps"),
        ] {
            let bad = spec(precision, max_reps, pairs).validate().unwrap_err();
            assert_eq!(bad.field, field, "{precision:?} {max_reps:?} {pairs}");
        }
        let s: PingpongSpec =
            serde_json::from_str(r#"{"precision": 0.02, "max_reps": 5000}"#).unwrap();
        assert_eq!((s.precision, s.max_reps), (Some(0.02), Some(5000)));
    }

    #[test]
    fn a_stream_run_needs_a_window_and_at_least_as_many_messages() {
        let stream = |window, stream| PingpongSpec {
            window,
            stream,
            ..PingpongSpec::default()
        };
        assert!(stream(32, 20000).validate().is_ok());
        assert!(stream(32, 32).validate().is_ok());
        assert_eq!(stream(1, 100).validate().unwrap_err().field, "stream");
        assert_eq!(stream(32, 31).validate().unwrap_err().field, "stream");
        assert_eq!(
            stream(2, 100_000_001).validate().unwrap_err().field,
            "stream"
        );
        assert_eq!(stream(2, 100).params(vec![1]).stream, 100);
    }

    /// Issue 35: a congestion pattern streams windows one way.
    #[test]
    fn a_congestion_pattern_needs_a_window_and_one_way() {
        let fan: PingpongSpec =
            serde_json::from_str(r#"{"pattern": "Nto1", "window": 4}"#).unwrap();
        assert_eq!(fan.pattern, Some(crate::patterns::fan::Fan::NToOne));
        assert!(fan.validate().is_ok());
        for bad in [
            PingpongSpec {
                window: 1,
                ..fan.clone()
            },
            PingpongSpec {
                bidirectional: true,
                ..fan.clone()
            },
            PingpongSpec {
                pairs: 2,
                ..fan.clone()
            },
        ] {
            assert_eq!(bad.validate().unwrap_err().field, "pattern");
        }
    }
}
