//! `weir status` and `weir show`: what readers see, and what needs attention.

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use super::args::{ShowArgs, StatusArgs};
use super::error::{doing, CliError};
use super::exit;
use super::run::plural;
use crate::audit;
use crate::manifest::{Manifest, Task};
use crate::partition::shell_word;
use crate::store::certs as certify;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::{CommitRecord, Depth, Drift, Warehouse};

/// An expected partition with no publication.
struct Missing {
    task: String,
    dataset: String,
    partition: String,
    /// The SLA deadline, when it has passed.
    late_since: Option<String>,
}

/// A publication that pinned an upstream generation which is no longer
/// the current one (the upstream was repaired or rolled back since).
struct Stale {
    task: String,
    partition: String,
    /// Which upstream partitions changed, in words.
    detail: String,
}

/// Something `status --check` pages on.
struct Attention {
    state: &'static str,
    task: String,
    partition: String,
    detail: String,
}

/// What `weir status` knows about the pipeline.
struct Overview {
    /// (task, current record) per published partition.
    published: Vec<(String, CommitRecord)>,
    /// Expected partitions (every key of each task's scheme up to the latest
    /// complete one) without a publication: a successful run is no proof
    /// that everything committed.
    missing: Vec<Missing>,
    /// Operator states that outlive runs, except the two below.
    marks: Vec<InstanceMark>,
    /// QUARANTINED markers the next run would release (its inputs or code
    /// changed since), with what changed: shown, never paged on.
    released: Vec<(InstanceMark, String)>,
    /// ABANDONED instances: an operator's decision, shown, never paged on.
    abandoned: Vec<InstanceMark>,
    /// Partitions whose commit log cannot be read (a corrupt record, an
    /// I/O error): named, while the others are still listed.
    unreadable: Vec<(String, String, String)>,
    /// Publications whose pinned upstream generations are not current.
    stale: Vec<Stale>,
    /// Missing partitions whose external input is not there (a run holds
    /// them, without a marker, until it is): (task, partition, what).
    waiting: Vec<(String, String, String)>,
}

impl Overview {
    fn gather(manifest: &Manifest, warehouse: &Warehouse) -> Result<Overview, String> {
        let planned_now = crate::clock::now();
        let now = jiff::Timestamp::now().as_second();
        let mut published = Vec::new();
        let mut missing = Vec::new();
        let mut unreadable = Vec::new();
        let mut waiting = Vec::new();
        for task in manifest.tasks.values() {
            let dataset = &task.output.dataset;
            let mut seen = HashSet::new();
            for partition in warehouse
                .partitions(dataset)
                .map_err(|e| crate::exec::chain(&e))?
            {
                let store = warehouse.partition(dataset, &partition);
                match store.latest() {
                    Ok(Some(record)) => {
                        seen.insert(partition);
                        published.push((task.name.clone(), record));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        seen.insert(partition.clone());
                        unreadable.push((dataset.clone(), partition, crate::exec::chain(&e)));
                    }
                }
            }
            for key in task.dims.keys(planned_now) {
                if seen.contains(&key) {
                    continue;
                }
                let late_since = task.sla.and_then(|sla| {
                    let deadline = task
                        .dims
                        .interval_end(&key)?
                        .saturating_add(i64::try_from(sla.as_secs()).unwrap_or(i64::MAX));
                    (now > deadline).then(|| {
                        jiff::Timestamp::from_second(deadline)
                            .map_or_else(|_| deadline.to_string(), |t| t.to_string())
                    })
                });
                if let Some(absent) = crate::exec::snapshot::missing_external(manifest, task, &key)
                {
                    waiting.push((task.name.clone(), key.clone(), absent.to_string()));
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
        for m in state::all(warehouse).map_err(|e| crate::exec::chain(&e))? {
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
        })
    }

    /// LATE, HELD and QUARANTINED instances.
    ///
    /// STALE publications are shown but not paged on: a repair upstream is
    /// often deliberate, and rerunning its downstream is a decision.
    fn attention(&self) -> Vec<Attention> {
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

pub(crate) fn status(args: &StatusArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let mut overview = Overview::gather(&manifest, &warehouse).map_err(CliError::engine)?;
    let mut attention = overview.attention();
    if args.check {
        attention.extend(tables_behind(&manifest, &warehouse, &overview.published)?);
    }
    // Every visible file is what its generation committed: sizes always;
    // under --check every byte's hash, the files' digest and rows, the
    // record's token, and every PUBLISHED event's record.
    let (drifts, unproven) = if args.check {
        overview
            .unreadable
            .extend(unrecorded(&manifest, &warehouse, &overview).map_err(CliError::engine)?);
        proven(&manifest, &warehouse, &overview.published)
    } else {
        (
            drifted(&warehouse, &overview.published, Depth::Stat),
            Vec::new(),
        )
    };
    let mut versions: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (_, r) in &overview.published {
        *versions
            .entry((r.dataset.as_str(), r.code_version.as_str()))
            .or_default() += 1;
    }
    if args.json {
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
                    "certified": certify::is_certified(&warehouse, &r.dataset, &r.partition, r.generation.get()),
                    "published_at": r.published_at,
                    "files": (0..r.files.len()).map(|i| store.file_location(r, i)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = json!({
            "format_version": 1,
            "pipeline": manifest.pipeline.name,
            "partitions": partitions,
            "code_versions": versions
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
            "attention": attention
                .iter()
                .map(|a| json!({"state": a.state, "task": a.task, "partition": a.partition, "detail": a.detail}))
                .collect::<Vec<_>>(),
            "drifted": drifts
                .iter()
                .map(|d| json!({"dataset": d.dataset, "partition": d.partition, "generation": d.generation, "file": d.path, "detail": d.to_string()}))
                .collect::<Vec<_>>(),
            "unreadable": overview
                .unreadable
                .iter()
                .map(|(d, p, e)| json!({"dataset": d, "partition": p, "error": e}))
                .collect::<Vec<_>>(),
            "unproven": unproven
                .iter()
                .map(|u| json!({"detail": crate::exec::chain(u)}))
                .collect::<Vec<_>>(),
            "lineage": crate::lineage::last_note(warehouse.root()),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("status always serializes")
        );
    } else {
        print_status(&args.manifest, &warehouse, &overview, &versions, &attention);
    }
    let mut failed = false;
    if !overview.unreadable.is_empty() {
        for (dataset, partition, error) in &overview.unreadable {
            eprintln!("error: {dataset} {partition}: cannot read its commit log: {error}");
        }
        failed = true;
    }
    if !drifts.is_empty() {
        for d in &drifts {
            eprintln!("error: {d}");
        }
        eprintln!(
            "{} published {} drifted from {} commit records",
            drifts.len(),
            plural(drifts.len(), "file", "files"),
            plural(drifts.len(), "its", "their")
        );
        failed = true;
    }
    if !unproven.is_empty() {
        for u in &unproven {
            eprintln!("error: {}", crate::exec::chain(u));
        }
        failed = true;
    }
    if failed {
        return Ok(exit::ENGINE);
    }
    if args.check && !attention.is_empty() {
        eprintln!(
            "check failed: {} {} attention",
            attention.len(),
            plural(attention.len(), "instance needs", "instances need")
        );
        return Ok(exit::ATTENTION);
    }
    Ok(exit::OK)
}

/// TABLE_BEHIND: visible generations their dataset's Delta table does
/// not show exactly (a Delta commit that failed or was lost after weir's;
/// `weir tables sync` repairs it), one log replay per dataset.
fn tables_behind(
    manifest: &Manifest,
    warehouse: &Warehouse,
    published: &[(String, CommitRecord)],
) -> Result<Vec<Attention>, CliError> {
    use crate::store::delta::{columns_of, TableView};
    let mut views: BTreeMap<String, TableView> = BTreeMap::new();
    let mut out = Vec::new();
    for (task_name, record) in published {
        let Some(task) = manifest.tasks.get(task_name) else {
            continue;
        };
        let Some((columns, values)) = columns_of(task, &record.partition) else {
            continue;
        };
        if !views.contains_key(&record.dataset) {
            let store = warehouse.partition(&record.dataset, &record.partition);
            let view = TableView::read(&store).map_err(doing(format!(
                "cannot read the Delta log of `{}`",
                record.dataset
            )))?;
            views.insert(record.dataset.clone(), view);
        }
        if let Some(detail) = views[&record.dataset].disagreement(&columns, &values, record) {
            out.push(Attention {
                state: "TABLE_BEHIND",
                task: task_name.clone(),
                partition: record.partition.clone(),
                detail: format!("{detail}; `weir tables sync` repairs it"),
            });
        }
    }
    Ok(out)
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

/// WAITING instances of one task that status names one by one.
const MAX_WAITING_LISTED: usize = 5;

fn print_status(
    manifest: &std::path::Path,
    warehouse: &Warehouse,
    overview: &Overview,
    versions: &BTreeMap<(&str, &str), usize>,
    attention: &[Attention],
) {
    if overview.published.is_empty() {
        // An unreadable commit log is no proof that nothing was published:
        // its error (stderr) says so instead.
        if overview.unreadable.is_empty() {
            println!("nothing published yet in {}", warehouse.root().display());
        }
    } else {
        // Aligned: each column as wide as its widest value; timestamps at
        // one width; digests abbreviated as everywhere else.
        let rows: Vec<Vec<String>> = overview
            .published
            .iter()
            .map(|(_, r)| {
                let uncertified =
                    !certify::is_certified(warehouse, &r.dataset, &r.partition, r.generation.get());
                vec![
                    r.dataset.clone(),
                    r.partition.clone(),
                    r.generation.get().to_string(),
                    r.token.get().to_string(),
                    crate::plan::render::thousands(r.rows),
                    r.code_version.clone(),
                    super::fixed_ts(&r.published_at),
                    format!(
                        "{}{}",
                        super::short_digest(&r.digest),
                        if uncertified { "  UNCERTIFIED" } else { "" }
                    ),
                ]
            })
            .collect();
        let header = [
            "dataset",
            "partition",
            "gen",
            "token",
            "rows",
            "code_version",
            "published_at",
            "digest",
        ];
        for line in super::aligned(&header, &rows, &[2, 3, 4]) {
            println!("{line}");
        }
        println!();
        for ((dataset, version), n) in versions {
            println!(
                "{dataset}: {n} partition{} built by code_version {version}",
                if *n == 1 { "" } else { "s" }
            );
        }
    }
    let mut missing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in &overview.missing {
        missing
            .entry(m.dataset.as_str())
            .or_default()
            .push(m.partition.as_str());
    }
    for (dataset, keys) in missing {
        let shown: Vec<&str> = keys.iter().take(10).copied().collect();
        println!(
            "missing: {dataset}: {} expected partition{} without a publication: {}{}",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if keys.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    for a in attention {
        println!(
            "{:<11} {} {}: {}",
            a.state,
            a.task,
            a.partition,
            crate::ops::printable(&a.detail)
        );
    }
    // The latest few per task by name (what a run without `--partition`
    // holds), then a count: a feed that never arrived is one story, not a
    // page of lines.
    let mut per_task: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for (task, partition, detail) in &overview.waiting {
        per_task
            .entry(task.as_str())
            .or_default()
            .push((partition.as_str(), detail.as_str()));
    }
    for (task, waiting) in per_task {
        let earlier = waiting.len().saturating_sub(MAX_WAITING_LISTED);
        if earlier > 0 {
            println!(
                "{:<11} {task}: {earlier} earlier {} without {} external input too (`weir status --json` lists them)",
                "WAITING",
                plural(earlier, "partition", "partitions"),
                plural(earlier, "its", "their")
            );
        }
        for (partition, detail) in &waiting[earlier..] {
            println!(
                "{:<11} {task} {partition}: {detail}; put it in place, then `weir run {} --task {task} --partition {}`",
                "WAITING",
                shell_word(&manifest.display().to_string()),
                shell_word(partition)
            );
        }
    }
    for (m, changed) in &overview.released {
        println!(
            "{:<11} {} {}: was quarantined ({}), but {changed}: will rerun on the next run (`weir run {} --task {} --partition {}`)",
            "RELEASED",
            m.task,
            m.partition,
            m.reason,
            shell_word(&manifest.display().to_string()),
            m.task,
            shell_word(&m.partition)
        );
    }
    for m in &overview.abandoned {
        println!(
            "{:<11} {} {}: {} (not run until `weir retry {} {} --partition {} --note …`)",
            m.mark.as_str(),
            m.task,
            m.partition,
            m.reason.strip_prefix("abandoned ").unwrap_or(&m.reason),
            shell_word(&manifest.display().to_string()),
            m.task,
            shell_word(&m.partition)
        );
    }
    for st in &overview.stale {
        // A held instance (a rollback) is not rebuilt by a run until an
        // operator releases it.
        let held = overview
            .marks
            .iter()
            .any(|m| m.mark == Mark::Held && m.task == st.task && m.partition == st.partition);
        let hint = if held {
            format!(
                "held: `weir retry {} {} --partition {} --note …` releases it and rebuilds it",
                shell_word(&manifest.display().to_string()),
                st.task,
                shell_word(&st.partition)
            )
        } else {
            format!(
                "rerun it with `weir run {} --partition {}`",
                shell_word(&manifest.display().to_string()),
                shell_word(&st.partition)
            )
        };
        println!(
            "{:<11} {} {}: {} ({hint})",
            "STALE", st.task, st.partition, st.detail,
        );
    }
    // Lineage is a side channel: noted here, never a reason to page.
    if let Some(note) = crate::lineage::last_note(warehouse.root()) {
        if !note.delivery.complete() {
            println!(
                "LINEAGE     run {}: {} OpenLineage {} not delivered to {}: {}",
                note.run_id.as_deref().unwrap_or("?"),
                note.delivery.failed + note.delivery.dropped,
                if note.delivery.failed + note.delivery.dropped == 1 {
                    "event"
                } else {
                    "events"
                },
                note.sink,
                note.delivery.last_error.as_deref().unwrap_or("queue full")
            );
        }
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

/// The task that publishes `dataset`, if `partition` is in its scheme: what
/// `show` and `history` need before they read a partition.
pub(crate) fn producer_of<'m>(
    manifest: &'m Manifest,
    dataset: &str,
    partition: &str,
) -> Result<&'m Task, CliError> {
    let task = publisher_of(manifest, dataset)?;
    super::ops::check_partition(manifest, &task.name, partition)?;
    Ok(task)
}

/// The task that publishes `dataset`, or a usage error naming the datasets
/// there are (or the dataset a task name publishes).
pub(crate) fn publisher_of<'m>(
    manifest: &'m Manifest,
    dataset: &str,
) -> Result<&'m Task, CliError> {
    let Some(task) = manifest.producer(dataset) else {
        let help = match manifest.tasks.get(dataset) {
            Some(task) => format!(
                "`{dataset}` is a task; it publishes dataset `{}`",
                task.output.dataset
            ),
            None => format!(
                "published datasets: {}",
                manifest
                    .tasks
                    .values()
                    .map(|t| format!("`{}`", t.output.dataset))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Err(CliError::Usage(format!(
            "no task of `{}` publishes dataset `{dataset}`\n  help: {help}",
            manifest.pipeline.name
        )));
    };
    Ok(task)
}

/// A generation the partition never had: a bad argument (exit 2) in every
/// command that takes one (`show`, `certify`, `uncertify`; `rollback` says
/// it in its own diagnostic).
pub(crate) fn no_generation(
    dataset: &str,
    partition: &str,
    generation: u64,
    last: Option<u64>,
) -> CliError {
    CliError::Usage(format!(
        "`{dataset}` {partition} has no generation {generation} (it has {})\n  help: `weir history` lists them",
        last.map_or_else(|| "none".to_string(), |l| format!("1 to {l}"))
    ))
}

pub(crate) fn show(args: &ShowArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    let task = producer_of(&manifest, &args.dataset, &args.partition)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    let store = warehouse.partition(&args.dataset, &args.partition);
    let record = match args.generation {
        // An earlier generation, as `weir history` lists them.
        Some(g) => {
            let history = store.history().map_err(CliError::engine)?;
            let found = history.iter().find(|r| r.generation.get() == g).cloned();
            found.ok_or_else(|| {
                no_generation(
                    &args.dataset,
                    &args.partition,
                    g,
                    history.last().map(|r| r.generation.get()),
                )
            })?
        }
        None => store.latest().map_err(CliError::engine)?.ok_or_else(|| {
            CliError::NothingPublished(format!(
                "`{}` has no published generation for partition {}",
                args.dataset, args.partition
            ))
        })?,
    };
    // What is shown is what was checked (from an object store, one download).
    let visible = store
        .local_files(&record)
        .map_err(doing("cannot read the published files"))?;
    store
        .check_paths(&record, &visible, Depth::Hash)
        .map_err(CliError::Drift)?;
    let (columns, rows) = audit::read_raw_rows(&visible, task.output.format, args.limit)
        .map_err(doing("cannot read the published files"))?;
    // The reader sorts columns (the canonical digest's order); show them in
    // the file's own order, read from the first file's header.
    let order = file_order(visible.first(), task.output.format, &columns);
    let columns: Vec<String> = order.iter().map(|&i| columns[i].clone()).collect();
    let rows = rows
        .into_iter()
        .map(|r| order.iter().map(|&i| r[i].clone()).collect::<Vec<_>>());
    if args.json {
        // A value that is not UTF-8 is marked, never silently replaced:
        // `{"invalid_utf8": "<its bytes in hex>"}` instead of a string.
        let rows: Vec<Vec<serde_json::Value>> = rows
            .map(|r| {
                r.iter()
                    .map(|v| match v.as_deref().map(std::str::from_utf8) {
                        None => serde_json::Value::Null,
                        Some(Ok(text)) => serde_json::Value::String(text.to_string()),
                        Some(Err(_)) => {
                            let bytes = v.as_deref().unwrap_or_default();
                            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                            serde_json::json!({ "invalid_utf8": hex })
                        }
                    })
                    .collect()
            })
            .collect();
        let doc = serde_json::json!({
            "dataset": args.dataset,
            "partition": args.partition,
            "generation": record.generation.get(),
            "digest": record.digest,
            "columns": columns,
            "rows": rows,
        });
        println!(
            "{}",
            serde_json::to_string(&doc).expect("json values serialize")
        );
        return Ok(exit::OK);
    }
    let mut out = csv::Writer::from_writer(std::io::stdout());
    let written = (|| {
        out.write_record(&columns)?;
        for row in rows {
            // Bytes as they were published: a value that is not UTF-8 is
            // not replaced by U+FFFD.
            out.write_record(row.iter().map(|v| v.as_deref().unwrap_or(b"")))?;
        }
        out.flush()?;
        Ok::<(), csv::Error>(())
    })();
    match written {
        // A reader that went away (`weir show … | head`) ends weir quietly.
        Err(e) if matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(exit::OK)
        }
        Err(e) => Err(doing("cannot write the rows")(e)),
        Ok(()) => Ok(exit::OK),
    }
}

/// Positions in `sorted` of a CSV file's header columns, in the file's order;
/// the identity for JSON Lines (objects have no column order) or when the
/// header cannot be read again.
fn file_order(
    file: Option<&std::path::PathBuf>,
    format: crate::audit::Format,
    sorted: &[String],
) -> Vec<usize> {
    let identity = (0..sorted.len()).collect();
    if format != crate::audit::Format::Csv {
        return identity;
    }
    let Some(header) = file
        .and_then(|f| csv::Reader::from_path(f).ok())
        .and_then(|mut r| r.headers().ok().cloned())
    else {
        return identity;
    };
    let order: Option<Vec<usize>> = header
        .iter()
        .map(|name| sorted.iter().position(|c| c == name))
        .collect();
    match order {
        Some(o) if o.len() == sorted.len() => o,
        _ => identity,
    }
}
