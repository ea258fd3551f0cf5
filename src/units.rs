//! Units of time: raw timer [`Ticks`], [`Nanos`], and the [`TickRate`] between them.

use serde::{Deserialize, Serialize};

/// A raw timer reading (TSC cycles on x86-64, nanoseconds of CLOCK_MONOTONIC_RAW
/// elsewhere). Only differences of readings on one clock are meaningful.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Ticks(pub u64);

impl Ticks {
    /// `self - earlier`, or zero when `earlier` is later (never wraps).
    pub fn since(self, earlier: Ticks) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `self + ticks`, saturating.
    pub fn plus(self, ticks: u64) -> Ticks {
        Ticks(self.0.saturating_add(ticks))
    }
}

/// A span of time in nanoseconds (fractional: converted tick counts keep their
/// sub-nanosecond resolution until they are reported).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize)]
pub struct Nanos(pub f64);

impl Nanos {
    /// The same span in microseconds.
    pub fn as_us(self) -> f64 {
        self.0 / 1e3
    }
}

impl std::fmt::Display for Nanos {
    /// Human form with a unit chosen by magnitude: `850 ns`, `6.21 us`, `1.50 ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.0;
        if ns.abs() < 1e3 {
            write!(f, "{ns:.0} ns")
        } else if ns.abs() < 1e6 {
            write!(f, "{:.2} us", ns / 1e3)
        } else if ns.abs() < 1e9 {
            write!(f, "{:.2} ms", ns / 1e6)
        } else {
            write!(f, "{:.3} s", ns / 1e9)
        }
    }
}

impl std::str::FromStr for Nanos {
    type Err = DurationError;

    /// A non-negative duration with a unit: `850ns`, `50us`, `1.5ms`, `2s`; a bare
    /// `0` is zero. No exponents, no `inf` or `nan`.
    fn from_str(text: &str) -> Result<Nanos, DurationError> {
        let err = || DurationError { text: text.into() };
        let t = text.trim();
        if t == "0" {
            return Ok(Nanos(0.0));
        }
        let (number, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
            .iter()
            .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, *scale)))
            .ok_or_else(err)?;
        let valid = !number.is_empty()
            && number.chars().all(|c| c.is_ascii_digit() || c == '.')
            && number.chars().filter(|&c| c == '.').count() <= 1
            && number.chars().any(|c| c.is_ascii_digit());
        if !valid {
            return Err(err());
        }
        let value = number.parse::<f64>().map_err(|_| err())? * scale;
        if value.is_finite() {
            Ok(Nanos(value))
        } else {
            Err(err())
        }
    }
}

/// A text that is not a duration ([`Nanos`]'s `FromStr`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a duration: a number with a unit (ns, us, ms, s), e.g. 50us")]
pub struct DurationError {
    /// What was given.
    pub text: String,
}

/// Ticks per second of a timer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TickRate {
    /// Ticks per second.
    pub hz: f64,
}

impl TickRate {
    /// A rate of `hz` ticks per second.
    ///
    /// # Panics
    /// If `hz` is not finite and positive: a rate like that can only come from a bug.
    pub fn new(hz: f64) -> Self {
        assert!(
            hz.is_finite() && hz > 0.0,
            "tick rate must be positive, got {hz}"
        );
        TickRate { hz }
    }

    /// The duration of `ticks` ticks.
    pub fn to_nanos(self, ticks: u64) -> Nanos {
        Nanos(ticks as f64 * 1e9 / self.hz)
    }

    /// A signed tick difference (clock offsets may be negative) as nanoseconds.
    pub fn signed_to_nanos(self, ticks: i64) -> Nanos {
        Nanos(ticks as f64 * 1e9 / self.hz)
    }

    /// How many ticks `nanos` lasts (rounded to nearest, saturating at zero).
    pub fn to_ticks(self, nanos: Nanos) -> u64 {
        (nanos.0 * self.hz / 1e9).round().max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_roundtrips_at_a_ghz_rate() {
        let rate = TickRate::new(2.6e9);
        assert_eq!(rate.to_nanos(2_600).0, 1_000.0);
        assert_eq!(rate.to_ticks(Nanos(1_000.0)), 2_600);
        assert_eq!(rate.signed_to_nanos(-2_600).0, -1_000.0);
        assert_eq!(rate.to_ticks(Nanos(-5.0)), 0);
    }

    #[test]
    fn tick_differences_never_wrap() {
        assert_eq!(Ticks(10).since(Ticks(4)), 6);
        assert_eq!(Ticks(4).since(Ticks(10)), 0);
        assert_eq!(Ticks(u64::MAX).plus(5), Ticks(u64::MAX));
    }

    #[test]
    fn nanos_display_picks_a_unit() {
        assert_eq!(Nanos(850.0).to_string(), "850 ns");
        assert_eq!(Nanos(6_210.0).to_string(), "6.21 us");
        assert_eq!(Nanos(1_500_000.0).to_string(), "1.50 ms");
        assert_eq!(Nanos(2.5e9).to_string(), "2.500 s");
    }

    #[test]
    fn durations_parse_with_units() {
        let ns = |s: &str| s.parse::<Nanos>().map(|n| n.0);
        assert_eq!(ns("0"), Ok(0.0));
        assert_eq!(ns("850ns"), Ok(850.0));
        assert_eq!(ns("50us"), Ok(50_000.0));
        assert_eq!(ns("1.5ms"), Ok(1_500_000.0));
        assert_eq!(ns(" 2s "), Ok(2e9));
        for bad in ["", "5", "-5us", "1e3ns", "us", "1.2.3ms", "infs", "5 us x"] {
            let err = ns(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "`{bad}` is not a duration: a number with a unit (ns, us, ms, s), e.g. 50us"
                )
            );
        }
    }

    #[test]
    #[should_panic(expected = "positive")]
    fn zero_rate_is_a_bug() {
        TickRate::new(0.0);
    }
}
