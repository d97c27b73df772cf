//! Conservative garbage collection of attempt directories.
//!
//! Only `<warehouse>/<dataset>/<partition>/attempts/<token>/` directories
//! (`<dataset>/_weir/<partition>/…` for a Delta table that keeps its
//! partitions there, `store::layout`), each with its published data `<partition>/data-<token>/` on a local disk
//! (kept and deleted together, as one attempt), are ever candidates. `tokens/` is never touched (the highest token record is
//! the partition's counter, and gc reads the records for ages), `log/` is
//! never touched (records are history), and nothing outside a partition's
//! `attempts/` is either: datasets starting with `_` (`_runs`, `_scratch`,
//! `_instances` …) are not datasets.
//!
//! The invariant: never delete a file that a live generation, a retained
//! generation or a possibly-live attempt references, and always be able to
//! show what would be deleted first ([`plan`] writes nothing; [`apply`]
//! deletes only what a plan said, after checking each item again).
//!
//! An attempt directory is kept when
//!
//! 1. the current generation, one of the `keep_generations` generations
//!    before it (the rollback window), or a generation that a retained
//!    rollback record restores names it as its `attempt_dir`, or the
//!    dataset's Delta table (`table = "delta"`) still needs it: its current
//!    version references it, or a commit removed it less than the table's
//!    retention ago (Delta's `VACUUM` rule), so time travel over that
//!    window reads;
//! 2. it may still be running: its lease is not finished (and it was not
//!    taken over, nor is its engine certainly gone), or its age (now − when
//!    the store wrote its token record, else the record's `allocated_at`,
//!    else the newest modification time under it) is below `older_than`, or
//!    something under it was written less than `older_than` ago, or its age
//!    cannot be told at all.
//!
//! Everything else is deleted, each deletion announced by a `GC_DELETED`
//! event before it happens.
//!
//! On an object store gc also lists the multipart uploads under the
//! warehouse that were begun and never completed nor aborted (an engine
//! killed mid-upload; one cut off by the network aborts its own): their
//! parts are stored, and billed, but are no object. One older than
//! `older_than` (by the store's clock) is aborted, announced the same way.
//!
//! What gc cannot see: a rollback to a generation *outside* the window that
//! an operator starts while gc runs may race with the deletion of that
//! generation's files (the window is the rollback guarantee), and an attempt
//! that runs longer than `older_than` without writing anything looks dead.
//! An attempt whose lease (`attempts/<t>/lease.json`) is not marked finished
//! is kept whatever its age (its engine may only be paused) unless its engine
//! is certainly gone (same host, boot and PID namespace, pid gone) or another
//! engine claimed its takeover (`claims/<t>`): then a newer token holds the
//! partition, fencing refuses this attempt's publish, and its candidate is
//! collectable like any other once older than the threshold.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;
use serde_json::json;

use crate::events::{Event, EventLog, State};
use crate::manifest::duration::render;
use crate::store::{
    CommitKind, CommitRecord, FencingToken, IncompleteUpload, PartitionStore, StoreError,
    TokenRecord, Warehouse,
};

/// What gc may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcOptions {
    /// An attempt younger than this may still be running and is kept.
    pub older_than: Duration,
    /// How many generations before the current one stay restorable by a
    /// rollback (their attempt dirs are kept).
    pub keep_generations: usize,
}

/// One candidate directory and what gc decided about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcItem {
    /// The dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// The attempt's fencing token (the directory's name).
    pub token: u64,
    /// The attempt directory, `attempts/<token>`.
    pub path: PathBuf,
    /// Bytes of the regular files under it.
    pub bytes: u64,
    /// How old the attempt is (zero when unknown; the decision says so).
    pub age: Duration,
    /// Delete or keep, and why.
    pub decision: GcDecision,
}

/// Why a candidate directory may (or may not) be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcDecision {
    /// Nothing references it and it cannot be running.
    Delete {
        /// The evidence, for the plan and the `GC_DELETED` event.
        reason: String,
    },
    /// It must stay.
    Keep {
        /// What needs it.
        reason: String,
    },
}

impl GcDecision {
    /// Whether the decision is to delete.
    pub fn is_delete(&self) -> bool {
        matches!(self, GcDecision::Delete { .. })
    }

    /// The reason, either way.
    pub fn reason(&self) -> &str {
        match self {
            GcDecision::Delete { reason } | GcDecision::Keep { reason } => reason,
        }
    }
}

/// Lists every `attempts/<token>/` directory of every dataset and partition
/// in the warehouse with its decision, reading each commit log once.
/// Writes nothing.
pub fn plan(warehouse: &Warehouse, options: &GcOptions) -> Result<GcPlan, StoreError> {
    plan_at(warehouse, options, Timestamp::now())
}

/// A partition whose commit log cannot be read (ENOTDIR, EACCES, a corrupt
/// record): gc keeps everything under it, and the command must say so
/// rather than succeed, since nothing proves what it still needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableLog {
    /// The dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// Why, with its causes.
    pub why: String,
}

/// What gc would do: every candidate directory with its decision, and
/// every partition whose commit log cannot be read (whether or not it has
/// candidate directories), found in the same walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcPlan {
    /// The candidate directories.
    pub items: Vec<GcItem>,
    /// The partitions kept whole because their log cannot be read.
    pub unreadable: Vec<UnreadableLog>,
    /// Multipart uploads under the warehouse never completed nor aborted
    /// (an engine killed or cut off mid-upload), with their decisions.
    pub uploads: Vec<GcUpload>,
}

/// An incomplete multipart upload and what gc decided about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcUpload {
    /// The upload.
    pub upload: IncompleteUpload,
    /// How long ago the store began it.
    pub age: Duration,
    /// Abort (Delete) once older than the threshold, else keep: it may
    /// still be going.
    pub decision: GcDecision,
}

/// Aborts the uploads whose decision is Delete, logging a `GC_DELETED`
/// event (with `key`, `upload_id` and `reason` in its `data`) before each.
/// Returns how many were aborted.
pub fn abort_uploads(
    warehouse: &Warehouse,
    log: &EventLog,
    uploads: &[GcUpload],
) -> Result<usize, StoreError> {
    let mut aborted = 0;
    for u in uploads.iter().filter(|u| u.decision.is_delete()) {
        let reason = u.decision.reason();
        let event = Event::default()
            .detail(format!(
                "aborting upload {} of {}: {reason}",
                u.upload.id, u.upload.key
            ))
            .data(json!({
                "key": u.upload.key,
                "upload_id": u.upload.id,
                "reason": reason,
            }));
        log.emit_durable(State::GcDeleted, event)
            .map_err(StoreError::io(log.path()))?;
        let Some(multipart) = warehouse.backend().multipart() else {
            return Err(StoreError::Remote {
                key: u.upload.key.clone(),
                source: "this store has no multipart uploads to abort".into(),
            });
        };
        multipart.abort_upload(&u.upload)?;
        aborted += 1;
    }
    Ok(aborted)
}

/// The decision about an upload begun `age` ago.
fn judge_upload(age: Duration, options: &GcOptions) -> GcDecision {
    let threshold = render(options.older_than);
    if age < options.older_than {
        GcDecision::Keep {
            reason: format!(
                "may still be uploading (age {} < threshold {threshold})",
                render(age)
            ),
        }
    } else {
        GcDecision::Delete {
            reason: format!(
                "incomplete multipart upload, age {} > threshold {threshold}: its parts are stored but are no object",
                render(age)
            ),
        }
    }
}

/// Deletes the items whose decision is Delete, logging a `GC_DELETED` event
/// (with `dataset`, `partition`, `token`, `path`, `bytes` and `reason` in its
/// `data`) before each deletion. Each item is checked again right before it
/// is deleted (a run or a rollback may have committed since the plan); an
/// item that must now be kept is skipped. Returns how many were deleted.
pub fn apply(
    warehouse: &Warehouse,
    log: &EventLog,
    options: &GcOptions,
    items: &[GcItem],
) -> Result<usize, StoreError> {
    apply_at(warehouse, log, options, items, Timestamp::now())
}

fn plan_at(
    warehouse: &Warehouse,
    options: &GcOptions,
    now: Timestamp,
) -> Result<GcPlan, StoreError> {
    let mut items = Vec::new();
    let mut unreadable = Vec::new();
    for dataset in warehouse.datasets()? {
        for partition in warehouse.partitions(&dataset)? {
            let store = warehouse.partition(&dataset, &partition);
            let tokens = store.attempt_tokens()?;
            // One reading of the log per partition for the plan; `apply`
            // reads it again per item.
            let refs = References::read(&store, options.keep_generations, now);
            if let References::Unreadable(why) = &refs {
                unreadable.push(UnreadableLog {
                    dataset: dataset.clone(),
                    partition: partition.clone(),
                    why: why.clone(),
                });
            }
            for token in tokens {
                items.push(assess(&store, &refs, token, options, now));
            }
        }
    }
    // A store that never leaves a write partial has none to collect.
    let incomplete = match warehouse.backend().multipart() {
        Some(multipart) => multipart.incomplete_uploads()?,
        None => Vec::new(),
    };
    let uploads = incomplete
        .into_iter()
        .map(|upload| {
            let age = Duration::try_from(now.duration_since(upload.initiated)).unwrap_or_default();
            GcUpload {
                decision: judge_upload(age, options),
                upload,
                age,
            }
        })
        .collect();
    Ok(GcPlan {
        items,
        unreadable,
        uploads,
    })
}

fn apply_at(
    warehouse: &Warehouse,
    log: &EventLog,
    options: &GcOptions,
    items: &[GcItem],
    now: Timestamp,
) -> Result<usize, StoreError> {
    let mut deleted = 0;
    for item in items.iter().filter(|i| i.decision.is_delete()) {
        let store = warehouse.partition(&item.dataset, &item.partition);
        let token = FencingToken::from_raw(item.token);
        // The path is recomputed from the token: only `attempts/<token>` of
        // this partition can ever be removed, whatever the item says.
        if store.attempt_usage(token).is_none() {
            continue; // already gone (another gc)
        }
        let refs = References::read(&store, options.keep_generations, now);
        let fresh = assess(&store, &refs, token, options, now);
        let GcDecision::Delete { reason } = fresh.decision else {
            continue;
        };
        let owner = store.token_record(token).ok().flatten();
        let mut event = Event::default();
        if let Some(owner) = &owner {
            event = Event::instance(&owner.task, &item.partition).attempt(owner.attempt, None);
        } else {
            event.partition = Some(item.partition.clone());
        }
        event.token = Some(item.token);
        let event = event
            .detail(format!(
                "deleting {} ({} bytes): {reason}",
                fresh.path.display(),
                fresh.bytes
            ))
            .data(json!({
                "dataset": item.dataset,
                "partition": item.partition,
                "token": item.token,
                "path": fresh.path.display().to_string(),
                "bytes": fresh.bytes,
                "reason": reason,
            }));
        // The evidence first, durable: no event on disk, no deletion.
        log.emit_durable(State::GcDeleted, event)
            .map_err(StoreError::io(log.path()))?;
        store.remove_attempt(token)?;
        deleted += 1;
    }
    Ok(deleted)
}

/// Which attempt dirs the partition's log still needs, and why.
enum References {
    /// The log could not be read: nothing in the partition may go.
    Unreadable(String),
    Read {
        /// `attempt_dir` key → why it is kept.
        kept: HashMap<String, String>,
        /// `attempt_dir` key → the newest generation outside the window that
        /// named it (for the deletion's evidence).
        superseded: HashMap<String, u64>,
        /// The kept generations, newest first, as text ("5, 4, 3").
        window: String,
    },
}

impl References {
    fn read(store: &PartitionStore, keep_generations: usize, now: Timestamp) -> References {
        let mut refs = match store.history() {
            Ok(history) => References::from_history(&history, keep_generations),
            Err(e) => return References::Unreadable(crate::exec::chain(&e)),
        };
        // Files the dataset's Delta table still needs stay: those of its
        // current version, and removed ones within the table's retention,
        // so time travel over that window reads; an unreadable
        // table log keeps the whole partition, like an unreadable commit log.
        match crate::store::delta::referenced_attempts(store, now.as_millisecond()) {
            Ok(delta) => {
                if let References::Read { kept, .. } = &mut refs {
                    for (attempt, r) in delta {
                        kept.entry(attempt).or_insert_with(|| match r.readable_until {
                            None => format!(
                                "referenced by version {} of the Delta table (its current files)",
                                r.version
                            ),
                            Some(until) => format!(
                                "referenced by version {} of the Delta table, readable by time travel until {} (the table's retention)",
                                r.version,
                                Timestamp::from_millisecond(until)
                                    .map_or_else(|_| "ever".to_owned(), |t| t.to_string())
                            ),
                        });
                    }
                }
                refs
            }
            Err(e) => References::Unreadable(format!(
                "cannot read the Delta log: {}",
                crate::exec::chain(&e)
            )),
        }
    }

    fn from_history(history: &[CommitRecord], keep_generations: usize) -> References {
        // Keyed by attempt dir, what gc removes: a Delta table's record
        // names a directory below it (`layout::attempt_root`).
        let attempt_root = |dir: &str| crate::store::layout::attempt_root(dir).to_owned();
        let start = history
            .len()
            .saturating_sub(keep_generations.saturating_add(1));
        let (old, window) = history.split_at(start);
        let role = |rec: &CommitRecord| {
            if Some(rec.generation) == history.last().map(|r| r.generation) {
                "current"
            } else {
                "retained for rollback"
            }
        };
        let mut kept = HashMap::new();
        // Newest first, so an attempt named by several generations is
        // explained by the newest one.
        for rec in window.iter().rev() {
            kept.entry(attempt_root(&rec.attempt_dir))
                .or_insert_with(|| {
                    format!(
                        "referenced by generation {} ({})",
                        rec.generation,
                        role(rec)
                    )
                });
        }
        // A rollback record copies its target's attempt_dir, so the loop
        // above already covers it; the target's own record is consulted too
        // in case the two ever differ.
        for rec in window.iter().rev() {
            if let CommitKind::Rollback { from_generation } = rec.kind {
                if let Some(target) = history.iter().find(|r| r.generation == from_generation) {
                    kept.entry(attempt_root(&target.attempt_dir)).or_insert_with(|| {
                        format!(
                            "referenced by generation {from_generation}, which generation {} ({}) rolls back to",
                            rec.generation,
                            role(rec)
                        )
                    });
                }
            }
        }
        let mut superseded = HashMap::new();
        for rec in old {
            superseded.insert(attempt_root(&rec.attempt_dir), rec.generation.get());
        }
        let window = if window.is_empty() {
            "none".to_owned()
        } else {
            window
                .iter()
                .rev()
                .map(|r| r.generation.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        References::Read {
            kept,
            superseded,
            window,
        }
    }
}

/// How old an attempt is, as far as the warehouse can tell.
struct Age {
    /// now − allocation (or − newest mtime); `None` if neither is readable.
    age: Option<Duration>,
    /// now − the newest modification under the directory.
    last_write: Option<Duration>,
}

/// Decides one attempt dir.
fn assess(
    store: &PartitionStore,
    refs: &References,
    token: FencingToken,
    options: &GcOptions,
    now: Timestamp,
) -> GcItem {
    let path = store.attempt_location(token);
    let (bytes, newest) = store.attempt_usage(token).unwrap_or((0, None));
    let owner = store.token_record(token).ok().flatten();
    let age = age_of(owner.as_ref(), store.token_written_at(token), newest, now);
    let decision = decide(store, refs, token, owner.as_ref(), &age, options);
    GcItem {
        dataset: store.dataset().to_owned(),
        partition: store.partition().to_owned(),
        token: token.get(),
        path,
        bytes,
        age: age.age.unwrap_or_default(),
        decision,
    }
}

fn decide(
    store: &PartitionStore,
    refs: &References,
    token: FencingToken,
    owner: Option<&TokenRecord>,
    age: &Age,
    options: &GcOptions,
) -> GcDecision {
    let key = store.attempt_key(token);
    let (superseded, window) = match refs {
        References::Unreadable(why) => {
            return GcDecision::Keep {
                reason: format!("the partition's commit log cannot be read ({why})"),
            }
        }
        References::Read {
            kept,
            superseded,
            window,
        } => {
            if let Some(reason) = kept.get(&key) {
                return GcDecision::Keep {
                    reason: reason.clone(),
                };
            }
            (superseded.get(&key), window)
        }
    };
    let taken_over = || store.claim_record(token).ok().flatten();
    // A lease that exists but cannot be read (EACCES, EIO, torn) may be a
    // live attempt's: kept. Only a missing lease is "no lease".
    // Before its first renewal an attempt on an object store has no
    // lease.json: its token record carries the first lease.
    let lease = match store.try_read_lease(token) {
        Ok(lease) => lease
            .or_else(|| owner.and_then(|o| crate::store::leases::Lease::claimed(token.get(), o))),
        Err(e) => {
            return GcDecision::Keep {
                reason: format!(
                    "may still be running: its lease cannot be read ({})",
                    crate::store::chain(&e)
                ),
            }
        }
    };
    // A committed generation's attempt ended before its commit, whatever
    // its lease says (an engine does not mark a committed lease finished).
    if let Some(lease) = lease.filter(|l| !l.finished && superseded.is_none()) {
        // An engine that is certainly gone, or whose attempt another engine
        // took over (a newer token then holds the partition; fencing refuses
        // this one's publish if it ever wakes), no longer needs its candidate.
        let ended = if lease.holder_dead() {
            Some(format!(
                "its engine (pid {} on {}) is gone",
                lease.pid, lease.host
            ))
        } else {
            taken_over().map(|c| {
                format!(
                    "run {} took its attempt over at {}",
                    c.run_id, c.allocated_at
                )
            })
        };
        if let Some(ended) = ended {
            return delete_or_young(token, owner, age, options, superseded, window, &ended);
        }
        return GcDecision::Keep {
            reason: format!(
                "may still be running: its lease (engine {} pid {} on {}) is not finished",
                lease.engine_id, lease.pid, lease.host
            ),
        };
    }
    delete_or_young(token, owner, age, options, superseded, window, "")
}

/// An attempt nothing runs any more: deleted once older than the threshold.
#[allow(clippy::too_many_arguments)]
fn delete_or_young(
    token: FencingToken,
    owner: Option<&TokenRecord>,
    age: &Age,
    options: &GcOptions,
    superseded: Option<&u64>,
    window: &str,
    ended: &str,
) -> GcDecision {
    let threshold = render(options.older_than);
    let last_write = age.last_write;
    let Some(age) = age.age else {
        return GcDecision::Keep {
            reason: "may still be running (its age cannot be told: no readable token record or modification time)".to_owned(),
        };
    };
    if age < options.older_than {
        return GcDecision::Keep {
            reason: format!(
                "may still be running (age {} < threshold {threshold})",
                render(age)
            ),
        };
    }
    if let Some(last) = last_write.filter(|l| *l < options.older_than) {
        return GcDecision::Keep {
            reason: format!(
                "may still be running (written {} ago < threshold {threshold})",
                render(last)
            ),
        };
    }
    let what = match superseded {
        Some(g) => format!("generation {g}, outside the rollback window,"),
        None => "unreferenced candidate".to_owned(),
    };
    let whose = match owner {
        Some(o) => format!("of run {} attempt {} (token {token})", o.run_id, o.attempt),
        None => format!("(token {token}, no token record)"),
    };
    let ended = if ended.is_empty() {
        String::new()
    } else {
        format!(" (lease unfinished: {ended})")
    };
    GcDecision::Delete {
        reason: format!(
            "{what} {whose}{ended}, age {} > threshold {threshold}; generations kept: {window}",
            render(age)
        ),
    }
}

/// The attempt's age. Its birth is when the store wrote its token record
/// (the store's clock, the one every engine's writes share), not the
/// allocating engine's `allocated_at` (that host's wall clock, which may be
/// skewed against ours); `allocated_at` only when the store keeps no time.
fn age_of(
    owner: Option<&TokenRecord>,
    written: Option<Timestamp>,
    newest: Option<SystemTime>,
    now: Timestamp,
) -> Age {
    let since = |t: Timestamp| Duration::try_from(now.duration_since(t)).unwrap_or_default();
    let last_write = newest.and_then(|t| Timestamp::try_from(t).ok()).map(since);
    let allocated = written
        .or_else(|| owner.and_then(|o| o.allocated_at.parse::<Timestamp>().ok()))
        .map(since);
    Age {
        age: allocated.or(last_write),
        last_write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::read_log;
    use crate::store::{Generation, NewCommit, TokenOwner};
    use jiff::SignedDuration;
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    const HOUR: Duration = Duration::from_secs(3600);

    fn setup() -> (tempfile::TempDir, Warehouse, PartitionStore) {
        let tmp = tempfile::tempdir().unwrap();
        let wh = Warehouse::open(tmp.path()).unwrap();
        let p = wh.partition("sales", "2026-09-20");
        (tmp, wh, p)
    }

    /// An attempt of `run` with one data file.
    fn attempt(p: &PartitionStore, run: &str) -> FencingToken {
        let t = p
            .allocate_token(&TokenOwner {
                run_id: run.into(),
                task: "load".into(),
                attempt: 1,
            })
            .unwrap();
        let dir = p.prepare_attempt(t).unwrap();
        std::fs::write(dir.join("data/part-0.csv"), b"id\n1\n").unwrap();
        std::fs::write(dir.join("stderr.log"), b"").unwrap();
        t
    }

    fn commit(p: &PartitionStore, token: FencingToken, kind: CommitKind, dir: &str) {
        p.commit(NewCommit {
            token,
            dataset: p.dataset().into(),
            partition: p.partition().into(),
            kind,
            run_id: "run".into(),
            task: "load".into(),
            attempt: 1,
            attempt_dir: dir.into(),
            data_dir: None,
            files: vec!["part-0.csv".into()],
            file_sums: Vec::new(),
            rows: 1,
            digest: "sha256:00".into(),
            input_snapshot: json!({"inputs": []}),
            input_snapshot_digest: "sha256:11".into(),
            code_version: "1".into(),
            code_fingerprint: None,
        })
        .unwrap();
    }

    fn publish(p: &PartitionStore, run: &str) -> FencingToken {
        let t = attempt(p, run);
        commit(p, t, CommitKind::Publish, &p.attempt_key(t));
        t
    }

    /// Rolls back to generation `g` with a fresh token (no attempt dir, as
    /// `weir rollback` does).
    fn rollback(p: &PartitionStore, g: u64) {
        let target = p.record(Generation::from_raw(g)).unwrap().unwrap();
        let t = p
            .allocate_token(&TokenOwner {
                run_id: "op".into(),
                task: "load".into(),
                attempt: 0,
            })
            .unwrap();
        let kind = CommitKind::Rollback {
            from_generation: target.generation,
        };
        commit(p, t, kind, &target.attempt_dir);
    }

    fn later(hours: i64) -> Timestamp {
        Timestamp::now() + SignedDuration::from_hours(hours)
    }

    /// Makes a token look allocated at `at`, as the store would have
    /// stamped it: its record's modification time (and `allocated_at`).
    fn allocated_at(wh: &Warehouse, p: &PartitionStore, t: FencingToken, at: Timestamp) {
        let mut rec = p.token_record(t).unwrap().unwrap();
        rec.allocated_at = at.to_string();
        let path = token_path(wh, p, t);
        std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        stamp(&path, at);
    }

    fn token_path(wh: &Warehouse, p: &PartitionStore, t: FencingToken) -> PathBuf {
        wh.root()
            .join(p.dataset())
            .join(p.partition())
            .join("tokens")
            .join(t.key_name())
    }

    fn system_time(at: Timestamp) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(at.as_nanosecond()).unwrap())
    }

    fn stamp(path: &Path, at: Timestamp) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(system_time(at))
            .unwrap();
    }

    // An attempt's age counts from when the store wrote its token,
    // not from the allocating engine's clock: an engine whose clock runs 10
    // hours behind does not make its fresh attempt look old, nor one 10
    // hours ahead an old attempt look young.
    #[test]
    fn age_comes_from_the_store_not_the_writers_clock() {
        let (_tmp, wh, p) = setup();
        let fresh = attempt(&p, "r-behind");
        let old = attempt(&p, "r-ahead");
        let now = Timestamp::now();
        for (t, skew) in [(fresh, -10), (old, 10)] {
            let mut rec = p.token_record(t).unwrap().unwrap();
            rec.allocated_at = (now + SignedDuration::from_hours(skew)).to_string();
            let path = token_path(&wh, &p, t);
            std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
        }
        stamp(
            &token_path(&wh, &p, old),
            now - SignedDuration::from_hours(3),
        );
        // The attempts' own files are as old as their tokens.
        for (t, at) in [(fresh, now), (old, now - SignedDuration::from_hours(3))] {
            let dir = p.attempt_dir(t);
            for entry in tree(&dir).iter().chain([&dir]) {
                let _ = std::fs::File::open(entry).and_then(|f| f.set_modified(system_time(at)));
            }
        }
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 2,
        };
        let items = plan_at(&wh, &options, now).unwrap().items;
        let young = by_token(&items, fresh);
        assert!(young.age < Duration::from_secs(60), "{young:?}");
        kept(&items, fresh);
        let aged = by_token(&items, old);
        assert!(aged.age >= Duration::from_secs(3 * 3600 - 60), "{aged:?}");
        deleted(&items, old);
    }

    fn by_token(items: &[GcItem], t: FencingToken) -> &GcItem {
        items.iter().find(|i| i.token == t.get()).unwrap()
    }

    fn kept(items: &[GcItem], t: FencingToken) -> String {
        match &by_token(items, t).decision {
            GcDecision::Keep { reason } => reason.clone(),
            GcDecision::Delete { reason } => panic!("token {t} deleted: {reason}"),
        }
    }

    fn deleted(items: &[GcItem], t: FencingToken) -> String {
        match &by_token(items, t).decision {
            GcDecision::Delete { reason } => reason.clone(),
            GcDecision::Keep { reason } => panic!("token {t} kept: {reason}"),
        }
    }

    /// Every path under `dir`, sorted.
    fn tree(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(tree(&path));
            }
            out.push(path);
        }
        out.sort();
        out
    }

    #[test]
    fn plan_keeps_current_retained_and_young_and_writes_nothing() {
        let (tmp, wh, p) = setup();
        let gens: Vec<FencingToken> = (1..=5).map(|i| publish(&p, &format!("r{i}"))).collect();
        let orphan = attempt(&p, "r-failed");
        let young = attempt(&p, "r-young");
        let now = later(2);
        allocated_at(&wh, &p, young, now - SignedDuration::from_mins(5));
        // Something outside attempts/ that gc must not look at.
        std::fs::create_dir_all(tmp.path().join("_scratch/verify-1/data")).unwrap();
        let before = tree(tmp.path());

        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 2,
        };
        let items = plan_at(&wh, &options, now).unwrap().items;
        assert_eq!(tree(tmp.path()), before, "a plan writes nothing");
        assert_eq!(items.len(), 7);
        assert!(items.iter().all(|i| i.dataset == "sales"));

        assert_eq!(
            kept(&items, gens[4]),
            "referenced by generation 5 (current)"
        );
        assert_eq!(
            kept(&items, gens[3]),
            "referenced by generation 4 (retained for rollback)"
        );
        assert_eq!(
            kept(&items, gens[2]),
            "referenced by generation 3 (retained for rollback)"
        );
        assert_eq!(
            kept(&items, young),
            "may still be running (age 5m < threshold 1h)"
        );
        let why = deleted(&items, gens[0]);
        assert!(
            why.starts_with(
                "generation 1, outside the rollback window, of run r1 attempt 1 (token 1), age 2h"
            ),
            "{why}"
        );
        assert!(
            why.ends_with("> threshold 1h; generations kept: 5, 4, 3"),
            "{why}"
        );
        let why = deleted(&items, orphan);
        assert!(
            why.starts_with("unreferenced candidate of run r-failed attempt 1 (token 6)"),
            "{why}"
        );
        let item = by_token(&items, orphan);
        assert_eq!(item.path, p.attempt_dir(orphan));
        assert_eq!(item.bytes, 5);
        assert!(item.age >= Duration::from_secs(7190), "{:?}", item.age);

        // The real clock: everything is young, nothing would go.
        let items = plan(&wh, &options).unwrap().items;
        assert!(items.iter().all(|i| !i.decision.is_delete()), "{items:?}");
    }

    #[test]
    fn a_record_naming_a_table_directory_below_its_attempt_keeps_the_attempt() {
        // A Delta table dataset's record names `attempts/<t>/<column>=<value>`
        // (a table partitioned by column); gc decides per attempt dir, and must see it referenced
        // by its record even when no Delta log says so (a table behind).
        let (_tmp, wh, p) = setup();
        let publish_table = |run: &str| {
            let t = attempt(&p, run);
            let key = crate::store::layout::table_publication_key(
                &p.attempt_key(t),
                &["day".to_owned()],
                &["2026-09-20".to_owned()],
            );
            let below = p.attempt_dir(t).join("day=2026-09-20");
            std::fs::create_dir(&below).unwrap();
            std::fs::rename(p.attempt_dir(t).join("data"), below.join("data")).unwrap();
            commit(&p, t, CommitKind::Publish, &key);
            t
        };
        let old = publish_table("r1");
        let current = publish_table("r2");
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 0,
        };
        let items = plan_at(&wh, &options, later(3)).unwrap().items;
        assert!(kept(&items, current).contains("referenced by generation 2 (current)"));
        assert!(deleted(&items, old).contains("generation 1, outside the rollback window"));
    }

    /// Publishes as a local engine does: the attempt's `data/` renamed to
    /// the partition's `data-<t>`, which the record names.
    fn publish_moved(p: &PartitionStore, run: &str) -> FencingToken {
        let t = attempt(p, run);
        let (key, _) = p.move_to_published(t).unwrap().unwrap();
        let rec = NewCommit {
            token: t,
            dataset: p.dataset().into(),
            partition: p.partition().into(),
            kind: CommitKind::Publish,
            run_id: run.into(),
            task: "load".into(),
            attempt: 1,
            attempt_dir: p.attempt_key(t),
            data_dir: Some(key),
            files: vec!["part-0.csv".into()],
            file_sums: Vec::new(),
            rows: 1,
            digest: "sha256:00".into(),
            input_snapshot: json!({"inputs": []}),
            input_snapshot_digest: "sha256:11".into(),
            code_version: "1".into(),
            code_fingerprint: None,
        };
        p.commit(rec).unwrap();
        t
    }

    #[test]
    fn published_data_dirs_go_with_their_attempt_and_never_while_named() {
        let (_tmp, wh, p) = setup();
        let old = publish_moved(&p, "r1");
        let current = publish_moved(&p, "r2");
        // Killed between the rename and the commit: a data dir no record
        // names, and its attempt dir gone too (a crash of an earlier gc).
        let crashed = attempt(&p, "r3");
        p.move_to_published(crashed).unwrap();
        std::fs::remove_dir_all(p.attempt_dir(crashed)).unwrap();
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 0,
        };
        let now = later(3);
        let items = plan_at(&wh, &options, now).unwrap().items;
        assert_eq!(items.len(), 3, "{items:?}");
        assert!(kept(&items, current).contains("referenced by generation 2 (current)"));
        assert!(deleted(&items, old).contains("generation 1, outside the rollback window"));
        assert!(deleted(&items, crashed).contains("unreferenced candidate"));
        assert_eq!(by_token(&items, crashed).bytes, 5);
        let log = EventLog::open(wh.root(), "op-gc").unwrap();
        assert_eq!(apply_at(&wh, &log, &options, &items, now).unwrap(), 2);
        for gone in [old, crashed] {
            assert!(!p.published_dir(gone).exists(), "{gone}");
            assert!(!p.attempt_dir(gone).exists(), "{gone}");
        }
        assert!(p.published_dir(current).join("part-0.csv").is_file());
        let rec = p.latest().unwrap().unwrap();
        assert_eq!(
            p.visible_files(&rec),
            [p.published_dir(current).join("part-0.csv")]
        );
    }

    #[test]
    fn apply_deletes_only_old_unreferenced_dirs_after_logging_them() {
        let (tmp, wh, p) = setup();
        let old = publish(&p, "r1");
        let current = publish(&p, "r2");
        let orphan = attempt(&p, "r3");
        // Litter under attempts/ that is not an attempt.
        std::fs::create_dir(tmp.path().join("sales/2026-09-20/attempts/notes")).unwrap();
        let tokens = tree(&tmp.path().join("sales/2026-09-20/tokens"));
        let logs = tree(&tmp.path().join("sales/2026-09-20/log"));
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 0,
        };
        let now = later(3);
        let items = plan_at(&wh, &options, now).unwrap().items;
        assert_eq!(items.len(), 3);
        deleted(&items, old);
        deleted(&items, orphan);
        kept(&items, current);

        let mut log = EventLog::open(wh.root(), "op-gc").unwrap();
        // When each GC_DELETED line is written, its directory still exists.
        let seen = Arc::new(Mutex::new(Vec::new()));
        let observed = Arc::clone(&seen);
        log.observe(move |rec| {
            let path = PathBuf::from(rec.data["path"].as_str().unwrap());
            observed.lock().unwrap().push((rec.state, path.exists()));
        });
        let n = apply_at(&wh, &log, &options, &items, now).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(State::GcDeleted, true), (State::GcDeleted, true)]
        );
        assert!(!p.attempt_dir(old).exists());
        assert!(!p.attempt_dir(orphan).exists());
        assert!(p.attempt_dir(current).join("data/part-0.csv").is_file());
        assert!(tmp.path().join("sales/2026-09-20/attempts/notes").is_dir());
        assert_eq!(tree(&tmp.path().join("sales/2026-09-20/tokens")), tokens);
        assert_eq!(tree(&tmp.path().join("sales/2026-09-20/log")), logs);

        let (records, bad) = read_log(log.path()).unwrap();
        assert!(bad.is_empty());
        assert_eq!(records.len(), 2);
        let rec = &records[0];
        assert_eq!(rec.state, State::GcDeleted);
        assert_eq!(rec.token, Some(old.get()));
        assert_eq!(rec.task.as_deref(), Some("load"));
        assert_eq!(rec.data["dataset"], "sales");
        assert_eq!(rec.data["partition"], "2026-09-20");
        assert_eq!(rec.data["token"], old.get());
        assert_eq!(rec.data["bytes"], 5);
        assert_eq!(
            rec.data["path"],
            p.attempt_dir(old).display().to_string().as_str()
        );
        assert!(rec.data["reason"]
            .as_str()
            .unwrap()
            .contains("generations kept: 2"));

        // Applying the same plan again deletes nothing more.
        assert_eq!(apply_at(&wh, &log, &options, &items, now).unwrap(), 0);
    }

    #[test]
    fn a_rollback_keeps_the_attempt_it_restores() {
        let (_tmp, wh, p) = setup();
        let first = publish(&p, "r1");
        let second = publish(&p, "r2");
        let third = publish(&p, "r3");
        rollback(&p, 1);
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 0,
        };
        let now = later(2);
        let items = plan_at(&wh, &options, now).unwrap().items;
        assert_eq!(items.len(), 3, "a rollback has no attempt dir of its own");
        assert_eq!(kept(&items, first), "referenced by generation 4 (current)");
        deleted(&items, second);
        assert!(deleted(&items, third).contains("generation 3, outside the rollback window"));

        // A newer publication: the rollback is now retained, and so is the
        // attempt it restores.
        let fifth = publish(&p, "r5");
        let options = GcOptions {
            keep_generations: 1,
            ..options
        };
        let items = plan_at(&wh, &options, later(2)).unwrap().items;
        assert_eq!(
            kept(&items, first),
            "referenced by generation 4 (retained for rollback)"
        );
        assert_eq!(kept(&items, fifth), "referenced by generation 5 (current)");
        assert!(deleted(&items, third).ends_with("generations kept: 5, 4"));
    }

    #[test]
    fn apply_rechecks_each_item_before_deleting_it() {
        let (tmp, wh, p) = setup();
        let first = publish(&p, "r1");
        publish(&p, "r2");
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 0,
        };
        let now = later(2);
        let items = plan_at(&wh, &options, now).unwrap().items;
        deleted(&items, first);
        // An operator rolls back to generation 1 after the plan was made.
        rollback(&p, 1);
        let log = EventLog::open(wh.root(), "op-gc").unwrap();
        assert_eq!(apply_at(&wh, &log, &options, &items, now).unwrap(), 0);
        assert!(p.attempt_dir(first).join("data/part-0.csv").is_file());
        let (records, _) = read_log(log.path()).unwrap();
        assert!(records.is_empty());
        // A hand-made item for a referenced dir is refused the same way.
        let forged = GcItem {
            decision: GcDecision::Delete {
                reason: "forged".into(),
            },
            path: tmp.path().join("elsewhere"),
            ..by_token(&items, first).clone()
        };
        assert_eq!(apply_at(&wh, &log, &options, &[forged], now).unwrap(), 0);
        assert!(p.attempt_dir(first).is_dir());
    }

    #[test]
    fn recent_writes_and_unreadable_logs_keep_attempts() {
        let (tmp, wh, p) = setup();
        publish(&p, "r1");
        let busy = attempt(&p, "r2");
        let now = later(2);
        // Allocated 4h before `now`, but its files were written 2h before.
        allocated_at(&wh, &p, busy, now - SignedDuration::from_hours(4));
        let options = GcOptions {
            older_than: Duration::from_secs(3 * 3600),
            keep_generations: 0,
        };
        let items = plan_at(&wh, &options, now).unwrap().items;
        let why = kept(&items, busy);
        assert!(why.starts_with("may still be running (written 2h"), "{why}");
        assert_eq!(by_token(&items, busy).age, Duration::from_secs(4 * 3600));

        // No token record: the newest modification time is the age.
        let q = wh.partition("sales", "2026-09-21");
        let t = attempt(&q, "r1");
        std::fs::remove_file(
            tmp.path()
                .join("sales/2026-09-21/tokens")
                .join(t.key_name()),
        )
        .unwrap();
        let mut items = plan_at(
            &wh,
            &GcOptions {
                older_than: HOUR,
                ..options
            },
            later(2),
        )
        .unwrap()
        .items;
        items.retain(|i| i.partition == "2026-09-21");
        let why = deleted(&items, t);
        assert!(
            why.contains("(token 1, no token record), age 2h >"),
            "{why}"
        );

        // A corrupt log keeps the whole partition.
        std::fs::create_dir_all(tmp.path().join("sales/2026-09-21/log")).unwrap();
        std::fs::write(
            tmp.path()
                .join("sales/2026-09-21/log/00000000000000000001.json"),
            b"{",
        )
        .unwrap();
        let items = plan_at(
            &wh,
            &GcOptions {
                older_than: HOUR,
                ..options
            },
            now,
        )
        .unwrap()
        .items;
        let item = items.iter().find(|i| i.partition == "2026-09-21").unwrap();
        assert!(item
            .decision
            .reason()
            .starts_with("the partition's commit log cannot be read"));
        assert!(!item.decision.is_delete());
    }

    // A lease that cannot be read (here a directory: EISDIR) was
    // taken as no lease, and its attempt deleted by age; it may be live.
    #[test]
    fn an_unreadable_lease_keeps_its_attempt() {
        let (_tmp, wh, p) = setup();
        let t = attempt(&p, "r1");
        let lease = p.attempt_dir(t).join("lease.json");
        let _ = std::fs::remove_file(&lease);
        std::fs::create_dir(&lease).unwrap();
        let options = GcOptions {
            older_than: Duration::ZERO,
            keep_generations: 5,
        };
        let items = plan(&wh, &options).unwrap().items;
        let why = kept(&items, t);
        assert!(
            why.starts_with("may still be running: its lease ") && why.contains("Is a directory"),
            "{why}"
        );
        std::fs::remove_dir(&lease).unwrap();
        let items = plan(&wh, &options).unwrap().items;
        assert!(by_token(&items, t).decision.is_delete());
    }

    /// An unfinished lease held by an engine on another host, which this
    /// host cannot tell dead.
    fn foreign_lease(p: &PartitionStore, t: FencingToken) {
        let lease = crate::store::leases::Lease {
            engine_id: "elsewhere".into(),
            host: "another-host".into(),
            pid: 1,
            pid_start: None,
            boot_id: Some("another-boot".into()),
            pid_ns: None,
            run_id: "r".into(),
            task: "load".into(),
            attempt: 1,
            token: t.get(),
            beats: 1,
            heartbeat_ms: 0,
            heartbeat_at: String::new(),
            timeout_ms: 1000,
            finished: false,
            process_tag: None,
            job_id: None,
        };
        p.write_lease(t, &lease).unwrap();
    }

    // An engine no longer marks a committed attempt's lease
    // finished (one write and one inode less per publication); gc tells the
    // attempt ended by its commit, so a superseded generation is still
    // collected, while an uncommitted attempt with such a lease is kept.
    #[test]
    fn a_committed_attempt_is_collectable_with_an_unfinished_lease() {
        let (_tmp, wh, p) = setup();
        let old = publish(&p, "r1");
        publish(&p, "r2");
        let running = attempt(&p, "r3");
        foreign_lease(&p, old);
        foreign_lease(&p, running);
        let items = plan(
            &wh,
            &GcOptions {
                older_than: Duration::ZERO,
                keep_generations: 0,
            },
        )
        .unwrap()
        .items;
        assert!(
            deleted(&items, old).starts_with("generation 1, outside the rollback window"),
            "{items:?}"
        );
        assert!(
            kept(&items, running).contains("is not finished"),
            "{items:?}"
        );
    }

    // An incomplete multipart upload may be a publish still writing its
    // parts: only one older than the threshold is aborted, and the reason
    // says its parts are stored but are no object.
    #[test]
    fn an_upload_is_aborted_only_once_older_than_the_threshold() {
        let options = GcOptions {
            older_than: HOUR,
            keep_generations: 5,
        };
        assert_eq!(
            judge_upload(Duration::from_secs(59 * 60), &options),
            GcDecision::Keep {
                reason: "may still be uploading (age 59m < threshold 1h)".to_owned()
            }
        );
        assert_eq!(
            judge_upload(Duration::from_secs(3 * 3600), &options),
            GcDecision::Delete {
                reason: "incomplete multipart upload, age 3h > threshold 1h: its parts are stored but are no object".to_owned()
            }
        );
        // A local warehouse has none to list.
        let (_tmp, wh, _p) = setup();
        assert_eq!(plan_at(&wh, &options, later(0)).unwrap().uploads, vec![]);
    }

    #[test]
    fn zero_threshold_and_empty_warehouse() {
        let (_tmp, wh, p) = setup();
        assert!(plan(
            &wh,
            &GcOptions {
                older_than: Duration::ZERO,
                keep_generations: 5
            }
        )
        .unwrap()
        .items
        .is_empty());
        let orphan = attempt(&p, "r1");
        let items = plan(
            &wh,
            &GcOptions {
                older_than: Duration::ZERO,
                keep_generations: 5,
            },
        )
        .unwrap()
        .items;
        assert!(deleted(&items, orphan).ends_with("generations kept: none"));
    }
}
