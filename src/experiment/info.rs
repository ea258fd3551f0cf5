//! `info`: the transports compiled and usable, the launcher and every rank's
//! place, the timer's facts.

use super::{Context, ExperimentError};
use crate::clock::TimerFacts;
use crate::job::probe::probe_all;
use crate::job::JobSpec;
use crate::launch::World;
use crate::report::timer::{InfoDoc, LauncherInfo, RankInfo, TimerReport};
use crate::spec::InfoSpec;
use std::time::Duration;

/// Gathers every rank's place at rank 0, which probes the transports (with the
/// job's verbs device and UCX transport list) and the timer; the document is also the one record of the
/// context. Collective: every rank calls it.
///
/// # Errors
/// The control channel failed, or a record cannot be kept.
pub fn run(
    world: &mut World,
    job: &JobSpec,
    _spec: &InfoSpec,
    ctx: &mut Context,
) -> Result<Option<InfoDoc>, ExperimentError> {
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
    let ranks = world.gather_json(&mine, "rank facts")?;
    if world.rank != 0 {
        return Ok(None);
    }
    let transports = probe_all(job);
    let (facts, _) = TimerFacts::measure(ctx.timer, Duration::from_millis(50), 100_000);
    let meta = ctx
        .meta(facts.source, facts.hz)
        .frequency_control(&facts.frequency.description)
        .job(world, ranks.iter().map(|r| r.pinned_core).collect())
        .build();
    let env = &world.env;
    let doc = InfoDoc {
        transports,
        launcher: LauncherInfo {
            kind: env.kind,
            name: env.kind.describe().into(),
            rank: world.rank,
            size: world.size,
            ranks_on_host: world.ranks_on_host,
            ranks,
        },
        timer: TimerReport::from(facts),
        meta,
    };
    ctx.record(&doc)?;
    Ok(Some(doc))
}
