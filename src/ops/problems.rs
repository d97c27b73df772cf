//! What needs a person, first: the one list the console's first screen and
//! the static report open on. Every item is drawn from what `weir status`
//! computed ([`Status`]) and the event logs, and carries the evidence and the
//! command `weir explain` recommends for it, so the page and the terminal
//! never disagree about what to do.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::events::{EventRecord, State};
use crate::manifest::Manifest;
use crate::ops::explain;
use crate::ops::status::Status;
use crate::partition::shell_word;
use crate::store::Warehouse;

/// Problems explained one by one (each reads the instance's marks and its
/// upstream commit logs); past that only the `weir explain` command is given.
const MAX_EXPLAINED: usize = 100;

/// Lines of a failed attempt's stderr shown with the problem.
const STDERR_LINES: usize = 8;

/// What kind of attention an item needs, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProblemKind {
    /// Published files are not what their generation committed.
    Drifted,
    /// A partition's commit log cannot be read.
    Unreadable,
    /// A deterministic failure: not retried until a person acts.
    Quarantined,
    /// Held for an operator (retries spent, an operator failure, a rollback).
    Held,
    /// The last attempt failed and nothing holds the instance yet.
    Failing,
    /// Not published by its SLA deadline.
    Late,
    /// A due partition the daemon skipped after downtime (no catch-up).
    Missed,
    /// A notification or lineage event that could not be delivered.
    Undelivered,
}

impl ProblemKind {
    /// Its name, as on the page and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Drifted => "DRIFTED",
            Self::Unreadable => "UNREADABLE",
            Self::Quarantined => "QUARANTINED",
            Self::Held => "HELD",
            Self::Failing => "FAILING",
            Self::Late => "LATE",
            Self::Missed => "MISSED",
            Self::Undelivered => "UNDELIVERED",
        }
    }
}

/// One thing that needs a person.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// The task, for an instance's problem.
    pub task: Option<String>,
    /// The partition (or dataset partition), when there is one.
    pub partition: Option<String>,
    /// What is wrong, in words (the mark's reason, the drift, the deadline).
    pub detail: String,
    /// The last attempt's evidence: state, exit code, class, detail.
    pub evidence: Option<String>,
    /// The last lines of that attempt's stderr.
    pub stderr_tail: Option<String>,
    /// What `weir explain` recommends, commands in backticks.
    pub recommendation: Option<String>,
    /// The first command of the recommendation.
    pub command: Option<String>,
    /// The `weir explain` command for the whole evidence.
    pub explain: Option<String>,
}

/// Everything that needs a person in `manifest`'s warehouse, most urgent
/// kind first: the first [`LISTED_PER_GROUP`] of each kind and task, with
/// their evidence, and the rest counted. `events` are every run's records in
/// order (as `weir explain` reads them).
pub fn gather(
    manifest: &Manifest,
    warehouse: &Warehouse,
    status: &Status,
    events: &[EventRecord],
) -> (Vec<Problem>, Vec<More>) {
    let m = shell_word(&manifest.path.display().to_string()).into_owned();
    let explain_cmd = |task: &str, partition: &str| {
        format!(
            "weir explain {m} {} --partition {}",
            shell_word(task),
            shell_word(partition)
        )
    };
    let instance = |kind, task: &str, partition: &str, detail: String| Problem {
        kind,
        task: Some(task.to_owned()),
        partition: Some(partition.to_owned()),
        detail,
        evidence: None,
        stderr_tail: None,
        recommendation: None,
        command: None,
        explain: Some(explain_cmd(task, partition)),
    };
    let mut out = Vec::new();
    for d in &status.drifts {
        out.push(Problem {
            kind: ProblemKind::Drifted,
            task: manifest.producer(&d.dataset).map(|t| t.name.clone()),
            partition: Some(d.partition.clone()),
            detail: d.to_string(),
            evidence: None,
            stderr_tail: None,
            recommendation: Some(format!(
                "restore the file, or publish a new generation: `weir run {m} --partition {} --force`, or `weir rollback {m} {} --partition {}` to an intact one",
                shell_word(&d.partition),
                shell_word(&d.dataset),
                shell_word(&d.partition)
            )),
            command: None,
            explain: None,
        });
    }
    for (dataset, partition, error) in &status.overview.unreadable {
        out.push(Problem {
            kind: ProblemKind::Unreadable,
            task: manifest.producer(dataset).map(|t| t.name.clone()),
            partition: Some(partition.clone()),
            detail: format!("`{dataset}` {partition}: cannot read its commit log: {error}"),
            evidence: None,
            stderr_tail: None,
            recommendation: None,
            command: None,
            explain: None,
        });
    }
    for a in &status.attention {
        let kind = match a.state {
            "QUARANTINED" => ProblemKind::Quarantined,
            "HELD" => ProblemKind::Held,
            "LATE" => ProblemKind::Late,
            _ => continue,
        };
        out.push(instance(kind, &a.task, &a.partition, a.detail.clone()));
    }
    let published: HashSet<(&str, &str)> = status
        .overview
        .published
        .iter()
        .map(|(t, r)| (t.as_str(), r.partition.as_str()))
        .collect();
    let marked: HashSet<(&str, &str)> = status
        .overview
        .marks
        .iter()
        .chain(&status.overview.abandoned)
        .chain(status.overview.released.iter().map(|(m, _)| m))
        .map(|m| (m.task.as_str(), m.partition.as_str()))
        .collect();
    // The last word of the logs about each instance: failing until
    // something else (a publication, a mark, an acceptance) is said.
    let mut last: HashMap<(&str, &str), &EventRecord> = HashMap::new();
    let mut missed: Vec<(&str, &str, &EventRecord)> = Vec::new();
    let mut accepted: HashSet<(&str, &str)> = HashSet::new();
    let mut undelivered: Vec<&EventRecord> = Vec::new();
    let mut delivered: HashSet<String> = HashSet::new();
    for e in events {
        let key = (e.task.as_deref(), e.partition.as_deref());
        match (e.state, key) {
            (State::Missed, (Some(t), Some(p))) => missed.push((t, p, e)),
            (State::Accepted, (Some(t), Some(p))) => {
                accepted.insert((t, p));
            }
            (State::NotifyFailed | State::LineageUndelivered, _) => undelivered.push(e),
            (State::Notified, _) => {
                delivered.insert(notification_key(e));
            }
            (
                State::Failed
                | State::GateFailed
                | State::Unknown
                | State::Success
                | State::Published
                | State::AlreadyPublished
                | State::RejectedStale
                | State::Interrupted,
                (Some(t), Some(p)),
            ) => {
                last.insert((t, p), e);
            }
            _ => {}
        }
    }
    let mut failing: Vec<(&(&str, &str), &&EventRecord)> = last
        .iter()
        .filter(|(k, e)| {
            matches!(e.state, State::Failed | State::GateFailed | State::Unknown)
                && !published.contains(*k)
                && !marked.contains(*k)
                && manifest.tasks.contains_key(k.0)
        })
        .collect();
    failing.sort_by(|a, b| a.0.cmp(b.0));
    for ((task, partition), e) in failing {
        out.push(instance(
            ProblemKind::Failing,
            task,
            partition,
            format!(
                "attempt {} of run {} ended {}: {}",
                e.attempt.unwrap_or(0),
                e.run_id,
                e.state.as_str(),
                e.detail
            ),
        ));
    }
    let mut seen = HashSet::new();
    for (task, partition, e) in missed {
        if published.contains(&(task, partition))
            || accepted.contains(&(task, partition))
            || !seen.insert((task, partition))
            || !manifest.tasks.contains_key(task)
        {
            continue;
        }
        out.push(instance(
            ProblemKind::Missed,
            task,
            partition,
            e.detail.clone(),
        ));
    }
    let mut seen = HashSet::new();
    for e in undelivered {
        let key = notification_key(e);
        if delivered.contains(&key) || !seen.insert(key) {
            continue;
        }
        out.push(Problem {
            kind: ProblemKind::Undelivered,
            task: e.task.clone(),
            partition: e.partition.clone(),
            detail: format!("{} (run {}, {})", e.detail, e.run_id, e.ts),
            evidence: None,
            stderr_tail: None,
            recommendation: None,
            command: None,
            explain: None,
        });
    }
    if let Some(note) = crate::lineage::last_note(warehouse.root()) {
        if !note.delivery.complete() {
            out.push(Problem {
                kind: ProblemKind::Undelivered,
                task: None,
                partition: None,
                detail: format!(
                    "run {}: {} OpenLineage events not delivered to {}: {}",
                    note.run_id.as_deref().unwrap_or("?"),
                    note.delivery.failed + note.delivery.dropped,
                    note.sink,
                    note.delivery.last_error.as_deref().unwrap_or("queue full")
                ),
                evidence: None,
                stderr_tail: None,
                recommendation: None,
                command: None,
                explain: None,
            });
        }
    }
    // Stable: the order status lists them in, within each kind.
    out.sort_by_key(|p| p.kind);
    let (mut out, more) = cap(out);
    for p in out.iter_mut().take(MAX_EXPLAINED) {
        let (Some(task), Some(partition)) = (&p.task, &p.partition) else {
            continue;
        };
        if p.explain.is_none() || !manifest.tasks.contains_key(task) {
            continue;
        }
        // An instance whose evidence cannot be read keeps its line and its
        // `weir explain` command, which will say why.
        let Ok(x) = explain::explain(manifest, warehouse, events, task, partition) else {
            continue;
        };
        if let Some(a) = x.attempts.last() {
            let mut evidence = format!("run {} attempt {}", a.run_id, a.attempt);
            if !a.state.is_empty() {
                evidence.push_str(&format!(": {}", a.state));
            }
            if let Some(code) = a.exit_code {
                evidence.push_str(&format!(", exit code {code}"));
            }
            if let Some(class) = &a.class {
                evidence.push_str(&format!(" ({class})"));
            }
            // "exit code 65" again says nothing new.
            let repeated = a
                .exit_code
                .is_some_and(|c| a.detail == format!("exit code {c}"));
            if !a.detail.is_empty() && !repeated {
                evidence.push_str(&format!(": {}", a.detail));
            }
            p.evidence = Some(evidence);
            let lines: Vec<&str> = a.stderr_tail.lines().collect();
            if !lines.is_empty() {
                let from = lines.len().saturating_sub(STDERR_LINES);
                p.stderr_tail = Some(lines[from..].join("\n"));
            }
        }
        p.command = first_command(&x.recommendation);
        p.recommendation = Some(x.recommendation);
    }
    (out, more)
}

/// How many problems there are, listed and counted.
pub fn total(listed: &[Problem], more: &[More]) -> usize {
    listed.len() + more.iter().map(|m| m.count).sum::<usize>()
}

/// What identifies one notification across its tries: the outbox key when
/// the event carries one, else what it is about.
fn notification_key(e: &EventRecord) -> String {
    match e.data.get("key").and_then(serde_json::Value::as_str) {
        Some(key) => key.to_owned(),
        None => format!(
            "{}\u{0}{}\u{0}{}",
            e.task.as_deref().unwrap_or(""),
            e.partition.as_deref().unwrap_or(""),
            e.data
                .get("target")
                .map(ToString::to_string)
                .unwrap_or_default()
        ),
    }
}

/// Problems of one kind and task listed one by one; past that they are
/// counted (a feed down for a year is one story, not 365 lines).
pub const LISTED_PER_GROUP: usize = 20;

/// Problems of one kind and task beyond [`LISTED_PER_GROUP`].
#[derive(Debug, Clone, Serialize)]
pub struct More {
    /// What kind.
    pub kind: ProblemKind,
    /// The task, if the problems have one.
    pub task: Option<String>,
    /// How many more.
    pub count: usize,
    /// The smallest and largest partition key among them.
    pub first: Option<String>,
    /// The largest.
    pub last: Option<String>,
}

/// Keeps the first [`LISTED_PER_GROUP`] problems of each kind and task,
/// and counts the rest per group.
fn cap(problems: Vec<Problem>) -> (Vec<Problem>, Vec<More>) {
    let mut listed: HashMap<(ProblemKind, Option<String>), usize> = HashMap::new();
    let mut kept = Vec::new();
    let mut more: Vec<More> = Vec::new();
    for p in problems {
        let n = listed.entry((p.kind, p.task.clone())).or_insert(0);
        *n += 1;
        if *n <= LISTED_PER_GROUP {
            kept.push(p);
            continue;
        }
        let group = match more
            .iter_mut()
            .position(|m| m.kind == p.kind && m.task == p.task)
        {
            Some(i) => &mut more[i],
            None => {
                more.push(More {
                    kind: p.kind,
                    task: p.task.clone(),
                    count: 0,
                    first: None,
                    last: None,
                });
                more.last_mut().expect("just pushed")
            }
        };
        group.count += 1;
        if let Some(key) = p.partition {
            if group.first.as_ref().is_none_or(|f| key < *f) {
                group.first = Some(key.clone());
            }
            if group.last.as_ref().is_none_or(|l| key > *l) {
                group.last = Some(key);
            }
        }
    }
    (kept, more)
}

/// The first `weir …` command quoted in backticks in `text`.
pub fn first_command(text: &str) -> Option<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .find(|part| part.starts_with("weir "))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_command_is_the_first_quoted_weir_command() {
        assert_eq!(
            super::first_command(
                "fix data: the gates on `id` failed, then `weir retry m.toml t --partition a --note \"...\"` or `weir abandon`"
            )
            .as_deref(),
            Some("weir retry m.toml t --partition a --note \"...\"")
        );
        assert_eq!(super::first_command("wait: a retry is scheduled"), None);
    }
}
