//! `ngauge simulate`: the command line as a [`SimulateSpec`], the simulator's
//! predictions ([`ngauge::experiment::simulate`]) as a table or JSON, optionally a
//! timeline; with `--measure`, the candidates measured in a live job by `ngauge
//! coll`'s executor and the models' choices judged against the measured best.
//!
//! **`--measure` and `--np`.** Without `--measure`, `--np` is only the simulated
//! job's size and nothing is started. With it, the command runs in a job like
//! every measuring command (the local launcher starts `--np` ranks; under
//! mpirun, srun or by hand the job is theirs) and the simulated size is the
//! job's, so that the predictions and the measurements are of the same `P`.

use super::common::{
    check_outputs, context, end, experiment_error, job_spec, measure, records, spec_usage,
    UsageError,
};
use crate::cli::{GlobalArgs, SimulateArgs};
use ngauge::clock::TimerSource;
use ngauge::experiment::{simulate, ExperimentError};
use ngauge::sim::spec::{self, LogGpSpec, NetworkSpec, SimulateSpec};
use ngauge::spec::{CollCmdSpec, SizeList};

/// Segment sizes `--select` tries when `--segment` is not given.
const SELECT_SEGMENTS: &str = "0,1K,8K,64K";
/// Up to this many ranks, one prediction shows every rank's completion.
const PER_RANK_DEFAULT_NP: usize = 16;

fn usage(text: String) -> anyhow::Error {
    anyhow::Error::new(UsageError(text))
}

fn network(args: &SimulateArgs) -> anyhow::Result<NetworkSpec> {
    if let Some(path) = &args.params {
        return Ok(NetworkSpec::ParamsFile(path.clone()));
    }
    // clap has made sure --L, --g and --G are all there.
    let (l_us, g_us, big_g) = match (args.l_us, args.g_us, args.big_g) {
        (Some(l), Some(g), Some(big_g)) => (l, g, big_g),
        _ => return Err(usage("give --params FILE or --L, --o, --g and --G".into())),
    };
    let (Some(o_s_us), Some(o_r_us)) = (args.os_us.or(args.o_us), args.or_us.or(args.o_us)) else {
        return Err(usage("--L needs --o (or both --os and --or)".into()));
    };
    Ok(NetworkSpec::Loggp(LogGpSpec {
        l_us,
        o_s_us,
        o_r_us,
        g_us,
        big_g_us_per_byte: big_g,
        rendezvous: args.protocol == "rendezvous",
    }))
}

/// The spec the command line describes.
fn spec(global: &GlobalArgs, args: &SimulateArgs) -> anyhow::Result<SimulateSpec> {
    let sizes_bytes =
        ngauge::sizes::parse_sizes(&args.sizes).map_err(|e| usage(format!("--sizes: {e}")))?;
    let segments = match (&args.segment, args.select) {
        (Some(s), _) => Some(s.as_str()),
        (None, true) => Some(SELECT_SEGMENTS),
        (None, false) => None,
    };
    let segments_bytes = match segments {
        Some(s) => ngauge::sizes::parse_sizes(s).map_err(|e| usage(format!("--segment: {e}")))?,
        None => Vec::new(),
    };
    let np = global.np as usize;
    let algorithms = if args.select {
        Vec::new()
    } else {
        args.algo.clone()
    };
    let single = algorithms.len() == 1 && sizes_bytes.len() == 1 && segments_bytes.len() <= 1;
    Ok(SimulateSpec {
        op: args.op.clone(),
        algorithms,
        segments_bytes,
        np,
        sizes_bytes,
        root: args.root,
        network: network(args)?,
        receive_gap: !args.no_receive_gap,
        per_rank: args.per_rank || (single && np <= PER_RANK_DEFAULT_NP),
        loop_calls: args.loop_calls,
    })
}

pub fn run(global: &GlobalArgs, args: &SimulateArgs) -> anyhow::Result<()> {
    let spec = spec(global, args)?;
    if args.measure {
        return measure_in_job(global, args, spec);
    }
    run_spec(global, &spec, args.timeline.as_deref())
}

/// The spec's failures as the command line reports them: the user's input is a
/// usage error.
fn input(e: spec::SpecError) -> anyhow::Error {
    experiment_error(ExperimentError::Simulate(e))
}

/// `--measure`: simulates `spec` at the job's size and measures its candidates
/// with `coll`'s executor, rank 0 printing one document.
fn measure_in_job(
    global: &GlobalArgs,
    args: &SimulateArgs,
    mut spec: SimulateSpec,
) -> anyhow::Result<()> {
    // The job's size, when a launcher (or --rank/--size) has one; otherwise the
    // local launcher will start --np ranks.
    let env = ngauge::launch::detect();
    let outer = env.size.or(global.size.map(|s| s as usize));
    if outer.is_none() && global.np > super::common::MAX_LAUNCH_NP {
        return Err(usage(format!(
            "--measure needs a live job, and {} ranks cannot be started here (at most {}): \
             run under mpirun or srun, or simulate {} ranks without --measure",
            global.np,
            super::common::MAX_LAUNCH_NP,
            global.np
        )));
    }
    spec.np = outer.unwrap_or(global.np as usize);
    spec::validate(&spec).map_err(input)?;
    spec.network.load().map_err(input)?;
    let op: ngauge::coll::Collective = spec
        .op
        .parse()
        .map_err(|e: ngauge::coll::CollError| usage(e.to_string()))?;
    let how = CollCmdSpec {
        op,
        algo: spec.algorithms.clone(),
        root: ngauge::spec::coll::RootChoice::Rank(spec.root),
        scheme: args.scheme,
        sizes: SizeList(spec.sizes_bytes.clone()),
        reps: args.reps,
        warmup: args.warmup,
        max_rounds: args.max_rounds,
        ..Default::default()
    };
    how.validate().map_err(spec_usage)?;
    check_outputs(global, &[])?;
    let job = job_spec(global);
    measure(
        global,
        None,
        |world, ctx| simulate::measure(world, &job, &spec, &how, ctx),
        super::coll::hint,
    )
}

/// Simulates `spec` (from the command line or a suite), printing its document;
/// `timeline`: where to draw the first prediction's timeline.
pub fn run_spec(
    global: &GlobalArgs,
    spec: &SimulateSpec,
    timeline: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    spec::validate(spec).map_err(input)?;
    if timeline.is_some() && spec.np > ngauge::report::timeline::MAX_RANKS {
        return Err(usage(format!(
            "--timeline draws at most {} ranks, not {}",
            ngauge::report::timeline::MAX_RANKS,
            spec.np
        )));
    }
    check_outputs(global, &[("--timeline", timeline)])?;
    let mut writer = records(global, true)?;
    let doc = simulate::run(
        spec,
        &mut context(false, TimerSource::detect(), writer.as_mut()),
    )
    .map_err(experiment_error)?;
    if let Some(path) = timeline {
        let loaded = spec.network.load().map_err(input)?;
        let trace = spec::trace(spec, &loaded.network).map_err(input)?;
        let first = &doc.results[0];
        let segment = match first.segment {
            0 => String::new(),
            s => format!(" segment {s} B"),
        };
        let title = format!(
            "{} {} np {} size {} B{segment}",
            first.op, first.algo, first.np, first.size
        );
        let svg = ngauge::report::timeline::svg(&trace, spec.np, &title)
            .map_err(|e| usage(format!("--timeline: {e}")))?;
        std::fs::write(path, svg)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    end(global, &doc, None, |_| None)
}
