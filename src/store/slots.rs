//! Pool slots and launch rates that hold across every engine sharing the
//! warehouse, built on put-if-absent alone (no lock, no conditional delete,
//! no clock shared between hosts).
//!
//! ```text
//! _pools/<pool>/slots/<i>/<gen 20-digit>   slot i's records; its state is the highest gen's
//! _pools/<pool>/rate/<j>/<gen 20-digit>    launch j's records (a pool with `rate`)
//! _engines/<engine id>/<beat 20-digit>     an engine's heartbeat: the highest beat
//!
//!  slot i at gen g ── free (or no record) ──► put-if-absent g+1 {held by me} ──► list: g+1 highest? ── yes ─► mine
//!                 └── held by X ── X certainly dead, or X's beat unchanged for    │                    └ no ──► lost
//!                                  the lease timeout on *my* monotonic clock ─────┘ (reclaim: same put)
//!  release: put-if-absent g+1 {free}; taken already = someone reclaimed it: nothing to do
//! ```
//!
//! Every change of a slot is the creation of its next generation, so two
//! engines that race for it (to take, to release, to reclaim) cannot both
//! win: exactly one put-if-absent of g+1 succeeds. A writer confirms that its
//! generation is still the highest after writing, because old generations are
//! collected (a writer deletes those below its predecessor, in one batch once
//! there are [`COLLECT_AT`] of them): a writer that
//! read a stale listing could otherwise recreate a deleted generation below
//! the current one and believe it current. The highest generation and the one
//! below it are never deleted, so the highest never goes down.
//!
//! A holder's liveness is its engine's heartbeat (a new `_engines/<id>/<n>`
//! key every [`SlotTiming::beat`]), judged by the reader: it notes when it
//! first saw the beat counter at its value, on its own monotonic clock, and
//! takes the slot only when the counter has not moved for
//! [`SlotTiming::timeout`]. A holder on the reader's own host, boot and PID
//! namespace whose process is gone ([`Holder::certainly_dead`]) loses its
//! slots at once. A crashed engine therefore leaks nothing; an engine paused
//! for longer than the timeout loses its slots (its commands, if still
//! running, then overlap the new holders': the timeout is the trade-off).
//!
//! A launch rate of N per interval is N launch keys: a launch takes one
//! whose latest record this engine has watched unchanged for the interval
//! (or, for its own, wrote at least the interval ago), by put-if-absent of
//! the next generation. A record cannot be seen before it was written, so
//! any window of one interval holds at most one take of each key: at most N
//! launches, whichever engines and clocks.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::holder::Holder;
use crate::store::key::validate_segment;

const POOLS: &str = "_pools";
const ENGINES: &str = "_engines";

/// How often an engine beats, and after how long without a beat its slots
/// are taken by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotTiming {
    /// Between two heartbeats.
    pub beat: Duration,
    /// A holder whose beat did not move for this long (on the reader's
    /// clock) loses its slots.
    pub timeout: Duration,
}

impl Default for SlotTiming {
    fn default() -> SlotTiming {
        SlotTiming {
            beat: Duration::from_secs(1),
            timeout: Duration::from_secs(15),
        }
    }
}

impl SlotTiming {
    /// Beats five times per `timeout`, at most once a second; `None` under
    /// 500ms, where scheduling delays would look like dead engines.
    pub fn with_timeout(timeout: Duration) -> Option<SlotTiming> {
        if timeout < Duration::from_millis(500) {
            return None;
        }
        Some(SlotTiming {
            beat: (timeout / 5).min(Duration::from_secs(1)),
            timeout,
        })
    }
}

/// Whether a slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotState {
    /// An engine holds it while a command runs.
    Held,
    /// Given back (or never taken).
    Free,
}

/// One generation of a slot (or of a launch key): who wrote it and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// Held or free.
    pub state: SlotState,
    /// The engine that wrote this generation.
    pub holder: Holder,
    /// What for ("task partition"), evidence for people: the attempt that
    /// took the slot from the warehouse (its engine may keep the slot for
    /// its next attempts without a new record, `exec::pool`).
    pub what: String,
    /// The writer's wall clock, evidence for people (never compared).
    pub at: String,
    /// The engine whose hold this generation ended without its word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimed_from: Option<String>,
}

/// A slot this engine holds; [`GlobalPool::release`] gives it back.
#[derive(Debug, PartialEq, Eq)]
pub struct HeldSlot {
    slot: u32,
    generation: u64,
    /// Taken before the last look that found `generation` the slot's
    /// highest (the take's own write and listing, or [`GlobalPool::still_held`]'s),
    /// on this host's clock ([`since_boot`]).
    verified: Duration,
    /// Taken from an engine that died on this host: what it left running
    /// here must stop before the slot is used (a task's command dies with
    /// its engine; an escaped descendant would not).
    pub from_dead_neighbour: bool,
}

impl HeldSlot {
    /// The slot's number in its pool.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The generation of the slot's record that made it this engine's.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// What an engine last saw of another's heartbeat, and since when.
#[derive(Debug, Clone, Copy)]
struct Seen {
    beat: Option<u64>,
    since: Instant,
}

/// The slots (and launch rate) of one pool in one engine process.
pub struct GlobalPool {
    backend: Arc<dyn Backend>,
    pool: String,
    slots: u32,
    rate: Option<(u32, Duration)>,
    timing: SlotTiming,
    me: Holder,
    /// The warehouse, as [`held_here`] tells warehouses apart.
    scope: String,
    /// Other engines' heartbeats as this process watches them.
    beats: Mutex<HashMap<String, Seen>>,
    /// Launch keys: key → its latest generation seen here, and when this
    /// process first saw it (or wrote it, for its own).
    launches: Mutex<HashMap<u32, (u64, Instant)>>,
    /// This engine's own heartbeat, as it landed: what lets a kept slot go
    /// without a listing ([`GlobalPool::still_held`]). `None`: always list.
    own_beats: Option<Arc<OwnBeats>>,
    /// Slot → the last generation this process wrote there, and what: a
    /// record is never rewritten, so when it is still the highest it need
    /// not be read back.
    written: Mutex<HashMap<u32, (u64, SlotRecord)>>,
}

/// (warehouse, pool, slot, generation) of a slot generation.
type HeldKey = (String, String, u32, u64);

/// Slot generations this process holds or is taking, over every run in it
/// (two runs of one process on one warehouse share its engine id): a slot
/// held under this engine id but not here (a release whose write failed) is
/// known to be no one's.
fn held_here() -> &'static Mutex<HashSet<HeldKey>> {
    static HELD: std::sync::OnceLock<Mutex<HashSet<HeldKey>>> = std::sync::OnceLock::new();
    HELD.get_or_init(|| Mutex::new(HashSet::new()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn gen_name(g: u64) -> String {
    format!("{g:020}")
}

impl GlobalPool {
    /// The pool `pool` of the warehouse `scope` (its location) with `slots`
    /// slots and an optional rate of `launches` per interval, for the
    /// engine `me`.
    pub fn new(
        backend: Arc<dyn Backend>,
        scope: String,
        pool: &str,
        slots: u32,
        rate: Option<(u32, Duration)>,
        timing: SlotTiming,
        me: Holder,
    ) -> Result<GlobalPool, StoreError> {
        validate_segment(pool)?;
        Ok(GlobalPool {
            backend,
            pool: pool.to_owned(),
            slots,
            rate,
            timing,
            me,
            scope,
            beats: Mutex::new(HashMap::new()),
            launches: Mutex::new(HashMap::new()),
            own_beats: None,
            written: Mutex::new(HashMap::new()),
        })
    }

    /// This pool's engine beats through `own` ([`EngineBeat::start_watched`]):
    /// a kept slot is checked by a listing only when those beats do not
    /// prove it still this engine's.
    pub fn with_own_beats(mut self, own: Arc<OwnBeats>) -> GlobalPool {
        self.own_beats = Some(own);
        self
    }

    /// The warehouse and pool this is, for a process's line of waiters.
    pub fn name(&self) -> (String, String) {
        (self.scope.clone(), self.pool.clone())
    }

    fn key(&self, slot: u32, generation: u64) -> HeldKey {
        (self.scope.clone(), self.pool.clone(), slot, generation)
    }

    fn slot_prefix(&self, slot: u32) -> String {
        format!("{POOLS}/{}/slots/{slot}", self.pool)
    }

    fn launch_prefix(&self, key: u32) -> String {
        format!("{POOLS}/{}/rate/{key}", self.pool)
    }

    fn record(&self, state: SlotState, what: &str, reclaimed_from: Option<String>) -> SlotRecord {
        SlotRecord {
            state,
            holder: self.me.clone(),
            what: what.to_owned(),
            at: crate::clock::now_rfc3339(),
            reclaimed_from,
        }
    }

    /// Takes a free slot, or one whose holder is gone, if there is one now;
    /// `None` if every slot is held by a live engine (the caller waits and
    /// asks again). Never waits.
    pub fn try_acquire(&self, what: &str) -> Result<Option<HeldSlot>, StoreError> {
        // Start at a different slot in each engine, so engines do not all
        // race for slot 0.
        let offset = fastrand::u32(..self.slots.max(1));
        for n in 0..self.slots {
            let slot = (offset + n) % self.slots;
            let prefix = self.slot_prefix(slot);
            let (generation, latest) = self.latest_slot(slot)?;
            let mut from_dead_neighbour = false;
            let reclaimed_from = match &latest {
                None => None,
                Some(r) if r.state == SlotState::Free => None,
                Some(r) if r.holder.engine_id == self.me.engine_id => {
                    if lock(held_here()).contains(&self.key(slot, generation)) {
                        continue; // another attempt of this engine runs in it
                    }
                    // Ours by a release that did not land: no one's.
                    Some(r.holder.engine_id.clone())
                }
                Some(r) => {
                    if r.holder.certainly_dead() {
                        from_dead_neighbour = true;
                    } else if !self.silent(&r.holder)? {
                        continue;
                    }
                    Some(r.holder.engine_id.clone())
                }
            };
            let record = self.record(SlotState::Held, what, reclaimed_from);
            let next = generation + 1;
            // Noted as this process's before it exists: another thread of
            // this engine that reads it must not take it for a leaked one.
            // Already noted: another thread of this engine is taking this
            // very generation; leave it the slot.
            if !lock(held_here()).insert(self.key(slot, next)) {
                continue;
            }
            // Before the write and the listing that confirms it.
            let verified = since_boot();
            let won = write_next(&*self.backend, &prefix, next, &record);
            if !matches!(won, Ok(true)) {
                lock(held_here()).remove(&self.key(slot, next));
            }
            if won? {
                lock(&self.written).insert(slot, (next, record.clone()));
                if let (true, Some(gone)) = (from_dead_neighbour, &record.reclaimed_from) {
                    // Its heartbeat will never move again: collected (best
                    // effort; an engine elsewhere leaves its two beat keys).
                    let _ = self.backend.delete_prefix(&format!("{ENGINES}/{gone}"));
                }
                return Ok(Some(HeldSlot {
                    slot,
                    generation: next,
                    verified,
                    from_dead_neighbour,
                }));
            }
        }
        Ok(None)
    }

    /// Gives a slot back. A slot someone reclaimed meanwhile (this engine
    /// was taken for dead) is theirs: nothing to do.
    // Taken by value: a slot released cannot be released again.
    #[allow(clippy::needless_pass_by_value)]
    pub fn release(&self, held: HeldSlot, what: &str) -> Result<(), StoreError> {
        lock(held_here()).remove(&self.key(held.slot, held.generation));
        let record = self.record(SlotState::Free, what, None);
        let next = held.generation + 1;
        let bytes = encode(&self.slot_prefix(held.slot), &record)?;
        // One put, no listing after it (unlike a take): a release that
        // recreates a collected generation below the highest (someone
        // reclaimed the slot and moved on twice meanwhile) changes nothing,
        // as the slot's state is its highest generation's; and collecting
        // old generations is left to the takes, which list anyway.
        let key = format!("{}/{}", self.slot_prefix(held.slot), gen_name(next));
        if self.backend.put_if_absent_volatile(&key, &bytes)? {
            lock(&self.written).insert(held.slot, (next, record));
        }
        Ok(())
    }

    /// The highest generation of `slot` and its record, not read again
    /// when this process wrote it.
    fn latest_slot(&self, slot: u32) -> Result<(u64, Option<SlotRecord>), StoreError> {
        let prefix = self.slot_prefix(slot);
        let Some(generation) = generations(&*self.backend, &prefix)?.pop() else {
            return Ok((0, None));
        };
        if let Some((g, record)) = lock(&self.written).get(&slot) {
            if *g == generation {
                return Ok((generation, Some(record.clone())));
            }
        }
        read_latest(&*self.backend, &prefix, generation)
    }

    /// Whether `held` is still this engine's, for handing it on to another
    /// attempt of this engine without giving it back: its generation is
    /// still the slot's highest (no one reclaimed it while this engine was
    /// taken for dead). No request while this engine's own beats prove that
    /// no other engine can have judged it silent since the slot was last
    /// seen its own ([`OwnBeats::unbroken_since`]); else a listing, no
    /// write. `false`: it is someone else's now, and forgotten here.
    pub fn still_held(&self, held: &mut HeldSlot) -> Result<bool, StoreError> {
        if self
            .own_beats
            .as_ref()
            .is_some_and(|own| own.unbroken_since(held.verified))
        {
            return Ok(true);
        }
        let verified = since_boot();
        let highest = generations(&*self.backend, &self.slot_prefix(held.slot))?.pop();
        if highest == Some(held.generation) {
            held.verified = verified;
            return Ok(true);
        }
        lock(held_here()).remove(&self.key(held.slot, held.generation));
        Ok(false)
    }

    /// Whether another engine's heartbeat has not moved for the timeout, on
    /// this process's clock.
    fn silent(&self, holder: &Holder) -> Result<bool, StoreError> {
        let beat = last_beat(&*self.backend, &holder.engine_id)?;
        let now = Instant::now();
        let mut beats = lock(&self.beats);
        let seen = beats
            .entry(holder.engine_id.clone())
            .or_insert(Seen { beat, since: now });
        if seen.beat != beat {
            *seen = Seen { beat, since: now };
        }
        Ok(now.duration_since(seen.since) >= self.timing.timeout)
    }

    /// Takes one launch of the pool's rate if one is available now (always
    /// for a pool without a rate); `false`: wait and ask again.
    pub fn try_launch(&self, what: &str) -> Result<bool, StoreError> {
        let Some((launches, per)) = self.rate else {
            return Ok(true);
        };
        let offset = fastrand::u32(..launches);
        for n in 0..launches {
            let key = (offset + n) % launches;
            let prefix = self.launch_prefix(key);
            let (generation, latest) = latest(&*self.backend, &prefix)?;
            if latest.is_some() {
                let now = Instant::now();
                let mut seen = lock(&self.launches);
                let (seen_gen, since) = seen.entry(key).or_insert((generation, now));
                if *seen_gen != generation {
                    (*seen_gen, *since) = (generation, now);
                }
                let since = *since;
                drop(seen);
                if now.duration_since(since) < per {
                    continue;
                }
            }
            let record = self.record(SlotState::Held, what, None);
            if write_next(&*self.backend, &prefix, generation + 1, &record)? {
                // From when the write is known to have landed: no other
                // engine can have seen it earlier.
                lock(&self.launches).insert(key, (generation + 1, Instant::now()));
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The highest generation under `prefix` and its record (0 and `None` for
/// none).
fn latest(backend: &dyn Backend, prefix: &str) -> Result<(u64, Option<SlotRecord>), StoreError> {
    let Some(generation) = generations(backend, prefix)?.pop() else {
        return Ok((0, None));
    };
    read_latest(backend, prefix, generation)
}

/// Generation `generation` under `prefix` and its record, the highest when
/// listed; the highest again if it was collected since.
fn read_latest(
    backend: &dyn Backend,
    prefix: &str,
    generation: u64,
) -> Result<(u64, Option<SlotRecord>), StoreError> {
    let key = format!("{prefix}/{}", gen_name(generation));
    match backend.get(&key)? {
        // Slot records are written whole but not fsynced: one that does
        // not parse was torn by its writer's crash, so its holder is gone
        // and the slot is free.
        Some(bytes) => Ok((generation, serde_json::from_slice(&bytes).ok())),
        // Collected between the listing and the read: a newer one exists.
        None => latest(backend, prefix),
    }
}

/// The generations under `prefix`, ascending.
fn generations(backend: &dyn Backend, prefix: &str) -> Result<Vec<u64>, StoreError> {
    let mut gens: Vec<u64> = backend
        .list(prefix)?
        .iter()
        .filter(|n| n.len() == 20)
        .filter_map(|n| n.parse().ok())
        .collect();
    gens.sort_unstable();
    Ok(gens)
}

/// put-if-absent of generation `next`, confirmed still the highest after the
/// write; collects the generations below its predecessor. `false`: another
/// writer got there first.
fn write_next(
    backend: &dyn Backend,
    prefix: &str,
    next: u64,
    record: &SlotRecord,
) -> Result<bool, StoreError> {
    let bytes = encode(prefix, record)?;
    if !backend.put_if_absent_volatile(&format!("{prefix}/{}", gen_name(next)), &bytes)? {
        return Ok(false);
    }
    let gens = generations(backend, prefix)?;
    if gens.last().is_some_and(|&g| g > next) {
        return Ok(false);
    }
    // Collected a batch at a time (one request for S3's DeleteObjects),
    // not one request per write: a few old records only lengthen the
    // listing a little.
    let old: Vec<String> = gens
        .into_iter()
        .filter(|&g| g + 1 < next)
        .map(|g| format!("{prefix}/{}", gen_name(g)))
        .collect();
    if old.len() >= COLLECT_AT {
        backend.delete_keys(&old)?;
    }
    Ok(true)
}

fn encode(prefix: &str, record: &SlotRecord) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(record).map_err(|e| StoreError::Corrupt {
        key: prefix.to_owned(),
        message: e.to_string(),
    })
}

/// Old generations of a slot collected together.
const COLLECT_AT: usize = 8;

/// The engine's latest heartbeat number, `None` if it has none.
fn last_beat(backend: &dyn Backend, engine_id: &str) -> Result<Option<u64>, StoreError> {
    validate_segment(engine_id)?;
    Ok(generations(backend, &format!("{ENGINES}/{engine_id}"))?.pop())
}

/// Time since this host booted, suspended time included (Linux's
/// `CLOCK_BOOTTIME`): a host that sleeps does not stop other engines'
/// clocks, so it must not stop the one an engine judges its own beats by.
/// Elsewhere, a monotonic clock.
pub(crate) fn since_boot() -> Duration {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0 {
            return Duration::new(
                u64::try_from(ts.tv_sec).unwrap_or_default(),
                u32::try_from(ts.tv_nsec).unwrap_or_default(),
            );
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// When this engine's own beats landed, on its own clock: what proves,
/// without a request, that no other engine can have taken a slot of this
/// engine for a dead engine's.
///
/// Another engine takes the slot only once it has seen this engine's
/// highest beat unchanged for [`SlotTiming::timeout`] of its own clock
/// ([`GlobalPool::silent`]): its clock started after the reply to a
/// listing that showed beat `b`, and read again after the reply to a later
/// one that still showed `b`, served at most one request's time
/// ([`Backend::request_timeout`]) before. So between those two listings,
/// more than `timeout − request_timeout` apart (a tenth of `timeout` less,
/// for the two clocks' rates), no beat above `b` landed: a gap at least
/// that long between two consecutive landings of this engine's beats, or
/// since its last one. That gap covers the moment `r` of the reclaimer's
/// decision, and `r` comes after the reclaimer read the generation it
/// replaces, written by this engine after `verified`. So if no gap of the
/// limit ended after `verified` and the last beat landed less than the
/// limit ago, no one has reclaimed it. A landing is known only within its
/// request (between the first send of that beat and the reply confirming
/// it), so a gap is measured from the previous beat's first send to this
/// beat's reply. Beat numbers never repeat in a process, so another
/// engine cannot take a later beat for one it watched in an earlier run.
pub struct OwnBeats {
    /// `None`: the store bounds no request (a local disk), so the reclaimer's
    /// look may be arbitrarily stale and nothing is proved without a listing.
    limit: Option<Duration>,
    landings: Mutex<Landings>,
}

#[derive(Default)]
struct Landings {
    /// First send of the beat not confirmed yet.
    pending: Option<Duration>,
    /// First send of the newest confirmed beat.
    last: Option<Duration>,
    /// Reply to the newest beat that ended a gap of the limit or longer
    /// (the first beat ends one).
    broken: Option<Duration>,
}

impl OwnBeats {
    /// For an engine whose pool slots are reclaimed after `timing.timeout`
    /// of silence, through a store whose requests last `request_timeout`
    /// at most.
    pub fn new(timing: SlotTiming, request_timeout: Option<Duration>) -> OwnBeats {
        let limit = request_timeout
            .and_then(|r| timing.timeout.checked_sub(r + timing.timeout / 10))
            .filter(|l| !l.is_zero());
        OwnBeats {
            limit,
            landings: Mutex::new(Landings::default()),
        }
    }

    fn sending(&self) {
        let now = since_boot();
        lock(&self.landings).pending.get_or_insert(now);
    }

    fn landed(&self) {
        let now = since_boot();
        let mut l = lock(&self.landings);
        let sent = l.pending.take().unwrap_or(now);
        let short = match (self.limit, l.last) {
            (Some(limit), Some(last)) => now.saturating_sub(last) < limit,
            _ => false,
        };
        if !short {
            l.broken = Some(now);
        }
        l.last = Some(sent);
    }

    /// Whether no other engine can have judged this one silent since
    /// `verified` (on [`since_boot`]'s clock).
    pub fn unbroken_since(&self, verified: Duration) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        let l = lock(&self.landings);
        match (l.broken, l.last) {
            (Some(broken), Some(last)) => {
                broken < verified && since_boot().saturating_sub(last) < limit
            }
            _ => false,
        }
    }
}

/// Beat numbers of this process: never repeated, whichever run beats.
static NEXT_BEAT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One engine's heartbeat in the warehouse: beat `n` is the key
/// `_engines/<id>/<n>`; the two newest are kept.
pub struct EngineBeat {
    backend: Arc<dyn Backend>,
    prefix: String,
    next: u64,
    /// This beat's numbers written, the newest last (two at most).
    written: Vec<u64>,
    /// The number of a beat whose put failed: it may have landed.
    unsure: Option<u64>,
    own: Arc<OwnBeats>,
}

impl EngineBeat {
    /// Starts beating for `engine_id` (writes its first beat).
    pub fn start(backend: Arc<dyn Backend>, engine_id: &str) -> Result<EngineBeat, StoreError> {
        EngineBeat::start_watched(
            backend,
            engine_id,
            Arc::new(OwnBeats::new(SlotTiming::default(), None)),
        )
    }

    /// [`EngineBeat::start`], noting in `own` when each beat landed.
    pub fn start_watched(
        backend: Arc<dyn Backend>,
        engine_id: &str,
        own: Arc<OwnBeats>,
    ) -> Result<EngineBeat, StoreError> {
        validate_segment(engine_id)?;
        let mut beat = EngineBeat {
            backend,
            prefix: format!("{ENGINES}/{engine_id}"),
            next: NEXT_BEAT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            written: Vec::with_capacity(3),
            unsure: None,
            own,
        };
        beat.beat()?;
        Ok(beat)
    }

    /// Where this engine's beats are noted as they land.
    pub fn own(&self) -> Arc<OwnBeats> {
        Arc::clone(&self.own)
    }

    /// One heartbeat.
    pub fn beat(&mut self) -> Result<(), StoreError> {
        let n = self.next;
        self.own.sending();
        // A beat that failed is sent again under its number: a first try
        // that landed after all is then found, not written twice.
        self.unsure = Some(n);
        self.backend
            .put_if_absent_volatile(&format!("{}/{}", self.prefix, gen_name(n)), b"")?;
        self.unsure = None;
        self.own.landed();
        self.next = NEXT_BEAT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.written.push(n);
        if self.written.len() > 2 {
            let old = self.written.remove(0);
            // One key: a delete, not a prefix's listing and then a delete.
            self.backend
                .delete(&format!("{}/{}", self.prefix, gen_name(old)))?;
        }
        Ok(())
    }

    /// The engine ends: its heartbeat goes (after it released its slots),
    /// the keys it wrote and the one a failed beat may have left, in one
    /// request on an object store.
    pub fn stop(self) -> Result<(), StoreError> {
        let keys: Vec<String> = self
            .written
            .iter()
            .chain(&self.unsure)
            .map(|&n| format!("{}/{}", self.prefix, gen_name(n)))
            .collect();
        self.backend.delete_known(&self.prefix, &keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::FsBackend;

    fn holder(engine: &str) -> Holder {
        Holder {
            engine_id: engine.into(),
            // Another host: only its heartbeat can tell it is gone.
            host: "elsewhere".into(),
            pid: 1,
            pid_start: None,
            boot_id: None,
            pid_ns: None,
        }
    }

    fn pool(
        backend: &Arc<dyn Backend>,
        engine: &str,
        slots: u32,
        rate: Option<(u32, Duration)>,
        timeout: Duration,
    ) -> GlobalPool {
        GlobalPool::new(
            Arc::clone(backend),
            // One warehouse per backend (tests share the process).
            format!("{:p}", Arc::as_ptr(backend)),
            "p",
            slots,
            rate,
            SlotTiming {
                beat: Duration::from_millis(10),
                timeout,
            },
            holder(engine),
        )
        .unwrap()
    }

    fn backend() -> (tempfile::TempDir, Arc<dyn Backend>) {
        let tmp = tempfile::tempdir().unwrap();
        let backend: Arc<dyn Backend> = Arc::new(FsBackend::new(tmp.path()));
        // Never freed, so no later test's backend gets its address: a
        // pool's scope is that address, and this process's record of the
        // slots it holds (`held_here`) outlives a test that leaves one held.
        std::mem::forget(Arc::clone(&backend));
        (tmp, backend)
    }

    #[test]
    fn two_engines_never_hold_more_than_the_slots() {
        let (_tmp, b) = backend();
        let a = pool(&b, "a", 2, None, Duration::from_secs(60));
        let c = pool(&b, "c", 2, None, Duration::from_secs(60));
        let _beat_a = EngineBeat::start(Arc::clone(&b), "a").unwrap();
        let _beat_c = EngineBeat::start(Arc::clone(&b), "c").unwrap();
        let first = a.try_acquire("t k1").unwrap().expect("a free slot");
        let second = c.try_acquire("t k2").unwrap().expect("a free slot");
        assert_eq!(a.try_acquire("t k3").unwrap(), None);
        assert_eq!(c.try_acquire("t k3").unwrap(), None);
        a.release(first, "t k1").unwrap();
        let third = c
            .try_acquire("t k3")
            .unwrap()
            .expect("the slot a gave back");
        assert_eq!(a.try_acquire("t k4").unwrap(), None);
        c.release(second, "t k2").unwrap();
        c.release(third, "t k3").unwrap();
        assert!(a.try_acquire("t k4").unwrap().is_some());
    }

    // Slot records are not fsynced, so a host crash can leave the
    // newest one torn (empty or cut short); its holder died with that host,
    // so the slot is free, never a pool stuck on a corrupt record.
    #[test]
    fn a_torn_slot_record_is_a_free_slot() {
        let (_tmp, b) = backend();
        let a = pool(&b, "a", 1, None, Duration::from_secs(60));
        let _beat = EngineBeat::start(Arc::clone(&b), "a").unwrap();
        for torn in [&b""[..], b"{\"state\":\"HEL"] {
            let latest = generations(&*b, "_pools/p/slots/0")
                .unwrap()
                .pop()
                .unwrap_or(0);
            assert!(b
                .put_if_absent(&format!("_pools/p/slots/0/{}", gen_name(latest + 1)), torn)
                .unwrap());
            let held = a
                .try_acquire("t k1")
                .unwrap()
                .expect("the torn slot is free");
            assert_eq!(held.generation, latest + 2);
            a.release(held, "t k1").unwrap();
        }
    }

    #[test]
    fn concurrent_engines_race_for_slots() {
        let (_tmp, b) = backend();
        let inside = std::sync::atomic::AtomicU32::new(0);
        let most = std::sync::atomic::AtomicU32::new(0);
        // Three engines of three threads each: threads of one engine race for
        // the same generation too (one once took the other's fresh slot for
        // a leaked one).
        let engines: Vec<GlobalPool> = (0..3)
            .map(|e| pool(&b, &format!("e{e}"), 2, None, Duration::from_secs(60)))
            .collect();
        let _beats: Vec<EngineBeat> = (0..3)
            .map(|e| EngineBeat::start(Arc::clone(&b), &format!("e{e}")).unwrap())
            .collect();
        std::thread::scope(|s| {
            for t in 0..9 {
                let p = &engines[t % 3];
                let (inside, most) = (&inside, &most);
                s.spawn(move || {
                    for _ in 0..15 {
                        let held = loop {
                            if let Some(h) = p.try_acquire("x").unwrap() {
                                break h;
                            }
                            std::thread::yield_now();
                        };
                        let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(1));
                        inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        p.release(held, "x").unwrap();
                    }
                });
            }
        });
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn a_holder_whose_beat_stops_loses_its_slot_after_the_timeout() {
        let (tmp, b) = backend();
        let gone = pool(&b, "gone", 1, None, Duration::from_secs(60));
        let mut beat = EngineBeat::start(Arc::clone(&b), "gone").unwrap();
        let _held = gone.try_acquire("t k1").unwrap().expect("free");
        // A timeout well above a loaded machine's scheduling delays, so a
        // beating holder is never judged silent between two beats.
        let other = pool(&b, "other", 1, None, Duration::from_millis(1000));
        // Beating: never taken, however long.
        let start = Instant::now();
        let mut last_moved_seen = start;
        while start.elapsed() < Duration::from_millis(1500) {
            beat.beat().unwrap();
            // Taken before the look, so the reader's own sighting of the
            // moved beat is no earlier (a late wake-up cannot shorten it).
            last_moved_seen = Instant::now();
            assert_eq!(other.try_acquire("t k2").unwrap(), None);
            std::thread::sleep(Duration::from_millis(50));
        }
        // Silent: taken once the beat has not moved for the timeout on the
        // reader's clock, not before.
        let taken = loop {
            if let Some(h) = other.try_acquire("t k2").unwrap() {
                break h;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let silent = last_moved_seen.elapsed();
        assert!(silent >= Duration::from_millis(1000), "{silent:?}");
        let record: SlotRecord = serde_json::from_slice(
            &b.get(&format!("_pools/p/slots/0/{}", gen_name(taken.generation)))
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record.reclaimed_from.as_deref(), Some("gone"));
        // The late release of the taken-for-dead engine changes nothing.
        gone.release(
            HeldSlot {
                slot: 0,
                generation: 1,
                verified: Duration::ZERO,
                from_dead_neighbour: false,
            },
            "t k1",
        )
        .unwrap();
        assert_eq!(gone.try_acquire("t k3").unwrap(), None);
        // Old generations are collected a batch at a time: not yet.
        other.release(taken, "t k2").unwrap();
        let left: Vec<String> = b.list("_pools/p/slots/0").unwrap();
        assert_eq!(
            left,
            vec![gen_name(1), gen_name(2), gen_name(3)],
            "{:?}",
            tmp.path()
        );
    }

    // Two runs in one process share its engine id: neither takes the
    // other's slot for one whose release did not land.
    #[test]
    fn two_runs_of_one_process_share_the_slots() {
        let (_tmp, b) = backend();
        let first = pool(&b, "same", 1, None, Duration::from_secs(60));
        let second = pool(&b, "same", 1, None, Duration::from_secs(60));
        let held = first.try_acquire("run 1").unwrap().expect("free");
        assert_eq!(second.try_acquire("run 2").unwrap(), None);
        first.release(held, "run 1").unwrap();
        assert!(second.try_acquire("run 2").unwrap().is_some());
    }

    #[test]
    fn a_stale_writer_cannot_take_a_collected_generation() {
        let (_tmp, b) = backend();
        let a = pool(&b, "a", 1, None, Duration::from_secs(60));
        for _ in 0..COLLECT_AT {
            let h = a.try_acquire("x").unwrap().unwrap();
            a.release(h, "x").unwrap();
        }
        // Collected in batches: never more than a batch and the two
        // newest are left, and those two always are.
        let left = generations(&*b, "_pools/p/slots/0").unwrap();
        let newest = 2 * COLLECT_AT as u64;
        assert!(left.len() <= COLLECT_AT + 1, "{left:?}");
        assert_eq!(left[left.len() - 2..], [newest - 1, newest], "{left:?}");
        // Generation 1 was collected; a writer that read a stale listing
        // recreates it, but it is not the highest: not taken.
        assert!(b
            .get("_pools/p/slots/0/00000000000000000001")
            .unwrap()
            .is_none());
        let record = a.record(SlotState::Held, "late", None);
        assert!(!write_next(&*b, "_pools/p/slots/0", 1, &record).unwrap());
    }

    #[test]
    fn a_rate_allows_n_launches_per_interval_across_engines() {
        let (_tmp, b) = backend();
        let per = Duration::from_millis(400);
        let a = pool(&b, "a", 9, Some((2, per)), Duration::from_secs(60));
        let c = pool(&b, "c", 9, Some((2, per)), Duration::from_secs(60));
        let start = Instant::now();
        assert!(a.try_launch("1").unwrap());
        assert!(c.try_launch("2").unwrap());
        assert!(!a.try_launch("3").unwrap());
        assert!(!c.try_launch("3").unwrap());
        // Each engine takes a launch key only after watching it for the
        // interval, or after the interval since it wrote its own.
        let mut taken = Vec::new();
        while taken.len() < 2 {
            for p in [&a, &c] {
                if p.try_launch("later").unwrap() {
                    taken.push(start.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(taken.iter().all(|t| *t >= per), "{taken:?}");
        let unlimited = pool(&b, "u", 1, None, Duration::from_secs(60));
        assert!(unlimited.try_launch("any").unwrap());
    }
}
