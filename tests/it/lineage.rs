//! OpenLineage RunEvents: to a local HTTP receiver, valid against the
//! OpenLineage spec's own schemas in tests/lineage/spec (each facet against
//! the schema its `_schemaURL` names), and never in the way of a run.
#![cfg_attr(not(feature = "http"), allow(dead_code, unused_imports))]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir::events::State;

use crate::support::http::{self, Reply};
use crate::support::{stderr, stdout, Sandbox};

fn manifest(lineage: &str) -> String {
    format!(
        r#"
[pipeline]
name = "lin"
code_version = "7"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b"]

[tasks.up]
command = ["sh", "up.sh"]
output = {{ dataset = "up_out", format = "csv", grain = ["id"] }}

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = {{ dataset = "down_out", format = "csv", grain = ["id"] }}
gates = [{{ check = "row_count", min = 1 }}]

[lineage]
{lineage}
"#
    )
}

fn sandbox(lineage: &str) -> Sandbox {
    let sb = Sandbox::new(&manifest(lineage));
    sb.script(
        "up.sh",
        "printf 'id,v\\n1,x\\n2,y\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "down.sh",
        "if [ \"$WEIR_PARTITION\" = b ]; then echo 'boom: bad input' >&2; exit 65; fi\n\
         cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb
}

/// A collector on 127.0.0.1 at `/api/v1/lineage`: answers 201 to every
/// POST and keeps it; with `silent`, never answers.
fn receiver(silent: bool) -> (String, http::Receiver) {
    let receiver = http::Receiver::start(move |_| {
        if silent {
            Reply::Silent
        } else {
            Reply::Status(201)
        }
    });
    (receiver.url("/api/v1/lineage"), receiver)
}

/// The OpenLineage schemas under tests/lineage (the spec's own, copied
/// unchanged, and weir's run facet), by their `$id`: every `$ref` resolves
/// here, never on the network.
struct LocalSchemas(HashMap<String, Value>);

impl jsonschema::Retrieve for LocalSchemas {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        self.0
            .get(uri.as_str())
            .cloned()
            .ok_or_else(|| format!("no schema {uri} under tests/lineage").into())
    }
}

fn local_schemas() -> HashMap<String, Value> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lineage");
    let mut files = vec![root.clone()];
    let mut schemas = HashMap::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|x| x == "json") {
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let id = schema["$id"].as_str().expect("every schema has an $id");
            schemas.insert(id.to_string(), schema);
        }
    }
    schemas
}

/// Validates RunEvents against `OpenLineage.json#/$defs/RunEvent` and each
/// facet against the schema its `_schemaURL` names, formats (uuid,
/// date-time, uri) included.
struct Spec {
    schemas: HashMap<String, Value>,
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

impl Spec {
    fn validator(&self, url: &str) -> Result<Arc<jsonschema::Validator>, String> {
        let mut cache = self.validators.lock().unwrap();
        if let Some(v) = cache.get(url) {
            return Ok(Arc::clone(v));
        }
        let (id, _) = url.split_once('#').unwrap_or((url, ""));
        if !self.schemas.contains_key(id) {
            return Err(format!("no schema {id} under tests/lineage"));
        }
        let v = jsonschema::options()
            .should_validate_formats(true)
            .with_retriever(LocalSchemas(self.schemas.clone()))
            .build(&serde_json::json!({ "$ref": url }))
            .map_err(|e| format!("{url}: {e}"))?;
        let v = Arc::new(v);
        cache.insert(url.to_string(), Arc::clone(&v));
        Ok(v)
    }

    /// The violations of `value` against the schema at `url`.
    fn check(&self, url: &str, value: &Value, at: &str) -> Vec<String> {
        match self.validator(url) {
            Ok(v) => v.iter_errors(value).map(|e| format!("{at}: {e}")).collect(),
            Err(e) => vec![format!("{at}: {e}")],
        }
    }

    /// Every violation in `event`, its facets' included.
    fn errors(&self, event: &Value) -> Vec<String> {
        let mut errors = self.check(
            "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            event,
            "event",
        );
        let mut groups = vec![
            ("run.facets".to_string(), &event["run"]["facets"]),
            ("job.facets".to_string(), &event["job"]["facets"]),
        ];
        for side in ["inputs", "outputs"] {
            for (i, dataset) in event[side].as_array().into_iter().flatten().enumerate() {
                for kind in ["facets", "inputFacets", "outputFacets"] {
                    groups.push((format!("{side}[{i}].{kind}"), &dataset[kind]));
                }
            }
        }
        for (at, facets) in groups {
            for (name, facet) in facets.as_object().into_iter().flatten() {
                let at = format!("{at}.{name}");
                match facet["_schemaURL"].as_str() {
                    Some(url) => errors.extend(self.check(url, facet, &at)),
                    None => errors.push(format!("{at}: no _schemaURL")),
                }
            }
        }
        errors
    }

    fn is_valid(&self, event: &Value) -> bool {
        self.errors(event).is_empty()
    }
}

fn validator() -> Spec {
    Spec {
        schemas: local_schemas(),
        validators: Mutex::new(HashMap::new()),
    }
}

fn find<'e>(events: &'e [Value], kind: &str, job: &str, partition: &str) -> &'e Value {
    events
        .iter()
        .find(|e| {
            e["eventType"] == kind
                && e["job"]["name"] == job
                && e["run"]["facets"]["weir"]["partition"] == partition
        })
        .unwrap_or_else(|| panic!("no {kind} of {job} {partition} in {events:#?}"))
}

// START when an attempt starts, COMPLETE with its inputs (pinned
// upstream generations) and output (generation and digest, rows, schema,
// gates as assertions), FAIL with the class and stderr tail, one runId per
// attempt under the weir run as parent; every event valid against the
// OpenLineage schema.
// A build without the `http` feature refuses a lineage URL.
#[cfg(feature = "http")]
#[test]
fn lineage_events_reach_an_http_collector_and_validate() {
    let (url, collector) = receiver(false);
    let sb = sandbox(&format!("url = \"{url}\"\nnamespace = \"warehouse-tests\""));
    let out = sb.run("RUN-L1", &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!stderr(&out).contains("lineage"), "{}", stderr(&out));
    let events: Vec<Value> = collector
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| !b.is_null())
        .collect();
    let validator = validator();
    // The spec's schemas do reject what the spec rejects: a malformed
    // event, and facets that break their own schema or name none we have.
    let first = events.first().cloned().expect("events arrived");
    assert!(validator.is_valid(&first), "{:?}", validator.errors(&first));
    assert!(!validator.is_valid(&serde_json::json!({"eventType": "START"})));
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut event = first.clone();
        edit(&mut event);
        !validator.is_valid(&event)
    };
    assert!(broken(&|e| e["run"]["runId"] = Value::from("not-a-uuid")));
    assert!(broken(&|e| e["eventTime"] = Value::from("yesterday")));
    assert!(broken(
        &|e| e["run"]["facets"]["parent"]["run"]["runId"] = Value::from("x")
    ));
    assert!(broken(
        &|e| e["run"]["facets"]["parent"]["job"] = serde_json::json!({})
    ));
    assert!(broken(
        &|e| e["run"]["facets"]["weir"]["attempt"] = Value::from("one")
    ));
    assert!(broken(&|e| e["job"]["facets"]["jobType"]["_schemaURL"] =
        Value::from(
            "https://openlineage.io/spec/facets/9-9-9/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
        )));
    for event in &events {
        let errors = validator.errors(event);
        assert!(errors.is_empty(), "{errors:?} in {event:#}");
    }
    let parent = weir::lineage::uuid(&["RUN-L1"]);
    assert!(events.iter().all(
        |e| e["run"]["facets"]["parent"]["run"]["runId"] == parent.as_str()
            && e["run"]["facets"]["parent"]["job"]["name"] == "lin"
            && e["job"]["namespace"] == "warehouse-tests"
    ));

    let start = find(&events, "START", "lin.up", "a");
    let complete = find(&events, "COMPLETE", "lin.up", "a");
    assert_eq!(start["run"]["runId"], complete["run"]["runId"]);
    let up = sb
        .store("up_out", "a")
        .latest()
        .unwrap()
        .expect("published");
    let output = &complete["outputs"][0];
    assert_eq!(output["name"], "up_out");
    assert_eq!(
        output["facets"]["version"]["datasetVersion"],
        format!("1:{}", up.digest)
    );
    assert_eq!(output["outputFacets"]["outputStatistics"]["rowCount"], 2);
    assert_eq!(
        output["facets"]["schema"]["fields"],
        serde_json::json!([{"name": "id"}, {"name": "v"}])
    );
    assert_eq!(
        output["facets"]["dataQualityAssertions"]["assertions"][0]["success"],
        true
    );

    let down = find(&events, "COMPLETE", "lin.down", "a");
    assert_eq!(down["inputs"][0]["name"], "up_out");
    assert_eq!(
        down["inputs"][0]["facets"]["version"]["datasetVersion"],
        format!("1:{}", up.digest)
    );
    assert_ne!(down["run"]["runId"], complete["run"]["runId"]);

    let fail = find(&events, "FAIL", "lin.down", "b");
    let error = &fail["run"]["facets"]["errorMessage"];
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("deterministic: "),
        "{error}"
    );
    assert!(error["stackTrace"]
        .as_str()
        .unwrap_or_default()
        .contains("boom: bad input"));
    assert_eq!(
        find(&events, "START", "lin.down", "b")["run"]["runId"],
        fail["run"]["runId"]
    );
    assert_eq!(events.len(), 8, "{events:#?}");
}

// A collector that never answers does not fail the run or hold
// up its publications: the run ends within the bounded drain, publishes,
// warns on stderr, logs LINEAGE_UNDELIVERED and `weir status` notes it.
// A build without the `http` feature refuses a lineage URL.
#[cfg(feature = "http")]
#[test]
fn an_unresponsive_collector_never_fails_or_delays_a_run() {
    let (url, _collector) = receiver(true);
    let sb = sandbox(&format!("url = \"{url}\""));
    sb.script(
        "down.sh",
        "cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let started = Instant::now();
    let out = sb.run("RUN-L2", &[]);
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        stderr(&out).contains("warning: lineage: "),
        "{}",
        stderr(&out)
    );
    for (dataset, key) in [
        ("up_out", "a"),
        ("up_out", "b"),
        ("down_out", "a"),
        ("down_out", "b"),
    ] {
        assert!(sb.store(dataset, key).latest().unwrap().is_some());
    }
    let events = sb.events("RUN-L2");
    let published = events
        .iter()
        .filter(|e| e.state == State::Published)
        .count();
    assert_eq!(published, 4);
    assert!(events.iter().any(|e| e.state == State::LineageUndelivered));
    let status = sb.weir(&["status", "m.toml"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0));
    assert!(
        stdout(&status).contains("LINEAGE     run RUN-L2: "),
        "{}",
        stdout(&status)
    );
}

// `file = ...` appends the same events as JSON Lines.
#[test]
fn lineage_to_a_file_appends_valid_events() {
    let sb = sandbox("file = \"lineage.jsonl\"");
    let out = sb.run("RUN-L3", &["--partition", "a"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = std::fs::read_to_string(sb.path().join("lineage.jsonl")).expect("written");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let validator = validator();
    assert!(events.iter().all(|e| validator.is_valid(e)));
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["eventType"].as_str())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "START").count(), 2);
    assert_eq!(kinds.iter().filter(|k| **k == "COMPLETE").count(), 2);
    assert_eq!(events[0]["job"]["namespace"], "lin");
}

// `[lineage]` takes exactly one of `url` (http:// or https://) and `file`.
#[test]
fn lineage_section_needs_one_http_url_or_a_file() {
    for (body, code) in [
        (
            "url = \"http://x:1/\"\nfile = \"l.jsonl\"",
            "weir::manifest::lineage_sink",
        ),
        ("namespace = \"n\"", "weir::manifest::lineage_sink"),
        (
            "url = \"ftp://x/api/v1/lineage\"",
            "weir::manifest::lineage_url",
        ),
    ] {
        let sb = sandbox(body);
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        assert!(stderr(&out).contains(code), "{body}: {}", stderr(&out));
    }
    let sb = sandbox("file = \"l.jsonl\"");
    let lineage = sb.manifest().lineage.expect("configured");
    assert_eq!(lineage.namespace, "lin");
    assert_eq!(
        lineage.sink,
        weir::manifest::LineageSink::File(sb.path().join("l.jsonl"))
    );
}

// An attempt interrupted by Ctrl-C (SIGINT) ends its OpenLineage
// run with ABORT: the collector never sees a START left open.
#[test]
fn an_interrupted_attempt_is_aborted_in_lineage() {
    let _serial = crate::support::exclusive();
    let sb = sandbox("file = \"lineage.jsonl\"");
    sb.script("up.sh", "touch \"started_$WEIR_PARTITION\"\nsleep 30\n");
    let engine = crate::support::Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "RUN-L9", "--partition", "a"]),
        sb.path(),
        "RUN-L9",
    );
    crate::support::poll_until("the task running", Duration::from_secs(20), || {
        sb.path().join("started_a").exists()
    });
    engine.signal(libc::SIGINT);
    let out = engine.finish(Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let text = std::fs::read_to_string(sb.path().join("lineage.jsonl")).expect("written");
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let validator = validator();
    assert!(events.iter().all(|e| validator.is_valid(e)));
    let kinds: Vec<&str> = events
        .iter()
        .filter_map(|e| e["eventType"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["START", "ABORT"],
        "{text}\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(events[0]["run"]["runId"], events[1]["run"]["runId"]);
}

const DAYS: &str = r#"
[pipeline]
name = "days"
code_version = "1"
warehouse = "wh"

[pools.default]
slots = 2

[partitions.day]
kind = "daily"
start = "2026-09-01"
end = "2026-09-05"

[backfills.early]
from = "2026-09-01"
to = "2026-09-04"
pool = "default"
tasks = ["up"]
reason = "history"

[tasks.up]
command = ["sh", "up.sh"]
partitioned_by = "day"
output = { dataset = "up_out", grain = ["day"] }

[tasks.roll]
command = ["sh", "roll.sh"]
partitioned_by = "day"
inputs = [{ dataset = "up_out", window = [-2, 0] }]
output = { dataset = "rolled", grain = ["day"] }
gates = [{ check = "not_null", columns = ["v"] }]

[lineage]
file = "lineage.jsonl"
"#;

/// Days 09-01 to 09-04 of `up` published by backfill `early` (run
/// RUN-B); `roll` of a day is the three days up to it, its `v` empty on
/// 09-04 (a not_null gate fails).
fn days() -> Sandbox {
    let sb = Sandbox::new(DAYS);
    sb.script(
        "up.sh",
        "printf 'day,v\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "roll.sh",
        "v=1; [ \"$WEIR_PARTITION\" = 2026-09-04 ] && v=\n\
         printf 'day,v\\n%s,%s\\n' \"$WEIR_PARTITION\" \"$v\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb
        .weir(&["backfill", "m.toml", "early", "--run-id", "RUN-B"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    sb
}

fn lineage_events(sb: &Sandbox) -> Vec<Value> {
    let text = std::fs::read_to_string(sb.path().join("lineage.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The events of weir run `run`.
fn of_run(events: &[Value], run: &str) -> Vec<Value> {
    let parent = weir::lineage::uuid(&[run]);
    events
        .iter()
        .filter(|e| e["run"]["facets"]["parent"]["run"]["runId"] == parent.as_str())
        .cloned()
        .collect()
}

// Backfill and repair start their runs through the same session as `weir
// run`: their publications reach the lineage sink too.
#[test]
fn backfill_and_repair_runs_emit_lineage() {
    let sb = days();
    let backfill = of_run(&lineage_events(&sb), "RUN-B");
    for day in ["2026-09-01", "2026-09-02", "2026-09-03", "2026-09-04"] {
        find(&backfill, "COMPLETE", "days.up", day);
    }
    let out = sb.run("RUN-R", &["--partition", "2026-09-03", "--task", "roll"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let out = sb
        .weir(&[
            "repair",
            "m.toml",
            "up_out",
            "--partition",
            "2026-09-02",
            "--reason",
            "fix",
            "--run-id",
            "RUN-P",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let repair = of_run(&lineage_events(&sb), "RUN-P");
    let up = find(&repair, "COMPLETE", "days.up", "2026-09-02");
    assert_eq!(
        up["outputs"][0]["facets"]["version"]["datasetVersion"],
        format!(
            "2:{}",
            sb.store("up_out", "2026-09-02")
                .latest()
                .unwrap()
                .unwrap()
                .digest
        )
    );
    find(&repair, "COMPLETE", "days.roll", "2026-09-03");
    let validator = validator();
    for event in backfill.iter().chain(&repair) {
        let errors = validator.errors(event);
        assert!(errors.is_empty(), "{errors:?} in {event:#}");
    }
}

// An input read from several partitions (a window) is one input of one
// name, not one per partition: its partitions are an input facet.
#[test]
fn an_input_read_from_several_partitions_is_one_input_with_its_partitions() {
    let sb = days();
    let out = sb.run("RUN-W", &["--partition", "2026-09-03", "--task", "roll"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let events = of_run(&lineage_events(&sb), "RUN-W");
    let complete = find(&events, "COMPLETE", "days.roll", "2026-09-03");
    let inputs = complete["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 1, "{complete:#}");
    assert_eq!(inputs[0]["name"], "up_out");
    let pins: Vec<(String, u64, String)> = inputs[0]["inputFacets"]["weirPartitions"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_str().unwrap().to_owned(),
                p["generation"].as_u64().unwrap(),
                p["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, u64, String)> = ["2026-09-01", "2026-09-02", "2026-09-03"]
        .iter()
        .map(|day| {
            let latest = sb.store("up_out", day).latest().unwrap().unwrap();
            (day.to_string(), 1, latest.digest.to_string())
        })
        .collect();
    assert_eq!(pins, expected);
    let record = sb.store("rolled", "2026-09-03").latest().unwrap().unwrap();
    assert_eq!(
        inputs[0]["facets"]["version"]["datasetVersion"],
        record.input_snapshot["inputs"][0]["digest"]
    );
    // The gate that passed names its column too.
    assert_eq!(
        complete["outputs"][0]["facets"]["dataQualityAssertions"]["assertions"],
        serde_json::json!([
            { "assertion": "grain unique(day)", "success": true, "column": "day" },
            { "assertion": "not_null(v)", "success": true, "column": "v" },
        ])
    );
    let errors = validator().errors(complete);
    assert!(errors.is_empty(), "{errors:?} in {complete:#}");
}

// A gate failure's FAIL names the output and the failed gate as an
// OpenLineage data-quality assertion, with the column it checks.
#[test]
fn a_gate_failure_fails_with_the_failed_assertion() {
    let sb = days();
    let out = sb.run("RUN-G", &["--partition", "2026-09-04", "--task", "roll"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let events = of_run(&lineage_events(&sb), "RUN-G");
    let fail = find(&events, "FAIL", "days.roll", "2026-09-04");
    assert_eq!(fail["outputs"][0]["name"], "rolled");
    assert_eq!(
        fail["outputs"][0]["facets"]["dataQualityAssertions"]["assertions"],
        serde_json::json!([{ "assertion": "not_null(v)", "success": false, "column": "v" }])
    );
    let errors = validator().errors(fail);
    assert!(errors.is_empty(), "{errors:?} in {fail:#}");
}
