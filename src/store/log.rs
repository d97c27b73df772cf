//! Commit records: the entries of a partition's log.
//!
//! `log/<g>.json` is created once, by put-if-absent, and never rewritten.
//! The record with the highest generation is what readers see; a rollback is
//! just a newer record pointing at an older attempt's files, so history is
//! never lost.

use crate::store::error::StoreError;
use crate::store::file_sum::FileSum;
use crate::store::key::validate_key;
use crate::store::layout;
use crate::store::token::{FencingToken, Generation};

/// The record format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One committed version of a partition.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommitRecord {
    /// Always [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Position in the log; equals the number in the record's key.
    pub generation: Generation,
    /// The publisher's fencing token; strictly increases along the log.
    pub token: FencingToken,
    /// The dataset.
    pub dataset: String,
    /// The partition.
    pub partition: String,
    /// Publish or rollback. Flattened, so the JSON has a top-level
    /// `"kind": "publish"` (plus `from_generation` for a rollback).
    #[serde(flatten)]
    pub kind: CommitKind,
    /// The run that published.
    pub run_id: String,
    /// The task that published.
    pub task: String,
    /// The task's attempt number.
    pub attempt: u32,
    /// Key of the `attempts/<token>` dir whose `data/` holds the visible
    /// files (a rollback points at an older one).
    pub attempt_dir: String,
    /// Key of the directory holding the files when it is not
    /// `attempt_dir/data`: on a local disk, the attempt's `data/` renamed
    /// at publish to `<partition>/data-<token>` (`layout::data_key`), always
    /// the same token's as `attempt_dir`. Absent (and then not written, so
    /// such a record reads byte for byte as before) in records of an
    /// object store, of a Delta table, and of weir before this layout.
    /// Read the files' directory with [`CommitRecord::data_key`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<String>,
    /// File names under [`CommitRecord::data_key`].
    pub files: Vec<String>,
    /// Each file's size and SHA-256 as committed, in `files` order (empty in
    /// records written before weir recorded them: those cannot be checked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_sums: Vec<FileSum>,
    /// Row count of the published data.
    pub rows: u64,
    /// Canonical digest of the data, `sha256:...`.
    pub digest: String,
    /// What the task read.
    pub input_snapshot: serde_json::Value,
    /// Canonical digest of `input_snapshot`.
    pub input_snapshot_digest: String,
    /// Version of the code that produced the data (the task's own, or the
    /// pipeline's).
    pub code_version: String,
    /// Fingerprint of the task's code, command, gates and output declaration
    /// (`manifest::fingerprint`); absent in records written before weir
    /// fingerprinted code, which are then compared by `code_version` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_fingerprint: Option<String>,
    /// When the record was committed, RFC 3339 UTC.
    pub published_at: String,
}

impl CommitRecord {
    /// Key of the directory holding the record's `files`: its `data_dir`,
    /// or `attempt_dir/data` for a record that names none. Every reader of
    /// a generation's files goes through this.
    pub fn data_key(&self) -> String {
        match &self.data_dir {
            Some(dir) => dir.clone(),
            None => format!("{}/{}", self.attempt_dir, crate::store::layout::DATA_DIR),
        }
    }

    /// The token of the attempt whose files the record names (for a
    /// rollback, an older attempt's), from `attempt_dir`.
    pub fn attempt_token(&self) -> Option<FencingToken> {
        let root = layout::attempt_root(&self.attempt_dir);
        FencingToken::parse_key_name(root.rsplit('/').next().unwrap_or(""))
    }

    /// Key of the record's `i`th file (`""` past the last).
    pub fn file_key(&self, i: usize) -> String {
        let name = self.files.get(i).map_or("", String::as_str);
        format!("{}/{name}", self.data_key())
    }
}

/// Why a record exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CommitKind {
    /// A newly audited candidate became visible.
    Publish,
    /// The files of an earlier generation became visible again.
    Rollback {
        /// The generation whose files are restored.
        from_generation: Generation,
    },
}

/// What a publisher proposes: a [`CommitRecord`] without the fields the log
/// assigns (format version, generation, timestamp).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCommit {
    /// The publisher's fencing token.
    pub token: FencingToken,
    /// The dataset; must match the partition store it is committed to.
    pub dataset: String,
    /// The partition; must match the partition store it is committed to.
    pub partition: String,
    /// Publish or rollback.
    pub kind: CommitKind,
    /// The run that publishes.
    pub run_id: String,
    /// The task that publishes.
    pub task: String,
    /// The task's attempt number.
    pub attempt: u32,
    /// Key of the attempt dir holding the files (see `attempt_key`).
    pub attempt_dir: String,
    /// Key of the directory holding the files when it is not
    /// `attempt_dir/data` (see [`CommitRecord::data_dir`]).
    pub data_dir: Option<String>,
    /// File names under the data directory.
    pub files: Vec<String>,
    /// Each file's size and SHA-256, in `files` order.
    pub file_sums: Vec<FileSum>,
    /// Row count.
    pub rows: u64,
    /// Canonical digest of the data.
    pub digest: String,
    /// What the task read.
    pub input_snapshot: serde_json::Value,
    /// Canonical digest of `input_snapshot`.
    pub input_snapshot_digest: String,
    /// Version of the code that produced the data.
    pub code_version: String,
    /// Fingerprint of the task's code (see [`CommitRecord`]).
    pub code_fingerprint: Option<String>,
}

impl NewCommit {
    /// The record this commit becomes at `generation`; the caller restamps
    /// `generation` and `published_at` if it has to try a later one.
    pub(crate) fn into_record(self, generation: Generation) -> CommitRecord {
        CommitRecord {
            format_version: FORMAT_VERSION,
            generation,
            token: self.token,
            dataset: self.dataset,
            partition: self.partition,
            kind: self.kind,
            run_id: self.run_id,
            task: self.task,
            attempt: self.attempt,
            attempt_dir: self.attempt_dir,
            data_dir: self.data_dir,
            files: self.files,
            file_sums: self.file_sums,
            rows: self.rows,
            digest: self.digest,
            input_snapshot: self.input_snapshot,
            input_snapshot_digest: self.input_snapshot_digest,
            code_version: self.code_version,
            code_fingerprint: self.code_fingerprint,
            published_at: jiff::Timestamp::now().to_string(),
        }
    }
}

/// The first unusable path in a record, with the rule it breaks:
/// `attempt_dir` must be a key under this partition's (`partition_prefix`)
/// `attempts/`, `data_dir` (if any) the same attempt's published data
/// directory, and every file a relative key, or `visible_files` could
/// point outside the warehouse, and gc, which keeps and collects an
/// attempt's two directories together, could delete a live generation's.
pub(crate) fn path_problem(
    rec: &CommitRecord,
    partition_prefix: &str,
) -> Option<(String, &'static str)> {
    let attempts_prefix = layout::attempts_prefix(partition_prefix);
    let under_attempts = rec
        .attempt_dir
        .strip_prefix(&attempts_prefix)
        .is_some_and(|rest| rest.starts_with('/'));
    if validate_key(&rec.attempt_dir).is_err() || !under_attempts {
        return Some((
            rec.attempt_dir.clone(),
            "attempt_dir must be a key under the partition's attempts/",
        ));
    }
    if let Some(dir) = &rec.data_dir {
        if rec
            .attempt_token()
            .is_none_or(|t| *dir != layout::data_key(partition_prefix, t))
        {
            return Some((
                dir.clone(),
                "data_dir must be the partition's data-<token> of the attempt_dir's token",
            ));
        }
    }
    rec.files
        .iter()
        .find(|f| validate_key(f).is_err())
        .map(|f| (f.clone(), "a file name must be a relative path under data/"))
}

/// Parses the record stored at `key`, which must be generation `generation`
/// of `dataset/partition`. Anything else is a hand edit or a copied file,
/// and reported as [`StoreError::Corrupt`] naming the key.
pub(crate) fn parse_record(
    key: &str,
    bytes: &[u8],
    generation: Generation,
    dataset: &str,
    partition: &str,
    partition_prefix: &str,
) -> Result<CommitRecord, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        key: key.to_owned(),
        message,
    };
    // Check the version first so a newer format gets a clear message rather
    // than a missing-field error.
    #[derive(serde::Deserialize)]
    struct Version {
        format_version: u32,
    }
    let version: Version =
        serde_json::from_slice(bytes).map_err(|e| corrupt(format!("not a commit record: {e}")))?;
    if version.format_version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "unsupported format_version {} (this build reads {FORMAT_VERSION})",
            version.format_version
        )));
    }
    let rec: CommitRecord =
        serde_json::from_slice(bytes).map_err(|e| corrupt(format!("not a commit record: {e}")))?;
    if rec.generation != generation {
        return Err(corrupt(format!(
            "record says generation {} but is stored as generation {generation}",
            rec.generation
        )));
    }
    if rec.dataset != dataset || rec.partition != partition {
        return Err(corrupt(format!(
            "record belongs to {}/{}, not {dataset}/{partition}",
            rec.dataset, rec.partition
        )));
    }
    if let Some((path, rule)) = path_problem(&rec, partition_prefix) {
        return Err(corrupt(format!("{rule}: {path:?}")));
    }
    Ok(rec)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(token: u64) -> NewCommit {
        NewCommit {
            token: FencingToken::from_raw(token),
            dataset: "d".into(),
            partition: "p".into(),
            kind: CommitKind::Publish,
            run_id: "run".into(),
            task: "task".into(),
            attempt: 1,
            attempt_dir: format!("d/p/attempts/{}", FencingToken::from_raw(token).key_name()),
            data_dir: None,
            files: vec!["part-0.csv".into()],
            file_sums: Vec::new(),
            rows: 3,
            digest: "sha256:00".into(),
            input_snapshot: serde_json::json!({"upstream": 1}),
            input_snapshot_digest: "sha256:11".into(),
            code_version: "v1".into(),
            code_fingerprint: None,
        }
    }

    fn bytes(rec: &CommitRecord) -> Vec<u8> {
        serde_json::to_vec(rec).unwrap()
    }

    #[test]
    fn round_trips_with_flat_kind() {
        let mut rec = sample(4).into_record(Generation::from_raw(2));
        rec.kind = CommitKind::Rollback {
            from_generation: Generation::FIRST,
        };
        let json: serde_json::Value = serde_json::to_value(&rec).unwrap();
        assert_eq!(json["kind"], "rollback");
        assert_eq!(json["from_generation"], 1);
        assert_eq!(json["token"], 4);
        let back = parse_record("k", &bytes(&rec), rec.generation, "d", "p", "d/p");
        assert_eq!(back.unwrap(), rec);
        let publish = serde_json::to_value(sample(1).into_record(Generation::FIRST)).unwrap();
        assert_eq!(publish["kind"], "publish");
        assert!(publish.get("from_generation").is_none());
    }

    fn corrupt_message(result: Result<CommitRecord, StoreError>) -> String {
        match result {
            Err(StoreError::Corrupt { key, message }) => {
                assert_eq!(key, "the/key");
                message
            }
            other => panic!("expected corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_record_names_its_data_directory_only_when_it_moved() {
        let old = sample(3).into_record(Generation::FIRST);
        let json = serde_json::to_value(&old).unwrap();
        assert!(json.get("data_dir").is_none(), "{json}");
        assert_eq!(old.data_key(), "d/p/attempts/00000000000000000003/data");
        assert_eq!(
            old.file_key(0),
            "d/p/attempts/00000000000000000003/data/part-0.csv"
        );
        let mut moved = sample(3);
        moved.data_dir = Some("d/p/data-00000000000000000003".into());
        let moved = moved.into_record(Generation::FIRST);
        assert_eq!(moved.data_key(), "d/p/data-00000000000000000003");
        let back = parse_record("k", &bytes(&moved), moved.generation, "d", "p", "d/p");
        assert_eq!(back.unwrap(), moved);
    }

    #[test]
    fn a_data_dir_of_another_attempt_or_place_is_corrupt() {
        let g = Generation::FIRST;
        for dir in [
            "d/p/data-00000000000000000004",
            "d/q/data-00000000000000000003",
            "d/p/attempts/00000000000000000003/data",
            "d/p/data-00000000000000000003/../../q",
            "d/p/log",
        ] {
            let mut rec = sample(3).into_record(g);
            rec.data_dir = Some(dir.into());
            let msg = corrupt_message(parse_record("the/key", &bytes(&rec), g, "d", "p", "d/p"));
            assert!(msg.contains("data_dir"), "{dir}: {msg}");
        }
    }

    #[test]
    fn rejects_garbage_versions_and_mismatches() {
        let g = Generation::FIRST;
        let parse = |b: &[u8], g| parse_record("the/key", b, g, "d", "p", "d/p");
        corrupt_message(parse(b"{\"format_version\":1,", g));
        let rec = sample(1).into_record(g);
        let mut v = serde_json::to_value(&rec).unwrap();
        v["format_version"] = 2.into();
        let msg = corrupt_message(parse(&serde_json::to_vec(&v).unwrap(), g));
        assert!(msg.contains("format_version 2"), "{msg}");
        let msg = corrupt_message(parse(&bytes(&rec), Generation::from_raw(2)));
        assert!(msg.contains("generation"), "{msg}");
        let mut other = rec.clone();
        other.partition = "q".into();
        corrupt_message(parse(&bytes(&other), g));
        let mut escape = rec.clone();
        escape.attempt_dir = "d/p/attempts/../../../etc".into();
        corrupt_message(parse(&bytes(&escape), g));
        let mut foreign = rec.clone();
        foreign.attempt_dir = "e/q/attempts/00000000000000000001".into();
        corrupt_message(parse(&bytes(&foreign), g));
        let mut file = rec;
        file.files = vec!["/etc/passwd".into()];
        corrupt_message(parse(&bytes(&file), g));
    }
}
