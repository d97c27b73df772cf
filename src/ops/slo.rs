//! SLO measurements (`weir slo`, the report's SLO section): per task and
//! per pool, over a window ending now, how well partitions meet their
//! task's `sla`, and what the attempts behind them cost.
//!
//! ```text
//!  period end ──(publication latency)──► first publication      (commit record, generation 1)
//!  QUEUED ──(queue wait)──► RUNNING ──(attempt duration)──► SUCCESS | FAILED   (event log)
//!  (a retry is QUEUED again once its backoff is over: each attempt waits)
//! ```
//!
//! - **The window.** `now` is [`crate::clock::now`] (so `WEIR_NOW` pins
//!   it). A time partition is in the window when its period ended within
//!   `(now - since, now]`; an attempt, queue wait or retry when its event
//!   was written at `now - since` or later. Static and unpartitioned
//!   partitions have no period end: they have attempts, never latency.
//! - **Within the SLA.** A partition in the window *met* its `sla` when its
//!   first publication (generation 1: a later republish or rollback does
//!   not undo lateness) came at most `sla` after its period ended; it
//!   *missed* when that publication came later, or when there is none and
//!   the deadline has passed; it is *pending* (counted nowhere) while
//!   unpublished with its deadline ahead. The share is met / (met + missed).
//! - **Error budget.** With `slo = s` the budget is `(1 - s) × (met +
//!   missed)` misses; `remaining = 1 - missed / budget` (1: untouched, 0:
//!   spent, below 0: overspent).
//! - **Percentiles are nearest-rank:** of n values sorted ascending, the
//!   p-th percentile is the value at 1-based rank ⌈p/100 × n⌉; a reported
//!   value was measured, never interpolated.
//! - **Pools.** A partition counts in its task's pool; an attempt in the
//!   pool it ran in (a backfill's own pool for a backfill run). A pool's
//!   budget is the sum of its tasks' budgets.
//!
//! Each run log the window can touch is read once (a run last written
//! before the window is skipped unread), and each partition's first commit
//! record once; [`measure`] is pure, so the report hands it the records it
//! already read.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::events::payload::Payload;
use crate::events::{EventRecord, State};
use crate::manifest::Manifest;
use crate::store::{StoreError, Warehouse};

/// The window measured: `since` back from `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Its end, ms since the epoch.
    pub now_ms: i64,
    /// Its length.
    pub since: Duration,
}

/// The default window: the last 7 days.
pub const DEFAULT_SINCE: Duration = Duration::from_secs(7 * 86_400);

impl Window {
    /// The window of length `since` ending at [`crate::clock::now`].
    pub fn ending_now(since: Duration) -> Window {
        Window {
            now_ms: crate::clock::now().saturating_mul(1000),
            since,
        }
    }

    /// Its start, ms since the epoch.
    pub fn start_ms(&self) -> i64 {
        self.now_ms
            .saturating_sub(i64::try_from(self.since.as_millis()).unwrap_or(i64::MAX))
    }
}

/// The nearest-rank `p`-th percentile (0 < p ≤ 100) of `sorted`
/// (ascending): the value at 1-based rank ⌈p/100 × n⌉; `None` when empty.
pub fn nearest_rank(sorted: &[i64], p: u32) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u64;
    // Integer ceiling: no float rounding at exact ranks (p50 of 4 is rank 2).
    let rank = (u64::from(p) * n).div_ceil(100).clamp(1, n);
    usize::try_from(rank - 1).ok().map(|i| sorted[i])
}

/// p50 and p95 of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Spread {
    /// How many values.
    pub count: usize,
    /// Nearest-rank median.
    pub p50: Option<i64>,
    /// Nearest-rank 95th percentile.
    pub p95: Option<i64>,
}

impl Spread {
    fn of(mut values: Vec<i64>) -> Spread {
        values.sort_unstable();
        Spread {
            count: values.len(),
            p50: nearest_rank(&values, 50),
            p95: nearest_rank(&values, 95),
        }
    }
}

/// Partitions in the window, by how they stand against the SLA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Partitions {
    /// Published within `sla` of their period's end.
    pub met: u64,
    /// Published later, or unpublished past the deadline.
    pub missed: u64,
    /// Unpublished, deadline ahead.
    pub pending: u64,
}

impl Partitions {
    /// met / (met + missed), if any partition is judged.
    pub fn within_sla(&self) -> Option<f64> {
        let judged = self.met + self.missed;
        (judged > 0).then(|| self.met as f64 / judged as f64)
    }
}

/// The error budget against an `slo` target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// Misses allowed in the window: Σ (1 - slo) × judged partitions.
    pub allowed_misses: f64,
    /// Misses so far.
    pub misses: u64,
    /// 1 - misses / allowed: 1 untouched, 0 spent, negative overspent;
    /// `None` when nothing was judged yet.
    pub remaining: Option<f64>,
}

impl Budget {
    fn new(allowed_misses: f64, misses: u64) -> Budget {
        Budget {
            allowed_misses,
            misses,
            remaining: (allowed_misses > 0.0).then(|| 1.0 - misses as f64 / allowed_misses),
        }
    }
}

/// The measurements of one task or one pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measures {
    /// Partitions against the SLA (zero without an `sla`).
    pub partitions: Partitions,
    /// Share published within the SLA; `None` without an `sla` or with
    /// nothing judged.
    pub within_sla: Option<f64>,
    /// Period end to first publication, ms.
    pub publication_latency_ms: Spread,
    /// RUNNING to the command's end, ms (as the attempt measured it).
    pub attempt_duration_ms: Spread,
    /// QUEUED to RUNNING of each attempt (backoff before a retry excluded), ms.
    pub queue_wait_ms: Spread,
    /// Instances queued in the window (one per run that queued it).
    pub instances: u64,
    /// RETRYING decisions in the window.
    pub retries: u64,
    /// retries / instances.
    pub retries_per_instance: Option<f64>,
    /// Against the `slo` target(s); `None` without one.
    pub error_budget: Option<Budget>,
}

/// One task's measurements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSlo {
    /// The task.
    pub task: String,
    /// Its pool.
    pub pool: String,
    /// Its `sla`, ms.
    pub sla_ms: Option<u64>,
    /// Its `slo` target.
    pub slo: Option<f64>,
    /// What was measured.
    #[serde(flatten)]
    pub measures: Measures,
}

/// One pool's measurements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolSlo {
    /// The pool.
    pub pool: String,
    /// What was measured.
    #[serde(flatten)]
    pub measures: Measures,
}

/// Everything `weir slo` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloReport {
    /// The window's end, RFC 3339.
    pub now: String,
    /// Its start, RFC 3339.
    pub since: String,
    /// Its length, ms.
    pub window_ms: u64,
    /// Tasks in manifest order.
    pub tasks: Vec<TaskSlo>,
    /// Pools in manifest order, those with a task or an attempt.
    pub pools: Vec<PoolSlo>,
    /// Runs started in the window from a signed plan (`--plan`), oldest
    /// first: the plan's estimate beside what the run took.
    pub signed_plans: Vec<SignedRun>,
}

/// A run of a signed plan: what the plan estimated, what it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignedRun {
    /// The run.
    pub run_id: String,
    /// The plan file, as given.
    pub file: String,
    /// The plan's wall time at p50.
    pub estimated_wall_ms: u64,
    /// The plan's wall time at p90.
    pub estimated_wall_p90_ms: u64,
    /// RUN_STARTED to RUN_FINISHED; `None` while it runs (or if it died).
    pub took_ms: Option<u64>,
}

/// The runs of signed plans that started in the window.
fn signed_runs(window: &Window, events: &[EventRecord]) -> Vec<SignedRun> {
    let start = window.start_ms();
    let finished: HashMap<&str, i64> = events
        .iter()
        .filter(|r| r.state == State::RunFinished)
        .filter_map(|r| Some((r.run_id.as_str(), ms(&r.ts)?)))
        .collect();
    events
        .iter()
        .filter(|r| r.state == State::RunStarted)
        .filter_map(|r| {
            let plan = r.data.get("plan")?;
            let at = ms(&r.ts)?;
            if at < start {
                return None;
            }
            Some(SignedRun {
                run_id: r.run_id.clone(),
                file: plan.get("file")?.as_str()?.to_owned(),
                estimated_wall_ms: plan.get("estimated_wall_ms")?.as_u64()?,
                estimated_wall_p90_ms: plan.get("estimated_wall_p90_ms")?.as_u64()?,
                took_ms: finished
                    .get(r.run_id.as_str())
                    .map(|end| u64::try_from(end - at).unwrap_or(0)),
            })
        })
        .collect()
}

/// What one task or pool accumulates before percentiles are taken.
#[derive(Default)]
struct Raw {
    partitions: Partitions,
    allowed_misses: f64,
    has_sla: bool,
    has_slo: bool,
    latencies: Vec<i64>,
    durations: Vec<i64>,
    waits: Vec<i64>,
    instances: u64,
    retries: u64,
}

impl Raw {
    fn finish(self) -> Measures {
        Measures {
            partitions: self.partitions,
            within_sla: if self.has_sla {
                self.partitions.within_sla()
            } else {
                None
            },
            publication_latency_ms: Spread::of(self.latencies),
            attempt_duration_ms: Spread::of(self.durations),
            queue_wait_ms: Spread::of(self.waits),
            instances: self.instances,
            retries: self.retries,
            retries_per_instance: (self.instances > 0)
                .then(|| self.retries as f64 / self.instances as f64),
            error_budget: self
                .has_slo
                .then(|| Budget::new(self.allowed_misses, self.partitions.missed)),
        }
    }
}

fn ms(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// The time partitions of `task` whose period ended within the window,
/// with that end (ms).
pub fn partitions_in<'t>(
    task: &'t crate::manifest::Task,
    window: &Window,
) -> impl Iterator<Item = (String, i64)> + 't {
    let (start, now) = (window.start_ms(), window.now_ms);
    let keys = if task.dims.time_dim().is_some() {
        task.dims.keys(now.div_euclid(1000))
    } else {
        Vec::new()
    };
    keys.into_iter().filter_map(move |key| {
        let end = task.dims.interval_end(&key)?.saturating_mul(1000);
        (end > start && end <= now).then_some((key, end))
    })
}

/// Measures `manifest`'s SLOs over `window` from the records of the runs
/// the window touches (`events`, in log order; records outside the window
/// are skipped here) and the first publication of each partition in the
/// window (`first_published(task, partition)`, ms).
pub fn measure(
    manifest: &Manifest,
    window: &Window,
    events: &[EventRecord],
    first_published: &dyn Fn(&str, &str) -> Option<i64>,
) -> SloReport {
    let mut tasks: BTreeMap<&str, Raw> = BTreeMap::new();
    let mut pools: BTreeMap<&str, Raw> = BTreeMap::new();
    // Partitions against the SLA, in their task's pool.
    for task in manifest.tasks.values() {
        let sla = task
            .sla
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut raw = Raw {
            has_sla: sla.is_some(),
            has_slo: task.slo.is_some(),
            ..Raw::default()
        };
        for (key, end) in partitions_in(task, window) {
            let published = first_published(&task.name, &key);
            if let Some(at) = published {
                // Published before its period ended (a run of an incomplete
                // period): no lateness at all.
                raw.latencies.push((at - end).max(0));
            }
            let Some(sla) = sla else { continue };
            let deadline = end.saturating_add(sla);
            match published {
                Some(at) if at <= deadline => raw.partitions.met += 1,
                Some(_) => raw.partitions.missed += 1,
                None if window.now_ms > deadline => raw.partitions.missed += 1,
                None => raw.partitions.pending += 1,
            }
        }
        if let Some(slo) = task.slo {
            raw.allowed_misses = (1.0 - slo) * (raw.partitions.met + raw.partitions.missed) as f64;
        }
        let pool = pools.entry(task.pool.as_str()).or_default();
        pool.partitions.met += raw.partitions.met;
        pool.partitions.missed += raw.partitions.missed;
        pool.partitions.pending += raw.partitions.pending;
        pool.allowed_misses += raw.allowed_misses;
        pool.has_sla |= raw.has_sla;
        pool.has_slo |= raw.has_slo;
        pool.latencies.extend_from_slice(&raw.latencies);
        tasks.insert(task.name.as_str(), raw);
    }
    attempts(manifest, window, events, &mut tasks, &mut pools);
    let tasks = manifest
        .tasks
        .values()
        .filter_map(|task| {
            let raw = tasks.remove(task.name.as_str())?;
            Some(TaskSlo {
                task: task.name.clone(),
                pool: task.pool.clone(),
                sla_ms: task
                    .sla
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                slo: task.slo,
                measures: raw.finish(),
            })
        })
        .collect();
    let pools = manifest
        .pools
        .keys()
        .filter_map(|name| {
            let raw = pools.remove(name.as_str())?;
            Some(PoolSlo {
                pool: name.clone(),
                measures: raw.finish(),
            })
        })
        .collect();
    SloReport {
        now: rfc3339(window.now_ms),
        since: rfc3339(window.start_ms()),
        window_ms: u64::try_from(window.since.as_millis()).unwrap_or(u64::MAX),
        tasks,
        pools,
        signed_plans: signed_runs(window, events),
    }
}

/// Attempt durations, queue waits, instances and retries from the logs.
fn attempts<'m>(
    manifest: &'m Manifest,
    window: &Window,
    events: &[EventRecord],
    tasks: &mut BTreeMap<&'m str, Raw>,
    pools: &mut BTreeMap<&'m str, Raw>,
) {
    let start = window.start_ms();
    // A backfill runs every attempt in its own pool (RUN_STARTED says
    // which), whenever the run started.
    let backfill_pool: HashMap<&str, &str> = events
        .iter()
        .filter(|r| r.state == State::RunStarted)
        .filter_map(|r| {
            let name = r.data.get("backfill")?.get("name")?.as_str()?;
            Some((
                r.run_id.as_str(),
                manifest.backfills.get(name)?.pool.as_str(),
            ))
        })
        .collect();
    // (run, task, partition) → when it was last queued, until it runs.
    let mut queued: HashMap<(&str, &str, &str), i64> = HashMap::new();
    let mut counted: std::collections::HashSet<(&str, &str, &str)> = Default::default();
    for record in events {
        let (Some(task_name), Some(partition)) = (&record.task, &record.partition) else {
            continue;
        };
        // A task no longer in the manifest has no SLO to measure.
        let Some((name, task)) = manifest.tasks.get_key_value(task_name.as_str()) else {
            continue;
        };
        let Some(at) = ms(&record.ts) else { continue };
        let pool = backfill_pool
            .get(record.run_id.as_str())
            .copied()
            .unwrap_or(task.pool.as_str());
        let key = (record.run_id.as_str(), name.as_str(), partition.as_str());
        let mut add = |f: &dyn Fn(&mut Raw)| {
            if let Some(raw) = tasks.get_mut(name.as_str()) {
                f(raw);
            }
            // The backfill's pool may not be a task's: it is one of the
            // manifest's pools all the same.
            if let Some((pool, _)) = manifest.pools.get_key_value(pool) {
                f(pools.entry(pool.as_str()).or_default());
            }
        };
        match record.state {
            State::Queued => {
                // A retry is queued again once its backoff is over: one
                // instance, one more wait.
                if at >= start && counted.insert(key) {
                    add(&|r| r.instances += 1);
                }
                queued.insert(key, at);
            }
            State::Running => {
                if let Some(since) = queued.remove(&key) {
                    if since >= start {
                        let wait = (at - since).max(0);
                        add(&|r| r.waits.push(wait));
                    }
                }
            }
            State::Retrying if at >= start => add(&|r| r.retries += 1),
            State::Success | State::Failed if at >= start => {
                let duration = match Payload::read(record.state, &record.data) {
                    Some(Payload::Failed(ended)) => Some(ended.duration_ms),
                    _ => record.data.get("duration_ms").and_then(|d| d.as_u64()),
                };
                // A FAILED that ran no command (no slot, no token) has no
                // duration: it is no attempt to time.
                if let Some(d) = duration.and_then(|d| i64::try_from(d).ok()) {
                    add(&|r| r.durations.push(d));
                }
            }
            _ => {}
        }
    }
}

/// The records of every run the window can touch, in run order: runs whose
/// log was last written before the window starts are not read.
pub fn read_events(warehouse: &Warehouse, window: &Window) -> Result<Vec<EventRecord>, StoreError> {
    read_events_with(warehouse, window, None)
}

/// [`read_events`], taking the records of run `known.0` from `known.1`
/// instead of reading its log again (the report has read its Gantt
/// chart's run already).
pub fn read_events_with(
    warehouse: &Warehouse,
    window: &Window,
    known: Option<(&str, &[EventRecord])>,
) -> Result<Vec<EventRecord>, StoreError> {
    let store = warehouse.events();
    let start = window.start_ms();
    let mut records = Vec::new();
    for run in store.runs()? {
        if run.last_written.is_some_and(|t| t.as_millisecond() < start) {
            continue;
        }
        match known {
            Some((id, had)) if id == run.id => records.extend_from_slice(had),
            _ => {
                if let Some((r, _)) = crate::events::read_run(&store, &run.id)? {
                    records.extend(r);
                }
            }
        }
    }
    Ok(records)
}

/// When a partition was first published (its generation 1's commit), ms.
pub fn first_publication(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
) -> Result<Option<i64>, StoreError> {
    let record = warehouse
        .partition(dataset, partition)
        .record(crate::store::Generation::FIRST)?;
    Ok(record.and_then(|r| ms(&r.published_at)))
}

/// Reads what the window needs (each run log and first commit record once)
/// and measures it.
pub fn gather(
    manifest: &Manifest,
    warehouse: &Warehouse,
    window: &Window,
) -> Result<SloReport, StoreError> {
    let events = read_events(warehouse, window)?;
    let mut first: HashMap<(String, String), i64> = HashMap::new();
    for task in manifest.tasks.values() {
        for (key, _) in partitions_in(task, window) {
            if let Some(at) = first_publication(warehouse, &task.output.dataset, &key)? {
                first.insert((task.name.clone(), key), at);
            }
        }
    }
    Ok(measure(manifest, window, &events, &|task, partition| {
        first
            .get(&(task.to_string(), partition.to_string()))
            .copied()
    }))
}

/// The headings of [`cells`], as `weir slo` and the report print them.
pub const MEASURE_COLUMNS: [&str; 9] = [
    "within sla",
    "latency p50",
    "p95",
    "attempt p50",
    "p95",
    "queue p50",
    "p95",
    "retries/inst",
    "error budget left",
];

impl SloReport {
    /// One row per task as the text and HTML tables show it: task, pool,
    /// sla, then [`MEASURE_COLUMNS`].
    pub fn task_rows(&self) -> Vec<Vec<String>> {
        self.tasks
            .iter()
            .map(|t| {
                let mut row = vec![
                    t.task.clone(),
                    t.pool.clone(),
                    t.sla_ms.map_or_else(|| "-".into(), whole),
                ];
                row.extend(cells(&t.measures, t.slo));
                row
            })
            .collect()
    }

    /// One row per pool: the pool, then [`MEASURE_COLUMNS`].
    pub fn pool_rows(&self) -> Vec<Vec<String>> {
        self.pools
            .iter()
            .map(|p| {
                let mut row = vec![p.pool.clone()];
                row.extend(cells(&p.measures, None));
                row
            })
            .collect()
    }
}

/// The measured columns as people read them: share, three spreads,
/// retries, budget (`slo`: the task's target, named beside its budget).
pub fn cells(m: &Measures, slo: Option<f64>) -> Vec<String> {
    let p = &m.partitions;
    let mut row = vec![match m.within_sla {
        Some(share) => format!("{} ({}/{})", percent(share), p.met, p.met + p.missed),
        None => "-".into(),
    }];
    for spread in [
        &m.publication_latency_ms,
        &m.attempt_duration_ms,
        &m.queue_wait_ms,
    ] {
        let Spread { p50, p95, .. } = spread;
        row.push(p50.map_or_else(|| "-".into(), span));
        row.push(p95.map_or_else(|| "-".into(), span));
    }
    row.push(match m.retries_per_instance {
        Some(r) => format!("{r:.2} ({}/{})", m.retries, m.instances),
        None => "-".into(),
    });
    row.push(match &m.error_budget {
        Some(b) => {
            let left = b.remaining.map_or_else(|| "-".into(), percent);
            let target = slo.map_or_else(String::new, |s| format!("slo {}, ", percent(s)));
            format!(
                "{left} ({target}{} of {:.2} allowed {})",
                b.misses,
                b.allowed_misses,
                if b.misses == 1 { "miss" } else { "misses" }
            )
        }
        None => "-".into(),
    });
    row
}

/// A share as a percentage with one decimal (`99.5%`, `-100.0%`).
pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// A declared length (`sla`, `--since`) as it is usually written: `7d`,
/// `6h`, else as a [`span`].
pub fn whole(ms: u64) -> String {
    match ms {
        0 => "0s".into(),
        ms if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms => span(i64::try_from(ms).unwrap_or(i64::MAX)),
    }
}

/// Milliseconds as people read a span: `850ms`, `12.3s`, `4m 5s`,
/// `2h 3m`, `1d 7h`.
pub fn span(ms: i64) -> String {
    let d = std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let secs = d.as_secs();
    if secs < 3600 {
        return crate::manifest::duration::human(d);
    }
    if secs < 86_400 {
        return format!("{}h {}m", secs / 3600, (secs % 3600) / 60);
    }
    format!("{}d {}h", secs / 86_400, (secs % 86_400) / 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Nearest-rank percentiles are measured values at rank
    // ⌈p/100 × n⌉, never interpolated.
    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(nearest_rank(&[], 50), None);
        assert_eq!(nearest_rank(&[7], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 95), Some(7));
        let ten: Vec<i64> = (1..=10).collect();
        assert_eq!(nearest_rank(&ten, 50), Some(5));
        assert_eq!(nearest_rank(&ten, 95), Some(10));
        assert_eq!(nearest_rank(&ten, 90), Some(9));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), Some(2));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 51), Some(3));
        let hundred: Vec<i64> = (1..=100).collect();
        assert_eq!(nearest_rank(&hundred, 95), Some(95));
        assert_eq!(nearest_rank(&hundred, 100), Some(100));
        let twenty: Vec<i64> = (1..=20).collect();
        assert_eq!(nearest_rank(&twenty, 95), Some(19));
    }

    /// Two daily tasks from 2026-11-01, `t` (pool `a`, sla 1h, slo 0.5)
    /// and `u` (pool `a`, no sla), and a backfill in pool `b`.
    fn manifest() -> Manifest {
        let text = r#"
[pipeline]
name = "m"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-11-01"

[pools.a]
slots = 1

[pools.b]
slots = 1

[tasks.t]
command = ["true"]
output = { dataset = "t", grain = ["id"] }
pool = "a"
sla = "1h"
slo = 0.5

[tasks.u]
command = ["true"]
output = { dataset = "u", grain = ["id"] }
pool = "a"

[backfills.fill]
from = "2026-11-01"
to = "2026-11-02"
pool = "b"
tasks = ["t"]
reason = "test"
"#;
        Manifest::parse("m.toml", text, std::path::Path::new("/m/m.toml")).unwrap()
    }

    fn at(ts: &str) -> i64 {
        ts.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn event(
        run: &str,
        ts: &str,
        task: &str,
        partition: &str,
        state: State,
        data: serde_json::Value,
    ) -> EventRecord {
        EventRecord {
            format_version: 1,
            ts: ts.to_string(),
            run_id: run.to_string(),
            task: (!task.is_empty()).then(|| task.to_string()),
            partition: (!partition.is_empty()).then(|| partition.to_string()),
            attempt: None,
            token: None,
            state,
            detail: String::new(),
            data,
        }
    }

    // The measures of a known set of records, exactly:
    // the window by period end and by event time, met/missed/pending, one
    // queue wait per attempt (a retry is queued again), durations from the
    // events' own measure, a backfill's attempts in its pool, and records
    // of a task the manifest no longer has ignored.
    #[test]
    fn measures_of_known_records() {
        use serde_json::json;
        use State::*;
        let m = manifest();
        // Now: 2026-11-06T12:00Z; 3 days back: periods ending after
        // 2026-11-03T12:00Z (days 11-03 to 11-05) and events since then.
        let window = Window {
            now_ms: at("2026-11-06T12:00:00Z"),
            since: Duration::from_secs(3 * 86_400),
        };
        let published: HashMap<(&str, &str), i64> = [
            // 30 minutes after its day: met.
            (("t", "2026-11-03"), at("2026-11-04T00:30:00Z")),
            // 2 hours after: missed.
            (("t", "2026-11-04"), at("2026-11-05T02:00:00Z")),
            // Outside the window (ended 11-03T00:00).
            (("t", "2026-11-02"), at("2026-11-05T00:00:00Z")),
            (("u", "2026-11-05"), at("2026-11-06T06:00:00Z")),
        ]
        .into_iter()
        .collect();
        let events = vec![
            // Before the window: not counted.
            event(
                "r0",
                "2026-11-02T00:00:00Z",
                "t",
                "2026-11-01",
                Queued,
                json!(null),
            ),
            event(
                "r0",
                "2026-11-02T00:00:01Z",
                "t",
                "2026-11-01",
                Running,
                json!(null),
            ),
            event(
                "r0",
                "2026-11-02T00:00:05Z",
                "t",
                "2026-11-01",
                Success,
                json!({"duration_ms": 4000}),
            ),
            // A run of t: queued 2s, fails after 1s, retried, queued again
            // 3s, succeeds after 5s.
            event(
                "r1",
                "2026-11-05T01:00:00Z",
                "t",
                "2026-11-04",
                Queued,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:02Z",
                "t",
                "2026-11-04",
                Running,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:03Z",
                "t",
                "2026-11-04",
                Failed,
                json!({"ending": "exit code 75", "exit_code": 75, "signal": null, "duration_ms": 1000, "stderr_tail": ""}),
            ),
            event(
                "r1",
                "2026-11-05T01:00:03Z",
                "t",
                "2026-11-04",
                Retrying,
                json!({"class": "transient", "delay_ms": 10, "next_attempt": 2}),
            ),
            event(
                "r1",
                "2026-11-05T01:00:10Z",
                "t",
                "2026-11-04",
                Queued,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:13Z",
                "t",
                "2026-11-04",
                Running,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:18Z",
                "t",
                "2026-11-04",
                Success,
                json!({"duration_ms": 5000}),
            ),
            // A FAILED that ran no command: no duration.
            event(
                "r1",
                "2026-11-05T01:00:19Z",
                "u",
                "2026-11-04",
                Queued,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:20Z",
                "u",
                "2026-11-04",
                Failed,
                json!(null),
            ),
            // A task no longer declared.
            event(
                "r1",
                "2026-11-05T01:00:20Z",
                "gone",
                "2026-11-04",
                Queued,
                json!(null),
            ),
            event(
                "r1",
                "2026-11-05T01:00:21Z",
                "gone",
                "2026-11-04",
                Running,
                json!(null),
            ),
            // A backfill: its attempt in pool `b`.
            event(
                "r2",
                "2026-11-05T03:00:00Z",
                "",
                "",
                RunStarted,
                json!({"backfill": {"name": "fill", "reason": "test"}}),
            ),
            event(
                "r2",
                "2026-11-05T03:00:00Z",
                "t",
                "2026-11-02",
                Queued,
                json!(null),
            ),
            event(
                "r2",
                "2026-11-05T03:00:07Z",
                "t",
                "2026-11-02",
                Running,
                json!(null),
            ),
            event(
                "r2",
                "2026-11-05T03:00:09Z",
                "t",
                "2026-11-02",
                Success,
                json!({"duration_ms": 2000}),
            ),
        ];
        let report = measure(&m, &window, &events, &|t, p| {
            published.get(&(t, p)).copied()
        });
        assert_eq!(report.now, "2026-11-06T12:00:00Z");
        assert_eq!(report.since, "2026-11-03T12:00:00Z");
        let t = &report.tasks[0].measures;
        // 11-03 met, 11-04 missed, 11-05 unpublished past 11-06T01:00.
        assert_eq!(
            t.partitions,
            Partitions {
                met: 1,
                missed: 2,
                pending: 0
            }
        );
        assert_eq!(t.within_sla, Some(1.0 / 3.0));
        assert_eq!(
            t.publication_latency_ms,
            Spread {
                count: 2,
                p50: Some(1_800_000),
                p95: Some(7_200_000)
            }
        );
        assert_eq!(
            t.attempt_duration_ms,
            Spread {
                count: 3,
                p50: Some(2000),
                p95: Some(5000)
            }
        );
        assert_eq!(
            t.queue_wait_ms,
            Spread {
                count: 3,
                p50: Some(3000),
                p95: Some(7000)
            }
        );
        assert_eq!((t.instances, t.retries), (2, 1));
        assert_eq!(t.retries_per_instance, Some(0.5));
        let budget = t.error_budget.unwrap();
        assert_eq!((budget.allowed_misses, budget.misses), (1.5, 2));
        assert!((budget.remaining.unwrap() - (1.0 - 2.0 / 1.5)).abs() < 1e-12);
        let u = &report.tasks[1].measures;
        assert_eq!(u.partitions, Partitions::default());
        assert_eq!((u.within_sla, u.error_budget), (None, None));
        assert_eq!(
            u.publication_latency_ms,
            Spread {
                count: 1,
                p50: Some(21_600_000),
                p95: Some(21_600_000)
            }
        );
        assert_eq!(u.attempt_duration_ms.count, 0);
        assert_eq!(u.instances, 1);
        let pools: Vec<&str> = report.pools.iter().map(|p| p.pool.as_str()).collect();
        assert_eq!(pools, ["a", "b"]);
        let a = &report.pools[0].measures;
        assert_eq!(
            a.partitions,
            Partitions {
                met: 1,
                missed: 2,
                pending: 0
            }
        );
        assert_eq!(a.publication_latency_ms.count, 3);
        assert_eq!(
            a.attempt_duration_ms,
            Spread {
                count: 2,
                p50: Some(1000),
                p95: Some(5000)
            }
        );
        assert_eq!(a.instances, 2);
        let b = &report.pools[1].measures;
        assert_eq!(
            b.attempt_duration_ms,
            Spread {
                count: 1,
                p50: Some(2000),
                p95: Some(2000)
            }
        );
        assert_eq!(
            b.queue_wait_ms,
            Spread {
                count: 1,
                p50: Some(7000),
                p95: Some(7000)
            }
        );
        assert_eq!(b.partitions, Partitions::default());
        assert_eq!(b.error_budget, None);
    }

    // Pending partitions count on neither side of the share, and an
    // overspent budget goes below zero rather than stopping at it, so a
    // report shows by how much; with no miss allowed there is no budget.
    #[test]
    fn the_share_within_sla_and_the_remaining_error_budget() {
        let p = Partitions {
            met: 3,
            missed: 1,
            pending: 5,
        };
        assert_eq!(p.within_sla(), Some(0.75));
        assert_eq!(Partitions::default().within_sla(), None);
        let b = Budget::new(0.5, 1);
        assert_eq!(b.remaining, Some(-1.0));
        assert_eq!(Budget::new(2.0, 1).remaining, Some(0.5));
        assert_eq!(Budget::new(0.0, 0).remaining, None);
    }

    // Spans are written as people read them, two units at most at every
    // scale, so a column of latencies stays short from milliseconds to days.
    #[test]
    fn spans_read_at_every_scale() {
        use super::span;
        assert_eq!(span(850), "850ms");
        assert_eq!(span(12_340), "12.3s");
        assert_eq!(span(245_000), "4m 5s");
        assert_eq!(span(7_380_000), "2h 3m");
        assert_eq!(span(111_600_000), "1d 7h");
        assert_eq!(super::percent(-1.0), "-100.0%");
        assert_eq!(super::whole(7 * 86_400_000), "7d");
        assert_eq!(super::whole(36 * 3_600_000), "36h");
        assert_eq!(super::whole(90_000), "1m 30s");
    }
}
