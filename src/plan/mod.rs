//! Plans: which task instances a command covers, in what order, in which
//! pool, and how long that should take. Planning has no side effects; a dry
//! run is a plan rendered.
//!
//! Instance `(t, i)` is task `t` at its `i`-th selected key. Tasks with the
//! same dimensions share one key list, and an upstream link between two such
//! tasks (same key, no offset) stays implicit: the predecessor of `(t, i)`
//! is `(u, i)`, which keeps 730,000 daily instances to a few vectors. Every
//! other link (a rollup, a fan-in, an offset …) is the mapping
//! (`crate::partition::map_keys`) evaluated once per downstream instance and
//! kept as compact index lists both ways, so readiness, ordering and the
//! cost simulation follow exactly the partitions that feed each other.
//!
//! Upstream partitions a selected instance needs but the command did not
//! select are added when they are not published (and named as added);
//! published ones are pinned, not rerun.

pub mod census;
pub mod contract;
pub mod cost;
pub mod cutoff;
mod error;
pub mod follow;
pub mod history;
mod keys;
mod links;
mod order;
pub mod partitions;
pub mod render;
mod scope;
pub mod select;
pub mod stale;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;

use crate::manifest::{Backfill, Manifest};
use crate::partition::dims::SEPARATOR;
use crate::partition::{Dims, PartitionKey};

pub(crate) use error::partition_help;
use error::selects_nothing;
pub use error::PlanError;
pub(crate) use keys::range;
use keys::select_keys;
use links::{add_unpublished, link, needed, past_links, positions, upstream_in};
pub use links::{settled, shifts_of, Link, Rows, UpstreamLink};
pub(crate) use order::topological;
pub use scope::Scope;

/// One task in a plan.
#[derive(Debug, Clone)]
pub struct PlannedTask {
    /// Task name.
    pub name: String,
    /// Pool its instances run in (a backfill's pool overrides the task's).
    pub pool: String,
    /// Retry class.
    pub retry: String,
    /// Executor name and kind (`local` unless the task names one).
    pub executor: (String, crate::manifest::ExecutorKind),
    /// What each attempt asks the executor for.
    pub resources: crate::manifest::Resources,
    /// Its dimensions described ("daily", "region × day", "unpartitioned").
    pub scheme: String,
    /// Its dimensions.
    pub dims: Dims,
    /// Selected keys in scheme order, shared by tasks of the same dimensions
    /// and selection.
    pub keys: Arc<Vec<String>>,
    /// Keys the command did not select but a selected instance needs and
    /// that are not published: they run only if still unpublished.
    pub added: HashSet<u32>,
    /// Keys a `NAME+` selector followed the mappings to (they read a
    /// selected partition upstream), with why: "reads `hourly`
    /// 2026-11-15T10".
    pub followed: HashMap<u32, String>,
    /// Upstream tasks in the plan and how their instances feed ours.
    pub upstream: Vec<UpstreamLink>,
    /// Downstream tasks in the plan and, for mapped links, which of their
    /// instances each of ours feeds.
    pub downstream: Vec<(usize, Link)>,
    /// Serialises this task's partitions.
    pub depends_on_past: bool,
    /// With `depends_on_past`: the index of each instance's previous key,
    /// when that is in the plan too.
    pub past: Vec<Option<u32>>,
    /// The reverse of `past`: the instance whose previous key is ours.
    pub next: Vec<Option<u32>>,
    /// Planning estimate of one attempt.
    pub expected_duration: Duration,
    /// For a task that runs batches (`batch = { max_partitions = N }`):
    /// the index of the first key of each key's batch, up to N consecutive
    /// keys (a gap starts a new one). Empty otherwise: one key each.
    pub batches: Vec<u32>,
}

/// A plan: tasks in topological order and their selected partitions.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Pipeline name.
    pub pipeline: String,
    /// Code version.
    pub code_version: String,
    /// What was asked for.
    pub scope: Scope,
    /// The backfill, when the scope is one.
    pub backfill: Option<Backfill>,
    /// Tasks in topological order (ties in declaration order).
    pub tasks: Vec<PlannedTask>,
    /// Slots of every pool the plan uses.
    pub pools: IndexMap<String, u32>,
    /// First instance id of each task: instance `(t, i)` is `offsets[t] + i`.
    pub offsets: Vec<usize>,
    /// When it was planned (seconds since the epoch): ends open ranges.
    pub now: i64,
}

impl Plan {
    /// Plans `scope` over every task of the manifest. `published(dataset,
    /// key)` says whether an upstream partition outside the selection is
    /// already published (then it is pinned, not added).
    pub fn build(
        manifest: &Manifest,
        scope: &Scope,
        now: i64,
        published: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Plan, PlanError> {
        let all: Vec<&str> = manifest.tasks.keys().map(String::as_str).collect();
        Plan::build_for(manifest, scope, &all, now, published)
    }

    /// Plans `scope` over the named tasks only.
    pub fn build_for(
        manifest: &Manifest,
        scope: &Scope,
        task_names: &[&str],
        now: i64,
        published: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Plan, PlanError> {
        let selection = select::Selection {
            tasks: task_names.to_vec(),
            followers: HashSet::new(),
        };
        Plan::build_selected(manifest, scope, &selection, now, published)
    }

    /// Plans `scope` over the tasks `--task` selectors selected: those a
    /// `NAME+` added downstream also take, unless the scope is the latest
    /// partitions, every partition that reads a selected one upstream
    /// ([`follow`]).
    pub fn build_selected(
        manifest: &Manifest,
        scope: &Scope,
        selection: &select::Selection<'_>,
        now: i64,
        published: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Plan, PlanError> {
        let task_names = selection.tasks.as_slice();
        known_tasks(manifest, task_names)?;
        let backfill = scope_backfill(manifest, scope)?;
        let selected: Vec<&str> = match &backfill {
            // A backfill's own tasks, and what a `NAME+` follows from them.
            Some(b) => task_names
                .iter()
                .copied()
                .filter(|t| b.tasks.iter().any(|b| b == t) || selection.followers.contains(t))
                .collect(),
            None => task_names.to_vec(),
        };
        // Upstream tasks of the selected ones take part with no key of their
        // own: only the partitions a selected instance needs and that are not
        // published are added to them.
        let closure = with_upstream(manifest, &selected);
        let selected_set: HashSet<&str> = selected.iter().copied().collect();
        let order = topological(manifest, &closure);
        // An ad-hoc range selects keys as a backfill over it would.
        let range = match scope {
            Scope::Range { from, to } => Some(range(manifest, from, to, &selected, now)?),
            _ => None,
        };
        let mut keys = select_keys(
            manifest,
            scope,
            backfill.as_ref().or(range.as_ref()),
            &order,
            &selected,
            now,
        );
        given_keys_select(manifest, scope, &keys, &selected, now)?;
        let mut followed = match scope {
            Scope::Latest => vec![HashMap::new(); order.len()],
            _ => follow::follow(manifest, &order, &selection.followers, &mut keys, now),
        };
        let added = add_unpublished(manifest, &order, &mut keys, published, now)?;
        // Unselected upstream tasks with nothing added leave the plan.
        let keep: Vec<bool> = (0..order.len())
            .map(|t| selected_set.contains(order[t]) || !keys[t].is_empty())
            .collect();
        let kept = |t: &usize| keep[*t];
        let order: Vec<&str> = (0..order.len()).filter(kept).map(|t| order[t]).collect();
        let keys: Vec<Arc<Vec<String>>> = (0..keys.len())
            .filter(kept)
            .map(|t| keys[t].clone())
            .collect();
        let added: Vec<HashSet<u32>> = added
            .into_iter()
            .enumerate()
            .filter(|(t, _)| keep[*t])
            .map(|(_, a)| a)
            .collect();
        followed = followed
            .into_iter()
            .enumerate()
            .filter(|(t, _)| keep[*t])
            .map(|(_, f)| f)
            .collect();
        let mut tasks = planned_tasks(
            manifest,
            &order,
            &keys,
            added,
            followed,
            backfill.as_ref(),
            now,
        )?;
        add_reverse_links(&mut tasks);
        Ok(Plan {
            pipeline: manifest.pipeline.name.clone(),
            code_version: manifest.pipeline.code_version.clone(),
            scope: scope.clone(),
            backfill,
            pools: pools_of(manifest, &tasks),
            offsets: offsets_of(&tasks),
            tasks,
            now,
        })
    }

    /// Number of task instances.
    pub fn instance_count(&self) -> usize {
        self.tasks.iter().map(|t| t.keys.len()).sum()
    }

    /// The (task index, key index) of an instance id.
    pub fn locate(&self, instance: usize) -> (usize, usize) {
        let t = self.offsets.partition_point(|&o| o <= instance) - 1;
        (t, instance - self.offsets[t])
    }

    /// Instance id of task `t` at key index `i`.
    pub fn instance(&self, t: usize, i: usize) -> usize {
        self.offsets[t] + i
    }

    /// The batch of instance `(t, i)`, named by its first member's
    /// instance id, if its task runs batches.
    pub fn batch_of(&self, t: usize, i: usize) -> Option<usize> {
        let first = *self.tasks[t].batches.get(i)?;
        Some(self.instance(t, first as usize))
    }

    /// How many attempts' commands task `t`'s instances take when each
    /// batch runs as one.
    pub fn launches(&self, t: usize) -> usize {
        let task = &self.tasks[t];
        match task.batches.is_empty() {
            true => task.keys.len(),
            false => (0..task.batches.len())
                .filter(|&i| task.batches[i] as usize == i)
                .count(),
        }
    }

    /// Whether instance `(t, i)` was added because a selected instance needs
    /// it and it is not published.
    pub fn is_added(&self, t: usize, i: usize) -> bool {
        self.tasks[t].added.contains(&(i as u32))
    }

    /// Why instance `(t, i)` is in the plan when a `NAME+` selector
    /// followed the mappings to it; `None` when the scope selected it.
    pub fn followed(&self, t: usize, i: usize) -> Option<&str> {
        self.tasks[t].followed.get(&(i as u32)).map(String::as_str)
    }

    /// Calls `f` with each in-plan predecessor of instance `(t, i)`.
    pub fn for_each_predecessor(&self, t: usize, i: usize, mut f: impl FnMut(usize)) {
        let task = &self.tasks[t];
        for up in &task.upstream {
            match &up.link {
                Link::Identity => f(self.instance(up.task, i)),
                Link::Mapped(rows) => {
                    for &j in rows.row(i) {
                        f(self.instance(up.task, j as usize));
                    }
                }
            }
        }
        if let Some(Some(p)) = task.past.get(i) {
            f(self.instance(t, *p as usize));
        }
    }

    /// Number of predecessors of each instance, in id order.
    pub fn in_degrees(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.instance_count());
        for (t, task) in self.tasks.iter().enumerate() {
            let identity = task
                .upstream
                .iter()
                .filter(|u| matches!(u.link, Link::Identity))
                .count() as u32;
            for i in 0..task.keys.len() {
                let mut n = identity;
                for up in &task.upstream {
                    if let Link::Mapped(rows) = &up.link {
                        n += rows.row(i).len() as u32;
                    }
                }
                if let Some(Some(_)) = self.tasks[t].past.get(i) {
                    n += 1;
                }
                out.push(n);
            }
        }
        out
    }

    /// Calls `f` for each successor of instance `(t, i)`.
    pub fn for_each_successor(&self, t: usize, i: usize, mut f: impl FnMut(usize)) {
        let task = &self.tasks[t];
        for (d, link) in &task.downstream {
            match link {
                Link::Identity => f(self.instance(*d, i)),
                Link::Mapped(rows) => {
                    for &j in rows.row(i) {
                        f(self.instance(*d, j as usize));
                    }
                }
            }
        }
        if let Some(Some(next)) = task.next.get(i) {
            f(self.instance(t, *next as usize));
        }
    }

    /// The upstream keys instance `(t, i)` needs from each upstream task in
    /// the plan or not: (upstream task, keys), in `depends_on` order.
    pub fn needs(
        &self,
        manifest: &Manifest,
        t: usize,
        i: usize,
    ) -> Vec<(String, Vec<PartitionKey>)> {
        let task = &manifest.tasks[&self.tasks[t].name];
        let key = &self.tasks[t].keys[i];
        task.depends_on
            .iter()
            .map(|d| {
                let up = &manifest.tasks[d];
                let shifts = shifts_of(task, d);
                (
                    d.clone(),
                    needed(task, key, up, &shifts, self.now).unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// Every task `--task` names exists.
fn known_tasks(manifest: &Manifest, task_names: &[&str]) -> Result<(), PlanError> {
    for name in task_names {
        if !manifest.tasks.contains_key(*name) {
            return Err(PlanError::UnknownTask {
                name: name.to_string(),
                help: crate::manifest::unknown_task_help(manifest, name),
            });
        }
    }
    Ok(())
}

/// The pools the planned tasks use, with their slots, in first use order.
fn pools_of(manifest: &Manifest, tasks: &[PlannedTask]) -> IndexMap<String, u32> {
    let mut pools = IndexMap::new();
    for task in tasks {
        pools
            .entry(task.pool.clone())
            .or_insert(manifest.pools[&task.pool].slots);
    }
    pools
}

/// Where each task's instances start in the plan's instance numbering.
fn offsets_of(tasks: &[PlannedTask]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(tasks.len());
    let mut next = 0;
    for task in tasks {
        offsets.push(next);
        next += task.keys.len();
    }
    offsets
}

/// The backfill a scope runs as: a named one, or a repair's instances as a
/// backfill of their own; `None` for other scopes.
fn scope_backfill(manifest: &Manifest, scope: &Scope) -> Result<Option<Backfill>, PlanError> {
    Ok(match scope {
        Scope::Backfill(name) => Some(manifest.backfills.get(name).cloned().ok_or_else(|| {
            PlanError::UnknownBackfill {
                name: name.clone(),
                help: if manifest.backfills.is_empty() {
                    "the manifest declares no backfills; add a `[backfills.NAME]` table".into()
                } else {
                    format!(
                        "declared backfills: {}",
                        crate::manifest::ticked(&manifest.backfills.keys().collect::<Vec<_>>())
                    )
                },
            }
        })?),
        Scope::Repair {
            name,
            pool,
            reason,
            instances,
        } => Some(Backfill {
            name: name.clone(),
            from: String::new(),
            to: String::new(),
            pool: pool.clone(),
            tasks: instances.iter().map(|(t, _)| t.clone()).collect(),
            reason: reason.clone(),
            days: None,
            keys: IndexMap::new(),
        }),
        _ => None,
    })
}

/// `selected` and every task upstream of them, selected first.
// Sets, not scans: with 20,000 tasks a `Vec::contains` per edge made
// planning quadratic.
fn with_upstream<'m>(manifest: &'m Manifest, selected: &[&'m str]) -> Vec<&'m str> {
    let mut closure: Vec<&str> = selected.to_vec();
    let mut in_closure: HashSet<&str> = selected.iter().copied().collect();
    let mut stack: Vec<&str> = selected.to_vec();
    while let Some(t) = stack.pop() {
        for d in &manifest.tasks[t].depends_on {
            if in_closure.insert(d.as_str()) {
                closure.push(d);
                stack.push(d);
            }
        }
    }
    closure
}

/// Refuses a range that covers nothing and a `--partition` key that names
/// no partition or selects no instance of the selected tasks.
fn given_keys_select(
    manifest: &Manifest,
    scope: &Scope,
    keys: &[Arc<Vec<String>>],
    selected: &[&str],
    now: i64,
) -> Result<(), PlanError> {
    if let Scope::Range { from, to } = scope {
        if keys.iter().all(|k| k.is_empty()) {
            return Err(PlanError::BadRange {
                from: from.clone(),
                to: to.clone(),
                why: "covers no partition of the selected tasks".into(),
                help: partition_help(manifest, selected, now),
            });
        }
    }
    if let Scope::Partitions(given) = scope {
        for key in given {
            if !keys.iter().any(|ks| ks.contains(key))
                && !selected.iter().any(|n| {
                    manifest.tasks[*n]
                        .dims
                        .0
                        .iter()
                        .any(|d| d.scheme.contains(key, now))
                })
            {
                return Err(PlanError::UnknownPartition {
                    key: key.clone(),
                    help: partition_help(manifest, selected, now),
                });
            }
            let selects = keys.iter().any(|ks| {
                ks.iter()
                    .any(|k| k == key || k.split(SEPARATOR).any(|part| part == key))
            });
            if !selects {
                return Err(selects_nothing(manifest, selected, key, now));
            }
        }
    }
    Ok(())
}

/// Gives every upstream task the reverse of each link to it.
fn add_reverse_links(tasks: &mut [PlannedTask]) {
    for t in 0..tasks.len() {
        for l in 0..tasks[t].upstream.len() {
            let u = tasks[t].upstream[l].task;
            let reverse = match &tasks[t].upstream[l].link {
                Link::Identity => Link::Identity,
                Link::Mapped(rows) => {
                    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); tasks[u].keys.len()];
                    for i in 0..tasks[t].keys.len() {
                        for &j in rows.row(i) {
                            lists[j as usize].push(i as u32);
                        }
                    }
                    Link::Mapped(Rows::from_lists(&lists))
                }
            };
            tasks[u].downstream.push((t, reverse));
        }
    }
}

/// The tasks of `order` planned with their keys, the keys added to them and
/// followed, and their links to the tasks before them.
fn planned_tasks(
    manifest: &Manifest,
    order: &[&str],
    keys: &[Arc<Vec<String>>],
    mut added: Vec<HashSet<u32>>,
    mut followed: Vec<HashMap<String, String>>,
    backfill: Option<&Backfill>,
    now: i64,
) -> Result<Vec<PlannedTask>, PlanError> {
    let position = positions(order);
    let mut tasks: Vec<PlannedTask> = Vec::with_capacity(order.len());
    for (t, name) in order.iter().enumerate() {
        let task = &manifest.tasks[*name];
        let mut upstream = Vec::new();
        for (u, shifts) in upstream_in(manifest, &position, name) {
            let up = &manifest.tasks[order[u]];
            let link = link(task, &keys[t], up, &keys[u], &shifts, now)?;
            upstream.push(UpstreamLink {
                task: u,
                shifts,
                link,
            });
        }
        let (past, next) = past_links(task, &keys[t]);
        tasks.push(PlannedTask {
            name: task.name.clone(),
            pool: backfill.map_or_else(|| task.pool.clone(), |b| b.pool.clone()),
            retry: task.retry.clone(),
            executor: (
                task.executor.clone(),
                manifest.executors[&task.executor].kind,
            ),
            resources: task.resources.clone(),
            scheme: task.dims.describe(),
            dims: task.dims.clone(),
            keys: keys[t].clone(),
            added: std::mem::take(&mut added[t]),
            followed: keys[t]
                .iter()
                .enumerate()
                .filter_map(|(i, k)| Some((i as u32, followed[t].remove(k)?)))
                .collect(),
            upstream,
            downstream: Vec::new(),
            depends_on_past: task.depends_on_past,
            past,
            next,
            expected_duration: task.expected_duration,
            batches: links::batches(task, &keys[t]),
        });
    }
    Ok(tasks)
}
