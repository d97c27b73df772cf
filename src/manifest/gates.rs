//! Gates of a task: the raw table as written and its validation into a
//! [`Gate`].

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::suggest::closest;
use super::validator::Validator;
use super::{ticked, ManifestError, ManifestErrorKind};
use crate::audit::{Aggregate, Gate, GateCheck};

/// One gate. Kept flat (not a tagged enum) so that serde reports unknown keys
/// instead of guessing a variant; `validate` checks which keys each check takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    /// `row_count`, `unique`, `not_null`, `accepted_values` or `reconcile`.
    #[schemars(extend("enum" = ["row_count", "unique", "not_null", "accepted_values", "reconcile"]))]
    pub check: String,
    /// row_count: fewest rows.
    #[schemars(range(min = 0))]
    pub min: Option<i64>,
    /// row_count: most rows.
    pub max: Option<i64>,
    /// unique, not_null: the columns.
    pub columns: Option<Vec<String>>,
    /// accepted_values, reconcile: the output column.
    pub column: Option<String>,
    /// accepted_values: the allowed values.
    pub values: Option<Vec<String>>,
    /// reconcile: `sum` or `count`.
    #[schemars(extend("enum" = ["sum", "count"]))]
    pub aggregate: Option<String>,
    /// reconcile: the input to compare with.
    pub input: Option<String>,
    /// reconcile: the input's column.
    pub input_column: Option<String>,
    /// reconcile: equality filter on input rows.
    #[serde(rename = "where")]
    pub filter: Option<IndexMap<String, String>>,
}

impl Validator<'_, '_, '_, '_> {
    pub(super) fn gate(
        &mut self,
        task: &str,
        index: usize,
        raw: &RawGate,
        inputs: &[String],
    ) -> Option<Gate> {
        let idx = index.to_string();
        let at = |k: &'static str| ["tasks", task, "gates", idx.as_str(), k];
        let present: Vec<&'static str> = [
            ("min", raw.min.is_some()),
            ("max", raw.max.is_some()),
            ("columns", raw.columns.is_some()),
            ("column", raw.column.is_some()),
            ("values", raw.values.is_some()),
            ("aggregate", raw.aggregate.is_some()),
            ("input", raw.input.is_some()),
            ("input_column", raw.input_column.is_some()),
            ("where", raw.filter.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.then_some(k))
        .collect();
        let Some(check) = GateCheck::from_name(&raw.check) else {
            let other = raw.check.as_str();
            let checks = GateCheck::ALL.map(GateCheck::name);
            self.err(
                ManifestError::new(
                    ManifestErrorKind::UnknownGate,
                    format!("unknown gate check `{other}`"),
                )
                .at(self.value(&at("check")), "no such check")
                .help(match closest(other, checks) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("checks are {}", ticked(&checks)),
                }),
            );
            return None;
        };
        let (allowed, required): (&[&str], &[&str]) = match check {
            GateCheck::RowCount => (&["min", "max"], &[]),
            GateCheck::Unique | GateCheck::NotNull => (&["columns"], &["columns"]),
            GateCheck::AcceptedValues => (&["column", "values"], &["column", "values"]),
            GateCheck::Reconcile => (
                &["column", "aggregate", "input", "input_column", "where"],
                &["column", "input", "input_column"],
            ),
        };
        let mut ok = true;
        for key in &present {
            if !allowed.contains(key) {
                ok = false;
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::UnexpectedKey,
                        format!("gate `{}` does not take `{key}`", raw.check),
                    )
                    .at(self.key(&at(key)), "not for this check")
                    .help(format!("`{}` takes {}", raw.check, ticked(allowed))),
                );
            }
        }
        for key in required {
            if !present.contains(key) {
                ok = false;
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::MissingKey,
                        format!("gate `{}` needs `{key}`", raw.check),
                    )
                    .at(
                        self.value(&["tasks", task, "gates", idx.as_str()]),
                        format!("no `{key}`"),
                    )
                    .help(format!("`{}` takes {}", raw.check, ticked(allowed))),
                );
            }
        }
        if !ok {
            return None;
        }
        Some(match check {
            GateCheck::RowCount => self.row_count_gate(raw, &at)?,
            GateCheck::Unique => Gate::Unique {
                columns: raw.columns.clone().unwrap_or_default(),
            },
            GateCheck::NotNull => Gate::NotNull {
                columns: raw.columns.clone().unwrap_or_default(),
            },
            GateCheck::AcceptedValues => Gate::AcceptedValues {
                column: raw.column.clone().unwrap_or_default(),
                values: raw.values.clone().unwrap_or_default(),
            },
            GateCheck::Reconcile => self.reconcile_gate(task, raw, inputs, &at)?,
        })
    }

    /// A `row_count` gate: bounds of 0 or more, the lower at most the upper.
    fn row_count_gate<'p>(
        &mut self,
        raw: &RawGate,
        at: &dyn Fn(&'static str) -> [&'p str; 5],
    ) -> Option<Gate> {
        let non_negative = |v: Option<i64>| v.map(|n| u64::try_from(n).ok());
        let (min, max) = (non_negative(raw.min), non_negative(raw.max));
        if min == Some(None) || max == Some(None) {
            let key = if min == Some(None) { "min" } else { "max" };
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    "a row count cannot be negative",
                )
                .at(self.value(&at(key)), "negative")
                .help("use 0 or more"),
            );
            return None;
        }
        let (min, max) = (min.flatten(), max.flatten());
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadRange,
                        format!("row_count gate has min {lo} above max {hi}"),
                    )
                    .at(self.value(&at("min")), "above `max`")
                    .help("make `min` at most `max`"),
                );
                return None;
            }
        }
        Some(Gate::RowCount { min, max })
    }

    /// A `reconcile` gate: against one of the task's inputs, by `sum` or
    /// `count`.
    fn reconcile_gate<'p>(
        &mut self,
        task: &str,
        raw: &RawGate,
        inputs: &[String],
        at: &dyn Fn(&'static str) -> [&'p str; 5],
    ) -> Option<Gate> {
        let input = raw.input.clone().unwrap_or_default();
        if !inputs.contains(&input) {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::GateUnknownInput,
                    format!(
                        "gate reconciles against `{input}`, which is not an input of task `{task}`"
                    ),
                )
                .at(self.value(&at("input")), "not among the task's inputs")
                .help(if inputs.is_empty() {
                    format!("add `{input}` to the task's `inputs`")
                } else {
                    match closest(&input, inputs.iter().map(String::as_str)) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!(
                            "the task's inputs are {}; add `{input}` to them",
                            ticked(inputs)
                        ),
                    }
                }),
            );
            return None;
        }
        let aggregate = match raw.aggregate.as_deref() {
            None | Some("sum") => Aggregate::Sum,
            Some("count") => Aggregate::Count,
            Some(other) => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::InvalidValue,
                        format!("`{other}` is not an aggregate"),
                    )
                    .at(self.value(&at("aggregate")), "unknown aggregate")
                    .help("use `sum` or `count`"),
                );
                return None;
            }
        };
        Some(Gate::Reconcile {
            column: raw.column.clone().unwrap_or_default(),
            aggregate,
            input,
            input_column: raw.input_column.clone().unwrap_or_default(),
            filter: raw
                .filter
                .as_ref()
                .map(|f| f.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        })
    }
}
