//! Task selectors, as dbt spells them: `NAME` (exactly that task), `NAME+`
//! (it and everything downstream), `+NAME` (it and everything upstream),
//! `+NAME+` (both). Every selected task is run under the currency test
//! (`ALREADY_PUBLISHED` when its publication is current); upstream
//! instances that no selector names are added only when not published.

use std::collections::HashSet;

use crate::manifest::Manifest;

use super::PlanError;

/// The tasks `specs` select, in manifest order; every task when `specs` is
/// empty. An unknown name is refused with a suggestion.
pub fn select<'m>(manifest: &'m Manifest, specs: &[String]) -> Result<Vec<&'m str>, PlanError> {
    if specs.is_empty() {
        return Ok(manifest.tasks.keys().map(String::as_str).collect());
    }
    // Who reads each task's output, built once: linear in the edges.
    let mut children: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    for (name, task) in &manifest.tasks {
        for up in &task.depends_on {
            children.entry(up.as_str()).or_default().push(name.as_str());
        }
    }
    let mut keep: HashSet<&str> = HashSet::new();
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
        keep.insert(key.as_str());
        if up {
            walk(key, &mut keep, |t| {
                manifest.tasks[t]
                    .depends_on
                    .iter()
                    .map(String::as_str)
                    .collect()
            });
        }
        if down {
            walk(key, &mut keep, |t| {
                children.get(t).cloned().unwrap_or_default()
            });
        }
    }
    Ok(manifest
        .tasks
        .keys()
        .map(String::as_str)
        .filter(|t| keep.contains(t))
        .collect())
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
