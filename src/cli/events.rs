//! `weir events`: the event log, filtered; torn lines are reported, not fatal.

use super::args::EventsArgs;
use super::error::CliError;
use super::exit;
use crate::events::{read_all_in, read_run};
use crate::store::events::EventStore;

pub(crate) fn run(args: &EventsArgs) -> Result<u8, CliError> {
    let manifest = super::load(&args.manifest)?;
    // A filter naming no task or a key outside the scheme would print
    // nothing, as if nothing had happened: refused like `show` and
    // `explain` refuse them.
    match (&args.task, &args.partition) {
        (Some(task), partition) => {
            super::checks::check_task(&manifest, task)?;
            if let Some(p) = partition {
                super::checks::check_partition(&manifest, task, p)?;
            }
        }
        (None, Some(p)) => {
            let names: Vec<&str> = manifest.tasks.keys().map(String::as_str).collect();
            super::checks::check_partition_of(&manifest, &names, p)?;
        }
        (None, None) => {}
    }
    // A local warehouse is read where it is (nothing is created for it).
    let store = match manifest.pipeline.remote {
        None => EventStore::dir(&manifest.pipeline.warehouse),
        Some(_) => super::error::open(&manifest)?.events(),
    };
    // `_runs/<id>`: a path outside the warehouse is never read.
    if let Some(id) = &args.run_id {
        crate::events::check_run_id(id).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    let read = match &args.run_id {
        Some(id) => read_run(&store, id).transpose(),
        None => Some(read_all_in(&store)),
    };
    let Some(read) = read else {
        return Err(CliError::Usage(format!(
            "no run `{}` in {}\n  help: `weir events {}` prints every run's events with its run id",
            args.run_id.as_deref().unwrap_or_default(),
            store.location(),
            args.manifest.display()
        )));
    };
    let (records, bad) = read.map_err(super::error::doing("cannot read the event log"))?;
    for b in &bad {
        eprintln!(
            "warning: {}:{}: {}",
            b.path.display(),
            b.line,
            if b.torn {
                "torn last line (the engine stopped mid-write); ignored"
            } else {
                "not a valid event; ignored"
            }
        );
    }
    let keep = |r: &&crate::events::EventRecord| {
        args.task
            .as_ref()
            .is_none_or(|t| r.task.as_ref() == Some(t))
            && args
                .partition
                .as_ref()
                .is_none_or(|p| r.partition.as_ref() == Some(p))
    };
    let shown: Vec<&crate::events::EventRecord> = records.iter().filter(keep).collect();
    // Aligned columns: each as wide as its widest value.
    let width = |f: &dyn Fn(&crate::events::EventRecord) -> usize| {
        shown.iter().map(|r| f(r)).max().unwrap_or(0)
    };
    let w_run = width(&|r| r.run_id.len());
    let w_state = width(&|r| r.state.as_str().len());
    let w_task = width(&|r| r.task.as_deref().unwrap_or("-").len());
    let w_part = width(&|r| r.partition.as_deref().unwrap_or("-").len());
    for r in shown {
        if args.json {
            println!(
                "{}",
                serde_json::to_string(r).expect("an event always serializes")
            );
        } else {
            let line = format!(
                "{}  {:<w_run$}  {:<w_state$}  {:<w_task$}  {:<w_part$}  {:>3} {:>6}  {}",
                super::fixed_ts(&r.ts),
                r.run_id,
                r.state.as_str(),
                r.task.as_deref().unwrap_or("-"),
                r.partition.as_deref().unwrap_or("-"),
                r.attempt.map_or("-".to_string(), |a| a.to_string()),
                r.token.map_or("-".to_string(), |t| t.to_string()),
                r.detail
            );
            // An event without a detail (QUEUED) leaves no trailing spaces.
            println!("{}", crate::ops::printable(line.trim_end()));
        }
    }
    Ok(exit::OK)
}
