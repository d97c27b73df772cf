//! Arguments checked against the manifest before anything is read or
//! logged: an unknown task or dataset, a partition outside the scheme, a
//! generation the partition never had is a usage error (exit 2) whose help
//! names what there is. Every command's checks, in one file the others
//! depend on.

use super::error::CliError;
use crate::manifest::{Manifest, Task};

pub(crate) fn check_task(manifest: &Manifest, task: &str) -> Result<(), CliError> {
    if manifest.tasks.contains_key(task) {
        return Ok(());
    }
    Err(CliError::Usage(format!(
        "unknown task `{task}`\n  help: {}",
        crate::manifest::unknown_task_help(manifest, task)
    )))
}

/// A partition key of the task's scheme, or exit 2 before anything is read
/// or logged.
pub(crate) fn check_partition(
    manifest: &Manifest,
    task: &str,
    partition: &str,
) -> Result<(), CliError> {
    check_partition_of(manifest, &[task], partition)
}

/// Refuses (exit 2) a partition in the scheme of none of `tasks`.
pub(crate) fn check_partition_of(
    manifest: &Manifest,
    tasks: &[&str],
    partition: &str,
) -> Result<(), CliError> {
    let now = crate::clock::now();
    if tasks
        .iter()
        .any(|t| manifest.tasks[*t].dims.contains(partition, now))
    {
        return Ok(());
    }
    let whose = match tasks {
        [task] => format!("task `{task}`"),
        _ => "any task".to_owned(),
    };
    Err(CliError::Usage(format!(
        "partition `{partition}` is not in the partition scheme of {whose}\n  help: {}",
        crate::plan::partition_help(manifest, tasks, now)
    )))
}

/// The task that publishes `dataset`, if `partition` is in its scheme: what
/// `show` and `history` need before they read a partition.
pub(crate) fn producer_of<'m>(
    manifest: &'m Manifest,
    dataset: &str,
    partition: &str,
) -> Result<&'m Task, CliError> {
    let task = publisher_of(manifest, dataset)?;
    check_partition(manifest, &task.name, partition)?;
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

/// For a Delta table output: an engine error (exit 5) naming what weir's
/// records of the partition lack that its table still shows (another
/// engine's VACUUM deleted them), so `show` and `history` do not say that
/// nothing was published.
pub(crate) fn records_whole(
    task: &Task,
    store: &crate::store::PartitionStore,
) -> Result<(), CliError> {
    if crate::store::delta::columns_of(task, store.partition()).is_none() {
        return Ok(());
    }
    match crate::store::delta::missing_records(store).map_err(CliError::engine)? {
        None => Ok(()),
        Some(what) => Err(CliError::engine(what)),
    }
}
