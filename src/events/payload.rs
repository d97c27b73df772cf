//! Typed evidence: the `data` of the events that `weir explain` reads,
//! written by the engine and read back through the same types, so a field
//! cannot be renamed or dropped on one side only (the round-trip test below
//! and the engine's use of these types keep them together).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::State;

/// A command that ended without success (`FAILED` with an `ending`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandEnded {
    /// How it ended, in words.
    pub ending: String,
    /// Its exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// How long the command ran.
    pub duration_ms: u64,
    /// The last bytes of its stderr.
    pub stderr_tail: String,
}

/// A failure's class: what the scheduler gives it (docs/guides/tasks.md, "Exit codes and
/// failure classes"). Written in `RETRYING`, `HELD` and `QUARANTINED` events as its
/// name, as it always was, so old event logs read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FailureClass {
    /// `transient`: retried with backoff, up to the class's attempts.
    Transient,
    /// `deterministic`: fails alike on every attempt with this input;
    /// quarantined.
    Deterministic,
    /// `operator`: needs a person; held.
    Operator,
    /// A name this version does not know (written by another version),
    /// kept as written so that nothing is lost on reading.
    Other(String),
}

impl FailureClass {
    /// Its name in events and output.
    pub fn as_str(&self) -> &str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::Deterministic => "deterministic",
            FailureClass::Operator => "operator",
            FailureClass::Other(name) => name,
        }
    }
}

impl From<String> for FailureClass {
    fn from(name: String) -> Self {
        match name.as_str() {
            "transient" => FailureClass::Transient,
            "deterministic" => FailureClass::Deterministic,
            "operator" => FailureClass::Operator,
            _ => FailureClass::Other(name),
        }
    }
}

impl From<FailureClass> for String {
    fn from(class: FailureClass) -> String {
        match class {
            FailureClass::Other(name) => name,
            known => known.as_str().to_string(),
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `RETRYING`: the class and when the next attempt starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retrying {
    /// The failure class.
    pub class: FailureClass,
    /// Backoff before the next attempt.
    pub delay_ms: u64,
    /// Its number.
    pub next_attempt: u32,
}

/// `HELD` or `QUARANTINED` decided by the scheduler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    /// The failure class.
    pub class: FailureClass,
    /// Held because the run's retry budget was spent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_spent: bool,
}

/// `SKIPPED`: the upstream instance that did not publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// Its task.
    pub upstream_task: String,
    /// Its partition.
    pub upstream_partition: String,
}

/// `RUNNING`: what the attempt reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Running {
    /// Its input snapshot.
    pub input_snapshot: Value,
    /// The scheduler's job id, for an attempt run by an executor such as Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The first key of the batch its command ran for, if it ran in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// How many partitions that batch's command ran for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
}

/// The evidence of one event, by its state.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// FAILED (a command's end).
    Failed(CommandEnded),
    /// RETRYING.
    Retrying(Retrying),
    /// HELD or QUARANTINED.
    Decided(Decided),
    /// SKIPPED.
    Skipped(Skipped),
    /// RUNNING.
    Running(Running),
}

impl Payload {
    /// As the event's `data`.
    pub fn to_json(&self) -> Value {
        let value = match self {
            Payload::Failed(p) => serde_json::to_value(p),
            Payload::Retrying(p) => serde_json::to_value(p),
            Payload::Decided(p) => serde_json::to_value(p),
            Payload::Skipped(p) => serde_json::to_value(p),
            Payload::Running(p) => serde_json::to_value(p),
        };
        value.expect("payloads are plain data")
    }

    /// The payload of an event of `state` whose `data` is `data`; `None`
    /// when the state carries none of these or the data does not fit (an
    /// event without evidence, such as a FAILED that ran no command).
    pub fn read(state: State, data: &Value) -> Option<Payload> {
        let data = data.clone();
        match state {
            State::Failed => serde_json::from_value(data).ok().map(Payload::Failed),
            State::Retrying => serde_json::from_value(data).ok().map(Payload::Retrying),
            State::Held | State::Quarantined => {
                serde_json::from_value(data).ok().map(Payload::Decided)
            }
            State::Skipped => serde_json::from_value(data).ok().map(Payload::Skipped),
            State::Running => serde_json::from_value(data).ok().map(Payload::Running),
            _ => None,
        }
    }

    /// The state it belongs to (HELD for a decision).
    pub fn state(&self) -> State {
        match self {
            Payload::Failed(_) => State::Failed,
            Payload::Retrying(_) => State::Retrying,
            Payload::Decided(_) => State::Held,
            Payload::Skipped(_) => State::Skipped,
            Payload::Running(_) => State::Running,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn payload() -> impl Strategy<Value = Payload> {
        let text = "[a-zA-Z0-9 :|\\n]{0,40}";
        prop_oneof![
            (text, any::<Option<i32>>(), any::<Option<i32>>(), any::<u64>(), text).prop_map(
                |(ending, exit_code, signal, duration_ms, stderr_tail)| {
                    Payload::Failed(CommandEnded {
                        ending,
                        exit_code,
                        signal,
                        duration_ms,
                        stderr_tail,
                    })
                }
            ),
            (text, any::<u64>(), any::<u32>()).prop_map(|(class, delay_ms, next_attempt)| {
                Payload::Retrying(Retrying {
                    class: class.into(),
                    delay_ms,
                    next_attempt,
                })
            }),
            (text, any::<bool>()).prop_map(|(class, budget_spent)| {
                Payload::Decided(Decided {
                    class: class.into(),
                    budget_spent,
                })
            }),
            (text, text).prop_map(|(upstream_task, upstream_partition)| {
                Payload::Skipped(Skipped {
                    upstream_task,
                    upstream_partition,
                })
            }),
            (text, text, proptest::option::of(text), proptest::option::of(text)).prop_map(
                |(name, digest, job_id, batch)| {
                    Payload::Running(Running {
                        input_snapshot: serde_json::json!({"inputs": [{"name": name, "digest": digest}]}),
                        job_id,
                        batch_size: batch.as_ref().map(|b| b.len() as u32),
                        batch,
                    })
                }
            ),
        ]
    }

    /// Event logs written before the class was a type read as they did,
    /// and are written back the same.
    #[test]
    fn failure_classes_read_and_write_as_their_names() {
        for (name, class) in [
            ("transient", FailureClass::Transient),
            ("deterministic", FailureClass::Deterministic),
            ("operator", FailureClass::Operator),
            ("flaky", FailureClass::Other("flaky".into())),
        ] {
            let old = serde_json::json!({"class": name, "delay_ms": 1000, "next_attempt": 2});
            let Some(Payload::Retrying(read)) = Payload::read(State::Retrying, &old) else {
                panic!("{old} does not read");
            };
            assert_eq!(read.class, class);
            assert_eq!(read.class.to_string(), name);
            assert_eq!(Payload::Retrying(read).to_json(), old);
            let old = serde_json::json!({"class": name});
            let Some(Payload::Decided(read)) = Payload::read(State::Held, &old) else {
                panic!("{old} does not read");
            };
            assert_eq!((read.class, read.budget_spent), (class, false));
        }
        // A decision without a class is no decision (a restated marker).
        assert_eq!(Payload::read(State::Held, &serde_json::json!({})), None);
    }

    proptest! {
        // Evidence written by the engine reads back whole through
        // the same type, through the event log's JSON text.
        #[test]
        fn payloads_round_trip(p in payload()) {
            let text = serde_json::to_string(&p.to_json()).unwrap();
            let back = Payload::read(p.state(), &serde_json::from_str(&text).unwrap());
            prop_assert_eq!(back, Some(p));
        }
    }
}
