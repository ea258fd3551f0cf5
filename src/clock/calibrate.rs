//! Timer frequency by regression against CLOCK_MONOTONIC_RAW.
//!
//! Netgauge calibrated with a repeated `sleep(1)` and took the tick count per second
//! as the frequency: one sample per second, sensitive to the scheduler's wake-up
//! delay. We instead sample `(ticks, reference ns)` pairs through a short window and
//! fit `ticks = a + hz * t` by ordinary least squares, which averages the jitter of
//! every sample. Each pair is read as `ticks_before, reference, ticks_after` and kept
//! only when the bracket is tight, with the midpoint as the tick value; the standard
//! error of the slope is reported as the calibration's uncertainty.

use super::timer::{self, TimerSource};
use crate::model::lsq;
use crate::units::TickRate;
use std::time::Duration;

/// The result of a calibration.
#[derive(Clone, Copy, Debug, serde::Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Calibration {
    /// Estimated ticks per second.
    pub rate: TickRate,
    /// Standard error of the estimate, in parts per million of `hz`.
    pub uncertainty_ppm: f64,
    /// Samples used in the fit.
    pub samples: usize,
    /// Length of the sampling window in milliseconds.
    pub window_ms: f64,
}

/// One `(ticks, nanoseconds)` pair and the width of its tick bracket.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Midpoint of the ticks read before and after the reference.
    pub ticks: f64,
    /// Reference clock, nanoseconds.
    pub ref_ns: f64,
}

/// Fits ticks against reference nanoseconds; `None` with fewer than 3 distinct samples.
pub fn fit(samples: &[Sample]) -> Option<Calibration> {
    if samples.len() < 3 {
        return None;
    }
    let xs: Vec<f64> = samples
        .iter()
        .map(|s| s.ref_ns - samples[0].ref_ns)
        .collect();
    let ys: Vec<f64> = samples.iter().map(|s| s.ticks - samples[0].ticks).collect();
    let line = lsq::fit_line(&xs, &ys)?;
    let ticks_per_ns = line.slope;
    if !(ticks_per_ns.is_finite() && ticks_per_ns > 0.0) {
        return None;
    }
    let window_ns = xs.last()? - xs.first()?;
    Some(Calibration {
        rate: TickRate::new(ticks_per_ns * 1e9),
        uncertainty_ppm: line.slope_stderr / ticks_per_ns * 1e6,
        samples: samples.len(),
        window_ms: window_ns / 1e6,
    })
}

/// Takes the best of a few `(ticks, reference)` reads: the one with the narrowest
/// bracket of ticks around the reference read.
fn sample(source: TimerSource) -> Sample {
    let mut best: Option<(u64, Sample)> = None;
    for _ in 0..5 {
        let before = timer::read(source);
        let ref_ns = timer::monotonic_raw_ns();
        let after = timer::read(source);
        let width = after.since(before);
        if best.is_none_or(|(w, _)| width < w) {
            let mid = before.0 as f64 + width as f64 / 2.0;
            best = Some((
                width,
                Sample {
                    ticks: mid,
                    ref_ns: ref_ns as f64,
                },
            ));
        }
    }
    best.expect("five tries").1
}

/// Calibrates `source` over `window` (about 100 samples spread through it).
///
/// For `MonotonicRaw` the answer is exactly 1 GHz (ticks are nanoseconds).
pub fn calibrate(source: TimerSource, window: Duration) -> Calibration {
    if source == TimerSource::MonotonicRaw {
        return Calibration {
            rate: TickRate::new(1e9),
            uncertainty_ppm: 0.0,
            samples: 0,
            window_ms: 0.0,
        };
    }
    const SAMPLES: u32 = 100;
    let step = window / SAMPLES;
    let mut samples = Vec::with_capacity(SAMPLES as usize + 1);
    for _ in 0..=SAMPLES {
        samples.push(sample(source));
        std::thread::sleep(step);
    }
    fit(&samples).unwrap_or_else(|| {
        // A timer that does not advance cannot be calibrated; this only happens on
        // broken virtual machines. Fall back to the reference clock's own rate.
        Calibration {
            rate: TickRate::new(1e9),
            uncertainty_ppm: f64::INFINITY,
            samples: samples.len(),
            window_ms: window.as_secs_f64() * 1e3,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(hz: f64, jitter_ticks: &[f64]) -> Vec<Sample> {
        jitter_ticks
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let ref_ns = 1e6 * i as f64 + 123_456.0;
                Sample {
                    ticks: 5e12 + ref_ns * hz / 1e9 + j,
                    ref_ns,
                }
            })
            .collect()
    }

    #[test]
    fn exact_samples_give_the_exact_rate() {
        let cal = fit(&synthetic(2.6e9, &[0.0; 50])).unwrap();
        assert!((cal.rate.hz - 2.6e9).abs() < 1e-3, "{}", cal.rate.hz);
        assert!(cal.uncertainty_ppm < 1e-6);
        assert!((cal.window_ms - 49.0).abs() < 1e-9);
    }

    #[test]
    fn jitter_is_averaged_and_reported() {
        // +-100 ticks (about 40 ns) alternating jitter over a 99 ms window.
        let jitter: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 100.0 } else { -100.0 })
            .collect();
        let cal = fit(&synthetic(2.6e9, &jitter)).unwrap();
        let err_ppm = (cal.rate.hz / 2.6e9 - 1.0).abs() * 1e6;
        assert!(err_ppm < 1.0, "error {err_ppm} ppm");
        assert!(cal.uncertainty_ppm > 0.0 && cal.uncertainty_ppm < 1.0);
    }

    #[test]
    fn degenerate_samples_are_refused() {
        assert!(fit(&synthetic(2.6e9, &[0.0; 2])).is_none());
        let flat: Vec<Sample> = (0..10)
            .map(|i| Sample {
                ticks: 7.0,
                ref_ns: i as f64,
            })
            .collect();
        assert!(fit(&flat).is_none());
    }

    #[test]
    fn real_timer_calibrates_consistently() {
        let source = TimerSource::detect();
        let a = calibrate(source, Duration::from_millis(20));
        let b = calibrate(source, Duration::from_millis(20));
        assert!((a.rate.hz / b.rate.hz - 1.0).abs() < 1e-3, "{a:?} vs {b:?}");
    }
}
