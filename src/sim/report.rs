//! What a simulation shows: per task and per pool, the faults injected and
//! the invariants broken (each with the command that replays it).

use std::collections::BTreeMap;

use serde::Serialize;

use super::check::{End, Violation};
use super::Sim;

/// One task's month.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskReport {
    /// The task.
    pub task: String,
    /// Its pool.
    pub pool: String,
    /// Periods (or firings) published.
    pub published: u64,
    /// Periods recorded MISSED because no engine was up.
    pub missed_down: u64,
    /// Periods recorded MISSED after waiting past their bound.
    pub missed_waited: u64,
    /// Periods whose attempts ran out (held for an operator).
    pub failed: u64,
    /// Published after their sla.
    pub late: u64,
    /// Attempts retried.
    pub retries: u64,
    /// Share of publications within the sla (`None`: no sla).
    pub within_sla: Option<f64>,
    /// Recorded attempts its durations came from (0: `expected_duration`).
    pub history: usize,
}

/// One pool's month.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolReport {
    /// The pool.
    pub pool: String,
    /// Its slots.
    pub slots: u32,
    /// Attempts it started.
    pub attempts: u64,
    /// Queue wait, median (seconds, nearest rank).
    pub wait_p50: i64,
    /// Queue wait, 95th percentile.
    pub wait_p95: i64,
    /// Share of its slot-time busy.
    pub utilisation: f64,
}

/// A whole simulation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The pipeline.
    pub pipeline: String,
    /// The seed.
    pub seed: u64,
    /// Engines.
    pub engines: usize,
    /// Start and end (RFC 3339).
    pub from: String,
    /// End.
    pub to: String,
    /// Machine steps taken.
    pub steps: u64,
    /// Per task.
    pub tasks: Vec<TaskReport>,
    /// Per pool.
    pub pools: Vec<PoolReport>,
    /// Faults injected, per kind.
    pub faults: BTreeMap<String, u64>,
    /// Invariants broken.
    pub violations: Vec<Violation>,
}

fn rank(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[i - 1]
}

impl Report {
    pub(crate) fn of(sim: &Sim) -> Report {
        let mut tasks = Vec::new();
        for (t, task) in sim.model.tasks.iter().enumerate() {
            let count = |f: &dyn Fn(&End) -> u64| {
                sim.ledger
                    .ends
                    .iter()
                    .filter(|((x, _), _)| *x == t)
                    .map(|(_, e)| f(e))
                    .sum::<u64>()
            };
            let (late, within) = (sim.stats.late[t], sim.stats.within_sla[t]);
            tasks.push(TaskReport {
                task: task.spec.name.clone(),
                pool: task.pool.clone(),
                published: count(&|e| u64::from(matches!(e, End::Published(_)))),
                missed_down: count(&|e| u64::from(*e == End::MissedDown)),
                missed_waited: count(&|e| u64::from(*e == End::MissedWaited)),
                failed: count(&|e| u64::from(*e == End::Failed)),
                late,
                retries: sim.stats.retries[t],
                within_sla: (task.sla.is_some() && late + within > 0)
                    .then(|| within as f64 / (late + within) as f64),
                history: task.history,
            });
        }
        let span = (sim.cfg.to - sim.cfg.from).max(1) as f64;
        let pools = sim
            .model
            .pools
            .iter()
            .filter(|(p, _)| sim.model.tasks.iter().any(|t| &t.pool == p))
            .map(|(p, slots)| {
                let mut waits = sim.stats.waits.get(p).cloned().unwrap_or_default();
                waits.sort_unstable();
                let busy = sim.stats.busy.get(p).copied().unwrap_or(0) as f64;
                PoolReport {
                    pool: p.clone(),
                    slots: *slots,
                    attempts: waits.len() as u64,
                    wait_p50: rank(&waits, 0.5),
                    wait_p95: rank(&waits, 0.95),
                    utilisation: busy / (span * f64::from((*slots).max(1))),
                }
            })
            .collect();
        let mut faults: BTreeMap<String, u64> = sim
            .store
            .counts()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        faults.insert("kill".into(), sim.stats.kills);
        faults.insert("crash".into(), sim.stats.crashes);
        Report {
            pipeline: sim.model.pipeline.clone(),
            seed: sim.cfg.seed,
            engines: sim.cfg.engines,
            from: crate::serve::instant(sim.cfg.from),
            to: crate::serve::instant(sim.cfg.to),
            steps: sim.steps,
            tasks,
            pools,
            faults,
            violations: sim.ledger.violations.clone(),
        }
    }

    /// The report as text: a table per task, one per pool, then what broke.
    pub fn render(&self) -> Vec<String> {
        let mut out = vec![format!(
            "simulated `{}` from {} to {}: {} engine(s), seed {}, {} steps",
            self.pipeline, self.from, self.to, self.engines, self.seed, self.steps
        )];
        out.push(String::new());
        out.push(format!(
            "{:<20} {:<10} {:>9} {:>11} {:>13} {:>6} {:>5} {:>7} {:>10}",
            "task",
            "pool",
            "published",
            "missed down",
            "missed waited",
            "failed",
            "late",
            "retries",
            "within sla"
        ));
        for t in &self.tasks {
            let within = t
                .within_sla
                .map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0));
            out.push(format!(
                "{:<20} {:<10} {:>9} {:>11} {:>13} {:>6} {:>5} {:>7} {:>10}",
                t.task,
                t.pool,
                t.published,
                t.missed_down,
                t.missed_waited,
                t.failed,
                t.late,
                t.retries,
                within
            ));
        }
        let learned: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.history > 0)
            .map(|t| format!("{} ({} attempts)", t.task, t.history))
            .collect();
        if !learned.is_empty() {
            out.push(format!(
                "durations and failure rates from history: {}",
                learned.join(", ")
            ));
        }
        out.push(String::new());
        out.push(format!(
            "{:<20} {:>5} {:>8} {:>10} {:>10} {:>11}",
            "pool", "slots", "attempts", "wait p50", "wait p95", "utilisation"
        ));
        for p in &self.pools {
            out.push(format!(
                "{:<20} {:>5} {:>8} {:>9}s {:>9}s {:>10.1}%",
                p.pool,
                p.slots,
                p.attempts,
                p.wait_p50,
                p.wait_p95,
                p.utilisation * 100.0
            ));
        }
        out.push(String::new());
        let faults: Vec<String> = self
            .faults
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        out.push(format!(
            "faults: {}",
            if faults.is_empty() {
                "none".into()
            } else {
                faults.join(", ")
            }
        ));
        if self.violations.is_empty() {
            out.push("invariants: all held".into());
        }
        for v in &self.violations {
            out.push(format!(
                "VIOLATION {} at step {} ({}): {}",
                v.invariant, v.step, v.at, v.detail
            ));
        }
        out
    }
}
