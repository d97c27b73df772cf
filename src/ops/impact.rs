//! Impact (blast radius) of one generation: every publication built from it,
//! transitively and across partition mappings, as the commit records' input
//! snapshots say it was read (not as the manifest would map it today), each
//! with its state now; and, apart, the downstream partitions that would read
//! it on their next build (the manifest's mappings read backwards).
//!
//! One pass: the datasets downstream of the producer, in topological order,
//! each partition's log read once; a record belongs to the impact when one
//! of the partitions it read holds data of the impact there (the same
//! dataset, partition and canonical digest: a reader cut off early pins the
//! generation before an identical republish, and read the same data), a
//! hash lookup. So the cost is linear in the downstream records, whatever
//! their shape.
//!
//! ```text
//!   hourly 2026-11-15T10 g1 ──► daily 2026-11-15 g1 ──► weekly 2026-W46 g1 ──► monthly 2026-11 g1
//!                                          └──► trailing 2026-11-15 … 2026-11-21 g1
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::manifest::{Manifest, Task};
use crate::plan::stale::{code_changed, pinned_reads};
use crate::store::error::StoreError;
use crate::store::{certs, CommitRecord, Warehouse};

/// One publication: a generation of a dataset's partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PublicationId {
    /// The dataset.
    pub dataset: String,
    /// Its partition.
    pub partition: String,
    /// The generation.
    pub generation: u64,
}

impl std::fmt::Display for PublicationId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} generation {}",
            self.dataset, self.partition, self.generation
        )
    }
}

/// What a publication in an impact is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PubState {
    /// The visible generation, and what it read is still visible.
    Current,
    /// The visible generation, but an input it read has other data now, or
    /// its task's code changed.
    Stale,
    /// The visible generation, uncertified by an operator.
    Uncertified,
    /// A later generation of the partition is visible.
    Superseded,
}

impl PubState {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            PubState::Current => "CURRENT",
            PubState::Stale => "STALE",
            PubState::Uncertified => "UNCERTIFIED",
            PubState::Superseded => "SUPERSEDED",
        }
    }
}

/// A publication built from the generation, directly or not.
#[derive(Debug, Clone, Serialize)]
pub struct Built {
    /// Which.
    #[serde(flatten)]
    pub id: PublicationId,
    /// The task that published it.
    pub task: String,
    /// Its canonical digest.
    pub digest: String,
    /// Its state now.
    pub state: PubState,
    /// Why it is in that state, in words (the stale inputs, the superseding
    /// generation, the uncertification's reason); empty when current.
    pub why: Vec<String>,
    /// The publications of the impact it read.
    pub read: Vec<PublicationId>,
}

/// A downstream partition that would read the partition on its next build.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct WouldRead {
    /// The task.
    pub task: String,
    /// Its dataset.
    pub dataset: String,
    /// Its partition.
    pub partition: String,
    /// The upstream partition it reads that leads back to the root:
    /// "`hourly` 2026-11-15T10".
    pub reads: String,
}

/// The impact of one generation.
#[derive(Debug, Clone, Serialize)]
pub struct Impact {
    /// The generation asked about.
    pub root: PublicationId,
    /// Its canonical digest.
    pub digest: String,
    /// Every publication built from it, as read, in dependency order.
    pub built_from: Vec<Built>,
    /// The partitions that would read it on their next build, in
    /// dependency order.
    pub would_read: Vec<WouldRead>,
}

impl Impact {
    /// The visible publications built from the root (not superseded): what a
    /// cascade uncertifies and a repair rebuilds.
    pub fn visible(&self) -> impl Iterator<Item = &Built> {
        self.built_from
            .iter()
            .filter(|b| b.state != PubState::Superseded)
    }
}

/// The impact of `root` (its record), published by `producer`.
pub fn impact(
    manifest: &Manifest,
    warehouse: &Warehouse,
    producer: &Task,
    root: &CommitRecord,
) -> Result<Impact, StoreError> {
    let root_id = PublicationId {
        dataset: root.dataset.clone(),
        partition: root.partition.clone(),
        generation: root.generation.get(),
    };
    let order = downstream(manifest, &producer.name);
    let mut impacted: HashSet<PublicationId> = HashSet::from([root_id.clone()]);
    // A reader cut off early still pins the generation before an identical
    // republish: it read the same data, so it is matched by digest too.
    let mut impacted_data: HashSet<(String, String, String)> = HashSet::from([(
        root.dataset.clone(),
        root.partition.clone(),
        root.digest.clone(),
    )]);
    // Every scanned partition's visible record: upstream of later ones.
    let mut latest: HashMap<(String, String), (u64, String)> = HashMap::new();
    let mut found: Vec<(CommitRecord, Vec<PublicationId>, bool)> = Vec::new();
    for name in order.iter().skip(1) {
        let dataset = &manifest.tasks[*name].output.dataset;
        for partition in warehouse.partitions(dataset)? {
            let history = warehouse.partition(dataset, &partition).history()?;
            let newest = history.last().map(|r| r.generation);
            if let Some(last) = history.last() {
                latest.insert(
                    (dataset.clone(), partition.clone()),
                    (last.generation.get(), last.digest.clone()),
                );
            }
            for record in history {
                let read = impacted_reads(&record, &impacted, &impacted_data);
                if read.is_empty() {
                    continue;
                }
                impacted.insert(PublicationId {
                    dataset: record.dataset.clone(),
                    partition: record.partition.clone(),
                    generation: record.generation.get(),
                });
                impacted_data.insert((
                    record.dataset.clone(),
                    record.partition.clone(),
                    record.digest.clone(),
                ));
                let visible = Some(record.generation) == newest;
                found.push((record, read, visible));
            }
        }
    }
    let built_from = judged(manifest, warehouse, found, &mut latest);
    Ok(Impact {
        would_read: would_read(manifest, &order, &root.partition),
        root: root_id,
        digest: root.digest.clone(),
        built_from,
    })
}

/// The publications `record` read that are impacted: matched by digest, or
/// by generation for records without digests.
fn impacted_reads(
    record: &CommitRecord,
    impacted: &HashSet<PublicationId>,
    impacted_data: &HashSet<(String, String, String)>,
) -> Vec<PublicationId> {
    pinned_reads(record)
        .into_iter()
        .filter(|r| {
            !r.digest.is_empty()
                && impacted_data.contains(&(
                    r.dataset.clone(),
                    r.partition.clone(),
                    r.digest.clone(),
                ))
        })
        .map(|r| PublicationId {
            dataset: r.dataset,
            partition: r.partition,
            generation: r.generation,
        })
        .chain(
            // Records without digests: by generation.
            pinned_reads(record)
                .into_iter()
                .filter(|r| r.digest.is_empty())
                .map(|r| PublicationId {
                    dataset: r.dataset,
                    partition: r.partition,
                    generation: r.generation,
                })
                .filter(|id| impacted.contains(id)),
        )
        .collect()
}

/// Each impacted publication with its state: superseded, or as its
/// certificate and code say when it is visible.
fn judged(
    manifest: &Manifest,
    warehouse: &Warehouse,
    found: Vec<(CommitRecord, Vec<PublicationId>, bool)>,
    latest: &mut HashMap<(String, String), (u64, String)>,
) -> Vec<Built> {
    let mut prints: HashMap<String, Option<String>> = HashMap::new();
    let mut built_from = Vec::with_capacity(found.len());
    for (record, read, visible) in found {
        let (state, why) = if visible {
            state_of(manifest, warehouse, &record, latest, &mut prints)
        } else {
            let now = latest
                .get(&(record.dataset.clone(), record.partition.clone()))
                .map_or(0, |(g, _)| *g);
            (
                PubState::Superseded,
                vec![format!("generation {now} is visible")],
            )
        };
        built_from.push(Built {
            id: PublicationId {
                dataset: record.dataset.clone(),
                partition: record.partition.clone(),
                generation: record.generation.get(),
            },
            task: record.task.clone(),
            digest: record.digest.clone(),
            state,
            why,
            read,
        });
    }
    built_from
}

/// `producer` and every task downstream of it, in topological order.
fn downstream<'m>(manifest: &'m Manifest, producer: &str) -> Vec<&'m str> {
    let mut children: HashMap<&str, Vec<&'m str>> = HashMap::new();
    for (name, task) in &manifest.tasks {
        for up in &task.depends_on {
            children.entry(up.as_str()).or_default().push(name.as_str());
        }
    }
    let Some((start, _)) = manifest.tasks.get_key_value(producer) else {
        return Vec::new();
    };
    let mut seen: HashSet<&str> = HashSet::from([start.as_str()]);
    let mut stack = vec![start.as_str()];
    let mut all = vec![start.as_str()];
    while let Some(t) = stack.pop() {
        for c in children.get(t).into_iter().flatten() {
            if seen.insert(c) {
                all.push(c);
                stack.push(c);
            }
        }
    }
    crate::plan::topological(manifest, &all)
}

/// The state of a visible record and why, reading each upstream partition
/// at most once (scanned partitions are known already).
fn state_of(
    manifest: &Manifest,
    warehouse: &Warehouse,
    record: &CommitRecord,
    latest: &mut HashMap<(String, String), (u64, String)>,
    prints: &mut HashMap<String, Option<String>>,
) -> (PubState, Vec<String>) {
    let generation = record.generation.get();
    if let Some(c) = certs::read(warehouse, &record.dataset, &record.partition, generation)
        .filter(|c| !c.certified)
    {
        return (PubState::Uncertified, vec![c.reason]);
    }
    let mut why = Vec::new();
    for read in pinned_reads(record) {
        let key = (read.dataset.clone(), read.partition.clone());
        let now = match latest.get(&key) {
            Some(now) => Some(now.clone()),
            None => {
                let now = warehouse
                    .partition(&read.dataset, &read.partition)
                    .latest()
                    .ok()
                    .flatten()
                    .map(|r| (r.generation.get(), r.digest));
                if let Some(now) = &now {
                    latest.insert(key, now.clone());
                }
                now
            }
        };
        if let Some((g, digest)) = now {
            if g != read.generation && digest != read.digest {
                why.push(format!(
                    "`{}` {} is at generation {g}, this publication read generation {}",
                    read.dataset, read.partition, read.generation
                ));
            }
        }
    }
    if let Some(task) = manifest.tasks.get(&record.task) {
        let print = prints
            .entry(task.name.clone())
            .or_insert_with(|| crate::manifest::fingerprint::fingerprint(&manifest.dir, task).ok());
        let print = print
            .as_deref()
            .or(record.code_fingerprint.as_deref())
            .unwrap_or_default();
        why.extend(code_changed(record, &task.code_version, print));
    }
    if why.is_empty() {
        (PubState::Current, why)
    } else {
        (PubState::Stale, why)
    }
}

/// The partitions of the tasks after the first of `order` that read
/// `partition` of the first, through the mappings, transitively.
fn would_read(manifest: &Manifest, order: &[&str], partition: &str) -> Vec<WouldRead> {
    let now = crate::clock::now();
    let Some((first, rest)) = order.split_first() else {
        return Vec::new();
    };
    // Per task, its reached keys and the upstream partition that led there.
    let mut reached: HashMap<&str, BTreeMap<String, String>> = HashMap::new();
    reached.insert(
        first,
        BTreeMap::from([(partition.to_string(), String::new())]),
    );
    let mut out = Vec::new();
    for name in rest {
        let task = &manifest.tasks[*name];
        let mut keys: BTreeMap<String, String> = BTreeMap::new();
        for up in &task.depends_on {
            let Some(up_keys) = reached.get(up.as_str()) else {
                continue;
            };
            let upstream = &manifest.tasks[up];
            for shift in crate::plan::shifts_of(task, up) {
                for key in up_keys.keys() {
                    for reader in
                        crate::partition::readers(&task.dims, &upstream.dims, key, shift, now)
                    {
                        keys.entry(reader.into_string())
                            .or_insert_with(|| format!("`{}` {key}", upstream.output.dataset));
                    }
                }
            }
        }
        let mut ordered: Vec<(&String, &String)> = keys.iter().collect();
        ordered.sort_by_cached_key(|(k, _)| crate::plan::partitions::order(&task.dims, k));
        for (k, reads) in ordered {
            out.push(WouldRead {
                task: task.name.clone(),
                dataset: task.output.dataset.clone(),
                partition: k.clone(),
                reads: reads.clone(),
            });
        }
        reached.insert(name, keys);
    }
    out
}
