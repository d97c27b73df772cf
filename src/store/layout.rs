//! The warehouse layout: which key holds what.
//!
//! ```text
//! <root>/<dataset>/<partition>/tokens/<token 20-digit>          token allocation records
//! <root>/<dataset>/<partition>/attempts/<token 20-digit>/       one attempt's private staging
//!                                     data/  stdout.log  stderr.log  candidate.json
//! <root>/<dataset>/<partition>/data-<token 20-digit>/            a published attempt's files (local disk)
//! <root>/<dataset>/<partition>/log/<generation 20-digit>.json   commit records, from 1
//! <root>/<dataset>/<partition>/log/<generation>.published-<token>  marker: that record was committed (object stores)
//! <root>/<dataset>/<partition>/tokens/<token>.committed-<generation>  the same, out of log/ (local disk)
//! <root>/_epochs/<epoch 20-digit>                                 an engine's epoch: the floor of its tokens (local disk)
//! ```
//!
//! A Delta table dataset (`table = "delta"`) created since weir keeps its
//! state out of other engines' VACUUM has every partition directory one
//! level down, `<root>/<dataset>/_weir/<partition>/…`
//! ([`table_partition_prefix`]): delta-rs's vacuum skips a path relative to
//! the table root that starts with `_`, Spark's any directory whose name
//! does, and no other directory of weir's passes both tests. A dataset's
//! layout is what its directory shows (`store::partition`'s `layouts`).
//!
//! A Delta table dataset's attempts publish their data
//! one level down, under a Hive-style directory per partition column,
//! `attempts/<token>/<column>=<value>/.../data/` ([`table_publication_key`]),
//! so readers that take partition values from paths (Polars' native Delta
//! scan) see them. The attempt dir (lease, logs, `candidate.json`) is still
//! `attempts/<token>`; a commit record's `attempt_dir` names the directory
//! holding `data/`, and [`attempt_root`] gives its attempt dir back.
//!
//! On a local disk an attempt's audited `data/` is renamed at publish to
//! `data-<token>`, a direct child of the partition directory
//! ([`data_key`]), and its commit record names it (`data_dir`): the fsync
//! that makes the new entry durable is the partition directory's, which
//! also covers `log/`, `tokens/` and `attempts/` the first time, so the
//! published files sit two directory levels fewer from a synced ancestor
//! (BENCHMARKS.md, "The fsync budget"). A record without `data_dir` (one
//! written before, an object store's, a Delta table's) has its files in
//! `attempt_dir/data/`; [`CommitRecord::data_key`] is the one place that
//! tells. A `data-<token>` no record names is an unpublished candidate
//! (killed between the rename and the commit, or refused as stale): gc
//! collects it with its attempt dir.
//!
//! docs/spec/layout.md documents this layout; change both together.
//!
//! [`CommitRecord::data_key`]: crate::store::CommitRecord::data_key

use crate::store::key::{encode_partition, join};
use crate::store::token::{FencingToken, Generation};

/// Directory inside an attempt dir that the task writes its output into and
/// that a commit record's `files` are relative to.
pub const DATA_DIR: &str = "data";
/// The task's captured standard output, inside an attempt dir.
pub const STDOUT_LOG: &str = "stdout.log";
/// The task's captured standard error, inside an attempt dir.
pub const STDERR_LOG: &str = "stderr.log";
/// The audited candidate description, inside an attempt dir.
pub const CANDIDATE_FILE: &str = "candidate.json";

/// The attempt's lease, inside an attempt dir.
pub const LEASE_FILE: &str = "lease.json";

const TOKENS: &str = "tokens";
const ATTEMPTS: &str = "attempts";
const LOG: &str = "log";
const CLAIMS: &str = "claims";
/// Prefix of a published attempt's data directory in the partition
/// directory: no other name there (`tokens`, `attempts`, `log`, `claims`,
/// `log-checkpoint`) starts with it.
const PUBLISHED_DATA: &str = "data-";
/// The directories every partition has, made durable together.
pub(crate) const SKELETON: [&str; 3] = [TOKENS, ATTEMPTS, LOG];
const RECORD_SUFFIX: &str = ".json";

/// `<dataset>/<partition>`, the partition key encoded as one segment.
pub(crate) fn partition_prefix(dataset: &str, partition: &str) -> String {
    join(dataset, &encode_partition(partition))
}

/// The directory of a Delta table dataset (one created by a weir that
/// keeps its state out of VACUUM's reach) that holds every partition
/// directory: a top-level name starting with `_`, which delta-rs's vacuum
/// (it tests the first character of the path relative to the table root)
/// and Spark's (it tests each directory's name) both skip.
pub use crate::store::key::TABLE_STATE_DIR;

/// `<dataset>/_weir/<partition>`: where a partition of a Delta table
/// dataset in the `_weir` layout keeps everything ([`TABLE_STATE_DIR`]).
pub(crate) fn table_partition_prefix(dataset: &str, partition: &str) -> String {
    join(
        &join(dataset, TABLE_STATE_DIR),
        &encode_partition(partition),
    )
}

pub(crate) fn tokens_prefix(partition: &str) -> String {
    join(partition, TOKENS)
}

pub(crate) fn token_key(partition: &str, token: FencingToken) -> String {
    join(&tokens_prefix(partition), &token.key_name())
}

pub(crate) fn claim_key(partition: &str, token: FencingToken) -> String {
    join(&join(partition, CLAIMS), &token.key_name())
}

pub(crate) fn attempts_prefix(partition: &str) -> String {
    join(partition, ATTEMPTS)
}

pub(crate) fn attempt_key(partition: &str, token: FencingToken) -> String {
    join(&attempts_prefix(partition), &token.key_name())
}

/// Where a Delta table dataset's attempt `attempt_key` publishes: one
/// `<column>=<value>` segment per partition column below it, each side
/// encoded as a partition key is ([`encode_partition`]: Hive's and
/// Polars' percent-decoding gives the value back), the way Spark and
/// delta-rs lay out a partitioned table.
pub fn table_publication_key(attempt_key: &str, columns: &[String], values: &[String]) -> String {
    columns
        .iter()
        .zip(values)
        .fold(attempt_key.to_owned(), |key, (c, v)| {
            join(
                &key,
                &format!("{}={}", encode_partition(c), encode_partition(v)),
            )
        })
}

/// The attempt dir (`<dataset>/<partition>/attempts/<token>`, or
/// `<dataset>/_weir/<partition>/attempts/<token>`) of a commit record's
/// `attempt_dir`, which for a Delta table dataset is a directory below it
/// ([`table_publication_key`]); the key itself for anything shorter. The
/// layout is told by where `attempts` stands, so a partition named `_weir`
/// or `attempts` is not mistaken for the other.
pub fn attempt_root(attempt_dir: &str) -> &str {
    let segments: Vec<&str> = attempt_dir.splitn(7, '/').collect();
    let depth = match segments.as_slice() {
        [_, TABLE_STATE_DIR, _, ATTEMPTS, _, ..] => 5,
        _ => 4,
    };
    match attempt_dir.match_indices('/').nth(depth - 1) {
        Some((end, _)) => &attempt_dir[..end],
        None => attempt_dir,
    }
}

/// Of a Delta table file's path relative to its dataset (decoded), written
/// by weir: the partition directory relative to the dataset (`<p>` or
/// `_weir/<p>`), its name (`<p>`, encoded), and the token of the attempt
/// that wrote it (`…/attempts/<token>/…`, or a local disk's
/// `…/data-<token>/…`); `None` for another writer's file.
pub(crate) fn table_file_attempt(path: &str) -> Option<(&str, &str, FencingToken)> {
    let below = |rest: &str| -> Option<(usize, FencingToken)> {
        let parts: Vec<&str> = rest.splitn(4, '/').collect();
        match parts.as_slice() {
            [name, ATTEMPTS, token, _] => Some((name.len(), FencingToken::parse_key_name(token)?)),
            [name, dir, _, ..] => Some((name.len(), parse_data_name(dir)?)),
            _ => None,
        }
    };
    let state = format!("{TABLE_STATE_DIR}/");
    if let Some(rest) = path.strip_prefix(&state) {
        if let Some((len, token)) = below(rest) {
            return Some((&path[..state.len() + len], &rest[..len], token));
        }
    }
    let (len, token) = below(path)?;
    Some((&path[..len], &path[..len], token))
}

/// Where attempt `token`'s audited files are published on a local disk:
/// `<partition>/data-<token 20-digit>`.
pub(crate) fn data_key(partition: &str, token: FencingToken) -> String {
    join(partition, &data_name(token))
}

/// The name of attempt `token`'s published data directory.
pub(crate) fn data_name(token: FencingToken) -> String {
    format!("{PUBLISHED_DATA}{}", token.key_name())
}

/// The token a partition directory's entry names if it is a published
/// data directory (`data-<token>`); other names are not.
pub(crate) fn parse_data_name(name: &str) -> Option<FencingToken> {
    FencingToken::parse_key_name(name.strip_prefix(PUBLISHED_DATA)?)
}

/// An attempt's lease, inside its attempt dir.
pub(crate) fn lease_key(partition: &str, token: FencingToken) -> String {
    join(&attempt_key(partition, token), LEASE_FILE)
}

pub(crate) fn log_prefix(partition: &str) -> String {
    join(partition, LOG)
}

/// Key of a partition's log checkpoint: a generation known to be in the
/// log, from which a remote reader lists (object stores only).
pub(crate) fn log_checkpoint_key(partition: &str) -> String {
    format!("{partition}/log-checkpoint")
}

pub(crate) fn log_key(partition: &str, generation: Generation) -> String {
    join(&log_prefix(partition), &log_name(generation))
}

/// The name of a generation's record under `log/`.
pub(crate) fn log_name(generation: Generation) -> String {
    format!("{}{RECORD_SUFFIX}", generation.key_name())
}

/// The name of the marker a committer leaves beside generation `g`'s
/// record once it is committed, in an object store (a local disk's commits
/// leave [`committed_key`] alone; a warehouse written before may hold
/// both), naming its token: `<g>.published-<token>`,
/// then `suffix` (empty, or what `store::summary` says of the record). A
/// listing of `log/` shows it with the records, so a reader notices a
/// record that is gone at no extra request (see
/// [`PartitionStore::latest`]), and knows from the summary whether the
/// instance is current without reading it.
///
/// [`PartitionStore::latest`]: crate::store::PartitionStore::latest
pub(crate) fn published_name(generation: Generation, token: FencingToken, suffix: &str) -> String {
    format!(
        "{}{PUBLISHED_INFIX}{}{suffix}",
        generation.key_name(),
        token.key_name(),
    )
}

pub(crate) fn published_key(
    prefix: &str,
    generation: Generation,
    token: FencingToken,
    suffix: &str,
) -> String {
    join(
        &log_prefix(prefix),
        &published_name(generation, token, suffix),
    )
}

/// The generation and token a marker name stands for, and what its name
/// goes on with (empty, or starting with `.`).
pub(crate) fn parse_published_name(name: &str) -> Option<(Generation, FencingToken, &str)> {
    let (g, rest) = name.split_once(PUBLISHED_INFIX)?;
    let g = Generation::parse_key_name(g)?;
    let width = FencingToken::from_raw(0).key_name().len();
    let (t, suffix) = rest.split_at_checked(width)?;
    let t = FencingToken::parse_key_name(t)?;
    (suffix.is_empty() || suffix.starts_with('.')).then_some((g, t, suffix))
}

const PUBLISHED_INFIX: &str = ".published-";

/// The witness of a commit on a local disk, beside its token's record in
/// `tokens/`: `<token>.committed-<g>`. Out of `log/`, so removing a
/// generation's record, or its record and an older layout's marker
/// together (`rm log/<g>*`), still leaves a name that says generation `g`
/// was committed, in the listing every token allocation and every look at
/// the log reads anyway.
pub(crate) fn committed_key(prefix: &str, token: FencingToken, generation: Generation) -> String {
    join(
        &tokens_prefix(prefix),
        &format!(
            "{}{COMMITTED_INFIX}{}",
            token.key_name(),
            generation.key_name()
        ),
    )
}

/// The token and generation a name under `tokens/` witnesses committed.
pub(crate) fn parse_committed_name(name: &str) -> Option<(FencingToken, Generation)> {
    let (t, g) = name.split_once(COMMITTED_INFIX)?;
    Some((
        FencingToken::parse_key_name(t)?,
        Generation::parse_key_name(g)?,
    ))
}

const COMMITTED_INFIX: &str = ".committed-";

/// The generation a log entry name stands for; other names (litter, hand
/// edits, publication markers) are not records.
pub(crate) fn parse_log_name(name: &str) -> Option<Generation> {
    Generation::parse_key_name(name.strip_suffix(RECORD_SUFFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_the_documented_layout() {
        let p = partition_prefix("sales", "2024-01-01");
        assert_eq!(
            token_key(&p, FencingToken::from_raw(3)),
            "sales/2024-01-01/tokens/00000000000000000003"
        );
        assert_eq!(
            attempt_key(&p, FencingToken::from_raw(3)),
            "sales/2024-01-01/attempts/00000000000000000003"
        );
        assert_eq!(
            log_key(&p, Generation::FIRST),
            "sales/2024-01-01/log/00000000000000000001.json"
        );
        let t = FencingToken::from_raw(3);
        assert_eq!(
            data_key(&p, t),
            "sales/2024-01-01/data-00000000000000000003"
        );
        assert_eq!(parse_data_name(&data_name(t)), Some(t));
        for other in [
            TOKENS,
            ATTEMPTS,
            LOG,
            CLAIMS,
            "log-checkpoint",
            "data-3",
            "data",
        ] {
            assert_eq!(parse_data_name(other), None, "{other}");
        }
    }

    #[test]
    fn table_publications_are_hive_directories_below_the_attempt_dir() {
        let p = partition_prefix("sales", "2024-01-01T00:00|eu");
        let attempt = attempt_key(&p, FencingToken::from_raw(3));
        let columns = ["hour".to_owned(), "region".to_owned()];
        let values = ["2024-01-01T00:00".to_owned(), "eu".to_owned()];
        let key = table_publication_key(&attempt, &columns, &values);
        assert_eq!(
            key,
            "sales/2024-01-01T00%3A00%7Ceu/attempts/00000000000000000003/hour=2024-01-01T00%3A00/region=eu"
        );
        assert_eq!(attempt_root(&key), attempt);
        assert_eq!(attempt_root(&attempt), attempt);
        assert_eq!(attempt_root("d/p"), "d/p");
    }

    #[test]
    fn table_files_name_their_partition_directory_and_token() {
        let t = FencingToken::from_raw(7);
        assert_eq!(
            table_file_attempt(
                "_weir/north/attempts/00000000000000000007/region=north/data/x.parquet"
            ),
            Some(("_weir/north", "north", t))
        );
        assert_eq!(
            table_file_attempt("north/attempts/00000000000000000007/data/x.parquet"),
            Some(("north", "north", t))
        );
        assert_eq!(
            table_file_attempt("north/data-00000000000000000007/x.parquet"),
            Some(("north", "north", t))
        );
        assert_eq!(
            table_file_attempt("_weir/attempts/00000000000000000007/data/x.parquet"),
            Some(("_weir", "_weir", t))
        );
        assert_eq!(table_file_attempt("part-0001.parquet"), None);
        assert_eq!(table_file_attempt("region=north/part-0001.parquet"), None);
    }

    #[test]
    fn table_state_partitions_sit_under_one_top_level_underscore_directory() {
        let p = table_partition_prefix("sales", "2024-01-01T00:00|eu");
        assert_eq!(p, "sales/_weir/2024-01-01T00%3A00%7Ceu");
        let attempt = attempt_key(&p, FencingToken::from_raw(3));
        let key = table_publication_key(&attempt, &["hour".to_owned()], &["x".to_owned()]);
        assert_eq!(
            key,
            "sales/_weir/2024-01-01T00%3A00%7Ceu/attempts/00000000000000000003/hour=x"
        );
        assert_eq!(attempt_root(&key), attempt);
        assert_eq!(attempt_root(&attempt), attempt);
        // A partition named like the layout's directories is not misread.
        let old = attempt_key(&partition_prefix("d", "_weir"), FencingToken::from_raw(3));
        assert_eq!(attempt_root(&format!("{old}/day=x")), old);
        let new = attempt_key(
            &table_partition_prefix("d", "attempts"),
            FencingToken::from_raw(3),
        );
        assert_eq!(attempt_root(&format!("{new}/day=x")), new);
    }

    #[test]
    fn published_markers_parse_back_and_are_not_records() {
        let (g, t) = (Generation::from_raw(3), FencingToken::from_raw(7));
        let name = published_name(g, t, "");
        assert_eq!(name, "00000000000000000003.published-00000000000000000007");
        assert_eq!(parse_published_name(&name), Some((g, t, "")));
        let with = published_name(g, t, ".more");
        assert_eq!(parse_published_name(&with), Some((g, t, ".more")));
        assert_eq!(parse_published_name(&format!("{name}7")), None);
        assert_eq!(parse_log_name(&name), None);
        assert_eq!(parse_published_name("00000000000000000003.json"), None);
        // A listing after a record's name still shows its marker.
        assert!(name > log_name(g) && name < log_name(g.next()));
    }

    #[test]
    fn log_names_parse_back() {
        assert_eq!(
            parse_log_name("00000000000000000012.json"),
            Some(Generation::from_raw(12))
        );
        assert_eq!(parse_log_name("00000000000000000012"), None);
        assert_eq!(parse_log_name("12.json"), None);
    }
}
