//! The run's scheduler: executes the decisions of
//! [`super::machine::RunMachine`] on threads, one attempt per admitted
//! instance, under the pools' limits.

use super::*;

use std::sync::Arc;

use crate::store::certs::Listed;

pub(super) struct Scheduler<'c, 'a> {
    pub(super) cx: &'c Context<'a>,
    pub(super) plan: &'c Plan,
    pub(super) options: &'c RunOptions,
    pub(super) explicit: HashSet<&'c str>,
    pub(super) status: Vec<Status>,
    pub(super) attempts: Vec<u32>,
    pub(super) snapshots: Vec<Option<InputSnapshot>>,
    /// The code fingerprint of each instance's last launched command.
    pub(super) codes: Vec<Option<String>>,
    pub(super) backoffs: Vec<Option<Backoff>>,
    /// Queueing, admission per pool, retries' backoff and skips: the
    /// pure machine (`machine.rs`) this scheduler executes.
    pub(super) machine: machine::RunMachine,
    pub(super) task_pool: Vec<usize>,
    /// The backoff of the retry `after_failure` just scheduled.
    pub(super) retry_in: Duration,
    pub(super) budget: RetryBudget,
    pub(super) rng: fastrand::Rng,
    pub(super) marker_errors: std::cell::RefCell<Vec<String>>,
    /// Whether a marker may stand for each instance: one was read when it
    /// started, or this run wrote one. Only then does a publication clear
    /// it (one request saved per published instance otherwise).
    pub(super) marked: Vec<std::cell::Cell<bool>>,
    /// The stop request seen, if any: nothing more is admitted.
    pub(super) interrupted: Option<interrupt::Signal>,
    /// Readiness checks that found each instance's inputs not ready.
    pub(super) checks: Vec<u32>,
    /// When `--wait` ends: rechecks stop then.
    pub(super) wait_until: Option<Instant>,
    /// When this run last looked at each output dataset's logs in one
    /// listing (`look_at_dataset`).
    pub(super) dataset_looks: std::collections::HashMap<String, Instant>,
    /// The listings of markers and certification marks earlier passes
    /// took (`pass_looks`).
    pub(super) listings: Listings,
    /// A backfill paused or cancelled from anywhere.
    pub(super) steer: super::steer::Steerer,
}

/// Listings of markers and certification marks, each with the moment its
/// request was sent, and the moment the last report came in of an
/// instance that may have run a command (a task's command can mark or
/// uncertify through `weir`, and what starts after it must see that).
#[derive(Default)]
pub(super) struct Listings {
    taken: std::collections::HashMap<String, (Instant, Arc<HashSet<String>>)>,
    command_reported: Option<Instant>,
}

impl Listings {
    /// The listing of `what`: the one kept, if taken after every report of
    /// a command and at most [`crate::store::LOOK_REUSE`] ago, else a new
    /// one from `list` (`None` if that fails).
    fn take(
        &mut self,
        what: &str,
        list: impl FnOnce() -> Option<Arc<HashSet<String>>>,
    ) -> Option<Arc<HashSet<String>>> {
        if let Some((at, names)) = self.taken.get(what) {
            let after_commands = self.command_reported.is_none_or(|c| *at > c);
            if after_commands && at.elapsed() <= crate::store::LOOK_REUSE {
                return Some(Arc::clone(names));
            }
        }
        let at = Instant::now();
        let names = list()?;
        self.taken.insert(what.to_owned(), (at, Arc::clone(&names)));
        Some(names)
    }

    /// A report came in; `ran` says whether its instance may have run a
    /// command (anything but an instance found published or held by a
    /// marker).
    fn reported(&mut self, ran: bool) {
        if ran {
            self.command_reported = Some(Instant::now());
        }
    }
}

impl<'c, 'a> Scheduler<'c, 'a> {
    pub(super) fn new(
        cx: &'c Context<'a>,
        plan: &'c Plan,
        options: &'c RunOptions,
        explicit: HashSet<&'c str>,
    ) -> Self {
        let n = plan.instance_count();
        let pools: Vec<&String> = plan.pools.keys().collect();
        Scheduler {
            cx,
            plan,
            options,
            explicit,
            status: (0..n).map(|_| Status::Waiting).collect(),
            attempts: vec![0; n],
            snapshots: (0..n).map(|_| None).collect(),
            codes: (0..n).map(|_| None).collect(),
            backoffs: (0..n).map(|_| None).collect(),
            // Admit a few instances beyond the slots, so their pinning,
            // token and staging are done by the time a slot frees up. Not
            // in a backfill, which can be paused: an instance admitted
            // waits for a slot in its own thread, out of the pause's reach.
            machine: machine::RunMachine::new(
                plan.in_degrees(),
                plan.pools
                    .values()
                    .map(|slots| {
                        let ahead = if plan.backfill.is_some() {
                            1
                        } else {
                            ADMIT_PER_SLOT
                        };
                        slots.saturating_mul(ahead)
                    })
                    .collect(),
            ),
            task_pool: plan
                .tasks
                .iter()
                .map(|t| {
                    pools
                        .iter()
                        .position(|p| **p == t.pool)
                        .expect("every task's pool is in the plan")
                })
                .collect(),
            retry_in: Duration::ZERO,
            budget: RetryBudget::default(),
            rng: options
                .seed
                .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed),
            marker_errors: std::cell::RefCell::new(Vec::new()),
            marked: (0..n).map(|_| std::cell::Cell::new(false)).collect(),
            interrupted: None,
            checks: vec![0; n],
            wait_until: options.wait.map(crate::clock::instant_after),
            dataset_looks: Default::default(),
            listings: Listings::default(),
            steer: super::steer::Steerer::new(plan.backfill.as_ref().map(|b| b.name.as_str())),
        }
    }

    pub(super) fn names(&self, instance: usize) -> (&'c str, &'c str) {
        let (t, i) = self.plan.locate(instance);
        let task = &self.plan.tasks[t];
        (task.name.as_str(), task.keys[i].as_str())
    }

    pub(super) fn enqueue(&self, instance: usize) {
        let (task, partition) = self.names(instance);
        // A recheck of an instance WAITING for its inputs is no new queueing.
        let recheck = self.checks[instance] > 0 && self.attempts[instance] == 0;
        if !recheck {
            self.cx
                .emit(State::Queued, Event::instance(task, partition));
        }
    }

    pub(super) fn run(&mut self, pool_slots: &[pool::Slots]) {
        // `None` on the channel: a stop request (SIGINT, SIGTERM) woke the
        // loop, which blocks until a report, a stop or the next retry.
        let (tx, rx) = mpsc::channel::<Option<Report>>();
        let waker = std::sync::Mutex::new(tx.clone());
        let _stops = interrupt::subscribe(move || {
            let _ = waker.lock().unwrap_or_else(|p| p.into_inner()).send(None);
        });
        let epoch = Instant::now();
        let ms = || u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let dag = Dag {
            plan: self.plan,
            task_pool: self.task_pool.clone(),
        };
        self.interrupted = interrupt::requested();
        let stop = self.interrupted.is_some() || self.cx.log_failed();
        let mut actions = self.machine.begin(&dag, stop, ms());
        std::thread::scope(|scope| {
            let workers = workers::Workers::new(scope);
            loop {
                let mut wait = None;
                let (absent, certs) = self.pass_looks(&actions);
                for action in std::mem::take(&mut actions) {
                    match action {
                        machine::RunAction::Queue(id) => self.enqueue(id),
                        machine::RunAction::Start(unit) => {
                            if self.steer.holds(
                                &self.cx.warehouse,
                                &unit,
                                self.interrupted.is_some(),
                            ) {
                                continue;
                            }
                            let slots = &pool_slots[machine::Graph::pool(&dag, unit[0])];
                            self.start_unit(&workers, unit, &tx, slots, (&absent, &certs));
                        }
                        machine::RunAction::Skip { instance, cause } => {
                            self.skipped(instance, cause)
                        }
                        machine::RunAction::WaitUntil(at) => wait = Some(at),
                        machine::RunAction::Finished => return,
                    }
                }
                // Without evidence there is no run: admit nothing more once the
                // event log refused a line, or once asked to stop (the running
                // commands' watchdogs stop their trees).
                if self.interrupted.is_none() {
                    self.interrupted = interrupt::requested();
                }
                let stopping = self.interrupted.is_some() || self.cx.log_failed();
                for unit in self.steer.release(&self.cx.warehouse, stopping) {
                    let slots = &pool_slots[machine::Graph::pool(&dag, unit[0])];
                    self.start_unit(&workers, unit, &tx, slots, (&HashSet::new(), &certs));
                }
                if !self.machine.stopping() && stopping {
                    actions = self.machine.step(&dag, machine::RunInput::Stop, ms());
                    continue;
                }
                let got = match self.steer.wait_until(wait.flatten(), ms()) {
                    Some(at) => rx.recv_timeout(Duration::from_millis(at.saturating_sub(ms()))),
                    None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                };
                let input = match got {
                    Ok(Some(report)) => self.report(report, ms()),
                    // Woken by a stop request, or a retry is due.
                    Ok(None) | Err(mpsc::RecvTimeoutError::Timeout) => machine::RunInput::Clock,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        unreachable!("the scheduler holds a sender")
                    }
                };
                // A report that lost the event log, or a stop that came with
                // it, admits nothing after it.
                if self.interrupted.is_none() {
                    self.interrupted = interrupt::requested();
                }
                if !self.machine.stopping() && (self.interrupted.is_some() || self.cx.log_failed())
                {
                    // Attempts are running (this report's among them): no
                    // action but a wait can come of it.
                    let _ = self.machine.step(&dag, machine::RunInput::Stop, ms());
                }
                actions = self.machine.step(&dag, input, ms());
                self.take_reports_in(&rx, &dag, &mut actions, &ms);
            }
        });
    }

    /// The reports already in, decided in the same pass: the instances they
    /// free start together, and their markers are read in one listing
    /// (`markers_absent`). Each step ends with the machine's whole state
    /// (`WaitUntil`), so the last one's is what the loop waits for. A stop
    /// request or a lost event log ends the draining: the loop's head then
    /// stops the machine before admitting more.
    fn take_reports_in(
        &mut self,
        rx: &mpsc::Receiver<Option<Report>>,
        dag: &Dag<'_>,
        actions: &mut Vec<machine::RunAction>,
        ms: &impl Fn() -> u64,
    ) {
        while !self.machine.stopping()
            && !actions.contains(&machine::RunAction::Finished)
            && interrupt::requested().is_none()
            && !self.cx.log_failed()
        {
            let Ok(Some(report)) = rx.try_recv() else {
                break;
            };
            let input = self.report(report, ms());
            actions.extend(self.machine.step(dag, input, ms()));
        }
    }

    /// The machine's input for a report (its events and markers written).
    fn report(&mut self, report: Report, now: u64) -> machine::RunInput {
        let instance = report.instance;
        self.listings.reported(!matches!(
            report.outcome,
            Outcome::AlreadyPublished | Outcome::Marked { .. }
        ));
        let verdict = match self.finish(report) {
            machine::Verdict::Retry { .. } => machine::Verdict::Retry {
                at: now
                    .saturating_add(u64::try_from(self.retry_in.as_millis()).unwrap_or(u64::MAX)),
            },
            v => v,
        };
        machine::RunInput::Report { instance, verdict }
    }

    /// What this pass reads once for the instances it starts: for each
    /// task with first attempts among `actions`, a listing of its markers
    /// (`marks::listed`), standing for each instance's read of its marker
    /// (the instances whose marker is known absent are returned), and a
    /// listing of the certification marks of each upstream dataset they
    /// read (`certs::Listed`), standing for each pin's read. Both are
    /// taken as the instances are started, as the reads were: an
    /// operator's marker or `uncertify` made before this pass (a
    /// rollback's HELD, or one a task of this run made before it ended) is
    /// in the listing; one made after it, as after a read. A listing an
    /// earlier pass took serves again while no report of an instance that
    /// may have run a command came in since, for at most
    /// [`crate::store::LOOK_REUSE`] (`Listings`). One instance starting
    /// lists too: a listing costs what its read did. A listing that fails
    /// leaves each instance to read its own.
    fn pass_looks(&mut self, actions: &[machine::RunAction]) -> (HashSet<usize>, Arc<Listed>) {
        let mut by_task: std::collections::BTreeMap<&'c str, Vec<usize>> = Default::default();
        for action in actions {
            if let machine::RunAction::Start(unit) = action {
                for &id in unit {
                    if self.attempts[id] == 0 {
                        by_task.entry(self.names(id).0).or_default().push(id);
                    }
                }
            }
        }
        for ids in by_task.values() {
            self.look_at_dataset(ids[0]);
        }
        let mut absent = HashSet::new();
        let mut certs = Listed::default();
        let warehouse = &self.cx.warehouse;
        for (task, ids) in by_task {
            if !self.options.allow_uncertified {
                for input in &self.cx.manifest.tasks[task].inputs {
                    if matches!(input.source, crate::manifest::InputSource::Task(_)) {
                        let names = self.listings.take(&format!("certs {}", input.dataset), || {
                            Listed::take(warehouse, &input.dataset)
                        });
                        if let Some(names) = names {
                            certs.insert(&input.dataset, names);
                        }
                    }
                }
            }
            let names = self.listings.take(&format!("markers {task}"), || {
                marks::listed(warehouse, task).ok().map(Arc::new)
            });
            let Some(names) = names else {
                continue;
            };
            absent.extend(
                ids.into_iter()
                    .filter(|&id| !names.contains(&marks::listed_name(self.names(id).1))),
            );
        }
        (absent, Arc::new(certs))
    }

    /// Looks at the commit logs of the output dataset of instance `id`'s
    /// task in one listing of the dataset, for every instance of the task
    /// not started yet, unless this run did so within
    /// [`crate::store::LOOK_REUSE`]: each instance's look at its own log
    /// (`Job::decide`) and at its upstreams' (their pins) is then this
    /// one while it is that fresh. Only for two instances or more, and at
    /// most a page of keys per two of them, so that it never costs more
    /// requests than their own listings; a partition past its pages, or a
    /// listing that fails, is looked at as before.
    fn look_at_dataset(&mut self, id: usize) {
        let (t, _) = self.plan.locate(id);
        let task = &self.plan.tasks[t];
        let dataset = &self.cx.manifest.tasks[task.name.as_str()].output.dataset;
        if self
            .dataset_looks
            .get(dataset)
            .is_some_and(|at| at.elapsed() <= crate::store::LOOK_REUSE)
        {
            return;
        }
        let waiting: Vec<&str> = (0..task.keys.len())
            .filter(|&i| self.attempts[self.plan.instance(t, i)] == 0)
            .map(|i| task.keys[i].as_str())
            .collect();
        if waiting.len() < 2 {
            return;
        }
        self.dataset_looks.insert(dataset.clone(), Instant::now());
        let pages = waiting.len() / 2;
        let _ = self
            .cx
            .warehouse
            .look_dataset(dataset, &waiting, pages * 1000);
    }

    /// Starts the instances of one unit the machine admitted: a batch's
    /// members meet before one command (`attempt::batch`), in key order.
    fn start_unit<'s>(
        &mut self,
        workers: &workers::Workers<'s, '_>,
        mut unit: Vec<usize>,
        tx: &mpsc::Sender<Option<Report>>,
        slots: &'s pool::Slots,
        (absent, certs): (&HashSet<usize>, &Arc<Listed>),
    ) where
        'c: 's,
    {
        let batched = !self.plan.tasks[self.plan.locate(unit[0]).0]
            .batches
            .is_empty();
        unit.sort_unstable();
        let mut seats = match batched {
            true => attempt::batch::Batch::seats(unit.len()),
            false => Vec::new(),
        }
        .into_iter();
        for id in unit {
            let looks = (absent.contains(&id), Arc::clone(certs));
            self.start(workers, id, tx.clone(), slots, looks, seats.next());
        }
    }

    pub(super) fn start<'s>(
        &mut self,
        workers: &workers::Workers<'s, '_>,
        id: usize,
        tx: mpsc::Sender<Option<Report>>,
        slots: &'s pool::Slots,
        (marker_listed_absent, certs): (bool, Arc<Listed>),
        seat: Option<attempt::batch::Seat>,
    ) where
        'c: 's,
    {
        self.attempts[id] += 1;
        let attempt = self.attempts[id];
        self.status[id] = Status::Running;
        let (task_name, partition) = self.names(id);
        let job = Job {
            task: &self.cx.manifest.tasks[task_name],
            partition,
            attempt,
            snapshot: self.snapshots[id].take(),
            first: attempt == 1,
            // What a `NAME+` reached through the mappings runs when what it
            // reads changed (early cutoff), never forced.
            force: self.options.force && {
                let (t, i) = self.plan.locate(id);
                self.plan.followed(t, i).is_none()
            },
            resume_since: self.options.resume_since,
            upstream_only: !self.explicit.contains(task_name) || {
                let (t, i) = self.plan.locate(id);
                self.plan.is_added(t, i)
            },
            allow_uncertified: self.options.allow_uncertified,
            marker_listed_absent,
            certs,
            seat,
        };
        let cx = self.cx;
        workers.run(move || {
            let on_its_way = slots.on_its_way();
            // A panic here (a bug in weir or a library, in this thread or a
            // rayon worker of its audit) ends the instance, never the run:
            // unreported, it would leave the scheduler waiting for it
            // forever, deaf to SIGINT. Unwinding has released its slot,
            // lease and staging copies (their `Drop`s).
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(cx, slots)));
            drop(on_its_way);
            let ran = ran.unwrap_or_else(|panic| {
                let reason = format!(
                    "the engine panicked in attempt {attempt}: {}",
                    panic_message(panic.as_ref())
                );
                Ran {
                    snapshot: None,
                    outcome: Outcome::Engine(reason),
                    // Unknown: cleared on a later publication, as before.
                    marker_found: true,
                }
            });
            let _ = tx.send(Some(Report {
                instance: id,
                snapshot: ran.snapshot,
                outcome: ran.outcome,
                marker_found: ran.marker_found,
            }));
        });
    }

    /// What the report means for the instance (its events and markers
    /// written); the machine decides what follows.
    pub(super) fn finish(&mut self, report: Report) -> machine::Verdict {
        let id = report.instance;
        // The budget is a fraction of attempts launched, not of instances that
        // turned out to have nothing to do.
        if self.attempts[id] == 1 && matches!(report.outcome, Outcome::Attempt(_)) {
            self.budget.record_first_attempt();
        }
        self.snapshots[id] = report.snapshot;
        if report.marker_found {
            self.marked[id].set(true);
        }
        let (task_name, partition) = self.names(id);
        let result = match report.outcome {
            // A lost race that left the partition with what this attempt
            // would have published (Stale and current) refused nothing that
            // matters.
            Outcome::AlreadyPublished
            | Outcome::Attempt(
                AttemptOutcome::AlreadyPublished | AttemptOutcome::Stale { current: true },
            ) => InstanceResult::AlreadyPublished,
            Outcome::Attempt(AttemptOutcome::Published { unsure }) => {
                match self.published(id, unsure) {
                    Ok(result) => result,
                    Err(verdict) => return verdict,
                }
            }
            Outcome::Engine(reason)
            | Outcome::Attempt(AttemptOutcome::Failed {
                ending: Ending::Engine(reason),
                ..
            }) => {
                self.engine_failed(id, &reason);
                InstanceResult::EngineFailed(reason)
            }
            Outcome::Marked { mark, consumable } => match self.marked(id, &mark, consumable) {
                Ok(result) => result,
                Err(verdict) => return verdict,
            },
            Outcome::Attempt(AttemptOutcome::Stale { current: false }) => {
                InstanceResult::RejectedStale
            }
            Outcome::NotReady(not_ready) => return self.not_ready(id, &not_ready),
            Outcome::SensorFailed(failure) => self.sensor_failed(id, &failure),
            Outcome::Unpinned(reason) => {
                self.cx.emit(
                    State::Held,
                    Event::instance(task_name, partition)
                        .detail(format!("inputs unavailable: {reason}")),
                );
                InstanceResult::Held(reason)
            }
            Outcome::Attempt(AttemptOutcome::Failed {
                ending: Ending::Interrupted(_),
                token,
                reason,
                ..
            }) => return self.interrupted(id, token, reason),
            Outcome::Attempt(AttemptOutcome::Failed {
                ending,
                token,
                reason,
                code,
            }) => {
                // A marker names the code that failed, not the run's.
                self.codes[id] = code;
                match self.after_failure(id, &ending, token.map(|t| t.get()), &reason) {
                    Some(result) => result,
                    None => {
                        self.status[id] = Status::Waiting;
                        return machine::Verdict::Retry { at: 0 };
                    }
                }
            }
        };
        let ok = result.is_ok();
        self.status[id] = Status::Done(result);
        if ok {
            machine::Verdict::Release
        } else {
            machine::Verdict::Block
        }
    }

    /// A publication: the marker that stood when it started cleared, and
    /// `Err(Release)` when the commit's error was settled by rereading the
    /// log (published, but the engine failed at its own work: exit 5).
    fn published(
        &mut self,
        id: usize,
        unsure: Option<String>,
    ) -> Result<InstanceResult, machine::Verdict> {
        let (task_name, partition) = self.names(id);
        // A marker another engine wrote while this one ran stays:
        // an operator's HELD still says what they meant, and a
        // quarantine of what is now current is cleared by the next
        // run that sees it (`job::moot`).
        let cleared = if self.marked[id].get() {
            marks::clear(&self.cx.warehouse, task_name, partition)
        } else {
            Ok(())
        };
        if let Err(e) = cleared {
            let why = format!(
                "cannot clear the marker of {task_name} {partition}: {}",
                chain(&e)
            );
            tracing::error!("{why}");
            self.marker_errors.borrow_mut().push(why);
        }
        match unsure {
            // Published, as the reread log shows; the engine still
            // failed at its own work, and says so with exit 5.
            Some(e) => {
                self.engine_failed(id, &format!("published, but the commit reported: {e}"));
                // Downstream may use it: it is published.
                self.status[id] = Status::Done(InstanceResult::EngineFailed(format!(
                    "published, but the commit reported: {e}"
                )));
                Err(machine::Verdict::Release)
            }
            None => Ok(InstanceResult::Published),
        }
    }

    /// An instance an operator's or a failure's mark keeps from running:
    /// told with how to release it; `Err(Release)` when what it published
    /// stays readable downstream.
    fn marked(
        &mut self,
        id: usize,
        mark: &InstanceMark,
        consumable: bool,
    ) -> Result<InstanceResult, machine::Verdict> {
        let (task_name, partition) = self.names(id);
        let release = format!(
            "release with `weir retry {} {task_name} --partition {} --note ...`",
            crate::partition::shell_word(&self.cx.manifest.path.display().to_string()),
            crate::partition::shell_word(partition)
        );
        // The event's state and the summary's column name the mark:
        // the text must not repeat it ("HELD HELD since …").
        let why = format!("since run {}: {}", mark.run_id, mark.reason);
        let (state, result) = match mark.mark {
            Mark::Held => (State::Held, InstanceResult::Held(why.clone())),
            Mark::Quarantined => (State::Quarantined, InstanceResult::Quarantined(why.clone())),
            Mark::Abandoned => (State::Skipped, InstanceResult::Skipped(why.clone())),
            Mark::Accepted => (State::Accepted, InstanceResult::Skipped(why.clone())),
        };
        let consumed = match (consumable, mark.mark) {
            (true, Mark::Accepted) => {
                "; downstream instances that read it among other partitions run without it"
            }
            (true, _) => "; its published generation stays readable downstream",
            _ => "",
        };
        self.cx.emit(
            state,
            Event::instance(task_name, partition).detail(format!("{why}; {release}{consumed}")),
        );
        if consumable {
            // HELD means "do not rebuild": what it published is
            // still the partition's generation, and downstream
            // instances pinned to another one rebuild from it.
            self.status[id] = Status::Done(match mark.mark {
                Mark::Accepted => result,
                _ => InstanceResult::Held(format!("{why}{consumed}")),
            });
            return Err(machine::Verdict::Release);
        }
        Ok(result)
    }

    /// Interrupted: its process tree is stopped, no marker, and the run
    /// stops starting work.
    fn interrupted(
        &mut self,
        id: usize,
        token: Option<crate::store::FencingToken>,
        reason: String,
    ) -> machine::Verdict {
        let (task_name, partition) = self.names(id);
        self.cx.emit(
            State::Interrupted,
            Event::instance(task_name, partition)
                .attempt(self.attempts[id], token.map(|t| t.get()))
                .detail(format!(
                    "{reason}; its process tree is stopped, no marker: the next run runs it"
                )),
        );
        // Downstream instances were not started: they are listed
        // as left undone, not SKIPPED.
        self.status[id] = Status::Done(InstanceResult::Interrupted(reason));
        machine::Verdict::Stopped
    }

    /// The engine failed at its own work for this instance: an event, no
    /// marker (nothing about the task is known), no retry spent.
    pub(super) fn engine_failed(&self, id: usize, reason: &str) {
        let (task_name, partition) = self.names(id);
        self.cx.emit(
            State::EngineFailed,
            Event::instance(task_name, partition).detail(format!(
                "{reason}; not the task's failure: no retry spent, no marker; the run exits 5"
            )),
        );
    }

    /// Decides what a failure gets; `None` means a retry was scheduled.
    pub(super) fn after_failure(
        &mut self,
        id: usize,
        ending: &Ending,
        token: Option<u64>,
        reason: &str,
    ) -> Option<InstanceResult> {
        let (task_name, partition) = self.names(id);
        let task = &self.cx.manifest.tasks[task_name];
        let rule = classify::rule(task, ending);
        let (disposition, class, kind) = classify::resolve(self.cx.manifest, task, &rule);
        let attempt = self.attempts[id];
        let event = || Event::instance(task_name, partition).attempt(attempt, token);
        let budget = &mut self.budget;
        match classify::next(disposition, attempt, class, || budget.try_take()) {
            classify::Next::Retry => {
                let rng = fastrand::Rng::with_seed(self.rng.u64(..));
                let backoff =
                    self.backoffs[id].get_or_insert_with(|| Backoff::new(class.backoff, rng));
                let delay = backoff.next().unwrap_or(Duration::ZERO);
                tracing::debug!(
                    task = task_name,
                    partition,
                    "retried: {kind} failure ({reason}), attempt {} of {} in {delay:?}",
                    attempt + 1,
                    class.max_attempts
                );
                self.cx.emit(
                    State::Retrying,
                    event()
                        .detail(format!(
                            "{kind} failure ({reason}); attempt {} of {} in {}",
                            attempt + 1,
                            class.max_attempts,
                            crate::manifest::duration::human(delay)
                        ))
                        .data(
                            Payload::Retrying(payload::Retrying {
                                class: kind.clone(),
                                delay_ms: delay.as_millis() as u64,
                                next_attempt: attempt + 1,
                            })
                            .to_json(),
                        ),
                );
                self.retry_in = delay;
                None
            }
            classify::Next::BudgetSpent => {
                let why = format!(
                    "{kind} failure ({reason}) but the run's retry budget is spent ({} retries): held for an operator",
                    self.budget.used()
                );
                self.cx.emit(
                    State::Held,
                    event().detail(why.clone()).data(
                        Payload::Decided(payload::Decided {
                            class: kind.clone(),
                            budget_spent: true,
                        })
                        .to_json(),
                    ),
                );
                self.mark(id, Mark::Held, &why);
                Some(InstanceResult::Held(why))
            }
            classify::Next::Exhausted(end) => {
                let why = format!(
                    "{kind} failure ({reason}) after {attempt} of {} attempts",
                    class.max_attempts
                );
                self.terminal(id, end, event(), why, &kind)
            }
            classify::Next::Terminal(other) => self.terminal(
                id,
                other,
                event(),
                format!("{kind} failure: {reason}"),
                &kind,
            ),
        }
    }

    pub(super) fn terminal(
        &self,
        id: usize,
        disposition: Disposition,
        event: Event,
        why: String,
        kind: &classify::FailureClass,
    ) -> Option<InstanceResult> {
        let data = Payload::Decided(payload::Decided {
            class: kind.clone(),
            budget_spent: false,
        })
        .to_json();
        let mark = if disposition == Disposition::Hold {
            Mark::Held
        } else {
            Mark::Quarantined
        };
        self.mark(id, mark, &why);
        if disposition == Disposition::Hold {
            self.cx.emit(
                State::Held,
                event
                    .detail(format!("{why}: held for an operator"))
                    .data(data),
            );
            Some(InstanceResult::Held(why))
        } else {
            self.cx.emit(
                State::Quarantined,
                event
                    .detail(format!("{why}: quarantined, not retried"))
                    .data(data),
            );
            Some(InstanceResult::Quarantined(why))
        }
    }

    /// Records an operator-visible state that outlives this run.
    pub(super) fn mark(&self, id: usize, mark: Mark, reason: &str) {
        self.marked[id].set(true);
        let (task, partition) = self.names(id);
        let record = InstanceMark {
            mark,
            task: task.to_string(),
            partition: partition.to_string(),
            run_id: self.cx.run_id.clone(),
            reason: reason.to_string(),
            input_snapshot_digest: self.snapshots[id].as_ref().map(InputSnapshot::digest),
            code_version: self.cx.manifest.tasks[task].code_version.clone(),
            code_fingerprint: Some(self.codes[id].clone().unwrap_or_else(|| {
                self.cx
                    .fingerprint(&self.cx.manifest.tasks[task])
                    .to_string()
            })),
            since: crate::clock::now_rfc3339(),
            note: None,
        };
        let written = self
            .cx
            .faults
            .hit(fault::Point::WriteMarker, task, partition)
            .map_err(|_| {
                crate::store::StoreError::io("_instances")(std::io::Error::from_raw_os_error(
                    libc::ENOSPC,
                ))
            })
            .and_then(|()| marks::write(&self.cx.warehouse, &record));
        if let Err(e) = written {
            let why = format!(
                "cannot record {task} {partition} as {}: {}",
                mark.as_str(),
                chain(&e)
            );
            tracing::error!("{why}");
            self.marker_errors.borrow_mut().push(why);
        }
    }

    /// The machine skipped `id`: upstream `cause` did not publish (or
    /// waits for its inputs, and so does `id`).
    pub(super) fn skipped(&mut self, id: usize, cause: usize) {
        if matches!(
            self.status[cause],
            Status::Done(InstanceResult::Waiting { .. })
        ) {
            return self.waits_for_upstream(id, cause);
        }
        let (cause_task, cause_partition) = self.names(cause);
        let (task, partition) = self.names(id);
        let why = format!("upstream `{cause_task}` {cause_partition} did not publish");
        tracing::debug!(task, partition, "skipped: {why}");
        self.cx.emit(
            State::Skipped,
            Event::instance(task, partition).detail(why.clone()).data(
                Payload::Skipped(payload::Skipped {
                    upstream_task: cause_task.to_string(),
                    upstream_partition: cause_partition.to_string(),
                })
                .to_json(),
            ),
        );
        self.status[id] = Status::Done(InstanceResult::Skipped(why));
    }

    pub(super) fn summary(&self, run_id: &str) -> RunSummary {
        let instances = (0..self.status.len())
            .map(|id| {
                let (task, partition) = self.names(id);
                let result = match &self.status[id] {
                    Status::Done(r) => r.clone(),
                    _ if self.interrupted.is_some() => {
                        InstanceResult::Interrupted("not started: the run was interrupted".into())
                    }
                    // Admission stops when the event log refuses a line.
                    _ if self.cx.log_failed() => InstanceResult::Skipped(
                        "not started: the run stopped admitting instances when the event log could not take a line".into(),
                    ),
                    _ => InstanceResult::Skipped("never became ready".into()),
                };
                (task.to_string(), partition.to_string(), result)
            })
            .collect();
        RunSummary {
            run_id: run_id.to_string(),
            instances,
            retries: self.budget.used(),
            events: self.cx.warehouse.event_log_location(self.cx.log.path()),
            log_error: None,
            log_complete: true,
            marker_errors: self.marker_errors.borrow().clone(),
            interrupted: self.interrupted,
        }
    }
}

/// The plan's instances as the machine walks them.
pub(super) struct Dag<'p> {
    pub(super) plan: &'p Plan,
    pub(super) task_pool: Vec<usize>,
}

impl machine::Graph for Dag<'_> {
    fn successors(&self, id: usize, f: &mut dyn FnMut(usize)) {
        let (t, i) = self.plan.locate(id);
        self.plan.for_each_successor(t, i, f);
    }

    fn pool(&self, id: usize) -> usize {
        self.task_pool[self.plan.locate(id).0]
    }

    fn batch(&self, id: usize) -> Option<usize> {
        let (t, i) = self.plan.locate(id);
        self.plan.batch_of(t, i)
    }
}
