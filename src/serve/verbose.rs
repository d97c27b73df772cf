//! Serve's decisions at `-v` (or `WEIR_LOG=weir::serve=debug`): one
//! `debug!` record for each input the machine hears and each action it
//! takes, with the task, partition and occurrence as fields, so an operator
//! sees why serve admitted, started, waited for, watched or gave up on an
//! instance, and when it wakes next. The decision log on stdout says what
//! happened; this says what the machine was told and decided, including
//! the steps that change nothing visible (a recheck, a claim still held).
//!
//! Each function returns at once unless its records are wanted: the
//! default (quiet) serve builds no key, name or text for them.

use tracing::{debug, enabled, Level};

use super::due::Trigger;
use super::machine::{Action, Elsewhere, Input, Instance, MissedWhy, Readiness, TaskSpec, WakeFor};

/// The partition key of `occurrence` of `task`: a period's key, or
/// `@instant` for a firing or an upstream publication.
fn key(tasks: &[TaskSpec], task: usize, occurrence: i64) -> String {
    tasks[task]
        .trigger
        .key(occurrence)
        .unwrap_or_else(|| format!("@{}", super::due::instant(occurrence)))
}

fn name(tasks: &[TaskSpec], task: usize) -> &str {
    &tasks[task].name
}

/// What the machine hears, where it decides something.
pub(super) fn input(tasks: &[TaskSpec], input: &Input) {
    if !enabled!(Level::DEBUG) {
        return;
    }
    let of = |i: &Instance| (name(tasks, i.task), key(tasks, i.task, i.occurrence));
    match input {
        Input::Readiness(i, Readiness::NotYet { why, again_at }) => {
            let (task, partition) = of(i);
            let again = again_at.map(super::due::instant).unwrap_or_default();
            debug!(
                task,
                partition,
                occurrence = i.occurrence,
                again,
                "waiting for its inputs: {why}"
            );
        }
        Input::Readiness(i, Readiness::Ready) => {
            let (task, partition) = of(i);
            debug!(task, partition, occurrence = i.occurrence, "inputs ready");
        }
        Input::ClaimedElsewhere {
            instance, claimer, ..
        } => {
            let (task, partition) = of(instance);
            debug!(
                task,
                partition,
                occurrence = instance.occurrence,
                claimer,
                "watched: another engine holds its claim"
            );
        }
        Input::Watched(i, what) => {
            let (task, partition) = of(i);
            let what = match what {
                Elsewhere::Held { claimer, .. } => format!("still held by {claimer}"),
                Elsewhere::Free => "its claimer is dead: due here again".into(),
                Elsewhere::Settled => "settled elsewhere".into(),
                Elsewhere::Missed => "recorded MISSED elsewhere".into(),
            };
            debug!(
                task,
                partition,
                occurrence = i.occurrence,
                "watched: {what}"
            );
        }
        Input::Stop => debug!("stop requested: admitting nothing more"),
        Input::Clock(_)
        | Input::Readiness(_, Readiness::Failed(_))
        | Input::Published { .. }
        | Input::Finished { .. } => {}
    }
}

/// What the machine decided.
pub(super) fn action(tasks: &[TaskSpec], action: &Action) {
    if !enabled!(Level::DEBUG) {
        return;
    }
    match action {
        Action::Start {
            lane,
            instances,
            force,
        } => {
            for i in instances {
                let (task, partition) = (name(tasks, i.task), key(tasks, i.task, i.occurrence));
                debug!(
                    task,
                    partition,
                    occurrence = i.occurrence,
                    lane,
                    force,
                    "lane started"
                );
            }
        }
        Action::Missed {
            task,
            occurrence,
            why,
            ..
        } => {
            let partition = key(tasks, *task, *occurrence);
            let reason = match why {
                MissedWhy::Down => "serve was down when it was due".to_string(),
                MissedWhy::Waited(secs) => {
                    format!(
                        "its inputs were not ready within {}",
                        super::due::span(*secs)
                    )
                }
            };
            let task = name(tasks, *task);
            debug!(task, partition, occurrence, "given up as MISSED: {reason}");
        }
        Action::Dropped(i, why) => {
            let (task, partition) = (name(tasks, i.task), key(tasks, i.task, i.occurrence));
            debug!(task, partition, occurrence = i.occurrence, "dropped: {why}");
        }
        Action::Watch(i) => {
            let (task, partition) = (name(tasks, i.task), key(tasks, i.task, i.occurrence));
            debug!(
                task,
                partition,
                occurrence = i.occurrence,
                "looking at the claim held elsewhere"
            );
        }
        Action::Exit { stopped } => debug!(stopped, "exiting: no lane runs"),
        // The next wake-up is said by `wake_up`, when it changes.
        Action::WaitUntil(_) | Action::Check(_) | Action::Progress { .. } => {}
    }
}

/// The next wake-up, and what for.
pub(super) fn wake_up(tasks: &[TaskSpec], wake: Option<(i64, WakeFor)>) {
    if !enabled!(Level::DEBUG) {
        return;
    }
    let Some((at, what)) = wake else {
        debug!("next wake-up: none until an upstream publishes");
        return;
    };
    let until = super::due::instant(at);
    let (task, occurrence, what) = match what {
        WakeFor::Due(t) => {
            let occurrence = match &tasks[t].trigger {
                Trigger::Period { scheme, delay } => scheme.containing(at - delay) - 1,
                _ => at,
            };
            (t, occurrence, "due")
        }
        WakeFor::Recheck(t, o) => (t, o, "recheck its inputs"),
        WakeFor::GiveUp(t, o) => (t, o, "give up waiting"),
        WakeFor::Watch(t, o) => (t, o, "look at the claim held elsewhere"),
    };
    let partition = key(tasks, task, occurrence);
    let task = name(tasks, task);
    debug!(task, partition, occurrence, until, "next wake-up: {what}");
}
