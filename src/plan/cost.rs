//! Wall-time estimates: a list-scheduling simulation of the plan with each
//! instance taking what its task's attempts took lately (p50, then p90,
//! times the attempts an instance takes: [`super::history`]), or its
//! `expected_duration` where there is no history, honouring dependencies,
//! pool slots and `depends_on_past`. A batch (`batch = { max_partitions =
//! N }`) costs one attempt and one slot: its members ready while it starts
//! ride along. Event-driven (a heap of completions),
//! so 730,000 instances simulate in well under a second.
//!
//! The simulator is this one function, [`simulate`], fed one duration per
//! task: an engine-wide simulator can take its place without changing
//! what the plan states.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Serialize;

use super::history::{History, TaskCost};
use super::Plan;

/// The estimate of one pool.
#[derive(Debug, Clone, Serialize)]
pub struct PoolEstimate {
    /// Slots.
    pub slots: u32,
    /// Instances that run in it.
    pub instances: usize,
    /// Time from the start of the plan to the last completion in this pool.
    #[serde(
        rename = "estimated_wall_ms",
        with = "crate::manifest::duration::serde_millis"
    )]
    pub wall: Duration,
    /// Share of its slots' time, from start to the plan's end, that
    /// attempts occupy (0 to 1).
    pub busy_share: f64,
}

/// The estimate of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// Per pool, in plan order.
    pub pools: IndexMap<String, PoolEstimate>,
    /// Start to last completion.
    #[serde(
        rename = "estimated_wall_ms",
        with = "crate::manifest::duration::serde_millis"
    )]
    pub total: Duration,
    /// Start to last completion when every attempt takes its p90.
    #[serde(
        rename = "estimated_wall_p90_ms",
        with = "crate::manifest::duration::serde_millis"
    )]
    pub p90: Duration,
    /// What one attempt of each task costs, in plan task order.
    pub costs: Vec<TaskCost>,
    /// The chain of instances that ends last (at p50), each one waiting
    /// for the one before: runs of the same task as (task, instances).
    pub critical_path: Vec<(String, usize)>,
}

/// Simulates the plan with every task's `expected_duration`.
pub fn estimate(plan: &Plan) -> Estimate {
    estimate_from(plan, &History::default(), None)
}

/// Simulates the plan with what `history` says each task costs; an
/// instance `runs` says will not run (current, blocked …) takes no time.
pub fn estimate_from(plan: &Plan, history: &History, runs: Option<&[bool]>) -> Estimate {
    let costs: Vec<TaskCost> = plan
        .tasks
        .iter()
        .map(|t| history.cost(&t.name, t.expected_duration))
        .collect();
    let p50: Vec<u64> = costs.iter().map(|c| c.instance_ms(false)).collect();
    let p90: Vec<u64> = costs.iter().map(|c| c.instance_ms(true)).collect();
    let mut ends = vec![0u64; plan.instance_count()];
    let mut sim = simulate(plan, &p50, runs, &mut |id, _, end| ends[id] = end);
    sim.p90 = simulate(plan, &p90, runs, &mut |_, _, _| {}).total;
    sim.critical_path = critical_path(plan, &ends);
    sim.costs = costs;
    sim
}

/// Simulates the plan (declared durations) and reports every instance's
/// simulated start and end (milliseconds from the plan's start) to
/// `record(instance, start, end)`.
pub fn schedule(plan: &Plan, record: &mut dyn FnMut(usize, u64, u64)) -> Estimate {
    let declared: Vec<u64> = plan
        .tasks
        .iter()
        .map(|t| u64::try_from(t.expected_duration.as_millis()).unwrap_or(u64::MAX))
        .collect();
    let mut sim = simulate(plan, &declared, None, record);
    sim.p90 = sim.total;
    sim.costs = plan
        .tasks
        .iter()
        .map(|t| TaskCost::declared(t.expected_duration))
        .collect();
    sim
}

/// From the instance that ends last, back through the predecessor that
/// ended last, to one with none: run-length encoded by task.
fn critical_path(plan: &Plan, ends: &[u64]) -> Vec<(String, usize)> {
    let Some((mut id, _)) = ends
        .iter()
        .enumerate()
        .max_by_key(|(i, e)| (**e, Reverse(*i)))
    else {
        return Vec::new();
    };
    let mut chain: Vec<usize> = Vec::new();
    loop {
        let (t, i) = plan.locate(id);
        chain.push(t);
        let mut before: Option<usize> = None;
        plan.for_each_predecessor(t, i, |p| {
            if before.is_none_or(|b| ends[p] > ends[b]) {
                before = Some(p);
            }
        });
        match before {
            Some(p) => id = p,
            None => break,
        }
    }
    let mut path: Vec<(String, usize)> = Vec::new();
    for t in chain.into_iter().rev() {
        match path.last_mut() {
            Some((name, n)) if *name == plan.tasks[t].name => *n += 1,
            _ => path.push((plan.tasks[t].name.clone(), 1)),
        }
    }
    path
}

/// Each pool's estimate from what a simulation counted, ending at `now`.
fn pool_estimates(
    plan: &Plan,
    instances: &[usize],
    wall: &[u64],
    busy: &[u64],
    now: u64,
) -> IndexMap<String, PoolEstimate> {
    plan.pools
        .iter()
        .enumerate()
        .map(|(i, (name, slots))| {
            (
                name.clone(),
                PoolEstimate {
                    slots: *slots,
                    instances: instances[i],
                    wall: Duration::from_millis(wall[i]),
                    busy_share: if now == 0 || *slots == 0 {
                        0.0
                    } else {
                        busy[i] as f64 / (now as f64 * f64::from(*slots))
                    },
                },
            )
        })
        .collect()
}

/// The batches a simulation started, and the members riding along.
#[derive(Default)]
struct Batches {
    /// When each started batch ends, by its first member.
    ends: std::collections::HashMap<usize, u64>,
    /// Members running without a slot of their own.
    riders: std::collections::HashSet<usize>,
}

impl Batches {
    /// When `id` of `batch` ends if it rides along a batch not over at
    /// `now`.
    fn ride(&mut self, batch: Option<usize>, id: usize, now: u64) -> Option<u64> {
        let end = *self.ends.get(&batch?)?;
        (end > now).then(|| {
            self.riders.insert(id);
            end
        })
    }

    /// A member of `batch` started at `now` for `ms`; one that does not
    /// run opens no batch for the rest.
    fn started(&mut self, batch: Option<usize>, now: u64, ms: u64) {
        if let (Some(b), true) = (batch, ms > 0) {
            self.ends.insert(b, now.saturating_add(ms));
        }
    }
}

/// One simulation: each instance of task `t` takes `ms[t]`, or nothing
/// where `runs` says it does not run.
pub fn simulate(
    plan: &Plan,
    ms: &[u64],
    runs: Option<&[bool]>,
    record: &mut dyn FnMut(usize, u64, u64),
) -> Estimate {
    let pool_index: IndexMap<&str, usize> = plan
        .pools
        .keys()
        .enumerate()
        .map(|(i, p)| (p.as_str(), i))
        .collect();
    let task_pool: Vec<usize> = plan
        .tasks
        .iter()
        .map(|t| pool_index[t.pool.as_str()])
        .collect();
    let slots: Vec<u32> = plan.pools.values().copied().collect();
    let mut free = slots.clone();
    let mut ready: Vec<VecDeque<usize>> = vec![VecDeque::new(); slots.len()];
    let mut instances = vec![0usize; slots.len()];
    let mut wall = vec![0u64; slots.len()];
    let mut busy = vec![0u64; slots.len()];
    let mut indegree = plan.in_degrees();
    for (id, d) in indegree.iter().enumerate() {
        let (t, _) = plan.locate(id);
        instances[task_pool[t]] += 1;
        if *d == 0 {
            ready[task_pool[t]].push_back(id);
        }
    }
    // Task of each instance without a binary search per event.
    let mut task_of = Vec::with_capacity(indegree.len());
    for (t, task) in plan.tasks.iter().enumerate() {
        task_of.extend(std::iter::repeat_n(t as u32, task.keys.len()));
    }
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut batches = Batches::default();
    let mut now = 0u64;
    loop {
        for (p, queue) in ready.iter_mut().enumerate() {
            while let Some(&id) = queue.front() {
                let t = task_of[id] as usize;
                let batch = plan.batch_of(t, id - plan.offsets[t]);
                if let Some(end) = batches.ride(batch, id, now) {
                    queue.pop_front();
                    record(id, now, end);
                    running.push(Reverse((end, id)));
                    continue;
                }
                if free[p] == 0 {
                    break;
                }
                queue.pop_front();
                free[p] -= 1;
                let ms = match runs.and_then(|r| r.get(id)) {
                    Some(false) => 0,
                    _ => ms[t],
                };
                busy[p] = busy[p].saturating_add(ms);
                record(id, now, now.saturating_add(ms));
                running.push(Reverse((now.saturating_add(ms), id)));
                batches.started(batch, now, ms);
            }
        }
        let Some(Reverse((end, id))) = running.pop() else {
            break;
        };
        now = end;
        let t = task_of[id] as usize;
        let p = task_pool[t];
        if !batches.riders.remove(&id) {
            free[p] += 1;
        }
        wall[p] = wall[p].max(end);
        let i = id - plan.offsets[t];
        plan.for_each_successor(t, i, |s| {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready[task_pool[task_of[s] as usize]].push_back(s);
            }
        });
    }
    let pools = pool_estimates(plan, &instances, &wall, &busy, now);
    Estimate {
        pools,
        total: Duration::from_millis(now),
        p90: Duration::from_millis(now),
        costs: Vec::new(),
        critical_path: Vec::new(),
    }
}
