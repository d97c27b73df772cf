//! The local disk: the directory backend ([`FsBackend`]) and the durable
//! file helpers, the few fsync patterns the rest of weir relies on.
//!
//! A file's bytes are durable after `fsync` of the file; its *name* is
//! durable only after `fsync` of the directory holding it. Every helper here
//! does both, in that order, so a crash leaves either the old state or the
//! complete new one, never a name pointing at a torn file.

pub mod backend;
pub(crate) mod dirs;
pub mod flush;

pub use backend::FsBackend;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// fsyncs a directory so the entries created, renamed or removed in it
/// survive a crash.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    fsync_path(dir)
}

/// fsyncs a file or a directory by path.
pub fn fsync_path(path: &Path) -> io::Result<()> {
    sync(&File::open(path)?, path)
}

/// Every fsync of the store goes through here, so a test can count them.
pub(crate) fn sync(file: &File, path: &Path) -> io::Result<()> {
    #[cfg(test)]
    counted::record(path);
    #[cfg(not(test))]
    let _ = path;
    file.sync_all()
}

/// The paths fsynced by this process, for tests that hold the store to its
/// fsync budget (see BENCHMARKS.md).
#[cfg(test)]
pub(crate) mod counted {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    static SYNCED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

    pub(crate) fn record(path: &Path) {
        SYNCED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_path_buf());
    }

    /// The fsynced paths under `root` so far, in order (tests run in
    /// parallel: each looks only under its own temp dir).
    pub(crate) fn under(root: &Path) -> Vec<PathBuf> {
        SYNCED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|p| p.starts_with(root))
            .cloned()
            .collect()
    }
}

/// Replaces `path` with `bytes` atomically and durably: temp file in the same
/// directory, fsync, rename over `path`, fsync the directory. Overwriting is
/// allowed (candidate.json, leases); the parent directory must exist.
pub fn write_durable(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let (tmp, mut file) = create_temp(dir, name)?;
    let result = (|| {
        file.write_all(bytes)?;
        sync(&file, &tmp)?;
        drop(file);
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if result.is_err() {
        // The temp is hidden from listings either way; removing it is tidiness.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// fsyncs every regular file under `dir`, every directory under it, `dir`
/// itself and its parent (so `dir`'s own entry is durable too). Symlinks are
/// not followed: their entries are covered by their directory's fsync.
///
/// Run before committing a candidate: every file must be durable before the
/// commit record that names it.
pub fn fsync_tree(dir: &Path) -> io::Result<()> {
    fsync_tree_inner(dir)?;
    match dir.parent() {
        Some(parent) => fsync_dir(non_empty(parent)),
        None => Ok(()),
    }
}

fn fsync_tree_inner(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            fsync_tree_inner(&entry.path())?;
        } else if kind.is_file() {
            fsync_path(&entry.path())?;
        }
    }
    fsync_dir(dir)
}

/// Creates `dir` and any missing ancestors, fsyncing the parent of each
/// directory it creates so the new entries survive a crash.
pub fn create_dir_all_durable(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // The OS's own words for a file in the way ("Not a directory"),
            // as any later step below it would fail.
            return if dir.is_dir() {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::ENOTDIR))
            };
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = dir.parent().ok_or(e)?;
            create_dir_all_durable(non_empty(parent))?;
            match fs::create_dir(dir) {
                Ok(()) => {}
                // A racing creator; its entry is made durable below anyway.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        Err(e) => return Err(e),
    }
    match dir.parent() {
        Some(parent) => fsync_dir(non_empty(parent)),
        None => Ok(()),
    }
}

/// Creates a fresh hidden temp file next to `name` in `dir`. The name holds
/// the pid and a process-wide counter so concurrent writers never share one;
/// `create_new` turns the rare collision (a pid reused after a crash left a
/// temp behind) into a retry instead of two writers in one file. Only the
/// first 200 bytes of `name` are kept, so the temp of any name a key may
/// have (up to 255 bytes) fits in a directory entry too.
pub(crate) fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    let mut end = name.len().min(200);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let name = &name[..end];
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{pid}.{n}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temp name")))
}

fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no utf-8 file name", path.display()),
        )
    })?;
    Ok((non_empty(path.parent().unwrap_or(Path::new("."))), name))
}

/// `Path::parent` of a bare relative name is `""`, which can't be opened.
pub(crate) fn non_empty(dir: &Path) -> &Path {
    if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn write_durable_overwrites_and_leaves_no_temp() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("candidate.json");
        write_durable(&path, b"one").unwrap();
        write_durable(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(names(tmp.path()), vec!["candidate.json"]);
    }

    #[test]
    fn write_durable_needs_the_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let err = write_durable(&tmp.path().join("no/such/file"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn fsync_tree_walks_nested_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("attempt/data");
        fs::create_dir_all(data.join("sub")).unwrap();
        fs::write(data.join("a.csv"), b"a").unwrap();
        fs::write(data.join("sub/b.csv"), b"b").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/nonexistent", data.join("link")).unwrap();
        fsync_tree(&tmp.path().join("attempt")).unwrap();
        assert!(fsync_tree(&tmp.path().join("missing")).is_err());
    }

    #[test]
    fn create_dir_all_durable_creates_and_tolerates_existing() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        create_dir_all_durable(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all_durable(&deep).unwrap();
        fs::write(tmp.path().join("file"), b"").unwrap();
        assert!(create_dir_all_durable(&tmp.path().join("file")).is_err());
    }
}
