//! `[tasks.NAME]` as written: the task, its output and its inputs, before
//! validation.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

use crate::audit::Format;
use crate::manifest::de::default_format;
use crate::manifest::gates::RawGate;

/// `[tasks.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    /// Program and arguments; run in the manifest's directory.
    pub command: Vec<String>,
    /// Datasets read: external datasets or other tasks' outputs; a table
    /// `{ dataset = "sales", offset = -1 }` or `{ dataset = "sales", window
    /// = [-6, 0] }` shifts the time dimension's mapping.
    #[serde(default)]
    pub inputs: Vec<RawInput>,
    /// The dataset this task publishes.
    pub output: RawOutput,
    /// Tasks that must publish the same partition first.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Partition schemes: one name, or a list of names whose product
    /// partitions the task (`[]` = unpartitioned); may be omitted when the
    /// manifest has exactly one scheme.
    #[serde(default, deserialize_with = "string_or_list")]
    #[schemars(with = "Option<StringOrList>")]
    pub partitioned_by: Option<Vec<String>>,
    /// Pool the attempts run in (default `default`).
    pub pool: Option<String>,
    /// Executor the attempts run on (default `local`).
    pub executor: Option<String>,
    /// What each attempt asks the executor for: `{ cpus = 4, memory = "8G",
    /// time = "2h", gpus = 1 }` (Slurm: `--cpus-per-task`, `--mem`,
    /// `--time`, `--gpus`).
    pub resources: Option<crate::manifest::executors::RawResources>,
    /// Wall-clock limit of one attempt (default "1h").
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub timeout: Option<String>,
    /// Lease renewal interval (default "10s").
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub heartbeat: Option<String>,
    /// Retry class (default `default`).
    pub retry: Option<String>,
    /// Exit code → `transient`, `deterministic`, `operator` or a retry class;
    /// a scheduler's end state is a key too: `out_of_memory`, `node_fail`,
    /// `preempted`, `cancelled`.
    #[serde(default)]
    #[schemars(extend("propertyNames" = { "pattern": "^[0-9]+$" }))]
    pub exit_codes: IndexMap<String, String>,
    /// What a timeout counts as (default `transient`).
    pub on_timeout: Option<String>,
    /// Quality gates run on every candidate before it may publish.
    #[serde(default)]
    pub gates: Vec<RawGate>,
    /// Planning estimate of one attempt (default "1m").
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub expected_duration: Option<String>,
    /// Each partition needs this task's previous partition published first.
    #[serde(default)]
    pub depends_on_past: bool,
    /// A time-partitioned task's command run once for up to
    /// `max_partitions` consecutive partitions of a range: `{ max_partitions
    /// = 7 }`. Each partition is still audited and published on its own.
    pub batch: Option<RawBatch>,
    /// Publish within this long after the partition's interval ends.
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub sla: Option<String>,
    /// Target share of partitions published within `sla` (`weir slo`
    /// measures it and the error budget left), above 0 and below 1.
    #[schemars(extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub slo: Option<f64>,
    /// `weir serve`: a time-partitioned task's partition is due this long
    /// after its period ends (default "0s").
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub delay: Option<String>,
    /// `weir serve`: how long a due partition whose inputs are not ready
    /// keeps waiting (from when it became due) before it is given up as
    /// MISSED (default: `sla` when set, else one period and at least an
    /// hour).
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub wait: Option<String>,
    /// `weir serve`: what a `schedule` firing does: `"always"` (default)
    /// runs the command at every firing, a new generation each time;
    /// `"on_change"` runs it only when its inputs or code changed.
    pub rerun: Option<RawRerun>,
    /// `weir serve`: a static or unpartitioned task also runs on this
    /// five-field cron expression ("0 6 * * *"), read in the timezone of
    /// the manifest's first time scheme (UTC without one).
    pub schedule: Option<String>,
    /// This task's own code version (default: the pipeline's `code_version`),
    /// stamped on its publications and part of their currency test.
    #[schemars(length(min = 1))]
    pub code_version: Option<String>,
    /// Files and directories (relative to the manifest) whose content is the
    /// task's code: an edit makes its publications STALE and reruns them.
    #[serde(default)]
    pub code: Vec<String>,
    /// The task's environment: `{ pass = ["PATH", "HOME"], set = { LEVEL =
    /// "info", TOKEN = "env:API_TOKEN" } }` gives it exactly those and weir's
    /// `WEIR_*` variables. Without it: the engine's environment minus the
    /// credentials of an S3 warehouse's store.
    pub env: Option<crate::manifest::task_env::RawTaskEnv>,
}

/// `batch = { ... }` of a task.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBatch {
    /// The most partitions one attempt's command runs for (1 or more).
    #[schemars(range(min = 1))]
    pub max_partitions: i64,
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
    /// `delta`: also publish the dataset as a Delta Lake table (Parquet
    /// outputs only).
    #[schemars(extend("enum" = ["delta"]))]
    pub table: Option<String>,
    /// With `table = "delta"`: what a generation whose columns differ from
    /// the table's is. `fixed` (the default): a gate failure, nothing is
    /// published; `additive`: new nullable columns are added to the table's
    /// schema in the generation's commit (a dropped or retyped column is
    /// still a gate failure).
    #[schemars(extend("enum" = ["fixed", "additive"]))]
    pub schema: Option<String>,
    /// With `table = "delta"`: how long the files of a replaced version stay
    /// readable by time travel (Delta's `delta.deletedFileRetentionDuration`,
    /// default one week); `weir gc` deletes them only after it.
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h|d))+$"))]
    pub table_retention: Option<String>,
}

/// `partitioned_by` as the schema shows it: a name or a list of names.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum StringOrList {
    One(String),
    Many(Vec<String>),
}

/// A string is a one-dimension list.
fn string_or_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    use serde::de::Error;
    match toml::Value::deserialize(d)? {
        toml::Value::String(s) => Ok(Some(vec![s])),
        toml::Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                toml::Value::String(s) => Ok(s),
                other => Err(D::Error::custom(format!(
                    "wrong type: expected a scheme name, found {}",
                    other.type_str()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(D::Error::custom(format!(
            "wrong type: expected a scheme name or a list of names, found {}",
            other.type_str()
        ))),
    }
}

/// One entry of `inputs`: a dataset name, or a table with an override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawInput {
    /// Dataset name.
    pub dataset: String,
    /// `offset = k`: the k-th period from the mapped one (-1 = previous).
    pub offset: Option<i64>,
    /// `window = [lo, hi]`: periods lo..=hi relative to the mapped ones.
    pub window: Option<Vec<i64>>,
    /// Written as a table (spans then point inside it).
    pub table: bool,
}

/// `inputs` entries as the schema shows them.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum RawInputSchema {
    /// A dataset name.
    Name(String),
    /// A dataset with an override of the time dimension's mapping.
    Shifted {
        /// Dataset name.
        dataset: String,
        /// The k-th period from the mapped one (-1 = the previous period).
        offset: Option<i64>,
        /// A trailing or leading window `[lo, hi]`, inclusive, e.g. `[-6, 0]`.
        window: Option<[i64; 2]>,
    },
}

impl JsonSchema for RawInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RawInput".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        RawInputSchema::json_schema(generator)
    }
}

impl<'de> Deserialize<'de> for RawInput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawInput, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            dataset: String,
            offset: Option<i64>,
            window: Option<Vec<i64>>,
        }
        match toml::Value::deserialize(d)? {
            toml::Value::String(dataset) => Ok(RawInput {
                dataset,
                offset: None,
                window: None,
                table: false,
            }),
            v @ toml::Value::Table(_) => {
                let t = Table::deserialize(v).map_err(D::Error::custom)?;
                Ok(RawInput {
                    dataset: t.dataset,
                    offset: t.offset,
                    window: t.window,
                    table: true,
                })
            }
            other => Err(D::Error::custom(format!(
                "wrong type: expected a dataset name or a table such as {{ dataset = \"sales\", offset = -1 }}, found {}",
                other.type_str()
            ))),
        }
    }
}

/// `rerun`: what a schedule's firing does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RawRerun {
    /// Run the command at every firing.
    Always,
    /// Run it only when inputs or code changed.
    OnChange,
}
