//! Input materialisation: a task reads private copies of its inputs, never
//! the published files or the live external file.
//!
//! ```text
//!  upstream generation g ──copy (reflink if the filesystem can) + check sums──► attempts/<t>/input-<name>/<file>
//!  external file          ──copy, SHA-256 while copying == pinned digest ────► attempts/<t>/input-<name>/<file name>
//! ```
//!
//! Each input's copies sit in a directory of their own directly in the
//! attempt's ([`input_dir`]), not one level further down: a directory
//! less to make and remove per attempt. The sums an upstream copy is
//! checked against come from the commit record its pin read.
//!
//! Tasks may run as root, so file modes alone stop nothing: what keeps a
//! downstream task from changing the generation it reads is that it holds
//! its own copy (a reflink shares blocks copy-on-write, so a write to it
//! never reaches the original). The copies are made read-only anyway, to
//! catch the honest mistake early. Every copied byte is checked: an
//! upstream file against the size and SHA-256 its commit record holds (a
//! drifted published file is never fed to a task), an external file against
//! the digest its snapshot pinned (the commit record never claims an input
//! the task did not read). The copies go when the attempt ends.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::audit::InputData;
use crate::store::file_sum::{hash_file, hash_reader};
use crate::store::{CommitRecord, Drift, DriftKind, Generation, PartitionStore, Warehouse};

use super::{InputSnapshot, Pinned, PinnedInput, PinnedPartition};

/// What the name of the directory of an input's copies starts with, in
/// an attempt's directory: no other name there (`data`, `batch`, the logs,
/// `candidate.json`, `lease.json`, a Delta table's `<column>=<value>`)
/// does.
pub const INPUT_DIR_PREFIX: &str = "input-";

/// The directory of input `name`'s copies in the attempt directory
/// `attempt_dir` (or a rerun's scratch directory): `WEIR_INPUT_<NAME>`
/// for an upstream input, the parent of that file for an external one.
pub fn input_dir(attempt_dir: &Path, name: &str) -> PathBuf {
    attempt_dir.join(format!("{INPUT_DIR_PREFIX}{name}"))
}

/// Why an input could not be handed to a task.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    /// Copying failed (disk full, permissions, a missing file).
    #[error("cannot copy `{}`: {source}", .path.display())]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The external file no longer holds the pinned bytes.
    #[error("external input `{input}` changed since it was pinned: pinned {pinned}, copied {now}")]
    Moved {
        /// The input dataset.
        input: String,
        /// The digest in the snapshot.
        pinned: String,
        /// The digest of what was there to copy.
        now: String,
    },
    /// A published upstream file is not what its generation committed.
    #[error(transparent)]
    Drift(Box<Drift>),
    /// The upstream record cannot be read.
    #[error("upstream `{input}`: {message}")]
    Store {
        /// The input dataset.
        input: String,
        /// What went wrong.
        message: String,
    },
}

/// One input as the task gets it.
#[derive(Debug, Clone)]
pub struct Materialized {
    /// The input dataset.
    pub name: String,
    /// `WEIR_INPUT_<NAME>`: the copied file (external) or the directory of
    /// copies (upstream).
    pub location: PathBuf,
    /// What reconcile gates read: the copies.
    pub data: InputData,
    /// The source's committed position, for `WEIR_WATERMARK_<NAME>`.
    pub watermark: Option<String>,
}

/// Copies every input of `snapshot` into `<attempt_dir>/input-<name>/`.
pub fn materialize(
    snapshot: &InputSnapshot,
    warehouse: &Warehouse,
    partition: &str,
    attempt_dir: &Path,
) -> Result<Vec<Materialized>, MaterializeError> {
    let mut out = Vec::with_capacity(snapshot.inputs.len());
    for input in &snapshot.inputs {
        let dest = input_dir(attempt_dir, &input.name);
        let format = input.data.as_ref().map(|d| d.format);
        match &input.pinned {
            Pinned::Upstream {
                generation,
                partition: read_at,
                ..
            } => {
                // An input read at another partition than the task's own
                // names it.
                let key = read_at.as_deref().unwrap_or(partition);
                let record = input.record(key, *generation);
                let files =
                    materialize_pinned(warehouse, &input.name, (key, *generation, record), &dest)?;
                out.push(Materialized {
                    name: input.name.clone(),
                    location: dest,
                    data: InputData {
                        format: format.unwrap_or(crate::audit::Format::Csv),
                        files,
                    },
                    watermark: input.watermark().map(str::to_owned),
                });
            }
            // Mapped to several partitions: a directory per key.
            Pinned::Mapped { partitions, .. } => {
                let files =
                    stage_partitions(warehouse, &input.name, (partitions, Some(input)), &dest)?;
                out.push(Materialized {
                    name: input.name.clone(),
                    location: dest,
                    data: InputData {
                        format: format.unwrap_or(crate::audit::Format::Csv),
                        files,
                    },
                    watermark: input.watermark().map(str::to_owned),
                });
            }
            Pinned::External { .. } => {
                let copy =
                    materialize_external(&input.location, &input.digest, &dest, &input.name)?;
                out.push(Materialized {
                    name: input.name.clone(),
                    location: copy.clone(),
                    data: InputData {
                        format: format.unwrap_or(crate::audit::Format::Csv),
                        files: vec![copy],
                    },
                    watermark: input.watermark().map(str::to_owned),
                });
            }
        }
    }
    Ok(out)
}

/// Copies generation `generation` of `dataset` at `partition` into `dest`
/// (see [`materialize_generation`]), checked against `record`: that
/// generation's commit record as its pin read it (records are immutable),
/// or `None` to read it now.
pub fn materialize_pinned(
    warehouse: &Warehouse,
    dataset: &str,
    (partition, generation, record): (&str, u64, Option<&CommitRecord>),
    dest: &Path,
) -> Result<Vec<PathBuf>, MaterializeError> {
    let store = warehouse.partition(dataset, partition);
    if let Some(record) = record {
        return materialize_generation(&store, record, dest);
    }
    let record = store
        .record(Generation::from_raw(generation))
        .map_err(|e| MaterializeError::Store {
            input: dataset.to_owned(),
            message: crate::store::chain(&e),
        })?
        .ok_or_else(|| MaterializeError::Store {
            input: dataset.to_owned(),
            message: format!("generation {generation} of partition {partition} is not in the log"),
        })?;
    materialize_generation(&store, &record, dest)
}

/// Copies the files of one published generation into `dest` (created),
/// checking each against the record's size and SHA-256, and makes them
/// read-only. Returns the copies in record order. The one place a task's
/// view of an upstream generation is made.
pub fn materialize_generation(
    store: &PartitionStore,
    record: &CommitRecord,
    dest: &Path,
) -> Result<Vec<PathBuf>, MaterializeError> {
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let sources = store
        .local_files(record)
        .map_err(|e| MaterializeError::Store {
            input: record.dataset.clone(),
            message: crate::store::chain(&e),
        })?;
    let mut copies = Vec::with_capacity(sources.len());
    for (i, source) in sources.iter().enumerate() {
        let name = record.files.get(i).map_or("data", String::as_str);
        // Nested names stay flat: a record's names are keys under data/.
        let target = dest.join(name.replace('/', "_"));
        let drift = |kind| {
            MaterializeError::Drift(Box::new(Drift {
                dataset: record.dataset.clone(),
                partition: record.partition.clone(),
                generation: record.generation.get(),
                path: store.file_location(record, i),
                kind,
            }))
        };
        match std::fs::symlink_metadata(source) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => return Err(drift(DriftKind::NotRegular)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(drift(DriftKind::Vanished))
            }
            Err(e) => {
                return Err(MaterializeError::Io {
                    path: source.clone(),
                    source: e,
                })
            }
        }
        let (size, sha256) = copy_file(source, &target)?;
        if let Some(sum) = record.file_sums.get(i) {
            if size != sum.size {
                return Err(drift(DriftKind::Size {
                    recorded: sum.size,
                    now: size,
                }));
            }
            if sha256 != sum.sha256 {
                return Err(drift(DriftKind::Content {
                    recorded: sum.sha256.clone(),
                    now: sha256,
                }));
            }
        }
        read_only(&target)?;
        copies.push(target);
    }
    Ok(copies)
}

/// Copies an external file into `dest/<its file name>`, hashing while
/// copying; the copy must have the `pinned` digest.
pub fn materialize_external(
    source: &Path,
    pinned: &str,
    dest: &Path,
    input: &str,
) -> Result<PathBuf, MaterializeError> {
    std::fs::create_dir_all(dest).map_err(io(dest))?;
    let name = source
        .file_name()
        .map_or_else(|| "input".into(), |n| n.to_os_string());
    let target = dest.join(name);
    let (_, now) = copy_file(source, &target)?;
    if now != pinned {
        return Err(MaterializeError::Moved {
            input: input.to_owned(),
            pinned: pinned.to_owned(),
            now,
        });
    }
    read_only(&target)?;
    Ok(target)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MaterializeError + '_ {
    move |source| MaterializeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Copies `from` to `to` (a reflink when the filesystem can, else bytes),
/// returning the size and SHA-256 of the copy's bytes.
fn copy_file(from: &Path, to: &Path) -> Result<(u64, String), MaterializeError> {
    let src = crate::store::user_file::open_regular(from).map_err(io(from))?;
    let mut dst = File::create(to).map_err(io(to))?;
    // SAFETY: FICLONE takes the source descriptor as its argument; both
    // descriptors are open for the duration of the call.
    let cloned = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) } == 0;
    if cloned {
        drop(src);
        // The clone is the copy's bytes; hash those, not the source's.
        return hash_file(to).map_err(io(to));
    }
    hash_reader(src, |chunk| dst.write_all(chunk)).map_err(io(to))
}

pub(crate) fn read_only(path: &Path) -> Result<(), MaterializeError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).map_err(io(path))
}

/// Removes the copies of `snapshot`'s inputs from an attempt's directory
/// (best effort: they are private, and gc removes the attempt's directory
/// in the end anyway).
pub fn discard(attempt_dir: &Path, snapshot: &InputSnapshot) {
    for input in &snapshot.inputs {
        let _ = std::fs::remove_dir_all(input_dir(attempt_dir, &input.name));
    }
}

/// The name of the list of keys inside an input mapped to several
/// partitions: a JSON array of the keys, in the mapping's order.
pub const KEYS_FILE: &str = "_keys.json";

/// Lays out an input mapped to several partitions as the task reads it,
/// in `dest` (created): `<dest>/<encoded key>/` per partition holding that
/// generation's files, and [`KEYS_FILE`]. Every file is a private,
/// read-only copy checked against its commit record (see [`materialize_partition`]):
/// the one in `input` where its pin read it, else read now. Returns the
/// copies in the mapping's order.
pub(crate) fn stage_partitions(
    warehouse: &Warehouse,
    dataset: &str,
    (pinned, input): (&[PinnedPartition], Option<&PinnedInput>),
    dest: &Path,
) -> Result<Vec<PathBuf>, MaterializeError> {
    use crate::store::encode_partition;
    std::fs::create_dir_all(dest).map_err(|source| MaterializeError::Io {
        path: dest.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for p in pinned {
        let record = input.and_then(|i| i.record(&p.partition, p.generation));
        files.extend(materialize_partition(
            warehouse,
            dataset,
            (p, record),
            &dest.join(encode_partition(&p.partition)),
        )?);
    }
    let keys: Vec<&str> = pinned.iter().map(|p| p.partition.as_str()).collect();
    let list = dest.join(KEYS_FILE);
    std::fs::write(
        &list,
        serde_json::to_vec(&keys).expect("a list of strings serializes"),
    )
    .map_err(|source| MaterializeError::Io {
        path: list.clone(),
        source,
    })?;
    read_only(&list)?;
    Ok(files)
}

/// Makes a pinned generation's files appear at `dest`: private, read-only
/// copies checked against the generation's commit record (`record`, as
/// the pin read it, or read now: [`materialize_pinned`]). The
/// one place that decides how a task is handed a generation of an input
/// mapped to several partitions.
fn materialize_partition(
    warehouse: &Warehouse,
    dataset: &str,
    (pinned, record): (&PinnedPartition, Option<&CommitRecord>),
    dest: &Path,
) -> Result<Vec<PathBuf>, MaterializeError> {
    materialize_pinned(
        warehouse,
        dataset,
        (&pinned.partition, pinned.generation, record),
        dest,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_copy_must_hold_the_pinned_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("raw.csv");
        std::fs::write(&src, "id\n1\n").unwrap();
        let pinned = crate::inputs::file_digest(&src).unwrap();
        let dest = dir.path().join("inputs/raw");
        let copy = materialize_external(&src, &pinned, &dest, "raw").unwrap();
        assert_eq!(copy, dest.join("raw.csv"));
        assert_eq!(std::fs::read(&copy).unwrap(), b"id\n1\n");
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444);
        std::fs::write(&src, "id\n2\n").unwrap();
        let other = dir.path().join("inputs/again");
        match materialize_external(&src, &pinned, &other, "raw") {
            Err(MaterializeError::Moved {
                input,
                pinned: p,
                now,
            }) => {
                assert_eq!((input.as_str(), p.as_str()), ("raw", pinned.as_str()));
                assert_ne!(now, pinned);
            }
            other => panic!("expected Moved, got {other:?}"),
        }
    }
}
