//! Where an attempt's command runs: behind one trait, so the attempt
//! lifecycle (token, lease, staging, audit, fenced commit) and a takeover
//! are the same for every executor.
//!
//! ```text
//!  attempt ──record_basis──► submit(Launch) ──► Job ──id()──► lease, RUNNING, explain
//!                                                │ wait() ──► Ending (classified as today)
//!                                                └ cancel ─ timeout, interrupt, takeover
//!  takeover (lease.rs): lease's job id or find_job(dir) ──► await_job ──► Success? adopt(old, new)
//! ```
//!
//! `local` is a child process of the engine (`launch.rs`, unchanged): it
//! dies with its engine, so it has no job to find, wait for or adopt (the
//! defaults). An executor whose jobs outlive their engine (a cluster's
//! batch scheduler) implements those too. The manifest's kinds map to the
//! implementations in one place (`Context::executor`).

use std::path::Path;
use std::time::Duration;

use super::classify::Ending;
use super::launch::{self, Launch};
use crate::inputs::InputSnapshot;

/// A started attempt command.
pub trait Job: Send {
    /// The scheduler's id for it (`None` for a local child process).
    fn id(&self) -> Option<String>;
    /// Blocks until it ends (the executor enforces `Launch::timeout`).
    fn wait(self: Box<Self>) -> Ending;
}

/// Runs attempt commands somewhere, and finds them again after their
/// engine is gone.
pub trait Executor {
    /// Starts the command; an `Err` is how it ended without starting.
    fn submit<'l>(&self, launch: Launch<'l>) -> Result<Box<dyn Job + 'l>, Ending>;

    /// How events name one of its jobs ("job 42", or with the scheduler's
    /// name).
    fn job_name(&self, id: &str) -> String {
        format!("job {id}")
    }

    /// Before [`Executor::submit`], in the attempt directory `dir`: what
    /// the job runs on, for an engine that takes over and may adopt its
    /// output ([`Executor::adopt`]). Best effort: without it nothing is
    /// adopted.
    fn record_basis(&self, _dir: &Path, _snapshot: &InputSnapshot, _code_version: &str) {}

    /// The job of a gone engine's attempt in `attempt_dir`, when its lease
    /// does not name it (that engine died between submitting and writing
    /// the lease).
    fn find_job(&self, _attempt_dir: &Path) -> Option<String> {
        None
    }

    /// Waits for another engine's job `id` to end, cancelling it if it
    /// still runs after `limit` (then waiting for that); `waiting` is called
    /// once if it is still running. How it ended, or `None` when that is
    /// not known (the scheduler forgot it, or did not answer until `limit`:
    /// the job was then cancelled, so that no duplicate runs beside it).
    fn await_job(&self, _id: &str, _limit: Duration, _waiting: &mut dyn FnMut()) -> Option<Ending> {
        None
    }

    /// Takes the output a completed job of the attempt in `old` left into
    /// the new attempt's directory `new` (both with `data/` inside), when
    /// [`Executor::record_basis`] says it ran on `snapshot` and
    /// `code_version`; whether it did.
    fn adopt(
        &self,
        _old: &Path,
        _new: &Path,
        _snapshot: &InputSnapshot,
        _code_version: &str,
    ) -> bool {
        false
    }
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
