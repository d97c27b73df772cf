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
//! instances per pool slot; each admitted attempt runs on its own thread (it
//! spends its life blocked on a child process). A slot is the task command's
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
pub mod env;
pub mod executor;
pub mod fault;
#[cfg(test)]
mod fsync_budget;
pub mod interrupt;
pub mod launch;
pub mod lease;
mod machine;
mod pool;
pub mod readiness;
pub mod retry;
pub mod slurm;
pub mod spawn;
mod timer;
pub mod tree;
mod waiting;

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::events::payload::{self, Payload};
use crate::events::{Event, EventLog, State};
use crate::inputs::InputSnapshot;
use crate::manifest::{Disposition, Manifest, Task};
use crate::plan::{Plan, Scope};
use crate::store::marks::{self, InstanceMark, Mark};
use crate::store::{CommitRecord, Warehouse};
pub use attempt::chain;
use attempt::AttemptOutcome;
use classify::Ending;
use fault::Faults;
use retry::{Backoff, RetryBudget};

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
    /// An environment setting is invalid (`WEIR_POOL_TIMEOUT`).
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
    pub(crate) faults: Faults,
    pub(crate) chaos: Option<fault::Chaos>,
    /// The first append the event log refused.
    pub(crate) log_error: std::sync::Mutex<Option<String>>,
    /// Each planned task's code fingerprint (`manifest::fingerprint`).
    pub(crate) fingerprints: std::collections::HashMap<String, String>,
    /// Each planned task's program found along PATH (`launch::program`).
    pub(crate) programs: std::collections::HashMap<String, std::path::PathBuf>,
    /// The outbox of `[notify]` targets, if any.
    pub(crate) notify: Option<Box<dyn Outbox>>,
}

impl Context<'_> {
    /// The fingerprint of `task`'s code, computed when the run started: what
    /// the run compares publications and markers with. What an attempt
    /// publishes is stamped with the fingerprint taken as its command
    /// launched (`attempt.rs`), since a deploy may land mid-run.
    pub(crate) fn fingerprint(&self, task: &Task) -> &str {
        self.fingerprints.get(&task.name).map_or("", String::as_str)
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
            eprintln!("error: {why}");
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
                eprintln!("error: {why}");
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
    /// The run ended: deliver what is queued.
    fn finish(&self);
}

/// Opens a run's outbox once its warehouse and run id are known; `None`
/// when the manifest declares no target.
pub type OpenOutbox = fn(&Manifest, &Warehouse, &str) -> Option<Box<dyn Outbox>>;

/// Runs the plan for `options` and returns what happened to every instance.
/// `observe` sees every event (progress display). The engine alone: no
/// notification is sent (`notify::run_notifying` runs with the manifest's
/// targets, as `weir run` and `weir serve` do).
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
        crate::events::check_run_id(id).map_err(ExecError::Settings)?;
    }
    let timing = pool::timing_from_env().map_err(ExecError::Settings)?;
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
    // Each planned task's code identity, read once: an unreadable `code`
    // path refuses the run before anything starts.
    let mut fingerprints = std::collections::HashMap::new();
    let mut programs = std::collections::HashMap::new();
    for t in &plan.tasks {
        let task = &manifest.tasks[&t.name];
        fingerprints.insert(
            t.name.clone(),
            crate::manifest::fingerprint::fingerprint(&manifest.dir, task)?,
        );
        // Looked up once per run: a program installed while it goes is
        // used from the next run on.
        if let Some(program) = launch::program(task) {
            programs.insert(t.name.clone(), program);
        }
    }
    // Task processes of engines that died on this host stop before any
    // command of this run starts.
    tree::sweep_orphans();
    let run_id = options.run_id.clone().unwrap_or_else(new_run_id);
    let mut log = EventLog::open_in(&warehouse.events(), &run_id).map_err(ExecError::EventLog)?;
    if let Some(f) = observe {
        log.observe(f);
    }
    let notify = open.and_then(|open| open(manifest, &warehouse, &run_id));
    let cx = Context {
        manifest,
        now,
        warehouse,
        run_id: run_id.clone(),
        log,
        faults: Faults::from_env(),
        chaos: fault::Chaos::from_env(),
        log_error: std::sync::Mutex::new(None),
        fingerprints,
        programs,
        notify,
    };
    // Pool limits hold across the engines sharing the warehouse: this
    // engine beats while it may hold slots there.
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
            let rate = manifest.pools.get(name).and_then(|p| p.rate);
            (name.clone(), *slots, rate)
        })
        .collect();
    let pool_slots = pool::shared(
        cx.warehouse.backend(),
        &cx.warehouse.location(),
        &pools,
        timing,
    )
    .map_err(ExecError::Pools)?;
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
                "tzdb": crate::partition::time::tzdb_version(),
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

struct Scheduler<'c, 'a> {
    cx: &'c Context<'a>,
    plan: &'c Plan,
    options: &'c RunOptions,
    explicit: HashSet<&'c str>,
    status: Vec<Status>,
    attempts: Vec<u32>,
    snapshots: Vec<Option<InputSnapshot>>,
    /// The code fingerprint of each instance's last launched command.
    codes: Vec<Option<String>>,
    backoffs: Vec<Option<Backoff>>,
    /// Queueing, admission per pool, retries' backoff and skips: the
    /// pure machine (`machine.rs`) this scheduler executes.
    machine: machine::RunMachine,
    task_pool: Vec<usize>,
    /// The backoff of the retry `after_failure` just scheduled.
    retry_in: Duration,
    budget: RetryBudget,
    rng: fastrand::Rng,
    marker_errors: std::cell::RefCell<Vec<String>>,
    /// The stop request seen, if any: nothing more is admitted.
    interrupted: Option<interrupt::Signal>,
    /// Readiness checks that found each instance's inputs not ready.
    checks: Vec<u32>,
    /// When `--wait` ends: rechecks stop then.
    wait_until: Option<Instant>,
}

impl<'c, 'a> Scheduler<'c, 'a> {
    fn new(
        cx: &'c Context<'a>,
        plan: &'c Plan,
        options: &'c RunOptions,
        explicit: HashSet<&'c str>,
    ) -> Self {
        let n = plan.instance_count();
        let pools: Vec<&String> = plan.pools.keys().collect();
        Scheduler {
            cx,
            plan,
            options,
            explicit,
            status: (0..n).map(|_| Status::Waiting).collect(),
            attempts: vec![0; n],
            snapshots: (0..n).map(|_| None).collect(),
            codes: (0..n).map(|_| None).collect(),
            backoffs: (0..n).map(|_| None).collect(),
            // Admit a few instances beyond the slots, so their pinning,
            // token and staging are done by the time a slot frees up.
            machine: machine::RunMachine::new(
                plan.in_degrees(),
                plan.pools
                    .values()
                    .map(|slots| slots.saturating_mul(ADMIT_PER_SLOT))
                    .collect(),
            ),
            task_pool: plan
                .tasks
                .iter()
                .map(|t| {
                    pools
                        .iter()
                        .position(|p| **p == t.pool)
                        .expect("every task's pool is in the plan")
                })
                .collect(),
            retry_in: Duration::ZERO,
            budget: RetryBudget::default(),
            rng: options
                .seed
                .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed),
            marker_errors: std::cell::RefCell::new(Vec::new()),
            interrupted: None,
            checks: vec![0; n],
            wait_until: options.wait.map(crate::clock::instant_after),
        }
    }

    fn names(&self, instance: usize) -> (&'c str, &'c str) {
        let (t, i) = self.plan.locate(instance);
        let task = &self.plan.tasks[t];
        (task.name.as_str(), task.keys[i].as_str())
    }

    fn enqueue(&self, instance: usize) {
        let (task, partition) = self.names(instance);
        // A recheck of an instance WAITING for its inputs is no new queueing.
        let recheck = self.checks[instance] > 0 && self.attempts[instance] == 0;
        if !recheck {
            self.cx
                .emit(State::Queued, Event::instance(task, partition));
        }
    }

    fn run(&mut self, pool_slots: &[pool::Slots]) {
        // `None` on the channel: a stop request (SIGINT, SIGTERM) woke the
        // loop, which blocks until a report, a stop or the next retry.
        let (tx, rx) = mpsc::channel::<Option<Report>>();
        let waker = std::sync::Mutex::new(tx.clone());
        let _stops = interrupt::subscribe(move || {
            let _ = waker.lock().unwrap_or_else(|p| p.into_inner()).send(None);
        });
        let epoch = Instant::now();
        let ms = || u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let dag = Dag {
            plan: self.plan,
            task_pool: self.task_pool.clone(),
        };
        self.interrupted = interrupt::requested();
        let stop = self.interrupted.is_some() || self.cx.log_failed();
        let mut actions = self.machine.begin(&dag, stop, ms());
        std::thread::scope(|scope| loop {
            let mut wait = None;
            for action in std::mem::take(&mut actions) {
                match action {
                    machine::RunAction::Queue(id) => self.enqueue(id),
                    machine::RunAction::Start(id) => {
                        let slots = &pool_slots[machine::Graph::pool(&dag, id)];
                        self.start(scope, id, tx.clone(), slots);
                    }
                    machine::RunAction::Skip { instance, cause } => self.skipped(instance, cause),
                    machine::RunAction::WaitUntil(at) => wait = Some(at),
                    machine::RunAction::Finished => return,
                }
            }
            // Without evidence there is no run: admit nothing more once the
            // event log refused a line, or once asked to stop (the running
            // commands' watchdogs stop their trees).
            if self.interrupted.is_none() {
                self.interrupted = interrupt::requested();
            }
            if !self.machine.stopping() && (self.interrupted.is_some() || self.cx.log_failed()) {
                actions = self.machine.step(&dag, machine::RunInput::Stop, ms());
                continue;
            }
            let got = match wait.flatten() {
                Some(at) => rx.recv_timeout(Duration::from_millis(at.saturating_sub(ms()))),
                None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            let input = match got {
                Ok(Some(report)) => {
                    let instance = report.instance;
                    let verdict = match self.finish(report) {
                        machine::Verdict::Retry { .. } => machine::Verdict::Retry {
                            at: ms().saturating_add(
                                u64::try_from(self.retry_in.as_millis()).unwrap_or(u64::MAX),
                            ),
                        },
                        v => v,
                    };
                    machine::RunInput::Report { instance, verdict }
                }
                // Woken by a stop request, or a retry is due.
                Ok(None) | Err(mpsc::RecvTimeoutError::Timeout) => machine::RunInput::Clock,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    unreachable!("the scheduler holds a sender")
                }
            };
            // A report that lost the event log, or a stop that came with
            // it, admits nothing after it.
            if self.interrupted.is_none() {
                self.interrupted = interrupt::requested();
            }
            if !self.machine.stopping() && (self.interrupted.is_some() || self.cx.log_failed()) {
                // Attempts are running (this report's among them): no
                // action but a wait can come of it.
                let _ = self.machine.step(&dag, machine::RunInput::Stop, ms());
            }
            actions = self.machine.step(&dag, input, ms());
        });
    }

    fn start<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, '_>,
        id: usize,
        tx: mpsc::Sender<Option<Report>>,
        slots: &'s pool::Slots,
    ) where
        'c: 's,
    {
        self.attempts[id] += 1;
        let attempt = self.attempts[id];
        self.status[id] = Status::Running;
        let (task_name, partition) = self.names(id);
        let job = Job {
            task: &self.cx.manifest.tasks[task_name],
            partition,
            attempt,
            snapshot: self.snapshots[id].take(),
            first: attempt == 1,
            // What a `NAME+` reached through the mappings runs when what it
            // reads changed (early cutoff), never forced.
            force: self.options.force && {
                let (t, i) = self.plan.locate(id);
                self.plan.followed(t, i).is_none()
            },
            resume_since: self.options.resume_since,
            upstream_only: !self.explicit.contains(task_name) || {
                let (t, i) = self.plan.locate(id);
                self.plan.is_added(t, i)
            },
            allow_uncertified: self.options.allow_uncertified,
        };
        let cx = self.cx;
        scope.spawn(move || {
            // A panic here (a bug in weir or a library, in this thread or a
            // rayon worker of its audit) ends the instance, never the run:
            // unreported, it would leave the scheduler waiting for it
            // forever, deaf to SIGINT. Unwinding has released its slot,
            // lease and staging copies (their `Drop`s).
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(cx, slots)));
            let (snapshot, outcome) = ran.unwrap_or_else(|panic| {
                let reason = format!(
                    "the engine panicked in attempt {attempt}: {}",
                    panic_message(panic.as_ref())
                );
                (None, Outcome::Engine(reason))
            });
            let _ = tx.send(Some(Report {
                instance: id,
                snapshot,
                outcome,
            }));
        });
    }

    /// What the report means for the instance (its events and markers
    /// written); the machine decides what follows.
    fn finish(&mut self, report: Report) -> machine::Verdict {
        let id = report.instance;
        // The budget is a fraction of attempts launched, not of instances that
        // turned out to have nothing to do.
        if self.attempts[id] == 1 && matches!(report.outcome, Outcome::Attempt(_)) {
            self.budget.record_first_attempt();
        }
        self.snapshots[id] = report.snapshot;
        let (task_name, partition) = self.names(id);
        let result = match report.outcome {
            // A lost race that left the partition with what this attempt
            // would have published (Stale and current) refused nothing that
            // matters.
            Outcome::AlreadyPublished
            | Outcome::Attempt(
                AttemptOutcome::AlreadyPublished | AttemptOutcome::Stale { current: true },
            ) => InstanceResult::AlreadyPublished,
            Outcome::Attempt(AttemptOutcome::Published { unsure }) => {
                if let Err(e) = marks::clear(&self.cx.warehouse, task_name, partition) {
                    let why = format!(
                        "cannot clear the marker of {task_name} {partition}: {}",
                        chain(&e)
                    );
                    eprintln!("error: {why}");
                    self.marker_errors.borrow_mut().push(why);
                }
                match unsure {
                    // Published, as the reread log shows; the engine still
                    // failed at its own work, and says so with exit 5.
                    Some(e) => {
                        self.engine_failed(id, &format!("published, but the commit reported: {e}"));
                        // Downstream may use it: it is published.
                        self.status[id] = Status::Done(InstanceResult::EngineFailed(format!(
                            "published, but the commit reported: {e}"
                        )));
                        return machine::Verdict::Release;
                    }
                    None => InstanceResult::Published,
                }
            }
            Outcome::Engine(reason)
            | Outcome::Attempt(AttemptOutcome::Failed {
                ending: Ending::Engine(reason),
                ..
            }) => {
                self.engine_failed(id, &reason);
                InstanceResult::EngineFailed(reason)
            }
            Outcome::Marked { mark, consumable } => {
                let release = format!(
                    "release with `weir retry {} {task_name} --partition {} --note ...`",
                    crate::partition::shell_word(&self.cx.manifest.path.display().to_string()),
                    crate::partition::shell_word(partition)
                );
                // The event's state and the summary's column name the mark:
                // the text must not repeat it ("HELD HELD since …").
                let why = format!("since run {}: {}", mark.run_id, mark.reason);
                let (state, result) = match mark.mark {
                    Mark::Held => (State::Held, InstanceResult::Held(why.clone())),
                    Mark::Quarantined => {
                        (State::Quarantined, InstanceResult::Quarantined(why.clone()))
                    }
                    Mark::Abandoned => (State::Skipped, InstanceResult::Skipped(why.clone())),
                    Mark::Accepted => (State::Accepted, InstanceResult::Skipped(why.clone())),
                };
                let consumed = match (consumable, mark.mark) {
                    (true, Mark::Accepted) => {
                        "; downstream instances that read it among other partitions run without it"
                    }
                    (true, _) => "; its published generation stays readable downstream",
                    _ => "",
                };
                self.cx.emit(
                    state,
                    Event::instance(task_name, partition)
                        .detail(format!("{why}; {release}{consumed}")),
                );
                if consumable {
                    // HELD means "do not rebuild": what it published is
                    // still the partition's generation, and downstream
                    // instances pinned to another one rebuild from it.
                    self.status[id] = Status::Done(match mark.mark {
                        Mark::Accepted => result,
                        _ => InstanceResult::Held(format!("{why}{consumed}")),
                    });
                    return machine::Verdict::Release;
                }
                result
            }
            Outcome::Attempt(AttemptOutcome::Stale { current: false }) => {
                InstanceResult::RejectedStale
            }
            Outcome::NotReady(not_ready) => return self.not_ready(id, &not_ready),
            Outcome::SensorFailed(failure) => self.sensor_failed(id, &failure),
            Outcome::Unpinned(reason) => {
                self.cx.emit(
                    State::Held,
                    Event::instance(task_name, partition)
                        .detail(format!("inputs unavailable: {reason}")),
                );
                InstanceResult::Held(reason)
            }
            Outcome::Attempt(AttemptOutcome::Failed {
                ending: Ending::Interrupted(_),
                token,
                reason,
                ..
            }) => {
                self.cx.emit(
                    State::Interrupted,
                    Event::instance(task_name, partition)
                        .attempt(self.attempts[id], token.map(|t| t.get()))
                        .detail(format!(
                            "{reason}; its process tree is stopped, no marker: the next run runs it"
                        )),
                );
                // Downstream instances were not started: they are listed
                // as left undone, not SKIPPED.
                self.status[id] = Status::Done(InstanceResult::Interrupted(reason));
                return machine::Verdict::Stopped;
            }
            Outcome::Attempt(AttemptOutcome::Failed {
                ending,
                token,
                reason,
                code,
            }) => {
                // A marker names the code that failed, not the run's.
                self.codes[id] = code;
                match self.after_failure(id, &ending, token.map(|t| t.get()), &reason) {
                    Some(result) => result,
                    None => {
                        self.status[id] = Status::Waiting;
                        return machine::Verdict::Retry { at: 0 };
                    }
                }
            }
        };
        let ok = result.is_ok();
        self.status[id] = Status::Done(result);
        if ok {
            machine::Verdict::Release
        } else {
            machine::Verdict::Block
        }
    }

    /// The engine failed at its own work for this instance: an event, no
    /// marker (nothing about the task is known), no retry spent.
    fn engine_failed(&self, id: usize, reason: &str) {
        let (task_name, partition) = self.names(id);
        self.cx.emit(
            State::EngineFailed,
            Event::instance(task_name, partition).detail(format!(
                "{reason}; not the task's failure: no retry spent, no marker; the run exits 5"
            )),
        );
    }

    /// Decides what a failure gets; `None` means a retry was scheduled.
    fn after_failure(
        &mut self,
        id: usize,
        ending: &Ending,
        token: Option<u64>,
        reason: &str,
    ) -> Option<InstanceResult> {
        let (task_name, partition) = self.names(id);
        let task = &self.cx.manifest.tasks[task_name];
        let rule = classify::rule(task, ending);
        let (disposition, class, kind) = classify::resolve(self.cx.manifest, task, &rule);
        let attempt = self.attempts[id];
        let event = || Event::instance(task_name, partition).attempt(attempt, token);
        match disposition {
            Disposition::Retry if attempt < class.max_attempts => {
                if self.budget.try_take() {
                    let rng = fastrand::Rng::with_seed(self.rng.u64(..));
                    let backoff =
                        self.backoffs[id].get_or_insert_with(|| Backoff::new(class.backoff, rng));
                    let delay = backoff.next().unwrap_or(Duration::ZERO);
                    self.cx.emit(
                        State::Retrying,
                        event()
                            .detail(format!(
                                "{kind} failure ({reason}); attempt {} of {} in {}",
                                attempt + 1,
                                class.max_attempts,
                                crate::manifest::duration::human(delay)
                            ))
                            .data(
                                Payload::Retrying(payload::Retrying {
                                    class: kind.clone(),
                                    delay_ms: delay.as_millis() as u64,
                                    next_attempt: attempt + 1,
                                })
                                .to_json(),
                            ),
                    );
                    self.retry_in = delay;
                    return None;
                }
                let why = format!(
                    "{kind} failure ({reason}) but the run's retry budget is spent ({} retries): held for an operator",
                    self.budget.used()
                );
                self.cx.emit(
                    State::Held,
                    event().detail(why.clone()).data(
                        Payload::Decided(payload::Decided {
                            class: kind.clone(),
                            budget_spent: true,
                        })
                        .to_json(),
                    ),
                );
                self.mark(id, Mark::Held, &why);
                Some(InstanceResult::Held(why))
            }
            Disposition::Retry => {
                let why = format!(
                    "{kind} failure ({reason}) after {attempt} of {} attempts",
                    class.max_attempts
                );
                self.terminal(id, class.on_exhausted, event(), why, &kind)
            }
            other => self.terminal(
                id,
                other,
                event(),
                format!("{kind} failure: {reason}"),
                &kind,
            ),
        }
    }

    fn terminal(
        &self,
        id: usize,
        disposition: Disposition,
        event: Event,
        why: String,
        kind: &classify::FailureClass,
    ) -> Option<InstanceResult> {
        let data = Payload::Decided(payload::Decided {
            class: kind.clone(),
            budget_spent: false,
        })
        .to_json();
        let mark = if disposition == Disposition::Hold {
            Mark::Held
        } else {
            Mark::Quarantined
        };
        self.mark(id, mark, &why);
        if disposition == Disposition::Hold {
            self.cx.emit(
                State::Held,
                event
                    .detail(format!("{why}: held for an operator"))
                    .data(data),
            );
            Some(InstanceResult::Held(why))
        } else {
            self.cx.emit(
                State::Quarantined,
                event
                    .detail(format!("{why}: quarantined, not retried"))
                    .data(data),
            );
            Some(InstanceResult::Quarantined(why))
        }
    }

    /// Records an operator-visible state that outlives this run.
    fn mark(&self, id: usize, mark: Mark, reason: &str) {
        let (task, partition) = self.names(id);
        let record = InstanceMark {
            mark,
            task: task.to_string(),
            partition: partition.to_string(),
            run_id: self.cx.run_id.clone(),
            reason: reason.to_string(),
            input_snapshot_digest: self.snapshots[id].as_ref().map(InputSnapshot::digest),
            code_version: self.cx.manifest.tasks[task].code_version.clone(),
            code_fingerprint: Some(self.codes[id].clone().unwrap_or_else(|| {
                self.cx
                    .fingerprint(&self.cx.manifest.tasks[task])
                    .to_string()
            })),
            since: crate::clock::now_rfc3339(),
            note: None,
        };
        let written = self
            .cx
            .faults
            .hit(fault::Point::WriteMarker, task, partition)
            .map_err(|_| {
                crate::store::StoreError::io("_instances")(std::io::Error::from_raw_os_error(
                    libc::ENOSPC,
                ))
            })
            .and_then(|()| marks::write(&self.cx.warehouse, &record));
        if let Err(e) = written {
            let why = format!(
                "cannot record {task} {partition} as {}: {}",
                mark.as_str(),
                chain(&e)
            );
            eprintln!("error: {why}");
            self.marker_errors.borrow_mut().push(why);
        }
    }

    /// The machine skipped `id`: upstream `cause` did not publish (or
    /// waits for its inputs, and so does `id`).
    fn skipped(&mut self, id: usize, cause: usize) {
        if matches!(
            self.status[cause],
            Status::Done(InstanceResult::Waiting { .. })
        ) {
            return self.waits_for_upstream(id, cause);
        }
        let (cause_task, cause_partition) = self.names(cause);
        let (task, partition) = self.names(id);
        let why = format!("upstream `{cause_task}` {cause_partition} did not publish");
        self.cx.emit(
            State::Skipped,
            Event::instance(task, partition).detail(why.clone()).data(
                Payload::Skipped(payload::Skipped {
                    upstream_task: cause_task.to_string(),
                    upstream_partition: cause_partition.to_string(),
                })
                .to_json(),
            ),
        );
        self.status[id] = Status::Done(InstanceResult::Skipped(why));
    }

    fn summary(&self, run_id: &str) -> RunSummary {
        let instances = (0..self.status.len())
            .map(|id| {
                let (task, partition) = self.names(id);
                let result = match &self.status[id] {
                    Status::Done(r) => r.clone(),
                    _ if self.interrupted.is_some() => {
                        InstanceResult::Interrupted("not started: the run was interrupted".into())
                    }
                    // Admission stops when the event log refuses a line.
                    _ if self.cx.log_failed() => InstanceResult::Skipped(
                        "not started: the run stopped admitting instances when the event log could not take a line".into(),
                    ),
                    _ => InstanceResult::Skipped("never became ready".into()),
                };
                (task.to_string(), partition.to_string(), result)
            })
            .collect();
        RunSummary {
            run_id: run_id.to_string(),
            instances,
            retries: self.budget.used(),
            events: match self.cx.warehouse.is_remote() {
                false => self.cx.log.path().to_path_buf(),
                true => std::path::PathBuf::from(format!(
                    "{}/{}",
                    self.cx.warehouse.location().trim_end_matches('/'),
                    self.cx.log.path().display()
                )),
            },
            log_error: None,
            log_complete: true,
            marker_errors: self.marker_errors.borrow().clone(),
            interrupted: self.interrupted,
        }
    }
}

/// The plan's instances as the machine walks them.
struct Dag<'p> {
    plan: &'p Plan,
    task_pool: Vec<usize>,
}

impl machine::Graph for Dag<'_> {
    fn successors(&self, id: usize, f: &mut dyn FnMut(usize)) {
        let (t, i) = self.plan.locate(id);
        self.plan.for_each_successor(t, i, f);
    }

    fn pool(&self, id: usize) -> usize {
        self.task_pool[self.plan.locate(id).0]
    }
}

/// One attempt's worth of work for an attempt thread.
struct Job<'m> {
    task: &'m Task,
    partition: &'m str,
    attempt: u32,
    /// Pinned on the first attempt and kept for retries: a retry reads the
    /// same inputs (a new source snapshot is a new run, not a retry).
    snapshot: Option<InputSnapshot>,
    first: bool,
    force: bool,
    resume_since: Option<i64>,
    upstream_only: bool,
    allow_uncertified: bool,
}

impl Job<'_> {
    /// The command runs holding one of `slots`.
    fn run(self, cx: &Context<'_>, slots: &pool::Slots) -> (Option<InputSnapshot>, Outcome) {
        let (task, partition) = (self.task, self.partition);
        // An operator decision from an earlier run, read once per instance.
        let mark = if self.first {
            match marks::read(&cx.warehouse, &task.name, partition) {
                Ok(mark) => mark,
                Err(e) => {
                    return (
                        None,
                        Outcome::Engine(format!(
                            "cannot read the instance's marker: {}",
                            attempt::chain(&e)
                        )),
                    )
                }
            }
        } else {
            None
        };
        if let Some(mark) = mark
            .as_ref()
            .filter(|m| matches!(m.mark, Mark::Held | Mark::Abandoned | Mark::Accepted))
        {
            // An accepted gap is consumed as a gap (`crate::inputs::pin`).
            let consumable = mark.mark == Mark::Accepted
                || mark.mark == Mark::Held
                    && matches!(
                        cx.warehouse
                            .partition(&task.output.dataset, partition)
                            .latest(),
                        Ok(Some(_))
                    );
            return (
                None,
                Outcome::Marked {
                    mark: mark.clone(),
                    consumable,
                },
            );
        }
        if self.snapshot.is_none() {
            match readiness::check(cx.manifest, task, partition) {
                readiness::Readiness::Ready => {}
                readiness::Readiness::NotYet(n) => return (None, Outcome::NotReady(n)),
                readiness::Readiness::Failed(f) => return (None, Outcome::SensorFailed(f)),
            }
        }
        let snapshot = match self.snapshot {
            Some(s) => s,
            None => match crate::inputs::pin(
                cx.manifest,
                &cx.warehouse,
                task,
                partition,
                self.allow_uncertified,
                cx.now,
            ) {
                Ok(s) => s,
                Err(e) if e.is_external() => {
                    // Nothing holds it but the missing file: the next run
                    // pins it once the file is there (`weir retry` would
                    // find no marker to release).
                    return (
                        None,
                        Outcome::Unpinned(format!(
                            "{}; put it in place, then `weir run {} --task {} --partition {}`",
                            e.describe(),
                            crate::partition::shell_word(&cx.manifest.path.display().to_string()),
                            task.name,
                            crate::partition::shell_word(partition)
                        )),
                    );
                }
                Err(e) => return (None, Outcome::Unpinned(e.describe())),
            },
        };
        let code_version = &task.code_version;
        let fingerprint = cx.fingerprint(task);
        if let Some(mark) = mark {
            // A new gate, script or command is a new question: the
            // quarantine the old code caused does not stand.
            let same = mark
                .changed_since(&snapshot.digest(), code_version, fingerprint)
                .is_empty();
            if mark.mark == Mark::Quarantined && same && !self.force {
                return (
                    Some(snapshot),
                    Outcome::Marked {
                        mark,
                        consumable: false,
                    },
                );
            }
        }
        // The log is read on every attempt, before a token is spent: a
        // corrupt record refuses the instance here, not after its task ran.
        let store = cx.warehouse.partition(&task.output.dataset, partition);
        let latest = match store.latest() {
            Ok(latest) => latest,
            Err(e) => {
                return (
                    Some(snapshot),
                    Outcome::Engine(format!(
                        "cannot read the commit log of {} {partition}: {}",
                        task.output.dataset,
                        attempt::chain(&e)
                    )),
                )
            }
        };
        // A resumed forced backfill: what the interrupted run (or any run
        // since it started) published is not forced again.
        if let (true, true, Some(since), Some(latest)) = (
            self.first,
            self.force && !self.upstream_only,
            self.resume_since,
            &latest,
        ) {
            let at = latest.published_at.parse::<jiff::Timestamp>();
            if at.is_ok_and(|at| at.as_millisecond() >= since) {
                cx.emit(
                    State::AlreadyPublished,
                    Event::instance(&task.name, partition)
                        .detail(format!(
                            "generation {} was published at {}, since the resumed run started: nothing to do",
                            latest.generation, latest.published_at
                        ))
                        .data(already_published(latest)),
                );
                return (Some(snapshot), Outcome::AlreadyPublished);
            }
        }
        // --force reruns the tasks asked for, never their upstream.
        if self.first && (!self.force || self.upstream_only) {
            if let Some(latest) = latest {
                if self.upstream_only || is_current(&latest, &snapshot, code_version, fingerprint) {
                    cx.emit(
                        State::AlreadyPublished,
                        Event::instance(&task.name, partition)
                            .detail(format!(
                                "generation {} has {} (code_version {}): nothing to do",
                                latest.generation,
                                if self.upstream_only {
                                    "been published"
                                } else {
                                    "the same input snapshot"
                                },
                                latest.code_version
                            ))
                            .data(already_published(&latest)),
                    );
                    return (Some(snapshot), Outcome::AlreadyPublished);
                }
            }
        }
        let rerun = attempt::Rerun {
            force: self.force && !self.upstream_only,
            upstream_only: self.upstream_only,
        };
        let outcome = attempt::run(cx, task, partition, self.attempt, &snapshot, slots, rerun);
        // An external input that moved since it was pinned is pinned again.
        let keep = !matches!(
            &outcome,
            AttemptOutcome::Failed {
                ending: Ending::InputMoved(_),
                ..
            }
        );
        (keep.then_some(snapshot), Outcome::Attempt(outcome))
    }
}

/// What an ALREADY_PUBLISHED event names: the generation and the run that
/// published it (a run that died before announcing it is found by it).
fn already_published(latest: &CommitRecord) -> serde_json::Value {
    json!({
        "generation": latest.generation.get(),
        "run_id": latest.run_id,
        "attempt": latest.attempt,
    })
}

/// The text a panic was raised with (`panic!`'s formatted message).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
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
