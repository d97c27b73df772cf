//! One thread for the timed work of every attempt: command watchdogs
//! (timeouts, stop requests) and lease heartbeats.
//!
//! Each used to own a thread, two per attempt, started and joined for every
//! instance. A job here is a closure that runs on the timer thread when due
//! and says when it wants to run again; it must be short (a `kill`, a small
//! lease write), because every other job waits for it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// A job: runs when due; `Some(d)` runs it again `d` later, `None` ends it.
pub(crate) type Job = Box<dyn FnMut() -> Option<Duration> + Send>;

/// A job's slot: taken (emptied) when the job is cancelled or ends. Locked
/// while the job runs, so a cancel waits for a running job to finish.
type Slot = Arc<Mutex<Option<Job>>>;

struct State {
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    jobs: HashMap<u64, Slot>,
    next_id: u64,
}

struct Timers {
    state: Mutex<State>,
    changed: Condvar,
}

fn timers() -> &'static Timers {
    static TIMERS: OnceLock<Timers> = OnceLock::new();
    TIMERS.get_or_init(|| Timers {
        state: Mutex::new(State {
            due: BinaryHeap::new(),
            jobs: HashMap::new(),
            next_id: 0,
        }),
        changed: Condvar::new(),
    })
}

/// Starts the timer thread once; the error says why it could not be.
fn started() -> std::io::Result<()> {
    static STARTED: OnceLock<Result<(), std::io::ErrorKind>> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("weir-timer".into())
            .spawn(|| run(timers()))
            .map(drop)
            .map_err(|e| e.kind())
    });
    started.map_err(|kind| std::io::Error::new(kind, "cannot start the timer thread"))
}

/// A scheduled job; [`Handle::cancel`] (or dropping it) stops it.
pub(crate) struct Handle {
    id: u64,
    slot: Slot,
}

impl Handle {
    /// Stops the job: when this returns it is not running and never will
    /// again (a run in progress is waited for).
    pub(crate) fn cancel(&self) {
        let timers = timers();
        timers
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

/// Runs `job` on the timer thread `after` from now, and again whenever it
/// asks to.
pub(crate) fn schedule(after: Duration, job: Job) -> std::io::Result<Handle> {
    started()?;
    let timers = timers();
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
    Ok(Handle { id, slot })
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
