//! [`Document`]: what every measuring command's result is to a front end: one
//! serde document (`--json`), its human tables, the warnings it carries (printed
//! after the results), and the files it can be exported to ([`Export`]).
//!
//! **Everything a front end prints or writes is a function of the document.** A
//! document of several parts (`loggp`: a fit per transport and pair) needs no
//! second path beside it (an analysis handed out with it, warnings printed on the
//! side): each warning comes with the prefix naming the part it is about
//! (`tcp: pair 0-1: `; empty for most documents), each export file with the name
//! of its part (a transport: `gap.svg` becomes `gap.tcp.svg`; none for a
//! document of one part). One front-end function then ends every command.

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
    /// A CSV table (`matrix`: a row per ordered pair).
    Csv,
}

/// One file of an export: the name of the part it shows when the document has
/// several, and its text (or why it cannot be drawn).
pub type ExportFile = (Option<String>, Result<String, String>);

/// A command's result document.
pub trait Document: serde::Serialize {
    /// The command's warning.
    type Warning: std::fmt::Display + serde::Serialize;

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
