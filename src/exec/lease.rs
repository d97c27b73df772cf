//! Leases: telling a slow attempt from a dead one well enough to act, and
//! relying on fencing, not on the telling, for safety.
//!
//! ```text
//!  allocate token t ──► attempts/<t>/lease.json {engine, host, boot, pid ns, pid, beats}
//!        │ renewed every `heartbeat` by the engine from then on
//!        ▼
//!  guard: every token below t that is not committed ──┬─ finished ─────────────► ignore
//!                                                     ├─ live ────────────────► WAITING (up to
//!                                                     │     timeout + lease timeout), then re-check
//!                                                     └─ expired, or holder dead ► UNKNOWN, TAKEN_OVER
//!  none live below t ──► launch with t
//! ```
//!
//! The check and the claim are one step: the token is allocated (put-if-absent)
//! *before* the engine looks for other attempts, so of two engines that start
//! together the one with the higher token always sees the lower one and waits
//! for it; only the lowest live token launches. Its own earlier attempts
//! have finished leases, so a run never waits for itself, and two engines
//! given the same run id still tell each other apart by their engine ids.
//!
//! A lease's age is measured on the reader's own monotonic clock: the reader
//! notes when it first saw the lease's beat counter and calls the lease
//! expired only when the counter has not moved for the lease timeout. The
//! writer's wall clock (skewed ahead or behind) plays no part. A holder is
//! "certainly dead" only to a process on the same host, boot and PID
//! namespace that finds its pid gone or reused ([`Holder`]).
//!
//! A taken-over attempt that was only paused (a zombie) may still finish and
//! try to publish: its token is older than its successor's, so the commit log
//! refuses it (REJECTED_STALE). Leases are written without fsync: after a
//! machine crash a missing lease reads as "dead", which fencing makes safe.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Context;
use crate::events::{Event, State};
use crate::manifest::Task;
pub use crate::store::leases::Lease;
use crate::store::{FencingToken, Holder, PartitionStore, TokenOwner};

/// A lease expires after this many missed heartbeats.
pub const MISSED_HEARTBEATS: u32 = 3;

/// This engine process's identity.
pub fn engine() -> &'static Holder {
    Holder::current()
}

/// The lease timeout of a task.
pub fn timeout(task: &Task) -> Duration {
    task.heartbeat.saturating_mul(MISSED_HEARTBEATS)
}

impl Lease {
    /// A fresh lease for an attempt of this engine.
    pub(crate) fn new(cx: &Context<'_>, task: &Task, attempt: u32, token: FencingToken) -> Lease {
        let me = engine();
        let mut lease = Lease {
            engine_id: me.engine_id.clone(),
            host: me.host.clone(),
            pid: me.pid,
            pid_start: me.pid_start,
            boot_id: me.boot_id.clone(),
            pid_ns: me.pid_ns.clone(),
            run_id: cx.run_id.clone(),
            task: task.name.clone(),
            attempt,
            token: token.get(),
            beats: 0,
            heartbeat_ms: 0,
            heartbeat_at: String::new(),
            timeout_ms: u64::try_from(timeout(task).as_millis()).unwrap_or(u64::MAX),
            finished: false,
            process_tag: None,
            job_id: None,
        };
        lease.beat();
        lease
    }
}

/// What the engine should do about an instance before launching it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Guard {
    /// No other attempt is live: launch.
    Proceed,
    /// Another engine's attempt was live and has ended (or was given up on):
    /// the caller re-checks what is published before launching.
    Waited,
    /// weir was asked to stop while it waited: launch nothing.
    Interrupted(super::interrupt::Signal),
    /// A gone engine's scheduler job was waited for and completed: the
    /// caller re-checks what is published, then may adopt that attempt's
    /// output instead of running the command again (`Executor::adopt`).
    Adopt(FencingToken, String),
}

/// What the reader has seen of one lower token, on its own clock.
struct Watch {
    /// The lease's beat counter (`None`: no lease yet).
    seen: Option<(u64, i64)>,
    /// When `seen` last changed.
    since: Instant,
}

/// How a lower token looks now.
enum Other {
    /// Ended, committed or given up on: nothing to wait for.
    Done,
    /// Its holder is certainly gone, or its lease did not move for the lease timeout.
    Unreachable {
        lease: Option<Lease>,
        dead: bool,
        silent: Duration,
    },
    /// Someone is on it.
    Live(Option<Lease>, Duration),
}

/// Waits for, or takes over, other engines' attempts on the same partition
/// that hold tokens below `mine` (already allocated, its lease being renewed).
/// The first look is at what `mine`'s allocation saw (the newest record
/// after it was taken, the tokens it was chosen from: every token between
/// the two is there); each look after it reads the store again.
pub(crate) fn guard(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    attempt: u32,
    mine: &crate::store::Allocation,
) -> Guard {
    let mut first = Some((mine.latest.as_ref().map(|r| r.token), mine.below.clone()));
    let mine = mine.token;
    let store = cx.warehouse.partition(&task.output.dataset, partition);
    let lease_timeout = timeout(task);
    let deadline = crate::clock::instant_after(task.timeout.saturating_add(lease_timeout));
    let poll = task
        .heartbeat
        .min(Duration::from_millis(200))
        .max(Duration::from_millis(10));
    let mut watches: HashMap<u64, Watch> = HashMap::new();
    let mut waited_for: Option<u64> = None;
    let mut reported: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut adopt = None;
    loop {
        let (committed, tokens) = match first.take() {
            Some(seen) => seen,
            None => {
                let committed = store.latest().ok().flatten().map(|r| r.token);
                let Ok(tokens) = store.tokens() else {
                    return Guard::Proceed;
                };
                (committed, tokens)
            }
        };
        let lower: Vec<FencingToken> = tokens
            .into_iter()
            .filter(|t| *t < mine && committed.is_none_or(|c| *t > c))
            .collect();
        let (live, mut unreachable) = sort_lower(&store, &lower, &mut watches, lease_timeout);
        let event = |t: FencingToken| {
            Event::instance(&task.name, partition).attempt(attempt, Some(t.get()))
        };
        if let Some((t, lease, silent)) = live {
            if Instant::now() < deadline {
                if waited_for != Some(t.get()) {
                    waited_for = Some(t.get());
                    let waiting = waiting_event(event(t), t, lease.as_ref(), silent, mine);
                    cx.emit(State::Waiting, waiting);
                }
                std::thread::sleep(poll);
                if let Some(sig) = super::interrupt::requested() {
                    return Guard::Interrupted(sig);
                }
                continue;
            }
            unreachable.push((t, lease, false, silent));
        }
        for (t, lease, dead, silent) in unreachable {
            if !reported.insert(t.get()) {
                continue;
            }
            let expired = silent >= lease_timeout;
            let why = unreachable_why(&store, t, lease.as_ref(), dead, silent, lease_timeout);
            let unknown = unknown_event(event(t), t, lease.as_ref(), dead, expired, &why);
            cx.emit(State::Unknown, unknown);
            // The claim is evidence (gc collects what was taken over); which
            // engine relaunches is already decided by the token order.
            let claimant = TokenOwner {
                run_id: cx.run_id.clone(),
                task: task.name.clone(),
                attempt,
            };
            let job = await_cluster_job(cx, task, &store, t, lease.as_ref(), event(t), mine);
            if let Some((job, succeeded)) = job {
                waited_for = Some(t.get());
                if succeeded {
                    adopt = Some((t, job));
                }
            }
            claim_and_redact(cx, task, &store, t, &claimant);
            // A dead holder's task must not run beside its successor: its
            // command died with it (PDEATHSIG); stop what the command left.
            if dead {
                if let Some(tag) = lease.as_ref().and_then(|l| l.process_tag.as_deref()) {
                    crate::process::tree::stop_orphans(tag);
                }
            }
            cx.emit(
                State::TakenOver,
                event(t).detail(format!(
                    "relaunching with token {mine}; if token {t} wakes up, its publish will be refused"
                )),
            );
        }
        return if let Some((t, job)) = adopt {
            Guard::Adopt(t, job)
        } else if waited_for.is_some() {
            Guard::Waited
        } else {
            Guard::Proceed
        };
    }
}

/// Claims the takeover of `token`, and redacts the logs it left with the
/// secrets of `task` this engine can read (the same values that attempt was
/// given, unless they changed since): its engine died before it could, and
/// what the command printed of its secrets must not stay there for the
/// console, explain or the evidence kept. A log that cannot be redacted is
/// removed.
fn claim_and_redact(
    cx: &Context<'_>,
    task: &Task,
    store: &PartitionStore,
    token: FencingToken,
    claimant: &TokenOwner,
) {
    let _ = store.claim_takeover(token, claimant);
    let partition = store.partition();
    let secrets = crate::secrets::readable_secrets(cx.manifest, task);
    if !secrets.has_secrets() {
        return;
    }
    let dir = store.attempt_dir(token);
    for log in super::launch::LOGS {
        if let Err(e) = secrets.redact_file(&dir.join(log)) {
            let _ = std::fs::remove_file(dir.join(log));
            tracing::warn!(
                "{} {partition}: cannot redact {log} of token {token} ({e}); removed it",
                task.name
            );
        }
    }
}

/// A lower token someone is on: its lease (if written) and how long its
/// heartbeat has not moved.
type Sighting = (FencingToken, Option<Lease>, Duration);

/// A lower token nobody is on any more: its lease, whether its holder is
/// certainly dead, and how long its heartbeat has not moved.
type Lost = (FencingToken, Option<Lease>, bool, Duration);

/// Looks at the lower tokens, newest first: the newest live one (the one to
/// wait for) and every unreachable one (to take over).
fn sort_lower(
    store: &PartitionStore,
    lower: &[FencingToken],
    watches: &mut HashMap<u64, Watch>,
    lease_timeout: Duration,
) -> (Option<Sighting>, Vec<Lost>) {
    let mut live = None;
    let mut unreachable = Vec::new();
    for t in lower.iter().rev() {
        match look(store, *t, watches, lease_timeout) {
            Other::Done => {}
            Other::Live(lease, silent) => {
                live.get_or_insert((*t, lease, silent));
            }
            Other::Unreachable {
                lease,
                dead,
                silent,
            } => unreachable.push((*t, lease, dead, silent)),
        }
    }
    (live, unreachable)
}

/// The WAITING event for a live lower token.
fn waiting_event(
    event: Event,
    t: FencingToken,
    lease: Option<&Lease>,
    silent: Duration,
    mine: FencingToken,
) -> Event {
    let who = live_holder(lease, silent);
    event
        .detail(format!(
            "token {t} is live: {who}; not launching a duplicate"
        ))
        .data(json!({ "lease": lease, "mine": mine.get() }))
}

/// The UNKNOWN event for an unreachable lower token.
fn unknown_event(
    event: Event,
    t: FencingToken,
    lease: Option<&Lease>,
    dead: bool,
    expired: bool,
    why: &str,
) -> Event {
    let whose = lease.map_or_else(
        || format!("token {t} (no lease written)"),
        |l| format!("attempt {} (token {t}) of run {}", l.attempt, l.run_id),
    );
    event
        .detail(format!("{whose} is unreachable: {why}"))
        .data(json!({ "lease": lease, "dead": dead, "expired": expired }))
}

/// Who holds a live lower token, for the WAITING event.
fn live_holder(lease: Option<&Lease>, silent: Duration) -> String {
    lease.map_or_else(
        || "an engine that has not written its lease yet".to_string(),
        |l| {
            format!(
                "attempt {} of run {} on {} pid {} (engine {}; heartbeat seen {} ago)",
                l.attempt,
                l.run_id,
                l.host,
                l.pid,
                l.engine_id,
                crate::manifest::duration::human(silent)
            )
        },
    )
}

/// Why a lower token is unreachable, for the UNKNOWN event.
fn unreachable_why(
    store: &PartitionStore,
    t: FencingToken,
    lease: Option<&Lease>,
    dead: bool,
    silent: Duration,
    lease_timeout: Duration,
) -> String {
    if dead {
        let h = lease
            .map(Lease::holder)
            .or_else(|| store.token_record(t).ok().flatten().and_then(|r| r.holder));
        h.map_or_else(
            || "its engine is gone".to_string(),
            |h| format!("its engine (pid {} on {}) is gone", h.pid, h.host),
        )
    } else if silent >= lease_timeout {
        format!(
            "no heartbeat for {} by this engine's clock (lease timeout {})",
            crate::manifest::duration::human(silent),
            crate::manifest::duration::human(lease_timeout)
        )
    } else {
        "it outlived its timeout plus the lease timeout".to_string()
    }
}

/// Waits for an unreachable token's job on its executor's scheduler, if it
/// has one: the job and whether it succeeded (its output may be adopted).
fn await_cluster_job(
    cx: &Context<'_>,
    task: &Task,
    store: &PartitionStore,
    t: FencingToken,
    lease: Option<&Lease>,
    event: Event,
    mine: FencingToken,
) -> Option<(String, bool)> {
    // Its job outlives its engine on the cluster: wait for it (a
    // duplicate must not run beside it), cancelling it only if it
    // outlives its own time limit; a completed job's output may be
    // adopted.
    let executor = cx.executor(task);
    let job = lease
        .and_then(|l| l.job_id.clone())
        .or_else(|| executor.find_job(&store.attempt_dir(t)))?;
    // Told once: the executor calls it at most once.
    let mut event = Some(event);
    let mut waiting = || {
        let Some(event) = event.take() else {
            return;
        };
        cx.emit(
            State::Waiting,
            event
                .detail(format!(
                    "{} of token {t} still runs on the cluster; waiting for it, not launching a duplicate",
                    executor.job_name(&job)
                ))
                .data(json!({ "job_id": job, "mine": mine.get() })),
        )
    };
    let end = executor.await_job(&job, task.timeout + timeout(task), &mut waiting);
    let succeeded = end == Some(super::classify::Ending::Success);
    Some((job, succeeded))
}

/// Looks at one lower token's lease (or its absence) and updates its watch.
fn look(
    store: &PartitionStore,
    t: FencingToken,
    watches: &mut HashMap<u64, Watch>,
    lease_timeout: Duration,
) -> Other {
    let lease = store.read_lease(t);
    if lease.as_ref().is_some_and(|l| l.finished) {
        return Other::Done;
    }
    let record = store.token_record(t).ok().flatten();
    // Operators' tokens (rollback: attempt 0) never run anything.
    if lease.is_none() && record.as_ref().is_some_and(|r| r.attempt == 0) {
        return Other::Done;
    }
    // Before its first renewal an attempt on an object store has no
    // lease.json: its token record carries the first lease.
    let lease = lease.or_else(|| record.as_ref().and_then(|r| Lease::claimed(t.get(), r)));
    let seen = lease.as_ref().map(|l| (l.beats, l.heartbeat_ms));
    let now = Instant::now();
    let watch = watches.entry(t.get()).or_insert(Watch { seen, since: now });
    if watch.seen != seen {
        watch.seen = seen;
        watch.since = now;
    }
    let silent = now.duration_since(watch.since);
    let dead = match &lease {
        Some(l) => l.holder_dead(),
        None => record
            .and_then(|r| r.holder)
            .is_some_and(|h| h.certainly_dead()),
    };
    let limit = lease
        .as_ref()
        .map_or(lease_timeout, |l| Duration::from_millis(l.timeout_ms));
    if dead || silent >= limit {
        Other::Unreachable {
            lease,
            dead,
            silent,
        }
    } else {
        Other::Live(lease, silent)
    }
}

/// Renews an attempt's lease on the store's timer thread until dropped; on
/// drop the lease is marked finished, unless the attempt committed.
pub(crate) struct Heartbeat {
    store: PartitionStore,
    token: FencingToken,
    lease: std::sync::Arc<std::sync::Mutex<Lease>>,
    /// The attempt's token is in the commit log: it ended before its
    /// commit, which tells every reader so (the guard looks only above the
    /// committed token; gc keeps a committed attempt by its generation), so
    /// the lease is not rewritten to say it once more.
    committed: bool,
    /// `None` if the timer thread could not be started: the lease is then
    /// written at start and end only, and may look expired meanwhile (an
    /// engine that takes over is fenced by the token anyway).
    beats: Option<super::timer::Handle>,
}

impl Heartbeat {
    /// Writes the lease (on a local disk; on an object store the token
    /// record holds it until the first renewal) and starts renewing it
    /// every `interval`.
    pub(crate) fn start(
        store: &PartitionStore,
        token: FencingToken,
        lease: Lease,
        interval: Duration,
    ) -> Heartbeat {
        let store = store.clone();
        // On an object store the token record, written by the put-if-absent
        // that claimed the attempt, carries this first lease (holder,
        // process tag, timeout: `TokenRecord::with_lease`), which readers
        // take while there is no lease.json (`look`): a request less per
        // attempt. The first renewal comes within `interval`, below the
        // lease timeout, as each next one does. On a local disk a lease is
        // one cheap write, and tools that read it there (gc, tests) find it
        // at once (`PartitionStore::write_first_lease` knows which).
        let _ = store.write_first_lease(token, &lease);
        let lease = std::sync::Arc::new(std::sync::Mutex::new(lease));
        let beats = {
            let (store, lease) = (store.clone(), lease.clone());
            super::timer::schedule_store(
                interval,
                Box::new(move || {
                    let mut lease = lease.lock().unwrap_or_else(|p| p.into_inner());
                    lease.beat();
                    let _ = store.write_lease(token, &lease);
                    Some(interval)
                }),
            )
            .ok()
        };
        Heartbeat {
            store,
            token,
            lease,
            beats,
            committed: false,
        }
    }

    /// The attempt's generation is committed: its lease needs no last write.
    pub(crate) fn committed(&mut self) {
        self.committed = true;
    }

    fn lease(&self) -> std::sync::MutexGuard<'_, Lease> {
        self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Heartbeat {
    /// Records the scheduler job running the attempt in the lease, written
    /// at once: the job id is what a successor needs.
    pub(crate) fn set_job(&self, job_id: &str) {
        let mut lease = self.lease();
        lease.job_id = Some(job_id.to_string());
        lease.beat();
        let _ = self.store.write_lease(self.token, &lease);
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // No beat runs after this, so the last write is the finished lease.
        if let Some(beats) = self.beats.take() {
            beats.cancel();
        }
        if self.committed {
            return;
        }
        let mut lease = self.lease();
        lease.beat();
        lease.finished = true;
        let _ = self.store.write_lease(self.token, &lease);
    }
}
