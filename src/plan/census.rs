//! What a plan's instances will do, counted up front from the warehouse:
//! run, be skipped as current, be redone as stale, stay blocked (held,
//! quarantined), wait (an external input not there yet), or stay an
//! accepted gap. A reviewer reads these before approving a plan.

use serde::Serialize;

use super::stale::Staleness;
use super::Plan;
use crate::manifest::Manifest;
use crate::store::marks::{self, Mark};
use crate::store::Warehouse;

/// How the plan's instances divide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Census {
    /// Not published: they run.
    pub will_run: usize,
    /// Published from the inputs and code they would read now: skipped.
    pub current: usize,
    /// Published from inputs or code that changed since: redone.
    pub stale: usize,
    /// Held or quarantined: they wait for an operator.
    pub blocked: usize,
    /// An external input is not there yet.
    pub waiting: usize,
    /// An operator accepted them as never to be built.
    pub accepted: usize,
}

impl Census {
    /// Counts the instances of `plan` in `warehouse` (`None`: nothing is
    /// published, every instance runs unless its input is missing).
    /// Also says, per instance in id order, whether it runs.
    pub fn take(
        manifest: &Manifest,
        warehouse: Option<&Warehouse>,
        plan: &Plan,
    ) -> (Census, Vec<bool>) {
        let mut census = Census::default();
        let mut runs = Vec::with_capacity(plan.instance_count());
        let mut counted_runs = 0;
        let mut staleness = Staleness::default();
        for task in &plan.tasks {
            let declared = &manifest.tasks[&task.name];
            // Markers are few: one listing per task, a read only of those listed.
            let listed = warehouse.map(|w| marks::listed(w, &task.name).ok());
            for key in task.keys.iter() {
                let mark = match (warehouse, &listed) {
                    (Some(_), Some(Some(names))) if !names.contains(&marks::listed_name(key)) => {
                        None
                    }
                    (Some(w), _) => marks::read(w, &task.name, key).ok().flatten(),
                    (None, _) => None,
                };
                let latest = warehouse
                    .and_then(|w| w.partition(&declared.output.dataset, key).latest().ok())
                    .flatten();
                let slot = match (&mark, &latest) {
                    (Some(m), _) if m.mark == Mark::Accepted => &mut census.accepted,
                    (Some(m), _) if m.mark == Mark::Quarantined => {
                        let w = warehouse.expect("a mark was read from a warehouse");
                        if staleness.quarantine_released(manifest, w, m).is_empty() {
                            &mut census.blocked
                        } else {
                            &mut census.will_run
                        }
                    }
                    (Some(_), _) => &mut census.blocked,
                    (None, Some(record)) => {
                        let w = warehouse.expect("a record was read from a warehouse");
                        if staleness.of(manifest, w, declared, record).is_empty() {
                            &mut census.current
                        } else {
                            &mut census.stale
                        }
                    }
                    (None, None)
                        if crate::inputs::missing_external(manifest, declared, key).is_some() =>
                    {
                        &mut census.waiting
                    }
                    (None, None) => &mut census.will_run,
                };
                *slot += 1;
                let ran = census.will_run + census.stale;
                // Stale ones are redone: they run too.
                runs.push(ran > counted_runs);
                counted_runs = ran;
            }
        }
        (census, runs)
    }
}
