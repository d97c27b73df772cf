//! `[backfills.NAME]`: the raw backfill as written and its validation into
//! a [`Backfill`]: its tasks, its range of days (or of static keys) against
//! the schemes those tasks use, and the static dimensions it narrows.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::de::date_like_required;
use super::model::{Backfill, Task};
use super::suggest::unknown_help;
use super::validator::{Names, Validator};
use super::{ticked, Entry, ManifestError, ManifestErrorKind};
use crate::partition::time::{format_day, parse_day};
use crate::partition::{PartitionScheme, TimeScheme};

/// `[backfills.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBackfill {
    /// First partition, inclusive.
    #[serde(deserialize_with = "date_like_required")]
    #[schemars(with = "String")]
    pub from: String,
    /// Last partition, inclusive.
    #[serde(deserialize_with = "date_like_required")]
    #[schemars(with = "String")]
    pub to: String,
    /// Pool the backfill's attempts run in.
    pub pool: String,
    /// Tasks to rebuild (default: all).
    pub tasks: Option<Vec<String>>,
    /// Narrows static dimensions: `keys = { region = ["eu"] }`.
    pub keys: Option<IndexMap<String, Vec<String>>>,
    /// Why: recorded with the run.
    pub reason: String,
}

impl Validator<'_, '_, '_, '_> {
    pub(super) fn backfills(
        &mut self,
        entries: &[Entry<RawBackfill>],
        names: &Names,
        tasks: &IndexMap<String, Task>,
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> IndexMap<String, Backfill> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            let errors_before = self.errors.len();
            let at = |k: &'static str| ["backfills", name, k];
            self.reference("pool", &raw.pool, &names.pools, &at("pool"));
            if raw.reason.trim().is_empty() {
                self.err(
                    ManifestError::new(ManifestErrorKind::EmptyValue, format!("backfill `{name}` has no reason"))
                        .at(self.value(&at("reason")), "empty")
                        .help("say why the range is rebuilt; it is recorded with every run of the backfill"),
                );
            }
            let task_names: Vec<String> = match &raw.tasks {
                Some(list) => {
                    for (i, t) in list.iter().enumerate() {
                        let idx = i.to_string();
                        self.reference(
                            "task",
                            t,
                            &names.tasks,
                            &["backfills", name, "tasks", &idx],
                        );
                    }
                    names
                        .tasks
                        .iter()
                        .filter(|t| list.contains(t))
                        .cloned()
                        .collect()
                }
                None => names.tasks.clone(),
            };
            // Every scheme the backfill's tasks use, first use first.
            let mut used: Vec<&str> = Vec::new();
            for t in task_names.iter().filter_map(|t| tasks.get(t)) {
                for s in &t.partitioned_by {
                    if !used.contains(&s.as_str()) {
                        used.push(s);
                    }
                }
            }
            let time: Vec<(&str, &TimeScheme)> = used
                .iter()
                .filter_map(|s| schemes.get(*s).and_then(|x| x.time()).map(|t| (*s, t)))
                .collect();
            let mut days = None;
            if !time.is_empty() {
                days = self.backfill_days(name, raw, &time);
            } else if used.len() > 1 {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::SchemeMismatch,
                        format!("backfill `{name}` spans tasks of several static schemes ({})", ticked(&used)),
                    )
                    .at(self.key(&["backfills", name]), "mixed schemes")
                    .help("list in `tasks` only tasks of one static scheme, or narrow static dimensions with `keys` in a backfill over a time range"),
                );
            } else if let Some(scheme) = used.first().and_then(|s| schemes.get(*s).map(|x| (*s, x)))
            {
                self.backfill_static_range(name, raw, scheme);
            }
            let keys = self.backfill_keys(name, raw, &used, schemes);
            if self.errors.len() == errors_before {
                out.insert(
                    entry.name.clone(),
                    Backfill {
                        name: entry.name.clone(),
                        from: raw.from.clone(),
                        to: raw.to.clone(),
                        pool: raw.pool.clone(),
                        tasks: task_names,
                        reason: raw.reason.clone(),
                        days,
                        keys,
                    },
                );
            }
        }
        out
    }

    /// The static keys a backfill narrows its tasks' schemes to, each a key
    /// of a static scheme its tasks use.
    fn backfill_keys(
        &mut self,
        name: &str,
        raw: &RawBackfill,
        used: &[&str],
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> IndexMap<String, Vec<String>> {
        let mut keys = IndexMap::new();
        for (scheme, list) in raw.keys.iter().flatten() {
            let path = ["backfills", name, "keys", scheme.as_str()];
            let declared = match schemes.get(scheme) {
                Some(PartitionScheme::Static { keys }) if used.contains(&scheme.as_str()) => keys,
                _ => {
                    let statics: Vec<&str> = used
                        .iter()
                        .copied()
                        .filter(|s| matches!(schemes.get(*s), Some(PartitionScheme::Static { .. })))
                        .collect();
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::UnknownPartitionScheme,
                            format!("backfill `{name}` narrows `{scheme}`, which is not a static scheme of its tasks"),
                        )
                        .at(self.key(&path), "not a static dimension here")
                        .help(unknown_help("static scheme", scheme, statics)),
                    );
                    continue;
                }
            };
            for (i, k) in list.iter().enumerate() {
                if !declared.contains(k) {
                    let idx = i.to_string();
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::OutOfRange,
                            format!("backfill `{name}` narrows `{scheme}` to `{k}`, which is not one of its keys"),
                        )
                        .at(self.value(&["backfills", name, "keys", scheme, &idx]), "not a key")
                        .help(unknown_help("key", k, declared.iter().map(String::as_str))),
                    );
                }
            }
            keys.insert(scheme.clone(), list.clone());
        }
        keys
    }
    /// `from`/`to` of a backfill over time schemes: dates, inside the range
    /// of every time scheme its tasks use.
    fn backfill_days(
        &mut self,
        name: &str,
        raw: &RawBackfill,
        time: &[(&str, &TimeScheme)],
    ) -> Option<(i64, i64)> {
        let at = |k: &'static str| ["backfills", name, k];
        let from = self.date(&raw.from, &at("from"));
        let to = self.date(&raw.to, &at("to"));
        let (Some(from), Some(to)) = (from, to) else {
            return None;
        };
        if from > to {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadRange,
                    format!("backfill `{name}` runs backwards: from {from} to {to}"),
                )
                .at(self.value(&at("to")), "before `from`")
                .also(self.value(&at("from")), "from here")
                .help("swap `from` and `to`"),
            );
            return None;
        }
        let (from_day, to_day) = (parse_day(&raw.from)?, parse_day(&raw.to)?);
        let errors_before = self.errors.len();
        // Each end must be a day of some time scheme of the backfill's tasks
        // (a typo guard); each scheme then takes the periods the range
        // touches, possibly none.
        let ranges: Vec<(&str, i64, i64)> = time
            .iter()
            .map(|(n, t)| (*n, t.days(t.start).0, t.days(t.last(self.cx.now)).1))
            .collect();
        for (key, day, text) in [("from", from_day, from), ("to", to_day, to)] {
            if ranges.iter().any(|(_, a, b)| day >= *a && day <= *b) {
                continue;
            }
            let (message, help) = match ranges.as_slice() {
                [(scheme, a, b)] => (
                    format!("backfill `{name}` `{key}` = {text} is outside scheme `{scheme}` ({} to {})", format_day(*a), format_day(*b)),
                    format!("backfill only partitions that exist: between {} and {}", format_day(*a), format_day(*b)),
                ),
                many => (
                    format!("backfill `{name}` `{key}` = {text} is outside every time scheme of its tasks"),
                    format!(
                        "backfill only partitions that exist: {}",
                        many.iter()
                            .map(|(n, a, b)| format!("`{n}` {} to {}", format_day(*a), format_day(*b)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            };
            self.err(
                ManifestError::new(ManifestErrorKind::OutOfRange, message)
                    .at(self.value(&at(key)), "outside the scheme")
                    .help(help),
            );
        }
        (self.errors.len() == errors_before).then_some((from_day, to_day))
    }

    fn backfill_static_range(
        &mut self,
        name: &str,
        raw: &RawBackfill,
        (scheme_name, scheme): (&str, &PartitionScheme),
    ) {
        let at = |k: &'static str| ["backfills", name, k];
        match scheme {
            PartitionScheme::Time(_) => {}
            PartitionScheme::Static { keys } => {
                let position = |k: &str| keys.iter().position(|x| x == k);
                let (from, to) = (position(&raw.from), position(&raw.to));
                for (key, value, pos) in [("from", &raw.from, from), ("to", &raw.to, to)] {
                    if pos.is_none() {
                        self.err(
                            ManifestError::new(ManifestErrorKind::OutOfRange, format!("backfill `{name}` `{key}` = `{value}` is not a key of scheme `{scheme_name}`"))
                                .at(self.value(&at(key)), "not a key")
                                .help(unknown_help("key", value, keys.iter().map(String::as_str))),
                        );
                    }
                }
                if let (Some(f), Some(t)) = (from, to) {
                    if f > t {
                        self.err(
                            ManifestError::new(
                                ManifestErrorKind::BadRange,
                                format!(
                                    "backfill `{name}` runs backwards: `{}` comes after `{}`",
                                    raw.from, raw.to
                                ),
                            )
                            .at(self.value(&at("to")), "declared before `from`")
                            .help("static keys are ordered as declared; swap `from` and `to`"),
                        );
                    }
                }
            }
        }
    }
}
