//! A rank's clock model: offset and drift relative to rank 0, i.e. the map from this
//! rank's local ticks to the global time (rank 0's ticks).
//!
//! Hunold & Carpen-Amarie (MPI benchmarking revisited, sec. 4.3, Algorithm 16) model
//! the difference between a local and the reference clock as a line in local time,
//! `local - global = slope * local + intercept`, and normalize with
//! `global = local - (slope * local + intercept)`. We keep exactly that line, with
//! two changes for numerical safety:
//!
//! - the line is anchored at a local reading (`anchor`) instead of at tick 0: raw TSC
//!   values are ~1e15, where an `f64` intercept would lose sub-tick precision. Their
//!   `Get_Adjusted_Time` (Algorithm 3, line 2) subtracts an initial timestamp for the
//!   same reason;
//! - differences of readings are taken in `i128` before they become `f64`.
//!
//! An offset-only model (SKaMPI, Netgauge; `linear` and `logp`) is the same line with
//! zero slope. Models compose along a path of the synchronization tree
//! ([`ClockModel::then`]), which is `Merge_LMs` and equation (1) of the paper.
//!
//! Everything here is in ticks. Ticks of different ranks are converted to time only
//! when reported, with one rate: converting each rank's ticks with its own calibrated
//! rate would turn calibration errors into drift (Hunold sec. 4.2.1 measures exactly
//! that error in Netgauge's frequency estimate).

use crate::clock::{Clock, TickRate, Ticks};

/// The line `local - global = offset_ticks + drift * (local - anchor)`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ClockModel {
    /// The local reading the line is anchored at.
    pub anchor: Ticks,
    /// `local - global` at `anchor`, in ticks (negative when this clock is behind).
    pub offset_ticks: f64,
    /// Slope of `local - global` against local time (the paper's `slope`).
    pub drift: f64,
}

/// Serialized size of a [`ClockModel`] (anchor `u64`, offset `f64`, drift `f64`).
pub const MODEL_BYTES: usize = 24;

/// `a - b` as `f64`, exact for the differences of nearby readings.
pub(crate) fn delta(a: Ticks, b: Ticks) -> f64 {
    (a.0 as i128 - b.0 as i128) as f64
}

/// `base + d`, rounded and clamped to the `u64` range.
pub(crate) fn offset_by(base: Ticks, d: f64) -> Ticks {
    let v = base.0 as i128 + d.round() as i128;
    Ticks(v.clamp(0, u64::MAX as i128) as u64)
}

impl ClockModel {
    /// The reference clock itself (rank 0): global time is local time.
    pub const IDENTITY: ClockModel = ClockModel {
        anchor: Ticks(0),
        offset_ticks: 0.0,
        drift: 0.0,
    };

    /// A constant offset (`local - global`), as SKaMPI and Netgauge estimate.
    pub fn offset_only(offset_ticks: f64) -> Self {
        ClockModel {
            anchor: Ticks(0),
            offset_ticks,
            drift: 0.0,
        }
    }

    /// `local - global` at the local reading `local`, in ticks.
    pub fn offset_at(&self, local: Ticks) -> f64 {
        self.offset_ticks + self.drift * delta(local, self.anchor)
    }

    /// Global time (rank 0's ticks) of the local reading `local` (Algorithm 16).
    pub fn global(&self, local: Ticks) -> Ticks {
        offset_by(local, -self.offset_at(local))
    }

    /// `global(local) - reference` as `f64` ticks, without rounding: for residuals.
    pub fn global_minus(&self, local: Ticks, reference: Ticks) -> f64 {
        delta(local, reference) - self.offset_at(local)
    }

    /// The local reading at which the global time is `global` (the inverse of
    /// [`ClockModel::global`]): where a rank busy-waits for a start time chosen by
    /// rank 0.
    pub fn local(&self, global: Ticks) -> Ticks {
        // global = x - o - d (x - a)  =>  x - a = (global - a + o) / (1 - d)
        let d = (delta(global, self.anchor) + self.offset_ticks) / (1.0 - self.drift);
        offset_by(self.anchor, d)
    }

    /// The model of this rank relative to rank 0, given this model relative to a
    /// reference rank `q` and `outer`, the model of `q` relative to rank 0.
    ///
    /// This is `Merge_LMs` (Hunold & Carpen-Amarie, Algorithm 4, line 33; equation
    /// (1)): the slopes combine as `s1 + s2 - s1 * s2`; the offset at our anchor is our
    /// offset plus `q`'s offset at the instant our anchor maps to.
    pub fn then(&self, outer: &ClockModel) -> ClockModel {
        // Our anchor in q's ticks, relative to q's anchor.
        let anchor_in_q = delta(self.anchor, outer.anchor) - self.offset_ticks;
        ClockModel {
            anchor: self.anchor,
            offset_ticks: self.offset_ticks + outer.offset_ticks + outer.drift * anchor_in_q,
            drift: self.drift + outer.drift - self.drift * outer.drift,
        }
    }

    /// The same slope with the line moved through `offset_ticks` at `local`:
    /// `Compute_And_Set_Intercept` (Algorithm 4, line 24), which replaces the
    /// regression intercept by a freshly measured offset.
    pub fn with_offset_at(&self, local: Ticks, offset_ticks: f64) -> ClockModel {
        ClockModel {
            anchor: local,
            offset_ticks,
            drift: self.drift,
        }
    }

    /// The rate error of this clock relative to rank 0, in ppm: `+40` when this clock
    /// gains 40 us per second of global time (the sense of `NGAUGE_TEST_CLOCK_SKEW`).
    pub fn drift_ppm(&self) -> f64 {
        self.drift / (1.0 - self.drift) * 1e6
    }

    /// The model as 24 little-endian bytes.
    pub fn to_bytes(&self) -> [u8; MODEL_BYTES] {
        let mut out = [0u8; MODEL_BYTES];
        out[..8].copy_from_slice(&self.anchor.0.to_le_bytes());
        out[8..16].copy_from_slice(&self.offset_ticks.to_le_bytes());
        out[16..].copy_from_slice(&self.drift.to_le_bytes());
        out
    }

    /// Inverse of [`ClockModel::to_bytes`]; `None` unless exactly 24 bytes with finite
    /// numbers and a drift below 1 (a clock that runs backwards is no clock).
    pub fn from_bytes(bytes: &[u8]) -> Option<ClockModel> {
        let bytes: &[u8; MODEL_BYTES] = bytes.try_into().ok()?;
        let model = ClockModel {
            anchor: Ticks(u64::from_le_bytes(bytes[..8].try_into().ok()?)),
            offset_ticks: f64::from_le_bytes(bytes[8..16].try_into().ok()?),
            drift: f64::from_le_bytes(bytes[16..].try_into().ok()?),
        };
        (model.offset_ticks.is_finite() && model.drift.is_finite() && model.drift.abs() < 1.0)
            .then_some(model)
    }
}

/// Packs a list of models (for the tree algorithms' upward messages and gathers).
pub fn pack_models(models: &[ClockModel]) -> Vec<u8> {
    models.iter().flat_map(|m| m.to_bytes()).collect()
}

/// Unpacks `count` models; `None` on a wrong length or an invalid model.
pub fn unpack_models(bytes: &[u8], count: usize) -> Option<Vec<ClockModel>> {
    if bytes.len() != count * MODEL_BYTES {
        return None;
    }
    bytes
        .chunks_exact(MODEL_BYTES)
        .map(ClockModel::from_bytes)
        .collect()
}

/// A clock that reads global time: a local clock seen through its model. The residual
/// checks of `ngauge sync` and window-based starts read time through it.
#[derive(Clone, Copy, Debug)]
pub struct GlobalClock<'a, C: ?Sized> {
    clock: &'a C,
    model: ClockModel,
}

impl<'a, C: Clock + ?Sized> GlobalClock<'a, C> {
    /// `clock` corrected by `model`.
    pub fn new(clock: &'a C, model: ClockModel) -> Self {
        GlobalClock { clock, model }
    }
}

impl<C: Clock + ?Sized> Clock for GlobalClock<'_, C> {
    fn now(&self) -> Ticks {
        self.model.global(self.clock.now())
    }
    fn rate(&self) -> TickRate {
        self.clock.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Skew;

    /// The exact model of a clock skewed by `skew` against an unskewed reference.
    fn truth(skew: &Skew) -> ClockModel {
        // local = raw + o + d (raw - e); global = raw. At raw = e: local - global = o.
        // d(local - global)/d(local) = d / (1 + d).
        ClockModel {
            anchor: skew.apply(skew.epoch),
            offset_ticks: skew.offset_ticks,
            drift: skew.drift / (1.0 + skew.drift),
        }
    }

    #[test]
    fn global_and_local_invert_each_other_far_from_the_anchor() {
        let m = ClockModel {
            anchor: Ticks(5_000_000_000_000_000),
            offset_ticks: -7_800_000.25,
            drift: 40e-6,
        };
        for x in [0u64, 1 << 40, 5_000_000_000_000_000, 5_000_100_000_000_000] {
            let x = Ticks(x + 5_000_000_000_000_000);
            let back = m.local(m.global(x));
            assert!(back.0.abs_diff(x.0) <= 1, "{x:?} -> {back:?}");
        }
    }

    #[test]
    fn the_truth_model_reproduces_an_injected_skew() {
        let skew = Skew {
            offset_ticks: 3e6,
            drift: 40e-6,
            epoch: Ticks(1_000_000_000_000),
        };
        let m = truth(&skew);
        for raw in [1_000_000_000_000u64, 1_013_000_000_000, 1_500_000_000_000] {
            let err = m.global_minus(skew.apply(Ticks(raw)), Ticks(raw));
            assert!(err.abs() <= 1.0, "raw {raw}: {err}");
        }
        assert!((m.drift_ppm() - 40.0).abs() < 1e-6);
    }

    #[test]
    fn composition_follows_a_path_of_skewed_clocks() {
        // Rank 2 skewed against rank 1, rank 1 skewed against rank 0 (raw = rank 0).
        let s1 = Skew {
            offset_ticks: 2.5e6,
            drift: -25e-6,
            epoch: Ticks(7_000_000_000),
        };
        let s21 = Skew {
            offset_ticks: -4e6,
            drift: 300e-6,
            epoch: Ticks(9_000_000_000),
        };
        // local2 = s21(local1) = s21(s1(raw)).
        let m21 = truth(&s21);
        let m10 = truth(&s1);
        let m20 = m21.then(&m10);
        for raw in [7_000_000_000u64, 8_000_000_000, 60_000_000_000] {
            let local2 = s21.apply(s1.apply(Ticks(raw)));
            let err = m20.global_minus(local2, Ticks(raw));
            assert!(err.abs() <= 2.0, "raw {raw}: {err}");
        }
        // Slopes merge as in equation (1).
        assert_eq!(m20.drift, m21.drift + m10.drift - m21.drift * m10.drift);
        // The identity is neutral on both sides.
        let same = m21.then(&ClockModel::IDENTITY);
        assert_eq!(same, m21);
        let x = Ticks(9_123_456_789);
        assert!(
            (ClockModel::IDENTITY
                .then(&m21)
                .global_minus(x, m21.global(x)))
            .abs()
                <= 1.0
        );
    }

    #[test]
    fn moving_the_intercept_keeps_the_slope() {
        let m = ClockModel {
            anchor: Ticks(100),
            offset_ticks: 50.0,
            drift: 1e-3,
        };
        let moved = m.with_offset_at(Ticks(1_000_100), -20.0);
        assert_eq!(moved.drift, m.drift);
        assert_eq!(moved.offset_at(Ticks(1_000_100)), -20.0);
        assert_eq!(moved.offset_at(Ticks(2_000_100)), -20.0 + 1000.0);
    }

    #[test]
    fn bytes_roundtrip_and_reject_garbage() {
        let m = ClockModel {
            anchor: Ticks(u64::MAX - 3),
            offset_ticks: -1.5,
            drift: 2e-5,
        };
        assert_eq!(ClockModel::from_bytes(&m.to_bytes()), Some(m));
        assert_eq!(ClockModel::from_bytes(&m.to_bytes()[..23]), None);
        let mut nan = m.to_bytes();
        nan[8..16].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(ClockModel::from_bytes(&nan), None);
        let mut backwards = m.to_bytes();
        backwards[16..].copy_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(ClockModel::from_bytes(&backwards), None);
        let list = [m, ClockModel::IDENTITY];
        assert_eq!(
            unpack_models(&pack_models(&list), 2).as_deref(),
            Some(&list[..])
        );
        assert_eq!(unpack_models(&pack_models(&list), 3), None);
    }

    #[test]
    fn global_clock_reads_through_the_model() {
        struct Fixed(Ticks);
        impl Clock for Fixed {
            fn now(&self) -> Ticks {
                self.0
            }
            fn rate(&self) -> TickRate {
                TickRate::new(1e9)
            }
        }
        let clock = Fixed(Ticks(10_000));
        let g = GlobalClock::new(&clock, ClockModel::offset_only(2_500.0));
        assert_eq!(g.now(), Ticks(7_500));
        assert_eq!(g.rate().hz, 1e9);
    }
}
