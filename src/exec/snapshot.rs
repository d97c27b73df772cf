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
    /// For an upstream input read at another partition than the task's own
    /// (a coarser period, an offset, a fan-out): that partition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// For an upstream input mapped to several partitions: each one pinned,
    /// in the mapping's order (then `generation` and `token` are absent and
    /// `digest` covers the list).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<PinnedPartition>,
    /// Canonical digest (upstream) or SHA-256 of the file bytes (external).
    pub digest: String,
    /// Where the task reads it: a file (external) or a directory (upstream).
    #[serde(skip)]
    pub location: PathBuf,
    /// Its files and format, for reconcile gates.
    #[serde(skip)]
    pub data: Option<InputData>,
}

/// One upstream partition of an input mapped to several.
#[derive(Debug, Clone, Serialize)]
pub struct PinnedPartition {
    /// The upstream partition key.
    pub partition: String,
    /// Its pinned generation.
    pub generation: u64,
    /// That generation's token.
    pub token: u64,
    /// That generation's canonical digest.
    pub digest: String,
    /// Its published data directory.
    #[serde(skip)]
    pub dir: PathBuf,
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
    now: i64,
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
                    partition: None,
                    partitions: Vec::new(),
                    digest,
                    data: Some(InputData {
                        format: dataset.format,
                        files: vec![location.clone()],
                    }),
                    location,
                });
            }
            InputSource::Task(producer) => {
                let upstream = &manifest.tasks[producer];
                let keys = crate::partition::map_keys(
                    &task.dims,
                    partition,
                    &upstream.dims,
                    input.shift,
                    now,
                )
                .map_err(|e| PinError::NoUpstream(format!("upstream `{}`: {e}", input.dataset)))?;
                let format: Format = upstream.output.format;
                let mut pinned = Vec::with_capacity(keys.len());
                let mut files = Vec::new();
                for key in &keys {
                    let (part, part_files) =
                        pin_partition(warehouse, &input.dataset, key.as_str(), allow_uncertified)?;
                    files.extend(part_files);
                    pinned.push(part);
                }
                match pinned.as_slice() {
                    [one] => {
                        let one = one.clone();
                        inputs.push(PinnedInput {
                            name: input.dataset.clone(),
                            kind: "upstream",
                            task: Some(producer.clone()),
                            generation: Some(one.generation),
                            token: Some(one.token),
                            path: None,
                            watermark: None,
                            partition: (one.partition != partition).then(|| one.partition.clone()),
                            partitions: Vec::new(),
                            digest: one.digest,
                            data: Some(InputData { format, files }),
                            location: one.dir,
                        });
                    }
                    _ => {
                        let mut hasher = Sha256::new();
                        // Generation and token too: a staged directory
                        // points at one generation's files, never at an
                        // equal-digest sibling that gc may collect.
                        for p in &pinned {
                            hasher.update(
                                format!(
                                    "{}\0{}\0{}\0{}\n",
                                    p.partition, p.generation, p.token, p.digest
                                )
                                .as_bytes(),
                            );
                        }
                        let digest = format!("sha256:{:x}", hasher.finalize());
                        let location = stage_partitions(
                            warehouse,
                            task,
                            partition,
                            &input.dataset,
                            &digest,
                            &pinned,
                        )
                        .map_err(|e| {
                            PinError::Store(format!("cannot stage input `{}`: {e}", input.dataset))
                        })?;
                        inputs.push(PinnedInput {
                            name: input.dataset.clone(),
                            kind: "upstream",
                            task: Some(producer.clone()),
                            generation: None,
                            token: None,
                            path: None,
                            watermark: None,
                            partition: None,
                            partitions: pinned,
                            digest,
                            data: Some(InputData { format, files }),
                            location,
                        });
                    }
                }
            }
        }
    }
    Ok(InputSnapshot { inputs })
}

/// The latest generation of one upstream partition, if published and
/// certified, and its files.
fn pin_partition(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    allow_uncertified: bool,
) -> Result<(PinnedPartition, Vec<PathBuf>), PinError> {
    let store = warehouse.partition(dataset, partition);
    let record = store
        .latest()
        .map_err(|e| PinError::Store(e.to_string()))?
        .ok_or_else(|| {
            PinError::NoUpstream(format!(
                "upstream dataset `{dataset}` has no publication for partition {partition}"
            ))
        })?;
    let generation = record.generation.get();
    if !allow_uncertified
        && !certify::is_certified(warehouse.root(), dataset, partition, generation)
    {
        let why = certify::read(warehouse.root(), dataset, partition, generation)
            .map(|c| c.reason)
            .unwrap_or_default();
        return Err(PinError::Uncertified(format!(
            "upstream `{dataset}` {partition} generation {generation} is uncertified ({why}); run with --allow-uncertified to read it anyway"
        )));
    }
    let files = store.visible_files(&record);
    let dir = files
        .first()
        .and_then(|f| f.parent().map(PathBuf::from))
        .unwrap_or_else(|| warehouse.root().join(&record.attempt_dir).join("data"));
    Ok((
        PinnedPartition {
            partition: partition.to_string(),
            generation,
            token: record.token.get(),
            digest: record.digest.clone(),
            dir,
        },
        files,
    ))
}

/// The name of the list of keys inside an input mapped to several
/// partitions: a JSON array of the keys, in the mapping's order.
pub const KEYS_FILE: &str = "_keys.json";

/// Lays out an input mapped to several partitions as the task reads it:
/// `<dir>/<encoded key>/` per partition holding that generation's files,
/// and [`KEYS_FILE`]. Built once per instance and snapshot under
/// `<warehouse>/_inputs/` (in a temporary directory renamed into place, so
/// two engines never see half of one) and reused by retries.
pub(crate) fn stage_partitions(
    warehouse: &Warehouse,
    task: &Task,
    partition: &str,
    dataset: &str,
    digest: &str,
    pinned: &[PinnedPartition],
) -> std::io::Result<PathBuf> {
    use crate::store::encode_partition;
    let short = digest
        .trim_start_matches("sha256:")
        .get(..16)
        .unwrap_or(digest);
    let parent = warehouse
        .root()
        .join("_inputs")
        .join(&task.name)
        .join(encode_partition(partition));
    let dest = parent.join(format!("{}-{short}", encode_partition(dataset)));
    if dest.join(KEYS_FILE).is_file() {
        return Ok(dest);
    }
    std::fs::create_dir_all(&parent)?;
    let tmp = parent.join(format!(".tmp-{}-{}", std::process::id(), fastrand::u64(..)));
    std::fs::create_dir(&tmp)?;
    for p in pinned {
        materialize(&p.dir, &tmp.join(encode_partition(&p.partition)))?;
    }
    let keys: Vec<&str> = pinned.iter().map(|p| p.partition.as_str()).collect();
    std::fs::write(
        tmp.join(KEYS_FILE),
        serde_json::to_vec(&keys).expect("a list of strings serializes"),
    )?;
    match std::fs::rename(&tmp, &dest) {
        Ok(()) => Ok(dest),
        // Another engine or instance staged the same snapshot first.
        Err(_) if dest.join(KEYS_FILE).is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dest)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// Makes a pinned generation's files (its published data directory) appear
/// at `dest`. The one place that decides how a task is handed a generation.
pub(crate) fn materialize(
    generation_dir: &std::path::Path,
    dest: &std::path::Path,
) -> std::io::Result<()> {
    std::os::unix::fs::symlink(generation_dir, dest)
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
