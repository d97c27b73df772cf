//! Serde shadow types: the manifest exactly as written, before any meaning is
//! checked. They double as the source of `schemas/pipeline.schema.json`.
//!
//! No `toml::Spanned` here: spans come from the span-preserving document
//! (`locate.rs`), which keeps these types plain enough for schemars and lets
//! each section entry deserialize on its own, so one bad task does not hide
//! the errors of the next.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use super::de::default_format;
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
    /// Executors by name (`local` is implicit).
    #[serde(default)]
    pub executors: IndexMap<String, RawExecutor>,
    /// Tasks by name.
    pub tasks: IndexMap<String, RawTask>,
    /// Declared backfills by name.
    #[serde(default)]
    pub backfills: IndexMap<String, RawBackfill>,
    /// Where OpenLineage run events go.
    pub lineage: Option<RawLineage>,
    /// Notification targets by name.
    #[serde(default)]
    pub notify: IndexMap<String, RawNotifyTarget>,
}

/// `[lineage]`: OpenLineage run events, to an HTTP endpoint or a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLineage {
    /// An `http://` or `https://` endpoint taking POSTed RunEvents, e.g.
    /// Marquez's `http://localhost:5000/api/v1/lineage`.
    pub url: Option<String>,
    /// HTTP headers sent with each event: a literal value, `"env:NAME"` or
    /// `"file:PATH"` (secrets, never written down).
    #[serde(default)]
    pub headers: IndexMap<String, String>,
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
    #[schemars(length(min = 1))]
    pub name: String,
    /// Version of the pipeline's logic, stamped on every publication.
    #[schemars(length(min = 1))]
    pub code_version: String,
    /// Warehouse: a directory relative to the manifest file, or `s3://bucket/prefix`.
    pub warehouse: String,
}

pub use super::partitions::{PartitionKind, RawPartitionScheme};

/// `[pools.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    /// How many attempts may run in this pool at once, across every engine
    /// sharing the warehouse.
    #[schemars(range(min = 1))]
    pub slots: i64,
    /// At most COUNT launches per DURATION across engines, e.g. `"60/1m"`
    /// (for rate-limited sources).
    #[schemars(pattern(r"^[1-9][0-9]*/([0-9]+(ms|s|m|h|d))+$"))]
    pub rate: Option<String>,
}

/// `[retry.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetryClass {
    /// Attempts in all, the first included.
    #[schemars(range(min = 1))]
    pub max_attempts: i64,
    /// Delay between attempts.
    pub backoff: Option<RawBackoff>,
    /// What a failure of this class gets: `retry`, `quarantine` or `hold`.
    #[schemars(extend("enum" = ["retry", "quarantine", "hold"]))]
    pub on_failure: Option<String>,
    /// What happens when attempts run out: `quarantine` or `hold`.
    #[schemars(extend("enum" = ["quarantine", "hold"]))]
    pub on_exhausted: Option<String>,
}

/// `backoff = { ... }` of a retry class.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBackoff {
    /// First delay, e.g. "1s".
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub initial: Option<String>,
    /// Cap on any delay, e.g. "1m".
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub max: Option<String>,
    /// Growth factor per attempt (1 to 100).
    #[schemars(range(min = 1, max = 100))]
    pub multiplier: Option<f64>,
    /// `none`, `full` or `equal`.
    #[schemars(extend("enum" = ["none", "full", "equal"]))]
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
    /// When a partition may be read (a sensor): until then its instances
    /// are WAITING. Without it, once its files exist.
    pub ready: Option<RawReady>,
}

pub use super::readiness::RawReady;

pub use super::executors::{ExecutorKind, RawExecutor, RawResources};
pub use super::gates::RawGate;
pub use super::tasks::{RawBatch, RawInput, RawOutput, RawTask};

pub use super::backfills::RawBackfill;
pub use super::notify::RawNotifyTarget;
