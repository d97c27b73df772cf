//! A plan is a contract (`weir plan … --out plan.json`, then `weir run
//! --plan` or `weir backfill … --plan`): the file lists the instances a
//! person reviewed and, for each, the world it assumed — every input as
//! pinned then (an upstream generation and digest, an external file's
//! SHA-256 or watermark), the task's code version and fingerprint, and the
//! output's current generation. The run recomputes that world before
//! anything starts and refuses, naming every difference, when it is not
//! the one signed (`terraform plan -out` then `apply plan.out`).
//!
//! An input produced by an instance of the plan itself is not published
//! yet: it is recorded as not pinnable, and the run compares that too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{Plan, Scope};
use crate::manifest::{Manifest, Task};
use crate::store::Warehouse;

/// The version of the plan file's format.
pub const FORMAT_VERSION: u32 = 1;

/// What `kind` says in every plan file.
pub const KIND: &str = "weir-plan";

/// A plan file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanFile {
    /// Always [`KIND`].
    pub kind: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The pipeline's name.
    pub pipeline: String,
    /// The manifest's path as given and the SHA-256 of its bytes.
    pub manifest: ManifestId,
    /// The warehouse's location.
    pub warehouse: String,
    /// What was planned.
    pub scope: FileScope,
    /// The task selectors (`--task`), if any.
    pub tasks: Vec<String>,
    /// The code version.
    pub code_version: String,
    /// The estimate a person approved.
    pub estimate: FileEstimate,
    /// Every instance, in plan order, with the world it assumed.
    pub instances: Vec<InstanceWorld>,
}

/// Which manifest a plan was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestId {
    /// As given on the command line.
    pub path: String,
    /// `sha256:…` of its bytes.
    pub sha256: String,
}

/// The plan's scope, as a file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileScope {
    /// The latest complete partition of each scheme.
    Latest,
    /// Explicit keys.
    Partitions {
        /// The keys.
        keys: Vec<String>,
    },
    /// A declared backfill.
    Backfill {
        /// Its name.
        name: String,
    },
    /// An ad-hoc range.
    Range {
        /// First key.
        from: String,
        /// Last key.
        to: String,
    },
}

impl FileScope {
    /// From a command's scope; `None` for a repair (no plan file).
    pub fn of(scope: &Scope) -> Option<FileScope> {
        Some(match scope {
            Scope::Latest => FileScope::Latest,
            Scope::Partitions(keys) => FileScope::Partitions { keys: keys.clone() },
            Scope::Backfill(name) => FileScope::Backfill { name: name.clone() },
            Scope::Range { from, to } => FileScope::Range {
                from: from.clone(),
                to: to.clone(),
            },
            Scope::Repair { .. } => return None,
        })
    }

    /// Back to a command's scope.
    pub fn scope(&self) -> Scope {
        match self {
            FileScope::Latest => Scope::Latest,
            FileScope::Partitions { keys } => Scope::Partitions(keys.clone()),
            FileScope::Backfill { name } => Scope::Backfill(name.clone()),
            FileScope::Range { from, to } => Scope::Range {
                from: from.clone(),
                to: to.clone(),
            },
        }
    }
}

/// The estimate in a plan file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEstimate {
    /// Wall time at p50 attempt durations.
    pub estimated_wall_ms: u64,
    /// Wall time at p90 attempt durations.
    pub estimated_wall_p90_ms: u64,
}

/// One instance and the world it assumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceWorld {
    /// The task.
    pub task: String,
    /// The partition key.
    pub partition: String,
    /// The task's code fingerprint (`None`: its `code` could not be read).
    pub fingerprint: Option<String>,
    /// The output partition's current generation (`None`: unpublished).
    pub output_generation: Option<u64>,
    /// Each input by name: as pinned, or why it could not be.
    pub inputs: BTreeMap<String, InputWorld>,
}

/// One input as a plan saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputWorld {
    /// Pinned: the stored form of the pin (generation, token and digest,
    /// or the file's path, SHA-256 and watermark).
    Pinned(serde_json::Value),
    /// Not pinnable then (missing, or produced by this plan), and why.
    Unpinned(String),
}

/// `sha256:…` of a file's bytes.
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(format!("sha256:{:x}", Sha256::digest(&bytes)))
}

/// The world of instance `(task, key)` now.
pub fn world(
    manifest: &Manifest,
    warehouse: Option<&Warehouse>,
    task: &Task,
    key: &str,
    now: i64,
) -> InstanceWorld {
    let fingerprint = crate::manifest::fingerprint::fingerprint(&manifest.dir, task).ok();
    let output_generation = warehouse
        .and_then(|w| w.partition(&task.output.dataset, key).latest().ok())
        .flatten()
        .map(|r| r.generation.get());
    let mut inputs = BTreeMap::new();
    for input in &task.inputs {
        // One input at a time, so that one not pinnable (produced by this
        // plan) does not hide the others.
        if input.source == crate::manifest::InputSource::External {
            inputs.insert(
                input.dataset.clone(),
                external(manifest, &input.dataset, key),
            );
            continue;
        }
        let mut one = task.clone();
        one.inputs = vec![input.clone()];
        let pinned = match warehouse {
            Some(w) => crate::inputs::pin_with(
                manifest,
                w,
                &one,
                key,
                false,
                now,
                &crate::store::certs::Listed::default(),
                crate::inputs::Reads::Digests,
            )
            .map_err(|e| e.to_string()),
            None => Err("nothing is published yet".to_owned()),
        };
        let seen = match pinned {
            Ok(snapshot) => match snapshot.inputs.first() {
                Some(p) => InputWorld::Pinned(serde_json::to_value(p).unwrap_or_default()),
                None => InputWorld::Unpinned("nothing pinned".into()),
            },
            Err(e) => InputWorld::Unpinned(e),
        };
        inputs.insert(input.dataset.clone(), seen);
    }
    InstanceWorld {
        task: task.name.clone(),
        partition: key.to_owned(),
        fingerprint,
        output_generation,
        inputs,
    }
}

/// An external input by its file's SHA-256 and its watermark: read
/// whether or not the warehouse exists yet.
fn external(manifest: &Manifest, name: &str, key: &str) -> InputWorld {
    let Some(dataset) = manifest.datasets.get(name) else {
        return InputWorld::Unpinned(format!("no dataset `{name}`"));
    };
    let path = dataset.path.replace("{partition}", key);
    let digest = match file_sha256(&manifest.dir.join(&path)) {
        Ok(digest) => digest,
        Err(e) => return InputWorld::Unpinned(format!("{path}: {e}")),
    };
    let watermark = dataset.watermark.as_ref().map(|template| {
        let file = manifest.dir.join(template.replace("{partition}", key));
        std::fs::read_to_string(&file)
            .map(|t| t.trim().to_owned())
            .unwrap_or_else(|e| format!("unreadable: {e}"))
    });
    InputWorld::Pinned(serde_json::json!({
        "kind": "external",
        "path": path,
        "digest": digest,
        "watermark": watermark,
    }))
}

/// Every instance of `plan` with its world now.
pub fn worlds(
    manifest: &Manifest,
    warehouse: Option<&Warehouse>,
    plan: &Plan,
    now: i64,
) -> Vec<InstanceWorld> {
    let mut out = Vec::with_capacity(plan.instance_count());
    for t in &plan.tasks {
        let task = &manifest.tasks[&t.name];
        for key in t.keys.iter() {
            out.push(world(manifest, warehouse, task, key, now));
        }
    }
    out
}

/// Why `file` cannot be run against `manifest` (loaded from `path`) and
/// `warehouse` as `plan` (planned now from the file's scope) stands, one
/// line per difference; empty when the world is the one signed.
pub fn differences(
    file: &PlanFile,
    manifest: &Manifest,
    manifest_sha256: &str,
    warehouse: Option<&Warehouse>,
    plan: &Plan,
    now: i64,
) -> Vec<String> {
    let mut out = Vec::new();
    if file.pipeline != manifest.pipeline.name {
        out.push(format!(
            "the plan is for pipeline `{}`, the manifest declares `{}`",
            file.pipeline, manifest.pipeline.name
        ));
        return out;
    }
    if file.warehouse != manifest.pipeline.location() {
        out.push(format!(
            "the plan is for warehouse {}, the manifest's is {}",
            file.warehouse,
            manifest.pipeline.location()
        ));
        return out;
    }
    if file.manifest.sha256 != manifest_sha256 {
        out.push(format!(
            "manifest changed: {} was {}, is {}",
            file.manifest.path, file.manifest.sha256, manifest_sha256
        ));
    }
    if file.code_version != manifest.pipeline.code_version {
        out.push(format!(
            "code changed: code_version was {}, is {}",
            file.code_version, manifest.pipeline.code_version
        ));
    }
    let planned: Vec<(String, String)> = file
        .instances
        .iter()
        .map(|w| (w.task.clone(), w.partition.clone()))
        .collect();
    let now_planned: Vec<(String, String)> = plan
        .tasks
        .iter()
        .flat_map(|t| t.keys.iter().map(|k| (t.name.clone(), k.clone())))
        .collect();
    for (task, key) in now_planned.iter().filter(|i| !planned.contains(i)) {
        out.push(format!("{task} {key}: not in the plan, planned now"));
    }
    for (task, key) in planned.iter().filter(|i| !now_planned.contains(i)) {
        out.push(format!("{task} {key}: in the plan, not planned now"));
    }
    // Code is one per task: said once, however many instances it builds.
    let mut code_told = std::collections::HashSet::new();
    for signed in &file.instances {
        let Some(task) = manifest.tasks.get(&signed.task) else {
            continue;
        };
        if code_told.insert(&signed.task) {
            let now = crate::manifest::fingerprint::fingerprint(&manifest.dir, task).ok();
            if signed.fingerprint != now {
                out.push(format!(
                    "task `{}`: code changed: fingerprint was {}, is {}",
                    signed.task,
                    signed.fingerprint.as_deref().unwrap_or("unreadable"),
                    now.as_deref().unwrap_or("unreadable")
                ));
            }
        }
        if !now_planned.contains(&(signed.task.clone(), signed.partition.clone())) {
            continue;
        }
        let now_world = world(manifest, warehouse, task, &signed.partition, now);
        out.extend(instance_differences(signed, &now_world));
    }
    out
}

fn instance_differences(signed: &InstanceWorld, now: &InstanceWorld) -> Vec<String> {
    let at = format!("{} {}", signed.task, signed.partition);
    let mut out = Vec::new();
    if signed.output_generation != now.output_generation {
        let g = |g: Option<u64>| g.map_or("none".to_owned(), |g| format!("generation {g}"));
        out.push(format!(
            "{at}: partition published meanwhile: its output was {}, is {}",
            g(signed.output_generation),
            g(now.output_generation)
        ));
    }
    for (name, was) in &signed.inputs {
        let is = now.inputs.get(name);
        if is == Some(was) {
            continue;
        }
        out.push(format!("{at}: input `{name}` {}", input_change(was, is)));
    }
    for name in now
        .inputs
        .keys()
        .filter(|n| !signed.inputs.contains_key(*n))
    {
        out.push(format!("{at}: input `{name}` is new"));
    }
    out
}

/// How an input changed, in words.
fn input_change(was: &InputWorld, is: Option<&InputWorld>) -> String {
    let field = |v: &serde_json::Value, f: &str| v.get(f).cloned().unwrap_or_default();
    match (was, is) {
        (_, None) => "is no longer read".into(),
        (InputWorld::Pinned(a), Some(InputWorld::Pinned(b))) => {
            if field(a, "kind") == "external" {
                if field(a, "watermark") != field(b, "watermark") {
                    return format!(
                        "watermark changed: was {}, is {}",
                        field(a, "watermark"),
                        field(b, "watermark")
                    );
                }
                return format!(
                    "file {} changed: was {}, is {}",
                    field(a, "path").as_str().unwrap_or_default(),
                    field(a, "digest").as_str().unwrap_or_default(),
                    field(b, "digest").as_str().unwrap_or_default()
                );
            }
            let generation = |v: &serde_json::Value| match field(v, "generation") {
                serde_json::Value::Null => "several partitions".to_owned(),
                g => format!("generation {g}"),
            };
            format!(
                "republished: was {} ({}), is {} ({})",
                generation(a),
                field(a, "digest").as_str().unwrap_or_default(),
                generation(b),
                field(b, "digest").as_str().unwrap_or_default()
            )
        }
        (InputWorld::Pinned(_), Some(InputWorld::Unpinned(why))) => {
            format!("can no longer be read: {why}")
        }
        (InputWorld::Unpinned(_), Some(InputWorld::Pinned(_))) => {
            "published meanwhile (the plan expected to build or wait for it)".into()
        }
        (InputWorld::Unpinned(a), Some(InputWorld::Unpinned(b))) => {
            format!("changed: was not readable ({a}), is not readable ({b})")
        }
    }
}
