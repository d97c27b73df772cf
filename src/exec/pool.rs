//! Pool slots: a counting semaphore per pool, then a slot (and a launch of
//! the pool's rate) in the warehouse, so a pool's limits hold across every
//! engine sharing it (`store::slots`). A permit is held exactly while a
//! task's command runs; the engine's own work before (pinning, token
//! allocation, staging) and after (audit, fsyncs, commit) happens outside
//! it, so durability overlaps other instances' commands.
//!
//! The local semaphore comes first: an engine's attempts wait on it without
//! touching the warehouse, and at most `slots` of them poll for a warehouse
//! slot at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::interrupt;
use crate::store::slots::{EngineBeat, GlobalPool, HeldSlot, SlotTiming};
use crate::store::{Backend, StoreError};

/// The slots of one pool.
pub(crate) struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
    /// The pool's slots in the warehouse (every run has them; in-process
    /// unit tests may go without).
    global: Option<GlobalPool>,
}

/// A held slot, given back on drop.
pub(crate) struct Permit<'a> {
    slots: &'a Slots,
    held: Option<HeldSlot>,
    what: String,
}

/// Why no slot was taken.
#[derive(Debug)]
pub(crate) enum NoSlot {
    /// Asked to stop while waiting.
    Interrupted(interrupt::Signal),
    /// The warehouse's slot records could not be read or written.
    Store(StoreError),
}

/// Between two looks at the warehouse's slots while all are taken.
const POLL: Duration = Duration::from_millis(40);

impl Slots {
    /// Slots of this process only.
    #[cfg(test)]
    pub(crate) fn new(slots: u32) -> Slots {
        Slots {
            free: Mutex::new(slots),
            freed: Condvar::new(),
            global: None,
        }
    }

    /// Slots shared with every engine on the warehouse.
    pub(crate) fn shared(global: GlobalPool, slots: u32) -> Slots {
        Slots {
            free: Mutex::new(slots),
            freed: Condvar::new(),
            global: Some(global),
        }
    }

    /// Waits for a free slot, here and in the warehouse, and a launch of the
    /// pool's rate. `what` names the attempt in the slot's record.
    pub(crate) fn acquire(&self, what: &str) -> Result<Permit<'_>, NoSlot> {
        {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            while *free == 0 {
                free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
            }
            *free -= 1;
        }
        // From here on, dropping the permit gives the local slot back.
        let mut permit = Permit {
            slots: self,
            held: None,
            what: what.to_owned(),
        };
        let Some(global) = &self.global else {
            return Ok(permit);
        };
        permit.held = Some(poll(|| global.try_acquire(what))?);
        if permit.held.as_ref().is_some_and(|h| h.from_dead_neighbour) {
            // What the dead engine left running on this host stops first.
            super::tree::sweep_orphans();
        }
        poll(|| Ok(global.try_launch(what)?.then_some(())))?;
        Ok(permit)
    }
}

/// Asks `attempt` until it gives something, noticing stop requests.
fn poll<T>(mut attempt: impl FnMut() -> Result<Option<T>, StoreError>) -> Result<T, NoSlot> {
    loop {
        if let Some(got) = attempt().map_err(NoSlot::Store)? {
            return Ok(got);
        }
        if let Some(sig) = interrupt::requested() {
            return Err(NoSlot::Interrupted(sig));
        }
        // Jittered, so engines that wait together do not poll together.
        std::thread::sleep(POLL + Duration::from_millis(fastrand::u64(..POLL.as_millis() as u64)));
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let (Some(global), Some(held)) = (&self.slots.global, self.held.take()) {
            // A release that fails leaves the record naming this engine:
            // this engine takes it again (it knows it holds nothing there),
            // others once its heartbeat stops.
            let _ = global.release(held, &self.what);
        }
        *self.slots.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.slots.freed.notify_one();
    }
}

/// This engine's heartbeat in the warehouse, beating on its own thread
/// while a run lasts: other engines judge from it whether the slots it
/// holds are still its.
pub(crate) struct EngineHeartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<EngineBeat>>>,
}

impl EngineHeartbeat {
    /// Writes the first beat (an error here is the engine's failure) and
    /// starts beating.
    pub(crate) fn start(
        backend: Arc<dyn Backend>,
        engine_id: &str,
        timing: SlotTiming,
    ) -> Result<EngineHeartbeat, StoreError> {
        let mut beat = EngineBeat::start(backend, engine_id)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let tick = Duration::from_millis(20).min(timing.beat);
            let mut since = std::time::Instant::now();
            while !stopped.load(Ordering::SeqCst) {
                std::thread::sleep(tick);
                if since.elapsed() >= timing.beat {
                    // A missed beat is retried at the next; a long outage
                    // costs this engine its slots, never another's.
                    let _ = beat.beat();
                    since = std::time::Instant::now();
                }
            }
            Some(beat)
        });
        Ok(EngineHeartbeat {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EngineHeartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(beat) = self.thread.take().and_then(|t| t.join().ok()).flatten() {
            // The engine is done (its slots were released): its beats go.
            let _ = beat.stop();
        }
    }
}

/// The warehouse slots of every pool of a run, in `pools`' order; `scope`
/// names the warehouse (its location).
pub(crate) fn shared(
    backend: &Arc<dyn Backend>,
    scope: &str,
    pools: &[(String, u32, Option<crate::manifest::Rate>)],
    timing: SlotTiming,
) -> Result<Vec<Slots>, StoreError> {
    pools
        .iter()
        .map(|(name, slots, rate)| {
            let global = GlobalPool::new(
                Arc::clone(backend),
                scope.to_owned(),
                name,
                *slots,
                rate.map(|r| (r.launches, r.per)),
                timing,
                crate::store::Holder::current().clone(),
            )?;
            Ok(Slots::shared(global, *slots))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn never_more_permits_than_slots() {
        let slots = Slots::new(3);
        let inside = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let _permit = slots.acquire("t").unwrap();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 3);
    }
}
