//! `ngauge timer`: the timer's facts, as a table or JSON.

use crate::cli::{GlobalArgs, TimerArgs};
use ngauge::clock::{pin_to, read_tsc, TimerFacts, TimerSource};
use ngauge::report::Meta;
use std::time::Duration;

pub fn run(global: &GlobalArgs, args: &TimerArgs) -> anyhow::Result<()> {
    // A single process measuring its own host: pin to the core we are on so that the
    // read-cost figure is not disturbed by a migration.
    if TimerSource::detect() == TimerSource::Rdtscp {
        let (_, cpu) = read_tsc();
        let _ = pin_to(cpu as usize);
    }
    let (facts, _clock) = TimerFacts::measure(Duration::from_millis(100), args.reads as usize);
    if global.json {
        let mut meta = Meta::for_this_host(
            facts.source.as_str(),
            facts.hz,
            &facts.frequency.description,
        );
        meta.pinning = vec![facts.pinned_core];
        let mut doc = serde_json::to_value(&facts)?;
        doc["source"] = facts.source.as_str().into();
        doc["meta"] = serde_json::to_value(&meta)?;
        super::print_json(&doc)?;
    } else {
        super::print_text(&render(&facts))?;
    }
    for w in &facts.warnings {
        eprintln!("ngauge: warning: {w}");
    }
    Ok(())
}

fn render(f: &TimerFacts) -> String {
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
    out += &format!("resolution   {:.2} ns\n", f.resolution_ns);
    out += &format!(
        "pinned       {}\n",
        f.pinned_core
            .map_or("no".to_string(), |c| format!("core {c}"))
    );
    out += &format!("cpu freq     {}\n", f.frequency.description);
    out
}
