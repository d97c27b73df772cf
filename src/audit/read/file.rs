//! Reading one data file: its buffer, the errors naming it, and the
//! estimate of its rows.

use std::fs::File;
use std::path::Path;

use crate::audit::AuditError;

/// Read buffer: large sequential reads keep syscalls off the profile of
/// gigabyte files.
pub(in crate::audit) const BUFFER: usize = 1 << 20;

/// Opens a file for reading, naming it in the error.
pub(in crate::audit) fn open(path: &Path) -> Result<File, AuditError> {
    File::open(path).map_err(|source| io_error(path, source))
}

pub(in crate::audit) fn io_error(path: &Path, source: std::io::Error) -> AuditError {
    AuditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A record or value of `path` at `place` over `limit` bytes.
pub(in crate::audit) fn too_large(
    path: &Path,
    place: String,
    what: String,
    limit: usize,
) -> AuditError {
    AuditError::TooLarge {
        path: path.to_path_buf(),
        place,
        what,
        limit,
    }
}

pub(in crate::audit) fn parse_error(path: &Path, line: u64, message: String) -> AuditError {
    AuditError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// Estimates a file's rows from its size once a sample of rows is read.
pub(in crate::audit) struct RowEstimate {
    /// The bytes whose rows are estimated; 0 if unknown, which disables
    /// the estimate.
    size: u64,
    /// The file offset the rows are read from.
    base: u64,
    rows: u64,
    /// The estimate, until taken.
    ready: Option<u64>,
}

impl RowEstimate {
    /// Rows read before estimating: enough to average out odd first rows.
    const SAMPLE: u64 = 4096;

    pub(in crate::audit) fn new(file: &File) -> Self {
        Self {
            size: file.metadata().map_or(0, |m| m.len()),
            base: 0,
            rows: 0,
            ready: None,
        }
    }

    /// The estimate of the rows in `size` bytes, from the rows read from
    /// offset `base` on: a part of a file estimates its own rows.
    pub(in crate::audit) fn part(size: u64, base: u64) -> Self {
        Self {
            size,
            base,
            rows: 0,
            ready: None,
        }
    }

    /// The file's size in bytes; 0 if unknown.
    pub(in crate::audit) fn size(&self) -> u64 {
        self.size
    }

    /// Counts a row that ends `read` bytes into the file.
    pub(in crate::audit) fn row(&mut self, read: u64) {
        self.rows += 1;
        let read = read.saturating_sub(self.base);
        if self.rows == Self::SAMPLE && self.size > 0 && read > 0 {
            let total = u128::from(self.size) * u128::from(self.rows) / u128::from(read);
            self.ready = Some(u64::try_from(total).unwrap_or(u64::MAX));
        }
    }

    /// The estimate, once.
    pub(in crate::audit) fn take(&mut self) -> Option<u64> {
        self.ready.take()
    }
}
