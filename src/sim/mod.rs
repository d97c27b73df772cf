//! A deterministic simulator of serve: K engines sharing one warehouse, a
//! month of operation in seconds, and named invariants checked at every
//! step (FoundationDB's and TigerBeetle's way of testing).
//!
//! ```text
//!  seed ─► rng ─► task durations, failures, hangs, late inputs, engine kills
//!           └───► store faults (a write whose reply is lost, a 503, a slow
//!                 request, a listing ended at a page boundary)
//!
//!  event queue (simulated clock: time jumps to the next event)
//!    Wake(engine) ─► serve's real Machine::step(Clock) ─► actions ─► the executor model (engine.rs)
//!    End(attempt) ─► publish through the real token allocation and fenced commit
//!    Kill / Restart(engine) ─► a new Machine from the stored progress (real records)
//!  after every step: the invariants (check.rs) on what the world did
//! ```
//!
//! Real code: serve's decision machine and `due`, serve's records (claims,
//! MISSED, progress), the store's token allocation and fenced commit over
//! the in-memory backend, the failure classification and retry decision
//! (`exec::classify`) with backoff ceilings. Modelled: the process
//! table (durations, exits, hangs), pools (one slot table across engines,
//! a dead engine's slots freed after a lease timeout), readiness (an
//! instance is ready when the upstream periods it overlaps are published
//! and its external input has arrived), a claim's holder liveness (the
//! simulator's process table), the notification outbox (a record per
//! fact, delivered by a sender), and a period's several partitions (one
//! commit per period).

pub mod check;
pub mod engine;
pub mod model;
pub mod report;
pub mod world;

#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::Arc;

use check::Ledger;
use engine::{Attempt, Engine};
use model::Model;
use world::{Faults, FaultyStore};

/// Seconds a dead engine's pool slots stay taken (its heartbeat's lease).
pub const SLOT_LEASE: i64 = 60;
/// Seconds before a crashed engine is started again (its supervisor).
pub const RESTART_AFTER: i64 = 60;

/// A bug planted behind a test-only switch, to prove the simulator sees it.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// The commit accepts a token equal to the committed one.
    FenceEqual,
    /// A claim held by another live engine is taken anyway.
    DoubleClaim,
    /// A period missed while down is run instead.
    CatchUp,
    /// A pool admits one attempt more than its slots.
    OverAdmit,
    /// Some notifications are never written to the outbox.
    DropNotification,
}

/// One simulation.
#[derive(Debug, Clone)]
pub struct Config {
    /// Everything is drawn from it.
    pub seed: u64,
    /// Engines sharing the warehouse.
    pub engines: usize,
    /// Start (seconds since the epoch).
    pub from: i64,
    /// End.
    pub to: i64,
    /// Windows when every engine is down.
    pub down: Vec<(i64, i64)>,
    /// Fault rates.
    pub faults: Faults,
    /// The planted bug, if any.
    #[cfg(test)]
    pub plant: Option<Plant>,
}

impl Config {
    /// A simulation of `engines` engines from `from` to `to`.
    pub fn new(seed: u64, engines: usize, from: i64, to: i64) -> Config {
        Config {
            seed,
            engines: engines.max(1),
            from,
            to,
            down: Vec::new(),
            faults: Faults::default(),
            #[cfg(test)]
            plant: None,
        }
    }

    pub(crate) fn planted(&self, _p: PlantKind) -> bool {
        #[cfg(test)]
        {
            self.plant.and_then(PlantKind::of) == Some(_p)
        }
        #[cfg(not(test))]
        {
            false
        }
    }
}

/// The planted bugs, named in code that exists outside tests too (always
/// `false` there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlantKind {
    DoubleClaim,
    CatchUp,
    OverAdmit,
    DropNotification,
}

#[cfg(test)]
impl PlantKind {
    /// The executor model's switch; `None` for the store's own
    /// (`plant_equal_token`).
    fn of(p: Plant) -> Option<PlantKind> {
        match p {
            Plant::FenceEqual => None,
            Plant::DoubleClaim => Some(PlantKind::DoubleClaim),
            Plant::CatchUp => Some(PlantKind::CatchUp),
            Plant::OverAdmit => Some(PlantKind::OverAdmit),
            Plant::DropNotification => Some(PlantKind::DropNotification),
        }
    }
}

/// What happens next, in the order of equal instants: kills before
/// restarts before everything else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    Down(usize),
    Kill(usize),
    Restart(usize),
    Wake(usize, u32, i64),
    End(u64),
    Retry(u64),
    Expire(String),
    Deliver(String),
}

/// An engine's place: its incarnation and, while it runs, its state.
pub(crate) struct Slot {
    pub(crate) inc: u32,
    pub(crate) live: Option<Engine>,
}

/// Counters the report is made of.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Per task: retries, published late, published within sla.
    pub(crate) retries: Vec<u64>,
    pub(crate) late: Vec<u64>,
    pub(crate) within_sla: Vec<u64>,
    /// Per pool: queue waits (seconds), busy slot-seconds.
    pub(crate) waits: BTreeMap<String, Vec<i64>>,
    pub(crate) busy: BTreeMap<String, i64>,
    pub(crate) crashes: u64,
    pub(crate) kills: u64,
}

/// The simulated world.
pub(crate) struct Sim {
    pub(crate) cfg: Config,
    pub(crate) model: Model,
    pub(crate) rng: fastrand::Rng,
    pub(crate) store: Arc<FaultyStore>,
    pub(crate) now: i64,
    pub(crate) steps: u64,
    events: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    pub(crate) engines: Vec<Slot>,
    pub(crate) queues: BTreeMap<String, VecDeque<u64>>,
    pub(crate) attempts: BTreeMap<u64, Attempt>,
    pub(crate) next_attempt: u64,
    pub(crate) arrivals: BTreeMap<(usize, i64), i64>,
    pub(crate) ledger: Ledger,
    pub(crate) stats: Stats,
}

/// Runs one simulation of `model` to its end.
pub fn run(model: &Model, cfg: &Config) -> report::Report {
    let mut sim = Sim::new(model.clone(), cfg.clone());
    #[cfg(test)]
    crate::store::partition::plant_equal_token(cfg.plant == Some(Plant::FenceEqual));
    sim.go();
    #[cfg(test)]
    crate::store::partition::plant_equal_token(false);
    sim.finish();
    // Only if empty (nothing is staged), and another simulation of this
    // process that still names it creates it again.
    let report = report::Report::of(&sim);
    let _ = std::fs::remove_dir(world::staging_dir());
    report
}

impl Sim {
    fn new(model: Model, cfg: Config) -> Sim {
        let n = model.tasks.len();
        Sim {
            rng: fastrand::Rng::with_seed(cfg.seed),
            store: FaultyStore::new(cfg.seed, &cfg.faults),
            now: cfg.from,
            steps: 0,
            events: BinaryHeap::new(),
            seq: 0,
            engines: (0..cfg.engines)
                .map(|_| Slot { inc: 0, live: None })
                .collect(),
            queues: BTreeMap::new(),
            attempts: BTreeMap::new(),
            next_attempt: 1,
            arrivals: BTreeMap::new(),
            ledger: Ledger::default(),
            stats: Stats {
                retries: vec![0; n],
                late: vec![0; n],
                within_sla: vec![0; n],
                ..Stats::default()
            },
            model,
            cfg,
        }
    }

    /// `ev` at `when`, later by what the store's slow requests of the
    /// event being handled took (its handler was that long in them).
    pub(crate) fn at(&mut self, when: i64, ev: Ev) {
        self.seq += 1;
        let when = when.saturating_add(self.store.delay());
        self.events
            .push(Reverse((when.max(self.now), self.seq, ev)));
    }

    /// Whether any engine runs.
    pub(crate) fn any_live(&self) -> bool {
        self.engines.iter().any(|s| s.live.is_some())
    }

    fn go(&mut self) {
        let (from, to) = (self.cfg.from, self.cfg.to);
        for e in 0..self.engines.len() {
            self.at(from, Ev::Restart(e));
        }
        for (a, b) in self.cfg.down.clone() {
            for e in 0..self.engines.len() {
                self.at(a, Ev::Down(e));
                self.at(b, Ev::Restart(e));
            }
        }
        let kill = self.cfg.faults.kill;
        if kill > 0.0 {
            for e in 0..self.engines.len() {
                let mut t = from;
                loop {
                    // Exponential gaps: kills per engine and day.
                    let gap = -(1.0 - self.rng.f64()).ln() * 86_400.0 / kill;
                    t += (gap as i64).max(1);
                    if t >= to {
                        break;
                    }
                    let back = t + self.rng.i64(30..=1800);
                    self.at(t, Ev::Kill(e));
                    self.at(back, Ev::Restart(e));
                }
            }
        }
        while let Some(Reverse((when, _, ev))) = self.events.pop() {
            if when > to {
                break;
            }
            self.now = when;
            self.ledger.now = when;
            self.store.new_event();
            self.event(ev);
        }
        self.now = to;
        self.ledger.now = to;
    }

    fn event(&mut self, ev: Ev) {
        match ev {
            Ev::Down(e) => {
                self.kill(e);
            }
            Ev::Kill(e) => {
                if self.kill(e) {
                    self.stats.kills += 1;
                }
            }
            Ev::Restart(e) => self.restart(e),
            Ev::Wake(e, inc, at) => {
                let set = self.engines[e].live.as_ref().and_then(|x| x.wake);
                if self.engines[e].inc == inc && set == Some(at) {
                    if let Some(x) = self.engines[e].live.as_mut() {
                        x.wake = None;
                    }
                    let now = self.now;
                    self.feed(e, crate::serve::machine::Input::Clock(now));
                }
            }
            Ev::End(id) => self.ended(id),
            Ev::Retry(id) => self.retry(id),
            Ev::Expire(pool) => {
                self.ledger.free_slot(&pool);
                self.admit(&pool);
            }
            Ev::Deliver(key) => {
                if self.any_live() {
                    *self.ledger.outbox.entry(key).or_default() += 1;
                } else {
                    self.at(self.now + 60, Ev::Deliver(key));
                }
            }
        }
    }

    /// Kills engine `e` (kill -9): its attempts die with it, its slots stay
    /// taken until their lease runs out, its claims stay.
    fn kill(&mut self, e: usize) -> bool {
        let Some(engine) = self.engines[e].live.take() else {
            return false;
        };
        let who = (e, engine.inc);
        let mine: Vec<u64> = self
            .attempts
            .iter()
            .filter(|(_, a)| (a.engine, a.inc) == who)
            .map(|(id, _)| *id)
            .collect();
        for id in mine {
            let a = self.attempts.remove(&id).expect("listed above");
            self.ledger.stop((a.task, a.occ), who);
            let pool = self.model.tasks[a.task].pool.clone();
            if a.started.is_some() {
                self.at(self.now + SLOT_LEASE, Ev::Expire(pool.clone()));
            }
            if let Some(q) = self.queues.get_mut(&pool) {
                q.retain(|x| *x != id);
            }
        }
        true
    }

    fn restart(&mut self, e: usize) {
        if self.engines[e].live.is_some() {
            return;
        }
        if self
            .cfg
            .down
            .iter()
            .any(|(a, b)| *a <= self.now && self.now < *b)
        {
            return;
        }
        self.engines[e].inc += 1;
        let inc = self.engines[e].inc;
        match Engine::open(self, e, inc) {
            Ok(engine) => {
                self.engines[e].live = Some(engine);
                let now = self.now;
                self.feed(e, crate::serve::machine::Input::Clock(now));
            }
            Err(_) => self.crashed(e),
        }
    }

    /// Engine `e` stopped on an error (serve exits): its supervisor starts
    /// it again.
    pub(crate) fn crashed(&mut self, e: usize) {
        self.stats.crashes += 1;
        self.kill(e);
        self.at(self.now + RESTART_AFTER, Ev::Restart(e));
    }

    /// Starts queued attempts of `pool` while it has free slots.
    pub(crate) fn admit(&mut self, pool: &str) {
        let slots = self.model.slots(pool);
        let limit = slots + u32::from(self.cfg.planted(PlantKind::OverAdmit));
        loop {
            let held = self.ledger.held.get(pool).copied().unwrap_or(0);
            if held >= limit {
                return;
            }
            let Some(id) = self.queues.get_mut(pool).and_then(VecDeque::pop_front) else {
                return;
            };
            self.ledger.take_slot(pool, slots);
            self.launch(id);
        }
    }

    /// The end of the run: what every owed period became, and whether
    /// every fact was announced.
    fn finish(&mut self) {
        self.store.faults_on(false);
        let (from, to) = (self.cfg.from, self.cfg.to);
        let open_end = self.cfg.down.iter().any(|(_, b)| *b >= to);
        for t in 0..self.model.tasks.len() {
            let task = self.model.tasks[t].clone();
            let crate::serve::due::Trigger::Period { scheme, .. } = &task.spec.trigger else {
                continue;
            };
            let margin = task.spec.wait
                + (task.timeout + 3600) * i64::from(task.max_attempts)
                + 2 * SLOT_LEASE
                + 2 * RESTART_AFTER
                + 1800;
            let mut o = scheme.containing(from).saturating_sub(2).max(scheme.start);
            loop {
                if scheme.end.is_some_and(|e| o > e) {
                    break;
                }
                let due = task.spec.trigger.due_at(o);
                if due > to - margin {
                    break;
                }
                let down_at_end =
                    open_end && self.cfg.down.iter().any(|(a, b)| *b >= to && due >= *a);
                if due > from && !down_at_end && !self.ledger.ends.contains_key(&(t, o)) {
                    let key = task.spec.trigger.key(o).unwrap_or_default();
                    let w = world::warehouse(&self.store);
                    let claim = crate::serve::record::claim_of(&w, &task.spec.name, &key)
                        .ok()
                        .flatten()
                        .map_or_else(
                            || "no claim".to_owned(),
                            |c| format!("claimed by {}", c.engine),
                        );
                    self.ledger.violate(
                        "published-or-missed-once",
                        format!(
                            "{} {key} (due {}): neither published, MISSED nor failed ({claim})",
                            task.spec.name,
                            crate::serve::instant(due)
                        ),
                    );
                }
                o += 1;
            }
        }
        self.ledger.all_announced(to - 120);
    }
}
