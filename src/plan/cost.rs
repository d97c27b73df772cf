//! Wall-time estimates: a list-scheduling simulation of the plan with each
//! instance taking its task's `expected_duration`, honouring dependencies,
//! pool slots and `depends_on_past`. Event-driven (a heap of completions),
//! so 730,000 instances simulate in well under a second.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Serialize;

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
}

/// Simulates the plan.
pub fn estimate(plan: &Plan) -> Estimate {
    simulate(plan, &mut |_, _, _| {})
}

/// Simulates the plan and reports every instance's simulated start and end
/// (milliseconds from the plan's start) to `record(instance, start, end)`.
pub fn schedule(plan: &Plan, record: &mut dyn FnMut(usize, u64, u64)) -> Estimate {
    simulate(plan, record)
}

fn simulate(plan: &Plan, record: &mut dyn FnMut(usize, u64, u64)) -> Estimate {
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
    let mut now = 0u64;
    loop {
        for (p, queue) in ready.iter_mut().enumerate() {
            while free[p] > 0 {
                let Some(id) = queue.pop_front() else { break };
                free[p] -= 1;
                let t = task_of[id] as usize;
                let ms =
                    u64::try_from(plan.tasks[t].expected_duration.as_millis()).unwrap_or(u64::MAX);
                record(id, now, now.saturating_add(ms));
                running.push(Reverse((now.saturating_add(ms), id)));
            }
        }
        let Some(Reverse((end, id))) = running.pop() else {
            break;
        };
        now = end;
        let t = task_of[id] as usize;
        let p = task_pool[t];
        free[p] += 1;
        wall[p] = wall[p].max(end);
        let i = id - plan.offsets[t];
        plan.for_each_successor(t, i, |s| {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready[task_pool[task_of[s] as usize]].push_back(s);
            }
        });
    }
    let pools = plan
        .pools
        .iter()
        .enumerate()
        .map(|(i, (name, slots))| {
            (
                name.clone(),
                PoolEstimate {
                    slots: *slots,
                    instances: instances[i],
                    wall: Duration::from_millis(wall[i]),
                },
            )
        })
        .collect();
    Estimate {
        pools,
        total: Duration::from_millis(now),
    }
}
