//! Operator decisions: retry, abandon, certify, uncertify, rollback. Each is
//! recorded as an event in an operator log (`_runs/op-…/events.jsonl`).

use serde_json::json;

use super::args::{CertifyArgs, DecisionArgs, ExplainArgs, RollbackArgs};
use super::{exit, load, report};
use crate::events::{Event, State};
use crate::exec::RunOptions;
use crate::manifest::Manifest;
use crate::ops::certify::{self as certs, Certification};
use crate::ops::state::{self, InstanceMark, Mark};
use crate::ops::{operator_log, rollback as rb};
use crate::plan::Scope;
use crate::store::Warehouse;

fn open(manifest: &Manifest) -> Result<Warehouse, u8> {
    Warehouse::open(&manifest.pipeline.warehouse).map_err(|e| {
        eprintln!("error: {e}");
        exit::ENGINE
    })
}

fn check_task(manifest: &Manifest, task: &str) -> Result<(), u8> {
    if manifest.tasks.contains_key(task) {
        return Ok(());
    }
    eprintln!(
        "error: unknown task `{task}`\n  help: {}",
        crate::manifest::unknown_task_help(manifest, task)
    );
    Err(exit::INVALID)
}

/// `weir retry`: clears the marker, records the note, runs the partition.
pub(crate) fn retry(args: &DecisionArgs) -> u8 {
    let Ok(manifest) = load(&args.manifest) else {
        return exit::INVALID;
    };
    if let Err(c) = check_task(&manifest, &args.task) {
        return c;
    }
    let Ok(warehouse) = open(&manifest) else {
        return exit::ENGINE;
    };
    let previous = state::read(warehouse.root(), &args.task, &args.partition);
    let log = match operator_log(warehouse.root()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot open the event log: {e}");
            return exit::ENGINE;
        }
    };
    if let Err(e) = state::clear(warehouse.root(), &args.task, &args.partition) {
        eprintln!("error: cannot release: {e}");
        return exit::ENGINE;
    }
    let _ = log.emit(
        State::Released,
        Event::instance(&args.task, &args.partition)
            .detail(format!(
                "released by an operator ({}): {}",
                previous.as_ref().map_or("not held", |m| m.mark.as_str()),
                args.note
            ))
            .data(json!({ "note": args.note, "was": previous })),
    );
    println!(
        "released {} {}; running the partition",
        args.task, args.partition
    );
    let options = RunOptions {
        scope: Scope::Partitions(vec![args.partition.clone()]),
        tasks: Vec::new(),
        force: false,
        run_id: None,
        seed: None,
        allow_uncertified: false,
    };
    super::run::execute(&manifest, &options)
}

/// `weir abandon`.
pub(crate) fn abandon(args: &DecisionArgs) -> u8 {
    let Ok(manifest) = load(&args.manifest) else {
        return exit::INVALID;
    };
    if let Err(c) = check_task(&manifest, &args.task) {
        return c;
    }
    let Ok(warehouse) = open(&manifest) else {
        return exit::ENGINE;
    };
    let Ok(log) = operator_log(warehouse.root()) else {
        return exit::ENGINE;
    };
    let previous = state::read(warehouse.root(), &args.task, &args.partition);
    let mark = InstanceMark {
        mark: Mark::Abandoned,
        task: args.task.clone(),
        partition: args.partition.clone(),
        run_id: log.run_id().to_string(),
        reason: format!("abandoned by an operator: {}", args.note),
        input_snapshot_digest: previous
            .as_ref()
            .and_then(|m| m.input_snapshot_digest.clone()),
        code_version: manifest.pipeline.code_version.clone(),
        since: crate::clock::now_rfc3339(),
        note: Some(args.note.clone()),
    };
    if let Err(e) = state::write(warehouse.root(), &mark) {
        eprintln!("error: cannot record the decision: {e}");
        return exit::ENGINE;
    }
    let _ = log.emit(
        State::Abandoned,
        Event::instance(&args.task, &args.partition)
            .detail(args.note.clone())
            .data(json!({ "note": args.note, "was": previous })),
    );
    println!(
        "abandoned {} {}: not run again until `weir retry`",
        args.task, args.partition
    );
    exit::OK
}

/// `weir certify` and `weir uncertify`.
pub(crate) fn certify(args: &CertifyArgs, certified: bool) -> u8 {
    let Ok(manifest) = load(&args.manifest) else {
        return exit::INVALID;
    };
    let Ok(warehouse) = open(&manifest) else {
        return exit::ENGINE;
    };
    let store = warehouse.partition(&args.dataset, &args.partition);
    let generation = match (args.generation, store.latest()) {
        (Some(g), _) => g,
        (None, Ok(Some(r))) => r.generation.get(),
        (None, Ok(None)) => {
            eprintln!(
                "error: `{}` has no published generation for partition {}",
                args.dataset, args.partition
            );
            return exit::REFUSED;
        }
        (None, Err(e)) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let record = match store.record(crate::store::Generation::from_raw(generation)) {
        Ok(Some(r)) => r,
        Ok(None) => {
            eprintln!(
                "error: `{}` {} has no generation {generation}",
                args.dataset, args.partition
            );
            return exit::REFUSED;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return exit::ENGINE;
        }
    };
    let Ok(log) = operator_log(warehouse.root()) else {
        return exit::ENGINE;
    };
    let mark = Certification {
        generation,
        certified,
        reason: args.reason.clone(),
        at: crate::clock::now_rfc3339(),
    };
    if let Err(e) = certs::write(warehouse.root(), &args.dataset, &args.partition, &mark) {
        eprintln!("error: cannot record the certification: {e}");
        return exit::ENGINE;
    }
    let _ = log.emit(
        if certified { State::Certified } else { State::Uncertified },
        Event::instance(&record.task, &args.partition)
            .detail(format!("{} generation {generation}: {}", args.dataset, args.reason))
            .data(json!({ "dataset": args.dataset, "generation": generation, "digest": record.digest })),
    );
    println!(
        "{} {} {} generation {generation}",
        if certified {
            "certified"
        } else {
            "uncertified"
        },
        args.dataset,
        args.partition
    );
    exit::OK
}

/// `weir explain`.
pub(crate) fn explain(args: &ExplainArgs) -> u8 {
    let Ok(manifest) = load(&args.manifest) else {
        return exit::INVALID;
    };
    if let Err(c) = check_task(&manifest, &args.task) {
        return c;
    }
    let Ok(warehouse) = open(&manifest) else {
        return exit::ENGINE;
    };
    let (events, bad) = match crate::events::read_all(warehouse.root()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot read the event log: {e}");
            return exit::ENGINE;
        }
    };
    for b in bad {
        eprintln!(
            "warning: {}:{}: unreadable event line ignored",
            b.path.display(),
            b.line
        );
    }
    let x =
        crate::ops::explain::explain(&manifest, &warehouse, &events, &args.task, &args.partition);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&x).expect("an explanation always serializes")
        );
    } else {
        print!("{}", crate::ops::explain::render(&x));
    }
    exit::OK
}

/// `weir rollback`.
pub(crate) fn rollback(args: &RollbackArgs) -> u8 {
    let Ok(manifest) = load(&args.manifest) else {
        return exit::INVALID;
    };
    let Ok(warehouse) = open(&manifest) else {
        return exit::ENGINE;
    };
    let Ok(log) = operator_log(warehouse.root()) else {
        return exit::ENGINE;
    };
    match rb::rollback(
        &manifest,
        &warehouse,
        &log,
        &args.dataset,
        &args.partition,
        args.to,
    ) {
        Ok(record) => {
            println!(
                "{} {}: generation {} now shows the files of generation {} ({} rows, {}); the instance is held until `weir retry`",
                args.dataset,
                args.partition,
                record.generation,
                match record.kind {
                    crate::store::CommitKind::Rollback { from_generation } => from_generation.get(),
                    crate::store::CommitKind::Publish => record.generation.get(),
                },
                record.rows,
                record.digest
            );
            exit::OK
        }
        Err(e) => {
            report(&e);
            match e {
                rb::RollbackError::Warehouse(_)
                | rb::RollbackError::Publish(crate::store::PublishError::Store(_)) => exit::ENGINE,
                _ => exit::REFUSED,
            }
        }
    }
}
