//! Why a report could not be written, shared by every part of the
//! report that reads the warehouse.

use std::path::PathBuf;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The warehouse could not be read.
    #[error("cannot read the warehouse")]
    Warehouse(#[source] crate::store::StoreError),
    /// The report file could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The report's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--run` names no run.
    #[error("no run `{0}` in the warehouse")]
    NoRun(String),
    /// The status (commit logs, marks) could not be gathered.
    #[error("cannot read the warehouse's status: {0}")]
    Status(String),
    /// A template did not render (a bug: tests render every page).
    #[error("cannot render the report's HTML")]
    Template(#[source] minijinja::Error),
}
