//! `ngauge compare A B`: two result files or run directories side by side, per
//! experiment and size, with the rank-sum test ([`ngauge::report::compare`]).

use super::common::{check_outputs, records, UsageError};
use crate::cli::{CompareArgs, GlobalArgs};
use anyhow::Context;
use ngauge::report::compare::{compare, plot_svg, table, CompareDoc};
use ngauge::stats::Outliers;
use ngauge::suite::results::{read, ReadError};

pub fn run(global: &GlobalArgs, args: &CompareArgs) -> anyhow::Result<()> {
    check_outputs(global, &[("--plot", args.plot.as_deref())])?;
    // Every reading error is the user's input: a path that is not a result.
    let side =
        |path| read(path, args.metric.as_deref()).map_err(|e: ReadError| UsageError(e.to_string()));
    let a = side(&args.a)?;
    let b = side(&args.b)?;
    let outliers = if args.keep_outliers {
        Outliers::Keep
    } else {
        Outliers::Tukey
    };
    let c = compare(&a, &b, outliers);
    if c.rows.is_empty() {
        return Err(UsageError(format!(
            "{} and {} have no experiment and size in common",
            args.a.display(),
            args.b.display()
        ))
        .into());
    }
    if let Some(mut writer) = records(global, true)? {
        for row in &c.rows {
            writer.write(row)?;
        }
    }
    if let Some(path) = &args.plot {
        let title = format!("{} / {}", args.b.display(), args.a.display());
        let svg = plot_svg(&c, &title).map_err(|e| anyhow::anyhow!("plot: {e}"))?;
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if global.json {
        let meta = super::common::meta(ngauge::clock::TimerSource::detect(), 0.0).build();
        super::common::print_json(&CompareDoc {
            comparison: c.clone(),
            meta_a: a.meta.clone(),
            meta_b: b.meta.clone(),
            meta,
        })?;
    } else {
        super::common::print_text(&table(&c))?;
    }
    for w in &c.warnings {
        super::common::warn(w, None);
    }
    Ok(())
}
