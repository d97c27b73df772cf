//! The scheduler's side of readiness (`readiness.rs` decides): an instance
//! whose external inputs are not ready is WAITING, rechecked as the
//! machine's retries are, with backoff, until the run's `--wait` ends,
//! then left WAITING (no marker, not a failure; LATE past its SLA), and so
//! are the instances downstream of it. A failed sensor fails the instance.

use std::time::Instant;

use serde_json::json;

use super::machine::Verdict;
use super::readiness::{self, NotReady, SensorFailure};
use super::{InstanceResult, Scheduler, Status};
use crate::events::{Event, State};

impl Scheduler<'_, '_> {
    /// A readiness check found `id`'s inputs not ready: recheck later
    /// (the machine's retry, at the next look), or (no `--wait`, or it
    /// ended) leave it WAITING; the machine then passes its downstream to
    /// [`Scheduler::waits_for_upstream`].
    pub(super) fn not_ready(&mut self, id: usize, not_ready: &NotReady) -> Verdict {
        // A check is no attempt: the one counted at admission is given back.
        self.attempts[id] = self.attempts[id].saturating_sub(1);
        self.checks[id] += 1;
        let checks = self.checks[id];
        let (task, partition) = self.names(id);
        let now = Instant::now();
        let recheck = readiness::next_check(checks, now, self.wait_until);
        let data = json!({ "dataset": not_ready.dataset, "checks": checks });
        if let Some(at) = recheck {
            if checks == 1 {
                self.cx.emit(
                    State::Waiting,
                    Event::instance(task, partition)
                        .detail(format!(
                            "{}; rechecked with backoff until --wait ends",
                            not_ready.why
                        ))
                        .data(data),
                );
            }
            self.status[id] = Status::Waiting;
            self.retry_in = at.saturating_duration_since(now);
            return Verdict::Retry { at: 0 };
        }
        let detail = if checks == 1 {
            format!(
                "{}; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)",
                not_ready.why
            )
        } else {
            format!(
                "{}, still after {checks} checks when --wait ended; nothing done, no marker: the next run checks again",
                not_ready.why
            )
        };
        self.cx.emit(
            State::Waiting,
            Event::instance(task, partition)
                .detail(detail.clone())
                .data(data),
        );
        self.leave_waiting(id, detail);
        Verdict::Block
    }

    /// A sensor failed: the instance fails with the sensor's evidence, and
    /// its downstream is skipped (the caller's usual path).
    pub(super) fn sensor_failed(&mut self, id: usize, failure: &SensorFailure) -> InstanceResult {
        self.attempts[id] = self.attempts[id].saturating_sub(1);
        let (task, partition) = self.names(id);
        let why = format!("{}; no marker: the next run checks again", failure.why);
        self.cx.emit(
            State::Failed,
            Event::instance(task, partition)
                .detail(why.clone())
                .data(json!({
                    "sensor": {
                        "dataset": failure.dataset,
                        "exit_code": failure.exit_code,
                        "stderr": failure.stderr,
                    }
                })),
        );
        InstanceResult::SensorFailed(why)
    }

    /// Records `id` as WAITING, or LATE (an event too) past its SLA.
    fn leave_waiting(&mut self, id: usize, reason: String) {
        let (task, partition) = self.names(id);
        let late_since =
            self.cx.manifest.tasks.get(task).and_then(|t| {
                readiness::late_since(t, partition, jiff::Timestamp::now().as_second())
            });
        if let Some(deadline) = &late_since {
            self.cx.emit(
                State::Late,
                Event::instance(task, partition)
                    .detail(format!(
                        "not published by its SLA deadline {deadline}: {reason}"
                    ))
                    .data(json!({ "deadline": deadline })),
            );
        }
        self.status[id] = Status::Done(InstanceResult::Waiting { reason, late_since });
    }

    /// `id` is downstream of `cause`, which waits for its inputs: it waits
    /// too (no failure, so not SKIPPED).
    pub(super) fn waits_for_upstream(&mut self, id: usize, cause: usize) {
        let (cause_task, cause_partition) = self.names(cause);
        let (task, partition) = self.names(id);
        let why = format!("upstream `{cause_task}` {cause_partition} waits for its inputs");
        self.cx.emit(
            State::Waiting,
            Event::instance(task, partition).detail(why.clone()),
        );
        self.leave_waiting(id, why);
    }
}
