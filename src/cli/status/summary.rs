//! `weir status` at scale: each task's partitions counted by state and the
//! oldest problems first when the full listing would take more than a
//! screen; `--task`, `--state` and `--from/--to` narrow what is shown
//! (and what `--check` pages on); `--all` is the full listing, `--json`
//! always is (with a `summary` field added, `ops::status::summary`, where
//! the states are decided).

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;

use super::StatusArgs;
use crate::cli::error::CliError;
use crate::cli::plural;
use crate::manifest::Manifest;
use crate::ops::status::summary::{instances, per_task, Instance, InstanceState};
use crate::ops::status::Overview;

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

fn since_text(since: Option<i64>) -> String {
    since
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(String::new, |t| format!(" since {t}"))
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
    print_task_table(&tasks, &shown_states);
    print_other_attention(attention);
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

/// A row per task: its partitions, how many are in each state shown, and
/// its oldest problem.
fn print_task_table(
    tasks: &[(String, crate::ops::status::summary::TaskCounts<'_>)],
    shown_states: &[InstanceState],
) {
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
}

/// What `--check` pages on beyond the instances' own states (a Delta
/// table behind weir's records): always named, since it sets the exit code.
fn print_other_attention(attention: &[super::Attention]) {
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
}
