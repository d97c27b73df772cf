//! A backfill steered from anywhere ([`crate::store::steering`]): before
//! the scheduler starts an instance it asks [`Steerer::holds`]. Paused, the
//! instance is held back (its attempt not started, so running attempts
//! finish and nothing new begins) until the record is gone; cancelled, the
//! run is asked to stop as SIGTERM would ask it, so it ends as an
//! interrupted run (exit 143) that a later run resumes.

use std::time::{Duration, Instant};

use crate::store::steering::{self, Steer, FRESH};
use crate::store::Warehouse;

/// How often a running backfill looks for a cancellation.
const WATCH: Duration = Duration::from_secs(1);

/// The steering of one run; inert for a run that is no declared backfill.
pub(super) struct Steerer {
    backfill: Option<String>,
    /// The last read and when it was taken.
    last: Option<(Instant, Option<Steer>)>,
    /// Units the machine admitted while paused, not yet started.
    pub(super) held: Vec<Vec<usize>>,
}

impl Steerer {
    pub(super) fn new(backfill: Option<&str>) -> Steerer {
        Steerer {
            backfill: backfill.map(str::to_owned),
            last: None,
            held: Vec::new(),
        }
    }

    /// What the record asks now (a read at most [`FRESH`] old). A record
    /// that cannot be read asks nothing: the store's trouble shows at the
    /// instance's own reads.
    fn state(&mut self, warehouse: &Warehouse) -> Option<Steer> {
        let name = self.backfill.as_deref()?;
        if let Some((at, state)) = self.last {
            if at.elapsed() < FRESH {
                return state;
            }
        }
        let state = steering::read(warehouse, name)
            .ok()
            .flatten()
            .map(|s| s.state);
        self.last = Some((Instant::now(), state));
        state
    }

    /// Whether `unit` (an instance, or a batch's members) must wait
    /// instead of starting now (then it is kept in `held`). A cancellation
    /// asks the run to stop and lets the unit start, to end as interrupted
    /// at once.
    pub(super) fn holds(&mut self, warehouse: &Warehouse, unit: &[usize], stopping: bool) -> bool {
        match self.state(warehouse) {
            Some(Steer::Paused) if !stopping => {
                self.held.push(unit.to_vec());
                true
            }
            Some(Steer::Cancelled) => {
                super::interrupt::request(super::interrupt::Signal::Term);
                false
            }
            _ => false,
        }
    }

    /// The held units to start now: all of them once the pause is
    /// lifted or the run stops (a stopping run must hear from each).
    /// A cancellation read here asks the run to stop even when nothing is
    /// held: running attempts are stopped as by SIGTERM.
    pub(super) fn release(&mut self, warehouse: &Warehouse, stopping: bool) -> Vec<Vec<usize>> {
        match self.state(warehouse) {
            Some(Steer::Paused) if !stopping => Vec::new(),
            Some(Steer::Cancelled) => {
                super::interrupt::request(super::interrupt::Signal::Term);
                std::mem::take(&mut self.held)
            }
            _ => std::mem::take(&mut self.held),
        }
    }

    /// Until when the loop may wait (ms on its clock, `None`: until a
    /// report), given the machine's `at`: it looks at the record again
    /// soon while instances are held, every [`WATCH`] while a backfill
    /// runs (a cancellation must reach running attempts).
    pub(super) fn wait_until(&self, at: Option<u64>, now: u64) -> Option<u64> {
        if self.backfill.is_none() {
            return at;
        }
        let soon = if self.held.is_empty() { WATCH } else { FRESH };
        let soon = now.saturating_add(soon.as_millis() as u64);
        Some(at.map_or(soon, |at| at.min(soon)))
    }
}
