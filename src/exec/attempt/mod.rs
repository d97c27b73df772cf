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

mod publish;

use publish::{file_names, publish};

use crate::events::payload::{self, CommandEnded, Payload};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;

use super::classify::Ending;
use super::executor;
use super::fault::Point;
use super::launch::{self, Contract, ContractInput, Launcher, TaskLaunch};
use super::lease;
use super::slurm;
use super::tree;
use super::Context;
use crate::audit::{self, AuditReport, AuditSpec, GateOutcome};
use crate::events::{Event, State};
use crate::inputs::materialize as inputs;
use crate::inputs::InputSnapshot;
use crate::manifest::Task;
use crate::store::layout::{self, DATA_DIR};
use crate::store::{
    CommitKind, FencingToken, FileSum, Generation, NewCommit, PartitionStore, PublishError,
    StoreError, TokenOwner,
};

/// How an attempt ended, for the scheduler.
#[derive(Debug)]
pub(crate) enum AttemptOutcome {
    /// Visible now. `unsure` holds the engine's error when the commit
    /// reported a failure and rereading the log found the record anyway.
    Published {
        /// The engine error that was settled by rereading the log.
        unsure: Option<String>,
    },
    /// Another engine's live attempt was waited for and published what this
    /// one would have (same input snapshot and code_version).
    AlreadyPublished,
    /// Refused: a newer token had already committed. `current`: the visible
    /// generation has this attempt's input snapshot and code_version, so the
    /// partition ended correct anyway (a benign race).
    Stale {
        /// Whether the visible generation is current for this attempt.
        current: bool,
    },
    /// Did not produce a publishable candidate.
    Failed {
        /// How it ended.
        ending: Ending,
        /// Its token, if one was allocated.
        token: Option<FencingToken>,
        /// One-line reason.
        reason: String,
        /// The fingerprint of the code its command was launched with;
        /// `None` when no command was launched.
        code: Option<String>,
    },
}

/// Files a task wrote, not yet audited.
struct Candidate {
    token: FencingToken,
    dir: PathBuf,
    files: Vec<PathBuf>,
    /// For a forced rebuild, the generation readers saw when it began
    /// (`Some(None)`: none): a newer token that beat it counts as a rebuild
    /// only if it committed after that.
    forced_over: Option<Option<Generation>>,
    /// The fingerprint of the code that wrote them, taken as the command
    /// launched: what the candidate is published as.
    code: String,
}

/// A candidate whose every gate passed.
struct AuditedCandidate {
    candidate: Candidate,
    report: AuditReport,
}

/// Removes the attempt's input copies when dropped.
struct DiscardInputs(PathBuf);

impl Drop for DiscardInputs {
    fn drop(&mut self) {
        inputs::discard(&self.0);
    }
}

/// Bytes of stderr kept as evidence.
const TAIL_BYTES: usize = 2048;

/// Runs attempt `attempt` of `task` at `partition`.
/// How the caller wants a published instance treated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rerun {
    /// Run even when the visible generation is current (`--force`).
    pub(crate) force: bool,
    /// Only needed as another task's input: any publication will do.
    pub(crate) upstream_only: bool,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    slots: &super::pool::Slots,
    rerun: Rerun,
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
    // The token first, then the look at other engines' attempts: the
    // put-if-absent of the token is the claim (see `lease`).
    let allocation = match store.allocate(&owner) {
        Ok(a) => a,
        Err(e) => return fail(None, format!("cannot allocate a token: {}", chain(&e))),
    };
    let token = allocation.token;
    let dir = match store.prepare_attempt(token) {
        Ok(d) => d,
        Err(e) => {
            return fail(
                Some(token),
                format!("cannot create the staging directory: {}", chain(&e)),
            )
        }
    };
    // Held until this function returns, whatever the outcome. The lease
    // names the task's process tag, for an engine that takes over from us.
    let tag = tree::new_tag();
    let mut lease = lease::Lease::new(cx, task, attempt, token);
    lease.process_tag = Some(tag.clone());
    let mut heartbeat = lease::Heartbeat::start(&store, token, lease, task.heartbeat);
    let guard = lease::guard(cx, task, partition, attempt, &allocation);
    // Asked to stop while another engine's attempt was live.
    if let lease::Guard::Interrupted(sig) = guard {
        let ending = Ending::Interrupted(sig);
        return AttemptOutcome::Failed {
            reason: ending.describe(),
            ending,
            token: Some(token),
            code: None,
        };
    }
    let waited = guard != lease::Guard::Proceed;
    // What readers saw when a forced rebuild began: losing the race to it
    // (a stale token) publishes nothing, and only a generation committed
    // since is a rebuild someone else did for this one.
    let forced_over = if rerun.force && !waited {
        Some(allocation.latest.as_ref().map(|r| r.generation))
    } else if rerun.force {
        match store.latest() {
            Ok(latest) => Some(latest.map(|r| r.generation)),
            Err(e) => {
                return fail(
                    Some(token),
                    format!("cannot read the commit log: {}", chain(&e)),
                )
            }
        }
    } else {
        None
    };
    // Another engine may have published while this one waited, or between
    // the caller's look at the log and this token. The currency test of
    // every ALREADY_PUBLISHED applies: what it published counts only if it
    // is what this one would publish.
    // The allocation read the log after taking the token: that look is
    // this one, unless this engine waited since.
    if waited || !rerun.force {
        let latest = match waited {
            false => Ok(allocation.latest),
            true => store.latest(),
        };
        match latest {
            Ok(Some(latest))
                if rerun.upstream_only
                    || (!rerun.force
                        && super::is_current(
                            &latest,
                            snapshot,
                            &task.code_version,
                            cx.fingerprint(task),
                        )) =>
            {
                cx.emit(
                    State::AlreadyPublished,
                    event().attempt(attempt, Some(token.get())).detail(format!(
                        "another engine published generation {} (code_version {}){}: nothing to do",
                        latest.generation,
                        latest.code_version,
                        if waited { " while this one waited" } else { "" }
                    )),
                );
                return AttemptOutcome::AlreadyPublished;
            }
            Ok(_) => {}
            Err(e) => {
                return fail(
                    Some(token),
                    format!("cannot read the commit log: {}", chain(&e)),
                )
            }
        }
    }
    let data_dir = dir.join("data");
    // The logs are the engine's files: failing to create them (disk full,
    // permissions) is the engine's failure, not the task's.
    for log in ["stdout.log", "stderr.log"] {
        let path = dir.join(log);
        let created = cx
            .faults
            .hit(Point::CreateLogs, &task.name, partition)
            .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOSPC))
            .and_then(|()| std::fs::File::create(&path));
        if let Err(e) = created {
            return fail(
                Some(token),
                format!("cannot create {}: {e}", path.display()),
            );
        }
    }
    // The task reads private copies; they go when this function returns.
    let _discard = DiscardInputs(dir.clone());
    let inputs = match inputs::materialize(snapshot, &cx.warehouse, partition, &dir) {
        Ok(m) => m,
        Err(inputs::MaterializeError::Moved { input, pinned, now }) => {
            let reason = format!(
                "external input `{input}` changed since it was pinned (pinned {pinned}, now {now}); the next attempt pins it again"
            );
            cx.emit(
                State::Failed,
                event()
                    .attempt(attempt, Some(token.get()))
                    .detail(reason.clone()),
            );
            return AttemptOutcome::Failed {
                ending: Ending::InputMoved(reason.clone()),
                token: Some(token),
                reason,
                code: None,
            };
        }
        Err(e) => {
            return fail(
                Some(token),
                format!("cannot hand the task its inputs: {}", chain(&e)),
            )
        }
    };
    // A secret that cannot be read fails the attempt before anything runs:
    // an empty value would run the task with the wrong credentials.
    let contract = Contract {
        launcher: Launcher::Attempt {
            run_id: &cx.run_id,
            attempt,
            token: token.get(),
        },
        partition,
        output_dir: &data_dir,
        inputs: inputs.iter().map(ContractInput::from).collect(),
    };
    let program = cx.program(task).map(std::path::Path::to_path_buf);
    let command = match TaskLaunch::new(cx.manifest, task, &contract, program) {
        Ok(command) => command,
        Err(e) => {
            let ending = Ending::Environment(e.to_string());
            cx.emit(
                State::Failed,
                event()
                    .attempt(attempt, Some(token.get()))
                    .detail(ending.describe()),
            );
            return AttemptOutcome::Failed {
                reason: ending.describe(),
                ending,
                token: Some(token),
                code: None,
            };
        }
    };
    // Everything above is the engine's; the slot is the command's (for a
    // scheduler's job: from submission until it is seen to end).
    // The slot is the pool's across engines (`pool.rs`, `store::slots`).
    let permit = match slots.acquire(&format!(
        "{} {partition} attempt {attempt} token {token} (run {})",
        task.name, cx.run_id
    )) {
        Ok(permit) => permit,
        Err(super::pool::NoSlot::Interrupted(sig)) => {
            let ending = Ending::Interrupted(sig);
            return AttemptOutcome::Failed {
                reason: ending.describe(),
                ending,
                token: Some(token),
                code: None,
            };
        }
        Err(super::pool::NoSlot::Store(e)) => {
            return fail(
                Some(token),
                format!("cannot take a slot of pool `{}`: {}", task.pool, chain(&e)),
            )
        }
    };
    let running = |job_id: Option<&str>| {
        let e = event()
            .attempt(attempt, Some(token.get()))
            .detail(match job_id {
                Some(id) => format!("staging {}; Slurm job {id}", data_dir.display()),
                None => format!("staging {}", data_dir.display()),
            })
            // The attempt's own evidence: what it read, failed or not.
            .data(
                Payload::Running(payload::Running {
                    input_snapshot: snapshot.to_json(),
                    job_id: job_id.map(str::to_string),
                })
                .to_json(),
            );
        // Stored before the command starts (on an object store too), so an
        // engine killed while its command runs still shows it started.
        cx.emit_flushed(State::Running, e)
    };
    let started = Instant::now();
    let injected = cx
        .chaos
        .as_ref()
        .and_then(|c| c.exit_code(&task.name, partition, attempt));
    let adopted = match guard {
        lease::Guard::Adopt(old, ref job) => slurm::adopt(
            &store.attempt_dir(old),
            &dir,
            &snapshot.digest(),
            &cx.manifest.pipeline.code_version,
        )
        .map(|_| job.clone()),
        _ => None,
    };
    // What the command runs is what its output is published as: the code is
    // fingerprinted now, as the command launches, not when the run started
    // (a deploy may land in between, and be reverted before the run ends),
    // and again once it exits (`code_moved`).
    let launched = crate::manifest::fingerprint::fingerprint(&cx.manifest.dir, task);
    let ending = match (&launched, injected) {
        (Err(e), _) => Ending::CodeMoved(format!(
            "the task's code cannot be fingerprinted at launch: {}; the next attempt fingerprints it again",
            chain(e)
        )),
        _ if adopted.is_some() => {
            let job = adopted.as_deref();
            cx.emit(
                State::Running,
                event()
                    .attempt(attempt, Some(token.get()))
                    .detail(format!(
                        "adopting the output of Slurm job {} (its engine is gone; it completed on the same inputs and code_version)",
                        job.unwrap_or_default()
                    ))
                    .data(json!({ "job_id": job, "adopted": true })),
            );
            Ending::Success
        }
        (Ok(_), Some(code)) => {
            let _ = running(None);
            let _ = std::fs::write(
                dir.join("stderr.log"),
                format!("WEIR_CHAOS: injected exit code {code}\n"),
            );
            Ending::Exit(code)
        }
        (Ok(_), None) => {
            let executor =
                executor_for(&cx.manifest.executors[&task.executor], &task.resources);
            // For an engine that takes over a job that outlived us: what it
            // runs on (written before the job exists).
            if cx.manifest.executors[&task.executor].kind == crate::manifest::ExecutorKind::Slurm {
                let _ = slurm::record(
                    &dir,
                    &slurm::JobRecord {
                        snapshot_digest: snapshot.digest(),
                        code_version: cx.manifest.pipeline.code_version.clone(),
                    },
                );
            }
            let submitted = executor.submit(command.command(&dir, tag));
            match submitted {
                Ok(job) => {
                    let id = job.id();
                    if let Some(id) = &id {
                        heartbeat.set_job(id);
                    }
                    // A local command starts in `wait`: without its RUNNING
                    // stored it does not start (a Slurm job already has).
                    if let (Err(why), None) = (running(id.as_deref()), &id) {
                        return fail(Some(token), format!("the command was not started: {why}"));
                    }
                    job.wait()
                }
                Err(ending) => {
                    let _ = running(None);
                    ending
                }
            }
        }
    };
    let elapsed_ms = started.elapsed().as_millis() as u64;
    // Secret values leave the logs before anything reads them: the FAILED
    // event's tail, explain, the evidence a remote warehouse keeps.
    for (log, e) in command.redact_logs(&dir) {
        eprintln!(
            "warning: {} {partition}: cannot redact {log} ({e}); removed it",
            task.name
        );
    }
    let launched = launched.ok();
    let ending = match (&ending, &launched) {
        (Ending::Success, Some(launched)) => code_moved(cx, task, launched).unwrap_or(ending),
        _ => ending,
    };
    if ending != Ending::Success {
        let stderr_tail = launch::tail(&dir.join("stderr.log"), TAIL_BYTES);
        let reason = ending.describe();
        cx.emit(
            State::Failed,
            event()
                .attempt(attempt, Some(token.get()))
                .detail(reason.clone())
                .data(
                    Payload::Failed(CommandEnded {
                        ending: reason.clone(),
                        exit_code: match ending {
                            Ending::Exit(c) => Some(c),
                            _ => None,
                        },
                        signal: match ending {
                            Ending::Signal(s) => Some(s),
                            _ => None,
                        },
                        duration_ms: elapsed_ms,
                        stderr_tail,
                    })
                    .to_json(),
                ),
        );
        // Announced first, so the log never shows more commands running than slots.
        drop(permit);
        // On a remote warehouse the logs are this attempt's evidence for
        // other hosts too (best effort: the event has the stderr tail).
        let _ = store.upload_evidence(token);
        return AttemptOutcome::Failed {
            ending,
            token: Some(token),
            reason,
            code: launched,
        };
    }
    // Success: the code was fingerprinted at launch.
    let code = launched.unwrap_or_default();
    cx.emit(
        State::Success,
        event()
            .attempt(attempt, Some(token.get()))
            .detail(format!(
                "exit code 0 after {}",
                crate::manifest::duration::human(std::time::Duration::from_millis(elapsed_ms))
            ))
            .data(json!({ "duration_ms": elapsed_ms })),
    );
    drop(permit);
    if let Err(e) = cx.faults.hit(Point::AfterCommand, &task.name, partition) {
        return fail(Some(token), e);
    }
    let files = match audit::candidate_files(&data_dir, task.output.format) {
        Ok(f) => f,
        Err(audit::CandidateError::Refused { problems }) => {
            // The task broke the output contract: the same inputs reproduce it.
            let reason = format!("the output is not publishable: {}", problems.join("; "));
            cx.emit(
                State::GateFailed,
                event()
                    .attempt(attempt, Some(token.get()))
                    .detail(reason.clone())
                    .data(json!({ "refused": problems })),
            );
            return AttemptOutcome::Failed {
                ending: Ending::GateFailed,
                token: Some(token),
                reason,
                code: Some(code),
            };
        }
        Err(e) => {
            return fail(
                Some(token),
                format!("cannot list the candidate: {}", chain(&e)),
            )
        }
    };
    let candidate = Candidate {
        token,
        dir,
        files,
        forced_over,
        code,
    };
    let audited = match audit_candidate(cx, task, partition, attempt, snapshot, &inputs, candidate)
    {
        Ok(a) => a,
        Err(outcome) => {
            // The audit's report says which rows failed: evidence for
            // every host of a remote warehouse (best effort).
            let _ = store.upload_evidence(token);
            return outcome;
        }
    };
    let outcome = publish(cx, task, partition, attempt, snapshot, &store, audited);
    if matches!(outcome, AttemptOutcome::Published { .. }) {
        heartbeat.committed();
    }
    outcome
}

/// An I/O error that says the storage failed (not that a file is wrong).
fn storage_fault(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::ENOSPC | libc::EDQUOT | libc::EROFS | libc::ESTALE)
    )
}

pub use crate::store::chain;

/// The ending of a command that exited 0 whose task's code is no longer the
/// code it was launched with (`launched`), if so: its output is not
/// published as either, and the next attempt runs the code as it is then.
fn code_moved(cx: &Context<'_>, task: &Task, launched: &str) -> Option<Ending> {
    match crate::manifest::fingerprint::fingerprint(&cx.manifest.dir, task) {
        Ok(now) if now == launched => None,
        Ok(now) => Some(Ending::CodeMoved(format!(
            "the task's code changed while its command ran ({launched} at launch, {now} at exit): its output is not published; the next attempt runs the new code"
        ))),
        Err(e) => Some(Ending::CodeMoved(format!(
            "the task's code cannot be fingerprinted after its command: {}; its output is not published",
            chain(&e)
        ))),
    }
}

/// Reads the candidate and runs the gates; writes `candidate.json` either way.
fn audit_candidate(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    copies: &[inputs::Materialized],
    candidate: Candidate,
) -> Result<AuditedCandidate, AttemptOutcome> {
    let fail = |token: Option<FencingToken>, reason: String| {
        engine_failure(cx, task, partition, attempt, token, reason)
    };
    let token = candidate.token;
    // Reconcile gates read what the task read: its copies.
    let inputs = copies
        .iter()
        .map(|i| (i.name.clone(), i.data.clone()))
        .collect();
    let spec = AuditSpec {
        format: task.output.format,
        grain: &task.output.grain,
        gates: &task.gates,
        inputs: &inputs,
    };
    // `audit` rehearses a panic (or a crash) on a thread reading the files.
    let faults = &cx.faults;
    let probe = |_: &std::path::Path| {
        let _ = faults.hit(Point::Audit, &task.name, partition);
    };
    let report = match audit::audit_with(&candidate.files, &spec, &probe) {
        Ok(r) => r,
        // The disk under the warehouse failing is the engine's problem,
        // not a property of the candidate.
        Err(audit::AuditError::Io { path, source }) if storage_fault(&source) => {
            return Err(fail(
                Some(token),
                format!("cannot read {}: {source}", path.display()),
            ));
        }
        Err(e) => {
            // Unreadable data (bad CSV, mismatched headers) is a property of
            // this candidate: the same input reproduces it.
            let reason = format!("candidate cannot be read: {}", chain(&e));
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
                code: Some(candidate.code.clone()),
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
        "code_version": task.code_version,
        "code_fingerprint": candidate.code,
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
    // Not fsynced, here or at publish: evidence, not data (the record carries
    // the rows, digest and file sums); see `PartitionStore::make_durable`.
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
            code: Some(candidate.code.clone()),
        });
    }
    // A Delta table output: a candidate whose schema the table's policy
    // does not admit fails its audit, before anything is published.
    if let (Some((columns, _)), Some(crate::manifest::TableFormat::Delta { schema: policy, .. })) = (
        crate::store::delta::columns_of(task, partition),
        task.output.table,
    ) {
        let store = cx.warehouse.partition(&task.output.dataset, partition);
        match crate::store::delta::admits(&store, &columns, policy, &candidate.files) {
            Ok(()) => {}
            Err(Ok(why)) => {
                let reason = format!("table_schema: {why}");
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
                    code: Some(candidate.code.clone()),
                });
            }
            Err(Err(e)) => {
                return Err(fail(
                    Some(token),
                    format!("cannot check the Delta table's schema: {}", chain(&e)),
                ));
            }
        }
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
        code: None,
    }
}

/// The executor a task's spec names. Here, not in `executor.rs`: the
/// executors are its implementations, and the trait does not know them.
fn executor_for<'a>(
    spec: &'a crate::manifest::Executor,
    resources: &'a crate::manifest::Resources,
) -> Box<dyn executor::Executor + 'a> {
    match spec.kind {
        crate::manifest::ExecutorKind::Local => Box::new(executor::Local),
        crate::manifest::ExecutorKind::Slurm => Box::new(slurm::Slurm {
            args: &spec.args,
            resources,
        }),
    }
}
