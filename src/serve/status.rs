//! What `weir status` says about serve: each served task's next due
//! partition and when, and every MISSED period not filled since, with the
//! command that fills it.

use crate::manifest::Manifest;
use crate::partition::shell_word;
use crate::store::{StoreError, Warehouse};

use super::due::Trigger;
use super::record;

/// One served task's next due instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Next {
    /// The task.
    pub task: String,
    /// Its next partition (`None` for a schedule: every key).
    pub partition: Option<String>,
    /// When it is due (`None`: never again, its scheme has ended).
    pub at: Option<i64>,
}

/// Serve's view of the warehouse at `now`.
#[derive(Debug, Clone, Default)]
pub struct ServeStatus {
    /// Tasks serve has progress for.
    pub next: Vec<Next>,
    /// MISSED periods whose partition is still not published.
    pub missed: Vec<record::Missed>,
}

/// Reads serve's records.
pub fn gather(
    manifest: &Manifest,
    warehouse: &Warehouse,
    now: i64,
) -> Result<ServeStatus, StoreError> {
    let mut out = ServeStatus::default();
    for spec in super::specs(manifest) {
        let Some(p) = record::progress(warehouse, &spec.name)? else {
            continue;
        };
        if p.trigger != super::trigger_text(&spec.trigger) {
            continue;
        }
        let due = spec
            .trigger
            .due(Some(p.newest.unwrap_or(p.occurrence)), now);
        let (partition, at) = match (&spec.trigger, due.run) {
            // Due now (serve is down, or about to start it).
            (_, Some(o)) => (spec.trigger.key(o), Some(spec.trigger.due_at(o))),
            (Trigger::Period { scheme, .. }, None) => {
                let next = due.seen.map_or(scheme.start, |s| s + 1);
                (Some(scheme.key(next)), due.next_at)
            }
            (_, None) => (None, due.next_at),
        };
        out.next.push(Next {
            task: spec.name,
            partition,
            at,
        });
    }
    for m in record::all_missed(warehouse)? {
        let Some(task) = manifest.tasks.get(&m.task) else {
            continue;
        };
        // Filled since (by the command it names, or a backfill): no longer
        // anybody's business. A period of a multi-dimension task is filled
        // when every partition of it is.
        let keys =
            crate::plan::partitions::explicit(&task.dims, std::slice::from_ref(&m.partition), now);
        let mut filled = !keys.is_empty();
        for k in &keys {
            if warehouse
                .partition(&task.output.dataset, k)
                .latest()?
                .is_none()
            {
                filled = false;
            }
        }
        if !filled {
            out.missed.push(m);
        }
    }
    Ok(out)
}

/// The text lines `weir status` prints.
pub fn lines(status: &ServeStatus, manifest: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for n in &status.next {
        let what = n.partition.as_deref().unwrap_or("(every partition)");
        out.push(match n.at {
            Some(at) => format!(
                "{:<11} {} {what}: due at {}",
                "NEXT",
                n.task,
                super::due::instant(at)
            ),
            None => format!(
                "{:<11} {} : no period is due again (its scheme has ended)",
                "NEXT", n.task
            ),
        });
    }
    let path = manifest.path.display().to_string();
    let mut by_task: Vec<(&str, Vec<&record::Missed>)> = Vec::new();
    for m in &status.missed {
        match by_task.last_mut() {
            Some((t, ms)) if *t == m.task => ms.push(m),
            _ => by_task.push((&m.task, vec![m])),
        }
        // Waited past its bound while serve ran, or skipped after downtime.
        let why = if m.why.starts_with("gave up waiting") {
            format!("{} (`weir serve`)", m.why)
        } else {
            "skipped by `weir serve` (no catch-up)".to_string()
        };
        out.push(format!(
            "{:<11} {} {}: due {}, {why}; fill it with `{}`",
            "MISSED", m.task, m.partition, m.due_at, m.fill
        ));
    }
    for (task, ms) in by_task {
        if ms.len() < 2 {
            continue;
        }
        let Some(t) = manifest.tasks.get(task) else {
            continue;
        };
        let Some(scheme) = t.dims.time_dim().and_then(|d| t.dims.0[d].scheme.time()) else {
            continue;
        };
        let days: Vec<(i64, i64)> = ms
            .iter()
            .filter_map(|m| scheme.parse(&m.partition).map(|p| scheme.days(p)))
            .collect();
        let (Some(first), Some(last)) = (
            days.iter().map(|d| d.0).min(),
            days.iter().map(|d| d.1).max(),
        ) else {
            continue;
        };
        out.push(format!(
            "{:<11} {task}: {} missed periods; fill them all with `weir run {} --task {task} --from {} --to {}` (what is published already is left as it is)",
            "MISSED",
            ms.len(),
            shell_word(&path),
            crate::partition::time::format_day(first),
            crate::partition::time::format_day(last)
        ));
    }
    out
}

/// The JSON `weir status --json` gives it.
pub fn json(status: &ServeStatus) -> serde_json::Value {
    serde_json::json!({
        "next": status.next.iter().map(|n| serde_json::json!({
            "task": n.task,
            "partition": n.partition,
            "due_at": n.at.map(super::due::instant),
        })).collect::<Vec<_>>(),
        "missed": status.missed.iter().map(|m| serde_json::json!({
            "task": m.task,
            "partition": m.partition,
            "due_at": m.due_at,
            "why": m.why,
            "fill": m.fill,
        })).collect::<Vec<_>>(),
    })
}
