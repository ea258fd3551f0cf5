//! `ngauge late`: the delay overlap benefit per size and delay, as a table, a
//! document and a plot of `b` over the delay.

/// One curve of the plot: `b` over the delay for one size.
#[derive(Clone, Debug, PartialEq)]
pub struct BenefitCurve {
    /// Legend text (`8 B`).
    pub label: String,
    /// `(delay_us, b)`, in delay order.
    pub points: Vec<(f64, f64)>,
}

/// An SVG plot of the delay overlap benefit `b` (eq. 5) over the delay, one curve
/// per size, with the two references of the paper's reading: `b = 0` (the delay
/// adds to the call) drawn as a line.
pub fn plot_benefit_svg(curves: &[BenefitCurve], title: &str) -> Result<String, String> {
    use plotters::prelude::*;
    let xs = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let ys: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .collect();
    let x_max = xs.fold(0.0f64, f64::max).max(1.0);
    let y_hi = ys.iter().copied().fold(0.0f64, f64::max).max(0.1);
    let y_lo = ys.iter().copied().fold(0.0f64, f64::min).min(-0.1);
    let pad = (y_hi - y_lo) * 0.08;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 600)).into_drawing_area();
        let e = |err: DrawingAreaErrorKind<_>| err.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max * 1.05, (y_lo - pad)..(y_hi + pad))
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("delay d [us]")
            .y_desc("delay overlap benefit b = (t0 + d - td) / td")
            .y_label_formatter(&|y| format!("{y:.2}"))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(e)?;
        let zero = RGBColor(120, 120, 120);
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.0), (x_max * 1.05, 0.0)],
                zero.stroke_width(1),
            ))
            .map_err(e)?
            .label("b = 0: the delay adds to the call")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], zero));
        for (i, curve) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = curve
                .points
                .iter()
                .copied()
                .filter(|p| p.1.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(e)?
                .label(curve.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(e)?;
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
    fn plot_is_an_svg_with_a_curve_per_size() {
        let curves = vec![
            BenefitCurve {
                label: "8 B".into(),
                points: vec![(0.0, 0.0), (50.0, 0.4), (500.0, -0.1)],
            },
            BenefitCurve {
                label: "64 KiB".into(),
                points: vec![(0.0, 0.0), (50.0, f64::NAN), (500.0, 0.05)],
            },
        ];
        let svg = plot_benefit_svg(&curves, "allreduce").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("8 B") && svg.contains("64 KiB") && svg.contains("b = 0"));
    }
}
