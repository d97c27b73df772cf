//! A task's code fingerprint: what it runs, checked, and published as,
//! hashed into one digest that is part of each instance's identity.
//!
//! ```text
//!  sha256( "command" argv… | "gates" their declaration | "output" dataset, format, grain
//!        | per file of `code` (directories walked, sorted by path): path, size, content )
//! ```
//!
//! An edited script, library file, command, gate or output declaration gives
//! another fingerprint: the task's publications are STALE and its next run
//! of those partitions rebuilds them. Records written before fingerprints
//! existed carry none; they are compared by `code_version` alone.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Task;

/// A code path that could not be read.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("cannot fingerprint the code of task `{task}`: {path}")]
#[diagnostic(
    code(weir::manifest::code_unreadable),
    help("`code` lists files and directories relative to the manifest; each must be readable")
)]
pub struct FingerprintError {
    /// The task.
    pub task: String,
    /// The path that failed.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The fingerprint of `task`, whose `code` paths are relative to `dir`:
/// `sha256:<hex>`.
pub fn fingerprint(dir: &Path, task: &Task) -> Result<String, FingerprintError> {
    let mut h = Sha256::new();
    let mut field = |tag: &str, bytes: &[u8]| {
        h.update(tag.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for arg in &task.command {
        field("command", arg.as_bytes());
    }
    // The declared gates as weir understands them (names, columns, bounds).
    field("gates", format!("{:?}", task.gates).as_bytes());
    field("output.dataset", task.output.dataset.as_bytes());
    field(
        "output.format",
        format!("{:?}", task.output.format).as_bytes(),
    );
    for g in &task.output.grain {
        field("output.grain", g.as_bytes());
    }
    let fail = |path: &Path, source| FingerprintError {
        task: task.name.clone(),
        path: path.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for declared in &task.code {
        collect(&dir.join(declared), &mut files).map_err(|(p, e)| fail(&p, e))?;
    }
    files.sort();
    files.dedup();
    for file in files {
        let relative = file.strip_prefix(dir).unwrap_or(&file);
        field("file", relative.to_string_lossy().as_bytes());
        let mut content = Sha256::new();
        // Non-blocking, and checked again once open: a FIFO swapped in since
        // `collect` must not block the run (or `status`) in open or read.
        let mut reader = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&file)
                .map_err(|e| fail(&file, e))?
        };
        let meta = reader.metadata().map_err(|e| fail(&file, e))?;
        if !meta.is_file() {
            return Err(fail(&file, not_a_file(&meta)));
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = reader.read(&mut buf).map_err(|e| fail(&file, e))?;
            if n == 0 {
                break;
            }
            content.update(&buf[..n]);
        }
        field("content", &content.finalize());
    }
    Ok(format!("sha256:{:x}", h.finalize()))
}

/// Why a `code` path that is neither a regular file nor a directory is
/// refused: a FIFO would block open forever, a device read without end.
fn not_a_file(meta: &std::fs::Metadata) -> std::io::Error {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "of another kind"
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}, not a regular file or directory"),
    )
}

/// Every regular file at or under `path` (symlinks followed); anything else
/// is an error, found by its type without opening it.
fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), (PathBuf, std::io::Error)> {
    let meta = std::fs::metadata(path).map_err(|e| (path.to_path_buf(), e))?;
    if !meta.is_dir() && !meta.is_file() {
        return Err((path.to_path_buf(), not_a_file(&meta)));
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| (path.to_path_buf(), e))? {
            let entry = entry.map_err(|e| (path.to_path_buf(), e))?;
            collect(&entry.path(), out)?;
        }
    } else {
        out.push(path.to_path_buf());
    }
    Ok(())
}
