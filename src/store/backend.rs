//! The storage primitives every coordination step is built on, and the
//! POSIX filesystem backend.
//!
//! The one primitive that matters is put-if-absent: everything else in the
//! store (token allocation, the fenced commit) is "list, decide, try to
//! create the next key, reread if someone beat us". Nothing depends on a lock
//! held by a live process, so several engine processes can share a warehouse
//! and an object store with conditional PUT (`If-None-Match: *`) can
//! implement the same trait.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::store::error::StoreError;
use crate::store::fs::{create_temp, fsync_dir};
use crate::store::key::{key_path, validate_key, validate_segment};

/// The storage primitives. Contract: put_if_absent is atomic and durable
/// when it returns `Ok(true)`: the key exists with exactly these bytes and
/// survives a crash; `Ok(false)` = the key already existed (caller rereads
/// and decides: the only outcome a caller may retry on); `Err` = unknown, the
/// key may or may not exist.
pub trait Backend: Send + Sync {
    /// Creates `key` with `bytes` only if it does not exist.
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError>;
    /// Reads a key; `None` if it does not exist.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Names directly under the prefix "directory", sorted; a missing prefix
    /// is empty. The empty prefix lists the root.
    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
    /// Removes a key or everything under a prefix (gc of attempt dirs); a
    /// missing prefix is not an error.
    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError>;
    /// Makes the "directories" `names` under `prefix` exist durably before
    /// any key is put under them, all at once: a partition's skeleton costs
    /// one durable step instead of one per directory. A store without
    /// directories (an object store) has nothing to do.
    fn prepare_dirs(&self, prefix: &str, names: &[&str]) -> Result<(), StoreError> {
        let _ = (prefix, names);
        Ok(())
    }
}

/// A [`Backend`] on a local (POSIX) filesystem: keys are `/`-separated
/// relative paths under `root`.
///
/// put-if-absent writes a hidden temp file in the key's directory, fsyncs
/// it, hard-links it to the key's name (the link fails if the name is taken,
/// atomically, which is the whole trick), removes the temp and fsyncs the
/// directory: one file fsync and one directory fsync per call.
pub struct FsBackend {
    root: PathBuf,
    /// Directories whose entries, from the root down, this process has made
    /// durable. Seeing a directory exist is not enough: a racing process may
    /// have just created it and not yet fsynced its parent, and a key put
    /// into it would vanish with it in a crash. So the first use of each
    /// directory fsyncs its parent once; later puts skip that.
    durable_dirs: Mutex<HashSet<PathBuf>>,
}

impl FsBackend {
    /// A backend rooted at an existing directory (`Warehouse::open` creates
    /// it durably).
    pub fn new(root: impl Into<PathBuf>) -> FsBackend {
        FsBackend {
            root: root.into(),
            durable_dirs: Mutex::new(HashSet::new()),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        validate_key(key)?;
        Ok(key_path(&self.root, key))
    }

    /// Makes sure `dir` (under the root) exists and its entry, and every
    /// ancestor's up to the root, is durable.
    fn ensure_dir(&self, dir: &Path) -> Result<(), StoreError> {
        if dir == self.root || self.known().contains(dir) {
            return Ok(());
        }
        let parent = dir.parent().unwrap_or(&self.root);
        self.ensure_dir(parent)?;
        match fs::create_dir(dir) {
            Ok(()) => {}
            // Ours from an earlier process, or a racer's: either way its
            // entry may not be durable yet, hence the fsync below.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io(dir)(e)),
        }
        fsync_dir(parent).map_err(StoreError::io(parent))?;
        self.known().insert(dir.to_path_buf());
        Ok(())
    }

    /// Drops cached directories at or under `dir` (deleted by gc, or by hand).
    fn forget_dirs(&self, dir: &Path) {
        self.known().retain(|d| !d.starts_with(dir));
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        // The set is only a cache; a panic elsewhere can't leave it wrong.
        self.durable_dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn create_temp_in(&self, dir: &Path, name: &str) -> Result<(PathBuf, File), StoreError> {
        self.ensure_dir(dir)?;
        match create_temp(dir, name) {
            Ok(created) => Ok(created),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Some directory on the way was removed behind the cache's
                // back (by hand); which one is unknown, so forget them all
                // and redo the chain once.
                self.known().clear();
                self.ensure_dir(dir)?;
                create_temp(dir, name).map_err(StoreError::io(dir))
            }
            Err(e) => Err(StoreError::io(dir)(e)),
        }
    }
}

impl std::fmt::Debug for FsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsBackend")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Writes and fsyncs the temp, then links it to `path`. Returns whether the
/// link is ours.
fn link_temp(tmp: &Path, mut file: File, bytes: &[u8], path: &Path) -> Result<bool, StoreError> {
    file.write_all(bytes).map_err(StoreError::io(tmp))?;
    crate::store::fs::sync(&file, tmp).map_err(StoreError::io(tmp))?;
    match fs::hard_link(tmp, path) {
        Ok(()) => Ok(true),
        Err(e) => {
            // On NFS a retransmitted LINK can report failure (even EEXIST)
            // after the first one succeeded; the temp's link count is the
            // truth (the recipe from open(2)).
            let nlink = file.metadata().map(|m| m.nlink()).unwrap_or(1);
            if nlink >= 2 {
                Ok(true)
            } else if e.kind() == io::ErrorKind::AlreadyExists {
                Ok(false)
            } else {
                Err(StoreError::io(path)(e))
            }
        }
    }
}

impl Backend for FsBackend {
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        let name = key.rsplit('/').next().unwrap_or(key);
        let (tmp, file) = self.create_temp_in(&dir, name)?;
        let outcome = link_temp(&tmp, file, bytes, &path);
        // The key (if linked) holds its own link to the inode; the temp name
        // is hidden from listings, so a failed removal only leaves litter.
        let _ = fs::remove_file(&tmp);
        let created = outcome?;
        // One directory fsync covers the new link and the temp's removal.
        // On Ok(false) it makes the entry we saw durable before the caller
        // acts on it (its writer may not have reached its own fsync yet).
        fsync_dir(&dir).map_err(StoreError::io(&dir))?;
        Ok(created)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key)?;
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io(path)(e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let dir = if prefix.is_empty() {
            self.root.clone()
        } else {
            self.path(prefix)?
        };
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::NotADirectory =>
            {
                return Ok(Vec::new())
            }
            Err(e) => return Err(StoreError::io(dir)(e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StoreError::io(&dir))?;
            // Temp files (dot-names) and names no key could have are not keys.
            if let Ok(name) = entry.file_name().into_string() {
                if validate_segment(&name).is_ok() {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn delete_prefix(&self, prefix: &str) -> Result<(), StoreError> {
        let path = self.path(prefix)?;
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(path)(e)),
        };
        let removed = if meta.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        self.forget_dirs(&path);
        match removed {
            Ok(()) => {}
            // A concurrent gc got there first.
            Err(_) if fs::symlink_metadata(&path).is_err() => {}
            Err(e) => return Err(StoreError::io(path)(e)),
        }
        let parent = path.parent().unwrap_or(&self.root);
        fsync_dir(parent).map_err(StoreError::io(parent))
    }

    /// Creates every missing directory of `names` under `prefix` and fsyncs
    /// `prefix` once (after making `prefix`'s own entry durable), so one
    /// directory fsync covers them all; later calls in this process, and
    /// puts under them, skip it.
    fn prepare_dirs(&self, prefix: &str, names: &[&str]) -> Result<(), StoreError> {
        let dir = self.path(prefix)?;
        let mut children = Vec::with_capacity(names.len());
        for name in names {
            validate_segment(name)?;
            children.push(dir.join(name));
        }
        if children.iter().all(|c| self.known().contains(c)) {
            return Ok(());
        }
        self.ensure_dir(&dir)?;
        for child in &children {
            match fs::create_dir(child) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::io(child)(e)),
            }
        }
        fsync_dir(&dir).map_err(StoreError::io(&dir))?;
        self.known().extend(children);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    fn backend() -> (tempfile::TempDir, FsBackend) {
        let tmp = tempfile::tempdir().unwrap();
        let backend = FsBackend::new(tmp.path());
        (tmp, backend)
    }

    /// Every entry under `dir`, hidden ones included.
    fn all_entries(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                for inner in all_entries(&entry.path()) {
                    out.push(format!("{name}/{inner}"));
                }
            }
            out.push(name);
        }
        out.sort();
        out
    }

    #[test]
    fn put_if_absent_refuses_existing_and_keeps_bytes() {
        let (tmp, b) = backend();
        assert!(b.put_if_absent("d/p/log/k", b"first").unwrap());
        assert!(!b.put_if_absent("d/p/log/k", b"second").unwrap());
        assert_eq!(b.get("d/p/log/k").unwrap().unwrap(), b"first");
        assert_eq!(
            all_entries(tmp.path()),
            vec!["d", "d/p", "d/p/log", "d/p/log/k"]
        );
    }

    #[test]
    fn get_and_list_missing_are_empty() {
        let (_tmp, b) = backend();
        assert_eq!(b.get("nope/x").unwrap(), None);
        assert!(b.list("nope").unwrap().is_empty());
        assert!(b.list("").unwrap().is_empty());
    }

    #[test]
    fn list_is_sorted_and_hides_temp_files() {
        let (tmp, b) = backend();
        for k in ["a/c", "a/b", "a/d/e"] {
            assert!(b.put_if_absent(k, b"x").unwrap());
        }
        fs::write(tmp.path().join("a/.c.123.0.tmp"), b"litter").unwrap();
        assert_eq!(b.list("a").unwrap(), vec!["b", "c", "d"]);
        assert_eq!(b.list("").unwrap(), vec!["a"]);
        // A key that is a file has nothing under it.
        assert!(b.list("a/b").unwrap().is_empty());
    }

    #[test]
    fn bad_keys_are_errors_not_escapes() {
        let (_tmp, b) = backend();
        for key in ["../x", "/etc/passwd", "a//b", "a/", "", "a/../../x"] {
            assert!(
                matches!(
                    b.put_if_absent(key, b"x"),
                    Err(StoreError::InvalidKey { .. })
                ),
                "{key:?}"
            );
            assert!(matches!(b.get(key), Err(StoreError::InvalidKey { .. })));
        }
        assert!(matches!(
            b.delete_prefix(""),
            Err(StoreError::InvalidKey { .. })
        ));
        assert!(matches!(b.list("../"), Err(StoreError::InvalidKey { .. })));
    }

    #[test]
    fn delete_prefix_removes_tree_and_tolerates_missing() {
        let (_tmp, b) = backend();
        assert!(b.put_if_absent("d/p/attempts/1/data/f", b"x").unwrap());
        b.delete_prefix("d/p/attempts/1").unwrap();
        assert!(b.list("d/p/attempts").unwrap().is_empty());
        b.delete_prefix("d/p/attempts/1").unwrap();
        // The cache must not believe the deleted directory still exists.
        assert!(b.put_if_absent("d/p/attempts/1/data/f", b"y").unwrap());
        assert_eq!(b.get("d/p/attempts/1/data/f").unwrap().unwrap(), b"y");
    }

    #[test]
    fn put_recreates_a_directory_removed_by_hand() {
        let (tmp, b) = backend();
        assert!(b.put_if_absent("d/p/log/a", b"x").unwrap());
        fs::remove_dir_all(tmp.path().join("d")).unwrap();
        assert!(b.put_if_absent("d/p/log/b", b"y").unwrap());
        assert_eq!(b.list("d/p/log").unwrap(), vec!["b"]);
    }

    #[test]
    fn concurrent_put_if_absent_has_one_winner() {
        let (tmp, b) = backend();
        let b = Arc::new(b);
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                let (b, barrier) = (Arc::clone(&b), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    (i, b.put_if_absent("d/p/log/k", &[i]).unwrap())
                })
            })
            .collect();
        let results: Vec<(u8, bool)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<u8> = results.iter().filter(|r| r.1).map(|r| r.0).collect();
        assert_eq!(winners.len(), 1);
        assert_eq!(b.get("d/p/log/k").unwrap().unwrap(), vec![winners[0]]);
        assert_eq!(all_entries(&tmp.path().join("d/p/log")), vec!["k"]);
    }
}
