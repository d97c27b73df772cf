//! Steering a running backfill from anywhere (`weir backfill MANIFEST NAME
//! --pause | --resume | --cancel`): one record per backfill in the
//! warehouse, `_backfills/<name>.json`, replaced whole, so it reaches an
//! engine on another host through the same store (a directory or S3). No
//! record: the backfill runs.
//!
//! ```text
//!  (none) ──--pause──► paused ──--resume──► (none)
//!     │                  │
//!     └────--cancel──────┴──► cancelled ──(the next run of it)──► (none)
//! ```
//!
//! A running backfill reads the record before it admits an instance
//! (at most [`FRESH`] old): paused, it admits nothing new, lets running
//! attempts finish and waits; cancelled, it stops as an interrupt would.

use serde::{Deserialize, Serialize};

use crate::store::backend::put_replacing;
use crate::store::error::StoreError;
use crate::store::key::validate_segment;
use crate::store::Warehouse;

/// Where steering records live in the warehouse.
const BACKFILLS: &str = "_backfills";

/// How old a read of the record a running backfill acts on may be.
pub const FRESH: std::time::Duration = std::time::Duration::from_millis(250);

/// What a person asked of a backfill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Steer {
    /// Admit nothing new; running attempts finish.
    Paused,
    /// Stop as an interrupt would; a later run resumes it.
    Cancelled,
}

/// The record of a steered backfill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steering {
    /// The backfill.
    pub backfill: String,
    /// What was asked.
    pub state: Steer,
    /// Since when (RFC 3339).
    pub since: String,
    /// Who asked (user and host), for `weir status`.
    pub by: String,
}

fn key(backfill: &str) -> Result<String, StoreError> {
    validate_segment(backfill)?;
    Ok(format!("{BACKFILLS}/{backfill}.json"))
}

/// The record of `backfill`, if any. One that does not parse counts as
/// paused, naming why: when in doubt, start nothing new.
pub fn read(warehouse: &Warehouse, backfill: &str) -> Result<Option<Steering>, StoreError> {
    let key = key(backfill)?;
    let Some(bytes) = warehouse.backend().get(&key)? else {
        return Ok(None);
    };
    Ok(Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        Steering {
            backfill: backfill.to_owned(),
            state: Steer::Paused,
            since: String::new(),
            by: format!("an unreadable record `{key}`: {e}"),
        }
    })))
}

/// Writes the record, replacing any other.
pub fn write(warehouse: &Warehouse, steering: &Steering) -> Result<(), StoreError> {
    let key = key(&steering.backfill)?;
    let bytes = serde_json::to_vec_pretty(steering).map_err(|e| StoreError::Corrupt {
        key: key.clone(),
        message: format!("cannot encode the steering record: {e}"),
    })?;
    put_replacing(warehouse.backend().as_ref(), &key, &bytes)
}

/// Removes the record: the backfill runs.
pub fn clear(warehouse: &Warehouse, backfill: &str) -> Result<(), StoreError> {
    warehouse.backend().delete(&key(backfill)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_torn_one_counts_as_paused() {
        let dir = tempfile::tempdir().unwrap();
        let w = Warehouse::open(dir.path()).unwrap();
        assert_eq!(read(&w, "b").unwrap(), None);
        let s = Steering {
            backfill: "b".into(),
            state: Steer::Cancelled,
            since: "2026-12-06T10:00:00Z".into(),
            by: "me".into(),
        };
        write(&w, &s).unwrap();
        assert_eq!(read(&w, "b").unwrap(), Some(s));
        std::fs::write(dir.path().join("_backfills/b.json"), "{").unwrap();
        assert_eq!(read(&w, "b").unwrap().unwrap().state, Steer::Paused);
        clear(&w, "b").unwrap();
        assert_eq!(read(&w, "b").unwrap(), None);
        assert!(read(&w, "../x").is_err());
    }
}
