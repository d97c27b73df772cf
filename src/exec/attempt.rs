//! One attempt, write → audit → publish:
//!
//! ```text
//!  allocate token ──► attempts/<token>/data/ ──► run command ──► Candidate
//!                                                                   │ audit (gates, digest)
//!                            refused: REJECTED_STALE ◄── publish ◄── AuditedCandidate
//!                            visible: PUBLISHED      ◄──┘ (fenced CAS on the commit log)
//! ```
//!
//! Only `audit_candidate` can build an `AuditedCandidate`, and only an
//! `AuditedCandidate` can be published: a candidate that failed a gate has
//! no path to the commit log.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

use super::classify::Ending;
use super::fault::Point;
use super::launch::{self, Launch};
use super::lease;
use super::snapshot::InputSnapshot;
use super::Context;
use crate::audit::{self, AuditReport, AuditSpec, GateOutcome};
use crate::events::{Event, State};
use crate::manifest::Task;
use crate::store::{CommitKind, FencingToken, NewCommit, PartitionStore, PublishError, TokenOwner};

/// How an attempt ended, for the scheduler.
#[derive(Debug)]
pub(crate) enum AttemptOutcome {
    /// Visible now.
    Published,
    /// Refused: a newer token had already committed.
    Stale,
    /// Did not produce a publishable candidate.
    Failed {
        /// How it ended.
        ending: Ending,
        /// Its token, if one was allocated.
        token: Option<FencingToken>,
        /// One-line reason.
        reason: String,
    },
}

/// Files a task wrote, not yet audited.
struct Candidate {
    token: FencingToken,
    dir: PathBuf,
    files: Vec<PathBuf>,
}

/// A candidate whose every gate passed.
struct AuditedCandidate {
    candidate: Candidate,
    report: AuditReport,
}

/// Bytes of stderr kept as evidence.
const TAIL_BYTES: usize = 2048;

/// Runs attempt `attempt` of `task` at `partition`.
pub(crate) fn run(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    slots: &super::pool::Slots,
) -> AttemptOutcome {
    let fail = |token: Option<FencingToken>, reason: String| {
        engine_failure(cx, task, partition, attempt, token, reason)
    };
    let store = cx.warehouse.partition(&task.output.dataset, partition);
    let event = || Event::instance(&task.name, partition);
    let owner = TokenOwner {
        run_id: cx.run_id.clone(),
        task: task.name.clone(),
        attempt,
    };
    let token = match store.allocate_token(&owner) {
        Ok(t) => t,
        Err(e) => return fail(None, format!("cannot allocate a token: {e}")),
    };
    let dir = match store.prepare_attempt(token) {
        Ok(d) => d,
        Err(e) => {
            return fail(
                Some(token),
                format!("cannot create the staging directory: {e}"),
            )
        }
    };
    // Held until this function returns, whatever the outcome.
    let _heartbeat = lease::Heartbeat::start(
        &dir,
        lease::Lease::new(cx, task, attempt, token),
        task.heartbeat,
    );
    let data_dir = dir.join("data");
    // Everything above is the engine's; the slot is the command's.
    let permit = slots.acquire();
    cx.emit(
        State::Running,
        event()
            .attempt(attempt, Some(token.get()))
            .detail(format!("staging {}", data_dir.display())),
    );
    let started = Instant::now();
    let injected = cx
        .chaos
        .as_ref()
        .and_then(|c| c.exit_code(&task.name, partition, attempt));
    let ending = match injected {
        Some(code) => {
            let _ = std::fs::write(
                dir.join("stderr.log"),
                format!("WEIR_CHAOS: injected exit code {code}\n"),
            );
            Ending::Exit(code)
        }
        None => launch::run(&Launch {
            argv: &task.command,
            cwd: &cx.manifest.dir,
            env: environment(cx, task, partition, attempt, token, &data_dir, snapshot),
            stdout: dir.join("stdout.log"),
            stderr: dir.join("stderr.log"),
            timeout: task.timeout,
        }),
    };
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if ending != Ending::Success {
        let stderr_tail = launch::tail(&dir.join("stderr.log"), TAIL_BYTES);
        let reason = ending.describe();
        cx.emit(
            State::Failed,
            event()
                .attempt(attempt, Some(token.get()))
                .detail(reason.clone())
                .data(json!({
                    "ending": reason,
                    "exit_code": match ending { Ending::Exit(c) => Some(c), _ => None },
                    "signal": match ending { Ending::Signal(s) => Some(s), _ => None },
                    "duration_ms": elapsed_ms,
                    "stderr_tail": stderr_tail,
                })),
        );
        // Announced first, so the log never shows more commands running than slots.
        drop(permit);
        return AttemptOutcome::Failed {
            ending,
            token: Some(token),
            reason,
        };
    }
    cx.emit(
        State::Success,
        event()
            .attempt(attempt, Some(token.get()))
            .detail(format!("exit code 0 after {elapsed_ms} ms"))
            .data(json!({ "duration_ms": elapsed_ms })),
    );
    drop(permit);
    let files = match audit::data_files(&data_dir, task.output.format) {
        Ok(f) => f,
        Err(e) => return fail(Some(token), format!("cannot list the candidate: {e}")),
    };
    let candidate = Candidate { token, dir, files };
    let audited = match audit_candidate(cx, task, partition, attempt, snapshot, candidate) {
        Ok(a) => a,
        Err(outcome) => return outcome,
    };
    publish(cx, task, partition, attempt, snapshot, &store, audited)
}

fn environment(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    token: FencingToken,
    data_dir: &std::path::Path,
    snapshot: &InputSnapshot,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("WEIR_RUN_ID".to_string(), cx.run_id.clone()),
        ("WEIR_PIPELINE".into(), cx.manifest.pipeline.name.clone()),
        ("WEIR_TASK".into(), task.name.clone()),
        ("WEIR_PARTITION".into(), partition.to_string()),
        ("WEIR_ATTEMPT".into(), attempt.to_string()),
        ("WEIR_TOKEN".into(), token.get().to_string()),
        ("WEIR_OUTPUT_DIR".into(), absolute(data_dir)),
        (
            "WEIR_CODE_VERSION".into(),
            cx.manifest.pipeline.code_version.clone(),
        ),
    ];
    env.extend(launch::partition_vars(&task.dims, partition));
    for input in &snapshot.inputs {
        env.push((launch::input_var(&input.name), absolute(&input.location)));
        if let Some(w) = &input.watermark {
            let var = launch::input_var(&input.name).replacen("WEIR_INPUT_", "WEIR_WATERMARK_", 1);
            env.push((var, w.clone()));
        }
    }
    env
}

fn absolute(path: &std::path::Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// Reads the candidate and runs the gates; writes `candidate.json` either way.
fn audit_candidate(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    candidate: Candidate,
) -> Result<AuditedCandidate, AttemptOutcome> {
    let fail = |token: Option<FencingToken>, reason: String| {
        engine_failure(cx, task, partition, attempt, token, reason)
    };
    let token = candidate.token;
    let inputs = snapshot
        .inputs
        .iter()
        .filter_map(|i| i.data.clone().map(|d| (i.name.clone(), d)))
        .collect();
    let spec = AuditSpec {
        format: task.output.format,
        grain: &task.output.grain,
        gates: &task.gates,
        inputs: &inputs,
    };
    let report = match audit::audit(&candidate.files, &spec) {
        Ok(r) => r,
        Err(e) => {
            // Unreadable data (bad CSV, mismatched headers) is a property of
            // this candidate: the same input reproduces it.
            let reason = format!("candidate cannot be read: {e}");
            cx.emit(
                State::GateFailed,
                Event::instance(&task.name, partition)
                    .attempt(attempt, Some(token.get()))
                    .detail(reason.clone()),
            );
            return Err(AttemptOutcome::Failed {
                ending: Ending::GateFailed,
                token: Some(token),
                reason,
            });
        }
    };
    let manifest = json!({
        "task": task.name,
        "dataset": task.output.dataset,
        "partition": partition,
        "run_id": cx.run_id,
        "attempt": attempt,
        "token": token.get(),
        "code_version": cx.manifest.pipeline.code_version,
        "input_snapshot": snapshot.to_json(),
        "input_snapshot_digest": snapshot.digest(),
        "files": file_names(&candidate.files),
        "rows": report.rows,
        "columns": report.columns,
        "digest": report.digest.as_str(),
        "gates": report.gates,
        "passed": report.passed(),
    });
    let bytes =
        serde_json::to_vec_pretty(&manifest).expect("a candidate manifest always serializes");
    // Not fsynced here: `fsync_candidate` makes it durable with the data, before
    // any commit names the candidate.
    if let Err(e) = std::fs::write(candidate.dir.join("candidate.json"), &bytes) {
        return Err(fail(
            Some(token),
            format!("cannot write candidate.json: {e}"),
        ));
    }
    if !report.passed() {
        let failures: Vec<&GateOutcome> = report.failures().collect();
        let detail = failures
            .iter()
            .map(|g| format!("{}: expected {}, got {}", g.gate, g.expected, g.actual))
            .collect::<Vec<_>>()
            .join("; ");
        cx.emit(
            State::GateFailed,
            Event::instance(&task.name, partition)
                .attempt(attempt, Some(token.get()))
                .detail(detail.clone())
                .data(json!({ "gates": failures })),
        );
        return Err(AttemptOutcome::Failed {
            ending: Ending::GateFailed,
            token: Some(token),
            reason: detail,
        });
    }
    cx.emit(
        State::Audited,
        Event::instance(&task.name, partition)
            .attempt(attempt, Some(token.get()))
            .detail(format!(
                "{} gates passed: {} rows, {}",
                report.gates.len(),
                report.rows,
                report.digest.as_str()
            ))
            .data(json!({ "rows": report.rows, "digest": report.digest.as_str() })),
    );
    if let Err(e) = cx.faults.hit(Point::AfterCandidate, &task.name, partition) {
        return Err(fail(Some(token), e));
    }
    Ok(AuditedCandidate { candidate, report })
}

fn file_names(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

/// The fenced compare-and-swap that makes an audited candidate visible.
fn publish(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    store: &PartitionStore,
    audited: AuditedCandidate,
) -> AttemptOutcome {
    let fail = |token: Option<FencingToken>, reason: String| {
        engine_failure(cx, task, partition, attempt, token, reason)
    };
    let AuditedCandidate { candidate, report } = audited;
    let token = candidate.token;
    // Every file is durable before the record that names it.
    if let Err(e) = crate::store::fs::fsync_candidate(&candidate.dir, &candidate.files) {
        return fail(Some(token), format!("cannot fsync the candidate: {e}"));
    }
    if let Err(e) = cx.faults.hit(Point::BeforeCommit, &task.name, partition) {
        return fail(Some(token), e);
    }
    let commit = NewCommit {
        token,
        dataset: task.output.dataset.clone(),
        partition: partition.to_string(),
        kind: CommitKind::Publish,
        run_id: cx.run_id.clone(),
        task: task.name.clone(),
        attempt,
        attempt_dir: store.attempt_key(token),
        files: file_names(&candidate.files),
        rows: report.rows,
        digest: report.digest.as_str().to_string(),
        input_snapshot: snapshot.to_json(),
        input_snapshot_digest: snapshot.digest(),
        code_version: cx.manifest.pipeline.code_version.clone(),
    };
    let result = store.commit(commit);
    if result.is_ok() {
        // The record is durable; dying here is a crash after the write and
        // before its acknowledgement.
        if cx
            .faults
            .hit(Point::AfterCommit, &task.name, partition)
            .is_err()
        {
            // An injected failure here loses only the acknowledgement.
            return AttemptOutcome::Published;
        }
    }
    if let Err(e) = cx.faults.hit(Point::BeforeEvent, &task.name, partition) {
        return fail(Some(token), e);
    }
    match result {
        Ok(record) => {
            cx.emit(
                State::Published,
                Event::instance(&task.name, partition)
                    .attempt(attempt, Some(token.get()))
                    .detail(format!(
                        "generation {}: {} rows, {}",
                        record.generation, record.rows, record.digest
                    ))
                    .data(json!({
                        "generation": record.generation.get(),
                        "rows": record.rows,
                        "digest": record.digest,
                        "input_snapshot_digest": record.input_snapshot_digest,
                        "code_version": record.code_version,
                    })),
            );
            AttemptOutcome::Published
        }
        Err(PublishError::Stale {
            mine,
            committed,
            generation,
        }) => {
            cx.emit(
                State::RejectedStale,
                Event::instance(&task.name, partition)
                    .attempt(attempt, Some(token.get()))
                    .detail(format!(
                        "token {mine} is not newer than token {committed} committed at generation {generation}; the candidate stays unpublished"
                    ))
                    .data(json!({ "mine": mine.get(), "committed": committed.get(), "generation": generation.get() })),
            );
            AttemptOutcome::Stale
        }
        Err(PublishError::Store(e)) => fail(Some(token), format!("commit failed: {e}")),
    }
}

/// The engine itself failed (warehouse I/O, disk full): FAILED, transient.
fn engine_failure(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    token: Option<FencingToken>,
    reason: String,
) -> AttemptOutcome {
    cx.emit(
        State::Failed,
        Event::instance(&task.name, partition)
            .attempt(attempt, token.map(FencingToken::get))
            .detail(format!("engine error: {reason}")),
    );
    AttemptOutcome::Failed {
        ending: Ending::Engine(reason.clone()),
        token,
        reason,
    }
}
