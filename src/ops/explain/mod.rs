//! `weir explain`: the evidence an operator needs to decide about one task
//! instance, gathered from the event logs, the attempts' files and the commit
//! logs, with a recommended action.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::events::payload::{FailureClass, Payload};
use crate::events::{EventRecord, State};
use crate::manifest::Manifest;
use crate::partition::shell_word;
use crate::store::certs as certify;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::{CommitRecord, FencingToken, PartitionStore, StoreError, Warehouse};

mod render;
pub use render::render;

/// One attempt, as the evidence tells it.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptEvidence {
    /// Run.
    pub run_id: String,
    /// Attempt number.
    pub attempt: u32,
    /// Token.
    pub token: Option<u64>,
    /// When it started.
    pub started: String,
    /// Its last state (PUBLISHED, FAILED, GATE_FAILED, REJECTED_STALE …).
    pub state: String,
    /// What the scheduler decided next (RETRYING, QUARANTINED, HELD), if anything.
    pub decision: Option<String>,
    /// Exit code, if it exited.
    pub exit_code: Option<i64>,
    /// Signal, if killed.
    pub signal: Option<i64>,
    /// The scheduler job that ran it (Slurm), from RUNNING's data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The batch its command ran for (first key, partitions), if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<(String, u32)>,
    /// Failure class.
    pub class: Option<FailureClass>,
    /// Runtime of the command.
    pub duration_ms: Option<u64>,
    /// Why, in words.
    pub detail: String,
    /// Failed gates with expected and actual values.
    pub failed_gates: Value,
    /// The tail of stderr.
    pub stderr_tail: String,
    /// What this attempt read (from its RUNNING event).
    #[serde(skip)]
    pub input_snapshot: Option<Value>,
}

/// An upstream task's publication for one partition the instance needs
/// (directly or through other upstream tasks, by the partition mapping).
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamEvidence {
    /// Task.
    pub task: String,
    /// Its dataset.
    pub dataset: String,
    /// The upstream partition.
    pub partition: String,
    /// Current generation, if published.
    pub generation: Option<u64>,
    /// Its digest.
    pub digest: Option<String>,
    /// Whether downstream may read it.
    pub certified: bool,
}

/// What an operator should do, for machines (`explain --json`'s `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Published and current.
    Nothing,
    /// Never run: run the partition.
    Run,
    /// A retry is scheduled, or an external input is not there yet.
    Wait,
    /// Release it with `weir retry` (transient causes).
    Retry,
    /// The data is wrong (a gate, or the task's data-error exit code 65).
    FixData,
    /// The code fails the same way every time.
    FixCode,
    /// The task asked for a person.
    Decide,
    /// An upstream instance blocked it: act on that one first.
    FixUpstream,
    /// An upstream generation is uncertified.
    Recertify,
    /// The current generation is uncertified.
    Rollback,
    /// An operator abandoned or rolled it back: a decision stands.
    Released,
}

/// The upstream instance a SKIPPED instance waited for.
#[derive(Debug, Clone, Serialize)]
pub struct Blocker {
    /// The upstream task.
    pub task: String,
    /// Its partition.
    pub partition: String,
    /// The run that skipped this instance.
    pub run_id: String,
}

/// Everything about one instance.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// Task.
    pub task: String,
    /// Partition.
    pub partition: String,
    /// Output dataset.
    pub dataset: String,
    /// Attempts, oldest first.
    pub attempts: Vec<AttemptEvidence>,
    /// The input snapshot of the last attempt when it did not publish (its
    /// own evidence), else of the current publication.
    pub input_snapshot: Option<Value>,
    /// Whose snapshot that is: `failed attempt` or `published generation`.
    pub input_snapshot_of: Option<String>,
    /// For an instance whose last outcome was SKIPPED: the upstream
    /// instance that did not publish.
    pub blocked_by: Option<Blocker>,
    /// The visible generation.
    pub published: Option<Value>,
    /// Upstream tasks, nearest first.
    pub upstream: Vec<UpstreamEvidence>,
    /// The last upstream task (in dependency order) that has a publication.
    pub last_successful_upstream: Option<String>,
    /// An operator state that outlives runs.
    pub mark: Option<InstanceMark>,
    /// What to do, in words.
    pub recommendation: String,
    /// What to do, for machines.
    pub action: Action,
}

/// Gathers the evidence. `events` are every run's records, in order.
///
/// A commit log or instance marker that cannot be read is an error, not
/// absence: "nothing to do" about state weir could not see would be a lie.
pub fn explain(
    manifest: &Manifest,
    warehouse: &Warehouse,
    events: &[EventRecord],
    task: &str,
    partition: &str,
) -> Result<Explanation, StoreError> {
    let spec = &manifest.tasks[task];
    let dataset = spec.output.dataset.clone();
    let store = warehouse.partition(&dataset, partition);
    let mine: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.task.as_deref() == Some(task) && e.partition.as_deref() == Some(partition))
        .collect();
    let mut attempts = attempts_of(&mine);
    recover_stderr(manifest, spec, &store, &mut attempts);
    let latest = store.latest()?;
    let published = latest
        .as_ref()
        .map(|r| publication(warehouse, &dataset, partition, r));
    let (input_snapshot, input_snapshot_of) = input_snapshot(&store, &attempts, latest.as_ref());
    let upstream = upstream_of(manifest, warehouse, task, partition)?;
    let last_successful_upstream = upstream
        .iter()
        .rev()
        .find(|u| u.generation.is_some())
        .map(|u| u.task.clone());
    // A marker that is not valid JSON reads as HELD naming why (as in
    // status); one that cannot be read at all is an error.
    let mark = state::read(warehouse, task, partition)?;
    // The run's own test: a quarantine whose inputs or code changed since
    // is rerun by the next run, so it is no longer the operator's to fix.
    let released = mark
        .as_ref()
        .map(|m| {
            crate::plan::stale::Staleness::default().quarantine_released(manifest, warehouse, m)
        })
        .unwrap_or_default();
    let blocked_by = blocked_by(&mine);
    let (action, recommendation) = recommend(
        manifest,
        warehouse,
        task,
        partition,
        &attempts,
        published.as_ref(),
        mark.as_ref(),
        &released,
        &upstream,
        blocked_by.as_ref(),
    );
    Ok(Explanation {
        task: task.to_string(),
        partition: partition.to_string(),
        dataset,
        attempts,
        input_snapshot,
        input_snapshot_of,
        blocked_by,
        published,
        upstream,
        last_successful_upstream,
        mark,
        recommendation,
        action,
    })
}

/// The attempts told by one instance's events, by when they started.
fn attempts_of(mine: &[&EventRecord]) -> Vec<AttemptEvidence> {
    let mut attempts: BTreeMap<(String, u32), AttemptEvidence> = BTreeMap::new();
    let mut order: Vec<(String, u32)> = Vec::new();
    for e in mine {
        let Some(attempt) = e.attempt else { continue };
        // Evidence about another engine's attempt (its token, not this one's).
        if matches!(e.state, State::Waiting | State::Unknown | State::TakenOver) {
            continue;
        }
        let key = (e.run_id.clone(), attempt);
        if !attempts.contains_key(&key) {
            order.push(key.clone());
        }
        let a = attempts
            .entry(key)
            .or_insert_with(|| AttemptEvidence::started(e, attempt));
        a.record(e);
    }
    let mut attempts: Vec<AttemptEvidence> = order
        .into_iter()
        .filter_map(|k| attempts.remove(&k))
        .collect();
    // The logs come run by run in the order of their ids, which is not time
    // order once ids of different shapes mix (`--run-id RUN-…` beside
    // `run-…`): the attempts are listed, and the last one judged, by when
    // they started.
    attempts.sort_by_key(|a| a.started.parse::<jiff::Timestamp>().ok());
    attempts
}

impl AttemptEvidence {
    /// An attempt first seen in `e`, nothing known of it yet.
    fn started(e: &EventRecord, attempt: u32) -> Self {
        AttemptEvidence {
            run_id: e.run_id.clone(),
            attempt,
            token: e.token,
            started: e.ts.clone(),
            state: String::new(),
            decision: None,
            exit_code: None,
            signal: None,
            job_id: None,
            batch: None,
            class: None,
            duration_ms: None,
            detail: String::new(),
            failed_gates: Value::Null,
            stderr_tail: String::new(),
            input_snapshot: None,
        }
    }

    /// Adds what event `e` says about this attempt.
    fn record(&mut self, e: &EventRecord) {
        let a = self;
        a.token = a.token.or(e.token);
        match e.state {
            State::Retrying | State::Quarantined | State::Held => {
                a.decision = Some(e.state.as_str());
                let class = match Payload::read(e.state, &e.data) {
                    Some(Payload::Retrying(p)) => Some(p.class),
                    Some(Payload::Decided(p)) => Some(p.class),
                    _ => None,
                };
                a.class = class.or(a.class.take());
                if a.detail.is_empty() {
                    a.detail = e.detail.clone();
                }
            }
            State::Running | State::Queued | State::Audited | State::Success => {
                if e.state != State::Running {
                    a.state = e.state.as_str();
                }
                if let Some(Payload::Running(p)) = Payload::read(e.state, &e.data) {
                    a.input_snapshot = Some(p.input_snapshot);
                    a.job_id = p.job_id.or(a.job_id.take());
                    a.batch = p.batch.zip(p.batch_size).or(a.batch.take());
                }
                if let Some(ms) = e.data.get("duration_ms").and_then(Value::as_u64) {
                    a.duration_ms = Some(ms);
                }
            }
            _ => {
                a.state = e.state.as_str();
                a.detail = e.detail.clone();
                if let Some(Payload::Failed(p)) = Payload::read(e.state, &e.data) {
                    a.exit_code = p.exit_code.map(i64::from).or(a.exit_code);
                    a.signal = p.signal.map(i64::from).or(a.signal);
                    a.duration_ms = Some(p.duration_ms);
                    a.stderr_tail = p.stderr_tail;
                }
                if let Some(g) = e.data.get("gates") {
                    a.failed_gates = g.clone();
                }
            }
        }
    }
}

/// Reads the stderr the logs lack from the attempts' evidence files, and
/// redacts every tail.
fn recover_stderr(
    manifest: &Manifest,
    spec: &crate::manifest::Task,
    store: &PartitionStore,
    attempts: &mut [AttemptEvidence],
) {
    // An engine killed while the command ran never redacted its logs: the
    // secrets this process can read are redacted here too.
    let secrets = crate::secrets::readable_secrets(manifest, spec);
    for a in attempts {
        if a.stderr_tail.is_empty() {
            if let Some(t) = a.token {
                // This host's staging, else the store (a remote warehouse).
                if let Some(bytes) = store.read_evidence(FencingToken::from_raw(t), "stderr.log") {
                    a.stderr_tail = crate::exec::launch::tail_bytes(&bytes, 2048);
                }
            }
        }
        if secrets.has_secrets() {
            a.stderr_tail = secrets.redact(&a.stderr_tail);
        }
    }
}

/// The visible generation, as `explain --json` shows it.
fn publication(warehouse: &Warehouse, dataset: &str, partition: &str, r: &CommitRecord) -> Value {
    serde_json::json!({
        "generation": r.generation.get(),
        "token": r.token.get(),
        "run_id": r.run_id,
        "attempt": r.attempt,
        "rows": r.rows,
        "digest": r.digest,
        "code_version": r.code_version,
        "published_at": r.published_at,
        "certified": certify::is_certified(warehouse, dataset, partition, r.generation.get()),
    })
}

/// The input snapshot that explains the instance, and whose it is.
fn input_snapshot(
    store: &PartitionStore,
    attempts: &[AttemptEvidence],
    latest: Option<&CommitRecord>,
) -> (Option<Value>, Option<String>) {
    // A failed last attempt is explained by what it read, not by what the
    // published generation read.
    let failed_own = attempts
        .last()
        .filter(|a| !matches!(a.state.as_str(), "PUBLISHED" | "ALREADY_PUBLISHED"))
        .and_then(|a| a.input_snapshot.clone());
    let input_snapshot_of = match (&failed_own, latest) {
        (Some(_), _) => Some("failed attempt".to_string()),
        (None, Some(r)) => Some(format!("published generation {}", r.generation.get())),
        (None, None) => None,
    };
    let input_snapshot = failed_own
        .or_else(|| latest.map(|r| r.input_snapshot.clone()))
        .or_else(|| {
            let token = attempts.iter().rev().find_map(|a| a.token)?;
            let bytes = store.read_evidence(FencingToken::from_raw(token), "candidate.json")?;
            serde_json::from_slice::<Value>(&bytes)
                .ok()?
                .get("input_snapshot")
                .cloned()
        });
    (input_snapshot, input_snapshot_of)
}

/// For an instance SKIPPED after its last attempt (or with none): the
/// upstream instance that blocked it.
fn blocked_by(mine: &[&EventRecord]) -> Option<Blocker> {
    let last_attempt_at = mine
        .iter()
        .rposition(|e| e.attempt.is_some())
        .map_or(0, |i| i + 1);
    mine[last_attempt_at..]
        .iter()
        .rev()
        .find(|e| e.state == State::Skipped)
        .and_then(|e| match Payload::read(e.state, &e.data)? {
            Payload::Skipped(p) => Some(Blocker {
                task: p.upstream_task,
                partition: p.upstream_partition,
                run_id: e.run_id.clone(),
            }),
            _ => None,
        })
}

/// Every task upstream of `task`, in dependency order (farthest first).
fn upstream_of(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
) -> Result<Vec<UpstreamEvidence>, StoreError> {
    let mut seen: Vec<&str> = Vec::new();
    let mut stack: Vec<&str> = manifest.tasks[task]
        .depends_on
        .iter()
        .map(String::as_str)
        .collect();
    while let Some(t) = stack.pop() {
        if !seen.contains(&t) {
            seen.push(t);
            stack.extend(manifest.tasks[t].depends_on.iter().map(String::as_str));
        }
    }
    // Declaration order is a valid dependency order for display once ancestors sort first.
    let mut ordered: Vec<&str> = manifest
        .tasks
        .keys()
        .map(String::as_str)
        .filter(|t| seen.contains(t))
        .collect();
    ordered.sort_by_key(|t| depth(manifest, t));
    // The partitions each ancestor contributes, mapped downstream first.
    let mut keys: std::collections::HashMap<&str, Vec<String>> =
        std::collections::HashMap::from([(task, vec![partition.to_string()])]);
    let mut downstream_first: Vec<&str> = ordered.clone();
    downstream_first.push(task);
    downstream_first.sort_by_key(|t| std::cmp::Reverse(depth(manifest, t)));
    for t in downstream_first {
        let spec = &manifest.tasks[t];
        let mine = keys.get(t).cloned().unwrap_or_default();
        for d in &spec.depends_on {
            let up = &manifest.tasks[d];
            for key in &mine {
                for shift in crate::plan::shifts_of(spec, d) {
                    let mapped = crate::partition::map_keys(
                        &spec.dims,
                        key,
                        &up.dims,
                        shift,
                        crate::clock::now(),
                    )
                    .unwrap_or_default();
                    let entry = keys.entry(d.as_str()).or_default();
                    for k in mapped {
                        let k = k.into_string();
                        if !entry.contains(&k) {
                            entry.push(k);
                        }
                    }
                }
            }
        }
    }
    ordered
        .into_iter()
        .flat_map(|t| {
            let dataset = manifest.tasks[t].output.dataset.clone();
            keys.get(t)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |key| (t, dataset.clone(), key))
        })
        .map(|(t, dataset, key)| {
            let record = warehouse.partition(&dataset, &key).latest()?;
            Ok(UpstreamEvidence {
                task: t.to_string(),
                generation: record.as_ref().map(|r| r.generation.get()),
                digest: record.as_ref().map(|r| r.digest.clone()),
                certified: record.as_ref().is_none_or(|r| {
                    certify::is_certified(warehouse, &dataset, &key, r.generation.get())
                }),
                dataset,
                partition: key,
            })
        })
        .collect()
}

fn depth(manifest: &Manifest, task: &str) -> usize {
    manifest.tasks[task]
        .depends_on
        .iter()
        .map(|d| depth(manifest, d) + 1)
        .max()
        .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
fn recommend(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
    attempts: &[AttemptEvidence],
    published: Option<&Value>,
    mark: Option<&InstanceMark>,
    released: &[String],
    upstream: &[UpstreamEvidence],
    blocked_by: Option<&Blocker>,
) -> (Action, String) {
    let m = shell_word(&manifest.path.display().to_string()).into_owned();
    let partition_arg = shell_word(partition);
    let retry = format!("`weir retry {m} {task} --partition {partition_arg} --note \"...\"`");
    // `weir retry` acts only on a marked instance; any other is the next
    // run's to try.
    let run = format!("`weir run {m} --task {task} --partition {partition_arg}`");
    if let Some(decided) = mark.and_then(|mark| by_mark(mark, released, &retry, &run)) {
        return decided;
    }
    if let Some(decided) = by_upstream(
        manifest, task, partition, published, upstream, blocked_by, &m,
    ) {
        return decided;
    }
    // What the next run would hold it for: the story the run told (HELD,
    // no marker) and status tells (WAITING), with the command that works.
    let held_for_input = attempts.last().is_none_or(|l| l.state != "PUBLISHED");
    if published.is_none() && held_for_input && mark.is_none() {
        if let Some(decided) = by_readiness(manifest, warehouse, task, partition, &run) {
            return decided;
        }
    }
    let Some(last) = attempts.last() else {
        return match published {
            Some(_) => (Action::Nothing, "nothing to do: published".into()),
            None => (
                Action::Run,
                format!("not run yet: `weir run {m} --partition {partition_arg}`"),
            ),
        };
    };
    by_last_attempt(last, mark, &retry, &run)
}

/// What an operator's mark on the instance decides, when it decides.
fn by_mark(
    mark: &InstanceMark,
    released: &[String],
    retry: &str,
    run: &str,
) -> Option<(Action, String)> {
    Some(match mark.mark {
        Mark::Abandoned => {
            // The note, not the reason: the reason repeats "abandoned by an operator".
            let note = mark.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            (Action::Released, format!("abandoned by an operator{note}; nothing runs until {retry}"))
        }
        Mark::Accepted => {
            let note = mark.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            (Action::Released, format!("accepted as missing by an operator{note}: what reads it among other partitions runs without it; {retry} undoes it"))
        }
        // The marker itself is the problem: no attempt's evidence says
        // what it held, so a person looks at it.
        Mark::Held if state::is_unreadable(mark) => {
            (Action::Decide, format!("decide: {}; fix or remove the marker, then {retry}", mark.reason))
        }
        Mark::Held if mark.reason.starts_with("rolled back") => {
            (Action::Released, format!("rolled back by an operator: fix the code or data that made the newer generation wrong, then {retry}"))
        }
        Mark::Quarantined if !released.is_empty() => {
            (Action::Run, format!(
                "run: the quarantine no longer stands ({}), so the next run reruns it: {run}",
                released.join("; ")
            ))
        }
        _ => return None,
    })
}

/// What upstream decides: a SKIPPED instance waits for the one that
/// blocked it, and an uncertified generation, upstream or its own, is
/// rolled back or re-certified.
fn by_upstream(
    manifest: &Manifest,
    task: &str,
    partition: &str,
    published: Option<&Value>,
    upstream: &[UpstreamEvidence],
    blocked_by: Option<&Blocker>,
    m: &str,
) -> Option<(Action, String)> {
    let partition_arg = shell_word(partition);
    if let Some(b) = blocked_by {
        return Some((
            Action::FixUpstream,
            format!(
                "fix upstream first: `{}` {} did not publish, so this instance was SKIPPED in run {}; see `weir explain {m} {} --partition {}`, act on it, then `weir run {m} --partition {partition_arg}`",
                b.task, b.partition, b.run_id, b.task, shell_word(&b.partition)
            ),
        ));
    }
    if let Some(u) = upstream.iter().find(|u| !u.certified) {
        return Some((Action::Recertify, format!(
            "roll back or re-certify upstream `{}`{} (generation {} is uncertified), or rerun with --allow-uncertified",
            u.dataset,
            if u.partition == partition {
                String::new()
            } else {
                format!(" {}", u.partition)
            },
            u.generation.unwrap_or(0)
        )));
    }
    if let Some(p) = published {
        if p["certified"] == Value::Bool(false) {
            let dataset = &manifest.tasks[task].output.dataset;
            return Some((Action::Rollback, format!("roll back: the current generation is uncertified; `weir rollback {m} {dataset} --partition {partition_arg}`")));
        }
    }
    None
}

/// What the run's own readiness test would hold an unpublished, unmarked
/// instance for, as far as it is known without starting a sensor command
/// (`exec::sensed`: files now, a command sensor's last recorded answer).
fn by_readiness(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
    run: &str,
) -> Option<(Action, String)> {
    use crate::exec::sensed::{known, Known};
    match known(manifest, warehouse, &manifest.tasks[task], partition, None) {
        Known::Ready => None,
        Known::NotYet(n) => Some((
            Action::Wait,
            format!("wait for the input: {}; put it in place, then {run} (nothing holds the instance, so `weir retry` has nothing to release)", n.why),
        )),
        Known::Failed(f) => Some((
            Action::Wait,
            format!("fix the sensor: {}; then {run} (nothing holds the instance, so `weir retry` has nothing to release)", f.why),
        )),
        Known::Unchecked(n) => Some((
            Action::Run,
            format!("run: {}; {run} asks it and runs the instance once it says ready", n.why),
        )),
    }
}

/// What the last attempt's outcome, class and the engine's decision about
/// it ask of a person.
fn by_last_attempt(
    last: &AttemptEvidence,
    mark: Option<&InstanceMark>,
    retry: &str,
    run: &str,
) -> (Action, String) {
    let marked = mark.is_some_and(|m| !matches!(m.mark, Mark::Abandoned | Mark::Accepted));
    let published_last = matches!(last.state.as_str(), "PUBLISHED" | "REJECTED_STALE");
    if !marked && !published_last && last.decision.as_deref() != Some("RETRYING") {
        return (
            Action::Run,
            if last.state == "INTERRUPTED" {
                format!("run: the last attempt was interrupted and nothing holds the instance; {run} resumes it")
            } else {
                format!(
                    "run: nothing holds the instance (its last attempt ended {}); {run} tries it again",
                    if last.state.is_empty() { "RUNNING" } else { &last.state }
                )
            },
        );
    }
    // EX_DATAERR (65): the task says its input is wrong.
    let data_error = last.exit_code == Some(65);
    match (last.state.as_str(), last.class.as_ref(), last.decision.as_deref()) {
        ("PUBLISHED" | "REJECTED_STALE", ..) => (Action::Nothing, "nothing to do: a complete, audited generation is visible".into()),
        ("GATE_FAILED", ..) => (Action::FixData, format!(
            "fix data: the gates above failed on the rows listed (or fix the code or the gate if the data is right), then {retry}"
        )),
        (_, Some(FailureClass::Deterministic), _) if data_error => (Action::FixData, format!(
            "fix data: the task rejected its input (exit code 65, data error; see stderr and the input snapshot above), then {retry}"
        )),
        (_, Some(FailureClass::Deterministic), _) => (Action::FixCode, format!("fix code: the task fails the same way for this input (see stderr), then {retry}")),
        (_, Some(FailureClass::Operator), _) => (Action::Decide, format!("decide: the task asked for an operator; fix the cause and {retry}, or `weir abandon`")),
        (_, _, Some("HELD")) if last.detail.contains("budget") => {
            (Action::Retry, format!("retry: the run's retry budget was spent during a wider outage; once it is over, {retry}"))
        }
        (_, Some(FailureClass::Transient), Some("HELD")) => (Action::Retry, format!("retry: transient failures used every attempt; check what the task depends on, then {retry}")),
        (_, _, Some("RETRYING")) => (Action::Wait, "wait: a retry is scheduled".into()),
        _ => (Action::Retry, format!("retry: {retry}")),
    }
}
