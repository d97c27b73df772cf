//! Readiness as an engine asks it and as a reader knows it.
//!
//! ```text
//!  weir run, weir serve ── check ──► readiness::check (sensor commands run)
//!                                      └─► store::sensed: the answer, when it changed
//!  status, explain, report, console ── known ──► files and watermarks looked at now,
//!                                                a command sensor's last recorded answer
//!                                                (with who gave it and when), or
//!                                                "not checked yet"
//! ```
//!
//! A read never starts a process: a sensor command may take seconds (or
//! its full minute), and a console page that refreshes every few seconds
//! would start them one after another. Only tasks with a command sensor
//! have answers recorded; the others are known from their files alone.

use std::collections::HashSet;

use super::readiness::{self, NotReady, Readiness, SensorFailure};
use crate::manifest::{InputSource, Manifest, Ready, Task};
use crate::store::sensed::{self, Answer, SensorRecord};
use crate::store::Warehouse;

/// What the reason of a [`Known::Unchecked`] instance says, for a front end
/// that words its advice after it (`weir run` asks; nothing to put in place).
pub const NOT_CHECKED_YET: &str = "its sensor is not checked yet";

/// The first external input of `task` whose sensor is a command.
fn command_sensor(manifest: &Manifest, task: &Task) -> Option<String> {
    task.inputs
        .iter()
        .filter(|i| matches!(i.source, InputSource::External))
        .find(|i| {
            manifest
                .datasets
                .get(&i.dataset)
                .is_some_and(|d| matches!(d.ready, Some(Ready::Command(_))))
        })
        .map(|i| i.dataset.clone())
}

/// Whether `task` reads an external input whose sensor is a command: the
/// tasks whose answers are recorded (the others are known from files).
pub fn has_command_sensor(manifest: &Manifest, task: &Task) -> bool {
    command_sensor(manifest, task).is_some()
}

/// [`readiness::check`], for an engine about to run the instance (`by`: the
/// run id, or `serve`): its answer is recorded for readers when the task
/// has a command sensor. A record that cannot be written is a warning: the
/// engine decides with the answer it has; readers see an older one.
pub fn check(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &Task,
    partition: &str,
    by: &str,
) -> Readiness {
    let found = readiness::check(manifest, task, partition);
    if command_sensor(manifest, task).is_none() {
        return found;
    }
    let (answer, dataset, why) = match &found {
        Readiness::Ready => (Answer::Ready, None, String::new()),
        Readiness::NotYet(n) => (Answer::NotYet, Some(n.dataset.clone()), n.why.clone()),
        Readiness::Failed(f) => (Answer::Failed, Some(f.dataset.clone()), f.why.clone()),
    };
    let now = crate::clock::now_rfc3339();
    let record = SensorRecord {
        task: task.name.clone(),
        partition: partition.to_owned(),
        answer,
        dataset,
        why,
        by: by.to_owned(),
        since: now.clone(),
        checked_at: now,
    };
    if let Err(e) = sensed::record(warehouse, record) {
        tracing::warn!(
            "cannot record the sensor answer of {} {partition}: {}",
            task.name,
            crate::store::chain(&e)
        );
    }
    found
}

/// What a reader knows of an instance's external inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// Ready, as far as the files and the last recorded answer say.
    Ready,
    /// Not ready: a file missing now, or a sensor's last answer.
    NotYet(NotReady),
    /// A sensor failed (now, for a watermark; at its last answer, for a
    /// command), or its answer cannot be read.
    Failed(SensorFailure),
    /// The files are there, but no engine has asked the command sensor yet.
    Unchecked(NotReady),
}

/// What is known of `task` at `partition` without starting a process: its
/// files and watermarks looked at now, then a command sensor's last
/// recorded answer. `listed` (from [`sensed::listed`] of the task), when
/// given, spares a read for an instance without one.
pub fn known(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &Task,
    partition: &str,
    listed: Option<&HashSet<String>>,
) -> Known {
    match readiness::check_with(manifest, task, partition, false) {
        Readiness::Ready => {}
        Readiness::NotYet(n) => return Known::NotYet(n),
        Readiness::Failed(f) => return Known::Failed(f),
    }
    let Some(dataset) = command_sensor(manifest, task) else {
        return Known::Ready;
    };
    let unchecked = || {
        Known::Unchecked(NotReady {
            why: format!(
                "external input `{dataset}`: {NOT_CHECKED_YET} (status, explain and the console show only what `weir run` and `weir serve` found)"
            ),
            dataset: dataset.clone(),
        })
    };
    if listed.is_some_and(|l| !l.contains(&sensed::listed_name(partition))) {
        return unchecked();
    }
    let failed = |why: String| {
        Known::Failed(SensorFailure {
            dataset: dataset.clone(),
            why,
            exit_code: None,
            stderr: String::new(),
        })
    };
    match sensed::read(warehouse, &task.name, partition) {
        Ok(None) => unchecked(),
        Ok(Some(r)) => {
            let why = format!("{} ({})", r.why, as_of(&r));
            match r.answer {
                Answer::Ready => Known::Ready,
                Answer::NotYet => Known::NotYet(NotReady {
                    dataset: r.dataset.unwrap_or_else(|| dataset.clone()),
                    why,
                }),
                Answer::Failed => failed(why),
            }
        }
        Err(e) => failed(format!(
            "cannot read the last answer of the sensor of external input `{dataset}`: {}",
            crate::store::chain(&e)
        )),
    }
}

/// Who gave a recorded answer and when: "checked by run R at T", "…, the
/// same since S".
fn as_of(r: &SensorRecord) -> String {
    let who = if r.by == "serve" {
        "serve".to_owned()
    } else {
        format!("run {}", r.by)
    };
    if r.since == r.checked_at {
        format!("checked by {who} at {}", r.checked_at)
    } else {
        format!(
            "checked by {who} at {}, the same since {}",
            r.checked_at, r.since
        )
    }
}
