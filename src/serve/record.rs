//! Serve's records in the warehouse, through its backend (so they work on
//! S3 as on a disk):
//!
//! ```text
//!  _serve/progress/<task>.json              newest occurrence started or missed (replaced)
//!  _serve/missed/<task>/<partition>.json    a MISSED period, put-if-absent: recorded once
//!  _serve/claims/<task>/<instance>.json     who runs a due instance, put-if-absent: one serve does
//!  _serve/takeovers/<task>/<instance>/<n>   the n-th takeover from a dead claimer, put-if-absent: one wins
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
    crate::store::backend::read_json(
        warehouse.backend().as_ref(),
        key,
        "unreadable serve progress",
    )
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

/// The MISSED record of a period of `task`, if one was recorded.
pub fn missed_of(
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
) -> Result<Option<Missed>, StoreError> {
    let key = missed_key(task, partition)?;
    let Some(bytes) = again(|| warehouse.backend().get(&key))? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            key,
            message: format!("unreadable MISSED record: {e}"),
        })
}

/// Whether a missed period of `task` was recorded.
pub fn is_missed(warehouse: &Warehouse, task: &str, partition: &str) -> Result<bool, StoreError> {
    let key = missed_key(task, partition)?;
    Ok(again(|| warehouse.backend().get(&key))?.is_some())
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

/// A read asked again while the store fails, [`CLAIM_TRIES`] times: a
/// claim that cannot be read loses its instance.
fn again<T>(read: impl Fn() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut tries = 1;
    loop {
        match read() {
            Err(_) if tries < CLAIM_TRIES => tries += 1,
            done => return done,
        }
    }
}

/// Put-if-absent of a claim or takeover: `true` when the key holds these
/// bytes. A failed request leaves the outcome unknown (a reply lost after
/// the write landed, or a 503 before it): it reads what is there and asks
/// again, or the instance would be neither run nor recorded MISSED.
fn put_ours(warehouse: &Warehouse, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match warehouse.backend().put_if_absent(key, bytes) {
            Ok(true) => return Ok(true),
            Ok(false) => break,
            Err(e) if tries >= CLAIM_TRIES => return Err(e),
            Err(_) => {}
        }
        if let Ok(Some(held)) = warehouse.backend().get(key) {
            return Ok(held == bytes);
        }
    }
    // Taken: ours if an earlier try landed though its reply was lost.
    Ok(again(|| warehouse.backend().get(key))?.is_some_and(|held| held == bytes))
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
    if put_ours(warehouse, &key, &bytes)? {
        return Ok(None);
    }
    let held = again(|| warehouse.backend().get(&key))?.unwrap_or_default();
    Ok(Some(serde_json::from_slice(&held).unwrap_or(Claim {
        engine: "an unreadable claim".into(),
        holder: None,
        run_id: String::new(),
        at: String::new(),
    })))
}

/// How a claim went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// This serve claimed it first.
    Won,
    /// Its claimer is dead: this serve took it over (one of several racing
    /// serves does, by put-if-absent of the next takeover).
    TookOver(Claim),
    /// A live serve holds it.
    Held(Claim),
}

fn takeovers(task: &str, instance: &str) -> String {
    format!("{SERVE}/takeovers/{task}/{}", encode_partition(instance))
}

/// The claim that holds an instance now: its last takeover, else its
/// claim; with the number of takeovers.
fn holding(
    warehouse: &Warehouse,
    task: &str,
    instance: &str,
    first: Claim,
) -> Result<(Claim, u64), StoreError> {
    let dir = takeovers(task, instance);
    let last = again(|| warehouse.backend().list(&dir))?
        .iter()
        .filter_map(|n| n.parse::<u64>().ok())
        .max();
    let Some(n) = last else {
        return Ok((first, 0));
    };
    let bytes = again(|| warehouse.backend().get(&format!("{dir}/{n}")))?.unwrap_or_default();
    Ok((serde_json::from_slice(&bytes).unwrap_or(first), n))
}

/// Claims a due instance, or takes it over when `dead` says its holder
/// died: two serves that both see the holder dead cannot both take it
/// over.
pub fn claim_or_take_over(
    warehouse: &Warehouse,
    task: &str,
    instance: &str,
    mine: &Claim,
    dead: impl Fn(&Claim) -> bool,
) -> Result<Claimed, StoreError> {
    let Some(first) = claim(warehouse, task, instance, mine)? else {
        return Ok(Claimed::Won);
    };
    let (held, n) = holding(warehouse, task, instance, first)?;
    if held == *mine {
        return Ok(Claimed::Won);
    }
    if !dead(&held) {
        return Ok(Claimed::Held(held));
    }
    let key = format!("{}/{}", takeovers(task, instance), n + 1);
    let bytes = encode(&key, mine)?;
    if put_ours(warehouse, &key, &bytes)? {
        return Ok(Claimed::TookOver(held));
    }
    let other = again(|| warehouse.backend().get(&key))?.unwrap_or_default();
    Ok(Claimed::Held(
        serde_json::from_slice(&other).unwrap_or(held),
    ))
}

/// The claim of a due instance, if any: its last takeover's, if any.
pub fn claim_of(
    warehouse: &Warehouse,
    task: &str,
    instance: &str,
) -> Result<Option<Claim>, StoreError> {
    validate_segment(task)?;
    let key = format!("{SERVE}/claims/{task}/{}.json", encode_partition(instance));
    let Some(first) =
        again(|| warehouse.backend().get(&key))?.and_then(|b| serde_json::from_slice(&b).ok())
    else {
        return Ok(None);
    };
    holding(warehouse, task, instance, first).map(|(c, _)| Some(c))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_by(engine: &str) -> Claim {
        Claim {
            engine: engine.into(),
            holder: None,
            run_id: format!("serve-{engine}"),
            at: "2026-09-20T10:00:00Z".into(),
        }
    }

    #[test]
    fn two_serves_seeing_a_dead_claimer_cannot_both_take_over() {
        let backend = std::sync::Arc::new(crate::store::MemoryBackend::new());
        let w = Warehouse::with_backend(backend, "/nonexistent".into());
        let dead = |c: &Claim| c.engine == "a";
        let first = claim_or_take_over(&w, "t", "2026-09-20T09", &claim_by("a"), dead).unwrap();
        assert_eq!(first, Claimed::Won);
        let b = claim_or_take_over(&w, "t", "2026-09-20T09", &claim_by("b"), dead).unwrap();
        assert_eq!(b, Claimed::TookOver(claim_by("a")));
        let c = claim_or_take_over(&w, "t", "2026-09-20T09", &claim_by("c"), dead).unwrap();
        assert_eq!(c, Claimed::Held(claim_by("b")));
        assert_eq!(
            claim_of(&w, "t", "2026-09-20T09").unwrap(),
            Some(claim_by("b"))
        );
        // b dies too: the next serve takes it over from b, once.
        let dead = |c: &Claim| c.engine != "c" && c.engine != "d";
        let c = claim_or_take_over(&w, "t", "2026-09-20T09", &claim_by("c"), dead).unwrap();
        assert_eq!(c, Claimed::TookOver(claim_by("b")));
        let d = claim_or_take_over(&w, "t", "2026-09-20T09", &claim_by("d"), dead).unwrap();
        assert_eq!(d, Claimed::Held(claim_by("c")));
    }
}
