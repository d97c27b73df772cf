//! Repair as one governed step: the rebuild of exactly a generation's
//! impact. The set is the generation's own partition while that generation
//! is still the visible one, and every visible publication built from it
//! ([`super::impact::Impact::visible`]); nothing else. It runs as a forced
//! backfill over exactly those instances (`plan::Scope::Repair`), in
//! dependency order and one pool, so an interrupted repair resumes like a
//! forced backfill: what was published since it started is not rebuilt.
//! Forced, because an uncertified or suspect publication must be replaced
//! even when its inputs read the same.

use std::collections::{HashMap, HashSet};

use super::impact::Impact;

/// The instances a repair of `found` rebuilds, as (task, keys) in
/// dependency order: the root's (published by `producer`, when
/// `root_visible`) first.
pub fn rebuild_set(
    found: &Impact,
    producer: &str,
    root_visible: bool,
) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    // Hashed: an impact can hold every partition of a warehouse.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let root = root_visible.then(|| (producer.to_string(), found.root.partition.clone()));
    let rest = found
        .visible()
        .map(|b| (b.task.clone(), b.id.partition.clone()));
    for (task, key) in root.into_iter().chain(rest) {
        if !seen.insert((task.clone(), key.clone())) {
            continue;
        }
        let i = *index.entry(task.clone()).or_insert_with(|| {
            out.push((task, Vec::new()));
            out.len() - 1
        });
        out[i].1.push(key);
    }
    out
}
