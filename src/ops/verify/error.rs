//! Why verify could not prove a publication, and what could not be checked.

use crate::store::Drift;

/// Why an instance could not be verified.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum VerifyError {
    /// The manifest has no such task.
    #[error("unknown task `{task}`")]
    #[diagnostic(code(weir::verify::unknown_task))]
    UnknownTask {
        /// The name given.
        task: String,
        /// Did you mean …
        #[help]
        help: String,
    },
    /// The instance has never been published.
    #[error("task `{task}` has no published generation of `{dataset}` for partition {partition}")]
    #[diagnostic(
        code(weir::verify::nothing_published),
        help("verification reruns a published instance; `weir run` publishes it first")
    )]
    NothingPublished {
        /// The task.
        task: String,
        /// Its output dataset.
        dataset: String,
        /// The partition.
        partition: String,
    },
    /// An input no longer holds what the publication read.
    #[error("input `{input}` changed since it was pinned: pinned {pinned}, now {now}")]
    #[diagnostic(
        code(weir::verify::input_changed),
        help("verification needs the same evidence the publication read; restore the input, or run the instance again to publish a generation from the new one")
    )]
    InputChanged {
        /// The input dataset.
        input: String,
        /// What the snapshot pinned.
        pinned: String,
        /// What is there now.
        now: String,
    },
    /// An input the publication read is gone.
    #[error("input `{input}` is no longer available: {why}")]
    #[diagnostic(
        code(weir::verify::input_missing),
        help("verification needs the pinned input; restore it (an upstream generation's files stay only while gc retains them)")
    )]
    InputMissing {
        /// The input dataset.
        input: String,
        /// What is missing.
        why: String,
    },
    /// The rerun did not exit 0.
    #[error("the rerun failed: {ending}")]
    #[diagnostic(
        code(weir::verify::task_failed),
        help(
            "the rerun's stdout.log and stderr.log are in its scratch directory under `_scratch/`"
        )
    )]
    TaskFailed {
        /// How it ended.
        ending: String,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The task's environment cannot be built (a `file:` or `env:`
    /// reference of its `env.set`): nothing ran.
    #[error("cannot build the rerun's environment")]
    #[diagnostic(
        code(weir::verify::environment),
        help("verification runs the task with the environment `run` gives it: make the referenced variable or file readable by this weir")
    )]
    Environment(#[from] crate::exec::env::EnvError),
    /// A published file is not what its generation committed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Drift(Box<Drift>),
    /// The visible generation is not what its commit record says, beyond
    /// what per-file sums show (its digest, its token).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Unproven(Box<Unproven>),
    /// The published or rerun files cannot be read.
    #[error("cannot read the data of the {what}")]
    #[diagnostic(code(weir::verify::audit))]
    Audit {
        /// Whose data ("published generation", "rerun").
        what: &'static str,
        /// Why, with the OS's or the parser's cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The warehouse cannot be read, or the record is not one verification
    /// understands.
    #[error("{what}")]
    #[diagnostic(
        code(weir::verify::warehouse),
        help("check that the warehouse is readable and writable (the rerun is written under `_scratch/`)")
    )]
    Store {
        /// What failed.
        what: String,
        /// Why (the OS's cause), when something below failed.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

/// Why a visible generation is not proven to be what its commit record
/// says. The per-file sums alone prove nothing against whoever rewrites a
/// record: they are written with it. So the files' canonical digest and
/// row count are computed again, and the record's token must be one the
/// partition allocated.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum Unproven {
    /// A file is not what the record's per-file sums say.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Drift(Box<Drift>),
    /// The files' digest or row count is not the record's.
    #[error("the files of `{dataset}` {partition} generation {generation} hold {rows} rows with {digest}; its commit record says {recorded_rows} rows with {recorded}")]
    #[diagnostic(
        code(weir::verify::digest_mismatch),
        help("the files changed and the record's per-file sums were rewritten to match them: restore the files, or roll back to a generation whose files are intact")
    )]
    Digest {
        /// The dataset.
        dataset: String,
        /// The partition.
        partition: String,
        /// The generation checked.
        generation: u64,
        /// The digest its record holds.
        recorded: String,
        /// The rows its record holds.
        recorded_rows: u64,
        /// The digest of its files now.
        digest: String,
        /// The rows of its files now.
        rows: u64,
    },
    /// The record names a token the partition never handed out.
    #[error("the commit record of `{dataset}` {partition} generation {generation} names token {token}, which this partition never allocated (there is no tokens/{key})")]
    #[diagnostic(
        code(weir::verify::unallocated_token),
        help("only the holder of an allocated token writes a commit record: this one was written or copied by hand, or the partition's token records were removed; restore them from the same backup as the log")
    )]
    UnallocatedToken {
        /// The dataset.
        dataset: String,
        /// The partition.
        partition: String,
        /// The generation checked.
        generation: u64,
        /// The token it names.
        token: u64,
        /// The token's key name.
        key: String,
    },
    /// The files, or the token records, cannot be read.
    #[error("cannot check `{dataset}` {partition} generation {generation}")]
    #[diagnostic(code(weir::verify::unreadable))]
    Unreadable {
        /// The dataset.
        dataset: String,
        /// The partition.
        partition: String,
        /// The generation checked.
        generation: u64,
        /// Why, with its causes.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl From<Box<Unproven>> for VerifyError {
    fn from(unproven: Box<Unproven>) -> VerifyError {
        match *unproven {
            Unproven::Drift(d) => VerifyError::Drift(d),
            other => VerifyError::Unproven(Box::new(other)),
        }
    }
}

/// A warehouse failure while doing `what`, keeping its cause.
pub(super) fn warehouse_failed<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> VerifyError {
    let what = what.into();
    move |e| VerifyError::Store {
        what,
        source: Some(e.into()),
    }
}

/// A record verification does not understand.
pub(super) fn not_understood(what: String) -> VerifyError {
    VerifyError::Store { what, source: None }
}

/// The data of `what` cannot be read.
pub(super) fn audit<E: Into<Box<dyn std::error::Error + Send + Sync>>>(
    what: &'static str,
) -> impl FnOnce(E) -> VerifyError {
    move |e| VerifyError::Audit {
        what,
        source: e.into(),
    }
}
