//! One notification, the body every target receives, and the idempotency
//! key that names its fact.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::events::State;
use crate::manifest::NotifyKind;

/// One notification: the JSON body every target receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Names the fact; also sent as the `Idempotency-Key` header.
    pub idempotency_key: String,
    /// What it announces.
    pub event: NotifyKind,
    /// The pipeline.
    pub pipeline: String,
    /// The task.
    pub task: String,
    /// Its output dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// The event state that recorded the fact (`PUBLISHED`, `HELD` …).
    pub state: State,
    /// The run that recorded it.
    pub run_id: String,
    /// The attempt, for a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The generation, for `published` and `recovered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// When the fact was recorded (RFC 3339 UTC).
    pub at: String,
    /// The event's detail.
    pub detail: String,
}

/// The idempotency key of a fact: 32 hex digits of a SHA-256 over its parts.
pub fn key(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"weir.notify.v1\0");
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
