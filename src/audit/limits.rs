//! The bounds of what the audit reads: a record, a value, nesting, columns
//! and files, each failing the audit naming where when passed.

/// The largest record the audit reads, in bytes (128 MiB): a CSV record or
/// a JSON Lines line. A larger one fails the audit naming its file and line,
/// before more of it is read, so a runaway field (a missing closing quote,
/// a file of no newlines) costs bounded memory and fails the same way on
/// every rerun. Far above real rows: BigQuery caps a row at 100 MB.
pub const MAX_RECORD_BYTES: usize = 128 << 20;

/// The largest value the audit reads, in bytes (64 MiB): a CSV field, the
/// text of a JSON Lines value or of a Parquet value. A larger one fails the
/// audit naming its file, line (Parquet: row) and column. Blobs this large
/// belong in object storage, with their address in the table (Snowflake
/// caps a value at 16 MB, Redshift's SUPER at 16 MB).
pub const MAX_VALUE_BYTES: usize = 64 << 20;

/// The deepest a JSON Lines value may nest (128 levels, the row's own
/// object being level 1; serde_json's own limit, which every other JSON weir
/// reads is held to). A deeper one fails the audit naming its file, line
/// and column: the canonical text of a nested value is built level by
/// level, and a line of 60 KB nested 30,000 deep once overflowed the
/// stack and aborted the engine. BigQuery nests a record at most 15 deep.
pub const MAX_NESTING: usize = 128;

/// The most columns a candidate (or input) may have (100,000): a CSV
/// header's, a Parquet schema's top-level columns, the keys of a JSON Lines
/// candidate's objects all together. More fails the audit naming the file
/// (and line): the audit keeps a little per column on every thread that
/// reads, and a file of 2 million columns took 620 MB. Ten times
/// BigQuery's 10,000 columns a table, three times SQL Server's 30,000 of a
/// wide table.
pub const MAX_COLUMNS: usize = 100_000;

/// The most data files one candidate (or input) may have (100,000). More
/// fails the audit before any is read; a partition of that many files is
/// a writer's bug (one file per row), and would cost the store one object
/// per file on every read.
pub const MAX_FILES: usize = 100_000;
