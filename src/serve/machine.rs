//! Serve's decision machine: events in, actions out, no I/O and no clock
//! of its own, so its policy is unit-tested on a simulated clock. The
//! executor (`serve::run`) does what the actions say and feeds back what
//! happened.
//!
//! ```text
//!  inputs   Clock(now) · Readiness(instance, Ready | NotYet | Failed) · Finished(published, interrupted) · Stop
//!  actions  Missed · Progress · Check(instance) · Start(instances) · WaitUntil(t) · Exit(stopped)
//!
//!  due ──► pending ──Check──► Ready ──► ready ──(no batch running)──► Start ──► Finished
//!                      └─ NotYet: stays pending, checked again after the next batch, a wake-up,
//!                         or at the instant it names (a sensor's next look)
//!                      └─ Failed: dropped, logged
//! ```
//!
//! One batch runs at a time: a batch is one `weir run` over the instances
//! ready together, so an upstream and a downstream due at the same instant
//! are two batches (the downstream is NotYet until the upstream publishes).

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
    /// Not yet: asked again after the next batch or wake-up, and at
    /// `again_at` if given (a sensor's next look).
    NotYet {
        /// Why not, for the decision log.
        why: String,
        /// When to ask again at the latest.
        again_at: Option<i64>,
    },
    /// It cannot run: dropped.
    Failed(String),
}

/// What the executor tells the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The clock says `now` (woken by a due time, or after anything else).
    Clock(i64),
    /// The readiness of an instance the machine asked about.
    Readiness(Instance, Readiness),
    /// The running batch ended: the tasks that published something new,
    /// and whether attempts were stopped by a signal.
    Finished {
        /// Tasks with a new generation.
        published: Vec<String>,
        /// Whether a stop request stopped attempts.
        interrupted: bool,
        /// `now` when it ended.
        now: i64,
    },
    /// SIGTERM or SIGINT: admit nothing more.
    Stop,
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
    },
    /// Persist the newest occurrence handled for a task.
    Progress {
        /// The task's index.
        task: usize,
        /// Its newest occurrence started or missed.
        seen: i64,
    },
    /// Find out whether an instance may start (answer with
    /// [`Input::Readiness`]).
    Check(Instance),
    /// An instance cannot run.
    Dropped(Instance, String),
    /// Run these instances as one batch (answer with [`Input::Finished`]).
    Start(Vec<Instance>),
    /// Nothing to do before this instant (`None`: ever), unless an input
    /// comes.
    WaitUntil(Option<i64>),
    /// Serve is done; `stopped`: attempts were stopped by the signal.
    Exit {
        /// Whether attempts were stopped.
        stopped: bool,
    },
}

/// The machine's state.
#[derive(Debug)]
pub struct Machine {
    tasks: Vec<TaskSpec>,
    seen: Vec<Option<i64>>,
    next_at: Vec<Option<i64>>,
    /// Due, waiting for an answer or for readiness: asked since the last
    /// change, and when to ask again at the latest.
    pending: Vec<(Instance, bool, Option<i64>)>,
    ready: Vec<Instance>,
    /// The tasks of the running batch, if one runs.
    running: Option<Vec<usize>>,
    stopping: bool,
    stopped_attempts: bool,
}

impl Machine {
    /// A machine for `tasks`, each with its stored progress.
    pub fn new(tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) -> Machine {
        let n = tasks.len();
        Machine {
            tasks,
            seen,
            next_at: vec![None; n],
            pending: Vec::new(),
            ready: Vec::new(),
            running: None,
            stopping: false,
            stopped_attempts: false,
        }
    }

    /// The tasks.
    pub fn tasks(&self) -> &[TaskSpec] {
        &self.tasks
    }

    /// When each task's next occurrence is due (after the last input).
    pub fn next_due(&self) -> &[Option<i64>] {
        &self.next_at
    }

    /// Instances due but not ready, with why (for status).
    pub fn waiting(&self) -> impl Iterator<Item = &Instance> {
        self.pending.iter().map(|(i, _, _)| i)
    }

    /// A reloaded manifest's tasks: a task kept with the same trigger keeps
    /// its progress and its pending instances; the others start afresh
    /// (from their stored progress, `seen`).
    pub fn reload(&mut self, tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) {
        let old = std::mem::take(&mut self.tasks);
        let map = |i: usize| -> Option<usize> {
            let t = &old[i];
            tasks
                .iter()
                .position(|n| n.name == t.name && n.trigger == t.trigger)
        };
        self.seen = tasks
            .iter()
            .zip(seen)
            .map(|(t, stored)| {
                old.iter()
                    .position(|o| o.name == t.name && o.trigger == t.trigger)
                    .and_then(|i| self.seen[i])
                    .or(stored)
            })
            .collect();
        self.pending = std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|(mut i, asked, again)| {
                i.task = map(i.task)?;
                Some((i, asked, again))
            })
            .collect();
        self.ready = std::mem::take(&mut self.ready)
            .into_iter()
            .filter_map(|mut i| {
                i.task = map(i.task)?;
                Some(i)
            })
            .collect();
        self.next_at = vec![None; tasks.len()];
        self.tasks = tasks;
    }

    /// One input, and what to do about it.
    pub fn step(&mut self, input: Input) -> Vec<Action> {
        let mut out = Vec::new();
        let now = match input {
            Input::Clock(now) => now,
            Input::Readiness(instance, readiness) => {
                let Some(at) = self.pending.iter().position(|(i, _, _)| *i == instance) else {
                    return out;
                };
                match readiness {
                    Readiness::Ready => {
                        let (i, _, _) = self.pending.remove(at);
                        self.ready.push(i);
                    }
                    Readiness::NotYet { again_at, .. } => self.pending[at].2 = again_at,
                    Readiness::Failed(why) => {
                        let (i, _, _) = self.pending.remove(at);
                        out.push(Action::Dropped(i, why));
                    }
                }
                self.maybe_start(&mut out);
                // The wait said before this answer did not know its next look.
                out.push(Action::WaitUntil(self.wake_at()));
                return out;
            }
            Input::Finished {
                published,
                interrupted,
                now,
            } => {
                let ran = self.running.take().unwrap_or_default();
                self.stopped_attempts |= interrupted;
                if !self.stopping {
                    self.upstream_published(&published, &ran, now);
                    // What was not ready may be now.
                    for p in &mut self.pending {
                        p.1 = false;
                        p.2 = None;
                    }
                }
                now
            }
            Input::Stop => {
                self.stopping = true;
                if self.running.is_none() {
                    out.push(Action::Exit {
                        stopped: self.stopped_attempts,
                    });
                }
                return out;
            }
        };
        if self.stopping {
            if self.running.is_none() {
                out.push(Action::Exit {
                    stopped: self.stopped_attempts,
                });
            }
            return out;
        }
        self.clock(now, &mut out);
        self.maybe_start(&mut out);
        out.push(Action::WaitUntil(self.wake_at()));
        out
    }

    /// The next instant something is due or a sensor looks again.
    fn wake_at(&self) -> Option<i64> {
        let again = self.pending.iter().filter_map(|(_, _, a)| *a);
        self.next_at.iter().flatten().copied().chain(again).min()
    }

    fn clock(&mut self, now: i64, out: &mut Vec<Action>) {
        for (task, spec) in self.tasks.iter().enumerate() {
            let Due {
                run,
                missed,
                seen,
                next_at,
            } = spec.trigger.due(self.seen[task], now);
            for &o in &missed {
                out.push(Action::Missed {
                    task,
                    occurrence: o,
                    due_at: spec.trigger.due_at(o),
                });
            }
            // An instance still waiting for its inputs is overtaken by a
            // newer one: it is missed too.
            if run.is_some() && matches!(spec.trigger, Trigger::Period { .. }) {
                self.pending.retain(|(i, _, _)| {
                    let overtaken = i.task == task;
                    if overtaken {
                        out.push(Action::Missed {
                            task,
                            occurrence: i.occurrence,
                            due_at: i.due_at,
                        });
                    }
                    !overtaken
                });
            }
            if let Some(&last) = missed.last() {
                // Recorded once: the progress moves past what was missed.
                out.push(Action::Progress { task, seen: last });
            }
            if let Some(o) = run {
                let why = match spec.trigger {
                    Trigger::Period { .. } => Why::PeriodEnded,
                    Trigger::Cron(_) => Why::Schedule,
                    Trigger::Upstream => Why::Upstream,
                };
                self.pending.push((
                    Instance {
                        task,
                        occurrence: o,
                        due_at: spec.trigger.due_at(o),
                        why,
                    },
                    false,
                    None,
                ));
            } else if self.seen[task].is_none() && seen.is_some() {
                // A schedule's first start: it starts counting now.
                out.push(Action::Progress {
                    task,
                    seen: seen.unwrap_or(now),
                });
            }
            self.seen[task] = seen;
            self.next_at[task] = next_at;
        }
        for (i, asked, again) in &mut self.pending {
            if again.is_some_and(|t| t <= now) {
                *asked = false;
                *again = None;
            }
            if !*asked {
                *asked = true;
                out.push(Action::Check(i.clone()));
            }
        }
    }

    /// A task that ran in the batch read what its upstream published in
    /// it (the batch's plan orders them): only the others become due.
    fn upstream_published(&mut self, published: &[String], ran: &[usize], now: i64) {
        for (task, spec) in self.tasks.iter().enumerate() {
            if matches!(spec.trigger, Trigger::Period { .. })
                || ran.contains(&task)
                || !spec.upstream.iter().any(|u| published.contains(u))
                || self.pending.iter().any(|(i, _, _)| i.task == task)
                || self.ready.iter().any(|i| i.task == task)
            {
                continue;
            }
            self.pending.push((
                Instance {
                    task,
                    occurrence: now,
                    due_at: now,
                    why: Why::Upstream,
                },
                false,
                None,
            ));
        }
    }

    fn maybe_start(&mut self, out: &mut Vec<Action>) {
        let answered = self.pending.iter().all(|(_, asked, _)| *asked);
        if self.running.is_some() || self.stopping || self.ready.is_empty() || !answered {
            return;
        }
        // Wait for every answer asked in this step, so instances due
        // together start together.
        if out
            .iter()
            .any(|a| matches!(a, Action::Check(i) if self.pending.iter().any(|(p, _, _)| p == i)))
        {
            return;
        }
        let batch = std::mem::take(&mut self.ready);
        for i in &batch {
            if matches!(
                self.tasks[i.task].trigger,
                Trigger::Period { .. } | Trigger::Cron(_)
            ) && i.why != Why::Upstream
            {
                out.push(Action::Progress {
                    task: i.task,
                    seen: i.occurrence,
                });
            }
        }
        self.running = Some(batch.iter().map(|i| i.task).collect());
        out.push(Action::Start(batch));
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

    fn hourly(name: &str, upstream: &[&str]) -> TaskSpec {
        let probe = TimeScheme::probe(Grain::Hourly, Zone::utc(), "2026-09-20T00");
        let start = probe.parse("2026-09-20T00").unwrap();
        TaskSpec {
            name: name.into(),
            trigger: Trigger::Period {
                scheme: probe.with_range(start, None),
                delay: 0,
            },
            upstream: upstream.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn key(m: &Machine, i: &Instance) -> String {
        m.tasks()[i.task]
            .trigger
            .key(i.occurrence)
            .unwrap_or_else(|| "all".into())
    }

    /// Drives the machine as the executor would: every check answered
    /// with `ready(task name, key)`, every batch finishing at once with
    /// everything published. Returns the batches started (task, key) and
    /// the missed (task, key).
    struct Sim {
        m: Machine,
        batches: Vec<Vec<(String, String)>>,
        missed: Vec<(String, String)>,
        progress: Vec<Option<i64>>,
        wait: Option<i64>,
        exit: Option<bool>,
    }

    impl Sim {
        fn new(tasks: Vec<TaskSpec>, seen: Vec<Option<i64>>) -> Sim {
            let n = tasks.len();
            Sim {
                m: Machine::new(tasks, seen),
                batches: Vec::new(),
                missed: Vec::new(),
                progress: vec![None; n],
                wait: None,
                exit: None,
            }
        }

        fn feed(&mut self, input: Input, ready: &dyn Fn(&str, &str, &Sim) -> Readiness) {
            let mut queue = std::collections::VecDeque::from([input]);
            while let Some(input) = queue.pop_front() {
                let now = match &input {
                    Input::Clock(n) | Input::Finished { now: n, .. } => Some(*n),
                    _ => None,
                };
                for action in self.m.step(input) {
                    match action {
                        Action::Missed {
                            task, occurrence, ..
                        } => {
                            let t = &self.m.tasks()[task];
                            self.missed
                                .push((t.name.clone(), t.trigger.key(occurrence).unwrap()));
                        }
                        Action::Progress { task, seen } => self.progress[task] = Some(seen),
                        Action::Check(i) => {
                            let name = self.m.tasks()[i.task].name.clone();
                            let r = ready(&name, &key(&self.m, &i), self);
                            queue.push_back(Input::Readiness(i, r));
                        }
                        Action::Dropped(..) => {}
                        Action::Start(batch) => {
                            let names: Vec<(String, String)> = batch
                                .iter()
                                .map(|i| (self.m.tasks()[i.task].name.clone(), key(&self.m, i)))
                                .collect();
                            let published = names.iter().map(|(t, _)| t.clone()).collect();
                            self.batches.push(names);
                            queue.push_back(Input::Finished {
                                published,
                                interrupted: false,
                                now: now.unwrap_or(0),
                            });
                        }
                        Action::WaitUntil(t) => self.wait = t,
                        Action::Exit { stopped } => self.exit = Some(stopped),
                    }
                }
            }
        }

        fn published(&self, task: &str, key: &str) -> bool {
            self.batches
                .iter()
                .flatten()
                .any(|(t, k)| t == task && k == key)
        }
    }

    fn always(_: &str, _: &str, _: &Sim) -> Readiness {
        Readiness::Ready
    }

    #[test]
    fn catch_up_is_impossible_each_period_runs_once_as_it_ends() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.feed(Input::Clock(at("2026-09-20T10:00:05Z")), &always);
        assert_eq!(sim.batches, [[("a".into(), "2026-09-20T09".into())]]);
        assert_eq!(sim.wait, Some(at("2026-09-20T11:00:00Z")));
        // Woken early, and again at the due time: one new batch.
        sim.feed(Input::Clock(at("2026-09-20T10:30:00Z")), &always);
        sim.feed(Input::Clock(at("2026-09-20T11:00:00Z")), &always);
        assert_eq!(sim.batches.len(), 2);
        assert_eq!(sim.batches[1], [("a".into(), "2026-09-20T10".into())]);
        assert!(sim.missed.is_empty());
        assert_eq!(sim.progress[0], sim.m.seen[0]);
    }

    #[test]
    fn a_restart_after_downtime_runs_the_newest_and_records_the_rest_missed() {
        let seen = TimeScheme::probe(Grain::Hourly, Zone::utc(), "2026-09-20T00")
            .parse("2026-09-20T03")
            .unwrap();
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![Some(seen)]);
        // Three days later.
        sim.feed(Input::Clock(at("2026-09-23T00:00:01Z")), &always);
        assert_eq!(sim.batches, [[("a".into(), "2026-09-22T23".into())]]);
        assert_eq!(sim.missed.len(), 20 + 24 + 23);
        assert_eq!(sim.missed[0], ("a".into(), "2026-09-20T04".into()));
        assert!(!sim.missed.iter().any(|(_, k)| k == "2026-09-22T23"));
        // None of the missed ever runs, however long serve goes on.
        for h in 1..5 {
            sim.feed(Input::Clock(at("2026-09-23T00:00:00Z") + h * 3600), &always);
        }
        assert_eq!(sim.batches.len(), 5);
        assert!(!sim.published("a", "2026-09-20T04"));
        assert_eq!(sim.missed.len(), 67);
    }

    #[test]
    fn a_downstream_waits_for_its_upstream_and_starts_in_the_next_batch() {
        let mut sim = Sim::new(
            vec![hourly("up", &[]), hourly("down", &["up"])],
            vec![None, None],
        );
        let ready = |task: &str, key: &str, sim: &Sim| {
            if task == "down" && !sim.published("up", key) {
                Readiness::NotYet {
                    why: "up not published".into(),
                    again_at: None,
                }
            } else {
                Readiness::Ready
            }
        };
        sim.feed(Input::Clock(at("2026-09-20T10:00:00Z")), &ready);
        assert_eq!(
            sim.batches,
            [
                vec![("up".to_string(), "2026-09-20T09".to_string())],
                vec![("down".to_string(), "2026-09-20T09".to_string())]
            ]
        );
    }

    #[test]
    fn an_instance_never_ready_is_missed_when_a_newer_one_is_due() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        let never = |_: &str, _: &str, _: &Sim| Readiness::NotYet {
            why: "no input".into(),
            again_at: None,
        };
        sim.feed(Input::Clock(at("2026-09-20T10:00:00Z")), &never);
        assert!(sim.batches.is_empty());
        assert_eq!(sim.m.waiting().count(), 1);
        sim.feed(Input::Clock(at("2026-09-20T11:00:00Z")), &always);
        assert_eq!(sim.missed, [("a".into(), "2026-09-20T09".into())]);
        assert_eq!(sim.batches, [[("a".into(), "2026-09-20T10".into())]]);
    }

    #[test]
    fn a_stop_admits_nothing_more_and_exits_after_the_running_batch() {
        let mut m = Machine::new(vec![hourly("a", &[])], vec![None]);
        let actions = m.step(Input::Clock(at("2026-09-20T10:00:00Z")));
        let Some(Action::Check(i)) = actions.iter().find(|a| matches!(a, Action::Check(_))) else {
            panic!("{actions:?}")
        };
        let started = m.step(Input::Readiness(i.clone(), Readiness::Ready));
        assert!(started.iter().any(|a| matches!(a, Action::Start(_))));
        // Stopped mid-batch: no exit until the batch reports.
        assert!(m.step(Input::Stop).is_empty());
        // A due time passing meanwhile starts nothing.
        assert!(m.step(Input::Clock(at("2026-09-20T12:00:00Z"))).is_empty());
        let end = m.step(Input::Finished {
            published: vec![],
            interrupted: true,
            now: at("2026-09-20T12:00:01Z"),
        });
        assert_eq!(end, [Action::Exit { stopped: true }]);
        // Stopped while idle: exits at once, nothing stopped.
        let mut idle = Machine::new(vec![hourly("a", &[])], vec![None]);
        assert_eq!(idle.step(Input::Stop), [Action::Exit { stopped: false }]);
    }

    #[test]
    fn a_failed_batch_is_not_retried_by_serve_and_the_next_period_still_runs() {
        // Retries belong to the batch's run (its retry classes and budget):
        // a period that ended HELD or QUARANTINED is the run's verdict, and
        // serve never launches it again on its own.
        let mut m = Machine::new(vec![hourly("a", &[])], vec![None]);
        let mut started: Vec<i64> = Vec::new();
        fn feed(m: &mut Machine, started: &mut Vec<i64>, input: Input) {
            let mut queue = std::collections::VecDeque::from([input]);
            while let Some(input) = queue.pop_front() {
                for a in m.step(input) {
                    match a {
                        Action::Check(i) => queue.push_back(Input::Readiness(i, Readiness::Ready)),
                        Action::Start(batch) => {
                            started.extend(batch.iter().map(|i| i.occurrence));
                            // Nothing published: the attempt failed.
                            queue.push_back(Input::Finished {
                                published: vec![],
                                interrupted: false,
                                now: at("2026-09-20T10:05:00Z"),
                            });
                        }
                        _ => {}
                    }
                }
            }
        }
        feed(
            &mut m,
            &mut started,
            Input::Clock(at("2026-09-20T10:00:00Z")),
        );
        feed(
            &mut m,
            &mut started,
            Input::Clock(at("2026-09-20T10:30:00Z")),
        );
        assert_eq!(started.len(), 1);
        feed(
            &mut m,
            &mut started,
            Input::Clock(at("2026-09-20T11:00:00Z")),
        );
        assert_eq!(started.len(), 2);
        assert_eq!(started[1], started[0] + 1);
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
        // The executor's wait ends at the re-check, before the next period
        // is due, from the answer on.
        assert_eq!(a, [Action::WaitUntil(Some(again))]);
        let a = m.step(Input::Clock(at("2026-09-20T10:00:10Z")));
        assert_eq!(a, [Action::WaitUntil(Some(again))]);
        let a = m.step(Input::Clock(again));
        assert_eq!(a[0], Action::Check(i.clone()));
        let a = m.step(Input::Readiness(i.clone(), Readiness::Ready));
        assert_eq!(
            a[..2],
            [
                Action::Progress {
                    task: 0,
                    seen: i.occurrence
                },
                Action::Start(vec![i.clone()])
            ]
        );
        assert!(matches!(a[2..], [Action::WaitUntil(_)]), "{a:?}");
    }

    #[test]
    fn a_failed_readiness_drops_the_instance_and_retries_nothing() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        let failed = |_: &str, _: &str, _: &Sim| Readiness::Failed("gone".into());
        sim.feed(Input::Clock(at("2026-09-20T10:00:00Z")), &failed);
        sim.feed(Input::Clock(at("2026-09-20T10:30:00Z")), &always);
        assert!(sim.batches.is_empty());
        assert_eq!(sim.m.waiting().count(), 0);
    }

    #[test]
    fn a_schedule_and_an_upstream_publication_make_a_static_task_due() {
        let report = TaskSpec {
            name: "report".into(),
            trigger: Trigger::Cron(Schedule::parse("0 6 * * *", "UTC").unwrap()),
            upstream: vec!["a".into()],
        };
        let mut sim = Sim::new(vec![hourly("a", &[]), report], vec![None, None]);
        sim.feed(Input::Clock(at("2026-09-20T05:00:00Z")), &always);
        // Hour 04 of `a`, then `report` because `a` published.
        assert_eq!(sim.batches.len(), 2);
        assert_eq!(sim.batches[1][0].0, "report");
        assert_eq!(sim.wait, Some(at("2026-09-20T06:00:00Z")));
        sim.feed(Input::Clock(at("2026-09-20T06:00:00Z")), &always);
        // 06:00: hour 05 of `a` and the schedule's firing run together;
        // `a` publishing while `report` is ready adds nothing more.
        let last = sim.batches.iter().skip(2).flatten().collect::<Vec<_>>();
        assert!(last.iter().any(|(t, _)| t == "report"), "{last:?}");
        assert_eq!(last.iter().filter(|(t, _)| t == "report").count(), 1);
    }

    #[test]
    fn a_reload_keeps_progress_of_unchanged_tasks() {
        let mut sim = Sim::new(vec![hourly("a", &[])], vec![None]);
        sim.feed(Input::Clock(at("2026-09-20T10:00:00Z")), &always);
        let seen = sim.m.seen[0];
        sim.m
            .reload(vec![hourly("b", &[]), hourly("a", &[])], vec![None, None]);
        assert_eq!(sim.m.seen, [None, seen]);
        sim.feed(Input::Clock(at("2026-09-20T10:10:00Z")), &always);
        // `a` does not run hour 09 again; `b` starts at its newest.
        assert_eq!(sim.batches.len(), 2);
        assert_eq!(sim.batches[1], [("b".into(), "2026-09-20T09".into())]);
    }
}
