//! weir: a declarative data-pipeline engine.
//!
//! A TOML manifest declares tasks, partitions, pools, retry classes, gates and
//! backfills. weir validates it (`manifest`), plans it (`plan`), runs it
//! (`exec`) and publishes every partition only through write-audit-publish:
//! each attempt writes a private candidate, the gates audit it (`audit`), and
//! one fenced compare-and-swap on the partition's commit log makes it visible
//! (`store`). Every decision is an event (`events`).

pub mod audit;
pub mod cli;
pub mod clock;
#[cfg(feature = "console")]
pub mod console;
pub mod events;
pub mod exec;
pub mod http;
pub mod lineage;
pub mod manifest;
pub mod notify;
pub mod ops;
pub mod partition;
pub mod plan;
pub mod report;
pub mod serve;
pub mod store;
