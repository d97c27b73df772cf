//! The order tasks are planned in.

use crate::manifest::Manifest;

/// Kahn's algorithm with ties broken by declaration order, so plans are stable.
pub(crate) fn topological<'m>(manifest: &'m Manifest, selected: &[&'m str]) -> Vec<&'m str> {
    use std::collections::{BTreeSet, HashMap};
    let index: HashMap<&str, usize> = manifest
        .tasks
        .keys()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let selected_set: std::collections::HashSet<&str> = selected.iter().copied().collect();
    let in_plan = |n: &str| selected_set.contains(n);
    let mut indegree: HashMap<&str, usize> = HashMap::new();
    let mut downstream: HashMap<&str, Vec<&str>> = HashMap::new();
    for name in selected {
        let deps = manifest.tasks[*name]
            .depends_on
            .iter()
            .filter(|d| in_plan(d))
            .count();
        indegree.insert(name, deps);
        for d in &manifest.tasks[*name].depends_on {
            if in_plan(d) {
                downstream.entry(d.as_str()).or_default().push(name);
            }
        }
    }
    let mut ready: BTreeSet<(usize, &str)> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(n, _)| (index[n], *n))
        .collect();
    let mut order = Vec::with_capacity(selected.len());
    while let Some(first) = ready.pop_first() {
        order.push(first.1);
        for next in downstream.get(first.1).into_iter().flatten() {
            let d = indegree
                .get_mut(next)
                .expect("every downstream task is in the plan");
            *d -= 1;
            if *d == 0 {
                ready.insert((index[next], next));
            }
        }
    }
    order
}
