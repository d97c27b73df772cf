//! Serve's records in the warehouse, through its backend (so they work on
//! S3 as on a disk):
//!
//! ```text
//!  _serve/progress/<task>.json              newest occurrence started or missed (replaced)
//!  _serve/missed/<task>/<partition>.json    a MISSED period, put-if-absent: recorded once
//!  _serve/claims/<task>/<instance>.json     who runs a due instance, put-if-absent: one serve does
//!  _serve/clock/<engine>                    written to read the store's time (replaced)
//! ```
//!
//! Progress is what a restarted serve, or a standby taking over, counts
//! missed periods from; put-if-absent makes a MISSED record and a claim
//! happen once whichever serve gets there first.

use serde::{Deserialize, Serialize};

use crate::store::backend::put_replacing;
use crate::store::error::StoreError;
use crate::store::{decode_partition, encode_partition, segment_problem, Warehouse};

const SERVE: &str = "_serve";

/// Requests a claim makes before it gives up on a failing store.
const CLAIM_TRIES: u32 = 4;

/// A task's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The task.
    pub task: String,
    /// Every occurrence (period ordinal or firing instant) at or before
    /// this one is finished: run, or recorded MISSED.
    pub occurrence: i64,
    /// The newest occurrence that was due; those after `occurrence` were
    /// waiting or running (a restart checks them). Absent in records
    /// written before lanes: then `occurrence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<i64>,
    /// Its partition key, for people reading the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The trigger it counts: `schedule`'s text, or the scheme's whole
    /// definition (grain and minutes, zone, first period): a changed
    /// trigger's progress does not carry over.
    pub trigger: String,
    /// When it was written (wall clock).
    pub at: String,
}

/// A period serve skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missed {
    /// The task.
    pub task: String,
    /// The period's partition key.
    pub partition: String,
    /// When it was due (RFC 3339).
    pub due_at: String,
    /// Why it was not run.
    pub why: String,
    /// The command that fills it.
    pub fill: String,
    /// When it was recorded (wall clock).
    pub recorded_at: String,
}

/// Who runs a due instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The engine (`lease::engine`).
    pub engine: String,
    /// The engine's process, to tell a dead claimer on this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<crate::store::Holder>,
    /// The serve process's event log (its run id).
    pub run_id: String,
    /// When it was claimed (wall clock).
    pub at: String,
}

fn validate_segment(segment: &str) -> Result<(), StoreError> {
    match segment_problem(segment) {
        Some(reason) => Err(StoreError::InvalidKey {
            key: segment.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

fn encode<T: Serialize>(key: &str, value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec_pretty(value).map_err(|e| StoreError::Corrupt {
        key: key.to_string(),
        message: format!("cannot encode: {e}"),
    })
}

fn progress_key(task: &str) -> Result<String, StoreError> {
    validate_segment(task)?;
    Ok(format!("{SERVE}/progress/{task}.json"))
}

/// The stored progress of `task`, if any.
pub fn progress(warehouse: &Warehouse, task: &str) -> Result<Option<Progress>, StoreError> {
    let key = progress_key(task)?;
    let Some(bytes) = warehouse.backend().get(&key)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            key,
            message: format!("unreadable serve progress: {e}"),
        })
}

/// Stores `task`'s progress (replacing it).
pub fn set_progress(warehouse: &Warehouse, progress: &Progress) -> Result<(), StoreError> {
    let key = progress_key(&progress.task)?;
    let bytes = encode(&key, progress)?;
    put_replacing(warehouse.backend().as_ref(), &key, &bytes)
}

fn missed_key(task: &str, partition: &str) -> Result<String, StoreError> {
    validate_segment(task)?;
    Ok(format!(
        "{SERVE}/missed/{task}/{}.json",
        encode_partition(partition)
    ))
}

/// Records a missed period; `false` when it was recorded before (by this
/// serve before a restart, or by another one).
pub fn record_missed(warehouse: &Warehouse, missed: &Missed) -> Result<bool, StoreError> {
    let key = missed_key(&missed.task, &missed.partition)?;
    let bytes = encode(&key, missed)?;
    warehouse.backend().put_if_absent(&key, &bytes)
}

/// Every missed period recorded, by task and partition.
pub fn all_missed(warehouse: &Warehouse) -> Result<Vec<Missed>, StoreError> {
    let backend = warehouse.backend();
    let root = format!("{SERVE}/missed");
    let mut out = Vec::new();
    for task in backend.list(&root)? {
        for file in backend.list(&format!("{root}/{task}"))? {
            let Some(partition) = file.strip_suffix(".json").and_then(decode_partition) else {
                continue;
            };
            let key = missed_key(&task, &partition)?;
            if let Some(bytes) = backend.get(&key)? {
                let m: Missed =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                        key: key.clone(),
                        message: format!("unreadable MISSED record: {e}"),
                    })?;
                out.push(m);
            }
        }
    }
    out.sort_by(|a, b| (&a.task, &a.partition).cmp(&(&b.task, &b.partition)));
    Ok(out)
}

/// Claims a due instance (`instance`: its partition key, or `@<instant>`
/// for a firing); the existing claim when another serve made it first.
pub fn claim(
    warehouse: &Warehouse,
    task: &str,
    instance: &str,
    claim: &Claim,
) -> Result<Option<Claim>, StoreError> {
    validate_segment(task)?;
    let key = format!("{SERVE}/claims/{task}/{}.json", encode_partition(instance));
    let bytes = encode(&key, claim)?;
    // A failed request leaves the outcome unknown (a reply lost after the
    // write landed, or a 503 before it): read what is there and ask again,
    // or the instance is neither run nor recorded MISSED.
    let mut tries = 0;
    let won = loop {
        tries += 1;
        match warehouse.backend().put_if_absent(&key, &bytes) {
            Ok(won) => break won,
            Err(e) if tries >= CLAIM_TRIES => return Err(e),
            Err(_) => {}
        }
        if let Ok(Some(held)) = warehouse.backend().get(&key) {
            if held == bytes {
                return Ok(None);
            }
        }
    };
    if won {
        return Ok(None);
    }
    let held = warehouse.backend().get(&key)?.unwrap_or_default();
    if held == bytes {
        // Ours: an earlier try landed though its reply was lost.
        return Ok(None);
    }
    Ok(Some(serde_json::from_slice(&held).unwrap_or(Claim {
        engine: "an unreadable claim".into(),
        holder: None,
        run_id: String::new(),
        at: String::new(),
    })))
}

/// The claim of a due instance, if any.
pub fn claim_of(
    warehouse: &Warehouse,
    task: &str,
    instance: &str,
) -> Result<Option<Claim>, StoreError> {
    validate_segment(task)?;
    let key = format!("{SERVE}/claims/{task}/{}.json", encode_partition(instance));
    Ok(warehouse
        .backend()
        .get(&key)?
        .and_then(|b| serde_json::from_slice(&b).ok()))
}

/// How far this engine's clock ([`crate::clock::system_ms`]) is ahead of
/// the warehouse's (negative: behind), in milliseconds: it writes a key
/// and reads the time the store gave it, and takes the midpoint of its own
/// clock around the write (so a slow store widens the error, never the
/// skew's sign).
pub fn clock_skew_ms(warehouse: &Warehouse, engine: &str) -> Result<i64, StoreError> {
    validate_segment(engine)?;
    let key = format!("{SERVE}/clock/{engine}");
    let before = crate::clock::system_ms();
    put_replacing(warehouse.backend().as_ref(), &key, b"")?;
    let after = crate::clock::system_ms();
    let meta = warehouse
        .backend()
        .list_objects(&format!("{SERVE}/clock"))?
        .into_iter()
        .find(|m| m.key == key)
        .ok_or_else(|| StoreError::Corrupt {
            key: key.clone(),
            message: "the clock probe just written is not listed".into(),
        })?;
    let store = meta.last_modified.as_millisecond();
    let mine = before + (after - before) / 2;
    // Stores keep whole seconds (S3's Last-Modified): within a second is
    // agreement.
    let skew = mine - store;
    Ok(if skew.abs() < 1_000 { 0 } else { skew })
}
