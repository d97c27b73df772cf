//! Meaning, after shape: names resolve, durations and dates parse, ranges
//! hold, the task graph is acyclic. Ordinary code returning every problem;
//! serde only carried the shape.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use indexmap::IndexMap;
use jiff::civil::Date;
use petgraph::graph::{DiGraph, NodeIndex};

use super::locate::Locator;
use super::model::*;
use super::raw::{self, PartitionKind};
use super::suggest::{closest, unknown_help};
use super::{duration, ticked, Entry, ManifestError, Sections};
use crate::audit::{Aggregate, Gate};

pub(crate) struct Context<'a, 'b, 'i> {
    pub(crate) locator: &'a Locator<'b, 'i>,
    pub(crate) path: &'a Path,
    pub(crate) dir: &'a Path,
    pub(crate) today: Date,
}

const FAILURE_KINDS: [&str; 3] = ["transient", "deterministic", "operator"];
const GATE_CHECKS: [&str; 5] = [
    "row_count",
    "unique",
    "not_null",
    "accepted_values",
    "reconcile",
];

struct Validator<'c, 'a, 'b, 'i> {
    cx: &'c Context<'a, 'b, 'i>,
    errors: &'c mut Vec<ManifestError>,
    /// Output dataset → the task that publishes it.
    producers: HashMap<String, String>,
}

pub(crate) fn validate(
    sections: &Sections,
    cx: &Context<'_, '_, '_>,
    errors: &mut Vec<ManifestError>,
) -> Option<Manifest> {
    let mut v = Validator {
        cx,
        errors,
        producers: HashMap::new(),
    };
    v.run(sections)
}

impl Validator<'_, '_, '_, '_> {
    fn err(&mut self, error: ManifestError) {
        self.errors.push(error);
    }

    fn value(&self, path: &[&str]) -> std::ops::Range<usize> {
        self.cx.locator.value(path)
    }

    fn key(&self, path: &[&str]) -> std::ops::Range<usize> {
        self.cx.locator.key(path)
    }

    fn run(&mut self, s: &Sections) -> Option<Manifest> {
        let pipeline = self.pipeline(s.pipeline.as_ref());
        let partitions = self.partitions(&s.partitions);
        let pools = self.pools(&s.pools);
        let retry = self.retry_classes(&s.retry);
        let datasets = self.datasets(&s.datasets);
        let names = Names {
            schemes: s.partitions.iter().map(|e| e.name.clone()).collect(),
            pools: s
                .pools
                .iter()
                .map(|e| e.name.clone())
                .chain(std::iter::once("default".to_string()))
                .collect(),
            retry: s
                .retry
                .iter()
                .map(|e| e.name.clone())
                .chain(std::iter::once("default".to_string()))
                .collect(),
            datasets: s.datasets.iter().map(|e| e.name.clone()).collect(),
            tasks: s.tasks.iter().map(|e| e.name.clone()).collect(),
        };
        let outputs = self.outputs(&s.tasks, &names);
        self.producers = outputs.clone();
        let mut tasks = IndexMap::new();
        for entry in &s.tasks {
            let Some(raw) = &entry.raw else { continue };
            if let Some(task) = self.task(&entry.name, raw, &names, &outputs, &partitions) {
                tasks.insert(entry.name.clone(), task);
            }
        }
        self.cross_scheme_dependencies(&tasks);
        self.cycles(&tasks, &s.tasks);
        let backfills = self.backfills(&s.backfills, &names, &tasks, &partitions);
        let lineage = self.lineage(s.lineage.as_ref(), pipeline.as_ref());
        let pipeline = pipeline?;
        // Only a fully valid manifest is built; partial pieces above exist so
        // that every independent problem is found in one pass.
        Some(Manifest {
            path: self.cx.path.to_path_buf(),
            dir: self.cx.dir.to_path_buf(),
            pipeline,
            partitions,
            pools,
            retry,
            datasets,
            tasks,
            backfills,
            lineage,
        })
    }

    /// `[lineage]`: exactly one of `url` (http://) and `file`.
    fn lineage(
        &mut self,
        raw: Option<&raw::RawLineage>,
        pipeline: Option<&Pipeline>,
    ) -> Option<Lineage> {
        let raw = raw?;
        let namespace = raw
            .namespace
            .clone()
            .or_else(|| pipeline.map(|p| p.name.clone()))
            .unwrap_or_default();
        match (&raw.url, &raw.file) {
            (Some(url), None) if url.starts_with("http://") => Some(Lineage {
                sink: LineageSink::Http(url.clone()),
                namespace,
            }),
            (Some(_), None) => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::lineage_url",
                        "`lineage.url` is not an http:// URL",
                    )
                    .at(self.value(&["lineage", "url"]), "not http://")
                    .help("e.g. `url = \"http://localhost:5000/api/v1/lineage\"`; for https, use a local relay or `file`"),
                );
                None
            }
            (None, Some(file)) if !file.trim().is_empty() => Some(Lineage {
                sink: LineageSink::File(self.cx.dir.join(file)),
                namespace,
            }),
            _ => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::lineage_sink",
                        "`[lineage]` needs exactly one of `url` and `file`",
                    )
                    .at(self.key(&["lineage"]), "here")
                    .help(
                        "`url = \"http://host:port/api/v1/lineage\"` or `file = \"lineage.jsonl\"`",
                    ),
                );
                None
            }
        }
    }

    fn pipeline(&mut self, raw: Option<&raw::RawPipeline>) -> Option<Pipeline> {
        let raw = raw?;
        for (key, value) in [("name", &raw.name), ("code_version", &raw.code_version)] {
            if value.trim().is_empty() {
                self.err(
                    ManifestError::new(
                        "weir::manifest::empty_value",
                        format!("`pipeline.{key}` is empty"),
                    )
                    .at(self.value(&["pipeline", key]), "empty")
                    .help("give it a non-empty value"),
                );
            }
        }
        if raw.warehouse.trim().is_empty() {
            self.err(
                ManifestError::new(
                    "weir::manifest::empty_value",
                    "`pipeline.warehouse` is empty",
                )
                .at(self.value(&["pipeline", "warehouse"]), "empty")
                .help(
                    "name a directory, relative to the manifest, e.g. `warehouse = \"warehouse\"`",
                ),
            );
        }
        Some(Pipeline {
            name: raw.name.clone(),
            code_version: raw.code_version.clone(),
            warehouse: self.cx.dir.join(&raw.warehouse),
        })
    }

    fn date(&mut self, text: &str, path: &[&str]) -> Option<Date> {
        match text.parse::<Date>() {
            Ok(d) if text.len() == 10 => Some(d),
            _ => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::bad_date",
                        format!("`{text}` is not a valid date"),
                    )
                    .at(self.value(path), "not a date")
                    .help("write an ISO date such as \"2026-09-20\""),
                );
                None
            }
        }
    }

    fn duration(&mut self, text: Option<&str>, default: Duration, path: &[&str]) -> Duration {
        let Some(text) = text else { return default };
        match duration::parse(text) {
            Ok(d) if !d.is_zero() => d,
            Ok(_) => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::bad_duration",
                        format!("duration `{text}` is zero"),
                    )
                    .at(self.value(path), "zero")
                    .help("give a positive duration such as \"90s\" or \"10m\""),
                );
                default
            }
            Err(why) => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::bad_duration",
                        format!("malformed duration: {why}"),
                    )
                    .at(self.value(path), "not a duration")
                    .help("write a number and a unit (ms, s, m, h, d), e.g. \"90s\", \"10m\", \"2h\" or \"1h30m\""),
                );
                default
            }
        }
    }

    fn safe_name(&mut self, what: &str, name: &str, path: &[&str], key: bool) -> bool {
        let ok = !name.is_empty()
            && !name.starts_with(['_', '.', '-'])
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            let span = if key {
                self.key(path)
            } else {
                self.value(path)
            };
            self.err(
                ManifestError::new(
                    "weir::manifest::bad_name",
                    format!("{what} `{name}` is not a valid name"),
                )
                .at(span, "invalid name")
                .help("use letters, digits, `_`, `-` and `.`, starting with a letter or digit (it becomes a directory name)"),
            );
        }
        ok
    }

    fn partitions(
        &mut self,
        entries: &[Entry<raw::RawPartitionScheme>],
    ) -> IndexMap<String, PartitionScheme> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            let p = |k: &'static str| ["partitions", name, k];
            let scheme = match raw.kind {
                PartitionKind::Daily => {
                    if raw.keys.is_some() {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::unexpected_key",
                                format!("daily scheme `{name}` cannot have `keys`"),
                            )
                            .at(self.key(&p("keys")), "only for `kind = \"static\"`")
                            .help("remove `keys`, or make the scheme `kind = \"static\"`"),
                        );
                    }
                    let Some(start_text) = &raw.start else {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::missing_key",
                                format!("daily scheme `{name}` needs a `start` date"),
                            )
                            .at(self.key(&["partitions", name]), "no `start`")
                            .help("add `start = \"YYYY-MM-DD\"` (and optionally `end`)"),
                        );
                        continue;
                    };
                    let start = self.date(start_text, &p("start"));
                    let end = raw.end.as_ref().and_then(|e| self.date(e, &p("end")));
                    let Some(start) = start else { continue };
                    if let Some(end) = end {
                        if end < start {
                            self.err(
                                ManifestError::new(
                                    "weir::manifest::bad_range",
                                    format!("daily scheme `{name}` ends ({end}) before it starts ({start})"),
                                )
                                .at(self.value(&p("end")), "before `start`")
                                .also(self.value(&p("start")), "starts here")
                                .help("swap `start` and `end`, or fix the dates"),
                            );
                            continue;
                        }
                    }
                    PartitionScheme::Daily { start, end }
                }
                PartitionKind::Static => {
                    for k in ["start", "end"] {
                        let present = if k == "start" {
                            raw.start.is_some()
                        } else {
                            raw.end.is_some()
                        };
                        if present {
                            self.err(
                                ManifestError::new(
                                    "weir::manifest::unexpected_key",
                                    format!("static scheme `{name}` cannot have `{k}`"),
                                )
                                .at(self.key(&p(k)), "only for `kind = \"daily\"`")
                                .help("list the partitions in `keys`, or make the scheme `kind = \"daily\"`"),
                            );
                        }
                    }
                    let Some(keys) = &raw.keys else {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::missing_key",
                                format!("static scheme `{name}` needs `keys`"),
                            )
                            .at(self.key(&["partitions", name]), "no `keys`")
                            .help("add `keys = [\"eu\", \"us\"]`"),
                        );
                        continue;
                    };
                    if keys.is_empty() {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::empty_value",
                                format!("static scheme `{name}` has no keys"),
                            )
                            .at(self.value(&p("keys")), "empty")
                            .help("list at least one key"),
                        );
                    }
                    let mut seen = HashMap::new();
                    for (i, key) in keys.iter().enumerate() {
                        let idx = i.to_string();
                        self.safe_name(
                            "partition key",
                            key,
                            &["partitions", name, "keys", &idx],
                            false,
                        );
                        if let Some(first) = seen.insert(key.as_str(), i) {
                            let first = first.to_string();
                            self.err(
                                ManifestError::new(
                                    "weir::manifest::duplicate",
                                    format!("partition key `{key}` is listed twice in `{name}`"),
                                )
                                .at(
                                    self.value(&["partitions", name, "keys", &idx]),
                                    "listed again",
                                )
                                .also(
                                    self.value(&["partitions", name, "keys", &first]),
                                    "first here",
                                )
                                .help("remove the repeated key"),
                            );
                        }
                    }
                    PartitionScheme::Static { keys: keys.clone() }
                }
            };
            out.insert(entry.name.clone(), scheme);
        }
        out
    }

    fn pools(&mut self, entries: &[Entry<raw::RawPool>]) -> IndexMap<String, Pool> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            self.safe_name("pool", name, &["pools", name], true);
            match u32::try_from(raw.slots) {
                Ok(slots @ 1..=100_000) => {
                    out.insert(entry.name.clone(), Pool { slots });
                }
                _ => self.err(
                    ManifestError::new(
                        "weir::manifest::bad_slots",
                        format!("pool `{name}` has {} slots", raw.slots),
                    )
                    .at(self.value(&["pools", name, "slots"]), "must be at least 1")
                    .help("a pool needs between 1 and 100000 slots; nothing could ever run in a pool with none"),
                ),
            }
        }
        out.entry("default".into()).or_insert(Pool {
            slots: DEFAULT_POOL_SLOTS,
        });
        out
    }

    fn disposition(
        &mut self,
        text: Option<&str>,
        default: Disposition,
        allowed: &[&str],
        path: &[&str],
    ) -> Disposition {
        match text {
            None => default,
            Some("retry") if allowed.contains(&"retry") => Disposition::Retry,
            Some("quarantine") => Disposition::Quarantine,
            Some("hold") => Disposition::Hold,
            Some(other) => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::invalid_value",
                        format!("`{other}` is not one of {}", ticked(allowed)),
                    )
                    .at(self.value(path), "unknown value")
                    .help(format!("use {}", ticked(allowed))),
                );
                default
            }
        }
    }

    fn retry_classes(
        &mut self,
        entries: &[Entry<raw::RawRetryClass>],
    ) -> IndexMap<String, RetryClass> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            let d = RetryClass::default_class();
            let max_attempts = match u32::try_from(raw.max_attempts) {
                Ok(n @ 1..=1000) => n,
                _ => {
                    self.err(
                        ManifestError::new(
                            "weir::manifest::invalid_value",
                            format!(
                                "retry class `{name}` has max_attempts = {}",
                                raw.max_attempts
                            ),
                        )
                        .at(
                            self.value(&["retry", name, "max_attempts"]),
                            "must be between 1 and 1000",
                        )
                        .help("max_attempts counts the first attempt: 1 means never retry"),
                    );
                    1
                }
            };
            let b = raw.backoff.as_ref();
            let path = |k: &'static str| ["retry", name, "backoff", k];
            let initial = self.duration(
                b.and_then(|b| b.initial.as_deref()),
                d.backoff.initial,
                &path("initial"),
            );
            let max = self.duration(
                b.and_then(|b| b.max.as_deref()),
                d.backoff.max,
                &path("max"),
            );
            if initial > max {
                self.err(
                    ManifestError::new(
                        "weir::manifest::bad_range",
                        format!("retry class `{name}` starts its backoff above its cap"),
                    )
                    .at(self.value(&path("initial")), "greater than `max`")
                    .help("make `initial` at most `max`"),
                );
            }
            let multiplier = b.and_then(|b| b.multiplier).unwrap_or(d.backoff.multiplier);
            if !(1.0..=100.0).contains(&multiplier) {
                self.err(
                    ManifestError::new(
                        "weir::manifest::invalid_value",
                        format!("backoff multiplier {multiplier} is out of range"),
                    )
                    .at(self.value(&path("multiplier")), "must be between 1 and 100")
                    .help("2.0 doubles the delay after each attempt"),
                );
            }
            let jitter = match b.and_then(|b| b.jitter.as_deref()) {
                None => d.backoff.jitter,
                Some("none") => Jitter::None,
                Some("full") => Jitter::Full,
                Some("equal") => Jitter::Equal,
                Some(other) => {
                    self.err(
                        ManifestError::new(
                            "weir::manifest::invalid_value",
                            format!("`{other}` is not a jitter mode"),
                        )
                        .at(self.value(&path("jitter")), "unknown jitter")
                        .help("use `none`, `full` or `equal`"),
                    );
                    d.backoff.jitter
                }
            };
            let on_failure = self.disposition(
                raw.on_failure.as_deref(),
                Disposition::Retry,
                &["retry", "quarantine", "hold"],
                &["retry", name, "on_failure"],
            );
            let on_exhausted = self.disposition(
                raw.on_exhausted.as_deref(),
                Disposition::Hold,
                &["quarantine", "hold"],
                &["retry", name, "on_exhausted"],
            );
            out.insert(
                entry.name.clone(),
                RetryClass {
                    max_attempts,
                    backoff: BackoffSpec {
                        initial,
                        max,
                        multiplier,
                        jitter,
                    },
                    on_failure,
                    on_exhausted,
                },
            );
        }
        out.entry("default".into())
            .or_insert_with(RetryClass::default_class);
        out
    }

    fn datasets(
        &mut self,
        entries: &[Entry<raw::RawDataset>],
    ) -> IndexMap<String, ExternalDataset> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            self.safe_name("dataset", &entry.name, &["datasets", &entry.name], true);
            if raw.path.trim().is_empty() {
                self.err(
                    ManifestError::new("weir::manifest::empty_value", format!("dataset `{}` has an empty path", entry.name))
                        .at(self.value(&["datasets", &entry.name, "path"]), "empty")
                        .help("give a path template relative to the manifest, e.g. \"raw/{partition}.csv\""),
                );
            }
            out.insert(
                entry.name.clone(),
                ExternalDataset {
                    path: raw.path.clone(),
                    format: raw.format,
                    watermark: raw.watermark.clone(),
                },
            );
        }
        out
    }

    /// Output dataset → producing task; reports datasets written twice.
    fn outputs(&mut self, tasks: &[Entry<raw::RawTask>], names: &Names) -> HashMap<String, String> {
        let mut producers: HashMap<String, String> = HashMap::new();
        for entry in tasks {
            let Some(raw) = &entry.raw else { continue };
            let dataset = &raw.output.dataset;
            let path = ["tasks", entry.name.as_str(), "output", "dataset"];
            if !self.safe_name("dataset", dataset, &path, false) {
                continue;
            }
            if names.datasets.contains(dataset) {
                self.err(
                    ManifestError::new(
                        "weir::manifest::duplicate_output",
                        format!("task `{}` writes `{dataset}`, which is declared as an external dataset", entry.name),
                    )
                    .at(self.value(&path), "also an external dataset")
                    .also(self.key(&["datasets", dataset]), "declared here")
                    .help("a dataset is either external or published by one task: rename one of them"),
                );
            } else if let Some(first) = producers.get(dataset) {
                self.err(
                    ManifestError::new(
                        "weir::manifest::duplicate_output",
                        format!("tasks `{first}` and `{}` both write dataset `{dataset}`", entry.name),
                    )
                    .at(self.value(&path), "written again here")
                    .also(self.value(&["tasks", first, "output", "dataset"]), "first written here")
                    .help("each dataset has exactly one publishing task: give one of them another output dataset"),
                );
            } else {
                producers.insert(dataset.clone(), entry.name.clone());
            }
        }
        producers
    }

    fn reference(&mut self, what: &str, name: &str, known: &[String], path: &[&str]) -> bool {
        if known.iter().any(|k| k == name) {
            return true;
        }
        self.err(
            ManifestError::new(
                match what {
                    "task" => "weir::manifest::unknown_task",
                    "pool" => "weir::manifest::unknown_pool",
                    "retry class" => "weir::manifest::unknown_retry_class",
                    "partition scheme" => "weir::manifest::unknown_partition_scheme",
                    _ => "weir::manifest::unknown_dataset",
                },
                format!("unknown {what} `{name}`"),
            )
            .at(self.value(path), format!("no such {what}"))
            .help(unknown_help(what, name, known.iter().map(String::as_str))),
        );
        false
    }

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
                        "weir::manifest::unknown_failure_class",
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

    fn task(
        &mut self,
        name: &str,
        raw: &raw::RawTask,
        names: &Names,
        outputs: &HashMap<String, String>,
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> Option<Task> {
        let errors_before = self.errors.len();
        let p = |k: &'static str| vec!["tasks", name, k];
        self.safe_name("task", name, &["tasks", name], true);
        if raw.command.is_empty() || raw.command[0].trim().is_empty() {
            self.err(
                ManifestError::new("weir::manifest::empty_value", format!("task `{name}` has an empty command"))
                    .at(self.value(&p("command")), "empty")
                    .help("give the program and its arguments, e.g. `command = [\"python3\", \"load.py\"]`"),
            );
        }
        // Inputs: an external dataset or another task's output.
        let mut inputs = Vec::new();
        let mut depends_on: Vec<String> = Vec::new();
        let all_datasets: Vec<String> = names
            .datasets
            .iter()
            .cloned()
            .chain(outputs.keys().cloned())
            .collect();
        for (i, input) in raw.inputs.iter().enumerate() {
            let idx = i.to_string();
            let path = ["tasks", name, "inputs", idx.as_str()];
            if names.datasets.contains(input) {
                inputs.push(Input {
                    dataset: input.clone(),
                    source: InputSource::External,
                });
            } else if let Some(producer) = outputs.get(input) {
                if producer == name {
                    self.err(
                        ManifestError::new("weir::manifest::self_input", format!("task `{name}` reads its own output `{input}`"))
                            .at(self.value(&path), "its own output")
                            .help("a task cannot depend on itself; for running totals use `depends_on_past = true`"),
                    );
                    continue;
                }
                inputs.push(Input {
                    dataset: input.clone(),
                    source: InputSource::Task(producer.clone()),
                });
                if !depends_on.contains(producer) {
                    depends_on.push(producer.clone());
                }
            } else {
                self.reference("dataset", input, &all_datasets, &path);
            }
        }
        for (i, dep) in raw.depends_on.iter().enumerate() {
            let idx = i.to_string();
            let path = ["tasks", name, "depends_on", idx.as_str()];
            if dep == name {
                self.err(
                    ManifestError::new(
                        "weir::manifest::self_dependency",
                        format!("task `{name}` depends on itself"),
                    )
                    .at(self.value(&path), "itself")
                    .help("remove it; for running totals use `depends_on_past = true`"),
                );
            } else if self.reference("task", dep, &names.tasks, &path) && !depends_on.contains(dep)
            {
                depends_on.push(dep.clone());
            }
        }
        // Output and its grain.
        if raw.output.grain.is_empty() {
            self.err(
                ManifestError::new("weir::manifest::empty_value", format!("task `{name}` has an empty grain"))
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
                        "weir::manifest::duplicate_grain_column",
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
        // Partition scheme.
        let partitioned_by = match &raw.partitioned_by {
            Some(scheme) => {
                self.reference(
                    "partition scheme",
                    scheme,
                    &names.schemes,
                    &p("partitioned_by"),
                );
                scheme.clone()
            }
            None if names.schemes.len() == 1 => names.schemes[0].clone(),
            None => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::missing_key",
                        format!("task `{name}` needs `partitioned_by`"),
                    )
                    .at(self.key(&["tasks", name]), "no partition scheme")
                    .help(if names.schemes.is_empty() {
                        "declare a scheme, e.g. `[partitions.daily]` with `kind = \"daily\"` and `start`".to_string()
                    } else {
                        format!("the manifest declares several schemes; pick one of {}", ticked(&names.schemes))
                    }),
                );
                String::new()
            }
        };
        if matches!(
            schemes.get(&partitioned_by),
            Some(PartitionScheme::Static { .. })
        ) && raw.depends_on_past
        {
            self.err(
                ManifestError::new("weir::manifest::invalid_value", format!("task `{name}` sets `depends_on_past` on static scheme `{partitioned_by}`"))
                    .at(self.value(&p("depends_on_past")), "needs an ordered (daily) scheme")
                    .help("static keys have no \"previous\" partition; remove `depends_on_past` or use a daily scheme"),
            );
        }
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
        let heartbeat = self.duration(
            raw.heartbeat.as_deref(),
            Duration::from_secs(10),
            &p("heartbeat"),
        );
        let expected_duration = self.duration(
            raw.expected_duration.as_deref(),
            Duration::from_secs(60),
            &p("expected_duration"),
        );
        let sla = raw
            .sla
            .as_deref()
            .map(|s| self.duration(Some(s), Duration::ZERO, &p("sla")));
        // Exit codes: defaults first, then the task's own.
        let mut exit_codes = BTreeMap::from([
            (75, FailureRule::Transient),
            (65, FailureRule::Deterministic),
            (78, FailureRule::Operator),
        ]);
        for (code, class) in &raw.exit_codes {
            let path = ["tasks", name, "exit_codes", code.as_str()];
            match code.parse::<i32>() {
                Ok(n @ 1..=255) => {
                    if let Some(rule) = self.failure_rule(class, names, &path) {
                        exit_codes.insert(n, rule);
                    }
                }
                _ => self.err(
                    ManifestError::new("weir::manifest::bad_exit_code", format!("`{code}` is not an exit code"))
                        .at(self.key(&path), "not between 1 and 255")
                        .help("map failing exit codes (1 to 255) to a class, e.g. `exit_codes = { 75 = \"transient\" }`"),
                ),
            }
        }
        let on_timeout = match &raw.on_timeout {
            Some(text) => self
                .failure_rule(text, names, &p("on_timeout"))
                .unwrap_or(FailureRule::Transient),
            None => FailureRule::Transient,
        };
        let input_names: Vec<String> = raw.inputs.clone();
        let gates = raw
            .gates
            .iter()
            .enumerate()
            .filter_map(|(i, g)| self.gate(name, i, g, &input_names))
            .collect();
        if self.errors.len() > errors_before {
            return None;
        }
        Some(Task {
            name: name.to_string(),
            command: raw.command.clone(),
            inputs,
            output: Output {
                dataset: raw.output.dataset.clone(),
                format: raw.output.format,
                grain: raw.output.grain.clone(),
            },
            depends_on,
            partitioned_by,
            pool,
            timeout,
            heartbeat,
            retry,
            exit_codes,
            on_timeout,
            gates,
            expected_duration,
            depends_on_past: raw.depends_on_past,
            sla,
        })
    }

    fn gate(
        &mut self,
        task: &str,
        index: usize,
        raw: &raw::RawGate,
        inputs: &[String],
    ) -> Option<Gate> {
        let idx = index.to_string();
        let at = |k: &'static str| ["tasks", task, "gates", idx.as_str(), k];
        let present: Vec<&'static str> = [
            ("min", raw.min.is_some()),
            ("max", raw.max.is_some()),
            ("columns", raw.columns.is_some()),
            ("column", raw.column.is_some()),
            ("values", raw.values.is_some()),
            ("aggregate", raw.aggregate.is_some()),
            ("input", raw.input.is_some()),
            ("input_column", raw.input_column.is_some()),
            ("where", raw.filter.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, p)| p.then_some(k))
        .collect();
        let (allowed, required): (&[&str], &[&str]) = match raw.check.as_str() {
            "row_count" => (&["min", "max"], &[]),
            "unique" | "not_null" => (&["columns"], &["columns"]),
            "accepted_values" => (&["column", "values"], &["column", "values"]),
            "reconcile" => (
                &["column", "aggregate", "input", "input_column", "where"],
                &["column", "input", "input_column"],
            ),
            other => {
                self.err(
                    ManifestError::new(
                        "weir::manifest::unknown_gate",
                        format!("unknown gate check `{other}`"),
                    )
                    .at(self.value(&at("check")), "no such check")
                    .help(match closest(other, GATE_CHECKS) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("checks are {}", ticked(&GATE_CHECKS)),
                    }),
                );
                return None;
            }
        };
        let mut ok = true;
        for key in &present {
            if !allowed.contains(key) {
                ok = false;
                self.err(
                    ManifestError::new(
                        "weir::manifest::unexpected_key",
                        format!("gate `{}` does not take `{key}`", raw.check),
                    )
                    .at(self.key(&at(key)), "not for this check")
                    .help(format!("`{}` takes {}", raw.check, ticked(allowed))),
                );
            }
        }
        for key in required {
            if !present.contains(key) {
                ok = false;
                self.err(
                    ManifestError::new(
                        "weir::manifest::missing_key",
                        format!("gate `{}` needs `{key}`", raw.check),
                    )
                    .at(
                        self.value(&["tasks", task, "gates", idx.as_str()]),
                        format!("no `{key}`"),
                    )
                    .help(format!("`{}` takes {}", raw.check, ticked(allowed))),
                );
            }
        }
        if !ok {
            return None;
        }
        let non_negative = |v: Option<i64>| v.map(|n| u64::try_from(n).ok());
        Some(match raw.check.as_str() {
            "row_count" => {
                let (min, max) = (non_negative(raw.min), non_negative(raw.max));
                if min == Some(None) || max == Some(None) {
                    let key = if min == Some(None) { "min" } else { "max" };
                    self.err(
                        ManifestError::new(
                            "weir::manifest::invalid_value",
                            "a row count cannot be negative",
                        )
                        .at(self.value(&at(key)), "negative")
                        .help("use 0 or more"),
                    );
                    return None;
                }
                let (min, max) = (min.flatten(), max.flatten());
                if let (Some(lo), Some(hi)) = (min, max) {
                    if lo > hi {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::bad_range",
                                format!("row_count gate has min {lo} above max {hi}"),
                            )
                            .at(self.value(&at("min")), "above `max`")
                            .help("make `min` at most `max`"),
                        );
                        return None;
                    }
                }
                Gate::RowCount { min, max }
            }
            "unique" => Gate::Unique {
                columns: raw.columns.clone().unwrap_or_default(),
            },
            "not_null" => Gate::NotNull {
                columns: raw.columns.clone().unwrap_or_default(),
            },
            "accepted_values" => Gate::AcceptedValues {
                column: raw.column.clone().unwrap_or_default(),
                values: raw.values.clone().unwrap_or_default(),
            },
            _ => {
                let input = raw.input.clone().unwrap_or_default();
                if !inputs.contains(&input) {
                    self.err(
                        ManifestError::new(
                            "weir::manifest::gate_unknown_input",
                            format!("gate reconciles against `{input}`, which is not an input of task `{task}`"),
                        )
                        .at(self.value(&at("input")), "not among the task's inputs")
                        .help(if inputs.is_empty() {
                            format!("add `{input}` to the task's `inputs`")
                        } else {
                            match closest(&input, inputs.iter().map(String::as_str)) {
                                Some(s) => format!("did you mean `{s}`?"),
                                None => format!("the task's inputs are {}; add `{input}` to them", ticked(inputs)),
                            }
                        }),
                    );
                    return None;
                }
                let aggregate = match raw.aggregate.as_deref() {
                    None | Some("sum") => Aggregate::Sum,
                    Some("count") => Aggregate::Count,
                    Some(other) => {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::invalid_value",
                                format!("`{other}` is not an aggregate"),
                            )
                            .at(self.value(&at("aggregate")), "unknown aggregate")
                            .help("use `sum` or `count`"),
                        );
                        return None;
                    }
                };
                Gate::Reconcile {
                    column: raw.column.clone().unwrap_or_default(),
                    aggregate,
                    input,
                    input_column: raw.input_column.clone().unwrap_or_default(),
                    filter: raw
                        .filter
                        .as_ref()
                        .map(|f| f.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                }
            }
        })
    }

    /// A dependency links the same partition key, so both ends need one scheme.
    fn cross_scheme_dependencies(&mut self, tasks: &IndexMap<String, Task>) {
        for task in tasks.values() {
            for dep in &task.depends_on {
                let Some(upstream) = tasks.get(dep) else {
                    continue;
                };
                if upstream.partitioned_by != task.partitioned_by {
                    let span = self.dependency_span(&task.name, dep);
                    self.err(
                        ManifestError::new(
                            "weir::manifest::scheme_mismatch",
                            format!(
                                "task `{}` (partitioned by `{}`) depends on `{dep}` (partitioned by `{}`)",
                                task.name, task.partitioned_by, upstream.partitioned_by
                            ),
                        )
                        .at(span, "different partition schemes")
                        .help("a dependency links the same partition key: partition both tasks by the same scheme"),
                    );
                }
            }
        }
    }

    /// The span of the `depends_on` or `inputs` entry that makes `task` depend on `dep`.
    fn dependency_span(&self, task: &str, dep: &str) -> std::ops::Range<usize> {
        let locator = self.cx.locator;
        locator
            .find_string(&["tasks", task, "depends_on"], |d| d == dep)
            .or_else(|| {
                locator.find_string(&["tasks", task, "inputs"], |input| {
                    self.producers.get(input).is_some_and(|p| p == dep)
                })
            })
            .unwrap_or_else(|| self.key(&["tasks", task]))
    }

    fn cycles(&mut self, tasks: &IndexMap<String, Task>, entries: &[Entry<raw::RawTask>]) {
        let mut graph: DiGraph<&str, ()> = DiGraph::new();
        let index: HashMap<&str, NodeIndex> = entries
            .iter()
            .map(|e| (e.name.as_str(), graph.add_node(e.name.as_str())))
            .collect();
        for task in tasks.values() {
            for dep in &task.depends_on {
                if let (Some(&a), Some(&b)) =
                    (index.get(task.name.as_str()), index.get(dep.as_str()))
                {
                    graph.add_edge(a, b, ());
                }
            }
        }
        for scc in petgraph::algo::tarjan_scc(&graph) {
            if scc.len() < 2 {
                continue;
            }
            // Walk the cycle from the task declared first, so the report is stable.
            let members: HashSet<NodeIndex> = scc.iter().copied().collect();
            let start = *scc
                .iter()
                .min_by_key(|n| n.index())
                .expect("an SCC is never empty");
            let path = cycle_path(&graph, start, &members);
            let names: Vec<&str> = path.iter().map(|n| graph[*n]).collect();
            let mut rendered: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            rendered.push(format!("`{}`", names[0]));
            let first_edge = self.dependency_span(names[0], names[1 % names.len()]);
            let mut error = ManifestError::new(
                "weir::manifest::cycle",
                format!("dependency cycle: {}", rendered.join(" -> ")),
            )
            .at(
                first_edge,
                format!("`{}` depends on `{}`", names[0], names[1 % names.len()]),
            );
            for w in 1..names.len() {
                let (from, to) = (names[w], names[(w + 1) % names.len()]);
                error = error.also(
                    self.dependency_span(from, to),
                    format!("`{from}` depends on `{to}`"),
                );
            }
            self.err(error.help("a pipeline is a DAG: remove one of these dependencies"));
        }
    }

    fn backfills(
        &mut self,
        entries: &[Entry<raw::RawBackfill>],
        names: &Names,
        tasks: &IndexMap<String, Task>,
        schemes: &IndexMap<String, PartitionScheme>,
    ) -> IndexMap<String, Backfill> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            let errors_before = self.errors.len();
            let at = |k: &'static str| ["backfills", name, k];
            self.reference("pool", &raw.pool, &names.pools, &at("pool"));
            if raw.reason.trim().is_empty() {
                self.err(
                    ManifestError::new("weir::manifest::empty_value", format!("backfill `{name}` has no reason"))
                        .at(self.value(&at("reason")), "empty")
                        .help("say why the range is rebuilt; it is recorded with every run of the backfill"),
                );
            }
            let task_names: Vec<String> = match &raw.tasks {
                Some(list) => {
                    for (i, t) in list.iter().enumerate() {
                        let idx = i.to_string();
                        self.reference(
                            "task",
                            t,
                            &names.tasks,
                            &["backfills", name, "tasks", &idx],
                        );
                    }
                    names
                        .tasks
                        .iter()
                        .filter(|t| list.contains(t))
                        .cloned()
                        .collect()
                }
                None => names.tasks.clone(),
            };
            let used: Vec<&str> = {
                let mut v: Vec<&str> = task_names
                    .iter()
                    .filter_map(|t| tasks.get(t))
                    .map(|t| t.partitioned_by.as_str())
                    .collect();
                v.dedup();
                v
            };
            if used.len() > 1 {
                self.err(
                    ManifestError::new(
                        "weir::manifest::scheme_mismatch",
                        format!("backfill `{name}` spans tasks of several partition schemes ({})", ticked(&used)),
                    )
                    .at(self.key(&["backfills", name]), "mixed schemes")
                    .help("list in `tasks` only tasks of one scheme, or declare one backfill per scheme"),
                );
            } else if let Some(scheme) = used.first().and_then(|s| schemes.get(*s).map(|x| (*s, x)))
            {
                self.backfill_range(name, raw, scheme);
            }
            if self.errors.len() == errors_before {
                out.insert(
                    entry.name.clone(),
                    Backfill {
                        name: entry.name.clone(),
                        from: raw.from.clone(),
                        to: raw.to.clone(),
                        pool: raw.pool.clone(),
                        tasks: task_names,
                        reason: raw.reason.clone(),
                    },
                );
            }
        }
        out
    }

    fn backfill_range(
        &mut self,
        name: &str,
        raw: &raw::RawBackfill,
        (scheme_name, scheme): (&str, &PartitionScheme),
    ) {
        let at = |k: &'static str| ["backfills", name, k];
        match scheme {
            PartitionScheme::Daily { start, end } => {
                let from = self.date(&raw.from, &at("from"));
                let to = self.date(&raw.to, &at("to"));
                let (Some(from), Some(to)) = (from, to) else {
                    return;
                };
                if from > to {
                    self.err(
                        ManifestError::new(
                            "weir::manifest::bad_range",
                            format!("backfill `{name}` runs backwards: from {from} to {to}"),
                        )
                        .at(self.value(&at("to")), "before `from`")
                        .also(self.value(&at("from")), "from here")
                        .help("swap `from` and `to`"),
                    );
                    return;
                }
                let last =
                    end.unwrap_or_else(|| self.cx.today.yesterday().unwrap_or(self.cx.today));
                for (key, day) in [("from", from), ("to", to)] {
                    if day < *start || day > last {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::out_of_range",
                                format!("backfill `{name}` `{key}` = {day} is outside scheme `{scheme_name}` ({start} to {last})"),
                            )
                            .at(self.value(&at(key)), "outside the scheme")
                            .help(format!("backfill only partitions that exist: between {start} and {last}")),
                        );
                    }
                }
            }
            PartitionScheme::Static { keys } => {
                let position = |k: &str| keys.iter().position(|x| x == k);
                let (from, to) = (position(&raw.from), position(&raw.to));
                for (key, value, pos) in [("from", &raw.from, from), ("to", &raw.to, to)] {
                    if pos.is_none() {
                        self.err(
                            ManifestError::new("weir::manifest::out_of_range", format!("backfill `{name}` `{key}` = `{value}` is not a key of scheme `{scheme_name}`"))
                                .at(self.value(&at(key)), "not a key")
                                .help(unknown_help("key", value, keys.iter().map(String::as_str))),
                        );
                    }
                }
                if let (Some(f), Some(t)) = (from, to) {
                    if f > t {
                        self.err(
                            ManifestError::new(
                                "weir::manifest::bad_range",
                                format!(
                                    "backfill `{name}` runs backwards: `{}` comes after `{}`",
                                    raw.from, raw.to
                                ),
                            )
                            .at(self.value(&at("to")), "declared before `from`")
                            .help("static keys are ordered as declared; swap `from` and `to`"),
                        );
                    }
                }
            }
        }
    }
}

struct Names {
    schemes: Vec<String>,
    pools: Vec<String>,
    retry: Vec<String>,
    datasets: Vec<String>,
    tasks: Vec<String>,
}

/// A path around the cycle that `start` is on, staying inside its SCC.
fn cycle_path(
    graph: &DiGraph<&str, ()>,
    start: NodeIndex,
    members: &HashSet<NodeIndex>,
) -> Vec<NodeIndex> {
    // Breadth-first from start's successors back to start gives the shortest cycle.
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        let mut next: Vec<NodeIndex> = graph
            .neighbors(node)
            .filter(|n| members.contains(n))
            .collect();
        next.sort_by_key(|n| n.index());
        for n in next {
            if n == start {
                let mut path = vec![node];
                let mut cur = node;
                while cur != start {
                    cur = parent[&cur];
                    path.push(cur);
                }
                path.reverse();
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(n) {
                e.insert(node);
                queue.push_back(n);
            }
        }
    }
    vec![start]
}
