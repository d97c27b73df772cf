//! Selection that follows the mappings: `--task 'hourly+' --partition
//! 2026-11-15T10` selects the hour and every downstream partition that
//! reads it, through any mapping, transitively (its day, week and month,
//! the seven trailing windows that hold its day), not the hour's key in
//! schemes where it names nothing. The readers of a partition are the
//! mapping read backwards ([`crate::partition::readers`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::manifest::Manifest;
use crate::partition::readers;

use super::links::{positions, upstream_in};
use super::partitions;

/// In topological `order`, adds to each follower task's keys the
/// partitions that read a key selected (so far) of an upstream task in the
/// plan; returns, per task, why each added key is there ("reads `hourly`
/// 2026-11-15T10", the first selected partition found that it reads).
/// Keys the scope selected anyway are not named.
pub(super) fn follow(
    manifest: &Manifest,
    order: &[&str],
    followers: &HashSet<&str>,
    keys: &mut [Arc<Vec<String>>],
    now: i64,
) -> Vec<HashMap<String, String>> {
    let position = positions(order);
    let mut why: Vec<HashMap<String, String>> = vec![HashMap::new(); order.len()];
    for t in 0..order.len() {
        if !followers.contains(order[t]) {
            continue;
        }
        let task = &manifest.tasks[order[t]];
        let have: HashSet<&str> = keys[t].iter().map(String::as_str).collect();
        let mut found: HashMap<String, String> = HashMap::new();
        for (u, shifts) in upstream_in(manifest, &position, order[t]) {
            let up = &manifest.tasks[order[u]];
            for key in keys[u].iter() {
                for shift in &shifts {
                    for reader in readers(&task.dims, &up.dims, key, *shift, now) {
                        let reader = reader.into_string();
                        if !have.contains(reader.as_str()) {
                            found
                                .entry(reader)
                                .or_insert_with(|| format!("reads `{}` {key}", up.name));
                        }
                    }
                }
            }
        }
        if found.is_empty() {
            continue;
        }
        let mut all: Vec<String> = keys[t]
            .iter()
            .cloned()
            .chain(found.keys().cloned())
            .collect();
        partitions::sort(&task.dims, &mut all);
        keys[t] = Arc::new(all);
        why[t] = found;
    }
    why
}
