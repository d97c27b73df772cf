//! The validated, owned model. Only `validate` builds it, so everything here
//! has already been checked: names resolve, durations parse, the DAG is
//! acyclic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Serialize;

use super::task_env::EnvSpec;
use crate::audit::{Format, Gate};

/// A validated pipeline manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// Its directory: tasks run here and relative paths start here.
    pub dir: PathBuf,
    /// `[pipeline]`.
    pub pipeline: Pipeline,
    /// Partition schemes in declaration order.
    pub partitions: IndexMap<String, PartitionScheme>,
    /// Pools in declaration order, the implicit `default` pool included.
    pub pools: IndexMap<String, Pool>,
    /// Retry classes, the implicit `default` class included.
    pub retry: IndexMap<String, RetryClass>,
    /// External datasets.
    pub datasets: IndexMap<String, ExternalDataset>,
    /// Executors, the implicit `local` one included.
    pub executors: IndexMap<String, super::Executor>,
    /// Tasks in declaration order.
    pub tasks: IndexMap<String, Task>,
    /// Declared backfills.
    pub backfills: IndexMap<String, Backfill>,
    /// `[lineage]`, if any.
    pub lineage: Option<Lineage>,
    /// `[notify.NAME]` targets in declaration order.
    pub notify: IndexMap<String, super::NotifyTarget>,
    /// What is valid but probably not meant (a mapping across timezones),
    /// as warning diagnostics located in the manifest.
    pub warnings: Vec<super::ManifestError>,
}

/// `[lineage]`: where OpenLineage run events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The sink.
    pub sink: LineageSink,
    /// The namespace of jobs and datasets.
    pub namespace: String,
}

/// Where lineage events are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineageSink {
    /// POSTed to an `http://` or `https://` endpoint.
    Http(super::HttpEndpoint),
    /// Appended to a JSON Lines file (absolute).
    File(PathBuf),
}

/// `[pipeline]`.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// Name.
    pub name: String,
    /// Stamped on every publication.
    pub code_version: String,
    /// Absolute (manifest-relative resolved) warehouse directory; for an
    /// S3 warehouse, the local directory where attempts stage their files
    /// and inputs are materialised ([`staging_dir`]).
    pub warehouse: PathBuf,
    /// `s3://bucket/prefix` when the warehouse is in object storage.
    pub remote: Option<String>,
}

impl From<&Pipeline> for crate::store::Location {
    fn from(pipeline: &Pipeline) -> Self {
        match &pipeline.remote {
            Some(url) => crate::store::Location::Remote {
                url: url.clone(),
                staging: pipeline.warehouse.clone(),
            },
            None => crate::store::Location::Dir(pipeline.warehouse.clone()),
        }
    }
}

impl Pipeline {
    /// Where the warehouse is, as a person would name it: the URL or the
    /// directory.
    pub fn location(&self) -> String {
        self.remote
            .clone()
            .unwrap_or_else(|| self.warehouse.display().to_string())
    }

    /// Points the pipeline at another warehouse (`--warehouse`): a directory
    /// (relative to `base`) or an `s3://` URL, staged under `staging`
    /// ([`staging_dir`]).
    pub fn set_warehouse(
        &mut self,
        location: &str,
        base: &Path,
        staging: Option<&Path>,
    ) -> Result<(), WarehouseError> {
        if is_s3_url(location) {
            self.warehouse = staging_dir(location, staging);
            self.remote = Some(location.to_string());
        } else if location.contains("://") || location.is_empty() {
            return Err(WarehouseError {
                location: location.to_string(),
            });
        } else {
            self.warehouse = base.join(location);
            self.remote = None;
        }
        Ok(())
    }
}

/// A `--warehouse` that is neither a directory nor an S3 URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{location}` is neither a directory nor an s3://bucket/prefix URL")]
pub struct WarehouseError {
    /// The location as given.
    pub location: String,
}

/// Whether `location` is an `s3://bucket[/prefix]` URL (with a bucket).
pub fn is_s3_url(location: &str) -> bool {
    location
        .strip_prefix("s3://")
        .and_then(|rest| rest.split('/').next())
        .is_some_and(|bucket| !bucket.is_empty())
}

/// The local staging directory of an S3 warehouse:
/// `<staging>/<endpoint>/<bucket>/<prefix>` (`staging` is `WEIR_STAGING`,
/// read at the edge), else
/// `$XDG_CACHE_HOME/weir/staging/<endpoint>/<bucket>/<prefix>` (or
/// `~/.cache/...`), so that two warehouses never share attempt directories:
/// one bucket name on two servers (prod and dev, a local test server beside
/// the real one) is two warehouses whose tokens both start at 1.
pub fn staging_dir(url: &str, staging: Option<&Path>) -> PathBuf {
    let tail = url.trim_start_matches("s3://").trim_matches('/');
    let endpoint = endpoint_segment(crate::store::s3_endpoint().as_deref());
    let base = match staging {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => user_cache().join("weir").join("staging"),
    };
    base.join(endpoint).join(tail)
}

/// The user's cache directory, as the XDG base directory convention finds
/// it: the platform's answer, like `PATH`'s for a program, and no setting
/// of weir's.
fn user_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
}

/// The endpoint as one path segment: `aws` for AWS itself, else the URL
/// (without a trailing `/`) with every byte but letters, digits, `-`, `_`
/// and `.` escaped as `%XX`, so that two endpoints never map to one
/// directory (an endpoint URL starts with `http`, never `aws`).
fn endpoint_segment(endpoint: Option<&str>) -> String {
    match endpoint {
        None => "aws".to_owned(),
        Some(url) => crate::store::encode_partition(url.trim_end_matches('/')),
    }
}

pub use crate::partition::{Dims, PartitionScheme, Shift};

/// A resource pool. Its limits hold across every engine sharing the
/// warehouse (`store::slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pool {
    /// Attempts that may run at once.
    pub slots: u32,
    /// At most this many launches per interval (`rate = "60/1m"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// A launch rate: at most `launches` commands start in any window of
/// length `per`, across engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rate {
    /// Launches allowed per window.
    pub launches: u32,
    /// The window.
    #[serde(
        rename = "per_ms",
        serialize_with = "super::duration::serde_millis::serialize"
    )]
    pub per: std::time::Duration,
}

/// Most launches a rate may allow per interval: each is a key in the
/// warehouse that a launch may have to scan.
pub const MAX_RATE_LAUNCHES: u32 = 1_000;

/// Why a pool's `rate` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// No slash.
    #[error("`{text}` is not COUNT/DURATION")]
    Shape {
        /// The rate as written.
        text: String,
    },
    /// COUNT is not a whole number.
    #[error("`{count}` is not a count of launches")]
    Count {
        /// COUNT as written.
        count: String,
    },
    /// COUNT outside 1 to [`MAX_RATE_LAUNCHES`].
    #[error("{launches} launches: a rate allows 1 to {MAX_RATE_LAUNCHES} per interval")]
    Launches {
        /// COUNT.
        launches: u32,
    },
    /// DURATION does not parse.
    #[error(transparent)]
    Duration(#[from] super::duration::DurationError),
    /// DURATION is zero.
    #[error("the interval must be longer than 0")]
    ZeroInterval,
}

impl Rate {
    /// Parses `"60/1m"`: a positive count, a slash, a duration.
    pub fn parse(text: &str) -> Result<Rate, RateError> {
        let (count, per) = text.split_once('/').ok_or_else(|| RateError::Shape {
            text: text.to_string(),
        })?;
        let launches: u32 = count.trim().parse().map_err(|_| RateError::Count {
            count: count.to_string(),
        })?;
        if !(1..=MAX_RATE_LAUNCHES).contains(&launches) {
            return Err(RateError::Launches { launches });
        }
        let per = super::duration::parse(per)?;
        if per.is_zero() {
            return Err(RateError::ZeroInterval);
        }
        Ok(Rate { launches, per })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.launches, super::duration::render(self.per))
    }
}

/// Slots of the implicit `default` pool when a manifest does not declare one.
pub const DEFAULT_POOL_SLOTS: u32 = 4;

/// What a failure gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// Retried with backoff while attempts and the run's budget last.
    Retry,
    /// A poison pill: never retried, evidence kept.
    Quarantine,
    /// Stopped until an operator decides.
    Hold,
}

/// How delays grow between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// The exact exponential delay.
    None,
    /// Uniform in [0, delay].
    Full,
    /// Uniform in [delay/2, delay].
    Equal,
}

/// Exponential backoff parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BackoffSpec {
    /// First delay.
    #[serde(with = "crate::manifest::duration::serde_millis")]
    pub initial: Duration,
    /// Cap on any delay.
    #[serde(with = "crate::manifest::duration::serde_millis")]
    pub max: Duration,
    /// Growth factor.
    pub multiplier: f64,
    /// Jitter mode.
    pub jitter: Jitter,
}

/// A retry class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryClass {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Delay between attempts.
    pub backoff: BackoffSpec,
    /// What a failure of this class gets.
    pub on_failure: Disposition,
    /// What happens when attempts run out.
    pub on_exhausted: Disposition,
}

impl RetryClass {
    /// The implicit `default` class: 3 attempts, 1s doubling to 1m with full
    /// jitter, then held for an operator.
    pub fn default_class() -> Self {
        RetryClass {
            max_attempts: 3,
            backoff: BackoffSpec {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(60),
                multiplier: 2.0,
                jitter: Jitter::Full,
            },
            on_failure: Disposition::Retry,
            on_exhausted: Disposition::Hold,
        }
    }
}

/// How a failure is classified: one of the three kinds, or a named retry
/// class (whose `on_failure` and backoff then apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureRule {
    /// Retry with the task's retry class.
    Transient,
    /// Quarantine: never retried.
    Deterministic,
    /// Hold for an operator.
    Operator,
    /// Follow this retry class.
    Class(String),
}

/// An external dataset: files outside the warehouse, one per partition.
#[derive(Debug, Clone)]
pub struct ExternalDataset {
    /// Path template relative to the manifest directory, with `{partition}`.
    pub path: String,
    /// File format.
    pub format: Format,
    /// Path template of the source's committed-position file, if declared.
    pub watermark: Option<String>,
    /// Its sensor, if declared (`exec::readiness` checks it).
    pub ready: Option<Ready>,
    /// A `command` sensor's declared environment (`ready.env`); `None`:
    /// the engine's, minus weir's secrets (`exec/env.rs`).
    pub sensor_env: Option<EnvSpec>,
}

/// Where a task input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// An external dataset.
    External,
    /// The published output of this task.
    Task(String),
}

/// One input of a task.
#[derive(Debug, Clone)]
pub struct Input {
    /// Dataset name.
    pub dataset: String,
    /// Where it comes from.
    pub source: InputSource,
    /// `offset` / `window` override of the time dimension's mapping.
    pub shift: Shift,
}

/// A task's output dataset.
#[derive(Debug, Clone)]
pub struct Output {
    /// Dataset name.
    pub dataset: String,
    /// File format.
    pub format: Format,
    /// Columns that make a row unique.
    pub grain: Vec<String>,
    /// The table format the dataset is also published as.
    pub table: Option<TableFormat>,
}

/// `output.table`: a table format readers query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// A Delta Lake table rooted at the dataset's directory.
    Delta {
        /// How the table's schema may change.
        schema: SchemaPolicy,
        /// `output.table_retention`: how long a version's files stay after
        /// a later commit removed them, written to the table as
        /// `delta.deletedFileRetentionDuration`; `None` leaves the table's
        /// own (Delta's default: one week).
        retention: Option<std::time::Duration>,
    },
}

pub use crate::store::delta::SchemaPolicy;

/// A validated task.
#[derive(Debug, Clone)]
pub struct Task {
    /// Name.
    pub name: String,
    /// argv.
    pub command: Vec<String>,
    /// Inputs in declaration order.
    pub inputs: Vec<Input>,
    /// Output.
    pub output: Output,
    /// Upstream tasks: explicit `depends_on` plus producers of inputs, deduplicated.
    pub depends_on: Vec<String>,
    /// Partition scheme names, in order (empty = unpartitioned).
    pub partitioned_by: Vec<String>,
    /// The same, with their schemes.
    pub dims: Dims,
    /// Pool name.
    pub pool: String,
    /// Executor name (`local` unless the task names one).
    pub executor: String,
    /// What each attempt asks the executor for.
    pub resources: super::Resources,
    /// Attempt time limit.
    pub timeout: Duration,
    /// Lease renewal interval.
    pub heartbeat: Duration,
    /// Retry class name.
    pub retry: String,
    /// Exit code classification (defaults 75, 65, 78 included).
    pub exit_codes: BTreeMap<i32, FailureRule>,
    /// Scheduler end states (`out_of_memory` …) → rule, defaults included;
    /// `Cancelled` is absent unless set (then the task's retry class applies).
    pub cluster_ends: BTreeMap<super::ClusterEnd, FailureRule>,
    /// What a timeout counts as.
    pub on_timeout: FailureRule,
    /// Gates.
    pub gates: Vec<Gate>,
    /// Planning estimate.
    pub expected_duration: Duration,
    /// Needs its previous partition first.
    pub depends_on_past: bool,
    /// Up to this many consecutive partitions run in one attempt's command
    /// (`batch = { max_partitions = N }`); `None`: one partition each.
    pub batch: Option<u32>,
    /// Publication deadline after the partition's interval ends.
    pub sla: Option<Duration>,
    /// Target share of partitions published within `sla` (`weir slo`).
    pub slo: Option<f64>,
    /// `weir serve`: how long after its period ends a partition is due.
    pub delay: Duration,
    /// `weir serve`: how long a due instance waits for its inputs before it
    /// is given up (`None`: its `sla`, else one period and at least an hour).
    pub wait: Option<Duration>,
    /// `weir serve`: what a schedule's firing does.
    pub rerun: Rerun,
    /// `weir serve`: when a task without a time dimension runs.
    pub schedule: Option<crate::cron::Schedule>,
    /// Its code version: its own, or the pipeline's.
    pub code_version: String,
    /// Code paths (relative to the manifest's directory) fingerprinted into
    /// its publications' identity (`fingerprint.rs`).
    pub code: Vec<String>,
    /// Its declared environment; `None`: the engine's, minus the
    /// warehouse's store credentials (`exec/env.rs`).
    pub env: Option<EnvSpec>,
}

/// A declared backfill.
#[derive(Debug, Clone)]
pub struct Backfill {
    /// Name.
    pub name: String,
    /// First partition key.
    pub from: String,
    /// Last partition key.
    pub to: String,
    /// Pool its attempts run in.
    pub pool: String,
    /// Tasks it rebuilds, in manifest order.
    pub tasks: Vec<String>,
    /// Why.
    pub reason: String,
    /// The civil days `from..=to` (days since the epoch) when its tasks use
    /// time schemes; `None` when `from`/`to` are static keys.
    pub days: Option<(i64, i64)>,
    /// Static dimensions narrowed to these keys.
    pub keys: IndexMap<String, Vec<String>>,
}

impl Manifest {
    /// The task that publishes `dataset`, if any.
    pub fn producer(&self, dataset: &str) -> Option<&Task> {
        self.tasks.values().find(|t| t.output.dataset == dataset)
    }
}

/// A validated sensor. `{partition}` in its text stands for the key as
/// written (`2026-09-20T13:05`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// This file (a template relative to the manifest) exists.
    File(String),
    /// The dataset's watermark has reached the period's end.
    WatermarkAtPeriodEnd,
    /// This command exits 0.
    Command(Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::{Rate, RateError};
    use std::time::Duration;

    // One bucket name on two servers is two staging
    // directories, and no endpoint's segment is another's.
    #[test]
    fn endpoints_have_their_own_segment() {
        use super::endpoint_segment;
        let prod = endpoint_segment(Some("https://s3.example.com"));
        let dev = endpoint_segment(Some("http://127.0.0.1:5612/"));
        assert_eq!(prod, "https%3A%2F%2Fs3.example.com");
        assert_eq!(dev, "http%3A%2F%2F127.0.0.1%3A5612");
        assert_ne!(
            endpoint_segment(Some("http://a:1")),
            endpoint_segment(Some("http://a_1"))
        );
        assert_eq!(endpoint_segment(None), "aws");
    }

    #[test]
    fn an_s3_warehouse_stages_under_the_directory_the_loader_gives() {
        use std::path::Path;
        let text = "[pipeline]\nname = \"p\"\ncode_version = \"v1\"\nwarehouse = \"s3://bucket/prefix\"\n\n[tasks.t]\ncommand = [\"true\"]\npartitioned_by = []\noutput = { dataset = \"d\", format = \"csv\", grain = [\"id\"] }\n";
        let staging = Path::new("/given/staging");
        let m = crate::manifest::Manifest::parse_with_staging(
            "m.toml",
            text,
            Path::new("/m/m.toml"),
            Some(staging),
        )
        .unwrap_or_else(|e| panic!("{:?}", e.errors));
        let w = &m.pipeline.warehouse;
        assert!(
            w.starts_with(staging) && w.ends_with("bucket/prefix"),
            "{w:?}"
        );
        let mut moved = m.pipeline.clone();
        moved
            .set_warehouse("s3://other/x", Path::new("/m"), Some(Path::new("/else")))
            .unwrap();
        let w = &moved.warehouse;
        assert!(w.starts_with("/else") && w.ends_with("other/x"), "{w:?}");
    }

    // `rate = "COUNT/DURATION"` on a pool.
    #[test]
    fn rates_parse_and_refuse() {
        assert_eq!(
            Rate::parse("60/1m"),
            Ok(Rate {
                launches: 60,
                per: Duration::from_secs(60)
            })
        );
        assert_eq!(Rate::parse("2/1s").unwrap().to_string(), "2/1s");
        for bad in ["0/1m", "60", "x/1m", "60/1q", "60/0s", "1001/1s", "-1/1m"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Rate::parse("0/1m"),
            Err(RateError::Launches { launches: 0 })
        );
        assert_eq!(Rate::parse("60/0s"), Err(RateError::ZeroInterval));
        assert!(matches!(
            Rate::parse("60/1q"),
            Err(RateError::Duration(
                crate::manifest::duration::DurationError::UnknownUnit { .. }
            ))
        ));
    }
}

/// What a `schedule` firing does under `weir serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rerun {
    /// The command runs at every firing: a new generation each time (early
    /// cutoff still stops downstream when the output is identical).
    #[default]
    Always,
    /// The firing is a currency check: the command runs only when inputs or
    /// code changed.
    OnChange,
}
