//! Reading a table's log: its commits and checkpoints replayed into the
//! live files, protocol and metadata.

use super::*;

/// One file the table sees.
#[derive(Debug, Clone)]
pub(super) struct Active {
    pub(super) size: u64,
    pub(super) partition_values: Value,
    /// The `add` action itself, for a checkpoint.
    pub(super) action: Value,
}

/// The table's state after replaying its log.
#[derive(Debug, Default)]
pub(super) struct Replayed {
    /// The newest version, if any.
    pub(super) last: Option<u64>,
    /// Files added and not removed, by path.
    pub(super) active: BTreeMap<String, Active>,
    /// Per weir partition, the newest generation committed and its version.
    pub(super) synced: BTreeMap<String, (u64, u64)>,
    /// The newest `metaData`'s schema fields.
    pub(super) fields: Option<Vec<Value>>,
    /// The newest `protocol` and `metaData` actions, for a checkpoint.
    pub(super) protocol: Option<Value>,
    pub(super) metadata: Option<Value>,
    /// Per (weir partition, generation), the version that committed it
    /// (only the versions replayed: a replay from a checkpoint has none
    /// before it).
    pub(super) versions: BTreeMap<(String, u64), u64>,
    /// Every path any replayed version added, with the newest version that did.
    pub(super) added: BTreeMap<String, u64>,
    /// Paths removed and not added again, with the `deletionTimestamp` (ms)
    /// of their removal (`i64::MAX` when the action has none: kept).
    pub(super) removed: BTreeMap<String, i64>,
    /// The `remove` action of each path in `removed`, for a checkpoint's
    /// tombstones.
    pub(super) tombstones: BTreeMap<String, Value>,
}

/// Key of version `v`'s commit file.
pub(super) fn version_key(dataset: &str, v: u64) -> String {
    format!("{dataset}/{LOG_DIR}/{v:020}.json")
}

/// Key of version `v`'s (single-file) checkpoint.
pub(super) fn checkpoint_key(dataset: &str, v: u64) -> String {
    format!("{dataset}/{LOG_DIR}/{v:020}.checkpoint.parquet")
}

/// Key of the table's `_last_checkpoint` pointer.
pub(super) fn last_checkpoint_key(dataset: &str) -> String {
    format!("{dataset}/{LOG_DIR}/_last_checkpoint")
}

/// Where a replay starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReplayFrom {
    /// Version 0: every version's commitInfo (history, gc).
    Start,
    /// The newest checkpoint, when there is one (a publication).
    Checkpoint,
}

/// Applies one action of version `v` (from `key`) to `state`.
pub(super) fn apply(
    state: &mut Replayed,
    v: u64,
    key: &str,
    action: &Value,
) -> Result<(), TableError> {
    if let Some(add) = action.get("add").filter(|a| !a.is_null()) {
        let path = add["path"].as_str().unwrap_or_default().to_owned();
        state.added.insert(path.clone(), v);
        state.removed.remove(&path);
        state.tombstones.remove(&path);
        state.active.insert(
            path,
            Active {
                size: add["size"].as_u64().unwrap_or_default(),
                partition_values: add["partitionValues"].clone(),
                action: add.clone(),
            },
        );
    } else if let Some(remove) = action.get("remove").filter(|a| !a.is_null()) {
        let path = remove["path"].as_str().unwrap_or_default();
        state.active.remove(path);
        let at = remove["deletionTimestamp"].as_i64().unwrap_or(i64::MAX);
        state.removed.insert(path.to_owned(), at);
        state.tombstones.insert(path.to_owned(), remove.clone());
    } else if let Some(meta) = action.get("metaData").filter(|a| !a.is_null()) {
        let schema: Value = meta["schemaString"]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| TableError::Log {
                key: key.to_owned(),
                message: "its metaData has no readable schemaString".to_owned(),
            })?;
        state.fields = schema["fields"].as_array().cloned();
        state.metadata = Some(meta.clone());
    } else if let Some(protocol) = action.get("protocol").filter(|a| !a.is_null()) {
        state.protocol = Some(protocol.clone());
    } else if let Some(weir) = action.get("commitInfo").and_then(|c| c.get("weir")) {
        if let (Some(p), Some(g)) = (weir["partition"].as_str(), weir["generation"].as_u64()) {
            state.versions.insert((p.to_owned(), g), v);
            let entry = state.synced.entry(p.to_owned()).or_insert((g, v));
            if g >= entry.0 {
                *entry = (g, v);
            }
        }
    }
    Ok(())
}

/// Applies version `v`'s commit file to `state`.
pub(super) fn apply_commit(
    state: &mut Replayed,
    key: &str,
    v: u64,
    bytes: Vec<u8>,
) -> Result<(), TableError> {
    let text = String::from_utf8(bytes).map_err(|e| TableError::Log {
        key: key.to_owned(),
        message: e.to_string(),
    })?;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let action: Value = serde_json::from_str(line).map_err(|e| TableError::Log {
            key: key.to_owned(),
            message: e.to_string(),
        })?;
        apply(state, v, key, &action)?;
    }
    state.last = Some(v);
    Ok(())
}

/// Replays the log from version 0 or from its newest checkpoint. From
/// version 0 on a log whose first JSON commits are gone (another Delta
/// writer's log cleanup keeps only those after a checkpoint), the replay
/// starts from the oldest checkpoint the remaining commits follow, so its
/// files count as added (gc keeps them).
pub(super) fn replay(
    backend: &Arc<dyn Backend>,
    dataset: &str,
    from: ReplayFrom,
) -> Result<Replayed, TableError> {
    let prefix = format!("{dataset}/{LOG_DIR}");
    let mut state = Replayed::default();
    let mut after = String::new();
    if from == ReplayFrom::Checkpoint {
        if let Some((v, loaded)) = newest_checkpoint(backend, dataset)? {
            state = loaded;
            after = format!("{v:020}.json");
        }
    }
    let names = backend.list_after(&prefix, &after)?;
    let mut versions: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".json"))
        .filter(|n| n.len() == 20)
        .filter_map(|n| n.parse().ok())
        .collect();
    versions.sort_unstable();
    if from == ReplayFrom::Start && versions.first().is_some_and(|&first| first > 0) {
        let first = versions[0];
        let mut checkpoints: Vec<u64> = names
            .iter()
            .filter_map(|n| n.strip_suffix(".checkpoint.parquet"))
            .filter(|n| n.len() == 20)
            .filter_map(|n| n.parse().ok())
            .filter(|&c: &u64| c + 1 >= first)
            .collect();
        checkpoints.sort_unstable();
        if let Some((c, loaded)) = checkpoints
            .into_iter()
            .find_map(|c| load_checkpoint(backend, dataset, c))
        {
            state = loaded;
            versions.retain(|&v| v > c);
        }
    }
    for v in versions {
        let key = version_key(dataset, v);
        let Some(bytes) = backend.get(&key)? else {
            continue;
        };
        apply_commit(&mut state, &key, v, bytes)?;
    }
    Ok(state)
}

/// The newest checkpoint weir can read: the one `_last_checkpoint` names,
/// else the newest listed. A checkpoint that cannot be read is skipped
/// with a warning (the JSON commits are the log; a checkpoint only
/// shortens its replay).
pub(super) fn newest_checkpoint(
    backend: &Arc<dyn Backend>,
    dataset: &str,
) -> Result<Option<(u64, Replayed)>, TableError> {
    let pointed = backend
        .get(&last_checkpoint_key(dataset))
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|doc| doc["version"].as_u64());
    if let Some(found) = pointed.and_then(|v| load_checkpoint(backend, dataset, v)) {
        return Ok(Some(found));
    }
    let mut listed: Vec<u64> = backend
        .list(&format!("{dataset}/{LOG_DIR}"))?
        .iter()
        .filter_map(|n| n.strip_suffix(".checkpoint.parquet"))
        .filter(|n| n.len() == 20)
        .filter_map(|n| n.parse().ok())
        .filter(|v| Some(*v) != pointed)
        .collect();
    listed.sort_unstable();
    Ok(listed
        .into_iter()
        .rev()
        .find_map(|v| load_checkpoint(backend, dataset, v)))
}

/// The checkpoint of version `v`, `None` when it is missing or, with a
/// warning, unreadable.
pub(super) fn load_checkpoint(
    backend: &Arc<dyn Backend>,
    dataset: &str,
    v: u64,
) -> Option<(u64, Replayed)> {
    let key = checkpoint_key(dataset, v);
    let read = backend
        .get(&key)
        .map_err(TableError::from)
        .and_then(|bytes| bytes.map(|b| checkpoint::read(&key, v, b)).transpose());
    match read {
        Ok(found) => found.map(|state| (v, state)),
        Err(e) => {
            tracing::warn!(
                "the Delta checkpoint `{key}` is not readable, replaying the log without it: {}",
                crate::store::chain(&e)
            );
            None
        }
    }
}

/// Commits between checkpoints: the table's `delta.checkpointInterval`
/// (set by another writer) or Delta's default, 10.
pub(super) fn checkpoint_interval(state: &Replayed) -> u64 {
    state
        .metadata
        .as_ref()
        .and_then(|m| m["configuration"]["delta.checkpointInterval"].as_str())
        .and_then(|n| n.parse().ok())
        .filter(|n: &u64| *n > 0)
        .unwrap_or(CHECKPOINT_INTERVAL)
}

/// The table's retention of removed files: its [`RETENTION_KEY`], else
/// Delta's default. A value weir cannot read keeps files forever (nothing
/// proves a reader may lose them).
pub(super) fn retention(state: &Replayed) -> Option<std::time::Duration> {
    match state
        .metadata
        .as_ref()
        .and_then(|m| m["configuration"][RETENTION_KEY].as_str())
    {
        None => Some(DEFAULT_RETENTION),
        Some(text) => parse_interval(text),
    }
}

/// Delta's interval syntax, `interval 7 days` (a count and a unit, the
/// unit's `s` optional; `week`, `day`, `hour`, `minute`, `second`,
/// `millisecond`).
pub(super) fn parse_interval(text: &str) -> Option<std::time::Duration> {
    let mut words = text.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("interval") {
        return None;
    }
    let count: u64 = words.next()?.parse().ok()?;
    let unit = words.next()?.to_ascii_lowercase();
    if words.next().is_some() {
        return None;
    }
    let ms: u64 = match unit.strip_suffix('s').unwrap_or(&unit) {
        "week" => 7 * 24 * 3_600_000,
        "day" => 24 * 3_600_000,
        "hour" => 3_600_000,
        "minute" => 60_000,
        "second" => 1_000,
        "millisecond" => 1,
        _ => return None,
    };
    Some(std::time::Duration::from_millis(count.checked_mul(ms)?))
}

/// `d` in Delta's interval syntax, in the largest unit that is exact.
pub(super) fn render_interval(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    let unit = [
        (24 * 3_600_000, "days"),
        (3_600_000, "hours"),
        (60_000, "minutes"),
        (1_000, "seconds"),
    ]
    .into_iter()
    .find(|(size, _)| ms % size == 0);
    match unit {
        Some((size, name)) => format!("interval {} {name}", ms / size),
        None => format!("interval {ms} milliseconds"),
    }
}

/// Writes the checkpoint of version `v` (the table's `state` once `v` is
/// applied, its tombstones as of `now_ms`) and points `_last_checkpoint`
/// at it unless it names a newer one.
pub(super) fn write_checkpoint(
    backend: &Arc<dyn Backend>,
    dataset: &str,
    v: u64,
    state: &Replayed,
    now_ms: i64,
) -> Result<(), TableError> {
    let written = checkpoint::write(state, now_ms)?;
    let bytes = &written.bytes;
    backend.put(&checkpoint_key(dataset, v), bytes)?;
    let pointer = last_checkpoint_key(dataset);
    let newer = backend
        .get(&pointer)?
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|doc| doc["version"].as_u64())
        .is_some_and(|current| current > v);
    if !newer {
        // The protocol's optional fields too: delta-rs and Spark size
        // their checkpoint reads with them.
        let doc = json!({
            "version": v,
            "size": written.actions,
            "sizeInBytes": bytes.len(),
            "numOfAddFiles": written.adds,
        });
        backend.put(&pointer, doc.to_string().as_bytes())?;
    }
    Ok(())
}
