//! Accepting a gap: an operator decides that a partition will not be built
//! (its source is lost for good). The instance gets an ACCEPTED marker
//! (`store::marks`): it is not run until `weir retry` undoes the decision,
//! and the planner does not add it as unpublished upstream work. A
//! downstream instance that reads it among several partitions (a fan-in, a
//! window, a rollup) is pinned without it, and its commit record's input
//! snapshot names it under `accepted_missing`; one that reads only it (an
//! identity or offset mapping) stays blocked, since it would have nothing
//! to build from.
