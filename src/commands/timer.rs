//! `ngauge timer`: the timer's facts, as a table or JSON.

use crate::cli::{GlobalArgs, TimerArgs};
use ngauge::clock::{pin_to, pinned_core, read_tsc, TimerFacts, TimerSource, Warning};
use ngauge::report::timer::{TimerDoc, TimerReport, TimerSamples};
use ngauge::spec::TimerSpec;
use std::time::Duration;

pub fn run(global: &GlobalArgs, args: &TimerArgs) -> anyhow::Result<()> {
    run_spec(
        global,
        &TimerSpec {
            reads: args.reads,
            samples: args.samples,
        },
    )
}

pub fn run_spec(global: &GlobalArgs, args: &TimerSpec) -> anyhow::Result<()> {
    args.validate().map_err(super::common::spec_usage)?;
    super::common::check_outputs(global, &[])?;
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
        Duration::from_millis(100),
        args.reads as usize,
        args.samples,
    );
    facts.pinned_core = pinned_at_start;
    facts.warnings.retain(|w| *w != Warning::Unpinned);
    if pinned_at_start.is_none() {
        facts.warnings.push(Warning::Unpinned);
    }
    let measured_on_core = measured_on_core.or(pinned_at_start);
    let warnings = facts.warnings.clone();
    let text = (!global.json).then(|| render(&facts, measured_on_core));
    if global.json || global.output.is_some() {
        let meta = super::common::meta(facts.source, facts.hz)
            .frequency_control(&facts.frequency.description)
            .process(facts.pinned_core)
            .build();
        let doc = TimerDoc {
            timer: TimerReport::from(facts),
            measured_on_core,
            samples: samples.map(|overhead_ns| TimerSamples { overhead_ns }),
            meta,
        };
        super::common::write_single_record(global, &doc)?;
        if global.json {
            super::common::print_json(&doc)?;
        }
    }
    if let Some(text) = text {
        super::common::print_text(&text)?;
    }
    for w in &warnings {
        super::common::warn(w, None);
    }
    Ok(())
}
fn render(f: &TimerFacts, measured_on_core: Option<usize>) -> String {
    let mut out = String::new();
    let invariant = if f.invariant_tsc {
        "invariant"
    } else {
        "NOT invariant"
    };
    out += &format!("timer        {} (TSC {invariant})\n", f.source.as_str());
    out += &format!(
        "frequency    {:.6} GHz (regression over {:.0} ms, {} samples, +-{:.3} ppm)\n",
        f.hz / 1e9,
        f.calibration.window_ms,
        f.calibration.samples,
        f.calibration.uncertainty_ppm
    );
    if let (Some(k), Some(src)) = (f.kernel_hz, &f.kernel_hz_source) {
        out += &format!(
            "kernel says  {:.6} GHz ({src}), difference {:.4}%\n",
            k / 1e9,
            (f.hz / k - 1.0).abs() * 100.0
        );
    }
    out += &format!(
        "read cost    min {:.1} ns, median {:.1} ns, p99 {:.1} ns ({} back-to-back reads)\n",
        f.overhead_ns.min, f.overhead_ns.median, f.overhead_ns.p99, f.reads
    );
    if let Some(core) = measured_on_core {
        out += &format!("measured on  core {core} (read cost and resolution)\n");
    }
    out += &format!("resolution   {:.2} ns\n", f.resolution_ns);
    out += &format!(
        "pinned       {}\n",
        f.pinned_core
            .map_or("no (at start)".to_string(), |c| format!("core {c}"))
    );
    out += &format!("cpu freq     {}\n", f.frequency.description);
    out
}
