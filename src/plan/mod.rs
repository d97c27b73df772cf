//! Plans: which task instances a command covers, in what order, in which
//! pool, and how long that should take. Planning has no side effects; a dry
//! run is a plan rendered.
//!
//! The instance graph is never materialised as edges: instance `(t, i)` is
//! task `t` at the `i`-th selected key of its scheme, and its predecessors
//! are `(d, i)` for each upstream task `d` in the plan plus `(t, i-1)` when
//! `t` depends on its past. That keeps 730,000 instances to a few vectors.

pub mod cost;
pub mod partitions;
pub mod render;

use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use jiff::civil::Date;
use thiserror::Error;

use crate::manifest::{Backfill, Manifest};

/// What a command covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The latest complete partition of each scheme.
    Latest,
    /// Explicit partition keys.
    Partitions(Vec<String>),
    /// A declared backfill.
    Backfill(String),
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
    /// Partition scheme.
    pub scheme: String,
    /// Selected keys, shared by every task of the scheme.
    pub keys: Arc<Vec<String>>,
    /// Indices (into `Plan::tasks`) of upstream tasks in the plan.
    pub upstream: Vec<usize>,
    /// Indices of downstream tasks in the plan.
    pub downstream: Vec<usize>,
    /// Serialises this task's partitions.
    pub depends_on_past: bool,
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
    /// Plans `scope` over every task of the manifest.
    pub fn build(manifest: &Manifest, scope: &Scope, today: Date) -> Result<Plan, PlanError> {
        let all: Vec<&str> = manifest.tasks.keys().map(String::as_str).collect();
        Plan::build_for(manifest, scope, &all, today)
    }

    /// Plans `scope` over the named tasks only.
    pub fn build_for(
        manifest: &Manifest,
        scope: &Scope,
        task_names: &[&str],
        today: Date,
    ) -> Result<Plan, PlanError> {
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
            _ => None,
        };
        let selected: Vec<&str> = match &backfill {
            Some(b) => b
                .tasks
                .iter()
                .map(String::as_str)
                .filter(|t| task_names.contains(t))
                .collect(),
            None => task_names.to_vec(),
        };
        // Keys per scheme, computed once and shared.
        let mut scheme_keys: IndexMap<String, Arc<Vec<String>>> = IndexMap::new();
        for name in &selected {
            let scheme_name = &manifest.tasks[*name].partitioned_by;
            if scheme_keys.contains_key(scheme_name) {
                continue;
            }
            let scheme = &manifest.partitions[scheme_name];
            let keys = match (scope, &backfill) {
                (_, Some(b)) => partitions::range(scheme, &b.from, &b.to, today),
                (Scope::Latest, _) => partitions::latest(scheme, today),
                (Scope::Partitions(keys), _) => keys
                    .iter()
                    .filter(|k| partitions::contains(scheme, k, today))
                    .cloned()
                    .collect(),
                (Scope::Backfill(_), None) => unreachable!("a backfill scope resolved above"),
            };
            scheme_keys.insert(scheme_name.clone(), Arc::new(keys));
        }
        if let Scope::Partitions(keys) = scope {
            for key in keys {
                if !scheme_keys.values().any(|ks| ks.contains(key)) {
                    return Err(PlanError::UnknownPartition {
                        key: key.clone(),
                        help: partition_help(manifest, &scheme_keys, today),
                    });
                }
            }
        }
        let order = topological(manifest, &selected);
        let position: std::collections::HashMap<&str, usize> =
            order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut tasks: Vec<PlannedTask> = order
            .iter()
            .map(|name| {
                let task = &manifest.tasks[*name];
                PlannedTask {
                    name: task.name.clone(),
                    pool: backfill
                        .as_ref()
                        .map_or_else(|| task.pool.clone(), |b| b.pool.clone()),
                    retry: task.retry.clone(),
                    scheme: task.partitioned_by.clone(),
                    keys: scheme_keys[&task.partitioned_by].clone(),
                    upstream: task
                        .depends_on
                        .iter()
                        .filter_map(|d| position.get(d.as_str()).copied())
                        .collect(),
                    downstream: Vec::new(),
                    depends_on_past: task.depends_on_past,
                    expected_duration: task.expected_duration,
                }
            })
            .collect();
        for t in 0..tasks.len() {
            for u in tasks[t].upstream.clone() {
                tasks[u].downstream.push(t);
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

    /// Number of predecessors of each instance, in id order.
    pub fn in_degrees(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.instance_count());
        for task in &self.tasks {
            let upstream = u32::try_from(task.upstream.len()).unwrap_or(u32::MAX);
            for i in 0..task.keys.len() {
                out.push(upstream + u32::from(task.depends_on_past && i > 0));
            }
        }
        out
    }

    /// Calls `f` for each successor of instance `(t, i)`.
    pub fn for_each_successor(&self, t: usize, i: usize, mut f: impl FnMut(usize)) {
        let task = &self.tasks[t];
        for &d in &task.downstream {
            f(self.instance(d, i));
        }
        if task.depends_on_past && i + 1 < task.keys.len() {
            f(self.instance(t, i + 1));
        }
    }
}

/// Kahn's algorithm with ties broken by declaration order, so plans are stable.
fn topological<'m>(manifest: &'m Manifest, selected: &[&'m str]) -> Vec<&'m str> {
    use std::collections::{BTreeSet, HashMap};
    let index: HashMap<&str, usize> = manifest
        .tasks
        .keys()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let in_plan = |n: &str| selected.contains(&n);
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

fn partition_help(
    manifest: &Manifest,
    schemes: &IndexMap<String, Arc<Vec<String>>>,
    today: Date,
) -> String {
    let described: Vec<String> = schemes
        .keys()
        .map(|name| match &manifest.partitions[name] {
            crate::manifest::PartitionScheme::Daily { start, end } => {
                let last = end.map_or_else(
                    || {
                        format!(
                            "{} (the latest complete day)",
                            today.yesterday().unwrap_or(today)
                        )
                    },
                    |e| e.to_string(),
                );
                format!("`{name}`: days from {start} to {last}")
            }
            crate::manifest::PartitionScheme::Static { keys } => {
                format!("`{name}`: {}", crate::manifest::ticked(keys))
            }
        })
        .collect();
    format!("partitions are {}", described.join("; "))
}
