//! Delivering the outbox: each pending notification POSTed (or piped to a
//! command) with its `Idempotency-Key`, a few tries with backoff, then
//! marked delivered. Nothing here waits on a target for the engine: a run's
//! sender is a thread it leaves after [`DRAIN`], and a target that failed a
//! notification's every try is not tried again by the same process (what it
//! did not get stays pending for the next run, `weir serve` or
//! `weir notify --flush`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::{Delivered, Notification, Outbox};
use crate::events::{Event, EventLog, State};
use crate::exec::fault::{Faults, Point};
use crate::http::ResolvedEndpoint;
use crate::manifest::{Manifest, NotifySink};
use crate::store::Warehouse;

/// Tries per notification in one process.
pub const TRIES: u32 = 3;
/// The first retry's delay; it doubles.
pub const BACKOFF: Duration = Duration::from_millis(250);
/// How long a run waits at its end for notifications still being sent.
pub const DRAIN: Duration = Duration::from_secs(10);
/// How long a `command` target may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What one process delivered, per target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlushReport {
    /// Target → its deliveries.
    pub targets: BTreeMap<String, TargetReport>,
    /// Set when the run ended before the sender did.
    pub unfinished: bool,
}

impl FlushReport {
    /// One line per target that did not get everything, and one if the
    /// sender was still busy.
    pub fn warnings(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .targets
            .iter()
            .filter(|(_, t)| t.failed > 0)
            .map(|(name, t)| {
                format!(
                    "{} {} not delivered to `{name}`: {}; {} in the outbox (`weir notify --flush` sends {})",
                    t.failed,
                    if t.failed == 1 { "notification" } else { "notifications" },
                    t.last_error.as_deref().unwrap_or("unknown error"),
                    if t.failed == 1 { "it stays" } else { "they stay" },
                    if t.failed == 1 { "it" } else { "them" },
                )
            })
            .collect();
        if self.unfinished {
            lines.push(format!(
                "still sending after {} s; what is not delivered stays in the outbox (`weir notify --flush` sends it)",
                DRAIN.as_secs()
            ));
        }
        lines
    }
}

/// Deliveries to one target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TargetReport {
    /// Delivered now.
    pub delivered: usize,
    /// Not delivered (still pending).
    pub failed: usize,
    /// Why the last one failed (secrets and URL credentials redacted).
    pub last_error: Option<String>,
}

/// Why a notification was not delivered to a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// The notification does not serialise.
    #[error("{0}")]
    Encode(String),
    /// A target the manifest does not declare.
    #[error("`{target}` is not a target of the manifest")]
    UnknownTarget {
        /// The target's name.
        target: String,
    },
    /// The target's URL or headers could not be resolved (a secret
    /// missing), or the POST failed; secrets redacted.
    #[error("{0}")]
    Http(String),
    /// An injected fault (`WEIR_FAULT=notify_deliver…`).
    #[error("{0}")]
    Fault(String),
    /// A `command` target did not succeed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// An earlier try in this process failed, so this one was not made.
    #[error("not tried again by this process: {why}")]
    NotRetried {
        /// The earlier failure.
        why: String,
    },
}

/// Why a `command` target did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CommandError {
    /// `command = []`.
    #[error("the command is empty")]
    Empty,
    /// Its environment could not be built (a referenced secret missing).
    #[error("cannot build the environment of `{program}`: {why}")]
    Environment {
        /// The program.
        program: String,
        /// Why not.
        why: String,
    },
    /// It exited non-zero; `tail` is its last output line (redacted).
    #[error("`{program}` exit status: {code}{}", with_tail(tail))]
    Exit {
        /// The program.
        program: String,
        /// Its exit code.
        code: i32,
        /// Its last output line, redacted, at most 200 characters.
        tail: String,
    },
    /// A signal ended it.
    #[error("`{program}` signal: {signal}{}", with_tail(tail))]
    Signal {
        /// The program.
        program: String,
        /// The signal.
        signal: i32,
        /// Its last output line, redacted, at most 200 characters.
        tail: String,
    },
    /// Stopped at [`COMMAND_TIMEOUT`].
    #[error("`{program}` did not finish within {secs} s")]
    Timeout {
        /// The program.
        program: String,
        /// The timeout.
        secs: u64,
    },
    /// It could not be started.
    #[error("cannot start {why}")]
    Spawn {
        /// Why not.
        why: String,
    },
    /// Any other ending, as the launcher describes it.
    #[error("`{program}` {ending}")]
    Other {
        /// The program.
        program: String,
        /// The ending.
        ending: String,
    },
}

/// `: tail`, or nothing when there is no output.
fn with_tail(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    }
}

enum Endpoint {
    Http(Result<ResolvedEndpoint, crate::http::HeaderError>),
    Command(Vec<String>, Option<crate::manifest::EnvSpec>),
}

/// Delivers notifications of the manifest's targets, one at a time.
struct Courier {
    outbox: Outbox,
    targets: HashMap<String, Endpoint>,
    dir: PathBuf,
    /// What a command target without `env` does not inherit (`env::withheld`).
    withheld: Vec<String>,
    /// The run (or flush) id recorded in delivered markers and events.
    by: String,
    log: Option<EventLog>,
    faults: Faults,
    /// Targets that failed every try of a notification in this process.
    down: HashMap<String, String>,
    /// (target, key) handled in this process.
    done: HashSet<(String, String)>,
    report: FlushReport,
}

impl Courier {
    fn new(manifest: &Manifest, warehouse: &Warehouse, by: &str, faults: &Faults) -> Courier {
        let targets = manifest
            .notify
            .values()
            .map(|t| {
                let endpoint = match &t.sink {
                    NotifySink::Http(e) => Endpoint::Http(crate::http::resolve(e, &manifest.dir)),
                    NotifySink::Command(argv) => Endpoint::Command(argv.clone(), t.env.clone()),
                };
                (t.name.clone(), endpoint)
            })
            .collect();
        let log = EventLog::open_in(&warehouse.events(), by)
            .map_err(|e| tracing::warn!("notify: cannot open the event log of {by}: {e}"))
            .ok();
        Courier {
            outbox: Outbox::new(std::sync::Arc::clone(warehouse.backend())),
            targets,
            dir: manifest.dir.clone(),
            withheld: crate::exec::env::withheld(manifest),
            by: by.to_owned(),
            log,
            faults: faults.clone(),
            down: HashMap::new(),
            done: HashSet::new(),
            report: FlushReport::default(),
        }
    }

    /// Everything pending for the manifest's targets.
    fn everything(&mut self) {
        let mut names: Vec<String> = self.targets.keys().cloned().collect();
        names.sort();
        for target in names {
            match self.outbox.pending_keys(&target) {
                Ok(keys) => {
                    for key in keys {
                        self.deliver(&target, &key);
                    }
                }
                Err(e) => tracing::warn!(
                    "notify: cannot list the outbox of `{target}`: {}",
                    crate::store::chain(&e)
                ),
            }
        }
    }

    fn deliver(&mut self, target: &str, key: &str) {
        if !self.done.insert((target.to_owned(), key.to_owned())) {
            return;
        }
        let store_error = |e: crate::store::StoreError| {
            tracing::warn!(
                "notify: outbox of `{target}`, notification {key}: {}",
                crate::store::chain(&e)
            );
        };
        // Delivered by another process since it was listed or written.
        match self.outbox.delivered(target, key) {
            Ok(Some(_)) => {
                let _ = self.outbox.drop_pending(target, key).map_err(store_error);
                return;
            }
            Ok(None) => {}
            Err(e) => return store_error(e),
        }
        let notification = match self.outbox.pending(target, key) {
            Ok(Some(n)) => n,
            Ok(None) => return,
            Err(e) => return store_error(e),
        };
        let (result, tries) = match self.down.get(target) {
            Some(why) => (Err(SendError::NotRetried { why: why.clone() }), 0),
            None => self.send(target, &notification),
        };
        let result = result.map_err(|e| e.to_string());
        let entry = self.report.targets.entry(target.to_owned()).or_default();
        match result {
            Ok(()) => {
                entry.delivered += 1;
                let delivered = Delivered {
                    at: crate::clock::now_rfc3339(),
                    by: self.by.clone(),
                    tries,
                };
                if let Err(e) = self.outbox.mark_delivered(target, key, &delivered) {
                    // Delivered but not marked: it may be sent again, with its key.
                    store_error(e);
                }
                self.emit(
                    State::Notified,
                    &notification,
                    target,
                    format!(
                        "{} notification delivered to `{target}` (key {key}, {tries} {})",
                        notification.event.as_str(),
                        if tries == 1 { "try" } else { "tries" }
                    ),
                    tries,
                );
            }
            Err(why) => {
                entry.failed += 1;
                // The target's own error, not "not tried again".
                if tries > 0 || entry.last_error.is_none() {
                    entry.last_error = Some(why.clone());
                }
                if tries > 0 {
                    self.down.insert(target.to_owned(), why.clone());
                }
                // What was tried, and this run's own facts, are events; a
                // backlog not tried again behind a target that is down is
                // counted, not logged line by line in every run.
                if tries == 0 && notification.run_id != self.by {
                    return;
                }
                self.emit(
                    State::NotifyFailed,
                    &notification,
                    target,
                    format!(
                        "{} notification not delivered to `{target}` (key {key}): {why}; it stays in the outbox",
                        notification.event.as_str()
                    ),
                    tries,
                );
            }
        }
    }

    /// Sends with retries; the outcome and the tries made.
    fn send(&self, target: &str, n: &Notification) -> (Result<(), SendError>, u32) {
        let body = match serde_json::to_string(n) {
            Ok(b) => b,
            Err(e) => return (Err(SendError::Encode(e.to_string())), 0),
        };
        let Some(endpoint) = self.targets.get(target) else {
            let target = target.to_string();
            return (Err(SendError::UnknownTarget { target }), 0);
        };
        let mut last = SendError::Fault(String::new());
        for attempt in 0..TRIES {
            if attempt > 0 {
                std::thread::sleep(crate::clock::doubling(BACKOFF, Duration::MAX, attempt - 1));
            }
            // Between the fact's durable record and its delivery: a crash here
            // leaves the notification pending, for the next process to send.
            if let Err(e) = self.faults.hit(Point::NotifyDeliver, &n.task, &n.partition) {
                last = SendError::Fault(e);
                continue;
            }
            let sent = match endpoint {
                Endpoint::Http(Ok(endpoint)) => {
                    crate::http::post_json(&endpoint.clone_with_key(&n.idempotency_key), &body)
                        .map_err(SendError::Http)
                }
                Endpoint::Http(Err(why)) => {
                    return (Err(SendError::Http(why.to_string())), attempt + 1)
                }
                Endpoint::Command(argv, env) => {
                    let command = CommandTarget {
                        argv,
                        dir: &self.dir,
                        env: env.as_ref(),
                        withheld: &self.withheld,
                        target,
                    };
                    run_command(&command, &body, &n.idempotency_key).map_err(SendError::from)
                }
            };
            match sent {
                Ok(()) => return (Ok(()), attempt + 1),
                Err(e) => last = e,
            }
        }
        (Err(last), TRIES)
    }

    fn emit(&self, state: State, n: &Notification, target: &str, detail: String, tries: u32) {
        let Some(log) = &self.log else { return };
        let event = Event::instance(&n.task, &n.partition)
            .detail(detail)
            .data(json!({
                "target": target,
                "idempotency_key": n.idempotency_key,
                "event": n.event,
                "tries": tries,
            }));
        if let Err(e) = log.emit(state, event) {
            tracing::warn!("notify: cannot append {}: {e}", state.as_str());
        }
    }

    fn close(self) -> FlushReport {
        if let Some(log) = &self.log {
            if let Err(e) = log.sync() {
                tracing::warn!("notify: cannot store the events of {}: {e}", self.by);
            }
        }
        self.report
    }
}

impl ResolvedEndpoint {
    /// A copy that also sends `Idempotency-Key: key`.
    fn clone_with_key(&self, key: &str) -> ResolvedEndpoint {
        let mut headers = self.headers.clone();
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case("Idempotency-Key"));
        headers.push(("Idempotency-Key".to_owned(), key.to_owned()));
        ResolvedEndpoint {
            url: self.url.clone(),
            headers,
            secrets: self.secrets.clone(),
        }
    }
}

/// A `command` target to run.
struct CommandTarget<'a> {
    argv: &'a [String],
    dir: &'a Path,
    env: Option<&'a crate::manifest::EnvSpec>,
    withheld: &'a [String],
    target: &'a str,
}

/// Runs a `command` target through the one launcher (`exec::command`: its
/// own process tree, stopped at [`COMMAND_TIMEOUT`] or on SIGINT/SIGTERM,
/// stderr bounded) with the JSON on stdin; Ok when it exits 0.
fn run_command(command: &CommandTarget<'_>, body: &str, key: &str) -> Result<(), CommandError> {
    use crate::exec::classify::Ending;
    let program = command.argv.first().ok_or(CommandError::Empty)?;
    let weir = vec![
        ("WEIR_IDEMPOTENCY_KEY".to_owned(), key.to_owned()),
        ("WEIR_NOTIFY_TARGET".to_owned(), command.target.to_owned()),
    ];
    let owner = format!("notify target `{}`", command.target);
    let env =
        crate::exec::env::for_command(command.dir, command.withheld, command.env, &owner, weir)
            .map_err(|e| CommandError::Environment {
                program: program.clone(),
                why: e.to_string(),
            })?;
    let (ending, captured) = crate::exec::command::run_captured(&crate::exec::command::Captive {
        argv: command.argv,
        cwd: command.dir,
        env: &env,
        stdin: body.as_bytes(),
        timeout: COMMAND_TIMEOUT,
    });
    let tail = || -> String {
        let text = env.secrets().redact(&captured.text());
        text.trim()
            .lines()
            .last()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect()
    };
    let program = program.clone();
    match ending {
        Ending::Success => Ok(()),
        Ending::Exit(code) => Err(CommandError::Exit {
            program,
            code,
            tail: tail(),
        }),
        Ending::Signal(signal) => Err(CommandError::Signal {
            program,
            signal,
            tail: tail(),
        }),
        Ending::Timeout => Err(CommandError::Timeout {
            program,
            secs: COMMAND_TIMEOUT.as_secs(),
        }),
        Ending::SpawnFailed(why) => Err(CommandError::Spawn { why }),
        other => Err(CommandError::Other {
            program,
            ending: crate::exec::command::describe(&other),
        }),
    }
}

/// A run's sender: a thread that first delivers what earlier runs left,
/// then this run's notifications as they are written.
pub struct Sender {
    queue: Mutex<Option<mpsc::Sender<(String, String)>>>,
    done: Mutex<Option<mpsc::Receiver<FlushReport>>>,
}

impl Sender {
    /// Starts the thread; deliveries are recorded as events of `run_id`.
    pub fn start(
        manifest: &Manifest,
        warehouse: &Warehouse,
        run_id: &str,
        faults: &Faults,
    ) -> Sender {
        let (queue, items) = mpsc::channel::<(String, String)>();
        let (done_tx, done) = mpsc::channel();
        let mut courier = Courier::new(manifest, warehouse, run_id, faults);
        let spawned = std::thread::Builder::new()
            .name("weir-notify".into())
            .spawn(move || {
                courier.everything();
                for (target, key) in items {
                    courier.deliver(&target, &key);
                }
                let _ = done_tx.send(courier.close());
            });
        if let Err(e) = spawned {
            // Everything stays pending for the next run or flush.
            tracing::warn!("notify: cannot start the sender: {e}");
        }
        Sender {
            queue: Mutex::new(Some(queue)),
            done: Mutex::new(Some(done)),
        }
    }

    /// A sender with no thread: what is queued stays pending in the outbox
    /// for whoever delivers it next.
    pub(super) fn idle() -> Sender {
        Sender {
            queue: Mutex::new(None),
            done: Mutex::new(None),
        }
    }

    /// Hands `key` of `target` (already pending in the outbox) to the thread.
    pub fn queue(&self, target: &str, key: &str) {
        if let Ok(q) = self.queue.lock() {
            if let Some(q) = q.as_ref() {
                let _ = q.send((target.to_owned(), key.to_owned()));
            }
        }
    }

    /// Waits at most [`DRAIN`] for the queue to be delivered.
    pub fn finish(&self) -> FlushReport {
        drop(self.queue.lock().ok().and_then(|mut q| q.take()));
        let done = self.done.lock().ok().and_then(|mut d| d.take());
        match done.map(|d| d.recv_timeout(DRAIN)) {
            Some(Ok(report)) => report,
            _ => FlushReport {
                unfinished: true,
                ..FlushReport::default()
            },
        }
    }
}

/// Delivers everything pending for the manifest's targets, now, on this
/// thread: `weir notify --flush`, and what `weir serve` calls between
/// runs. Deliveries are recorded as events of run `by`; `faults` arms
/// `notify_deliver`.
pub(super) fn flush(
    manifest: &Manifest,
    warehouse: &Warehouse,
    by: &str,
    faults: &Faults,
) -> FlushReport {
    let mut courier = Courier::new(manifest, warehouse, by, faults);
    courier.everything();
    courier.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str]) -> Result<(), CommandError> {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let command = CommandTarget {
            argv: &argv,
            dir: dir.path(),
            env: None,
            withheld: &[],
            target: "t",
        };
        run_command(&command, "{}", "k")
    }

    #[test]
    fn a_command_target_that_fails_says_how_with_its_last_line() {
        assert_eq!(run(&[]), Err(CommandError::Empty));
        assert_eq!(run(&["true"]), Ok(()));
        let failed = run(&["sh", "-c", "echo first; echo no route >&2; exit 3"]).unwrap_err();
        assert_eq!(
            failed,
            CommandError::Exit {
                program: "sh".into(),
                code: 3,
                tail: "no route".into()
            }
        );
        assert_eq!(failed.to_string(), "`sh` exit status: 3: no route");
        let quiet = run(&["sh", "-c", "exit 4"]).unwrap_err();
        assert_eq!(quiet.to_string(), "`sh` exit status: 4");
        assert!(matches!(
            run(&["/no/such/program"]),
            Err(CommandError::Spawn { .. })
        ));
    }
}
