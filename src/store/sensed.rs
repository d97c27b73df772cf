//! The last answer an engine (a run or serve) got when it asked whether an
//! instance's external inputs are ready: what `status`, `explain`, the
//! report and the console show instead of asking a sensor command
//! themselves (a read starts no process).
//!
//! One small JSON object per instance, `_sensed/<task>/<partition>.json`,
//! replaced whole by a plain put (an observation, not a coordination step:
//! the last writer wins and a lost write costs a reader an older answer).
//! A process writes only when the answer changes, or when the one it wrote
//! is [`REFRESH`] old (so `checked_at` says the question is still being
//! asked); `since` is when the answer became what it is.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::store::error::StoreError;
use crate::store::key::validate_segment;
use crate::store::Warehouse;

/// Where the answers live in the warehouse.
const SENSED: &str = "_sensed";

/// An unchanged answer is written again after this long.
pub const REFRESH: Duration = Duration::from_secs(600);

/// What the engine found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Answer {
    /// Every external input may be read.
    Ready,
    /// An input is not there yet.
    NotYet,
    /// A sensor could not say.
    Failed,
}

/// One instance's last answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensorRecord {
    /// The task.
    pub task: String,
    /// The partition.
    pub partition: String,
    /// What was found.
    pub answer: Answer,
    /// The external dataset that decided (none when ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Why, in the engine's words (empty when ready).
    #[serde(default)]
    pub why: String,
    /// Who asked: a run id, or `serve`.
    pub by: String,
    /// When the answer became this one (RFC 3339, the asker's clock).
    pub since: String,
    /// When it was last given (RFC 3339, the asker's clock).
    pub checked_at: String,
}

impl SensorRecord {
    fn same_answer(&self, other: &SensorRecord) -> bool {
        self.answer == other.answer && self.dataset == other.dataset && self.why == other.why
    }
}

fn key(task: &str, partition: &str) -> Result<String, StoreError> {
    validate_segment(task)?;
    Ok(format!("{SENSED}/{task}/{}", listed_name(partition)))
}

/// The name [`listed`] shows for `partition`'s answer.
pub fn listed_name(partition: &str) -> String {
    format!("{}.json", crate::store::encode_partition(partition))
}

/// The names of `task`'s recorded answers, in one listing: a reader of many
/// instances reads only those that exist.
pub fn listed(warehouse: &Warehouse, task: &str) -> Result<HashSet<String>, StoreError> {
    validate_segment(task)?;
    Ok(warehouse
        .backend()
        .list(&format!("{SENSED}/{task}"))?
        .into_iter()
        .collect())
}

/// The last answer recorded for an instance. One that does not parse is
/// an error naming its key (a reader then says it cannot tell).
pub fn read(
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
) -> Result<Option<SensorRecord>, StoreError> {
    let key = key(task, partition)?;
    crate::store::backend::read_json(warehouse.backend().as_ref(), key, "not a sensor answer")
}

/// What this process last wrote, per (warehouse, task, partition): the
/// answer and when, so an unchanged answer costs no request.
type Written = HashMap<(String, String, String), (SensorRecord, Instant)>;

fn written() -> &'static Mutex<Written> {
    static WRITTEN: std::sync::OnceLock<Mutex<Written>> = std::sync::OnceLock::new();
    WRITTEN.get_or_init(Mutex::default)
}

/// Records `found` (its `since` and `checked_at` both now) unless this
/// process wrote the same answer less than [`REFRESH`] ago; an answer
/// already in the warehouse keeps its `since`. Returns whether it wrote.
pub fn record(warehouse: &Warehouse, found: SensorRecord) -> Result<bool, StoreError> {
    let key = key(&found.task, &found.partition)?;
    let slot = (
        warehouse.location(),
        found.task.clone(),
        found.partition.clone(),
    );
    let mut found = found;
    let known = written()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&slot)
        .cloned();
    let before = match known {
        Some((last, at)) if last.same_answer(&found) && at.elapsed() < REFRESH => return Ok(false),
        Some((last, _)) => Some(last),
        // First time in this process: what another process (or an earlier
        // run) left says since when.
        None => read(warehouse, &found.task, &found.partition)
            .ok()
            .flatten(),
    };
    if let Some(before) = before.filter(|b| b.same_answer(&found)) {
        found.since = before.since;
    }
    let bytes = serde_json::to_vec_pretty(&found).map_err(|e| StoreError::Corrupt {
        key: key.clone(),
        message: e.to_string(),
    })?;
    warehouse.backend().put(&key, &bytes)?;
    written()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(slot, (found, Instant::now()));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(answer: Answer, why: &str, at: &str) -> SensorRecord {
        SensorRecord {
            task: "t".into(),
            partition: "2026-09-20".into(),
            answer,
            dataset: (answer != Answer::Ready).then(|| "raw".into()),
            why: why.into(),
            by: "RUN-1".into(),
            since: at.into(),
            checked_at: at.into(),
        }
    }

    #[test]
    fn an_answer_is_written_when_it_changes_and_keeps_its_since() {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::open(dir.path()).unwrap();
        assert_eq!(read(&wh, "t", "2026-09-20").unwrap(), None);
        let first = answer(Answer::NotYet, "exited with 1", "2026-12-06T10:00:00Z");
        assert!(record(&wh, first.clone()).unwrap());
        assert_eq!(read(&wh, "t", "2026-09-20").unwrap(), Some(first));
        // The same answer again: no write.
        let again = answer(Answer::NotYet, "exited with 1", "2026-12-06T10:05:00Z");
        assert!(!record(&wh, again).unwrap());
        assert_eq!(
            read(&wh, "t", "2026-09-20").unwrap().unwrap().checked_at,
            "2026-12-06T10:00:00Z"
        );
        // A new answer is written at once.
        let ready = answer(Answer::Ready, "", "2026-12-06T10:06:00Z");
        assert!(record(&wh, ready.clone()).unwrap());
        assert_eq!(read(&wh, "t", "2026-09-20").unwrap(), Some(ready));
        assert_eq!(
            listed(&wh, "t").unwrap(),
            HashSet::from([listed_name("2026-09-20")])
        );
        // Another process (no memory of the write) keeps the answer's since.
        written().lock().unwrap().clear();
        let later = answer(Answer::Ready, "", "2026-12-06T11:00:00Z");
        assert!(record(&wh, later).unwrap());
        let kept = read(&wh, "t", "2026-09-20").unwrap().unwrap();
        assert_eq!(kept.since, "2026-12-06T10:06:00Z");
        assert_eq!(kept.checked_at, "2026-12-06T11:00:00Z");
    }

    #[test]
    fn a_torn_answer_is_an_error_naming_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let wh = Warehouse::open(dir.path()).unwrap();
        wh.backend()
            .put("_sensed/t/2026-09-20.json", b"{\"answer\":")
            .unwrap();
        let e = read(&wh, "t", "2026-09-20").unwrap_err().to_string();
        assert!(e.contains("_sensed/t/2026-09-20.json"), "{e}");
    }
}
