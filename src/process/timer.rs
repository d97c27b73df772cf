//! Two threads for the timed work of every attempt: one for command
//! watchdogs (timeouts, stop requests), one for the store's timed writes
//! (lease heartbeats, pool slots given back).
//!
//! Each used to own a thread, two per attempt, started and joined for every
//! instance. A job here is a closure that runs on its thread when due and
//! says when it wants to run again; every other job of its thread waits for
//! it. Watchdog jobs are a `kill` and never wait for the network, so a store
//! that stalls (a request hanging until the S3 client's timeout) holds up
//! heartbeats only, never a timeout or a Ctrl-C ([`schedule_store`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// A job: runs when due; `Some(d)` runs it again `d` later, `None` ends it.
pub(crate) type Job = Box<dyn FnMut() -> Option<Duration> + Send>;

/// A job's slot: taken (emptied) when the job is cancelled or ends. Locked
/// while the job runs, so a cancel waits for a running job to finish.
type Slot = Arc<Mutex<Option<Job>>>;

struct State {
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    jobs: BTreeMap<u64, Slot>,
    next_id: u64,
}

/// One timer thread and its jobs.
struct Timers {
    name: &'static str,
    state: Mutex<State>,
    changed: Condvar,
    started: OnceLock<Result<(), std::io::ErrorKind>>,
}

impl Timers {
    const fn new(name: &'static str) -> Timers {
        Timers {
            name,
            state: Mutex::new(State {
                due: BinaryHeap::new(),
                jobs: BTreeMap::new(),
                next_id: 0,
            }),
            changed: Condvar::new(),
            started: OnceLock::new(),
        }
    }

    /// Starts the thread once; the error says why it could not be.
    fn started(&'static self) -> std::io::Result<()> {
        let started = self.started.get_or_init(|| {
            std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || run(self))
                .map(drop)
                .map_err(|e| e.kind())
        });
        started.map_err(|kind| {
            std::io::Error::new(kind, format!("cannot start the {} thread", self.name))
        })
    }
}

/// Command watchdogs: nothing here waits for the network.
static WATCHDOGS: Timers = Timers::new("weir-timer");

/// Timed store writes: heartbeats and slot releases, which wait for the
/// store as long as its client lets a request take.
static STORE: Timers = Timers::new("weir-store-timer");

/// A scheduled job; [`Handle::cancel`] (or dropping it) stops it.
pub(crate) struct Handle {
    timers: &'static Timers,
    id: u64,
    slot: Slot,
}

impl Handle {
    /// Stops the job: when this returns it is not running and never will
    /// again (a run in progress is waited for).
    pub(crate) fn cancel(&self) {
        self.timers
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .jobs
            .remove(&self.id);
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Runs `job` on the watchdog thread `after` from now, and again whenever
/// it asks to. It must never wait for the store: use [`schedule_store`].
pub(crate) fn schedule(after: Duration, job: Job) -> std::io::Result<Handle> {
    schedule_on(&WATCHDOGS, after, job)
}

/// Runs `job`, which writes to the store, on the store's timer thread
/// `after` from now, and again whenever it asks to.
pub(crate) fn schedule_store(after: Duration, job: Job) -> std::io::Result<Handle> {
    schedule_on(&STORE, after, job)
}

/// Runs every watchdog job now (a stop request: each one looks at it),
/// then as each asks.
pub(crate) fn wake_watchdogs() {
    let timers = &WATCHDOGS;
    let mut state = timers.state.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    let ids: Vec<u64> = state.jobs.keys().copied().collect();
    for id in ids {
        state.due.push(Reverse((now, id)));
    }
    drop(state);
    timers.changed.notify_one();
}

fn schedule_on(timers: &'static Timers, after: Duration, job: Job) -> std::io::Result<Handle> {
    timers.started()?;
    let slot: Slot = Arc::new(Mutex::new(Some(job)));
    let mut state = timers.state.lock().unwrap_or_else(PoisonError::into_inner);
    let id = state.next_id;
    state.next_id += 1;
    state.jobs.insert(id, slot.clone());
    state
        .due
        .push(Reverse((crate::clock::instant_after(after), id)));
    drop(state);
    timers.changed.notify_one();
    Ok(Handle { timers, id, slot })
}

fn run(timers: &Timers) {
    let mut state = timers.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let now = Instant::now();
        match state.due.peek() {
            None => {
                state = timers
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            Some(&Reverse((at, _))) if at > now => {
                state = timers
                    .changed
                    .wait_timeout(state, at - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            Some(&Reverse((_, id))) => {
                state.due.pop();
                let Some(slot) = state.jobs.get(&id).cloned() else {
                    continue; // cancelled
                };
                drop(state);
                let again = {
                    let mut job = slot.lock().unwrap_or_else(PoisonError::into_inner);
                    match job.as_mut() {
                        None => None,
                        Some(f) => {
                            let again = f();
                            if again.is_none() {
                                job.take();
                            }
                            again
                        }
                    }
                };
                state = timers.state.lock().unwrap_or_else(PoisonError::into_inner);
                match again {
                    Some(d) if state.jobs.contains_key(&id) => {
                        state
                            .due
                            .push(Reverse((crate::clock::instant_after(d), id)));
                    }
                    _ => {
                        state.jobs.remove(&id);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn jobs_repeat_until_cancelled_and_never_run_after() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let handle = schedule(
            Duration::from_millis(1),
            Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                Some(Duration::from_millis(1))
            }),
        )
        .unwrap();
        let start = Instant::now();
        while runs.load(Ordering::SeqCst) < 3 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the job never repeated"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        handle.cancel();
        let after = runs.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(runs.load(Ordering::SeqCst), after);
    }

    #[test]
    fn an_early_job_is_not_held_up_by_a_later_one() {
        let (tx, rx) = std::sync::mpsc::channel();
        let late_tx = tx.clone();
        let _late = schedule(
            Duration::from_secs(3600),
            Box::new(move || {
                let _ = late_tx.send("late");
                None
            }),
        )
        .unwrap();
        let _early = schedule(
            Duration::from_millis(5),
            Box::new(move || {
                let _ = tx.send("early");
                None
            }),
        )
        .unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("early"));
    }
}
