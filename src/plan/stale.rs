//! Staleness: a publication pinned upstream generations and external files
//! in its input snapshot; when one of those partitions has published another
//! generation with other data since (a repair, a rollback: an identical
//! republish is cut off early, see [`super::cutoff`]), an external file's
//! bytes or its watermark changed (a late correction of the source), or the
//! task's code is no longer the code that built it, the publication is
//! STALE. `weir status`, `weir plan` and
//! `weir report` mark it, all through [`Staleness`]; nothing reruns on its
//! own.

use std::collections::HashMap;

use crate::manifest::{Manifest, Task};
use crate::store::{CommitRecord, Warehouse};

/// Why publications are stale, reading each upstream partition and
/// fingerprinting each task's code once however many records are asked
/// about.
#[derive(Debug, Default)]
pub struct Staleness {
    current: Current,
    /// Each task's fingerprint; `None` when a `code` path cannot be read
    /// (only code_version is compared then).
    prints: HashMap<String, Option<String>>,
    /// Each external file's digest now (`None`: it cannot be read), hashed
    /// once however many publications read it.
    files: HashMap<std::path::PathBuf, Option<String>>,
}

impl Staleness {
    /// What makes `record`, published by `task`, stale, in words; empty
    /// when it is current.
    pub fn of(
        &mut self,
        manifest: &Manifest,
        warehouse: &Warehouse,
        task: &Task,
        record: &CommitRecord,
    ) -> Vec<String> {
        let mut changed = self.current.changed(warehouse, record);
        changed.extend(self.externals_changed(manifest, record));
        let fingerprint = self
            .fingerprint(manifest, task)
            .unwrap_or_else(|| record.code_fingerprint.as_deref().unwrap_or_default());
        changed.extend(code_changed(record, &task.code_version, fingerprint));
        changed
    }

    /// Why the next run would release the quarantine `mark` records (its
    /// inputs, pinned now, or its code changed since: the run's own test,
    /// [`crate::store::marks::InstanceMark::changed_since`]), in words;
    /// empty when the quarantine stands, or when the inputs cannot be
    /// pinned (the run would not run the instance then either).
    pub fn quarantine_released(
        &mut self,
        manifest: &Manifest,
        warehouse: &Warehouse,
        mark: &crate::store::marks::InstanceMark,
    ) -> Vec<String> {
        use crate::store::marks::Mark;
        let Some(task) = manifest.tasks.get(&mark.task) else {
            return Vec::new();
        };
        if mark.mark != Mark::Quarantined {
            return Vec::new();
        }
        let Ok(snapshot) = crate::inputs::pin(
            manifest,
            warehouse,
            task,
            &mark.partition,
            false,
            crate::clock::now(),
        ) else {
            return Vec::new();
        };
        // Code that cannot be fingerprinted now refuses the run before
        // anything starts: compare code_version and inputs only.
        let fingerprint = self
            .fingerprint(manifest, task)
            .or(mark.code_fingerprint.as_deref())
            .unwrap_or_default()
            .to_owned();
        mark.changed_since(&snapshot.digest(), &task.code_version, &fingerprint)
    }

    /// How the external inputs `record` pinned differ from the files there
    /// now, in words: their bytes (by digest) and their watermarks.
    fn externals_changed(&mut self, manifest: &Manifest, record: &CommitRecord) -> Vec<String> {
        let mut out = Vec::new();
        let Some(inputs) = record.input_snapshot["inputs"].as_array() else {
            return out;
        };
        for input in inputs.iter().filter(|i| i["kind"] == "external") {
            let (Some(name), Some(path), Some(pinned)) = (
                input["name"].as_str(),
                input["path"].as_str(),
                input["digest"].as_str(),
            ) else {
                continue;
            };
            let location = manifest.dir.join(path);
            let now = self
                .files
                .entry(location.clone())
                .or_insert_with(|| crate::inputs::file_digest(&location).ok());
            match now.as_deref() {
                None => out.push(format!(
                    "external input `{name}` ({path}) is gone or unreadable since this publication read it"
                )),
                Some(now) if now != pinned => out.push(format!(
                    "external input `{name}` ({path}) changed since this publication read it: {} now, {} then",
                    abbreviate(now),
                    abbreviate(pinned)
                )),
                Some(_) => {}
            }
            let template = manifest
                .datasets
                .get(name)
                .and_then(|d| d.watermark.as_deref());
            if let (Some(template), Some(then)) = (template, input["watermark"].as_str()) {
                let file = manifest
                    .dir
                    .join(template.replace("{partition}", &record.partition));
                let now = crate::store::user_file::read_limited(
                    &file,
                    crate::store::user_file::WATERMARK_LIMIT,
                )
                .map(|t| t.trim().to_string());
                if now.as_deref().is_ok_and(|now| now != then) {
                    out.push(format!(
                        "the watermark of external input `{name}` is at {}, this publication read it at {then}",
                        now.unwrap_or_default()
                    ));
                }
            }
        }
        out
    }

    /// `task`'s code fingerprint, computed once per task.
    fn fingerprint(&mut self, manifest: &Manifest, task: &Task) -> Option<&str> {
        self.prints
            .entry(task.name.clone())
            .or_insert_with(|| crate::manifest::fingerprint::fingerprint(&manifest.dir, task).ok())
            .as_deref()
    }
}

/// Every upstream (dataset, partition, generation) a commit record's input
/// snapshot pinned: one per input read at one partition, one per partition
/// of an input mapped to several.
pub fn pinned_upstream(record: &CommitRecord) -> Vec<(String, String, u64)> {
    pinned_reads(record)
        .into_iter()
        .map(|p| (p.dataset, p.partition, p.generation))
        .collect()
}

/// One upstream partition a commit record read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedRead {
    /// The upstream dataset.
    pub dataset: String,
    /// Its partition.
    pub partition: String,
    /// The generation read.
    pub generation: u64,
    /// That generation's canonical digest (empty in a record that lacks it).
    pub digest: String,
}

/// Every upstream partition `record`'s input snapshot read, with the
/// generation and digest read.
pub fn pinned_reads(record: &CommitRecord) -> Vec<PinnedRead> {
    reads_of(&record.input_snapshot, &record.partition)
}

/// [`pinned_reads`] of a stored snapshot of an instance at `own`.
pub fn reads_of(snapshot: &serde_json::Value, own: &str) -> Vec<PinnedRead> {
    let mut out = Vec::new();
    let Some(inputs) = snapshot["inputs"].as_array() else {
        return out;
    };
    let digest = |v: &serde_json::Value| v["digest"].as_str().unwrap_or_default().to_string();
    for input in inputs.iter().filter(|i| i["kind"] == "upstream") {
        let Some(dataset) = input["name"].as_str() else {
            continue;
        };
        match input["partitions"].as_array() {
            Some(parts) => {
                for p in parts {
                    if let (Some(key), Some(g)) =
                        (p["partition"].as_str(), p["generation"].as_u64())
                    {
                        out.push(PinnedRead {
                            dataset: dataset.to_string(),
                            partition: key.to_string(),
                            generation: g,
                            digest: digest(p),
                        });
                    }
                }
            }
            None => {
                let key = input["partition"].as_str().unwrap_or(own);
                if let Some(g) = input["generation"].as_u64() {
                    out.push(PinnedRead {
                        dataset: dataset.to_string(),
                        partition: key.to_string(),
                        generation: g,
                        digest: digest(input),
                    });
                }
            }
        }
    }
    out
}

/// Current generation and digest of upstream partitions, read once each.
#[derive(Debug, Default)]
struct Current {
    latest: HashMap<(String, String), Option<(u64, String)>>,
}

impl Current {
    /// What changed upstream of `record`, in words; empty when it is
    /// current. A partition republished with the digest this record read
    /// changed nothing it read (early cutoff, [`super::cutoff`]).
    fn changed(&mut self, warehouse: &Warehouse, record: &CommitRecord) -> Vec<String> {
        let mut out = Vec::new();
        for read in pinned_reads(record) {
            let now = self
                .latest
                .entry((read.dataset.clone(), read.partition.clone()))
                .or_insert_with(|| {
                    warehouse
                        .partition(&read.dataset, &read.partition)
                        .latest()
                        .ok()
                        .flatten()
                        .map(|r| (r.generation.get(), r.digest))
                });
            let Some((generation, digest)) = now else {
                continue;
            };
            if *generation != read.generation && *digest != read.digest {
                out.push(format!(
                    "`{}` {} is at generation {generation}, this publication read generation {}",
                    read.dataset, read.partition, read.generation
                ));
            }
        }
        out
    }
}

/// How the task's code differs from what built `record`, in words; `None`
/// when it is the same. A record without a fingerprint (written before weir
/// fingerprinted code) is compared by `code_version` alone.
pub fn code_changed(
    record: &CommitRecord,
    code_version: &str,
    fingerprint: &str,
) -> Option<String> {
    if record.code_version != code_version {
        return Some(format!(
            "built by code_version {}, the task is now at {code_version}",
            record.code_version
        ));
    }
    match record.code_fingerprint.as_deref() {
        Some(built) if built != fingerprint => Some(format!(
            "its code changed (command, gates, output or `code` files): built with {}, now {}",
            abbreviate(built),
            abbreviate(fingerprint)
        )),
        _ => None,
    }
}

/// `sha256:` and the first 12 hex digits.
fn abbreviate(digest: &str) -> &str {
    &digest[..digest.len().min(7 + 12)]
}
