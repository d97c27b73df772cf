//! What `weir status` knows about the pipeline, gathered from the commit
//! logs, the instance marks and the external inputs, and what of it pages.

use std::collections::{BTreeMap, HashSet};

use crate::exec::sensed::Known;
use crate::manifest::Manifest;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::{CommitRecord, Warehouse};

/// How many unpublished partitions per task (the newest) whose command
/// sensor no engine asked yet are listed as WAITING "not checked yet"; older
/// ones are only missing (serve never asks a period it skipped).
const UNCHECKED_SHOWN: usize = 10;

/// An expected partition with no publication.
pub struct Missing {
    /// The task.
    pub task: String,
    /// Its dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// The SLA deadline, when it has passed.
    pub late_since: Option<String>,
}

/// A publication that pinned an upstream generation which is no longer
/// the current one (the upstream was repaired or rolled back since).
pub struct Stale {
    /// The task.
    pub task: String,
    /// The partition.
    pub partition: String,
    /// Which upstream partitions changed, in words.
    pub detail: String,
}

/// Something `status --check` pages on.
pub struct Attention {
    /// LATE, HELD, QUARANTINED or TABLE_BEHIND.
    pub state: &'static str,
    /// The task.
    pub task: String,
    /// The partition.
    pub partition: String,
    /// Why, in words.
    pub detail: String,
}

/// What `weir status` knows about the pipeline.
pub struct Overview {
    /// (task, current record) per published partition.
    pub published: Vec<(String, CommitRecord)>,
    /// Expected partitions (every key of each task's scheme up to the latest
    /// complete one) without a publication: a successful run is no proof
    /// that everything committed.
    pub missing: Vec<Missing>,
    /// Operator states that outlive runs, except the two below.
    pub marks: Vec<InstanceMark>,
    /// QUARANTINED markers the next run would release (its inputs or code
    /// changed since), with what changed: shown, never paged on.
    pub released: Vec<(InstanceMark, String)>,
    /// ABANDONED instances: an operator's decision, shown, never paged on.
    pub abandoned: Vec<InstanceMark>,
    /// Partitions whose commit log cannot be read (a corrupt record, an
    /// I/O error): named, while the others are still listed.
    pub unreadable: Vec<(String, String, String)>,
    /// Publications whose pinned upstream generations are not current.
    pub stale: Vec<Stale>,
    /// Missing partitions whose external input is not ready (a run leaves
    /// them WAITING, without a marker, until it is): (task, partition, what).
    pub waiting: Vec<(String, String, String)>,
    /// Missing partitions whose input's sensor fails (not "not yet"):
    /// (task, partition, what), paged on as SENSOR.
    pub sensors: Vec<(String, String, String)>,
}

impl Overview {
    /// Reads the commit logs, the instance marks and the external inputs.
    pub fn gather(
        manifest: &Manifest,
        warehouse: &Warehouse,
    ) -> Result<Overview, crate::store::StoreError> {
        let planned_now = crate::clock::now();
        let now = jiff::Timestamp::now().as_second();
        let mut published = Vec::new();
        let mut missing = Vec::new();
        let mut unreadable = Vec::new();
        let mut waiting = Vec::new();
        let mut sensors = Vec::new();
        let mut views = BTreeMap::new();
        for task in manifest.tasks.values() {
            let dataset = &task.output.dataset;
            let mut seen = HashSet::new();
            for partition in warehouse.partitions(dataset)? {
                let store = warehouse.partition(dataset, &partition);
                match latest_of(task, &partition, &store, &mut views) {
                    Ok(Some(record)) => {
                        seen.insert(partition);
                        published.push((task.name.clone(), record));
                    }
                    Ok(None) => {}
                    Err(why) => {
                        seen.insert(partition.clone());
                        unreadable.push((dataset.clone(), partition, why));
                    }
                }
            }
            let unpublished: Vec<String> = task
                .dims
                .keys(planned_now)
                .into_iter()
                .filter(|k| !seen.contains(k))
                .collect();
            // One listing of the answers engines recorded, read only
            // where there is one; an unreadable listing reads each.
            let answered = (!unpublished.is_empty()
                && crate::exec::sensed::has_command_sensor(manifest, task))
            .then(|| crate::store::sensed::listed(warehouse, &task.name).ok())
            .flatten();
            let unchecked_from = unpublished.len().saturating_sub(UNCHECKED_SHOWN);
            for (i, key) in unpublished.into_iter().enumerate() {
                let late_since = crate::exec::readiness::late_since(task, &key, now);
                // The run's own test, without starting a sensor command:
                // files now, a command sensor's last recorded answer; older
                // partitions nobody asked are only missing.
                let known =
                    crate::exec::sensed::known(manifest, warehouse, task, &key, answered.as_ref());
                let shown = match known {
                    Known::Unchecked(_) if i < unchecked_from => Known::Ready,
                    known => known,
                };
                match shown {
                    Known::Ready => {}
                    Known::NotYet(n) | Known::Unchecked(n) => {
                        waiting.push((task.name.clone(), key.clone(), n.why));
                    }
                    Known::Failed(f) => sensors.push((task.name.clone(), key.clone(), f.why)),
                }
                missing.push(Missing {
                    task: task.name.clone(),
                    dataset: dataset.clone(),
                    partition: key,
                    late_since,
                });
            }
        }
        let mut staleness = crate::plan::stale::Staleness::default();
        let stale = stale(&mut staleness, manifest, warehouse, &published);
        let mut marks = Vec::new();
        let mut released = Vec::new();
        let mut abandoned = Vec::new();
        for m in state::all(warehouse)? {
            // The run's own test: a quarantine whose inputs or code changed
            // would be rerun, so paging on it would send a person for nothing.
            let changed = staleness.quarantine_released(manifest, warehouse, &m);
            // An operator's decision, not a wait: nobody is paged for it.
            if matches!(m.mark, Mark::Abandoned | Mark::Accepted) {
                abandoned.push(m);
            } else if !changed.is_empty() {
                released.push((m, changed.join("; ")));
            } else {
                marks.push(m);
            }
        }
        Ok(Overview {
            published,
            missing,
            marks,
            released,
            abandoned,
            unreadable,
            stale,
            waiting,
            sensors,
        })
    }

    /// LATE, HELD and QUARANTINED instances.
    ///
    /// STALE publications are shown but not paged on: a repair upstream is
    /// often deliberate, and rerunning its downstream is a decision.
    pub fn attention(&self) -> Vec<Attention> {
        let mut out: Vec<Attention> = self
            .missing
            .iter()
            .filter_map(|m| {
                m.late_since.as_ref().map(|deadline| Attention {
                    state: "LATE",
                    task: m.task.clone(),
                    partition: m.partition.clone(),
                    detail: format!("not published by its SLA deadline {deadline}"),
                })
            })
            .collect();
        for (task, partition, detail) in &self.sensors {
            out.push(Attention {
                state: "SENSOR",
                task: task.clone(),
                partition: partition.clone(),
                detail: detail.clone(),
            });
        }
        for m in &self.marks {
            out.push(Attention {
                state: m.mark.as_str(),
                task: m.task.clone(),
                partition: m.partition.clone(),
                detail: m.reason.clone(),
            });
        }
        out
    }
}

/// The latest record of `partition`, or why it cannot be told: its log
/// cannot be read, or ([`records_missing`]) its Delta table shows more.
fn latest_of(
    task: &crate::manifest::Task,
    partition: &str,
    store: &crate::store::PartitionStore,
    views: &mut BTreeMap<String, Result<crate::store::delta::TableView, String>>,
) -> Result<Option<CommitRecord>, String> {
    if let Some(why) = records_missing(task, partition, store, views) {
        return Err(why);
    }
    store.latest().map_err(|e| crate::exec::chain(&e))
}

/// When `task`'s output is a Delta table whose log shows more of
/// `partition` than weir's records hold (another engine's VACUUM deleted
/// them): what is missing, so status says so (exit 5) rather than that
/// nothing was published. One log replay per dataset, kept in `views`.
fn records_missing(
    task: &crate::manifest::Task,
    partition: &str,
    store: &crate::store::PartitionStore,
    views: &mut BTreeMap<String, Result<crate::store::delta::TableView, String>>,
) -> Option<String> {
    crate::store::delta::columns_of(task, partition)?;
    let view = views.entry(task.output.dataset.clone()).or_insert_with(|| {
        crate::store::delta::TableView::read(store).map_err(|e| crate::exec::chain(&e))
    });
    match view {
        Ok(view) => view
            .missing_records(store)
            .unwrap_or_else(|e| Some(crate::exec::chain(&e))),
        // A log that cannot be read proves nothing missing; `status
        // --check` reports it (StatusError::DeltaLog).
        Err(_) => None,
    }
}

/// Publications that are STALE: an upstream partition they pinned has
/// moved on, or their task's code changed.
fn stale(
    staleness: &mut crate::plan::stale::Staleness,
    manifest: &Manifest,
    warehouse: &Warehouse,
    published: &[(String, CommitRecord)],
) -> Vec<Stale> {
    published
        .iter()
        .filter_map(|(task, record)| {
            let t = manifest.tasks.get(task)?;
            let changed = staleness.of(manifest, warehouse, t, record);
            (!changed.is_empty()).then(|| Stale {
                task: task.clone(),
                partition: record.partition.clone(),
                detail: changed.join("; "),
            })
        })
        .collect()
}
