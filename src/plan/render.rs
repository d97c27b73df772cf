//! Plans for people (a table), for programs (JSON with stable field names,
//! documented in the README) and for pictures (Graphviz DOT, Mermaid).

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use super::cost::Estimate;
use super::{Plan, Scope};
use crate::manifest::duration;

/// "3,650 minutes (about 61 hours)" for long spans; "90s" for short ones.
pub fn human_duration(d: Duration) -> String {
    let minutes = d.as_secs() / 60;
    if minutes < 60 {
        return duration::render(d);
    }
    let hours = (d.as_secs_f64() / 3600.0).round() as u64;
    format!(
        "{} minutes (about {} hours)",
        thousands(minutes),
        thousands(hours)
    )
}

/// 730000 → "730,000".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn scope_line(plan: &Plan) -> String {
    match (&plan.scope, &plan.backfill) {
        (_, Some(b)) => format!(
            "backfill `{}`: {} to {} ({} {})\nreason: {}",
            b.name,
            b.from,
            b.to,
            plan.tasks.first().map_or(0, |t| t.keys.len()),
            if plan.tasks.first().is_some_and(|t| t.keys.len() == 1) {
                "partition"
            } else {
                "partitions"
            },
            b.reason
        ),
        (Scope::Latest, _) => {
            let keys: Vec<&str> = plan
                .tasks
                .iter()
                .flat_map(|t| t.keys.iter().map(String::as_str))
                .collect::<indexmap::IndexSet<_>>()
                .into_iter()
                .collect();
            format!(
                "latest complete partition: {} (no catch-up: earlier partitions run only as a backfill)",
                if keys.is_empty() { "none yet".to_string() } else { keys.join(", ") }
            )
        }
        (Scope::Partitions(keys), _) => format!("partitions: {}", keys.join(", ")),
        (Scope::Backfill(_), None) => String::new(),
    }
}

/// The human table.
pub fn table(plan: &Plan, estimate: &Estimate) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan for `{}` (code_version {})",
        plan.pipeline, plan.code_version
    );
    let _ = writeln!(out, "{}", scope_line(plan));
    let _ = writeln!(out);
    let name_w = plan
        .tasks
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let pool_w = plan.pools.keys().map(String::len).max().unwrap_or(4).max(4);
    let retry_w = plan
        .tasks
        .iter()
        .map(|t| t.retry.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:>4}  {:name_w$}  {:pool_w$}  {:retry_w$}  {:>9}  expected",
        "step", "task", "pool", "retry", "instances"
    );
    for (i, t) in plan.tasks.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>4}  {:name_w$}  {:pool_w$}  {:retry_w$}  {:>9}  {}{}",
            i + 1,
            t.name,
            t.pool,
            t.retry,
            thousands(t.keys.len() as u64),
            duration::render(t.expected_duration),
            if t.depends_on_past {
                "  (in order: depends_on_past)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:pool_w$}  {:>5}  {:>9}  estimated wall time",
        "pool", "slots", "instances"
    );
    for (name, p) in &estimate.pools {
        let _ = writeln!(
            out,
            "{:pool_w$}  {:>5}  {:>9}  {}",
            name,
            p.slots,
            thousands(p.instances as u64),
            human_duration(p.wall)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "total: {} task instances, estimated wall time {}",
        thousands(plan.instance_count() as u64),
        human_duration(estimate.total)
    );
    out
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    format_version: u32,
    pipeline: &'a str,
    code_version: &'a str,
    scope: JsonScope<'a>,
    tasks: Vec<JsonTask<'a>>,
    pools: Vec<JsonPool<'a>>,
    total: JsonTotal,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum JsonScope<'a> {
    Latest,
    Partitions {
        keys: &'a [String],
    },
    Backfill {
        name: &'a str,
        from: &'a str,
        to: &'a str,
        reason: &'a str,
    },
}

#[derive(Serialize)]
struct JsonTask<'a> {
    name: &'a str,
    pool: &'a str,
    retry: &'a str,
    partitioned_by: &'a str,
    depends_on: Vec<&'a str>,
    depends_on_past: bool,
    instances: usize,
    partitions: &'a [String],
    expected_duration_ms: u128,
}

#[derive(Serialize)]
struct JsonPool<'a> {
    name: &'a str,
    slots: u32,
    instances: usize,
    estimated_wall_ms: u128,
}

#[derive(Serialize)]
struct JsonTotal {
    instances: usize,
    estimated_wall_ms: u128,
}

/// One JSON document; field names are part of weir's interface.
pub fn json(plan: &Plan, estimate: &Estimate) -> String {
    let doc = JsonPlan {
        format_version: 1,
        pipeline: &plan.pipeline,
        code_version: &plan.code_version,
        scope: match (&plan.scope, &plan.backfill) {
            (_, Some(b)) => JsonScope::Backfill {
                name: &b.name,
                from: &b.from,
                to: &b.to,
                reason: &b.reason,
            },
            (Scope::Partitions(keys), _) => JsonScope::Partitions { keys },
            _ => JsonScope::Latest,
        },
        tasks: plan
            .tasks
            .iter()
            .map(|t| JsonTask {
                name: &t.name,
                pool: &t.pool,
                retry: &t.retry,
                partitioned_by: &t.scheme,
                depends_on: t
                    .upstream
                    .iter()
                    .map(|u| plan.tasks[*u].name.as_str())
                    .collect(),
                depends_on_past: t.depends_on_past,
                instances: t.keys.len(),
                partitions: &t.keys,
                expected_duration_ms: t.expected_duration.as_millis(),
            })
            .collect(),
        pools: estimate
            .pools
            .iter()
            .map(|(name, p)| JsonPool {
                name,
                slots: p.slots,
                instances: p.instances,
                estimated_wall_ms: p.wall.as_millis(),
            })
            .collect(),
        total: JsonTotal {
            instances: plan.instance_count(),
            estimated_wall_ms: estimate.total.as_millis(),
        },
    };
    serde_json::to_string_pretty(&doc).expect("a plan always serializes") + "\n"
}

/// The task DAG as Graphviz DOT (edges point downstream).
pub fn dot(plan: &Plan) -> String {
    let mut out = format!(
        "digraph {:?} {{\n  rankdir=LR;\n  node [shape=box];\n",
        plan.pipeline
    );
    for t in &plan.tasks {
        let _ = writeln!(
            out,
            "  {:?} [label=\"{}\\npool {} · {} instances\"];",
            t.name,
            t.name,
            t.pool,
            t.keys.len()
        );
    }
    for t in &plan.tasks {
        for d in &t.downstream {
            let _ = writeln!(out, "  {:?} -> {:?};", t.name, plan.tasks[*d].name);
        }
    }
    out.push_str("}\n");
    out
}

/// The task DAG as a Mermaid flowchart.
pub fn mermaid(plan: &Plan) -> String {
    let mut out = String::from("flowchart LR\n");
    for (i, t) in plan.tasks.iter().enumerate() {
        let _ = writeln!(
            out,
            "  t{i}[\"{}<br/>pool {} · {} instances\"]",
            t.name,
            t.pool,
            t.keys.len()
        );
    }
    for (i, t) in plan.tasks.iter().enumerate() {
        for d in &t.downstream {
            let _ = writeln!(out, "  t{i} --> t{d}");
        }
    }
    out
}
