//! Why data files could not be audited.

use std::path::PathBuf;

/// Why data files could not be audited. A gate failing is not an error: it is
/// an outcome in the [`AuditReport`](super::AuditReport).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AuditError {
    /// A file could not be opened or read.
    #[error("cannot read `{}`", .path.display())]
    #[diagnostic(code(weir::audit::io))]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid CSV or JSON Lines.
    #[error("cannot parse `{}` at line {line}: {message}", .path.display())]
    #[diagnostic(code(weir::audit::parse))]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line (0 if unknown).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A file is not a readable Parquet file.
    #[error("`{}` is not a valid Parquet file: {message}", .path.display())]
    #[diagnostic(code(weir::audit::parquet))]
    ParquetInvalid {
        /// The file.
        path: PathBuf,
        /// What the Parquet reader said.
        message: String,
    },
    /// A Parquet column cannot be read as canonical values.
    #[error("`{}` column `{column}`: {message}", .path.display())]
    #[diagnostic(code(weir::audit::parquet_column))]
    ParquetColumn {
        /// The file.
        path: PathBuf,
        /// The column.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// A Parquet file's schema differs from the candidate's first file.
    #[error(
        "`{}` column `{column}` is {found} but in the first file it is {expected}",
        .path.display()
    )]
    #[diagnostic(
        code(weir::audit::schema_mismatch),
        help("every Parquet file of one candidate must have the same columns with the same types")
    )]
    SchemaMismatch {
        /// The file that differs.
        path: PathBuf,
        /// The first column (by name) that differs.
        column: String,
        /// Its type in the first file, or `no such column`.
        expected: String,
        /// Its type in this file, or `no such column`.
        found: String,
    },
    /// A record or a value is larger than the audit reads
    /// ([`MAX_RECORD_BYTES`], [`MAX_VALUE_BYTES`]).
    #[error(
        "`{}` {place}: {what} is larger than {} MiB, the most the audit reads",
        .path.display(),
        .limit >> 20
    )]
    #[diagnostic(
        code(weir::audit::too_large),
        help("write large blobs to object storage and keep their address in the table")
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// `line 2` (CSV, JSON Lines) or `row 6` (Parquet).
        place: String,
        /// `the record` or `the value of column `payload``.
        what: String,
        /// The limit it is over, in bytes.
        limit: usize,
    },
    /// A JSON Lines value nests deeper than the audit reads ([`MAX_NESTING`]).
    #[error(
        "`{}` {place}: {what} is nested deeper than {limit} levels, the most the audit reads",
        .path.display()
    )]
    #[diagnostic(
        code(weir::audit::too_deep),
        help("flatten the value, or write it as a JSON string")
    )]
    TooDeep {
        /// The file.
        path: PathBuf,
        /// `line 2`.
        place: String,
        /// `the value of column `payload``.
        what: String,
        /// The limit it is over, in levels.
        limit: usize,
    },
    /// More columns than the audit reads ([`MAX_COLUMNS`]).
    #[error(
        "`{}` {place}: more than {limit} columns, the most the audit reads",
        .path.display()
    )]
    #[diagnostic(
        code(weir::audit::too_wide),
        help("split the table, or keep a wide record as one nested JSON value")
    )]
    TooWide {
        /// The file.
        path: PathBuf,
        /// `line 1` (CSV's header, the JSON Lines line whose keys pass the
        /// limit) or `schema` (Parquet).
        place: String,
        /// The limit.
        limit: usize,
    },
    /// More data files than one audit reads ([`MAX_FILES`]).
    #[error("{files} data files are more than the {limit} one audit reads")]
    #[diagnostic(
        code(weir::audit::too_many_files),
        help("write fewer, larger files: one partition is read as one set of files")
    )]
    TooManyFiles {
        /// The files found.
        files: usize,
        /// The limit.
        limit: usize,
    },
    /// A file's columns differ from the candidate's first file.
    #[error(
        "`{}` has columns ({}) but the first file has ({})",
        .path.display(),
        .found.join(", "),
        .expected.join(", ")
    )]
    #[diagnostic(
        code(weir::audit::header_mismatch),
        help("every data file of one candidate must have the same set of columns")
    )]
    HeaderMismatch {
        /// The file that differs.
        path: PathBuf,
        /// The first file's columns, sorted.
        expected: Vec<String>,
        /// This file's columns, sorted.
        found: Vec<String>,
    },
}
