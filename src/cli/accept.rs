//! `weir accept`: an operator decides that a partition will not be built
//! (see `ops::decide::accept`).

use super::args::AcceptArgs;
use super::checks::{check_partition, check_task};
use super::error::{doing, CliError};
use super::exit;
use crate::partition::shell_word;
use crate::store::marks::{self, Mark};

/// `weir accept`.
pub(crate) fn run(args: &AcceptArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
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
    crate::ops::decide::accept(
        &manifest,
        &warehouse,
        &args.task,
        &args.partition,
        &args.note,
        previous.as_ref(),
    )?;
    println!(
        "accepted {} {} as missing: it is not built, and what reads it among other partitions runs without it, until `weir retry`",
        args.task, args.partition
    );
    Ok(exit::OK)
}
