//! Publishing an audited candidate: its files made durable (or uploaded),
//! summed, and named by one fenced commit record.

use super::*;
use crate::store::CommitRecord;

pub(super) fn file_names(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

/// Each file's size and SHA-256, read in parallel when there are several.
fn sum_files(files: &[PathBuf]) -> std::io::Result<Vec<FileSum>> {
    use rayon::prelude::*;
    let sum = |f: &PathBuf| {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        FileSum::of(f, &name)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))
    };
    if files.len() == 1 {
        files.iter().map(sum).collect()
    } else {
        files.par_iter().map(sum).collect()
    }
}

/// Below this many bytes a candidate's files are hashed and then flushed on
/// the attempt's own thread: waking the rayon pool to overlap the two costs
/// more than hashing them.
const OVERLAP_BYTES: u64 = 1 << 20;

/// The fenced compare-and-swap that makes an audited candidate visible.
pub(super) fn publish(
    at: &Attempt<'_, '_>,
    snapshot: &InputSnapshot,
    store: &PartitionStore,
    audited: AuditedCandidate,
) -> AttemptOutcome {
    publish_steps(at, snapshot, store, audited).unwrap_or_else(|ended| ended)
}

/// [`publish`]'s steps in order; each may end the attempt early.
fn publish_steps(
    at: &Attempt<'_, '_>,
    snapshot: &InputSnapshot,
    store: &PartitionStore,
    audited: AuditedCandidate,
) -> Step<AttemptOutcome> {
    let (cx, task, partition) = (at.cx, at.task, at.partition);
    let AuditedCandidate {
        mut candidate,
        report,
    } = audited;
    let token = candidate.token;
    let staged = stage(at, store, &mut candidate).map_err(|e| {
        at.fail(
            Some(token),
            format!(
                "cannot move the candidate to where it publishes: {}",
                chain(&e)
            ),
        )
    })?;
    let (names, file_sums) = make_durable(at, store, &staged, &candidate)?;
    if let Err(e) = cx.faults.hit(Point::BeforeCommit, &task.name, partition) {
        return Err(at.fail(Some(token), e));
    }
    let commit = NewCommit {
        token,
        dataset: task.output.dataset.clone(),
        partition: partition.to_string(),
        kind: CommitKind::Publish,
        run_id: cx.run_id.clone(),
        task: task.name.clone(),
        attempt: at.number,
        attempt_dir: staged.attempt_dir.clone(),
        data_dir: staged.data_dir.clone(),
        files: names,
        file_sums,
        rows: report.rows,
        digest: report.digest.as_str().to_string(),
        input_snapshot: snapshot.to_json(),
        input_snapshot_digest: snapshot.digest(),
        code_version: task.code_version.clone(),
        code_fingerprint: Some(candidate.code.clone()),
    };
    if let Some(notify) = &cx.notify {
        notify.committing(&task.name, partition, token.get());
    }
    let result = commit_once(at, store, commit)?;
    if let Err(e) = cx.faults.hit(Point::BeforeEvent, &task.name, partition) {
        return Err(at.fail(Some(token), e));
    }
    let (record, unsure) = match result {
        Ok(record) => (record, None),
        Err(PublishError::Store(e)) => reread_after_failure(at, store, token, &e)?,
        Err(PublishError::Stale {
            mine,
            committed,
            generation,
        }) => {
            tracing::debug!(task = %task.name, partition, "fenced: token {mine} is not newer than token {committed} of generation {generation}");
            if staged.data_dir.is_some() && committed != mine {
                // No record names it (each names its own attempt's).
                store.move_back(token);
            }
            let current = store.latest().ok().flatten().is_some_and(|latest| {
                crate::exec::is_current(&latest, snapshot, &task.code_version, &candidate.code)
                    && candidate
                        .forced_over
                        .is_none_or(|before| Some(latest.generation) > before)
            });
            cx.emit(
                State::RejectedStale,
                at.event(token)
                    .detail(format!(
                        "token {mine} is not newer than token {committed} committed at generation {generation}; the candidate stays unpublished{}",
                        if current { " (the visible generation has the same input snapshot and code_version)" } else { "" }
                    ))
                    .data(json!({ "mine": mine.get(), "committed": committed.get(), "generation": generation.get(), "current": current })),
            );
            return Ok(AttemptOutcome::Stale { current });
        }
    };
    store.release_staged(&staged.publication_dir.join(DATA_DIR));
    announce_published(at, token, &record, unsure.as_deref());
    // The table follows weir's record; its failure is only a warning.
    crate::store::delta::follow_task(store, task, &record);
    Ok(AttemptOutcome::Published { unsure })
}

/// The candidate's files made durable with their names (in a remote
/// warehouse: uploaded), and what readers will check them against from now
/// on: their names, sizes and SHA-256 (hashed from the page cache while the
/// same files are flushed to disk), all before the record that names them.
fn make_durable(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    staged: &Staged,
    candidate: &Candidate,
) -> Step<(Vec<String>, Vec<FileSum>)> {
    let token = candidate.token;
    let names = file_names(&candidate.files);
    let sums = || sum_files(&candidate.files);
    let sync = || store.make_durable(&staged.data_key, &names);
    let bytes: u64 = candidate
        .files
        .iter()
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum();
    let (file_sums, synced) = if bytes < OVERLAP_BYTES {
        (sums(), sync())
    } else {
        rayon::join(sums, sync)
    };
    let file_sums = file_sums.map_err(|e| {
        at.fail(
            Some(token),
            format!("cannot read the candidate: {}", chain(&e)),
        )
    })?;
    synced.map_err(|e| {
        at.fail(
            Some(token),
            format!("cannot fsync the candidate: {}", chain(&e)),
        )
    })?;
    store
        .upload_attempt(token, &staged.attempt_dir, &candidate.files, &file_sums)
        .map_err(|e| {
            at.fail(
                Some(token),
                format!("cannot upload the candidate: {}", chain(&e)),
            )
        })?;
    Ok((names, file_sums))
}

/// The commit, with the fault points around it: an injected EIO on the
/// log's fsync after the record is linked (the outcome unknown to the
/// engine, as with a real one), and a crash after the record is durable
/// and before its acknowledgement (which loses only the acknowledgement).
fn commit_once(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    commit: NewCommit,
) -> Step<Result<CommitRecord, PublishError>> {
    let faults = &at.cx.faults;
    let (task, partition) = (&at.task.name, at.partition);
    let result = store.commit(commit);
    if result.is_err() {
        return Ok(result);
    }
    if faults.hit(Point::CommitFsync, task, partition).is_err() {
        return Ok(Err(PublishError::Store(StoreError::Io {
            path: store.log_dir(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        })));
    }
    if faults.hit(Point::AfterCommit, task, partition).is_err() {
        return Err(AttemptOutcome::Published { unsure: None });
    }
    Ok(result)
}

/// A commit that reported a store error has an unknown outcome: the store's
/// contract says reread the log for this token, and report what really
/// happened (the record, with the error that was settled by finding it).
fn reread_after_failure(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    token: FencingToken,
    e: &StoreError,
) -> Step<(CommitRecord, Option<String>)> {
    let error = chain(e);
    match store.history() {
        Ok(history) => match history.into_iter().find(|r| r.token == token) {
            Some(record) => Ok((record, Some(error))),
            None => Err(at.fail(
                Some(token),
                format!(
                    "commit failed: {error}; the log holds no record with token {token}: not published"
                ),
            )),
        },
        Err(reread) => Err(at.fail(
            Some(token),
            format!(
                "commit failed: {error}; rereading the log failed too ({}): whether token {token} is published is unknown",
                chain(&reread)
            ),
        )),
    }
}

/// PUBLISHED, naming the generation, its rows and digest (and the commit's
/// error, when rereading the log found the record anyway).
fn announce_published(
    at: &Attempt<'_, '_>,
    token: FencingToken,
    record: &CommitRecord,
    unsure: Option<&str>,
) {
    at.cx.emit(
        State::Published,
        at.event(token)
            .detail(match unsure {
                None => format!(
                    "generation {}: {} rows, {}",
                    record.generation, record.rows, record.digest
                ),
                Some(e) => format!(
                    "generation {}: {} rows, {} (the commit reported `{e}`; rereading the log with token {token} found the record)",
                    record.generation, record.rows, record.digest
                ),
            })
            .data(json!({
                "generation": record.generation.get(),
                "rows": record.rows,
                "digest": record.digest,
                "input_snapshot_digest": record.input_snapshot_digest,
                "code_version": record.code_version,
            })),
    );
}

/// Where a candidate publishes ([`stage`]).
struct Staged {
    /// What its commit record names as `attempt_dir`.
    attempt_dir: String,
    /// What its commit record names as `data_dir` (see
    /// [`crate::store::CommitRecord::data_dir`]).
    data_dir: Option<String>,
    /// Key of the directory holding its files.
    data_key: String,
    /// The directory on this host holding its staged `data/` (a remote
    /// warehouse's, removed once uploaded and committed).
    publication_dir: PathBuf,
}

/// Moves `candidate`'s audited files to where they publish, before they
/// are hashed and made durable (their names and bytes, so their digests,
/// are unchanged): on a local disk, the partition's `data-<token>`
/// ([`PartitionStore::move_to_published`]); a Delta table output, below
/// its attempt dir ([`stage_for_table`]); a remote warehouse's upload keeps
/// `attempts/<token>/data/`.
fn stage(
    at: &Attempt<'_, '_>,
    store: &PartitionStore,
    candidate: &mut Candidate,
) -> Result<Staged, crate::store::StoreError> {
    let (task, partition) = (at.task, at.partition);
    let (attempt_dir, publication_dir) = stage_for_table(task, partition, store, candidate)
        .map_err(crate::store::StoreError::io(candidate.dir.join(DATA_DIR)))?;
    // A Delta table keeps its Hive layout, even without partition columns:
    // its log names `attempts/<token>/.../data/` paths.
    let table = crate::store::delta::columns_of(task, partition).is_some();
    let in_place = |attempt_dir: String, publication_dir| Staged {
        data_key: format!("{attempt_dir}/{DATA_DIR}"),
        attempt_dir,
        data_dir: None,
        publication_dir,
    };
    if table {
        return Ok(in_place(attempt_dir, publication_dir));
    }
    let from = candidate.dir.join(DATA_DIR);
    let Some((key, to)) = store.move_to_published(candidate.token)? else {
        return Ok(in_place(attempt_dir, publication_dir));
    };
    for file in &mut candidate.files {
        if let Ok(name) = file.strip_prefix(&from) {
            *file = to.join(name);
        }
    }
    Ok(Staged {
        attempt_dir,
        data_dir: Some(key.clone()),
        data_key: key,
        publication_dir,
    })
}

/// Where `candidate` publishes: the key its commit record names as
/// `attempt_dir`, and that directory on this host. A Delta table output
/// publishes below its attempt dir, under one `<column>=<value>/`
/// directory per partition column ([`layout::table_publication_key`]), so
/// readers that take partition values from paths (Polars' native Delta
/// scan) see them: the audited `data/` moves there whole, one rename of the
/// attempt's own staging, before its files are hashed and made durable
/// (their names and bytes, so their digests, are unchanged). Any other
/// output publishes its attempt dir as it is.
pub(super) fn stage_for_table(
    task: &Task,
    partition: &str,
    store: &PartitionStore,
    candidate: &mut Candidate,
) -> std::io::Result<(String, PathBuf)> {
    let key = store.attempt_key(candidate.token);
    let Some((columns, values)) = crate::store::delta::columns_of(task, partition) else {
        return Ok((key, candidate.dir.clone()));
    };
    let publication = layout::table_publication_key(&key, &columns, &values);
    let Some(below) = publication.strip_prefix(&format!("{key}/")) else {
        return Ok((key, candidate.dir.clone()));
    };
    let dir = below
        .split('/')
        .fold(candidate.dir.clone(), |d, s| d.join(s));
    let (from, to) = (candidate.dir.join(DATA_DIR), dir.join(DATA_DIR));
    std::fs::create_dir_all(&dir)?;
    std::fs::rename(&from, &to)?;
    for file in &mut candidate.files {
        if let Ok(name) = file.strip_prefix(&from) {
            *file = to.join(name);
        }
    }
    Ok((publication, dir))
}
