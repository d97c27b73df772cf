//! weir: a declarative data-pipeline engine.
//!
//! A TOML manifest declares tasks, partitions, pools, retry classes, gates and
//! backfills. weir validates it (`manifest`), plans it (`plan`), runs it
//! (`exec`) and publishes every partition only through write-audit-publish:
//! each attempt writes a private candidate, the gates audit it (`audit`), and
//! one fenced compare-and-swap on the partition's commit log makes it visible
//! (`store`). Every decision is an event (`events`).
//!
//! # Layers
//!
//! Each module imports only from the layers below it, and modules on one
//! layer do not import each other; inside a folder, files depend on each
//! other one way only. `tests/it/layers.rs` reads this list and fails on an
//! import back up or a circle, naming file and line. Bottom first:
//!
//! 1. `clock`, `cron`, `partition` — pure values with no weir state: the time source, schedule expressions, partition keys and their mappings.
//! 2. `store` — the warehouse and its backends (directory or S3), opened from a location; knows bytes, commits and fences, not manifests.
//! 3. `events`, `audit` — the run log written into the store, and the readers and gates that judge a candidate's files.
//! 4. `manifest` — the declared pipeline, validated against what the store and audit accept (names, formats, gates).
//! 5. `inputs` — pinning what an instance reads and staging private copies of it: shared by planning (staleness) and running.
//! 6. `plan` — which instances a run owes, from the manifest, the store's records and pinned inputs.
//! 7. `exec` — running a plan: attempts, pools, leases, retries, publishing.
//! 8. `http` — the one HTTP client for what weir sends itself; resolves header secrets through the task environment.
//! 9. `notify`, `lineage` — what a run tells the outside (pager targets, OpenLineage), fed by the run's events.
//! 10. `serve` — the long-running scheduler that starts runs on cron and sensor triggers.
//! 11. `ops` — the operator's actions and read models (status, accept, rollback, gc, verify, SLOs), once for every front end.
//! 12. `report` — the static HTML report built from ops' read models.
//! 13. `console` — the live web console over ops and report.
//! 14. `cli` — parses arguments and prints; every decision it shows is made below.

pub mod audit;
pub mod cli;
pub mod clock;
#[cfg(feature = "console")]
pub mod console;
pub mod cron;
pub mod events;
pub mod exec;
pub mod http;
pub mod inputs;
pub mod lineage;
pub mod manifest;
pub mod notify;
pub mod ops;
pub mod partition;
pub mod plan;
pub mod report;
pub mod serve;
pub mod store;
