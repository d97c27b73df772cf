//! Which files of a staging directory are a candidate, and which entries
//! refuse it.
//!
//! Only regular files the attempt wrote itself are audited and published:
//! one name, one link (`st_nlink == 1`), in `data/` itself, named
//! `*.csv`, `*.jsonl` or `*.parquet` exactly as the output's format says. Anything else
//! is not ignored: a symbolic link (its target can change after the audit,
//! or be another partition's file that gc deletes), a hard link (the same
//! bytes reachable, and writable, under another name), a sub-directory, a
//! dot-file, a file with another suffix (`.CSV`, `.txt`), a FIFO, a socket
//! or a device makes the candidate fail its audit, naming the entry, so a
//! task's output is never silently partial. So does a name the store
//! refuses (`\`, over 255 bytes: [`crate::store::segment_problem`], the
//! store's own rule), which would otherwise pass the audit and then fail
//! every commit as the engine's error.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::Format;

/// Why a staging directory is not a publishable candidate.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    /// The directory or an entry's metadata cannot be read.
    #[error("cannot list `{}`: {source}", .path.display())]
    Io {
        /// The directory or entry.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Entries that are not regular data files of the format.
    #[error("{}", .problems.join("; "))]
    Refused {
        /// One line per entry, naming it and saying why.
        problems: Vec<String>,
    },
}

/// The data files of `dir` for `format`, sorted by name; every other entry
/// is a problem (see the module doc).
pub fn candidate_files(dir: &Path, format: Format) -> Result<Vec<PathBuf>, CandidateError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CandidateError::Io { path, source }
    };
    let suffix = format!(".{}", format.extension());
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        // lstat: a link is judged as a link, never by its target.
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        let kind = meta.file_type();
        let shown = entry.file_name().to_string_lossy().into_owned();
        let problem = if kind.is_symlink() {
            let target = std::fs::read_link(&path)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            let dangling = if path.exists() { "" } else { " (dangling)" };
            Some(format!(
                "`{shown}` is a symbolic link to `{target}`{dangling}: links are refused, write a regular file"
            ))
        } else if kind.is_dir() {
            Some(format!(
                "`{shown}` is a directory: only files directly in WEIR_OUTPUT_DIR are published"
            ))
        } else if kind.is_fifo() {
            Some(format!("`{shown}` is a FIFO, not a regular file"))
        } else if kind.is_socket() {
            Some(format!("`{shown}` is a socket, not a regular file"))
        } else if kind.is_block_device() || kind.is_char_device() {
            Some(format!("`{shown}` is a device, not a regular file"))
        } else if !kind.is_file() {
            Some(format!("`{shown}` is not a regular file"))
        } else if meta.nlink() > 1 {
            Some(format!(
                "`{shown}` is a hard link ({} names for one file): links are refused, write a regular file",
                meta.nlink()
            ))
        } else {
            match entry.file_name().to_str() {
                None => Some(format!("`{shown}` is not a UTF-8 file name")),
                Some(name) if name.starts_with('.') => Some(format!(
                    "`{shown}` is a dot-file: output files are named `*{suffix}`"
                )),
                Some(name) if !name.ends_with(&suffix) || name.len() == suffix.len() => Some(
                    format!("`{shown}` is not named `*{suffix}` (the output's format is {format})"),
                ),
                Some(name) => crate::store::segment_problem(name)
                    .map(|why| format!("`{shown}` is a name the warehouse refuses: {why}")),
            }
        };
        match problem {
            Some(p) => problems.push(p),
            None => files.push(path),
        }
        // Listing stops here: a million files are not held to be refused.
        if files.len() > super::MAX_FILES {
            return Err(CandidateError::Refused {
                problems: vec![format!(
                    "more than {} `*{suffix}` files: a partition holds at most {} (write fewer, larger files)",
                    super::MAX_FILES,
                    super::MAX_FILES
                )],
            });
        }
    }
    if !problems.is_empty() {
        problems.sort();
        return Err(CandidateError::Refused { problems });
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(dir: &Path, format: Format) -> Vec<String> {
        match candidate_files(dir, format) {
            Err(CandidateError::Refused { problems }) => problems,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn regular_files_of_the_format_pass_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.csv", "a.csv"] {
            std::fs::write(dir.path().join(name), "x\n").unwrap();
        }
        let files = candidate_files(dir.path(), Format::Csv).unwrap();
        let names: Vec<_> = files.iter().map(|f| f.file_name().unwrap()).collect();
        assert_eq!(names, ["a.csv", "b.csv"]);
        assert!(candidate_files(&dir.path().join("missing"), Format::Csv).is_err());
    }

    #[test]
    fn every_other_entry_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ok.csv"), "x\n").unwrap();
        std::fs::write(d.join("UP.CSV"), "x\n").unwrap();
        std::fs::write(d.join(".hidden.csv"), "x\n").unwrap();
        std::fs::write(d.join("rows.jsonl"), "{}\n").unwrap();
        std::fs::create_dir(d.join("sub.csv")).unwrap();
        std::os::unix::fs::symlink("/nowhere", d.join("dangling.csv")).unwrap();
        std::os::unix::fs::symlink(d.join("ok.csv"), d.join("link.csv")).unwrap();
        std::fs::write(d.join("hard.csv"), "x\n").unwrap();
        std::fs::hard_link(d.join("hard.csv"), d.join("hard2.csv")).unwrap();
        let fifo = std::ffi::CString::new(d.join("pipe.csv").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let _socket = std::os::unix::net::UnixListener::bind(d.join("sock.csv")).unwrap();
        std::fs::write(d.join("back\\slash.csv"), "x\n").unwrap();
        let problems = refused(d, Format::Csv);
        let joined = problems.join("\n");
        for needle in [
            "`UP.CSV` is not named `*.csv`",
            "`.hidden.csv` is a dot-file",
            "`rows.jsonl` is not named `*.csv`",
            "`sub.csv` is a directory",
            "`dangling.csv` is a symbolic link to `/nowhere` (dangling)",
            "`link.csv` is a symbolic link",
            "`hard.csv` is a hard link (2 names",
            "`hard2.csv` is a hard link",
            "`pipe.csv` is a FIFO",
            "`sock.csv` is a socket",
            "`back\\slash.csv` is a name the warehouse refuses: a segment may not contain '\\' or NUL",
        ] {
            assert!(joined.contains(needle), "{needle} not in:\n{joined}");
        }
        assert_eq!(problems.len(), 11, "{joined}");
    }
}
