//! The validator the sections share: the context of one manifest's
//! validation, where its errors and warnings go, the names it declares,
//! and the checks every section makes (spans, names, dates, durations,
//! references, failure rules). Each section validates in its own file with
//! these; `validate.rs` runs them in order over the whole manifest.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use jiff::civil::Date;

use super::locate::Locator;
use super::suggest::unknown_help;
use super::{duration, ManifestError, ManifestErrorKind};

pub(crate) struct Context<'a, 'b, 'i> {
    pub(crate) locator: &'a Locator<'b, 'i>,
    pub(crate) path: &'a Path,
    pub(crate) dir: &'a Path,
    pub(crate) now: i64,
    /// Where an S3 warehouse stages (`WEIR_STAGING`), if the loader says.
    pub(crate) staging: Option<&'a Path>,
}

pub(super) struct Validator<'c, 'a, 'b, 'i> {
    pub(super) cx: &'c Context<'a, 'b, 'i>,
    pub(super) errors: &'c mut Vec<ManifestError>,
    /// Output dataset → the task that publishes it.
    pub(super) producers: HashMap<String, String>,
    /// `pipeline.code_version`: a task's when it declares none.
    pub(super) pipeline_code_version: String,
    /// Warnings: valid, but probably not what was meant.
    pub(super) warnings: Vec<ManifestError>,
}

impl Validator<'_, '_, '_, '_> {
    pub(super) fn err(&mut self, error: ManifestError) {
        self.errors.push(error);
    }

    pub(super) fn warn(&mut self, warning: ManifestError) {
        self.warnings.push(warning.warning());
    }

    pub(super) fn value(&self, path: &[&str]) -> std::ops::Range<usize> {
        self.cx.locator.value(path)
    }

    pub(super) fn key(&self, path: &[&str]) -> std::ops::Range<usize> {
        self.cx.locator.key(path)
    }

    pub(super) fn date(&mut self, text: &str, path: &[&str]) -> Option<Date> {
        match text.parse::<Date>() {
            Ok(d) if text.len() == 10 => Some(d),
            _ => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadDate,
                        format!("`{text}` is not a valid date"),
                    )
                    .at(self.value(path), "not a date")
                    .help("write an ISO date such as \"2026-09-20\""),
                );
                None
            }
        }
    }

    pub(super) fn duration(
        &mut self,
        text: Option<&str>,
        default: Duration,
        path: &[&str],
    ) -> Duration {
        let Some(text) = text else { return default };
        match duration::parse_unbounded(text) {
            Ok(d) if d > duration::MAX => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::DurationTooLong,
                        format!(
                            "duration `{text}` is longer than the maximum of {}",
                            duration::MAX_TEXT
                        ),
                    )
                    .at(self.value(path), "too long")
                    .help(format!(
                        "weir accepts durations up to {} (about 10 years); a longer one is almost certainly a typo",
                        duration::MAX_TEXT
                    )),
                );
                default
            }
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadDuration,
                        format!("duration `{text}` is zero"),
                    )
                    .at(self.value(path), "zero")
                    .help("give a positive duration such as \"90s\" or \"10m\""),
                );
                default
            }
            Err(why) => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadDuration,
                        format!("malformed duration: {why}"),
                    )
                    .at(self.value(path), "not a duration")
                    .help("write a number and a unit (ms, s, m, h, d), e.g. \"90s\", \"10m\", \"2h\" or \"1h30m\""),
                );
                default
            }
        }
    }

    pub(super) fn safe_name(&mut self, what: &str, name: &str, path: &[&str], key: bool) -> bool {
        let ok = !name.is_empty()
            && !name.starts_with(['_', '.', '-'])
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            let span = if key {
                self.key(path)
            } else {
                self.value(path)
            };
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadName,
                    format!("{what} `{name}` is not a valid name"),
                )
                .at(span, "invalid name")
                .help("use letters, digits, `_`, `-` and `.`, starting with a letter or digit (it becomes a directory name)"),
            );
        }
        ok
    }

    /// Whether a valid `name` (of a task, pool or dataset) also fits the
    /// warehouse, which makes it a directory name: the store's own rule
    /// ([`crate::store::segment_problem`]), before any run fails on it.
    pub(super) fn name_fits(&mut self, what: &str, name: &str, path: &[&str], key: bool) -> bool {
        let Some(why) = crate::store::segment_problem(name) else {
            return true;
        };
        let span = if key {
            self.key(path)
        } else {
            self.value(path)
        };
        self.err(
            ManifestError::new(
                ManifestErrorKind::NameTooLong,
                format!(
                    "{what} `{}` is too long for the warehouse",
                    abbreviated(name)
                ),
            )
            .at(span, format!("{} bytes", name.len()))
            .help(format!(
                "it becomes a directory name in the warehouse ({why}); shorten it"
            )),
        );
        false
    }

    pub(super) fn reference(
        &mut self,
        what: &str,
        name: &str,
        known: &[String],
        path: &[&str],
    ) -> bool {
        if known.iter().any(|k| k == name) {
            return true;
        }
        self.err(
            ManifestError::new(
                match what {
                    "task" => ManifestErrorKind::UnknownTask,
                    "pool" => ManifestErrorKind::UnknownPool,
                    "retry class" => ManifestErrorKind::UnknownRetryClass,
                    "partition scheme" => ManifestErrorKind::UnknownPartitionScheme,
                    _ => ManifestErrorKind::UnknownDataset,
                },
                format!("unknown {what} `{name}`"),
            )
            .at(self.value(path), format!("no such {what}"))
            .help(unknown_help(what, name, known.iter().map(String::as_str))),
        );
        false
    }
}

/// A key short enough to read in a message: its first 24 characters.
pub(super) fn abbreviated(key: &str) -> String {
    match key.char_indices().nth(24) {
        Some((end, _)) => format!("{}…", &key[..end]),
        None => key.to_owned(),
    }
}

pub(super) struct Names {
    pub(super) schemes: Vec<String>,
    pub(super) pools: Vec<String>,
    pub(super) retry: Vec<String>,
    pub(super) datasets: Vec<String>,
    pub(super) tasks: Vec<String>,
    /// The same task names for O(1) lookups: a 20,000-task manifest checks
    /// every dependency against it (a scan of `tasks` made validation
    /// quadratic).
    pub(super) task_set: HashSet<String>,
    pub(super) executors: Vec<String>,
}
