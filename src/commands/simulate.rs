//! `ngauge simulate`: the command line as a [`SimulateSpec`], the simulator's
//! predictions as a table or JSON, optionally a timeline; with `--measure`, the
//! candidates measured in a live job by `ngauge coll`'s executor and the models'
//! choices judged against the measured best.
//!
//! **`--measure` and `--np`.** Without `--measure`, `--np` is only the simulated
//! job's size and nothing is started. With it, the command runs in a job like
//! every measuring command (the local launcher starts `--np` ranks; under
//! mpirun, srun or by hand the job is theirs) and the simulated size is the
//! job's, so that the predictions and the measurements are of the same `P`.

use super::common::UsageError;
use crate::cli::{GlobalArgs, SimulateArgs};
use ngauge::report::simulate::{render, Measurement, SimulateDoc};
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
    if args.measure {
        return measure(global, args, spec);
    }
    run_spec(global, &spec, args.timeline.as_deref())
}

/// The spec's failures as the command line reports them: the user's input is a
/// usage error.
fn input(e: spec::SpecError) -> anyhow::Error {
    if e.is_input() {
        usage(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// `--measure`: simulates `spec` at the job's size and measures its candidates
/// with `coll`'s executor, rank 0 printing one document.
fn measure(global: &GlobalArgs, args: &SimulateArgs, mut spec: SimulateSpec) -> anyhow::Result<()> {
    use super::coll::{self, Candidate};
    use super::collective::Implementation;
    use ngauge::report::coll_predict::select;
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
    let candidates = spec::validate(&spec).map_err(input)?;
    let loaded = spec.network.load().map_err(input)?;
    let op: ngauge::coll::Collective = spec
        .op
        .parse()
        .map_err(|e: ngauge::coll::CollError| usage(e.to_string()))?;
    let coll_spec = ngauge::spec::CollCmdSpec {
        op,
        algo: spec.algorithms.clone(),
        root: ngauge::spec::coll::RootChoice::Rank(spec.root),
        scheme: args.scheme,
        sizes: ngauge::spec::SizeList(spec.sizes_bytes.clone()),
        reps: args.reps,
        warmup: args.warmup,
        max_rounds: args.max_rounds,
        ..Default::default()
    };
    coll_spec.validate().map_err(super::common::spec_usage)?;
    let candidates: Vec<Candidate> = candidates
        .iter()
        .map(|&(a, segment)| Candidate {
            imp: Implementation::Ours(a),
            segment: segment as usize,
        })
        .collect();
    let sizes: Vec<usize> = spec.sizes_bytes.iter().map(|&s| s as usize).collect();
    super::common::with_world(global, |world| {
        // The simulated P is the job's.
        spec.np = world.size;
        spec::validate(&spec).map_err(input)?;
        let measured = coll::measure(
            global,
            &coll_spec,
            &candidates,
            &sizes,
            Some(&loaded),
            world,
        )?;
        let Some(meta) = measured.meta else {
            return Ok(());
        };
        let results = spec::run(&spec, &loaded.network).map_err(input)?;
        let selection = select(&coll::points(&measured.records));
        let mut doc = SimulateDoc::new(
            params_name(&spec),
            loaded.transport.clone(),
            &loaded.network,
            spec.receive_gap,
            results,
            loaded.warnings.clone(),
            meta,
        );
        doc.measurement = Some(Measurement {
            scheme: args.scheme,
            reps: args.reps,
            results: measured.records,
            selection,
            sync: measured.sync,
            warnings: ngauge::report::warning::warned(measured.warnings.iter().cloned()),
        });
        if global.json {
            super::common::print_json(&doc)?;
        } else {
            let mut out = render(&doc);
            render_measurement(&mut out, &doc)?;
            super::common::print_text(&out)?;
        }
        for w in &loaded.warnings {
            super::common::warn(w, None);
        }
        coll::print_warnings(&measured.warnings);
        Ok(())
    })
}

/// The measured points beside both models, then the selection table.
fn render_measurement(out: &mut String, doc: &SimulateDoc) -> std::fmt::Result {
    use ngauge::report::table::Table;
    use std::fmt::Write as _;
    let Some(m) = &doc.measurement else {
        return Ok(());
    };
    writeln!(
        out,
        "\nmeasured in this job ({} scheme, {} valid calls per point): median run-time \
         beside the models",
        m.scheme.as_str(),
        m.reps
    )?;
    let mut t = Table::new([
        "size [B]",
        "transport",
        "algo",
        "segment [B]",
        "median [us]",
        "LogGP [us]",
        "median / LogGP",
        "Hockney [us]",
        "median / Hockney",
    ]);
    let num = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    for r in &m.results {
        t.row(vec![
            r.size.to_string(),
            r.transport.to_string(),
            r.algo.clone(),
            if r.segment == 0 {
                "-".into()
            } else {
                r.segment.to_string()
            },
            num(r.runtime_us.map(|t| t.median)),
            num(r.predicted.map(|p| p.loggp_us)),
            num(r.predicted.and_then(|p| p.measured_over_loggp)),
            num(r.predicted.map(|p| p.hockney_us)),
            num(r.predicted.and_then(|p| p.measured_over_hockney)),
        ]);
    }
    out.push_str(&t.render());
    match &m.selection {
        Some(s) => {
            out.push('\n');
            super::coll::render_selection(out, s)?;
        }
        None => writeln!(
            out,
            "no size has two candidates measured: nothing to select"
        )?,
    }
    Ok(())
}

fn params_name(spec: &SimulateSpec) -> String {
    match &spec.network {
        NetworkSpec::ParamsFile(p) => p.display().to_string(),
        NetworkSpec::Loggp(_) => "flags".into(),
    }
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
    let params = params_name(spec);
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
