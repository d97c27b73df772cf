//! What a command covers: the latest partitions, given keys, a backfill,
//! a repair's instances or an ad-hoc range.

/// What a command covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The latest complete partition of each scheme.
    Latest,
    /// Explicit partition keys.
    Partitions(Vec<String>),
    /// A declared backfill.
    Backfill(String),
    /// Exactly these instances (`weir repair`), in the backfill's pool and
    /// under its name and reason: (task, keys) pairs.
    Repair {
        /// What it rebuilds, in words (runs are resumed by it).
        name: String,
        /// The pool every instance runs in.
        pool: String,
        /// Why.
        reason: String,
        /// The keys of each task.
        instances: Vec<(String, Vec<String>)>,
    },
    /// An ad-hoc range (`weir run --from A --to B`): the partitions a
    /// declared backfill over `from..=to` would cover, in the tasks' own pools.
    Range {
        /// First day (or static key).
        from: String,
        /// Last day (or static key).
        to: String,
    },
}
