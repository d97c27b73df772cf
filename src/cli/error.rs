//! The command line's one error type. Every command returns
//! `Result<u8, CliError>`: `Ok` carries the outcome's code (0, 1 a task did
//! not publish, 3 a run's publish refused as stale, 4 `status --check`
//! attention, 130/143 interrupted), `Err` an error that keeps its cause
//! (`#[source]`). `cli::main` reports it with its cause chain and ends weir
//! with the code decided here, from the error's kind, once
//! ([`CliError::exit_code`]).

use super::exit::{self, Coded};

/// Any cause: an `io::Error`, a `StoreError`, …, kept as is.
pub(crate) type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The manifest did not load; its diagnostics are already on stderr.
    #[error("the manifest is invalid")]
    Manifest,
    /// Bad arguments (`--older-than yesterday`, an unknown task, a
    /// partition outside the scheme); the text carries its help.
    #[error("{0}")]
    Usage(String),
    /// The warehouse holds nothing the command could act on (`show` of a
    /// partition never published).
    #[error("{0}")]
    NothingPublished(String),
    /// An operator action refused (`retry` of an instance that waits for no
    /// decision, `certify` of a partition with nothing published). A
    /// generation that does not exist is `Usage`, as in every command.
    #[error("{0}")]
    Refused(String),
    /// The engine could not do its own work: warehouse or event-log I/O,
    /// a corrupt record. The cause chain ("Permission denied") is kept.
    #[error(transparent)]
    Engine(Source),
    /// An engine failure, saying what weir was doing.
    #[error("{what}")]
    EngineDoing {
        /// What failed ("cannot open the operator's event log").
        what: String,
        /// Why.
        #[source]
        source: Source,
    },
    /// A published file is not what its commit record says.
    #[error(transparent)]
    Drift(Box<crate::store::Drift>),
    /// `weir report` could not read the warehouse or write its file, or
    /// `--run` names no run.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// The plan could not be made (a selector naming no task, a range
    /// outside the scheme).
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// `weir run`, `backfill`, `retry` could not start.
    #[error(transparent)]
    Exec(#[from] crate::exec::ExecError),
    /// `weir verify` could not verify.
    #[error(transparent)]
    Verify(#[from] crate::ops::verify::VerifyError),
    /// `weir rollback` refused or failed.
    #[error(transparent)]
    Rollback(#[from] crate::ops::rollback::RollbackError),
}

impl CliError {
    /// The exit code (docs/reference/exit-codes.md), from the error's kind alone.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Manifest
            | CliError::Usage(_)
            | CliError::Plan(_)
            | CliError::Report(crate::report::ReportError::NoRun(_)) => exit::INVALID,
            CliError::NothingPublished(_) => exit::TASK_FAILED,
            CliError::Refused(_) => exit::REFUSED,
            CliError::Engine(_)
            | CliError::EngineDoing { .. }
            | CliError::Drift(_)
            | CliError::Report(_) => exit::ENGINE,
            CliError::Exec(e) => e.exit_code(),
            CliError::Verify(e) => e.exit_code(),
            CliError::Rollback(e) => e.exit_code(),
        }
    }

    /// Prints the error with its causes on stderr (`error: …: Permission
    /// denied (os error 13)`), or as a miette diagnostic where the error
    /// has a help or a location; nothing when it was already printed.
    pub(crate) fn report(&self) {
        use crate::exec::ExecError;
        match self {
            CliError::Manifest => {}
            CliError::Drift(d) => super::report(d.as_ref()),
            CliError::Plan(e) => super::report(e),
            CliError::Exec(e @ (ExecError::Plan(_) | ExecError::Code(_))) => super::report(e),
            CliError::Verify(e) => super::report(e),
            CliError::Rollback(e) => super::report(e),
            _ => eprintln!("error: {}", crate::exec::chain(self)),
        }
    }

    /// An engine failure from any error, keeping it as the source.
    pub(crate) fn engine(error: impl Into<Source>) -> CliError {
        CliError::Engine(error.into())
    }
}

impl From<crate::ops::decide::DecisionError> for CliError {
    fn from(e: crate::ops::decide::DecisionError) -> CliError {
        CliError::EngineDoing {
            what: e.what.to_owned(),
            source: e.source,
        }
    }
}

/// An engine failure while doing `what`.
pub(crate) fn doing<E: Into<Source>>(what: impl Into<String>) -> impl FnOnce(E) -> CliError {
    let what = what.into();
    move |e| CliError::EngineDoing {
        what,
        source: e.into(),
    }
}

/// Opens the manifest's warehouse for a command that only reads it: a
/// local warehouse that does not exist is not created, and reads as empty.
pub(crate) fn open_to_read(
    manifest: &crate::manifest::Manifest,
) -> Result<crate::store::Warehouse, CliError> {
    crate::store::Warehouse::open_to_read(&manifest.pipeline).map_err(CliError::engine)
}

/// Opens the manifest's warehouse.
pub(crate) fn open(
    manifest: &crate::manifest::Manifest,
) -> Result<crate::store::Warehouse, CliError> {
    crate::store::Warehouse::open_for(&manifest.pipeline).map_err(CliError::engine)
}

/// What `cli::main` does with a command's outcome: the one place an error
/// becomes an exit code. A reader that went away (`weir report --out
/// /dev/stdout | head`) ends weir quietly with 0, as it does for stdout.
pub(crate) fn finish(outcome: Result<u8, CliError>) -> u8 {
    outcome.unwrap_or_else(|e| {
        if broken_pipe(&e) {
            return exit::OK;
        }
        e.report();
        e.exit_code()
    })
}

/// Whether an EPIPE is among the error's causes.
fn broken_pipe(error: &CliError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    // `weir report --out /dev/stdout | head` and `weir plan
    // --html /dev/stdout | head` exited 5 on the EPIPE of their file write;
    // a reader that went away ends weir with 0, whatever wrote to it.
    #[test]
    fn a_broken_pipe_anywhere_in_the_causes_exits_0() {
        let epipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let report = CliError::Report(crate::report::ReportError::Write {
            path: "/dev/stdout".into(),
            source: epipe(),
        });
        assert_eq!(finish(Err(report)), exit::OK);
        assert_eq!(
            finish(Err(doing("cannot write `/dev/stdout`")(epipe()))),
            exit::OK
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            finish(Err(doing("cannot write `r.html`")(denied))),
            exit::ENGINE
        );
    }
}
