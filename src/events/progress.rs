//! How far a run has come, from its own records: instances planned (its
//! RUN_STARTED says), ended, running, and an ETA at the pace so far. The
//! run's display and `weir status` read it the same way.

use serde::Serialize;

use super::{EventRecord, State};

/// A run's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The run.
    pub run_id: String,
    /// Instances it planned.
    pub total: u64,
    /// Instances that ended (published, current, or not to be built in
    /// this run).
    pub done: u64,
    /// Of those, the ones that did not publish.
    pub failed: u64,
    /// Commands running now.
    pub running: u64,
    /// Since RUN_STARTED (ms).
    pub elapsed_ms: u64,
    /// What is left at the pace so far (ms); `None` before an instance ended.
    pub eta_ms: Option<u64>,
    /// Whether RUN_FINISHED was written.
    pub finished: bool,
}

/// Whether `state` ends an instance in a run, and whether it published.
fn ends(state: State) -> Option<bool> {
    match state {
        State::Published | State::AlreadyPublished | State::RejectedStale => Some(true),
        State::Quarantined
        | State::Held
        | State::Skipped
        | State::EngineFailed
        | State::Interrupted => Some(false),
        _ => None,
    }
}

/// Counts records one at a time (the run's display) or all at once.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    run_id: String,
    started_ms: Option<i64>,
    total: u64,
    done: u64,
    failed: u64,
    running: i64,
    finished: bool,
}

impl Tally {
    /// Takes one record in.
    pub fn add(&mut self, e: &EventRecord) {
        match e.state {
            State::RunStarted => {
                self.run_id.clone_from(&e.run_id);
                self.started_ms = ms(&e.ts);
                self.total = e
                    .data
                    .get("instances")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
            }
            State::RunFinished => self.finished = true,
            State::Running => self.running += 1,
            // A command ends in SUCCESS, or in a FAILED that says how it ended.
            State::Success => self.running -= 1,
            State::Failed if e.data.get("ending").is_some() => self.running -= 1,
            _ => {}
        }
        if let Some(published) = ends(e.state) {
            self.done += 1;
            if !published {
                self.failed += 1;
            }
        }
    }

    /// The progress at `now_ms` (ms since the epoch).
    pub fn progress(&self, now_ms: i64) -> Progress {
        let elapsed_ms = self
            .started_ms
            .map_or(0, |s| u64::try_from(now_ms - s).unwrap_or(0));
        let left = self.total.saturating_sub(self.done);
        Progress {
            run_id: self.run_id.clone(),
            total: self.total,
            done: self.done,
            failed: self.failed,
            running: u64::try_from(self.running).unwrap_or(0),
            elapsed_ms,
            eta_ms: (self.done > 0 && !self.finished).then(|| {
                let per = elapsed_ms as f64 / self.done as f64;
                (per * left as f64).round() as u64
            }),
            finished: self.finished,
        }
    }
}

/// The progress of the run `records` hold, at `now_ms`.
pub fn of(records: &[EventRecord], now_ms: i64) -> Progress {
    let mut tally = Tally::default();
    for r in records {
        tally.add(r);
    }
    tally.progress(now_ms)
}

impl Progress {
    /// "3/8 done (1 failed), 2 running, ETA 4s".
    pub fn line(&self, human: impl Fn(u64) -> String) -> String {
        let failed = if self.failed > 0 {
            format!(" ({} did not publish)", self.failed)
        } else {
            String::new()
        };
        let eta = match self.eta_ms {
            Some(ms) => format!(", ETA {}", human(ms)),
            None => String::new(),
        };
        format!(
            "{}/{} done{failed}, {} running{eta}",
            self.done, self.total, self.running
        )
    }
}

fn ms(ts: &str) -> Option<i64> {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}
