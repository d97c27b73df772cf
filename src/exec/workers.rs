//! The threads that run a run's instances, kept from one instance to the
//! next: starting and ending a thread (its stack, its signal stack, the
//! kernel's task, the mappings other threads must see dropped) cost about
//! 44 µs of CPU on a two-core VM, once per instance before.
//!
//! A piece of work goes to a worker waiting for one, or to a new worker when
//! none waits; the pool grows to the run's concurrency (the instances the
//! pools admit at once) and no further. Workers end when the [`Workers`] is
//! dropped, each after the work it holds; their scope joins them.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;

type Work<'scope> = Box<dyn FnOnce() + Send + 'scope>;

/// Threads of a scope that run work handed to them, one piece at a time.
pub(super) struct Workers<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    shared: Arc<Shared<'scope>>,
}

struct Shared<'scope> {
    state: Mutex<State<'scope>>,
    ready: Condvar,
}

struct State<'scope> {
    queue: VecDeque<Work<'scope>>,
    /// Workers waiting in `ready` for work.
    idle: usize,
    /// No more work comes: waiting workers end.
    closed: bool,
}

impl<'scope, 'env> Workers<'scope, 'env> {
    pub(super) fn new(scope: &'scope Scope<'scope, 'env>) -> Self {
        Workers {
            scope,
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    idle: 0,
                    closed: false,
                }),
                ready: Condvar::new(),
            }),
        }
    }

    /// Runs `work` on a waiting worker, or on a new one if every worker is
    /// busy or already called for.
    pub(super) fn run(&self, work: impl FnOnce() + Send + 'scope) {
        let mut state = self.shared.lock();
        state.queue.push_back(Box::new(work));
        let waiting = state.idle >= state.queue.len();
        drop(state);
        if waiting {
            self.shared.ready.notify_one();
        } else {
            let shared = Arc::clone(&self.shared);
            self.scope.spawn(move || shared.serve());
        }
    }
}

impl Drop for Workers<'_, '_> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
    }
}

impl<'scope> Shared<'scope> {
    fn lock(&self) -> MutexGuard<'_, State<'scope>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A worker's life: the queued work, one piece at a time, until closed.
    fn serve(&self) {
        let mut state = self.lock();
        loop {
            if let Some(work) = state.queue.pop_front() {
                drop(state);
                work();
                state = self.lock();
            } else if state.closed {
                return;
            } else {
                state.idle += 1;
                state = self
                    .ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.idle -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    const PATIENCE: Duration = Duration::from_secs(10);

    #[test]
    fn a_waiting_worker_takes_the_next_piece_and_busy_ones_get_company() {
        let ran = AtomicUsize::new(0);
        let threads = Mutex::new(HashSet::new());
        std::thread::scope(|scope| {
            let workers = Workers::new(scope);
            // One at a time, each handed over once the worker waits again:
            // that one worker serves them all.
            for i in 1..=50 {
                let (ran, threads) = (&ran, &threads);
                workers.run(move || {
                    threads.lock().unwrap().insert(std::thread::current().id());
                    ran.fetch_add(1, Ordering::SeqCst);
                });
                while ran.load(Ordering::SeqCst) < i || workers.shared.lock().idle == 0 {
                    std::thread::yield_now();
                }
            }
            // Four at once, each held until all four have started: four
            // workers, or the wait below times out.
            let (started, seen) = mpsc::channel();
            let (go, gates): (Vec<_>, Vec<_>) = (0..4).map(|_| mpsc::channel::<()>()).unzip();
            for gate in gates {
                let (started, ran) = (started.clone(), &ran);
                workers.run(move || {
                    started.send(()).unwrap();
                    gate.recv_timeout(PATIENCE).unwrap();
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
            for _ in 0..4 {
                seen.recv_timeout(PATIENCE)
                    .expect("all four started at once");
            }
            go.iter().for_each(|g| g.send(()).unwrap());
        });
        assert_eq!(ran.load(Ordering::SeqCst), 54);
        assert_eq!(threads.lock().unwrap().len(), 1);
    }
}
