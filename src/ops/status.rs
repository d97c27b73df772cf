//! What `weir status` knows: visible generations, expected partitions
//! without one, operator marks, staleness and drift, computed once here so
//! that `weir status --json` and the console's `/api/status` are the same
//! document by construction.

pub mod summary;

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Value};

use crate::exec::sensed::Known;
use crate::manifest::Manifest;
use crate::store::certs as certify;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::{CommitRecord, Depth, Drift, Warehouse};

/// How many unpublished partitions per task (the newest) whose command
/// sensor no engine asked yet are listed as WAITING "not checked yet"; older
/// ones are only missing (serve never asks a period it skipped).
const UNCHECKED_SHOWN: usize = 10;

/// Why the status could not be gathered.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The warehouse (commit logs, marks, event logs) could not be read.
    #[error("{0}")]
    Engine(String),
    /// A dataset's Delta log could not be read (`--check`).
    #[error("cannot read the Delta log of `{dataset}`")]
    DeltaLog {
        /// The dataset.
        dataset: String,
        /// Why.
        #[source]
        source: crate::store::delta::TableError,
    },
}

/// The document `weir status --json` prints and the console's
/// `/api/status` serves: the status and its per-task summary.
pub fn document(manifest: &Manifest, warehouse: &Warehouse, status: &Status) -> Value {
    let mut doc = status.to_json(manifest, warehouse);
    doc["summary"] = summary::json(manifest, &status.overview);
    // Only while a backfill is in flight: documents without one stay as they were.
    if !status.backfills.is_empty() {
        doc["backfills"] = serde_json::to_value(&status.backfills).unwrap_or_default();
    }
    doc
}

/// The whole status of a pipeline's warehouse.
pub struct Status {
    /// What is published, expected, marked, stale, waiting.
    pub overview: Overview,
    /// What needs a person (LATE, HELD, QUARANTINED; TABLE_BEHIND under `check`).
    pub attention: Vec<Attention>,
    /// What needs no one but is worth saying, under `check`: TABLE_AGREES,
    /// a Delta table showing a visible generation's rows in another
    /// engine's files (a compaction).
    pub notes: Vec<Attention>,
    /// Visible files that are not what their generation committed.
    pub drifts: Vec<Drift>,
    /// Under `check`: generations whose digest, rows or token are not their record's.
    pub unproven: Vec<crate::ops::verify::Unproven>,
    /// Notifications the outbox still holds, per target (paged on as NOTIFY).
    pub undelivered: Vec<crate::notify::Undelivered>,
    /// What `weir serve` has recorded: next due partitions, MISSED periods.
    pub serving: crate::serve::status::ServeStatus,
    /// Backfills running, paused or cancelled, with progress and ETA.
    pub backfills: Vec<super::backfills::BackfillState>,
}

impl Status {
    /// Gathers the status; `check` is `weir status --check` (every byte
    /// hashed, Delta tables compared, event logs against commit logs).
    pub fn gather(
        manifest: &Manifest,
        warehouse: &Warehouse,
        check: bool,
    ) -> Result<Status, StatusError> {
        let overview = Overview::gather(manifest, warehouse)
            .map_err(|e| StatusError::Engine(crate::exec::chain(&e)))?;
        Status::of(manifest, warehouse, overview, check)
    }

    /// The status of what `overview` holds (gathered, perhaps narrowed to
    /// some tasks, states or partitions).
    pub fn of(
        manifest: &Manifest,
        warehouse: &Warehouse,
        mut overview: Overview,
        check: bool,
    ) -> Result<Status, StatusError> {
        let mut attention = overview.attention();
        let undelivered = undelivered(manifest, warehouse, &mut attention);
        let mut notes = Vec::new();
        if check {
            let (behind, agree) = tables_behind(manifest, warehouse, &overview.published)?;
            attention.extend(behind);
            notes = agree;
        }
        // Every visible file is what its generation committed: sizes always;
        // under check every byte's hash, the files' digest and rows, the
        // record's token, and every PUBLISHED event's record.
        let (drifts, unproven) = if check {
            overview
                .unreadable
                .extend(unrecorded(manifest, warehouse, &overview).map_err(StatusError::Engine)?);
            proven(manifest, warehouse, &overview.published)
        } else {
            (
                drifted(warehouse, &overview.published, Depth::Stat),
                Vec::new(),
            )
        };
        let serving = crate::serve::status::gather(manifest, warehouse, crate::clock::now())
            .map_err(|e| StatusError::Engine(crate::exec::chain(&e)))?;
        let backfills = super::backfills::gather(
            manifest,
            warehouse,
            // A run's elapsed time is the real one its records hold.
            jiff::Timestamp::now().as_millisecond(),
        )
        .map_err(|e| StatusError::Engine(crate::exec::chain(&e)))?;
        Ok(Status {
            overview,
            attention,
            notes,
            drifts,
            unproven,
            undelivered,
            serving,
            backfills,
        })
    }

    /// Partitions per (dataset, code_version).
    pub fn versions(&self) -> BTreeMap<(&str, &str), usize> {
        let mut versions: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (_, r) in &self.overview.published {
            *versions
                .entry((r.dataset.as_str(), r.code_version.as_str()))
                .or_default() += 1;
        }
        versions
    }

    /// The document `weir status --json` prints (format_version 1).
    pub fn to_json(&self, manifest: &Manifest, warehouse: &Warehouse) -> Value {
        let overview = &self.overview;
        let partitions: Vec<_> = overview
        .published
        .iter()
        .map(|(task, r)| {
            let store = warehouse.partition(&r.dataset, &r.partition);
            json!({
                "dataset": r.dataset,
                "partition": r.partition,
                "task": task,
                "generation": r.generation.get(),
                "token": r.token.get(),
                "run_id": r.run_id,
                "attempt": r.attempt,
                "rows": r.rows,
                "digest": r.digest,
                "input_snapshot": r.input_snapshot,
                "input_snapshot_digest": r.input_snapshot_digest,
                "code_version": r.code_version,
                "certified": certify::is_certified(warehouse, &r.dataset, &r.partition, r.generation.get()),
                "published_at": r.published_at,
                "files": (0..r.files.len()).map(|i| store.file_location(r, i)).collect::<Vec<_>>(),
            })
        })
        .collect();
        json!({
            "format_version": 1,
            "pipeline": manifest.pipeline.name,
            "partitions": partitions,
            "code_versions": self.versions()
                .iter()
                .map(|((d, v), n)| json!({"dataset": d, "code_version": v, "partitions": n}))
                .collect::<Vec<_>>(),
            "missing": overview
                .missing
                .iter()
                .map(|m| json!({"task": m.task, "dataset": m.dataset, "partition": m.partition, "late_since": m.late_since}))
                .collect::<Vec<_>>(),
            "stale": overview
                .stale
                .iter()
                .map(|st| json!({"task": st.task, "partition": st.partition, "detail": st.detail}))
                .collect::<Vec<_>>(),
            "waiting": overview
                .waiting
                .iter()
                .map(|(task, partition, detail)| json!({"task": task, "partition": partition, "detail": detail}))
                .collect::<Vec<_>>(),
            "released": overview
                .released
                .iter()
                .map(|(m, changed)| json!({"task": m.task, "partition": m.partition, "detail": m.reason, "changed": changed}))
                .collect::<Vec<_>>(),
            "abandoned": overview
                .abandoned
                .iter()
                .map(|m| json!({"task": m.task, "partition": m.partition, "detail": m.reason, "note": m.note}))
                .collect::<Vec<_>>(),
            "attention": self.attention
                .iter()
                .map(|a| json!({"state": a.state, "task": a.task, "partition": a.partition, "detail": a.detail}))
                .collect::<Vec<_>>(),
            "notes": self.notes
                .iter()
                .map(|a| json!({"state": a.state, "task": a.task, "partition": a.partition, "detail": a.detail}))
                .collect::<Vec<_>>(),
            "drifted": self.drifts
                .iter()
                .map(|d| json!({"dataset": d.dataset, "partition": d.partition, "generation": d.generation, "file": d.path, "detail": d.to_string()}))
                .collect::<Vec<_>>(),
            "unreadable": overview
                .unreadable
                .iter()
                .map(|(d, p, e)| json!({"dataset": d, "partition": p, "error": e}))
                .collect::<Vec<_>>(),
            "unproven": self.unproven
                .iter()
                .map(|u| json!({"detail": crate::exec::chain(u)}))
                .collect::<Vec<_>>(),
            "lineage": crate::lineage::last_note(warehouse.root()),
            "notifications_undelivered": self.undelivered,
            "serve": crate::serve::status::json(&self.serving),
        })
    }
}

/// NOTIFY: notifications the outbox still holds, one line per target (paged
/// on: someone is not hearing what they asked to hear).
fn undelivered(
    manifest: &Manifest,
    warehouse: &Warehouse,
    attention: &mut Vec<Attention>,
) -> Vec<crate::notify::Undelivered> {
    let outbox = crate::notify::Outbox::new(std::sync::Arc::clone(warehouse.backend()));
    let undelivered = outbox.undelivered().unwrap_or_else(|e| {
        tracing::warn!(
            "cannot read the notification outbox: {}",
            crate::store::chain(&e)
        );
        Vec::new()
    });
    for u in &undelivered {
        let them = if u.count == 1 { "it" } else { "them" };
        attention.push(Attention {
            state: "NOTIFY",
            task: u.target.clone(),
            partition: String::new(),
            detail: format!(
                "{} {} undelivered to {} since {}; `weir notify {} --flush` delivers {them}",
                u.count,
                if u.count == 1 {
                    "notification"
                } else {
                    "notifications"
                },
                u.target,
                u.since,
                crate::partition::shell_word(&manifest.path.display().to_string()),
            ),
        });
    }
    undelivered
}

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

/// TABLE_BEHIND: visible generations their dataset's Delta table does
/// not show (a Delta commit that failed or was lost after weir's; `weir
/// tables sync` repairs it), one log replay per dataset; and, apart,
/// TABLE_AGREES notes: those it shows in other files with the same rows
/// (another engine's compaction, [`crate::ops::table_rows`]).
fn tables_behind(
    manifest: &Manifest,
    warehouse: &Warehouse,
    published: &[(String, CommitRecord)],
) -> Result<(Vec<Attention>, Vec<Attention>), StatusError> {
    use crate::ops::table_rows::{compare, Shown};
    use crate::store::delta::{columns_of, TableView};
    let mut views: BTreeMap<String, TableView> = BTreeMap::new();
    let (mut behind, mut agree) = (Vec::new(), Vec::new());
    for (task_name, record) in published {
        let Some(task) = manifest.tasks.get(task_name) else {
            continue;
        };
        let Some((columns, values)) = columns_of(task, &record.partition) else {
            continue;
        };
        let store = warehouse.partition(&record.dataset, &record.partition);
        if !views.contains_key(&record.dataset) {
            let view = TableView::read(&store).map_err(|source| StatusError::DeltaLog {
                dataset: record.dataset.clone(),
                source,
            })?;
            views.insert(record.dataset.clone(), view);
        }
        let view = &views[&record.dataset];
        let (state, detail, out) = match compare(
            &store,
            view,
            task.output.format,
            (&columns, &values),
            record,
        ) {
            None => continue,
            Some(Shown::SameRows(note)) => ("TABLE_AGREES", note, &mut agree),
            Some(Shown::Drift(detail)) => (
                "TABLE_BEHIND",
                format!("{detail}; `weir tables sync` repairs it"),
                &mut behind,
            ),
        };
        out.push(Attention {
            state,
            task: task_name.clone(),
            partition: record.partition.clone(),
            detail,
        });
    }
    Ok((behind, agree))
}

/// The first drifted or vanished file of each visible generation.
fn drifted(
    warehouse: &Warehouse,
    published: &[(String, CommitRecord)],
    depth: Depth,
) -> Vec<Drift> {
    use rayon::prelude::*;
    published
        .par_iter()
        .filter_map(|(_, r)| {
            warehouse
                .partition(&r.dataset, &r.partition)
                .check_files(r, depth)
                .err()
                .map(|d| *d)
        })
        .collect()
}

/// `status --check` of each visible generation
/// ([`crate::ops::verify::check_visible`]): the drifted files, and the
/// generations whose digest, rows or token are not what their record says.
fn proven(
    manifest: &Manifest,
    warehouse: &Warehouse,
    published: &[(String, CommitRecord)],
) -> (Vec<Drift>, Vec<crate::ops::verify::Unproven>) {
    use crate::ops::verify::Unproven;
    use rayon::prelude::*;
    let found: Vec<Unproven> = published
        .par_iter()
        .filter_map(|(task, r)| {
            let format = manifest.tasks.get(task)?.output.format;
            crate::ops::verify::check_visible(
                &warehouse.partition(&r.dataset, &r.partition),
                r,
                format,
            )
            .err()
            .map(|u| *u)
        })
        .collect();
    let mut drifts = Vec::new();
    let mut unproven = Vec::new();
    for u in found {
        match u {
            Unproven::Drift(d) => drifts.push(*d),
            other => unproven.push(other),
        }
    }
    (drifts, unproven)
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

/// Publications the event logs prove and the commit logs lack: a
/// PUBLISHED event whose generation has no record, or a record of another
/// token (the generation number was used again), as (dataset, partition,
/// what is wrong). A partition already unreadable is not checked again.
/// This witness survives what the log's own markers do not: the record and
/// its marker both gone, the whole `log/` restored from an older backup.
fn unrecorded(
    manifest: &Manifest,
    warehouse: &Warehouse,
    overview: &Overview,
) -> Result<Vec<(String, String, String)>, String> {
    let (events, _bad) = crate::events::read_all_in(&warehouse.events())
        .map_err(|e| format!("cannot read the event logs: {}", crate::exec::chain(&e)))?;
    let mut out: Vec<(String, String, String)> = Vec::new();
    let mut checked = HashSet::new();
    for e in events {
        if e.state != crate::events::State::Published {
            continue;
        }
        let (Some(task), Some(partition), Some(token)) = (&e.task, &e.partition, e.token) else {
            continue;
        };
        let Some(generation) = e.data.get("generation").and_then(serde_json::Value::as_u64) else {
            continue;
        };
        let Some(spec) = manifest.tasks.get(task) else {
            continue;
        };
        let dataset = &spec.output.dataset;
        let known_bad = |out: &[(String, String, String)]| {
            overview
                .unreadable
                .iter()
                .chain(out)
                .any(|(d, p, _)| d == dataset && p == partition)
        };
        if known_bad(&out) || !checked.insert((dataset.clone(), partition.clone(), generation)) {
            continue;
        }
        let store = warehouse.partition(dataset, partition);
        let g = crate::store::Generation::from_raw(generation);
        let wrong = match store.record(g) {
            Ok(Some(rec)) if rec.token.get() == token => continue,
            Ok(Some(rec)) => format!(
                "generation {generation} holds token {}, but run {} published token {token} as generation {generation}: the number was used twice",
                rec.token, e.run_id
            ),
            Ok(None) => format!(
                "run {} published generation {generation} (token {token}), and its commit record {} is missing",
                e.run_id,
                store.record_location(g).display()
            ),
            Err(err) => crate::exec::chain(&err),
        };
        out.push((dataset.clone(), partition.clone(), wrong));
    }
    Ok(out)
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
