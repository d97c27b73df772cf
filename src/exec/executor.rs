//! Where an attempt's command runs: behind one trait, so the attempt
//! lifecycle (token, lease, staging, audit, fenced commit) is the same for
//! every executor.
//!
//! ```text
//!  attempt ──submit(Launch)──► Job ──id()──► lease, RUNNING, explain
//!                               │ wait() ──► Ending (classified as today)
//!                               └ cancel() ─ timeout, interrupt, takeover
//! ```
//!
//! `local` is a child process of the engine (`launch.rs`, unchanged);
//! `slurm` is one batch job per attempt (`slurm.rs`).

use super::classify::Ending;
use super::launch::{self, Launch};

/// A started attempt command.
pub trait Job: Send {
    /// The scheduler's id for it (`None` for a local child process).
    fn id(&self) -> Option<String>;
    /// Blocks until it ends (the executor enforces `Launch::timeout`).
    fn wait(self: Box<Self>) -> Ending;
}

/// Runs attempt commands somewhere.
pub trait Executor {
    /// Starts the command; an `Err` is how it ended without starting.
    fn submit<'l>(&self, launch: Launch<'l>) -> Result<Box<dyn Job + 'l>, Ending>;
}

/// A child process of the engine: today's code path, unchanged.
pub struct Local;

struct LocalJob<'a>(Launch<'a>);

impl Executor for Local {
    fn submit<'l>(&self, launch: Launch<'l>) -> Result<Box<dyn Job + 'l>, Ending> {
        Ok(Box::new(LocalJob(launch)))
    }
}

impl Job for LocalJob<'_> {
    fn id(&self) -> Option<String> {
        None
    }

    fn wait(self: Box<Self>) -> Ending {
        launch::run(&self.0)
    }
}
