//! Delta Lake tables that follow weir's commit log.
//!
//! An output declared with `table = "delta"` is also a Delta table whose
//! root is the dataset's directory in the warehouse (`<root>/<dataset>`, on
//! disk or in a bucket): `_delta_log/<version, 20 digits>.json`, one action
//! per line, written with put-if-absent through the store's [`Backend`], so
//! the same code commits on S3.
//!
//! weir's own commit log stays the truth and the fence. A Delta commit is
//! written after weir's record, never instead of it: one that fails leaves
//! the publication as it is, and the next publication of the partition or
//! `weir tables sync` brings the table up to weir's records. Each commit
//! carries weir's dataset, partition, generation and token in
//! `commitInfo.weir`, which makes it idempotent: before committing, the
//! writer replays the log and does nothing when the partition's generation
//! (or a newer one) is already there. A commit replaces the partition's
//! files as the table sees them (every `add` not yet removed) by the
//! generation's files, so a table that missed commits converges in one.
//! Another writer's commit on the same version (`put-if-absent` refused) is
//! a conflict: the writer replays the log again and tries the next version.
//!
//! Data files are not copied: an `add` path is relative to the table root
//! and any relative path under it is allowed, so it names the generation's
//! files where weir published them,
//! `<partition>/attempts/<token>/<column>=<value>/…/data/…` (percent-encoded,
//! as the protocol's paths are URIs). The `<column>=<value>` directories
//! ([`layout::table_publication_key`]) are for readers that take partition
//! values from paths, as Polars' native scan does (`scan_parquet` with
//! `hive_partitioning` over delta-rs's file list), not from the log's
//! `partitionValues`; generations published before them (no such
//! directory, `<partition>/attempts/<token>/data/…`) stay in the log as they
//! are, and read through `partitionValues` alone. A rollback is a
//! commit that removes the current files and adds the older generation's.
//!
//! [`layout::table_publication_key`]: crate::store::layout::table_publication_key
//!
//! Why the log is written here from the protocol (delta-io/delta
//! PROTOCOL.md, reader version 1, writer version 2) rather than with
//! delta-rs's `deltalake-core` crate (checked with `cargo info`, version
//! 1.1.3): its arrow and parquet (59) match weir's, but it depends on
//! object_store 0.13 where weir builds 0.14, so a second object store and
//! its HTTP/TLS stack would be built, plus `delta_kernel` 0.28 and its
//! default (tokio) engine; and it commits through its own object-store
//! layer, next to weir's [`Backend`]s whose put-if-absent contract the fence
//! and these commits rely on (the same code on disk, in memory and on S3).
//! The subset weir writes (protocol, metaData, add, remove, commitInfo) is
//! small, and the tests read it back with delta-rs's own Python reader.
//!
//! Every 10 versions (Delta's default `delta.checkpointInterval`, or the
//! table's own when another writer set one) the writer also puts a Parquet
//! checkpoint, `<version>.checkpoint.parquet`, and `_last_checkpoint`; a
//! publication replays the log from the newest checkpoint (the one
//! `_last_checkpoint` names, else the newest listed), not from version 0.
//! A checkpoint that cannot be written or read is a warning: the JSON
//! commits stay the log. History and gc still replay every JSON commit
//! (they need each version's `commitInfo` and every path any version
//! added).
//!
//! The schema is the first generation's; the output's schema policy
//! ([`SchemaPolicy`]) decides a later one: the audit refuses a candidate
//! the table does not admit ([`admits`]), and under `additive` the commit
//! of a generation with new columns carries a `metaData` action adding
//! them. A generation that does not fit anyway (published under an earlier
//! policy) is not committed, [`TableError::SchemaChanged`].
//!
//! `status --check` and `weir verify` compare a table with the visible
//! generations, [`TableView::disagreement`].
//!
//! Old versions stay readable for the table's retention, Delta's
//! `delta.deletedFileRetentionDuration` (one week unless the output declares
//! `table_retention`, which weir writes into the table's configuration so
//! other writers' `VACUUM` agrees): gc keeps every file the current version
//! references and every file a later commit removed less than that long ago
//! ([`referenced_attempts`]); older ones go with their attempt directory
//! once weir's own rollback window lets it, as `VACUUM` would.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_schema::DataType;
use serde_json::{json, Value};

use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::log::CommitRecord;
use crate::store::partition::PartitionStore;

/// The log directory under the table root.
pub const LOG_DIR: &str = "_delta_log";

/// Delta's default `delta.checkpointInterval`: a checkpoint every 10 versions.
const CHECKPOINT_INTERVAL: u64 = 10;

/// The table property that says how long removed files stay readable.
const RETENTION_KEY: &str = "delta.deletedFileRetentionDuration";

/// Delta's default for [`RETENTION_KEY`]: one week.
const DEFAULT_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// `output.schema`: how a Delta table's schema may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaPolicy {
    /// A generation with other columns than the table's fails its audit.
    #[default]
    Fixed,
    /// New nullable columns join the table's schema; other changes fail
    /// the audit.
    Additive,
}

/// What the manifest declares of a dataset's Delta table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Declared {
    /// How its schema may change.
    pub schema: SchemaPolicy,
    /// How long removed files stay readable, when declared.
    pub retention: Option<std::time::Duration>,
}

/// Conflicts (another writer took the version) tolerated per commit.
const MAX_CONFLICTS: usize = 64;

/// Why a table could not follow weir's record.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The warehouse failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A published file could not be read for its schema or row count.
    #[error("cannot read the Parquet footer of `{path}`: {message}")]
    Footer {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The data does not fit a Delta table as weir writes it.
    #[error("{0}")]
    Unsupported(String),
    /// A log entry weir cannot read.
    #[error("`{key}` is not a Delta commit weir can read: {message}")]
    Log {
        /// The entry's key.
        key: String,
        /// Why.
        message: String,
    },
    /// The generation's files have another schema than the table's.
    #[error("the schema of `{dataset}` {partition} generation {generation} is not the Delta table's: {detail}")]
    SchemaChanged {
        /// The dataset.
        dataset: String,
        /// The partition.
        partition: String,
        /// The generation.
        generation: u64,
        /// Which column differs.
        detail: String,
    },
    /// Other writers kept taking the next version.
    #[error("{MAX_CONFLICTS} conflicting commits in a row on `{0}`")]
    Contended(String),
}

/// What [`follow`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// The table got this version for the record.
    Committed(u64),
    /// The log already holds the record's generation (or a newer one) of
    /// the partition, at this version.
    AlreadyThere(u64),
}

mod checkpoint;
mod follow;
mod guard;
mod replay;
mod stats;

pub use follow::follow;
pub use guard::{check_before_writing, missing_records};

use replay::*;

/// Percent-encodes a relative path for an `add`/`remove` action: every
/// byte but unreserved characters, `/` and `=` (a path character in URIs,
/// left as Spark and delta-rs leave it in `<column>=<value>/`).
fn encode_path(path: &str) -> String {
    const KEPT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/')
        .remove(b'=');
    percent_encoding::utf8_percent_encode(path, KEPT).to_string()
}

/// The Spark-JSON type of an Arrow type, for `schemaString`.
fn spark_type(data_type: &DataType) -> Result<String, String> {
    Ok(match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "byte".into(),
        DataType::Int16 => "short".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(_, Some(_)) => "timestamp".into(),
        DataType::Decimal128(p, s) if *p <= 38 => format!("decimal({p},{s})"),
        other => return Err(format!("{other}")),
    })
}

/// What a published file's footer says: its `stats` (rows included)
/// ([`stats::file_stats`]) and, when asked, its `schemaString` fields.
struct Footer {
    stats: Value,
    fields: Option<Vec<Value>>,
}

/// Reads a published file's [`Footer`].
fn footer(path: &std::path::Path, schema: bool) -> Result<Footer, TableError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let fail = |message: String| TableError::Footer {
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let reader = SerializedFileReader::new(file).map_err(|e| fail(e.to_string()))?;
    let meta = reader.metadata().file_metadata();
    let rows = u64::try_from(meta.num_rows()).map_err(|e| fail(e.to_string()))?;
    let arrow =
        parquet::arrow::parquet_to_arrow_schema(meta.schema_descr(), meta.key_value_metadata())
            .map_err(|e| fail(e.to_string()))?;
    let stats = stats::file_stats(reader.metadata(), &arrow, rows);
    if !schema {
        return Ok(Footer {
            stats,
            fields: None,
        });
    }
    let fields = arrow
        .fields()
        .iter()
        .map(|f| {
            let t = spark_type(f.data_type()).map_err(|t| {
                TableError::Unsupported(format!(
                    "column `{}` of `{}` has type {t}, which weir does not map to a Delta type",
                    f.name(),
                    path.display()
                ))
            })?;
            Ok(json!({"name": f.name(), "type": t, "nullable": f.is_nullable(), "metadata": {}}))
        })
        .collect::<Result<Vec<_>, TableError>>()?;
    Ok(Footer {
        stats,
        fields: Some(fields),
    })
}

/// Whether a generation whose columns are `files` fits the table's
/// `table` columns (its partition columns aside) under `policy`, by name
/// and type (not order: Delta matches columns by name; nor nullability:
/// Parquet writers differ on it). `Ok` with the columns to add to the
/// table's schema (none when they match; only under `additive`, each made
/// nullable, as the table's older files lack it), else why not, naming the
/// columns.
fn schema_check(
    table: &[Value],
    files: &[Value],
    partition_columns: &[String],
    policy: SchemaPolicy,
) -> Result<Vec<Value>, String> {
    let data = |fields: &[Value]| -> Vec<Value> {
        fields
            .iter()
            .filter(|f| {
                !partition_columns
                    .iter()
                    .any(|c| f["name"].as_str() == Some(c.as_str()))
            })
            .cloned()
            .collect()
    };
    let (table, files) = (data(table), data(files));
    let name = |f: &Value| f["name"].as_str().unwrap_or_default().to_owned();
    let ty = |f: &Value| match &f["type"] {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    let mut problems = Vec::new();
    for t in &table {
        match files.iter().find(|f| name(f) == name(t)) {
            None => problems.push(format!("column `{}` ({}) is missing", name(t), ty(t))),
            Some(f) if ty(f) != ty(t) => problems.push(format!(
                "column `{}` is {} in the table, {} in the files",
                name(t),
                ty(t),
                ty(f)
            )),
            Some(_) => {}
        }
    }
    let new: Vec<&Value> = files
        .iter()
        .filter(|f| !table.iter().any(|t| name(t) == name(f)))
        .collect();
    if !new.is_empty() && policy == SchemaPolicy::Fixed {
        problems.push(format!(
            "new column{} {} (the table's schema is fixed: `schema = \"additive\"` on the output adds new columns)",
            if new.len() == 1 { "" } else { "s" },
            new.iter()
                .map(|f| format!("`{}` ({})", name(f), ty(f)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(new
        .into_iter()
        .map(|f| {
            let mut f = f.clone();
            f["nullable"] = Value::Bool(true);
            f
        })
        .collect())
}

/// The audit's check of a candidate of `store`'s partition against its
/// dataset's Delta table: `Ok` when its files' schema fits the
/// table's under `policy` (or the table has none yet), `Err(Ok(why))` when
/// it does not (a gate failure: nothing is published), `Err(Err(e))` when
/// the table or the files cannot be read.
pub fn admits(
    store: &PartitionStore,
    columns: &[String],
    policy: SchemaPolicy,
    files: &[std::path::PathBuf],
) -> Result<(), Result<String, TableError>> {
    let Some(first) = files.first() else {
        return Ok(());
    };
    let mine = match footer(first, true) {
        Ok(Footer {
            fields: Some(fields),
            ..
        }) => fields,
        Ok(_) => return Ok(()),
        Err(TableError::Unsupported(why)) => return Err(Ok(why)),
        Err(e) => return Err(Err(e)),
    };
    let state = replay(store.backend(), store.dataset(), ReplayFrom::Checkpoint).map_err(Err)?;
    let Some(table) = &state.fields else {
        return Ok(());
    };
    schema_check(table, &mine, columns, policy)
        .map(|_| ())
        .map_err(|why| {
            Ok(format!(
                "the Delta table's schema does not admit the files: {why}"
            ))
        })
}

/// The Delta version that committed each of the partition's generations
/// (those a table commit followed; a generation a later commit overtook
/// before its own was written has none).
pub fn versions_of(store: &PartitionStore) -> Result<BTreeMap<u64, u64>, TableError> {
    let state = replay(store.backend(), store.dataset(), ReplayFrom::Start)?;
    Ok(state
        .versions
        .into_iter()
        .filter(|((p, _), _)| p == store.partition())
        .map(|((_, g), v)| (g, v))
        .collect())
}

/// Why the Delta table still needs an attempt directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    /// The newest version that added one of its files.
    pub version: u64,
    /// `None` while the table's current version references it; else until
    /// when (ms since the epoch) time travel may still read it.
    pub readable_until: Option<i64>,
}

/// The attempt directories (store keys) of `store`'s partition that its
/// dataset's Delta table still needs at `now_ms`: those whose files the
/// current version references, and those a later commit removed less than
/// the table's retention ago (Delta's `VACUUM` rule), so every version in
/// that window stays readable. Empty when the dataset has no table.
pub fn referenced_attempts(
    store: &PartitionStore,
    now_ms: i64,
) -> Result<BTreeMap<String, Reference>, TableError> {
    let state = replay(store.backend(), store.dataset(), ReplayFrom::Start)?;
    let retention_ms = retention(&state).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut out: BTreeMap<String, Reference> = BTreeMap::new();
    for (path, v) in &state.added {
        let readable_until = match (state.removed.get(path), retention_ms) {
            (None, _) => None,
            (Some(&at), Some(keep)) => {
                let until = at.saturating_add(keep);
                if until <= now_ms {
                    continue;
                }
                Some(until)
            }
            (Some(_), None) => Some(i64::MAX),
        };
        let Some(decoded) = decode_path(path) else {
            continue;
        };
        // `[_weir/]<partition dir>/attempts/<token>/…/data/<file>`, or a
        // local disk's `<partition dir>/data-<token>/<file>` (the same
        // attempt's).
        let attempt = crate::store::layout::table_file_attempt(&decoded);
        if let Some((dir, name, token)) = attempt {
            if crate::store::decode_partition(name).as_deref() == Some(store.partition()) {
                let key = format!("{}/{dir}/attempts/{}", store.dataset(), token.key_name());
                let entry = out.entry(key).or_insert(Reference {
                    version: *v,
                    readable_until,
                });
                entry.version = entry.version.max(*v);
                // Live beats retained; of two removals, the later one counts.
                entry.readable_until = match (entry.readable_until, readable_until) {
                    (None, _) | (_, None) => None,
                    (Some(a), Some(b)) => Some(a.max(b)),
                };
            }
        }
    }
    Ok(out)
}

/// The inverse of [`encode_path`]; `None` for a malformed escape.
fn decode_path(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = path.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A table's log as read once, to compare several partitions with it.
#[derive(Debug)]
pub struct TableView(Replayed);

impl TableView {
    /// Replays the log of `store`'s dataset.
    pub fn read(store: &PartitionStore) -> Result<TableView, TableError> {
        replay(store.backend(), store.dataset(), ReplayFrom::Checkpoint).map(TableView)
    }

    /// The table's files of a partition (by its partition `values` in
    /// `columns`): keys relative to the table (decoded), ascending, with
    /// their sizes. Those of another writer's compaction or rewrite, too.
    pub fn shown_files(&self, columns: &[String], values: &[String]) -> Vec<(String, u64)> {
        self.0
            .active
            .iter()
            .filter(|(_, a)| {
                columns.iter().zip(values).all(|(c, v)| {
                    a.partition_values.get(c).and_then(Value::as_str) == Some(v.as_str())
                })
            })
            .filter_map(|(path, a)| Some((decode_path(path)?, a.size)))
            .collect()
    }

    /// The newest generation of weir's `partition` the table's log
    /// committed, if any.
    pub fn synced_generation(&self, partition: &str) -> Option<u64> {
        self.0.synced.get(partition).map(|&(g, _)| g)
    }

    /// How the table's files of `record`'s partition (by its partition
    /// `values` in `columns`) differ from the record's, in words; `None`
    /// when the table shows exactly the visible generation.
    pub fn disagreement(
        &self,
        columns: &[String],
        values: &[String],
        record: &CommitRecord,
    ) -> Option<String> {
        let dataset = &record.dataset;
        let data_key = record.data_key();
        let rel_dir = data_key
            .strip_prefix(&format!("{dataset}/"))
            .unwrap_or(&data_key);
        let mut expected: Vec<String> = record
            .files
            .iter()
            .map(|name| encode_path(&format!("{rel_dir}/{name}")))
            .collect();
        expected.sort();
        let shown: Vec<String> = self
            .0
            .active
            .iter()
            .filter(|(_, a)| {
                columns.iter().zip(values).all(|(c, v)| {
                    a.partition_values.get(c).and_then(Value::as_str) == Some(v.as_str())
                })
            })
            .map(|(path, _)| path.clone())
            .collect();
        if shown == expected {
            return None;
        }
        let synced = self.0.synced.get(&record.partition);
        Some(match synced {
            Some(&(g, v)) if g != record.generation.get() => format!(
                "the Delta table shows generation {g} (version {v}), weir's visible generation is {}",
                record.generation.get()
            ),
            None if shown.is_empty() => format!(
                "the Delta table does not show generation {} (no commit of this partition)",
                record.generation.get()
            ),
            _ => format!(
                "the Delta table's files of this partition ({}) are not generation {}'s ({})",
                shown.join(", "),
                record.generation.get(),
                expected.join(", ")
            ),
        })
    }
}

/// What the store needs of a task whose output may be a Delta table. The
/// manifest's `Task` implements it: the store opens tables without knowing
/// the manifest.
pub trait TableTask {
    /// The partition dimensions, which name the table's partition columns.
    fn dims(&self) -> &crate::partition::Dims;
    /// What the task declares of its Delta table; `None` when its output
    /// is not one.
    fn delta(&self) -> Option<Declared>;
}

/// The partition columns (scheme names) and values of `task`'s
/// partition, when its output is a Delta table.
pub fn columns_of(task: &impl TableTask, partition: &str) -> Option<(Vec<String>, Vec<String>)> {
    task.delta()?;
    let dims = task.dims();
    let values = dims.split(partition)?;
    Some((
        dims.names().into_iter().map(str::to_owned).collect(),
        values.into_iter().map(str::to_owned).collect(),
    ))
}

/// The Delta type of each of `task`'s partition columns in a new table:
/// `date` for a daily scheme (its keys, `2026-09-20`, are the protocol's
/// date partition values as they are), `string` for every other one.
/// Hourly and minute keys are local times (`2026-09-20T13` in the
/// scheme's zone): a `timestamp` partition value is a UTC instant in
/// another spelling (`2026-09-20 11:00:00`), which would make the value
/// differ from the key and its Hive directory; they stay strings. A table
/// keeps the types it was created with.
pub fn column_types(task: &impl TableTask) -> Vec<&'static str> {
    use crate::partition::{Grain, PartitionScheme};
    task.dims()
        .0
        .iter()
        .map(|d| match &d.scheme {
            PartitionScheme::Time(t) if t.grain == Grain::Daily => "date",
            _ => "string",
        })
        .collect()
}

/// What `task` declares of its Delta table output (defaults otherwise).
pub fn declared_of(task: &impl TableTask) -> Declared {
    task.delta().unwrap_or_default()
}

/// After weir committed `record` for `task`: the Delta commit that
/// follows it, when the output is a Delta table. A failure is a warning
/// on stderr and nothing else: the publication stands, and the next one or
/// `weir tables sync` repairs the table.
pub fn follow_task(store: &PartitionStore, task: &impl TableTask, record: &CommitRecord) {
    let Some((columns, values)) = columns_of(task, &record.partition) else {
        return;
    };
    let types = column_types(task);
    if let Err(e) = follow(store, &columns, &values, &types, declared_of(task), record) {
        tracing::warn!(
            "the Delta table of `{}` does not show {} generation {} yet: {}\n  help: `weir tables sync MANIFEST` brings it up to the visible generations",
            record.dataset,
            record.partition,
            record.generation.get(),
            crate::store::chain(&e)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_intervals_read_as_delta_writes_them_and_render_exactly() {
        let h = std::time::Duration::from_secs(3600);
        assert_eq!(parse_interval("interval 1 week"), Some(h * 24 * 7));
        assert_eq!(parse_interval("INTERVAL 7 days"), Some(h * 24 * 7));
        assert_eq!(parse_interval("interval 36 hours"), Some(h * 36));
        assert_eq!(
            parse_interval("interval 500 milliseconds"),
            Some(std::time::Duration::from_millis(500))
        );
        for bad in [
            "7 days",
            "interval seven days",
            "interval 7 fortnights",
            "interval 7 days ago",
        ] {
            assert_eq!(parse_interval(bad), None, "{bad}");
        }
        for d in [
            h * 24 * 30,
            h * 36,
            h / 2,
            std::time::Duration::from_millis(1500),
        ] {
            assert_eq!(parse_interval(&render_interval(d)), Some(d));
        }
        assert_eq!(render_interval(h * 48), "interval 2 days");
    }

    use crate::store::memory::InterceptPut;
    use crate::store::{MemoryBackend, Warehouse};
    use std::sync::atomic::{AtomicUsize, Ordering};

    // A version another writer takes between weir's replay and
    // its put-if-absent is a conflict: weir replays again and commits on
    // the next free version, without protocol/metaData once the table has
    // them and without touching the other writer's partition; following
    // the same record again is a no-op (the log holds its generation).
    // Through an object store (the memory backend), as on S3.
    #[test]
    fn a_taken_version_is_retried_on_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        // Another engine that takes each Delta version weir is about to
        // write, twice: version 0 with the table's protocol and metaData,
        // the next with an `add` of its own partition `q`.
        let races = AtomicUsize::new(2);
        let backend = InterceptPut::new(move |inner: &MemoryBackend, key: &str, bytes: &[u8]| {
            if key.contains("/_delta_log/") && races.load(Ordering::SeqCst) > 0 {
                races.fetch_sub(1, Ordering::SeqCst);
                let theirs = if key.ends_with("00000000000000000000.json") {
                    let schema = json!({"type": "struct", "fields": [
                        {"name": "id", "type": "long", "nullable": true, "metadata": {}},
                        {"name": "region", "type": "string", "nullable": true, "metadata": {}},
                    ]});
                    format!(
                        "{}\n{}\n",
                        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
                        json!({"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}},
                            "schemaString": schema.to_string(), "partitionColumns": ["region"],
                            "configuration": {}, "createdTime": 0}})
                    )
                } else {
                    format!(
                        "{}\n{}\n",
                        json!({"add": {"path": "q/other.parquet", "partitionValues": {"region": "q"},
                            "size": 1, "modificationTime": 0, "dataChange": true}}),
                        json!({"commitInfo": {"operation": "WRITE", "engineInfo": "another"}})
                    )
                };
                assert!(inner.put_if_absent(key, theirs.as_bytes())?);
                return Ok(false);
            }
            inner.put_if_absent(key, bytes)
        });
        let store = Warehouse::remote(backend.clone(), "s3://b/wh", tmp.path())
            .unwrap()
            .partition("d", "p");
        let batch = arrow_array::RecordBatch::try_from_iter(vec![(
            "id",
            Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef,
        )])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let mut commit = crate::store::log::tests::sample(1);
        commit.files = vec!["part 0.parquet".into()];
        backend
            .put(
                &format!("{}/data/part 0.parquet", commit.attempt_dir),
                &bytes,
            )
            .unwrap();
        let record = store.commit(commit).unwrap();
        let (columns, values) = (vec!["region".to_owned()], vec!["p".to_owned()]);

        assert_eq!(
            follow(&store, &columns, &values, &[], Declared::default(), &record).unwrap(),
            Followed::Committed(2)
        );
        let ours = String::from_utf8(backend.get(&version_key("d", 2)).unwrap().unwrap()).unwrap();
        let actions: Vec<Value> = ours
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<&str> = actions
            .iter()
            .map(|a| a.as_object().unwrap().keys().next().unwrap().as_str())
            .collect();
        assert_eq!(kinds, ["add", "commitInfo"], "{ours}");
        assert_eq!(
            actions[0]["add"]["path"],
            "p/attempts/00000000000000000001/data/part%200.parquet"
        );
        assert_eq!(actions[0]["add"]["partitionValues"], json!({"region": "p"}));
        assert_eq!(actions[0]["add"]["size"], bytes.len());
        assert_eq!(
            actions[0]["add"]["stats"],
            json!({"numRecords": 3, "minValues": {"id": 1}, "maxValues": {"id": 3}, "nullCount": {"id": 0}})
                .to_string()
        );
        assert_eq!(
            actions[1]["commitInfo"]["weir"],
            json!({"dataset": "d", "partition": "p", "generation": 1, "token": 1, "kind": "publish"})
        );

        assert_eq!(
            follow(&store, &columns, &values, &[], Declared::default(), &record).unwrap(),
            Followed::AlreadyThere(2)
        );
        assert!(backend.get(&version_key("d", 3)).unwrap().is_none());
    }

    // A checkpoint weir writes reads back as the same
    // table: protocol, metaData (schema, partition columns), each live
    // file with its size and partition values, and weir's per-partition
    // state (generation and version), which the JSON commits' commitInfo
    // carried; a removed file is not live in it, but its tombstone is,
    // until the table's retention has passed since its removal.
    #[test]
    fn a_checkpoint_reads_back_as_the_replayed_state() {
        let schema = json!({"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": true, "metadata": {}},
            {"name": "region", "type": "string", "nullable": false, "metadata": {}},
        ]})
        .to_string();
        let commits = [
            vec![
                json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
                json!({"metaData": {"id": "t", "name": "d", "format": {"provider": "parquet", "options": {}},
                    "schemaString": schema, "partitionColumns": ["region"], "configuration": {}, "createdTime": 5}}),
                json!({"add": {"path": "n/a.parquet", "partitionValues": {"region": "n"}, "size": 7,
                    "modificationTime": 1, "dataChange": true, "stats": "{\"numRecords\":2}"}}),
                json!({"commitInfo": {"weir": {"partition": "n", "generation": 1}}}),
            ],
            vec![
                json!({"remove": {"path": "n/a.parquet", "deletionTimestamp": 2, "dataChange": true}}),
                json!({"add": {"path": "n/b%20c.parquet", "partitionValues": {"region": "n"}, "size": 9,
                    "modificationTime": 2, "dataChange": true, "stats": "{\"numRecords\":3}"}}),
                json!({"add": {"path": "s/d.parquet", "partitionValues": {"region": "s"}, "size": 4,
                    "modificationTime": 2, "dataChange": true, "stats": "{\"numRecords\":1}"}}),
                json!({"commitInfo": {"weir": {"partition": "n", "generation": 2}}}),
            ],
        ];
        let mut state = Replayed::default();
        for (v, actions) in commits.iter().enumerate() {
            let body: String = actions.iter().map(|a| format!("{a}\n")).collect();
            apply_commit(&mut state, "k", v as u64, body.into_bytes()).unwrap();
        }
        let week = 7 * 24 * 3_600_000;
        // A week after the removal the tombstone has expired: not written.
        let expired = checkpoint::write(&state, 2 + week).unwrap();
        assert_eq!((expired.actions, expired.adds), (4, 2));
        let back = checkpoint::read("k", 1, expired.bytes).unwrap();
        assert!(back.tombstones.is_empty(), "{:?}", back.tombstones);
        // A millisecond before, it is kept with its deletionTimestamp.
        let written = checkpoint::write(&state, 1 + week).unwrap();
        assert_eq!((written.actions, written.adds), (5, 2));
        let back = checkpoint::read("k", 1, written.bytes).unwrap();
        assert_eq!(
            back.removed,
            BTreeMap::from([("n/a.parquet".to_owned(), 2)])
        );
        assert_eq!(back.tombstones["n/a.parquet"]["deletionTimestamp"], 2);
        assert_eq!(back.tombstones["n/a.parquet"]["dataChange"], true);
        assert_eq!(back.last, Some(1));
        assert_eq!(back.synced, state.synced);
        assert_eq!(back.synced.get("n"), Some(&(2, 1)));
        assert_eq!(back.fields, state.fields);
        assert_eq!(back.protocol, state.protocol);
        assert_eq!(
            back.metadata.as_ref().unwrap()["partitionColumns"],
            json!(["region"])
        );
        assert_eq!(back.metadata.as_ref().unwrap()["id"], "t");
        let files = |s: &Replayed| -> Vec<(String, u64, Value, Value)> {
            s.active
                .iter()
                .map(|(p, a)| {
                    (
                        p.clone(),
                        a.size,
                        a.partition_values.clone(),
                        a.action["stats"].clone(),
                    )
                })
                .collect()
        };
        assert_eq!(files(&back), files(&state));
        assert_eq!(
            back.active.keys().collect::<Vec<_>>(),
            ["n/b%20c.parquet", "s/d.parquet"]
        );
    }

    // Readers decode an `add` path as a URI path, so a `%` already in a
    // key is encoded again and reads back as written; `/` and `=` stay, as
    // Spark and delta-rs write `<column>=<value>/`.
    #[test]
    fn paths_are_percent_encoded_but_slashes() {
        let path = "a%2Fb/attempts/00000000000000000001/data/x y.parquet";
        let encoded = encode_path(path);
        assert_eq!(
            encoded,
            "a%252Fb/attempts/00000000000000000001/data/x%20y.parquet"
        );
        assert_eq!(decode_path(&encoded).as_deref(), Some(path));
        assert_eq!(encode_path("region=eu/~a+b é"), "region=eu/~a%2Bb%20%C3%A9");
    }

    // A table's `schemaString` is in Spark's types; Delta's `timestamp` is
    // an instant, so a timestamp without a zone is refused rather than
    // published as one it is not.
    #[test]
    fn arrow_types_map_to_spark_types_and_timestamps_without_zone_are_refused() {
        assert_eq!(spark_type(&DataType::Int64).unwrap(), "long");
        assert_eq!(
            spark_type(&DataType::Decimal128(12, 2)).unwrap(),
            "decimal(12,2)"
        );
        assert!(spark_type(&DataType::Timestamp(
            arrow_schema::TimeUnit::Microsecond,
            None
        ))
        .is_err());
    }
}
