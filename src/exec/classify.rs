//! How an attempt's end is classified, and what that class gets.

pub use crate::events::payload::FailureClass;
pub use crate::manifest::ClusterEnd;
use crate::manifest::{Disposition, FailureRule, Manifest, RetryClass, Task};

/// How an attempt ended, before classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Exit code 0.
    Success,
    /// A non-zero exit code.
    Exit(i32),
    /// Killed by a signal (not ours).
    Signal(i32),
    /// Killed by us at its timeout.
    Timeout,
    /// Could not be started (program missing, not executable).
    SpawnFailed(String),
    /// Exited 0 but its candidate failed a gate or could not be read.
    GateFailed,
    /// The engine failed around the attempt (warehouse I/O, disk full).
    Engine(String),
    /// The scheduler ended the job (out of memory, node failure, preemption,
    /// cancelled by someone else).
    Cluster(ClusterEnd),
    /// The job could not see its attempt directory on its node: the
    /// warehouse is not on a shared filesystem.
    NotShared(String),
    /// An external input no longer held its pinned bytes when the attempt
    /// copied it: nothing ran; the next attempt pins the input again.
    InputMoved(String),
    /// The task's `code` could not be fingerprinted as its command launched,
    /// or changed while it ran: the output is not published as code it may
    /// not have come from; the next attempt runs the code as it is then.
    CodeMoved(String),
    /// The task's environment could not be built (a `file:` or `env:`
    /// reference of `env.set` cannot be read): nothing ran.
    Environment(String),
    /// weir was asked to stop (SIGINT, SIGTERM): the command's process tree
    /// was stopped, or the command never started.
    Interrupted(super::interrupt::Signal),
}

impl Ending {
    /// Short text for events and explain.
    pub fn describe(&self) -> String {
        match self {
            Ending::Success => "exit code 0".into(),
            Ending::Exit(c) => format!("exit code {c}"),
            Ending::Signal(s) => format!("killed by signal {s} (exit status {})", 128 + s),
            Ending::Cluster(end) => format!("ended by the scheduler: {}", end.name()),
            Ending::Timeout => "timed out".into(),
            Ending::SpawnFailed(why) => format!("could not start: {why}"),
            Ending::GateFailed => "gate failed".into(),
            Ending::Engine(why) => format!("engine error: {why}"),
            Ending::NotShared(why) | Ending::InputMoved(why) | Ending::CodeMoved(why) => {
                why.clone()
            }
            Ending::Environment(why) => format!("cannot build the environment: {why}"),
            Ending::Interrupted(sig) => format!("interrupted: weir received {}", sig.name()),
        }
    }
}

/// The rule that applies to an ending.
pub fn rule(task: &Task, ending: &Ending) -> FailureRule {
    match ending {
        Ending::Exit(code) => task
            .exit_codes
            .get(code)
            .cloned()
            .unwrap_or_else(|| FailureRule::Class(task.retry.clone())),
        Ending::Timeout => task.on_timeout.clone(),
        Ending::Cluster(end) => task
            .cluster_ends
            .get(end)
            .cloned()
            .unwrap_or_else(|| FailureRule::Class(task.retry.clone())),
        // Every job on this cluster will fail alike until someone fixes the
        // filesystem.
        // Every attempt fails alike until someone provides the secret.
        Ending::NotShared(_) | Ending::Environment(_) => FailureRule::Operator,
        // A gate failure reproduces on every attempt with the same input, and
        // a program that cannot start will not start on the next attempt.
        Ending::GateFailed | Ending::SpawnFailed(_) => FailureRule::Deterministic,
        // Disk full or a flaky mount may pass; retries are bounded anyway.
        // Never classified by the scheduler (an interrupted attempt ends
        // the instance INTERRUPTED); transient if it ever were.
        // A deploy in progress settles: the next attempt runs what landed.
        Ending::Engine(_)
        | Ending::InputMoved(_)
        | Ending::CodeMoved(_)
        | Ending::Interrupted(_) => FailureRule::Transient,
        Ending::Signal(_) | Ending::Success => FailureRule::Class(task.retry.clone()),
    }
}

/// What a rule gets, and under which retry class (for attempts and backoff).
pub fn resolve<'m>(
    manifest: &'m Manifest,
    task: &Task,
    rule: &FailureRule,
) -> (Disposition, &'m RetryClass, FailureClass) {
    let task_class = &manifest.retry[&task.retry];
    match rule {
        FailureRule::Transient => (Disposition::Retry, task_class, FailureClass::Transient),
        FailureRule::Deterministic => (
            Disposition::Quarantine,
            task_class,
            FailureClass::Deterministic,
        ),
        FailureRule::Operator => (Disposition::Hold, task_class, FailureClass::Operator),
        FailureRule::Class(name) => {
            let class = &manifest.retry[name];
            let kind = match class.on_failure {
                Disposition::Retry => FailureClass::Transient,
                Disposition::Quarantine => FailureClass::Deterministic,
                Disposition::Hold => FailureClass::Operator,
            };
            (class.on_failure, class, kind)
        }
    }
}

/// What a failed attempt gets next, decided from its disposition alone (no
/// I/O, no clock: the scheduler and the simulator share it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Another attempt, after the class's backoff.
    Retry,
    /// Retryable, but the run's retry budget is spent: held for an operator.
    BudgetSpent,
    /// Retryable, but its attempts ran out: the class's `on_exhausted`.
    Exhausted(Disposition),
    /// Not retryable: quarantined or held at once.
    Terminal(Disposition),
}

/// What attempt number `attempt` of `max_attempts`, failed with
/// `disposition`, gets; `take_budget` takes one retry from the run's
/// budget (asked only when a retry is due).
pub fn next(
    disposition: Disposition,
    attempt: u32,
    class: &RetryClass,
    take_budget: impl FnOnce() -> bool,
) -> Next {
    match disposition {
        Disposition::Retry if attempt < class.max_attempts => {
            if take_budget() {
                Next::Retry
            } else {
                Next::BudgetSpent
            }
        }
        Disposition::Retry => Next::Exhausted(class.on_exhausted),
        other => Next::Terminal(other),
    }
}

#[cfg(test)]
mod next_tests {
    use super::*;

    #[test]
    fn a_failure_is_retried_while_attempts_and_budget_last_then_gets_its_class_end() {
        let class = RetryClass::default_class();
        assert_eq!(next(Disposition::Retry, 1, &class, || true), Next::Retry);
        assert_eq!(
            next(Disposition::Retry, 2, &class, || false),
            Next::BudgetSpent
        );
        assert_eq!(
            next(Disposition::Retry, class.max_attempts, &class, || panic!(
                "no retry is due"
            )),
            Next::Exhausted(class.on_exhausted)
        );
        for d in [Disposition::Quarantine, Disposition::Hold] {
            assert_eq!(
                next(d, 1, &class, || panic!("no retry is due")),
                Next::Terminal(d)
            );
        }
    }
}
