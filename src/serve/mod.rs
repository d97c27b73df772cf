//! `weir serve`: a long-running engine that runs each task's partitions as
//! they become due, through the same write-audit-publish path as `weir
//! run`.
//!
//! ```text
//!  signals (SIGTERM, SIGINT, SIGHUP) ─┐
//!  readiness answers (check threads) ─┼─► one channel per manifest ─► executor ─► machine.step(input) ─► actions
//!  publications and ends (lanes) ─────┤        (recv_timeout)           │
//!  the next wake-up (the timeout) ────┘                                 ├─ Missed   ─► _serve/missed put-if-absent, MISSED event
//!                                                                       ├─ Check    ─► a thread: are its inputs there?
//!                                                                       ├─ Start    ─► a lane thread: claim, then one run of exactly them
//!                                                                       └─ WaitUntil ─► the next timeout
//! ```
//!
//! The policy is the pure machine (`machine.rs`, `due.rs`); this file does
//! the I/O. Nothing polls and nothing blocks the executor: readiness
//! checks (a sensor's command may hang) and lanes run on threads of their
//! own and report on the channel, so a signal is always heard at once.
//! Lanes are runs of the one run path (`session::run`), side by
//! side: a pool's slots (in the process and across engines) are the only
//! thing that makes one wait for another. Several manifests run on threads
//! of their own and share nothing but the process.
//!
//! Before it decides about time, serve compares its clock with the
//! warehouse's (`record::clock_skew_ms`): while they disagree by more than
//! `clock::MAX_SKEW_MS` it decides nothing (no period is due before it has
//! ended by the warehouse's reckoning, none is MISSED early).

pub mod due;
pub mod error;
pub mod machine;
pub mod record;
pub mod status;
mod verbose;
pub mod watch;

use std::collections::{BTreeMap, HashMap};
use std::sync::{mpsc, Arc};

use crate::events::{Event, EventLog, State};
use crate::exec::{self, InstanceResult, RunOptions};
use crate::manifest::Manifest;
use crate::plan::{Plan, Scope};
use crate::store::Warehouse;
use due::Trigger;
pub use due::{instant, span};
pub use error::ServeError;
use machine::{Action, Input, Instance, Machine, MissedWhy, Readiness, TaskSpec, WakeFor, Why};

/// What the executor of one manifest is told from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT.
    Stop(exec::interrupt::Signal),
    /// SIGHUP.
    Reload,
}

/// What wakes the executor of one manifest: a signal, or what one of its
/// own threads (a readiness check, a lane) reports.
#[derive(Debug)]
pub enum Wake {
    /// From outside.
    Signal(Signal),
    /// For the machine.
    Input(Input),
    /// A check thread's answer, before the machine hears it (the executor
    /// turns sensor answers into rechecks with backoff).
    Checked(Instance, Check),
}

/// How serve's decision log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `<instant> <pipeline> <DECISION> <task> <partition> ...` lines.
    #[default]
    Text,
    /// One JSON object a line: `ts`, `pipeline`, `decision`, `task`,
    /// `partition`, `detail`.
    Json,
}

/// How one manifest's serve ended.
#[derive(Debug)]
pub struct Ended {
    /// Attempts were stopped by the signal.
    pub stopped: bool,
    /// The signal that ended it.
    pub signal: Option<exec::interrupt::Signal>,
    /// Why serve could not go on, if it could not.
    pub error: Option<ServeError>,
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
                wait: wait_bound(task, &trigger),
                rerun: task.rerun == crate::manifest::Rerun::Always,
                name: task.name.clone(),
                trigger,
                upstream: task.depends_on.clone(),
            }
        })
        .collect()
}

/// How long a due instance of `task` waits for its inputs: its `wait`, else
/// its `sla`, else one period of its scheme and at least an hour.
fn wait_bound(task: &crate::manifest::Task, trigger: &Trigger) -> i64 {
    let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 4);
    if let Some(d) = task.wait.or(task.sla) {
        return secs(d);
    }
    let period = match trigger {
        Trigger::Period { scheme, .. } => {
            let o = scheme.start;
            scheme.period_end(o + 1) - scheme.period_end(o)
        }
        _ => 0,
    };
    period.max(3600)
}

/// A trigger's name in a progress record: progress counted under another
/// trigger does not carry over.
pub fn trigger_text(trigger: &Trigger) -> String {
    match trigger {
        // The whole definition: an ordinal counted under `every = "1m"`
        // means another period under `every = "5m"`.
        Trigger::Period { scheme, .. } => format!(
            "{} {} from {}",
            match scheme.grain {
                crate::partition::Grain::Minutely(n) => format!("every {n} minutes"),
                g => g.to_string(),
            },
            scheme.zone.name(),
            scheme.key(scheme.start)
        ),
        Trigger::Cron(s) => format!("schedule {} {}", s.text(), s.zone()),
        Trigger::Upstream => "upstream".into(),
    }
}

/// Each task's stored progress, as (finished up to, newest due); `None`
/// when there is none or it was counted under another trigger.
fn stored_progress(
    warehouse: &Warehouse,
    specs: &[TaskSpec],
) -> Result<Vec<Option<(i64, i64)>>, ServeError> {
    specs
        .iter()
        .map(|s| match record::progress(warehouse, &s.name) {
            Ok(p) => Ok(p
                .filter(|p| p.trigger == trigger_text(&s.trigger))
                .map(|p| (p.occurrence, p.newest.unwrap_or(p.occurrence)))),
            Err(e) => Err(ServeError::ReadProgress {
                task: s.name.clone(),
                cause: e.into(),
            }),
        })
        .collect()
}

/// The progress record of `spec` (the machine's `Action::Progress`),
/// written at `at`: serve's and the simulator's, alike.
pub fn progress_record(spec: &TaskSpec, done: i64, newest: i64, at: String) -> record::Progress {
    record::Progress {
        task: spec.name.clone(),
        occurrence: done,
        newest: Some(newest),
        key: spec.trigger.key(done),
        trigger: trigger_text(&spec.trigger),
        at,
    }
}

/// A readiness check's answer, as a check thread finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Every input is there.
    Ready,
    /// An upstream partition is not published (nor accepted as a gap).
    Upstream(String),
    /// An external input (its sensor or file) is not ready.
    External(String),
    /// It cannot run.
    Failed(String),
}

/// Writes serve's decision log (stdout), from any of its threads.
#[derive(Debug, Clone)]
struct Say {
    pipeline: String,
    format: LogFormat,
}

impl Say {
    /// One decision, one line: `DECISION task key` then `tail` (which
    /// brings its own leading space or colon).
    fn say(&self, decision: &str, task: &str, key: &str, tail: &str) {
        use std::io::Write;
        let now = instant(crate::clock::now());
        let line = match self.format {
            LogFormat::Text => {
                let mut line = format!("{now} {} {decision}", self.pipeline);
                for word in [task, key] {
                    if !word.is_empty() {
                        line.push(' ');
                        line.push_str(word);
                    }
                }
                line + tail
            }
            LogFormat::Json => serde_json::json!({
                "ts": now,
                "pipeline": self.pipeline,
                "decision": decision,
                "task": (!task.is_empty()).then_some(task),
                "partition": (!key.is_empty()).then_some(key),
                "detail": tail.trim_start_matches([':', ' ']),
            })
            .to_string(),
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// When this engine's clock was last compared with the warehouse's, and
/// the skew then (ms).
#[derive(Debug, Default)]
struct Skew {
    measured: Option<(std::time::Instant, i64)>,
}

/// How often the clocks are compared while they agree, and while not.
const SKEW_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);
const SKEW_RECHECK_SKEWED: std::time::Duration = std::time::Duration::from_secs(5);

/// One manifest being served.
struct Served {
    manifest: Arc<Manifest>,
    warehouse: Warehouse,
    machine: Machine,
    log: EventLog,
    run_id: String,
    loader: std::sync::Arc<Loader>,
    /// What the edge read from the environment, for every run started.
    settings: exec::Settings,
    /// Readiness checks that found an instance not ready, by (task,
    /// occurrence): the rechecks' backoff.
    checks: HashMap<(String, i64), u32>,
    /// The reason each waiting instance was last said to wait for: a WAIT
    /// line is said again only when it changes.
    waiting: HashMap<(String, i64), String>,
    /// Each task's newest occurrence due by the stored progress: an
    /// occurrence up to it that the restart finds MISSED may have run or
    /// may still run (it is checked first).
    resolve_upto: HashMap<String, i64>,
    /// The outbox of `[notify]` targets for serve's own facts (MISSED); the
    /// lanes' runs announce theirs.
    notifier: Option<crate::notify::Notifier>,
    say: Say,
    /// The executor's channel, for its threads to report on.
    tx: mpsc::Sender<Wake>,
    skew: Skew,
    /// The last IDLE said, not said again while the same.
    idle: Option<Option<(i64, WakeFor)>>,
    /// Waiting instances already said LATE (past their sla).
    late: std::collections::HashSet<(String, i64)>,
    /// A full disk under the warehouse pauses serve's own writes.
    disk: crate::store::DiskFullPause,
}

impl Served {
    fn emit(&self, state: State, event: Event) -> Result<(), ServeError> {
        self.log
            .emit(state, event)
            .map(drop)
            .map_err(|cause| ServeError::Append {
                state: state.as_str(),
                cause,
            })
    }

    fn name(&self, task: usize) -> &str {
        &self.machine.tasks()[task].name
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

    /// Does what the machine says about one input. `Some` when serve is
    /// over.
    fn drive(&mut self, input: Input) -> Result<Option<bool>, ServeError> {
        // Occurrences a restart would have called missed that another
        // engine still runs: watched, and the progress this step says for
        // their tasks (past them) is not stored; the machine says it
        // again, held back, when it hears of them.
        let mut watch: Vec<Input> = Vec::new();
        if let Input::Watched(i, machine::Elsewhere::Missed) = &input {
            self.announce_missed(i);
        }
        verbose::input(self.machine.tasks(), &input);
        for action in self.machine.step(input) {
            verbose::action(self.machine.tasks(), &action);
            match action {
                Action::Missed {
                    task,
                    occurrence,
                    due_at,
                    why,
                } => watch.extend(self.missed(task, occurrence, due_at, why)?),
                Action::Progress { task, done, newest } => {
                    let held = |i: &Input| matches!(i, Input::ClaimedElsewhere { instance, .. } if instance.task == task);
                    if !watch.iter().any(held) {
                        self.progress(task, done, newest)?;
                    }
                }
                Action::Check(i) => self.check(i),
                Action::Watch(i) => self.watch(i),
                Action::Dropped(i, why) => {
                    let name = self.name(i.task).to_owned();
                    self.waiting.remove(&(name.clone(), i.occurrence));
                    self.checks.remove(&(name.clone(), i.occurrence));
                    self.say
                        .say("DROP", &name, &self.instance_key(&i), &format!(": {why}"));
                }
                Action::Start {
                    lane,
                    instances,
                    force,
                } => self.start(lane, &instances, force),
                Action::WaitUntil(t) => self.idle(t),
                Action::Exit { stopped } => return Ok(Some(stopped)),
            }
        }
        for input in watch {
            if let Some(end) = self.drive(input)? {
                return Ok(Some(end));
            }
        }
        Ok(None)
    }

    /// Runs a write of serve's own until it goes through: on a full disk
    /// it waits (saying so once, backing off to a minute) and tries again
    /// rather than exiting; a stop request ends the wait; any other error
    /// is returned.
    fn with_space<T, E: std::error::Error + 'static>(
        &mut self,
        mut write: impl FnMut(&Self) -> Result<T, E>,
    ) -> Result<T, E> {
        loop {
            let error = match write(self) {
                Ok(v) => {
                    self.disk.recovered();
                    return Ok(v);
                }
                Err(e) => e,
            };
            let Some(wait) = self.disk.wait(&error) else {
                return Err(error);
            };
            let until = std::time::Instant::now() + wait;
            while std::time::Instant::now() < until {
                if exec::interrupt::requested().is_some() {
                    return Err(error);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }

    fn progress(&mut self, task: usize, done: i64, newest: i64) -> Result<(), ServeError> {
        let p = progress_record(
            &self.machine.tasks()[task],
            done,
            newest,
            crate::clock::now_rfc3339(),
        );
        self.with_space(|s| record::set_progress(&s.warehouse, &p))
            .map_err(|e| ServeError::StoreProgress {
                task: p.task.clone(),
                cause: e.into(),
            })
    }

    /// IDLE, said when what serve waits for changes.
    fn idle(&mut self, wake: Option<(i64, WakeFor)>) {
        if self.idle == Some(wake) {
            return;
        }
        self.idle = Some(wake);
        verbose::wake_up(self.machine.tasks(), wake);
        let Some((at, what)) = wake else {
            self.say.say(
                "IDLE",
                "",
                "",
                ": nothing is due again until an upstream publishes (every time scheme has ended)",
            );
            return;
        };
        let what = match what {
            WakeFor::Due(t) => {
                let spec = &self.machine.tasks()[t];
                let key = match &spec.trigger {
                    Trigger::Period { scheme, delay } => {
                        scheme.key(scheme.containing(at - delay) - 1)
                    }
                    _ => "(schedule)".into(),
                };
                format!("{} {key}", spec.name)
            }
            WakeFor::Recheck(t, o) | WakeFor::GiveUp(t, o) | WakeFor::Watch(t, o) => {
                let verb = match what {
                    WakeFor::Recheck(..) => "recheck",
                    WakeFor::Watch(..) => "look at the claim of",
                    _ => "give up on",
                };
                let i = Instance {
                    task: t,
                    occurrence: o,
                    due_at: 0,
                    why: Why::PeriodEnded,
                };
                format!("{verb} {} {}", self.name(t), self.instance_key(&i))
            }
        };
        self.say
            .say("IDLE", "", "", &format!(" until {} ({what})", instant(at)));
    }

    /// Records a MISSED occurrence, unless it is handled elsewhere: then
    /// the input that makes the machine watch it, if another engine runs
    /// it.
    fn missed(
        &mut self,
        task: usize,
        occurrence: i64,
        due_at: i64,
        why: MissedWhy,
    ) -> Result<Option<Input>, ServeError> {
        let spec = self.machine.tasks()[task].clone();
        let Some(key) = spec.trigger.key(occurrence) else {
            return Ok(None);
        };
        if let MissedWhy::Waited(_) = why {
            // Given up at its deadline or after: LATE first, as a run
            // says it of an instance that waits past its sla.
            let i = Instance {
                task,
                occurrence,
                due_at,
                why: Why::PeriodEnded,
            };
            let waiting = self.waiting.get(&(spec.name.clone(), occurrence)).cloned();
            let why = waiting.unwrap_or_else(|| "its inputs were not ready".into());
            self.late(&i, &why, crate::clock::now() + 1);
        }
        self.late.remove(&(spec.name.clone(), occurrence));
        let waited_for = self.waiting.remove(&(spec.name.clone(), occurrence));
        self.checks.remove(&(spec.name.clone(), occurrence));
        // After a restart, and whenever it waited: another engine sharing
        // the warehouse may have published it or be running it (its own
        // machine hears only its own lanes' publications).
        let resolving = match why {
            MissedWhy::Down => self
                .resolve_upto
                .get(&spec.name)
                .is_some_and(|newest| occurrence <= *newest),
            MissedWhy::Waited(_) => true,
        };
        if resolving && watch::settled(&self.manifest, &self.warehouse, &spec.name, &key) {
            return Ok(None);
        }
        let instance = Instance {
            task,
            occurrence,
            due_at,
            why: Why::PeriodEnded,
        };
        let dead_claimer = match self.claim_to_record(&instance, &key)? {
            Ok(dead) => dead,
            Err(watch) => return Ok(Some(watch)),
        };
        let fill = fill_command(&self.manifest, &spec.name, &key);
        let (reason, text) = missed_text(why, waited_for, dead_claimer.as_deref());
        let m = record::Missed {
            task: spec.name.clone(),
            partition: key.clone(),
            due_at: instant(due_at),
            why: text.clone(),
            fill: fill.clone(),
            recorded_at: crate::clock::now_rfc3339(),
        };
        let new = self
            .with_space(|s| record::record_missed(&s.warehouse, &m))
            .map_err(|e| ServeError::RecordMissed {
                task: spec.name.clone(),
                key: key.clone(),
                cause: e.into(),
            })?;
        let event = Event::instance(&spec.name, &key)
            .detail(format!(
                "due at {}: {text}; fill it with `{fill}`",
                m.due_at
            ))
            .data(serde_json::json!({
                "due_at": m.due_at,
                "fill": fill,
                "reason": reason,
                "claimed_by": dead_claimer,
            }));
        // Announced even when recorded before: whoever recorded it may have
        // died before announcing it, and the outbox keeps one record per
        // fact (put-if-absent by its key), so this is at most a no-op.
        if let Some(notifier) = &self.notifier {
            notifier.record(State::Missed, &event);
        }
        if new {
            // Recorded once (put-if-absent above), so said once.
            self.emit(State::Missed, event)?;
            self.say.say(
                "MISSED",
                &spec.name,
                &key,
                &format!(" (due {}): {text}; fill with `{fill}`", m.due_at),
            );
        }
        Ok(None)
    }

    /// Takes the claim of an instance before recording it MISSED (only
    /// its holder does): the dead claimer it took over from, if any; or,
    /// when a live engine holds it, the input that makes the machine watch
    /// it instead (its claimer may still publish it).
    fn claim_to_record(
        &self,
        i: &Instance,
        key: &str,
    ) -> Result<Result<Option<String>, Input>, ServeError> {
        let name = self.name(i.task);
        let mine = watch::mine(&self.run_id);
        let claimed = record::claim_or_take_over(&self.warehouse, name, key, &mine, watch::dead)
            .map_err(|e| ServeError::ClaimMissed {
                task: name.to_owned(),
                key: key.to_owned(),
                cause: e.into(),
            })?;
        Ok(match claimed {
            record::Claimed::Won => Ok(None),
            record::Claimed::TookOver(c) => Ok(Some(c.engine)),
            record::Claimed::Held(c) => Err(Input::ClaimedElsewhere {
                instance: i.clone(),
                claimer: c.engine,
                again_at: crate::clock::now() + watch::WATCH_EVERY,
            }),
        })
    }

    /// Announces a MISSED record another engine wrote (it may have died
    /// before it announced it; the outbox keeps one record per fact).
    fn announce_missed(&self, i: &Instance) {
        let (Some(notifier), Some(key)) = (
            &self.notifier,
            self.machine.tasks()[i.task].trigger.key(i.occurrence),
        ) else {
            return;
        };
        let name = self.name(i.task);
        let Ok(Some(m)) = record::missed_of(&self.warehouse, name, &key) else {
            return;
        };
        let reason = if m.why.starts_with(DOWN_TEXT) {
            "down"
        } else {
            "waited"
        };
        let event = Event::instance(name, &key)
            .detail(format!(
                "due at {}: {}; fill it with `{}`",
                m.due_at, m.why, m.fill
            ))
            .data(serde_json::json!({"due_at": m.due_at, "fill": m.fill, "reason": reason}));
        notifier.record(State::Missed, &event);
    }

    /// Says (once) that a waiting instance passed its sla: a LATE event and
    /// notification, as a run says it.
    fn late(&mut self, i: &Instance, why: &str, now: i64) {
        let name = self.name(i.task).to_owned();
        let key = self.instance_key(i);
        let Some(task) = self.manifest.tasks.get(&name) else {
            return;
        };
        let Some(deadline) = crate::exec::readiness::late_since(task, &key, now) else {
            return;
        };
        if !self.late.insert((name.clone(), i.occurrence)) {
            return;
        }
        tracing::debug!(
            task = name,
            partition = key,
            occurrence = i.occurrence,
            deadline,
            "LATE: past its sla while waiting: {why}"
        );
        let event = Event::instance(&name, &key)
            .detail(format!(
                "not published by its SLA deadline {deadline}: {why}"
            ))
            .data(serde_json::json!({ "deadline": deadline }));
        if let Some(notifier) = &self.notifier {
            notifier.record(State::Late, &event);
        }
        let _ = self.emit(State::Late, event);
        self.say.say(
            "LATE",
            &name,
            &key,
            &format!(": past its sla ({deadline}): {why}"),
        );
    }

    /// Asks a thread what became of an instance another engine claimed
    /// (store reads, on S3 slow ones: the executor must hear signals
    /// meanwhile).
    fn watch(&self, i: Instance) {
        let manifest = Arc::clone(&self.manifest);
        let warehouse = self.warehouse.clone();
        let task = self.name(i.task).to_owned();
        let key = self.instance_key(&i);
        let tx = self.tx.clone();
        let answer_to = i.clone();
        let spawned = std::thread::Builder::new()
            .name("weir-serve-watch".into())
            .spawn(move || {
                let now = crate::clock::now();
                let what = watch::elsewhere(&manifest, &warehouse, &task, &key, now);
                let _ = tx.send(Wake::Input(Input::Watched(answer_to, what)));
            });
        if let Err(e) = spawned {
            let what = machine::Elsewhere::Held {
                claimer: format!("unknown (cannot start a watch: {e})"),
                again_at: crate::clock::now() + watch::WATCH_EVERY,
            };
            let _ = self.tx.send(Wake::Input(Input::Watched(i, what)));
        }
    }

    /// Asks a thread whether an instance's inputs are there: a sensor's
    /// command may take long or hang, and the executor must hear signals
    /// and other answers meanwhile.
    fn check(&self, i: Instance) {
        let manifest = Arc::clone(&self.manifest);
        let warehouse = self.warehouse.clone();
        let task = self.name(i.task).to_owned();
        let keys = self.scope_keys(&i);
        let tx = self.tx.clone();
        let answer_to = i.clone();
        let spawned = std::thread::Builder::new()
            .name("weir-serve-check".into())
            .spawn(move || {
                let answer = check_inputs(&manifest, &warehouse, &task, &keys);
                let _ = tx.send(Wake::Checked(answer_to, answer));
            });
        if let Err(e) = spawned {
            let why = format!("cannot start a readiness check: {e}");
            let _ = self.tx.send(Wake::Checked(i, Check::External(why)));
        }
    }

    /// A check thread's answer, for the machine: rechecks back off; a WAIT
    /// line when an instance starts waiting or its reason changes.
    fn answer(&mut self, i: Instance, check: Check) -> Input {
        let name = self.name(i.task).to_owned();
        let id = (name.clone(), i.occurrence);
        let readiness = match check {
            Check::Ready => Readiness::Ready,
            Check::Failed(why) => Readiness::Failed(why),
            Check::Upstream(why) | Check::External(why) => {
                let n = self.checks.entry(id.clone()).or_insert(0);
                *n += 1;
                let after = crate::exec::readiness::recheck_after(*n);
                let secs = i64::try_from(after.as_secs()).unwrap_or(i64::MAX).max(1);
                if self.waiting.get(&id) != Some(&why) {
                    self.say
                        .say("WAIT", &name, &self.instance_key(&i), &format!(": {why}"));
                    self.waiting.insert(id.clone(), why.clone());
                }
                self.late(&i, &why, crate::clock::now());
                Readiness::NotYet {
                    why,
                    again_at: Some(crate::clock::now().saturating_add(secs)),
                }
            }
        };
        if !matches!(readiness, Readiness::NotYet { .. }) {
            self.checks.remove(&id);
            self.waiting.remove(&id);
        }
        Input::Readiness(i, readiness)
    }

    /// Starts a lane: a thread that claims each instance and runs those it
    /// won, and reports each publication as it happens and the lane's end.
    fn start(&self, lane: u64, instances: &[Instance], force: bool) {
        let work: Vec<LaneInstance> = instances
            .iter()
            .map(|i| LaneInstance {
                instance: i.clone(),
                task: self.name(i.task).to_owned(),
                key: self.instance_key(i),
                keys: self.scope_keys(i),
                timed: self.machine.tasks()[i.task]
                    .trigger
                    .key(i.occurrence)
                    .is_some(),
                why: match i.why {
                    Why::PeriodEnded => format!("period ended, due {}", instant(i.due_at)),
                    Why::Schedule => format!("schedule fired at {}", instant(i.due_at)),
                    Why::Upstream => "an upstream task published".to_string(),
                },
            })
            .collect();
        let cx = Lane {
            id: lane,
            manifest: Arc::clone(&self.manifest),
            warehouse: self.warehouse.clone(),
            say: self.say.clone(),
            run_id: self.run_id.clone(),
            settings: self.settings.clone(),
            tx: self.tx.clone(),
            force,
        };
        let spawned = std::thread::Builder::new()
            .name(format!("weir-serve-lane-{lane}"))
            .spawn(move || cx.run(&work));
        if let Err(e) = spawned {
            self.say
                .say("FAILED", "", "", &format!(": cannot start a lane: {e}"));
            let _ = self.tx.send(Wake::Input(Input::Finished {
                lane,
                published: Vec::new(),
                interrupted: false,
                now: crate::clock::now(),
            }));
        }
    }

    /// SIGHUP: the manifest again; an invalid one keeps the old running.
    fn reload(&mut self) -> Result<(), ServeError> {
        let Some(mut fresh) = (self.loader)(&self.manifest.path) else {
            self.say.say(
                "RELOAD",
                "",
                "",
                " refused: the manifest is invalid (see stderr); serving the one loaded before",
            );
            return Ok(());
        };
        if fresh.pipeline.location() != self.manifest.pipeline.location() {
            let why = format!(
                " refused: the warehouse moved from {} to {}; restart serve to change warehouses",
                self.manifest.pipeline.location(),
                fresh.pipeline.location()
            );
            self.say.say("RELOAD", "", "", &why);
            return Ok(());
        }
        fresh.pipeline = self.manifest.pipeline.clone();
        let specs = specs(&fresh);
        let stored = stored_progress(&self.warehouse, &specs)?;
        for (spec, s) in specs.iter().zip(&stored) {
            if let Some((_, newest)) = s {
                self.resolve_upto.insert(spec.name.clone(), *newest);
            }
        }
        let done = stored
            .into_iter()
            .map(|s| s.map(|(done, _)| done))
            .collect();
        self.machine.reload(specs, done);
        self.manifest = Arc::new(fresh);
        let tail = format!(" {} tasks", self.manifest.tasks.len());
        self.say.say("RELOAD", "", "", &tail);
        Ok(())
    }

    /// Whether the clocks agree now (compared at most every minute, every
    /// 5 s while they do not); says SKEW when that changes.
    fn clock_agrees(&mut self) -> bool {
        let bad = |s: i64| s.abs() > crate::clock::MAX_SKEW_MS;
        let due = self.skew.measured.is_none_or(|(at, skew)| {
            let every = if bad(skew) {
                SKEW_RECHECK_SKEWED
            } else {
                SKEW_RECHECK
            };
            at.elapsed() >= every
        });
        if due {
            let engine = exec::lease::engine().engine_id.clone();
            let was = self.skew.measured.map(|(_, s)| s);
            // A store that cannot be written is for the decisions
            // themselves to report: the clocks are taken to agree.
            let skew = record::clock_skew_ms(&self.warehouse, &engine).unwrap_or(0);
            self.skew.measured = Some((std::time::Instant::now(), skew));
            if bad(skew) && !was.is_some_and(bad) {
                let (word, by) = if skew > 0 {
                    ("ahead of", skew)
                } else {
                    ("behind", -skew)
                };
                let why = format!(
                    ": this engine's clock is {} s {word} the warehouse's (more than {} s): deciding nothing until they agree",
                    by / 1000,
                    crate::clock::MAX_SKEW_MS / 1000
                );
                self.say.say("SKEW", "", "", &why);
                let _ = self.emit(
                    State::Waiting,
                    Event::default()
                        .detail(format!(
                            "clock skew of {skew} ms against the warehouse: serve decides nothing"
                        ))
                        .data(serde_json::json!({ "clock_skew_ms": skew })),
                );
            } else if !bad(skew) && was.is_some_and(bad) {
                self.say.say("SKEW", "", "", ": the clocks agree again");
            }
        }
        self.skew.measured.is_none_or(|(_, s)| !bad(s))
    }
}

/// A MISSED record's reason and text.
fn missed_text(
    why: MissedWhy,
    waited_for: Option<String>,
    dead_claimer: Option<&str>,
) -> (&'static str, String) {
    let (reason, mut text) = match why {
        MissedWhy::Down => ("down", DOWN_TEXT.to_string()),
        MissedWhy::Waited(secs) => (
            "waited",
            match waited_for {
                Some(w) => format!("gave up waiting after {} ({w})", span(secs)),
                None => format!("gave up waiting after {}", span(secs)),
            },
        ),
    };
    if let Some(engine) = dead_claimer {
        text.push_str(&format!(
            "; engine {engine} claimed it and died before publishing it"
        ));
    }
    (reason, text)
}

/// Why a period is MISSED as down, as its record says.
const DOWN_TEXT: &str = "serve was not running when it was due, and serve never catches up";

/// The command that fills a missed partition.
fn fill_command(manifest: &Manifest, task: &str, key: &str) -> String {
    format!(
        "weir run {} --task {task} --partition {}",
        crate::partition::shell_word(&manifest.path.display().to_string()),
        crate::partition::shell_word(key)
    )
}

/// Whether every input partition of `task` over `keys` is published (or
/// accepted as a gap), then whether its external inputs are ready.
fn check_inputs(manifest: &Manifest, warehouse: &Warehouse, task: &str, keys: &[String]) -> Check {
    let settled =
        |dataset: &str, key: &str| crate::plan::settled(manifest, warehouse, dataset, key);
    let plan = match Plan::build_for(
        manifest,
        &Scope::Partitions(keys.to_vec()),
        &[task],
        crate::clock::now(),
        &settled,
    ) {
        Ok(plan) => plan,
        Err(e) => return Check::Failed(e.to_string()),
    };
    for (t, planned) in plan.tasks.iter().enumerate() {
        if let Some(k) = (0..planned.keys.len()).find(|k| plan.is_added(t, *k)) {
            return Check::Upstream(format!(
                "upstream `{}` {} is not published",
                planned.name, planned.keys[k]
            ));
        }
    }
    let Some(task) = manifest.tasks.get(task) else {
        return Check::Failed(format!("task `{task}` is gone from the manifest"));
    };
    for key in keys {
        match crate::exec::sensed::check(manifest, warehouse, task, key, "serve") {
            crate::exec::readiness::Readiness::Ready => {}
            crate::exec::readiness::Readiness::NotYet(not_ready) => {
                return Check::External(not_ready.why)
            }
            crate::exec::readiness::Readiness::Failed(failure) => {
                return Check::Failed(failure.why)
            }
        }
    }
    Check::Ready
}

/// One instance of a lane, named for the run.
struct LaneInstance {
    instance: Instance,
    task: String,
    key: String,
    keys: Vec<String>,
    timed: bool,
    why: String,
}

/// How many claims a lane makes at once.
const CLAIMERS: usize = 8;

/// A claim's outcome: won, and what the lane says of it (a word and its
/// tail) when it is not a plain win.
type Claim = (bool, Option<(&'static str, String)>);

/// What a lane's thread needs.
struct Lane {
    id: u64,
    manifest: Arc<Manifest>,
    warehouse: Warehouse,
    say: Say,
    run_id: String,
    settings: exec::Settings,
    tx: mpsc::Sender<Wake>,
    force: bool,
}

impl Lane {
    /// Claims each instance, runs those it won (a run per partition key:
    /// instances of one key in one run, so an upstream publishes before
    /// its downstream reads), then says the lane ended.
    fn run(self, work: &[LaneInstance]) {
        let mut groups: BTreeMap<(bool, Vec<String>), Vec<String>> = BTreeMap::new();
        for (i, claimed) in work.iter().zip(self.claim_all(work)) {
            let Some((won, said)) = claimed else {
                continue;
            };
            if let Some((word, tail)) = said {
                self.say.say(word, &i.task, &i.key, &tail);
            }
            if won {
                self.say
                    .say("START", &i.task, &i.key, &format!(" ({})", i.why));
                // Time keys first: a static or unpartitioned task reads
                // what the periods' runs publish.
                groups
                    .entry((!i.timed, i.keys.clone()))
                    .or_default()
                    .push(i.task.clone());
            }
        }
        let mut published: Vec<String> = Vec::new();
        let mut interrupted = false;
        for ((_, keys), tasks) in groups {
            if interrupted || exec::interrupt::requested().is_some() {
                interrupted = true;
                break;
            }
            let (p, stopped) = self.run_group(keys, &tasks);
            for t in p {
                if !published.contains(&t) {
                    published.push(t);
                }
            }
            interrupted |= stopped;
        }
        let _ = self.tx.send(Wake::Input(Input::Finished {
            lane: self.id,
            published,
            interrupted,
            now: crate::clock::now(),
        }));
    }

    /// Claims every instance of the lane, up to [`CLAIMERS`] at once, in
    /// the lane's order: each claim waits on its own fsyncs, which the
    /// filesystem commits together when they come together (one by one, a
    /// lane of 100 tasks started its run 0.19 s after its period ended).
    /// `None` for an instance not claimed because a stop was asked.
    fn claim_all(&self, work: &[LaneInstance]) -> Vec<Option<Claim>> {
        // Nothing is claimed once a stop is asked: a claim is a promise to
        // run it.
        let claim = |i: &LaneInstance| {
            exec::interrupt::requested()
                .is_none()
                .then(|| self.claim(i))
        };
        if work.len() < 2 {
            return work.iter().map(claim).collect();
        }
        let per_thread = work.len().div_ceil(CLAIMERS);
        let claimed: Vec<Option<Claim>> = std::thread::scope(|scope| {
            let claimers: Vec<_> = work
                .chunks(per_thread)
                .map(|chunk| scope.spawn(move || chunk.iter().map(claim).collect::<Vec<_>>()))
                .collect();
            claimers
                .into_iter()
                .flat_map(|c| c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        claimed
    }

    /// Claims an instance for this serve: whether it won (`false` when
    /// another live engine runs it), and what to say when it did not.
    fn claim(&self, i: &LaneInstance) -> Claim {
        let claim = watch::mine(&self.run_id);
        let (word, tail, won) =
            match record::claim_or_take_over(&self.warehouse, &i.task, &i.key, &claim, watch::dead)
            {
                Ok(record::Claimed::Won) => return (true, None),
                // Its dead claimer, or whoever took it over from it, may
                // have recorded it MISSED (a first claim cannot follow one:
                // its recorder claims first).
                Ok(record::Claimed::TookOver(other))
                    if record::is_missed(&self.warehouse, &i.task, &i.key).unwrap_or(false) =>
                {
                    (
                        "SKIP",
                        format!(
                            ": engine {} that claimed it is dead, and it was recorded MISSED",
                            other.engine
                        ),
                        false,
                    )
                }
                // Its claimer died on this host before publishing: the
                // fencing makes taking it over safe, and the takeover record
                // makes this serve the only one that does.
                Ok(record::Claimed::TookOver(other)) => (
                    "TAKEOVER",
                    format!(": engine {} that claimed it is dead", other.engine),
                    true,
                ),
                Ok(record::Claimed::Held(other)) => {
                    // Watched by this serve until it is settled: the shared
                    // progress must not pass it while its claimer may die.
                    let _ = self.tx.send(Wake::Input(Input::ClaimedElsewhere {
                        instance: i.instance.clone(),
                        claimer: other.engine.clone(),
                        again_at: crate::clock::now() + watch::WATCH_EVERY,
                    }));
                    (
                        "CLAIMED",
                        format!(": engine {} runs it (serve {})", other.engine, other.run_id),
                        false,
                    )
                }
                Err(e) => (
                    "FAILED",
                    format!(": cannot claim it: {}", exec::chain(&e)),
                    false,
                ),
            };
        (won, Some((word, tail)))
    }

    /// One run over `keys` of `tasks`: the tasks that published, and
    /// whether a stop interrupted it. Each publication is reported as it
    /// happens, so what reads it is due without waiting for the lane.
    fn run_group(&self, keys: Vec<String>, tasks: &[String]) -> (Vec<String>, bool) {
        let options = RunOptions {
            scope: Scope::Partitions(keys),
            tasks: tasks.to_vec(),
            force: self.force,
            resume_since: None,
            run_id: None,
            seed: None,
            allow_uncertified: false,
            // Readiness was asked before the lane started.
            wait: None,
            settings: self.settings.clone(),
            signed: None,
        };
        let (tx, lane) = (self.tx.clone(), self.id);
        let observe: crate::events::Observer = Box::new(move |e| {
            if e.state == State::Published {
                if let Some(task) = &e.task {
                    let _ = tx.send(Wake::Input(Input::Published {
                        task: task.clone(),
                        lane,
                        now: crate::clock::now(),
                    }));
                }
            }
        });
        let mut published = Vec::new();
        let mut interrupted = false;
        match crate::session::run(&self.manifest, &options, Some(observe)) {
            Ok(summary) => {
                for warning in &summary.warnings {
                    self.say.say("WARN", "", "", &format!(": {warning}"));
                }
                for (task, partition, result) in &summary.instances {
                    if *result == InstanceResult::Published && !published.contains(task) {
                        published.push(task.clone());
                    }
                    interrupted |= matches!(result, InstanceResult::Interrupted(_));
                    let tail = format!(" {} (run {})", result_word(result), summary.run_id);
                    self.say.say("DONE", task, partition, &tail);
                }
            }
            Err(e) => {
                let tail = format!(
                    " {}: the run could not start: {}",
                    tasks.join(", "),
                    exec::chain(&e)
                );
                self.say.say("FAILED", "", "", &tail);
            }
        }
        (published, interrupted)
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

/// Serves one manifest until a stop signal arrives on `inbox` (with what
/// its own threads report, through `tx`); its runs go with `settings`,
/// its decisions are logged in `format`.
pub fn serve_one(
    manifest: Manifest,
    (tx, inbox): (mpsc::Sender<Wake>, &mpsc::Receiver<Wake>),
    loader: std::sync::Arc<Loader>,
    settings: &exec::Settings,
    format: LogFormat,
) -> Ended {
    let mut served = match open(manifest, loader, settings, tx, format) {
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
    // Serve's clock beside the event's real time: a pinned or offset clock
    // (WEIR_NOW, WEIR_CLOCK_OFFSET) maps onto real time from this pair.
    let clock = jiff::Timestamp::from_millisecond(crate::clock::now_ms())
        .map(|t| format!("{t:.3}"))
        .unwrap_or_default();
    let _ = served.emit(
        State::RunStarted,
        Event::default()
            .detail(format!("weir serve: {} tasks", served.manifest.tasks.len()))
            .data(serde_json::json!({ "clock": clock })),
    );
    let tail = format!(
        " {} tasks, warehouse {}, events {run_id}",
        served.manifest.tasks.len(),
        served.manifest.pipeline.location()
    );
    served.say.say("SERVE", "", "", &tail);
    let (stopped, signal) = serve_until_stopped(&mut served, inbox);
    finish(&mut served, stopped, signal)
}

/// Opens the warehouse, the stored progress and serve's event log, and
/// starts the notifier.
fn open(
    manifest: Manifest,
    loader: std::sync::Arc<Loader>,
    settings: &exec::Settings,
    tx: mpsc::Sender<Wake>,
    format: LogFormat,
) -> Result<Served, ServeError> {
    let warehouse = match Warehouse::open_for(&manifest.pipeline) {
        Ok(w) => w,
        Err(e) => return Err(ServeError::Warehouse { cause: e.into() }),
    };
    let specs = specs(&manifest);
    let stored = stored_progress(&warehouse, &specs)?;
    let resolve_upto = specs
        .iter()
        .zip(&stored)
        .filter_map(|(spec, s)| s.map(|(_, newest)| (spec.name.clone(), newest)))
        .collect();
    let run_id = exec::new_run_id().replacen("run-", "serve-", 1);
    let log = match EventLog::open_in(&warehouse.events(), &run_id) {
        Ok(l) => l,
        Err(cause) => return Err(ServeError::OpenLog { cause }),
    };
    let notifier = crate::notify::Notifier::start(&manifest, &warehouse, &run_id, &settings.faults);
    let done = stored
        .into_iter()
        .map(|s| s.map(|(done, _)| done))
        .collect();
    Ok(Served {
        machine: Machine::new(specs, done),
        say: Say {
            pipeline: manifest.pipeline.name.clone(),
            format,
        },
        manifest: Arc::new(manifest),
        warehouse,
        log,
        run_id,
        loader,
        settings: settings.clone(),
        checks: HashMap::new(),
        waiting: HashMap::new(),
        resolve_upto,
        notifier,
        tx,
        skew: Skew::default(),
        idle: None,
        late: std::collections::HashSet::new(),
        disk: crate::store::DiskFullPause::default(),
    })
}

/// Drives the machine, idling until the next wake-up or anything on its
/// channel, until it stops: whether attempts were stopped, or why serve
/// could not go on, and the stop signal.
fn serve_until_stopped(
    served: &mut Served,
    inbox: &mpsc::Receiver<Wake>,
) -> (Result<bool, ServeError>, Option<exec::interrupt::Signal>) {
    let mut signal = None;
    let mut got: Vec<Wake> = Vec::new();
    let mut stopping = false;
    let stopped = 'serve: loop {
        for wake in got.drain(..) {
            let input = match wake {
                Wake::Signal(Signal::Stop(s)) => {
                    signal = Some(s);
                    stopping = true;
                    let tail = format!(" on {}: admitting nothing more", s.name());
                    served.say.say("STOP", "", "", &tail);
                    Input::Stop
                }
                Wake::Signal(Signal::Reload) => {
                    if let Err(e) = served.reload() {
                        break 'serve Err(e);
                    }
                    continue;
                }
                Wake::Input(input) => input,
                Wake::Checked(i, check) => served.answer(i, check),
            };
            match served.drive(input) {
                Ok(Some(stopped)) => break 'serve Ok(stopped),
                Ok(None) => {}
                Err(e) => break 'serve Err(e),
            }
        }
        // What is ready starts and what is due becomes due, only while
        // this engine's clock agrees with the warehouse's.
        let agrees = stopping || served.clock_agrees();
        if agrees {
            match served.drive(Input::Clock(crate::clock::now())) {
                Ok(Some(stopped)) => break Ok(stopped),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
        }
        let skewed_recheck = crate::clock::now() + SKEW_RECHECK_SKEWED.as_secs() as i64;
        let wake = match agrees {
            false => Some(skewed_recheck),
            true => served.idle.flatten().map(|(at, _)| at),
        };
        // Blocked on one channel, the next wake-up as the timeout; then
        // everything else already there, so answers that came together
        // start together.
        let first = match wake {
            Some(t) => {
                let ms = (t * 1000 - crate::clock::now_ms()).max(0);
                inbox.recv_timeout(std::time::Duration::from_millis(ms as u64))
            }
            None => inbox
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match first {
            Ok(w) => got.push(w),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                got.push(Wake::Signal(Signal::Stop(exec::interrupt::Signal::Term)))
            }
        }
        got.extend(inbox.try_iter());
    };
    (stopped, signal)
}

/// Says RUN_FINISHED, flushes the notifier and the log, and says why
/// serve ended.
fn finish(
    served: &mut Served,
    stopped: Result<bool, ServeError>,
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
    let word = match (&error, stopped) {
        (Some(_), _) => "EXIT: serve could not go on",
        (None, true) => "EXIT: running attempts were stopped",
        (None, false) => "EXIT",
    };
    served.say.say(word, "", "", "");
    Ended {
        stopped,
        signal,
        error,
    }
}

/// Serves every manifest, each on its own thread, until SIGTERM or
/// SIGINT; SIGHUP reloads them. Returns each one's end, in order. Every
/// run goes with `settings`.
pub fn serve(
    manifests: Vec<Manifest>,
    loader: &std::sync::Arc<Loader>,
    settings: &exec::Settings,
    format: LogFormat,
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
        senders.push(tx.clone());
        receivers.push((tx, rx));
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
                    let _ = tx.send(Wake::Signal(signal));
                }
            }
        })?;
    let ends = std::thread::scope(|scope| {
        let threads: Vec<_> = manifests
            .into_iter()
            .zip(receivers)
            .map(|(m, (tx, rx))| {
                let loader = std::sync::Arc::clone(loader);
                scope.spawn(move || serve_one(m, (tx, &rx), loader, settings, format))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| Ended {
                    stopped: false,
                    signal: None,
                    error: Some(ServeError::Panicked),
                })
            })
            .collect::<Vec<_>>()
    });
    handle.close();
    let _ = forward.join();
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{Grain, TimeScheme, Zone};

    fn minutes(every: u32) -> Trigger {
        let probe = TimeScheme::probe(Grain::Minutely(every), Zone::utc(), "2026-09-20T00:00");
        let start = probe.parse("2026-09-20T00:00").unwrap();
        Trigger::Period {
            scheme: probe.with_range(start, None),
            delay: 0,
        }
    }

    const FAN_IN: &str = r#"
[pipeline]
name = "fan"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[partitions.day]
kind = "daily"
start = "2026-09-20"

[tasks.up]
command = ["true"]
partitioned_by = "hour"
output = { dataset = "hours", grain = ["hour"] }

[tasks.day]
command = ["true"]
inputs = ["hours"]
partitioned_by = "day"
output = { dataset = "days", grain = ["day"] }
"#;

    // Serve waited for an upstream partition an operator had declared
    // missing with `weir accept`: an accepted gap is settled, as for `weir
    // run`, so a fan-in downstream does not wait for it.
    #[test]
    fn an_accepted_upstream_gap_is_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        let manifest = Manifest::parse("m.toml", FAN_IN, &path).unwrap();
        let warehouse = Warehouse::open(&dir.path().join("wh")).unwrap();
        let day = ["2026-09-20".to_string()];
        let waits = check_inputs(&manifest, &warehouse, "day", &day);
        assert!(
            matches!(&waits, Check::Upstream(why) if why.contains("`up`")),
            "{waits:?}"
        );
        for h in 0..24 {
            let mark = crate::store::marks::InstanceMark {
                mark: crate::store::marks::Mark::Accepted,
                note: Some("the feed had no data".into()),
                ..crate::store::marks::unreadable(
                    "up",
                    &format!("2026-09-20T{h:02}"),
                    String::new(),
                )
            };
            crate::store::marks::write(&warehouse, &mark).unwrap();
        }
        assert_eq!(
            check_inputs(&manifest, &warehouse, "day", &day),
            Check::Ready
        );
    }

    // An ordinal counted under `every = 1` read under `every = 5` would be a
    // period decades away: the progress record names the whole scheme, so a
    // changed `every` starts the task afresh.
    #[test]
    fn a_changed_every_does_not_carry_progress_over() {
        let one = trigger_text(&minutes(1));
        let five = trigger_text(&minutes(5));
        assert_ne!(one, five);
        assert!(five.contains("every 5 minutes"), "{five}");
    }
}
