//! Leases: telling a slow attempt from a dead one well enough to act, and
//! relying on fencing, not on the telling, for safety.
//!
//! ```text
//!  attempt starts ──► attempts/<t>/lease.json {engine, host, pid, heartbeat_at}
//!        │ renewed every `heartbeat` by the engine while the command runs
//!        ▼
//!  finished ──► lease.finished = true
//!
//!  another engine needing the partition looks at the newest token t:
//!    committed, finished, or no lease and old ──► go ahead
//!    lease fresh ──────────────────────────────► WAITING (up to timeout + lease timeout),
//!                                                 then use its publication or re-check
//!    lease expired, or its engine is dead ─────► UNKNOWN, claim claims/<t> (put-if-absent)
//!                                                 ──► TAKEN_OVER: relaunch with a token > t
//! ```
//!
//! A taken-over attempt that was only paused (a zombie) may still finish and
//! try to publish: its token is older than its successor's, so the commit log
//! refuses it (REJECTED_STALE). Leases are written without fsync: after a
//! machine crash a missing lease reads as "dead", which fencing makes safe.

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Context;
use crate::events::{Event, State};
use crate::manifest::Task;
use crate::store::{FencingToken, PartitionStore, TokenOwner};

/// A lease expires after this many missed heartbeats.
pub const MISSED_HEARTBEATS: u32 = 3;

/// Who holds an attempt, and when it last said so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// Random id of the engine process.
    pub engine_id: String,
    /// Its host.
    pub host: String,
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot (Linux), so a reused pid is not mistaken for it.
    pub pid_start: Option<u64>,
    /// Run.
    pub run_id: String,
    /// Task.
    pub task: String,
    /// Attempt number.
    pub attempt: u32,
    /// Token.
    pub token: u64,
    /// Last heartbeat, ms since the Unix epoch.
    pub heartbeat_ms: i64,
    /// Last heartbeat, RFC 3339.
    pub heartbeat_at: String,
    /// The lease is over when no heartbeat came for this long.
    pub timeout_ms: u64,
    /// The attempt ended (whatever its outcome).
    pub finished: bool,
    /// The task's process tag (`tree.rs`): an engine that takes over from a
    /// dead holder on this host stops the processes carrying it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_tag: Option<String>,
}

/// This engine process's identity.
pub struct EngineId {
    /// Random id.
    pub id: String,
    /// Host name.
    pub host: String,
    /// Process start time (Linux clock ticks since boot).
    pub pid_start: Option<u64>,
}

/// The identity of this process, made once.
pub fn engine() -> &'static EngineId {
    static ID: OnceLock<EngineId> = OnceLock::new();
    ID.get_or_init(|| EngineId {
        id: format!("{:016x}", fastrand::u64(..)),
        host: host_name(),
        pid_start: process_start(std::process::id()),
    })
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Field 22 of /proc/<pid>/stat: when the process started.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The lease timeout of a task.
pub fn timeout(task: &Task) -> Duration {
    task.heartbeat * MISSED_HEARTBEATS
}

fn path(attempt_dir: &Path) -> std::path::PathBuf {
    attempt_dir.join("lease.json")
}

/// Writes (renews) a lease: temp file + rename, so a reader never sees half
/// of one. No fsync: see the module doc.
pub fn write(attempt_dir: &Path, lease: &Lease) -> std::io::Result<()> {
    let tmp = attempt_dir.join(".lease.json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(lease).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, path(attempt_dir))
}

/// Reads a lease.
pub fn read(attempt_dir: &Path) -> Option<Lease> {
    serde_json::from_slice(&std::fs::read(path(attempt_dir)).ok()?).ok()
}

impl Lease {
    /// A fresh lease for an attempt of this engine.
    pub(crate) fn new(cx: &Context<'_>, task: &Task, attempt: u32, token: FencingToken) -> Lease {
        let me = engine();
        let mut lease = Lease {
            engine_id: me.id.clone(),
            host: me.host.clone(),
            pid: std::process::id(),
            pid_start: me.pid_start,
            run_id: cx.run_id.clone(),
            task: task.name.clone(),
            attempt,
            token: token.get(),
            heartbeat_ms: 0,
            heartbeat_at: String::new(),
            timeout_ms: u64::try_from(timeout(task).as_millis()).unwrap_or(u64::MAX),
            finished: false,
            process_tag: None,
        };
        lease.beat();
        lease
    }

    /// Stamps a heartbeat.
    pub fn beat(&mut self) {
        self.heartbeat_ms = now_ms();
        self.heartbeat_at = crate::clock::now_rfc3339();
    }

    /// Whether the holder is certainly gone: same host, and its pid is not
    /// the process that wrote the lease.
    fn holder_dead(&self) -> bool {
        if self.host != engine().host {
            return false;
        }
        match (process_start(self.pid), self.pid_start) {
            (None, _) => true,
            (Some(now), Some(then)) => now != then,
            (Some(_), None) => false,
        }
    }

    fn age_ms(&self) -> i64 {
        now_ms() - self.heartbeat_ms
    }
}

/// What the engine should do about an instance before launching it.
pub(crate) enum Guard {
    /// Nobody else is on it: launch.
    Proceed,
    /// Another engine published it while we waited.
    PublishedElsewhere(u64),
}

/// Waits for or takes over another engine's attempt on the same partition.
pub(crate) fn guard(cx: &Context<'_>, task: &Task, partition: &str, attempt: u32) -> Guard {
    let store = cx.warehouse.partition(&task.output.dataset, partition);
    let deadline = Instant::now() + task.timeout + timeout(task);
    let poll = task
        .heartbeat
        .min(Duration::from_millis(200))
        .max(Duration::from_millis(10));
    let mut waiting_for: Option<u64> = None;
    let mut reported_unknown: Option<u64> = None;
    loop {
        let Ok(Some(newest)) = store.latest_token() else {
            return Guard::Proceed;
        };
        let committed = store.latest().ok().flatten();
        if committed.as_ref().is_some_and(|r| r.token >= newest) {
            return match (waiting_for, committed) {
                (Some(_), Some(r)) => Guard::PublishedElsewhere(r.generation.get()),
                _ => Guard::Proceed,
            };
        }
        // This run's own earlier attempts have ended before it retries.
        if store
            .token_record(newest)
            .ok()
            .flatten()
            .is_some_and(|r| r.run_id == cx.run_id)
        {
            return Guard::Proceed;
        }
        let dir = store.attempt_dir(newest);
        let event = || Event::instance(&task.name, partition).attempt(attempt, Some(newest.get()));
        let Some(lease) = read(&dir) else {
            // Allocated but no lease: an engine between two steps, or one
            // that died there. The token record's age tells which.
            if token_age(&store, newest).is_some_and(|age| age < timeout(task))
                && Instant::now() < deadline
            {
                std::thread::sleep(poll);
                continue;
            }
            return Guard::Proceed;
        };
        if lease.finished {
            return Guard::Proceed;
        }
        let expired = lease.age_ms() > lease.timeout_ms as i64;
        let dead = lease.holder_dead();
        if !expired && !dead && Instant::now() < deadline {
            if waiting_for != Some(newest.get()) {
                waiting_for = Some(newest.get());
                cx.emit(
                    State::Waiting,
                    event()
                        .detail(format!(
                            "attempt {} (token {}) of run {} is live on {} pid {} (heartbeat {} ms ago); not launching a duplicate",
                            lease.attempt, lease.token, lease.run_id, lease.host, lease.pid, lease.age_ms()
                        ))
                        .data(json!({ "lease": lease })),
                );
            }
            std::thread::sleep(poll);
            continue;
        }
        let why = if dead {
            format!("its engine (pid {} on {}) is gone", lease.pid, lease.host)
        } else if expired {
            format!(
                "no heartbeat for {} ms (lease timeout {} ms)",
                lease.age_ms(),
                lease.timeout_ms
            )
        } else {
            "it outlived its timeout plus the lease timeout".to_string()
        };
        if reported_unknown == Some(newest.get()) {
            // Already reported; only the claim outcome below can change.
        } else {
            reported_unknown = Some(newest.get());
            cx.emit(
                State::Unknown,
                event()
                    .detail(format!(
                        "attempt {} (token {}) of run {} is unreachable: {why}",
                        lease.attempt, lease.token, lease.run_id
                    ))
                    .data(json!({ "lease": lease, "dead": dead, "expired": expired })),
            );
        }
        let claimant = TokenOwner {
            run_id: cx.run_id.clone(),
            task: task.name.clone(),
            attempt,
        };
        // A dead holder's task must not run beside its successor: its
        // command died with it (PDEATHSIG); stop what the command left.
        let stop_orphans = || {
            if let (true, Some(tag)) = (dead, lease.process_tag.as_deref()) {
                super::tree::stop_orphans(tag);
            }
        };
        match store.claim_takeover(newest, &claimant) {
            Ok(true) => {
                stop_orphans();
                cx.emit(
                    State::TakenOver,
                    event().detail(format!(
                        "relaunching with a newer token; if token {} wakes up, its publish will be refused",
                        newest
                    )),
                );
                return Guard::Proceed;
            }
            // Another engine claimed it and will allocate a newer token at
            // once; a claim that leads nowhere within a lease timeout was
            // made by an engine that died in between.
            Ok(false) => {
                waiting_for = Some(newest.get());
                let claim_age = store
                    .claim_record(newest)
                    .ok()
                    .flatten()
                    .and_then(|r| r.allocated_at.parse::<jiff::Timestamp>().ok())
                    .map(|at| {
                        Duration::from_millis(
                            u64::try_from(now_ms() - at.as_millisecond()).unwrap_or(0),
                        )
                    });
                if claim_age.is_none_or(|age| age > timeout(task)) || Instant::now() >= deadline {
                    stop_orphans();
                    cx.emit(
                        State::TakenOver,
                        event().detail(format!(
                            "the engine that claimed token {newest} never relaunched it; relaunching with a newer token"
                        )),
                    );
                    return Guard::Proceed;
                }
                std::thread::sleep(poll);
            }
            Err(_) => return Guard::Proceed,
        }
    }
}

fn token_age(store: &PartitionStore, token: FencingToken) -> Option<Duration> {
    let record = store.token_record(token).ok()??;
    let at: jiff::Timestamp = record.allocated_at.parse().ok()?;
    let ms = now_ms() - at.as_millisecond();
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Renews an attempt's lease on a background thread until dropped; on drop
/// the lease is marked finished.
pub(crate) struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Writes the lease and starts renewing it every `interval`.
    pub(crate) fn start(attempt_dir: &Path, mut lease: Lease, interval: Duration) -> Heartbeat {
        let dir = attempt_dir.to_path_buf();
        let _ = write(&dir, &lease);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(interval)
            {
                lease.beat();
                let _ = write(&dir, &lease);
            }
            lease.beat();
            lease.finished = true;
            let _ = write(&dir, &lease);
        });
        Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
