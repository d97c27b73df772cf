//! Input snapshots: the exact upstream generations and external file
//! contents an instance reads, pinned once per instance and run. Same
//! snapshot + same code_version ⇒ same output digest; so a rerun with an
//! equal snapshot has nothing to do.
//!
//! A module of its own below `plan` and `exec`: planning pins to judge
//! whether an instance is stale, running pins once per attempt and hands
//! the task private copies of what was pinned ([`materialize`]).

pub mod materialize;

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::audit::{Format, InputData};
use crate::manifest::{InputSource, Manifest, Task};
use crate::store::certs as certify;
use crate::store::{CommitRecord, Look, Warehouse};
pub(crate) use materialize::stage_partitions;
pub use materialize::KEYS_FILE;

/// One pinned input: its name and digest, and what was pinned of it, by
/// kind. Stored in commit records as one flat object with a `kind` field
/// ([`StoredInput`]), byte for byte as before the kinds were typed, so
/// snapshot digests and old records stay what they were.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "StoredInput")]
pub struct PinnedInput {
    /// Dataset name.
    pub name: String,
    /// What was pinned, per kind of input.
    pub pinned: Pinned,
    /// Canonical digest (upstream) or SHA-256 of the file bytes (external;
    /// for an input mapped to several partitions, over the list).
    pub digest: String,
    /// Where it is published: the external file, the upstream generation's
    /// data directory, or (an input mapped to several partitions) the
    /// dataset's directory. Tasks read private copies (`inputs`). Not
    /// stored: empty in a snapshot read back.
    pub location: PathBuf,
    /// Its files and format, for reconcile gates. Not stored.
    pub data: Option<InputData>,
    /// The commit records the pin read of its upstream generations (each
    /// names its partition and generation): the copies for the task are
    /// checked against these, not against a second read of the same
    /// immutable records. Not stored: empty for an external input, an
    /// input pinned by digests alone and a snapshot read back.
    pub(crate) records: Vec<Arc<CommitRecord>>,
}

/// What was pinned of one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinned {
    /// A file beside the manifest.
    External {
        /// Its path relative to the manifest.
        path: String,
        /// With a declared watermark: the source's committed position when
        /// the input was pinned.
        watermark: Option<String>,
    },
    /// One generation of an upstream partition.
    Upstream {
        /// The producing task.
        task: String,
        /// The pinned generation.
        generation: u64,
        /// That generation's token.
        token: u64,
        /// When read at another partition than the task's own (a coarser
        /// period, an offset, a fan-out): that partition.
        partition: Option<String>,
    },
    /// An upstream input mapped to several partitions, each pinned.
    Mapped {
        /// The producing task.
        task: String,
        /// Each partition pinned, in the mapping's order.
        partitions: Vec<PinnedPartition>,
        /// Those an operator accepted as missing (`weir accept`), which it
        /// was read without.
        accepted_missing: Vec<String>,
    },
}

impl PinnedInput {
    /// The watermark an external input was pinned at, if declared.
    pub fn watermark(&self) -> Option<&str> {
        match &self.pinned {
            Pinned::External { watermark, .. } => watermark.as_deref(),
            _ => None,
        }
    }

    /// The record of `generation` of `partition` as the pin read it, if it did.
    pub(crate) fn record(&self, partition: &str, generation: u64) -> Option<&CommitRecord> {
        self.records
            .iter()
            .find(|r| r.generation.get() == generation && r.partition == partition)
            .map(AsRef::as_ref)
    }
}

/// A pinned input as commit records hold it: the flat layout and field
/// order every stored snapshot (and its digest) has.
#[derive(Serialize, Deserialize)]
struct StoredInput {
    name: String,
    /// `external` or `upstream`.
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    watermark: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    partitions: Vec<PinnedPartition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    accepted_missing: Vec<String>,
    digest: String,
}

impl Serialize for PinnedInput {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut stored = StoredInput {
            name: self.name.clone(),
            kind: String::new(),
            task: None,
            generation: None,
            token: None,
            path: None,
            watermark: None,
            partition: None,
            partitions: Vec::new(),
            accepted_missing: Vec::new(),
            digest: self.digest.clone(),
        };
        match &self.pinned {
            Pinned::External { path, watermark } => {
                stored.kind = "external".to_owned();
                stored.path = Some(path.clone());
                stored.watermark.clone_from(watermark);
            }
            Pinned::Upstream {
                task,
                generation,
                token,
                partition,
            } => {
                stored.kind = "upstream".to_owned();
                stored.task = Some(task.clone());
                stored.generation = Some(*generation);
                stored.token = Some(*token);
                stored.partition.clone_from(partition);
            }
            Pinned::Mapped {
                task,
                partitions,
                accepted_missing,
            } => {
                stored.kind = "upstream".to_owned();
                stored.task = Some(task.clone());
                stored.partitions.clone_from(partitions);
                stored.accepted_missing.clone_from(accepted_missing);
            }
        }
        stored.serialize(serializer)
    }
}

/// Why a recorded input (a lock or a manifest of inputs) does not read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoredInputError {
    /// An external input recorded without its path.
    #[error("external input `{name}` has no path")]
    NoPath {
        /// The input's name.
        name: String,
    },
    /// A kind (or a combination of fields) this weir does not know.
    #[error(
        "input `{name}` of kind `{kind}` is neither an external file nor an upstream generation"
    )]
    UnknownKind {
        /// The input's name.
        name: String,
        /// Its recorded kind.
        kind: String,
    },
}

impl TryFrom<StoredInput> for PinnedInput {
    type Error = StoredInputError;

    fn try_from(s: StoredInput) -> Result<PinnedInput, StoredInputError> {
        let pinned = match (s.kind.as_str(), s.task, s.generation, s.token) {
            ("external", _, _, _) => Pinned::External {
                path: s.path.ok_or_else(|| StoredInputError::NoPath {
                    name: s.name.clone(),
                })?,
                watermark: s.watermark,
            },
            ("upstream", Some(task), Some(generation), Some(token)) => Pinned::Upstream {
                task,
                generation,
                token,
                partition: s.partition,
            },
            ("upstream", Some(task), None, None) => Pinned::Mapped {
                task,
                partitions: s.partitions,
                accepted_missing: s.accepted_missing,
            },
            (kind, ..) => {
                return Err(StoredInputError::UnknownKind {
                    name: s.name,
                    kind: kind.to_string(),
                })
            }
        };
        Ok(PinnedInput {
            name: s.name,
            pinned,
            digest: s.digest,
            location: PathBuf::new(),
            data: None,
            records: Vec::new(),
        })
    }
}

/// One upstream partition of an input mapped to several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedPartition {
    /// The upstream partition key.
    pub partition: String,
    /// Its pinned generation.
    pub generation: u64,
    /// That generation's token.
    pub token: u64,
    /// That generation's canonical digest.
    pub digest: String,
}

/// Everything an instance reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InputSnapshot {
    /// In the task's input order.
    pub inputs: Vec<PinnedInput>,
}

impl InputSnapshot {
    /// The snapshot as stored in commit records.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a snapshot always serializes")
    }

    /// Whether an upstream input was pinned by its marker's summary alone
    /// ([`Reads::Digests`]): enough for its digest, not for an attempt.
    pub fn lacks_files(&self) -> bool {
        self.inputs.iter().any(|i| i.data.is_none())
    }

    /// SHA-256 over the snapshot's JSON (field order is fixed by the struct).
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("a snapshot always serializes");
        format!("sha256:{:x}", Sha256::digest(&bytes))
    }
}

/// Why an instance's inputs cannot be pinned; each keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// An external file is missing or unreadable.
    #[error("external input `{dataset}` ({}): {source}", path.display())]
    External {
        /// The external dataset.
        dataset: String,
        /// Its file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// An external dataset's watermark file is missing or unreadable.
    #[error("watermark of `{dataset}` ({}): {source}", path.display())]
    Watermark {
        /// The external dataset.
        dataset: String,
        /// Its watermark file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The instance's partition does not map onto the upstream scheme.
    #[error("upstream `{dataset}`: {source}")]
    Mapping {
        /// The upstream dataset.
        dataset: String,
        /// Why the key does not map.
        #[source]
        source: crate::partition::MapError,
    },
    /// An upstream dataset has no publication for the partition.
    #[error("upstream dataset `{dataset}` has no publication for partition {partition}")]
    NoUpstream {
        /// The upstream dataset.
        dataset: String,
        /// The partition it lacks.
        partition: String,
    },
    /// The warehouse could not be read.
    #[error("{}", crate::store::chain(.0))]
    Store(#[source] crate::store::StoreError),
    /// An upstream generation was uncertified by an operator.
    #[error("upstream `{dataset}` {partition} generation {generation} is uncertified ({why}); run with --allow-uncertified to read it anyway")]
    Uncertified {
        /// The upstream dataset.
        dataset: String,
        /// Its partition.
        partition: String,
        /// The uncertified generation.
        generation: u64,
        /// The operator's reason.
        why: String,
    },
}

impl PinError {
    /// Text for events.
    pub fn describe(&self) -> String {
        self.to_string()
    }

    /// Whether an external file (data or watermark) is what is missing:
    /// the next run pins it once the file is there.
    pub fn is_external(&self) -> bool {
        matches!(self, PinError::External { .. } | PinError::Watermark { .. })
    }
}

/// An external input file (or its watermark file) that is not there: what
/// a run holds the instance for, and what `status`, `explain` and `retry`
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingExternal {
    /// The external dataset.
    pub dataset: String,
    /// The file that does not exist.
    pub path: PathBuf,
    /// Whether it is the dataset's watermark file, not its data.
    pub watermark: bool,
}

impl std::fmt::Display for MissingExternal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.watermark {
            write!(
                f,
                "the watermark of external input `{}` ({}) does not exist",
                self.dataset,
                self.path.display()
            )
        } else {
            write!(
                f,
                "external input `{}` ({}) does not exist",
                self.dataset,
                self.path.display()
            )
        }
    }
}

/// The first external input of `task` at `partition` whose file or
/// watermark file does not exist, as [`pin`] would find it.
pub fn missing_external(
    manifest: &Manifest,
    task: &Task,
    partition: &str,
) -> Option<MissingExternal> {
    task.inputs
        .iter()
        .filter(|i| matches!(i.source, InputSource::External))
        .find_map(|input| {
            let dataset = manifest.datasets.get(&input.dataset)?;
            let files = std::iter::once((dataset.path.as_str(), false))
                .chain(dataset.watermark.as_deref().map(|w| (w, true)));
            files.into_iter().find_map(|(template, watermark)| {
                let path = manifest
                    .dir
                    .join(template.replace("{partition}", partition));
                (!path.exists()).then(|| MissingExternal {
                    dataset: input.dataset.clone(),
                    path,
                    watermark,
                })
            })
        })
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
    pin_with(
        manifest,
        warehouse,
        task,
        partition,
        allow_uncertified,
        now,
        &certify::Listed::default(),
        Reads::Files,
    )
}

/// How much of each upstream generation a pin reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Its record and files: what an attempt reads.
    Files,
    /// What the snapshot's digest needs (generation, token, digest), from
    /// the publication marker's summary when the log's listing showed one
    /// and the record is not kept: enough to tell an instance current.
    /// An input pinned so has no files ([`InputSnapshot::lacks_files`]).
    Digests,
}

/// [`pin`], reading no certification mark of an upstream partition that
/// `certs` (listed as the instance started) shows has none, and reading
/// what `reads` says of each upstream generation.
#[allow(clippy::too_many_arguments)] // Each is one question a pin answers.
pub fn pin_with(
    manifest: &Manifest,
    warehouse: &Warehouse,
    task: &Task,
    partition: &str,
    allow_uncertified: bool,
    now: i64,
    certs: &certify::Listed,
    reads: Reads,
) -> Result<InputSnapshot, PinError> {
    let mut inputs = Vec::with_capacity(task.inputs.len());
    for input in &task.inputs {
        inputs.push(match &input.source {
            InputSource::External => pin_external(manifest, &input.dataset, partition)?,
            InputSource::Task(producer) => {
                let keys = crate::partition::map_keys(
                    &task.dims,
                    partition,
                    &manifest.tasks[producer].dims,
                    input.shift,
                    now,
                )
                .map_err(|source| PinError::Mapping {
                    dataset: input.dataset.clone(),
                    source,
                })?;
                let upstream = Upstream {
                    warehouse,
                    producer,
                    dataset: &input.dataset,
                    format: manifest.tasks[producer].output.format,
                    reads,
                };
                pin_upstream(&upstream, partition, &keys, |key| {
                    allow_uncertified || certs.none_for(&input.dataset, key)
                })?
            }
        });
    }
    Ok(InputSnapshot { inputs })
}

/// An external input at `partition`: its file's digest, and its watermark
/// as read now.
fn pin_external(manifest: &Manifest, name: &str, partition: &str) -> Result<PinnedInput, PinError> {
    let dataset = &manifest.datasets[name];
    let relative = dataset.path.replace("{partition}", partition);
    let location = manifest.dir.join(&relative);
    let digest = file_digest(&location).map_err(|source| PinError::External {
        dataset: name.to_owned(),
        path: location.clone(),
        source,
    })?;
    let watermark = match &dataset.watermark {
        Some(template) => {
            let path = manifest
                .dir
                .join(template.replace("{partition}", partition));
            let text = crate::store::user_file::read_limited(
                &path,
                crate::store::user_file::WATERMARK_LIMIT,
            )
            .map_err(|source| PinError::Watermark {
                dataset: name.to_owned(),
                path: path.clone(),
                source,
            })?;
            Some(text.trim().to_string())
        }
        None => None,
    };
    Ok(PinnedInput {
        name: name.to_owned(),
        pinned: Pinned::External {
            path: relative,
            watermark,
        },
        digest,
        data: Some(InputData {
            format: dataset.format,
            files: vec![location.clone()],
        }),
        location,
        records: Vec::new(),
    })
}

/// The upstream task an input reads, and where.
struct Upstream<'a> {
    warehouse: &'a Warehouse,
    producer: &'a String,
    dataset: &'a String,
    format: Format,
    reads: Reads,
}

/// An input read from an upstream task at `keys`, its partitions mapped
/// from `partition`: one generation when it is the one partition, else one
/// per key (a gap an operator accepted left out). `uncertified_ok` says
/// whether an uncertified generation of a key may be read.
fn pin_upstream(
    upstream: &Upstream<'_>,
    partition: &str,
    keys: &[crate::partition::PartitionKey],
    uncertified_ok: impl Fn(&str) -> bool,
) -> Result<PinnedInput, PinError> {
    let Upstream {
        warehouse,
        producer,
        dataset,
        format,
        reads,
    } = *upstream;
    let mut pinned = Vec::with_capacity(keys.len());
    let mut files = Vec::new();
    let mut dirs = Vec::with_capacity(keys.len());
    let mut accepted = Vec::new();
    let mut records = Vec::new();
    let mut complete = true;
    for key in keys {
        let (part, part_files, dir) = match pin_partition(
            warehouse,
            dataset,
            key.as_str(),
            uncertified_ok(key.as_str()),
            reads,
        ) {
            Ok(found) => found,
            // A gap an operator accepted, among several
            // partitions (fan-in, window, rollup): read without
            // it. An input of one partition stays blocked.
            Err(e @ PinError::NoUpstream { .. }) => {
                if keys.len() > 1
                    && crate::store::marks::is_accepted(warehouse, producer, key.as_str())
                {
                    accepted.push(key.as_str().to_string());
                    continue;
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        complete &= part_files.is_some();
        if let Some((part_files, record)) = part_files {
            files.extend(part_files);
            records.push(record);
        }
        pinned.push(part);
        dirs.push(dir);
    }
    let data = complete.then_some(InputData { format, files });
    if let ([one], 1) = (pinned.as_slice(), keys.len()) {
        let one = one.clone();
        return Ok(PinnedInput {
            name: dataset.clone(),
            pinned: Pinned::Upstream {
                task: producer.clone(),
                generation: one.generation,
                token: one.token,
                partition: (one.partition != partition).then(|| one.partition.clone()),
            },
            digest: one.digest,
            data,
            location: dirs.swap_remove(0),
            records,
        });
    }
    Ok(PinnedInput {
        name: dataset.clone(),
        digest: mapped_digest(&pinned, &accepted),
        pinned: Pinned::Mapped {
            task: producer.clone(),
            partitions: pinned,
            accepted_missing: accepted,
        },
        data,
        // The task gets its own copies, laid out per key
        // when the attempt starts (`stage_partitions`).
        location: warehouse.dataset_dir(dataset),
        records,
    })
}

/// The digest of an input mapped to several partitions: each pinned
/// generation, and the gaps accepted.
fn mapped_digest(pinned: &[PinnedPartition], accepted: &[String]) -> String {
    let mut hasher = Sha256::new();
    // Generation and token too: a staged directory
    // points at one generation's files, never at an
    // equal-digest sibling that gc may collect.
    for p in pinned {
        hasher.update(
            format!(
                "{}\0{}\0{}\0{}\n",
                p.partition, p.generation, p.token, p.digest
            )
            .as_bytes(),
        );
    }
    // Only when there are any: older snapshots digest
    // as they always did.
    for key in accepted {
        hasher.update(format!("accepted\0{key}\n").as_bytes());
    }
    format!("sha256:{:x}", hasher.finalize())
}

/// How old a look of this process at an upstream's log may be and still
/// stand for a pin's own: `down` pinning `up` just after this process
/// proved `up` current or committed it costs no listing. The pin is then a
/// snapshot as of that look, at most this long before the pin: what a
/// fresh listing would show had another engine's commit of `up` landed
/// that much later, which no reader can tell apart (`store::LOOK_REUSE`).
/// Certification is read at the pin, or taken from the scheduling pass's
/// listing of marks, itself at most that old.
const PIN_REUSE: std::time::Duration = crate::store::LOOK_REUSE;

/// The latest generation of one upstream partition, if published and
/// certified, its files and record (`None`: pinned by its marker's
/// summary, with [`Reads::Digests`]) and their directory.
#[allow(clippy::type_complexity)]
fn pin_partition(
    warehouse: &Warehouse,
    dataset: &str,
    partition: &str,
    allow_uncertified: bool,
    reads: Reads,
) -> Result<
    (
        PinnedPartition,
        Option<(Vec<PathBuf>, Arc<CommitRecord>)>,
        PathBuf,
    ),
    PinError,
> {
    let store = warehouse.partition(dataset, partition);
    let look = match reads {
        Reads::Files => store
            .latest_within(PIN_REUSE)
            .map(|r| r.map_or(Look::Empty, |r| Look::Record(Box::new(r)))),
        Reads::Digests => store.look_within(PIN_REUSE),
    }
    .map_err(PinError::Store)?;
    let (generation, token, digest) = match &look {
        Look::Empty => {
            return Err(PinError::NoUpstream {
                dataset: dataset.to_owned(),
                partition: partition.to_owned(),
            })
        }
        Look::Record(r) => (r.generation.get(), r.token.get(), r.digest.clone()),
        Look::Summary(s) => (s.generation.get(), s.token.get(), s.digest.clone()),
    };
    if !allow_uncertified && !certify::is_certified(warehouse, dataset, partition, generation) {
        let why = certify::read(warehouse, dataset, partition, generation)
            .map(|c| c.reason)
            .unwrap_or_default();
        return Err(PinError::Uncertified {
            dataset: dataset.to_owned(),
            partition: partition.to_owned(),
            generation,
            why,
        });
    }
    let pinned = PinnedPartition {
        partition: partition.to_string(),
        generation,
        token,
        digest,
    };
    let Look::Record(record) = look else {
        return Ok((pinned, None, PathBuf::new()));
    };
    let files = store.visible_files(&record);
    let dir = files
        .first()
        .and_then(|f| f.parent().map(PathBuf::from))
        .unwrap_or_else(|| store.data_dir(&record));
    Ok((pinned, Some((files, Arc::from(record))), dir))
}

/// SHA-256 of a file's bytes, as snapshots record external inputs.
pub(crate) fn file_digest(path: &std::path::Path) -> std::io::Result<String> {
    let mut file = crate::store::user_file::open_regular(path)?;
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

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    const MANIFEST: &str = r#"
[pipeline]
name = "pins"
code_version = "v"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["p"]

[datasets.raw]
path = "raw_{partition}.csv"
format = "csv"

[tasks.copy]
command = ["true"]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }

[tasks.derive]
command = ["true"]
inputs = ["copied"]
output = { dataset = "derived", grain = ["id"] }
"#;

    fn setup() -> (tempfile::TempDir, Manifest, Warehouse) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(&path, MANIFEST).unwrap();
        let manifest = Manifest::load(&path).unwrap_or_else(|e| panic!("{:?}", e.errors));
        let warehouse = Warehouse::open(&dir.path().join("wh")).unwrap();
        (dir, manifest, warehouse)
    }

    #[test]
    fn a_missing_external_file_is_a_typed_error_that_keeps_its_io_cause() {
        let (dir, manifest, warehouse) = setup();
        let task = &manifest.tasks["copy"];
        let e = pin(&manifest, &warehouse, task, "p", false, 0).unwrap_err();
        assert!(e.is_external(), "{e:?}");
        let PinError::External { dataset, path, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(dataset, "raw");
        assert_eq!(path, &dir.path().join("raw_p.csv"));
        let cause = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            cause.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
        // The text events and `explain` show is the one they always showed.
        assert_eq!(
            e.describe(),
            format!(
                "external input `raw` ({}): {}",
                dir.path().join("raw_p.csv").display(),
                cause.unwrap()
            )
        );
    }

    #[test]
    fn an_unpublished_upstream_names_dataset_and_partition() {
        let (_dir, manifest, warehouse) = setup();
        let task = &manifest.tasks["derive"];
        let e = pin(&manifest, &warehouse, task, "p", false, 0).unwrap_err();
        assert!(!e.is_external());
        assert!(
            matches!(&e, PinError::NoUpstream { dataset, partition } if dataset == "copied" && partition == "p"),
            "{e:?}"
        );
        assert_eq!(
            e.describe(),
            "upstream dataset `copied` has no publication for partition p"
        );
    }

    /// A snapshot as commit records hold it, written by weir before input
    /// kinds were typed, and the digest it had then.
    const OLD_RECORD: &str = r#"{"inputs":[{"name":"raw","kind":"external","path":"raw_2024-01-01.csv","watermark":"2024-01-01T00:00:00Z","digest":"sha256:raw"},{"name":"copied","kind":"upstream","task":"copy","generation":3,"token":7,"partition":"2024-01","digest":"sha256:copied"},{"name":"daily","kind":"upstream","task":"day","partitions":[{"partition":"a","generation":1,"token":2,"digest":"sha256:a"},{"partition":"c","generation":4,"token":9,"digest":"sha256:c"}],"accepted_missing":["b"],"digest":"sha256:daily"}]}"#;
    const OLD_DIGEST: &str =
        "sha256:93af401f61216b019f8d91ed45d2672b505c2e76234e51b4d6d24586de164ac3";

    #[test]
    fn an_old_snapshot_record_reads_as_typed_kinds_and_writes_back_byte_for_byte() {
        let snapshot: InputSnapshot = serde_json::from_str(OLD_RECORD).unwrap();
        let kinds: Vec<&Pinned> = snapshot.inputs.iter().map(|i| &i.pinned).collect();
        assert_eq!(
            kinds,
            [
                &Pinned::External {
                    path: "raw_2024-01-01.csv".into(),
                    watermark: Some("2024-01-01T00:00:00Z".into()),
                },
                &Pinned::Upstream {
                    task: "copy".into(),
                    generation: 3,
                    token: 7,
                    partition: Some("2024-01".into()),
                },
                &Pinned::Mapped {
                    task: "day".into(),
                    partitions: vec![
                        PinnedPartition {
                            partition: "a".into(),
                            generation: 1,
                            token: 2,
                            digest: "sha256:a".into(),
                        },
                        PinnedPartition {
                            partition: "c".into(),
                            generation: 4,
                            token: 9,
                            digest: "sha256:c".into(),
                        },
                    ],
                    accepted_missing: vec!["b".into()],
                },
            ]
        );
        assert_eq!(serde_json::to_string(&snapshot).unwrap(), OLD_RECORD);
        assert_eq!(snapshot.digest(), OLD_DIGEST);
    }

    #[test]
    fn a_record_of_no_known_kind_is_refused_naming_the_input() {
        let e = serde_json::from_str::<InputSnapshot>(
            r#"{"inputs":[{"name":"x","kind":"upstream","generation":1,"digest":"d"}]}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("input `x` of kind `upstream`"),
            "{e}"
        );
        let stored = |json: &str| serde_json::from_str::<StoredInput>(json).unwrap();
        assert_eq!(
            PinnedInput::try_from(stored(r#"{"name":"x","kind":"sensor","digest":"d"}"#)).err(),
            Some(StoredInputError::UnknownKind {
                name: "x".into(),
                kind: "sensor".into()
            })
        );
        assert_eq!(
            PinnedInput::try_from(stored(r#"{"name":"raw","kind":"external","digest":"d"}"#)).err(),
            Some(StoredInputError::NoPath { name: "raw".into() })
        );
    }
}
