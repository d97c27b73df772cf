//! What `weir status` knows: visible generations, expected partitions
//! without one, operator marks, staleness and drift, computed once here so
//! that `weir status --json` and the console's `/api/status` are the same
//! document by construction.

mod overview;
pub mod summary;

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Value};

pub use overview::{Attention, Missing, Overview, Stale};

use crate::manifest::Manifest;
use crate::store::certs as certify;
use crate::store::{CommitRecord, Depth, Drift, Warehouse};

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
