//! Compensation by rollback: republish an earlier generation's files as a
//! new generation through the same fenced commit (a fresh token, the log only
//! grows), and hold the producing instance so that the next scheduled run
//! does not rebuild what the operator just rolled back.
//!
//! Crash-safe by order: the HELD marker (the intent) is written durably
//! first, then the `ROLLED_BACK` event naming the rollback's token is made
//! durable, and only then is the record committed. A crash at any instant
//! leaves either nothing changed but a held instance (the operator sees why
//! and reruns the rollback or `weir retry`), or the rollback committed and
//! held; never a committed rollback that the next run undoes.

use serde_json::json;

use crate::events::{Event, EventLog, State};
use crate::manifest::Manifest;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::{
    CommitKind, CommitRecord, Depth, DriftKind, Generation, NewCommit, PublishError, TokenOwner,
    Warehouse,
};

/// Why a rollback was refused.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RollbackError {
    /// Nothing is published.
    #[error("`{dataset}` has no published generation for partition {partition}")]
    #[diagnostic(code(weir::rollback::nothing_published))]
    NothingPublished {
        /// Dataset.
        dataset: String,
        /// Partition.
        partition: String,
    },
    /// The partition never had generation `to`: a bad argument (exit 2),
    /// like `show --generation` of one, not a refusal.
    #[error(
        "cannot roll back to generation {to}: it does not exist (generations are 1 to {current})"
    )]
    #[diagnostic(
        code(weir::rollback::no_such_generation),
        help("`weir history` lists generations; pass `--to` one older than the current")
    )]
    NoSuchGeneration {
        /// Asked for.
        to: u64,
        /// The current generation.
        current: u64,
    },
    /// The target is current, or its files cannot be republished.
    #[error("cannot roll back to generation {to}: {why}")]
    #[diagnostic(
        code(weir::rollback::bad_target),
        help("`weir history` lists generations; pass `--to` one older than the current")
    )]
    BadTarget {
        /// Asked for.
        to: u64,
        /// Why not.
        why: String,
    },
    /// The fenced commit was refused or failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Publish(#[from] PublishError),
    /// The warehouse could not be read or written.
    #[error("{what}")]
    #[diagnostic(code(weir::rollback::warehouse))]
    Warehouse {
        /// What failed ("cannot hold the instance").
        what: &'static str,
        /// Why, with the OS's cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Republishes generation `to` (default: the one before the current) of
/// `dataset` at `partition` as a new generation; `faults` arms
/// `rollback_commit`.
pub fn rollback(
    manifest: &Manifest,
    warehouse: &Warehouse,
    log: &EventLog,
    dataset: &str,
    partition: &str,
    to: Option<u64>,
    faults: &crate::exec::fault::Faults,
) -> Result<CommitRecord, RollbackError> {
    let store = warehouse.partition(dataset, partition);
    let history = store
        .history()
        .map_err(failed("cannot read the commit log"))?;
    let (current, target) = choose_target(&store, &history, dataset, partition, to)?;
    let owner = TokenOwner {
        run_id: log.run_id().to_string(),
        task: target.task.clone(),
        attempt: 0,
    };
    let token = store
        .allocate_token(&owner)
        .map_err(failed("cannot allocate a fencing token"))?;
    let previous = state::read(warehouse, &target.task, partition)
        .map_err(failed("cannot read the instance's marker"))?;
    hold_and_announce(
        manifest, warehouse, log, dataset, partition, token, current, target,
    )?;
    let committed = store.commit(NewCommit {
        token,
        dataset: dataset.to_string(),
        partition: partition.to_string(),
        kind: CommitKind::Rollback {
            from_generation: target.generation,
        },
        run_id: log.run_id().to_string(),
        task: target.task.clone(),
        attempt: target.attempt,
        attempt_dir: target.attempt_dir.clone(),
        data_dir: target.data_dir.clone(),
        files: target.files.clone(),
        file_sums: target.file_sums.clone(),
        rows: target.rows,
        digest: target.digest.clone(),
        input_snapshot: target.input_snapshot.clone(),
        input_snapshot_digest: target.input_snapshot_digest.clone(),
        code_version: target.code_version.clone(),
        code_fingerprint: target.code_fingerprint.clone(),
    });
    let record = match committed {
        Ok(record) => record,
        Err(PublishError::Stale { .. }) => {
            // Refused: nothing changed, so the instance goes back to what it was.
            let restored = match &previous {
                Some(m) => state::write(warehouse, m),
                None => state::clear(warehouse, &target.task, partition),
            };
            if let Err(e) = restored {
                tracing::warn!(
                    "cannot restore the marker of {} {partition}: {}",
                    target.task,
                    crate::store::chain(&e)
                );
            }
            return Err(committed.unwrap_err().into());
        }
        Err(e) => return Err(e.into()),
    };
    // A crash here leaves the rollback committed and the instance held.
    if let Err(e) = faults.hit(
        crate::exec::fault::Point::RollbackCommit,
        &target.task,
        partition,
    ) {
        return Err(failed("injected fault")(e));
    }
    if let Some(task) = manifest.tasks.get(&target.task) {
        crate::store::delta::follow_task(&store, task, &record);
    }
    Ok(record)
}

/// The generation a rollback to `to` (default: the one before the
/// current) republishes, and the current one, or why it cannot: nothing
/// published, no such generation, what readers already see, or files no
/// longer what it committed (a generation gc has already collected cannot
/// come back).
fn choose_target<'h>(
    store: &crate::store::PartitionStore,
    history: &'h [CommitRecord],
    dataset: &str,
    partition: &str,
    to: Option<u64>,
) -> Result<(&'h CommitRecord, &'h CommitRecord), RollbackError> {
    let current = history
        .last()
        .ok_or_else(|| RollbackError::NothingPublished {
            dataset: dataset.to_string(),
            partition: partition.to_string(),
        })?;
    if to.is_none() && current.generation == Generation::FIRST {
        return Err(RollbackError::BadTarget {
            to: current.generation.get(),
            why: "it is the only generation: there is nothing older to roll back to".into(),
        });
    }
    let to = to.unwrap_or_else(|| current.generation.get().saturating_sub(1));
    let target = history
        .iter()
        .find(|r| r.generation == Generation::from_raw(to))
        .ok_or_else(|| RollbackError::NoSuchGeneration {
            to,
            current: current.generation.get(),
        })?;
    if target.generation == current.generation
        || target.digest == current.digest && target.data_key() == current.data_key()
    {
        return Err(RollbackError::BadTarget {
            to,
            why: "it is what readers already see".into(),
        });
    }
    if let Err(drift) = store.check_files(target, Depth::Hash) {
        let why = match drift.kind {
            DriftKind::Vanished => format!(
                "its files are gone (garbage-collected?): {}",
                drift.path.display()
            ),
            _ => drift.to_string(),
        };
        return Err(RollbackError::BadTarget { to, why });
    }
    Ok((current, target))
}

/// Holds the instance (a run would rebuild what the rollback restores)
/// and logs ROLLED_BACK durably, both before the commit.
#[allow(clippy::too_many_arguments)]
fn hold_and_announce(
    manifest: &Manifest,
    warehouse: &Warehouse,
    log: &EventLog,
    dataset: &str,
    partition: &str,
    token: crate::store::FencingToken,
    current: &CommitRecord,
    target: &CommitRecord,
) -> Result<(), RollbackError> {
    let hold = InstanceMark {
        mark: Mark::Held,
        task: target.task.clone(),
        partition: partition.to_string(),
        run_id: log.run_id().to_string(),
        reason: format!(
            "rolled back to generation {} of {dataset} (token {token}, replacing generation {}); `weir retry` releases it (a run then rebuilds it if its inputs or code differ from the restored generation's)",
            target.generation, current.generation
        ),
        input_snapshot_digest: Some(target.input_snapshot_digest.clone()),
        code_version: manifest.pipeline.code_version.clone(),
        code_fingerprint: None,
        since: crate::clock::now_rfc3339(),
        note: None,
    };
    state::write(warehouse, &hold).map_err(failed("cannot hold the instance"))?;
    log.emit_durable(
        State::RolledBack,
        Event::instance(&target.task, partition)
            .attempt(target.attempt, Some(token.get()))
            .detail(format!(
                "token {token} republishes generation {} ({} rows, {}, code_version {}) in place of generation {}; the instance is held",
                target.generation, target.rows, target.digest, target.code_version, current.generation
            ))
            .data(json!({
                "dataset": dataset,
                "token": token.get(),
                "from_generation": target.generation.get(),
                "replaced_generation": current.generation.get(),
                "digest": target.digest,
            })),
    )
    .map_err(failed("cannot log the rollback"))?;
    Ok(())
}

/// A warehouse failure while doing `what`, keeping its cause.
fn failed<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    what: &'static str,
) -> impl FnOnce(E) -> RollbackError {
    move |e| RollbackError::Warehouse {
        what,
        source: e.into(),
    }
}
