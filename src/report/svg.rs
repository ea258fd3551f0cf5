//! The frame every SVG plot shares: a white page of a given size, the legend box,
//! the palette, and plotters' errors as strings. The plots themselves
//! ([`super::loggp::plot_svg`], [`super::compare::plot_svg`]) draw their series in
//! it.

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
