//! `[tasks.NAME]`: the raw task as written (its inputs, with their
//! `offset`/`window` overrides, its output and its `partitioned_by`) and its
//! validation into a [`Task`].

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use indexmap::IndexMap;

use super::model::*;
use super::suggest::closest;
use super::validator::{Names, Validator};
use super::{ticked, ManifestError, ManifestErrorKind};

/// The shortest lease heartbeat accepted: a lease expires after 3 missed
/// beats, and a loaded machine delays a thread by tens of milliseconds.
pub(super) const MIN_HEARTBEAT: Duration = Duration::from_millis(100);

mod batch;
mod mappings;
mod raw;
mod table;

pub use raw::{RawBatch, RawInput, RawOutput, RawTask};

impl Validator<'_, '_, '_, '_> {
    pub(super) fn task(
        &mut self,
        name: &str,
        raw: &RawTask,
        names: &Names,
        outputs: &HashMap<String, String>,
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> Option<Task> {
        let errors_before = self.errors.len();
        let p = |k: &'static str| vec!["tasks", name, k];
        if self.safe_name("task", name, &["tasks", name], true) {
            self.name_fits("task", name, &["tasks", name], true);
        }
        self.check_command(name, raw);
        let (inputs, depends_on) = self.task_inputs(name, raw, names, outputs);
        let output = self.output(name, raw);
        let (partitioned_by, dims) = self.partition_dims(name, raw, names, schemes);
        self.check_depends_on_past(name, raw, &partitioned_by, &dims);
        let batch = self.batch(name, raw, &dims);
        let pool = raw.pool.clone().unwrap_or_else(|| "default".into());
        if raw.pool.is_some() {
            self.reference("pool", &pool, &names.pools, &p("pool"));
        }
        let retry = raw.retry.clone().unwrap_or_else(|| "default".into());
        if raw.retry.is_some() {
            self.reference("retry class", &retry, &names.retry, &p("retry"));
        }
        let timeout = self.duration(
            raw.timeout.as_deref(),
            Duration::from_secs(3600),
            &p("timeout"),
        );
        let executor = raw.executor.clone().unwrap_or_else(|| "local".into());
        if raw.executor.is_some() {
            self.reference("executor", &executor, &names.executors, &p("executor"));
        }
        let resources =
            self.resources(name, raw.resources.as_ref(), timeout, raw.timeout.is_some());
        let heartbeat = self.heartbeat(name, raw);
        let expected_duration = self.duration(
            raw.expected_duration.as_deref(),
            Duration::from_secs(60),
            &p("expected_duration"),
        );
        let sla = raw
            .sla
            .as_deref()
            .map(|s| self.duration(Some(s), Duration::ZERO, &p("sla")));
        let slo = self.slo(name, raw);
        let delay = raw.delay.as_deref().map_or(Duration::ZERO, |s| {
            self.duration(Some(s), Duration::ZERO, &p("delay"))
        });
        let wait = raw
            .wait
            .as_deref()
            .map(|s| self.duration(Some(s), Duration::ZERO, &p("wait")));
        let schedule = self.task_schedule(name, raw, schemes, &dims);
        let (exit_codes, cluster_ends) = self.exit_codes(name, raw, names);
        let on_timeout = self.on_timeout(name, raw, names);
        let gates = self.task_gates(name, raw);
        self.check_code(name, raw);
        let env = self.task_env(name, raw.env.as_ref());
        if self.errors.len() > errors_before {
            return None;
        }
        Some(Task {
            env,
            code_version: raw
                .code_version
                .clone()
                .unwrap_or_else(|| self.pipeline_code_version.clone()),
            code: raw.code.clone(),
            name: name.to_string(),
            command: raw.command.clone(),
            inputs,
            output,
            depends_on,
            partitioned_by,
            dims,
            pool,
            executor,
            resources,
            timeout,
            heartbeat,
            retry,
            exit_codes,
            cluster_ends,
            on_timeout,
            gates,
            expected_duration,
            depends_on_past: raw.depends_on_past,
            batch,
            sla,
            slo,
            delay,
            wait,
            rerun: rerun(raw.rerun),
            schedule,
        })
    }

    /// A task needs a program to run.
    fn check_command(&mut self, name: &str, raw: &RawTask) {
        let p = |k: &'static str| vec!["tasks", name, k];
        if raw.command.is_empty() || raw.command[0].trim().is_empty() {
            self.err(
                ManifestError::new(ManifestErrorKind::EmptyValue, format!("task `{name}` has an empty command"))
                    .at(self.value(&p("command")), "empty")
                    .help("give the program and its arguments, e.g. `command = [\"python3\", \"load.py\"]`"),
            );
        }
    }

    /// `depends_on_past` needs an ordered scheme: static keys have no
    /// previous partition.
    fn check_depends_on_past(
        &mut self,
        name: &str,
        raw: &RawTask,
        partitioned_by: &[String],
        dims: &Dims,
    ) {
        let p = |k: &'static str| vec!["tasks", name, k];
        if raw.depends_on_past && dims.time_dim().is_none() && dims.0.len() == partitioned_by.len()
        {
            let what = match partitioned_by {
                [] => "no partition scheme".to_string(),
                [one] => format!("static scheme `{one}`"),
                many => format!("static schemes {}", ticked(many)),
            };
            self.err(
                ManifestError::new(ManifestErrorKind::InvalidValue, format!("task `{name}` sets `depends_on_past` on {what}"))
                    .at(self.value(&p("depends_on_past")), "needs an ordered (daily) scheme")
                    .help("static keys have no \"previous\" partition; remove `depends_on_past` or use a time scheme (daily, weekly …)"),
            );
        }
    }

    /// The lease heartbeat, never below [`MIN_HEARTBEAT`].
    fn heartbeat(&mut self, name: &str, raw: &RawTask) -> Duration {
        let p = |k: &'static str| vec!["tasks", name, k];
        let mut heartbeat = self.duration(
            raw.heartbeat.as_deref(),
            Duration::from_secs(10),
            &p("heartbeat"),
        );
        if heartbeat < MIN_HEARTBEAT {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::HeartbeatTooShort,
                    format!(
                        "heartbeat `{}` is shorter than the minimum of 100ms",
                        raw.heartbeat.as_deref().unwrap_or_default()
                    ),
                )
                .at(self.value(&p("heartbeat")), "below 100ms")
                .help("a lease expires after 3 missed heartbeats; below 100ms a busy machine's scheduling delays look like a dead engine and cause false takeovers: use \"1s\" or more"),
            );
            heartbeat = MIN_HEARTBEAT;
        }
        heartbeat
    }

    /// The cron schedule, read in the zone of the pipeline's time scheme
    /// (UTC without one).
    fn task_schedule(
        &mut self,
        name: &str,
        raw: &RawTask,
        schemes: &IndexMap<String, PartitionScheme>,
        dims: &Dims,
    ) -> Option<crate::cron::Schedule> {
        let p = |k: &'static str| vec!["tasks", name, k];
        raw.schedule.as_deref().and_then(|text| {
            let zone = schemes
                .values()
                .find_map(PartitionScheme::time)
                .map_or("UTC", |t| t.zone.name());
            self.schedule(name, text, zone, dims, &p("schedule"))
        })
    }

    /// What a timeout counts as (transient unless the task says).
    fn on_timeout(&mut self, name: &str, raw: &RawTask, names: &Names) -> FailureRule {
        let p = |k: &'static str| vec!["tasks", name, k];
        match &raw.on_timeout {
            Some(text) => self
                .failure_rule(text, names, &p("on_timeout"))
                .unwrap_or(FailureRule::Transient),
            None => FailureRule::Transient,
        }
    }

    /// The task's gates, each checked against the datasets it reads.
    fn task_gates(&mut self, name: &str, raw: &RawTask) -> Vec<crate::audit::Gate> {
        let input_names: Vec<String> = raw.inputs.iter().map(|i| i.dataset.clone()).collect();
        raw.gates
            .iter()
            .enumerate()
            .filter_map(|(i, g)| self.gate(name, i, g, &input_names))
            .collect()
    }

    /// The task's code paths, and its `code_version`, when given, not blank.
    fn check_code(&mut self, name: &str, raw: &RawTask) {
        self.code_paths(name, raw);
        let p = |k: &'static str| vec!["tasks", name, k];
        if raw
            .code_version
            .as_deref()
            .is_some_and(|v| v.trim().is_empty())
        {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::EmptyValue,
                    format!("task `{name}` has an empty `code_version`"),
                )
                .at(self.value(&p("code_version")), "empty")
                .help("give a version such as \"2026.09.2\", or remove it to use the pipeline's"),
            );
        }
    }

    /// The task's inputs, each an external dataset or another task's
    /// output, and the tasks it depends on (those it reads, then its own
    /// `depends_on`).
    fn task_inputs(
        &mut self,
        name: &str,
        raw: &RawTask,
        names: &Names,
        outputs: &HashMap<String, String>,
    ) -> (Vec<Input>, Vec<String>) {
        let mut inputs = Vec::new();
        let mut depends_on: Vec<String> = Vec::new();
        for (i, raw_input) in raw.inputs.iter().enumerate() {
            let idx = i.to_string();
            let path: Vec<&str> = if raw_input.table {
                vec!["tasks", name, "inputs", idx.as_str(), "dataset"]
            } else {
                vec!["tasks", name, "inputs", idx.as_str()]
            };
            let input = &raw_input.dataset;
            let shift = self.shift(name, i, raw_input);
            if names.datasets.contains(input) {
                if !shift.is_none() {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::InvalidShift,
                            format!("task `{name}` shifts external input `{input}`"),
                        )
                        .at(self.key(&["tasks", name, "inputs", &idx, if raw_input.offset.is_some() { "offset" } else { "window" }]), "only for another task's output")
                        .help("an external dataset is read at the task's own partition; remove `offset`/`window`"),
                    );
                }
                inputs.push(Input {
                    dataset: input.clone(),
                    source: InputSource::External,
                    shift: Shift::NONE,
                });
            } else if let Some(producer) = outputs.get(input) {
                if producer == name {
                    self.err(
                        ManifestError::new(ManifestErrorKind::SelfInput, format!("task `{name}` reads its own output `{input}`"))
                            .at(self.value(&path), "its own output")
                            .help("a task cannot depend on itself; for running totals use `depends_on_past = true`"),
                    );
                    continue;
                }
                inputs.push(Input {
                    dataset: input.clone(),
                    source: InputSource::Task(producer.clone()),
                    shift,
                });
                if !depends_on.contains(producer) {
                    depends_on.push(producer.clone());
                }
            } else {
                // Built only for the diagnostic: per task it made
                // validation quadratic.
                let all_datasets: Vec<String> = names
                    .datasets
                    .iter()
                    .cloned()
                    .chain(outputs.keys().cloned())
                    .collect();
                self.reference("dataset", input, &all_datasets, &path);
            }
        }
        for (i, dep) in raw.depends_on.iter().enumerate() {
            let idx = i.to_string();
            let path = ["tasks", name, "depends_on", idx.as_str()];
            if dep == name {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::SelfDependency,
                        format!("task `{name}` depends on itself"),
                    )
                    .at(self.value(&path), "itself")
                    .help("remove it; for running totals use `depends_on_past = true`"),
                );
            } else if (names.task_set.contains(dep.as_str())
                || self.reference("task", dep, &names.tasks, &path))
                && !depends_on.contains(dep)
            {
                depends_on.push(dep.clone());
            }
        }
        (inputs, depends_on)
    }

    /// The task's output, its table format and its grain checked.
    fn output(&mut self, name: &str, raw: &RawTask) -> Output {
        let table = table::check(self, name, &raw.output);
        self.grain(name, raw);
        Output {
            dataset: raw.output.dataset.clone(),
            format: raw.output.format,
            grain: raw.output.grain.clone(),
            table,
        }
    }

    /// The output's grain: some columns, each once.
    fn grain(&mut self, name: &str, raw: &RawTask) {
        if raw.output.grain.is_empty() {
            self.err(
                ManifestError::new(ManifestErrorKind::EmptyValue, format!("task `{name}` has an empty grain"))
                    .at(self.value(&["tasks", name, "output", "grain"]), "empty")
                    .help("list the columns that make a row unique, e.g. `grain = [\"order_id\", \"line_no\"]`"),
            );
        }
        let mut seen = HashMap::new();
        for (i, col) in raw.output.grain.iter().enumerate() {
            if let Some(first) = seen.insert(col.as_str(), i) {
                let (i, first) = (i.to_string(), first.to_string());
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::DuplicateGrainColumn,
                        format!("grain column `{col}` is listed twice"),
                    )
                    .at(
                        self.value(&["tasks", name, "output", "grain", &i]),
                        "listed again",
                    )
                    .also(
                        self.value(&["tasks", name, "output", "grain", &first]),
                        "first here",
                    )
                    .help("each grain column appears once; remove the repeat"),
                );
            }
        }
    }

    /// The task's partition schemes, named and as dimensions, in order.
    fn partition_dims(
        &mut self,
        name: &str,
        raw: &RawTask,
        names: &Names,
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> (Vec<String>, Dims) {
        let p = |k: &'static str| vec!["tasks", name, k];
        let partitioned_by: Vec<String> = match &raw.partitioned_by {
            Some(list) => {
                let mut seen: HashMap<&str, usize> = HashMap::new();
                let cx = self.cx;
                for (i, scheme) in list.iter().enumerate() {
                    let idx = i.to_string();
                    // Only a diagnostic needs the path: looking the document
                    // up for every task made validation quadratic.
                    let path = || -> Vec<&str> {
                        if list.len() == 1 && cx.locator.is_string(&p("partitioned_by")) {
                            p("partitioned_by")
                        } else {
                            vec!["tasks", name, "partitioned_by", &idx]
                        }
                    };
                    if !names.schemes.contains(scheme) {
                        self.reference("partition scheme", scheme, &names.schemes, &path());
                    }
                    if let Some(first) = seen.insert(scheme.as_str(), i) {
                        let path = path();
                        let first = first.to_string();
                        self.err(
                            ManifestError::new(
                                ManifestErrorKind::Duplicate,
                                format!("task `{name}` lists partition scheme `{scheme}` twice"),
                            )
                            .at(self.value(&path), "listed again")
                            .also(
                                self.value(&["tasks", name, "partitioned_by", &first]),
                                "first here",
                            )
                            .help("each dimension appears once; remove the repeat"),
                        );
                    }
                }
                list.clone()
            }
            None if names.schemes.len() == 1 => vec![names.schemes[0].clone()],
            None => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::MissingKey,
                        format!("task `{name}` needs `partitioned_by`"),
                    )
                    .at(self.key(&["tasks", name]), "no partition scheme")
                    .help(if names.schemes.is_empty() {
                        "declare a scheme, e.g. `[partitions.daily]` with `kind = \"daily\"` and `start`, or write `partitioned_by = []` for one partition".to_string()
                    } else {
                        format!("the manifest declares several schemes; pick one of {}, or a list of them", ticked(&names.schemes))
                    }),
                );
                Vec::new()
            }
        };
        let dims = Dims(
            partitioned_by
                .iter()
                .filter_map(|n| {
                    schemes.get(n).map(|s| crate::partition::Dimension {
                        name: n.clone(),
                        scheme: s.clone(),
                    })
                })
                .collect(),
        );
        self.combined_keys_fit(name, &dims, &p("partitioned_by"));
        (partitioned_by, dims)
    }

    /// The failure class of each exit code and scheduler end state: the
    /// defaults, then the task's own.
    fn exit_codes(
        &mut self,
        name: &str,
        raw: &RawTask,
        names: &Names,
    ) -> (
        BTreeMap<i32, FailureRule>,
        BTreeMap<super::ClusterEnd, FailureRule>,
    ) {
        let mut exit_codes = BTreeMap::from([
            (75, FailureRule::Transient),
            (65, FailureRule::Deterministic),
            (78, FailureRule::Operator),
        ]);
        let mut cluster_ends = BTreeMap::from([
            (super::ClusterEnd::OutOfMemory, FailureRule::Deterministic),
            (super::ClusterEnd::NodeFail, FailureRule::Transient),
            (super::ClusterEnd::Preempted, FailureRule::Transient),
        ]);
        for (code, class) in &raw.exit_codes {
            let path = ["tasks", name, "exit_codes", code.as_str()];
            if let Some(end) = super::ClusterEnd::from_name(code) {
                if let Some(rule) = self.failure_rule(class, names, &path) {
                    cluster_ends.insert(end, rule);
                }
                continue;
            }
            match code.parse::<i32>() {
                Ok(n @ 1..=255) => {
                    if let Some(rule) = self.failure_rule(class, names, &path) {
                        exit_codes.insert(n, rule);
                    }
                }
                _ => self.err(
                    ManifestError::new(ManifestErrorKind::BadExitCode, format!("`{code}` is not an exit code or a scheduler end state"))
                        .at(self.key(&path), "not between 1 and 255, nor a scheduler end state")
                        .help("map failing exit codes (1 to 255), or the scheduler end states `out_of_memory`, `node_fail`, `preempted` and `cancelled`, to a class, e.g. `exit_codes = { 75 = \"transient\", out_of_memory = \"deterministic\" }`"),
                ),
            }
        }
        (exit_codes, cluster_ends)
    }

    /// Every path of the task's `code` exists.
    fn code_paths(&mut self, name: &str, raw: &RawTask) {
        for (i, path) in raw.code.iter().enumerate() {
            if !self.cx.dir.join(path).exists() {
                let idx = i.to_string();
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::MissingCode,
                        format!("task `{name}` names code `{path}`, which does not exist"),
                    )
                    .at(
                        self.value(&["tasks", name, "code", &idx]),
                        "no such file or directory",
                    )
                    .help(
                        "list the task's scripts and library directories, relative to the manifest",
                    ),
                );
            }
        }
    }

    /// `slo`: a share strictly between 0 and 1, of partitions published
    /// within `sla`, so meaningless without one.
    fn slo(&mut self, name: &str, raw: &RawTask) -> Option<f64> {
        let slo = raw.slo?;
        if !(slo > 0.0 && slo < 1.0) {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("`slo` {slo} of task `{name}` is not a share between 0 and 1"),
                )
                .at(
                    self.value(&["tasks", name, "slo"]),
                    "must be above 0 and below 1",
                )
                .help("the share of partitions to publish within `sla`, e.g. `slo = 0.99` for 99%"),
            );
            return None;
        }
        if raw.sla.is_none() {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::MissingKey,
                    format!("task `{name}` sets `slo` without an `sla`"),
                )
                .at(self.key(&["tasks", name, "slo"]), "a share of partitions published within `sla`")
                .help("add the deadline it measures, e.g. `sla = \"6h\"` (after the partition's period ends)"),
            );
            return None;
        }
        Some(slo)
    }

    /// `schedule` of a task: a cron expression, on a task without a time
    /// dimension (a time-partitioned task is due when its periods end).
    fn schedule(
        &mut self,
        name: &str,
        text: &str,
        zone: &str,
        dims: &Dims,
        path: &[&str],
    ) -> Option<crate::cron::Schedule> {
        if let Some(t) = dims.time_dim() {
            let scheme = &dims.0[t].name;
            self.err(
                ManifestError::new(
                    ManifestErrorKind::ScheduleOnTimeScheme,
                    format!("task `{name}` sets `schedule` but is partitioned by time scheme `{scheme}`"),
                )
                .at(self.value(path), "a time-partitioned task has no schedule")
                .help(format!("its partitions are due when their periods end: remove `schedule`, or set `delay = \"15m\"` to run each `{scheme}` partition later")),
            );
            return None;
        }
        use crate::cron::ScheduleError;
        let (why, label, help) = match crate::cron::Schedule::parse(text, zone) {
            Ok(s) => return Some(s),
            Err(e @ ScheduleError::NeverFires { .. }) => (
                e,
                "no day ever matches",
                "check the day of month against the months (February has at most 29 days, April, June, September and November 30)",
            ),
            Err(e @ ScheduleError::Zone { .. }) => (
                e,
                "in an unknown timezone",
                "use an IANA timezone name such as \"UTC\" or \"Europe/Paris\"",
            ),
            Err(e @ ScheduleError::Syntax(_)) => (
                e,
                "not a five-field cron expression",
                "minute hour day-of-month month day-of-week, e.g. \"0 6 * * *\" (06:00 every day) or \"*/15 * * * *\"",
            ),
        };
        self.err(
            ManifestError::new(ManifestErrorKind::BadSchedule, why.to_string())
                .at(self.value(path), label)
                .help(help),
        );
        None
    }

    /// `offset = k` or `window = [lo, hi]` of input `i`, checked for shape.
    fn shift(&mut self, task: &str, i: usize, raw: &RawInput) -> Shift {
        let idx = i.to_string();
        let at = |k: &'static str| ["tasks", task, "inputs", idx.as_str(), k];
        match (raw.offset, &raw.window) {
            (None, None) => Shift::NONE,
            (Some(k), None) => Shift { lo: k, hi: k },
            (Some(_), Some(_)) => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::InvalidShift,
                        format!(
                            "input `{}` of task `{task}` sets both `offset` and `window`",
                            raw.dataset
                        ),
                    )
                    .at(self.key(&at("window")), "and `offset`")
                    .also(self.key(&at("offset")), "one of these")
                    .help("`offset = k` is `window = [k, k]`: keep one of them"),
                );
                Shift::NONE
            }
            (None, Some(w)) => match w.as_slice() {
                [lo, hi] if lo <= hi => Shift { lo: *lo, hi: *hi },
                _ => {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::InvalidShift,
                            format!("window of input `{}` of task `{task}` is not `[first, last]` with first ≤ last", raw.dataset),
                        )
                        .at(self.value(&at("window")), "not a window")
                        .help("write two periods relative to the mapped one, first ≤ last, e.g. `window = [-6, 0]` for the last seven days"),
                    );
                    Shift::NONE
                }
            },
        }
    }
}

impl Validator<'_, '_, '_, '_> {
    /// A task of several dimensions names each partition by its keys joined
    /// with `|`: the longest such key must fit the warehouse's names too
    /// (each scheme's own keys are checked where they are listed).
    fn combined_keys_fit(&mut self, task: &str, dims: &crate::partition::Dims, path: &[&str]) {
        if dims.0.len() < 2 {
            return;
        }
        let longest: Vec<String> = dims
            .0
            .iter()
            .map(|d| match &d.scheme {
                crate::partition::PartitionScheme::Static { keys } => keys
                    .iter()
                    .max_by_key(|k| crate::store::encode_partition(k).len())
                    .cloned()
                    .unwrap_or_default(),
                crate::partition::PartitionScheme::Time(t) => t.key(t.start),
            })
            .collect();
        let key = longest.join(&crate::partition::dims::SEPARATOR.to_string());
        // A key that is too long alone is reported at its scheme.
        if longest
            .iter()
            .any(|k| crate::store::partition_problem(k).is_some())
        {
            return;
        }
        if let Some(why) = crate::store::partition_problem(&key) {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::KeyTooLong,
                    format!(
                        "task `{task}` has partition keys too long for the warehouse, such as `{}`",
                        super::validator::abbreviated(&key)
                    ),
                )
                .at(self.value(path), "these dimensions' keys joined")
                .help(format!(
                    "{why}; shorten the keys, or partition by fewer schemes"
                )),
            );
        }
    }
}

/// `rerun`, defaulting to a run at every firing.
fn rerun(raw: Option<raw::RawRerun>) -> Rerun {
    match raw {
        Some(raw::RawRerun::OnChange) => Rerun::OnChange,
        Some(raw::RawRerun::Always) | None => Rerun::Always,
    }
}

/// The failure kinds every manifest has, besides its retry classes.
const FAILURE_KINDS: [&str; 3] = ["transient", "deterministic", "operator"];

impl Validator<'_, '_, '_, '_> {
    /// The rule a failure class names in `on_timeout` or `on_exit`: a
    /// failure kind or a declared retry class.
    fn failure_rule(&mut self, text: &str, names: &Names, path: &[&str]) -> Option<FailureRule> {
        match text {
            "transient" => Some(FailureRule::Transient),
            "deterministic" => Some(FailureRule::Deterministic),
            "operator" => Some(FailureRule::Operator),
            class if names.retry.iter().any(|r| r == class) => {
                Some(FailureRule::Class(class.to_string()))
            }
            other => {
                let known: Vec<&str> = FAILURE_KINDS
                    .iter()
                    .copied()
                    .chain(names.retry.iter().map(String::as_str))
                    .collect();
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::UnknownFailureClass,
                        format!("unknown failure class `{other}`"),
                    )
                    .at(self.value(path), "not a failure kind or retry class")
                    .help(match closest(other, known.iter().copied()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!(
                            "use `transient`, `deterministic`, `operator` or a retry class ({})",
                            ticked(&names.retry)
                        ),
                    }),
                );
                None
            }
        }
    }
}
