//! Why a plan cannot be made, and the help texts that say what would.

use std::collections::HashSet;

use thiserror::Error;

use crate::manifest::Manifest;
use crate::partition::dims::SEPARATOR;
use crate::partition::MapError;

/// Why a plan cannot be made.
#[derive(Debug, Error, miette::Diagnostic)]
pub enum PlanError {
    /// `--backfill` names nothing declared.
    #[error("unknown backfill `{name}`")]
    #[diagnostic(code(weir::plan::unknown_backfill))]
    UnknownBackfill {
        /// The name given.
        name: String,
        /// What to do instead.
        #[help]
        help: String,
    },
    /// `--partition` names a key of no scheme.
    #[error("partition `{key}` is not in any partition scheme of the selected tasks")]
    #[diagnostic(code(weir::plan::unknown_partition))]
    UnknownPartition {
        /// The key given.
        key: String,
        /// What the schemes hold.
        #[help]
        help: String,
    },
    /// `--partition` names a key of one dimension of tasks that have a time
    /// dimension too, and no period of it: no instance.
    #[error("partition `{key}` selects no instance: {why}")]
    #[diagnostic(code(weir::plan::selects_nothing))]
    SelectsNothing {
        /// The key given.
        key: String,
        /// Which dimension it names, and which it leaves out.
        why: String,
        /// A key that would select something.
        #[help]
        help: String,
    },
    /// A selected instance needs an upstream partition that cannot exist.
    #[error("task `{task}` partition {key} cannot be planned: upstream `{upstream}` {why}")]
    #[diagnostic(
        code(weir::plan::mapping),
        help("a partition before a scheme's start does not exist: start the backfill later, move the scheme's `start` earlier, or shorten the input's `offset`/`window`")
    )]
    Mapping {
        /// The downstream task.
        task: String,
        /// Its key.
        key: String,
        /// The upstream task.
        upstream: String,
        /// Why.
        why: Box<MapError>,
    },
    /// `--from`/`--to` that describe no range.
    #[error("range {from} to {to}: {why}")]
    #[diagnostic(code(weir::plan::bad_range))]
    BadRange {
        /// First key.
        from: String,
        /// Last key.
        to: String,
        /// What is wrong.
        why: String,
        /// What the schemes hold.
        #[help]
        help: String,
    },
    /// `--task` names nothing declared.
    #[error("unknown task `{name}`")]
    #[diagnostic(code(weir::plan::unknown_task))]
    UnknownTask {
        /// The name given.
        name: String,
        /// Did you mean …
        #[help]
        help: String,
    },
}

/// Why `key`, a key of some dimension of the selected tasks, selected no
/// instance (the other dimensions of those tasks are time ones, and
/// `--partition` named no period), with a full key that would.
pub(super) fn selects_nothing(
    manifest: &Manifest,
    selected: &[&str],
    key: &str,
    now: i64,
) -> PlanError {
    let mut why = "no selected task has it as a key or as part of one".to_string();
    let mut help = partition_help(manifest, selected, now);
    for name in selected {
        let dims = &manifest.tasks[*name].dims;
        let Some(named) = dims.0.iter().position(|d| d.scheme.contains(key, now)) else {
            continue;
        };
        let others: Vec<String> = dims
            .0
            .iter()
            .enumerate()
            .filter(|(i, d)| *i != named && d.scheme.time().is_some())
            .map(|(_, d)| format!("`{}`", d.name))
            .collect();
        if others.is_empty() {
            continue;
        }
        let example: Option<Vec<String>> = dims
            .0
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if i == named {
                    Some(key.to_string())
                } else {
                    d.scheme.latest(now).first().cloned()
                }
            })
            .collect();
        why = format!(
            "it is a `{}` key, and `{name}` is also partitioned by {}, of which no key was given",
            dims.0[named].name,
            others.join(" and ")
        );
        if let Some(example) = example {
            let full = example.join(&SEPARATOR.to_string());
            let rest: Vec<&str> = example
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != named)
                .map(|(_, k)| k.as_str())
                .collect();
            help = format!(
                "name a full key, e.g. `--partition {}`, or add the other dimensions' keys: `--partition {} --partition {}`",
                crate::partition::shell_word(&full),
                crate::partition::shell_word(key),
                rest.iter()
                    .map(|k| crate::partition::shell_word(k))
                    .collect::<Vec<_>>()
                    .join(" --partition ")
            );
        }
        break;
    }
    PlanError::SelectsNothing {
        key: key.to_string(),
        why,
        help,
    }
}

/// The partitions the tasks of `order` take, for a help text: "partitions
/// are `daily`: days from 2026-09-20 to 2026-09-21; …".
pub(crate) fn partition_help(manifest: &Manifest, order: &[&str], now: i64) -> String {
    let mut described: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for name in order {
        for d in &manifest.tasks[*name].dims.0 {
            if !seen.insert(d.name.as_str()) {
                continue;
            }
            described.push(match &d.scheme {
                crate::partition::PartitionScheme::Time(t) => {
                    let last = t.last(now);
                    let last = if t.end.is_some_and(|e| e <= last) {
                        t.key(last)
                    } else {
                        format!("{} (the latest complete {})", t.key(last), t.grain.unit())
                    };
                    format!(
                        "`{}`: {} from {} to {last}",
                        d.name,
                        t.grain.units(),
                        t.key(t.start)
                    )
                }
                crate::partition::PartitionScheme::Static { keys } => {
                    format!("`{}`: {}", d.name, crate::manifest::ticked(keys))
                }
            });
        }
    }
    if described.is_empty() {
        return "the selected tasks are unpartitioned: their one partition is `all`".into();
    }
    format!(
        "partitions are {}; a task of several dimensions takes keys joined by `|`",
        described.join("; ")
    )
}
