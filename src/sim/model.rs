//! What the simulator knows of a pipeline: each task's trigger (serve's
//! own `specs`), pool, retry class, timeout, sla, and how long and how
//! reliably its attempts run.

use crate::manifest::{BackoffSpec, Manifest};
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
    /// Attempts in all.
    pub max_attempts: u32,
    /// Delay between attempts.
    pub backoff: BackoffSpec,
    /// Attempt time limit, seconds.
    pub timeout: i64,
    /// Publication deadline after the period ends, seconds.
    pub sla: Option<i64>,
    /// Indexes of its upstream tasks.
    pub upstream: Vec<usize>,
}

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
                let retry = manifest
                    .retry
                    .get(&task.retry)
                    .cloned()
                    .unwrap_or_else(crate::manifest::RetryClass::default_class);
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
                    max_attempts: retry.max_attempts.max(1),
                    backoff: retry.backoff,
                    timeout: secs(task.timeout).max(1),
                    sla: task.sla.map(secs),
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
