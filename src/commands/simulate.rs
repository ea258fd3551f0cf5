//! `ngauge simulate`: the command line as a [`SimulateSpec`], the simulator's
//! predictions as a table or JSON, optionally a timeline.

use super::common::UsageError;
use crate::cli::{GlobalArgs, SimulateArgs};
use ngauge::report::simulate::{render, SimulateDoc};
use ngauge::sim::spec::{self, LogGpSpec, NetworkSpec, SimulateSpec};

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
    run_spec(global, &spec, args.timeline.as_deref())
}

/// Simulates `spec` (from the command line or a suite), printing its document;
/// `timeline`: where to draw the first prediction's timeline.
pub fn run_spec(
    global: &GlobalArgs,
    spec: &SimulateSpec,
    timeline: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let input = |e: spec::SpecError| {
        if e.is_input() {
            usage(e.to_string())
        } else {
            anyhow::Error::new(e)
        }
    };
    spec::validate(spec).map_err(input)?;
    if timeline.is_some() && spec.np > ngauge::report::timeline::MAX_RANKS {
        return Err(usage(format!(
            "--timeline draws at most {} ranks, not {}",
            ngauge::report::timeline::MAX_RANKS,
            spec.np
        )));
    }
    let loaded = spec.network.load().map_err(input)?;
    let results = spec::run(spec, &loaded.network).map_err(input)?;
    if let Some(path) = timeline {
        let trace = spec::trace(spec, &loaded.network).map_err(input)?;
        let first = &results[0];
        let title = format!(
            "{} {} np {} size {} B{}",
            first.op,
            first.algo,
            first.np,
            first.size,
            if first.segment > 0 {
                format!(" segment {} B", first.segment)
            } else {
                String::new()
            }
        );
        let svg = ngauge::report::timeline::svg(&trace, spec.np, &title)
            .map_err(|e| usage(format!("--timeline: {e}")))?;
        std::fs::write(path, svg)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    let params = match &spec.network {
        NetworkSpec::ParamsFile(p) => p.display().to_string(),
        NetworkSpec::Loggp(_) => "flags".into(),
    };
    let meta = super::common::meta(ngauge::clock::TimerSource::detect(), 0.0)
        .simulated(spec.np)
        .build();
    let warnings = loaded.warnings.clone();
    let doc = SimulateDoc::new(
        params,
        loaded.transport,
        &loaded.network,
        spec.receive_gap,
        results,
        loaded.warnings,
        meta,
    );
    if global.json {
        super::common::print_json(&doc)?;
    } else {
        super::common::print_text(&render(&doc))?;
    }
    for w in &warnings {
        super::common::warn(w, None);
    }
    Ok(())
}
