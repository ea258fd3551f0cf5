//! `timer`: the timer's facts, measured in this one process
//! ([`crate::clock::TimerFacts`]).

use super::{Context, ExperimentError};
use crate::clock::{pin_to, pinned_core, read_tsc, TimerFacts, TimerSource, Warning};
use crate::report::timer::{TimerDoc, TimerReport, TimerSamples};
use crate::spec::TimerSpec;
use std::time::Duration;

/// Calibrates the timer over 100 ms, times `spec.reads` back-to-back reads and
/// reads the host's facts; the document is also the one record of the context.
///
/// # Errors
/// A spec out of range; a record that cannot be kept.
pub fn run(spec: &TimerSpec, ctx: &mut Context) -> Result<TimerDoc, ExperimentError> {
    spec.validate()?;
    // How the process was started is the host fact (`pinned_core`, and the Unpinned
    // warning); the pin below is only for our own measurement.
    let pinned_at_start = pinned_core();
    // A single process measuring its own host: pin to the core we are on so that the
    // read-cost figure is not disturbed by a migration.
    let mut measured_on_core = None;
    if TimerSource::detect() == TimerSource::Rdtscp {
        let (_, cpu) = read_tsc();
        if pin_to(cpu as usize).is_ok() {
            measured_on_core = Some(cpu as usize);
        }
    }
    let (mut facts, _clock, samples) = TimerFacts::measure_with_samples(
        ctx.timer,
        Duration::from_millis(100),
        spec.reads as usize,
        spec.samples,
    );
    facts.pinned_core = pinned_at_start;
    facts.warnings.retain(|w| *w != Warning::Unpinned);
    if pinned_at_start.is_none() {
        facts.warnings.push(Warning::Unpinned);
    }
    let meta = ctx
        .meta(facts.source, facts.hz)
        .frequency_control(&facts.frequency.description)
        .process(facts.pinned_core)
        .build();
    let doc = TimerDoc {
        timer: TimerReport::from(facts),
        measured_on_core: measured_on_core.or(pinned_at_start),
        samples: samples.map(|overhead_ns| TimerSamples { overhead_ns }),
        meta,
    };
    ctx.record(&doc)?;
    Ok(doc)
}
