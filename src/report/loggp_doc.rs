//! The document of `ngauge loggp`: one transport's fit at the top level, or several
//! transports' fits side by side with their comparison; its tables, its warnings
//! (each after the transport, with several, and the pair it is about) and its
//! exports (a plot, a parameter file and Netgauge's columns of each transport's
//! first pair), all from the document alone.

use super::document::{Document, Export, ExportFile};
use super::loggp::{netgauge_columns, params_file, plot_svg, table, LoggpWarning, PairDoc};
use super::loggp_compare::{self as compare, Comparison};
use super::Meta;
use crate::job::TransportName;
use crate::model::loggp::DetectorKind;
use crate::patterns::loggp::DelayChoice;
use ngauge_transport::WaitMode;
use serde::Serialize;

/// One transport's fit: its first pair's document, and every pair under `pairs`
/// when there are several.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TransportFit {
    /// The first pair.
    #[serde(flatten)]
    pub first: PairDoc,
    /// Every pair, when more than one was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<Vec<PairDoc>>,
    /// The transport.
    pub transport: TransportName,
    /// How it waited (with several transports; `meta.wait` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitMode>,
}

impl TransportFit {
    /// The fit of `pairs` (at least one) over `transport`.
    ///
    /// # Panics
    /// When `pairs` is empty.
    pub fn new(transport: TransportName, wait: Option<WaitMode>, mut pairs: Vec<PairDoc>) -> Self {
        assert!(!pairs.is_empty(), "a fit needs a pair");
        let first = pairs[0].clone();
        TransportFit {
            first,
            pairs: (pairs.len() > 1).then(|| std::mem::take(&mut pairs)),
            transport,
            wait,
        }
    }

    /// Every pair.
    pub fn pairs(&self) -> &[PairDoc] {
        self.pairs
            .as_deref()
            .unwrap_or(std::slice::from_ref(&self.first))
    }
}

/// The fits: one transport's at the top level, or several side by side.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum LoggpBody {
    /// One transport.
    One(TransportFit),
    /// Several transports, measured interleaved.
    Several {
        /// Every transport's fit, in the order given.
        transports: Vec<TransportFit>,
        /// Their parameters side by side.
        comparison: Option<Comparison>,
    },
}

/// `ngauge loggp --json`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct LoggpDoc {
    /// The fits.
    #[serde(flatten)]
    pub body: LoggpBody,
    /// The protocol-change detector.
    pub detector: DetectorKind,
    /// Messages per PRTT(n,.,s).
    pub n: usize,
    /// Timed repetitions per PRTT and size.
    pub reps: usize,
    /// Sweeps over all sizes, pooled per size.
    pub passes: usize,
    /// The delay d of PRTT(n,d,s).
    pub dg: DelayChoice,
    /// How the result came about.
    pub meta: Meta,
}

impl LoggpDoc {
    /// Every transport's fit, in the order given.
    pub fn fits(&self) -> &[TransportFit] {
        match &self.body {
            LoggpBody::One(fit) => std::slice::from_ref(fit),
            LoggpBody::Several { transports, .. } => transports,
        }
    }
}

impl Document for LoggpDoc {
    type Warning = LoggpWarning;

    /// Every pair's table (under its transport's title with several), then the
    /// comparison.
    fn render(&self) -> String {
        let mut out = String::new();
        for fit in self.fits() {
            if let Some(wait) = fit.wait {
                out += &format!("LogGP over {} (wait {wait})\n", fit.transport);
            }
            for pair in fit.pairs() {
                out += &table(pair);
            }
        }
        if let LoggpBody::Several {
            comparison: Some(c),
            ..
        } = &self.body
        {
            out += &compare::table(c);
        }
        out
    }

    fn warnings(&self) -> Vec<(String, &LoggpWarning)> {
        let several = self.fits().len() > 1;
        let mut out = Vec::new();
        for fit in self.fits() {
            let transport = if several {
                format!("{}: ", fit.transport)
            } else {
                String::new()
            };
            for pair in fit.pairs() {
                let prefix = format!("{transport}pair {}-{}: ", pair.client, pair.server);
                out.extend(pair.warnings.iter().map(|w| (prefix.clone(), &w.warning)));
            }
        }
        out
    }

    /// Each transport's first pair, named by the transport with several.
    fn export(&self, export: Export) -> Vec<ExportFile> {
        let several = self.fits().len() > 1;
        self.fits()
            .iter()
            .filter_map(|fit| {
                let (t, first) = (fit.transport, &fit.first);
                let text = match export {
                    Export::Plot => plot_svg(
                        first,
                        self.n,
                        &format!(
                            "LogGP over {t}: gap per message, rank {} -> {} (n = {})",
                            first.client, first.server, self.n
                        ),
                    ),
                    Export::Params => Ok(params_file(first, t.as_str()).to_json() + "\n"),
                    Export::Netgauge => Ok(netgauge_columns(first, self.n)),
                    Export::Csv => return None,
                };
                Some((several.then(|| t.to_string()), text))
            })
            .collect()
    }
}
