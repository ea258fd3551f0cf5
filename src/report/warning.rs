//! How warnings appear in result documents.
//!
//! A warning is an enum variant with `Display` (hyperfine's `output/warnings.rs`),
//! defined where the fact is found: [`crate::clock::Warning`] (timer),
//! [`crate::model::loggp::ModelWarning`] (fits), [`crate::job::JobWarning`] (setup),
//! and one enum per command for what the command finds ([`super::pingpong`],
//! [`super::loggp`], [`super::sync`]). What threatens any command's figures alike
//! (the job's setup, the binding of ranks to cores, a clock synchronization's
//! effort) is one [`SetupWarning`], held by each command's enum as its untagged
//! `Setup` variant. Each serializes as an object tagged by `kind`
//! (the variant's snake_case name) with the variant's fields, and documents carry
//! it as a [`Warned`], which adds `message`: the text printed on stderr, without the
//! front end's hint (the binary adds hints that name its flags, depending on the
//! options used). Scripts match on `kind`; people read `message`.

use super::effort::EffortWarning;
use crate::job::JobWarning;
use crate::launch::binding::BindingWarning;
use serde::Serialize;

/// A warning in a document: `{"kind": ..., <the variant's fields>, "message": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Warned<W> {
    /// The warning, tagged by `kind`.
    #[serde(flatten)]
    pub warning: W,
    /// The warning in words.
    pub message: String,
}

impl<W: std::fmt::Display> From<W> for Warned<W> {
    fn from(warning: W) -> Self {
        Warned {
            message: warning.to_string(),
            warning,
        }
    }
}

/// `warnings` as document records.
pub fn warned<W: std::fmt::Display>(warnings: impl IntoIterator<Item = W>) -> Vec<Warned<W>> {
    warnings.into_iter().map(Warned::from).collect()
}

/// What threatens the figures of any command alike, with the same kind, fields
/// and words in every document (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, thiserror::Error)]
#[serde(untagged)]
pub enum SetupWarning {
    /// A job setup warning.
    #[error("{0}")]
    Job(JobWarning),
    /// Measured ranks share a core, or some are pinned and some not.
    #[error("{0}")]
    Binding(BindingWarning),
    /// The clock synchronization crossed brackets or dropped drifts.
    #[error("{0}")]
    Sync(EffortWarning),
}

impl From<JobWarning> for SetupWarning {
    fn from(w: JobWarning) -> Self {
        SetupWarning::Job(w)
    }
}

impl From<BindingWarning> for SetupWarning {
    fn from(w: BindingWarning) -> Self {
        SetupWarning::Binding(w)
    }
}

impl From<EffortWarning> for SetupWarning {
    fn from(w: EffortWarning) -> Self {
        SetupWarning::Sync(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Warning;

    #[test]
    fn a_warning_is_its_kind_its_fields_and_its_message() {
        let w = Warned::from(Warning::RateDisagrees {
            calibrated_hz: 2e9,
            kernel_hz: 2.1e9,
        });
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["kind"], "rate_disagrees");
        assert_eq!(v["kernel_hz"], 2.1e9);
        assert_eq!(v["message"], w.warning.to_string());
        let unit = serde_json::to_value(Warned::from(Warning::Unpinned)).unwrap();
        assert_eq!(unit.as_object().unwrap().len(), 2, "{unit}");
    }
}
