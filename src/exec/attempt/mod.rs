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

mod audited;
pub(crate) mod batch;
mod publish;

use audited::audit_candidate;
use publish::{file_names, publish};

use crate::events::payload::{self, CommandEnded, Payload};
use std::path::PathBuf;

use serde_json::json;

use super::classify::Ending;
use super::fault::Point;
use super::launch::{self, Contract, ContractInput, Launcher, TaskLaunch};
use super::lease;
use super::Context;
use crate::audit::{self, AuditReport, AuditSpec, GateOutcome};
use crate::events::{Event, State};
use crate::inputs::materialize as inputs;
use crate::inputs::InputSnapshot;
use crate::manifest::Task;
use crate::process::tree;
use crate::store::layout::{self, DATA_DIR};
use crate::store::{
    CommitKind, FencingToken, FileSum, Generation, NewCommit, PartitionStore, PublishError,
    StoreError, TokenOwner, TokenRecord,
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
struct DiscardInputs<'a>(PathBuf, &'a InputSnapshot);

impl Drop for DiscardInputs<'_> {
    fn drop(&mut self) {
        inputs::discard(&self.0, self.1);
    }
}

/// Bytes of stderr kept as evidence.
const TAIL_BYTES: usize = 2048;

/// How the caller wants a published instance treated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rerun {
    /// Run even when the visible generation is current (`--force`).
    pub(crate) force: bool,
    /// Only needed as another task's input: any publication will do.
    pub(crate) upstream_only: bool,
}

/// Which attempt this is: what its events and failures name.
#[derive(Clone, Copy)]
struct Attempt<'a, 'c> {
    cx: &'a Context<'c>,
    task: &'a Task,
    partition: &'a str,
    number: u32,
}

impl Attempt<'_, '_> {
    /// The engine itself failed (warehouse I/O, disk full): FAILED,
    /// transient.
    fn fail(&self, token: Option<FencingToken>, reason: String) -> AttemptOutcome {
        self.cx.emit(
            State::Failed,
            Event::instance(&self.task.name, self.partition)
                .attempt(self.number, token.map(FencingToken::get))
                .detail(format!("engine error: {reason}")),
        );
        AttemptOutcome::Failed {
            ending: Ending::Engine(reason.clone()),
            token,
            reason,
            code: None,
        }
    }

    /// This attempt's event, its token named.
    fn event(&self, token: FencingToken) -> Event {
        Event::instance(&self.task.name, self.partition).attempt(self.number, Some(token.get()))
    }

    /// Ended with `ending` before anything was published, no event of its own.
    fn ended(&self, ending: Ending, token: FencingToken, code: Option<String>) -> AttemptOutcome {
        AttemptOutcome::Failed {
            reason: ending.describe(),
            ending,
            token: Some(token),
            code,
        }
    }

    /// `candidate` failed its audit: GATE_FAILED, with `data` as evidence
    /// (made from a redacted `AuditReport`). `reason` quotes the data, so
    /// the manifest's secrets are redacted from it here, before the event,
    /// the marker, the run's summary and notifications repeat it.
    fn gate_failed(
        &self,
        candidate: &Candidate,
        reason: &str,
        data: Option<serde_json::Value>,
    ) -> AttemptOutcome {
        let reason = self.cx.secrets.redact(reason);
        let event = self.event(candidate.token).detail(reason.clone());
        self.cx.emit(
            State::GateFailed,
            match data {
                Some(data) => event.data(data),
                None => event,
            },
        );
        AttemptOutcome::Failed {
            ending: Ending::GateFailed,
            token: Some(candidate.token),
            reason,
            code: Some(candidate.code.clone()),
        }
    }

    /// The command exited 0 after `elapsed_ms`: SUCCESS.
    fn succeeded(&self, token: FencingToken, elapsed_ms: u64) {
        self.cx.emit(
            State::Success,
            self.event(token)
                .detail(format!(
                    "exit code 0 after {}",
                    crate::manifest::duration::human(std::time::Duration::from_millis(elapsed_ms))
                ))
                .data(json!({ "duration_ms": elapsed_ms })),
        );
    }

    /// Ended with `ending`, told as FAILED.
    fn failed(&self, ending: Ending, token: FencingToken) -> AttemptOutcome {
        self.cx
            .emit(State::Failed, self.event(token).detail(ending.describe()));
        self.ended(ending, token, None)
    }
}

/// An early end of an attempt: the outcome it ends with.
type Step<T> = Result<T, AttemptOutcome>;

/// Runs attempt `attempt` of `task` at `partition`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    snapshot: &InputSnapshot,
    slots: &super::pool::Slots,
    rerun: Rerun,
    seat: Option<batch::Seat>,
) -> AttemptOutcome {
    let at = Attempt {
        cx,
        task,
        partition,
        number: attempt,
    };
    steps(&at, snapshot, slots, rerun, seat).unwrap_or_else(|ended| ended)
}

/// [`run`]'s steps in order; each may end the attempt early.
fn steps(
    at: &Attempt<'_, '_>,
    snapshot: &InputSnapshot,
    slots: &super::pool::Slots,
    rerun: Rerun,
    seat: Option<batch::Seat>,
) -> Step<AttemptOutcome> {
    let store = at
        .cx
        .warehouse
        .partition(&at.task.output.dataset, at.partition);
    // Held until this function returns, whatever the outcome.
    let mut claim = claim(at, &store, snapshot, rerun)?;
    let token = claim.token;
    let data_dir = claim.dir.join(DATA_DIR);
    claim.logs = Some(create_logs(at, &claim.dir, token)?);
    // The task reads private copies; they go when this function returns.
    let _discard = DiscardInputs(claim.dir.clone(), snapshot);
    let (inputs, command) = prepare_command(at, snapshot, &claim.dir, &data_dir, token)?;
    // Everything above is the engine's; the slot is the command's.
    let (ending, elapsed_ms, launched, permit) = batch::command(
        at,
        (&store, &mut claim),
        snapshot,
        (&inputs, &command),
        slots,
        seat,
    )?;
    // Secret values leave the logs before anything reads them: the FAILED
    // event's tail, explain, the evidence a remote warehouse keeps.
    for (log, e) in command.redact_logs(&claim.dir) {
        tracing::warn!(
            "{} {}: cannot redact {log} ({e}); removed it",
            at.task.name,
            at.partition
        );
    }
    let launched = launched.ok();
    let ending = match (&ending, &launched) {
        (Ending::Success, Some(launched)) => code_moved(at.cx, at.task, launched).unwrap_or(ending),
        _ => ending,
    };
    if ending != Ending::Success {
        let outcome = command_failed(at, &claim.dir, token, ending, elapsed_ms, launched);
        // Announced first, so the log never shows more commands running than slots.
        drop(permit);
        // On a remote warehouse the logs are this attempt's evidence for
        // other hosts too (best effort: the event has the stderr tail).
        let _ = store.upload_evidence(token);
        return Ok(outcome);
    }
    // Success: the code was fingerprinted at launch.
    let code = launched.unwrap_or_default();
    at.succeeded(token, elapsed_ms);
    drop(permit);
    if let Err(e) = at
        .cx
        .faults
        .hit(Point::AfterCommand, &at.task.name, at.partition)
    {
        return Err(at.fail(Some(token), e));
    }
    let candidate = Candidate {
        token,
        files: candidate_files(at, &data_dir, token, &code)?,
        dir: claim.dir.clone(),
        forced_over: claim.forced_over,
        code,
    };
    let audited = audit_candidate(at, snapshot, &inputs, candidate).inspect_err(|_| {
        // The audit's report says which rows failed: evidence for
        // every host of a remote warehouse (best effort).
        let _ = store.upload_evidence(token);
    })?;
    let outcome = publish(at, snapshot, &store, audited);
    if matches!(outcome, AttemptOutcome::Published { .. }) {
        claim.heartbeat.committed();
    } else {
        // Unpublished, its audit report is the evidence of what it read
        // and made for every host (`explain`); a published one's is its
        // commit record (best effort).
        let _ = store.upload_evidence(token);
    }
    Ok(outcome)
}

/// An attempt that holds its token, its staging directory and its lease.
struct Claim {
    token: FencingToken,
    dir: PathBuf,
    /// The task's process tag, which the lease names for an engine that
    /// takes over from this one.
    tag: String,
    heartbeat: lease::Heartbeat,
    guard: lease::Guard,
    /// See [`Candidate::forced_over`].
    forced_over: Option<Option<Generation>>,
    /// The logs `create_logs` left open, until a command takes them.
    logs: Option<launch::OpenLogs>,
}

/// Takes a token for `record`. A Delta table output first: nothing is
/// written (not even a token) to a table weir does not understand, nor
/// where weir's records are gone while the table still reads their files.
fn allocate(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    record: &TokenRecord,
) -> Step<crate::store::Allocation> {
    if crate::store::delta::columns_of(at.task, at.partition).is_some() {
        crate::store::delta::check_before_writing(store).map_err(|why| at.fail(None, why))?;
    }
    store
        .allocate_for(record)
        .map_err(|e| at.fail(None, format!("cannot allocate a token: {}", chain(&e))))
}

/// Takes a token, then looks at other engines' attempts (the put-if-absent
/// of the token is the claim, see `lease`), and ends the attempt if one of
/// them published what this one would while it waited.
fn claim(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    snapshot: &InputSnapshot,
    rerun: Rerun,
) -> Step<Claim> {
    let owner = TokenOwner {
        run_id: at.cx.run_id.clone(),
        task: at.task.name.clone(),
        attempt: at.number,
    };
    // On an object store the token's record is also the first lease
    // (`lease::Heartbeat::start`). The lease names the task's process tag,
    // for an engine that takes over from us.
    let tag = tree::new_tag();
    let timeout_ms = u64::try_from(lease::timeout(at.task).as_millis()).unwrap_or(u64::MAX);
    let record = store.new_claim(&owner, tag.clone(), timeout_ms);
    let allocation = allocate(at, store, &record)?;
    let token = allocation.token;
    let dir = store.prepare_attempt(token).map_err(|e| {
        at.fail(
            Some(token),
            format!("cannot create the staging directory: {}", chain(&e)),
        )
    })?;
    let mut lease = lease::Lease::new(at.cx, at.task, at.number, token);
    lease.process_tag = Some(tag.clone());
    let heartbeat = lease::Heartbeat::start(store, token, lease, at.task.heartbeat);
    let guard = lease::guard(at.cx, at.task, at.partition, at.number, &allocation);
    // Asked to stop while another engine's attempt was live.
    if let lease::Guard::Interrupted(sig) = guard {
        return Err(at.ended(Ending::Interrupted(sig), token, None));
    }
    let waited = guard != lease::Guard::Proceed;
    let read_log_failed = |e: StoreError| {
        at.fail(
            Some(token),
            format!("cannot read the commit log: {}", chain(&e)),
        )
    };
    // What readers saw when a forced rebuild began: losing the race to it
    // (a stale token) publishes nothing, and only a generation committed
    // since is a rebuild someone else did for this one.
    let forced_over = match (rerun.force, waited) {
        (true, false) => Some(allocation.latest.as_ref().map(|r| r.generation)),
        (true, true) => Some(
            store
                .latest()
                .map_err(read_log_failed)?
                .map(|r| r.generation),
        ),
        (false, _) => None,
    };
    // Another engine may have published while this one waited, or between
    // the caller's look at the log and this token. The currency test of
    // every ALREADY_PUBLISHED applies: what it published counts only if it
    // is what this one would publish.
    // The allocation read the log after taking the token: that look is
    // this one, unless this engine waited since.
    if waited || !rerun.force {
        let latest = match waited {
            false => allocation.latest,
            true => store.latest().map_err(read_log_failed)?,
        };
        if let Some(latest) = latest.filter(|latest| {
            rerun.upstream_only
                || (!rerun.force
                    && super::is_current(
                        latest,
                        snapshot,
                        &at.task.code_version,
                        at.cx.fingerprint(at.task),
                    ))
        }) {
            at.cx.emit(
                State::AlreadyPublished,
                at.event(token).detail(format!(
                    "another engine published generation {} (code_version {}){}: nothing to do",
                    latest.generation,
                    latest.code_version,
                    if waited { " while this one waited" } else { "" }
                )),
            );
            return Err(AttemptOutcome::AlreadyPublished);
        }
    }
    Ok(Claim {
        token,
        dir,
        tag,
        heartbeat,
        guard,
        forced_over,
        logs: None,
    })
}

/// The logs are the engine's files: failing to create them (disk full,
/// permissions) is the engine's failure, not the task's. They stay open
/// for the command, which writes into these very files.
fn create_logs(
    at: &Attempt<'_, '_>,
    dir: &std::path::Path,
    token: FencingToken,
) -> Step<launch::OpenLogs> {
    let create = |log: &str| {
        let path = dir.join(log);
        at.cx
            .faults
            .hit(Point::CreateLogs, &at.task.name, at.partition)
            .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOSPC))
            .and_then(|()| std::fs::File::create(&path))
            .map_err(|e| {
                at.fail(
                    Some(token),
                    format!("cannot create {}: {e}", path.display()),
                )
            })
    };
    Ok(launch::OpenLogs {
        stdout: create(layout::STDOUT_LOG)?,
        stderr: create(layout::STDERR_LOG)?,
    })
}

/// The task's private input copies, and its command: argv, environment,
/// working directory.
fn prepare_command<'a>(
    at: &Attempt<'a, '_>,
    snapshot: &InputSnapshot,
    dir: &std::path::Path,
    data_dir: &std::path::Path,
    token: FencingToken,
) -> Step<(Vec<inputs::Materialized>, TaskLaunch<'a>)> {
    let inputs = match inputs::materialize(snapshot, &at.cx.warehouse, at.partition, dir) {
        Ok(m) => m,
        Err(inputs::MaterializeError::Moved { input, pinned, now }) => {
            return Err(at.failed(
                Ending::InputMoved(format!(
                    "external input `{input}` changed since it was pinned (pinned {pinned}, now {now}); the next attempt pins it again"
                )),
                token,
            ));
        }
        Err(e) => {
            return Err(at.fail(
                Some(token),
                format!("cannot hand the task its inputs: {}", chain(&e)),
            ))
        }
    };
    let contract = Contract {
        launcher: Launcher::Attempt {
            run_id: &at.cx.run_id,
            attempt: at.number,
            token: token.get(),
        },
        partition: at.partition,
        output_dir: data_dir,
        inputs: inputs.iter().map(ContractInput::from).collect(),
    };
    let program = at.cx.program(at.task).map(std::path::Path::to_path_buf);
    // A secret that cannot be read fails the attempt before anything runs:
    // an empty value would run the task with the wrong credentials.
    match TaskLaunch::new(at.cx.manifest, at.task, &contract, program) {
        Ok(command) => Ok((inputs, command)),
        Err(e) => Err(at.failed(Ending::Environment(e.to_string()), token)),
    }
}

/// A slot of the task's pool, held while its command runs.
fn take_slot<'s>(
    at: &Attempt<'_, '_>,
    slots: &'s super::pool::Slots,
    token: FencingToken,
) -> Step<super::pool::Permit<'s>> {
    slots
        .acquire(&format!(
            "{} {} attempt {} token {token} (run {})",
            at.task.name, at.partition, at.number, at.cx.run_id
        ))
        .map_err(|no| match no {
            super::pool::NoSlot::Interrupted(sig) => {
                at.ended(Ending::Interrupted(sig), token, None)
            }
            super::pool::NoSlot::Store(e) => at.fail(
                Some(token),
                format!(
                    "cannot take a slot of pool `{}`: {}",
                    at.task.pool,
                    chain(&e)
                ),
            ),
        })
}

/// Runs the command (or adopts the output of a gone engine's job that
/// completed, or plays an injected exit code) and says how it ended.
fn execute(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    claim: &mut Claim,
    snapshot: &InputSnapshot,
    command: &TaskLaunch<'_>,
    launched: &Result<String, crate::manifest::fingerprint::FingerprintError>,
) -> Step<Ending> {
    let (cx, task, partition, token, dir) = (at.cx, at.task, at.partition, claim.token, &claim.dir);
    let executor = cx.executor(task);
    let running = |job_id: Option<&str>| {
        let staging = dir.join(DATA_DIR);
        let e = at
            .event(token)
            .detail(match job_id {
                Some(id) => format!("staging {}; {}", staging.display(), executor.job_name(id)),
                None => format!("staging {}", staging.display()),
            })
            // The attempt's own evidence: what it read, failed or not.
            .data(
                Payload::Running(payload::Running {
                    input_snapshot: snapshot.to_json(),
                    job_id: job_id.map(str::to_string),
                    batch: None,
                    batch_size: None,
                })
                .to_json(),
            );
        // Stored before the command starts (on an object store too), so an
        // engine killed while its command runs still shows it started.
        cx.emit_flushed(State::Running, e)
    };
    let injected = cx
        .chaos
        .as_ref()
        .and_then(|c| c.exit_code(&task.name, partition, at.number));
    let adopted = match claim.guard {
        lease::Guard::Adopt(old, ref job) => executor
            .adopt(
                &store.attempt_dir(old),
                dir,
                snapshot,
                &cx.manifest.pipeline.code_version,
            )
            .then(|| job.clone()),
        _ => None,
    };
    Ok(match (launched, injected) {
        (Err(e), _) => Ending::CodeMoved(format!(
            "the task's code cannot be fingerprinted at launch: {}; the next attempt fingerprints it again",
            chain(e)
        )),
        _ if adopted.is_some() => {
            let job = adopted.as_deref();
            cx.emit(
                State::Running,
                at.event(token)
                    .detail(format!(
                        "adopting the output of {} (its engine is gone; it completed on the same inputs and code_version)",
                        executor.job_name(job.unwrap_or_default())
                    ))
                    .data(json!({ "job_id": job, "adopted": true })),
            );
            Ending::Success
        }
        (Ok(_), Some(code)) => {
            let _ = running(None);
            let _ = std::fs::write(
                dir.join(layout::STDERR_LOG),
                format!("WEIR_CHAOS: injected exit code {code}\n"),
            );
            Ending::Exit(code)
        }
        (Ok(_), None) => submit(
            at,
            (token, dir, &claim.tag, claim.logs.take()),
            &mut claim.heartbeat,
            snapshot,
            command,
            running,
        )?,
    })
}

/// Submits the command to its executor and waits for it to end. A local
/// command starts in `wait`: without its RUNNING stored (`running`) it
/// does not start (a scheduler's job already has).
fn submit<E: std::fmt::Display>(
    at: &Attempt<'_, '_>,
    (token, dir, tag, logs): (
        FencingToken,
        &std::path::Path,
        &str,
        Option<launch::OpenLogs>,
    ),
    heartbeat: &mut lease::Heartbeat,
    snapshot: &InputSnapshot,
    command: &TaskLaunch<'_>,
    running: impl Fn(Option<&str>) -> Result<(), E>,
) -> Step<Ending> {
    let (cx, task) = (at.cx, at.task);
    let executor = cx.executor(task);
    executor.record_basis(dir, snapshot, &cx.manifest.pipeline.code_version);
    match executor.submit(command.command(dir, tag.to_string()).with_logs(logs)) {
        Ok(job) => {
            let id = job.id();
            if let Some(id) = &id {
                heartbeat.set_job(id);
            }
            if let (Err(why), None) = (running(id.as_deref()), &id) {
                return Err(at.fail(Some(token), format!("the command was not started: {why}")));
            }
            Ok(job.wait())
        }
        Err(ending) => {
            let _ = running(None);
            Ok(ending)
        }
    }
}

/// A command that did not succeed, told as FAILED with its exit, signal,
/// duration and the tail of its stderr.
fn command_failed(
    at: &Attempt<'_, '_>,
    dir: &std::path::Path,
    token: FencingToken,
    ending: Ending,
    elapsed_ms: u64,
    launched: Option<String>,
) -> AttemptOutcome {
    let stderr_tail = launch::tail(&dir.join(layout::STDERR_LOG), TAIL_BYTES);
    let reason = ending.describe();
    at.cx.emit(
        State::Failed,
        at.event(token).detail(reason.clone()).data(
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
    at.ended(ending, token, launched)
}

/// The files the task left in `data_dir`; a layout the output's format
/// refuses (the task broke the output contract: the same inputs reproduce
/// it) fails its audit.
fn candidate_files(
    at: &Attempt<'_, '_>,
    data_dir: &std::path::Path,
    token: FencingToken,
    code: &str,
) -> Step<Vec<PathBuf>> {
    match audit::candidate_files(data_dir, at.task.output.format) {
        Ok(files) => Ok(files),
        Err(audit::CandidateError::Refused { problems }) => {
            // File names are the task's to choose: a secret may be one.
            let problems: Vec<String> = problems.iter().map(|p| at.cx.secrets.redact(p)).collect();
            let reason = format!("the output is not publishable: {}", problems.join("; "));
            at.cx.emit(
                State::GateFailed,
                at.event(token)
                    .detail(reason.clone())
                    .data(json!({ "refused": problems })),
            );
            Err(AttemptOutcome::Failed {
                ending: Ending::GateFailed,
                token: Some(token),
                reason,
                code: Some(code.to_string()),
            })
        }
        Err(e) => Err(at.fail(
            Some(token),
            format!("cannot list the candidate: {}", chain(&e)),
        )),
    }
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
