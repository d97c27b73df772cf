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
    let mut out = recorded(manifest, status, &m);
    let words = LastWords::read(events);
    out.extend(failing(manifest, status, &words, &m));
    out.extend(missed(manifest, status, &words, &m));
    out.extend(undelivered(&words));
    if let Some(p) = undelivered_lineage(warehouse) {
        out.push(p);
    }
    // Stable: the order status lists them in, within each kind.
    out.sort_by_key(|p| p.kind);
    let (mut out, more) = cap(out);
    for p in out.iter_mut().take(MAX_EXPLAINED) {
        attach_evidence(manifest, warehouse, events, p);
    }
    (out, more)
}

impl Problem {
    /// A problem with only its kind, place and words; the rest is added by
    /// whoever knows it.
    fn bare(
        kind: ProblemKind,
        task: Option<String>,
        partition: Option<String>,
        detail: String,
    ) -> Self {
        Problem {
            kind,
            task,
            partition,
            detail,
            evidence: None,
            stderr_tail: None,
            recommendation: None,
            command: None,
            explain: None,
        }
    }

    /// A task instance's problem, with the `weir explain` command for it
    /// (`m` is the manifest's path, quoted for a shell).
    fn instance(kind: ProblemKind, task: &str, partition: &str, detail: String, m: &str) -> Self {
        Problem {
            explain: Some(format!(
                "weir explain {m} {} --partition {}",
                shell_word(task),
                shell_word(partition)
            )),
            ..Self::bare(
                kind,
                Some(task.to_owned()),
                Some(partition.to_owned()),
                detail,
            )
        }
    }
}

/// The problems `weir status` already found: drifted files, unreadable
/// commit logs, quarantined, held and late instances, in its order.
fn recorded(manifest: &Manifest, status: &Status, m: &str) -> Vec<Problem> {
    let mut out = Vec::new();
    for d in &status.drifts {
        out.push(Problem {
            recommendation: Some(format!(
                "restore the file, or publish a new generation: `weir run {m} --partition {} --force`, or `weir rollback {m} {} --partition {}` to an intact one",
                shell_word(&d.partition),
                shell_word(&d.dataset),
                shell_word(&d.partition)
            )),
            ..Problem::bare(
                ProblemKind::Drifted,
                manifest.producer(&d.dataset).map(|t| t.name.clone()),
                Some(d.partition.clone()),
                d.to_string(),
            )
        });
    }
    for (dataset, partition, error) in &status.overview.unreadable {
        out.push(Problem::bare(
            ProblemKind::Unreadable,
            manifest.producer(dataset).map(|t| t.name.clone()),
            Some(partition.clone()),
            format!("`{dataset}` {partition}: cannot read its commit log: {error}"),
        ));
    }
    for a in &status.attention {
        let kind = match a.state {
            "QUARANTINED" => ProblemKind::Quarantined,
            "HELD" => ProblemKind::Held,
            "LATE" => ProblemKind::Late,
            _ => continue,
        };
        out.push(Problem::instance(
            kind,
            &a.task,
            &a.partition,
            a.detail.clone(),
            m,
        ));
    }
    out
}

/// The instances published by their current generation.
fn published(status: &Status) -> HashSet<(&str, &str)> {
    status
        .overview
        .published
        .iter()
        .map(|(t, r)| (t.as_str(), r.partition.as_str()))
        .collect()
}

/// What the event logs last said about each instance and each
/// notification, in the order they said it.
struct LastWords<'a> {
    /// The last outcome of each instance: failing until something else (a
    /// publication, a mark, an acceptance) is said.
    last: HashMap<(&'a str, &'a str), &'a EventRecord>,
    /// Due partitions the daemon skipped.
    missed: Vec<(&'a str, &'a str, &'a EventRecord)>,
    /// Instances an operator accepted as missed.
    accepted: HashSet<(&'a str, &'a str)>,
    /// Notifications and lineage events that failed, in order.
    undelivered: Vec<&'a EventRecord>,
    /// The keys of notifications that went out at last.
    delivered: HashSet<String>,
}

impl<'a> LastWords<'a> {
    fn read(events: &'a [EventRecord]) -> Self {
        let mut words = LastWords {
            last: HashMap::new(),
            missed: Vec::new(),
            accepted: HashSet::new(),
            undelivered: Vec::new(),
            delivered: HashSet::new(),
        };
        for e in events {
            let key = (e.task.as_deref(), e.partition.as_deref());
            match (e.state, key) {
                (State::Missed, (Some(t), Some(p))) => words.missed.push((t, p, e)),
                (State::Accepted, (Some(t), Some(p))) => {
                    words.accepted.insert((t, p));
                }
                (State::NotifyFailed | State::LineageUndelivered, _) => words.undelivered.push(e),
                (State::Notified, _) => {
                    words.delivered.insert(notification_key(e));
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
                    words.last.insert((t, p), e);
                }
                _ => {}
            }
        }
        words
    }
}

/// Instances whose last attempt failed and that nothing published, marked
/// or abandoned since, by task and partition.
fn failing(manifest: &Manifest, status: &Status, words: &LastWords, m: &str) -> Vec<Problem> {
    let published = published(status);
    let marked: HashSet<(&str, &str)> = status
        .overview
        .marks
        .iter()
        .chain(&status.overview.abandoned)
        .chain(status.overview.released.iter().map(|(m, _)| m))
        .map(|m| (m.task.as_str(), m.partition.as_str()))
        .collect();
    let mut failing: Vec<(&(&str, &str), &&EventRecord)> = words
        .last
        .iter()
        .filter(|(k, e)| {
            matches!(e.state, State::Failed | State::GateFailed | State::Unknown)
                && !published.contains(*k)
                && !marked.contains(*k)
                && manifest.tasks.contains_key(k.0)
        })
        .collect();
    failing.sort_by(|a, b| a.0.cmp(b.0));
    failing
        .into_iter()
        .map(|((task, partition), e)| {
            Problem::instance(
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
                m,
            )
        })
        .collect()
}

/// Skipped partitions not published or accepted since, once each.
fn missed(manifest: &Manifest, status: &Status, words: &LastWords, m: &str) -> Vec<Problem> {
    let published = published(status);
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for &(task, partition, e) in &words.missed {
        if published.contains(&(task, partition))
            || words.accepted.contains(&(task, partition))
            || !seen.insert((task, partition))
            || !manifest.tasks.contains_key(task)
        {
            continue;
        }
        out.push(Problem::instance(
            ProblemKind::Missed,
            task,
            partition,
            e.detail.clone(),
            m,
        ));
    }
    out
}

/// Notifications and lineage events that failed and never went out, once
/// each.
fn undelivered(words: &LastWords) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for e in &words.undelivered {
        let key = notification_key(e);
        if words.delivered.contains(&key) || !seen.insert(key) {
            continue;
        }
        out.push(Problem::bare(
            ProblemKind::Undelivered,
            e.task.clone(),
            e.partition.clone(),
            format!("{} (run {}, {})", e.detail, e.run_id, e.ts),
        ));
    }
    out
}

/// The last run's OpenLineage events that were not all delivered.
fn undelivered_lineage(warehouse: &Warehouse) -> Option<Problem> {
    let note = crate::lineage::last_note(warehouse.root())?;
    if note.delivery.complete() {
        return None;
    }
    Some(Problem::bare(
        ProblemKind::Undelivered,
        None,
        None,
        format!(
            "run {}: {} OpenLineage events not delivered to {}: {}",
            note.run_id.as_deref().unwrap_or("?"),
            note.delivery.failed + note.delivery.dropped,
            note.sink,
            note.delivery.last_error.as_deref().unwrap_or("queue full")
        ),
    ))
}

/// Adds to an instance's problem its last attempt's evidence and stderr
/// and what `weir explain` recommends.
fn attach_evidence(
    manifest: &Manifest,
    warehouse: &Warehouse,
    events: &[EventRecord],
    p: &mut Problem,
) {
    let (Some(task), Some(partition)) = (&p.task, &p.partition) else {
        return;
    };
    if p.explain.is_none() || !manifest.tasks.contains_key(task) {
        return;
    }
    // An instance whose evidence cannot be read keeps its line and its
    // `weir explain` command, which will say why.
    let Ok(x) = explain::explain(manifest, warehouse, events, task, partition) else {
        return;
    };
    if let Some(a) = x.attempts.last() {
        p.evidence = Some(evidence(a));
        let lines: Vec<&str> = a.stderr_tail.lines().collect();
        if !lines.is_empty() {
            let from = lines.len().saturating_sub(STDERR_LINES);
            p.stderr_tail = Some(lines[from..].join("\n"));
        }
    }
    p.command = first_command(&x.recommendation);
    p.recommendation = Some(x.recommendation);
}

/// An attempt's evidence in one line: run, attempt, state, exit code,
/// class and detail.
fn evidence(a: &explain::AttemptEvidence) -> String {
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
    evidence
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
