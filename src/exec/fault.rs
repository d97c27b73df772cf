//! Fault injection, for tests and for rehearsing incidents.
//!
//! `WEIR_FAULT` holds comma-separated rules `POINT[@TASK[/PARTITION]][:ACTION]`:
//!
//! | point | where the engine is |
//! |---|---|
//! | `after_candidate` | the candidate is written and audited, nothing committed |
//! | `before_commit` | the candidate's files are fsynced, the commit record not yet written |
//! | `after_commit` | the commit record is durable, the PUBLISHED event not yet written (a crash after the write, before its acknowledgement) |
//! | `before_event` | before any event line is written for the attempt's outcome |
//!
//! ACTION is `crash` (default: the engine kills itself with SIGKILL, as
//! `kill -9` would) or `fail` (the attempt fails as an engine error).
//! Example: `WEIR_FAULT=after_candidate@transform/2026-09-21:crash`.

/// A named point in the publish path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Point {
    AfterCandidate,
    BeforeCommit,
    AfterCommit,
    BeforeEvent,
}

#[derive(Debug, Clone)]
struct Rule {
    point: Point,
    task: Option<String>,
    partition: Option<String>,
    crash: bool,
}

/// The parsed rules.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Vec<Rule>,
}

impl Faults {
    /// Reads `WEIR_FAULT`; unknown points are ignored with a warning.
    pub fn from_env() -> Faults {
        std::env::var("WEIR_FAULT").map_or_else(|_| Faults::default(), |s| Faults::parse(&s))
    }

    /// Parses rules.
    pub fn parse(text: &str) -> Faults {
        let mut rules = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (spec, action) = part.split_once(':').unwrap_or((part, "crash"));
            let (point, target) = spec
                .split_once('@')
                .map_or((spec, None), |(p, t)| (p, Some(t)));
            let point = match point {
                "after_candidate" => Point::AfterCandidate,
                "before_commit" => Point::BeforeCommit,
                "after_commit" => Point::AfterCommit,
                "before_event" => Point::BeforeEvent,
                other => {
                    eprintln!("warning: WEIR_FAULT: unknown point `{other}` ignored");
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
                crash: action != "fail",
            });
        }
        Faults { rules }
    }

    /// Acts on a rule matching this point: crashes the engine, or returns
    /// `Err` for an injected failure.
    pub fn hit(&self, point: Point, task: &str, partition: &str) -> Result<(), String> {
        let rule = self.rules.iter().find(|r| {
            r.point == point
                && r.task.as_deref().is_none_or(|t| t == task)
                && r.partition.as_deref().is_none_or(|p| p == partition)
        });
        match rule {
            Some(r) if r.crash => {
                // SAFETY: signalling our own pid; the point is to die here.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                unreachable!("SIGKILL cannot be caught")
            }
            Some(_) => Err(format!("injected failure at {point:?}")),
            None => Ok(()),
        }
    }
}
