//! The document of `ngauge loggp`: one transport's fit at the top level, or several
//! transports' fits side by side with their comparison.

use super::loggp::PairDoc;
use super::loggp_compare::Comparison;
use super::Meta;
use crate::job::TransportName;
use crate::model::loggp::DetectorKind;
use crate::patterns::loggp::DelayChoice;
use ngauge_transport::WaitMode;
use serde::Serialize;

/// One transport's fit: its first pair's document, and every pair under `pairs`
/// when there are several.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
}

/// The fits: one transport's at the top level, or several side by side.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
