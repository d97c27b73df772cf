//! Plans for people (a table), for programs (JSON with stable field names,
//! documented in docs/guides/plans.md) and for pictures (Graphviz DOT, Mermaid).

use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;

use super::census::Census;
use super::cost::Estimate;
use super::{Plan, Scope};
use crate::audit::words::count;
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
        (Scope::Repair { name, reason, .. }, _) => format!(
            "{name}: {} task {}\nreason: {reason}",
            thousands(plan.instance_count() as u64),
            if plan.instance_count() == 1 {
                "instance"
            } else {
                "instances"
            }
        ),
        (_, Some(b)) => format!(
            "backfill `{}`: {} to {} ({})\nreason: {}",
            b.name,
            b.from,
            b.to,
            backfill_extent(plan),
            b.reason
        ),
        (Scope::Latest, _) => {
            let keys: Vec<&str> = plan
                .tasks
                .iter()
                .enumerate()
                .flat_map(|(t, task)| {
                    task.keys
                        .iter()
                        .enumerate()
                        .filter(move |(i, _)| !plan.is_added(t, *i))
                        .map(|(_, k)| k.as_str())
                })
                .collect::<indexmap::IndexSet<_>>()
                .into_iter()
                .collect();
            format!(
                "latest complete partition: {} (no catch-up: earlier partitions run only as a backfill)",
                if keys.is_empty() { "none yet".to_string() } else { elide(&keys) }
            )
        }
        (Scope::Partitions(keys), _) => format!("partitions: {}", keys.join(", ")),
        (Scope::Range { from, to }, _) => format!("range: {from} to {to} (ad hoc)"),
        (Scope::Backfill(_), None) => String::new(),
    }
}

/// How many partitions a backfill covers, per scheme of its own tasks (not
/// the upstream ones added to it): "31 partitions", or "31 partitions of
/// `day`, 1 of `month`" when its tasks are partitioned differently.
fn backfill_extent(plan: &Plan) -> String {
    let mut per: indexmap::IndexMap<&str, usize> = indexmap::IndexMap::new();
    for (t, task) in plan.tasks.iter().enumerate() {
        let own = (0..task.keys.len())
            .filter(|&i| !plan.is_added(t, i))
            .count();
        if own == 0 {
            continue;
        }
        let n = per.entry(task.scheme.as_str()).or_default();
        *n = (*n).max(own);
    }
    let noun = |n: usize| if n == 1 { "partition" } else { "partitions" };
    match per.len() {
        0 => "no partition".into(),
        1 => {
            let n = per[0];
            format!("{} {}", thousands(n as u64), noun(n))
        }
        _ => per
            .iter()
            .enumerate()
            .map(|(i, (scheme, &n))| {
                if i == 0 {
                    format!("{} {} of `{scheme}`", thousands(n as u64), noun(n))
                } else {
                    format!("{} of `{scheme}`", thousands(n as u64))
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The human table.
pub fn table(plan: &Plan, estimate: &Estimate, census: Option<&Census>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan for `{}` (code_version {})",
        plan.pipeline, plan.code_version
    );
    let _ = writeln!(out, "{}", scope_line(plan));
    if let Some(census) = census {
        let _ = writeln!(out, "{}", census_line(census));
    }
    let _ = writeln!(out);
    let name_w = plan
        .tasks
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let pool_w = plan.pools.keys().map(String::len).max().unwrap_or(4).max(4);
    step_lines(plan, &mut out, name_w, pool_w);
    let links = mappings(plan);
    if !links.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "inputs by partition (first planned partition of each task):"
        );
        for line in links {
            let _ = writeln!(out, "  {line}");
        }
    }
    executor_lines(plan, &mut out, name_w);
    added_lines(plan, &mut out);
    followed_lines(plan, &mut out);
    estimate_lines(plan, estimate, &mut out, pool_w);
    out
}

/// One line per task in the order the run starts them: its scheme, pool,
/// retry class, instances and expected duration.
fn step_lines(plan: &Plan, out: &mut String, name_w: usize, pool_w: usize) {
    let scheme_w = plan
        .tasks
        .iter()
        .map(|t| t.scheme.chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let retry_w = plan
        .tasks
        .iter()
        .map(|t| t.retry.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:>4}  {:name_w$}  {:scheme_w$}  {:pool_w$}  {:retry_w$}  {:>9}  expected",
        "step", "task", "scheme", "pool", "retry", "instances"
    );
    for (i, t) in plan.tasks.iter().enumerate() {
        let batches = match t.batches.is_empty() {
            true => String::new(),
            false => format!(
                "  (in {}: consecutive partitions share one)",
                count(plan.launches(i), "attempt", "attempts")
            ),
        };
        let _ = writeln!(
            out,
            "{:>4}  {:name_w$}  {:scheme_w$}  {:pool_w$}  {:retry_w$}  {:>9}  {}{}{batches}",
            i + 1,
            t.name,
            pad(&t.scheme, scheme_w),
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
}

/// Where each task that leaves the default runs, and what it asks for.
fn executor_lines(plan: &Plan, out: &mut String, name_w: usize) {
    // Only where a task leaves the default: local, nothing requested.
    let placed: Vec<&super::PlannedTask> = plan
        .tasks
        .iter()
        .filter(|t| t.executor.0 != crate::manifest::LOCAL_EXECUTOR || !t.resources.is_empty())
        .collect();
    if !placed.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "executors (where each attempt runs, what it asks for):"
        );
        for t in placed {
            let _ = writeln!(
                out,
                "  {:name_w$}  {} ({})  {}",
                t.name,
                t.executor.0,
                match t.executor.1 {
                    crate::manifest::ExecutorKind::Local => "local",
                    crate::manifest::ExecutorKind::Slurm => "slurm",
                },
                t.resources.describe()
            );
        }
    }
}

/// The unpublished upstream partitions the plan added.
fn added_lines(plan: &Plan, out: &mut String) {
    let added: Vec<&super::PlannedTask> =
        plan.tasks.iter().filter(|t| !t.added.is_empty()).collect();
    if !added.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "added: upstream partitions a planned instance needs that are not published (they run first):"
        );
        for t in added {
            let mut idx: Vec<u32> = t.added.iter().copied().collect();
            idx.sort_unstable();
            let _ = writeln!(
                out,
                "  {} × {}: {}",
                t.name,
                idx.len(),
                elide(
                    &idx.iter()
                        .map(|i| t.keys[*i as usize].as_str())
                        .collect::<Vec<_>>()
                )
            );
        }
    }
}

/// Each pool's slots, instances and wall time, and the total.
fn estimate_lines(plan: &Plan, estimate: &Estimate, out: &mut String, pool_w: usize) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:pool_w$}  {:>5}  {:>9}  {:>4}  estimated wall time",
        "pool", "slots", "instances", "busy"
    );
    for (name, p) in &estimate.pools {
        let _ = writeln!(
            out,
            "{:pool_w$}  {:>5}  {:>9}  {:>3}%  {}",
            name,
            p.slots,
            thousands(p.instances as u64),
            (p.busy_share * 100.0).round() as u64,
            human_duration(p.wall)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "total: {} task {}, estimated wall time {}",
        thousands(plan.instance_count() as u64),
        if plan.instance_count() == 1 {
            "instance"
        } else {
            "instances"
        },
        human_duration(estimate.total),
    );
    let _ = writeln!(
        out,
        "p90: {} (every attempt at its p90)",
        human_duration(estimate.p90)
    );
    if !estimate.critical_path.is_empty() {
        let mut path: Vec<String> = estimate
            .critical_path
            .iter()
            .map(|(task, n)| match n {
                1 => task.clone(),
                n => format!("{task} ×{}", thousands(*n as u64)),
            })
            .collect();
        // A path through thousands of tasks is read by its ends.
        if path.len() > 2 * PATH_ENDS + 1 {
            let hidden = path.len() - 2 * PATH_ENDS;
            path.splice(
                PATH_ENDS..path.len() - PATH_ENDS,
                [format!("… {} more tasks …", thousands(hidden as u64))],
            );
        }
        let _ = writeln!(out, "critical path: {}", path.join(" → "));
    }
    cost_lines(plan, estimate, out);
}

/// What the instances will do, in one line: "3 will run, 1 current (skipped), …".
pub fn census_line(c: &Census) -> String {
    let n = |c: usize| thousands(c as u64);
    format!(
        "{} will run, {} current (skipped), {} stale (redone), {} blocked (held, quarantined), {} waiting (input not ready), {} accepted",
        n(c.will_run),
        n(c.current),
        n(c.stale),
        n(c.blocked),
        n(c.waiting),
        n(c.accepted)
    )
}

/// Tasks of a long critical path shown at each end.
const PATH_ENDS: usize = 3;

/// Where each task's attempt cost comes from: its history, or its
/// declared `expected_duration`.
fn cost_lines(plan: &Plan, estimate: &Estimate, out: &mut String) {
    use super::history::Source;
    if estimate.costs.iter().all(|c| c.source == Source::Declared) {
        let _ = writeln!(
            out,
            "attempt durations: each task's expected_duration (no attempt recorded)"
        );
        return;
    }
    let _ = writeln!(out, "attempt durations:");
    for (t, c) in plan.tasks.iter().zip(&estimate.costs) {
        match c.source {
            Source::Declared => {
                let _ = writeln!(
                    out,
                    "  {}: expected_duration {} (no attempt recorded)",
                    t.name,
                    human_duration(c.p50)
                );
            }
            Source::History => {
                let _ = writeln!(
                    out,
                    "  {}: p50 {}, p90 {} over the last {} {}; {}% failed, {:.2} retries per instance{}",
                    t.name,
                    human_duration(c.p50),
                    human_duration(c.p90),
                    c.attempts,
                    if c.attempts == 1 { "attempt" } else { "attempts" },
                    (c.failure_rate * 100.0).round() as u64,
                    c.retry_rate,
                    c.queue_wait
                        .map(|w| format!(", queued {} (p50)", human_duration(Duration::from_millis(w))))
                        .unwrap_or_default()
                );
            }
        }
    }
}

/// How many followed partitions of one task a table names one by one.
const FOLLOWED_SHOWN: usize = 12;

/// The partitions a `NAME+` followed the mappings to, each with the
/// selected partition it reads.
fn followed_lines(plan: &Plan, out: &mut String) {
    let followed: Vec<&super::PlannedTask> = plan
        .tasks
        .iter()
        .filter(|t| !t.followed.is_empty())
        .collect();
    if followed.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "followed: downstream partitions that read a selected one (`NAME+`), and why:"
    );
    for t in followed {
        let mut idx: Vec<u32> = t.followed.keys().copied().collect();
        idx.sort_unstable();
        for i in idx.iter().take(FOLLOWED_SHOWN) {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                t.name, t.keys[*i as usize], t.followed[i]
            );
        }
        if idx.len() > FOLLOWED_SHOWN {
            let _ = writeln!(
                out,
                "  {} … {} more",
                t.name,
                thousands((idx.len() - FOLLOWED_SHOWN) as u64)
            );
        }
    }
}

/// `s` padded with spaces to `w` characters (`{:w$}` counts bytes of `×`).
fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

/// "a, b, c" for a few keys; "a, b … y, z" for many.
fn elide(keys: &[&str]) -> String {
    if keys.len() <= 8 {
        keys.join(", ")
    } else {
        format!(
            "{} … {}",
            keys[..3].join(", "),
            keys[keys.len() - 3..].join(", ")
        )
    }
}

/// One line per upstream link, in words, for the task's first planned key:
/// `weekly_report 2026-W38 ← daily_sales × 7 (2026-09-14 … 2026-09-20)`.
fn mappings(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for t in &plan.tasks {
        let Some(key) = t.keys.first() else { continue };
        for up in &t.upstream {
            let u = &plan.tasks[up.task];
            let mut keys: Vec<String> = Vec::new();
            for shift in &up.shifts {
                if let Ok(ks) = crate::partition::map_keys(&t.dims, key, &u.dims, *shift, plan.now)
                {
                    for k in ks {
                        let k = k.into_string();
                        if !keys.contains(&k) {
                            keys.push(k);
                        }
                    }
                }
            }
            let how = match (keys.len(), keys.first(), keys.last()) {
                (0, _, _) => format!("{} × 0", u.name),
                (1, Some(k), _) if k == key => format!("{} (same partition)", u.name),
                (1, Some(k), _) => format!("{} {k}", u.name),
                (n, Some(a), Some(b)) => format!("{} × {n} ({a} … {b})", u.name),
                _ => continue,
            };
            let shift = up
                .shifts
                .iter()
                .filter(|s| !s.is_none())
                .map(|s| {
                    if s.lo == s.hi {
                        format!("offset {}", s.lo)
                    } else {
                        format!("window [{}, {}]", s.lo, s.hi)
                    }
                })
                .collect::<Vec<_>>();
            let shift = if shift.is_empty() {
                String::new()
            } else {
                format!(", {}", shift.join(", "))
            };
            out.push(format!(
                "{} {key} ← {how}{shift}{}",
                t.name,
                zone_rule(&t.dims, &u.dims)
            ));
        }
    }
    out
}

/// The rule of a mapping between time schemes of different timezones
/// (`; each UTC day takes the America/New_York hours that start inside
/// it`), which validation warns of; empty otherwise.
fn zone_rule(down: &crate::partition::Dims, up: &crate::partition::Dims) -> String {
    match (time_of(down), time_of(up)) {
        (Some((_, dt)), Some((ud, ut)))
            if down.position(&ud.name).is_none() && dt.zone != ut.zone =>
        {
            format!("; {}", crate::partition::mapping::rule(dt, ut))
        }
        _ => String::new(),
    }
}

/// The time dimension of `dims` and its scheme.
fn time_of(
    dims: &crate::partition::Dims,
) -> Option<(&crate::partition::Dimension, &crate::partition::TimeScheme)> {
    let d = &dims.0[dims.time_dim()?];
    Some((d, d.scheme.time()?))
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    format_version: u32,
    /// The IANA database version time periods were computed with.
    tzdb: &'static str,
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
    Range {
        from: &'a str,
        to: &'a str,
    },
    Repair {
        name: &'a str,
        reason: &'a str,
    },
}

#[derive(Serialize)]
struct JsonTask<'a> {
    name: &'a str,
    pool: &'a str,
    retry: &'a str,
    executor: &'a str,
    executor_kind: crate::manifest::ExecutorKind,
    resources: &'a crate::manifest::Resources,
    partitioned_by: Vec<&'a str>,
    scheme: &'a str,
    depends_on: Vec<&'a str>,
    depends_on_past: bool,
    instances: usize,
    /// A task that runs batches: its batches' first and last keys, one
    /// attempt's command each.
    #[serde(skip_serializing_if = "Option::is_none")]
    batches: Option<Vec<[&'a str; 2]>>,
    partitions: &'a [String],
    /// Keys added because a planned instance needs them and they are not
    /// published.
    added: Vec<&'a str>,
    /// Partitions a `NAME+` followed the mappings to, with why.
    followed: std::collections::BTreeMap<&'a str, &'a str>,
    /// Per partition (same order), the upstream partitions it needs.
    needs: Vec<Vec<JsonNeed>>,
    expected_duration_ms: u128,
    /// One attempt's p50 and p90 and where they come from.
    cost: Option<super::history::TaskCost>,
}

#[derive(Serialize)]
struct JsonNeed {
    task: String,
    partitions: Vec<String>,
}

#[derive(Serialize)]
struct JsonPool<'a> {
    name: &'a str,
    slots: u32,
    instances: usize,
    estimated_wall_ms: u128,
    busy_share: f64,
}

#[derive(Serialize)]
struct JsonTotal {
    instances: usize,
    /// At p50 attempt durations.
    estimated_wall_ms: u128,
    estimated_wall_p90_ms: u128,
    critical_path: Vec<JsonPathStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counts: Option<Census>,
}

#[derive(Serialize)]
struct JsonPathStep {
    task: String,
    instances: usize,
}

/// A task's batches as their first and last keys, if it runs batches.
fn batch_ranges(t: &super::PlannedTask) -> Option<Vec<[&str; 2]>> {
    if t.batches.is_empty() {
        return None;
    }
    let mut out: Vec<[&str; 2]> = Vec::new();
    for (i, first) in t.batches.iter().enumerate() {
        let key = t.keys[i].as_str();
        match out.last_mut() {
            Some(b) if *first as usize != i => b[1] = key,
            _ => out.push([key, key]),
        }
    }
    Some(out)
}

/// One JSON document; field names are part of weir's interface.
pub fn json(
    plan: &Plan,
    estimate: &Estimate,
    manifest: &crate::manifest::Manifest,
    census: Option<&Census>,
) -> String {
    let doc = JsonPlan {
        format_version: 1,
        tzdb: crate::partition::time::tzdb_version(),
        pipeline: &plan.pipeline,
        code_version: &plan.code_version,
        scope: match (&plan.scope, &plan.backfill) {
            (Scope::Repair { name, reason, .. }, _) => JsonScope::Repair { name, reason },
            (_, Some(b)) => JsonScope::Backfill {
                name: &b.name,
                from: &b.from,
                to: &b.to,
                reason: &b.reason,
            },
            (Scope::Partitions(keys), _) => JsonScope::Partitions { keys },
            (Scope::Range { from, to }, _) => JsonScope::Range { from, to },
            _ => JsonScope::Latest,
        },
        tasks: plan
            .tasks
            .iter()
            .enumerate()
            .map(|(ti, t)| JsonTask {
                name: &t.name,
                pool: &t.pool,
                retry: &t.retry,
                executor: &t.executor.0,
                executor_kind: t.executor.1,
                resources: &t.resources,
                partitioned_by: t.dims.names(),
                scheme: &t.scheme,
                depends_on: t
                    .upstream
                    .iter()
                    .map(|u| plan.tasks[u.task].name.as_str())
                    .collect(),
                depends_on_past: t.depends_on_past,
                instances: t.keys.len(),
                batches: batch_ranges(t),
                partitions: &t.keys,
                added: {
                    let mut idx: Vec<u32> = t.added.iter().copied().collect();
                    idx.sort_unstable();
                    idx.iter().map(|i| t.keys[*i as usize].as_str()).collect()
                },
                followed: t
                    .followed
                    .iter()
                    .map(|(i, why)| (t.keys[*i as usize].as_str(), why.as_str()))
                    .collect(),
                needs: (0..t.keys.len())
                    .map(|i| {
                        plan.needs(manifest, ti, i)
                            .into_iter()
                            .map(|(task, keys)| JsonNeed {
                                task,
                                partitions: keys.into_iter().map(|k| k.into_string()).collect(),
                            })
                            .collect()
                    })
                    .collect(),
                expected_duration_ms: t.expected_duration.as_millis(),
                cost: estimate.costs.get(ti).copied(),
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
                busy_share: p.busy_share,
            })
            .collect(),
        total: JsonTotal {
            instances: plan.instance_count(),
            estimated_wall_ms: estimate.total.as_millis(),
            estimated_wall_p90_ms: estimate.p90.as_millis(),
            critical_path: estimate
                .critical_path
                .iter()
                .map(|(task, n)| JsonPathStep {
                    task: task.clone(),
                    instances: *n,
                })
                .collect(),
            counts: census.copied(),
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
            "  {:?} [label=\"{}\\npool {} · {}\"];",
            t.name,
            t.name,
            t.pool,
            count(t.keys.len(), "instance", "instances")
        );
    }
    for t in &plan.tasks {
        for d in &t.downstream {
            let _ = writeln!(out, "  {:?} -> {:?};", t.name, plan.tasks[d.0].name);
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
            "  t{i}[\"{}<br/>pool {} · {}\"]",
            t.name,
            t.pool,
            count(t.keys.len(), "instance", "instances")
        );
    }
    for (i, t) in plan.tasks.iter().enumerate() {
        for d in &t.downstream {
            let _ = writeln!(out, "  t{i} --> t{}", d.0);
        }
    }
    out
}
