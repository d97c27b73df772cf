//! The per-task summary of `status`: every instance the overview names in
//! one state, counted per task, problems oldest first (`weir status`'s
//! summary and `--json`'s `summary` field, the console's `/api/status`).
//!
//! An instance has one state, the first that applies in this order: an
//! unreadable commit log, an operator's marker (HELD, QUARANTINED,
//! ABANDONED, RELEASED: what is being done about it), LATE, WAITING,
//! MISSING, STALE, PUBLISHED. Every state but PUBLISHED is a problem.
//! A problem is as old as the moment it began: a LATE partition's SLA
//! deadline, a marker's time, otherwise the partition's period end (the
//! earliest of these when several apply); partitions without a period
//! (static keys) come after those that have one.

use std::collections::{BTreeMap, HashMap};

use serde_json::json;

use super::Overview;
use crate::manifest::Manifest;

/// A state `--state` selects, in the order an instance takes the first
/// that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub(crate) enum InstanceState {
    /// Its commit log cannot be read.
    Unreadable,
    /// Waits for an operator (`weir retry` or `weir abandon`).
    Held,
    /// Not retried on the same inputs and code.
    Quarantined,
    /// Given up by an operator.
    Abandoned,
    /// A quarantine the next run releases (its inputs or code changed).
    Released,
    /// Not published by its SLA deadline.
    Late,
    /// Not published, its external input not there yet.
    Waiting,
    /// Expected, not published.
    Missing,
    /// Published from an upstream generation or code that moved on.
    Stale,
    /// Published and current.
    Published,
}

impl InstanceState {
    pub(crate) const ALL: [InstanceState; 10] = [
        InstanceState::Unreadable,
        InstanceState::Held,
        InstanceState::Quarantined,
        InstanceState::Abandoned,
        InstanceState::Released,
        InstanceState::Late,
        InstanceState::Waiting,
        InstanceState::Missing,
        InstanceState::Stale,
        InstanceState::Published,
    ];

    /// As `status` prints it on a problem's line (`LATE`).
    pub(crate) fn upper(self) -> &'static str {
        match self {
            Self::Unreadable => "UNREADABLE",
            Self::Held => "HELD",
            Self::Quarantined => "QUARANTINED",
            Self::Abandoned => "ABANDONED",
            Self::Released => "RELEASED",
            Self::Late => "LATE",
            Self::Waiting => "WAITING",
            Self::Missing => "MISSING",
            Self::Stale => "STALE",
            Self::Published => "PUBLISHED",
        }
    }

    /// As a column and a JSON key (`late`).
    pub(crate) fn lower(self) -> &'static str {
        match self {
            Self::Unreadable => "unreadable",
            Self::Held => "held",
            Self::Quarantined => "quarantined",
            Self::Abandoned => "abandoned",
            Self::Released => "released",
            Self::Late => "late",
            Self::Waiting => "waiting",
            Self::Missing => "missing",
            Self::Stale => "stale",
            Self::Published => "published",
        }
    }
}

/// One task instance as the summary sees it.
pub(crate) struct Instance {
    pub(crate) task: String,
    pub(crate) partition: String,
    pub(crate) state: InstanceState,
    /// When the problem began (seconds), if it has a time.
    pub(crate) since: Option<i64>,
    pub(crate) detail: String,
}

/// One state an instance is in, with when it began and its detail.
type Candidate = (InstanceState, Option<i64>, String);

fn seconds(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// Every instance the overview names, with its one state; problems first,
/// oldest first, then the published ones.
pub(crate) fn instances(manifest: &Manifest, overview: &Overview) -> Vec<Instance> {
    let mut found = Candidates {
        manifest,
        found: HashMap::new(),
    };
    found.progress(overview);
    found.decisions(overview);
    found.stale_and_unreadable(overview);
    let mut out: Vec<Instance> = found
        .found
        .into_iter()
        .filter_map(|((task, partition), candidates)| one_state(task, partition, candidates))
        .collect();
    sort_instances(manifest, &mut out);
    out
}

/// Every state each instance is in, in the order the overview says them.
struct Candidates<'m> {
    manifest: &'m Manifest,
    /// (task, partition) → the candidate states with their time and detail.
    found: HashMap<(String, String), Vec<Candidate>>,
}

impl Candidates<'_> {
    fn add(
        &mut self,
        task: &str,
        partition: &str,
        state: InstanceState,
        since: Option<i64>,
        detail: String,
    ) {
        self.found
            .entry((task.to_string(), partition.to_string()))
            .or_default()
            .push((state, since, detail));
    }

    /// When a partition's interval ends (a problem without a time of its
    /// own began then).
    fn end(&self, task: &str, partition: &str) -> Option<i64> {
        self.manifest
            .tasks
            .get(task)
            .and_then(|t| t.dims.interval_end(partition))
    }

    /// Published, missing or late, and waiting instances.
    fn progress(&mut self, overview: &Overview) {
        for (task, record) in &overview.published {
            self.add(
                task,
                &record.partition,
                InstanceState::Published,
                None,
                format!("generation {}", record.generation.get()),
            );
        }
        for m in &overview.missing {
            let (state, since, detail) = match &m.late_since {
                Some(deadline) => (
                    InstanceState::Late,
                    seconds(deadline),
                    format!("not published by its SLA deadline {deadline}"),
                ),
                None => (
                    InstanceState::Missing,
                    self.end(&m.task, &m.partition),
                    "expected, not published".to_string(),
                ),
            };
            self.add(&m.task, &m.partition, state, since, detail);
        }
        for (task, partition, detail) in &overview.waiting {
            self.add(
                task,
                partition,
                InstanceState::Waiting,
                self.end(task, partition),
                detail.clone(),
            );
        }
    }

    /// Instances an operator or the engine decided about: marked,
    /// abandoned, released from quarantine.
    fn decisions(&mut self, overview: &Overview) {
        for m in &overview.marks {
            let state = match m.mark {
                crate::store::marks::Mark::Held => InstanceState::Held,
                crate::store::marks::Mark::Quarantined => InstanceState::Quarantined,
                // Accepted gaps are listed with the abandoned (an operator's
                // decision, never paged on).
                crate::store::marks::Mark::Abandoned | crate::store::marks::Mark::Accepted => {
                    InstanceState::Abandoned
                }
            };
            self.add(
                &m.task,
                &m.partition,
                state,
                seconds(&m.since),
                m.reason.clone(),
            );
        }
        for m in &overview.abandoned {
            self.add(
                &m.task,
                &m.partition,
                InstanceState::Abandoned,
                seconds(&m.since),
                m.reason.clone(),
            );
        }
        for (m, changed) in &overview.released {
            self.add(
                &m.task,
                &m.partition,
                InstanceState::Released,
                seconds(&m.since),
                format!(
                    "was quarantined ({}), but {changed}: will rerun on the next run",
                    m.reason
                ),
            );
        }
    }

    /// Stale publications and unreadable commit logs.
    fn stale_and_unreadable(&mut self, overview: &Overview) {
        let manifest = self.manifest;
        for st in &overview.stale {
            self.add(
                &st.task,
                &st.partition,
                InstanceState::Stale,
                self.end(&st.task, &st.partition),
                st.detail.clone(),
            );
        }
        for (dataset, partition, error) in &overview.unreadable {
            if let Some(task) = manifest.producer(dataset) {
                self.add(
                    &task.name,
                    partition,
                    InstanceState::Unreadable,
                    None,
                    format!("cannot read its commit log: {error}"),
                );
            }
        }
    }
}

/// An instance's one state: the first of its candidates, since when the
/// first of its problems began.
fn one_state(task: String, partition: String, mut candidates: Vec<Candidate>) -> Option<Instance> {
    candidates.sort_by_key(|(state, _, _)| *state);
    // Its problem began with the first of its states that did (a
    // partition held today was LATE since its deadline).
    let began = candidates
        .iter()
        .filter(|(state, _, _)| *state != InstanceState::Published)
        .filter_map(|(_, since, _)| *since)
        .min();
    let (state, since, detail) = candidates.into_iter().next()?;
    let since = began.or(since);
    Some(Instance {
        task,
        partition,
        state,
        since,
        detail,
    })
}

/// Problems first, oldest first, then the published; within a state by
/// the manifest's task order and the partitions' order.
fn sort_instances(manifest: &Manifest, out: &mut [Instance]) {
    let task_index: HashMap<&str, usize> = manifest
        .tasks
        .keys()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    out.sort_by_cached_key(|i| {
        let order = manifest
            .tasks
            .get(&i.task)
            .map(|t| crate::plan::partitions::order(&t.dims, &i.partition))
            .unwrap_or_default();
        (
            i.state == InstanceState::Published,
            i.since.is_none(),
            i.since,
            i.state,
            task_index.get(i.task.as_str()).copied(),
            order,
            i.partition.clone(),
        )
    });
}

/// Counts by state of one task's instances, and its oldest problem.
pub(crate) struct TaskCounts<'i> {
    pub(crate) total: usize,
    pub(crate) by_state: BTreeMap<InstanceState, usize>,
    pub(crate) oldest: Option<&'i Instance>,
}

pub(crate) fn per_task<'i>(
    manifest: &Manifest,
    all: &'i [Instance],
) -> Vec<(String, TaskCounts<'i>)> {
    let mut out: Vec<(String, TaskCounts)> = Vec::new();
    for task in manifest.tasks.keys() {
        let mut counts = TaskCounts {
            total: 0,
            by_state: BTreeMap::new(),
            oldest: None,
        };
        // `all` is sorted oldest problem first.
        for i in all.iter().filter(|i| &i.task == task) {
            counts.total += 1;
            *counts.by_state.entry(i.state).or_default() += 1;
            if counts.oldest.is_none() && i.state != InstanceState::Published {
                counts.oldest = Some(i);
            }
        }
        if counts.total > 0 {
            out.push((task.clone(), counts));
        }
    }
    out
}

/// The `summary` field of `status --json`: per task, counts by state
/// (every state, zeros included) and the oldest problem; every problem,
/// oldest first.
pub(crate) fn json(manifest: &Manifest, overview: &Overview) -> serde_json::Value {
    let all = instances(manifest, overview);
    let problem = |i: &Instance| {
        json!({
            "state": i.state.upper(),
            "task": i.task,
            "partition": i.partition,
            "since": i.since.and_then(|s| jiff::Timestamp::from_second(s).ok()).map(|t| t.to_string()),
            "detail": i.detail,
        })
    };
    let tasks: Vec<serde_json::Value> = per_task(manifest, &all)
        .iter()
        .map(|(task, c)| {
            let states: serde_json::Map<String, serde_json::Value> = InstanceState::ALL
                .iter()
                .map(|s| {
                    (
                        s.lower().to_string(),
                        json!(c.by_state.get(s).copied().unwrap_or(0)),
                    )
                })
                .collect();
            json!({
                "task": task,
                "partitions": c.total,
                "states": states,
                "oldest_problem": c.oldest.map(problem),
            })
        })
        .collect();
    json!({
        "tasks": tasks,
        "problems": all
            .iter()
            .filter(|i| i.state != InstanceState::Published)
            .map(problem)
            .collect::<Vec<_>>(),
    })
}
