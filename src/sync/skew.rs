//! The injected test clock: `NGAUGE_TEST_CLOCK_SKEW=RANK:OFFSET:DRIFT,...`.
//!
//! All ranks on one host read one invariant TSC, so without help the truth of a clock
//! synchronization test is "zero offset, zero drift", which cannot tell a correct
//! drift model from one that ignores drift. The variable adds a known offset and drift
//! to the named ranks' readings ([`crate::clock::Skew`]), everywhere in ngauge, so the
//! error of every synchronization algorithm is known exactly. Example:
//! `1:+3ms:+40ppm,2:-5ms:-25ppm,3:+800us:+10ppm` (offsets in `ns`, `us`, `ms` or `s`
//! with an optional sign; drift in ppm, the `ppm` suffix optional).
//!
//! # The common epoch
//!
//! A skew is `offset + drift * (raw - epoch)`: the offset holds exactly at `epoch`.
//! The ranks must agree on `epoch`, or rank 1's "+3 ms" and rank 2's "-5 ms" would hold
//! at different instants and the reported true offsets would drift apart. Raw TSC 0
//! (boot) would do for agreement but not for meaning: after a day of uptime a 40 ppm
//! drift has added 3.5 s to the "3 ms" offset. So:
//!
//! 1. `NGAUGE_TEST_CLOCK_EPOCH` (a raw timer reading, decimal ticks), when set. The
//!    local launcher sets it to its own raw reading before it starts the ranks (in
//!    the binary's `commands::check_clock_env`), so the spec's offsets hold at launch;
//!    under `mpirun`/`srun` the user may set it;
//! 2. otherwise the raw reading at clock construction rounded down to a multiple of
//!    [`EPOCH_GRANULARITY_TICKS`] (2^37 ticks, about 50 s at 2.6 GHz). Ranks started
//!    within a few hundred milliseconds of each other agree unless they straddle a
//!    boundary (a chance of start spread / 50 s). Even then each rank's clock is a
//!    consistent skewed clock and the true residuals `ngauge sync` reports stay exact,
//!    because they are computed from the skews actually applied (rank 0 broadcasts
//!    its own); only the spec's offsets then hold relative to two epochs.

use crate::clock::{Nanos, Skew, TickRate, Ticks};
use std::str::FromStr;

/// The environment variable with the skew specification.
pub const SKEW_ENV: &str = "NGAUGE_TEST_CLOCK_SKEW";
/// The environment variable with the common epoch (raw ticks).
pub const EPOCH_ENV: &str = "NGAUGE_TEST_CLOCK_EPOCH";
/// Granularity of the fallback epoch (raw reading rounded down).
pub const EPOCH_GRANULARITY_TICKS: u64 = 1 << 37;
/// Largest drift accepted, in ppm: NTP's bound on a clock's frequency error (RFC
/// 5905, `MAXFREQ`). Two ranks skewed by it in opposite directions differ by the
/// most a fitted drift may claim ([`super::pairwise::MAX_PLAUSIBLE_DRIFT`]), so every
/// injected skew is one the drift models can learn.
pub const MAX_DRIFT_PPM: f64 = 500.0;

/// What is wrong with a skew specification or epoch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SkewSpecError {
    /// An entry without exactly three `:`-separated fields.
    #[error("{SKEW_ENV}: entry {entry:?} is not RANK:OFFSET:DRIFT (example: 1:+3ms:+40ppm)")]
    Shape {
        /// The entry.
        entry: String,
    },
    /// The rank field is not a rank number.
    #[error("{SKEW_ENV}: entry {entry:?}: {text:?} is not a rank number")]
    Rank {
        /// The entry.
        entry: String,
        /// The rank field.
        text: String,
    },
    /// The offset is not a signed number with a time unit.
    #[error(
        "{SKEW_ENV}: entry {entry:?}: offset {text:?} is not a number with a unit ns, us, ms or s (example: -5ms)"
    )]
    Offset {
        /// The entry.
        entry: String,
        /// The offset field.
        text: String,
    },
    /// The drift is not a signed number of ppm, or is too large.
    #[error(
        "{SKEW_ENV}: entry {entry:?}: drift {text:?} is not a number of ppm within +-{MAX_DRIFT_PPM} (example: +40ppm)"
    )]
    Drift {
        /// The entry.
        entry: String,
        /// The drift field.
        text: String,
    },
    /// A rank listed twice.
    #[error("{SKEW_ENV}: rank {rank} is listed twice")]
    Duplicate {
        /// The rank.
        rank: usize,
    },
    /// A rank outside the job.
    #[error("{SKEW_ENV}: rank {rank} is outside this job of {size} ranks")]
    OutsideJob {
        /// The rank.
        rank: usize,
        /// Job size.
        size: usize,
    },
    /// The epoch is not a raw reading.
    #[error("{EPOCH_ENV}: {text:?} is not a raw timer reading (an unsigned number of ticks)")]
    Epoch {
        /// The value.
        text: String,
    },
}

/// One rank's injected error, as specified.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkewEntry {
    /// The rank whose readings are skewed.
    pub rank: usize,
    /// Offset at the epoch (positive: this rank's clock is ahead).
    pub offset: Nanos,
    /// Rate error in ppm (positive: this rank's clock runs fast).
    pub drift_ppm: f64,
}

/// A parsed `NGAUGE_TEST_CLOCK_SKEW`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkewSpec {
    /// One entry per skewed rank, in the order given.
    pub entries: Vec<SkewEntry>,
}

impl FromStr for SkewSpec {
    type Err = SkewSpecError;

    fn from_str(text: &str) -> Result<Self, SkewSpecError> {
        let mut entries: Vec<SkewEntry> = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = parse_entry(entry)?;
            if entries.iter().any(|e| e.rank == parsed.rank) {
                return Err(SkewSpecError::Duplicate { rank: parsed.rank });
            }
            entries.push(parsed);
        }
        Ok(SkewSpec { entries })
    }
}

fn parse_entry(entry: &str) -> Result<SkewEntry, SkewSpecError> {
    let fields: Vec<&str> = entry.split(':').map(str::trim).collect();
    let [rank, offset, drift] = fields[..] else {
        return Err(SkewSpecError::Shape {
            entry: entry.into(),
        });
    };
    let rank_value = rank.parse::<usize>().map_err(|_| SkewSpecError::Rank {
        entry: entry.into(),
        text: rank.into(),
    })?;
    let offset_ns = parse_offset(offset).ok_or_else(|| SkewSpecError::Offset {
        entry: entry.into(),
        text: offset.into(),
    })?;
    let drift_ppm = parse_drift(drift).ok_or_else(|| SkewSpecError::Drift {
        entry: entry.into(),
        text: drift.into(),
    })?;
    Ok(SkewEntry {
        rank: rank_value,
        offset: Nanos(offset_ns),
        drift_ppm,
    })
}

/// A signed decimal number: optional sign, digits, optional fraction. No exponents,
/// no `inf`/`nan` (which `f64::from_str` would accept).
fn parse_signed_decimal(text: &str) -> Option<f64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    let valid = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().filter(|&c| c == '.').count() <= 1
        && digits.chars().any(|c| c.is_ascii_digit());
    valid.then(|| text.parse::<f64>().ok()).flatten()
}

/// `+3ms` -> 3e6 (nanoseconds).
fn parse_offset(text: &str) -> Option<f64> {
    let (number, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))?;
    let value = parse_signed_decimal(number)? * scale;
    value.is_finite().then_some(value)
}

/// `+40ppm` or `40` -> 40.0.
fn parse_drift(text: &str) -> Option<f64> {
    let number = text.strip_suffix("ppm").unwrap_or(text);
    let value = parse_signed_decimal(number)?;
    (value.abs() <= MAX_DRIFT_PPM).then_some(value)
}

impl SkewSpec {
    /// The specification in `NGAUGE_TEST_CLOCK_SKEW`, or `None` when it is unset.
    /// Reads the process environment: a test hook (the injected test clock).
    pub fn from_env() -> Result<Option<SkewSpec>, SkewSpecError> {
        match std::env::var(SKEW_ENV) {
            Ok(text) => text.parse().map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Every named rank exists in a job of `size` ranks.
    pub fn check_size(&self, size: usize) -> Result<(), SkewSpecError> {
        match self.entries.iter().find(|e| e.rank >= size) {
            Some(e) => Err(SkewSpecError::OutsideJob { rank: e.rank, size }),
            None => Ok(()),
        }
    }

    /// The entry for `rank`, if it is skewed.
    pub fn entry(&self, rank: usize) -> Option<&SkewEntry> {
        self.entries.iter().find(|e| e.rank == rank)
    }

    /// The skew to apply to `rank`'s readings on a timer of `rate`, with the common
    /// `epoch`; `None` for ranks not listed.
    pub fn skew_for(&self, rank: usize, rate: TickRate, epoch: Ticks) -> Option<Skew> {
        self.entry(rank).map(|e| Skew {
            offset_ticks: e.offset.0 * rate.hz / 1e9,
            drift: e.drift_ppm / 1e6,
            epoch,
        })
    }
}

/// The common epoch: `env_value` (the content of `NGAUGE_TEST_CLOCK_EPOCH`) when set,
/// else `raw_now` rounded down to [`EPOCH_GRANULARITY_TICKS`] (see the module docs).
pub fn epoch(env_value: Option<&str>, raw_now: Ticks) -> Result<Ticks, SkewSpecError> {
    match env_value {
        Some(text) => text
            .trim()
            .parse::<u64>()
            .map(Ticks)
            .map_err(|_| SkewSpecError::Epoch { text: text.into() }),
        None => Ok(Ticks(raw_now.0 - raw_now.0 % EPOCH_GRANULARITY_TICKS)),
    }
}

/// The true global-time error of a local reading: `estimated` global time of the
/// reading this rank's clock gives at raw instant `raw`, minus rank 0's reading at the
/// same instant. Exact on one host, where all ranks share one raw timer.
pub fn true_error_ticks(
    model: &super::ClockModel,
    own: Option<&Skew>,
    rank0: Option<&Skew>,
    raw: Ticks,
) -> f64 {
    let local = own.map_or(raw, |s| s.apply(raw));
    let reference = rank0.map_or(raw, |s| s.apply(raw));
    model.global_minus(local, reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_example_from_the_issue() {
        let spec: SkewSpec = "1:+3ms:+40ppm,2:-5ms:-25ppm,3:+800us:+10ppm"
            .parse()
            .unwrap();
        assert_eq!(
            spec.entries,
            vec![
                SkewEntry {
                    rank: 1,
                    offset: Nanos(3e6),
                    drift_ppm: 40.0
                },
                SkewEntry {
                    rank: 2,
                    offset: Nanos(-5e6),
                    drift_ppm: -25.0
                },
                SkewEntry {
                    rank: 3,
                    offset: Nanos(800e3),
                    drift_ppm: 10.0
                },
            ]
        );
    }

    #[test]
    fn units_signs_spaces_and_empty_lists() {
        let spec: SkewSpec = " 0:1.5s:0 , 4:-250ns:-0.5ppm,".parse().unwrap();
        assert_eq!(spec.entries[0].offset, Nanos(1.5e9));
        assert_eq!(spec.entries[1].offset, Nanos(-250.0));
        assert_eq!(spec.entries[1].drift_ppm, -0.5);
        assert_eq!("".parse::<SkewSpec>().unwrap(), SkewSpec::default());
    }

    #[test]
    fn bad_specs_are_typed_errors_that_name_the_field() {
        type Check = fn(&SkewSpecError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("1:3ms", |e| matches!(e, SkewSpecError::Shape { .. })),
            ("1:3ms:4ppm:5", |e| matches!(e, SkewSpecError::Shape { .. })),
            ("x:3ms:4ppm", |e| matches!(e, SkewSpecError::Rank { .. })),
            ("-1:3ms:4ppm", |e| matches!(e, SkewSpecError::Rank { .. })),
            ("1:3:4ppm", |e| matches!(e, SkewSpecError::Offset { .. })),
            ("1:3min:4ppm", |e| matches!(e, SkewSpecError::Offset { .. })),
            ("1:ms:4ppm", |e| matches!(e, SkewSpecError::Offset { .. })),
            ("1:1e3ms:4ppm", |e| {
                matches!(e, SkewSpecError::Offset { .. })
            }),
            ("1:infs:4ppm", |e| matches!(e, SkewSpecError::Offset { .. })),
            ("1:3ms:4%", |e| matches!(e, SkewSpecError::Drift { .. })),
            ("1:3ms:501ppm", |e| matches!(e, SkewSpecError::Drift { .. })),
            ("1:3ms:4ppm,1:2ms:0", |e| {
                matches!(e, SkewSpecError::Duplicate { rank: 1 })
            }),
        ];
        for (text, expected) in cases {
            let err = text.parse::<SkewSpec>().unwrap_err();
            assert!(expected(&err), "{text}: {err:?}");
            assert!(err.to_string().contains(SKEW_ENV), "{err}");
        }
    }

    #[test]
    fn ranks_must_exist_in_the_job() {
        let spec: SkewSpec = "3:1ms:0".parse().unwrap();
        assert!(spec.check_size(4).is_ok());
        assert_eq!(
            spec.check_size(3),
            Err(SkewSpecError::OutsideJob { rank: 3, size: 3 })
        );
    }

    #[test]
    fn skews_are_built_in_ticks_of_the_rate() {
        let spec: SkewSpec = "1:+3ms:+40ppm".parse().unwrap();
        let rate = TickRate::new(2.5e9);
        let skew = spec.skew_for(1, rate, Ticks(1 << 40)).unwrap();
        assert_eq!(skew.offset_ticks, 7.5e6);
        assert_eq!(skew.drift, 40e-6);
        assert_eq!(skew.epoch, Ticks(1 << 40));
        assert_eq!(spec.skew_for(0, rate, Ticks(0)), None);
    }

    #[test]
    fn epoch_comes_from_the_environment_or_a_coarse_boundary() {
        assert_eq!(epoch(Some(" 12345 "), Ticks(9)), Ok(Ticks(12345)));
        assert!(matches!(
            epoch(Some("-3"), Ticks(9)),
            Err(SkewSpecError::Epoch { .. })
        ));
        let g = EPOCH_GRANULARITY_TICKS;
        assert_eq!(epoch(None, Ticks(5 * g + 17)), Ok(Ticks(5 * g)));
        assert_eq!(epoch(None, Ticks(5 * g)), Ok(Ticks(5 * g)));
    }

    #[test]
    fn true_error_compares_with_rank_zeros_reading_at_the_same_instant() {
        let own = Skew {
            offset_ticks: 1000.0,
            drift: 0.0,
            epoch: Ticks(0),
        };
        // A model that exactly removes the offset has no error ...
        let exact = super::super::ClockModel::offset_only(1000.0);
        assert_eq!(
            true_error_ticks(&exact, Some(&own), None, Ticks(50_000)),
            0.0
        );
        // ... and one that ignores it is off by the offset.
        let none = super::super::ClockModel::IDENTITY;
        assert_eq!(
            true_error_ticks(&none, Some(&own), None, Ticks(50_000)),
            1000.0
        );
        // Rank 0 skewed the same way: no error without a model.
        assert_eq!(
            true_error_ticks(&none, Some(&own), Some(&own), Ticks(50_000)),
            0.0
        );
    }
}
