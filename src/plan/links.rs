//! How instances depend on each other: the upstream keys an instance
//! needs, the links kept between planned tasks, and the upstream
//! partitions added because nobody selected them and they are unpublished.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{partitions, PlanError};
use crate::manifest::{InputSource, Manifest};
use crate::partition::{map_keys, Dims, PartitionKey, Shift};

/// Downstream first, adds to each upstream task the keys a planned instance
/// needs that nobody selected and that are not published; returns, per
/// task, the indices of its added keys.
pub(super) fn add_unpublished(
    manifest: &Manifest,
    order: &[&str],
    keys: &mut [Arc<Vec<String>>],
    published: &dyn Fn(&str, &str) -> bool,
    now: i64,
) -> Result<Vec<HashSet<u32>>, PlanError> {
    let position = positions(order);
    let mut added: Vec<HashSet<u32>> = vec![HashSet::new(); order.len()];
    for t in (0..order.len()).rev() {
        let task = &manifest.tasks[order[t]];
        for (u, shifts) in upstream_in(manifest, &position, order[t]) {
            let up = &manifest.tasks[order[u]];
            if identity(&task.dims, &up.dims, &shifts) && Arc::ptr_eq(&keys[t], &keys[u]) {
                continue;
            }
            let have: HashSet<&str> = keys[u].iter().map(String::as_str).collect();
            let mut seen: HashSet<String> = HashSet::new();
            let mut extra: Vec<String> = Vec::new();
            for key in keys[t].iter() {
                for k in needed(task, key, up, &shifts, now)? {
                    let k = k.into_string();
                    if !have.contains(k.as_str())
                        && seen.insert(k.clone())
                        && !published(&up.output.dataset, &k)
                    {
                        extra.push(k);
                    }
                }
            }
            if extra.is_empty() {
                continue;
            }
            let mut all: Vec<String> = keys[u]
                .iter()
                .cloned()
                .chain(extra.iter().cloned())
                .collect();
            partitions::sort(&up.dims, &mut all);
            let is_extra: HashSet<&str> = extra.iter().map(String::as_str).collect();
            let before: HashSet<&str> = added[u]
                .iter()
                .map(|i| keys[u][*i as usize].as_str())
                .collect();
            let now_added: HashSet<u32> = all
                .iter()
                .enumerate()
                .filter(|(_, k)| is_extra.contains(k.as_str()) || before.contains(k.as_str()))
                .map(|(i, _)| i as u32)
                .collect();
            added[u] = now_added;
            keys[u] = Arc::new(all);
        }
    }
    Ok(added)
}

/// How `task`'s instances (`keys`) depend on `up`'s (`up_keys`).
pub(super) fn link(
    task: &crate::manifest::Task,
    keys: &Arc<Vec<String>>,
    up: &crate::manifest::Task,
    up_keys: &Arc<Vec<String>>,
    shifts: &[Shift],
    now: i64,
) -> Result<Link, PlanError> {
    if identity(&task.dims, &up.dims, shifts) && Arc::ptr_eq(keys, up_keys) {
        return Ok(Link::Identity);
    }
    let index: HashMap<&str, u32> = up_keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i as u32))
        .collect();
    let mut lists = Vec::with_capacity(keys.len());
    for key in keys.iter() {
        // `needed` yields each key once.
        let row: Vec<u32> = needed(task, key, up, shifts, now)?
            .iter()
            .filter_map(|k| index.get(k.as_str()).copied())
            .collect();
        lists.push(row);
    }
    Ok(Link::Mapped(Rows::from_lists(&lists)))
}

/// With `depends_on_past`: each instance's previous-key instance, and the
/// reverse; empty otherwise.
pub(super) fn past_links(
    task: &crate::manifest::Task,
    keys: &[String],
) -> (Vec<Option<u32>>, Vec<Option<u32>>) {
    if !task.depends_on_past {
        return (Vec::new(), Vec::new());
    }
    let index: HashMap<&str, u32> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i as u32))
        .collect();
    let past: Vec<Option<u32>> = keys
        .iter()
        .map(|k| {
            task.dims
                .previous(k)
                .and_then(|p| index.get(p.as_str()).copied())
        })
        .collect();
    let mut next = vec![None; keys.len()];
    for (i, p) in past.iter().enumerate() {
        if let Some(p) = p {
            next[*p as usize] = Some(i as u32);
        }
    }
    (past, next)
}

/// [`super::PlannedTask::batches`]: chunks of up to the task's batch size
/// of consecutive keys (each key's previous is the key before it).
pub(super) fn batches(task: &crate::manifest::Task, keys: &[String]) -> Vec<u32> {
    let Some(size) = task.batch else {
        return Vec::new();
    };
    let mut first = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let follows = i > 0
            && (i - first[i - 1] as usize) < size as usize
            && task.dims.previous(key).as_deref() == Some(keys[i - 1].as_str());
        first.push(if follows { first[i - 1] } else { i as u32 });
    }
    first
}

pub(super) fn positions<'m>(order: &[&'m str]) -> HashMap<&'m str, usize> {
    order.iter().enumerate().map(|(i, n)| (*n, i)).collect()
}

/// Upstream tasks of `name` in the plan, with the overrides of the inputs
/// that read them (`depends_on` alone: no override).
pub(super) fn upstream_in(
    manifest: &Manifest,
    position: &HashMap<&str, usize>,
    name: &str,
) -> Vec<(usize, Vec<Shift>)> {
    let task = &manifest.tasks[name];
    task.depends_on
        .iter()
        .filter_map(|d| Some((*position.get(d.as_str())?, shifts_of(task, d))))
        .collect()
}

/// Whether partition `key` of `dataset` owes no upstream work: it is
/// published, or an operator accepted it as a gap (`ops::decide::accept`).
pub fn settled(
    manifest: &Manifest,
    warehouse: &crate::store::Warehouse,
    dataset: &str,
    key: &str,
) -> bool {
    matches!(warehouse.partition(dataset, key).latest(), Ok(Some(_)))
        || manifest
            .producer(dataset)
            .is_some_and(|task| crate::store::marks::is_accepted(warehouse, &task.name, key))
}

/// The overrides of `task`'s inputs read from `upstream`; none for a bare
/// `depends_on`.
pub fn shifts_of(task: &crate::manifest::Task, upstream: &str) -> Vec<Shift> {
    let mut shifts: Vec<Shift> = task
        .inputs
        .iter()
        .filter(|i| i.source == InputSource::Task(upstream.to_string()))
        .map(|i| i.shift)
        .collect();
    if shifts.is_empty() {
        shifts.push(Shift::NONE);
    }
    let mut unique: Vec<Shift> = Vec::with_capacity(shifts.len());
    for s in shifts {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    unique
}

/// Same dimensions and no override: key for key.
fn identity(down: &Dims, up: &Dims, shifts: &[Shift]) -> bool {
    down.names() == up.names() && shifts.iter().all(|s| s.is_none())
}

/// The union, in order, of the upstream keys `key` needs under each shift.
pub(super) fn needed(
    task: &crate::manifest::Task,
    key: &str,
    up: &crate::manifest::Task,
    shifts: &[Shift],
    now: i64,
) -> Result<Vec<PartitionKey>, PlanError> {
    if identity(&task.dims, &up.dims, shifts) {
        return Ok(vec![PartitionKey::new(key)]);
    }
    let mut out: Vec<PartitionKey> = Vec::new();
    let mut seen: HashSet<PartitionKey> = HashSet::new();
    for s in shifts {
        let keys =
            map_keys(&task.dims, key, &up.dims, *s, now).map_err(|why| PlanError::Mapping {
                task: task.name.clone(),
                key: key.to_string(),
                upstream: up.name.clone(),
                why: Box::new(why),
            })?;
        if shifts.len() == 1 {
            // One mapping never repeats a key.
            return Ok(keys);
        }
        out.extend(keys.into_iter().filter(|k| seen.insert(k.clone())));
    }
    Ok(out)
}

/// Index lists in compressed rows: row `i` is `targets[starts[i]..starts[i + 1]]`.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    starts: Vec<u32>,
    targets: Vec<u32>,
}

impl Rows {
    pub(super) fn from_lists(lists: &[Vec<u32>]) -> Rows {
        let mut rows = Rows {
            starts: Vec::with_capacity(lists.len() + 1),
            targets: Vec::new(),
        };
        rows.starts.push(0);
        for l in lists {
            rows.targets.extend_from_slice(l);
            rows.starts.push(rows.targets.len() as u32);
        }
        rows
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        match (self.starts.get(i), self.starts.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.targets[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// How a task's instances depend on one upstream task in the plan.
#[derive(Debug, Clone)]
pub enum Link {
    /// `(t, i)` needs `(u, i)`: same dimensions, same selected keys.
    Identity,
    /// `(t, i)` needs the upstream key indices of row `i`.
    Mapped(Rows),
}

/// One upstream task of a planned task.
#[derive(Debug, Clone)]
pub struct UpstreamLink {
    /// Index into `Plan::tasks`.
    pub task: usize,
    /// The inputs' overrides (`offset`, `window`); none for `depends_on`.
    pub shifts: Vec<Shift>,
    /// Which of its instances each of ours needs.
    pub link: Link,
}
