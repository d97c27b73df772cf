//! One instance's job on its worker thread: pin, attempt, retry as the
//! scheduler decides, and report back.

use super::*;

use crate::inputs::Reads;
use crate::store::summary::Summary;
use crate::store::{Generation, Look};

/// One attempt's worth of work for an attempt thread.
pub(super) struct Job<'m> {
    pub(super) task: &'m Task,
    pub(super) partition: &'m str,
    pub(super) attempt: u32,
    /// Pinned on the first attempt and kept for retries: a retry reads the
    /// same inputs (a new source snapshot is a new run, not a retry).
    pub(super) snapshot: Option<InputSnapshot>,
    pub(super) first: bool,
    pub(super) force: bool,
    pub(super) resume_since: Option<i64>,
    pub(super) upstream_only: bool,
    pub(super) allow_uncertified: bool,
    /// The scheduling pass's listing of the task's markers showed none for
    /// this partition: its marker is not read again (`marks::listed`).
    pub(super) marker_listed_absent: bool,
    /// The pass's listing of its upstreams' certification marks.
    pub(super) certs: std::sync::Arc<crate::store::certs::Listed>,
    /// Its place in the batch it started with, if its task runs batches:
    /// left unused when it ends before its command.
    pub(super) seat: Option<attempt::batch::Seat>,
}

/// What a job reports: the snapshot kept for a retry, the outcome, and
/// whether a marker stood when the instance started (then a publication
/// clears it).
pub(super) struct Ran {
    pub(super) snapshot: Option<InputSnapshot>,
    pub(super) outcome: Outcome,
    pub(super) marker_found: bool,
}

impl Job<'_> {
    /// The command runs holding one of `slots`.
    pub(super) fn run(self, cx: &Context<'_>, slots: &pool::Slots) -> Ran {
        let mut marker_found = false;
        let (snapshot, outcome) = self.decide(cx, slots, &mut marker_found);
        Ran {
            snapshot,
            outcome,
            marker_found,
        }
    }

    fn decide(
        mut self,
        cx: &Context<'_>,
        slots: &pool::Slots,
        marker_found: &mut bool,
    ) -> (Option<InputSnapshot>, Outcome) {
        let (task, partition) = (self.task, self.partition);
        let mark = match self.read_mark(cx) {
            Ok(mark) => mark,
            Err(outcome) => return (None, outcome),
        };
        *marker_found = mark.is_some();
        if let Some(outcome) = mark.as_ref().and_then(|m| self.held(cx, m)) {
            return (None, outcome);
        }
        // By the upstreams' marker summaries where their logs' listings
        // showed them: a current instance reads no record.
        let snapshot = match self.pin(cx, Reads::Digests) {
            Ok(s) => s,
            Err(outcome) => return (None, outcome),
        };
        let code_version = &task.code_version;
        let fingerprint = cx.fingerprint(task);
        if let Some(mark) = mark {
            // A new gate, script or command is a new question: the
            // quarantine the old code caused does not stand.
            let same = mark
                .changed_since(&snapshot.digest(), code_version, fingerprint)
                .is_empty();
            if mark.mark == Mark::Quarantined
                && same
                && !self.force
                && !moot(cx, task, partition, &snapshot, fingerprint)
            {
                return (
                    Some(snapshot),
                    Outcome::Marked {
                        mark,
                        consumable: false,
                    },
                );
            }
        }
        match self.answered(cx, &snapshot) {
            Ok(true) => return (Some(snapshot), Outcome::AlreadyPublished),
            Ok(false) => {}
            Err(outcome) => return (Some(snapshot), outcome),
        }
        // It runs: its inputs' files are pinned (no request for an upstream
        // record this process kept or read just now).
        let snapshot = if snapshot.lacks_files() {
            match self.pin(cx, Reads::Files) {
                Ok(s) => s,
                Err(outcome) => return (None, outcome),
            }
        } else {
            snapshot
        };
        let rerun = attempt::Rerun {
            force: self.force && !self.upstream_only,
            upstream_only: self.upstream_only,
        };
        let seat = self.seat.take();
        let outcome = attempt::run(
            cx,
            task,
            partition,
            self.attempt,
            &snapshot,
            slots,
            rerun,
            seat,
        );
        // An external input that moved since it was pinned is pinned again.
        let keep = !matches!(
            &outcome,
            AttemptOutcome::Failed {
                ending: Ending::InputMoved(_),
                ..
            }
        );
        (keep.then_some(snapshot), Outcome::Attempt(outcome))
    }

    /// An operator decision from an earlier run, read once per instance
    /// (on its first attempt; no GET when this pass's listing of the task's
    /// markers, taken as the instance was started, showed none).
    // The Err is the job's outcome, returned at most once per attempt:
    // boxing it would buy nothing.
    #[allow(clippy::result_large_err)]
    fn read_mark(&self, cx: &Context<'_>) -> Result<Option<InstanceMark>, Outcome> {
        if !self.first || self.marker_listed_absent {
            return Ok(None);
        }
        marks::read(&cx.warehouse, &self.task.name, self.partition).map_err(|e| {
            Outcome::Engine(format!(
                "cannot read the instance's marker: {}",
                attempt::chain(&e)
            ))
        })
    }

    /// The outcome of an instance a HELD, ABANDONED or ACCEPTED mark keeps
    /// from running.
    fn held(&self, cx: &Context<'_>, mark: &InstanceMark) -> Option<Outcome> {
        if !matches!(mark.mark, Mark::Held | Mark::Abandoned | Mark::Accepted) {
            return None;
        }
        // An accepted gap is consumed as a gap (`crate::inputs::pin`).
        let consumable = mark.mark == Mark::Accepted
            || mark.mark == Mark::Held
                && matches!(
                    cx.warehouse
                        .partition(&self.task.output.dataset, self.partition)
                        .latest(),
                    Ok(Some(_))
                );
        Some(Outcome::Marked {
            mark: mark.clone(),
            consumable,
        })
    }

    /// The instance's inputs: pinned by an earlier attempt, or pinned now
    /// once the readiness test passes.
    #[allow(clippy::result_large_err)] // As for `read_mark`.
    fn pin(&mut self, cx: &Context<'_>, reads: Reads) -> Result<InputSnapshot, Outcome> {
        let (task, partition) = (self.task, self.partition);
        if let Some(s) = self.snapshot.take() {
            return Ok(s);
        }
        match super::sensed::check(cx.manifest, &cx.warehouse, task, partition, &cx.run_id) {
            readiness::Readiness::Ready => {}
            readiness::Readiness::NotYet(n) => return Err(Outcome::NotReady(n)),
            readiness::Readiness::Failed(f) => return Err(Outcome::SensorFailed(f)),
        }
        match crate::inputs::pin_with(
            cx.manifest,
            &cx.warehouse,
            task,
            partition,
            self.allow_uncertified,
            cx.now,
            &self.certs,
            reads,
        ) {
            Ok(s) => Ok(s),
            Err(e) if e.is_external() => {
                // Nothing holds it but the missing file: the next run
                // pins it once the file is there (`weir retry` would
                // find no marker to release).
                Err(Outcome::Unpinned(format!(
                    "{}; put it in place, then `weir run {} --task {} --partition {}`",
                    e.describe(),
                    crate::partition::shell_word(&cx.manifest.path.display().to_string()),
                    task.name,
                    crate::partition::shell_word(partition)
                )))
            }
            Err(e) => Err(Outcome::Unpinned(e.describe())),
        }
    }

    /// Whether the instance's own log already answers it (then
    /// ALREADY_PUBLISHED is said). The log is read on every attempt, before
    /// a token is spent: a corrupt record refuses the instance here, not
    /// after its task ran (a current instance's, told by its marker's
    /// summary, is not read: whoever reads it finds it so). A look of this
    /// process's at the log, as fresh as a pin's, stands for it
    /// (`store::LOOK_REUSE`).
    #[allow(clippy::result_large_err)] // As for `read_mark`.
    fn answered(&self, cx: &Context<'_>, snapshot: &InputSnapshot) -> Result<bool, Outcome> {
        let (task, partition) = (self.task, self.partition);
        let store = cx.warehouse.partition(&task.output.dataset, partition);
        let cannot_read = |e: crate::store::StoreError| {
            Outcome::Engine(format!(
                "cannot read the commit log of {} {partition}: {}",
                task.output.dataset,
                attempt::chain(&e)
            ))
        };
        let look = store
            .look_within(crate::store::LOOK_REUSE)
            .map_err(cannot_read)?;
        if let Look::Summary(summary) = &look {
            if self.current_by_summary(cx, summary, snapshot) {
                return Ok(true);
            }
        }
        let latest = match look {
            Look::Empty => None,
            Look::Record(record) => Some(*record),
            Look::Summary(_) => store
                .latest_within(crate::store::LOOK_REUSE)
                .map_err(cannot_read)?,
        };
        Ok(self.nothing_to_do(cx, latest.as_ref(), snapshot))
    }

    /// Whether the newest generation's marker summary answers this first
    /// attempt (same reads, code version and fingerprint, exactly): then
    /// ALREADY_PUBLISHED is said from it, with no read of the record.
    /// Anything else (a forced run, a summary that differs) is decided
    /// from the record by [`Job::nothing_to_do`].
    fn current_by_summary(
        &self,
        cx: &Context<'_>,
        summary: &Summary,
        snapshot: &InputSnapshot,
    ) -> bool {
        let task = self.task;
        // As `nothing_to_do` asks, but for the resumed forced backfill,
        // which needs the record's publication time.
        let asked = self.first && (!self.force || self.upstream_only);
        // Only an exact match: the detail names the task's code version as
        // the generation's (an upstream added to the run whose code changed
        // is told so from its record).
        if !asked
            || !summary.is_current(&snapshot.digest(), &task.code_version, cx.fingerprint(task))
        {
            return false;
        }
        self.say_current(
            cx,
            summary.generation,
            &task.code_version,
            published_by(summary.generation, &summary.run_id, summary.attempt),
        );
        true
    }

    /// Says ALREADY_PUBLISHED of generation `g`, published with
    /// `code_version`.
    fn say_current(
        &self,
        cx: &Context<'_>,
        g: Generation,
        code_version: &str,
        data: serde_json::Value,
    ) {
        tracing::debug!(task = %self.task.name, partition = %self.partition, "not run: generation {g} is current (code_version {code_version})");
        cx.emit(
            State::AlreadyPublished,
            Event::instance(&self.task.name, self.partition)
                .detail(format!(
                    "generation {g} has {} (code_version {code_version}): nothing to do",
                    if self.upstream_only {
                        "been published"
                    } else {
                        "the same input snapshot"
                    },
                ))
                .data(data),
        );
    }

    /// Whether the visible generation already answers this first attempt:
    /// then ALREADY_PUBLISHED is said and nothing runs.
    fn nothing_to_do(
        &self,
        cx: &Context<'_>,
        latest: Option<&CommitRecord>,
        snapshot: &InputSnapshot,
    ) -> bool {
        let (task, partition) = (self.task, self.partition);
        // A resumed forced backfill: what the interrupted run (or any run
        // since it started) published is not forced again.
        if let (true, true, Some(since), Some(latest)) = (
            self.first,
            self.force && !self.upstream_only,
            self.resume_since,
            latest,
        ) {
            let at = latest.published_at.parse::<jiff::Timestamp>();
            if at.is_ok_and(|at| at.as_millisecond() >= since) {
                cx.emit(
                    State::AlreadyPublished,
                    Event::instance(&task.name, partition)
                        .detail(format!(
                            "generation {} was published at {}, since the resumed run started: nothing to do",
                            latest.generation, latest.published_at
                        ))
                        .data(already_published(latest)),
                );
                return true;
            }
        }
        // --force reruns the tasks asked for, never their upstream.
        if self.first && (!self.force || self.upstream_only) {
            if let Some(latest) = latest {
                if self.upstream_only
                    || is_current(latest, snapshot, &task.code_version, cx.fingerprint(task))
                {
                    self.say_current(
                        cx,
                        latest.generation,
                        &latest.code_version,
                        already_published(latest),
                    );
                    return true;
                }
            }
        }
        if tracing::enabled!(tracing::Level::DEBUG) {
            let why = self.why_it_runs(cx, latest, snapshot);
            tracing::debug!(task = %task.name, partition, "runs: {why}");
        }
        false
    }

    /// Why this attempt runs rather than say the visible generation is
    /// current, for `-v`: what differs from what `latest` was built of.
    fn why_it_runs(
        &self,
        cx: &Context<'_>,
        latest: Option<&CommitRecord>,
        snapshot: &InputSnapshot,
    ) -> String {
        let task = self.task;
        let Some(latest) = latest else {
            return "nothing is published yet".into();
        };
        let g = latest.generation;
        if !self.first {
            return format!("attempt {} (generation {g} is visible)", self.attempt);
        }
        if self.force && !self.upstream_only {
            return format!("forced (generation {g} is visible)");
        }
        if latest.code_version != task.code_version {
            return format!(
                "generation {g} was built by code_version {}, the manifest's is {}",
                latest.code_version, task.code_version
            );
        }
        let fingerprint = cx.fingerprint(task);
        if let Some(built) = latest
            .code_fingerprint
            .as_deref()
            .filter(|&f| f != fingerprint)
        {
            return format!(
                "the task's code changed since generation {g} (fingerprint {built} → {fingerprint})"
            );
        }
        format!(
            "its inputs changed since generation {g} (input snapshot {} → {})",
            latest.input_snapshot_digest,
            snapshot.digest()
        )
    }
}

/// Whether a quarantine of this very snapshot and code stands over a
/// publication of them, and is cleared: nothing is left to retry. Another
/// engine's attempt can fail and quarantine while this instance publishes
/// (a publication clears only a marker read at its start, see
/// `Scheduler::finish`); left standing, it would hold a current instance
/// and its downstream. An error reading the log or clearing the marker
/// leaves the quarantine standing.
fn moot(
    cx: &Context<'_>,
    task: &Task,
    partition: &str,
    snapshot: &InputSnapshot,
    fingerprint: &str,
) -> bool {
    let store = cx.warehouse.partition(&task.output.dataset, partition);
    let current = matches!(
        store.latest(),
        Ok(Some(latest)) if is_current(&latest, snapshot, &task.code_version, fingerprint)
    );
    current && marks::clear(&cx.warehouse, &task.name, partition).is_ok()
}

/// What an ALREADY_PUBLISHED event names: the generation and the run that
/// published it (a run that died before announcing it is found by it).
pub(super) fn already_published(latest: &CommitRecord) -> serde_json::Value {
    published_by(latest.generation, &latest.run_id, latest.attempt)
}

/// [`already_published`]'s data from its parts.
fn published_by(generation: Generation, run_id: &str, attempt: u32) -> serde_json::Value {
    json!({
        "generation": generation.get(),
        "run_id": run_id,
        "attempt": attempt,
    })
}

/// The text a panic was raised with (`panic!`'s formatted message).
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}
