//! The outbox's keys in the warehouse, through the store's backend (so it
//! works on a directory and on S3 alike). Every write is a put-if-absent of
//! a key named by the notification's idempotency key; nothing is replaced.
//!
//! ```text
//! _notify/pending/<target>/<key>.json     the notification's JSON, until delivered
//! _notify/delivered/<target>/<key>.json   when and by whom; written before pending goes
//! _notify/alarms/<dataset>/<partition>/<key>  failures announced, until `recovered`
//! _notify/runs/<run-id>                   a run whose notifier has not finished (it may have died)
//! _notify/intents/<hash>.json             a publication about to be committed, until announced
//! ```
//!
//! An intent is written before a commit record whose publication some
//! target wants to hear of, and dropped once that notification is pending:
//! a process killed between the commit and the outbox leaves the intent,
//! and the next run, serve pass or `weir notify --flush` finds its record
//! (by token) and writes the notification the dead process would have
//! written, with the same key. An intent whose token never committed and
//! never can (a newer token is committed) is dropped.
//!
//! A writer never recreates a pending notification whose delivered marker
//! exists, and the sender rechecks that marker before sending, so a
//! notification written again (a replayed fact) is not sent again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Notification;
use crate::store::{encode_partition, segment_problem, Backend, StoreError};

const PENDING: &str = "_notify/pending";
const DELIVERED: &str = "_notify/delivered";
const ALARMS: &str = "_notify/alarms";
const RUNS: &str = "_notify/runs";
const INTENTS: &str = "_notify/intents";

/// The outbox of one warehouse.
#[derive(Clone)]
pub struct Outbox {
    backend: Arc<dyn Backend>,
}

/// A delivery, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    /// When (RFC 3339 UTC).
    pub at: String,
    /// The run (or `weir notify --flush`) that delivered it.
    pub by: String,
    /// Tries it took in that process.
    pub tries: u32,
}

/// A publication about to be committed (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The task publishing.
    pub task: String,
    /// Its output dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// The attempt's fencing token: names its commit record, if any.
    pub token: u64,
}

impl Intent {
    /// The intent's object name: one per partition and token.
    fn name(&self) -> String {
        super::key(&[
            "intent",
            &self.dataset,
            &self.partition,
            &self.token.to_string(),
        ])
    }
}

/// Notifications not yet delivered to one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undelivered {
    /// The target.
    pub target: String,
    /// How many.
    pub count: usize,
    /// When the oldest was written (the store's clock).
    pub since: String,
}

fn checked(segment: &str) -> Result<&str, StoreError> {
    match segment_problem(segment) {
        None => Ok(segment),
        Some(why) => Err(StoreError::InvalidKey {
            key: segment.to_owned(),
            reason: why,
        }),
    }
}

impl Outbox {
    /// The outbox in `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Outbox {
        Outbox { backend }
    }

    fn pending_key(target: &str, key: &str) -> Result<String, StoreError> {
        Ok(format!(
            "{PENDING}/{}/{}.json",
            checked(target)?,
            checked(key)?
        ))
    }

    fn delivered_key(target: &str, key: &str) -> Result<String, StoreError> {
        Ok(format!(
            "{DELIVERED}/{}/{}.json",
            checked(target)?,
            checked(key)?
        ))
    }

    fn alarm_dir(dataset: &str, partition: &str) -> Result<String, StoreError> {
        Ok(format!(
            "{ALARMS}/{}/{}",
            checked(dataset)?,
            encode_partition(partition)
        ))
    }

    /// Puts `notification` in `target`'s pending list unless it is there
    /// or was delivered; whether it is pending now.
    pub fn put_pending(
        &self,
        target: &str,
        notification: &Notification,
    ) -> Result<bool, StoreError> {
        let key = &notification.idempotency_key;
        if self.delivered(target, key)?.is_some() {
            return Ok(false);
        }
        let bytes = serde_json::to_vec(notification)
            .map_err(|e| StoreError::io("_notify")(std::io::Error::other(e)))?;
        self.backend
            .put_if_absent(&Self::pending_key(target, key)?, &bytes)?;
        Ok(true)
    }

    /// The pending notification `key` of `target`, if still pending.
    pub fn pending(&self, target: &str, key: &str) -> Result<Option<Notification>, StoreError> {
        let name = Self::pending_key(target, key)?;
        match self.backend.get(&name)? {
            // A torn or foreign object is not something to send.
            Some(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            None => Ok(None),
        }
    }

    /// The keys pending for `target`, oldest name first (keys are hashes:
    /// the order is only stable, not by time).
    pub fn pending_keys(&self, target: &str) -> Result<Vec<String>, StoreError> {
        let names = self
            .backend
            .list(&format!("{PENDING}/{}", checked(target)?))?;
        Ok(names
            .into_iter()
            .filter_map(|n| n.strip_suffix(".json").map(str::to_owned))
            .collect())
    }

    /// The delivery of `key` to `target`, if recorded.
    pub fn delivered(&self, target: &str, key: &str) -> Result<Option<Delivered>, StoreError> {
        let bytes = self.backend.get(&Self::delivered_key(target, key)?)?;
        // A marker that does not parse still says "delivered".
        Ok(bytes.map(|b| {
            serde_json::from_slice(&b).unwrap_or(Delivered {
                at: String::new(),
                by: String::new(),
                tries: 0,
            })
        }))
    }

    /// Records `key` as delivered to `target`, then drops it from pending.
    pub fn mark_delivered(
        &self,
        target: &str,
        key: &str,
        delivered: &Delivered,
    ) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(delivered)
            .map_err(|e| StoreError::io("_notify")(std::io::Error::other(e)))?;
        self.backend
            .put_if_absent(&Self::delivered_key(target, key)?, &bytes)?;
        self.backend.delete(&Self::pending_key(target, key)?)
    }

    /// Drops a pending notification already delivered (by another process).
    pub fn drop_pending(&self, target: &str, key: &str) -> Result<(), StoreError> {
        self.backend.delete(&Self::pending_key(target, key)?)
    }

    /// Remembers that failure `key` of an instance was announced.
    pub fn raise_alarm(&self, dataset: &str, partition: &str, key: &str) -> Result<(), StoreError> {
        let name = format!("{}/{}", Self::alarm_dir(dataset, partition)?, checked(key)?);
        self.backend.put_if_absent(&name, key.as_bytes())?;
        Ok(())
    }

    /// The announced failures of an instance not yet answered by `recovered`.
    pub fn alarms(&self, dataset: &str, partition: &str) -> Result<Vec<String>, StoreError> {
        self.backend.list(&Self::alarm_dir(dataset, partition)?)
    }

    /// Clears an instance's alarms (its `recovered` is in the outbox).
    pub fn clear_alarms(&self, dataset: &str, partition: &str) -> Result<(), StoreError> {
        self.backend
            .delete_prefix(&Self::alarm_dir(dataset, partition)?)
    }

    /// Marks `run_id` as a run whose notifications may not all be written
    /// yet; the runs marked before (finished, or died).
    pub fn open_run(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let earlier = self.backend.list(RUNS)?;
        self.backend
            .put(&format!("{RUNS}/{}", checked(run_id)?), b"")?;
        Ok(earlier.into_iter().filter(|r| r != run_id).collect())
    }

    /// `run_id` wrote every notification of the facts it recorded.
    pub fn close_run(&self, run_id: &str) -> Result<(), StoreError> {
        self.backend.delete(&format!("{RUNS}/{}", checked(run_id)?))
    }

    /// Records `intent` before its commit.
    pub fn put_intent(&self, intent: &Intent) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(intent)
            .map_err(|e| StoreError::io("_notify")(std::io::Error::other(e)))?;
        self.backend
            .put_if_absent(&format!("{INTENTS}/{}.json", intent.name()), &bytes)?;
        Ok(())
    }

    /// The intents left (by this process, or by one that died); one that
    /// does not parse is not one this engine wrote and is skipped.
    pub fn intents(&self) -> Result<Vec<Intent>, StoreError> {
        let mut found = Vec::new();
        for name in self.backend.list(INTENTS)? {
            if !name.ends_with(".json") {
                continue;
            }
            if let Some(bytes) = self.backend.get(&format!("{INTENTS}/{name}"))? {
                found.extend(serde_json::from_slice::<Intent>(&bytes).ok());
            }
        }
        Ok(found)
    }

    /// Drops `intent`: its notification is pending, or it will never publish.
    pub fn drop_intent(&self, intent: &Intent) -> Result<(), StoreError> {
        self.backend
            .delete(&format!("{INTENTS}/{}.json", intent.name()))
    }

    /// What is not delivered, per target, with the oldest one's time.
    pub fn undelivered(&self) -> Result<Vec<Undelivered>, StoreError> {
        let mut by_target: BTreeMap<String, (usize, jiff::Timestamp)> = BTreeMap::new();
        for object in self.backend.list_objects(PENDING)? {
            let Some(rest) = object.key.strip_prefix(PENDING) else {
                continue;
            };
            let Some((target, _)) = rest.trim_start_matches('/').split_once('/') else {
                continue;
            };
            let entry = by_target
                .entry(target.to_owned())
                .or_insert((0, object.last_modified));
            entry.0 += 1;
            entry.1 = entry.1.min(object.last_modified);
        }
        Ok(by_target
            .into_iter()
            .map(|(target, (count, since))| Undelivered {
                target,
                count,
                since: since.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::State;
    use crate::manifest::NotifyKind;
    use crate::store::MemoryBackend;

    fn notification(key: &str) -> Notification {
        Notification {
            idempotency_key: key.to_owned(),
            event: NotifyKind::Published,
            pipeline: "p".into(),
            task: "t".into(),
            dataset: "d".into(),
            partition: "eu|2026-09-20".into(),
            state: State::Published,
            run_id: "r".into(),
            attempt: Some(1),
            generation: Some(1),
            at: "2026-09-20T00:00:00Z".into(),
            detail: String::new(),
        }
    }

    #[test]
    fn a_delivered_notification_is_never_pending_again() {
        let outbox = Outbox::new(Arc::new(MemoryBackend::new()));
        assert!(outbox.put_pending("hook", &notification("k1")).unwrap());
        assert!(outbox.put_pending("hook", &notification("k1")).unwrap());
        assert!(outbox.put_pending("pager", &notification("k1")).unwrap());
        assert!(outbox.put_pending("hook", &notification("k2")).unwrap());
        assert_eq!(outbox.pending_keys("hook").unwrap(), ["k1", "k2"]);
        let counts: Vec<(String, usize)> = outbox
            .undelivered()
            .unwrap()
            .into_iter()
            .map(|u| (u.target, u.count))
            .collect();
        assert_eq!(counts, [("hook".into(), 2), ("pager".into(), 1)]);
        let delivered = Delivered {
            at: "now".into(),
            by: "r2".into(),
            tries: 2,
        };
        outbox.mark_delivered("hook", "k1", &delivered).unwrap();
        assert_eq!(outbox.delivered("hook", "k1").unwrap(), Some(delivered));
        assert_eq!(outbox.pending("hook", "k1").unwrap(), None);
        // Written again (a replayed fact): not pending, not sent again.
        assert!(!outbox.put_pending("hook", &notification("k1")).unwrap());
        assert_eq!(outbox.pending_keys("hook").unwrap(), ["k2"]);
        // Another target's delivery is its own.
        assert_eq!(
            outbox.pending("pager", "k1").unwrap(),
            Some(notification("k1"))
        );
        assert!(outbox.put_pending("a/b", &notification("k3")).is_err());
    }

    #[test]
    fn alarms_and_run_marks_are_per_instance_and_per_run() {
        let outbox = Outbox::new(Arc::new(MemoryBackend::new()));
        outbox.raise_alarm("d", "eu|2026-09-20", "k1").unwrap();
        outbox.raise_alarm("d", "eu|2026-09-20", "k1").unwrap();
        outbox.raise_alarm("d", "us|2026-09-20", "k2").unwrap();
        assert_eq!(outbox.alarms("d", "eu|2026-09-20").unwrap(), ["k1"]);
        outbox.clear_alarms("d", "eu|2026-09-20").unwrap();
        assert!(outbox.alarms("d", "eu|2026-09-20").unwrap().is_empty());
        assert_eq!(outbox.alarms("d", "us|2026-09-20").unwrap(), ["k2"]);
        assert!(outbox.open_run("r1").unwrap().is_empty());
        assert_eq!(outbox.open_run("r2").unwrap(), ["r1"]);
        outbox.close_run("r2").unwrap();
        assert_eq!(outbox.open_run("r3").unwrap(), ["r1"]);
    }
}
