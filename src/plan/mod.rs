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

pub mod cost;
pub mod cutoff;
pub mod follow;
pub mod partitions;
pub mod render;
pub mod select;
pub mod stale;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use thiserror::Error;

use crate::manifest::{Backfill, InputSource, Manifest};
use crate::partition::dims::SEPARATOR;
use crate::partition::{map_keys, Dims, MapError, PartitionKey, Shift};

/// What a command covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The latest complete partition of each scheme.
    Latest,
    /// Explicit partition keys.
    Partitions(Vec<String>),
    /// A declared backfill.
    Backfill(String),
    /// Exactly these instances (`weir repair`), in the backfill's pool and
    /// under its name and reason: (task, keys) pairs.
    Repair {
        /// What it rebuilds, in words (runs are resumed by it).
        name: String,
        /// The pool every instance runs in.
        pool: String,
        /// Why.
        reason: String,
        /// The keys of each task.
        instances: Vec<(String, Vec<String>)>,
    },
    /// An ad-hoc range (`weir run --from A --to B`): the partitions a
    /// declared backfill over `from..=to` would cover, in the tasks' own pools.
    Range {
        /// First day (or static key).
        from: String,
        /// Last day (or static key).
        to: String,
    },
}

/// Index lists in compressed rows: row `i` is `targets[starts[i]..starts[i + 1]]`.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    starts: Vec<u32>,
    targets: Vec<u32>,
}

impl Rows {
    fn from_lists(lists: &[Vec<u32>]) -> Rows {
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
        for name in task_names {
            if !manifest.tasks.contains_key(*name) {
                return Err(PlanError::UnknownTask {
                    name: name.to_string(),
                    help: crate::manifest::unknown_task_help(manifest, name),
                });
            }
        }
        let backfill = match scope {
            Scope::Backfill(name) => {
                Some(manifest.backfills.get(name).cloned().ok_or_else(|| {
                    PlanError::UnknownBackfill {
                        name: name.clone(),
                        help: if manifest.backfills.is_empty() {
                            "the manifest declares no backfills; add a `[backfills.NAME]` table"
                                .into()
                        } else {
                            format!(
                                "declared backfills: {}",
                                crate::manifest::ticked(
                                    &manifest.backfills.keys().collect::<Vec<_>>()
                                )
                            )
                        },
                    }
                })?)
            }
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
        };
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
        // Sets, not scans: with 20,000 tasks a `Vec::contains` per edge
        // made planning quadratic.
        let mut closure: Vec<&str> = selected.clone();
        let mut in_closure: HashSet<&str> = selected.iter().copied().collect();
        let mut stack: Vec<&str> = selected.clone();
        while let Some(t) = stack.pop() {
            for d in &manifest.tasks[t].depends_on {
                if in_closure.insert(d.as_str()) {
                    closure.push(d);
                    stack.push(d);
                }
            }
        }
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
        if let Scope::Range { from, to } = scope {
            if keys.iter().all(|k| k.is_empty()) {
                return Err(PlanError::BadRange {
                    from: from.clone(),
                    to: to.clone(),
                    why: "covers no partition of the selected tasks".into(),
                    help: partition_help(manifest, &selected, now),
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
                        help: partition_help(manifest, &selected, now),
                    });
                }
                let selects = keys.iter().any(|ks| {
                    ks.iter()
                        .any(|k| k == key || k.split(SEPARATOR).any(|part| part == key))
                });
                if !selects {
                    return Err(selects_nothing(manifest, &selected, key, now));
                }
            }
        }
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
        let mut added: Vec<HashSet<u32>> = added
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
        let position = positions(&order);
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
                pool: backfill
                    .as_ref()
                    .map_or_else(|| task.pool.clone(), |b| b.pool.clone()),
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
            });
        }
        // The reverse of every link.
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
        let mut pools = IndexMap::new();
        for task in &tasks {
            pools
                .entry(task.pool.clone())
                .or_insert(manifest.pools[&task.pool].slots);
        }
        let mut offsets = Vec::with_capacity(tasks.len());
        let mut next = 0;
        for task in &tasks {
            offsets.push(next);
            next += task.keys.len();
        }
        Ok(Plan {
            pipeline: manifest.pipeline.name.clone(),
            code_version: manifest.pipeline.code_version.clone(),
            scope: scope.clone(),
            backfill,
            tasks,
            pools,
            offsets,
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

/// Selected keys per task in `order`: the scope's keys for selected tasks
/// (tasks of the same dimensions share one list), none for the others.
fn select_keys(
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

/// Downstream first, adds to each upstream task the keys a planned instance
/// needs that nobody selected and that are not published; returns, per
/// task, the indices of its added keys.
fn add_unpublished(
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
fn link(
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
fn past_links(
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

fn positions<'m>(order: &[&'m str]) -> HashMap<&'m str, usize> {
    order.iter().enumerate().map(|(i, n)| (*n, i)).collect()
}

/// Upstream tasks of `name` in the plan, with the overrides of the inputs
/// that read them (`depends_on` alone: no override).
fn upstream_in(
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
fn needed(
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

/// Kahn's algorithm with ties broken by declaration order, so plans are stable.
pub(crate) fn topological<'m>(manifest: &'m Manifest, selected: &[&'m str]) -> Vec<&'m str> {
    use std::collections::{BTreeSet, HashMap};
    let index: HashMap<&str, usize> = manifest
        .tasks
        .keys()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let selected_set: std::collections::HashSet<&str> = selected.iter().copied().collect();
    let in_plan = |n: &str| selected_set.contains(n);
    let mut indegree: HashMap<&str, usize> = HashMap::new();
    let mut downstream: HashMap<&str, Vec<&str>> = HashMap::new();
    for name in selected {
        let deps = manifest.tasks[*name]
            .depends_on
            .iter()
            .filter(|d| in_plan(d))
            .count();
        indegree.insert(name, deps);
        for d in &manifest.tasks[*name].depends_on {
            if in_plan(d) {
                downstream.entry(d.as_str()).or_default().push(name);
            }
        }
    }
    let mut ready: BTreeSet<(usize, &str)> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(n, _)| (index[n], *n))
        .collect();
    let mut order = Vec::with_capacity(selected.len());
    while let Some(first) = ready.pop_first() {
        order.push(first.1);
        for next in downstream.get(first.1).into_iter().flatten() {
            let d = indegree
                .get_mut(next)
                .expect("every downstream task is in the plan");
            *d -= 1;
            if *d == 0 {
                ready.insert((index[next], next));
            }
        }
    }
    order
}

/// The partitions the tasks of `order` take, for a help text: "partitions
/// are `daily`: days from 2026-09-20 to 2026-09-21; …".
/// Why `key`, a key of some dimension of the selected tasks, selected no
/// instance (the other dimensions of those tasks are time ones, and
/// `--partition` named no period), with a full key that would.
fn selects_nothing(manifest: &Manifest, selected: &[&str], key: &str, now: i64) -> PlanError {
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
