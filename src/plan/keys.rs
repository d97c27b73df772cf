//! The keys a scope selects for each task.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;

use super::scope::Scope;
use super::{partition_help, partitions, PlanError};
use crate::manifest::{Backfill, Manifest};

/// Selected keys per task in `order`: the scope's keys for selected tasks
/// (tasks of the same dimensions share one list), none for the others.
pub(super) fn select_keys(
    manifest: &Manifest,
    scope: &Scope,
    backfill: Option<&Backfill>,
    order: &[&str],
    selected: &[&str],
    now: i64,
) -> Vec<Arc<Vec<String>>> {
    let selected_set: HashSet<&str> = selected.iter().copied().collect();
    let mut by_dims: HashMap<&[String], Arc<Vec<String>>> = HashMap::new();
    order
        .iter()
        .map(|name| {
            let task = &manifest.tasks[*name];
            if !selected_set.contains(name) {
                return Arc::new(Vec::new());
            }
            if let Scope::Repair { instances, .. } = scope {
                let mut keys: Vec<String> = instances
                    .iter()
                    .filter(|(t, _)| t == name)
                    .flat_map(|(_, keys)| keys.iter().cloned())
                    .collect();
                partitions::sort(&task.dims, &mut keys);
                keys.dedup();
                return Arc::new(keys);
            }
            by_dims
                .entry(task.partitioned_by.as_slice())
                .or_insert_with(|| {
                    Arc::new(match (scope, backfill) {
                        (_, Some(b)) => partitions::backfill(&task.dims, b, now),
                        (Scope::Latest, _) => partitions::latest(&task.dims, now),
                        (Scope::Partitions(given), _) => {
                            partitions::explicit(&task.dims, given, now)
                        }
                        (Scope::Backfill(_) | Scope::Range { .. } | Scope::Repair { .. }, None) => {
                            unreachable!(
                                "a backfill or range scope resolves before keys are selected"
                            )
                        }
                    })
                })
                .clone()
        })
        .collect()
}

/// `--from`/`--to` as the backfill they stand for: two ISO days (each
/// time scheme takes the periods the days touch), or two static keys.
pub(crate) fn range(
    manifest: &Manifest,
    from: &str,
    to: &str,
    selected: &[&str],
    now: i64,
) -> Result<Backfill, PlanError> {
    use crate::partition::time::parse_day;
    let bad = |why: &str| PlanError::BadRange {
        from: from.to_string(),
        to: to.to_string(),
        why: why.to_string(),
        help: partition_help(manifest, selected, now),
    };
    let days = match (parse_day(from), parse_day(to)) {
        (Some(a), Some(b)) if a <= b => Some((a, b)),
        (Some(_), Some(_)) => return Err(bad("runs backwards: swap --from and --to")),
        (None, None) => None,
        _ => return Err(bad("give two days (YYYY-MM-DD) or two static keys")),
    };
    if days.is_none() {
        // Two static keys, in declared order, of one scheme of the tasks.
        let mut found = false;
        for t in selected {
            for d in &manifest.tasks[*t].dims.0 {
                if let crate::partition::PartitionScheme::Static { keys } = &d.scheme {
                    let pos = |k: &str| keys.iter().position(|x| x == k);
                    match (pos(from), pos(to)) {
                        (Some(a), Some(b)) if a <= b => found = true,
                        (Some(_), Some(_)) => {
                            return Err(bad("runs backwards: swap --from and --to"))
                        }
                        _ => {}
                    }
                }
            }
        }
        if !found {
            return Err(bad(
                "not two days (YYYY-MM-DD) nor two keys of one static scheme of the selected tasks",
            ));
        }
    }
    Ok(Backfill {
        name: "ad hoc range".into(),
        from: from.to_string(),
        to: to.to_string(),
        pool: String::new(),
        tasks: selected.iter().map(|t| t.to_string()).collect(),
        reason: String::new(),
        days,
        keys: IndexMap::new(),
    })
}
