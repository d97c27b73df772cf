//! Serve's decision machine: events in, actions out, no I/O and no clock
//! of its own, so its policy is unit-tested on a simulated clock. The
//! executor (`serve::run`) does what the actions say and feeds back what
//! happened.
//!
//! ```text
//!  inputs   Clock(now) · Readiness(instance, Ready | NotYet | Failed) · Published(task, lane)
//!           · Finished(lane, published, interrupted) · ClaimedElsewhere(instance, claimer)
//!           · Watched(instance, Held | Free | Settled) · Stop
//!  actions  Missed(down | waited) · Progress · Check(instance) · Dropped · Start(lane, instances)
//!           · Watch(instance) · WaitUntil(instant, what for) · Exit(stopped)
//!
//!  due ──► pending ──Check──► Ready ──► ready ──(next Clock)──► Start(lane) ──► Finished(lane)
//!            │         └─ NotYet: stays pending, asked again when something publishes,
//!            │            or at the instant it names (a sensor's next look, with backoff)
//!            │         └─ Failed: dropped, logged
//!            └─ due_at + wait passed, still not ready ──► Missed(waited)
//! ```
//!
//! **Lanes, not batches.** Every start is a lane of its own, running beside
//! the others: a slow task never holds back another task's due instance
//! (only a shared pool's slots can, inside the runs). Instances of one
//! period key that become ready together share a lane (one run, which
//! orders them); a task without a time dimension has at most one lane
//! running, and what became due meanwhile starts after it.
//!
//! **No catch-up is a rule about downtime.** An occurrence that became due
//! while this machine was up waits for its inputs until its task's `wait`
//! bound, then is MISSED with reason "waited"; after a restart only the
//! newest due occurrence runs and those before it are MISSED with reason
//! "down".
//!
//! **Progress** is a low-water mark: every occurrence at or before
//! `done` is finished (run, or recorded MISSED), and `newest` is the newest
//! due; a restart resolves what lies between (the executor checks what
//! was published or is still claimed by a live engine).
//!
//! **A claim held elsewhere is watched, not forgotten.** Progress is one
//! record per task that every engine sharing the warehouse writes, so an
//! instance another engine claimed stays unfinished here too
//! (`ClaimedElsewhere`): it holds the low-water mark back until it is
//! settled (published, held for an operator, or recorded MISSED). Were it
//! forgotten, the mark would pass it, and its claimer's death would lose it:
//! the claimer's restart counts from the mark. Its claimer owns it while it
//! lives (it is never given up here meanwhile: the claimer may still
//! publish it); once its claimer is certainly dead it is due here again,
//! with its own wait bound: taken over and run within it, MISSED after it.

use super::due::{Due, Trigger};

/// One task as serve sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    /// Its name.
    pub name: String,
    /// What makes it due.
    pub trigger: Trigger,
    /// The tasks it reads from: their publications make a non-period task
    /// due.
    pub upstream: Vec<String>,
    /// Seconds a due instance waits for its inputs before it is given up.
    pub wait: i64,
    /// A schedule's firing runs the command even when nothing changed.
    pub rerun: bool,
}

/// One due occurrence of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The task's index in the machine.
    pub task: usize,
    /// The occurrence: a period's ordinal, a firing's instant, or the
    /// instant an upstream publication was seen.
    pub occurrence: i64,
    /// When it became due.
    pub due_at: i64,
    /// Why it is due, for the decision log.
    pub why: Why,
}

/// Why an instance is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its period ended (plus its delay).
    PeriodEnded,
    /// Its schedule fired.
    Schedule,
    /// An upstream task published.
    Upstream,
}

/// The answer to a [`Action::Check`]: whether an instance's inputs are
/// there. The sensors' `ready` checks answer here too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Start it.
    Ready,
    /// Not yet: asked again when something publishes, and at `again_at`
    /// if given (a sensor's next look).
    NotYet {
        /// Why not, for the decision log.
        why: String,
        /// When to ask again at the latest.
        again_at: Option<i64>,
    },
    /// It cannot run: dropped.
    Failed(String),
}

/// Why an occurrence was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedWhy {
    /// Serve was not running when it was due (no catch-up after downtime).
    Down,
    /// It waited for its inputs this many seconds, its task's bound.
    Waited(i64),
}

/// What the executor tells the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The clock says `now` (woken by a due time, or after anything else):
    /// what is ready starts now.
    Clock(i64),
    /// The readiness of an instance the machine asked about.
    Readiness(Instance, Readiness),
    /// A task of a running lane published a new generation.
    Published {
        /// The task.
        task: String,
        /// Its lane.
        lane: u64,
        /// When.
        now: i64,
    },
    /// A lane ended: the tasks that published something new, and whether
    /// attempts were stopped by a signal.
    Finished {
        /// The lane.
        lane: u64,
        /// Tasks with a new generation.
        published: Vec<String>,
        /// Whether a stop request stopped attempts.
        interrupted: bool,
        /// `now` when it ended.
        now: i64,
    },
    /// A lane found an instance claimed by another engine (or a restart
    /// found one it would have called missed): it is watched until it is
    /// settled or its claimer is dead, first at `again_at`.
    ClaimedElsewhere {
        /// The instance.
        instance: Instance,
        /// The engine that holds its claim.
        claimer: String,
        /// When to look at it.
        again_at: i64,
    },
    /// The answer to an [`Action::Watch`].
    Watched(Instance, Elsewhere),
    /// SIGTERM or SIGINT: admit nothing more.
    Stop,
}

/// What became of an instance claimed by another engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elsewhere {
    /// Its claimer may still run it: looked at again at `again_at`.
    Held {
        /// The engine that holds its claim.
        claimer: String,
        /// When to look again.
        again_at: i64,
    },
    /// Its claimer is certainly dead and it is not settled: due here again.
    Free,
    /// Published, or held for an operator.
    Settled,
    /// Recorded MISSED (by whoever held its claim, who may have died
    /// before announcing it: the executor announces it again).
    Missed,
}

/// What the machine waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeFor {
    /// A task's next occurrence becomes due.
    Due(usize),
    /// A waiting instance's inputs are asked about again.
    Recheck(usize, i64),
    /// A waiting instance reaches its wait bound.
    GiveUp(usize, i64),
    /// An instance claimed elsewhere is looked at again.
    Watch(usize, i64),
}

/// What the machine tells the executor to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record (once) that an occurrence was skipped and will not be run.
    Missed {
        /// The task's index.
        task: usize,
        /// The skipped occurrence.
        occurrence: i64,
        /// When it was due.
        due_at: i64,
        /// Why it was not run.
        why: MissedWhy,
    },
    /// Persist a task's progress.
    Progress {
        /// The task's index.
        task: usize,
        /// Every occurrence at or before this one is finished.
        done: i64,
        /// The newest occurrence due.
        newest: i64,
    },
    /// Find out whether an instance may start (answer with
    /// [`Input::Readiness`]).
    Check(Instance),
    /// An instance cannot run, or was given up.
    Dropped(Instance, String),
    /// Find out what became of an instance claimed by another engine
    /// (answer with [`Input::Watched`]).
    Watch(Instance),
    /// Run these instances in a lane of their own (answer with
    /// [`Input::Finished`]); `force`: the command runs even when its
    /// output is current (a schedule's firing).
    Start {
        /// The lane's number.
        lane: u64,
        /// Its instances.
        instances: Vec<Instance>,
        /// Rerun current instances.
        force: bool,
    },
    /// Nothing to do before this instant (`None`: ever), unless an input
    /// comes; and what it is for.
    WaitUntil(Option<(i64, WakeFor)>),
    /// Serve is done; `stopped`: attempts were stopped by the signal.
    Exit {
        /// Whether attempts were stopped.
        stopped: bool,
    },
}

/// A due instance waiting for an answer or for its inputs.
#[derive(Debug, Clone)]
struct Pending {
    instance: Instance,
    /// Asked since the last change that may make it ready.
    asked: bool,
    /// When to ask again at the latest.
    again_at: Option<i64>,
    /// When it is given up.
    give_up_at: i64,
}

/// An instance another engine claimed, watched until it is settled.
#[derive(Debug, Clone)]
struct Watched {
    instance: Instance,
    claimer: String,
    /// Asked, not answered yet.
    asked: bool,
    again_at: i64,
}

/// The machine's state.
#[derive(Debug)]
pub struct Machine {
    tasks: Vec<TaskSpec>,
    /// The newest occurrence due, per task.
    seen: Vec<Option<i64>>,
    next_at: Vec<Option<i64>>,
    /// When each task entered the machine: what was due before is downtime.
    up_since: Vec<Option<i64>>,
    pending: Vec<Pending>,
    ready: Vec<Instance>,
    /// Running lanes and their instances.
    running: Vec<(u64, Vec<Instance>)>,
    watched: Vec<Watched>,
    next_lane: u64,
    /// The progress said last, per task: said again only when it changes.
    said: Vec<Option<(i64, i64)>>,
    stopping: bool,
    stopped_attempts: bool,
}

impl Machine {
    /// A machine for `tasks`, each with its stored progress (every
    /// occurrence at or before it finished).
    pub fn new(tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) -> Machine {
        let n = tasks.len();
        Machine {
            tasks,
            seen,
            next_at: vec![None; n],
            up_since: vec![None; n],
            pending: Vec::new(),
            ready: Vec::new(),
            running: Vec::new(),
            watched: Vec::new(),
            next_lane: 1,
            said: vec![None; n],
            stopping: false,
            stopped_attempts: false,
        }
    }

    /// The tasks.
    pub fn tasks(&self) -> &[TaskSpec] {
        &self.tasks
    }

    /// Instances due but not ready (for status and the console).
    pub fn waiting(&self) -> impl Iterator<Item = &Instance> {
        self.pending.iter().map(|p| &p.instance)
    }

    /// How many lanes run.
    pub fn lanes(&self) -> usize {
        self.running.len()
    }

    /// Instances claimed by other engines, watched, with their claimers
    /// (for status and the simulator).
    pub fn watched(&self) -> impl Iterator<Item = (&Instance, &str)> {
        self.watched
            .iter()
            .map(|w| (&w.instance, w.claimer.as_str()))
    }

    /// A reloaded manifest's tasks: a task kept with the same trigger keeps
    /// its progress, its waiting, ready and running instances; the others
    /// start afresh (from their stored progress, `seen`).
    pub fn reload(&mut self, tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) {
        let old = std::mem::take(&mut self.tasks);
        let position = |t: &TaskSpec| {
            tasks
                .iter()
                .position(|n| n.name == t.name && n.trigger == t.trigger)
        };
        let map: Vec<Option<usize>> = old.iter().map(position).collect();
        let carried = |v: &[Option<i64>], fresh: &mut Vec<Option<i64>>| {
            for (i, to) in map.iter().enumerate() {
                if let Some(to) = to {
                    fresh[*to] = v[i];
                }
            }
        };
        let mut fresh_seen = seen;
        carried(&self.seen, &mut fresh_seen);
        let mut up_since = vec![None; tasks.len()];
        carried(&self.up_since, &mut up_since);
        self.seen = fresh_seen;
        self.up_since = up_since;
        let remap = |i: &mut Instance| match map[i.task] {
            Some(to) => {
                i.task = to;
                true
            }
            None => false,
        };
        self.pending.retain_mut(|p| remap(&mut p.instance));
        self.ready.retain_mut(remap);
        self.watched.retain_mut(|w| remap(&mut w.instance));
        for (_, lane) in &mut self.running {
            lane.retain_mut(remap);
        }
        self.next_at = vec![None; tasks.len()];
        self.said = vec![None; tasks.len()];
        self.tasks = tasks;
    }

    /// One input, and what to do about it.
    pub fn step(&mut self, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        let now = match input {
            Input::Clock(now) => now,
            Input::Readiness(instance, readiness) => {
                self.answered(&instance, readiness, &mut out);
                return out;
            }
            Input::Published { task, lane, now } => {
                if !self.stopping {
                    self.upstream_published(&[task], lane, now);
                }
                return out;
            }
            Input::Finished {
                lane,
                published,
                interrupted,
                now,
            } => {
                self.stopped_attempts |= interrupted;
                if !self.stopping {
                    self.upstream_published(&published, lane, now);
                }
                self.running.retain(|(l, _)| *l != lane);
                if !published.is_empty() {
                    // What waited for an upstream may be ready now.
                    for p in &mut self.pending {
                        if p.again_at.is_none() {
                            p.asked = false;
                        }
                    }
                }
                now
            }
            Input::ClaimedElsewhere {
                instance,
                claimer,
                again_at,
            } => {
                self.watch(instance, claimer, again_at);
                self.say_progress(&mut out);
                return out;
            }
            Input::Watched(instance, what) => {
                self.watched_answer(&instance, what, &mut out);
                self.say_progress(&mut out);
                return out;
            }
            Input::Stop => {
                self.stopping = true;
                now_exit(self, &mut out);
                return out;
            }
        };
        if self.stopping {
            now_exit(self, &mut out);
            return out;
        }
        self.clock(now, &mut out);
        self.give_up(now, &mut out);
        self.ask(now, &mut out);
        self.start(&mut out);
        self.say_progress(&mut out);
        out.push(Action::WaitUntil(self.wake_at()));
        out
    }

    fn answered(&mut self, instance: &Instance, readiness: Readiness, out: &mut Vec<Action>) {
        let Some(at) = self.pending.iter().position(|p| p.instance == *instance) else {
            return;
        };
        match readiness {
            Readiness::Ready => {
                let p = self.pending.remove(at);
                self.ready.push(p.instance);
            }
            Readiness::NotYet { again_at, .. } => self.pending[at].again_at = again_at,
            Readiness::Failed(why) => {
                let p = self.pending.remove(at);
                out.push(Action::Dropped(p.instance.clone(), why));
                self.say_progress(out);
            }
        }
    }

    fn watch(&mut self, instance: Instance, claimer: String, again_at: i64) {
        let same = |i: &Instance| i.task == instance.task && i.occurrence == instance.occurrence;
        // Its lane runs it no more: only the watch keeps it.
        for (_, lane) in &mut self.running {
            lane.retain(|i| !same(i));
        }
        if self.watched.iter().any(|w| same(&w.instance)) {
            return;
        }
        self.watched.push(Watched {
            instance,
            claimer,
            asked: false,
            again_at,
        });
    }

    fn watched_answer(&mut self, instance: &Instance, what: Elsewhere, out: &mut Vec<Action>) {
        let Some(at) = self.watched.iter().position(|w| w.instance == *instance) else {
            return;
        };
        match what {
            Elsewhere::Held { claimer, again_at } => {
                let w = &mut self.watched[at];
                w.claimer = claimer;
                w.again_at = again_at;
                w.asked = false;
            }
            Elsewhere::Settled | Elsewhere::Missed => {
                self.watched.remove(at);
            }
            Elsewhere::Free => {
                let i = self.watched.remove(at).instance;
                let up = self.up_since[i.task].is_some_and(|up| i.due_at >= up);
                if up {
                    // Due here again, with its own bound: past it, it is
                    // given up (MISSED, naming its dead claimer) at the
                    // next clock.
                    self.admit(i.task, i.occurrence, i.due_at, i.why);
                } else if matches!(self.tasks[i.task].trigger, Trigger::Period { .. }) {
                    // Due while this machine was down: no catch-up here
                    // either (an engine up then takes it over, or it is
                    // MISSED as down).
                    out.push(Action::Missed {
                        task: i.task,
                        occurrence: i.occurrence,
                        due_at: i.due_at,
                        why: MissedWhy::Down,
                    });
                } else {
                    let why = "its claimer died, and it was due before this serve started";
                    out.push(Action::Dropped(i, why.into()));
                }
            }
        }
    }

    /// The next instant something is due, a sensor looks again or a wait
    /// ends.
    fn wake_at(&self) -> Option<(i64, WakeFor)> {
        let due = self
            .next_at
            .iter()
            .enumerate()
            .filter_map(|(t, at)| at.map(|at| (at, WakeFor::Due(t))));
        let pending = self.pending.iter().flat_map(|p| {
            let i = &p.instance;
            let again = p
                .again_at
                .map(|at| (at, WakeFor::Recheck(i.task, i.occurrence)));
            let give_up = (p.give_up_at, WakeFor::GiveUp(i.task, i.occurrence));
            again.into_iter().chain([give_up])
        });
        let watched = self.watched.iter().filter(|w| !w.asked).map(|w| {
            let i = &w.instance;
            (w.again_at, WakeFor::Watch(i.task, i.occurrence))
        });
        due.chain(pending).chain(watched).min_by_key(|(at, _)| *at)
    }

    /// Whether an instance of `task` and `occurrence` is waiting, ready or
    /// running.
    fn known(&self, task: usize, occurrence: i64) -> bool {
        let same = |i: &Instance| i.task == task && i.occurrence == occurrence;
        self.pending.iter().any(|p| same(&p.instance))
            || self.ready.iter().any(same)
            || self.running.iter().any(|(_, l)| l.iter().any(same))
            || self.watched.iter().any(|w| same(&w.instance))
    }

    fn admit(&mut self, task: usize, occurrence: i64, due_at: i64, why: Why) {
        if self.known(task, occurrence) {
            return;
        }
        tracing::debug!(
            task = self.tasks[task].name,
            occurrence,
            due_at,
            why = ?why,
            "occurrence admitted: waits for its inputs to be checked"
        );
        self.pending.push(Pending {
            instance: Instance {
                task,
                occurrence,
                due_at,
                why,
            },
            asked: false,
            again_at: None,
            give_up_at: due_at.saturating_add(self.tasks[task].wait),
        });
    }

    fn clock(&mut self, now: i64, out: &mut Vec<Action>) {
        for task in 0..self.tasks.len() {
            let up_since = *self.up_since[task].get_or_insert(now);
            let trigger = self.tasks[task].trigger.clone();
            let Due {
                run,
                missed,
                seen,
                next_at,
            } = trigger.due(self.seen[task], now);
            for o in missed {
                let due_at = trigger.due_at(o);
                if due_at >= up_since {
                    // Due while serve was up (it was busy): it runs.
                    self.admit(task, o, due_at, Why::PeriodEnded);
                } else {
                    out.push(Action::Missed {
                        task,
                        occurrence: o,
                        due_at,
                        why: MissedWhy::Down,
                    });
                }
            }
            if let Some(o) = run {
                let why = match trigger {
                    Trigger::Period { .. } => Why::PeriodEnded,
                    Trigger::Cron(_) => Why::Schedule,
                    Trigger::Upstream => Why::Upstream,
                };
                if why == Why::Schedule {
                    // A firing covers every partition the older one would
                    // have run: the newer one replaces it.
                    self.pending.retain(|p| {
                        let superseded = p.instance.task == task;
                        if superseded {
                            out.push(Action::Dropped(
                                p.instance.clone(),
                                format!(
                                    "superseded by the schedule's firing at {}",
                                    super::due::instant(o)
                                ),
                            ));
                        }
                        !superseded
                    });
                }
                self.admit(task, o, trigger.due_at(o), why);
            }
            self.seen[task] = seen;
            self.next_at[task] = next_at;
        }
    }

    /// Instances still not ready at their wait bound are given up.
    fn give_up(&mut self, now: i64, out: &mut Vec<Action>) {
        let tasks = &self.tasks;
        self.pending.retain(|p| {
            if p.give_up_at > now {
                return true;
            }
            let i = p.instance.clone();
            let wait = tasks[i.task].wait;
            if matches!(tasks[i.task].trigger, Trigger::Period { .. }) {
                out.push(Action::Missed {
                    task: i.task,
                    occurrence: i.occurrence,
                    due_at: i.due_at,
                    why: MissedWhy::Waited(wait),
                });
            } else {
                let why = format!("gave up waiting after {}", super::due::span(wait));
                out.push(Action::Dropped(i, why));
            }
            false
        });
    }

    fn ask(&mut self, now: i64, out: &mut Vec<Action>) {
        for p in &mut self.pending {
            if p.again_at.is_some_and(|t| t <= now) {
                p.asked = false;
                p.again_at = None;
            }
            if !p.asked {
                p.asked = true;
                out.push(Action::Check(p.instance.clone()));
            }
        }
        for w in &mut self.watched {
            if !w.asked && w.again_at <= now {
                w.asked = true;
                out.push(Action::Watch(w.instance.clone()));
            }
        }
    }

    /// A task published in `lane`: the non-period tasks reading it become
    /// due, except those of that same lane (its run ordered them after
    /// their upstream, so they read it).
    fn upstream_published(&mut self, published: &[String], lane: u64, now: i64) {
        let in_lane: Vec<usize> = self
            .running
            .iter()
            .filter(|(l, _)| *l == lane)
            .flat_map(|(_, is)| is.iter().map(|i| i.task))
            .collect();
        for task in 0..self.tasks.len() {
            let spec = &self.tasks[task];
            if matches!(spec.trigger, Trigger::Period { .. })
                || in_lane.contains(&task)
                || !spec.upstream.iter().any(|u| published.contains(u))
                || self.pending.iter().any(|p| p.instance.task == task)
                || self.ready.iter().any(|i| i.task == task)
            {
                continue;
            }
            self.admit(task, now, now, Why::Upstream);
        }
    }

    /// Starts what is ready: instances of one period key together, every
    /// other task in a lane of its own, none of a non-period task while
    /// one of its lanes runs.
    fn start(&mut self, out: &mut Vec<Action>) {
        let busy = |m: &Machine, task: usize| {
            !matches!(m.tasks[task].trigger, Trigger::Period { .. })
                && m.running
                    .iter()
                    .any(|(_, l)| l.iter().any(|i| i.task == task))
        };
        // (period key, or the task of a non-period instance; forced).
        type Group = (Option<String>, usize, bool);
        let mut lanes: Vec<(Group, Vec<Instance>)> = Vec::new();
        let ready = std::mem::take(&mut self.ready);
        for i in ready {
            if busy(self, i.task) {
                tracing::debug!(
                    task = self.tasks[i.task].name,
                    occurrence = i.occurrence,
                    why = ?i.why,
                    "ready, but held back: the task's previous lane still runs"
                );
                self.ready.push(i);
                continue;
            }
            let spec = &self.tasks[i.task];
            let force = i.why == Why::Schedule && spec.rerun;
            let key = spec.trigger.key(i.occurrence);
            // Period instances of one key share a lane; others go alone.
            let group = (key.clone(), if key.is_some() { 0 } else { i.task }, force);
            match lanes.iter_mut().find(|(g, _)| *g == group) {
                Some((_, is)) => is.push(i),
                None => lanes.push((group, vec![i])),
            }
        }
        for ((_, _, force), instances) in lanes {
            let lane = self.next_lane;
            self.next_lane += 1;
            self.running.push((lane, instances.clone()));
            out.push(Action::Start {
                lane,
                instances,
                force,
            });
        }
    }

    /// Each task's progress, said when it changed.
    fn say_progress(&mut self, out: &mut Vec<Action>) {
        for task in 0..self.tasks.len() {
            let Some(newest) = self.seen[task] else {
                continue;
            };
            if matches!(self.tasks[task].trigger, Trigger::Upstream) {
                continue;
            }
            let unfinished = self
                .pending
                .iter()
                .map(|p| &p.instance)
                .chain(&self.ready)
                .chain(self.running.iter().flat_map(|(_, l)| l))
                .chain(self.watched.iter().map(|w| &w.instance))
                .filter(|i| i.task == task && i.why != Why::Upstream)
                .map(|i| i.occurrence)
                .min();
            let done = unfinished.map_or(newest, |o| o - 1);
            if self.said[task] != Some((done, newest)) {
                self.said[task] = Some((done, newest));
                out.push(Action::Progress { task, done, newest });
            }
        }
    }
}

/// A stopping machine exits once no lane runs.
fn now_exit(m: &Machine, out: &mut Vec<Action>) {
    if m.running.is_empty() {
        out.push(Action::Exit {
            stopped: m.stopped_attempts,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::Schedule;
    use crate::partition::{Grain, TimeScheme, Zone};

    fn at(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().unwrap().as_second()
    }

    fn scheme(grain: Grain, first: &str) -> TimeScheme {
        let probe = TimeScheme::probe(grain, Zone::utc(), first);
        let start = probe.parse(first).unwrap();
        probe.with_range(start, None)
    }

    fn task(name: &str, grain: Grain, first: &str, upstream: &[&str], wait: i64) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            trigger: Trigger::Period {
                scheme: scheme(grain, first),
                delay: 0,
            },
            upstream: upstream.iter().map(|s| s.to_string()).collect(),
            wait,
            rerun: true,
        }
    }

    fn hourly(name: &str, upstream: &[&str]) -> TaskSpec {
        task(name, Grain::Hourly, "2026-09-20T00", upstream, 3600)
    }

    fn key(m: &Machine, i: &Instance) -> String {
        m.tasks()[i.task]
            .trigger
            .key(i.occurrence)
            .unwrap_or_else(|| "all".into())
    }

    type Ready<'a> = &'a dyn Fn(&str, &str, &Sim) -> Readiness;

    /// Drives the machine as the executor does: every check answered with
    /// `ready(task name, key)`, then a clock tick; a lane finishes at once
    /// with everything published, unless one of its tasks is `held`
    /// (finished by [`Sim::release`]). Records the lanes started (task,
    /// key), the missed (task, key, why) and the progress.
    struct Sim {
        m: Machine,
        lanes: Vec<Vec<(String, String)>>,
        forced: Vec<bool>,
        missed: Vec<(String, String, MissedWhy)>,
        dropped: Vec<(String, String)>,
        progress: Vec<Option<(i64, i64)>>,
        wait: Option<(i64, WakeFor)>,
        exit: Option<bool>,
        held: Vec<String>,
        running: Vec<(u64, Vec<String>)>,
        now: i64,
    }

    impl Sim {
        fn new(tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) -> Sim {
            let n = tasks.len();
            Sim {
                m: Machine::new(tasks, seen),
                lanes: Vec::new(),
                forced: Vec::new(),
                missed: Vec::new(),
                dropped: Vec::new(),
                progress: vec![None; n],
                wait: None,
                exit: None,
                held: Vec::new(),
                running: Vec::new(),
                now: 0,
            }
        }

        fn at(&mut self, now: i64, ready: Ready<'_>) {
            self.now = now;
            self.feed(Input::Clock(now), ready);
        }

        fn feed(&mut self, input: Input, ready: Ready<'_>) {
            let mut queue = std::collections::VecDeque::from([input]);
            while let Some(input) = queue.pop_front() {
                let tick = matches!(input, Input::Readiness(..) | Input::Finished { .. });
                for action in self.m.step(input) {
                    self.act(action, ready, &mut queue);
                }
                if tick && queue.is_empty() {
                    queue.push_back(Input::Clock(self.now));
                }
            }
        }

        fn act(
            &mut self,
            action: Action,
            ready: Ready<'_>,
            queue: &mut std::collections::VecDeque<Input>,
        ) {
            match action {
                Action::Missed {
                    task,
                    occurrence,
                    why,
                    ..
                } => {
                    let t = &self.m.tasks()[task];
                    let k = t.trigger.key(occurrence).unwrap();
                    self.missed.push((t.name.clone(), k, why));
                }
                Action::Progress { task, done, newest } => {
                    self.progress[task] = Some((done, newest))
                }
                Action::Check(i) => {
                    let name = self.m.tasks()[i.task].name.clone();
                    let r = ready(&name, &key(&self.m, &i), self);
                    queue.push_back(Input::Readiness(i, r));
                }
                Action::Dropped(i, _) => {
                    let name = self.m.tasks()[i.task].name.clone();
                    self.dropped.push((name, key(&self.m, &i)));
                }
                Action::Start {
                    lane,
                    instances,
                    force,
                } => {
                    let names: Vec<(String, String)> = instances
                        .iter()
                        .map(|i| (self.m.tasks()[i.task].name.clone(), key(&self.m, i)))
                        .collect();
                    let tasks: Vec<String> = names.iter().map(|(t, _)| t.clone()).collect();
                    self.lanes.push(names);
                    self.forced.push(force);
                    if tasks.iter().any(|t| self.held.contains(t)) {
                        self.running.push((lane, tasks));
                    } else {
                        queue.push_back(Input::Finished {
                            lane,
                            published: tasks,
                            interrupted: false,
                            now: self.now,
                        });
                    }
                }
                Action::WaitUntil(t) => self.wait = t,
                Action::Watch(_) => {}
                Action::Exit { stopped } => self.exit = Some(stopped),
            }
        }

        /// The held lanes of `task` finish, everything published.
        fn release(&mut self, task: &str, ready: Ready<'_>) {
            self.held.retain(|t| t != task);
            let (done, still): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
                .into_iter()
                .partition(|(_, ts)| ts.iter().any(|t| t == task));
            self.running = still;
            for (lane, published) in done {
                let now = self.now;
                self.feed(
                    Input::Finished {
                        lane,
                        published,
                        interrupted: false,
                        now,
                    },
                    ready,
                );
            }
        }

        fn published(&self, task: &str, key: &str) -> bool {
            self.lanes
                .iter()
                .flatten()
                .any(|(t, k)| t == task && k == key)
        }

        fn count(&self, task: &str) -> usize {
            self.lanes
                .iter()
                .flatten()
                .filter(|(t, _)| t == task)
                .count()
        }
    }

    fn always(_: &str, _: &str, _: &Sim) -> Readiness {
        Readiness::Ready
    }

    fn never(_: &str, _: &str, _: &Sim) -> Readiness {
        Readiness::NotYet {
            why: "no input".into(),
            again_at: None,
        }
    }

    #[test]
    fn catch_up_is_impossible_each_period_runs_once_as_it_ends() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.at(at("2026-09-20T10:00:05Z"), &always);
        assert_eq!(sim.lanes, [[("a".into(), "2026-09-20T09".into())]]);
        assert_eq!(
            sim.wait,
            Some((at("2026-09-20T11:00:00Z"), WakeFor::Due(0)))
        );
        // Woken early, and again at the due time: one new lane.
        sim.at(at("2026-09-20T10:30:00Z"), &always);
        sim.at(at("2026-09-20T11:00:00Z"), &always);
        assert_eq!(sim.lanes.len(), 2);
        assert_eq!(sim.lanes[1], [("a".into(), "2026-09-20T10".into())]);
        assert!(sim.missed.is_empty());
        let o = sim.m.seen[0].unwrap();
        assert_eq!(sim.progress[0], Some((o, o)));
    }

    #[test]
    fn a_restart_after_downtime_runs_the_newest_and_records_the_rest_missed_as_down() {
        let seen = scheme(Grain::Hourly, "2026-09-20T00")
            .parse("2026-09-20T03")
            .unwrap();
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![Some(seen)]);
        // Three days later.
        sim.at(at("2026-09-23T00:00:01Z"), &always);
        assert_eq!(sim.lanes, [[("a".into(), "2026-09-22T23".into())]]);
        assert_eq!(sim.missed.len(), 20 + 24 + 23);
        assert_eq!(
            sim.missed[0],
            ("a".into(), "2026-09-20T04".into(), MissedWhy::Down)
        );
        assert!(sim.missed.iter().all(|(_, _, w)| *w == MissedWhy::Down));
        assert!(!sim.missed.iter().any(|(_, k, _)| k == "2026-09-22T23"));
        // None of the missed ever runs, however long serve goes on.
        for h in 1..5 {
            sim.at(at("2026-09-23T00:00:00Z") + h * 3600, &always);
        }
        assert_eq!(sim.lanes.len(), 5);
        assert!(!sim.published("a", "2026-09-20T04"));
        assert_eq!(sim.missed.len(), 67);
    }

    #[test]
    fn periods_due_while_serve_was_busy_all_run_none_is_missed() {
        // The executor was late (a long pause): three periods came due
        // while serve was up, all within their wait: each runs, nothing is
        // recorded missed.
        let a = task("a", Grain::Hourly, "2026-09-20T00", &[], 6 * 3600);
        let mut sim = Sim::new(vec![a], vec![None]);
        sim.at(at("2026-09-20T10:00:00Z"), &always);
        sim.at(at("2026-09-20T13:00:30Z"), &always);
        assert!(sim.missed.is_empty(), "{:?}", sim.missed);
        for h in ["09", "10", "11", "12"] {
            assert!(sim.published("a", &format!("2026-09-20T{h}")), "{h}");
        }
    }

    #[test]
    fn a_slow_task_never_costs_a_fast_one_its_periods() {
        // `slow` (its own pool) takes 150 s; `fast` is minutely. While
        // `slow` runs, every minute of `fast` starts on time.
        let fast = task("fast", Grain::Minutely(1), "2026-09-20T10:00", &[], 600);
        let slow = task("slow", Grain::Hourly, "2026-09-20T00", &[], 3600);
        let mut sim = Sim::new(vec![fast, slow], vec![None, None]);
        sim.held.push("slow".into());
        sim.at(at("2026-09-20T11:00:00Z"), &always);
        assert_eq!(sim.m.lanes(), 1, "slow still runs");
        for m in 1..=3 {
            sim.at(at("2026-09-20T11:00:00Z") + m * 60, &always);
        }
        assert!(sim.missed.is_empty(), "{:?}", sim.missed);
        for m in ["10:59", "11:00", "11:01", "11:02"] {
            assert!(sim.published("fast", &format!("2026-09-20T{m}")), "{m}");
        }
        // Progress of `slow` does not pass its running hour until it ends.
        let hour = sim.m.seen[1].unwrap();
        assert_eq!(sim.progress[1], Some((hour - 1, hour)));
        sim.release("slow", &always);
        assert_eq!(sim.progress[1], Some((hour, hour)));
    }

    #[test]
    fn late_data_inside_the_wait_bound_publishes_and_a_newer_period_does_not_overtake_it() {
        // Minutely, wait 10 minutes: the input of 10:00 lands at 10:03.
        let a = task("a", Grain::Minutely(1), "2026-09-20T10:00", &[], 600);
        let mut sim = Sim::new(vec![a], vec![None]);
        let late = |_: &str, key: &str, sim: &Sim| {
            if key == "2026-09-20T10:00" && sim.now < at("2026-09-20T10:03:10Z") {
                Readiness::NotYet {
                    why: "ready file missing".into(),
                    again_at: Some(sim.now + 20),
                }
            } else {
                Readiness::Ready
            }
        };
        let mut t = at("2026-09-20T10:01:00Z");
        while t <= at("2026-09-20T10:05:00Z") {
            sim.at(t, &late);
            t += 10;
        }
        assert!(sim.missed.is_empty(), "{:?}", sim.missed);
        assert!(sim.published("a", "2026-09-20T10:00"));
        assert!(sim.published("a", "2026-09-20T10:03"));
        // The newer minutes did not wait for the late one.
        let order: Vec<&str> = sim.lanes.iter().map(|l| l[0].1.as_str()).collect();
        assert_eq!(order[0], "2026-09-20T10:01");
    }

    #[test]
    fn an_instance_never_ready_is_missed_at_its_wait_bound_with_the_reason() {
        let a = task("a", Grain::Minutely(1), "2026-09-20T10:00", &[], 300);
        let mut sim = Sim::new(vec![a], vec![None]);
        sim.at(at("2026-09-20T10:01:00Z"), &never);
        assert_eq!(sim.m.waiting().count(), 1);
        sim.at(at("2026-09-20T10:05:59Z"), &never);
        assert!(
            !sim.missed.iter().any(|(_, k, _)| k == "2026-09-20T10:00"),
            "{:?}",
            sim.missed
        );
        sim.at(at("2026-09-20T10:06:00Z"), &never);
        assert!(sim.missed.contains(&(
            "a".into(),
            "2026-09-20T10:00".into(),
            MissedWhy::Waited(300)
        )));
        assert!(sim.lanes.is_empty());
    }

    #[test]
    fn serve_wakes_for_a_give_up_when_nothing_comes_before_it() {
        let a = task("a", Grain::Daily, "2026-09-20", &[], 7200);
        let mut sim = Sim::new(vec![a], vec![None]);
        sim.at(at("2026-09-21T00:00:01Z"), &never);
        let (when, what) = sim.wait.unwrap();
        assert_eq!(when, at("2026-09-21T02:00:00Z"));
        assert!(matches!(what, WakeFor::GiveUp(0, _)), "{what:?}");
        sim.at(when, &never);
        assert_eq!(
            sim.missed,
            [("a".into(), "2026-09-20".into(), MissedWhy::Waited(7200))]
        );
        assert_eq!(sim.wait.unwrap().1, WakeFor::Due(0));
    }

    #[test]
    fn a_stop_admits_nothing_more_and_exits_after_the_running_lanes() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.held.push("a".into());
        sim.at(at("2026-09-20T10:00:00Z"), &always);
        assert_eq!(sim.m.lanes(), 1);
        assert!(sim.m.step(Input::Stop).is_empty());
        // A due time passing meanwhile starts nothing.
        assert!(sim
            .m
            .step(Input::Clock(at("2026-09-20T12:00:00Z")))
            .is_empty());
        let (lane, _) = sim.running[0].clone();
        let end = sim.m.step(Input::Finished {
            lane,
            published: vec![],
            interrupted: true,
            now: at("2026-09-20T12:00:01Z"),
        });
        assert_eq!(end, [Action::Exit { stopped: true }]);
        let mut idle = Machine::new(vec![hourly("a", &[])], vec![None]);
        assert_eq!(idle.step(Input::Stop), [Action::Exit { stopped: false }]);
    }

    #[test]
    fn a_failed_lane_is_not_retried_by_serve_and_the_next_period_still_runs() {
        // Retries belong to the lane's run (its retry classes and budget).
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.at(at("2026-09-20T10:00:00Z"), &always);
        sim.at(at("2026-09-20T10:30:00Z"), &always);
        assert_eq!(sim.lanes.len(), 1);
        sim.at(at("2026-09-20T11:00:00Z"), &always);
        assert_eq!(sim.lanes.len(), 2);
    }

    #[test]
    fn a_sensor_not_ready_is_asked_again_when_it_says_and_starts_then() {
        let mut m = Machine::new(vec![hourly("a", &[])], vec![None]);
        let actions = m.step(Input::Clock(at("2026-09-20T10:00:00Z")));
        let Some(Action::Check(i)) = actions.iter().find(|a| matches!(a, Action::Check(_))) else {
            panic!("{actions:?}")
        };
        let again = at("2026-09-20T10:00:30Z");
        let a = m.step(Input::Readiness(
            i.clone(),
            Readiness::NotYet {
                why: "the file is not there".into(),
                again_at: Some(again),
            },
        ));
        assert!(a.is_empty(), "{a:?}");
        let a = m.step(Input::Clock(at("2026-09-20T10:00:10Z")));
        assert_eq!(
            a,
            [Action::WaitUntil(Some((
                again,
                WakeFor::Recheck(0, i.occurrence)
            )))]
        );
        let a = m.step(Input::Clock(again));
        assert_eq!(a[0], Action::Check(i.clone()));
        m.step(Input::Readiness(i.clone(), Readiness::Ready));
        let a = m.step(Input::Clock(again));
        assert_eq!(
            a[0],
            Action::Start {
                lane: 1,
                instances: vec![i.clone()],
                force: false
            }
        );
    }

    #[test]
    fn a_failed_readiness_drops_the_instance_and_retries_nothing() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        let failed = |_: &str, _: &str, _: &Sim| Readiness::Failed("gone".into());
        sim.at(at("2026-09-20T10:00:00Z"), &failed);
        sim.at(at("2026-09-20T10:30:00Z"), &always);
        assert!(sim.lanes.is_empty());
        assert_eq!(sim.m.waiting().count(), 0);
        assert_eq!(sim.dropped.len(), 1);
    }

    fn report(upstream: &[&str]) -> TaskSpec {
        TaskSpec {
            name: "report".into(),
            trigger: Trigger::Cron(Schedule::parse("0 6 * * *", "UTC").unwrap()),
            upstream: upstream.iter().map(|s| s.to_string()).collect(),
            wait: 3600,
            rerun: true,
        }
    }

    #[test]
    fn a_schedule_and_an_upstream_publication_make_a_static_task_due() {
        let mut sim = Sim::new(vec![hourly("a", &[]), report(&["a"])], vec![None, None]);
        sim.at(at("2026-09-20T05:00:00Z"), &always);
        // Hour 04 of `a`, then `report` because `a` published.
        assert_eq!(sim.lanes.len(), 2);
        assert_eq!(sim.lanes[1][0].0, "report");
        assert!(!sim.forced[1], "an upstream's publication is no firing");
        assert_eq!(sim.wait.unwrap().0, at("2026-09-20T06:00:00Z"));
        sim.at(at("2026-09-20T06:00:00Z"), &always);
        // 06:00: the firing runs, forced (a schedule means a run).
        let firing = sim
            .lanes
            .iter()
            .position(|l| l[0].0 == "report" && sim.lanes.len() > 2);
        assert!(firing.is_some());
        assert!(sim
            .lanes
            .iter()
            .zip(&sim.forced)
            .any(|(l, f)| l[0].0 == "report" && *f));
    }

    #[test]
    fn a_scheduled_task_without_inputs_runs_at_every_firing_unless_it_reruns_on_change() {
        for rerun in [true, false] {
            let mut r = report(&[]);
            r.rerun = rerun;
            let mut sim = Sim::new(vec![r], vec![None]);
            for day in 20..25 {
                sim.at(at(&format!("2026-09-{day}T06:00:00Z")), &always);
            }
            // The first start counts from then: four firings followed.
            assert_eq!(sim.count("report"), 4);
            assert!(sim.forced.iter().all(|f| *f == rerun));
        }
    }

    #[test]
    fn a_non_period_task_has_one_lane_at_a_time() {
        let mut sim = Sim::new(vec![hourly("a", &[]), report(&["a"])], vec![None, None]);
        sim.held.push("report".into());
        sim.at(at("2026-09-20T05:00:00Z"), &always);
        assert_eq!(sim.count("report"), 1);
        // `a` publishes again while `report` runs: one more report, after.
        sim.at(at("2026-09-20T06:00:30Z"), &always);
        assert_eq!(sim.count("report"), 1);
        sim.release("report", &always);
        assert_eq!(sim.count("report"), 2);
    }

    #[test]
    fn a_reload_keeps_progress_of_unchanged_tasks() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.at(at("2026-09-20T10:00:00Z"), &always);
        let seen = sim.m.seen[0];
        sim.m
            .reload(vec![hourly("b", &[]), hourly("a", &[])], vec![None, None]);
        sim.progress = vec![None; 2];
        assert_eq!(sim.m.seen, [None, seen]);
        sim.at(at("2026-09-20T10:10:00Z"), &always);
        // `a` does not run hour 09 again; `b` starts at its newest.
        assert_eq!(sim.lanes.len(), 2);
        assert_eq!(sim.lanes[1], [("b".into(), "2026-09-20T09".into())]);
    }

    #[test]
    fn a_restart_resolves_from_the_low_water_mark() {
        // Hour 09 waited while 10 ran; killed. The stored progress is 08:
        // the restart sees 09 and 10 again (the executor checks whether
        // they were published or are claimed before calling them missed).
        let a = task("a", Grain::Hourly, "2026-09-20T00", &[], 6 * 3600);
        let mut sim = Sim::new(vec![a], vec![None]);
        let nine_late = |_: &str, key: &str, _: &Sim| {
            if key == "2026-09-20T09" {
                never("", "", &Sim::new(vec![], vec![]))
            } else {
                Readiness::Ready
            }
        };
        sim.at(at("2026-09-20T10:00:00Z"), &nine_late);
        sim.at(at("2026-09-20T11:00:00Z"), &nine_late);
        let nine = scheme(Grain::Hourly, "2026-09-20T00")
            .parse("2026-09-20T09")
            .unwrap();
        assert_eq!(sim.progress[0], Some((nine - 1, nine + 1)));
    }

    /// Hour 09 of `a` started in lane 1, whose claim another engine holds:
    /// the machine is told so and watches it.
    fn claimed_elsewhere() -> (Machine, Instance, i64) {
        let mut m = Machine::new(vec![hourly("a", &[])], vec![None]);
        let ten = at("2026-09-20T10:00:00Z");
        let actions = m.step(Input::Clock(ten));
        let Some(Action::Check(i)) = actions.iter().find(|a| matches!(a, Action::Check(_))) else {
            panic!("{actions:?}")
        };
        let i = i.clone();
        m.step(Input::Readiness(i.clone(), Readiness::Ready));
        let a = m.step(Input::Clock(ten));
        assert!(matches!(a[0], Action::Start { lane: 1, .. }), "{a:?}");
        let a = m.step(Input::ClaimedElsewhere {
            instance: i.clone(),
            claimer: "b".into(),
            again_at: ten + 30,
        });
        assert!(a.is_empty(), "{a:?}");
        let a = m.step(Input::Finished {
            lane: 1,
            published: vec![],
            interrupted: false,
            now: ten + 1,
        });
        // Its lane ended, yet the progress does not pass it.
        let o = i.occurrence;
        assert!(
            a.contains(&Action::Progress {
                task: 0,
                done: o - 1,
                newest: o
            }) || m.said[0] == Some((o - 1, o)),
            "{a:?}"
        );
        assert_eq!(
            a.last(),
            Some(&Action::WaitUntil(Some((ten + 30, WakeFor::Watch(0, o)))))
        );
        (m, i, ten)
    }

    #[test]
    fn an_instance_claimed_elsewhere_holds_the_progress_back_until_it_is_settled() {
        let (mut m, i, ten) = claimed_elsewhere();
        let o = i.occurrence;
        let a = m.step(Input::Clock(ten + 30));
        assert_eq!(a[0], Action::Watch(i.clone()));
        // Still held by a live claimer, past its wait bound: watched on,
        // never given up here (its claimer may publish it).
        m.step(Input::Watched(
            i.clone(),
            Elsewhere::Held {
                claimer: "b".into(),
                again_at: ten + 7200,
            },
        ));
        let a = m.step(Input::Clock(ten + 7200));
        let missed_here =
            |a: &Action| matches!(a, Action::Missed { occurrence, .. } if *occurrence == o);
        assert!(!a.iter().any(missed_here), "{a:?}");
        assert_eq!(m.said[0].map(|(done, _)| done), Some(o - 1));
        assert_eq!(
            a.iter().filter(|a| matches!(a, Action::Watch(_))).count(),
            1
        );
        let a = m.step(Input::Watched(i.clone(), Elsewhere::Settled));
        assert!(
            a.iter()
                .any(|a| matches!(a, Action::Progress { done, .. } if *done >= o)),
            "{a:?}"
        );
        assert_eq!(m.watched().count(), 0);
    }

    #[test]
    fn an_instance_whose_claimer_died_runs_here_within_its_wait() {
        let (mut m, i, ten) = claimed_elsewhere();
        m.step(Input::Clock(ten + 30));
        m.step(Input::Watched(i.clone(), Elsewhere::Free));
        let a = m.step(Input::Clock(ten + 31));
        assert_eq!(a[0], Action::Check(i.clone()), "{a:?}");
        m.step(Input::Readiness(i.clone(), Readiness::Ready));
        let a = m.step(Input::Clock(ten + 32));
        assert!(
            matches!(&a[0], Action::Start { instances, .. } if instances == &vec![i.clone()]),
            "{a:?}"
        );
    }

    #[test]
    fn an_instance_whose_claimer_died_after_its_wait_is_recorded_missed() {
        let (mut m, i, ten) = claimed_elsewhere();
        // The claimer ran it past the hour's wait, then died.
        let late = ten + 3 * 3600;
        m.step(Input::Clock(late));
        m.step(Input::Watched(i.clone(), Elsewhere::Free));
        let a = m.step(Input::Clock(late + 1));
        assert!(
            a.contains(&Action::Missed {
                task: 0,
                occurrence: i.occurrence,
                due_at: i.due_at,
                why: MissedWhy::Waited(3600),
            }),
            "{a:?}"
        );
        assert!(
            !a.iter().any(|a| matches!(a, Action::Start { .. })),
            "{a:?}"
        );
    }

    #[test]
    fn a_restart_watches_an_occurrence_another_engine_still_runs() {
        // Stored progress 08; hour 09 runs on another engine when this one
        // restarts at 11:00: the executor finds it claimed (not missed)
        // and says so; the progress stays before it.
        let s = scheme(Grain::Hourly, "2026-09-20T00");
        let eight = s.parse("2026-09-20T08").unwrap();
        let mut m = Machine::new(vec![hourly("a", &[])], vec![Some(eight)]);
        let a = m.step(Input::Clock(at("2026-09-20T11:00:01Z")));
        let nine = Instance {
            task: 0,
            occurrence: eight + 1,
            due_at: at("2026-09-20T10:00:00Z"),
            why: Why::PeriodEnded,
        };
        assert!(a.contains(&Action::Missed {
            task: 0,
            occurrence: eight + 1,
            due_at: nine.due_at,
            why: MissedWhy::Down
        }));
        let a = m.step(Input::ClaimedElsewhere {
            instance: nine.clone(),
            claimer: "b".into(),
            again_at: at("2026-09-20T11:00:31Z"),
        });
        assert_eq!(
            a,
            [Action::Progress {
                task: 0,
                done: eight,
                newest: eight + 2
            }]
        );
        assert_eq!(
            m.watched().map(|(i, c)| (i.clone(), c)).collect::<Vec<_>>(),
            [(nine.clone(), "b")]
        );
        // Its claimer dies: it was due while this machine was down, so it
        // is not run here (no catch-up) but recorded MISSED as down.
        m.step(Input::Clock(at("2026-09-20T11:00:31Z")));
        let a = m.step(Input::Watched(nine.clone(), Elsewhere::Free));
        assert_eq!(
            a[0],
            Action::Missed {
                task: 0,
                occurrence: eight + 1,
                due_at: nine.due_at,
                why: MissedWhy::Down
            }
        );
        assert!(!a.iter().any(|a| matches!(a, Action::Check(_))), "{a:?}");
    }
}
