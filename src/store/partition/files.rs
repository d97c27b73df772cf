//! A generation's files: where they are, downloading them, and uploading
//! an attempt's evidence and data.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::store::error::StoreError;
use crate::store::key::key_path;
use crate::store::layout::{self, DATA_DIR};
use crate::store::log::CommitRecord;
use crate::store::token::FencingToken;

use super::PartitionStore;

impl PartitionStore {
    /// Absolute path of the directory holding the record's files.
    pub fn data_dir(&self, rec: &CommitRecord) -> PathBuf {
        key_path(&self.root, &rec.data_key())
    }

    /// Absolute paths of the record's files under the local root (for a
    /// remote warehouse, where [`PartitionStore::local_files`] puts them).
    pub fn visible_files(&self, rec: &CommitRecord) -> Vec<PathBuf> {
        let data = self.data_dir(rec);
        rec.files.iter().map(|f| key_path(&data, f)).collect()
    }

    /// Publishes attempt `token`'s audited `data/` on a local disk: renames
    /// it (one directory entry moved inside the partition) to the
    /// partition's `data-<token>`, whose key the commit record names as its
    /// `data_dir`, and returns that key and directory. Its entry is made
    /// durable by the fsync of the partition directory, which a new
    /// partition's skeleton needs anyway ([`PartitionStore::make_durable`]):
    /// two directory levels fewer to sync than `attempts/<token>/data/`.
    /// Until a record names it, it is an unpublished candidate, collected
    /// with its attempt by gc. `None`, with nothing moved, in a remote
    /// warehouse: its uploads keep `attempts/<token>/data/` keys.
    pub fn move_to_published(
        &self,
        token: FencingToken,
    ) -> Result<Option<(String, PathBuf)>, StoreError> {
        self.check()?;
        if self.remote.is_some() {
            return Ok(None);
        }
        let from = self.attempt_dir(token).join(DATA_DIR);
        let key = layout::data_key(&self.prefix()?, token);
        let to = key_path(&self.root, &key);
        std::fs::rename(&from, &to).map_err(|e| StoreError::Io {
            path: to.clone(),
            source: std::io::Error::new(
                e.kind(),
                format!("cannot rename {} to it: {e}", from.display()),
            ),
        })?;
        Ok(Some((key, to)))
    }

    /// Frees the staged copy `data_dir` of a candidate whose record is
    /// committed: in a remote warehouse the bucket holds its files now, and
    /// the copy would only grow this host's disk (the attempt's
    /// `candidate.json` and logs stay as evidence). On a local disk the
    /// staged files are the published ones, and stay.
    pub fn release_staged(&self, data_dir: &Path) {
        if self.remote.is_some() {
            let _ = std::fs::remove_dir_all(data_dir);
        }
    }

    /// The tokens of the partition's attempts, ascending, once each: its
    /// attempt dirs and, on a local disk, its published data dirs
    /// (`data-<token>`, an attempt's `data/` renamed at publish: one a
    /// crash or a stale refusal left without a record is that attempt's
    /// unpublished candidate). Other names are not attempts.
    pub fn attempt_tokens(&self) -> Result<Vec<FencingToken>, StoreError> {
        let partition = self.key_prefix()?;
        let names = self.backend.list(&layout::attempts_prefix(&partition))?;
        let mut tokens: Vec<FencingToken> = names
            .iter()
            .filter_map(|n| FencingToken::parse_key_name(n))
            .collect();
        // A remote warehouse has no `data-<token>` (uploads keep their
        // attempt's keys): a listing there would be a request for nothing.
        if self.remote.is_none() {
            let names = self.backend.list(&partition)?;
            tokens.extend(names.iter().filter_map(|n| layout::parse_data_name(n)));
            tokens.sort_unstable();
            tokens.dedup();
        }
        Ok(tokens)
    }

    /// The bytes an attempt holds and its newest write; `None` if it is
    /// gone. On a local disk, its attempt dir and its published data dir
    /// together (symlinks not followed, unreadable entries count for
    /// nothing); in an object store, from one listing of its keys.
    pub fn attempt_usage(&self, token: FencingToken) -> Option<(u64, Option<SystemTime>)> {
        if self.remote.is_none() {
            let dirs = [self.attempt_dir(token), self.published_dir(token)];
            let present: Vec<&PathBuf> = dirs
                .iter()
                .filter(|d| std::fs::symlink_metadata(d).is_ok())
                .collect();
            if present.is_empty() {
                return None;
            }
            return Some(
                present
                    .iter()
                    .map(|d| disk_usage(d))
                    .fold((0, None), |(bytes, newest), (b, n)| {
                        (bytes + b, newest.max(n))
                    }),
            );
        }
        let objects = self
            .backend
            .list_objects(&self.attempt_key(token))
            .ok()
            .filter(|o| !o.is_empty())?;
        let bytes = objects.iter().map(|o| o.size).sum();
        let newest = objects
            .iter()
            .map(|o| SystemTime::try_from(o.last_modified).unwrap_or(SystemTime::UNIX_EPOCH))
            .max();
        Some((bytes, newest))
    }

    /// Puts a candidate [`PartitionStore::move_to_published`] moved back
    /// into its attempt dir, after its commit was refused: an unpublished
    /// candidate stays under `attempts/`. Best effort: one left as
    /// `data-<token>` is collected by gc all the same.
    pub fn move_back(&self, token: FencingToken) {
        let from = self.published_dir(token);
        let _ = std::fs::rename(from, self.attempt_dir(token).join(DATA_DIR));
    }

    /// Makes a candidate about to be committed durable with its names: the
    /// files `names` in the directory `data_key`, the directory, and every
    /// entry up to the nearest one already durable (the partition's, the
    /// dataset's for a new partition), all at once
    /// ([`crate::store::DurableDirectories::make_durable`]). Logs, the lease and
    /// `candidate.json` are evidence, not data: left to the page cache (the
    /// record carries the rows, digest and file sums readers check).
    /// Nothing to do in a store without directories: there every write
    /// that returned is durable, and the upload is one.
    pub fn make_durable(&self, data_key: &str, names: &[String]) -> Result<(), StoreError> {
        self.check()?;
        let Some(dirs) = self.backend.durable() else {
            return Ok(());
        };
        let mut keys: Vec<String> = names.iter().map(|n| format!("{data_key}/{n}")).collect();
        keys.push(data_key.to_owned());
        dirs.make_durable(&keys)
    }

    /// The record's files as local paths a reader can open: in place in a
    /// local warehouse; from a remote one, downloaded into a directory of
    /// their own under the staging root (`_downloads/`), removed when the
    /// returned value is dropped, so reading never leaves copies behind nor
    /// touches an engine's staged attempts. A file the store does not hold
    /// is absent locally too, so the caller sees it vanished. As for local
    /// files, the caller checks them against the record's sums.
    pub fn local_files(&self, rec: &CommitRecord) -> Result<Downloaded, StoreError> {
        if self.remote.is_none() {
            return Ok(Downloaded {
                paths: self.visible_files(rec),
                dir: None,
            });
        }
        let dir = self.download_dir()?;
        let mut downloaded = Downloaded {
            paths: Vec::with_capacity(rec.files.len()),
            dir: Some(dir.clone()),
        };
        let data = dir.join(DATA_DIR);
        for name in &rec.files {
            let key = format!("{}/{name}", rec.data_key());
            let path = key_path(&data, name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(StoreError::io(parent))?;
            }
            if !self.backend.get_file(&key, &path)? {
                let _ = std::fs::remove_file(&path);
            }
            downloaded.paths.push(path);
        }
        Ok(downloaded)
    }

    /// Files under `<root>/<dataset>` (keys relative to the dataset, as a
    /// Delta table names them) as local paths a reader can open, in place
    /// or downloaded as [`PartitionStore::local_files`] does.
    pub fn local_dataset_files(&self, relative: &[String]) -> Result<Downloaded, StoreError> {
        let keys: Vec<String> = relative
            .iter()
            .map(|r| format!("{}/{r}", self.dataset))
            .collect();
        if self.remote.is_none() {
            return Ok(Downloaded {
                paths: keys.iter().map(|k| key_path(&self.root, k)).collect(),
                dir: None,
            });
        }
        let dir = self.download_dir()?;
        let mut downloaded = Downloaded {
            paths: Vec::with_capacity(keys.len()),
            dir: Some(dir.clone()),
        };
        for (i, key) in keys.iter().enumerate() {
            let path = dir.join(format!("{i}.parquet"));
            if !self.backend.get_file(key, &path)? {
                let _ = std::fs::remove_file(&path);
            }
            downloaded.paths.push(path);
        }
        Ok(downloaded)
    }

    /// A fresh directory of this process's own under the staging root's
    /// `_downloads/`, for one reader's downloaded files.
    fn download_dir(&self) -> Result<PathBuf, StoreError> {
        let parent = self.root.join("_downloads");
        std::fs::create_dir_all(&parent).map_err(StoreError::io(&parent))?;
        let dir = parent.join(format!("{}-{}", std::process::id(), unique()));
        std::fs::create_dir(&dir).map_err(StoreError::io(&dir))?;
        Ok(dir)
    }

    /// A local cache file of this warehouse's (`<root>/_cache/<name>`, on
    /// this host, outside every dataset and table): what a read learnt
    /// that is costly to learn again. Losing it costs a recheck only.
    pub fn cache_path(&self, name: &str) -> PathBuf {
        self.root.join("_cache").join(name)
    }

    /// Uploads what an attempt leaves as evidence (`candidate.json` and the
    /// command's logs, those that exist and are not empty) from its local
    /// staging directory to
    /// a remote warehouse, so that `explain` on any host shows a failed
    /// attempt's stderr. Nothing to do for a local warehouse.
    pub fn upload_evidence(&self, token: FencingToken) -> Result<(), StoreError> {
        self.upload_named(
            token,
            &[CANDIDATE_FILE, layout::STDOUT_LOG, layout::STDERR_LOG],
        )
    }

    fn upload_named(&self, token: FencingToken, names: &[&str]) -> Result<(), StoreError> {
        self.check()?;
        if self.remote.is_none() {
            return Ok(());
        }
        let key = self.attempt_key(token);
        let dir = self.attempt_dir(token);
        for &evidence in names {
            let path = dir.join(evidence);
            // An empty log says nothing a missing one does not
            // (`read_evidence` finds neither): not a request per instance
            // for the many commands that print nothing.
            let empty_log =
                evidence != CANDIDATE_FILE && std::fs::metadata(&path).is_ok_and(|m| m.len() == 0);
            if path.is_file() && !empty_log {
                self.backend.put_file(&format!("{key}/{evidence}"), &path)?;
            }
        }
        Ok(())
    }

    /// One evidence file of an attempt (`stderr.log`, `candidate.json`):
    /// from its staging directory on this host, else from the store; `None`
    /// if neither has it.
    pub fn read_evidence(&self, token: FencingToken, name: &str) -> Option<Vec<u8>> {
        if let Ok(bytes) = std::fs::read(self.attempt_dir(token).join(name)) {
            return Some(bytes);
        }
        self.remote.as_ref()?;
        self.backend
            .get(&format!("{}/{name}", self.attempt_key(token)))
            .ok()
            .flatten()
    }

    /// Uploads an attempt's audited files (`<publication>/data/<name>`,
    /// `publication` the key its commit record names as `attempt_dir`: the
    /// attempt dir, or a Delta table's directory below it) and its logs
    /// from its local staging directory to a
    /// remote warehouse: the commit record may name only what the store
    /// holds. A file the store checked against its SHA-256 on upload
    /// ([`Backend::put_file_checked`]) is not read again; every other one
    /// is read back and checked against `sums`. Nothing to do for a local
    /// warehouse, where they already are.
    pub fn upload_attempt(
        &self,
        token: FencingToken,
        publication: &str,
        files: &[PathBuf],
        sums: &[crate::store::FileSum],
    ) -> Result<(), StoreError> {
        self.check()?;
        if self.remote.is_none() {
            return Ok(());
        }
        if layout::attempt_root(publication) != self.attempt_key(token) {
            return Err(StoreError::InvalidKey {
                key: publication.to_owned(),
                reason: "an attempt publishes under its own attempt dir",
            });
        }
        let key = publication;
        let dir = self.attempt_dir(token);
        let mut unchecked = Vec::new();
        for (file, sum) in files.iter().zip(sums) {
            let data_key = format!("{key}/{DATA_DIR}/{}", sum.name);
            if !self.backend.put_file_checked(&data_key, file, sum)? {
                unchecked.push(sum);
            }
        }
        // The logs only: `candidate.json` says nothing a published
        // attempt's commit record does not (rows, digest, files and sums,
        // snapshot, code) but the passed gates' outcomes and the columns,
        // which no reader of the store shows and this host's staging keeps;
        // an attempt that does not publish uploads it after all
        // ([`PartitionStore::upload_evidence`], `exec::attempt`).
        self.upload_named(token, &[layout::STDOUT_LOG, layout::STDERR_LOG])?;
        let check = dir.join(format!(".{}.check-{}", unique(), std::process::id()));
        let verified = (|| {
            for sum in unchecked {
                let data_key = format!("{key}/{DATA_DIR}/{}", sum.name);
                let held = if self.backend.get_file(&data_key, &check)? {
                    Some(
                        crate::store::FileSum::of(&check, &sum.name)
                            .map_err(StoreError::io(&check))?,
                    )
                } else {
                    None
                };
                if held.as_ref() != Some(sum) {
                    return Err(StoreError::Corrupt {
                        key: data_key,
                        message: match held {
                            None => "the upload is not there when read back".to_owned(),
                            Some(h) => format!(
                                "read back {} bytes with SHA-256 {}, uploaded {} bytes with SHA-256 {}",
                                h.size, h.sha256, sum.size, sum.sha256
                            ),
                        },
                    });
                }
            }
            Ok(())
        })();
        let _ = std::fs::remove_file(&check);
        verified
    }
}

/// The audit's report an attempt leaves beside its `data/`.
const CANDIDATE_FILE: &str = "candidate.json";

/// A generation's files where a reader can open them
/// ([`PartitionStore::local_files`]); a remote warehouse's downloads are
/// removed when this is dropped.
#[derive(Debug)]
pub struct Downloaded {
    paths: Vec<PathBuf>,
    dir: Option<PathBuf>,
}

impl std::ops::Deref for Downloaded {
    type Target = [PathBuf];
    fn deref(&self) -> &[PathBuf] {
        &self.paths
    }
}

impl Drop for Downloaded {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A name no other download or check in this process uses at once.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Bytes of the regular files at or under `path` and the newest
/// modification time of anything there. Symlinks are not followed; best
/// effort: unreadable entries count for nothing.
fn disk_usage(path: &Path) -> (u64, Option<SystemTime>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (0, None);
    };
    let mut newest = meta.modified().ok();
    let mut bytes = 0;
    if meta.is_file() {
        bytes += meta.len();
    } else if meta.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                let (b, n) = disk_usage(&entry.path());
                bytes += b;
                newest = newest.max(n);
            }
        }
    }
    (bytes, newest)
}
