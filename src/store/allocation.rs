//! Who a fencing token was handed to: the content of a token record.
//!
//! The record's existence is what reserves the token (put-if-absent on
//! `tokens/<token>`); its content is only for humans and gc, so it stays
//! small.

/// The attempt a token is allocated for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TokenOwner {
    /// The run that made the attempt.
    pub run_id: String,
    /// The task within the run.
    pub task: String,
    /// The attempt number of the task (1 for the first try).
    pub attempt: u32,
}

/// The stored content of `tokens/<token>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenRecord {
    /// The run that made the attempt.
    pub run_id: String,
    /// The task within the run.
    pub task: String,
    /// The attempt number of the task.
    pub attempt: u32,
    /// When the token was allocated, RFC 3339 UTC.
    pub allocated_at: String,
    /// The engine process that allocated it (absent in records written
    /// before it was recorded): lets another engine tell a token whose
    /// holder died before writing a lease from one about to write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<crate::store::Holder>,
    /// The attempt's first lease, for an engine that writes no `lease.json`
    /// before its first renewal (an object store, where the token's put is
    /// the claim already): its process tag...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_tag: Option<String>,
    /// ...and its lease timeout, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout_ms: Option<u64>,
}

impl TokenRecord {
    /// A record for `owner`, stamped now.
    pub fn new(owner: &TokenOwner) -> TokenRecord {
        TokenRecord {
            run_id: owner.run_id.clone(),
            task: owner.task.clone(),
            attempt: owner.attempt,
            allocated_at: jiff::Timestamp::now().to_string(),
            holder: Some(crate::store::Holder::current().clone()),
            process_tag: None,
            lease_timeout_ms: None,
        }
    }

    /// This record, carrying the attempt's first lease: readers find no
    /// `lease.json` until the first renewal and read this one instead
    /// ([`crate::store::leases::Lease::claimed`]).
    pub fn with_lease(mut self, process_tag: String, lease_timeout_ms: u64) -> TokenRecord {
        self.process_tag = Some(process_tag);
        self.lease_timeout_ms = Some(lease_timeout_ms);
        self
    }

    /// The attempt the token belongs to.
    pub fn owner(&self) -> TokenOwner {
        TokenOwner {
            run_id: self.run_id.clone(),
            task: self.task.clone(),
            attempt: self.attempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_has_the_documented_fields() {
        let owner = TokenOwner {
            run_id: "r1".into(),
            task: "t".into(),
            attempt: 2,
        };
        let rec = TokenRecord::new(&owner);
        assert_eq!(rec.owner(), owner);
        let json: serde_json::Value = serde_json::to_value(&rec).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            ["allocated_at", "attempt", "holder", "run_id", "task"]
        );
        assert!(rec.allocated_at.ends_with('Z'));
    }
}
