//! The filesystem [`Backend`]: keys are files under a root directory on
//! a local (POSIX) disk, and its [`DurableDirectories`] fsync what a
//! durable write needs.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::store::backend::{
    Backend, DurableDirectories, MultipartHygiene, Object, ObjectMeta, Version,
};
use crate::store::error::StoreError;
use crate::store::fs::dirs::Dirs;
use crate::store::fs::{create_temp, fsync_dir};
use crate::store::key::{key_path, validate_key, validate_segment};

/// A [`Backend`] on a local (POSIX) filesystem: keys are `/`-separated
/// relative paths under `root`.
///
/// put-if-absent writes a hidden temp file in the key's directory, fsyncs
/// it, hard-links it to the key's name (the link fails if the name is taken,
/// atomically, which is the whole trick), removes the temp and fsyncs the
/// directory: one file fsync and one directory fsync per call.
pub struct FsBackend {
    root: PathBuf,
    /// What this process knows of the directories under the root.
    dirs: Mutex<Dirs>,
}

impl FsBackend {
    /// A backend rooted at an existing directory (`Warehouse::open` creates
    /// it durably).
    pub fn new(root: impl Into<PathBuf>) -> FsBackend {
        FsBackend {
            root: root.into(),
            dirs: Mutex::new(Dirs::default()),
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

    /// Makes sure `dir` (under the root) exists and, when `durable`, that
    /// its entry, and every ancestor's up to the root, is durable. A
    /// directory made for volatile keys is not synced until something
    /// durable goes into it or below it.
    fn ensure_dir(&self, dir: &Path, durable: bool) -> Result<(), StoreError> {
        if dir == self.root {
            return Ok(());
        }
        {
            let dirs = self.dirs();
            if dirs.durable.contains(dir) || (!durable && dirs.made(dir)) {
                return Ok(());
            }
        }
        let parent = dir.parent().unwrap_or(&self.root);
        self.ensure_dir(parent, durable)?;
        match fs::create_dir(dir) {
            Ok(()) => {}
            // Ours from an earlier process, or a racer's: either way its
            // entry may not be durable yet, hence the fsync below.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io(dir)(e)),
        }
        if !durable {
            let mut dirs = self.dirs();
            dirs.made
                .entry(parent.to_path_buf())
                .or_default()
                .insert(dir.to_path_buf());
            return Ok(());
        }
        let settled = self.dirs().made_under(parent);
        fsync_dir(parent).map_err(StoreError::io(parent))?;
        let mut dirs = self.dirs();
        dirs.settle(settled);
        dirs.durable.insert(dir.to_path_buf());
        Ok(())
    }

    /// Drops cached directories at or under `dir` (deleted by gc, or by hand).
    fn forget_dirs(&self, dir: &Path) {
        let mut dirs = self.dirs();
        dirs.durable.retain(|d| !d.starts_with(dir));
        dirs.made.retain(|parent, _| !parent.starts_with(dir));
        for children in dirs.made.values_mut() {
            children.retain(|d| !d.starts_with(dir));
        }
    }

    fn dirs(&self) -> std::sync::MutexGuard<'_, Dirs> {
        // Only a cache; a panic elsewhere can't leave it wrong.
        self.dirs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn create_temp_in(
        &self,
        dir: &Path,
        name: &str,
        durable: bool,
    ) -> Result<(PathBuf, File), StoreError> {
        self.in_dir(dir, durable, dir, || create_temp(dir, name))
    }

    /// Runs `make` in `dir`, made first (with its entry durable when
    /// `durable`); an io error is blamed on `blame`.
    fn in_dir<T>(
        &self,
        dir: &Path,
        durable: bool,
        blame: &Path,
        make: impl Fn() -> io::Result<T>,
    ) -> Result<T, StoreError> {
        self.ensure_dir(dir, durable)?;
        match make() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Some directory on the way was removed behind the cache's
                // back (by hand); which one is unknown, so forget them all
                // and redo the chain once.
                *self.dirs() = Dirs::default();
                self.ensure_dir(dir, durable)?;
                make().map_err(StoreError::io(blame))
            }
            made => made.map_err(StoreError::io(blame)),
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
fn link_temp(
    tmp: &Path,
    mut file: File,
    bytes: &[u8],
    path: &Path,
    durable: bool,
) -> Result<bool, StoreError> {
    file.write_all(bytes).map_err(StoreError::io(tmp))?;
    if durable {
        crate::store::fs::sync(&file, tmp).map_err(StoreError::io(tmp))?;
    }
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

/// Creates an empty file at `path` unless one is there: `Ok(false)` when
/// the name is taken.
fn create_empty(path: &Path) -> io::Result<bool> {
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// An fs object's version: its inode with its modification stamp and size.
/// Every write here is a new inode (temp, then link or rename), so two reads
/// with the same version saw the same write. Not the change time: linking
/// and unlinking the temp of a put-if-absent touch it after the key exists.
/// Limit: two replacements inside one timestamp tick that reuse a freed
/// inode number for bytes of the same size would look unchanged to a third
/// writer still holding the first version; today's only conditional writers
/// (markers, certifications) are last-writer-wins anyway.
fn fs_version(meta: &fs::Metadata) -> Version {
    Version::new(format!(
        "{:x}.{:x}.{:x}.{:x}",
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.size()
    ))
}

fn fs_meta(key: String, meta: &fs::Metadata) -> ObjectMeta {
    let nanos = i32::try_from(meta.mtime_nsec()).unwrap_or(0);
    ObjectMeta {
        key,
        size: meta.size(),
        version: fs_version(meta),
        last_modified: jiff::Timestamp::new(meta.mtime(), nanos).unwrap_or_default(),
    }
}

/// An exclusive `flock` on a key's hidden lock file (`.<name>.lock`),
/// released when dropped. Conditional replace and delete take it, so a
/// replace never lands on a key deleted and recreated since it checked the
/// version. put-if-absent needs no lock (the link is the atomic step).
struct KeyLock(#[allow(dead_code)] File);

impl KeyLock {
    /// `None` if the key's directory does not exist (so neither does the key).
    fn take(dir: &Path, name: &str) -> Result<Option<KeyLock>, StoreError> {
        use std::os::fd::AsRawFd;
        let path = dir.join(format!(".{name}.lock"));
        let file = match fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(path)(e)),
        };
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Some(KeyLock(file)));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(StoreError::io(path)(e));
            }
        }
    }
}

impl FsBackend {
    fn split_key<'k>(&self, key: &'k str) -> Result<(PathBuf, PathBuf, &'k str), StoreError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        let name = key.rsplit('/').next().unwrap_or(key);
        Ok((path, dir, name))
    }

    fn walk(&self, dir: &Path, key: &str, out: &mut Vec<ObjectMeta>) -> Result<(), StoreError> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            // Removed by a concurrent gc while we walked: nothing under it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(StoreError::io(dir))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if validate_segment(&name).is_err() {
                continue;
            }
            let child = if key.is_empty() {
                name
            } else {
                format!("{key}/{name}")
            };
            let path = entry.path();
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => self.walk(&path, &child, out)?,
                Ok(meta) if meta.is_file() => out.push(fs_meta(child, &meta)),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(path)(e)),
            }
        }
        Ok(())
    }
}

impl Backend for FsBackend {
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        let name = key.rsplit('/').next().unwrap_or(key);
        let (tmp, file) = self.create_temp_in(&dir, name, true)?;
        let outcome = link_temp(&tmp, file, bytes, &path, true);
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

    /// The same link trick without the file and directory fsyncs: the link
    /// is still atomic for every process that shares this filesystem.
    fn put_if_absent_volatile(&self, key: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        if bytes.is_empty() {
            // An empty file cannot be seen half-written, so it is created
            // under its own name (O_CREAT|O_EXCL): the temp, link and unlink
            // would cost an inode (a commit's marker, a slot's generation)
            // and two more calls for nothing.
            return self.in_dir(&dir, false, &path, || create_empty(&path));
        }
        let name = key.rsplit('/').next().unwrap_or(key);
        let (tmp, file) = self.create_temp_in(&dir, name, false)?;
        let outcome = link_temp(&tmp, file, bytes, &path, false);
        let _ = fs::remove_file(&tmp);
        outcome
    }

    fn put_if_version_matches(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<Option<Version>, StoreError> {
        let (path, dir, name) = self.split_key(key)?;
        let Some(_lock) = KeyLock::take(&dir, name)? else {
            return Ok(None);
        };
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && fs_version(&meta) == *expected => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(path)(e)),
        }
        let (tmp, mut file) = self.create_temp_in(&dir, name, true)?;
        let replaced = (|| {
            file.write_all(bytes).map_err(StoreError::io(&tmp))?;
            file.sync_all().map_err(StoreError::io(&tmp))?;
            fs::rename(&tmp, &path).map_err(StoreError::io(&path))?;
            fsync_dir(&dir).map_err(StoreError::io(&dir))?;
            // The renamed inode, stamped after the rename (which may touch
            // its ctime), is what the next reader sees.
            file.metadata().map_err(StoreError::io(&path))
        })();
        if replaced.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        Ok(Some(fs_version(&replaced?)))
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let (path, dir, name) = self.split_key(key)?;
        // Into an existing directory without making it durable first (an
        // attempt dir is made durable with its candidate); a missing one is
        // created the durable way.
        let (tmp, mut file) = match create_temp(&dir, name) {
            Ok(created) => created,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.create_temp_in(&dir, name, true)?
            }
            Err(e) => return Err(StoreError::io(&dir)(e)),
        };
        // Temp and rename, so a reader never sees half of it; no fsync (see
        // the trait: one writer, whose loss a reader survives).
        let written = file
            .write_all(bytes)
            .map_err(StoreError::io(&tmp))
            .and_then(|()| fs::rename(&tmp, &path).map_err(StoreError::io(&path)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }

    fn get_object(&self, key: &str) -> Result<Option<Object>, StoreError> {
        use std::io::Read;
        let path = self.path(key)?;
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // A file where a directory of the key belongs is damage (the
            // store never writes one), not "no such key": a marker or a
            // lease read as absent would let an instance run.
            Err(e) => return Err(StoreError::io(path)(e)),
        };
        // Metadata and bytes from one open file: one version, even if the
        // key is replaced meanwhile.
        let meta = file.metadata().map_err(StoreError::io(&path))?;
        if !meta.is_file() {
            return Err(StoreError::io(&path)(io::Error::from_raw_os_error(
                libc::EISDIR,
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.size()).unwrap_or(0));
        file.read_to_end(&mut bytes)
            .map_err(StoreError::io(&path))?;
        Ok(Some(Object {
            bytes,
            meta: fs_meta(key.to_owned(), &meta),
        }))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let dir = if prefix.is_empty() {
            self.root.clone()
        } else {
            self.path(prefix)?
        };
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
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

    fn list_objects(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut out = Vec::new();
        if prefix.is_empty() {
            self.walk(&self.root, "", &mut out)?;
        } else {
            let path = self.path(prefix)?;
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => self.walk(&path, prefix, &mut out)?,
                Ok(meta) if meta.is_file() => out.push(fs_meta(prefix.to_owned(), &meta)),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(path)(e)),
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let (path, dir, name) = self.split_key(key)?;
        let Some(_lock) = KeyLock::take(&dir, name)? else {
            return Ok(());
        };
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            // A "directory" is not an object; delete_prefix removes those.
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(path)(e)),
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io(path)(e)),
        }
        fsync_dir(&dir).map_err(StoreError::io(&dir))
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

    fn durable(&self) -> Option<&dyn DurableDirectories> {
        Some(self)
    }

    fn multipart(&self) -> Option<&dyn MultipartHygiene> {
        None
    }
}

impl DurableDirectories for FsBackend {
    /// Creates every missing directory of `names` under `prefix` (and
    /// `prefix`), syncing nothing: they are made durable together by the
    /// first fsync of `prefix` that a durable write needs anyway (a
    /// publish's [`DurableDirectories::make_durable`] of its data directory, or a
    /// commit's put into `log/`). Later calls in this process skip it.
    fn prepare_dirs(&self, prefix: &str, names: &[&str]) -> Result<(), StoreError> {
        let dir = self.path(prefix)?;
        let mut children = Vec::with_capacity(names.len());
        for name in names {
            validate_segment(name)?;
            children.push(dir.join(name));
        }
        {
            let dirs = self.dirs();
            if children
                .iter()
                .all(|c| dirs.durable.contains(c) || dirs.made(c))
            {
                return Ok(());
            }
        }
        self.ensure_dir(&dir, false)?;
        for child in &children {
            match fs::create_dir(child) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::io(child)(e)),
            }
        }
        let mut dirs = self.dirs();
        let made = dirs.made.entry(dir).or_default();
        made.extend(children);
        Ok(())
    }

    /// fsyncs, all at once on the shared flusher (`store::fs::flush`), each
    /// key's file or directory and every directory entry between it and the
    /// nearest ancestor whose own entry this process made durable: a new
    /// partition's `<dataset>/`, its `<p>/` (which also makes the skeleton's
    /// `log/`, `tokens/` and `attempts/` durable), a new data directory.
    fn make_durable(&self, keys: &[String]) -> Result<(), StoreError> {
        let paths = keys
            .iter()
            .map(|k| self.path(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (paths, settled) = self.dirs().to_sync(&self.root, paths);
        super::flush::sync_all(paths).map_err(|(path, e)| StoreError::io(path)(e))?;
        self.dirs().settle(settled);
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
        // A file where a prefix's directory belongs is damage (an
        // object store cannot be in that state), not an empty prefix: a
        // commit log listed as empty would say "nothing published".
        match b.list("a/b") {
            Err(StoreError::Io { path, source }) => {
                assert_eq!(path, tmp.path().join("a/b"));
                assert_eq!(source.kind(), io::ErrorKind::NotADirectory);
            }
            other => panic!("{other:?}"),
        }
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

    // An empty volatile key is created under its own name: one winner
    // among racers, no temp left beside it, and a directory removed by
    // hand is made again.
    #[test]
    fn an_empty_volatile_put_has_one_winner_and_leaves_no_temp() {
        let (tmp, b) = backend();
        let b = Arc::new(b);
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (b, barrier) = (Arc::clone(&b), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    b.put_if_absent_volatile("d/p/tokens/1.committed-1", b"")
                        .unwrap()
                })
            })
            .collect();
        let won = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|won| *won)
            .count();
        assert_eq!(won, 1);
        assert_eq!(b.get("d/p/tokens/1.committed-1").unwrap().unwrap(), b"");
        assert_eq!(
            all_entries(&tmp.path().join("d/p/tokens")),
            vec!["1.committed-1"]
        );
        fs::remove_dir_all(tmp.path().join("d")).unwrap();
        assert!(b
            .put_if_absent_volatile("d/p/tokens/2.committed-2", b"")
            .unwrap());
        assert_eq!(b.list("d/p/tokens").unwrap(), vec!["2.committed-2"]);
    }

    // A conditional replace checks the version and writes under
    // the key's lock, so a replace racing a delete and re-create loses.
    #[test]
    fn fs_replace_after_delete_and_recreate_is_refused() {
        let (tmp, b) = backend();
        assert!(b.put_if_absent("k", b"one").unwrap());
        let v = b.get_object("k").unwrap().unwrap().meta.version;
        b.delete("k").unwrap();
        assert_eq!(b.put_if_version_matches("k", b"two", &v).unwrap(), None);
        assert!(b.put_if_absent("k", b"three").unwrap());
        assert_eq!(b.put_if_version_matches("k", b"two", &v).unwrap(), None);
        assert_eq!(b.get("k").unwrap().unwrap(), b"three");
        // The lock file is hidden from listings.
        assert_eq!(b.list("").unwrap(), vec!["k"]);
        assert!(all_entries(tmp.path()).contains(&".k.lock".to_owned()));
    }
}
