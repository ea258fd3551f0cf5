//! A timeline of one simulated collective as SVG, drawn as the figures of "LogGP in
//! theory and practice" (sec. 4.1) draw LogGP: one row per rank, time to the
//! right; in each row the CPU's overheads (`o_s`, `o_r`) above and the network
//! interface's gaps (`g + (s-1)G`, sending and receiving) below, and every message
//! as a line from its first byte leaving the sender to its last byte reaching the
//! receiver (`(s-1)G + L`).

use super::svg;
use crate::sim::engine::{Span, SpanKind};

/// Most ranks a timeline draws.
pub const MAX_RANKS: usize = 64;
/// Most trace entries a timeline draws.
pub const MAX_SPANS: usize = 20_000;

/// Why no timeline was drawn.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TimelineError {
    /// The run is too large to read as a picture.
    #[error("a timeline draws at most {MAX_RANKS} ranks and {MAX_SPANS} operations; this run has {np} ranks and {spans}")]
    TooLarge {
        /// Ranks.
        np: usize,
        /// Trace entries.
        spans: usize,
    },
    /// The plotting backend failed.
    #[error("drawing the timeline failed: {0}")]
    Draw(String),
}

/// The colours, one per kind of bar (colour-blind-safe palette).
fn colour(kind: SpanKind) -> plotters::style::RGBColor {
    use plotters::style::RGBColor;
    match kind {
        SpanKind::SendOverhead => RGBColor(0, 114, 178),
        SpanKind::RecvOverhead => RGBColor(213, 94, 0),
        SpanKind::Local => RGBColor(120, 120, 120),
        SpanKind::SendGap => RGBColor(86, 180, 233),
        SpanKind::RecvGap => RGBColor(230, 159, 0),
        SpanKind::Wire => RGBColor(0, 0, 0),
        SpanKind::Request | SpanKind::Clear => RGBColor(204, 121, 167),
    }
}

/// The kinds of bar, in the legend's order.
const KINDS: [SpanKind; 8] = [
    SpanKind::SendOverhead,
    SpanKind::RecvOverhead,
    SpanKind::Local,
    SpanKind::SendGap,
    SpanKind::RecvGap,
    SpanKind::Wire,
    SpanKind::Request,
    SpanKind::Clear,
];

fn label(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::SendOverhead => "o_s (CPU)",
        SpanKind::RecvOverhead => "o_r (CPU)",
        SpanKind::Local => "local step (CPU)",
        SpanKind::SendGap => "g + (s-1)G sending (NIC)",
        SpanKind::RecvGap => "g + (s-1)G receiving (NIC)",
        SpanKind::Wire => "message: first byte out to last byte in ((s-1)G + L)",
        SpanKind::Request => "rendezvous request / clear-to-send (L)",
        SpanKind::Clear => "clear-to-send (L)",
    }
}

/// The SVG of `trace` over `np` ranks, titled `title`.
pub fn svg(trace: &[Span], np: usize, title: &str) -> Result<String, TimelineError> {
    use plotters::prelude::*;
    if np > MAX_RANKS || trace.len() > MAX_SPANS {
        return Err(TimelineError::TooLarge {
            np,
            spans: trace.len(),
        });
    }
    let end_us = trace
        .iter()
        .map(|s| s.end.as_us())
        .fold(0.0, f64::max)
        .max(1e-3);
    // Row of rank r: y from np - r - 1.5 (bottom) to np - r - 0.5 (top), centred on
    // the integer np - r - 1 where its label goes; CPU in the upper half, the
    // interface in the lower.
    let top = |r: usize| (np - r) as f64 - 0.5;
    let kinds = KINDS
        .iter()
        .filter(|k| **k != SpanKind::Clear && trace.iter().any(|s| s.kind == **k))
        .count()
        + usize::from(
            !trace.iter().any(|s| s.kind == SpanKind::Request)
                && trace.iter().any(|s| s.kind == SpanKind::Clear),
        );
    let x = svg::Axis::linear([0.0, end_us], true);
    let height = (120 + 36 * np as u32).max(240);
    let page = (svg::PAGE_WIDTH_PX, height + 80 + 22 * kinds as u32);
    let out = svg::document(page, |root| {
        let e = svg::error;
        let mut chart = svg::chart(
            root,
            title,
            (x, "time [us]"),
            (svg::Axis::ranks(np), "rank"),
            kinds,
        )?;
        let mut seen = Vec::new();
        for kind in KINDS {
            let spans: Vec<&Span> = trace.iter().filter(|s| s.kind == kind).collect();
            if spans.is_empty() {
                continue;
            }
            let c = colour(kind);
            let drawn = match kind {
                SpanKind::Wire | SpanKind::Request | SpanKind::Clear => {
                    let width = if kind == SpanKind::Wire { 1 } else { 2 };
                    chart
                        .draw_series(spans.iter().map(|s| {
                            PathElement::new(
                                vec![
                                    (s.start.as_us(), top(s.rank) - 0.75),
                                    (s.end.as_us(), top(s.peer) - 0.75),
                                ],
                                c.stroke_width(width),
                            )
                        }))
                        .map_err(e)?
                }
                _ => {
                    let cpu = matches!(
                        kind,
                        SpanKind::SendOverhead | SpanKind::RecvOverhead | SpanKind::Local
                    );
                    chart
                        .draw_series(spans.iter().map(|s| {
                            let (hi, lo) = if cpu { (0.1, 0.45) } else { (0.55, 0.9) };
                            let y = top(s.rank);
                            Rectangle::new(
                                [(s.start.as_us(), y - hi), (s.end.as_us(), y - lo)],
                                c.filled(),
                            )
                        }))
                        .map_err(e)?
                }
            };
            if kind != SpanKind::Clear || !seen.contains(&SpanKind::Request) {
                drawn.label(label(kind)).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 14, y + 4)], c.filled())
                });
            }
            seen.push(kind);
        }
        svg::legend(&mut chart)
    });
    out.map_err(TimelineError::Draw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::{Algorithm, CollSpec};
    use crate::sim::{collective, LogGp, Network, Options};

    #[test]
    fn every_bar_of_a_small_broadcast_is_drawn_once() {
        let net = Network::uniform(LogGp::from_us(5.0, 1.0, 1.5, 2.0, 0.001, false));
        let spec = CollSpec {
            algorithm: Algorithm::BcastBinomial,
            np: 4,
            size_bytes: 1,
            segment_bytes: 0,
            root: 0,
        };
        let options = Options {
            trace: true,
            ..Options::default()
        };
        let trace = collective::run(&spec, &net, options).unwrap().trace;
        let text = svg(&trace, 4, "bcast binomial").unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..40]);
        // 3 messages: 3 o_s, 3 o_r, 3 send gaps, 3 receive gaps (rectangles), 3
        // lines, plus one legend swatch per kind (5).
        let rects = text.matches("<rect").count();
        let count = |k| trace.iter().filter(|s| s.kind == k).count();
        assert_eq!(count(SpanKind::Wire), 3);
        let bars = count(SpanKind::SendOverhead)
            + count(SpanKind::RecvOverhead)
            + count(SpanKind::SendGap)
            + count(SpanKind::RecvGap);
        assert_eq!(bars, 12);
        // Background + bars + legend box (filled, then framed) + 5 swatches.
        assert_eq!(rects, 1 + bars + 2 + 5, "{text}");
        assert!(text.contains("o_s (CPU)") && text.contains("g + (s-1)G sending (NIC)"));
    }

    #[test]
    fn a_large_run_is_refused() {
        assert_eq!(
            svg(&[], 65, "x").unwrap_err(),
            TimelineError::TooLarge { np: 65, spans: 0 }
        );
    }
}
