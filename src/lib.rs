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
//! Data flows manifest → plan → exec → audit → store → events; imports go
//! the other way, down. Each module imports only from the layers below it,
//! and modules on one layer do not import each other; inside a folder,
//! files depend on each other one way only, and a folder's `mod.rs` is
//! one of them that may only declare, re-export and dispatch downward (a
//! child naming what `mod.rs` defines while `mod.rs` names that child is
//! a circle). `tests/it/layers.rs` reads this list and fails
//! on an import back up or a circle, naming file and line. Where a lower
//! layer needs something only a higher one knows, it declares what it needs
//! and the higher one provides it: the store opens a `store::Location` and
//! reads a `store::delta::TableTask` (the manifest's `Pipeline` and `Task`),
//! the engine tells an `exec::Outbox` (the `notify` outbox). Settings
//! from the environment (`WEIR_STAGING`, `WEIR_CGROUP`, fault points) are
//! read once by `cli` into an `exec::Settings` and passed down;
//! `tests/it/environment_reads.rs` names every other reader and why.
//! Bottom first:
//!
//! 1. `clock`, `cron`, `partition` — pure values with no weir state: the time source, schedule expressions, partition keys and their mappings.
//! 2. `store` — the warehouse and its backends (directory or S3), opened from a location; knows bytes, commits and fences, not manifests.
//! 3. `process` — the operating system's side of a command: spawning without a fork, a process tree and its cgroup stopped whole, stop requests (SIGINT, SIGTERM) and the watchdogs' timer, the engine's own protection; every `unsafe` block of running commands is here, behind safe functions.
//! 4. `events`, `audit` — the run log written into the store, and the readers and gates that judge a candidate's files.
//! 5. `manifest` — the declared pipeline, validated against what the store and audit accept (names, formats, gates).
//! 6. `inputs`, `secrets` — pinning what an instance reads and staging private copies of it: shared by planning (staleness) and running; reading the secret values a manifest references (`env:`, `file:`) and redacting them.
//! 7. `plan` — which instances a run owes, from the manifest, the store's records and pinned inputs.
//! 8. `http` — the one HTTP client for what weir sends itself; its header values are read and redacted by `secrets`, as task environment values are.
//! 9. `exec` — running a plan: attempts, pools, leases, retries, publishing; it builds each task's environment.
//! 10. `notify`, `lineage` — what a run tells the outside (pager targets, OpenLineage), fed by the run's events.
//! 11. `session` — one run as every front end starts it (run, backfill, retry, repair, serve's batches): signals, the notify outbox, lineage, the Delta tables' repair.
//! 12. `serve` — the long-running scheduler: starts runs (through `session`) on cron and sensor triggers, and records its own status.
//! 13. `sim` — the deterministic simulator: serve's real machine and records, K engines, a simulated clock and store faults, invariants checked at every step.
//! 14. `ops` — the operator's actions and read models (status, decisions, rollback, gc, verify, SLOs), once for every front end; status includes serve's.
//! 15. `report` — the static HTML report built from ops' read models.
//! 16. `console` — the live web console over ops and report.
//! 17. `cli` — parses arguments and prints; every decision it shows is made below.
//!
//! One crate, not a workspace: the test holds the direction at the cost of
//! reading some text, where a crate per layer would add links and build
//! units on a two-core CI; the list above is where the crates would be cut.

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
pub mod process;
pub mod report;
pub mod secrets;
pub mod serve;
pub mod session;
pub mod sim;
pub mod store;
