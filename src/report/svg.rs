//! The frame every SVG plot shares: a white page of a given size, the legend box,
//! the palette, and plotters' errors as strings. The plots themselves
//! ([`super::loggp::plot_svg`], [`super::compare::plot_svg`]) draw their series in
//! it.

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// The drawing area a plot draws on.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Series colours (Tableau 10: blue, red, green, orange, purple, brown, pink,
/// olive, cyan), distinct in print and for the common colour-vision deficiencies.
pub const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Reference lines and markers of no series (switches, ratio 1).
pub const GREY: RGBColor = RGBColor(120, 120, 120);

/// An SVG document of `size` pixels: a white page handed to `draw`.
///
/// # Errors
/// What `draw` or plotters report.
pub fn document(
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(error)?;
        draw(&root)?;
        root.present().map_err(error)?;
    }
    Ok(svg)
}

/// A plotters error as text.
pub fn error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// The legend box of every plot, at `position`.
///
/// # Errors
/// What plotters reports.
pub fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(error)
}

/// An axis of [`chart`]: its range, its description and its tick labels' format.
pub type Axis<'f, R> = (R, &'f str, &'f dyn Fn(&f64) -> String);

/// A drawn chart with its two axes' coordinates.
pub type Chart<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

/// A chart of `title` on `area`, its axes `x` and `y` (ranges, log-scaled or
/// not) labelled `x_desc` and `y_desc`, its mesh without the light lines;
/// `format_x`/`format_y` write the tick labels.
///
/// # Errors
/// What plotters reports.
pub fn chart<'a, X: AsRangedCoord<Value = f64>, Y: AsRangedCoord<Value = f64>>(
    area: &Area<'a>,
    title: &str,
    (x, x_desc, format_x): Axis<'_, X>,
    (y, y_desc, format_y): Axis<'_, Y>,
) -> Result<Chart<'a, X::CoordDescType, Y::CoordDescType>, String>
where
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(format_x)
        .y_label_formatter(format_y)
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(error)?;
    Ok(chart)
}

/// Series `i` of a plot: `points` joined by a line (`line`) and marked, in the
/// legend as `label`.
///
/// # Errors
/// What plotters reports.
pub fn series<'a, X: Ranged<ValueType = f64>, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    i: usize,
    label: String,
    points: Vec<(f64, f64)>,
    line: bool,
) -> Result<(), String> {
    let colour = PALETTE[i % PALETTE.len()];
    if line {
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
            .map_err(error)?;
    }
    let size = if line { 3 } else { 2 };
    chart
        .draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, size, colour.filled())),
        )
        .map_err(error)?
        .label(label)
        .legend(move |(x, y)| Circle::new((x + 10, y), 3, colour.filled()));
    Ok(())
}

/// One curve of a plot: its legend text and its `(x, y)` points (`late`: the
/// delay, us, and `b`, in delay order; `noise`: each detour's start, s, and
/// length, us).
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    /// Legend text (`8 B`, `rank 0, core 3`).
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// `512`, `4K`, `1M`: a size in bytes with the largest binary suffix that divides
/// it.
pub fn size_label(bytes: f64) -> String {
    let b = bytes.round() as u64;
    for (suffix, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if b >= 1 << shift && b % (1 << shift) == 0 {
            return format!("{}{suffix}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_an_svg_with_what_was_drawn() {
        let svg = document((200, 100), |area| {
            area.draw(&Text::new("hello", (10, 10), ("sans-serif", 12)))
                .map_err(error)
        })
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("hello"));
        let e = document((10, 10), |_| Err("no data".into())).unwrap_err();
        assert_eq!(e, "no data");
    }
}
