//! Parquet checkpoints in the protocol's schema: one row per action, the
//! columns `txn`, `add`, `remove`, `metaData` and `protocol` nullable
//! structs, exactly one of them set per row. weir writes the `protocol`,
//! the `metaData`, every live `add` and every `remove` tombstone that has
//! not expired (PROTOCOL.md, "Checkpoints": a checkpoint "contains the
//! remove tombstones until they are expired"; one is expired once its
//! `deletionTimestamp` is older than the table's
//! `delta.deletedFileRetentionDuration`), so a VACUUM that starts from the
//! checkpoint still keeps the files time travel within the retention
//! reads. weir keeps its
//! own per-partition state (the newest generation committed and its
//! version, which `commitInfo` carries in the JSON commits) in the file's
//! key-value metadata, `weir.synced`, which Delta readers ignore.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, ListArray, MapArray, RecordBatch,
    StringArray, StructArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Map, Value};

use super::{apply, Replayed, TableError};

/// The key-value metadata entry with weir's per-partition state.
const SYNCED: &str = "weir.synced";

fn string() -> DataType {
    DataType::Utf8
}

fn map() -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, true),
    ]);
    DataType::Map(
        Arc::new(Field::new("key_value", DataType::Struct(entries), false)),
        false,
    )
}

fn record(fields: Vec<(&str, DataType)>) -> DataType {
    DataType::Struct(
        fields
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect(),
    )
}

/// The checkpoint's schema (the protocol's, the fields weir fills).
fn schema() -> Schema {
    let columns = vec![
        (
            "txn",
            record(vec![
                ("appId", string()),
                ("version", DataType::Int64),
                ("lastUpdated", DataType::Int64),
            ]),
        ),
        (
            "add",
            record(vec![
                ("path", string()),
                ("partitionValues", map()),
                ("size", DataType::Int64),
                ("modificationTime", DataType::Int64),
                ("dataChange", DataType::Boolean),
                ("stats", string()),
                ("tags", map()),
            ]),
        ),
        (
            "remove",
            record(vec![
                ("path", string()),
                ("deletionTimestamp", DataType::Int64),
                ("dataChange", DataType::Boolean),
                ("extendedFileMetadata", DataType::Boolean),
                ("partitionValues", map()),
                ("size", DataType::Int64),
            ]),
        ),
        (
            "metaData",
            record(vec![
                ("id", string()),
                ("name", string()),
                ("description", string()),
                (
                    "format",
                    record(vec![("provider", string()), ("options", map())]),
                ),
                ("schemaString", string()),
                (
                    "partitionColumns",
                    DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
                ),
                ("configuration", map()),
                ("createdTime", DataType::Int64),
            ]),
        ),
        (
            "protocol",
            record(vec![
                ("minReaderVersion", DataType::Int32),
                ("minWriterVersion", DataType::Int32),
            ]),
        ),
    ];
    Schema::new(
        columns
            .into_iter()
            .map(|(n, t)| Field::new(n, t, true))
            .collect::<Vec<_>>(),
    )
}

fn nulls(rows: &[Option<&Value>]) -> Option<NullBuffer> {
    Some(NullBuffer::from(
        rows.iter().map(Option::is_some).collect::<Vec<_>>(),
    ))
}

/// The column of `data_type` holding `rows` (JSON values; `None` or
/// JSON null is a null).
fn column(data_type: &DataType, rows: &[Option<&Value>]) -> Result<ArrayRef, String> {
    let rows: Vec<Option<&Value>> = rows.iter().map(|r| r.filter(|v| !v.is_null())).collect();
    Ok(match data_type {
        DataType::Utf8 => Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r.and_then(Value::as_str))
                .collect::<Vec<_>>(),
        )),
        DataType::Int64 => Arc::new(Int64Array::from(
            rows.iter()
                .map(|r| r.and_then(Value::as_i64))
                .collect::<Vec<_>>(),
        )),
        DataType::Int32 => Arc::new(Int32Array::from(
            rows.iter()
                .map(|r| {
                    r.and_then(Value::as_i64)
                        .and_then(|n| i32::try_from(n).ok())
                })
                .collect::<Vec<_>>(),
        )),
        DataType::Boolean => Arc::new(BooleanArray::from(
            rows.iter()
                .map(|r| r.and_then(Value::as_bool))
                .collect::<Vec<_>>(),
        )),
        DataType::Struct(fields) => {
            let children = fields
                .iter()
                .map(|f| {
                    let sub: Vec<Option<&Value>> = rows
                        .iter()
                        .map(|r| r.and_then(|v| v.get(f.name())))
                        .collect();
                    column(f.data_type(), &sub)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(
                StructArray::try_new(fields.clone(), children, nulls(&rows))
                    .map_err(|e| e.to_string())?,
            )
        }
        DataType::Map(entry, sorted) => map_column(entry, *sorted, &rows)?,
        DataType::List(item) => list_column(item, &rows)?,
        other => return Err(format!("checkpoint column of type {other}")),
    })
}

/// A map column (string keys and values, as a Delta checkpoint's
/// `partitionValues` and `tags`).
fn map_column(
    entry: &arrow_schema::FieldRef,
    sorted: bool,
    rows: &[Option<&Value>],
) -> Result<ArrayRef, String> {
    let DataType::Struct(kv) = entry.data_type() else {
        return Err(format!("map entries of type {}", entry.data_type()));
    };
    let (mut keys, mut values, mut offsets) = (Vec::new(), Vec::new(), vec![0_i32]);
    for row in rows {
        if let Some(object) = row.and_then(Value::as_object) {
            for (k, v) in object {
                keys.push(k.clone());
                values.push(match v {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                });
            }
        }
        offsets.push(i32::try_from(keys.len()).map_err(|e| e.to_string())?);
    }
    let entries = StructArray::try_new(
        kv.clone(),
        vec![
            Arc::new(StringArray::from(keys)) as ArrayRef,
            Arc::new(StringArray::from(values)) as ArrayRef,
        ],
        None,
    )
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(
        MapArray::try_new(
            entry.clone(),
            OffsetBuffer::new(offsets.into()),
            entries,
            nulls(rows),
            sorted,
        )
        .map_err(|e| e.to_string())?,
    ))
}

/// A list column of strings.
fn list_column(item: &arrow_schema::FieldRef, rows: &[Option<&Value>]) -> Result<ArrayRef, String> {
    let (mut items, mut offsets) = (Vec::new(), vec![0_i32]);
    for row in rows {
        if let Some(list) = row.and_then(Value::as_array) {
            items.extend(list.iter().map(|v| v.as_str().map(str::to_owned)));
        }
        offsets.push(i32::try_from(items.len()).map_err(|e| e.to_string())?);
    }
    Ok(Arc::new(
        ListArray::try_new(
            item.clone(),
            OffsetBuffer::new(offsets.into()),
            Arc::new(StringArray::from(items)),
            nulls(rows),
        )
        .map_err(|e| e.to_string())?,
    ))
}

/// A checkpoint's bytes and what `_last_checkpoint` says of it.
pub(super) struct Written {
    pub(super) bytes: Vec<u8>,
    /// Its rows: one per action.
    pub(super) actions: usize,
    /// Of which `add`s.
    pub(super) adds: usize,
}

/// Whether a tombstone removed at `deleted_ms` is still unexpired at
/// `now_ms` under the table's retention (`None`: unreadable, kept).
pub(super) fn unexpired(
    deleted_ms: i64,
    retention: Option<std::time::Duration>,
    now_ms: i64,
) -> bool {
    let Some(keep) = retention else {
        return true;
    };
    let keep = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
    deleted_ms.saturating_add(keep) > now_ms
}

/// The checkpoint of `state` as Parquet bytes, its tombstones as of
/// `now_ms`.
pub(super) fn write(state: &Replayed, now_ms: i64) -> Result<Written, TableError> {
    let fail = |message: String| TableError::Unsupported(format!("a checkpoint: {message}"));
    let mut actions: Vec<Value> = Vec::new();
    if let Some(protocol) = &state.protocol {
        actions.push(json!({"protocol": protocol}));
    }
    if let Some(meta) = &state.metadata {
        actions.push(json!({"metaData": meta}));
    }
    for active in state.active.values() {
        actions.push(json!({"add": active.action}));
    }
    let adds = state.active.len();
    let retention = super::retention(state);
    for (path, remove) in &state.tombstones {
        let at = state.removed.get(path).copied().unwrap_or(i64::MAX);
        if unexpired(at, retention, now_ms) {
            let mut remove = remove.clone();
            // A tombstone without a time never expires; say so to readers.
            remove["deletionTimestamp"] = json!(at);
            actions.push(json!({"remove": remove}));
        }
    }
    let schema = Arc::new(schema());
    let columns = schema
        .fields()
        .iter()
        .map(|f| {
            let rows: Vec<Option<&Value>> = actions.iter().map(|a| a.get(f.name())).collect();
            column(f.data_type(), &rows)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| fail(e.to_string()))?;
    let synced: Map<String, Value> = state
        .synced
        .iter()
        .map(|(p, (g, v))| (p.clone(), json!([g, v])))
        .collect();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SYNCED.to_owned(),
            Value::Object(synced).to_string(),
        )]))
        .build();
    let mut bytes = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut bytes, schema, Some(props)).map_err(|e| fail(e.to_string()))?;
    writer.write(&batch).map_err(|e| fail(e.to_string()))?;
    writer.close().map_err(|e| fail(e.to_string()))?;
    Ok(Written {
        bytes,
        actions: actions.len(),
        adds,
    })
}

/// Row `i` of `array` as JSON (the types checkpoints use; others null).
fn value(array: &dyn Array, i: usize) -> Value {
    if array.is_null(i) {
        return Value::Null;
    }
    match array.data_type() {
        DataType::Utf8 => Value::from(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Value::from(array.as_string::<i64>().value(i)),
        DataType::Int64 => Value::from(array.as_primitive::<Int64Type>().value(i)),
        DataType::Int32 => Value::from(array.as_primitive::<Int32Type>().value(i)),
        DataType::Boolean => Value::from(array.as_boolean().value(i)),
        DataType::Struct(fields) => {
            let s = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), value(c.as_ref(), i)))
                    .collect(),
            )
        }
        DataType::Map(_, _) => {
            let entries = array.as_map().value(i);
            let (keys, values) = (entries.column(0), entries.column(1));
            Value::Object(
                (0..entries.len())
                    .filter_map(|j| {
                        let k = value(keys.as_ref(), j);
                        Some((k.as_str()?.to_owned(), value(values.as_ref(), j)))
                    })
                    .collect(),
            )
        }
        DataType::List(_) => {
            let items = array.as_list::<i32>().value(i);
            Value::Array((0..items.len()).map(|j| value(items.as_ref(), j)).collect())
        }
        _ => Value::Null,
    }
}

/// The table's state at version `v` from its checkpoint `key`.
pub(super) fn read(key: &str, v: u64, bytes: Vec<u8>) -> Result<Replayed, TableError> {
    let fail = |message: String| TableError::Log {
        key: key.to_owned(),
        message,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| fail(e.to_string()))?;
    let mut state = Replayed::default();
    if let Some(kv) = builder.metadata().file_metadata().key_value_metadata() {
        let synced = kv
            .iter()
            .find(|e| e.key == SYNCED)
            .and_then(|e| e.value.as_deref())
            .and_then(|text| serde_json::from_str::<BTreeMap<String, (u64, u64)>>(text).ok());
        if let Some(synced) = synced {
            state.synced = synced;
        }
    }
    let reader = builder.build().map_err(|e| fail(e.to_string()))?;
    for batch in reader {
        let batch = batch.map_err(|e| fail(e.to_string()))?;
        let names: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        for i in 0..batch.num_rows() {
            let action: Map<String, Value> = names
                .iter()
                .zip(batch.columns())
                .filter(|(n, _)| matches!(n.as_str(), "add" | "remove" | "metaData" | "protocol"))
                .map(|(n, c)| (n.clone(), value(c.as_ref(), i)))
                .filter(|(_, a)| !a.is_null())
                .collect();
            apply(&mut state, v, key, &Value::Object(action))?;
        }
    }
    if state.metadata.is_none() {
        return Err(fail("it has no metaData".to_owned()));
    }
    state.last = Some(v);
    Ok(state)
}
