//! Meaning, after shape: names resolve, durations and dates parse, ranges
//! hold, the task graph is acyclic. Ordinary code returning every problem;
//! serde only carried the shape.
//!
//! This file holds the pass over the whole manifest and the small sections
//! (pipeline, pools, retry classes, datasets, the DAG); each larger section
//! validates in its own file beside its raw type: `partitions.rs`,
//! `tasks/` (with inputs and their overrides), `gates.rs`, `backfills.rs`.
//! They share the checks of `validator.rs` and none imports this file, so
//! the folder's files depend on each other one way only.

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use petgraph::graph::{DiGraph, NodeIndex};

use super::model::*;
use super::raw;
use super::validator::{Context, Names, Validator};
use super::{ticked, Entry, ManifestError, ManifestErrorKind, Sections};

pub(crate) fn validate(
    sections: &Sections,
    cx: &Context<'_, '_, '_>,
    errors: &mut Vec<ManifestError>,
) -> Option<Manifest> {
    let mut v = Validator {
        cx,
        errors,
        producers: HashMap::new(),
        pipeline_code_version: String::new(),
        warnings: Vec::new(),
    };
    v.run(sections)
}

impl Validator<'_, '_, '_, '_> {
    fn run(&mut self, s: &Sections) -> Option<Manifest> {
        let pipeline = self.pipeline(s.pipeline.as_ref());
        if let Some(p) = &pipeline {
            self.pipeline_code_version = p.code_version.clone();
        }
        let partitions = self.partitions(&s.partitions);
        let pools = self.pools(&s.pools);
        let retry = self.retry_classes(&s.retry);
        let datasets = self.datasets(&s.datasets);
        let executors = self.executors(&s.executors);
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
            task_set: s.tasks.iter().map(|e| e.name.clone()).collect(),
            executors: executors.keys().cloned().collect(),
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
        self.shifts_need_time(&tasks, &s.tasks);
        self.watermark_sensors_need_time(&tasks, &datasets);
        self.mappings_across_zones(&tasks, &s.tasks);
        self.cycles(&tasks, &s.tasks);
        let backfills = self.backfills(&s.backfills, &names, &tasks, &partitions);
        let lineage = self.lineage(s.lineage.as_ref(), pipeline.as_ref());
        let notify = self.notify(&s.notify, &names.tasks);
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
            executors,
            tasks,
            backfills,
            lineage,
            notify,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    /// `[lineage]`: exactly one of `url` (http:// or https://) and `file`.
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
            (Some(url), None) => {
                if let Some(why) = super::notify::url_problem(url) {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::LineageUrl,
                            format!("`lineage.url`: {why}"),
                        )
                        .at(self.value(&["lineage", "url"]), why)
                        .help("e.g. `url = \"https://collector.example.com/api/v1/lineage\"`, or `file = \"lineage.jsonl\"`"),
                    );
                    return None;
                }
                let headers = self.headers(&["lineage", "headers"], &raw.headers);
                Some(Lineage {
                    sink: LineageSink::Http(super::HttpEndpoint {
                        url: url.clone(),
                        headers,
                    }),
                    namespace,
                })
            }
            (None, Some(file)) if !file.trim().is_empty() => Some(Lineage {
                sink: LineageSink::File(self.cx.dir.join(file)),
                namespace,
            }),
            _ => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::LineageSink,
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
                        ManifestErrorKind::EmptyValue,
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
                    ManifestErrorKind::EmptyValue,
                    "`pipeline.warehouse` is empty",
                )
                .at(self.value(&["pipeline", "warehouse"]), "empty")
                .help(
                    "name a directory, relative to the manifest, e.g. `warehouse = \"warehouse\"`",
                ),
            );
        }
        let remote = raw
            .warehouse
            .contains("://")
            .then(|| raw.warehouse.trim().to_string());
        if let Some(url) = &remote {
            if !super::model::is_s3_url(url) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::RemoteWarehouse,
                        format!("`pipeline.warehouse` is a URL weir cannot open: `{url}`"),
                    )
                    .at(self.value(&["pipeline", "warehouse"]), "not an s3:// URL")
                    .help(
                        "name a directory, relative to the manifest, or an S3 location `s3://bucket/prefix` (see docs/guides/s3.md)",
                    ),
                );
            }
        }
        Some(Pipeline {
            name: raw.name.clone(),
            code_version: raw.code_version.clone(),
            warehouse: match &remote {
                Some(url) => super::model::staging_dir(url, self.cx.staging),
                None => self.cx.dir.join(&raw.warehouse),
            },
            remote,
        })
    }

    fn pools(&mut self, entries: &[Entry<raw::RawPool>]) -> IndexMap<String, Pool> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            let name = entry.name.as_str();
            if self.safe_name("pool", name, &["pools", name], true) {
                self.name_fits("pool", name, &["pools", name], true);
            }
            let rate = raw.rate.as_deref().and_then(|text| match Rate::parse(text) {
                Ok(rate) => Some(rate),
                Err(why) => {
                    self.err(
                        ManifestError::new(
                            ManifestErrorKind::BadRate,
                            format!("pool `{name}` has an invalid rate: {why}"),
                        )
                        .at(self.value(&["pools", name, "rate"]), "not a rate")
                        .help(format!(
                            "write COUNT/DURATION, such as \"60/1m\" or \"5/1s\": at most COUNT launches (1 to {MAX_RATE_LAUNCHES}) in any DURATION"
                        )),
                    );
                    None
                }
            });
            match u32::try_from(raw.slots) {
                Ok(slots @ 1..=100_000) => {
                    out.insert(entry.name.clone(), Pool { slots, rate });
                }
                _ => self.err(
                    ManifestError::new(
                        ManifestErrorKind::BadSlots,
                        format!("pool `{name}` has {} slots", raw.slots),
                    )
                    .at(self.value(&["pools", name, "slots"]), "must be at least 1")
                    .help("a pool needs between 1 and 100000 slots; nothing could ever run in a pool with none"),
                ),
            }
        }
        out.entry("default".into()).or_insert(Pool {
            slots: DEFAULT_POOL_SLOTS,
            rate: None,
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
                        ManifestErrorKind::InvalidValue,
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
                            ManifestErrorKind::InvalidValue,
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
            let backoff = self.backoff(name, raw.backoff.as_ref(), &d.backoff);
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
                    backoff,
                    on_failure,
                    on_exhausted,
                },
            );
        }
        out.entry("default".into())
            .or_insert_with(RetryClass::default_class);
        out
    }

    /// A retry class's backoff: each setting the default's unless given,
    /// `initial` at most `max`, a multiplier from 1 to 100.
    fn backoff(&mut self, name: &str, b: Option<&raw::RawBackoff>, d: &BackoffSpec) -> BackoffSpec {
        let path = |k: &'static str| ["retry", name, "backoff", k];
        let initial = self.duration(
            b.and_then(|b| b.initial.as_deref()),
            d.initial,
            &path("initial"),
        );
        let max = self.duration(b.and_then(|b| b.max.as_deref()), d.max, &path("max"));
        if initial > max {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::BadRange,
                    format!("retry class `{name}` starts its backoff above its cap"),
                )
                .at(self.value(&path("initial")), "greater than `max`")
                .help("make `initial` at most `max`"),
            );
        }
        let multiplier = b.and_then(|b| b.multiplier).unwrap_or(d.multiplier);
        if !(1.0..=100.0).contains(&multiplier) {
            self.err(
                ManifestError::new(
                    ManifestErrorKind::InvalidValue,
                    format!("backoff multiplier {multiplier} is out of range"),
                )
                .at(self.value(&path("multiplier")), "must be between 1 and 100")
                .help("2.0 doubles the delay after each attempt"),
            );
        }
        let jitter = match b.and_then(|b| b.jitter.as_deref()) {
            None => d.jitter,
            Some("none") => Jitter::None,
            Some("full") => Jitter::Full,
            Some("equal") => Jitter::Equal,
            Some(other) => {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::InvalidValue,
                        format!("`{other}` is not a jitter mode"),
                    )
                    .at(self.value(&path("jitter")), "unknown jitter")
                    .help("use `none`, `full` or `equal`"),
                );
                d.jitter
            }
        };
        BackoffSpec {
            initial,
            max,
            multiplier,
            jitter,
        }
    }

    fn datasets(
        &mut self,
        entries: &[Entry<raw::RawDataset>],
    ) -> IndexMap<String, ExternalDataset> {
        let mut out = IndexMap::new();
        for entry in entries {
            let Some(raw) = &entry.raw else { continue };
            if self.safe_name("dataset", &entry.name, &["datasets", &entry.name], true) {
                self.name_fits("dataset", &entry.name, &["datasets", &entry.name], true);
            }
            if raw.path.trim().is_empty() {
                self.err(
                    ManifestError::new(ManifestErrorKind::EmptyValue, format!("dataset `{}` has an empty path", entry.name))
                        .at(self.value(&["datasets", &entry.name, "path"]), "empty")
                        .help("give a path template relative to the manifest, e.g. \"raw/{partition}.csv\""),
                );
            }
            let ready = raw
                .ready
                .as_ref()
                .and_then(|r| self.ready(&entry.name, r, raw.watermark.is_some()));
            let sensor_env = raw
                .ready
                .as_ref()
                .and_then(|r| self.ready_env(&entry.name, r));
            out.insert(
                entry.name.clone(),
                ExternalDataset {
                    path: raw.path.clone(),
                    format: raw.format,
                    watermark: raw.watermark.clone(),
                    ready,
                    sensor_env,
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
            if !self.safe_name("dataset", dataset, &path, false)
                || !self.name_fits("dataset", dataset, &path, false)
            {
                continue;
            }
            if names.datasets.contains(dataset) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::DuplicateOutput,
                        format!("task `{}` writes `{dataset}`, which is declared as an external dataset", entry.name),
                    )
                    .at(self.value(&path), "also an external dataset")
                    .also(self.key(&["datasets", dataset]), "declared here")
                    .help("a dataset is either external or published by one task: rename one of them"),
                );
            } else if let Some(first) = producers.get(dataset) {
                self.err(
                    ManifestError::new(
                        ManifestErrorKind::DuplicateOutput,
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
                ManifestErrorKind::Cycle,
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
