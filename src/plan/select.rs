//! Task selectors, as dbt spells them: `NAME` (exactly that task), `NAME+`
//! (it and everything downstream), `+NAME` (it and everything upstream),
//! `+NAME+` (both). Every selected task is run under the currency test
//! (`ALREADY_PUBLISHED` when its publication is current); upstream
//! instances that no selector names are added only when not published.
//! The tasks `NAME+` adds downstream take the partitions that read the
//! selected ones through the mappings ([`Selection::followers`]).

use std::collections::HashSet;

use crate::manifest::Manifest;

use super::PlanError;

/// The tasks `specs` select, in manifest order; every task when `specs` is
/// empty. An unknown name is refused with a suggestion.
pub fn select<'m>(manifest: &'m Manifest, specs: &[String]) -> Result<Vec<&'m str>, PlanError> {
    Ok(selection(manifest, specs)?.tasks)
}

/// What `--task` selectors select.
#[derive(Debug, Clone, Default)]
pub struct Selection<'m> {
    /// Every selected task, in manifest order.
    pub tasks: Vec<&'m str>,
    /// The tasks only a `NAME+` selected, as downstream of NAME: with
    /// explicit partitions, a range or a backfill, their partitions follow
    /// the mappings from the selected partitions upstream (an hour's day,
    /// week, month and trailing windows), besides the scope's own.
    pub followers: HashSet<&'m str>,
}

/// The tasks `specs` select, and which of them follow the mappings.
pub fn selection<'m>(manifest: &'m Manifest, specs: &[String]) -> Result<Selection<'m>, PlanError> {
    if specs.is_empty() {
        return Ok(Selection {
            tasks: manifest.tasks.keys().map(String::as_str).collect(),
            followers: HashSet::new(),
        });
    }
    // Who reads each task's output, built once: linear in the edges.
    let mut children: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    for (name, task) in &manifest.tasks {
        for up in &task.depends_on {
            children.entry(up.as_str()).or_default().push(name.as_str());
        }
    }
    // Named, or upstream of a named task: the scope's partitions.
    let mut named: HashSet<&str> = HashSet::new();
    let mut downstream: HashSet<&str> = HashSet::new();
    for spec in specs {
        let (up, rest) = match spec.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, spec.as_str()),
        };
        let (down, name) = match rest.strip_suffix('+') {
            Some(name) => (true, name),
            None => (false, rest),
        };
        let Some((key, _)) = manifest.tasks.get_key_value(name) else {
            return Err(PlanError::UnknownTask {
                name: name.to_string(),
                help: crate::manifest::unknown_task_help(manifest, name),
            });
        };
        named.insert(key.as_str());
        if up {
            walk(key, &mut named, |t| {
                manifest.tasks[t]
                    .depends_on
                    .iter()
                    .map(String::as_str)
                    .collect()
            });
        }
        if down {
            walk(key, &mut downstream, |t| {
                children.get(t).cloned().unwrap_or_default()
            });
        }
    }
    let followers: HashSet<&str> = downstream.difference(&named).copied().collect();
    Ok(Selection {
        tasks: manifest
            .tasks
            .keys()
            .map(String::as_str)
            .filter(|t| named.contains(t) || followers.contains(t))
            .collect(),
        followers,
    })
}

/// Adds to `keep` every task reachable from `start` by `next`.
fn walk<'m>(start: &'m str, keep: &mut HashSet<&'m str>, next: impl Fn(&'m str) -> Vec<&'m str>) {
    let mut stack = vec![start];
    let mut seen: HashSet<&str> = HashSet::new();
    while let Some(t) = stack.pop() {
        if seen.insert(t) {
            keep.insert(t);
            stack.extend(next(t));
        }
    }
}
