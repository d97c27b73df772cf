//! Leases: who holds an attempt, and when it last said so; stored at
//! `<dataset>/<partition>/attempts/<token>/lease.json` through the backend
//! ([`crate::store::PartitionStore::write_lease`]).
//!
//! One writer per lease (the holder's heartbeat), so it is written with an
//! unconditional put and without fsync on the filesystem: after a machine
//! crash a missing lease reads as "dead", which fencing makes safe. Readers
//! judge liveness by watching `beats` change on their own monotonic clock
//! (`exec::lease`), never by comparing `heartbeat_ms` with their wall clock.

use serde::{Deserialize, Serialize};

use crate::store::allocation::TokenRecord;
use crate::store::Holder;

/// Who holds an attempt, and when it last said so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    /// Random id of the engine process.
    pub engine_id: String,
    /// Its host.
    pub host: String,
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot (Linux), so a reused pid is not mistaken for it.
    pub pid_start: Option<u64>,
    /// The kernel boot id of its machine (Linux).
    #[serde(default)]
    pub boot_id: Option<String>,
    /// Its PID namespace (Linux): a pid means nothing outside it.
    #[serde(default)]
    pub pid_ns: Option<String>,
    /// Run.
    pub run_id: String,
    /// Task.
    pub task: String,
    /// Attempt number.
    pub attempt: u32,
    /// Token.
    pub token: u64,
    /// Heartbeats so far: readers watch it change on their own clock.
    #[serde(default)]
    pub beats: u64,
    /// Last heartbeat, ms since the Unix epoch (the writer's clock: evidence
    /// for people, not used to judge liveness).
    pub heartbeat_ms: i64,
    /// Last heartbeat, RFC 3339.
    pub heartbeat_at: String,
    /// The lease is over when no heartbeat came for this long.
    pub timeout_ms: u64,
    /// The attempt ended (whatever its outcome).
    pub finished: bool,
    /// The task's process tag (`tree.rs`): an engine that takes over from a
    /// dead holder on this host stops the processes carrying it first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_tag: Option<String>,
    /// The Slurm job running the attempt's command, once submitted: an
    /// engine taking over waits for it to end (`slurm.rs`) instead of
    /// running a duplicate beside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

impl Lease {
    /// Stamps a heartbeat.
    pub fn beat(&mut self) {
        self.beats += 1;
        self.heartbeat_ms = now_ms();
        self.heartbeat_at = crate::clock::now_rfc3339();
    }

    /// The engine process that holds it.
    pub fn holder(&self) -> Holder {
        Holder {
            engine_id: self.engine_id.clone(),
            host: self.host.clone(),
            pid: self.pid,
            pid_start: self.pid_start,
            boot_id: self.boot_id.clone(),
            pid_ns: self.pid_ns.clone(),
        }
    }

    /// Whether the holder is certainly gone (see [`Holder::certainly_dead`]).
    pub fn holder_dead(&self) -> bool {
        self.holder().certainly_dead()
    }

    /// The first lease of the attempt holding `token`, as its token record
    /// carries it (no beat yet, not finished): what a reader takes when
    /// there is no `lease.json` yet. `None` for a record that carries none.
    pub fn claimed(token: u64, record: &TokenRecord) -> Option<Lease> {
        let (Some(h), Some(timeout_ms)) = (&record.holder, record.lease_timeout_ms) else {
            return None;
        };
        Some(Lease {
            engine_id: h.engine_id.clone(),
            host: h.host.clone(),
            pid: h.pid,
            pid_start: h.pid_start,
            boot_id: h.boot_id.clone(),
            pid_ns: h.pid_ns.clone(),
            run_id: record.run_id.clone(),
            task: record.task.clone(),
            attempt: record.attempt,
            token,
            beats: 0,
            heartbeat_ms: record
                .allocated_at
                .parse::<jiff::Timestamp>()
                .map_or(0, |t| t.as_millisecond()),
            heartbeat_at: record.allocated_at.clone(),
            timeout_ms,
            finished: false,
            process_tag: record.process_tag.clone(),
            job_id: None,
        })
    }
}

/// Reads the lease in a local attempt dir, for tests and tools that hold a
/// filesystem warehouse's path (the engine goes through
/// [`crate::store::PartitionStore::read_lease`]).
#[doc(hidden)]
pub fn read_at(attempt_dir: &std::path::Path) -> Option<Lease> {
    let bytes = std::fs::read(attempt_dir.join(crate::store::layout::LEASE_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the lease in a local attempt dir as its holder would (tests that
/// play another engine).
#[doc(hidden)]
pub fn write_at(attempt_dir: &std::path::Path, lease: &Lease) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(lease).map_err(std::io::Error::other)?;
    crate::store::fs::write_durable(&attempt_dir.join(crate::store::layout::LEASE_FILE), &bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::{Backend, FencingToken, MemoryBackend, Warehouse};

    // A lease is written and read through the backend at
    // attempts/<token>/lease.json, so it lives wherever the warehouse does.
    #[test]
    fn leases_go_through_the_backend() {
        let backend = Arc::new(MemoryBackend::new());
        let root = std::env::temp_dir().join(format!("weir-leases-{}", fastrand::u64(..)));
        let p = Warehouse::with_backend(backend.clone(), root.clone()).partition("d", "2026|x");
        let t = FencingToken::from_raw(7);
        assert_eq!(p.read_lease(t), None);
        let me = Holder::current();
        let mut lease: Lease = serde_json::from_value(serde_json::json!({
            "engine_id": me.engine_id, "host": me.host, "pid": me.pid,
            "pid_start": me.pid_start, "run_id": "r", "task": "t", "attempt": 1,
            "token": 7, "heartbeat_ms": 0, "heartbeat_at": "", "timeout_ms": 3000,
            "finished": false,
        }))
        .unwrap();
        lease.beat();
        p.write_lease(t, &lease).unwrap();
        lease.beat();
        lease.finished = true;
        p.write_lease(t, &lease).unwrap();
        assert_eq!(p.read_lease(t), Some(lease.clone()));
        assert_eq!(p.read_lease(t).unwrap().beats, 2);
        let keys: Vec<String> = backend
            .list_objects("")
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            keys,
            vec!["d/2026%7Cx/attempts/00000000000000000007/lease.json"]
        );
        assert!(!root.exists());
        // An unreadable lease is no lease (a reader watches for one).
        backend
            .put("d/2026%7Cx/attempts/00000000000000000007/lease.json", b"{")
            .unwrap();
        assert_eq!(p.read_lease(t), None);
        assert!(!lease.holder_dead());
    }
}
