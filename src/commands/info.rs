//! `ngauge info`: transports compiled and usable, the launcher, timer facts.

use crate::cli::GlobalArgs;
use ngauge::clock::TimerFacts;
use ngauge::job::probe::{probe_all, TransportInfo};
use ngauge::launch;
use ngauge::report::timer::{InfoDoc, LauncherInfo, RankInfo, TimerReport};
use std::time::Duration;

pub fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    super::common::check_outputs(global, &[])?;
    super::common::with_world(global, |world| {
        let mine = RankInfo {
            rank: world.rank,
            host: world
                .peers
                .get(world.rank)
                .map_or_else(String::new, |p| p.host.clone()),
            pid: std::process::id(),
            data_addr: world.data_addr,
            pinned_core: world.pinned_core,
        };
        let gathered = world.control.gather(0, &serde_json::to_vec(&mine)?)?;
        if world.rank != 0 {
            return Ok(());
        }
        let ranks = gathered
            .iter()
            .map(|bytes| serde_json::from_slice::<RankInfo>(bytes))
            .collect::<Result<Vec<_>, _>>()?;
        report(global, world, &ranks)
    })
}

fn report(global: &GlobalArgs, world: &launch::World, ranks: &[RankInfo]) -> anyhow::Result<()> {
    let transports: Vec<TransportInfo> = probe_all(&super::common::job_spec(global).verbs);
    let env = &world.env;
    let (facts, _) = TimerFacts::measure(Duration::from_millis(50), 100_000);
    let text = if global.json {
        None
    } else {
        use std::fmt::Write as _;
        let mut out = String::from("transports:\n");
        for t in &transports {
            let state = match (t.compiled, t.usable) {
                (true, true) => "usable".to_string(),
                (true, false) => format!(
                    "compiled, not usable: {}",
                    t.reason.as_deref().unwrap_or("")
                ),
                (false, _) => format!("not compiled: {}", t.reason.as_deref().unwrap_or("")),
            };
            writeln!(out, "  {:<6} {state}", t.name)?;
        }
        writeln!(
            out,
            "launcher: {}, {} ranks",
            env.kind.describe(),
            world.size
        )?;
        for r in ranks {
            writeln!(
                out,
                "  rank {:<3} {} pid {} data {} core {}",
                r.rank,
                r.host,
                r.pid,
                r.data_addr,
                r.pinned_core
                    .map_or_else(|| "unpinned".to_string(), |c| c.to_string())
            )?;
        }
        writeln!(
            out,
            "timer:    {} at {:.6} GHz, read cost {:.1} ns median, TSC {}",
            facts.source.as_str(),
            facts.hz / 1e9,
            facts.overhead_ns.median,
            if facts.invariant_tsc {
                "invariant"
            } else {
                "NOT invariant"
            }
        )?;
        Some(out)
    };
    if global.json || global.output.is_some() {
        let meta = super::common::meta(facts.source, facts.hz)
            .frequency_control(&facts.frequency.description)
            .job(world, ranks.iter().map(|r| r.pinned_core).collect())
            .build();
        let doc = InfoDoc {
            transports,
            launcher: LauncherInfo {
                kind: env.kind,
                name: env.kind.describe().into(),
                rank: world.rank,
                size: world.size,
                ranks_on_host: world.ranks_on_host,
                ranks: ranks.to_vec(),
            },
            timer: TimerReport::from(facts),
            meta,
        };
        super::common::write_single_record(global, &doc)?;
        if global.json {
            super::common::print_json(&doc)?;
        }
    }
    if let Some(text) = text {
        // Written, not println!: a closed pipe (`| head`) is an error main() treats
        // as success, not a panic.
        super::common::print_text(&text)?;
    }
    Ok(())
}
