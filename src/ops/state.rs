//! Operator-visible instance states that outlive a run: HELD (waits for an
//! operator), QUARANTINED (a poison pill for one input snapshot and code
//! version) and ABANDONED (an operator gave it up).
//!
//! One small JSON file per instance, `<warehouse>/_instances/<task>/<partition>.json`,
//! written durably (temp, fsync, rename). A later run reads it before doing
//! anything: a held or abandoned instance is not run again until `weir retry`
//! releases it; a quarantined one is not retried with the same snapshot and
//! code (new data or new code is a new question, so it runs).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
}

impl Mark {
    /// As written in markers and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Mark::Held => "HELD",
            Mark::Quarantined => "QUARANTINED",
            Mark::Abandoned => "ABANDONED",
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

fn path(warehouse: &Path, task: &str, partition: &str) -> PathBuf {
    warehouse.join("_instances").join(task).join(format!(
        "{}.json",
        crate::store::encode_partition(partition)
    ))
}

/// The marker of an instance, if any. A marker that is not valid JSON (a
/// torn or hand-edited file) counts as held, naming why: when in doubt,
/// wait for a person. A marker that cannot be read at all (EACCES, EIO, a
/// file where `_instances/<task>` belongs) is an error naming the path,
/// never "no marker".
pub fn read(
    warehouse: &Path,
    task: &str,
    partition: &str,
) -> Result<Option<InstanceMark>, crate::store::StoreError> {
    let path = path(warehouse, task, partition);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::store::StoreError::io(path)(e)),
    };
    Ok(Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        unreadable(
            task,
            partition,
            format!("unreadable instance marker `{}`: {e}", path.display()),
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

/// Writes a marker durably.
pub fn write(warehouse: &Path, mark: &InstanceMark) -> std::io::Result<()> {
    let p = path(warehouse, &mark.task, &mark.partition);
    if let Some(dir) = p.parent() {
        crate::store::fs::create_dir_all_durable(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(mark).map_err(std::io::Error::other)?;
    crate::store::fs::write_durable(&p, &bytes)
}

/// Removes a marker (published, or released by an operator).
pub fn clear(warehouse: &Path, task: &str, partition: &str) -> std::io::Result<()> {
    let p = path(warehouse, task, partition);
    match std::fs::remove_file(&p) {
        Ok(()) => p.parent().map_or(Ok(()), crate::store::fs::fsync_dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every marker in the warehouse; an error names the directory that
/// cannot be listed (an absent `_instances` holds no marker).
pub fn all(warehouse: &Path) -> Result<Vec<InstanceMark>, crate::store::StoreError> {
    let mut out = Vec::new();
    let root = warehouse.join("_instances");
    let tasks = match std::fs::read_dir(&root) {
        Ok(tasks) => tasks,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(crate::store::StoreError::io(&root)(e)),
    };
    for task in tasks {
        let task = task.map_err(crate::store::StoreError::io(&root))?;
        let files =
            std::fs::read_dir(task.path()).map_err(crate::store::StoreError::io(task.path()))?;
        for file in files {
            let file = file.map_err(crate::store::StoreError::io(task.path()))?;
            let name = file.file_name().to_string_lossy().into_owned();
            if let Some(partition) = name
                .strip_suffix(".json")
                .and_then(crate::store::decode_partition)
            {
                let task = task.file_name().to_string_lossy().into_owned();
                if let Some(m) = read(warehouse, &task, &partition)? {
                    out.push(m);
                }
            }
        }
    }
    out.sort_by(|a, b| (&a.task, &a.partition).cmp(&(&b.task, &b.partition)));
    Ok(out)
}
