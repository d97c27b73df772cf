//! One simulated engine: serve's real machine, and a model of serve's
//! executor (`serve::run`) that carries its actions out against the
//! simulated world, through serve's real records and the store's real
//! token allocation and fenced commit.

use std::collections::{BTreeMap, VecDeque};

use super::check::{label, End};
use super::{Ev, PlantKind, Sim};
use crate::exec::classify;
use crate::serve::due::Trigger;
use crate::serve::machine::{Action, Elsewhere, Input, Instance, Machine, MissedWhy, Readiness};
use crate::serve::watch::{Resolved, WATCH_EVERY};
use crate::serve::{instant, progress_record, record, trigger_text};
use crate::store::{CommitKind, NewCommit, PublishError, TokenOwner, Warehouse};

/// A running engine.
pub(crate) struct Engine {
    pub(crate) inc: u32,
    pub(crate) machine: Machine,
    pub(crate) warehouse: Warehouse,
    /// When this incarnation started, and the newest occurrence due then
    /// per task: what it may run from before it came up.
    up_since: i64,
    newest_at_up: Vec<Option<i64>>,
    /// The newest occurrence the stored progress named, per task.
    resolve_upto: BTreeMap<usize, i64>,
    lanes: BTreeMap<u64, Lane>,
    checks: BTreeMap<(usize, i64), u32>,
    /// The instant its timer is set for.
    pub(crate) wake: Option<i64>,
}

/// How a lane's claim went.
enum Claim {
    /// Won: it runs here.
    Won,
    /// Taken over from a dead claimer: it runs here unless MISSED.
    TookOver,
    /// A live engine holds it: watched.
    Held(String),
    /// The store failed.
    Lost,
}

struct Lane {
    open: usize,
    published: Vec<String>,
}

/// One attempt of an instance.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) engine: usize,
    pub(crate) inc: u32,
    /// Its lane (0: a catch-up the planted bug started outside any lane).
    lane: u64,
    pub(crate) task: usize,
    pub(crate) occ: i64,
    n: u32,
    force: bool,
    queued: i64,
    pub(crate) started: Option<i64>,
    ok: bool,
    /// Killed at its timeout (a hang, or too slow).
    timed_out: bool,
}

impl Engine {
    /// Engine `e`'s incarnation `inc`, from the stored progress.
    pub(crate) fn open(sim: &Sim, e: usize, inc: u32) -> Result<Engine, String> {
        let _ = e;
        let warehouse = super::world::warehouse(&sim.store);
        let specs: Vec<_> = sim.model.tasks.iter().map(|t| t.spec.clone()).collect();
        let mut done = Vec::new();
        let mut resolve_upto = BTreeMap::new();
        for (i, s) in specs.iter().enumerate() {
            let p = record::progress(&warehouse, &s.name).map_err(|e| e.to_string())?;
            let p = p.filter(|p| p.trigger == trigger_text(&s.trigger));
            if let Some(p) = &p {
                resolve_upto.insert(i, p.newest.unwrap_or(p.occurrence));
            }
            done.push(p.map(|p| p.occurrence));
        }
        let newest_at_up = specs
            .iter()
            .map(|s| match &s.trigger {
                Trigger::Period { .. } => s.trigger.due(None, sim.now).run,
                _ => None,
            })
            .collect();
        Ok(Engine {
            inc,
            machine: Machine::new(specs, done),
            warehouse,
            up_since: sim.now,
            newest_at_up,
            resolve_upto,
            lanes: BTreeMap::new(),
            checks: BTreeMap::new(),
            wake: None,
        })
    }
}

/// The partition key of an occurrence, or `@<instant>` for a firing.
fn key_of(trigger: &Trigger, o: i64) -> String {
    trigger.key(o).unwrap_or_else(|| format!("@{o}"))
}

impl Sim {
    fn engine(&mut self, e: usize) -> Option<&mut Engine> {
        self.engines[e].live.as_mut()
    }

    /// Feeds `input` to engine `e`'s machine and carries out what it says,
    /// answering checks at once; after answers, the clock again.
    pub(crate) fn feed(&mut self, e: usize, input: Input) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let tick = matches!(input, Input::Readiness(..) | Input::Finished { .. });
            let clock = matches!(input, Input::Clock(_));
            let Some(engine) = self.engine(e) else {
                return;
            };
            let actions = engine.machine.step(input);
            self.steps += 1;
            self.ledger.step = self.steps;
            // As serve's executor: occurrences a restart would have called
            // missed that a live engine runs are watched before anything
            // else, and the progress said past them is not stored.
            let mut watch: Vec<Input> = Vec::new();
            for action in actions {
                if let Action::Progress { task, .. } = &action {
                    let held = |i: &Input| matches!(i, Input::ClaimedElsewhere { instance, .. } if instance.task == *task);
                    if watch.iter().any(held) {
                        continue;
                    }
                }
                match self.act(e, action, &mut queue) {
                    Ok(w) => watch.extend(w),
                    Err(_) => {
                        self.crashed(e);
                        return;
                    }
                }
            }
            for w in watch.into_iter().rev() {
                queue.push_front(w);
            }
            if clock {
                self.no_silent_wait(e);
            }
            if tick && queue.is_empty() {
                queue.push_back(Input::Clock(self.now));
            }
        }
    }

    fn no_silent_wait(&mut self, e: usize) {
        let Some(engine) = self.engines[e].live.as_ref() else {
            return;
        };
        let over: Vec<String> = engine
            .machine
            .waiting()
            .filter(|i| i.due_at + engine.machine.tasks()[i.task].wait < self.now)
            .map(|i| {
                let t = &engine.machine.tasks()[i.task];
                format!(
                    "{} {} waits since {}, past its bound of {}s",
                    t.name,
                    key_of(&t.trigger, i.occurrence),
                    instant(i.due_at),
                    t.wait
                )
            })
            .collect();
        for o in over {
            self.ledger.violate("no-silent-wait", o);
        }
    }

    fn act(
        &mut self,
        e: usize,
        action: Action,
        queue: &mut VecDeque<Input>,
    ) -> Result<Option<Input>, String> {
        match action {
            Action::Missed {
                task,
                occurrence,
                due_at,
                why,
            } => return self.missed(e, (task, occurrence), due_at, why),
            Action::Progress { task, done, newest } => {
                let engine = self.engines[e].live.as_ref().expect("fed while live");
                let spec = &engine.machine.tasks()[task];
                let p = progress_record(spec, done, newest, instant(self.now));
                record::set_progress(&engine.warehouse, &p).map_err(|e| e.to_string())?;
            }
            Action::Check(i) => {
                let r = self.readiness(e, &i);
                queue.push_back(Input::Readiness(i, r));
            }
            Action::Watch(i) => {
                let what = self.elsewhere(e, &i);
                if what == Elsewhere::Missed {
                    // As serve's executor: announced again (its recorder
                    // may have died first; the outbox keeps one).
                    let spec = &self.model.tasks[i.task].spec;
                    let key = key_of(&spec.trigger, i.occurrence);
                    self.announce(format!("missed/{}/{key}", spec.name));
                }
                queue.push_back(Input::Watched(i, what));
            }
            Action::Dropped(..) | Action::Exit { .. } => {}
            Action::Start {
                lane,
                instances,
                force,
            } => self.start(e, lane, instances, force, queue),
            Action::WaitUntil(wake) => {
                // One timer per engine, as serve's `recv_timeout`: the
                // newest answer replaces the one before.
                let at = wake.map(|(at, _)| at.max(self.now + 1));
                let inc = self.engines[e].inc;
                let Some(engine) = self.engine(e) else {
                    return Ok(None);
                };
                if engine.wake != at {
                    engine.wake = at;
                    if let Some(at) = at {
                        self.at(at, Ev::Wake(e, inc, at));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Whether an instance's inputs are there: the upstream periods it
    /// overlaps are published, and its external input has come (late for
    /// a share of instances, by up to twice the wait).
    fn readiness(&mut self, e: usize, i: &Instance) -> Readiness {
        let task = &self.model.tasks[i.task];
        let (late, wait) = (self.cfg.faults.late, task.spec.wait.max(1));
        let arrival = *self
            .arrivals
            .entry((i.task, i.occurrence))
            .or_insert_with(|| {
                if late > 0.0 && self.rng.f64() < late {
                    i.due_at + self.rng.i64(1..=2 * wait)
                } else {
                    i.due_at
                }
            });
        let mut missing = None;
        let span = super::model::interval(&task.spec.trigger, i.occurrence);
        for &u in &task.upstream {
            let up = &self.model.tasks[u];
            let needed = match span {
                Some((s, end)) => super::model::covering(&up.spec.trigger, s, end),
                None => None,
            };
            let there = match needed {
                Some(os) => os
                    .iter()
                    .all(|o| matches!(self.ledger.ends.get(&(u, *o)), Some(End::Published(_)))),
                None => self
                    .ledger
                    .ends
                    .iter()
                    .any(|((t, _), end)| *t == u && matches!(end, End::Published(_))),
            };
            if !there {
                missing = Some(format!("upstream {} not published", up.spec.name));
                break;
            }
        }
        if missing.is_none() && arrival <= self.now {
            if let Some(engine) = self.engine(e) {
                engine.checks.remove(&(i.task, i.occurrence));
            }
            return Readiness::Ready;
        }
        let now = self.now;
        let Some(engine) = self.engine(e) else {
            return Readiness::Ready;
        };
        let n = engine.checks.entry((i.task, i.occurrence)).or_insert(0);
        *n += 1;
        let after = crate::exec::readiness::recheck_after(*n).as_secs() as i64;
        match missing {
            // Serve's executor asks again on a timer for an upstream too.
            Some(why) => Readiness::NotYet {
                why,
                again_at: Some(now + after.max(1)),
            },
            None => Readiness::NotYet {
                why: "its input is not there yet".into(),
                again_at: Some(now + after.max(1)),
            },
        }
    }

    /// A lane: claims each instance (serve's record), queues an attempt of
    /// each it won on its pool.
    fn start(
        &mut self,
        e: usize,
        lane: u64,
        instances: Vec<Instance>,
        force: bool,
        queue: &mut VecDeque<Input>,
    ) {
        let mut open = 0;
        for i in instances {
            match self.claim(e, &i) {
                Claim::Won => {}
                // As serve's lane: a dead claimer's instance recorded
                // MISSED is not run.
                Claim::TookOver => {
                    let spec = &self.model.tasks[i.task].spec;
                    let key = key_of(&spec.trigger, i.occurrence);
                    let Some(engine) = self.engines[e].live.as_ref() else {
                        continue;
                    };
                    if record::is_missed(&engine.warehouse, &spec.name, &key).unwrap_or(false) {
                        continue;
                    }
                }
                Claim::Lost => continue,
                Claim::Held(claimer) => {
                    queue.push_back(Input::ClaimedElsewhere {
                        instance: i,
                        claimer,
                        again_at: self.now + WATCH_EVERY,
                    });
                    continue;
                }
            }
            if !force
                && matches!(
                    self.ledger.ends.get(&(i.task, i.occurrence)),
                    Some(End::Published(_))
                )
            {
                // Current: the run plans nothing for it.
                continue;
            }
            open += 1;
            self.begin(e, lane, &i, force);
        }
        let now = self.now;
        if let Some(engine) = self.engine(e) {
            if open == 0 {
                queue.push_back(Input::Finished {
                    lane,
                    published: Vec::new(),
                    interrupted: false,
                    now,
                });
            } else {
                engine.lanes.insert(
                    lane,
                    Lane {
                        open,
                        published: Vec::new(),
                    },
                );
            }
        }
    }

    /// Claims an instance as serve's lane does: won, taken over from a
    /// dead claimer, held by a live engine, or lost to an error.
    fn claim(&mut self, e: usize, i: &Instance) -> Claim {
        let inc = self.engines[e].inc;
        let me = label((e, inc));
        let spec = &self.model.tasks[i.task].spec;
        let (name, key) = (spec.name.clone(), key_of(&spec.trigger, i.occurrence));
        let claim = record::Claim {
            engine: me.clone(),
            holder: None,
            run_id: me,
            at: instant(self.now),
        };
        let Some(engine) = self.engines[e].live.as_ref() else {
            return Claim::Lost;
        };
        let dead = |c: &record::Claim| !self.is_live(&c.engine);
        match record::claim_or_take_over(&engine.warehouse, &name, &key, &claim, dead) {
            Ok(record::Claimed::Won) => Claim::Won,
            Ok(record::Claimed::TookOver(_)) => Claim::TookOver,
            Ok(record::Claimed::Held(_)) if self.cfg.planted(PlantKind::DoubleClaim) => Claim::Won,
            Ok(record::Claimed::Held(c)) => Claim::Held(c.engine),
            Err(_) => Claim::Lost,
        }
    }

    /// What became of an instance another engine claimed, as serve's
    /// `watch::elsewhere` finds it.
    fn elsewhere(&self, e: usize, i: &Instance) -> Elsewhere {
        let again_at = self.now + WATCH_EVERY;
        let spec = &self.model.tasks[i.task].spec;
        let key = key_of(&spec.trigger, i.occurrence);
        let Some(engine) = self.engines[e].live.as_ref() else {
            return Elsewhere::Settled;
        };
        match record::is_missed(&engine.warehouse, &spec.name, &key) {
            Ok(true) => return Elsewhere::Missed,
            Ok(false) => {}
            Err(_) => {
                return Elsewhere::Held {
                    claimer: "unknown".into(),
                    again_at,
                }
            }
        }
        match self.handled(e, i.task, i.occurrence, &key) {
            Resolved::Settled => Elsewhere::Settled,
            Resolved::Claimed(c) => Elsewhere::Held {
                claimer: c.engine,
                again_at,
            },
            Resolved::Open(_) => Elsewhere::Free,
        }
    }

    /// Whether the engine a claim names still runs.
    pub(crate) fn is_live(&self, engine: &str) -> bool {
        self.engines
            .iter()
            .enumerate()
            .any(|(e, s)| s.live.is_some() && label((e, s.inc)) == engine)
    }

    /// An instance starts running on engine `e`: its first attempt queues
    /// on its pool.
    fn begin(&mut self, e: usize, lane: u64, i: &Instance, force: bool) {
        let inc = self.engines[e].inc;
        if let Some(engine) = self.engines[e].live.as_ref() {
            let spec = &engine.machine.tasks()[i.task];
            let newest = engine.newest_at_up[i.task];
            if matches!(spec.trigger, Trigger::Period { .. })
                && i.due_at < engine.up_since
                && newest != Some(i.occurrence)
            {
                let detail = format!(
                    "{} {} (due {}) started by engine {} up since {}",
                    spec.name,
                    key_of(&spec.trigger, i.occurrence),
                    instant(i.due_at),
                    label((e, inc)),
                    instant(engine.up_since)
                );
                self.ledger.violate("no-catch-up", detail);
            }
        }
        let name = self.model.tasks[i.task].spec.name.clone();
        self.ledger.run((i.task, i.occurrence), (e, inc), &name);
        let id = self.next_attempt;
        self.next_attempt += 1;
        self.attempts.insert(
            id,
            Attempt {
                engine: e,
                inc,
                lane,
                task: i.task,
                occ: i.occurrence,
                n: 1,
                force,
                queued: self.now,
                started: None,
                ok: false,
                timed_out: false,
            },
        );
        self.enqueue(id);
    }

    fn enqueue(&mut self, id: u64) {
        let pool = self.model.tasks[self.attempts[&id].task].pool.clone();
        self.queues.entry(pool.clone()).or_default().push_back(id);
        self.admit(&pool);
    }

    /// An attempt takes its slot and runs: its duration and its exit drawn
    /// from the task's model.
    pub(crate) fn launch(&mut self, id: u64) {
        let now = self.now;
        let task = self.model.tasks[self.attempts[&id].task].clone();
        let sigma = (task.p90 / task.p50).max(1.0).ln() / 1.2816;
        let (u1, u2) = (self.rng.f64().max(1e-12), self.rng.f64());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let mut secs = (task.p50 * (sigma * z).exp()).round().max(1.0) as i64;
        let hang = self.rng.f64() < self.cfg.faults.hang;
        let fail = self.rng.f64() < task.fail_rate + self.cfg.faults.fail;
        if hang || secs > task.timeout {
            secs = task.timeout;
        }
        let a = self.attempts.get_mut(&id).expect("queued attempts exist");
        a.started = Some(now);
        a.ok = !hang && !fail && secs < task.timeout;
        a.timed_out = secs >= task.timeout;
        self.stats
            .waits
            .entry(task.pool.clone())
            .or_default()
            .push(now - a.queued);
        *self.stats.busy.entry(task.pool.clone()).or_default() += secs;
        self.at(now + secs, Ev::End(id));
    }

    /// An attempt ended: its slot is free; it publishes, or is retried, or
    /// its instance failed.
    pub(crate) fn ended(&mut self, id: u64) {
        let Some(a) = self.attempts.get(&id).cloned() else {
            return;
        };
        let pool = self.model.tasks[a.task].pool.clone();
        self.ledger.free_slot(&pool);
        self.admit(&pool);
        let ok = a.ok && self.publish(&a);
        if ok {
            self.done(id);
            return;
        }
        // The engine's own decision: retry while attempts last (a lane's
        // run has its budget's floor for its few instances), else held or
        // quarantined.
        let task = &self.model.tasks[a.task];
        let (disposition, class) = if a.timed_out {
            &task.on_timeout
        } else {
            &task.on_fail
        };
        if classify::next(*disposition, a.n, class, || true) == classify::Next::Retry {
            self.stats.retries[a.task] += 1;
            let ceiling = crate::exec::retry::Backoff::ceiling(&class.backoff, (a.n - 1) as i32);
            let delay = self.rng.i64(0..=ceiling.as_secs() as i64).max(1);
            self.at(self.now + delay, Ev::Retry(id));
            return;
        }
        let name = self.model.tasks[a.task].spec.name.clone();
        self.ledger
            .end((a.task, a.occ), End::Failed, &name, a.force);
        self.done(id);
    }

    pub(crate) fn retry(&mut self, id: u64) {
        let Some(a) = self.attempts.get_mut(&id) else {
            return;
        };
        a.n += 1;
        a.queued = self.now;
        a.started = None;
        self.enqueue(id);
    }

    /// Publishes an attempt's candidate: a new token, then the fenced
    /// commit, retried with the same token while the store fails (a
    /// refusal naming this very token is this commit, landed).
    fn publish(&mut self, a: &Attempt) -> bool {
        let task = self.model.tasks[a.task].clone();
        let key = key_of(&task.spec.trigger, a.occ);
        let Some(engine) = self.engines[a.engine].live.as_ref() else {
            return false;
        };
        let store = engine.warehouse.partition(&task.dataset, &key);
        let owner = TokenOwner {
            run_id: label((a.engine, a.inc)),
            task: task.spec.name.clone(),
            attempt: a.n,
        };
        let Ok(token) = store.allocate_token(&owner) else {
            return false;
        };
        // The candidate is complete and its gates passed: it may be shown.
        self.ledger
            .audited
            .insert((task.dataset.clone(), key.clone(), token.get()));
        let mut landed = None;
        for _ in 0..8 {
            let commit = NewCommit {
                token,
                dataset: task.dataset.clone(),
                partition: key.clone(),
                kind: CommitKind::Publish,
                run_id: owner.run_id.clone(),
                task: owner.task.clone(),
                attempt: a.n,
                attempt_dir: store.attempt_key(token),
                data_dir: None,
                files: Vec::new(),
                file_sums: Vec::new(),
                rows: 0,
                digest: format!("sim-{}-{}", task.spec.name, a.occ),
                input_snapshot: serde_json::Value::Null,
                input_snapshot_digest: String::new(),
                code_version: "sim".into(),
                code_fingerprint: None,
            };
            match store.commit(commit) {
                Ok(rec) => {
                    landed = Some(rec.generation.get());
                    break;
                }
                Err(PublishError::Stale {
                    committed,
                    generation,
                    ..
                }) if committed == token => {
                    landed = Some(generation.get());
                    break;
                }
                Err(PublishError::Stale { .. }) => break,
                Err(PublishError::Store(_)) => continue,
            }
        }
        self.store.faults_on(false);
        let log: Vec<(u64, u64)> = store
            .history()
            .unwrap_or_default()
            .iter()
            .map(|r| (r.generation.get(), r.token.get()))
            .collect();
        self.store.faults_on(true);
        self.ledger.log(&task.dataset, &key, &log);
        let Some(generation) = landed else {
            return false;
        };
        self.published(a, &key, generation);
        true
    }

    fn published(&mut self, a: &Attempt, key: &str, generation: u64) {
        let task = self.model.tasks[a.task].clone();
        self.ledger
            .end((a.task, a.occ), End::Published(1), &task.spec.name, a.force);
        if let (Some(sla), Some((_, end))) =
            (task.sla, super::model::interval(&task.spec.trigger, a.occ))
        {
            if self.now > end + sla {
                self.stats.late[a.task] += 1;
            } else {
                self.stats.within_sla[a.task] += 1;
            }
        }
        self.announce(format!("published/{}/{key}/{generation}", task.spec.name));
        if let Some(lane) = self
            .engine(a.engine)
            .and_then(|en| en.lanes.get_mut(&a.lane))
        {
            if !lane.published.contains(&task.spec.name) {
                lane.published.push(task.spec.name.clone());
            }
        }
        if a.lane != 0 {
            let now = self.now;
            let input = Input::Published {
                task: task.spec.name.clone(),
                lane: a.lane,
                now,
            };
            self.feed(a.engine, input);
        }
    }

    /// A durable fact goes to the outbox (put-if-absent by its key), and a
    /// sender delivers it.
    fn announce(&mut self, key: String) {
        self.ledger.fact(key.clone());
        if self.cfg.planted(PlantKind::DropNotification) && self.rng.f64() < 0.1 {
            return;
        }
        if !self.ledger.outbox.contains_key(&key) {
            self.ledger.outbox(key.clone());
            let when = self.now + self.rng.i64(1..=60);
            self.at(when, Ev::Deliver(key));
        }
    }

    /// An instance is done: its lane ends with its last instance.
    fn done(&mut self, id: u64) {
        let Some(a) = self.attempts.remove(&id) else {
            return;
        };
        self.ledger.stop((a.task, a.occ), (a.engine, a.inc));
        let now = self.now;
        let Some(engine) = self.engine(a.engine) else {
            return;
        };
        let Some(lane) = engine.lanes.get_mut(&a.lane) else {
            return;
        };
        lane.open -= 1;
        if lane.open > 0 {
            return;
        }
        let lane = engine.lanes.remove(&a.lane).expect("found above");
        self.feed(
            a.engine,
            Input::Finished {
                lane: a.lane,
                published: lane.published,
                interrupted: false,
                now,
            },
        );
    }

    /// A MISSED occurrence, as serve's executor records it: after a
    /// restart, one published or claimed by a live engine is not missed;
    /// else put-if-absent, announced when new.
    fn missed(
        &mut self,
        e: usize,
        (task, occ): (usize, i64),
        due_at: i64,
        why: MissedWhy,
    ) -> Result<Option<Input>, String> {
        let spec = self.model.tasks[task].spec.clone();
        let Some(key) = spec.trigger.key(occ) else {
            return Ok(None);
        };
        let engine = self.engines[e].live.as_ref().expect("fed while live");
        let resolving = match why {
            MissedWhy::Down => engine.resolve_upto.get(&task).is_some_and(|n| occ <= *n),
            MissedWhy::Waited(_) => true,
        };
        if resolving && self.handled(e, task, occ, &key) == Resolved::Settled {
            return Ok(None);
        }
        let instance = Instance {
            task,
            occurrence: occ,
            due_at,
            why: crate::serve::machine::Why::PeriodEnded,
        };
        // As serve's executor: only the holder of its claim records it
        // MISSED; one held by a live engine is watched.
        if !self.cfg.planted(PlantKind::CatchUp) || why != MissedWhy::Down {
            match self.claim(e, &instance) {
                Claim::Won | Claim::TookOver => {}
                Claim::Held(claimer) => {
                    return Ok(Some(Input::ClaimedElsewhere {
                        instance,
                        claimer,
                        again_at: self.now + WATCH_EVERY,
                    }))
                }
                Claim::Lost => return Err(format!("cannot claim {} {key}", spec.name)),
            }
        }
        if why == MissedWhy::Down && self.cfg.planted(PlantKind::CatchUp) {
            self.begin(e, 0, &instance, false);
            return Ok(None);
        }
        let engine = self.engines[e].live.as_ref().expect("fed while live");
        let m = record::Missed {
            task: spec.name.clone(),
            partition: key.clone(),
            due_at: instant(due_at),
            why: format!("{why:?}"),
            fill: format!("weir run --task {} --partition {key}", spec.name),
            recorded_at: instant(self.now),
        };
        let recorded = record::record_missed(&engine.warehouse, &m);
        // What the store holds now, whatever the reply said (a lost reply
        // recorded it all the same).
        let end = match why {
            MissedWhy::Down => End::MissedDown,
            MissedWhy::Waited(_) => End::MissedWaited,
        };
        if recorded.is_err()
            && self.missed_recorded(&spec.name, &key)
            && !self.ledger.ends.contains_key(&(task, occ))
        {
            self.ledger.end((task, occ), end, &spec.name, false);
            self.ledger.fact(format!("missed/{}/{key}", spec.name));
        }
        let new = recorded.map_err(|e| e.to_string())?;
        if new {
            self.ledger.end((task, occ), end, &spec.name, false);
        }
        // Announced whether new or not, as serve does.
        self.announce(format!("missed/{}/{key}", spec.name));
        Ok(None)
    }

    fn missed_recorded(&self, task: &str, key: &str) -> bool {
        self.store.faults_on(false);
        let w = super::world::warehouse(&self.store);
        let there = record::all_missed(&w)
            .unwrap_or_default()
            .iter()
            .any(|m| m.task == task && m.partition == key);
        self.store.faults_on(true);
        there
    }

    /// Whether an occurrence not run here was published, or is claimed
    /// by a live engine (serve's `watch::resolve`).
    fn handled(&self, e: usize, task: usize, occ: i64, key: &str) -> Resolved {
        // Published, or failed and held for an operator (the run's marker).
        if matches!(
            self.ledger.ends.get(&(task, occ)),
            Some(End::Published(_) | End::Failed)
        ) {
            return Resolved::Settled;
        }
        let Some(engine) = self.engines[e].live.as_ref() else {
            return Resolved::Open(None);
        };
        let name = &self.model.tasks[task].spec.name;
        match record::claim_of(&engine.warehouse, name, key)
            .ok()
            .flatten()
        {
            Some(c) if self.is_live(&c.engine) => Resolved::Claimed(c),
            dead => Resolved::Open(dead),
        }
    }
}
