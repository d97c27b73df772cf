//! What the simulator knows of a pipeline: each task's trigger (serve's
//! own `specs`), pool, retry class, timeout, sla, and how long and how
//! reliably its attempts run.

use std::collections::BTreeMap;

use crate::events::payload::Payload;
use crate::events::{EventRecord, State};
use crate::exec::classify::{self, Ending};
use crate::manifest::{Disposition, Manifest, RetryClass};
use crate::serve::due::Trigger;
use crate::serve::machine::TaskSpec;

/// One task as the simulator runs it.
#[derive(Debug, Clone)]
pub struct SimTask {
    /// Serve's view of it: name, trigger, upstream, wait, rerun.
    pub spec: TaskSpec,
    /// Its pool.
    pub pool: String,
    /// Its output dataset (where its generations are committed).
    pub dataset: String,
    /// Median attempt duration, seconds.
    pub p50: f64,
    /// 90th percentile attempt duration, seconds.
    pub p90: f64,
    /// Share of attempts that fail (before `--faults fail`).
    pub fail_rate: f64,
    /// Attempts in all (the larger of its two classes').
    pub max_attempts: u32,
    /// What a failed attempt (exit code 1) gets, and under which class:
    /// the engine's own classification (`exec::classify`).
    pub on_fail: (Disposition, RetryClass),
    /// What an attempt killed at its timeout gets.
    pub on_timeout: (Disposition, RetryClass),
    /// Attempt time limit, seconds.
    pub timeout: i64,
    /// Publication deadline after the period ends, seconds.
    pub sla: Option<i64>,
    /// Indexes of its upstream tasks.
    pub upstream: Vec<usize>,
    /// Recorded attempts its durations and failure rate come from (0: the
    /// manifest's `expected_duration`).
    pub history: usize,
}

/// Attempts a task needs on record before they replace its
/// `expected_duration`.
pub const HISTORY_MIN: usize = 5;

/// The pipeline as simulated.
#[derive(Debug, Clone)]
pub struct Model {
    /// The pipeline's name.
    pub pipeline: String,
    /// Its tasks, in the order of serve's specs.
    pub tasks: Vec<SimTask>,
    /// Pools and their slots.
    pub pools: Vec<(String, u32)>,
}

fn secs(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 4)
}

impl Model {
    /// The model of `manifest`: durations from `expected_duration` (the
    /// 90th percentile half again as long), no failures of its own.
    pub fn of(manifest: &Manifest) -> Model {
        let specs = crate::serve::specs(manifest);
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let tasks = specs
            .into_iter()
            .map(|spec| {
                let task = &manifest.tasks[&spec.name];
                let class = |ending: &Ending| {
                    let rule = classify::rule(task, ending);
                    let (d, class, _) = classify::resolve(manifest, task, &rule);
                    (d, class.clone())
                };
                let (on_fail, on_timeout) = (class(&Ending::Exit(1)), class(&Ending::Timeout));
                let p50 = task.expected_duration.as_secs_f64().max(1.0);
                SimTask {
                    upstream: spec
                        .upstream
                        .iter()
                        .filter_map(|u| names.iter().position(|n| n == u))
                        .collect(),
                    pool: task.pool.clone(),
                    dataset: task.output.dataset.clone(),
                    p50,
                    p90: p50 * 1.5,
                    fail_rate: 0.0,
                    max_attempts: on_fail.1.max_attempts.max(on_timeout.1.max_attempts).max(1),
                    on_fail,
                    on_timeout,
                    timeout: secs(task.timeout).max(1),
                    sla: task.sla.map(secs),
                    history: 0,
                    spec,
                }
            })
            .collect();
        let pools = manifest
            .pools
            .iter()
            .map(|(name, p)| (name.clone(), p.slots))
            .collect();
        Model {
            pipeline: manifest.pipeline.name.clone(),
            tasks,
            pools,
        }
    }

    /// Durations (p50, p90) and failure rates from recorded attempts,
    /// for each task with at least [`HISTORY_MIN`] of them: every SUCCESS
    /// and FAILED event that ran a command (it carries a duration).
    pub fn with_history(&mut self, records: &[EventRecord]) {
        let mut seen: BTreeMap<&str, (Vec<u64>, usize)> = BTreeMap::new();
        for r in records {
            let Some(task) = r.task.as_deref() else {
                continue;
            };
            let duration = match Payload::read(r.state, &r.data) {
                Some(Payload::Failed(ended)) => Some(ended.duration_ms),
                _ if r.state == State::Success => {
                    r.data.get("duration_ms").and_then(|d| d.as_u64())
                }
                _ => None,
            };
            if let Some(d) = duration {
                let (ds, failed) = seen.entry(task).or_default();
                ds.push(d);
                *failed += usize::from(r.state == State::Failed);
            }
        }
        for t in &mut self.tasks {
            let Some((ds, failed)) = seen.get_mut(t.spec.name.as_str()) else {
                continue;
            };
            if ds.len() < HISTORY_MIN {
                continue;
            }
            ds.sort_unstable();
            let rank = |q: f64| {
                let i = ((q * ds.len() as f64).ceil() as usize).clamp(1, ds.len());
                ds[i - 1] as f64 / 1000.0
            };
            t.p50 = rank(0.5).max(1.0);
            t.p90 = rank(0.9).max(t.p50);
            t.fail_rate = *failed as f64 / ds.len() as f64;
            t.history = ds.len();
        }
    }

    /// The task named `name`.
    pub fn task(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.spec.name == name)
    }

    /// The slots of `pool` (a pool not declared has one).
    pub fn slots(&self, pool: &str) -> u32 {
        self.pools
            .iter()
            .find(|(n, _)| n == pool)
            .map_or(1, |(_, s)| *s)
    }
}

/// The interval `[start, end)` a period occurrence of `trigger` covers.
pub fn interval(trigger: &Trigger, o: i64) -> Option<(i64, i64)> {
    match trigger {
        Trigger::Period { scheme, .. } => Some((scheme.period_end(o - 1), scheme.period_end(o))),
        _ => None,
    }
}

/// The occurrences of `upstream` a period `[start, end)` reads: every
/// period of its scheme that overlaps it, inside the scheme's range.
pub fn covering(upstream: &Trigger, start: i64, end: i64) -> Option<Vec<i64>> {
    let Trigger::Period { scheme, .. } = upstream else {
        return None;
    };
    let first = scheme.containing(start).max(scheme.start);
    let mut last = scheme.containing(end - 1);
    if let Some(e) = scheme.end {
        last = last.min(e);
    }
    Some((first..=last).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: &str, state: State, data: serde_json::Value) -> EventRecord {
        EventRecord {
            format_version: 1,
            ts: "2026-09-01T00:00:00Z".into(),
            run_id: "run-1".into(),
            task: Some(task.into()),
            partition: Some("2026-09-01".into()),
            attempt: Some(1),
            token: Some(1),
            state,
            detail: String::new(),
            data,
        }
    }

    #[test]
    fn recorded_attempts_replace_the_expected_duration_once_there_are_enough() {
        let source = r#"
[pipeline]
name = "p"
code_version = "1"
warehouse = "wh"

[partitions.day]
kind = "daily"
start = "2026-09-01"

[tasks.a]
command = ["true"]
partitioned_by = "day"
output = { dataset = "a", grain = ["id"] }
expected_duration = "10s"

[tasks.b]
command = ["true"]
partitioned_by = "day"
output = { dataset = "b", grain = ["id"] }
expected_duration = "10s"
"#;
        let m = Manifest::parse("p.toml", source, std::path::Path::new("/tmp/p.toml")).unwrap();
        let mut model = Model::of(&m);
        let mut records: Vec<EventRecord> = [60_000u64, 120_000, 90_000, 600_000, 100_000, 80_000]
            .iter()
            .map(|d| record("a", State::Success, serde_json::json!({ "duration_ms": d })))
            .collect();
        records.push(record(
            "a",
            State::Failed,
            serde_json::json!({"ending": "exit code 75", "exit_code": 75, "signal": null, "duration_ms": 30000, "stderr_tail": ""}),
        ));
        // Too few for `b`: its manifest's estimate stays.
        records.push(record(
            "b",
            State::Success,
            serde_json::json!({ "duration_ms": 999_000 }),
        ));
        model.with_history(&records);
        let a = &model.tasks[model.task("a").unwrap()];
        assert_eq!((a.history, a.p50, a.p90), (7, 90.0, 600.0));
        assert!((a.fail_rate - 1.0 / 7.0).abs() < 1e-9, "{}", a.fail_rate);
        let b = &model.tasks[model.task("b").unwrap()];
        assert_eq!((b.history, b.p50, b.fail_rate), (0, 10.0, 0.0));
    }
}
