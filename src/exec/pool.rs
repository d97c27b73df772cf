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
//!
//! A warehouse slot outlives the permit that took it while this engine has
//! ready work for the pool: a permit given back keeps its slot for the next
//! permit taken here (no release and re-take in the warehouse, which cost a
//! listing, a put-if-absent and a delete of a generation each). The next
//! holder checks with one listing that the slot is still this engine's (no
//! one reclaimed it while the engine was taken for dead). A slot is given
//! back to the warehouse when no attempt of this engine took it within
//! [`LINGER`] (the engine has no ready work for the pool), when the engine
//! is asked to stop, and at the end of the run.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::interrupt;
use crate::store::slots::{EngineBeat, GlobalPool, HeldSlot, SlotTiming};
use crate::store::{Backend, StoreError};

/// The slots of one pool.
pub(crate) struct Slots {
    inner: Arc<Inner>,
    /// Gives back the warehouse slots no attempt took within [`LINGER`]
    /// (on the store's timer thread). `None`: none is kept (no warehouse,
    /// or no timer thread).
    reaper: Option<super::timer::Handle>,
}

struct Inner {
    state: Mutex<Local>,
    /// How long a slot no permit holds is kept ([`LINGER`]).
    linger: Duration,
    freed: Condvar,
    /// The pool's slots in the warehouse (every run has them; in-process
    /// unit tests may go without).
    global: Option<GlobalPool>,
}

/// This engine's side of a pool.
struct Local {
    /// Permits free.
    free: u32,
    /// Warehouse slots this engine holds with no permit, and since when:
    /// the next permit taken takes one. Never more than `free`.
    idle: Vec<(HeldSlot, Instant)>,
}

/// How long a warehouse slot no attempt of this engine uses is kept for the
/// next one: about the time an admitted attempt takes to get ready (token,
/// staging) on a loaded disk, and half the interval at which other engines
/// look for a free slot, so they wait barely longer for it.
pub(crate) const LINGER: Duration = Duration::from_millis(20);

/// A held slot, given back (or kept for the next permit) on drop.
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
        Slots::with(None, slots, LINGER)
    }

    /// Slots shared with every engine on the warehouse.
    pub(crate) fn shared(global: GlobalPool, slots: u32) -> Slots {
        Slots::with(Some(global), slots, LINGER)
    }

    fn with(global: Option<GlobalPool>, slots: u32, linger: Duration) -> Slots {
        let inner = Arc::new(Inner {
            linger,
            state: Mutex::new(Local {
                free: slots,
                idle: Vec::new(),
            }),
            freed: Condvar::new(),
            global,
        });
        let reaper = inner.global.as_ref().and_then(|_| {
            let inner = Arc::clone(&inner);
            super::timer::schedule_store(
                linger,
                Box::new(move || {
                    inner.give_back(|since| since.elapsed() >= inner.linger);
                    Some(inner.linger / 2)
                }),
            )
            .ok()
        });
        Slots { inner, reaper }
    }

    /// Waits for a free slot, here and in the warehouse, and a launch of the
    /// pool's rate. `what` names the attempt in the slot's record.
    pub(crate) fn acquire(&self, what: &str) -> Result<Permit<'_>, NoSlot> {
        let kept = {
            let mut local = self.inner.local();
            while local.free == 0 {
                local = self
                    .inner
                    .freed
                    .wait(local)
                    .unwrap_or_else(|p| p.into_inner());
            }
            local.free -= 1;
            local.idle.pop().map(|(held, _)| held)
        };
        // From here on, dropping the permit gives the local slot back (and
        // the warehouse slot it holds).
        let mut permit = Permit {
            slots: self,
            held: None,
            what: what.to_owned(),
        };
        let Some(global) = &self.inner.global else {
            return Ok(permit);
        };
        if let Some(held) = kept {
            let mine = global.still_held(&held);
            if !matches!(mine, Ok(false)) {
                permit.held = Some(held);
            }
            mine.map_err(NoSlot::Store)?;
        }
        if let Some(sig) = interrupt::requested() {
            return Err(NoSlot::Interrupted(sig));
        }
        if permit.held.is_none() {
            permit.held = Some(poll(|| global.try_acquire(what))?);
            if permit.held.as_ref().is_some_and(|h| h.from_dead_neighbour) {
                // What the dead engine left running on this host stops first.
                super::tree::sweep_orphans();
            }
        }
        poll(|| Ok(global.try_launch(what)?.then_some(())))?;
        Ok(permit)
    }
}

impl Inner {
    fn local(&self) -> MutexGuard<'_, Local> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives back to the warehouse the idle slots `due` says (all of them
    /// once the engine is asked to stop).
    fn give_back(&self, due: impl Fn(Instant) -> bool) {
        let stopping = interrupt::requested().is_some();
        let gone: Vec<HeldSlot> = {
            let mut local = self.local();
            let (gone, kept) = std::mem::take(&mut local.idle)
                .into_iter()
                .partition(|(_, since)| stopping || due(*since));
            local.idle = kept;
            gone.into_iter().map(|(held, _)| held).collect()
        };
        if let Some(global) = &self.global {
            for held in gone {
                // A release that fails leaves the record naming this
                // engine: this engine takes it again (it knows it holds
                // nothing there), others once its heartbeat stops.
                let _ = global.release(held, "no attempt of this engine waits for it");
            }
        }
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
        let inner = &self.slots.inner;
        let mut local = inner.local();
        let mut release = self.held.take();
        // Kept for the next permit, unless nothing would give it back in
        // time or the engine is stopping.
        if self.slots.reaper.is_some() && interrupt::requested().is_none() {
            if let Some(held) = release.take() {
                local.idle.push((held, Instant::now()));
            }
        }
        local.free += 1;
        drop(local);
        inner.freed.notify_one();
        if let (Some(global), Some(held)) = (&inner.global, release) {
            // A release that fails leaves the record naming this engine:
            // this engine takes it again (it knows it holds nothing there),
            // others once its heartbeat stops.
            let _ = global.release(held, &self.what);
        }
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // The run ends: no reaper runs after this, and every slot kept goes
        // back.
        if let Some(reaper) = self.reaper.take() {
            reaper.cancel();
        }
        self.inner.give_back(|_| true);
    }
}

/// This engine's heartbeat in the warehouse, beating on its own thread
/// while a run lasts: other engines judge from it whether the slots it
/// holds are still its.
pub(crate) struct EngineHeartbeat {
    /// Dropped to stop the beats: the thread wakes at once.
    stop: Option<std::sync::mpsc::Sender<()>>,
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
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // Asleep until the next beat, or until the run drops `stop`.
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(timing.beat)
            {
                // A missed beat is retried at the next; a long outage
                // costs this engine its slots, never another's.
                let _ = beat.beat();
            }
            Some(beat)
        });
        Ok(EngineHeartbeat {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EngineHeartbeat {
    fn drop(&mut self) {
        self.stop.take();
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

    fn engine_pool(backend: &Arc<dyn Backend>, engine: &str, slots: u32) -> GlobalPool {
        GlobalPool::new(
            Arc::clone(backend),
            format!("{:p}", Arc::as_ptr(backend)),
            "p",
            slots,
            None,
            SlotTiming::default(),
            crate::store::Holder {
                engine_id: engine.into(),
                ..crate::store::Holder::current().clone()
            },
        )
        .unwrap()
    }

    fn held(permit: &Permit<'_>) -> (u32, u64) {
        let held = permit.held.as_ref().expect("a warehouse slot");
        (held.slot(), held.generation())
    }

    /// The newest record of slot `slot` of pool `p`, and its generation.
    fn newest(backend: &dyn Backend, slot: u32) -> (u64, String) {
        let prefix = format!("_pools/p/slots/{slot}");
        let name = backend.list(&prefix).unwrap().pop().expect("a record");
        let text = backend.get(&format!("{prefix}/{name}")).unwrap().unwrap();
        (name.parse().unwrap(), String::from_utf8(text).unwrap())
    }

    // issue 16: consecutive permits of one engine use the warehouse slot the
    // first one took, without a release and a re-take (two records each);
    // it goes back once no permit took it within the linger, or at the end
    // of the run.
    #[test]
    fn issue_16_consecutive_permits_keep_one_warehouse_slot() {
        let tmp = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(crate::store::FsBackend::new(tmp.path()));
        let slots = Slots::with(
            Some(engine_pool(&backend, "a", 1)),
            1,
            Duration::from_secs(3600),
        );
        let first = held(&slots.acquire("t k1").unwrap());
        for k in 2..20 {
            let permit = slots.acquire(&format!("t k{k}")).unwrap();
            assert_eq!(held(&permit), first, "k{k}");
        }
        let (generation, record) = newest(&*backend, first.0);
        assert_eq!(generation, first.1, "{record}");
        assert!(record.contains("\"state\":\"held\""), "{record}");
        // The run ends: given back.
        drop(slots);
        let (generation, record) = newest(&*backend, first.0);
        assert_eq!(generation, first.1 + 1);
        assert!(record.contains("\"state\":\"free\""), "{record}");

        // With no permit taken, the reaper gives it back after the linger.
        let slots = Slots::with(
            Some(engine_pool(&backend, "a", 1)),
            1,
            Duration::from_millis(50),
        );
        let again = held(&slots.acquire("t k1").unwrap());
        assert_eq!(again, (first.0, first.1 + 2));
        let start = Instant::now();
        while !newest(&*backend, first.0).1.contains("\"state\":\"free\"") {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never given back"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(start.elapsed() >= Duration::from_millis(40));
        assert_eq!(newest(&*backend, first.0).0, again.1 + 1);
        drop(slots);
    }

    // issue 16: a slot kept for this engine's next permit may have been
    // reclaimed meanwhile by another engine (this one was taken for dead):
    // the next permit does not count it as its own too, but takes another.
    #[test]
    fn issue_16_a_kept_slot_reclaimed_meanwhile_is_not_used_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(crate::store::FsBackend::new(tmp.path()));
        let slots = Slots::with(
            Some(engine_pool(&backend, "a", 2)),
            2,
            Duration::from_secs(3600),
        );
        let (slot, generation) = held(&slots.acquire("t k1").unwrap());
        let theirs = crate::store::slots::SlotRecord {
            state: crate::store::slots::SlotState::Held,
            holder: crate::store::Holder {
                engine_id: "b".into(),
                ..crate::store::Holder::current().clone()
            },
            what: "b's".into(),
            at: String::new(),
            reclaimed_from: Some("a".into()),
        };
        assert!(backend
            .put_if_absent_volatile(
                &format!("_pools/p/slots/{slot}/{:020}", generation + 1),
                &serde_json::to_vec(&theirs).unwrap(),
            )
            .unwrap());
        let permit = slots.acquire("t k2").unwrap();
        assert_ne!(held(&permit).0, slot, "b's slot counted as a's too");
        // And a's permit given back never touches b's slot.
        drop(permit);
        drop(slots);
        let (newest_gen, record) = newest(&*backend, slot);
        assert_eq!(newest_gen, generation + 1);
        assert!(record.contains("b's"), "{record}");
    }

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
