//! `[executors.NAME]` and a task's `executor` / `resources`: where a task's
//! command runs (this machine, or a Slurm cluster) and what it asks for.

use std::time::Duration;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::validator::Validator;
use super::{Entry, ManifestError, ManifestErrorKind};

/// `[executors.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawExecutor {
    /// `local` (a child process of the engine, the default) or `slurm`
    /// (one `sbatch` job per attempt).
    #[serde(default)]
    pub kind: ExecutorKind,
    /// Extra scheduler options passed as they are, e.g.
    /// `["--partition=batch", "--account=data"]` (Slurm only).
    #[serde(default)]
    pub args: Vec<String>,
}

/// `resources = { ... }` of a task.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawResources {
    /// CPUs per attempt (`--cpus-per-task`).
    pub cpus: Option<i64>,
    /// Memory per attempt, e.g. "8G" (`--mem`; units K, M, G, T).
    pub memory: Option<String>,
    /// Scheduler time limit, e.g. "2h" (`--time`); at least the task's `timeout`.
    pub time: Option<String>,
    /// GPUs per attempt (`--gpus`).
    pub gpus: Option<i64>,
}

/// Where commands run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// A child process of the engine.
    #[default]
    Local,
    /// A Slurm batch job per attempt.
    Slurm,
}

/// How a scheduler ended a job, beyond exit codes and signals; the names
/// `exit_codes` accepts as keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterEnd {
    /// `OUT_OF_MEMORY`: over its memory request (default deterministic).
    OutOfMemory,
    /// `NODE_FAIL` / `BOOT_FAIL`: its node died (default transient).
    NodeFail,
    /// `PREEMPTED`: made room for another job (default transient).
    Preempted,
    /// `CANCELLED` by someone other than weir, e.g. `scancel` (default: the
    /// task's retry class, like a signal).
    Cancelled,
}

impl ClusterEnd {
    /// Every end, in the order docs/guides/tasks.md lists them.
    pub const ALL: [ClusterEnd; 4] = [
        ClusterEnd::OutOfMemory,
        ClusterEnd::NodeFail,
        ClusterEnd::Preempted,
        ClusterEnd::Cancelled,
    ];

    /// Its name in `exit_codes`.
    pub fn name(self) -> &'static str {
        match self {
            ClusterEnd::OutOfMemory => "out_of_memory",
            ClusterEnd::NodeFail => "node_fail",
            ClusterEnd::Preempted => "preempted",
            ClusterEnd::Cancelled => "cancelled",
        }
    }

    /// The name as written in `exit_codes`.
    pub fn from_name(name: &str) -> Option<ClusterEnd> {
        ClusterEnd::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// A validated executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Executor {
    /// Its kind.
    pub kind: ExecutorKind,
    /// Extra scheduler options.
    pub args: Vec<String>,
}

/// Name of the implicit local executor.
pub const LOCAL_EXECUTOR: &str = "local";

/// A task's validated resource request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// CPUs.
    pub cpus: Option<u32>,
    /// Memory as Slurm writes it ("8G").
    pub memory: Option<String>,
    /// Time limit.
    #[serde(skip_serializing_if = "Option::is_none", with = "opt_secs")]
    pub time: Option<Duration>,
    /// GPUs.
    pub gpus: Option<u32>,
}

mod opt_secs {
    use std::time::Duration;
    pub(super) fn serialize<S: serde::Serializer>(
        d: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs()),
            None => s.serialize_none(),
        }
    }
}

impl Resources {
    /// Nothing requested.
    pub fn is_empty(&self) -> bool {
        *self == Resources::default()
    }

    /// Slurm's flags for this request (`--time` in whole minutes, rounded up).
    pub fn sbatch_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(c) = self.cpus {
            flags.push(format!("--cpus-per-task={c}"));
        }
        if let Some(m) = &self.memory {
            flags.push(format!("--mem={m}"));
        }
        if let Some(t) = self.time {
            flags.push(format!("--time={}", t.as_secs().div_ceil(60).max(1)));
        }
        if let Some(g) = self.gpus {
            flags.push(format!("--gpus={g}"));
        }
        flags
    }

    /// "cpus=4 memory=8G time=2h0m gpus=1", or "-" when empty.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.cpus {
            parts.push(format!("cpus={c}"));
        }
        if let Some(m) = &self.memory {
            parts.push(format!("memory={m}"));
        }
        if let Some(t) = self.time {
            parts.push(format!("time={}s", t.as_secs()));
        }
        if let Some(g) = self.gpus {
            parts.push(format!("gpus={g}"));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }
}

/// "8G", "512M", "100" (MB): what `--mem` accepts.
fn memory_ok(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && matches!(&text[digits..], "" | "K" | "M" | "G" | "T")
}

impl Validator<'_, '_, '_, '_> {
    pub(super) fn executors(
        &mut self,
        entries: &[Entry<RawExecutor>],
    ) -> IndexMap<String, Executor> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            self.safe_name("executor", &entry.name, &["executors", &entry.name], true);
            out.insert(
                entry.name.clone(),
                Executor {
                    kind: raw.kind,
                    args: raw.args.clone(),
                },
            );
        }
        out.entry(LOCAL_EXECUTOR.into()).or_insert(Executor {
            kind: ExecutorKind::Local,
            args: Vec::new(),
        });
        out
    }

    /// A task's `resources`, checked; `timeout` is the task's attempt limit.
    pub(super) fn resources(
        &mut self,
        task: &str,
        raw: Option<&RawResources>,
        timeout: Duration,
        timeout_written: bool,
    ) -> Resources {
        let Some(raw) = raw else {
            return Resources::default();
        };
        let at = |k: &'static str| ["tasks", task, "resources", k];
        let count = |v: &mut Self, n: Option<i64>, key: &'static str| -> Option<u32> {
            let n = n?;
            match u32::try_from(n) {
                Ok(n @ 1..=100_000) => Some(n),
                _ => {
                    v.err(
                        ManifestError::new(
                            ManifestErrorKind::InvalidValue,
                            format!("`{key}` of task `{task}` is {n}"),
                        )
                        .at(v.value(&at(key)), "must be at least 1")
                        .help(format!(
                            "ask for a positive number of {key}, or leave `{key}` out"
                        )),
                    );
                    None
                }
            }
        };
        let cpus = count(self, raw.cpus, "cpus");
        let gpus = count(self, raw.gpus, "gpus");
        let memory = raw.memory.as_ref().and_then(|m| {
            if memory_ok(m) {
                Some(m.clone())
            } else {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::InvalidValue,
                        format!("`{m}` is not an amount of memory"),
                    )
                    .at(self.value(&at("memory")), "not an amount of memory")
                    .help("write a whole number and a unit K, M, G or T, e.g. \"8G\" or \"512M\""),
                );
                None
            }
        });
        let time = raw
            .time
            .as_deref()
            .map(|t| self.duration(Some(t), Duration::ZERO, &at("time")))
            .filter(|d| !d.is_zero());
        if let Some(t) = time {
            if t < timeout {
                let mut error = ManifestError::new(
                    ManifestErrorKind::TimeBelowTimeout,
                    format!(
                        "task `{task}` asks the scheduler for {} but its attempts may run {}",
                        super::duration::render(t),
                        super::duration::render(timeout)
                    ),
                )
                .at(self.value(&at("time")), "shorter than the timeout");
                if timeout_written {
                    error = error.also(self.value(&["tasks", task, "timeout"]), "the timeout");
                }
                self.err(error.help(
                    "the scheduler would kill the job before weir's timeout; raise `time` to at least the task's `timeout` (default 1h) or lower `timeout`",
                ));
            }
        }
        Resources {
            cpus,
            memory,
            time,
            gpus,
        }
    }
}
