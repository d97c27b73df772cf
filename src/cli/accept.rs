//! `weir accept`: an operator decides that a partition will not be built
//! (see `ops::accept`).

use serde_json::json;

use super::args::AcceptArgs;
use super::error::{doing, CliError};
use super::exit;
use super::ops::{check_partition, check_task};
use crate::events::{Event, State};
use crate::partition::shell_word;
use crate::store::marks::{self, InstanceMark, Mark};

/// `weir accept`.
pub(crate) fn run(args: &AcceptArgs) -> Result<u8, CliError> {
    let manifest = super::error::load(&args.manifest)?;
    check_task(&manifest, &args.task)?;
    check_partition(&manifest, &args.task, &args.partition)?;
    let warehouse = super::error::open(&manifest)?;
    let task = &manifest.tasks[&args.task];
    let published = warehouse
        .partition(&task.output.dataset, &args.partition)
        .latest()
        .map_err(CliError::engine)?;
    if let Some(record) = published {
        return Err(CliError::Refused(format!(
            "refused: {} {} is published (generation {}); `weir accept` is for a partition that will not be built\n  help: `weir rollback` or `weir uncertify` act on a published one",
            args.task, args.partition, record.generation
        )));
    }
    let previous = marks::read(&warehouse, &args.task, &args.partition)
        .map_err(doing("cannot read the instance's marker"))?;
    if let Some(m) = previous.as_ref().filter(|m| m.mark == Mark::Accepted) {
        return Err(CliError::Refused(format!(
            "refused: {} {} is ACCEPTED already ({})\n  help: `weir retry {} {} --partition {} --note …` undoes it",
            args.task,
            args.partition,
            m.reason,
            shell_word(&args.manifest.display().to_string()),
            args.task,
            shell_word(&args.partition)
        )));
    }
    let log = crate::ops::operator_log(&warehouse)
        .map_err(doing("cannot open the operator's event log"))?;
    let mark = InstanceMark {
        mark: Mark::Accepted,
        task: args.task.clone(),
        partition: args.partition.clone(),
        run_id: log.run_id().to_string(),
        reason: format!("accepted as missing by an operator: {}", args.note),
        input_snapshot_digest: None,
        code_version: manifest.pipeline.code_version.clone(),
        code_fingerprint: None,
        since: crate::clock::now_rfc3339(),
        note: Some(args.note.clone()),
    };
    // The decision is on disk before the change it announces.
    log.emit_durable(
        State::Accepted,
        Event::instance(&args.task, &args.partition)
            .detail(format!("accepted as missing: {}", args.note))
            .data(json!({ "note": args.note, "dataset": task.output.dataset, "was": previous })),
    )
    .map_err(doing("cannot log the decision"))?;
    marks::write(&warehouse, &mark).map_err(doing("cannot record the decision"))?;
    println!(
        "accepted {} {} as missing: it is not built, and what reads it among other partitions runs without it, until `weir retry`",
        args.task, args.partition
    );
    Ok(exit::OK)
}
