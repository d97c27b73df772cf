//! Input snapshots: the exact upstream generations and external file
//! contents an instance reads, pinned once per instance and run. Same
//! snapshot + same code_version ⇒ same output digest; so a rerun with an
//! equal snapshot has nothing to do.

use std::io::Read;
use std::path::PathBuf;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::audit::{Format, InputData};
use crate::manifest::{InputSource, Manifest, Task};
use crate::ops::certify;
use crate::store::Warehouse;

/// One pinned input.
#[derive(Debug, Clone, Serialize)]
pub struct PinnedInput {
    /// Dataset name.
    pub name: String,
    /// `external` or `upstream`.
    pub kind: &'static str,
    /// For upstream inputs: the producing task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// For upstream inputs: the pinned generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// For upstream inputs: that generation's token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// For external inputs: the path relative to the manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For external inputs with a declared watermark: the source's committed
    /// position when the input was pinned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watermark: Option<String>,
    /// Canonical digest (upstream) or SHA-256 of the file bytes (external).
    pub digest: String,
    /// Where the task reads it: a file (external) or a directory (upstream).
    #[serde(skip)]
    pub location: PathBuf,
    /// Its files and format, for reconcile gates.
    #[serde(skip)]
    pub data: Option<InputData>,
}

/// Everything an instance reads.
#[derive(Debug, Clone, Serialize)]
pub struct InputSnapshot {
    /// In the task's input order.
    pub inputs: Vec<PinnedInput>,
}

impl InputSnapshot {
    /// The snapshot as stored in commit records.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a snapshot always serializes")
    }

    /// SHA-256 over the snapshot's JSON (field order is fixed by the struct).
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("a snapshot always serializes");
        format!("sha256:{:x}", Sha256::digest(&bytes))
    }
}

/// Why an instance's inputs cannot be pinned.
#[derive(Debug, Clone)]
pub enum PinError {
    /// An external file is missing or unreadable.
    External(String),
    /// An upstream dataset has no publication for the partition.
    NoUpstream(String),
    /// The warehouse could not be read.
    Store(String),
    /// An upstream generation was uncertified by an operator.
    Uncertified(String),
}

impl PinError {
    /// Text for events.
    pub fn describe(&self) -> &str {
        match self {
            PinError::External(s)
            | PinError::NoUpstream(s)
            | PinError::Store(s)
            | PinError::Uncertified(s) => s,
        }
    }
}

/// Pins every input of `task` at `partition`.
pub fn pin(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &Task,
    partition: &str,
    allow_uncertified: bool,
) -> Result<InputSnapshot, PinError> {
    let mut inputs = Vec::with_capacity(task.inputs.len());
    for input in &task.inputs {
        match &input.source {
            InputSource::External => {
                let dataset = &manifest.datasets[&input.dataset];
                let relative = dataset.path.replace("{partition}", partition);
                let location = manifest.dir.join(&relative);
                let digest = file_digest(&location).map_err(|e| {
                    PinError::External(format!(
                        "external input `{}` ({}): {e}",
                        input.dataset,
                        location.display()
                    ))
                })?;
                let watermark = match &dataset.watermark {
                    Some(template) => {
                        let path = manifest
                            .dir
                            .join(template.replace("{partition}", partition));
                        let text = std::fs::read_to_string(&path).map_err(|e| {
                            PinError::External(format!(
                                "watermark of `{}` ({}): {e}",
                                input.dataset,
                                path.display()
                            ))
                        })?;
                        Some(text.trim().to_string())
                    }
                    None => None,
                };
                inputs.push(PinnedInput {
                    name: input.dataset.clone(),
                    kind: "external",
                    task: None,
                    generation: None,
                    token: None,
                    path: Some(relative),
                    watermark,
                    digest,
                    data: Some(InputData {
                        format: dataset.format,
                        files: vec![location.clone()],
                    }),
                    location,
                });
            }
            InputSource::Task(producer) => {
                let store = warehouse.partition(&input.dataset, partition);
                let record = store
                    .latest()
                    .map_err(|e| PinError::Store(e.to_string()))?
                    .ok_or_else(|| {
                        PinError::NoUpstream(format!(
                            "upstream dataset `{}` has no publication for partition {partition}",
                            input.dataset
                        ))
                    })?;
                let generation = record.generation.get();
                if !allow_uncertified
                    && !certify::is_certified(
                        warehouse.root(),
                        &input.dataset,
                        partition,
                        generation,
                    )
                {
                    let why =
                        certify::read(warehouse.root(), &input.dataset, partition, generation)
                            .map(|c| c.reason)
                            .unwrap_or_default();
                    return Err(PinError::Uncertified(format!(
                        "upstream `{}` {partition} generation {generation} is uncertified ({why}); run with --allow-uncertified to read it anyway",
                        input.dataset
                    )));
                }
                let format: Format = manifest.tasks[producer].output.format;
                let files = store.visible_files(&record);
                let location = files
                    .first()
                    .and_then(|f| f.parent().map(PathBuf::from))
                    .unwrap_or_else(|| warehouse.root().join(&record.attempt_dir).join("data"));
                inputs.push(PinnedInput {
                    name: input.dataset.clone(),
                    kind: "upstream",
                    task: Some(producer.clone()),
                    generation: Some(record.generation.get()),
                    token: Some(record.token.get()),
                    path: None,
                    watermark: None,
                    digest: record.digest.clone(),
                    data: Some(InputData { format, files }),
                    location,
                });
            }
        }
    }
    Ok(InputSnapshot { inputs })
}

/// SHA-256 of a file's bytes, as snapshots record external inputs.
pub(crate) fn file_digest(path: &std::path::Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("sha256:{:x}", hasher.finalize()))
}
