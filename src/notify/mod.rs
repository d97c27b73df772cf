//! Notifications: `[notify.NAME]` targets told about facts, at least once,
//! never about what did not happen (docs/guides/notifications.md).
//!
//! ```text
//!  fact durable (commit record, marker) ──► Notifier::record ──► outbox: pending/<target>/<key>   (put-if-absent)
//!        │                                        then the event line (PUBLISHED, QUARANTINED …)
//!        ▼
//!  sender thread / `weir notify --flush` / serve's flush:
//!     pending ──(delivered marker? drop)──► POST or command, Idempotency-Key ──2xx──► delivered/<target>/<key>, pending dropped, NOTIFIED
//!                                                          └──tries spent──► stays pending, NOTIFY_FAILED
//! ```
//!
//! The idempotency key names the fact, never the delivery: (pipeline,
//! dataset, partition, kind, and the generation for `published`, the run
//! and attempt for a failure, the alarms answered for `recovered`). The
//! same fact always makes the same key, so a replayed write is a no-op and
//! a redelivery carries the key a receiver has seen.
//!
//! Facts, from the engine's events (`fact_of`):
//! - PUBLISHED → `published` (and `recovered` when an announced failure of
//!   the instance is not yet answered);
//! - QUARANTINED / HELD decided by a failure in this run → `quarantined` /
//!   `held`; a restated marker of an earlier run or a hold for missing
//!   inputs is not a new fact;
//! - ENGINE_FAILED → `failed`; LATE → `late`; MISSED → `missed`;
//! - ALREADY_PUBLISHED of a generation published by a run that died before
//!   its notifier finished → that generation's `published`, with the same
//!   key: a kill between the commit record and the notification's write
//!   (fault point `after_commit`) is repaired by the next run that reaches
//!   the instance. Runs mark themselves in `_notify/runs/` while notifying,
//!   so a run reads a commit record only when one of those is left over.
//!
//! A failed attempt that is retried announces nothing: `failed` in `on`
//! asks for every final failure of an instance in a run (QUARANTINED,
//! HELD, ENGINE_FAILED), so an instance that failed once and then published
//! sends `published` only.

mod intent;
mod notification;
mod outbox;
mod send;

use std::collections::HashMap;
use std::sync::Arc;

use crate::events::{Event, State};
use crate::manifest::{Manifest, NotifyKind, NotifyTarget};
use crate::store::Warehouse;

pub use notification::{key, Notification};
pub use outbox::{Delivered, Intent, Outbox, Undelivered};
pub use send::{FlushReport, Sender, TargetReport, BACKOFF, COMMAND_TIMEOUT, DRAIN, TRIES};

/// The fact an event records, if it is one a target may be told about:
/// its kind and what tells it apart from other facts of that kind about
/// the same instance.
fn fact_of(state: State, event: &Event, run_id: &str) -> Option<(NotifyKind, String)> {
    let attempt = || format!("{run_id}/{}", event.attempt.unwrap_or(0));
    match state {
        State::Published => {
            let generation = event.data.get("generation")?.as_u64()?;
            Some((NotifyKind::Published, format!("g{generation}")))
        }
        // Only a decision carries its class; a marker restated by a later
        // run, or a hold for inputs not there yet, has none.
        State::Quarantined if decided(state, event) => Some((NotifyKind::Quarantined, attempt())),
        State::Held if decided(state, event) => Some((NotifyKind::Held, attempt())),
        State::EngineFailed => Some((NotifyKind::Failed, attempt())),
        // A period is late, or missed, once.
        State::Late => Some((NotifyKind::Late, String::new())),
        State::Missed => Some((NotifyKind::Missed, String::new())),
        _ => None,
    }
}

/// Whether a HELD or QUARANTINED event is the scheduler's decision on a
/// failure (it carries the failure's class).
fn decided(state: State, event: &Event) -> bool {
    matches!(
        crate::events::payload::Payload::read(state, &event.data),
        Some(crate::events::payload::Payload::Decided(_))
    )
}

/// The engine's side of the outbox for one run: writes the notifications of
/// facts as they are recorded, and hands them to a sender thread.
pub struct Notifier {
    pipeline: String,
    targets: Vec<NotifyTarget>,
    /// task → its output dataset.
    datasets: HashMap<String, String>,
    outbox: Outbox,
    run_id: String,
    sender: Sender,
    /// Runs that marked themselves and never finished notifying (they
    /// died, or are still going on another engine).
    unfinished: std::collections::HashSet<String>,
}

/// Runs as [`crate::exec::run`] does, sending the manifest's `[notify]`
/// targets what the run decides; front ends start a run with
/// `session::run`, which calls this.
pub fn run_notifying(
    manifest: &Manifest,
    options: &crate::exec::RunOptions,
    observe: Option<crate::events::Observer>,
) -> Result<crate::exec::RunSummary, crate::exec::ExecError> {
    crate::exec::run_with(manifest, options, observe, Some(open_outbox))
}

fn open_outbox(
    manifest: &Manifest,
    warehouse: &Warehouse,
    run_id: &str,
    settings: &crate::exec::Settings,
) -> Option<Box<dyn crate::exec::Outbox>> {
    Notifier::start(manifest, warehouse, run_id, &settings.faults)
        .map(|n| Box::new(n) as Box<dyn crate::exec::Outbox>)
}

impl crate::exec::Outbox for Notifier {
    fn record(&self, state: State, event: &Event) {
        Notifier::record(self, state, event);
    }

    fn committing(&self, task: &str, partition: &str, token: u64) {
        Notifier::committing(self, task, partition, token);
    }

    fn finish(&self) {
        // Its warnings are printed by `Notifier::finish` itself.
        let _ = Notifier::finish(self);
    }
}

impl Notifier {
    /// The notifier of `run_id`, if the manifest has targets; its sender
    /// starts with what earlier runs left undelivered; `faults` arms
    /// `notify_deliver`.
    pub fn start(
        manifest: &Manifest,
        warehouse: &Warehouse,
        run_id: &str,
        faults: &crate::exec::fault::Faults,
    ) -> Option<Notifier> {
        if manifest.notify.is_empty() {
            return None;
        }
        let outbox = Outbox::new(Arc::clone(warehouse.backend()));
        let unfinished = outbox
            .open_run(run_id)
            .unwrap_or_else(|e| {
                tracing::warn!(
                    "notify: cannot mark the run in the outbox: {}",
                    crate::store::chain(&e)
                );
                Vec::new()
            })
            .into_iter()
            .collect();
        let sender = Sender::start(manifest, warehouse, run_id, faults);
        let notifier = Notifier::with_sender(manifest, warehouse, run_id, sender, unfinished);
        // Queued to the sender as they are written.
        notifier.repair(warehouse);
        Some(notifier)
    }

    fn with_sender(
        manifest: &Manifest,
        warehouse: &Warehouse,
        run_id: &str,
        sender: Sender,
        unfinished: std::collections::HashSet<String>,
    ) -> Notifier {
        Notifier {
            pipeline: manifest.pipeline.name.clone(),
            targets: manifest.notify.values().cloned().collect(),
            datasets: manifest
                .tasks
                .values()
                .map(|t| (t.name.clone(), t.output.dataset.clone()))
                .collect(),
            outbox: Outbox::new(Arc::clone(warehouse.backend())),
            run_id: run_id.to_owned(),
            sender,
            unfinished,
        }
    }

    /// Called with every event before its line is written, once the fact it
    /// records is durable: the notifications it makes are in the outbox
    /// before the event is. Never fails the run: a notification that cannot
    /// be written is reported on stderr.
    pub fn record(&self, state: State, event: &Event) {
        let (Some(task), Some(partition)) = (&event.task, &event.partition) else {
            return;
        };
        let Some(dataset) = self.datasets.get(task) else {
            return;
        };
        let written = match fact_of(state, event, &self.run_id) {
            Some((kind, which)) => self.write(
                kind,
                &which,
                state,
                &self.run_id,
                event,
                task,
                dataset,
                partition,
            ),
            None => match self.unannounced(state, event) {
                Some((run, generation)) => self.write(
                    NotifyKind::Published,
                    &format!("g{generation}"),
                    State::Published,
                    run,
                    event,
                    task,
                    dataset,
                    partition,
                ),
                None => return,
            },
        };
        if let (Ok(()), State::Published, Some(token)) = (&written, state, event.token) {
            self.announced(task, dataset, partition, token);
        }
        if let Err(e) = written {
            tracing::warn!(
                "notify: cannot write the {} notification of {task} {partition} to the outbox: {}",
                state.as_str(),
                crate::store::chain(&e)
            );
        }
    }

    /// An ALREADY_PUBLISHED of a generation whose run never finished
    /// notifying: that run and the generation.
    fn unannounced<'e>(&self, state: State, event: &'e Event) -> Option<(&'e str, u64)> {
        if state != State::AlreadyPublished || self.unfinished.is_empty() {
            return None;
        }
        let run = event.data.get("run_id")?.as_str()?;
        let generation = event.data.get("generation")?.as_u64()?;
        self.unfinished.contains(run).then_some((run, generation))
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        kind: NotifyKind,
        which: &str,
        state: State,
        run_id: &str,
        event: &Event,
        task: &str,
        dataset: &str,
        partition: &str,
    ) -> Result<(), crate::store::StoreError> {
        let notification = |kind: NotifyKind, which: &str| Notification {
            idempotency_key: key(&[&self.pipeline, dataset, partition, kind.as_str(), which]),
            event: kind,
            pipeline: self.pipeline.clone(),
            task: task.to_owned(),
            dataset: dataset.to_owned(),
            partition: partition.to_owned(),
            state,
            run_id: run_id.to_owned(),
            attempt: event.attempt.or_else(|| {
                let attempt = event.data.get("attempt")?.as_u64()?;
                u32::try_from(attempt).ok()
            }),
            generation: event.data.get("generation").and_then(|g| g.as_u64()),
            at: crate::clock::now_rfc3339(),
            detail: event.detail.clone(),
        };
        let wants_recovered = self
            .targets
            .iter()
            .any(|t| t.wants(NotifyKind::Recovered, task));
        let main = notification(kind, which);
        self.put(&main, kind, task)?;
        if kind.is_alarm() && wants_recovered {
            self.outbox
                .raise_alarm(dataset, partition, &main.idempotency_key)?;
        }
        if kind == NotifyKind::Published && wants_recovered {
            let alarms = self.outbox.alarms(dataset, partition)?;
            if !alarms.is_empty() {
                // Named by the alarms it answers: written again after a
                // crash before they are cleared, it is the same notification.
                let recovered = notification(NotifyKind::Recovered, &alarms.join(","));
                self.put(&recovered, NotifyKind::Recovered, task)?;
                self.outbox.clear_alarms(dataset, partition)?;
            }
        }
        Ok(())
    }

    fn put(
        &self,
        notification: &Notification,
        kind: NotifyKind,
        task: &str,
    ) -> Result<(), crate::store::StoreError> {
        for target in self.targets.iter().filter(|t| t.wants(kind, task)) {
            if self.outbox.put_pending(&target.name, notification)? {
                self.sender
                    .queue(&target.name, &notification.idempotency_key);
            }
        }
        Ok(())
    }

    /// Lets the sender deliver what is queued for at most `send::DRAIN`;
    /// what is left stays in the outbox for the next run or flush, and a
    /// warning on stderr says so.
    pub fn finish(&self) -> FlushReport {
        let report = self.sender.finish();
        for line in report.warnings() {
            tracing::warn!("notify: {line}");
        }
        if let Err(e) = self.outbox.close_run(&self.run_id) {
            tracing::warn!(
                "notify: cannot unmark the run in the outbox: {}",
                crate::store::chain(&e)
            );
        }
        report
    }
}

/// Delivers everything pending for the manifest's targets, now, on this
/// thread (`weir notify --flush`, and what `weir serve` calls between
/// runs), after writing the notifications of publications whose process
/// died before writing them. Deliveries are recorded as events of run
/// `by`; `faults` arms `notify_deliver`.
pub fn flush(
    manifest: &Manifest,
    warehouse: &Warehouse,
    by: &str,
    faults: &crate::exec::fault::Faults,
) -> FlushReport {
    if !manifest.notify.is_empty() {
        let writer =
            Notifier::with_sender(manifest, warehouse, by, Sender::idle(), Default::default());
        writer.repair(warehouse);
    }
    send::flush(manifest, warehouse, by, faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_facts_not_deliveries() {
        let published = |g: u64| {
            fact_of(
                State::Published,
                &Event::instance("t", "p").data(serde_json::json!({ "generation": g })),
                "run-1",
            )
        };
        assert_eq!(published(3), Some((NotifyKind::Published, "g3".into())));
        // A restated marker is not a new fact; a decision is.
        assert_eq!(fact_of(State::Held, &Event::instance("t", "p"), "r"), None);
        assert_eq!(
            fact_of(
                State::Held,
                &Event::instance("t", "p")
                    .attempt(2, Some(7))
                    .data(serde_json::json!({ "class": "operator" })),
                "r"
            ),
            Some((NotifyKind::Held, "r/2".into()))
        );
        assert_eq!(
            fact_of(State::Failed, &Event::instance("t", "p"), "r"),
            None
        );
        assert_eq!(
            fact_of(State::Retrying, &Event::instance("t", "p"), "r"),
            None
        );
        assert_eq!(
            fact_of(State::Late, &Event::instance("t", "p"), "r"),
            Some((NotifyKind::Late, String::new()))
        );
        assert_eq!(
            fact_of(State::Missed, &Event::instance("t", "p"), "r"),
            Some((NotifyKind::Missed, String::new()))
        );
        let k = key(&["pipe", "d", "p", "published", "g3"]);
        assert_eq!(k.len(), 32);
        assert_eq!(k, key(&["pipe", "d", "p", "published", "g3"]));
        assert_ne!(k, key(&["pipe", "d", "p", "published", "g4"]));
        // Parts are length-prefixed: moving a boundary changes the key.
        assert_ne!(key(&["ab", "c"]), key(&["a", "bc"]));
    }
}
