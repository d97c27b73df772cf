//! `weir serve`: a long-running engine that runs each task's partitions as
//! they become due, through the same write-audit-publish path as `weir
//! run`.
//!
//! ```text
//!  signals (SIGTERM, SIGINT, SIGHUP) ─┐
//!                                     ├─► one channel per manifest ─► executor ─► machine.step(input) ─► actions
//!  the next due time (the timeout) ───┘        (recv_timeout)           │
//!                                                                       ├─ Missed   ─► _serve/missed put-if-absent, MISSED event
//!                                                                       ├─ Check    ─► plan: are its inputs published?
//!                                                                       ├─ Start    ─► claim each instance, then `exec::run` on exactly them
//!                                                                       └─ WaitUntil ─► the next timeout
//! ```
//!
//! The policy is the pure machine (`machine.rs`, `due.rs`); this file does
//! the I/O. Nothing polls: the executor blocks on its channel until an
//! input comes or the next instance is due. Several manifests run on
//! threads of their own and share nothing but the process.

pub mod due;
pub mod machine;
pub mod record;
pub mod status;

use std::collections::BTreeMap;
use std::sync::mpsc;

use crate::events::{Event, EventLog, State};
use crate::exec::{self, InstanceResult, RunOptions};
use crate::manifest::Manifest;
use crate::plan::{Plan, Scope};
use crate::store::Warehouse;
use due::Trigger;
use machine::{Action, Input, Instance, Machine, Readiness, TaskSpec, Why};

/// What the executor of one manifest is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT.
    Stop(exec::interrupt::Signal),
    /// SIGHUP.
    Reload,
}

/// How one manifest's serve ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// Attempts were stopped by the signal.
    pub stopped: bool,
    /// The signal that ended it.
    pub signal: Option<exec::interrupt::Signal>,
    /// Why serve could not go on, if it could not.
    pub error: Option<String>,
}

/// Loads a manifest again on SIGHUP: `None` when it is invalid (the loader
/// reports why, as `weir validate` does).
pub type Loader = dyn Fn(&std::path::Path) -> Option<Manifest> + Send + Sync;

/// How a manifest's tasks are due.
pub fn specs(manifest: &Manifest) -> Vec<TaskSpec> {
    manifest
        .tasks
        .values()
        .map(|task| {
            let trigger = match (task.dims.time_dim(), &task.schedule) {
                (Some(d), _) => match &task.dims.0[d].scheme {
                    crate::partition::PartitionScheme::Time(scheme) => Trigger::Period {
                        scheme: scheme.clone(),
                        delay: i64::try_from(task.delay.as_secs()).unwrap_or(i64::MAX / 4),
                    },
                    crate::partition::PartitionScheme::Static { .. } => Trigger::Upstream,
                },
                (None, Some(s)) => Trigger::Cron(s.clone()),
                (None, None) => Trigger::Upstream,
            };
            TaskSpec {
                name: task.name.clone(),
                trigger,
                upstream: task.depends_on.clone(),
            }
        })
        .collect()
}

/// A trigger's name in a progress record: progress counted under another
/// trigger does not carry over.
pub fn trigger_text(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Period { scheme, .. } => format!(
            "{} {} from {}",
            scheme.grain,
            scheme.zone.name(),
            scheme.key(scheme.start)
        ),
        Trigger::Cron(s) => format!("schedule {} {}", s.text(), s.zone()),
        Trigger::Upstream => "upstream".into(),
    }
}

/// Each task's stored progress (`None`: none, or counted under another
/// trigger). A period whose claimer died on this host before it published
/// (kill -9, a crash) is not counted: it is due again, or MISSED if a newer
/// one is due.
fn stored_progress(
    warehouse: &Warehouse,
    manifest: &Manifest,
    specs: &[TaskSpec],
) -> Result<Vec<Option<i64>>, String> {
    let seen = stored_counts(warehouse, specs)?;
    Ok(specs
        .iter()
        .zip(seen)
        .map(|(spec, seen)| match seen {
            Some(o) if abandoned(warehouse, manifest, spec, o) => Some(o - 1),
            s => s,
        })
        .collect())
}

/// Whether period `o` of `spec` was claimed by a serve now certainly dead
/// (on this host) and none of its partitions is published.
fn abandoned(warehouse: &Warehouse, manifest: &Manifest, spec: &TaskSpec, o: i64) -> bool {
    let (Some(key), Some(task)) = (spec.trigger.key(o), manifest.tasks.get(&spec.name)) else {
        return false;
    };
    let dead = record::claim_of(warehouse, &spec.name, &key)
        .ok()
        .flatten()
        .and_then(|c| c.holder)
        .is_some_and(|h| h.certainly_dead());
    let keys = crate::plan::partitions::explicit(
        &task.dims,
        std::slice::from_ref(&key),
        crate::clock::now(),
    );
    dead && !keys.iter().any(|k| {
        matches!(
            warehouse.partition(&task.output.dataset, k).latest(),
            Ok(Some(_))
        )
    })
}

fn stored_counts(warehouse: &Warehouse, specs: &[TaskSpec]) -> Result<Vec<Option<i64>>, String> {
    specs
        .iter()
        .map(|s| match record::progress(warehouse, &s.name) {
            Ok(p) => Ok(p
                .filter(|p| p.trigger == trigger_text(&s.trigger))
                .map(|p| p.occurrence)),
            Err(e) => Err(format!(
                "cannot read the serve progress of `{}`: {}",
                s.name,
                exec::chain(&e)
            )),
        })
        .collect()
}

/// The instant as the decision log and records write it.
pub fn instant(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

/// One manifest being served.
struct Served {
    manifest: Manifest,
    warehouse: Warehouse,
    machine: Machine,
    log: EventLog,
    run_id: String,
    loader: std::sync::Arc<Loader>,
    /// What the edge read from the environment, for every run started.
    settings: exec::Settings,
    /// Readiness checks that found each due instance's external inputs not
    /// ready yet (task, occurrence): the sensors' backoff.
    checks: std::cell::RefCell<std::collections::HashMap<(usize, i64), u32>>,
    /// The outbox of `[notify]` targets for serve's own facts (MISSED); the
    /// batches' runs announce theirs.
    notifier: Option<crate::notify::Notifier>,
}

impl Served {
    /// One decision, one line on stdout.
    fn say(&self, line: &str) {
        use std::io::Write;
        let now = instant(crate::clock::now());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{now} {} {line}", self.manifest.pipeline.name);
        let _ = out.flush();
    }

    fn emit(&self, state: State, event: Event) -> Result<(), String> {
        self.log
            .emit(state, event)
            .map(drop)
            .map_err(|e| format!("cannot append {} to serve's event log: {e}", state.as_str()))
    }

    /// The partition key of an instance: a period's key, or `@instant`
    /// for a firing or an upstream publication.
    fn instance_key(&self, i: &Instance) -> String {
        self.machine.tasks()[i.task]
            .trigger
            .key(i.occurrence)
            .unwrap_or_else(|| format!("@{}", instant(i.occurrence)))
    }

    /// The partitions an instance runs: its period's key, or every key of
    /// a task without a time dimension.
    fn scope_keys(&self, i: &Instance) -> Vec<String> {
        let spec = &self.machine.tasks()[i.task];
        match spec.trigger.key(i.occurrence) {
            Some(k) => vec![k],
            None => self.manifest.tasks[&spec.name]
                .dims
                .keys(crate::clock::now()),
        }
    }

    fn fill_command(&self, task: &str, key: &str) -> String {
        format!(
            "weir run {} --task {task} --partition {}",
            crate::partition::shell_word(&self.manifest.path.display().to_string()),
            crate::partition::shell_word(key)
        )
    }

    /// Does what the machine says, feeding back what happened, until it
    /// waits. `Some` when serve is over.
    fn drive(
        &mut self,
        first: Input,
        wait: &mut Option<Option<i64>>,
    ) -> Result<Option<bool>, String> {
        let mut queue = std::collections::VecDeque::from([first]);
        while let Some(input) = queue.pop_front() {
            for action in self.machine.step(input) {
                match action {
                    Action::Missed {
                        task,
                        occurrence,
                        due_at,
                    } => self.missed(task, occurrence, due_at)?,
                    Action::Progress { task, seen } => {
                        let spec = &self.machine.tasks()[task];
                        let p = record::Progress {
                            task: spec.name.clone(),
                            occurrence: seen,
                            key: spec.trigger.key(seen),
                            trigger: trigger_text(&spec.trigger),
                            at: crate::clock::now_rfc3339(),
                        };
                        record::set_progress(&self.warehouse, &p).map_err(|e| {
                            format!(
                                "cannot store the serve progress of `{}`: {}",
                                p.task,
                                exec::chain(&e)
                            )
                        })?;
                    }
                    Action::Check(i) => {
                        let r = self.readiness(&i);
                        if let Readiness::NotYet { why, .. } = &r {
                            let name = &self.machine.tasks()[i.task].name;
                            self.say(&format!("WAIT {name} {}: {why}", self.instance_key(&i)));
                        }
                        queue.push_back(Input::Readiness(i, r));
                    }
                    Action::Dropped(i, why) => {
                        let name = &self.machine.tasks()[i.task].name;
                        self.say(&format!("DROP {name} {}: {why}", self.instance_key(&i)));
                    }
                    Action::Start(batch) => {
                        let finished = self.start(&batch)?;
                        queue.push_back(finished);
                    }
                    Action::WaitUntil(t) => *wait = Some(t),
                    Action::Exit { stopped } => return Ok(Some(stopped)),
                }
            }
        }
        Ok(None)
    }

    fn missed(&self, task: usize, occurrence: i64, due_at: i64) -> Result<(), String> {
        let spec = &self.machine.tasks()[task];
        let Some(key) = spec.trigger.key(occurrence) else {
            return Ok(());
        };
        let fill = self.fill_command(&spec.name, &key);
        let why = "serve was not running when it was due, and serve never catches up".to_string();
        let m = record::Missed {
            task: spec.name.clone(),
            partition: key.clone(),
            due_at: instant(due_at),
            why: why.clone(),
            fill: fill.clone(),
            recorded_at: crate::clock::now_rfc3339(),
        };
        let new = record::record_missed(&self.warehouse, &m).map_err(|e| {
            format!(
                "cannot record {} {key} as MISSED: {}",
                spec.name,
                exec::chain(&e)
            )
        })?;
        if new {
            let event = Event::instance(&spec.name, &key)
                .detail(format!("due at {}: {why}; fill it with `{fill}`", m.due_at))
                .data(serde_json::json!({"due_at": m.due_at, "fill": fill}));
            // Recorded once (put-if-absent above), so announced once.
            if let Some(notifier) = &self.notifier {
                notifier.record(State::Missed, &event);
            }
            self.emit(State::Missed, event)?;
            self.say(&format!(
                "MISSED {} {key} (due {}): fill with `{fill}`",
                spec.name, m.due_at
            ));
        }
        Ok(())
    }

    /// Whether every input partition of the instance is published: a plan
    /// of it adds no upstream instance.
    fn readiness(&self, i: &Instance) -> Readiness {
        let spec = &self.machine.tasks()[i.task];
        let keys = self.scope_keys(i);
        let published = |dataset: &str, key: &str| {
            matches!(self.warehouse.partition(dataset, key).latest(), Ok(Some(_)))
        };
        let plan = match Plan::build_for(
            &self.manifest,
            &Scope::Partitions(keys),
            &[spec.name.as_str()],
            crate::clock::now(),
            &published,
        ) {
            Ok(plan) => plan,
            Err(e) => return Readiness::Failed(e.to_string()),
        };
        for (t, planned) in plan.tasks.iter().enumerate() {
            if let Some(k) = (0..planned.keys.len()).find(|k| plan.is_added(t, *k)) {
                return Readiness::NotYet {
                    why: format!(
                        "upstream `{}` {} is not published",
                        planned.name, planned.keys[k]
                    ),
                    // Asked again when a batch publishes something.
                    again_at: None,
                };
            }
        }
        // External inputs: their sensors (`ready`), or their files.
        let task = &self.manifest.tasks[&spec.name];
        for key in self.scope_keys(i) {
            match crate::exec::sensed::check(&self.manifest, &self.warehouse, task, &key, "serve") {
                crate::exec::readiness::Readiness::Ready => {}
                crate::exec::readiness::Readiness::NotYet(not_ready) => {
                    let mut checks = self.checks.borrow_mut();
                    let n = checks.entry((i.task, i.occurrence)).or_insert(0);
                    *n += 1;
                    let after = crate::exec::readiness::recheck_after(*n);
                    let secs = i64::try_from(after.as_secs()).unwrap_or(i64::MAX).max(1);
                    return Readiness::NotYet {
                        why: not_ready.why,
                        again_at: Some(crate::clock::now().saturating_add(secs)),
                    };
                }
                crate::exec::readiness::Readiness::Failed(failure) => {
                    return Readiness::Failed(failure.why);
                }
            }
        }
        self.checks.borrow_mut().remove(&(i.task, i.occurrence));
        Readiness::Ready
    }

    /// Claims each instance and runs those it won, a `weir run` per
    /// partition key (instances of one key in one run, so an upstream
    /// publishes before its downstream reads).
    fn start(&mut self, batch: &[Instance]) -> Result<Input, String> {
        let engine = exec::lease::engine().engine_id.clone();
        let mut groups: BTreeMap<(bool, Vec<String>), Vec<String>> = BTreeMap::new();
        for i in batch {
            let name = self.machine.tasks()[i.task].name.clone();
            let key = self.instance_key(i);
            let claim = record::Claim {
                engine: engine.clone(),
                holder: Some(exec::lease::engine().clone()),
                run_id: self.run_id.clone(),
                at: crate::clock::now_rfc3339(),
            };
            match record::claim(&self.warehouse, &name, &key, &claim) {
                Ok(None) => {}
                // Its claimer died on this host before publishing: the
                // fencing makes taking it over safe.
                Ok(Some(other)) if other.holder.as_ref().is_some_and(|h| h.certainly_dead()) => {
                    self.say(&format!(
                        "TAKEOVER {name} {key}: engine {} that claimed it is dead",
                        other.engine
                    ));
                }
                Ok(Some(other)) => {
                    self.say(&format!(
                        "CLAIMED {name} {key}: engine {} runs it (serve {})",
                        other.engine, other.run_id
                    ));
                    continue;
                }
                Err(e) => return Err(format!("cannot claim {name} {key}: {}", exec::chain(&e))),
            }
            let why = match i.why {
                Why::PeriodEnded => format!("period ended, due {}", instant(i.due_at)),
                Why::Schedule => format!("schedule fired at {}", instant(i.due_at)),
                Why::Upstream => "an upstream task published".to_string(),
            };
            self.say(&format!("START {name} {key} ({why})"));
            let keys = self.scope_keys(i);
            // Time keys first: a static or unpartitioned task reads what
            // the periods' runs publish.
            let timed = self.machine.tasks()[i.task]
                .trigger
                .key(i.occurrence)
                .is_some();
            groups.entry((!timed, keys)).or_default().push(name);
        }
        let mut published = Vec::new();
        let mut interrupted = false;
        for ((_, keys), tasks) in groups {
            if interrupted || exec::interrupt::requested().is_some() {
                break;
            }
            let options = RunOptions {
                scope: Scope::Partitions(keys),
                tasks: tasks.clone(),
                force: false,
                resume_since: None,
                run_id: None,
                seed: None,
                allow_uncertified: false,
                // Readiness was asked before the batch started.
                wait: None,
                settings: self.settings.clone(),
            };
            match crate::notify::run_notifying(&self.manifest, &options, None) {
                Ok(summary) => {
                    for (task, partition, result) in &summary.instances {
                        if *result == InstanceResult::Published && !published.contains(task) {
                            published.push(task.clone());
                        }
                        if matches!(result, InstanceResult::Interrupted(_)) {
                            interrupted = true;
                        }
                        self.say(&format!(
                            "DONE {task} {partition} {} (run {})",
                            result_word(result),
                            summary.run_id
                        ));
                    }
                }
                Err(e) => self.say(&format!(
                    "FAILED {}: the run could not start: {}",
                    tasks.join(", "),
                    exec::chain(&e)
                )),
            }
        }
        Ok(Input::Finished {
            published,
            interrupted,
            now: crate::clock::now(),
        })
    }

    /// SIGHUP: the manifest again; an invalid one keeps the old running.
    fn reload(&mut self) -> Result<(), String> {
        let Some(mut fresh) = (self.loader)(&self.manifest.path) else {
            self.say("RELOAD refused: the manifest is invalid (see stderr); serving the one loaded before");
            return Ok(());
        };
        if fresh.pipeline.location() != self.manifest.pipeline.location() {
            self.say(&format!(
                "RELOAD refused: the warehouse moved from {} to {}; restart serve to change warehouses",
                self.manifest.pipeline.location(),
                fresh.pipeline.location()
            ));
            return Ok(());
        }
        fresh.pipeline = self.manifest.pipeline.clone();
        let specs = specs(&fresh);
        let seen = stored_progress(&self.warehouse, &fresh, &specs)?;
        self.machine.reload(specs, seen);
        self.manifest = fresh;
        self.say(&format!("RELOAD {} tasks", self.manifest.tasks.len()));
        Ok(())
    }
}

fn result_word(r: &InstanceResult) -> String {
    match r {
        InstanceResult::Published => "PUBLISHED".into(),
        InstanceResult::AlreadyPublished => "ALREADY_PUBLISHED".into(),
        InstanceResult::RejectedStale => "REJECTED_STALE".into(),
        InstanceResult::Quarantined(w) => format!("QUARANTINED: {w}"),
        InstanceResult::Held(w) => format!("HELD: {w}"),
        InstanceResult::Skipped(w) => format!("SKIPPED: {w}"),
        InstanceResult::EngineFailed(w) => format!("ENGINE_FAILED: {w}"),
        InstanceResult::Interrupted(w) => format!("INTERRUPTED: {w}"),
        InstanceResult::Waiting { reason, .. } => format!("WAITING: {reason}"),
        InstanceResult::SensorFailed(w) => format!("SENSOR_FAILED: {w}"),
    }
}

/// Serves one manifest until a stop signal; `signals` brings SIGTERM,
/// SIGINT and SIGHUP; its runs go with `settings`.
pub fn serve_one(
    manifest: Manifest,
    signals: &mpsc::Receiver<Signal>,
    loader: std::sync::Arc<Loader>,
    settings: &exec::Settings,
) -> Ended {
    let mut served = match open(manifest, loader, settings) {
        Ok(served) => served,
        Err(error) => {
            return Ended {
                stopped: false,
                signal: None,
                error: Some(error),
            }
        }
    };
    let run_id = served.run_id.clone();
    let _ = served.emit(
        State::RunStarted,
        Event::default().detail(format!("weir serve: {} tasks", served.manifest.tasks.len())),
    );
    served.say(&format!(
        "SERVE {} tasks, warehouse {}, events {run_id}",
        served.manifest.tasks.len(),
        served.manifest.pipeline.location()
    ));
    let (stopped, signal) = serve_until_stopped(&mut served, signals);
    finish(&mut served, stopped, signal)
}

/// Opens the warehouse, the stored progress and serve's event log, and
/// starts the notifier.
fn open(
    manifest: Manifest,
    loader: std::sync::Arc<Loader>,
    settings: &exec::Settings,
) -> Result<Served, String> {
    let warehouse = match Warehouse::open_for(&manifest.pipeline) {
        Ok(w) => w,
        Err(e) => return Err(format!("cannot open the warehouse: {}", exec::chain(&e))),
    };
    let specs = specs(&manifest);
    let seen = stored_progress(&warehouse, &manifest, &specs)?;
    let run_id = exec::new_run_id().replacen("run-", "serve-", 1);
    let log = match EventLog::open_in(&warehouse.events(), &run_id) {
        Ok(l) => l,
        Err(e) => return Err(format!("cannot open serve's event log: {e}")),
    };
    let mut served = Served {
        machine: Machine::new(specs, seen),
        manifest,
        warehouse,
        log,
        run_id: run_id.clone(),
        loader,
        settings: settings.clone(),
        checks: Default::default(),
        notifier: None,
    };
    served.notifier = crate::notify::Notifier::start(
        &served.manifest,
        &served.warehouse,
        &run_id,
        &settings.faults,
    );
    Ok(served)
}

/// Drives the machine, idling until the next due time or a signal, until
/// it stops: whether attempts were stopped, or why serve could not go on,
/// and the stop signal.
fn serve_until_stopped(
    served: &mut Served,
    signals: &mpsc::Receiver<Signal>,
) -> (Result<bool, String>, Option<exec::interrupt::Signal>) {
    let mut wait: Option<i64> = None;
    let mut signal = None;
    let mut input = Input::Clock(crate::clock::now());
    let stopped = loop {
        let mut next = None;
        match served.drive(input, &mut next) {
            Ok(Some(stopped)) => break Ok(stopped),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if let Some(next) = next {
            wait = next;
        }
        match wait {
            Some(t) => {
                let (task, key) = served.next_due();
                served.say(&format!("IDLE until {} ({task} {key})", instant(t)));
            }
            None => served.say("IDLE: nothing is due again until an upstream publishes (every time scheme has ended)"),
        }
        // Blocked on one channel, the next due time as the timeout.
        let got = match wait {
            Some(t) => {
                let ms = (t * 1000 - crate::clock::now_ms()).max(0);
                signals.recv_timeout(std::time::Duration::from_millis(ms as u64))
            }
            None => signals
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        input = match got {
            Ok(Signal::Stop(s)) => {
                signal = Some(s);
                served.say(&format!("STOP on {}: admitting nothing more", s.name()));
                Input::Stop
            }
            Ok(Signal::Reload) => {
                if let Err(e) = served.reload() {
                    break Err(e);
                }
                Input::Clock(crate::clock::now())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Input::Clock(crate::clock::now()),
            Err(mpsc::RecvTimeoutError::Disconnected) => Input::Stop,
        };
    };
    (stopped, signal)
}

/// Says RUN_FINISHED, flushes the notifier and the log, and says why
/// serve ended.
fn finish(
    served: &mut Served,
    stopped: Result<bool, String>,
    signal: Option<exec::interrupt::Signal>,
) -> Ended {
    let (stopped, error) = match stopped {
        Ok(s) => (s, None),
        Err(e) => (false, Some(e)),
    };
    let _ = served.emit(
        State::RunFinished,
        Event::default()
            .detail(match (&error, signal) {
                (Some(e), _) => format!("serve stopped: {e}"),
                (None, Some(s)) => format!("serve stopped by {}", s.name()),
                (None, None) => "serve stopped".into(),
            })
            .data(serde_json::json!({ "interrupted": signal.map(exec::interrupt::Signal::name) })),
    );
    if let Some(notifier) = &served.notifier {
        notifier.finish();
    }
    let _ = served.log.sync();
    served.say(match (&error, stopped) {
        (Some(_), _) => "EXIT: serve could not go on",
        (None, true) => "EXIT: running attempts were stopped",
        (None, false) => "EXIT",
    });
    Ended {
        stopped,
        signal,
        error,
    }
}

impl Served {
    /// The task and partition due next, for the decision log.
    fn next_due(&self) -> (String, String) {
        let next = self
            .machine
            .next_due()
            .iter()
            .enumerate()
            .filter_map(|(t, at)| at.map(|at| (at, t)))
            .min();
        let Some((at, t)) = next else {
            return (String::new(), String::new());
        };
        let spec = &self.machine.tasks()[t];
        let key = match &spec.trigger {
            Trigger::Period { scheme, delay } => {
                let p = scheme.containing(at - delay) - 1;
                scheme.key(p)
            }
            _ => "(schedule)".into(),
        };
        (spec.name.clone(), key)
    }
}

/// Serves every manifest, each on its own thread, until SIGTERM or
/// SIGINT; SIGHUP reloads them. Returns each one's end, in order. Every
/// run goes with `settings`.
pub fn serve(
    manifests: Vec<Manifest>,
    loader: &std::sync::Arc<Loader>,
    settings: &exec::Settings,
) -> std::io::Result<Vec<Ended>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    crate::clock::start_advancing();
    // The flags `weir run`'s scheduler and watchdogs read: a stop request
    // reaches running attempts as it does under `weir run`.
    exec::interrupt::install()?;
    let mut listening = signal_hook::iterator::Signals::new([SIGHUP, SIGINT, SIGTERM])?;
    let handle = listening.handle();
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in &manifests {
        let (tx, rx) = mpsc::channel();
        senders.push(tx);
        receivers.push(rx);
    }
    let forward = std::thread::Builder::new()
        .name("weir-serve-signals".into())
        .spawn(move || {
            for s in listening.forever() {
                let signal = match s {
                    SIGHUP => Signal::Reload,
                    SIGINT => Signal::Stop(exec::interrupt::Signal::Int),
                    _ => Signal::Stop(exec::interrupt::Signal::Term),
                };
                for tx in &senders {
                    let _ = tx.send(signal);
                }
            }
        })?;
    let ends = std::thread::scope(|scope| {
        let threads: Vec<_> = manifests
            .into_iter()
            .zip(receivers)
            .map(|(m, rx)| {
                let loader = std::sync::Arc::clone(loader);
                scope.spawn(move || serve_one(m, &rx, loader, settings))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| Ended {
                    stopped: false,
                    signal: None,
                    error: Some("serve's thread panicked".into()),
                })
            })
            .collect::<Vec<_>>()
    });
    handle.close();
    let _ = forward.join();
    Ok(ends)
}
