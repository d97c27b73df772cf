//! Fault injection, for tests and for rehearsing incidents. The edge reads
//! `WEIR_FAULT` and `WEIR_CHAOS` once into [`super::Settings`]; the points
//! act on the rules passed down to them.
//!
//! `WEIR_FAULT` holds comma-separated rules `POINT[@TASK[/PARTITION]][:ACTION]`:
//!
//! | point | where the engine is |
//! |---|---|
//! | `after_command` | the command exited 0, on the attempt's thread, before its output is listed |
//! | `audit` | the candidate's audit, on the thread that reads each of its files (a rayon worker when there are several; use `:panic` or `:crash`) |
//! | `after_candidate` | the candidate is written and audited, nothing committed |
//! | `before_commit` | the candidate's files are fsynced, the commit record not yet written |
//! | `after_commit` | the commit record is durable, the PUBLISHED event not yet written (a crash after the write, before its acknowledgement) |
//! | `before_event` | before any event line is written for the attempt's outcome |
//! | `commit_fsync` | the commit record is linked but the engine is told its directory fsync failed (EIO): an unknown outcome (use `:fail`) |
//! | `create_logs` | creating the attempt's `stdout.log` fails with ENOSPC (use `:fail`) |
//! | `rollback_commit` | `weir rollback` committed its record and has not yet announced it |
//! | `notify_deliver` | a notification is in the outbox (its fact durable) and about to be sent (`:fail` fails that try) |
//! | `write_marker` | writing an instance's HELD/QUARANTINED marker fails with ENOSPC (use `:fail`) |
//!
//! ACTION is `crash` (default: the engine kills itself with SIGKILL, as
//! `kill -9` would), `fail` (the attempt fails as an engine error) or
//! `panic` (the thread there panics, as a bug in weir or a library would:
//! the instance ends ENGINE_FAILED with the panic's message).
//! Example: `WEIR_FAULT=after_candidate@transform/2026-09-21:crash`.

/// A named point in the publish path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Point {
    AfterCommand,
    Audit,
    AfterCandidate,
    BeforeCommit,
    AfterCommit,
    BeforeEvent,
    CommitFsync,
    CreateLogs,
    RollbackCommit,
    WriteMarker,
    NotifyDeliver,
}

#[derive(Debug, Clone)]
struct Rule {
    point: Point,
    task: Option<String>,
    partition: Option<String>,
    action: Action,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Crash,
    Fail,
    Panic,
}

/// The parsed rules.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Vec<Rule>,
}

impl Faults {
    /// Parses rules (`WEIR_FAULT`'s value); unknown points are ignored with
    /// a warning.
    pub fn parse(text: &str) -> Faults {
        let mut rules = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (spec, action) = part.split_once(':').unwrap_or((part, "crash"));
            let (point, target) = spec
                .split_once('@')
                .map_or((spec, None), |(p, t)| (p, Some(t)));
            let point = match point {
                "after_command" => Point::AfterCommand,
                "audit" => Point::Audit,
                "after_candidate" => Point::AfterCandidate,
                "before_commit" => Point::BeforeCommit,
                "after_commit" => Point::AfterCommit,
                "before_event" => Point::BeforeEvent,
                "commit_fsync" => Point::CommitFsync,
                "create_logs" => Point::CreateLogs,
                "rollback_commit" => Point::RollbackCommit,
                "write_marker" => Point::WriteMarker,
                "notify_deliver" => Point::NotifyDeliver,
                other => {
                    tracing::warn!("WEIR_FAULT: unknown point `{other}` ignored");
                    continue;
                }
            };
            let (task, partition) = match target {
                Some(t) => match t.split_once('/') {
                    Some((task, p)) => (Some(task.to_string()), Some(p.to_string())),
                    None => (Some(t.to_string()), None),
                },
                None => (None, None),
            };
            rules.push(Rule {
                point,
                task,
                partition,
                action: match action {
                    "fail" => Action::Fail,
                    "panic" => Action::Panic,
                    _ => Action::Crash,
                },
            });
        }
        Faults { rules }
    }

    /// Acts on a rule matching this point: crashes the engine, panics, or
    /// returns `Err` for an injected failure.
    pub fn hit(&self, point: Point, task: &str, partition: &str) -> Result<(), String> {
        let rule = self.rules.iter().find(|r| {
            r.point == point
                && r.task.as_deref().is_none_or(|t| t == task)
                && r.partition.as_deref().is_none_or(|p| p == partition)
        });
        match rule.map(|r| r.action) {
            Some(Action::Crash) => crate::process::kill_self(),
            Some(Action::Panic) => panic!("injected panic at {point:?}"),
            Some(Action::Fail) => Err(format!("injected failure at {point:?}")),
            None => Ok(()),
        }
    }
}

/// Injected task failures: `WEIR_CHAOS=seed=7,transient=0.2,deterministic=0.05,operator=0.01`.
///
/// For each attempt the engine draws from an RNG seeded by the seed, the task,
/// the partition and (for transient faults) the attempt number, so the same
/// seed always fails the same attempts. A deterministic or operator fault
/// belongs to the instance (every attempt of it fails the same way); a
/// transient one to the attempt. An injected failure replaces the command:
/// the attempt ends as if the task had exited 75, 65 or 78.
#[derive(Debug, Clone, Default)]
pub struct Chaos {
    seed: u64,
    transient: f64,
    deterministic: f64,
    operator: f64,
}

impl Chaos {
    /// Parses `key=value` pairs (`WEIR_CHAOS`'s value); unknown keys are
    /// ignored with a warning. `None` when no fault has a rate.
    pub fn parse(text: &str) -> Option<Chaos> {
        let mut chaos = Chaos::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            match (key, value.parse::<f64>()) {
                ("seed", _) => chaos.seed = value.parse().unwrap_or(0),
                ("transient", Ok(p)) => chaos.transient = p,
                ("deterministic", Ok(p)) => chaos.deterministic = p,
                ("operator", Ok(p)) => chaos.operator = p,
                _ => tracing::warn!("WEIR_CHAOS: `{pair}` ignored"),
            }
        }
        (chaos.transient + chaos.deterministic + chaos.operator > 0.0).then_some(chaos)
    }

    fn draw(&self, parts: &[&str]) -> f64 {
        // FNV-1a: stable across processes and Rust versions, unlike DefaultHasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ self.seed;
        for part in parts {
            for b in part.bytes().chain(std::iter::once(0)) {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        fastrand::Rng::with_seed(hash).f64()
    }

    /// The exit code an attempt is made to end with, if any.
    pub fn exit_code(&self, task: &str, partition: &str, attempt: u32) -> Option<i32> {
        let instance = self.draw(&[task, partition]);
        if instance < self.deterministic {
            return Some(65);
        }
        if instance < self.deterministic + self.operator {
            return Some(78);
        }
        (self.draw(&[task, partition, &attempt.to_string()]) < self.transient).then_some(75)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_is_deterministic_per_seed_and_near_its_rates() {
        let chaos = Chaos::parse("seed=7,transient=0.2,deterministic=0.05").unwrap();
        let again = Chaos::parse("seed=7,transient=0.2,deterministic=0.05").unwrap();
        let keys: Vec<String> = (0..2000).map(|i| format!("p{i}")).collect();
        let codes: Vec<Option<i32>> = keys.iter().map(|k| chaos.exit_code("t", k, 1)).collect();
        let same: Vec<Option<i32>> = keys.iter().map(|k| again.exit_code("t", k, 1)).collect();
        assert_eq!(codes, same);
        let det = codes.iter().filter(|c| **c == Some(65)).count();
        let tra = codes.iter().filter(|c| **c == Some(75)).count();
        assert!((60..=140).contains(&det), "{det} deterministic of 2000");
        assert!((300..=460).contains(&tra), "{tra} transient of 2000");
        // A deterministic fault follows the instance into every attempt.
        for k in &keys {
            if chaos.exit_code("t", k, 1) == Some(65) {
                assert_eq!(chaos.exit_code("t", k, 2), Some(65));
            }
        }
        assert!(Chaos::parse("seed=1").is_none());
    }

    #[test]
    fn fault_rules_match_points_and_targets() {
        let f = Faults::parse("after_commit@load/2026-09-21:fail, before_event@extract:fail");
        assert!(f.hit(Point::AfterCommit, "load", "2026-09-21").is_err());
        assert!(f.hit(Point::AfterCommit, "load", "2026-09-20").is_ok());
        assert!(f.hit(Point::BeforeEvent, "extract", "any").is_err());
        assert!(f.hit(Point::AfterCandidate, "extract", "any").is_ok());
        let f = Faults::parse("audit@load:panic");
        let hit = std::panic::catch_unwind(|| f.hit(Point::Audit, "load", "p"));
        let message = hit.expect_err("a panic rule panics");
        assert_eq!(
            message.downcast_ref::<String>().map(String::as_str),
            Some("injected panic at Audit")
        );
        assert!(f.hit(Point::Audit, "extract", "p").is_ok());
    }
}
