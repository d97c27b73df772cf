//! Early cutoff (as Bazel and Shake call it): an instance is judged by what
//! it read, not by which generation held it. An input snapshot pins each
//! upstream partition's generation, token and canonical digest; two
//! snapshots that read the same digests from the same partitions (and the
//! same external bytes and watermarks) describe the same inputs, even when
//! an identical republish moved every generation number on. So a republish
//! whose digest equals the previous generation's leaves its readers current:
//! they are neither STALE nor rerun, and a code edit that changes nothing in
//! an output stops at the first task whose output is identical.
//!
//! Computed from the snapshot's JSON as commit records store it, so records
//! written before this existed are compared the same way.

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

/// The inputs a snapshot (as stored in a commit record) read, without the
/// generations and tokens that located them: per input its name, kind,
/// producer, external path and watermark, the partition read and the
/// digests, in the task's input order.
pub fn reads(snapshot: &Value) -> Value {
    let Some(inputs) = snapshot["inputs"].as_array() else {
        return Value::Null;
    };
    let reads: Vec<Value> = inputs
        .iter()
        .map(|i| {
            let partitions: Vec<Value> = i["partitions"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| json!([p["partition"], p["digest"]]))
                        .collect()
                })
                .unwrap_or_default();
            // An input mapped to several partitions digests generations
            // and tokens too: its per-partition digests stand for it here.
            let digest = if partitions.is_empty() {
                i["digest"].clone()
            } else {
                Value::Null
            };
            json!({
                "name": i["name"],
                "kind": i["kind"],
                "task": i["task"],
                "path": i["path"],
                "watermark": i["watermark"],
                "partition": i["partition"],
                "partitions": partitions,
                "digest": digest,
                "accepted_missing": i["accepted_missing"],
            })
        })
        .collect();
    Value::Array(reads)
}

/// SHA-256 of [`reads`]: equal for two snapshots that read the same data.
pub fn reads_digest(snapshot: &Value) -> String {
    let bytes = serde_json::to_vec(&reads(snapshot)).expect("JSON values always serialize");
    format!("sha256:{:x}", Sha256::digest(&bytes))
}

/// Whether two stored snapshots read the same data (see the module doc).
pub fn same_reads(a: &Value, b: &Value) -> bool {
    reads(a) == reads(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(generation: u64, digest: &str) -> Value {
        json!({"inputs": [
            {"name": "e", "kind": "external", "path": "in/k1", "digest": "sha256:aa"},
            {"name": "a_out", "kind": "upstream", "task": "a", "generation": generation,
             "token": generation + 3, "digest": digest},
            {"name": "h", "kind": "upstream", "task": "h", "digest": "sha256:mix",
             "partitions": [
                {"partition": "2026-11-15T00", "generation": generation, "token": 9, "digest": "sha256:h0"},
                {"partition": "2026-11-15T01", "generation": 1, "token": 2, "digest": digest}]}
        ]})
    }

    // Generations and tokens do not count, digests do
    #[test]
    fn an_identical_republish_reads_the_same() {
        assert!(same_reads(
            &snapshot(1, "sha256:d1"),
            &snapshot(2, "sha256:d1")
        ));
        assert_eq!(
            reads_digest(&snapshot(1, "sha256:d1")),
            reads_digest(&snapshot(7, "sha256:d1"))
        );
        assert!(!same_reads(
            &snapshot(1, "sha256:d1"),
            &snapshot(1, "sha256:d2")
        ));
        let mut moved = snapshot(1, "sha256:d1");
        moved["inputs"][0]["digest"] = json!("sha256:bb");
        assert!(!same_reads(&snapshot(1, "sha256:d1"), &moved));
        let mut other = snapshot(1, "sha256:d1");
        other["inputs"][1]["partition"] = json!("2026-11-14");
        assert!(!same_reads(&snapshot(1, "sha256:d1"), &other));
    }
}
