//! An operator's decisions, once for every front end: accept a gap,
//! abandon or release an instance, certify or uncertify a generation. Each
//! is an event in a fresh operator log (`_runs/op-…`), made durable before
//! the marker or certification it announces is written, so a crash between
//! the two leaves the decision on record and nothing unexplained.
//!
//! The checks that refuse a decision (an unknown task, an instance waiting
//! for no decision) stay with the caller, which words their help for its
//! own users; these functions only record.

use serde_json::json;

use super::impact::Impact;
use super::operator_log;
use crate::events::{Event, EventLog, State};
use crate::manifest::Manifest;
use crate::store::certs::{self, Certification};
use crate::store::marks::{self, InstanceMark, Mark};
use crate::store::{CommitRecord, Warehouse};

/// A decision that could not be recorded: what weir was doing, and why.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct DecisionError {
    /// What failed ("cannot log the decision").
    pub what: &'static str,
    /// Why.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

fn failed<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>>(
    what: &'static str,
) -> impl FnOnce(E) -> DecisionError {
    move |e| DecisionError {
        what,
        source: e.into(),
    }
}

fn open_log(warehouse: &Warehouse) -> Result<EventLog, DecisionError> {
    operator_log(warehouse).map_err(failed("cannot open the operator's event log"))
}

/// `accept`: an operator decides that `task`'s `partition` will not be
/// built (its source is lost for good). The instance gets an ACCEPTED
/// marker (replacing `previous`, if any): it is not run until `weir retry`
/// undoes the decision, and the planner does not add it as unpublished
/// upstream work (`plan::settled`). A downstream instance that reads it
/// among several partitions (a fan-in, a window, a rollup) is pinned
/// without it, and its commit record's input snapshot names it under
/// `accepted_missing`; one that reads only it (an identity or offset
/// mapping) stays blocked, since it would have nothing to build from.
pub fn accept(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
    note: &str,
    previous: Option<&InstanceMark>,
) -> Result<(), DecisionError> {
    let dataset = manifest.tasks.get(task).map(|t| t.output.dataset.as_str());
    let log = open_log(warehouse)?;
    let mark = InstanceMark {
        mark: Mark::Accepted,
        task: task.to_owned(),
        partition: partition.to_owned(),
        run_id: log.run_id().to_string(),
        reason: format!("accepted as missing by an operator: {note}"),
        input_snapshot_digest: None,
        code_version: manifest.pipeline.code_version.clone(),
        code_fingerprint: None,
        since: crate::clock::now_rfc3339(),
        note: Some(note.to_owned()),
    };
    log.emit_durable(
        State::Accepted,
        Event::instance(task, partition)
            .detail(format!("accepted as missing: {note}"))
            .data(json!({ "note": note, "dataset": dataset, "was": previous })),
    )
    .map_err(failed("cannot log the decision"))?;
    marks::write(warehouse, &mark).map_err(failed("cannot record the decision"))
}

/// `abandon`: `task`'s `partition`, marked `previous`, is not run again
/// until released.
pub fn abandon(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
    previous: &InstanceMark,
    note: &str,
) -> Result<(), DecisionError> {
    let log = open_log(warehouse)?;
    let mark = InstanceMark {
        mark: Mark::Abandoned,
        task: task.to_owned(),
        partition: partition.to_owned(),
        run_id: log.run_id().to_string(),
        reason: format!("abandoned by an operator: {note}"),
        input_snapshot_digest: previous.input_snapshot_digest.clone(),
        code_version: manifest.pipeline.code_version.clone(),
        code_fingerprint: previous.code_fingerprint.clone(),
        since: crate::clock::now_rfc3339(),
        note: Some(note.to_owned()),
    };
    log.emit_durable(
        State::Abandoned,
        Event::instance(task, partition)
            .detail(note.to_owned())
            .data(json!({ "note": note, "was": previous })),
    )
    .map_err(failed("cannot log the decision"))?;
    marks::write(warehouse, &mark).map_err(failed("cannot record the decision"))
}

/// `retry`'s decision: `task`'s `partition` loses its marker `previous`
/// (the caller then runs it).
pub fn release(
    warehouse: &Warehouse,
    task: &str,
    partition: &str,
    previous: &InstanceMark,
    note: &str,
) -> Result<(), DecisionError> {
    let log = open_log(warehouse)?;
    log.emit_durable(
        State::Released,
        Event::instance(task, partition)
            .detail(format!(
                "released by an operator ({}): {note}",
                previous.mark.as_str()
            ))
            .data(json!({ "note": note, "was": previous })),
    )
    .map_err(failed("cannot log the decision"))?;
    marks::clear(warehouse, task, partition).map_err(failed("cannot release the instance"))
}

/// `certify` / `uncertify` of the generation `record` of `dataset`'s
/// `partition`.
pub fn certify(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    record: &CommitRecord,
    certified: bool,
    reason: &str,
) -> Result<(), DecisionError> {
    let generation = record.generation.get();
    let log = open_log(warehouse)?;
    let mark = Certification {
        generation,
        certified,
        reason: reason.to_owned(),
        at: crate::clock::now_rfc3339(),
    };
    log.emit_durable(
        if certified {
            State::Certified
        } else {
            State::Uncertified
        },
        Event::instance(&record.task, partition)
            .detail(format!("{dataset} generation {generation}: {reason}"))
            .data(json!({ "dataset": dataset, "generation": generation, "digest": record.digest })),
    )
    .map_err(failed("cannot log the decision"))?;
    certs::write(warehouse, dataset, partition, &mark)
        .map_err(failed("cannot record the certification"))
}

/// `uncertify --cascade`: the generation `record` and every publication
/// `found` built from it, announced by one durable event that lists them
/// before any certification is written.
pub fn uncertify_cascade(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    record: &CommitRecord,
    found: &Impact,
    reason: &str,
) -> Result<(), DecisionError> {
    let mut all = vec![found.root.clone()];
    all.extend(found.built_from.iter().map(|b| b.id.clone()));
    let log = open_log(warehouse)?;
    let n = found.built_from.len();
    log.emit_durable(
        State::Uncertified,
        Event::instance(&record.task, partition)
            .detail(format!(
                "{} and the {n} {} built from it: {reason}",
                found.root,
                if n == 1 {
                    "publication"
                } else {
                    "publications"
                },
            ))
            .data(json!({
                "dataset": dataset,
                "generation": found.root.generation,
                "digest": found.digest,
                "cascade": all,
            })),
    )
    .map_err(failed("cannot log the decision"))?;
    let at = crate::clock::now_rfc3339();
    for id in &all {
        let mark = Certification {
            generation: id.generation,
            certified: false,
            reason: if *id == found.root {
                reason.to_owned()
            } else {
                format!("built from {}: {reason}", found.root)
            },
            at: at.clone(),
        };
        certs::write(warehouse, &id.dataset, &id.partition, &mark)
            .map_err(failed("cannot record the certification"))?;
    }
    Ok(())
}
