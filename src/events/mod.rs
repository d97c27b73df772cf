//! The append-only event log of each run, kept by the warehouse's event
//! store ([`crate::store::events`]): on a local warehouse one JSON Lines file
//! per run, `<warehouse>/_runs/<run-id>/events.jsonl`; on an object store
//! ordered put-if-absent chunks of lines that readers merge in order.
//!
//! Every decision the engine takes is a line: QUEUED, RUNNING, FAILED,
//! RETRYING, SUCCESS, GATE_FAILED, PUBLISHED, REJECTED_STALE, QUARANTINED,
//! HELD, SKIPPED … Lines are written whole with one `write` on an
//! `O_APPEND` file, so concurrent writers never interleave within a line. A
//! line torn by a crash can only be the last one; readers report it and go on.
//!
//! Events are not fsynced one by one: each announces something already made
//! durable (a commit record is fsynced before its PUBLISHED line is written),
//! so losing the tail of the log in a power cut loses narration, never state.
//! [`EventLog::emit_durable`] and [`EventLog::sync`] make the log durable
//! (on an object store: store the pending lines as a chunk) before they
//! return.

use std::path::{Path, PathBuf};

pub use crate::store::events::run_dir;
use crate::store::events::{EventStore, EventWriter, Segment};
use crate::store::StoreError;

use serde::{Deserialize, Serialize};

pub mod payload;
pub mod progress;

/// The longest run id accepted.
pub const MAX_RUN_ID: usize = 128;

/// Checks a run id given by a person (`--run-id`): it names a directory
/// under `_runs/`, so `..`, `a/b`, an empty or hidden name or a newline
/// would write an event log outside the warehouse, break gc or corrupt the
/// columns of `weir events`. Says what is allowed when it is refused.
pub fn check_run_id(id: &str) -> Result<(), RunIdError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_RUN_ID
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(RunIdError { id: id.to_owned() })
    }
}

/// A run id [`check_run_id`] refuses; its message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run id {id:?} is not allowed: a run id is 1 to {MAX_RUN_ID} letters, digits, `.`, `_` and `-`, not starting with `.`")]
pub struct RunIdError {
    /// The refused id, as given.
    pub id: String,
}

/// Version of the line format.
pub const FORMAT_VERSION: u32 = 1;

/// What happened to a task instance (or to the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum State {
    RunStarted,
    RunFinished,
    Queued,
    Running,
    Failed,
    Retrying,
    Success,
    GateFailed,
    Audited,
    Published,
    AlreadyPublished,
    RejectedStale,
    Quarantined,
    Held,
    Skipped,
    Unknown,
    TakenOver,
    Waiting,
    RolledBack,
    Certified,
    Uncertified,
    Released,
    Abandoned,
    GcDeleted,
    EngineFailed,
    /// OpenLineage events of the run could not all be delivered.
    LineageUndelivered,
    Interrupted,
    /// `weir serve` skipped a due partition after downtime (no catch-up).
    Missed,
    /// An instance is past its task's `sla` and not published.
    Late,
    /// operator log: an operator accepted a partition as never to be built.
    Accepted,
    /// A notification was delivered to a target.
    Notified,
    /// A notification could not be delivered (it stays in the outbox).
    NotifyFailed,
    /// operator log: a backfill was paused (`weir backfill --pause`).
    BackfillPaused,
    /// operator log: a paused backfill was resumed (`--resume`).
    BackfillResumed,
}

impl State {
    /// Every state, in the order the reference lists them (a new state is
    /// added here too: `meaning` makes it describe itself, and a test
    /// checks this list against the enum's order).
    pub const ALL: [State; 34] = [
        State::RunStarted,
        State::RunFinished,
        State::Queued,
        State::Running,
        State::Failed,
        State::Retrying,
        State::Success,
        State::GateFailed,
        State::Audited,
        State::Published,
        State::AlreadyPublished,
        State::RejectedStale,
        State::Quarantined,
        State::Held,
        State::Skipped,
        State::Unknown,
        State::TakenOver,
        State::Waiting,
        State::RolledBack,
        State::Certified,
        State::Uncertified,
        State::Released,
        State::Abandoned,
        State::GcDeleted,
        State::EngineFailed,
        State::LineageUndelivered,
        State::Interrupted,
        State::Missed,
        State::Late,
        State::Accepted,
        State::Notified,
        State::NotifyFailed,
        State::BackfillPaused,
        State::BackfillResumed,
    ];

    /// What the state says happened, for the reference.
    pub fn meaning(self) -> &'static str {
        match self {
            State::RunStarted => "a run or backfill starts (`data`: scope, pipeline, code_version); serve's own log: `data.clock`, what serve's clock read then",
            State::RunFinished => "the run ends (`data.interrupted` names the signal of an interrupted run)",
            State::Queued => "an instance is planned and waits for its upstream and a pool slot",
            State::Running => "the command starts (`data.input_snapshot`; `data.job_id` for a Slurm job)",
            State::Failed => "the command failed (`data.ending`, `exit_code`, `signal`, `duration_ms`, `stderr_tail`), a candidate could not be published, or a sensor failed (`data.sensor`)",
            State::Retrying => "a transient failure is retried (`data.class`, `delay_ms`, `next_attempt`)",
            State::Success => "the command exited 0",
            State::GateFailed => "a gate failed on the candidate (nothing is published)",
            State::Audited => "every gate passed on the candidate",
            State::Published => "the candidate became the visible generation",
            State::AlreadyPublished => "the instance is published with the same input snapshot and code: nothing to do",
            State::RejectedStale => "the publish was refused: a newer token committed first",
            State::Quarantined => "a deterministic failure: not run again until `weir retry` (`data.class`)",
            State::Held => "an operator-class failure, a spent retry budget, inputs that cannot be pinned, or a standing HELD marker: not run again until `weir retry`",
            State::Skipped => "an upstream instance did not publish (`data.upstream_task`, `upstream_partition`), or an operator abandoned the instance",
            State::Unknown => "another engine's attempt is unreachable: its lease stopped beating but nothing proves it dead",
            State::TakenOver => "this engine takes over an attempt whose engine is gone (a new token fences the old one)",
            State::Waiting => "another engine's attempt on the partition is live, its Slurm job still runs, its external inputs are not ready, or an upstream instance waits for its own",
            State::RolledBack => "operator log: `weir rollback` published an older generation's files",
            State::Certified => "operator log: `weir certify` vouched for a generation",
            State::Uncertified => "operator log: `weir uncertify` marked a generation suspect",
            State::Released => "operator log: `weir retry` released a held, quarantined or abandoned instance",
            State::Abandoned => "operator log: `weir abandon` gave an instance up",
            State::GcDeleted => "operator log: `weir gc --apply` deleted an attempt directory or aborted an incomplete upload (before doing it)",
            State::EngineFailed => "the engine failed at its own work for the instance: exit 5, no retry spent, no marker",
            State::LineageUndelivered => "OpenLineage events of the run could not all be delivered",
            State::Interrupted => "weir was asked to stop (SIGINT, SIGTERM) before the instance finished",
            State::Missed => "`weir serve` skipped a due partition (after downtime, or past its `wait`): recorded once, with the command that fills it",
            State::Late => "an instance passed its task's `sla` without being published",
            State::Accepted => "operator log: `weir accept` accepted a partition as never to be built (downstream may proceed without it)",
            State::Notified => "a notification was delivered to a target (`data.target`, `data.idempotency_key`)",
            State::NotifyFailed => "a notification could not be delivered; it stays in the outbox for the next sender",
            State::BackfillPaused => "operator log: `weir backfill --pause` paused a backfill (`data`: backfill, by, host, pid)",
            State::BackfillResumed => "operator log: `weir backfill --resume` resumed it (`data.paused_since`, `paused_by`)",
        }
    }

    /// The name as written in the log.
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Line format version.
    pub format_version: u32,
    /// RFC 3339 UTC timestamp.
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// The task, for instance events.
    pub task: Option<String>,
    /// The partition, for instance events.
    pub partition: Option<String>,
    /// Attempt number, once an attempt exists.
    pub attempt: Option<u32>,
    /// Fencing token, once allocated.
    pub token: Option<u64>,
    /// What happened.
    pub state: State,
    /// Human-readable detail.
    pub detail: String,
    /// Structured evidence (exit code, class, gate outcomes, digest …).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

/// An event before it is stamped with time and run.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// Task.
    pub task: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Attempt.
    pub attempt: Option<u32>,
    /// Token.
    pub token: Option<u64>,
    /// Detail.
    pub detail: String,
    /// Evidence.
    pub data: serde_json::Value,
}

impl Event {
    /// An event about one task instance.
    pub fn instance(task: &str, partition: &str) -> Event {
        Event {
            task: Some(task.to_string()),
            partition: Some(partition.to_string()),
            ..Event::default()
        }
    }

    /// With an attempt and token.
    pub fn attempt(mut self, attempt: u32, token: Option<u64>) -> Event {
        self.attempt = Some(attempt);
        self.token = token;
        self
    }

    /// With a detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Event {
        self.detail = detail.into();
        self
    }

    /// With evidence.
    pub fn data(mut self, data: serde_json::Value) -> Event {
        self.data = data;
        self
    }
}

/// Sees every record as it is written (progress display, plain log lines).
pub type Observer = Box<dyn Fn(&EventRecord) + Send + Sync>;

/// The writer of one run's log.
pub struct EventLog {
    run_id: String,
    writer: EventWriter,
    /// Called with every line written (progress display, plain log lines).
    observer: Option<Observer>,
}

impl EventLog {
    /// Opens (creating or appending to) the log of `run_id` in a local
    /// warehouse directory.
    pub fn open(warehouse: &Path, run_id: &str) -> std::io::Result<EventLog> {
        EventLog::open_in(&EventStore::dir(warehouse), run_id)
    }

    /// Opens (creating or appending to) the log of `run_id` in `store`.
    pub fn open_in(store: &EventStore, run_id: &str) -> std::io::Result<EventLog> {
        Ok(EventLog {
            run_id: run_id.to_string(),
            writer: store.open(run_id)?,
            observer: None,
        })
    }

    /// Calls `f` with every record written.
    pub fn observe(&mut self, f: impl Fn(&EventRecord) + Send + Sync + 'static) {
        self.observer = Some(Box::new(f));
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Where the log is (its file, or its chunks' prefix), for messages.
    pub fn path(&self) -> &Path {
        self.writer.origin()
    }

    /// Appends one event. An I/O error here is returned: the caller decides
    /// (a run cannot go on without evidence).
    pub fn emit(&self, state: State, event: Event) -> std::io::Result<EventRecord> {
        let record = EventRecord {
            format_version: FORMAT_VERSION,
            ts: crate::clock::now_rfc3339(),
            run_id: self.run_id.clone(),
            task: event.task,
            partition: event.partition,
            attempt: event.attempt,
            token: event.token,
            state,
            detail: event.detail,
            data: event.data,
        };
        let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.append(&line)?;
        // -vv: every step as the log records it, beside the decisions' why.
        tracing::trace!(run = %record.run_id, task = record.task.as_deref().unwrap_or("-"), partition = record.partition.as_deref().unwrap_or("-"), "{}: {}", record.state.as_str(), record.detail);
        if let Some(observer) = &self.observer {
            observer(&record);
        }
        Ok(record)
    }

    /// Appends one event and makes the log durable before returning: for an
    /// operator action, whose event must survive a crash before the change
    /// it announces is made.
    pub fn emit_durable(&self, state: State, event: Event) -> std::io::Result<EventRecord> {
        let record = self.emit(state, event)?;
        self.sync()?;
        Ok(record)
    }

    /// Appends one event and makes the log outlive this process before
    /// returning (a kill -9, not a power cut): free on a local warehouse,
    /// whose writes are in the kernel already; on an object store the
    /// pending lines are stored. For RUNNING: a command's start is evidence
    /// that must not die with the engine.
    pub fn emit_flushed(&self, state: State, event: Event) -> std::io::Result<EventRecord> {
        let record = self.emit(state, event)?;
        self.writer.flush()?;
        Ok(record)
    }

    /// Whether an event was lost for good (a failed write to the file); an
    /// object store keeps refused lines for the next sync.
    pub fn lost_lines(&self) -> bool {
        self.writer.lost_lines()
    }

    /// Makes everything written so far durable (end of run).
    pub fn sync(&self) -> std::io::Result<()> {
        self.writer.sync()
    }
}

/// A log's records, and the lines that did not parse.
pub type Parsed = (Vec<EventRecord>, Vec<BadLine>);

/// A line that could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// File.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// Whether it is the last line without a newline: a write torn by a crash.
    pub torn: bool,
}

/// Reads one log file: its records and the lines that did not parse.
pub fn read_log(path: &Path) -> std::io::Result<(Vec<EventRecord>, Vec<BadLine>)> {
    let bytes = std::fs::read(path)?;
    let mut records = Vec::new();
    let mut bad = Vec::new();
    parse_into(path, &bytes, &mut records, &mut bad);
    Ok((records, bad))
}

/// Parses one stored segment (a log file or a chunk), line numbers counted
/// within it.
fn parse_into(origin: &Path, bytes: &[u8], records: &mut Vec<EventRecord>, bad: &mut Vec<BadLine>) {
    let text = String::from_utf8_lossy(bytes);
    let ends_clean = text.ends_with('\n') || text.is_empty();
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<EventRecord>(line) {
            Ok(r) => records.push(r),
            Err(_) => bad.push(BadLine {
                path: origin.to_path_buf(),
                line: i + 1,
                torn: i + 1 == lines.len() && !ends_clean,
            }),
        }
    }
}

fn parse_segments(segments: &[Segment]) -> (Vec<EventRecord>, Vec<BadLine>) {
    let mut records = Vec::new();
    let mut bad = Vec::new();
    for s in segments {
        parse_into(&s.origin, &s.bytes, &mut records, &mut bad);
    }
    (records, bad)
}

/// Reads one run's log from `store`, its chunks merged in order; `None` if
/// the run has no log.
pub fn read_run(store: &EventStore, run_id: &str) -> Result<Option<Parsed>, StoreError> {
    Ok(store.read_run(run_id)?.map(|s| parse_segments(&s)))
}

/// Reads every run's log in `store`, runs in name order (run ids start with
/// their start time), records in log order.
pub fn read_all_in(store: &EventStore) -> Result<(Vec<EventRecord>, Vec<BadLine>), StoreError> {
    let mut records = Vec::new();
    let mut bad = Vec::new();
    for run in store.runs()? {
        if let Some(segments) = store.read_run(&run.id)? {
            let (r, b) = parse_segments(&segments);
            records.extend(r);
            bad.extend(b);
        }
    }
    Ok((records, bad))
}

/// Reads every run's log in a local warehouse directory.
pub fn read_all(warehouse: &Path) -> Result<(Vec<EventRecord>, Vec<BadLine>), StoreError> {
    read_all_in(&EventStore::dir(warehouse))
}

#[cfg(test)]
mod tests {
    // The event states reference (docs/reference/events.md, which the book
    // links) has a row for every state; a state added without its row on the
    // committed page fails here.
    #[test]
    fn the_event_states_reference_documents_every_state() {
        // `State::ALL` is the whole enum (`all_states` checks it).
        let page = include_str!("../../docs/reference/events.md");
        let rows: Vec<&str> = page
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split_once("` | ").map(|(s, _)| s))
            .collect();
        for state in State::ALL {
            let name = state.as_str();
            assert!(
                rows.contains(&name.as_str()),
                "docs/reference/events.md has no row for {name}"
            );
        }
    }

    use super::*;
    use std::fs::OpenOptions;
    use std::io::Write;

    #[test]
    fn a_torn_last_line_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), "r1").unwrap();
        log.emit(State::Queued, Event::instance("t", "p")).unwrap();
        log.emit(
            State::Running,
            Event::instance("t", "p").attempt(1, Some(1)),
        )
        .unwrap();
        let mut f = OpenOptions::new().append(true).open(log.path()).unwrap();
        f.write_all(b"{\"format_version\":1,\"ts\":\"2026").unwrap();
        let (records, bad) = read_log(log.path()).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].state, State::Running);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].torn);
        assert_eq!(bad[0].line, 3);
    }

    // On a backend without append the log is chunks that
    // `read_run` merges in order; a garbage chunk is reported as bad lines
    // naming its key, and the records around it survive.
    #[test]
    fn log_on_chunks_merges_and_reports_garbage() {
        use crate::store::{Backend, MemoryBackend};
        let backend: std::sync::Arc<dyn Backend> = std::sync::Arc::new(MemoryBackend::new());
        let store = EventStore::objects(std::sync::Arc::clone(&backend));
        let log = EventLog::open_in(&store, "r1").unwrap();
        log.emit(State::Queued, Event::instance("t", "p")).unwrap();
        log.emit_durable(
            State::Running,
            Event::instance("t", "p").attempt(1, Some(1)),
        )
        .unwrap();
        assert!(backend
            .put_if_absent("_runs/r1/events/00000000000000000002", b"not json\n{\"torn")
            .unwrap());
        log.emit_durable(State::Success, Event::instance("t", "p"))
            .unwrap();
        drop(log);
        let (records, bad) = read_run(&store, "r1").unwrap().unwrap();
        let states: Vec<State> = records.iter().map(|r| r.state).collect();
        assert_eq!(states, [State::Queued, State::Running, State::Success]);
        let key = PathBuf::from("_runs/r1/events/00000000000000000002");
        assert_eq!(
            bad,
            [
                BadLine {
                    path: key.clone(),
                    line: 1,
                    torn: false
                },
                BadLine {
                    path: key,
                    line: 2,
                    torn: true
                },
            ]
        );
        let (all, _) = read_all_in(&store).unwrap();
        assert_eq!(all, records);
        assert!(read_run(&store, "r2").unwrap().is_none());
    }

    #[test]
    fn states_are_screaming_snake_case() {
        assert_eq!(State::RejectedStale.as_str(), "REJECTED_STALE");
        assert_eq!(State::GateFailed.as_str(), "GATE_FAILED");
    }
}

#[cfg(test)]
mod all_states {
    use super::State;

    #[test]
    fn the_list_of_states_is_the_enum_in_order() {
        for (i, state) in State::ALL.iter().enumerate() {
            assert_eq!(*state as usize, i, "{state:?} out of place in State::ALL");
        }
        // The last variant last: a state appended to the enum and not to
        // the list fails here.
        assert_eq!(State::BackfillResumed as usize + 1, State::ALL.len());
    }
}
