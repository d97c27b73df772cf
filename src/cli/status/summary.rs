//! `weir status` at scale: each task's partitions counted by state and the
//! oldest problems first when the full listing would take more than a
//! screen; `--task`, `--state` and `--from/--to` narrow what is shown
//! (and what `--check` pages on); `--all` is the full listing, `--json`
//! always is (with a `summary` field added).
//!
//! An instance has one state, the first that applies in this order: an
//! unreadable commit log, an operator's marker (HELD, QUARANTINED,
//! ABANDONED, RELEASED: what is being done about it), LATE, WAITING,
//! MISSING, STALE, PUBLISHED. Every state but PUBLISHED is a problem.
//! A problem is as old as the moment it began: a LATE partition's SLA
//! deadline, a marker's time, otherwise the partition's period end (the
//! earliest of these when several apply); partitions without a period
//! (static keys) come after those that have one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;

use serde_json::json;

use super::StatusArgs;
use crate::cli::error::CliError;
use crate::cli::run::plural;
use crate::manifest::Manifest;
use crate::ops::status::Overview;

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
    const ALL: [InstanceState; 10] = [
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
    fn upper(self) -> &'static str {
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
    fn lower(self) -> &'static str {
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
struct Instance {
    task: String,
    partition: String,
    state: InstanceState,
    /// When the problem began (seconds), if it has a time.
    since: Option<i64>,
    detail: String,
}

/// One state an instance is in, with when it began and its detail.
type Candidate = (InstanceState, Option<i64>, String);

fn seconds(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// Every instance the overview names, with its one state; problems first,
/// oldest first, then the published ones.
fn instances(manifest: &Manifest, overview: &Overview) -> Vec<Instance> {
    // (task, partition) → the candidate states with their time and detail.
    let mut found: HashMap<(String, String), Vec<Candidate>> = HashMap::new();
    let mut add = |task: &str, partition: &str, state, since, detail: String| {
        found
            .entry((task.to_string(), partition.to_string()))
            .or_default()
            .push((state, since, detail));
    };
    let end = |task: &str, partition: &str| {
        manifest
            .tasks
            .get(task)
            .and_then(|t| t.dims.interval_end(partition))
    };
    for (task, record) in &overview.published {
        add(
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
                end(&m.task, &m.partition),
                "expected, not published".to_string(),
            ),
        };
        add(&m.task, &m.partition, state, since, detail);
    }
    for (task, partition, detail) in &overview.waiting {
        add(
            task,
            partition,
            InstanceState::Waiting,
            end(task, partition),
            detail.clone(),
        );
    }
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
        add(
            &m.task,
            &m.partition,
            state,
            seconds(&m.since),
            m.reason.clone(),
        );
    }
    for m in &overview.abandoned {
        add(
            &m.task,
            &m.partition,
            InstanceState::Abandoned,
            seconds(&m.since),
            m.reason.clone(),
        );
    }
    for (m, changed) in &overview.released {
        add(
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
    for st in &overview.stale {
        add(
            &st.task,
            &st.partition,
            InstanceState::Stale,
            end(&st.task, &st.partition),
            st.detail.clone(),
        );
    }
    for (dataset, partition, error) in &overview.unreadable {
        if let Some(task) = manifest.producer(dataset) {
            add(
                &task.name,
                partition,
                InstanceState::Unreadable,
                None,
                format!("cannot read its commit log: {error}"),
            );
        }
    }
    let task_index: HashMap<&str, usize> = manifest
        .tasks
        .keys()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let mut out: Vec<Instance> = found
        .into_iter()
        .filter_map(|((task, partition), mut candidates)| {
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
        })
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
    out
}

/// Keeps in `overview` only the instances `--task`, `--state` and
/// `--from/--to` select.
pub(super) fn narrow(
    manifest: &Manifest,
    overview: &mut Overview,
    args: &StatusArgs,
) -> Result<(), CliError> {
    for task in &args.task {
        if !manifest.tasks.contains_key(task) {
            return Err(CliError::Usage(format!(
                "no task `{task}` in `{}`\n  help: {}",
                manifest.pipeline.name,
                crate::manifest::unknown_task_help(manifest, task)
            )));
        }
    }
    let now = crate::clock::now();
    // The partitions a run over --from..=--to would cover, per task.
    let range: Option<HashMap<&str, HashSet<String>>> = match (&args.from, &args.to) {
        (Some(from), Some(to)) => {
            let names: Vec<&str> = manifest.tasks.keys().map(String::as_str).collect();
            let backfill = crate::plan::range(manifest, from, to, &names, now)?;
            Some(
                manifest
                    .tasks
                    .values()
                    .map(|t| {
                        let keys = crate::plan::partitions::backfill(&t.dims, &backfill, now);
                        (t.name.as_str(), keys.into_iter().collect())
                    })
                    .collect(),
            )
        }
        _ => None,
    };
    if args.task.is_empty() && args.state.is_empty() && range.is_none() {
        return Ok(());
    }
    let keep: HashSet<(String, String)> = instances(manifest, overview)
        .into_iter()
        .filter(|i| args.task.is_empty() || args.task.contains(&i.task))
        .filter(|i| args.state.is_empty() || args.state.contains(&i.state))
        .filter(|i| {
            range.as_ref().is_none_or(|r| {
                r.get(i.task.as_str())
                    .is_some_and(|keys| keys.contains(&i.partition))
            })
        })
        .map(|i| (i.task, i.partition))
        .collect();
    let kept =
        |task: &str, partition: &str| keep.contains(&(task.to_string(), partition.to_string()));
    overview.published.retain(|(t, r)| kept(t, &r.partition));
    overview.missing.retain(|m| kept(&m.task, &m.partition));
    overview.marks.retain(|m| kept(&m.task, &m.partition));
    overview
        .released
        .retain(|(m, _)| kept(&m.task, &m.partition));
    overview.abandoned.retain(|m| kept(&m.task, &m.partition));
    overview.stale.retain(|s| kept(&s.task, &s.partition));
    overview.waiting.retain(|(t, p, _)| kept(t, p));
    overview
        .unreadable
        .retain(|(d, p, _)| manifest.producer(d).is_some_and(|t| kept(&t.name, p)));
    Ok(())
}

/// Lines a screen holds: the terminal's height when stdout is one, else 50.
fn screen_rows() -> usize {
    const PIPED: usize = 50;
    if !std::io::stdout().is_terminal() {
        return PIPED;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct it is given,
    // which lives for the call.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    if rc == 0 && size.ws_row > 0 {
        usize::from(size.ws_row)
    } else {
        PIPED
    }
}

/// Lines the full listing prints, about: a row per publication and per
/// problem line, one per dataset with missing partitions.
fn listing_rows(overview: &Overview) -> usize {
    let late = overview
        .missing
        .iter()
        .filter(|m| m.late_since.is_some())
        .count();
    let datasets: HashSet<&str> = overview
        .missing
        .iter()
        .map(|m| m.dataset.as_str())
        .collect();
    overview.published.len()
        + late
        + overview.marks.len()
        + overview.waiting.len()
        + overview.released.len()
        + overview.abandoned.len()
        + overview.stale.len()
        + datasets.len()
}

/// Whether a filter narrows what `status` shows.
pub(super) fn narrowed(args: &StatusArgs) -> bool {
    !args.task.is_empty() || !args.state.is_empty() || args.from.is_some()
}

/// Whether `status` prints the summary instead of the full listing.
pub(super) fn summarised(args: &StatusArgs, overview: &Overview) -> bool {
    !args.all && listing_rows(overview) > screen_rows()
}

/// Counts by state of one task's instances, and its oldest problem.
struct TaskCounts<'i> {
    total: usize,
    by_state: BTreeMap<InstanceState, usize>,
    oldest: Option<&'i Instance>,
}

fn per_task<'i>(manifest: &Manifest, all: &'i [Instance]) -> Vec<(String, TaskCounts<'i>)> {
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

fn since_text(since: Option<i64>) -> String {
    since
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(String::new, |t| format!(" since {t}"))
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

/// The summary: a table of counts per task, then the oldest problems, as
/// many as fit a screen.
pub(super) fn print(
    manifest_path: &std::path::Path,
    manifest: &Manifest,
    overview: &Overview,
    attention: &[super::Attention],
) {
    let all = instances(manifest, overview);
    let tasks = per_task(manifest, &all);
    let shown_states: Vec<InstanceState> = InstanceState::ALL
        .iter()
        .copied()
        .filter(|s| tasks.iter().any(|(_, c)| c.by_state.contains_key(s)))
        .collect();
    let manifest_word =
        crate::partition::shell_word(&manifest_path.display().to_string()).into_owned();
    println!(
        "{} {} of {} {}, summarised: `weir status {manifest_word} --all` lists every partition, `--json` prints them all",
        crate::plan::render::thousands(all.len() as u64),
        plural(all.len(), "partition", "partitions"),
        tasks.len(),
        plural(tasks.len(), "task", "tasks"),
    );
    println!();
    let mut header = vec!["task", "partitions"];
    header.extend(shown_states.iter().map(|s| s.lower()));
    header.push("oldest problem");
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|(task, c)| {
            let mut row = vec![task.clone(), crate::plan::render::thousands(c.total as u64)];
            row.extend(shown_states.iter().map(|s| {
                crate::plan::render::thousands(c.by_state.get(s).copied().unwrap_or(0) as u64)
            }));
            row.push(c.oldest.map_or_else(String::new, |i| {
                format!("{} {}{}", i.state.upper(), i.partition, since_text(i.since))
            }));
            row
        })
        .collect();
    let numeric: Vec<usize> = (1..=shown_states.len() + 1).collect();
    for line in crate::cli::aligned(&header, &rows, &numeric) {
        println!("{}", line.trim_end());
    }
    // What `--check` pages on beyond the instances' own states (a Delta
    // table behind weir's records): always named, since it sets the exit code.
    let named = ["LATE", "HELD", "QUARANTINED"];
    let others: Vec<&super::Attention> = attention
        .iter()
        .filter(|a| !named.contains(&a.state))
        .collect();
    if !others.is_empty() {
        println!();
        for a in others {
            println!(
                "{:<11} {} {}: {}",
                a.state,
                a.task,
                a.partition,
                crate::ops::printable(&a.detail)
            );
        }
    }
    let problems: Vec<&Instance> = all
        .iter()
        .filter(|i| i.state != InstanceState::Published)
        .collect();
    if problems.is_empty() {
        return;
    }
    // What is left of a screen after the heading and the table.
    let room = screen_rows().saturating_sub(tasks.len() + 7).max(10);
    println!();
    println!(
        "{} {}, oldest first:",
        crate::plan::render::thousands(problems.len() as u64),
        plural(problems.len(), "problem", "problems")
    );
    for i in problems.iter().take(room) {
        println!(
            "{:<11} {} {}: {}{}",
            i.state.upper(),
            i.task,
            i.partition,
            crate::ops::printable(&i.detail),
            // A LATE line names its deadline, and a STALE one's period end
            // is not when it went stale.
            if matches!(i.state, InstanceState::Late | InstanceState::Stale) {
                String::new()
            } else {
                since_text(i.since)
            }
        );
    }
    if problems.len() > room {
        let more = problems.len() - room;
        println!(
            "… {more} more: narrow with `--task`, `--state` or `--from`/`--to`, or list {} with `--all`",
            plural(more, "it", "them")
        );
    }
}
