//! Running a plan: a scheduler over the ready set, pool slots, retries, and
//! the attempt lifecycle (`attempt.rs`).
//!
//! ```text
//!  instance: waiting ──(upstream done)──► QUEUED ──(pool slot)──► attempt
//!     attempt ──► PUBLISHED | ALREADY_PUBLISHED | REJECTED_STALE ─► done, downstream may start
//!             └─► FAILED ─┬─ transient, attempts and budget left ─► RETRYING (backoff) ─► QUEUED
//!                         ├─ deterministic / gate ─► QUARANTINED ─┐
//!                         └─ operator / exhausted / budget spent ─► HELD ─┴─► downstream SKIPPED
//!             └─► the engine's own I/O failed, or it panicked ─► ENGINE_FAILED (no retry, no marker; exit 5)
//! ```
//!
//! One coordinator thread owns all scheduling state and admits a few
//! instances per pool slot; each admitted attempt runs on a thread of its own
//! while it lasts (it spends its life blocked on a child process), taken from
//! the run's workers (`workers.rs`), which keep their threads from one
//! attempt to the next. A slot is the task command's
//! (`pool.rs`): the attempt takes one just before its command starts and
//! gives it back when the command exits, so a pool never runs more commands
//! than slots, while the engine's own work before (pinning, the token's
//! put-if-absent, staging) and after (audit, fsyncs, the commit) overlaps
//! other instances' commands instead of being paid serially inside the slot.
//! Ready sets are updated incrementally from in-degree counters: no rescans,
//! so 10,000 instances cost the same per instance as 1,000. rayon is used
//! where work is CPU-bound: auditing candidates.

mod attempt;
pub mod classify;
pub mod command;
pub mod env;
pub mod executor;
pub mod fault;
#[cfg(test)]
mod fsync_budget;
mod job;
pub mod launch;
pub mod lease;
mod machine;
mod pool;
pub mod readiness;
pub mod retry;
mod scheduler;
pub mod sensed;
mod settings;
pub mod slurm;
mod steer;
mod waiting;
mod workers;

use job::{panic_message, Job, Ran};
use scheduler::Scheduler;

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::events::payload::{self, Payload};
use crate::events::{Event, EventLog, State};
use crate::inputs::InputSnapshot;
use crate::manifest::{Disposition, Manifest, Task};
use crate::plan::{Plan, Scope};
use crate::process::tree;
use crate::store::marks::{self, InstanceMark, Mark};
use crate::store::{CommitRecord, Warehouse};
pub use attempt::chain;
use attempt::AttemptOutcome;
use classify::Ending;
use retry::{Backoff, RetryBudget};
pub use settings::{SettingError, Settings};
// Stop requests and the timer of command watchdogs live with the processes
// they stop; exec's files reach them by these names.
pub use crate::process::interrupt;
pub(crate) use crate::process::timer;

/// Instances admitted per pool slot: the one running its command, and others
/// getting ready for a slot or publishing after theirs.
const ADMIT_PER_SLOT: u32 = 3;

/// What `weir run` / `weir backfill` asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Which partitions.
    pub scope: Scope,
    /// Narrow to these task selectors (`NAME`, `NAME+`, `+NAME`; plus
    /// unpublished upstream instances); empty = all.
    pub tasks: Vec<String>,
    /// Rerun even when the same input snapshot and code_version is published.
    pub force: bool,
    /// With `force`, a forced backfill resumed (`weir backfill --force
    /// --resume RUN`): an instance whose current generation was published
    /// at or after this instant (ms since the epoch, when RUN started) is
    /// not forced again.
    pub resume_since: Option<i64>,
    /// Run id; generated when absent.
    pub run_id: Option<String>,
    /// Seed for backoff jitter (tests); random when absent.
    pub seed: Option<u64>,
    /// Read upstream generations even when an operator uncertified them.
    pub allow_uncertified: bool,
    /// How long to wait for external inputs that are not ready
    /// (`--wait`), rechecking with backoff; `None`: report them WAITING at
    /// once.
    pub wait: Option<Duration>,
    /// What the edge read from the environment (faults, chaos, pool
    /// timing, cgroups).
    pub settings: Settings,
    /// The signed plan this run honours (`--plan`): its estimate goes into
    /// RUN_STARTED, so `weir slo` can show it beside what the run took.
    pub signed: Option<SignedPlan>,
}

/// A signed plan's file and estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedPlan {
    /// The plan file, as given.
    pub file: String,
    /// Wall time at p50 attempt durations.
    pub estimated_wall_ms: u64,
    /// Wall time at p90 attempt durations.
    pub estimated_wall_p90_ms: u64,
}

/// How one instance ended in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceResult {
    /// Published a new generation.
    Published,
    /// Nothing to do: already published with the same input and code.
    AlreadyPublished,
    /// Its publish was refused; a newer generation is visible.
    RejectedStale,
    /// Poison pill: not retried.
    Quarantined(String),
    /// Waits for an operator.
    Held(String),
    /// Not run because an upstream instance did not publish.
    Skipped(String),
    /// The engine could not do its own work for it (warehouse I/O, disk full,
    /// a corrupt record): not the task's failure, no retry spent, no marker;
    /// the run exits 5.
    EngineFailed(String),
    /// weir was asked to stop (SIGINT, SIGTERM) before the instance ended:
    /// its command's process tree was stopped, or it never started. No
    /// marker: the next run simply runs it.
    Interrupted(String),
    /// Its external inputs were not ready (or an upstream instance waits
    /// for its own) when the run's `--wait` ended: nothing done, no marker,
    /// not a failure. `late_since`: the SLA deadline it is past, if any.
    Waiting {
        /// What it waits for.
        reason: String,
        /// The passed SLA deadline (RFC 3339), if it is LATE.
        late_since: Option<String>,
    },
    /// A sensor of an external input failed (not "not yet"): no marker, the
    /// next run checks again.
    SensorFailed(String),
}

impl InstanceResult {
    /// Whether the instance's output is published and current.
    pub fn is_ok(&self) -> bool {
        matches!(
            self,
            InstanceResult::Published
                | InstanceResult::AlreadyPublished
                | InstanceResult::RejectedStale
        )
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Run id.
    pub run_id: String,
    /// (task, partition, result) for every instance, in plan order.
    pub instances: Vec<(String, String, InstanceResult)>,
    /// Retries taken from the budget.
    pub retries: u32,
    /// The event log.
    pub events: std::path::PathBuf,
    /// The first event the log could not take or store, if any: the run
    /// stopped admitting instances then.
    pub log_error: Option<String>,
    /// Whether every line of the event log is stored at the end (the last
    /// sync succeeded): lines refused for a while are kept and stored
    /// later, so a log error alone does not make the log incomplete.
    pub log_complete: bool,
    /// Instance markers the engine could not write or clear (a HELD that
    /// would not outlive the run, a stale one that would hold a published
    /// instance): the run exits 5.
    pub marker_errors: Vec<String>,
    /// The signal that stopped the run early, if one did.
    pub interrupted: Option<interrupt::Signal>,
}

impl RunSummary {
    /// Whether every instance is published, or waits for its inputs
    /// (which is no failure).
    pub fn ok(&self) -> bool {
        self.instances
            .iter()
            .all(|(_, _, r)| r.is_ok() || matches!(r, InstanceResult::Waiting { .. }))
    }

    /// Whether the engine failed at its own work (exit 5).
    pub fn engine_failed(&self) -> bool {
        self.log_error.is_some()
            || !self.marker_errors.is_empty()
            || self
                .instances
                .iter()
                .any(|(_, _, r)| matches!(r, InstanceResult::EngineFailed(_)))
    }
}

/// Why a run could not start or go on.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ExecError {
    /// The plan could not be made.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// The warehouse cannot be opened.
    #[error("cannot open the warehouse")]
    #[diagnostic(code(weir::exec::warehouse))]
    Warehouse(#[source] crate::store::StoreError),
    /// The run's event log cannot be opened.
    #[error("cannot open the event log")]
    #[diagnostic(code(weir::exec::event_log))]
    EventLog(#[source] std::io::Error),
    /// The pools' slots in the warehouse cannot be set up.
    #[error("cannot take part in the warehouse's pools")]
    #[diagnostic(code(weir::exec::pools))]
    Pools(#[source] crate::store::StoreError),
    /// A setting of the run is invalid (its `--run-id`).
    #[error("{0}")]
    #[diagnostic(code(weir::exec::settings))]
    Settings(String),
    /// The SIGINT/SIGTERM handlers cannot be installed.
    #[error("cannot install the SIGINT/SIGTERM handlers")]
    #[diagnostic(code(weir::exec::signals))]
    Signals(#[source] std::io::Error),
    /// A task's `code` could not be read.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Code(#[from] crate::manifest::fingerprint::FingerprintError),
}

/// Shared, read-only context of a run's attempts.
pub(crate) struct Context<'a> {
    pub(crate) manifest: &'a Manifest,
    /// The plan's "now": ends open ranges when inputs are mapped.
    pub(crate) now: i64,
    pub(crate) warehouse: Warehouse,
    pub(crate) run_id: String,
    pub(crate) log: EventLog,
    pub(crate) faults: fault::Faults,
    pub(crate) chaos: Option<fault::Chaos>,
    /// The first append the event log refused.
    pub(crate) log_error: std::sync::Mutex<Option<String>>,
    /// Each planned task's code fingerprint (`manifest::fingerprint`).
    pub(crate) fingerprints: std::collections::HashMap<String, String>,
    /// Each planned task's program found along PATH (`launch::program`).
    pub(crate) programs: std::collections::HashMap<String, std::path::PathBuf>,
    /// The outbox of `[notify]` targets, if any.
    pub(crate) notify: Option<Box<dyn Outbox>>,
    /// The manifest's secret values (`secrets::known_secrets`), redacted from
    /// what a gate failure says about the data.
    pub(crate) secrets: crate::secrets::Secrets,
}

impl Context<'_> {
    /// The fingerprint of `task`'s code, computed when the run started: what
    /// the run compares publications and markers with. What an attempt
    /// publishes is stamped with the fingerprint taken as its command
    /// launched (`attempt.rs`), since a deploy may land mid-run.
    pub(crate) fn fingerprint(&self, task: &Task) -> &str {
        self.fingerprints.get(&task.name).map_or("", String::as_str)
    }

    /// The executor `task` runs on: the one place that maps the manifest's
    /// executor kinds to their implementations.
    pub(crate) fn executor<'a>(&'a self, task: &'a Task) -> Box<dyn executor::Executor + 'a> {
        let spec = &self.manifest.executors[&task.executor];
        match spec.kind {
            crate::manifest::ExecutorKind::Local => Box::new(executor::Local),
            crate::manifest::ExecutorKind::Slurm => Box::new(slurm::Slurm {
                args: &spec.args,
                resources: &task.resources,
            }),
        }
    }

    /// Where `task`'s program was found along PATH when the run started.
    pub(crate) fn program(&self, task: &Task) -> Option<&std::path::Path> {
        self.programs
            .get(&task.name)
            .map(std::path::PathBuf::as_path)
    }
}

impl Context<'_> {
    /// Appends an event. Losing the log is an engine failure: the first one
    /// is kept, the run admits nothing more and exits 5; attempts already
    /// going finish (a panic inside an attempt thread would help nobody).
    pub(crate) fn emit(&self, state: State, event: Event) {
        if let Some(notify) = &self.notify {
            notify.record(state, &event);
        }
        if let Err(e) = self.log.emit(state, event) {
            let why = format!(
                "cannot append {} to {}: {e}",
                state.as_str(),
                self.log.path().display()
            );
            tracing::error!("{why}");
            let mut first = self.log_error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(why);
        }
    }

    /// [`Context::emit`], and the log made to outlive this process (see
    /// [`EventLog::emit_flushed`]); why not when it could not be (recorded
    /// as for `emit`).
    pub(crate) fn emit_flushed(&self, state: State, event: Event) -> Result<(), String> {
        if let Some(notify) = &self.notify {
            notify.record(state, &event);
        }
        match self.log.emit_flushed(state, event) {
            Ok(_) => Ok(()),
            Err(e) => {
                let why = format!(
                    "cannot store {} in {}: {e}",
                    state.as_str(),
                    self.log.path().display()
                );
                tracing::error!("{why}");
                let mut first = self.log_error.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(why.clone());
                Err(why)
            }
        }
    }

    /// Whether an append has failed.
    pub(crate) fn log_failed(&self) -> bool {
        self.log_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

/// A fresh run id: UTC start time plus a random suffix, so ids sort by start.
pub fn new_run_id() -> String {
    let now = jiff::Timestamp::now();
    format!(
        "run-{}-{:04x}",
        now.strftime("%Y%m%dT%H%M%SZ"),
        fastrand::u16(..)
    )
}

enum Status {
    Waiting,
    Running,
    Done(InstanceResult),
}

/// What an attempt thread reports back.
struct Report {
    instance: usize,
    snapshot: Option<InputSnapshot>,
    outcome: Outcome,
    /// A marker stood when the instance started.
    marker_found: bool,
}

enum Outcome {
    Attempt(AttemptOutcome),
    AlreadyPublished,
    /// An operator decision from an earlier run stands. `consumable`: the
    /// instance is HELD (do not rebuild) and has a published generation,
    /// which its downstream instances read as usual.
    Marked {
        mark: InstanceMark,
        consumable: bool,
    },
    /// Inputs could not be pinned.
    Unpinned(String),
    /// The engine could not read what it must before spending a token.
    Engine(String),
    /// An external input is not ready yet (`readiness`).
    NotReady(readiness::NotReady),
    /// A sensor failed.
    SensorFailed(readiness::SensorFailure),
}

/// What a run tells the outside as it goes (the `[notify]` outbox): told
/// of every event before it is logged, and waited for once the run ends.
/// The layer above provides it (`notify::Notifier`), so the engine knows no
/// notification target.
pub trait Outbox: Send + Sync {
    /// An event of the run, before it is logged.
    fn record(&self, state: State, event: &Event);
    /// A commit of `token` for `task`'s `partition` is about to be written:
    /// what its PUBLISHED will announce is remembered first, so a process
    /// killed between the commit and that event loses no notification.
    fn committing(&self, _task: &str, _partition: &str, _token: u64) {}
    /// The run ended: deliver what is queued.
    fn finish(&self);
}

/// Opens a run's outbox once its warehouse and run id are known; `None`
/// when the manifest declares no target.
pub type OpenOutbox = fn(&Manifest, &Warehouse, &str, &Settings) -> Option<Box<dyn Outbox>>;

/// Runs the plan for `options` and returns what happened to every instance.
/// `observe` sees every event (progress display). The engine alone: no
/// notification is sent and no lineage emitted (`session::run` adds them,
/// for every front end).
pub fn run(
    manifest: &Manifest,
    options: &RunOptions,
    observe: Option<crate::events::Observer>,
) -> Result<RunSummary, ExecError> {
    run_with(manifest, options, observe, None)
}

/// [`run`], telling the outbox `open` opens (if any) of every event.
pub fn run_with(
    manifest: &Manifest,
    options: &RunOptions,
    observe: Option<crate::events::Observer>,
    open: Option<OpenOutbox>,
) -> Result<RunSummary, ExecError> {
    let now = crate::clock::now();
    if let Some(id) = &options.run_id {
        crate::events::check_run_id(id).map_err(|e| ExecError::Settings(e.to_string()))?;
    }
    let settings = &options.settings;
    let timing = settings.pool_timing;
    // Fixed for the process at its first launch; a library process that
    // named none before gets this run's.
    tree::use_setting(settings.cgroups);
    // The selected tasks run under the currency test; upstream instances
    // they need are added by the plan only when not published.
    let selection = crate::plan::select::selection(manifest, &options.tasks)?;
    let selected = &selection.tasks;
    let warehouse = Warehouse::open_for(&manifest.pipeline).map_err(ExecError::Warehouse)?;
    // An accepted gap is not added as unpublished upstream work.
    let published =
        |dataset: &str, key: &str| crate::plan::settled(manifest, &warehouse, dataset, key);
    let plan = Plan::build_selected(manifest, &options.scope, &selection, now, &published)?;
    let explicit: HashSet<&str> = selected.iter().copied().collect();
    let (fingerprints, programs) = code_identities(manifest, &plan)?;
    // Task processes of engines that died on this host stop before any
    // command of this run starts.
    tree::sweep_orphans();
    let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
    let mut log = EventLog::open_in(&warehouse.events(), &run_id).map_err(ExecError::EventLog)?;
    if let Some(f) = observe {
        log.observe(f);
    }
    let notify = open.and_then(|open| open(manifest, &warehouse, &run_id, settings));
    let cx = Context {
        manifest,
        now,
        warehouse,
        run_id: run_id.clone(),
        log,
        faults: settings.faults.clone(),
        chaos: settings.chaos.clone(),
        log_error: std::sync::Mutex::new(None),
        fingerprints,
        programs,
        notify,
        secrets: crate::secrets::known_secrets(manifest),
    };
    let (heartbeat, pool_slots) = take_part_in_pools(&cx, &plan, timing)?;
    cx.emit(
        State::RunStarted,
        Event::default()
            .detail(format!(
                "{} task instances, code_version {}",
                plan.instance_count(),
                manifest.pipeline.code_version
            ))
            .data(json!({
                "scope": format!("{:?}", options.scope),
                "backfill": plan.backfill.as_ref().map(|b| json!({"name": b.name, "reason": b.reason})),
                "force": options.force,
                "instances": plan.instance_count(),
                "tzdb": crate::partition::time::tzdb_version(),
                "plan": options.signed.as_ref().map(|p| json!({
                    "file": p.file,
                    "estimated_wall_ms": p.estimated_wall_ms,
                    "estimated_wall_p90_ms": p.estimated_wall_p90_ms,
                })),
            })),
    );
    let mut scheduler = Scheduler::new(&cx, &plan, options, explicit);
    scheduler.run(&pool_slots);
    // Every attempt ended and released its slots: the heartbeat stops.
    drop(pool_slots);
    drop(heartbeat);
    let summary = scheduler.summary(&run_id);
    if let Some(notify) = &cx.notify {
        notify.finish();
    }
    announce_finished(&cx, &summary);
    let mut summary = summary;
    summary.log_complete = !cx.log.lost_lines();
    if let Err(e) = cx.log.sync() {
        summary.log_complete = false;
        let mut first = cx.log_error.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(format!("cannot sync {}: {e}", cx.log.path().display()));
    }
    summary.log_error = cx
        .log_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    Ok(summary)
}

/// This engine's part in the plan's pools, whose limits hold across the
/// engines sharing the warehouse: its heartbeat (it beats while it may
/// hold slots there) and each pool's slots.
fn take_part_in_pools(
    cx: &Context<'_>,
    plan: &Plan,
    timing: crate::store::slots::SlotTiming,
) -> Result<(pool::EngineHeartbeat, Vec<pool::Slots>), ExecError> {
    let heartbeat = pool::EngineHeartbeat::start(
        std::sync::Arc::clone(cx.warehouse.backend()),
        &lease::engine().engine_id,
        timing,
    )
    .map_err(ExecError::Pools)?;
    let pools: Vec<_> = plan
        .pools
        .iter()
        .map(|(name, slots)| {
            let rate = cx.manifest.pools.get(name).and_then(|p| p.rate);
            (name.clone(), *slots, rate)
        })
        .collect();
    let pool_slots = pool::shared(
        cx.warehouse.backend(),
        &cx.warehouse.location(),
        &pools,
        timing,
        &heartbeat.own_beats(),
    )
    .map_err(ExecError::Pools)?;
    Ok((heartbeat, pool_slots))
}

/// Each planned task's code identity, read once (an unreadable `code`
/// path refuses the run before anything starts), and its program looked
/// up along PATH once per run (a program installed while it goes is used
/// from the next run on).
#[allow(clippy::type_complexity)]
fn code_identities(
    manifest: &Manifest,
    plan: &Plan,
) -> Result<
    (
        std::collections::HashMap<String, String>,
        std::collections::HashMap<String, std::path::PathBuf>,
    ),
    ExecError,
> {
    let mut fingerprints = std::collections::HashMap::new();
    let mut programs = std::collections::HashMap::new();
    for t in &plan.tasks {
        let task = &manifest.tasks[&t.name];
        fingerprints.insert(
            t.name.clone(),
            crate::manifest::fingerprint::fingerprint(&manifest.dir, task)?,
        );
        if let Some(program) = launch::program(task) {
            programs.insert(t.name.clone(), program);
        }
    }
    Ok((fingerprints, programs))
}

/// RUN_FINISHED: how many instances are published or current, how many
/// not, and what an interruption left undone.
fn announce_finished(cx: &Context<'_>, summary: &RunSummary) {
    let failed = summary
        .instances
        .iter()
        .filter(|(_, _, r)| !r.is_ok())
        .count();
    let stopped = summary.interrupted.map_or(String::new(), |sig| {
        let undone = summary
            .instances
            .iter()
            .filter(|(_, _, r)| matches!(r, InstanceResult::Interrupted(_)))
            .count();
        format!("; interrupted by {}: {undone} left undone", sig.name())
    });
    cx.emit(
        State::RunFinished,
        Event::default()
            .detail(format!(
                "{} published or current, {failed} not{stopped}",
                summary.instances.len() - failed
            ))
            .data(json!({ "interrupted": summary.interrupted.map(interrupt::Signal::name) })),
    );
}

/// Published from the same reads (the digests of its input snapshot, not
/// the generations that held them: early cutoff, `plan::cutoff`), code
/// version and code fingerprint (a record without a fingerprint predates
/// them: its code_version alone is compared).
pub(crate) fn is_current(
    latest: &CommitRecord,
    snapshot: &InputSnapshot,
    code_version: &str,
    fingerprint: &str,
) -> bool {
    (latest.input_snapshot_digest == snapshot.digest()
        || crate::plan::cutoff::same_reads(&latest.input_snapshot, &snapshot.to_json()))
        && latest.code_version == code_version
        && latest
            .code_fingerprint
            .as_deref()
            .is_none_or(|f| f == fingerprint)
}
