//! The store's typed errors.
//!
//! Callers branch on variants, never on messages: `Stale` is the only publish
//! outcome that means "someone newer won", and `Io` means "unknown", so a
//! caller that sees it must reread before deciding anything.

use std::io;
use std::path::PathBuf;

use crate::store::token::{FencingToken, Generation};

/// A failure of the warehouse's storage layer.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StoreError {
    /// The filesystem (or object store) refused or failed an operation.
    ///
    /// For a write this means the outcome is unknown: the key may or may not
    /// exist now.
    #[error("i/o error on {}", path.display())]
    #[diagnostic(code(weir::store::io))]
    Io {
        /// The file or directory the operation touched.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The object store (S3) refused or failed a request, or cannot be
    /// configured. For a write the outcome is unknown, as for `Io`.
    #[error("object store error on {key}")]
    #[diagnostic(code(weir::store::remote))]
    Remote {
        /// The key (or `s3://` URL) the request was for.
        key: String,
        /// The client's error, with its own causes (HTTP status, network).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored record exists but is not one the store could have written.
    #[error("corrupt record {key}: {message}")]
    #[diagnostic(
        code(weir::store::corrupt),
        help("records are written whole by put-if-absent; a corrupt one was edited by hand")
    )]
    Corrupt {
        /// The key of the record.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// A commit record that was committed is gone (a hand `rm`, a bucket
    /// lifecycle rule, a bad restore): its publication marker, or a gap
    /// in the log's generations, says so. Records are never deleted, so
    /// reading past the hole would show readers an older generation and
    /// let the next commit reuse the number.
    #[error("commit record {key} is missing: generation {generation}{} was committed", .token.map(|t| format!(" (token {t})")).unwrap_or_default())]
    #[diagnostic(
        code(weir::store::missing_record),
        help("commit records are never deleted: restore it (from a backup, or the bucket's versions); until then this partition is neither read nor published")
    )]
    MissingRecord {
        /// The key the record was committed at.
        key: String,
        /// Its generation.
        generation: Generation,
        /// Its token, when its marker names it.
        token: Option<FencingToken>,
    },
    /// A key (or a dataset, partition or file name used to build one) that
    /// could escape the warehouse root or collide with the store's own files.
    #[error("invalid key {key:?}: {reason}")]
    #[diagnostic(code(weir::store::invalid_key))]
    InvalidKey {
        /// The rejected key or name.
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A commit was handed to the log of a different partition than it names.
    #[error("commit for {commit} was submitted to the log of {store}")]
    #[diagnostic(code(weir::store::wrong_partition))]
    WrongPartition {
        /// `dataset/partition` of the log the commit was submitted to.
        store: String,
        /// `dataset/partition` the commit names.
        commit: String,
    },
}

impl StoreError {
    /// Wraps an I/O error with the path it happened on.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}

/// Why a commit did not become visible.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PublishError {
    /// A publisher holding a token at least as new already committed: this
    /// attempt is fenced off and must not retry with the same token.
    #[error(
        "stale publish: token {mine} is not newer than token {committed} \
         committed at generation {generation}"
    )]
    #[diagnostic(code(weir::store::stale))]
    Stale {
        /// The token this publisher holds.
        mine: FencingToken,
        /// The token of the latest committed record.
        committed: FencingToken,
        /// The generation of the latest committed record.
        generation: Generation,
    },
    /// The log could not be read or written; the commit may or may not exist.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Store(#[from] StoreError),
}

/// An error and its causes, each once: "i/o error on …/log: Permission denied".
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}
