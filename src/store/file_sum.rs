//! What a published file was when its generation was committed: its size
//! and SHA-256, held in the commit record, and the check that it still is.
//!
//! Records never change, but the files they name are ordinary files: a hand
//! edit, a stray process, a broken disk or a gc that went too far can change
//! or remove them. Every reader that vouches for a generation (`weir show`,
//! `weir verify`, `weir status`) compares the files with these sums first
//! and reports a drifted or vanished file by name rather than serve it.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// One published file as committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    /// Its name under the attempt's `data/`.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// SHA-256 of its bytes, `sha256:<64 hex digits>`.
    pub sha256: String,
}

impl FileSum {
    /// Reads `path` whole and sums it under `name`.
    pub fn of(path: &Path, name: &str) -> std::io::Result<FileSum> {
        let (size, sha256) = hash_file(path)?;
        Ok(FileSum {
            name: name.to_owned(),
            size,
            sha256,
        })
    }
}

/// Size and `sha256:<hex>` of a file's bytes, read once.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    hash_reader(std::fs::File::open(path)?, |_| Ok(()))
}

/// Size and `sha256:<hex>` of everything `reader` yields, handing each chunk
/// to `sink` as it is hashed (a copy that is hashed while it is written).
pub fn hash_reader(
    mut reader: impl Read,
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        sink(&buf[..n])?;
        size += n as u64;
    }
    Ok((size, format!("sha256:{:x}", hasher.finalize())))
}

/// How a published file differs from its commit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftKind {
    /// It is gone.
    Vanished,
    /// It is no longer a regular file (a link, a directory …).
    NotRegular,
    /// Its size changed.
    Size {
        /// As committed.
        recorded: u64,
        /// Now.
        now: u64,
    },
    /// Same size, other bytes.
    Content {
        /// As committed.
        recorded: String,
        /// Now.
        now: String,
    },
    /// It cannot be read.
    Unreadable(String),
}

/// A published file that is not what its generation committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("published file `{}` of `{dataset}` {partition} generation {generation} {}", .path.display(), describe(.kind))]
#[diagnostic(
    code(weir::store::drift),
    help("a generation's files never change after its audit: restore the file, or publish a new generation (`weir run --force`, or `weir rollback` to an intact one)")
)]
pub struct Drift {
    /// The dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// The generation whose file drifted.
    pub generation: u64,
    /// The file.
    pub path: PathBuf,
    /// How.
    pub kind: DriftKind,
}

fn describe(kind: &DriftKind) -> String {
    match kind {
        DriftKind::Vanished => "vanished".to_owned(),
        DriftKind::NotRegular => "is no longer a regular file".to_owned(),
        DriftKind::Size { recorded, now } => {
            format!("changed size: {recorded} bytes committed, {now} now")
        }
        DriftKind::Content { recorded, now } => {
            format!("changed content: {recorded} committed, {now} now")
        }
        DriftKind::Unreadable(why) => format!("cannot be read: {why}"),
    }
}

/// How thoroughly to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Existence, type and size: one `lstat` per file.
    Stat,
    /// Also every byte's SHA-256.
    Hash,
}

/// Compares `path` with `sum`; `None` when it is intact.
pub fn compare(path: &Path, sum: &FileSum, depth: Depth) -> Option<DriftKind> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(DriftKind::Vanished),
        Err(e) => return Some(DriftKind::Unreadable(e.to_string())),
    };
    if !meta.file_type().is_file() {
        return Some(DriftKind::NotRegular);
    }
    if meta.len() != sum.size {
        return Some(DriftKind::Size {
            recorded: sum.size,
            now: meta.len(),
        });
    }
    if depth == Depth::Hash {
        match hash_file(path) {
            Ok((size, _)) if size != sum.size => {
                return Some(DriftKind::Size {
                    recorded: sum.size,
                    now: size,
                })
            }
            Ok((_, now)) if now != sum.sha256 => {
                return Some(DriftKind::Content {
                    recorded: sum.sha256.clone(),
                    now,
                })
            }
            Ok(_) => {}
            Err(e) => return Some(DriftKind::Unreadable(e.to_string())),
        }
    }
    None
}

impl crate::store::PartitionStore {
    /// Checks every file of `rec` against the sums it committed; the first
    /// drifted or vanished one, by name. A record without sums (written
    /// before weir kept them) is checked for its files' existence only.
    pub fn check_files(
        &self,
        rec: &crate::store::CommitRecord,
        depth: Depth,
    ) -> Result<(), Box<Drift>> {
        let drift = |i: usize, kind| self.drift(rec, i, kind);
        if self.is_remote() && depth == Depth::Stat && !rec.file_sums.is_empty() {
            return self.stat_remote(rec).map_err(|(i, kind)| drift(i, kind));
        }
        let paths = self
            .local_files(rec)
            .map_err(|e| drift(0, DriftKind::Unreadable(crate::store::chain(&e))))?;
        self.check_paths(rec, &paths, depth)
    }

    /// [`PartitionStore::check_files`] of files already at hand (from
    /// [`PartitionStore::local_files`]), so a reader checks what it reads.
    pub fn check_paths(
        &self,
        rec: &crate::store::CommitRecord,
        paths: &[PathBuf],
        depth: Depth,
    ) -> Result<(), Box<Drift>> {
        let drift = |i: usize, kind| self.drift(rec, i, kind);
        if rec.file_sums.is_empty() {
            return match paths.iter().position(|p| !p.is_file()) {
                Some(i) => Err(drift(i, DriftKind::Vanished)),
                None => Ok(()),
            };
        }
        for (i, (path, sum)) in paths.iter().zip(&rec.file_sums).enumerate() {
            if let Some(kind) = compare(path, sum, depth) {
                return Err(drift(i, kind));
            }
        }
        Ok(())
    }

    /// `rec`'s file `i` drifted. A file is named by where it is published:
    /// its path, or in an object store its URL (not the download that was
    /// checked).
    fn drift(&self, rec: &crate::store::CommitRecord, i: usize, kind: DriftKind) -> Box<Drift> {
        Box::new(Drift {
            dataset: rec.dataset.clone(),
            partition: rec.partition.clone(),
            generation: rec.generation.get(),
            path: self.file_location(rec, i),
            kind,
        })
    }
}

impl crate::store::PartitionStore {
    /// [`Depth::Stat`] against an object store: each file's size from one
    /// listing of the generation's `data/`, nothing downloaded.
    fn stat_remote(&self, rec: &crate::store::CommitRecord) -> Result<(), (usize, DriftKind)> {
        let prefix = rec.data_key();
        let listed = self
            .backend()
            .list_objects(&prefix)
            .map_err(|e| (0, DriftKind::Unreadable(crate::store::chain(&e))))?;
        for (i, sum) in rec.file_sums.iter().enumerate() {
            let key = format!("{prefix}/{}", sum.name);
            match listed.iter().find(|m| m.key == key) {
                None => return Err((i, DriftKind::Vanished)),
                Some(m) if m.size != sum.size => {
                    return Err((
                        i,
                        DriftKind::Size {
                            recorded: sum.size,
                            now: m.size,
                        },
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_detects_every_kind_of_drift() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        std::fs::write(&path, "id\n1\n").unwrap();
        let sum = FileSum::of(&path, "a.csv").unwrap();
        assert_eq!(sum.size, 5);
        assert_eq!(
            sum.sha256,
            "sha256:7cde7fb64fd82bd152710cf238e017b9ab46c0592483edc067ba4f6c75fac108"
        );
        assert_eq!(compare(&path, &sum, Depth::Hash), None);
        std::fs::write(&path, "id\n2\n").unwrap();
        assert_eq!(compare(&path, &sum, Depth::Stat), None);
        assert!(matches!(
            compare(&path, &sum, Depth::Hash),
            Some(DriftKind::Content { .. })
        ));
        std::fs::write(&path, "id\n10\n").unwrap();
        assert_eq!(
            compare(&path, &sum, Depth::Stat),
            Some(DriftKind::Size {
                recorded: 5,
                now: 6
            })
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(compare(&path, &sum, Depth::Stat), Some(DriftKind::Vanished));
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        assert_eq!(
            compare(&path, &sum, Depth::Stat),
            Some(DriftKind::NotRegular)
        );
    }
}
