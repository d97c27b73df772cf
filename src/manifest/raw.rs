//! Serde shadow types: the manifest exactly as written, before any meaning is
//! checked. They double as the source of `schemas/pipeline.schema.json`.
//!
//! No `toml::Spanned` here: spans come from the span-preserving document
//! (`locate.rs`), which keeps these types plain enough for schemars and lets
//! each section entry deserialize on its own, so one bad task does not hide
//! the errors of the next.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use crate::audit::Format;

/// A whole manifest. Only used for the JSON Schema: loading deserializes each
/// section entry separately (see `Manifest::parse`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "weir pipeline manifest")]
pub struct RawManifest {
    /// The pipeline's identity and where it publishes.
    pub pipeline: RawPipeline,
    /// Partition schemes by name.
    #[serde(default)]
    pub partitions: IndexMap<String, RawPartitionScheme>,
    /// Resource pools by name.
    #[serde(default)]
    pub pools: IndexMap<String, RawPool>,
    /// Retry classes by name.
    #[serde(default)]
    pub retry: IndexMap<String, RawRetryClass>,
    /// External input datasets by name.
    #[serde(default)]
    pub datasets: IndexMap<String, RawDataset>,
    /// Tasks by name.
    pub tasks: IndexMap<String, RawTask>,
    /// Declared backfills by name.
    #[serde(default)]
    pub backfills: IndexMap<String, RawBackfill>,
    /// Where OpenLineage run events go.
    pub lineage: Option<RawLineage>,
}

/// `[lineage]`: OpenLineage run events, to an HTTP endpoint or a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLineage {
    /// An `http://host:port/path` endpoint taking POSTed RunEvents, e.g.
    /// Marquez's `http://localhost:5000/api/v1/lineage`.
    pub url: Option<String>,
    /// A JSON Lines file (relative to the manifest) the events are appended to.
    pub file: Option<String>,
    /// The namespace of weir's jobs and datasets (default: the pipeline name).
    pub namespace: Option<String>,
}

/// `[pipeline]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    /// The pipeline's name.
    pub name: String,
    /// Version of the pipeline's logic, stamped on every publication.
    pub code_version: String,
    /// Warehouse directory, relative to the manifest file.
    pub warehouse: String,
}

/// `[partitions.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPartitionScheme {
    /// `daily` (a date range) or `static` (a list of keys).
    pub kind: PartitionKind,
    /// First day (daily), inclusive, ISO date.
    #[serde(default, deserialize_with = "date_like")]
    #[schemars(with = "Option<String>")]
    pub start: Option<String>,
    /// Last day (daily), inclusive; omitted = up to the latest complete day.
    #[serde(default, deserialize_with = "date_like")]
    #[schemars(with = "Option<String>")]
    pub end: Option<String>,
    /// The keys (static).
    pub keys: Option<Vec<String>>,
}

/// The kinds of partition scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PartitionKind {
    /// One partition per calendar day.
    Daily,
    /// A fixed list of keys.
    Static,
}

/// `[pools.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    /// How many attempts may run in this pool at once.
    pub slots: i64,
}

/// `[retry.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetryClass {
    /// Attempts in all, the first included.
    pub max_attempts: i64,
    /// Delay between attempts.
    pub backoff: Option<RawBackoff>,
    /// What a failure of this class gets: `retry`, `quarantine` or `hold`.
    pub on_failure: Option<String>,
    /// What happens when attempts run out: `quarantine` or `hold`.
    pub on_exhausted: Option<String>,
}

/// `backoff = { ... }` of a retry class.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBackoff {
    /// First delay, e.g. "1s".
    pub initial: Option<String>,
    /// Cap on any delay, e.g. "1m".
    pub max: Option<String>,
    /// Growth factor per attempt (at least 1).
    pub multiplier: Option<f64>,
    /// `none`, `full` or `equal`.
    pub jitter: Option<String>,
}

/// `[datasets.NAME]`: an external input.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDataset {
    /// Path template relative to the manifest, with `{partition}`.
    pub path: String,
    /// `csv` or `jsonl`.
    #[serde(default = "default_format")]
    pub format: Format,
    /// File (relative to the manifest, may use `{partition}`) holding the
    /// source's committed position, e.g. a sequence number; pinned in the
    /// input snapshot and passed to tasks as `WEIR_WATERMARK_<NAME>`.
    pub watermark: Option<String>,
}

/// `[tasks.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    /// Program and arguments; run in the manifest's directory.
    pub command: Vec<String>,
    /// Datasets read: external datasets or other tasks' outputs.
    #[serde(default)]
    pub inputs: Vec<String>,
    /// The dataset this task publishes.
    pub output: RawOutput,
    /// Tasks that must publish the same partition first.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Partition scheme; may be omitted when the manifest has exactly one.
    pub partitioned_by: Option<String>,
    /// Pool the attempts run in (default `default`).
    pub pool: Option<String>,
    /// Wall-clock limit of one attempt (default "1h").
    pub timeout: Option<String>,
    /// Lease renewal interval (default "10s").
    pub heartbeat: Option<String>,
    /// Retry class (default `default`).
    pub retry: Option<String>,
    /// Exit code → `transient`, `deterministic`, `operator` or a retry class.
    #[serde(default)]
    pub exit_codes: IndexMap<String, String>,
    /// What a timeout counts as (default `transient`).
    pub on_timeout: Option<String>,
    /// Quality gates run on every candidate before it may publish.
    #[serde(default)]
    pub gates: Vec<RawGate>,
    /// Planning estimate of one attempt (default "1m").
    pub expected_duration: Option<String>,
    /// Each partition needs this task's previous partition published first.
    #[serde(default)]
    pub depends_on_past: bool,
    /// Publish within this long after the partition's interval ends.
    pub sla: Option<String>,
}

/// `output = { ... }` of a task.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOutput {
    /// Dataset name.
    pub dataset: String,
    /// `csv` or `jsonl`.
    #[serde(default = "default_format")]
    pub format: Format,
    /// Columns that make a row unique.
    pub grain: Vec<String>,
}

/// One gate. Kept flat (not a tagged enum) so that serde reports unknown keys
/// instead of guessing a variant; `validate` checks which keys each check takes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    /// `row_count`, `unique`, `not_null`, `accepted_values` or `reconcile`.
    pub check: String,
    /// row_count: fewest rows.
    pub min: Option<i64>,
    /// row_count: most rows.
    pub max: Option<i64>,
    /// unique, not_null: the columns.
    pub columns: Option<Vec<String>>,
    /// accepted_values, reconcile: the output column.
    pub column: Option<String>,
    /// accepted_values: the allowed values.
    pub values: Option<Vec<String>>,
    /// reconcile: `sum` or `count`.
    pub aggregate: Option<String>,
    /// reconcile: the input to compare with.
    pub input: Option<String>,
    /// reconcile: the input's column.
    pub input_column: Option<String>,
    /// reconcile: equality filter on input rows.
    #[serde(rename = "where")]
    pub filter: Option<IndexMap<String, String>>,
}

/// `[backfills.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBackfill {
    /// First partition, inclusive.
    #[serde(deserialize_with = "date_like_required")]
    #[schemars(with = "String")]
    pub from: String,
    /// Last partition, inclusive.
    #[serde(deserialize_with = "date_like_required")]
    #[schemars(with = "String")]
    pub to: String,
    /// Pool the backfill's attempts run in.
    pub pool: String,
    /// Tasks to rebuild (default: all).
    pub tasks: Option<Vec<String>>,
    /// Why: recorded with the run.
    pub reason: String,
}

fn default_format() -> Format {
    Format::Csv
}

/// Dates may be written as strings or as bare TOML dates.
fn date_like<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    date_like_required(d).map(Some)
}

fn date_like_required<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::de::Error;
    match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Ok(s),
        toml::Value::Datetime(dt) => Ok(dt.to_string()),
        other => Err(D::Error::custom(format!(
            "wrong type: expected a date such as \"2026-09-20\", found {}",
            other.type_str()
        ))),
    }
}
