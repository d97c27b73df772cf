//! Operator decisions: retry, abandon, certify, uncertify, rollback. Each is
//! recorded as an event in an operator log (`_runs/op-…/events.jsonl`).

use super::args::{CertifyArgs, DecisionArgs, ExplainArgs, GcArgs, RollbackArgs, VerifyArgs};
use super::checks::{check_partition, check_task, producer_of};
use super::error::{doing, CliError};
use super::exit;
use crate::exec::RunOptions;
use crate::manifest::Manifest;
use crate::ops::{operator_log, rollback as rb};
use crate::partition::shell_word;
use crate::plan::Scope;
use crate::store::marks::{self as state, InstanceMark, Mark};
use crate::store::Warehouse;

/// The manifest and its warehouse.
fn setup(path: &std::path::Path) -> Result<(Manifest, Warehouse), CliError> {
    let manifest = super::load(path)?;
    let warehouse = super::error::open(&manifest)?;
    Ok((manifest, warehouse))
}

/// The manifest and its warehouse, for a command that only reads: nothing
/// is created for a warehouse that does not exist.
fn setup_to_read(path: &std::path::Path) -> Result<(Manifest, Warehouse), CliError> {
    let manifest = super::load(path)?;
    let warehouse = super::error::open_to_read(&manifest)?;
    Ok((manifest, warehouse))
}

/// The operator's event log, or why it cannot be opened.
fn open_operator_log(
    warehouse: &crate::store::Warehouse,
) -> Result<crate::events::EventLog, CliError> {
    operator_log(warehouse).map_err(doing("cannot open the operator's event log"))
}

/// The instance's marker when it is one of `accepted`; an operator decision
/// about an instance that waits for none is refused (exit 3).
fn check_marker(
    manifest: &Manifest,
    warehouse: &Warehouse,
    args: &DecisionArgs,
    accepted: &[Mark],
    verb: &str,
) -> Result<InstanceMark, CliError> {
    let found = state::read(warehouse, &args.task, &args.partition)
        .map_err(doing("cannot read the instance's marker"))?;
    // A run held it for an external file it could not pin: no marker, so
    // the run that finds the file is what releases it.
    let absent = match &found {
        None => manifest.tasks.get(&args.task).and_then(|t| {
            match crate::exec::readiness::check(manifest, t, &args.partition) {
                crate::exec::readiness::Readiness::NotYet(n) => Some(n.why),
                _ => None,
            }
        }),
        Some(_) => None,
    };
    let accepted_marks = accepted
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(" or ");
    match (found, absent) {
        (Some(m), _) if accepted.contains(&m.mark) => Ok(m),
        (None, Some(absent)) => Err(CliError::Refused(format!(
            "refused: {} {} waits for its input, not for a decision: {absent}; `weir {verb}` acts only on a {} instance\n  help: put it in place, then `weir run {} --task {} --partition {}`",
            args.task,
            args.partition,
            accepted_marks,
            shell_word(&args.manifest.display().to_string()),
            args.task,
            shell_word(&args.partition)
        ))),
        (found, _) => {
            let what = found.map_or("neither held nor quarantined".to_string(), |m| {
                format!("{} already", m.mark.as_str())
            });
            Err(CliError::Refused(format!(
                "refused: {} {} is {what}; `weir {verb}` acts only on a {} instance\n  help: `weir status` lists them; `weir run {} --task {} --partition {} --force` reruns a published one",
                args.task,
                args.partition,
                accepted_marks,
                shell_word(&args.manifest.display().to_string()),
                args.task,
                shell_word(&args.partition)
            )))
        }
    }
}

/// `weir retry`: clears the marker, records the note, runs that instance
/// and its downstream instances in that partition.
pub(crate) fn retry(args: &DecisionArgs) -> Result<u8, CliError> {
    let (manifest, warehouse) = setup(&args.manifest)?;
    check_task(&manifest, &args.task)?;
    check_partition(&manifest, &args.task, &args.partition)?;
    let previous = check_marker(
        &manifest,
        &warehouse,
        args,
        &[
            Mark::Held,
            Mark::Quarantined,
            Mark::Abandoned,
            Mark::Accepted,
        ],
        "retry",
    )?;
    crate::ops::decide::release(
        &warehouse,
        &args.task,
        &args.partition,
        &previous,
        &args.note,
    )?;
    println!(
        "released {} {}; running it and the downstream partitions that read it",
        args.task, args.partition
    );
    let options = RunOptions {
        scope: Scope::Partitions(vec![args.partition.clone()]),
        tasks: vec![format!("{}+", args.task)],
        force: false,
        resume_since: None,
        run_id: None,
        seed: None,
        allow_uncertified: false,
        wait: None,
        settings: super::settings().clone(),
        signed: None,
    };
    super::run::execute(&manifest, &options)
}

/// `weir abandon`.
pub(crate) fn abandon(args: &DecisionArgs) -> Result<u8, CliError> {
    let (manifest, warehouse) = setup(&args.manifest)?;
    check_task(&manifest, &args.task)?;
    check_partition(&manifest, &args.task, &args.partition)?;
    let previous = check_marker(
        &manifest,
        &warehouse,
        args,
        &[Mark::Held, Mark::Quarantined],
        "abandon",
    )?;
    crate::ops::decide::abandon(
        &manifest,
        &warehouse,
        &args.task,
        &args.partition,
        &previous,
        &args.note,
    )?;
    println!(
        "abandoned {} {}: not run again until `weir retry`",
        args.task, args.partition
    );
    Ok(exit::OK)
}

/// `weir certify` and `weir uncertify`.
pub(crate) fn certify(args: &CertifyArgs, certified: bool) -> Result<u8, CliError> {
    match (args.cascade, certified) {
        (true, false) => return super::impact::uncertify_cascade(args),
        (true, true) => {
            return Err(CliError::Usage(
                "--cascade is for `weir uncertify`: certify each generation on its own\n  help: `weir impact` lists what was built from a generation".into(),
            ))
        }
        _ => {}
    }
    let (manifest, warehouse) = setup(&args.manifest)?;
    producer_of(&manifest, &args.dataset, &args.partition)?;
    let store = warehouse.partition(&args.dataset, &args.partition);
    let generation = match args.generation {
        Some(g) => g,
        None => match store.latest().map_err(CliError::engine)? {
            Some(r) => r.generation.get(),
            None => {
                return Err(CliError::Refused(format!(
                    "`{}` has no published generation for partition {}",
                    args.dataset, args.partition
                )))
            }
        },
    };
    let record = store
        .record(crate::store::Generation::from_raw(generation))
        .map_err(CliError::engine)?
        .map_or_else(
            || {
                let last = store.latest().map_err(CliError::engine)?;
                Err(super::checks::no_generation(
                    &args.dataset,
                    &args.partition,
                    generation,
                    last.map(|r| r.generation.get()),
                ))
            },
            Ok,
        )?;
    crate::ops::decide::certify(
        &warehouse,
        &args.dataset,
        &args.partition,
        &record,
        certified,
        &args.reason,
    )?;
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
    Ok(exit::OK)
}

/// `weir explain`.
pub(crate) fn explain(args: &ExplainArgs) -> Result<u8, CliError> {
    let (manifest, warehouse) = setup_to_read(&args.manifest)?;
    check_task(&manifest, &args.task)?;
    check_partition(&manifest, &args.task, &args.partition)?;
    let (events, bad) = crate::events::read_all_in(&warehouse.events())
        .map_err(doing("cannot read the event log"))?;
    for b in bad {
        eprintln!(
            "warning: {}:{}: unreadable event line ignored",
            b.path.display(),
            b.line
        );
    }
    let x =
        crate::ops::explain::explain(&manifest, &warehouse, &events, &args.task, &args.partition)
            .map_err(CliError::engine)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&x).expect("an explanation always serializes")
        );
    } else {
        print!("{}", crate::ops::explain::render(&x));
    }
    Ok(exit::OK)
}

/// `weir rollback`.
pub(crate) fn rollback(args: &RollbackArgs) -> Result<u8, CliError> {
    let (manifest, warehouse) = setup(&args.manifest)?;
    producer_of(&manifest, &args.dataset, &args.partition)?;
    let log = open_operator_log(&warehouse)?;
    let record = rb::rollback(
        &manifest,
        &warehouse,
        &log,
        &args.dataset,
        &args.partition,
        args.to,
        &super::settings().faults,
    )?;
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
    Ok(exit::OK)
}

/// `weir gc`: a dry run unless `--apply`.
pub(crate) fn gc(args: &GcArgs) -> Result<u8, CliError> {
    use crate::ops::gc::{self, GcOptions};
    let manifest = super::load(&args.manifest)?;
    // A dry run only reads; --apply logs its deletions.
    let warehouse = if args.apply {
        super::error::open(&manifest)?
    } else {
        super::error::open_to_read(&manifest)?
    };
    let older_than = older_than(args, &manifest)?;
    let options = GcOptions {
        older_than,
        keep_generations: args.keep_generations,
    };
    let gc::GcPlan {
        items,
        unreadable,
        uploads,
    } = gc::plan(&warehouse, &options).map_err(CliError::engine)?;
    let (delete, keep): (Vec<_>, Vec<_>) = items.iter().partition(|i| i.decision.is_delete());
    print_gc_decisions(args.apply, &items, &uploads);
    let to_abort = uploads.iter().filter(|u| u.decision.is_delete()).count();
    let bytes: u64 = delete.iter().map(|i| i.bytes).sum();
    if !args.apply {
        println!(
            "dry run: {} candidate director{} ({}) would be deleted, {} kept; rerun with --apply to delete",
            delete.len(),
            if delete.len() == 1 { "y" } else { "ies" },
            super::human_bytes(bytes),
            keep.len()
        );
        if !uploads.is_empty() {
            println!(
                "dry run: {to_abort} incomplete upload{} would be aborted, {} kept",
                if to_abort == 1 { "" } else { "s" },
                uploads.len() - to_abort
            );
        }
        return Ok(gc_outcome(&unreadable));
    }
    let (log, n) = warehouse.with_reserve_released(|| {
        let log = open_operator_log(&warehouse)?;
        let n = gc::apply(&warehouse, &log, &options, &items).map_err(CliError::engine)?;
        Ok::<_, CliError>((log, n))
    })?;
    println!(
        "deleted {n} candidate director{}, {} kept",
        if n == 1 { "y" } else { "ies" },
        items.len() - n
    );
    if !uploads.is_empty() {
        let a = gc::abort_uploads(&warehouse, &log, &uploads).map_err(CliError::engine)?;
        println!(
            "aborted {a} incomplete upload{}, {} kept",
            if a == 1 { "" } else { "s" },
            uploads.len() - a
        );
    }
    Ok(gc_outcome(&unreadable))
}

/// How old a candidate directory must be for gc to delete it: as asked,
/// else twice the longest a task may run and hold its lease, at least a day.
fn older_than(args: &GcArgs, manifest: &Manifest) -> Result<std::time::Duration, CliError> {
    Ok(match &args.older_than {
        Some(text) => match crate::manifest::duration::parse(text) {
            Ok(d) => d,
            Err(why) => {
                return Err(CliError::Usage(format!(
                    "--older-than: {why}\n  help: write a duration such as \"48h\" or \"7d\""
                )));
            }
        },
        None => {
            let longest = manifest
                .tasks
                .values()
                .map(|t| t.timeout.saturating_add(crate::exec::lease::timeout(t)))
                .max()
                .unwrap_or_default();
            longest
                .saturating_mul(2)
                .max(std::time::Duration::from_secs(24 * 3600))
        }
    })
}

/// What gc does, or would do, with each directory and incomplete upload.
fn print_gc_decisions(
    apply: bool,
    items: &[crate::ops::gc::GcItem],
    uploads: &[crate::ops::gc::GcUpload],
) {
    use crate::ops::gc::GcDecision;
    for item in items {
        let (verb, reason) = match &item.decision {
            GcDecision::Delete { reason } => {
                (if apply { "delete" } else { "would delete" }, reason)
            }
            GcDecision::Keep { reason } => ("keep", reason),
        };
        println!(
            "{verb:<12} {} ({}): {reason}",
            item.path.display(),
            super::human_bytes(item.bytes)
        );
    }
    for u in uploads {
        let verb = match (&u.decision, apply) {
            (GcDecision::Delete { .. }, true) => "abort",
            (GcDecision::Delete { .. }, false) => "would abort",
            (GcDecision::Keep { .. }, _) => "keep",
        };
        println!(
            "{verb:<12} upload {} of {}: {}",
            u.upload.id,
            u.upload.key,
            u.decision.reason()
        );
    }
}

/// Success, unless a partition was kept whole because its commit log
/// cannot be read (each is reported): kept whole, but not a success, as
/// nothing proves what they need.
fn gc_outcome(unreadable: &[crate::ops::gc::UnreadableLog]) -> u8 {
    for u in unreadable {
        eprintln!(
            "error: {} {}: cannot read its commit log, so gc kept everything under it: {}",
            u.dataset, u.partition, u.why
        );
    }
    if unreadable.is_empty() {
        exit::OK
    } else {
        exit::ENGINE
    }
}

/// `weir verify`.
pub(crate) fn verify(args: &VerifyArgs) -> Result<u8, CliError> {
    let (manifest, warehouse) = setup_to_read(&args.manifest)?;
    // An unknown task is verify's own diagnostic (it lists the tasks).
    if manifest.tasks.contains_key(&args.task) {
        check_partition(&manifest, &args.task, &args.partition)?;
    }
    let r = crate::ops::verify::verify(&manifest, &warehouse, &args.task, &args.partition)?;
    println!(
        "{} {} generation {}: published {} ({} rows), rerun {} ({} rows)",
        r.task, r.partition, r.generation, r.published_digest, r.rows.0, r.rerun_digest, r.rows.1
    );
    println!("scratch: {}", r.scratch.display());
    let table_ok = match &r.table {
        None => true,
        Some(Ok(())) => {
            println!(
                "delta table: shows generation {}'s files of this partition",
                r.generation
            );
            true
        }
        Some(Err(detail)) => {
            println!("DELTA TABLE DISAGREES: {detail}; `weir tables sync` repairs it");
            false
        }
    };
    if r.deterministic {
        println!("deterministic: the rerun from the pinned inputs has the published digest");
        Ok(if table_ok { exit::OK } else { exit::ATTENTION })
    } else {
        println!("NOT deterministic: the rerun from the same inputs differs");
        for d in &r.differences {
            println!("  {d}");
        }
        Ok(exit::TASK_FAILED)
    }
}
