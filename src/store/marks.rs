//! Operator-visible instance states that outlive a run: HELD (waits for an
//! operator), QUARANTINED (a poison pill for one input snapshot and code
//! version), ABANDONED (an operator gave it up) and ACCEPTED (an operator
//! decided it will not be built; what reads it among others runs without it).
//!
//! One small JSON object per instance, `_instances/<task>/<partition>.json`
//! in the warehouse's backend, replaced whole (create if absent, else replace
//! the version read, durably). A later run reads it before doing
//! anything: a held or abandoned instance is not run again until `weir retry`
//! releases it; a quarantined one is not retried with the same snapshot and
//! code (new data or new code is a new question, so it runs).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::store::backend::put_replacing;
use crate::store::error::StoreError;
use crate::store::key::validate_segment;
use crate::store::Warehouse;

/// Where markers live in the warehouse.
const INSTANCES: &str = "_instances";

/// The kinds of marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Mark {
    /// Waits for `weir retry` or `weir abandon`.
    Held,
    /// Not retried with the same input snapshot and code_version.
    Quarantined,
    /// Given up by an operator; not run until `weir retry`.
    Abandoned,
    /// An operator decided the partition will not be built (`weir accept`:
    /// a source lost for good): not run until `weir retry`, and downstream
    /// instances that read it among several partitions run without it.
    Accepted,
}

impl Mark {
    /// As written in markers and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Mark::Held => "HELD",
            Mark::Quarantined => "QUARANTINED",
            Mark::Abandoned => "ABANDONED",
            Mark::Accepted => "ACCEPTED",
        }
    }
}

/// A marker's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceMark {
    /// Which.
    pub mark: Mark,
    /// Task.
    pub task: String,
    /// Partition.
    pub partition: String,
    /// The run that decided it.
    pub run_id: String,
    /// Why.
    pub reason: String,
    /// The snapshot it failed on (quarantine applies to this one only).
    pub input_snapshot_digest: Option<String>,
    /// The code it failed with.
    pub code_version: String,
    /// The fingerprint of that code (command, gates, output, `code` files):
    /// a quarantine stands only while it is unchanged. Absent in markers
    /// written before fingerprints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_fingerprint: Option<String>,
    /// When.
    pub since: String,
    /// The operator's note, for ABANDONED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl InstanceMark {
    /// What changed since this marker was written, in words, given the
    /// instance's current input snapshot digest, code_version and code
    /// fingerprint; empty when nothing did. A QUARANTINED marker stands only
    /// while this is empty: new data or new code is a new question. The run
    /// and `status`/`explain` all decide with this one test. A marker from
    /// before fingerprints is compared by snapshot and code_version alone.
    pub fn changed_since(
        &self,
        snapshot_digest: &str,
        code_version: &str,
        fingerprint: &str,
    ) -> Vec<String> {
        let mut changed = Vec::new();
        if self.input_snapshot_digest.as_deref() != Some(snapshot_digest) {
            changed.push("its input snapshot changed".to_string());
        }
        if self.code_version != code_version {
            changed.push(format!(
                "its code_version changed from {} to {code_version}",
                self.code_version
            ));
        }
        if self
            .code_fingerprint
            .as_deref()
            .is_some_and(|f| f != fingerprint)
        {
            changed.push("its code changed".to_string());
        }
        changed
    }
}

fn key(task: &str, partition: &str) -> Result<String, StoreError> {
    validate_segment(task)?;
    Ok(format!(
        "{INSTANCES}/{task}/{}.json",
        crate::store::encode_partition(partition)
    ))
}

/// Whether an operator accepted `task`'s `partition` as missing (an
/// ACCEPTED marker). An unreadable marker is no acceptance: a reader stays
/// blocked, as it would be without one.
pub fn is_accepted(warehouse: &Warehouse, task: &str, partition: &str) -> bool {
    read(warehouse, task, partition).is_ok_and(|m| m.is_some_and(|m| m.mark == Mark::Accepted))
}

/// The marker of an instance, if any. A marker that is not valid JSON (a
/// torn or hand-edited object) counts as held, naming why: when in doubt,
/// wait for a person. A marker that cannot be read at all (EACCES, EIO, a
/// file where `_instances/<task>` belongs, an unreachable store) is an
/// error naming the key, never "no marker".
pub fn read(
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
) -> Result<Option<InstanceMark>, StoreError> {
    let key = key(task, partition)?;
    let Some(bytes) = warehouse.backend().get(&key)? else {
        return Ok(None);
    };
    Ok(Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        unreadable(
            task,
            partition,
            format!("unreadable instance marker `{key}`: {e}"),
        )
    })))
}

/// A HELD marker standing for one that cannot be read (`reason` says why).
pub fn unreadable(task: &str, partition: &str, reason: String) -> InstanceMark {
    InstanceMark {
        mark: Mark::Held,
        task: task.to_string(),
        partition: partition.to_string(),
        run_id: String::new(),
        reason,
        input_snapshot_digest: None,
        code_version: String::new(),
        code_fingerprint: None,
        since: String::new(),
        note: None,
    }
}

/// Whether `mark` stands for a marker that could not be parsed
/// ([`unreadable`]): no run wrote it.
pub fn is_unreadable(mark: &InstanceMark) -> bool {
    mark.mark == Mark::Held && mark.run_id.is_empty() && mark.since.is_empty()
}

/// The names of the markers of `task` standing now (`<encoded
/// partition>.json`), in one listing: what a scheduler reads once for a
/// batch of instances it starts together, instead of one read per
/// instance. Only markers written by operators and failed instances
/// exist, so the listing is short whatever the number of partitions. A
/// listing that fails is an error; the caller then reads each marker.
pub fn listed(warehouse: &Warehouse, task: &str) -> Result<HashSet<String>, StoreError> {
    validate_segment(task)?;
    Ok(warehouse
        .backend()
        .list(&format!("{INSTANCES}/{task}"))?
        .into_iter()
        .collect())
}

/// The name [`listed`] shows for `partition`'s marker.
pub fn listed_name(partition: &str) -> String {
    format!("{}.json", crate::store::encode_partition(partition))
}

/// Writes a marker durably, replacing any other.
pub fn write(warehouse: &Warehouse, mark: &InstanceMark) -> Result<(), StoreError> {
    let key = key(&mark.task, &mark.partition)?;
    let bytes = serde_json::to_vec_pretty(mark).map_err(|e| StoreError::Corrupt {
        key: key.clone(),
        message: format!("cannot encode marker: {e}"),
    })?;
    put_replacing(warehouse.backend().as_ref(), &key, &bytes)
}

/// Removes a marker (published, or released by an operator).
pub fn clear(warehouse: &Warehouse, task: &str, partition: &str) -> Result<(), StoreError> {
    warehouse.backend().delete(&key(task, partition)?)
}

/// Every marker in the warehouse, by task and partition. A listing that
/// fails is an error: "no marker" would let held instances run.
pub fn all(warehouse: &Warehouse) -> Result<Vec<InstanceMark>, StoreError> {
    // Listed a level at a time rather than recursively: on a filesystem, a
    // file where a task's directory belongs, or a directory where a marker
    // belongs, then fails its listing or its read instead of being skipped.
    let backend = warehouse.backend();
    let mut out = Vec::new();
    for task in backend.list(INSTANCES)? {
        for file in backend.list(&format!("{INSTANCES}/{task}"))? {
            if let Some(partition) = file
                .strip_suffix(".json")
                .and_then(crate::store::decode_partition)
            {
                if let Some(m) = read(warehouse, &task, &partition)? {
                    out.push(m);
                }
            }
        }
    }
    out.sort_by(|a, b| (&a.task, &a.partition).cmp(&(&b.task, &b.partition)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::{Backend, MemoryBackend};

    fn mark(task: &str, partition: &str, mark: Mark) -> InstanceMark {
        InstanceMark {
            mark,
            task: task.into(),
            partition: partition.into(),
            run_id: "run-1".into(),
            reason: "why".into(),
            input_snapshot_digest: Some("sha256:aa".into()),
            code_version: "1".into(),
            code_fingerprint: None,
            since: "2026-12-01T00:00:00Z".into(),
            note: None,
        }
    }

    // Markers are a typed store over the backend: they live in
    // memory when the warehouse does, and no file is written beside it.
    #[test]
    fn markers_go_through_the_backend() {
        let root = std::env::temp_dir().join(format!("weir-marks-{}", fastrand::u64(..)));
        let backend = Arc::new(MemoryBackend::new());
        let wh = Warehouse::with_backend(backend.clone(), root.clone());
        let held = mark("t", "2026-09-20|eu", Mark::Held);
        write(&wh, &held).unwrap();
        assert_eq!(read(&wh, "t", "2026-09-20|eu").unwrap(), Some(held.clone()));
        let quarantined = mark("t", "2026-09-20|eu", Mark::Quarantined);
        write(&wh, &quarantined).unwrap();
        write(&wh, &mark("a", "k", Mark::Abandoned)).unwrap();
        let all = all(&wh).unwrap();
        assert_eq!(all, vec![mark("a", "k", Mark::Abandoned), quarantined]);
        let keys: Vec<String> = backend
            .list_objects("")
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            keys,
            vec!["_instances/a/k.json", "_instances/t/2026-09-20%7Ceu.json"]
        );
        clear(&wh, "t", "2026-09-20|eu").unwrap();
        clear(&wh, "t", "2026-09-20|eu").unwrap();
        assert_eq!(read(&wh, "t", "2026-09-20|eu").unwrap(), None);
        assert!(!root.exists());
        // A torn marker holds the instance; a bad task name cannot escape
        // the store.
        assert!(backend.put_if_absent("_instances/t/x.json", b"{").unwrap());
        let unreadable = read(&wh, "t", "x").unwrap().unwrap();
        assert_eq!(unreadable.mark, Mark::Held);
        assert!(unreadable.reason.contains("unreadable"), "{unreadable:?}");
        assert!(write(&wh, &mark("../x", "k", Mark::Held)).is_err());
        assert!(read(&wh, "..", "k").is_err());
    }
}
