//! [`Document`]: what every measuring command's result is to a front end: one
//! serde document (`--json`), its human tables, the warnings it carries (printed
//! after the results), and the files it can be exported to ([`Export`]).
//!
//! Both the warnings and the exports serve documents of one part and of several
//! alike (`loggp`: a fit per transport and pair), so that one front-end path
//! prints and writes every document: a warning comes with the prefix that says
//! which part it is about (`tcp: pair 0-1: `, empty for most), and an export with
//! the name of its part (a transport: `gap.svg` becomes `gap.tcp.svg`), none when
//! the document has one part.

use super::warning::Warned;

/// A file a front end may write a document to besides its JSON and tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    /// An SVG plot.
    Plot,
    /// The LogGP parameter file that `simulate` reads.
    Params,
    /// Netgauge's LogGP column file.
    Netgauge,
}

/// One file of an export: the name of the part it shows when the document has
/// several, and its text (or why it cannot be drawn).
pub type ExportFile = (Option<String>, Result<String, String>);

/// A command's result document.
pub trait Document: serde::Serialize {
    /// The command's warning.
    type Warning: std::fmt::Display;

    /// The human tables.
    fn render(&self) -> String;

    /// The warnings it carries, in order, each with the prefix naming the part
    /// of the document it is about.
    fn warnings(&self) -> Vec<(String, &Self::Warning)>;

    /// Its `export` files (none when it has no such export).
    fn export(&self, export: Export) -> Vec<ExportFile> {
        match (export, self.plot_svg()) {
            (Export::Plot, Some(svg)) => vec![(None, svg)],
            _ => Vec::new(),
        }
    }

    /// Its SVG plot, for the commands that draw one: the [`Export::Plot`] of a
    /// document of one part.
    ///
    /// # Errors
    /// When the plot cannot be drawn.
    fn plot_svg(&self) -> Option<Result<String, String>> {
        None
    }
}

/// The warnings of `warned` records, about the whole document.
pub fn unwarned<W>(warned: &[Warned<W>]) -> Vec<(String, &W)> {
    warned.iter().map(|w| (String::new(), &w.warning)).collect()
}
