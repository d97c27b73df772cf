//! Accepting a gap: an operator decides that a partition will not be built
//! (its source is lost for good). The instance gets an ACCEPTED marker
//! (`store::marks`): it is not run until `weir retry` undoes the decision,
//! and the planner does not add it as unpublished upstream work. A
//! downstream instance that reads it among several partitions (a fan-in, a
//! window, a rollup) is pinned without it, and its commit record's input
//! snapshot names it under `accepted_missing`; one that reads only it (an
//! identity or offset mapping) stays blocked, since it would have nothing
//! to build from.

use crate::manifest::Manifest;
use crate::store::marks::{self, Mark};
use crate::store::Warehouse;

/// Whether partition `key` of `dataset` is an accepted gap.
pub fn is_accepted(manifest: &Manifest, warehouse: &Warehouse, dataset: &str, key: &str) -> bool {
    manifest.producer(dataset).is_some_and(|task| {
        marks::read(warehouse, &task.name, key)
            .is_ok_and(|m| m.is_some_and(|m| m.mark == Mark::Accepted))
    })
}
