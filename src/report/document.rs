//! [`Document`]: what every measuring command's result is to a front end: one
//! serde document (`--json`), its human tables, the warnings it carries (printed
//! after the results), and for some commands a plot.

use super::warning::Warned;

/// A command's result document.
pub trait Document: serde::Serialize {
    /// The command's warning.
    type Warning: std::fmt::Display;

    /// The human tables.
    fn render(&self) -> String;

    /// The warnings it carries, in order.
    fn warnings(&self) -> Vec<&Self::Warning>;

    /// Its SVG plot, for the commands that draw one (`--plot`).
    ///
    /// # Errors
    /// When the plot cannot be drawn.
    fn plot_svg(&self) -> Option<Result<String, String>> {
        None
    }
}

/// The warnings of `warned` records.
pub fn unwarned<W>(warned: &[Warned<W>]) -> Vec<&W> {
    warned.iter().map(|w| &w.warning).collect()
}
