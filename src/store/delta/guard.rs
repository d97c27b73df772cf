//! What weir checks of a table before it writes: that it understands the
//! table (no reader or writer feature it does not support), and that its
//! own records of a partition are all there (another engine's full VACUUM
//! deletes what is not referenced by the table, weir's commit records and
//! tokens among them; starting over at token 1 would write where a table
//! version still reads).

use super::*;

/// The protocol's reader features weir supports: none (its commits
/// neither write nor honour deletion vectors, column mapping, …).
const READER_FEATURES: &[&str] = &[];
/// The writer features weir honours: `invariants` only while the schema
/// declares none and `appendOnly` only while the table does not set it
/// ([`supported`]).
const WRITER_FEATURES: &[&str] = &["appendOnly", "invariants"];

/// Whether weir may write to a table at `state`: `Err` naming what it
/// does not support. PROTOCOL.md, "Protocol Evolution": reader version 1
/// and writer version 2 are what weir writes; reader version 2 is column
/// mapping; writer 3 adds CHECK constraints, 4 change data feed and
/// generated columns, 5 column mapping, 6 identity columns; version 3/7
/// list features by name.
pub(super) fn supported(state: &Replayed) -> Result<(), String> {
    let Some(protocol) = &state.protocol else {
        return Ok(());
    };
    let reader = protocol["minReaderVersion"].as_u64().unwrap_or(1);
    let writer = protocol["minWriterVersion"].as_u64().unwrap_or(1);
    let names = |key: &str| -> Vec<String> {
        protocol[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut unknown: Vec<String> = Vec::new();
    match reader {
        0 | 1 => {}
        2 => unknown.push("columnMapping (reader version 2)".to_owned()),
        3 => unknown.extend(
            names("readerFeatures")
                .into_iter()
                .filter(|f| !READER_FEATURES.contains(&f.as_str())),
        ),
        v => unknown.push(format!("reader version {v}")),
    }
    match writer {
        0..=2 => {}
        3 => unknown.push("CHECK constraints (writer version 3)".to_owned()),
        4 => unknown.push("change data feed or generated columns (writer version 4)".to_owned()),
        5 => unknown.push("columnMapping (writer version 5)".to_owned()),
        6 => unknown.push("identity columns (writer version 6)".to_owned()),
        7 => {
            for f in names("writerFeatures") {
                if !WRITER_FEATURES.contains(&f.as_str()) && !unknown.contains(&f) {
                    unknown.push(f);
                }
            }
        }
        v => unknown.push(format!("writer version {v}")),
    }
    let config = state.metadata.as_ref().map(|m| &m["configuration"]);
    if config.and_then(|c| c["delta.appendOnly"].as_str()) == Some("true") {
        unknown.push("delta.appendOnly = true (a republish removes files)".to_owned());
    }
    let invariants = state.fields.iter().flatten().any(|f| {
        f["metadata"]
            .as_object()
            .is_some_and(|m| m.contains_key("delta.invariants"))
    });
    if invariants {
        unknown.push("column invariants (delta.invariants)".to_owned());
    }
    if unknown.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the table uses {} (reader version {reader}, writer version {writer}), which weir does not support: it writes nothing to such a table",
        unknown.join(", ")
    ))
}

/// The token of a table path (percent-encoded, relative to the table) of
/// `partition`'s: `[_weir/]<partition dir>/attempts/<token>/…` or a local
/// disk's `<partition dir>/data-<token>/…`; `None` for another partition's or
/// another writer's file.
pub(super) fn token_of_path(path: &str, partition: &str) -> Option<u64> {
    let decoded = decode_path(path)?;
    let (_, name, token) = crate::store::layout::table_file_attempt(&decoded)?;
    (crate::store::decode_partition(name).as_deref() == Some(partition)).then_some(token.get())
}

/// What weir's records of `store`'s partition lack that its dataset's
/// Delta table shows: a generation newer than weir's latest record, or a
/// file of an attempt whose token is above every token weir allocated.
/// `None` when the records are whole, or the dataset has no table. A run
/// refuses such a partition (weir would reuse a token whose attempt
/// directory a table version reads) until the records are restored.
pub fn missing_records(store: &PartitionStore) -> Result<Option<String>, TableError> {
    let state = replay(store.backend(), store.dataset(), ReplayFrom::Checkpoint)?;
    missing_in(store, &state)
}

impl TableView {
    /// [`missing_records`] of `store`'s partition, from this view of its
    /// dataset's table.
    pub fn missing_records(&self, store: &PartitionStore) -> Result<Option<String>, TableError> {
        missing_in(store, &self.0)
    }
}

/// [`missing_records`] of the table at `state`.
fn missing_in(store: &PartitionStore, state: &Replayed) -> Result<Option<String>, TableError> {
    if state.last.is_none() {
        return Ok(None);
    }
    let partition = store.partition();
    let table_token = state
        .active
        .keys()
        .chain(state.removed.keys())
        .filter_map(|p| token_of_path(p, partition))
        .max();
    let table_generation = state.synced.get(partition).copied();
    let latest = store.latest()?;
    let weir_token = store.latest_token()?.map(|t| t.get());
    let weir_generation = latest.as_ref().map(|r| r.generation.get());
    let mut missing = Vec::new();
    if let Some((g, v)) = table_generation {
        if weir_generation.is_none_or(|w| w < g) {
            missing.push(format!(
                "its commit records (the Delta table shows generation {g} at version {v}, weir's log {})",
                match weir_generation {
                    None => "has none".to_owned(),
                    Some(w) => format!("ends at generation {w}"),
                }
            ));
        }
    }
    if let Some(t) = table_token {
        if weir_token.is_none_or(|w| w < t) {
            missing.push(format!(
                "its token records (the Delta table reads files of token {t}, weir {})",
                match weir_token {
                    None => "allocated none".to_owned(),
                    Some(w) => format!("allocated up to {w}"),
                }
            ));
        }
    }
    if missing.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "weir's records of `{}` {partition} are missing: {}",
        store.dataset(),
        missing.join("; ")
    )))
}

/// Before an attempt of `store`'s partition (a Delta table output) takes a
/// token: `Err` naming why weir must not write, when the table uses a
/// feature weir does not support or weir's records of the partition are
/// missing ([`missing_records`]). A table with no partition yet gets
/// them all under `<dataset>/_weir/`, where no VACUUM looks
/// ([`PartitionStore::settle_table_layout`]).
pub fn check_before_writing(store: &PartitionStore) -> Result<(), String> {
    let fail = |e: TableError| format!("cannot read the Delta log: {}", crate::store::chain(&e));
    let state = replay(store.backend(), store.dataset(), ReplayFrom::Checkpoint).map_err(fail)?;
    supported(&state).map_err(|why| format!("the Delta table of `{}`: {why}", store.dataset()))?;
    store.settle_table_layout().map_err(|e| {
        format!(
            "cannot read the dataset's layout: {}",
            crate::store::chain(&e)
        )
    })?;
    match missing_in(store, &state).map_err(fail)? {
        None => Ok(()),
        Some(what) => Err(format!(
            "{what}; weir does not start over where a table version still reads (restore the partition's `log/` and `tokens/` from a backup)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(protocol: Value, configuration: &Value) -> Replayed {
        Replayed {
            protocol: Some(protocol),
            metadata: Some(json!({ "configuration": configuration })),
            fields: Some(vec![
                json!({"name": "id", "type": "long", "nullable": true, "metadata": {}}),
            ]),
            ..Replayed::default()
        }
    }

    // What PROTOCOL.md's "Protocol Evolution" and "Table Features" say
    // each version and feature asks of a writer.
    #[test]
    fn tables_weir_does_not_understand_are_named() {
        let plain = json!({"minReaderVersion": 1, "minWriterVersion": 2});
        assert_eq!(supported(&state(plain.clone(), &json!({}))), Ok(()));
        let append = json!({"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": [], "writerFeatures": ["appendOnly", "invariants"]});
        assert_eq!(supported(&state(append, &json!({}))), Ok(()));
        let why = |protocol: Value, configuration: Value| {
            supported(&state(protocol, &configuration)).unwrap_err()
        };
        assert!(why(
            json!({"minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors", "appendOnly"]}),
            json!({})
        )
        .starts_with("the table uses deletionVectors (reader version 3, writer version 7)"));
        assert!(why(
            json!({"minReaderVersion": 2, "minWriterVersion": 5}),
            json!({})
        )
        .starts_with(
            "the table uses columnMapping (reader version 2), columnMapping (writer version 5)"
        ));
        assert!(why(plain.clone(), json!({"delta.appendOnly": "true"}))
            .starts_with("the table uses delta.appendOnly = true"));
        assert!(why(
            json!({"minReaderVersion": 1, "minWriterVersion": 4}),
            json!({})
        )
        .contains("change data feed or generated columns (writer version 4)"));
    }

    #[test]
    fn tokens_come_from_this_partitions_paths_only() {
        let p = "north/attempts/00000000000000000007/region=north/data/part-0.parquet";
        assert_eq!(token_of_path(p, "north"), Some(7));
        assert_eq!(token_of_path(p, "south"), None);
        assert_eq!(
            token_of_path("north/data-00000000000000000003/x.parquet", "north"),
            Some(3)
        );
        assert_eq!(
            token_of_path("region=north/part-0001.parquet", "north"),
            None
        );
        let kept = "_weir/north/attempts/00000000000000000009/region=north/data/part-0.parquet";
        assert_eq!(token_of_path(kept, "north"), Some(9));
        assert_eq!(token_of_path(kept, "south"), None);
        // Percent-encoded in the log: a partition's own `%` is `%25`.
        let hourly =
            "_weir/2026-09-20T11%253A00/attempts/00000000000000000002/hour=x/data/p.parquet";
        assert_eq!(token_of_path(hourly, "2026-09-20T11:00"), Some(2));
    }
}
