//! Publications announced even when the process that committed them died
//! before writing their notifications (`outbox`'s intents): written before
//! the commit, dropped once the notification is pending, and repaired from
//! the commit record by whoever finds one left.

use serde_json::json;

use super::outbox::Intent;
use super::Notifier;
use crate::events::{Event, State};
use crate::manifest::NotifyKind;
use crate::store::Warehouse;

impl Notifier {
    /// Whether some target hears of a publication by `task` (its `recovered`
    /// is written with it).
    fn announces(&self, task: &str) -> bool {
        self.targets
            .iter()
            .any(|t| t.wants(NotifyKind::Published, task) || t.wants(NotifyKind::Recovered, task))
    }

    /// Remembers a commit about to be written; a failure is a warning (the
    /// publication goes on, announced unless this process dies before its
    /// notification is written).
    pub(super) fn committing(&self, task: &str, partition: &str, token: u64) {
        let Some(dataset) = self.datasets.get(task) else {
            return;
        };
        if !self.announces(task) {
            return;
        }
        let intent = Intent {
            task: task.to_owned(),
            dataset: dataset.clone(),
            partition: partition.to_owned(),
            token,
        };
        if let Err(e) = self.outbox.put_intent(&intent) {
            tracing::warn!(
                "notify: cannot record the coming publication of {task} {partition} in the outbox: {}",
                crate::store::chain(&e)
            );
        }
    }

    /// The notification of a publication is pending: its intent goes.
    pub(super) fn announced(&self, task: &str, dataset: &str, partition: &str, token: u64) {
        let intent = Intent {
            task: task.to_owned(),
            dataset: dataset.to_owned(),
            partition: partition.to_owned(),
            token,
        };
        // Left behind, it is found announced by the next repair: harmless.
        let _ = self.outbox.drop_intent(&intent);
    }

    /// Writes the notification of every publication whose intent was left
    /// and whose record exists, with the key and run of that record, and
    /// drops the intents settled (announced, or overtaken by a newer token
    /// so never to be committed). A still-running process's intent may be
    /// repaired here too: the fact is durable and the key the same, so its
    /// own write is then a no-op.
    pub(super) fn repair(&self, warehouse: &Warehouse) {
        let intents = match self.outbox.intents() {
            Ok(intents) => intents,
            Err(e) => {
                tracing::warn!(
                    "notify: cannot list the publications not yet announced: {}",
                    crate::store::chain(&e)
                );
                return;
            }
        };
        for intent in intents {
            if let Err(e) = self.repair_one(warehouse, &intent) {
                tracing::warn!(
                    "notify: cannot announce the publication of {} {} (token {}): {}",
                    intent.task,
                    intent.partition,
                    intent.token,
                    crate::store::chain(&e)
                );
            }
        }
    }

    fn repair_one(
        &self,
        warehouse: &Warehouse,
        intent: &Intent,
    ) -> Result<(), crate::store::StoreError> {
        let history = warehouse
            .partition(&intent.dataset, &intent.partition)
            .history()?;
        let Some(record) = history.iter().find(|r| r.token.get() == intent.token) else {
            if history.iter().any(|r| r.token.get() > intent.token) {
                self.outbox.drop_intent(intent)?;
            }
            return Ok(());
        };
        let generation = record.generation.get();
        let event = Event::instance(&record.task, &record.partition)
            .attempt(record.attempt, Some(intent.token))
            .detail(format!(
                "generation {generation}: {} rows, {}",
                record.rows, record.digest
            ))
            .data(json!({
                "generation": generation,
                "rows": record.rows,
                "digest": record.digest,
                "input_snapshot_digest": record.input_snapshot_digest,
                "code_version": record.code_version,
            }));
        self.write(
            NotifyKind::Published,
            &format!("g{generation}"),
            State::Published,
            &record.run_id,
            &event,
            &record.task,
            &intent.dataset,
            &record.partition,
        )?;
        self.outbox.drop_intent(intent)
    }
}
