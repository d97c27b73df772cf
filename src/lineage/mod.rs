//! OpenLineage: RunEvents made from the typed event log and commit records
//! (never from free text), delivered off the engine's path.
//!
//! One OpenLineage run per attempt, its runId a UUID derived from (weir run,
//! task, partition, attempt), so START and its end agree without shared
//! state; the `parent` facet names the weir run (a UUID derived from its id)
//! as a run of the job `<pipeline>`. Mapping:
//!
//! - RUNNING: START of the job `<pipeline>.<task>`;
//! - PUBLISHED: COMPLETE, inputs the pinned upstream generations and external
//!   files of the commit record's input snapshot, one per input (version
//!   `<generation>:<digest>` or the file's digest; an input of several
//!   partitions lists them in its `weirPartitions` facet), output the published dataset (version
//!   `<generation>:<digest>`, its row count, schema and gate outcomes as
//!   data-quality assertions, from the audit's `candidate.json`);
//! - FAILED followed by the instance's decision (RETRYING, QUARANTINED, HELD
//!   with its failure class), or GATE_FAILED (deterministic): FAIL with an
//!   `errorMessage` facet (class, ending, stderr tail), a GATE_FAILED also
//!   with the output and its failed gates as data-quality assertions;
//! - UNKNOWN (lease lost), REJECTED_STALE, or an attempt still open when the
//!   run ends: ABORT.
//!
//! Delivery runs on one background thread behind a bounded queue: the
//! engine never waits on it (a COMPLETE's commit record and audit are read
//! there too, not on the engine's thread), a full queue drops events (counted), and each
//! event gets a few tries with backoff. What could not be delivered is
//! reported by [`Emitter::finish`].

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use crate::events::payload::{FailureClass, Payload};
use crate::events::{EventRecord, State};
use crate::manifest::{Lineage, LineageSink, Manifest};
use crate::store::{CommitRecord, Warehouse};

/// The OpenLineage spec version the events follow.
pub const SCHEMA_URL: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
/// Who produced the events.
pub const PRODUCER: &str = "https://github.com/weir-pipelines/weir";
/// Events waiting for delivery at most; more are dropped and counted.
const QUEUE: usize = 1024;
/// Tries per event.
const TRIES: u32 = 4;
/// The first retry's delay; it doubles.
const BACKOFF: Duration = Duration::from_millis(100);
/// How long [`Emitter::finish`] waits for the queue to drain.
const DRAIN: Duration = Duration::from_secs(3);

/// A UUID (RFC 4122 layout, version 5 bits) derived from `parts`.
pub fn uuid(parts: &[&str]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"weir.lineage.v1\0");
    for part in parts {
        hash.update((part.len() as u32).to_le_bytes());
        hash.update(part.as_bytes());
    }
    let mut b: [u8; 16] = hash.finalize()[..16].try_into().unwrap_or([0; 16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What delivery achieved, for the run's summary, event log and `status`.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    /// Events delivered.
    pub sent: u64,
    /// Events given up on after every try.
    pub failed: u64,
    /// Events dropped because the queue was full or the run ended first.
    pub dropped: u64,
    /// The last delivery error.
    pub last_error: Option<String>,
}

impl Delivery {
    /// True if every event was delivered.
    pub fn complete(&self) -> bool {
        self.failed == 0 && self.dropped == 0
    }
}

/// Turns a run's event records into RunEvents and delivers them.
pub struct Emitter {
    state: Mutex<Mapper>,
    queue: Mutex<Option<mpsc::SyncSender<Job>>>,
    delivery: Arc<Mutex<Delivery>>,
    done: Mutex<Option<mpsc::Receiver<()>>>,
}

/// One event on its way: a COMPLETE's datasets are looked up (commit
/// record, `candidate.json`) on the delivery thread, not the engine's.
struct Job {
    event: Value,
    /// (task, partition, generation) of a publication.
    publication: Option<(String, String, Option<u64>)>,
}

/// Finds a publication's inputs and output.
#[derive(Clone)]
struct Resolver {
    namespace: String,
    /// Opened once when delivery starts; `None` if it cannot be opened
    /// (the events then go without datasets, as for any lookup failure).
    warehouse: Option<Warehouse>,
    /// task → the dataset it publishes, and its gates.
    outputs: Outputs,
}

/// What the mapping remembers between records.
struct Mapper {
    config: Lineage,
    pipeline: String,
    /// Attempts started and not ended: (task, partition, attempt) → record.
    open: HashMap<(String, String, u32), EventRecord>,
    /// The last FAILED of an instance, until its decision names the class.
    failed: HashMap<(String, String), EventRecord>,
    /// task → its output dataset and its gates.
    outputs: Outputs,
}

/// task → its output dataset and its gates, each as the audit names it
/// (`not_null(v)`) with the one column it checks, if it checks one.
type Outputs = HashMap<String, (String, Vec<(String, Option<String>)>)>;

fn outputs(manifest: &Manifest) -> Outputs {
    manifest
        .tasks
        .values()
        .map(|t| {
            let grain = &t.output.grain;
            // The audit checks the grain first, as this gate.
            let grain_gate = (
                format!("grain unique({})", grain.join(", ")),
                (grain.len() == 1).then(|| grain[0].clone()),
            );
            let gates = std::iter::once(grain_gate)
                .chain(t.gates.iter().map(|g| (g.describe(), column(g))))
                .collect();
            (t.name.clone(), (t.output.dataset.clone(), gates))
        })
        .collect()
}

impl Emitter {
    /// Starts the delivery thread for `manifest`'s `[lineage]`, if any.
    pub fn start(manifest: &Manifest) -> Option<Emitter> {
        let config = manifest.lineage.clone()?;
        let (queue, events) = mpsc::sync_channel::<Job>(QUEUE);
        let resolver = Resolver {
            namespace: config.namespace.clone(),
            warehouse: Warehouse::open_for(&manifest.pipeline).ok(),
            outputs: outputs(manifest),
        };
        let delivery = Arc::new(Mutex::new(Delivery::default()));
        let (done_tx, done) = mpsc::channel();
        // Header values are read once; one that cannot be read fails
        // every delivery with the reason (never the value).
        let sink = match &config.sink {
            LineageSink::Http(endpoint) => Sink::Http(
                crate::http::resolve(endpoint, &manifest.dir)
                    .map_err(|e| format!("{}: {e}", crate::http::redact_url(&endpoint.url))),
            ),
            LineageSink::File(path) => Sink::File(path.clone()),
        };
        let shared = Arc::clone(&delivery);
        std::thread::Builder::new()
            .name("weir-lineage".into())
            .spawn(move || {
                for Job {
                    mut event,
                    publication,
                } in events
                {
                    if let Some((task, partition, generation)) = publication {
                        let (inputs, outputs) = resolver.datasets(&task, &partition, generation);
                        event["inputs"] = Value::Array(inputs);
                        event["outputs"] = Value::Array(outputs);
                    }
                    let result = deliver(&sink, &event);
                    if let Ok(mut d) = shared.lock() {
                        match result {
                            Ok(()) => d.sent += 1,
                            Err(e) => {
                                d.failed += 1;
                                d.last_error = Some(e.to_string());
                            }
                        }
                    }
                }
                let _ = done_tx.send(());
            })
            .ok()?;
        Some(Emitter {
            state: Mutex::new(Mapper {
                pipeline: manifest.pipeline.name.clone(),
                config,
                open: HashMap::new(),
                failed: HashMap::new(),
                outputs: outputs(manifest),
            }),
            queue: Mutex::new(Some(queue)),
            delivery,
            done: Mutex::new(Some(done)),
        })
    }

    /// Maps one event record; never blocks on delivery.
    pub fn observe(&self, record: &EventRecord) {
        let events = match self.state.lock() {
            Ok(mut mapper) => mapper.map(record),
            Err(_) => Vec::new(),
        };
        for event in events {
            self.send(event);
        }
    }

    fn send(&self, event: Job) {
        let sent = self
            .queue
            .lock()
            .ok()
            .and_then(|q| q.as_ref().map(|q| q.try_send(event).is_ok()));
        if sent != Some(true) {
            if let Ok(mut d) = self.delivery.lock() {
                d.dropped += 1;
            }
        }
    }

    /// Ends the attempts still open (ABORT), lets the queue drain for at
    /// most a few seconds, and says what was delivered.
    pub fn finish(&self) -> Delivery {
        let aborts = match self.state.lock() {
            Ok(mut mapper) => mapper.close(),
            Err(_) => Vec::new(),
        };
        for event in aborts {
            self.send(event);
        }
        let queued = self.queue.lock().ok().and_then(|mut q| q.take());
        drop(queued);
        let drained = self
            .done
            .lock()
            .ok()
            .and_then(|mut d| d.take())
            .is_some_and(|done| done.recv_timeout(DRAIN).is_ok());
        let mut delivery = self.delivery.lock().map(|d| d.clone()).unwrap_or_default();
        if !drained {
            delivery.last_error.get_or_insert_with(|| {
                format!(
                    "delivery still in progress after {} s; the rest is dropped",
                    DRAIN.as_secs()
                )
            });
            delivery.dropped += 1;
        }
        delivery
    }
}

/// Why a lineage event was not delivered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliverError {
    /// The endpoint could not be resolved, or the POST failed (secrets
    /// redacted).
    #[error("{0}")]
    Http(String),
    /// The lineage file could not be opened.
    #[error("cannot open `{}`: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The event could not be appended to it.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Where the delivery thread sends, header values read.
enum Sink {
    Http(Result<crate::http::ResolvedEndpoint, String>),
    File(PathBuf),
}

/// Sends one event, with retries; the error of the last try.
fn deliver(sink: &Sink, event: &Value) -> Result<(), DeliverError> {
    let body = event.to_string();
    let mut last = DeliverError::Http(String::new());
    for attempt in 0..TRIES {
        if attempt > 0 {
            std::thread::sleep(crate::clock::doubling(BACKOFF, Duration::MAX, attempt - 1));
        }
        let result = match sink {
            Sink::Http(Ok(endpoint)) => {
                crate::http::post_json(endpoint, &body).map_err(DeliverError::Http)
            }
            Sink::Http(Err(e)) => return Err(DeliverError::Http(e.clone())),
            Sink::File(path) => append(path, &body),
        };
        match result {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn append(path: &Path, line: &str) -> Result<(), DeliverError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| DeliverError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|source| DeliverError::Write {
            path: path.to_path_buf(),
            source,
        })
}

impl Mapper {
    fn map(&mut self, record: &EventRecord) -> Vec<Job> {
        let publication = match (record.state, &record.task, &record.partition) {
            (State::Published, Some(task), Some(partition)) => Some((
                task.clone(),
                partition.clone(),
                record.data["generation"].as_u64(),
            )),
            _ => None,
        };
        self.map_events(record)
            .into_iter()
            .map(|event| Job {
                event,
                publication: publication.clone(),
            })
            .collect()
    }

    fn map_events(&mut self, record: &EventRecord) -> Vec<Value> {
        let (Some(task), Some(partition)) = (&record.task, &record.partition) else {
            return Vec::new();
        };
        let key = |attempt: u32| (task.clone(), partition.clone(), attempt);
        match record.state {
            State::Running => {
                let Some(attempt) = record.attempt else {
                    return Vec::new();
                };
                self.open.insert(key(attempt), record.clone());
                vec![self.event("START", record, &[], &[], None)]
            }
            State::Published => {
                let Some(attempt) = record.attempt else {
                    return Vec::new();
                };
                self.open.remove(&key(attempt));
                // Inputs and outputs are filled in on the delivery thread.
                vec![self.event("COMPLETE", record, &[], &[], None)]
            }
            State::Failed => {
                self.failed
                    .insert((task.clone(), partition.clone()), record.clone());
                Vec::new()
            }
            State::Retrying | State::Quarantined | State::Held => {
                let Some(failed) = self.failed.remove(&(task.clone(), partition.clone())) else {
                    return Vec::new();
                };
                let class = match Payload::read(record.state, &record.data) {
                    Some(Payload::Retrying(p)) => p.class.to_string(),
                    Some(Payload::Decided(p)) => p.class.to_string(),
                    _ => "unknown".to_owned(),
                };
                if let Some(attempt) = failed.attempt {
                    self.open.remove(&key(attempt));
                }
                vec![self.fail(&failed, &class)]
            }
            State::GateFailed => {
                if let Some(attempt) = record.attempt {
                    self.open.remove(&key(attempt));
                }
                let mut event = self.fail(record, FailureClass::Deterministic.as_str());
                if let Some(output) = self.failed_assertions(task, record) {
                    event["outputs"] = Value::Array(vec![output]);
                }
                vec![event]
            }
            State::EngineFailed => {
                if let Some(attempt) = record.attempt {
                    self.open.remove(&key(attempt));
                }
                vec![self.fail(record, "engine")]
            }
            State::Unknown | State::RejectedStale | State::Interrupted => {
                // An interrupted attempt is FAILED, then INTERRUPTED: the
                // second decides, so it is an ABORT, not a FAIL.
                self.failed.remove(&(task.clone(), partition.clone()));
                let Some(attempt) = record.attempt else {
                    return Vec::new();
                };
                self.open.remove(&key(attempt));
                vec![self.event("ABORT", record, &[], &[], None)]
            }
            _ => Vec::new(),
        }
    }

    /// FAIL events for failures whose decision never came, ABORT for the
    /// attempts still open.
    fn close(&mut self) -> Vec<Job> {
        let mut events = Vec::new();
        let failed: Vec<EventRecord> = self.failed.drain().map(|(_, r)| r).collect();
        for record in failed {
            if let Some(attempt) = record.attempt {
                let key = (
                    record.task.clone().unwrap_or_default(),
                    record.partition.clone().unwrap_or_default(),
                    attempt,
                );
                self.open.remove(&key);
            }
            events.push(self.fail(&record, "unknown"));
        }
        let open: Vec<EventRecord> = self.open.drain().map(|(_, r)| r).collect();
        for record in open {
            events.push(self.event("ABORT", &record, &[], &[], None));
        }
        events
            .into_iter()
            .map(|event| Job {
                event,
                publication: None,
            })
            .collect()
    }

    /// The output dataset of a GATE_FAILED with the gates that failed as
    /// data-quality assertions (`success: false`, the column where the gate
    /// checks one), from the event's evidence; `None` when the candidate
    /// failed before its gates ran (unreadable, not publishable).
    fn failed_assertions(&self, task: &str, record: &EventRecord) -> Option<Value> {
        let (dataset, gates) = self.outputs.get(task)?;
        let failed = record.data["gates"].as_array()?;
        let assertions: Vec<Value> = failed
            .iter()
            .filter_map(|g| g["gate"].as_str())
            .map(|gate| assertion(gate, false, gates))
            .collect();
        Some(json!({
            "namespace": self.config.namespace,
            "name": dataset,
            "facets": { "dataQualityAssertions": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet",
                "assertions": assertions,
            }},
        }))
    }

    fn fail(&self, record: &EventRecord, class: &str) -> Value {
        let ending = record.data["ending"].as_str().unwrap_or(&record.detail);
        let error = json!({
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet",
            "message": format!("{class}: {ending}"),
            "programmingLanguage": "shell",
            "stackTrace": record.data["stderr_tail"].as_str().unwrap_or_default(),
        });
        self.event("FAIL", record, &[], &[], Some(error))
    }

    fn event(
        &self,
        kind: &str,
        record: &EventRecord,
        inputs: &[Value],
        outputs: &[Value],
        error: Option<Value>,
    ) -> Value {
        let task = record.task.as_deref().unwrap_or_default();
        let partition = record.partition.as_deref().unwrap_or_default();
        let attempt = record.attempt.unwrap_or(0).to_string();
        let namespace = &self.config.namespace;
        let mut facets = json!({
            "parent": {
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
                "job": { "namespace": namespace, "name": self.pipeline },
                "run": { "runId": uuid(&[&record.run_id]) },
            },
            "weir": {
                "_producer": PRODUCER,
                "_schemaURL": format!("{PRODUCER}/blob/main/tests/lineage/WeirRunFacet.json#/$defs/WeirRunFacet"),
                "run_id": record.run_id,
                "partition": partition,
                "attempt": record.attempt,
                "token": record.token,
            },
        });
        if let (Some(error), Some(map)) = (error, facets.as_object_mut()) {
            map.insert("errorMessage".into(), error);
        }
        json!({
            "eventType": kind,
            "eventTime": record.ts,
            "producer": PRODUCER,
            "schemaURL": SCHEMA_URL,
            "run": {
                "runId": uuid(&[&record.run_id, task, partition, &attempt]),
                "facets": facets,
            },
            "job": {
                "namespace": namespace,
                "name": format!("{}.{task}", self.pipeline),
                "facets": {
                    "jobType": {
                        "_producer": PRODUCER,
                        "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                        "processingType": "BATCH",
                        "integration": "WEIR",
                        "jobType": "TASK",
                    }
                },
            },
            "inputs": inputs,
            "outputs": outputs,
        })
    }
}

impl Resolver {
    /// The inputs and the output of a publication, from its commit record
    /// and its candidate's audit (`candidate.json`).
    fn datasets(
        &self,
        task: &str,
        partition: &str,
        generation: Option<u64>,
    ) -> (Vec<Value>, Vec<Value>) {
        let Some((dataset, gates)) = self.outputs.get(task) else {
            return (Vec::new(), Vec::new());
        };
        let Some(warehouse) = &self.warehouse else {
            return (Vec::new(), Vec::new());
        };
        let store = warehouse.partition(dataset, partition);
        let commit: Option<CommitRecord> = store.history().ok().and_then(|history| {
            history
                .into_iter()
                .find(|c| Some(c.generation.get()) == generation)
        });
        let Some(commit) = commit else {
            return (Vec::new(), Vec::new());
        };
        let namespace = &self.namespace;
        let inputs = input_versions(namespace, &commit.input_snapshot);
        // The audit's report, in the attempt directory of the files' attempt.
        let audit = commit
            .attempt_token()
            .and_then(|t| candidate(&store.attempt_dir(t)));
        let facets = output_facets(&commit, audit, gates);
        let output = json!({
            "namespace": namespace,
            "name": dataset,
            "facets": facets,
            "outputFacets": {
                "outputStatistics": {
                    "_producer": PRODUCER,
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet",
                    "rowCount": commit.rows,
                    "size": commit.file_sums.iter().map(|f| f.size).sum::<u64>(),
                    "fileCount": commit.files.len(),
                }
            },
        });
        (inputs, vec![output])
    }
}

/// A dataset version facet.
fn version(v: &str) -> Value {
    json!({
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet",
        "datasetVersion": v,
    })
}

/// The input datasets of a publication, one per input, from its input
/// snapshot: an upstream dataset's version is `<generation>:<digest>` of the
/// pinned generation, an external file's its digest. An input mapped to
/// several upstream partitions pins one generation each: it is still one
/// input, its version the snapshot's digest over the pins, and its
/// `weirPartitions` input facet lists them.
fn input_versions(namespace: &str, snapshot: &Value) -> Vec<Value> {
    let Some(pinned) = snapshot["inputs"].as_array() else {
        return Vec::new();
    };
    pinned
        .iter()
        .map(|input| {
            let name = input["name"].as_str().unwrap_or_default();
            let mut entry = json!({ "namespace": namespace, "name": name });
            let v = match input["partitions"].as_array() {
                Some(parts) => {
                    let parts: Vec<Value> = parts
                        .iter()
                        .map(|p| {
                            json!({
                                "partition": p["partition"].as_str().unwrap_or_default(),
                                "generation": p["generation"].as_u64().unwrap_or_default(),
                                "digest": p["digest"].as_str().unwrap_or_default(),
                            })
                        })
                        .collect();
                    let v = input["digest"].as_str().unwrap_or_default().to_owned();
                    entry["inputFacets"] = json!({ "weirPartitions": {
                        "_producer": PRODUCER,
                        "_schemaURL": format!("{PRODUCER}/blob/main/tests/lineage/WeirPartitionsInputDatasetFacet.json#/$defs/WeirPartitionsInputDatasetFacet"),
                        "partitions": parts,
                    }});
                    v
                }
                None => {
                    let digest = input["digest"].as_str().unwrap_or_default();
                    match input["generation"].as_u64() {
                        Some(g) => format!("{g}:{digest}"),
                        None => digest.to_owned(),
                    }
                }
            };
            entry["facets"] = json!({ "version": version(&v) });
            entry
        })
        .collect()
}

/// The output dataset's facets: its version, and from the audit (when its
/// `candidate.json` is at hand) its schema and the gates as assertions.
fn output_facets(
    commit: &CommitRecord,
    audit: Option<Audit>,
    gates: &[(String, Option<String>)],
) -> Value {
    let mut facets = json!({
        "version": version(&format!("{}:{}", commit.generation.get(), commit.digest)),
    });
    if let (Some(audit), Some(map)) = (audit, facets.as_object_mut()) {
        map.insert(
            "schema".into(),
            json!({
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
                "fields": audit.columns.iter().map(|c| json!({ "name": c })).collect::<Vec<_>>(),
            }),
        );
        map.insert(
            "dataQualityAssertions".into(),
            json!({
                "_producer": PRODUCER,
                "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet",
                "assertions": audit.gates.iter().map(|g| assertion(&g.gate, g.passed, gates)).collect::<Vec<_>>(),
            }),
        );
    }
    facets
}

/// A data-quality assertion: the gate as the audit names it, whether it
/// passed, and the column it checks where it checks one.
fn assertion(gate: &str, success: bool, gates: &[(String, Option<String>)]) -> Value {
    let mut assertion = json!({ "assertion": gate, "success": success });
    if let Some((_, Some(column))) = gates.iter().find(|(g, _)| g == gate) {
        assertion["column"] = json!(column);
    }
    assertion
}

/// The one column `gate` checks, if it checks one.
fn column(gate: &crate::audit::Gate) -> Option<String> {
    use crate::audit::Gate;
    match gate {
        Gate::NotNull { columns } | Gate::Unique { columns } if columns.len() == 1 => {
            columns.first().cloned()
        }
        Gate::AcceptedValues { column, .. } | Gate::Reconcile { column, .. } => {
            Some(column.clone())
        }
        _ => None,
    }
}

/// The part of an audit's `candidate.json` lineage reports.
#[derive(serde::Deserialize)]
struct Audit {
    columns: Vec<String>,
    gates: Vec<crate::audit::GateOutcome>,
}

fn candidate(attempt_dir: &Path) -> Option<Audit> {
    let bytes = std::fs::read(attempt_dir.join("candidate.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Where the last run's delivery is noted for `weir status`.
pub fn status_path(warehouse: &Path) -> PathBuf {
    warehouse.join("_lineage").join("status.json")
}

/// The last run's delivery, as `weir status` reports it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Note {
    /// The run.
    pub run_id: Option<String>,
    /// Where the events went.
    pub sink: String,
    /// What was delivered.
    pub delivery: Delivery,
}

/// Records a run's delivery: a warning on stderr and a LINEAGE_UNDELIVERED
/// event when something was not delivered, and the note `weir status`
/// reads. Nothing here fails the run.
pub fn record(manifest: &Manifest, run_id: Option<&str>, delivery: &Delivery) {
    let Some(config) = &manifest.lineage else {
        return;
    };
    let sink = match &config.sink {
        LineageSink::Http(endpoint) => crate::http::redact_url(&endpoint.url),
        LineageSink::File(path) => path.display().to_string(),
    };
    let warehouse = &manifest.pipeline.warehouse;
    if !delivery.complete() {
        let error = delivery.last_error.as_deref().unwrap_or("queue full");
        let undelivered = delivery.failed + delivery.dropped;
        let events = if undelivered == 1 { "event" } else { "events" };
        tracing::warn!(
            "lineage: {undelivered} {events} not delivered to {sink} ({} failed, {} dropped): {error}",
            delivery.failed,
            delivery.dropped
        );
        if let Some(run_id) = run_id {
            let log = Warehouse::open_for(&manifest.pipeline)
                .ok()
                .and_then(|w| crate::events::EventLog::open_in(&w.events(), run_id).ok());
            if let Some(log) = log {
                let _ = log.emit(
                    State::LineageUndelivered,
                    crate::events::Event::default()
                        .detail(format!(
                            "{undelivered} OpenLineage {events} not delivered to {sink}: {error}"
                        ))
                        .data(json!(delivery)),
                );
            }
        }
    }
    let note = Note {
        run_id: run_id.map(str::to_owned),
        sink,
        delivery: delivery.clone(),
    };
    let path = status_path(warehouse);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(bytes) = serde_json::to_vec_pretty(&note) {
        let _ = std::fs::write(&path, bytes);
    }
}

/// The last run's delivery note, if lineage is configured and it ran.
pub fn last_note(warehouse: &Path) -> Option<Note> {
    let bytes = std::fs::read(status_path(warehouse)).ok()?;
    let mut note: Note = serde_json::from_slice(&bytes).ok()?;
    // A note written before URLs were redacted is shown redacted too.
    note.sink = crate::http::redact_url(&note.sink);
    note.delivery.last_error = note
        .delivery
        .last_error
        .as_deref()
        .map(crate::http::redact_url_in);
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lineage_file_that_cannot_be_opened_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("lineage.jsonl");
        let sink = Sink::File(path.clone());
        match deliver(&sink, &serde_json::json!({"eventType": "START"})) {
            Err(e @ DeliverError::Open { .. }) => {
                assert!(matches!(&e, DeliverError::Open { path: p, .. } if *p == path));
                assert!(e
                    .to_string()
                    .starts_with(&format!("cannot open `{}`: ", path.display())));
            }
            other => panic!("{other:?}"),
        }
        let ok = dir.path().join("lineage.jsonl");
        deliver(&Sink::File(ok.clone()), &serde_json::json!({"n": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(ok).unwrap(), "{\"n\":1}\n");
    }
}
