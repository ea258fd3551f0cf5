//! The frame every SVG figure shares: a white page, the axes, the palette, the
//! legend and the bands. The figures ([`super::loggp::plot_svg`],
//! [`super::coll::plot_svg`], [`super::compare::plot_svg`], [`super::late`],
//! [`super::noise`], [`super::timeline`]) only draw their series in it.
//!
//! What a reviewer asks of a figure, done once here: sizes on a log 2 axis labelled
//! `1K`, `64K`, `1M`; every axis ticked at values that enclose its data (the view
//! is widened to the outer ticks, so no point lies beyond the last label); the
//! Okabe-Ito palette (Okabe and Ito, "Color Universal Design", 2008), readable
//! with every common colour-vision deficiency and without its yellow, which
//! vanishes on white; the legend in the upper left corner on an opaque background; fonts of 15 px
//! and more on a 960 px page.

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;

/// The drawing area a plot draws on.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Series colours: Okabe-Ito blue, vermillion, bluish green, reddish purple, sky
/// blue, orange, black (the palette's yellow left out: it vanishes on white).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
];

/// Reference lines and markers of no series (switches, ratio 1).
pub const GREY: RGBColor = RGBColor(120, 120, 120);

/// Font size of tick labels and legend text as plotters takes it: its SVG backend
/// writes `font-size` as the given size / 1.24 (plotters' points to pixels), so 19
/// renders at 15.3 px.
pub const FONT_PX: u32 = 19;

/// Width of every page, px.
pub const PAGE_WIDTH_PX: u32 = 960;

/// Height of one legend row, px.
const LEGEND_ROW_PX: u32 = 22;

/// Height of the space below the plot taken by tick labels and the axis name, px.
const X_LABEL_AREA_PX: u32 = 62;

/// The page of a figure whose legend has `legend_rows` entries: the plot keeps
/// 520 px of height and the legend gets its rows below it.
pub fn page(legend_rows: usize) -> (u32, u32) {
    (PAGE_WIDTH_PX, 556 + LEGEND_ROW_PX * legend_rows as u32)
}

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

/// How an [`Axis`] maps its values and writes its labels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Linear, ticks at 1, 2 or 5 times a power of ten.
    Linear,
    /// Logarithmic, ticks at 1-9, 1-2-5 or 1 times powers of ten.
    Log10,
    /// Message sizes in bytes: logarithmic, ticks at powers of two labelled `4K`.
    Bytes,
    /// Rows of `n` ranks, rank 0 on top: row `r` centred on `n - 1 - r`.
    Ranks(usize),
}

/// One axis: its scale, its view (the outer ticks and a small margin) and its
/// ticks, which enclose every value it was made for.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    scale: Scale,
    view: Range<f64>,
    ticks: Vec<f64>,
}

/// Most ticks on an axis.
const MAX_TICKS: usize = 12;

impl Axis {
    /// An axis of `scale` whose ticks enclose `lo..=hi` (on a log scale, values
    /// are taken from the smallest positive one; without one the axis shows 1-10).
    pub fn new(scale: Scale, lo: f64, hi: f64) -> Axis {
        let (lo, hi) = if lo.is_finite() && hi.is_finite() && lo <= hi {
            (lo, hi)
        } else {
            (0.0, 1.0)
        };
        let ticks = match scale {
            Scale::Linear => linear_ticks(lo, hi),
            Scale::Log10 => log10_ticks(positive(lo, hi)),
            Scale::Bytes => log2_ticks(positive(lo, hi)),
            Scale::Ranks(n) => {
                let every = n.div_ceil(32).max(1);
                let n = n.max(1);
                // Positions of ranks 0, every, 2 every...: rank 0 always labelled.
                let mut at: Vec<f64> = (0..n).step_by(every).map(|r| (n - 1 - r) as f64).collect();
                at.reverse();
                at
            }
        };
        if let Scale::Ranks(n) = scale {
            // Rows reach half a row beyond their centres.
            return Axis {
                scale,
                view: -0.6..(n.max(1) - 1) as f64 + 0.6,
                ticks,
            };
        }
        let (first, last) = (ticks[0], ticks[ticks.len() - 1]);
        let axis = Axis {
            scale,
            view: first..last,
            ticks,
        };
        // A margin of 2% of the view, so points on the outer ticks stay off the frame.
        let (t0, t1) = (axis.transform(first), axis.transform(last));
        let m = (t1 - t0) * 0.02;
        Axis {
            view: axis.untransform(t0 - m)..axis.untransform(t1 + m),
            ..axis
        }
    }

    /// An axis of message sizes (bytes) enclosing `sizes`.
    pub fn bytes(sizes: impl IntoIterator<Item = f64>) -> Axis {
        let (lo, hi) = bounds(sizes);
        Axis::new(Scale::Bytes, lo, hi)
    }

    /// A linear axis enclosing `values` (and 0 when `with_zero`).
    pub fn linear(values: impl IntoIterator<Item = f64>, with_zero: bool) -> Axis {
        let (lo, hi) = bounds(values);
        let (lo, hi) = if with_zero {
            (lo.min(0.0), hi.max(0.0))
        } else {
            (lo, hi)
        };
        Axis::new(Scale::Linear, lo, hi)
    }

    /// The rows of `n` ranks, rank 0 on top.
    pub fn ranks(n: usize) -> Axis {
        Axis::new(Scale::Ranks(n), 0.0, n as f64)
    }

    /// A log 10 axis enclosing the positive `values`.
    pub fn log(values: impl IntoIterator<Item = f64>) -> Axis {
        let (lo, hi) = bounds(values.into_iter().filter(|v| *v > 0.0));
        Axis::new(Scale::Log10, lo, hi)
    }

    /// The ticks, ascending.
    pub fn ticks(&self) -> &[f64] {
        &self.ticks
    }

    /// The view: the outer ticks and a margin.
    pub fn view(&self) -> Range<f64> {
        self.view.clone()
    }

    /// The label of the tick at `v`: `4K` on a byte axis, the fewest digits that
    /// tell the ticks apart elsewhere.
    pub fn label(&self, v: f64) -> String {
        match self.scale {
            Scale::Bytes => size_label(v),
            Scale::Log10 => number(v, 0.0),
            Scale::Linear => number(v, self.ticks.get(1).map_or(1.0, |t| t - self.ticks[0])),
            Scale::Ranks(n) => format!("{}", n as f64 - 1.0 - v),
        }
    }

    fn transform(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear | Scale::Ranks(_) => v,
            Scale::Log10 | Scale::Bytes => v.max(f64::MIN_POSITIVE).log2(),
        }
    }

    fn untransform(&self, t: f64) -> f64 {
        match self.scale {
            Scale::Linear | Scale::Ranks(_) => t,
            Scale::Log10 | Scale::Bytes => t.exp2(),
        }
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (t0, t1) = (
            self.transform(self.view.start),
            self.transform(self.view.end),
        );
        let f = (self.transform(*value) - t0) / (t1 - t0);
        (f64::from(limit.0) + f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        self.view.clone()
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        self.label(*value)
    }
}

/// The smallest and largest finite value (0..1 without one).
fn bounds(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

/// `lo..=hi` made positive for a log scale.
fn positive(lo: f64, hi: f64) -> (f64, f64) {
    if hi <= 0.0 {
        (1.0, 10.0)
    } else if lo <= 0.0 {
        (hi.min(1.0), hi)
    } else {
        (lo, hi)
    }
}

/// Ticks a step of 1, 2 or 5 times a power of ten apart, at most 10 intervals,
/// from the last at or below `lo` to the first at or above `hi`.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
    let raw = span / 8.0;
    let decade = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|s| span / s <= 10.0)
        .unwrap_or(10.0 * decade);
    let first = (lo / step + 1e-9).floor();
    let last = (hi / step - 1e-9).ceil().max(first + 1.0);
    // Multiples of the step (not sums of it), so 0.1 + 0.2 never shows as 0.30000000000000004.
    (first as i64..=last as i64)
        .map(|k| k as f64 * step)
        .collect()
}

/// Ticks at powers of ten times every mantissa (less than a decade), 1, 2 and 5
/// (up to 3 decades), or 1 (every decade or every few), enclosing `lo..=hi`.
fn log10_ticks((lo, hi): (f64, f64)) -> Vec<f64> {
    let decades = (hi / lo).log10();
    let (mantissas, every): (&[f64], i32) = if decades < 1.0 {
        (&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], 1)
    } else if decades < 3.0 {
        (&[1.0, 2.0, 5.0], 1)
    } else {
        (&[1.0], (decades / (MAX_TICKS - 2) as f64).ceil() as i32)
    };
    let d0 = lo.log10().floor() as i32;
    let d0 = d0.div_euclid(every) * every;
    let candidates: Vec<f64> = (0..)
        .map(|k| d0 + k * every)
        .take_while(|d| (*d as f64) <= hi.log10().ceil() + f64::from(every))
        .flat_map(|d| mantissas.iter().map(move |m| m * 10f64.powi(d)))
        .collect();
    let eps = |v: f64| v * 1e-9;
    let first = candidates
        .iter()
        .rposition(|&t| t <= lo + eps(lo))
        .unwrap_or(0);
    let last = candidates
        .iter()
        .position(|&t| t >= hi - eps(hi))
        .unwrap_or(candidates.len() - 1)
        .max(first + 1);
    candidates[first..=last].to_vec()
}

/// Ticks at powers of two, every octave or every few (at most 12 ticks),
/// enclosing `lo..=hi`.
fn log2_ticks((lo, hi): (f64, f64)) -> Vec<f64> {
    let a = lo.log2().floor() as i32;
    let b = (hi.log2().ceil() as i32).max(a + 1);
    let every = ((b - a) as f64 / (MAX_TICKS - 1) as f64).ceil() as i32;
    let (a, b) = (
        a.div_euclid(every) * every,
        -((-b).div_euclid(every)) * every,
    );
    (0..)
        .map(|k| a + k * every)
        .take_while(|e| *e <= b)
        .map(|e| 2f64.powi(e))
        .collect()
}

/// `v` with the digits a tick `step` apart needs (`step` 0: three significant
/// digits), without trailing zeros.
fn number(v: f64, step: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let of = if step > 0.0 { step } else { v.abs() };
    let digits = if step > 0.0 {
        (-of.log10().floor()).max(0.0) as usize
    } else {
        (2.0 - of.log10().floor()).max(0.0) as usize
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A drawn chart on two [`Axis`].
pub type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<Axis, Axis>>;

/// A chart of `title` on `area` (a [`page`] of `legend_rows` rows), its axes `x`
/// and `y` named by their descriptions, ticked at their ticks, its mesh without
/// the light lines.
///
/// # Errors
/// What plotters reports.
pub fn chart<'a>(
    area: &Area<'a>,
    title: &str,
    (x, x_desc): (Axis, &str),
    (y, y_desc): (Axis, &str),
    legend_rows: usize,
) -> Result<Chart<'a>, String> {
    let (fx, fy) = (x.clone(), y.clone());
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 27))
        .margin(16)
        .margin_right(28)
        .margin_bottom(32 + LEGEND_ROW_PX * legend_rows as u32)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(84)
        .build_cartesian_2d(x, y)
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(MAX_TICKS * 2)
        .y_labels(MAX_TICKS * 2)
        .x_label_formatter(&|v| fx.label(*v))
        .y_label_formatter(&|v| fy.label(*v))
        .label_style(("sans-serif", FONT_PX))
        .axis_desc_style(("sans-serif", FONT_PX + 2))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(error)?;
    Ok(chart)
}

/// The legend of every plot, in the upper left corner of the plotting area, where
/// latency and runtime curves (which grow with the size) leave room; on an opaque
/// background so it stays readable where a curve passes under it.
///
/// # Errors
/// What plotters reports.
pub fn legend(chart: &mut Chart<'_>) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", FONT_PX))
        .background_style(WHITE)
        .border_style(WHITE)
        .draw()
        .map_err(error)
}

/// Series `i` of a plot: `points` joined by a line (`line`) and marked, in the
/// legend as `label`.
///
/// # Errors
/// What plotters reports.
pub fn series(
    chart: &mut Chart<'_>,
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

/// The band of series `i`: the area between `lo` and `hi` over `x`, in the
/// series' colour, light; `points` are `(x, lo, hi)` in `x` order.
///
/// # Errors
/// What plotters reports.
pub fn band(chart: &mut Chart<'_>, i: usize, points: &[(f64, f64, f64)]) -> Result<(), String> {
    if points.len() < 2 {
        // One point: a bar, as a band of no width would not show.
        return error_bars(chart, i, points);
    }
    let colour = PALETTE[i % PALETTE.len()];
    let outline: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.0, p.1))
        .chain(points.iter().rev().map(|p| (p.0, p.2)))
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(
            outline,
            colour.mix(0.2).filled(),
        )))
        .map_err(error)?;
    Ok(())
}

/// Error bars of series `i`: a vertical line from `lo` to `hi` at each `x`.
///
/// # Errors
/// What plotters reports.
pub fn error_bars(
    chart: &mut Chart<'_>,
    i: usize,
    points: &[(f64, f64, f64)],
) -> Result<(), String> {
    let colour = PALETTE[i % PALETTE.len()];
    chart
        .draw_series(
            points.iter().map(|&(x, lo, hi)| {
                PathElement::new(vec![(x, lo), (x, hi)], colour.stroke_width(1))
            }),
        )
        .map_err(error)?;
    Ok(())
}

/// A vertical reference line at `x` across the view, in the legend as `label`
/// when given.
///
/// # Errors
/// What plotters reports.
pub fn vertical(chart: &mut Chart<'_>, x: f64, label: Option<String>) -> Result<(), String> {
    let y = chart.y_range();
    let drawn = chart
        .draw_series(LineSeries::new(
            [(x, y.start), (x, y.end)],
            GREY.stroke_width(1),
        ))
        .map_err(error)?;
    if let Some(label) = label {
        drawn
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY.stroke_width(1)));
    }
    Ok(())
}

/// A horizontal reference line at `y` across the view, in the legend as `label`
/// when given.
///
/// # Errors
/// What plotters reports.
pub fn horizontal(chart: &mut Chart<'_>, y: f64, label: Option<String>) -> Result<(), String> {
    let x = chart.x_range();
    let drawn = chart
        .draw_series(LineSeries::new(
            [(x.start, y), (x.end, y)],
            GREY.stroke_width(1),
        ))
        .map_err(error)?;
    if let Some(label) = label {
        drawn
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY.stroke_width(1)));
    }
    Ok(())
}

/// A legend entry that explains a drawing (a band, a marker style) rather than
/// naming a series.
///
/// # Errors
/// What plotters reports.
pub fn key(chart: &mut Chart<'_>, text: &str) -> Result<(), String> {
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())
        .map_err(error)?
        .label(text)
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], GREY.mix(0.3).filled()));
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

/// Reading a rendered figure back, for the tests of every plot.
#[cfg(test)]
pub(crate) mod check {
    /// One `<text>` of a figure: where it is anchored and what it says.
    #[derive(Debug)]
    pub(crate) struct Label {
        pub(crate) y: f64,
        pub(crate) anchor: String,
        pub(crate) text: String,
    }

    /// The value of attribute `name` in the tag text `tag`.
    fn attribute<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        tag[at..].split('"').next()
    }

    /// The `<text>` elements of `svg`, after checking that it is well-formed XML
    /// as far as plotters writes it: every tag closed, in order, one root `<svg>`.
    ///
    /// # Panics
    /// When the document is not well formed.
    pub(crate) fn texts(svg: &str) -> Vec<Label> {
        let mut open: Vec<&str> = Vec::new();
        let mut labels = Vec::new();
        let mut rest = svg.trim_start();
        if rest.starts_with("<?xml") {
            rest = &rest[rest.find("?>").expect("an XML declaration ends") + 2..];
        }
        let mut roots = 0;
        while let Some(start) = rest.find('<') {
            let end = rest[start..].find('>').expect("every tag ends") + start;
            let tag = &rest[start + 1..end];
            let after = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name.trim()), "tags close in order");
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().expect("a tag has a name");
                if open.is_empty() {
                    roots += 1;
                }
                if name == "text" {
                    let content = &after[..after.find('<').expect("a text ends")];
                    let num = |a| {
                        attribute(tag, a)
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0.0)
                    };
                    labels.push(Label {
                        y: num("y"),
                        anchor: attribute(tag, "text-anchor").unwrap_or("start").to_string(),
                        text: content
                            .trim()
                            .replace("&lt;", "<")
                            .replace("&gt;", ">")
                            .replace("&amp;", "&"),
                    });
                }
                open.push(name);
            } else if open.is_empty() {
                roots += 1;
            }
            rest = after;
        }
        assert!(open.is_empty(), "unclosed tags: {open:?}");
        assert_eq!(roots, 1, "one root element");
        labels
    }

    /// A tick label's value: `4K` is 4096, `0.5` is 0.5.
    fn value(text: &str) -> Option<f64> {
        let t = text.trim();
        for (suffix, factor) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
            if let Some(n) = t.strip_suffix(suffix) {
                return n.parse::<f64>().ok().map(|n| n * factor as f64);
            }
        }
        t.parse().ok()
    }

    /// Checks a figure: it parses, shows `x_desc` and `y_desc`, and its tick labels
    /// on each axis (the numbers below the plot, the numbers left of it) enclose
    /// `x_data` and `y_data` (`(lo, hi)` of what it plots).
    ///
    /// # Panics
    /// When one of these fails.
    pub(crate) fn figure(
        svg: &str,
        x_desc: &str,
        y_desc: &str,
        x_data: (f64, f64),
        y_data: (f64, f64),
    ) {
        let texts = texts(svg);
        for desc in [x_desc, y_desc] {
            assert!(
                texts.iter().any(|t| t.text == desc),
                "axis named {desc:?}: {texts:#?}"
            );
        }
        // The y ticks are right-aligned left of the plot, the x ticks centred on
        // one row below it: the row of centred numbers with the most entries.
        let numbers: Vec<(&Label, f64)> = texts
            .iter()
            .filter_map(|t| value(&t.text).map(|v| (t, v)))
            .collect();
        let y_ticks: Vec<f64> = numbers
            .iter()
            .filter(|(t, _)| t.anchor == "end")
            .map(|p| p.1)
            .collect();
        let mut rows: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
        for (t, v) in numbers.iter().filter(|(t, _)| t.anchor == "middle") {
            rows.entry(t.y as i64).or_default().push(*v);
        }
        let x_ticks = rows.into_values().max_by_key(Vec::len).unwrap_or_default();
        for (axis, ticks, (lo, hi)) in [("x", x_ticks, x_data), ("y", y_ticks, y_data)] {
            let (t_lo, t_hi) = ticks
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(*v), b.max(*v))
                });
            assert!(
                ticks.len() >= 2 && t_lo <= lo && t_hi >= hi,
                "{axis} ticks {ticks:?} enclose the data {lo}..{hi}"
            );
        }
    }
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

    fn labels(a: &Axis) -> Vec<String> {
        a.ticks().iter().map(|t| a.label(*t)).collect()
    }

    #[test]
    fn issue_37_a_log_axis_of_data_within_a_decade_is_ticked_inside_it() {
        // The coll plot labelled only 100-400 us for data at 20-90 us.
        let a = Axis::log([21.0, 88.0]);
        assert_eq!(labels(&a), ["20", "30", "40", "50", "60", "70", "80", "90"]);
        let a = Axis::log([0.8, 120.0]);
        assert_eq!(
            labels(&a),
            ["0.5", "1", "2", "5", "10", "20", "50", "100", "200"]
        );
        let a = Axis::log([3e-3, 4e4]);
        assert!(
            a.ticks().len() <= MAX_TICKS
                && a.ticks()[0] <= 3e-3
                && *a.ticks().last().unwrap() >= 4e4
        );
    }

    #[test]
    fn issue_37_sizes_are_ticked_at_powers_of_two_with_binary_suffixes() {
        let a = Axis::bytes([1.0, 65536.0]);
        assert_eq!(
            labels(&a),
            ["1", "4", "16", "64", "256", "1K", "4K", "16K", "64K"]
        );
        let a = Axis::bytes([1000.0, 5000.0]);
        assert_eq!(labels(&a), ["512", "1K", "2K", "4K", "8K"]);
        let a = Axis::bytes([1.0, 4.0 * 1024.0 * 1024.0]);
        assert!(labels(&a).contains(&"1M".to_string()) && a.ticks().len() <= MAX_TICKS);
        // The view holds every size: below 1 KiB is not piled at 0.
        let (lo, hi) = (a.map(&1.0, (0, 1000)), a.map(&2.0, (0, 1000)));
        assert!(hi - lo >= 30, "one octave is {} px of 1000", hi - lo);
    }

    #[test]
    fn linear_ticks_are_round_and_enclose_the_data() {
        let a = Axis::linear([-0.3, 2.7], false);
        assert_eq!(
            labels(&a),
            ["-0.5", "0", "0.5", "1", "1.5", "2", "2.5", "3"]
        );
        let a = Axis::linear([0.1, 0.7], true);
        assert_eq!(
            labels(&a),
            ["0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"]
        );
        let a = Axis::linear([5.0, 5.0], false);
        assert!(a.ticks()[0] <= 5.0 && *a.ticks().last().unwrap() >= 5.0);
        let a = Axis::linear(std::iter::empty(), false);
        assert_eq!(
            labels(&a),
            ["0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1"]
        );
    }

    #[test]
    fn a_chart_names_its_axes_and_ticks_its_data() {
        let (x, y) = (Axis::bytes([8.0, 8192.0]), Axis::log([21.0, 88.0]));
        let svg = document(page(1), |root| {
            let mut c = chart(root, "t", (x, "size [bytes]"), (y, "time [us]"), 1)?;
            series(
                &mut c,
                0,
                "a".into(),
                vec![(8.0, 21.0), (8192.0, 88.0)],
                true,
            )?;
            band(&mut c, 0, &[(8.0, 20.5, 22.0), (8192.0, 80.0, 89.0)])?;
            legend(&mut c)
        })
        .unwrap();
        check::figure(
            &svg,
            "size [bytes]",
            "time [us]",
            (8.0, 8192.0),
            (21.0, 88.0),
        );
        let sizes: Vec<&str> = svg
            .split("font-size=\"")
            .skip(1)
            .filter_map(|t| t.split('"').next())
            .collect();
        let smallest = sizes
            .iter()
            .filter_map(|t| t.parse::<f64>().ok())
            .fold(f64::MAX, f64::min);
        assert!(smallest >= 15.0, "every text at 15 px or more: {sizes:?}");
    }
}
