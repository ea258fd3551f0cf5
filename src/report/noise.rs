//! `ngauge noise`: detours per core as a table, a document and a plot of the
//! detours over time.

/// One core's detours for the plot.
#[derive(Clone, Debug, PartialEq)]
pub struct DetourSeries {
    /// Legend text (`rank 0, core 3`).
    pub label: String,
    /// `(at_s, duration_us)` of each detour.
    pub points: Vec<(f64, f64)>,
}

/// An SVG plot of the detours over time: one point per detour at its start
/// (seconds from the start of the measurement) and its length (microseconds, log
/// scale), one color per core.
pub fn plot_detours_svg(series: &[DetourSeries], title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut t_max, mut d_lo, mut d_hi) = (0.0f64, f64::INFINITY, 0.0f64);
    for &(t, d) in all {
        t_max = t_max.max(t);
        if d > 0.0 {
            d_lo = d_lo.min(d);
            d_hi = d_hi.max(d);
        }
    }
    if !d_lo.is_finite() {
        (d_lo, d_hi) = (0.01, 1.0);
    }
    let (d_lo, d_hi) = (d_lo / 2.0, d_hi * 2.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 600)).into_drawing_area();
        let e = |err: DrawingAreaErrorKind<_>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..t_max.max(1e-3) * 1.02, (d_lo..d_hi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time since the start [s]")
            .y_desc("detour [us]")
            .y_label_formatter(&|y| format!("{y}"))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(e)?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| p.1 > 0.0)
                        .map(|&p| Circle::new(p, 2, color.filled())),
                )
                .map_err(e)?
                .label(format!("{} ({} detours)", s.label, s.points.len()))
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_is_an_svg_with_every_core() {
        let series = vec![
            DetourSeries {
                label: "rank 0, core 0".into(),
                points: vec![(0.001, 2.5), (0.5, 120.0)],
            },
            DetourSeries {
                label: "rank 1, core 1".into(),
                points: vec![],
            },
        ];
        let svg = plot_detours_svg(&series, "noise").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("rank 0, core 0 (2 detours)"));
        assert!(svg.contains("rank 1, core 1 (0 detours)"));
        assert!(plot_detours_svg(&[], "empty").unwrap().starts_with("<svg"));
    }
}
