//! Following a partition's visible generation with one Delta commit: the
//! table created on its first, the partition's files overwritten, the
//! metadata changed only where the schema grew or the retention moved.

use super::*;

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Brings the Delta table of `store`'s dataset up to `record`, the
/// partition's visible generation: one commit that removes what the table
/// shows of the partition and adds the record's files, unless the log
/// already holds that generation. `columns` are the partition columns (the
/// task's scheme names) and `values` the partition's key in each; `types`
/// their Delta types should the commit create the table
/// ([`super::column_types`]).
pub fn follow(
    store: &PartitionStore,
    columns: &[String],
    values: &[String],
    types: &[&str],
    declared: Declared,
    record: &CommitRecord,
) -> Result<Followed, TableError> {
    let policy = declared.schema;
    let retention_text = declared.retention.map(render_interval);
    let backend = store.backend();
    let dataset = store.dataset();
    let (files, fields) = table_files(store, record)?;
    let mut conflicts = 0;
    loop {
        let mut state = replay(backend, dataset, ReplayFrom::Checkpoint)?;
        guard::supported(&state).map_err(|why| {
            TableError::Unsupported(format!("the Delta table of `{dataset}`: {why}"))
        })?;
        if let Some(&(g, v)) = state.synced.get(&record.partition) {
            if g >= record.generation.get() {
                return Ok(Followed::AlreadyThere(v));
            }
        }
        let mut added = Vec::new();
        if let (Some(table), Some(mine)) = (&state.fields, &fields) {
            added = schema_check(table, mine, columns, policy).map_err(|detail| {
                TableError::SchemaChanged {
                    dataset: dataset.to_owned(),
                    partition: record.partition.clone(),
                    generation: record.generation.get(),
                    detail,
                }
            })?;
        }
        let version = state.last.map_or(0, |v| v + 1);
        let now = now_ms();
        let mut lines: Vec<Value> = Vec::new();
        if state.last.is_none() {
            lines.extend(table_creation(
                dataset,
                columns,
                types,
                fields.as_ref(),
                retention_text.as_deref(),
                now,
            )?);
        }
        // One `metaData` action at most per commit, carrying both changes.
        if let Some(changed) = metadata_change(&state, &added, retention_text.as_deref()) {
            lines.push(json!({ "metaData": changed }));
        }
        lines.extend(partition_changes(&state, columns, values, &files, now));
        lines.push(commit_info(dataset, columns, record, now));
        let mut body = String::new();
        for line in &lines {
            body.push_str(&line.to_string());
            body.push('\n');
        }
        let key = version_key(dataset, version);
        if backend.put_if_absent(&key, body.as_bytes())? {
            if version > 0 && version % checkpoint_interval(&state) == 0 {
                let written = lines
                    .iter()
                    .try_for_each(|action| apply(&mut state, version, &key, action))
                    .and_then(|()| write_checkpoint(backend, dataset, version, &state, now));
                if let Err(e) = written {
                    tracing::warn!(
                        "the Delta table of `{dataset}` has no checkpoint at version {version}: {}\n  note: a checkpoint only shortens readers' replay of the log; the commit stands",
                        crate::store::chain(&e)
                    );
                }
            }
            return Ok(Followed::Committed(version));
        }
        conflicts += 1;
        if conflicts >= MAX_CONFLICTS {
            return Err(TableError::Contended(dataset.to_owned()));
        }
    }
}

/// The partition's overwrite: a `remove` of each file the table shows of
/// it that the record does not name, an `add` of each record file the table
/// does not show yet.
fn partition_changes(
    state: &replay::Replayed,
    columns: &[String],
    values: &[String],
    files: &[TableFile],
    now: i64,
) -> Vec<Value> {
    let partition_values: serde_json::Map<String, Value> = columns
        .iter()
        .zip(values)
        .map(|(c, v)| (c.clone(), Value::String(v.clone())))
        .collect();
    let new_paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let mut lines = Vec::new();
    for (path, active) in &state.active {
        let mine = columns.iter().zip(values).all(|(c, v)| {
            active.partition_values.get(c).and_then(Value::as_str) == Some(v.as_str())
        });
        if mine && !new_paths.contains(&path.as_str()) {
            lines.push(json!({"remove": {
                "path": path,
                "deletionTimestamp": now,
                "dataChange": true,
                "extendedFileMetadata": true,
                "partitionValues": active.partition_values,
                "size": active.size,
            }}));
        }
    }
    for TableFile { path, size, stats } in files {
        if state.active.contains_key(path) {
            continue;
        }
        lines.push(json!({"add": {
            "path": path,
            "partitionValues": partition_values.clone(),
            "size": size,
            "modificationTime": now,
            "dataChange": true,
            "stats": stats.to_string(),
        }}));
    }
    lines
}

/// A file of a record, as the table names it.
struct TableFile {
    /// Relative to the table, path-encoded.
    path: String,
    size: u64,
    /// Its `stats`, [`super::stats::file_stats`].
    stats: Value,
}

/// A record's files as the table names them (relative to the table,
/// path-encoded), with their sizes and row counts, and the schema of the
/// first one.
fn table_files(
    store: &PartitionStore,
    record: &CommitRecord,
) -> Result<(Vec<TableFile>, Option<Vec<Value>>), TableError> {
    let dataset = store.dataset();
    let local = store.local_files(record)?;
    let data_key = record.data_key();
    let rel_dir = data_key
        .strip_prefix(&format!("{dataset}/"))
        .ok_or_else(|| {
            TableError::Unsupported(format!(
                "attempt `{}` is not under dataset `{dataset}`",
                record.attempt_dir
            ))
        })?;
    let mut files = Vec::with_capacity(record.files.len());
    let mut fields = None;
    for (i, (name, path)) in record.files.iter().zip(local.iter()).enumerate() {
        let read = footer(path, i == 0)?;
        if read.fields.is_some() {
            fields = read.fields;
        }
        let size = match record.file_sums.get(i) {
            Some(sum) => sum.size,
            None => std::fs::metadata(path).map(|m| m.len()).unwrap_or_default(),
        };
        files.push(TableFile {
            path: encode_path(&format!("{rel_dir}/{name}")),
            size,
            stats: read.stats,
        });
    }
    drop(local);
    Ok((files, fields))
}

/// The actions that create the table: its protocol and its metadata (the
/// files' schema and the partition columns, of `types`, `string` where
/// none is given).
fn table_creation(
    dataset: &str,
    columns: &[String],
    types: &[&str],
    fields: Option<&Vec<Value>>,
    retention_text: Option<&str>,
    now: i64,
) -> Result<Vec<Value>, TableError> {
    let mut actions = Vec::with_capacity(2);
    let mut schema_fields = fields.cloned().unwrap_or_default();
    for (i, column) in columns.iter().enumerate() {
        let ty = types.get(i).copied().unwrap_or("string");
        if schema_fields.iter().any(|f| f["name"] == column.as_str()) {
            return Err(TableError::Unsupported(format!(
                "the data of `{dataset}` has a column `{column}`, the name of its partition scheme: a Delta table's partition column cannot also be in the files"
            )));
        }
        schema_fields.push(json!({"name": column, "type": ty, "nullable": false, "metadata": {}}));
    }
    let schema = json!({"type": "struct", "fields": schema_fields}).to_string();
    actions.push(json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}));
    actions.push(json!({"metaData": {
        "id": table_id(dataset, now),
        "name": dataset,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema,
        "partitionColumns": columns,
        "configuration": match retention_text {
            Some(text) => json!({ RETENTION_KEY: text }),
            None => json!({}),
        },
        "createdTime": now,
    }}));
    Ok(actions)
}

/// The table's metadata changed by this commit, if it changes: the schema
/// gains `added` columns (`additive`: the same table id; readers fill them
/// with nulls in the older files), and a declared retention that differs
/// from the table's becomes the table's (so every writer's `VACUUM` keeps
/// as long).
fn metadata_change(
    state: &replay::Replayed,
    added: &[Value],
    retention_text: Option<&str>,
) -> Option<Value> {
    let meta = state.metadata.as_ref()?;
    let mut changed = meta.clone();
    if let (false, Some(table)) = (added.is_empty(), &state.fields) {
        let mut schema_fields = table.clone();
        schema_fields.extend(added.iter().cloned());
        changed["schemaString"] =
            Value::String(json!({"type": "struct", "fields": schema_fields}).to_string());
    }
    if let Some(text) = retention_text {
        if changed["configuration"][RETENTION_KEY].as_str() != Some(text) {
            if !changed["configuration"].is_object() {
                changed["configuration"] = json!({});
            }
            changed["configuration"][RETENTION_KEY] = Value::String(text.to_owned());
        }
    }
    (&changed != meta).then_some(changed)
}

/// The commit's `commitInfo`: a partition overwrite, and what weir
/// committed (dataset, partition, generation, token, publish or rollback).
fn commit_info(dataset: &str, columns: &[String], record: &CommitRecord, now: i64) -> Value {
    json!({"commitInfo": {
        "timestamp": now,
        "operation": "WRITE",
        "operationParameters": {"mode": "Overwrite", "partitionBy": json!(columns).to_string()},
        "engineInfo": concat!("weir/", env!("CARGO_PKG_VERSION")),
        "isBlindAppend": false,
        "weir": {
            "dataset": dataset,
            "partition": record.partition,
            "generation": record.generation.get(),
            "token": record.token.get(),
            "kind": match record.kind {
                crate::store::CommitKind::Publish => "publish",
                crate::store::CommitKind::Rollback { .. } => "rollback",
            },
        },
    }})
}

/// A table id in UUID form, unique enough per dataset and creation time.
fn table_id(dataset: &str, now: i64) -> String {
    use sha2::{Digest as _, Sha256};
    let h = Sha256::digest(format!("{dataset}\0{now}\0{}", std::process::id()).as_bytes());
    let hex: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}
