//! The run's decision machine: which instance is queued, started, skipped
//! or retried when, given what attempts report. Pure: no threads, no I/O
//! and no clock of its own (instants are milliseconds the caller counts),
//! so its policy is unit-tested on a simulated clock. The scheduler in
//! `mod.rs` is its executor: it does what the actions say (events, attempt
//! threads) and blocks on one channel with the next retry as its timeout.
//!
//! ```text
//!  inputs   Report(instance, Release | Block | Retry(at) | Stopped) · Clock(now) · Stop
//!  actions  Queue(instance) · Start(instances) · Skip(instance, cause) · WaitUntil(t) · Finished
//! ```
//!
//! Ready sets are updated incrementally from in-degree counters (no
//! rescans), and each pool admits a bounded number of units at once. A
//! unit is one instance, or the members of one batch (`Graph::batch`) that
//! are ready together: a member queued while another of its batch waits
//! to start (ready, or for its retry) joins that one's unit, which starts
//! them all in one `Start` and holds one admission until the last of them
//! reports.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// The instance graph the machine walks.
pub(crate) trait Graph {
    /// Instances whose upstream `id` is.
    fn successors(&self, id: usize, f: &mut dyn FnMut(usize));
    /// The pool instance `id` runs in.
    fn pool(&self, id: usize) -> usize;
    /// The batch instance `id` belongs to (an id shared by its members),
    /// if its task runs batches.
    fn batch(&self, _id: usize) -> Option<usize> {
        None
    }
}

/// How an attempt's report leaves its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Done, and its downstream may use what it published.
    Release,
    /// Done without a usable output: its waiting downstream is skipped.
    Block,
    /// Tried again at this instant.
    Retry {
        /// When (ms, the caller's clock).
        at: u64,
    },
    /// Stopped by a stop request: done, its downstream left undone.
    Stopped,
}

/// What the executor tells the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunInput {
    /// An attempt of `instance` ended.
    Report {
        /// The instance.
        instance: usize,
        /// What it means for the instance.
        verdict: Verdict,
    },
    /// Woken (a retry may be due).
    Clock,
    /// Admit nothing more: a stop request, or the event log refused a line.
    Stop,
}

/// What the machine tells the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunAction {
    /// The instance is ready (emit QUEUED).
    Queue(usize),
    /// Start one attempt of these instances together: one, or the members
    /// of a batch ready together (in the order they were queued).
    Start(Vec<usize>),
    /// It will not run: upstream `cause` did not publish.
    Skip {
        /// The skipped instance.
        instance: usize,
        /// The instance that did not publish.
        cause: usize,
    },
    /// Nothing to do before this instant (`None`: until a report).
    WaitUntil(Option<u64>),
    /// The run is over.
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Waiting,
    Running,
    Done,
}

/// The run's scheduling state.
#[derive(Debug)]
pub(crate) struct RunMachine {
    indegree: Vec<u32>,
    state: Vec<St>,
    ready: Vec<VecDeque<usize>>,
    admitted: Vec<u32>,
    limits: Vec<u32>,
    active: usize,
    delayed: BinaryHeap<Reverse<(u64, usize)>>,
    stopping: bool,
    /// The unit waiting to start (ready or for its retry) of each batch
    /// that has one, by batch: its first member.
    gathering: HashMap<usize, usize>,
    /// The members that joined each waiting unit, by its first member.
    joined: HashMap<usize, Vec<usize>>,
    /// The first member of each started unit with members yet to report,
    /// by member; and how many have yet to, by first member.
    unit_of: HashMap<usize, usize>,
    unreported: HashMap<usize, usize>,
}

impl RunMachine {
    /// A machine over instances with these in-degrees; pool `p` admits at
    /// most `limits[p]` instances at once.
    pub(crate) fn new(indegree: Vec<u32>, limits: Vec<u32>) -> RunMachine {
        let n = indegree.len();
        RunMachine {
            indegree,
            state: vec![St::Waiting; n],
            ready: vec![VecDeque::new(); limits.len()],
            admitted: vec![0; limits.len()],
            limits,
            active: 0,
            delayed: BinaryHeap::new(),
            stopping: false,
            gathering: HashMap::new(),
            joined: HashMap::new(),
            unit_of: HashMap::new(),
            unreported: HashMap::new(),
        }
    }

    /// Whether it admits nothing more.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping
    }

    /// The first actions: every instance without upstream is queued, and
    /// admitted as pools allow (unless `stop` already).
    pub(crate) fn begin(&mut self, graph: &dyn Graph, stop: bool, now: u64) -> Vec<RunAction> {
        self.stopping = stop;
        let mut out = Vec::new();
        for id in 0..self.indegree.len() {
            if self.indegree[id] == 0 {
                self.queue(graph, id, &mut out);
            }
        }
        self.tick(graph, now, &mut out);
        out
    }

    /// One input at `now`, and what to do about it.
    pub(crate) fn step(&mut self, graph: &dyn Graph, input: RunInput, now: u64) -> Vec<RunAction> {
        let mut out = Vec::new();
        match input {
            RunInput::Report { instance, verdict } => {
                self.active -= 1;
                if self.unit_reported(instance) {
                    self.admitted[graph.pool(instance)] -= 1;
                }
                match verdict {
                    Verdict::Release => {
                        self.state[instance] = St::Done;
                        let mut ready = Vec::new();
                        let indegree = &mut self.indegree;
                        graph.successors(instance, &mut |s| {
                            indegree[s] -= 1;
                            if indegree[s] == 0 {
                                ready.push(s);
                            }
                        });
                        for s in ready {
                            if self.state[s] == St::Waiting {
                                self.queue(graph, s, &mut out);
                            }
                        }
                    }
                    Verdict::Block => {
                        self.state[instance] = St::Done;
                        let mut stack = vec![instance];
                        while let Some(cur) = stack.pop() {
                            let mut next = Vec::new();
                            graph.successors(cur, &mut |s| next.push(s));
                            for s in next {
                                if self.state[s] == St::Waiting {
                                    self.state[s] = St::Done;
                                    out.push(RunAction::Skip {
                                        instance: s,
                                        cause: instance,
                                    });
                                    stack.push(s);
                                }
                            }
                        }
                    }
                    Verdict::Retry { at } => {
                        self.state[instance] = St::Waiting;
                        // A batch failed together retries together, at
                        // its first member's time.
                        if !self.joins(graph, instance) {
                            self.delayed.push(Reverse((at, instance)));
                        }
                    }
                    Verdict::Stopped => self.state[instance] = St::Done,
                }
            }
            RunInput::Clock => {}
            RunInput::Stop => self.stopping = true,
        }
        self.tick(graph, now, &mut out);
        out
    }

    fn queue(&mut self, graph: &dyn Graph, id: usize, out: &mut Vec<RunAction>) {
        out.push(RunAction::Queue(id));
        // Due again after a retry: its unit's joined members are ready too.
        if let Some(members) = self.joined.get(&id) {
            out.extend(members.iter().map(|m| RunAction::Queue(*m)));
        }
        if !self.joins(graph, id) {
            self.ready[graph.pool(id)].push_back(id);
        }
    }

    /// Whether `id` joined a unit of its batch waiting to start; if not,
    /// and it is in a batch, it leads a new one.
    fn joins(&mut self, graph: &dyn Graph, id: usize) -> bool {
        let Some(batch) = graph.batch(id) else {
            return false;
        };
        match self.gathering.get(&batch) {
            Some(&first) if first != id => {
                self.joined.entry(first).or_default().push(id);
                true
            }
            _ => {
                self.gathering.insert(batch, id);
                false
            }
        }
    }

    /// A member of a started unit reported: whether it was the last (then
    /// the unit's admission is given back).
    fn unit_reported(&mut self, id: usize) -> bool {
        let Some(first) = self.unit_of.remove(&id) else {
            return true;
        };
        let left = self
            .unreported
            .get_mut(&first)
            .expect("a started unit counts its members");
        *left -= 1;
        if *left > 0 {
            return false;
        }
        self.unreported.remove(&first);
        true
    }

    fn tick(&mut self, graph: &dyn Graph, now: u64, out: &mut Vec<RunAction>) {
        while let Some(&Reverse((at, id))) = self.delayed.peek() {
            if at > now || self.stopping {
                break;
            }
            self.delayed.pop();
            self.queue(graph, id, out);
        }
        if !self.stopping {
            for pool in 0..self.ready.len() {
                while self.admitted[pool] < self.limits[pool] {
                    let Some(id) = self.ready[pool].pop_front() else {
                        break;
                    };
                    let mut unit = vec![id];
                    if let Some(batch) = graph.batch(id) {
                        self.gathering.remove(&batch);
                        unit.extend(self.joined.remove(&id).unwrap_or_default());
                        if unit.len() > 1 {
                            for m in &unit {
                                self.unit_of.insert(*m, id);
                            }
                            self.unreported.insert(id, unit.len());
                        }
                    }
                    self.admitted[pool] += 1;
                    self.active += unit.len();
                    for m in &unit {
                        self.state[*m] = St::Running;
                    }
                    out.push(RunAction::Start(unit));
                }
            }
        }
        if self.active == 0 && (self.delayed.is_empty() || self.stopping) {
            out.push(RunAction::Finished);
            return;
        }
        let next = match self.stopping {
            true => None,
            false => self.delayed.peek().map(|Reverse((at, _))| *at),
        };
        out.push(RunAction::WaitUntil(next));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain per pool of `(successors, pool)` per instance.
    struct G(Vec<(Vec<usize>, usize)>);

    /// `G` whose instances are in batches: `batch[i]`.
    struct B(G, Vec<Option<usize>>);

    impl Graph for B {
        fn successors(&self, id: usize, f: &mut dyn FnMut(usize)) {
            self.0.successors(id, f)
        }
        fn pool(&self, id: usize) -> usize {
            self.0.pool(id)
        }
        fn batch(&self, id: usize) -> Option<usize> {
            self.1[id]
        }
    }

    #[test]
    fn a_batch_ready_together_starts_as_one_unit_holding_one_admission_until_all_report() {
        // 0..3 in batch 0, 3..5 in batch 3, all in pool 0 of limit 1.
        let g = B(
            G((0..5).map(|_| (vec![], 0)).collect()),
            vec![Some(0), Some(0), Some(0), Some(3), Some(3)],
        );
        let mut m = RunMachine::new(indegree(&g.0), vec![1]);
        let a = m.begin(&g, false, 0);
        assert!(a.contains(&RunAction::Start(vec![0, 1, 2])));
        assert_eq!(started(&a), [0, 1, 2]);
        let report = |i, verdict| RunInput::Report {
            instance: i,
            verdict,
        };
        // The unit's slot is held until its last member reports.
        assert!(started(&m.step(&g, report(0, Verdict::Release), 1)).is_empty());
        assert!(started(&m.step(&g, report(1, Verdict::Block), 2)).is_empty());
        // Its third fails: it retries alone, after the other batch.
        let a = m.step(&g, report(2, Verdict::Retry { at: 10 }), 3);
        assert!(a.contains(&RunAction::Start(vec![3, 4])));
        // Both fail: they retry as one unit, at the first one's time.
        m.step(&g, report(3, Verdict::Retry { at: 20 }), 4);
        let a = m.step(&g, report(4, Verdict::Retry { at: 15 }), 5);
        assert_eq!(a, [RunAction::WaitUntil(Some(10))]);
        let a = m.step(&g, RunInput::Clock, 10);
        assert_eq!(started(&a), [2]);
        let a = m.step(&g, report(2, Verdict::Release), 11);
        assert_eq!(a, [RunAction::WaitUntil(Some(20))]);
        let a = m.step(&g, RunInput::Clock, 20);
        assert!(a.contains(&RunAction::Start(vec![3, 4])));
        m.step(&g, report(4, Verdict::Release), 21);
        let a = m.step(&g, report(3, Verdict::Release), 22);
        assert_eq!(a, [RunAction::Finished]);
    }

    impl Graph for G {
        fn successors(&self, id: usize, f: &mut dyn FnMut(usize)) {
            for s in &self.0[id].0 {
                f(*s);
            }
        }
        fn pool(&self, id: usize) -> usize {
            self.0[id].1
        }
    }

    fn indegree(g: &G) -> Vec<u32> {
        let mut d = vec![0; g.0.len()];
        for (succ, _) in &g.0 {
            for s in succ {
                d[*s] += 1;
            }
        }
        d
    }

    fn started(actions: &[RunAction]) -> Vec<usize> {
        actions
            .iter()
            .filter_map(|a| match a {
                RunAction::Start(i) => Some(i.clone()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn a_pool_admits_up_to_its_limit_and_downstream_waits_for_upstream() {
        // 0 -> 2, 1 -> 2, all in pool 0 of limit 1.
        let g = G(vec![(vec![2], 0), (vec![2], 0), (vec![], 0)]);
        let mut m = RunMachine::new(indegree(&g), vec![1]);
        let a = m.begin(&g, false, 0);
        assert_eq!(a[..2], [RunAction::Queue(0), RunAction::Queue(1)]);
        assert_eq!(started(&a), [0]);
        assert_eq!(a.last(), Some(&RunAction::WaitUntil(None)));
        let report = |i| RunInput::Report {
            instance: i,
            verdict: Verdict::Release,
        };
        assert_eq!(started(&m.step(&g, report(0), 5)), [1]);
        let a = m.step(&g, report(1), 6);
        assert_eq!(a[..2], [RunAction::Queue(2), RunAction::Start(vec![2])]);
        assert_eq!(m.step(&g, report(2), 7), [RunAction::Finished]);
    }

    #[test]
    fn a_retry_waits_for_its_backoff_on_the_simulated_clock() {
        let g = G(vec![(vec![1], 0), (vec![], 0)]);
        let mut m = RunMachine::new(indegree(&g), vec![3]);
        m.begin(&g, false, 0);
        let a = m.step(
            &g,
            RunInput::Report {
                instance: 0,
                verdict: Verdict::Retry { at: 1_000 },
            },
            10,
        );
        assert_eq!(a, [RunAction::WaitUntil(Some(1_000))]);
        // Woken early: nothing, the same deadline.
        assert_eq!(
            m.step(&g, RunInput::Clock, 999),
            [RunAction::WaitUntil(Some(1_000))]
        );
        let a = m.step(&g, RunInput::Clock, 1_000);
        assert_eq!(
            a,
            [
                RunAction::Queue(0),
                RunAction::Start(vec![0]),
                RunAction::WaitUntil(None)
            ]
        );
    }

    #[test]
    fn a_failure_skips_everything_downstream_once_naming_its_cause() {
        // 0 -> 1 -> 3, 0 -> 2 -> 3, and 4 independent.
        let g = G(vec![
            (vec![1, 2], 0),
            (vec![3], 0),
            (vec![3], 0),
            (vec![], 0),
            (vec![], 0),
        ]);
        let mut m = RunMachine::new(indegree(&g), vec![4]);
        assert_eq!(started(&m.begin(&g, false, 0)), [0, 4]);
        let a = m.step(
            &g,
            RunInput::Report {
                instance: 0,
                verdict: Verdict::Block,
            },
            1,
        );
        let mut skipped: Vec<(usize, usize)> = a
            .iter()
            .filter_map(|x| match x {
                RunAction::Skip { instance, cause } => Some((*instance, *cause)),
                _ => None,
            })
            .collect();
        skipped.sort();
        assert_eq!(skipped, [(1, 0), (2, 0), (3, 0)]);
        let a = m.step(
            &g,
            RunInput::Report {
                instance: 4,
                verdict: Verdict::Release,
            },
            2,
        );
        assert_eq!(a, [RunAction::Finished]);
    }

    #[test]
    fn a_stop_admits_nothing_more_drops_pending_retries_and_finishes_when_attempts_end() {
        let g = G(vec![(vec![], 0), (vec![], 0), (vec![], 0)]);
        let mut m = RunMachine::new(indegree(&g), vec![1]);
        assert_eq!(started(&m.begin(&g, false, 0)), [0]);
        let a = m.step(
            &g,
            RunInput::Report {
                instance: 0,
                verdict: Verdict::Retry { at: 50 },
            },
            1,
        );
        assert_eq!(started(&a), [1]);
        // Stopped: the running attempt is waited for, nothing else starts,
        // the pending retry is not waited for.
        assert_eq!(m.step(&g, RunInput::Stop, 2), [RunAction::WaitUntil(None)]);
        let a = m.step(
            &g,
            RunInput::Report {
                instance: 1,
                verdict: Verdict::Stopped,
            },
            60,
        );
        assert!(started(&a).is_empty());
        assert_eq!(a.last(), Some(&RunAction::Finished));
        // Stopped before it began: nothing starts at all.
        let mut early = RunMachine::new(indegree(&g), vec![1]);
        let a = early.begin(&g, true, 0);
        assert!(started(&a).is_empty());
        assert_eq!(a.last(), Some(&RunAction::Finished));
    }
}
