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
//!
//! On stderr a job says each cause once ([`lines`]): the warnings of one kind are
//! one line naming where else they hold (the sizes, stages, ranks, parts), and the
//! kinds of one cause (ranks sharing a core, polling on shared cores) are one line.

use super::effort::EffortWarning;
use crate::job::JobWarning;
use crate::launch::binding::BindingWarning;
use serde::Serialize;

/// A warning in a document: `{"kind": ..., <the variant's fields>, "message": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

/// Kinds that one cause produces, printed as one line: ranks pinned to one core,
/// and polling with more ranks than cores, both mean that ranks share a core.
const ONE_CAUSE: &[&[&str]] = &[&["shared_core", "poll_oversubscribed"]];

/// A kind of warning and the indices of its warnings, in the order found.
type Kind = (String, Vec<usize>);

/// More distinct values than this of one field are said as a range.
const LISTED_VALUES: usize = 6;

/// The stderr lines of `warnings` (each `(prefix, warning, hint)`, in the order
/// found): one per cause (see the module doc), the hints each once at the end.
///
/// Generic only in turning each warning into its text and its JSON value; the
/// grouping is `said_lines`, compiled once rather than once per warning type
/// in every crate that calls this (the binary calls it for every command).
pub fn lines<W: Serialize + std::fmt::Display>(
    warnings: &[(String, &W, Option<String>)],
) -> Vec<String> {
    let said: Vec<Said> = (warnings.iter())
        .map(|(prefix, w, hint)| Said {
            prefix: prefix.clone(),
            text: w.to_string(),
            value: serde_json::to_value(w).unwrap_or_default(),
            hint: hint.clone(),
        })
        .collect();
    said_lines(&said)
}

/// A warning as [`lines`] groups it.
struct Said {
    /// The prefix naming the part of the document it is about.
    prefix: String,
    /// The warning in words (its `Display`).
    text: String,
    /// The warning as JSON: `kind` and its fields.
    value: serde_json::Value,
    /// The command line's hint, if any.
    hint: Option<String>,
}

/// [`lines`] of warnings already said in words and as JSON.
fn said_lines(warnings: &[Said]) -> Vec<String> {
    let kind = |w: &Said| w.value["kind"].as_str().unwrap_or_default().to_string();
    let cause = |k: &str| {
        (ONE_CAUSE.iter())
            .position(|kinds| kinds.contains(&k))
            .map_or_else(|| k.to_string(), |i| ONE_CAUSE[i][0].to_string())
    };
    let mut causes: Vec<(String, Vec<Kind>)> = Vec::new();
    for (i, w) in warnings.iter().enumerate() {
        let k = kind(w);
        let c = cause(&k);
        let at = match causes.iter().position(|(name, _)| *name == c) {
            Some(at) => at,
            None => {
                causes.push((c, Vec::new()));
                causes.len() - 1
            }
        };
        let kinds = &mut causes[at].1;
        match kinds.iter_mut().find(|(name, _)| *name == k) {
            Some((_, members)) => members.push(i),
            None => kinds.push((k, vec![i])),
        }
    }
    // Within a cause, in the order of its list (the binding's words first).
    let order = |k: &str| {
        ONE_CAUSE
            .iter()
            .find_map(|ks| ks.iter().position(|x| *x == k))
    };
    for (_, kinds) in &mut causes {
        kinds.sort_by_key(|(k, _)| order(k));
    }
    causes
        .iter()
        .map(|(_, kinds)| {
            let mut texts = Vec::new();
            let mut hints: Vec<&str> = Vec::new();
            for (_, members) in kinds {
                let first = &warnings[members[0]];
                let mut text = format!("{}{}", first.prefix, first.text);
                if members.len() > 1 {
                    let others = members.iter().map(|&i| &warnings[i]);
                    text += &format!(
                        " ({} more like it: {})",
                        members.len() - 1,
                        differences(others)
                    );
                }
                texts.push(text);
                for &i in members {
                    if let Some(h) = warnings[i].hint.as_deref() {
                        if !hints.contains(&h) {
                            hints.push(h);
                        }
                    }
                }
            }
            texts.extend(hints.into_iter().map(str::to_string));
            texts.join("; ")
        })
        .collect()
}

/// Where warnings of one kind differ: each field (and the prefix, as `in`) whose
/// values are not all one, with its distinct values.
fn differences<'a>(members: impl Iterator<Item = &'a Said>) -> String {
    let mut fields: Vec<(String, Vec<serde_json::Value>)> = Vec::new();
    let mut note = |field: &str, value: serde_json::Value| {
        let at = match fields.iter().position(|(f, _)| f == field) {
            Some(at) => at,
            None => {
                fields.push((field.to_string(), Vec::new()));
                fields.len() - 1
            }
        };
        if !fields[at].1.contains(&value) {
            fields[at].1.push(value);
        }
    };
    for w in members {
        note("in", w.prefix.trim_end_matches([':', ' ']).into());
        if let serde_json::Value::Object(map) = &w.value {
            for (field, value) in map.iter().filter(|(f, _)| *f != "kind") {
                note(field, value.clone());
            }
        }
    }
    (fields.into_iter())
        .filter(|(_, values)| values.len() > 1)
        .map(|(field, values)| format!("{field} {}", values_text(&values)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `8/16/32`, or `8..4096 (9 values)` when there are many numbers.
fn values_text(values: &[serde_json::Value]) -> String {
    let numbers: Option<Vec<f64>> = values.iter().map(serde_json::Value::as_f64).collect();
    match numbers {
        Some(n) if n.len() > LISTED_VALUES => {
            let (lo, hi) = n
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    (lo.min(x), hi.max(x))
                });
            format!("{}..{} ({} values)", number(lo), number(hi), n.len())
        }
        _ => {
            let mut said: Vec<String> = values.iter().take(LISTED_VALUES).map(value_text).collect();
            if values.len() > LISTED_VALUES {
                said.push("...".into());
            }
            said.join("/")
        }
    }
}

/// A field's value in words: strings bare, lists comma separated, numbers short.
fn value_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), number),
        serde_json::Value::Array(items) => {
            let mut said: Vec<String> = items.iter().take(LISTED_VALUES).map(value_text).collect();
            if items.len() > LISTED_VALUES {
                said.push(format!("... ({} in all)", items.len()));
            }
            said.join(",")
        }
        other => other.to_string(),
    }
}

/// A number with at most 3 decimals.
fn number(x: f64) -> String {
    let rounded = (x * 1000.0).round() / 1000.0;
    format!("{rounded}")
}

/// What threatens the figures of any command alike, with the same kind, fields
/// and words in every document (see the module doc).
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
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

    #[test]
    fn issue37_one_line_per_kind_naming_where_else_it_holds() {
        use crate::report::nbc::NbcWarning;
        let few = |size, stage: &str, valid| NbcWarning::FewValidCalls {
            size,
            stage: stage.into(),
            valid,
            wanted: 10,
        };
        let ws = [
            few(8, "blocking", 3),
            few(8, "overlapped", 4),
            NbcWarning::ComputeOverran {
                size: 8,
                t_cpu_us: 12.0,
                t_b_us: 5.0,
            },
            few(16, "blocking", 3),
        ];
        let hint = Some("raise --max-rounds".to_string());
        let items: Vec<_> = ws
            .iter()
            .map(|w| (String::new(), w, hint.clone()))
            .collect();
        let lines = lines(&items);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(
            lines[0],
            format!(
                "{} (2 more like it: size 8/16, stage blocking/overlapped, valid 3/4); \
                 raise --max-rounds",
                ws[0]
            )
        );
        assert_eq!(lines[1], format!("{}; raise --max-rounds", ws[2]));
    }

    #[test]
    fn issue37_many_values_are_a_range_and_parts_are_named() {
        use crate::report::nbc::NbcWarning;
        let ws: Vec<_> = (0..25)
            .map(|i| NbcWarning::FewValidCalls {
                size: 1 << i,
                stage: "blocking".into(),
                valid: 3,
                wanted: 10,
            })
            .collect();
        let items: Vec<_> = ws
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("pair 0-{}: ", 1 + i % 2), w, None))
            .collect();
        let lines = lines(&items);
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0]
                .ends_with("(24 more like it: in pair 0-1/pair 0-2, size 1..16777216 (25 values))"),
            "{}",
            lines[0]
        );
    }

    #[test]
    fn issue37_shared_cores_are_one_cause() {
        use crate::job::JobWarning;
        use crate::launch::env::LauncherKind;
        let shared = |core, ranks| {
            SetupWarning::Binding(BindingWarning::SharedCore {
                host: "vm".into(),
                core,
                ranks,
                launcher: LauncherKind::Local,
            })
        };
        let poll = SetupWarning::Job(JobWarning::PollOversubscribed {
            ranks_on_host: 4,
            cores: 2,
        });
        let ws = [poll.clone(), shared(0, vec![0, 2]), shared(1, vec![1, 3])];
        let hint = |w: &SetupWarning| match w {
            SetupWarning::Job(_) => Some("use --wait block".to_string()),
            _ => Some("start fewer ranks".to_string()),
        };
        let items: Vec<_> = ws.iter().map(|w| (String::new(), w, hint(w))).collect();
        assert_eq!(
            lines(&items),
            [format!(
                "{} (1 more like it: core 0/1, ranks 0,2/1,3); {poll}; start fewer ranks; \
                 use --wait block",
                ws[1]
            )]
        );
    }

    /// A grouped line of 512 ranks on 2 cores names a few ranks per list.
    #[test]
    fn long_lists_in_a_grouped_line_are_cut() {
        use crate::launch::binding::BindingWarning;
        use crate::launch::env::LauncherKind;
        let ws: Vec<BindingWarning> = (0..2)
            .map(|core| BindingWarning::SharedCore {
                host: "vm".into(),
                core,
                ranks: (core..512).step_by(2).collect(),
                launcher: LauncherKind::Local,
            })
            .collect();
        let items: Vec<_> = ws.iter().map(|w| (String::new(), w, None)).collect();
        let line = &lines(&items)[0];
        assert!(
            line.contains("ranks 0,2,4,6,8,10,... (256 in all)/1,3,5,7,9,11,... (256 in all)"),
            "{line}"
        );
        assert!(line.len() < 400, "{line}");
    }
}
