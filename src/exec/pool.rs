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
//! holder checks that the slot is still this engine's (no one reclaimed it
//! while the engine was taken for dead): by this engine's own heartbeat
//! when its beats prove no one can have (`store::slots::OwnBeats`), else
//! with one listing. A slot is given
//! back to the warehouse when no attempt of this engine took it within
//! [`LINGER`] (the engine has no ready work for the pool), when the engine
//! is asked to stop, and at the end of the run.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::interrupt;
use crate::store::slots::{EngineBeat, GlobalPool, HeldSlot, OwnBeats, SlotTiming};
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
    /// Attempts of this engine on their way to a permit (pinning, taking a
    /// token, waiting for a permit here): an idle slot is kept for each
    /// ([`KEEP_FOR_COMING`]).
    coming: u32,
}

/// How long a warehouse slot no attempt of this engine uses is kept for the
/// next one: about the time an admitted attempt takes to get ready (token,
/// staging) on a loaded disk, and half the interval at which other engines
/// look for a free slot, so they wait barely longer for it.
pub(crate) const LINGER: Duration = Duration::from_millis(20);

/// How long past [`LINGER`] an idle warehouse slot is kept while an attempt
/// of this engine is on its way to a permit (`Slots::on_its_way`): about
/// what getting ready takes against an object store with tens of ms a
/// request (a downstream started as its upstream ends would otherwise give
/// the slot back and take one again: four requests). Another engine waits
/// at most this much longer for it.
const KEEP_FOR_COMING: Duration = Duration::from_secs(1);

thread_local! {
    /// Whether this thread's attempt is counted as on its way to a permit
    /// (`Slots::on_its_way`): an attempt takes its permit on its own thread.
    static ON_ITS_WAY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An attempt on its way to a permit (`Slots::on_its_way`), until dropped.
pub(crate) struct OnItsWay<'a>(&'a Slots);

impl Drop for OnItsWay<'_> {
    fn drop(&mut self) {
        self.0.arrived();
    }
}

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
                coming: 0,
            }),
            freed: Condvar::new(),
            global,
        });
        let reaper = inner.global.as_ref().and_then(|_| {
            let inner = Arc::clone(&inner);
            super::timer::schedule_store(
                linger,
                Box::new(move || {
                    inner.give_back_idle();
                    Some(inner.linger / 2)
                }),
            )
            .ok()
        });
        Slots { inner, reaper }
    }

    /// The attempt on this thread is on its way to a permit of the pool:
    /// until it takes one, or the returned guard drops, an idle slot may
    /// be kept for it.
    pub(crate) fn on_its_way(&self) -> OnItsWay<'_> {
        self.inner.local().coming += 1;
        ON_ITS_WAY.set(true);
        OnItsWay(self)
    }

    /// This thread's attempt is no longer on its way (it took a permit, or
    /// ended).
    fn arrived(&self) {
        if ON_ITS_WAY.replace(false) {
            let mut local = self.inner.local();
            local.coming = local.coming.saturating_sub(1);
        }
    }

    /// Waits for a free slot, here and in the warehouse, and a launch of the
    /// pool's rate. `what` names the attempt in the slot's record.
    pub(crate) fn acquire(&self, what: &str) -> Result<Permit<'_>, NoSlot> {
        let kept = {
            let mut local = self.inner.local();
            if local.free == 0 {
                tracing::debug!("{what}: waits for a free slot of its pool");
            }
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
        self.arrived();
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
        if let Some(mut held) = kept {
            let mine = global.still_held(&mut held);
            if !matches!(mine, Ok(false)) {
                permit.held = Some(held);
            }
            mine.map_err(NoSlot::Store)?;
        }
        if let Some(sig) = interrupt::requested() {
            return Err(NoSlot::Interrupted(sig));
        }
        if permit.held.is_none() {
            // In this process, waiters ask the warehouse in the order they
            // came (serve's lanes are admitted in due order); engines
            // elsewhere are not queued with them.
            let line = InLine::join(global.name());
            permit.held = Some(poll_in_line(&line, || global.try_acquire(what))?);
            if permit.held.as_ref().is_some_and(|h| h.from_dead_neighbour) {
                // What the dead engine left running on this host stops first.
                crate::process::tree::sweep_orphans();
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

    /// Gives back the idle slots no attempt took within [`LINGER`], but
    /// for one per attempt on its way to a permit, for at most
    /// [`KEEP_FOR_COMING`].
    fn give_back_idle(&self) {
        let coming = self.local().coming;
        let mut kept = 0;
        self.give_back(|since| {
            let idle = since.elapsed();
            if idle < self.linger {
                return false;
            }
            if kept < coming && idle < self.linger + KEEP_FOR_COMING {
                kept += 1;
                return false;
            }
            true
        });
    }

    /// Gives back to the warehouse the idle slots `due` says (all of them
    /// once the engine is asked to stop).
    fn give_back(&self, mut due: impl FnMut(Instant) -> bool) {
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
/// This process's waiters for each pool's warehouse slots, by warehouse
/// and pool, in the order they came: only the first of a line asks the
/// warehouse.
struct Lines {
    waiting: Mutex<std::collections::HashMap<(String, String), std::collections::VecDeque<u64>>>,
    moved: Condvar,
    next: std::sync::atomic::AtomicU64,
}

fn lines() -> &'static Lines {
    static LINES: std::sync::OnceLock<Lines> = std::sync::OnceLock::new();
    LINES.get_or_init(|| Lines {
        waiting: Mutex::new(Default::default()),
        moved: Condvar::new(),
        next: std::sync::atomic::AtomicU64::new(0),
    })
}

/// A place in a pool's line, left on drop (a slot taken, an error, a stop).
struct InLine {
    pool: (String, String),
    ticket: u64,
}

impl InLine {
    fn join(pool: (String, String)) -> InLine {
        let ticket = lines()
            .next
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut waiting = lines().waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.entry(pool.clone()).or_default().push_back(ticket);
        InLine { pool, ticket }
    }

    /// Waits (at most `at_most`) until this place is the first of its line;
    /// whether it is.
    fn first(&self, at_most: Duration) -> bool {
        let lines = lines();
        let waiting = lines.waiting.lock().unwrap_or_else(|p| p.into_inner());
        let head = |w: &std::collections::HashMap<_, std::collections::VecDeque<u64>>| {
            w.get(&self.pool).and_then(|l| l.front()) == Some(&self.ticket)
        };
        let (waiting, _) = lines
            .moved
            .wait_timeout_while(waiting, at_most, |w| !head(w))
            .unwrap_or_else(|p| p.into_inner());
        head(&waiting)
    }
}

impl Drop for InLine {
    fn drop(&mut self) {
        let lines = lines();
        let mut waiting = lines.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(line) = waiting.get_mut(&self.pool) {
            line.retain(|t| *t != self.ticket);
            if line.is_empty() {
                waiting.remove(&self.pool);
            }
        }
        lines.moved.notify_all();
    }
}

/// [`poll`], asking only while first in `line` (the others wait for the
/// line to move, without a request).
fn poll_in_line<T>(
    line: &InLine,
    mut attempt: impl FnMut() -> Result<Option<T>, StoreError>,
) -> Result<T, NoSlot> {
    loop {
        if line.first(POLL) {
            if let Some(got) = attempt().map_err(NoSlot::Store)? {
                return Ok(got);
            }
            if let Some(sig) = interrupt::requested() {
                return Err(NoSlot::Interrupted(sig));
            }
            std::thread::sleep(
                POLL + Duration::from_millis(fastrand::u64(..POLL.as_millis() as u64)),
            );
        } else if let Some(sig) = interrupt::requested() {
            return Err(NoSlot::Interrupted(sig));
        }
    }
}

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
    /// When the beats landed: the pools' proof that their kept slots are
    /// still this engine's.
    own: Arc<OwnBeats>,
}

impl EngineHeartbeat {
    /// Writes the first beat (an error here is the engine's failure) and
    /// starts beating.
    pub(crate) fn start(
        backend: Arc<dyn Backend>,
        engine_id: &str,
        timing: SlotTiming,
    ) -> Result<EngineHeartbeat, StoreError> {
        let own = Arc::new(OwnBeats::new(timing, backend.request_timeout()));
        let mut beat = EngineBeat::start_watched(backend, engine_id, Arc::clone(&own))?;
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
            own,
        })
    }

    /// When this engine's beats landed.
    pub(crate) fn own_beats(&self) -> Arc<OwnBeats> {
        Arc::clone(&self.own)
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
/// names the warehouse (its location); `own` is the engine's heartbeat.
pub(crate) fn shared(
    backend: &Arc<dyn Backend>,
    scope: &str,
    pools: &[(String, u32, Option<crate::manifest::Rate>)],
    timing: SlotTiming,
    own: &Arc<OwnBeats>,
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
            )?
            .with_own_beats(Arc::clone(own));
            Ok(Slots::shared(global, *slots))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Serve's lanes wait for one pool's warehouse slots together: they are
    // let ask in the order they came, whatever order their threads run in.
    #[test]
    fn waiters_of_one_pool_ask_the_warehouse_in_the_order_they_came() {
        let pool = ("wh-line-test".to_string(), "p".to_string());
        let places: Vec<InLine> = (0..4).map(|_| InLine::join(pool.clone())).collect();
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (n, place) in places.iter().enumerate().rev() {
                let order = &order;
                s.spawn(move || {
                    poll_in_line(place, || {
                        order.lock().unwrap().push(n);
                        Ok(Some(()))
                    })
                    .unwrap();
                    // Taken: the next in line goes.
                    let mut waiting = lines().waiting.lock().unwrap();
                    if let Some(line) = waiting.get_mut(&place.pool) {
                        line.retain(|t| *t != place.ticket);
                    }
                    lines().moved.notify_all();
                });
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
    }
    use std::sync::atomic::{AtomicU32, Ordering};

    fn engine_pool(backend: &Arc<dyn Backend>, engine: &str, slots: u32) -> GlobalPool {
        // The scope is the backend's address: never freed, it is never a
        // later test's (see `store::slots`' tests).
        std::mem::forget(Arc::clone(backend));
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

    /// Waits until slot `slot`'s newest record says it is free; how long.
    fn given_back(backend: &dyn Backend, slot: u32) -> Duration {
        let start = Instant::now();
        while !newest(backend, slot).1.contains("\"state\":\"free\"") {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never given back"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        start.elapsed()
    }

    // Consecutive permits of one engine use the warehouse slot the
    // first one took, without a release and a re-take (two records each);
    // it goes back once no permit took it within the linger, or at the end
    // of the run.
    #[test]
    fn consecutive_permits_keep_one_warehouse_slot() {
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
        assert!(given_back(&*backend, first.0) >= Duration::from_millis(40));
        assert_eq!(newest(&*backend, first.0).0, again.1 + 1);
        drop(slots);
    }

    // An idle slot is kept past the linger while an
    // attempt of this engine is on its way to a permit (a downstream
    // started as its upstream ended), so the warehouse sees no release and
    // re-take; it goes back once that attempt ended without one, or after
    // KEEP_FOR_COMING.
    #[test]
    fn an_idle_slot_is_kept_for_an_attempt_on_its_way() {
        let tmp = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(crate::store::FsBackend::new(tmp.path()));
        let slots = Slots::with(
            Some(engine_pool(&backend, "a", 1)),
            1,
            Duration::from_millis(20),
        );
        let way = slots.on_its_way();
        let first = held(&slots.acquire("t k1").unwrap());
        drop(way);
        // The downstream starts as its upstream's permit went back.
        let way = slots.on_its_way();
        std::thread::sleep(Duration::from_millis(300));
        let (generation, record) = newest(&*backend, first.0);
        assert_eq!(generation, first.1, "kept: {record}");
        // Once it holds a permit it is no longer on its way: while it
        // audits and commits after its command, the slot goes back.
        assert_eq!(held(&slots.acquire("t k2").unwrap()), first);
        given_back(&*backend, first.0);
        // One on its way that never takes it: back after KEEP_FOR_COMING.
        drop(way);
        let again = held(&slots.acquire("t k3").unwrap());
        let way = slots.on_its_way();
        assert!(given_back(&*backend, again.0) >= KEEP_FOR_COMING);
        drop(way);
    }

    /// A store as S3 is to the pools: every request bounded (here by
    /// 100ms), in memory; its listings of pool slots counted, and this
    /// engine's beats failing or slow on demand.
    struct Bounded {
        inner: crate::store::MemoryBackend,
        slot_listings: AtomicU32,
        /// 0: beats land; 1: they fail; 2: each takes a second first.
        beats: AtomicU32,
    }

    impl Backend for Bounded {
        fn durable(&self) -> Option<&dyn crate::store::DurableDirectories> {
            self.inner.durable()
        }

        fn multipart(&self) -> Option<&dyn crate::store::MultipartHygiene> {
            self.inner.multipart()
        }

        fn request_timeout(&self) -> Option<Duration> {
            Some(Duration::from_millis(100))
        }
        fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
            if key.starts_with("_engines/a/") {
                match self.beats.load(Ordering::SeqCst) {
                    1 => {
                        return Err(StoreError::Remote {
                            key: key.into(),
                            source: "stalled".into(),
                        })
                    }
                    2 => std::thread::sleep(Duration::from_secs(1)),
                    _ => {}
                }
            }
            self.inner.put_if_absent(key, bytes)
        }
        fn put_if_version_matches(
            &self,
            key: &str,
            bytes: &[u8],
            expected: &crate::store::backend::Version,
        ) -> Result<Option<crate::store::backend::Version>, StoreError> {
            self.inner.put_if_version_matches(key, bytes, expected)
        }
        fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
            self.inner.put(key, bytes)
        }
        fn get_object(
            &self,
            key: &str,
        ) -> Result<Option<crate::store::backend::Object>, StoreError> {
            self.inner.get_object(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
            if prefix.starts_with("_pools/") {
                self.slot_listings.fetch_add(1, Ordering::SeqCst);
            }
            self.inner.list(prefix)
        }
        fn list_objects(
            &self,
            prefix: &str,
        ) -> Result<Vec<crate::store::backend::ObjectMeta>, StoreError> {
            self.inner.list_objects(prefix)
        }
        fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.inner.delete(key)
        }
        fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
            self.inner.delete_prefix(prefix)
        }
    }

    /// Slots are reclaimed after 1s of silence: a kept slot is used without
    /// a listing while the engine's last beat landed under 0.8s ago (1s,
    /// less the 100ms a reclaimer's look may be stale, less a tenth).
    const FAST: SlotTiming = SlotTiming {
        beat: Duration::from_millis(100),
        timeout: Duration::from_secs(1),
    };

    struct Engine {
        store: Arc<Bounded>,
        backend: Arc<dyn Backend>,
        beat: EngineBeat,
        slots: Slots,
    }

    /// Engine `a` on a `Bounded` store, beating (by hand) and keeping its
    /// slots; `slots` slots in the pool.
    fn beating_engine(slots: u32) -> Engine {
        let store = Arc::new(Bounded {
            inner: crate::store::MemoryBackend::new(),
            slot_listings: AtomicU32::new(0),
            beats: AtomicU32::new(0),
        });
        let backend: Arc<dyn Backend> = store.clone();
        let own = Arc::new(OwnBeats::new(FAST, backend.request_timeout()));
        let beat = EngineBeat::start_watched(Arc::clone(&backend), "a", Arc::clone(&own)).unwrap();
        let global = timed_pool(&backend, "a", slots).with_own_beats(own);
        let slots = Slots::with(Some(global), slots, Duration::from_secs(3600));
        Engine {
            store,
            backend,
            beat,
            slots,
        }
    }

    fn timed_pool(backend: &Arc<dyn Backend>, engine: &str, slots: u32) -> GlobalPool {
        GlobalPool::new(
            Arc::clone(backend),
            format!("{:p}", Arc::as_ptr(backend)),
            "p",
            slots,
            None,
            FAST,
            crate::store::Holder {
                engine_id: engine.into(),
                ..crate::store::Holder::current().clone()
            },
        )
        .unwrap()
    }

    /// Engine `b` takes slot `slot` from engine `a` the legitimate way: by
    /// watching `a`'s beat not move for the timeout. Every other slot `b`
    /// takes meanwhile is given back.
    fn reclaim(backend: &Arc<dyn Backend>, slot: u32, slots: u32) -> HeldSlot {
        let b = timed_pool(backend, "b", slots);
        let mut others = Vec::new();
        let taken = loop {
            match b.try_acquire("b's").unwrap() {
                Some(h) if h.slot() == slot => break h,
                Some(h) => others.push(h),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        for h in others {
            b.release(h, "b's other").unwrap();
        }
        taken
    }

    // While this engine's beats land, no other engine can take
    // its kept slot for a dead engine's, so the next permit uses it with no
    // request; once its last beat is older than that proof allows, the next
    // permit lists the slot again.
    #[test]
    fn a_kept_slot_goes_on_without_a_listing_while_the_engine_beats() {
        let mut a = beating_engine(1);
        let first = held(&a.slots.acquire("t k1").unwrap());
        let listed = a.store.slot_listings.load(Ordering::SeqCst);
        for k in 2..10 {
            a.beat.beat().unwrap();
            let permit = a.slots.acquire(&format!("t k{k}")).unwrap();
            assert_eq!(held(&permit), first, "k{k}");
        }
        assert_eq!(a.store.slot_listings.load(Ordering::SeqCst), listed);
        // Silent for longer than the proof allows (nobody reclaimed it
        // yet, as no one looked): checked by a listing, and still a's.
        std::thread::sleep(Duration::from_millis(850));
        let permit = a.slots.acquire("t k10").unwrap();
        assert_eq!(held(&permit), first);
        assert_eq!(a.store.slot_listings.load(Ordering::SeqCst), listed + 1);
    }

    // A slot kept for this engine's next permit may have been
    // reclaimed meanwhile by another engine (this one's beat stopped for
    // the timeout, so it was taken for dead): the next permit does not
    // count it as its own too, but takes another.
    #[test]
    fn a_kept_slot_reclaimed_meanwhile_is_not_used_twice() {
        let a = beating_engine(2);
        let (slot, generation) = held(&a.slots.acquire("t k1").unwrap());
        // a beats no more: b takes its slot after the timeout.
        let theirs = reclaim(&a.backend, slot, 2);
        assert_eq!(theirs.generation(), generation + 1);
        let permit = a.slots.acquire("t k2").unwrap();
        assert_ne!(held(&permit).0, slot, "b's slot counted as a's too");
        // And a's permit given back never touches b's slot.
        drop(permit);
        drop(a.slots);
        let (newest_gen, record) = newest(&*a.backend, slot);
        assert_eq!(newest_gen, generation + 1);
        assert!(record.contains("b's"), "{record}");
    }

    // An engine whose beats stall (the store refuses them) is
    // taken for dead and its kept slot reclaimed; its beats land again
    // before its next permit, but the gap they left is remembered: that
    // permit lists the slot and takes another one. A beat that lands late
    // (a slow request) leaves such a gap too.
    #[test]
    fn a_stalled_engine_lists_its_kept_slot_again_and_does_not_use_a_reclaimed_one() {
        let mut a = beating_engine(2);
        let (slot, generation) = held(&a.slots.acquire("t k1").unwrap());
        a.beat.beat().unwrap();
        a.store.beats.store(1, Ordering::SeqCst);
        let theirs = std::thread::scope(|s| {
            let reclaimer = s.spawn(|| reclaim(&a.backend, slot, 2));
            while !reclaimer.is_finished() {
                assert!(a.beat.beat().is_err());
                std::thread::sleep(FAST.beat);
            }
            reclaimer.join().unwrap()
        });
        assert_eq!(theirs.generation(), generation + 1);
        // The beat that ends the stall was first sent before it, so it may
        // have landed then: the one after it is the first known in time.
        a.store.beats.store(0, Ordering::SeqCst);
        a.beat.beat().unwrap();
        a.beat.beat().unwrap();
        let listed = a.store.slot_listings.load(Ordering::SeqCst);
        let permit = a.slots.acquire("t k2").unwrap();
        assert!(a.store.slot_listings.load(Ordering::SeqCst) > listed);
        let (other, _) = held(&permit);
        assert_ne!(other, slot, "b's slot counted as a's too");
        drop(permit);

        // Kept, and used without a listing while beats land in time...
        a.beat.beat().unwrap();
        let listed = a.store.slot_listings.load(Ordering::SeqCst);
        assert_eq!(held(&a.slots.acquire("t k3").unwrap()).0, other);
        assert_eq!(a.store.slot_listings.load(Ordering::SeqCst), listed);
        // ...but not after a beat whose request took longer than the proof
        // allows: it may have landed only at its reply.
        a.store.beats.store(2, Ordering::SeqCst);
        a.beat.beat().unwrap();
        a.store.beats.store(0, Ordering::SeqCst);
        a.beat.beat().unwrap();
        assert_eq!(held(&a.slots.acquire("t k4").unwrap()).0, other);
        assert_eq!(a.store.slot_listings.load(Ordering::SeqCst), listed + 1);
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
