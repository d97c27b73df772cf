//! What past runs say a task costs: each task's recent attempt durations
//! (from the warehouse's event logs), how often its attempts fail and are
//! retried, and how long its instances waited between QUEUED and RUNNING.
//! The estimate ([`super::cost`]) takes an attempt's p50 and p90 from here,
//! and falls back on the task's `expected_duration` where a task has no
//! history; it says which it used.
//!
//! Runs are read newest first and reading stops once every task has
//! [`RECENT`] attempts, so a long history costs no more than a short one.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use crate::events::payload::Payload;
use crate::events::{EventRecord, State};
use crate::store::{StoreError, Warehouse};

/// Attempts per task a percentile is taken over (the most recent ones).
pub const RECENT: usize = 100;

/// Runs read at most, newest first: a plan reads this many logs at worst
/// (on an object store, a listing and a read each).
const MAX_RUNS: usize = 200;

/// One task's recent attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskHistory {
    /// Durations of its most recent attempts (ms), newest first.
    pub durations: Vec<u64>,
    /// Of those attempts, how many failed.
    pub failures: usize,
    /// Retries scheduled over the runs read.
    pub retries: usize,
    /// Instances queued over the runs read.
    pub instances: usize,
    /// Waits from QUEUED to RUNNING (ms).
    pub waits: Vec<u64>,
    /// The engine's own time around a published attempt (ms): from its
    /// RUNNING to its PUBLISHED, less the command's duration (staging,
    /// auditing, committing).
    pub overheads: Vec<u64>,
}

/// How an attempt's cost was estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// From this many recent attempts in the event logs.
    History,
    /// From the task's `expected_duration` (no attempt recorded).
    Declared,
}

/// What one attempt of a task is expected to cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TaskCost {
    /// Median attempt duration.
    #[serde(rename = "p50_ms", with = "crate::manifest::duration::serde_millis")]
    pub p50: Duration,
    /// 90th percentile attempt duration.
    #[serde(rename = "p90_ms", with = "crate::manifest::duration::serde_millis")]
    pub p90: Duration,
    /// Where the two come from.
    pub source: Source,
    /// Attempts measured (0 when declared).
    pub attempts: usize,
    /// Share of those attempts that failed.
    pub failure_rate: f64,
    /// Retries per instance: an instance is expected to take `1 +
    /// retry_rate` attempts.
    pub retry_rate: f64,
    /// Median wait from QUEUED to RUNNING (ms), when measured: shown,
    /// not simulated (the simulation makes its own waits for slots).
    #[serde(rename = "queue_wait_p50_ms")]
    pub queue_wait: Option<u64>,
    /// Median engine time around a published attempt (ms): added to each
    /// attempt in the simulation.
    pub overhead_ms: u64,
}

impl TaskCost {
    /// The declared `expected_duration`, with no history.
    pub fn declared(expected: Duration) -> TaskCost {
        TaskCost {
            p50: expected,
            p90: expected,
            source: Source::Declared,
            attempts: 0,
            failure_rate: 0.0,
            retry_rate: 0.0,
            queue_wait: None,
            overhead_ms: 0,
        }
    }

    /// What one instance occupies a slot for, at `p90` or the median: an
    /// attempt's duration times the attempts an instance takes.
    pub fn instance_ms(&self, p90: bool) -> u64 {
        let one = if p90 { self.p90 } else { self.p50 };
        let one = one.as_millis() as f64 + self.overhead_ms as f64;
        let ms = one * (1.0 + self.retry_rate);
        ms.round().min(u64::MAX as f64) as u64
    }
}

/// An attempt in a run's records: task, partition, attempt number.
type AttemptKey<'r> = (&'r str, &'r str, Option<u32>);

/// Every task's recent attempts, by task name.
#[derive(Debug, Clone, Default)]
pub struct History {
    tasks: HashMap<String, TaskHistory>,
}

/// The nearest-rank percentile `p` of `sorted` (ascending).
fn nearest_rank(sorted: &[u64], p: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (u64::from(p) * sorted.len() as u64).div_ceil(100).max(1) as usize;
    sorted.get(rank - 1).copied()
}

impl History {
    /// Reads the event logs of `warehouse`, newest run first, until each
    /// of `tasks` has [`RECENT`] attempts.
    pub fn read(warehouse: &Warehouse, tasks: &[&str]) -> Result<History, StoreError> {
        let store = warehouse.events();
        let mut runs = store.runs()?;
        // Newest first: by when the log was last written, then by id (ids
        // start with the start time unless a person named the run).
        runs.sort_by(|a, b| b.last_written.cmp(&a.last_written).then(b.id.cmp(&a.id)));
        let mut history = History::default();
        for run in runs.iter().take(MAX_RUNS) {
            if tasks.iter().all(|t| history.full(t)) {
                break;
            }
            if let Some((records, _)) = crate::events::read_run(&store, &run.id)? {
                history.add_run(&records);
            }
        }
        Ok(history)
    }

    fn full(&self, task: &str) -> bool {
        self.tasks
            .get(task)
            .is_some_and(|h| h.durations.len() >= RECENT)
    }

    /// Adds one run's records (runs are added newest first).
    pub fn add_run(&mut self, records: &[EventRecord]) {
        let mut run: HashMap<&str, TaskHistory> = HashMap::new();
        let mut queued: HashMap<(&str, &str), i64> = HashMap::new();
        // (task, partition, attempt) → when it ran, then its duration.
        let mut ran: HashMap<AttemptKey<'_>, (i64, Option<u64>)> = HashMap::new();
        for r in records {
            let (Some(task), Some(partition)) = (&r.task, &r.partition) else {
                continue;
            };
            let h = run.entry(task.as_str()).or_default();
            match r.state {
                State::Queued => {
                    h.instances += 1;
                    if let Some(at) = ms(&r.ts) {
                        queued.insert((task, partition), at);
                    }
                }
                State::Running => {
                    let Some(at) = ms(&r.ts) else { continue };
                    if let Some(since) = queued.remove(&(task.as_str(), partition.as_str())) {
                        h.waits.push((at - since).max(0) as u64);
                    }
                    ran.insert((task, partition, r.attempt), (at, None));
                }
                State::Published => {
                    let key = (task.as_str(), partition.as_str(), r.attempt);
                    if let (Some((since, Some(d))), Some(at)) = (ran.remove(&key), ms(&r.ts)) {
                        h.overheads
                            .push(u64::try_from(at - since).unwrap_or(0).saturating_sub(d));
                    }
                }
                State::Retrying => h.retries += 1,
                State::Success | State::Failed => {
                    let duration = match Payload::read(r.state, &r.data) {
                        Some(Payload::Failed(ended)) => Some(ended.duration_ms),
                        _ => r.data.get("duration_ms").and_then(|d| d.as_u64()),
                    };
                    // A FAILED that ran no command has no duration: no
                    // attempt to time.
                    if let Some(d) = duration {
                        if let Some(run) =
                            ran.get_mut(&(task.as_str(), partition.as_str(), r.attempt))
                        {
                            run.1 = Some(d);
                        }
                        h.durations.push(d);
                        if r.state == State::Failed {
                            h.failures += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        for (task, mut h) in run {
            let all = self.tasks.entry(task.to_owned()).or_default();
            let room = RECENT.saturating_sub(all.durations.len());
            // Within a run the last attempts are the newest.
            h.durations.reverse();
            h.durations.truncate(room);
            all.durations.extend(h.durations);
            all.failures += h.failures.min(room);
            all.retries += h.retries;
            all.instances += h.instances;
            all.waits.extend(h.waits);
            all.overheads.extend(h.overheads);
        }
    }

    /// The recent attempts of `task`, if any were recorded.
    pub fn of(&self, task: &str) -> Option<&TaskHistory> {
        self.tasks.get(task).filter(|h| !h.durations.is_empty())
    }

    /// What one attempt of `task` costs: from its history, or `expected`.
    pub fn cost(&self, task: &str, expected: Duration) -> TaskCost {
        let Some(h) = self.of(task) else {
            return TaskCost::declared(expected);
        };
        let mut sorted = h.durations.clone();
        sorted.sort_unstable();
        let mut waits = h.waits.clone();
        waits.sort_unstable();
        let mut overheads = h.overheads.clone();
        overheads.sort_unstable();
        let at = |p| Duration::from_millis(nearest_rank(&sorted, p).unwrap_or_default());
        TaskCost {
            p50: at(50),
            p90: at(90),
            source: Source::History,
            attempts: sorted.len(),
            failure_rate: h.failures as f64 / sorted.len() as f64,
            retry_rate: if h.instances == 0 {
                0.0
            } else {
                h.retries as f64 / h.instances as f64
            },
            queue_wait: nearest_rank(&waits, 50),
            overhead_ms: nearest_rank(&overheads, 50).unwrap_or(0),
        }
    }
}

fn ms(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: State, ts: &str, data: serde_json::Value) -> EventRecord {
        EventRecord {
            format_version: 1,
            ts: ts.into(),
            run_id: "r".into(),
            task: Some("load".into()),
            partition: Some("2026-01-01".into()),
            attempt: Some(1),
            token: None,
            state,
            detail: String::new(),
            data,
        }
    }

    #[test]
    fn percentiles_come_from_the_newest_attempts_and_retries_count_per_instance() {
        let mut h = History::default();
        // Newer run: 10 attempts of 2 s, one of them retried.
        let mut newer = Vec::new();
        for _ in 0..10 {
            newer.push(record(
                State::Queued,
                "2026-01-01T00:00:00Z",
                serde_json::Value::Null,
            ));
            newer.push(record(
                State::Running,
                "2026-01-01T00:00:01Z",
                serde_json::Value::Null,
            ));
            newer.push(record(
                State::Success,
                "2026-01-01T00:00:03Z",
                serde_json::json!({"duration_ms": 2000}),
            ));
        }
        newer.push(record(
            State::Retrying,
            "2026-01-01T00:00:03Z",
            serde_json::Value::Null,
        ));
        h.add_run(&newer);
        // An older run of 200 attempts of 9 s: only the room left counts.
        let older: Vec<_> = (0..200)
            .map(|_| {
                record(
                    State::Success,
                    "2025-01-01T00:00:03Z",
                    serde_json::json!({"duration_ms": 9000}),
                )
            })
            .collect();
        h.add_run(&older);
        let cost = h.cost("load", Duration::from_secs(60));
        assert_eq!(cost.source, Source::History);
        assert_eq!(cost.attempts, RECENT);
        // 10 of 2 s, 90 of 9 s: the median is 9 s, so is p90.
        assert_eq!(cost.p50, Duration::from_secs(9));
        assert_eq!(cost.p90, Duration::from_secs(9));
        assert_eq!(cost.queue_wait, Some(1000));
        assert!((cost.retry_rate - 0.1).abs() < 1e-9);
        let none = h.cost("other", Duration::from_secs(60));
        assert_eq!(none, TaskCost::declared(Duration::from_secs(60)));
    }
}
