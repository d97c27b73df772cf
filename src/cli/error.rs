//! The command line's one error type. A command returns `Result<u8, CliError>`:
//! `Ok` carries the outcome's code (0, 1 a task did not publish, 4
//! `status --check` attention), `Err` an error that keeps its cause
//! (`#[source]`); `cli::main` reports it with its cause chain and ends weir
//! with the code decided here, from the error's kind, once.

use super::exit;

/// Any cause: an `io::Error`, a `StoreError`, …, kept as is.
pub(crate) type Source = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The manifest did not load; its diagnostics are already on stderr.
    #[error("the manifest is invalid")]
    Manifest,
    /// Bad arguments (`--older-than yesterday`); the text carries its help.
    #[error("{0}")]
    Usage(String),
    /// The engine could not do its own work: warehouse or event-log I/O,
    /// a corrupt record. The cause chain ("Permission denied") is kept.
    #[error(transparent)]
    Engine(Source),
    /// `weir report` could not read the warehouse or write its file, or
    /// `--run` names no run.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// An engine failure, saying what weir was doing.
    #[error("{what}")]
    EngineDoing {
        /// What failed ("cannot open the operator's event log").
        what: String,
        /// Why.
        #[source]
        source: Source,
    },
}

impl CliError {
    /// The exit code (README's table).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Manifest
            | CliError::Usage(_)
            | CliError::Report(crate::report::ReportError::NoRun(_)) => exit::INVALID,
            CliError::Engine(_) | CliError::EngineDoing { .. } | CliError::Report(_) => {
                exit::ENGINE
            }
        }
    }

    /// Prints the error with its causes on stderr (`error: …: Permission
    /// denied (os error 13)`), unless it was already printed.
    pub(crate) fn report(&self) {
        match self {
            CliError::Manifest => {}
            _ => {
                eprintln!("error: {}", crate::exec::chain(self));
            }
        }
    }

    /// An engine failure from any error, keeping it as the source.
    pub(crate) fn engine(error: impl Into<Source>) -> CliError {
        CliError::Engine(error.into())
    }
}

/// An engine failure while doing `what`.
pub(crate) fn doing(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CliError {
    let what = what.into();
    move |e| CliError::EngineDoing {
        what,
        source: Box::new(e),
    }
}

/// Loads a manifest; its diagnostics are printed where they are found.
pub(crate) fn load(path: &std::path::Path) -> Result<crate::manifest::Manifest, CliError> {
    super::load(path).map_err(|_| CliError::Manifest)
}

/// Opens the manifest's warehouse.
pub(crate) fn open(
    manifest: &crate::manifest::Manifest,
) -> Result<crate::store::Warehouse, CliError> {
    crate::store::Warehouse::open(&manifest.pipeline.warehouse).map_err(CliError::engine)
}

/// What `cli::main` does with a command's outcome.
pub(crate) fn finish(outcome: Result<u8, CliError>) -> u8 {
    outcome.unwrap_or_else(|e| {
        e.report();
        e.exit_code()
    })
}
