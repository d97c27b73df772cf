//! Sensors: an external input that is not ready makes its instance WAITING,
//! not HELD and not a failure; `weir run --wait` rechecks it with backoff;
//! past the task's `sla` it is LATE; a sensor that fails fails the instance
//! with its stderr as evidence; a changed external input makes its
//! publication STALE as soon as status looks.

use std::time::{Duration, Instant};

use weir::events::State;
use weir::manifest::Manifest;

use crate::support::{
    assert_snapshot, ok, poll_until, repo, run_in, stderr, stdout, Engine, Sandbox, Visible,
};

/// A quarter-hour feed in New York whose files land under raw/<key>/ with a
/// `_SUCCESS` marker last, and an hourly rollup of it.
const MANIFEST: &str = r#"
[pipeline]
name = "feeds"
code_version = "1"
warehouse = "wh"

[partitions.quarter]
kind = "minutely"
every = 15
start = "2026-11-01T00:00"
end = "2026-11-01T03:00"
timezone = "America/New_York"

[partitions.hour]
kind = "hourly"
start = "2026-11-01T00"
end = "2026-11-01T02"
timezone = "America/New_York"

[datasets.raw]
path = "raw/{partition}/data.csv"
ready = { file = "raw/{partition}/_SUCCESS" }

[tasks.load]
command = ["sh", "-c", "cp \"$WEIR_INPUT_RAW\" \"$WEIR_OUTPUT_DIR/out.csv\""]
partitioned_by = "quarter"
inputs = ["raw"]
output = { dataset = "loaded", grain = ["id"] }

[tasks.hourly]
command = ["sh", "-c", "printf 'n\n%s\n' \"$(ls \"$WEIR_INPUT_LOADED\" | wc -l)\" > \"$WEIR_OUTPUT_DIR/h.csv\""]
partitioned_by = "hour"
inputs = ["loaded"]
output = { dataset = "hourly", grain = ["n"] }
"#;

/// The repeated hour's second quarter: its key carries the offset, and so
/// does the path the feed writes.
const KEY: &str = "2026-11-01T01:15-05:00";

fn sandbox(manifest: &str) -> Sandbox {
    let sb = Sandbox::new(manifest);
    std::fs::create_dir_all(sb.path().join("raw").join(KEY)).unwrap();
    std::fs::write(sb.path().join("raw").join(KEY).join("data.csv"), "id\n7\n").unwrap();
    sb
}

fn states(sb: &Sandbox, run: &str) -> Vec<(State, String, String)> {
    sb.events(run)
        .into_iter()
        .filter_map(|e| Some((e.state, e.task?, e.partition?)))
        .collect()
}

fn no_markers(sb: &Sandbox) {
    let marks = weir::store::marks::all(&sb.warehouse()).unwrap();
    assert!(marks.is_empty(), "no marker: {marks:?}");
}

// Without --wait, an input not ready is reported WAITING,
// exit 0, nothing published, no HELD marker; its downstream waits too
#[test]
fn without_wait_an_unready_input_is_waiting_and_exits_0() {
    let sb = sandbox(MANIFEST);
    let out = sb.run("r1", &["--partition", KEY, "--task", "load"]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 waiting; 0 retries\n  WAITING     load 2026-11-01T01:15-05:00: external input `raw` is not ready: raw/2026-11-01T01:15-05:00/_SUCCESS does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("");
    assert_eq!(
        stdout(&out),
        format!(
            "run r1: 1 task instance: 1 waiting; 0 retries\n  WAITING     load {KEY}: external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\nevents: {}/wh/_runs/r1/events.jsonl\n",
            sb.path().display()
        )
    );
    assert!(sb.warehouse().partitions("loaded").unwrap().is_empty());
    no_markers(&sb);
    // Nothing holds it: `weir retry` has nothing to release, and says why.
    let out = sb.weir_out(&["retry", "m.toml", "load", "--partition", KEY, "--note", "x"]);
    sb.check(&out).code(3).stdout("").stderr("error: refused: load 2026-11-01T01:15-05:00 waits for its input, not for a decision: external input `raw` is not ready: raw/2026-11-01T01:15-05:00/_SUCCESS does not exist; `weir retry` acts only on a HELD or QUARANTINED or ABANDONED or ACCEPTED instance\n  help: put it in place, then `weir run m.toml --task load --partition 2026-11-01T01:15-05:00`\n");
    assert!(
        stderr(&out).starts_with(&format!("error: refused: load {KEY} waits for its input, not for a decision: external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist;")),
        "{}",
        stderr(&out)
    );
    let events = states(&sb, "r1");
    assert!(
        events.contains(&(State::Waiting, "load".into(), KEY.into())),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|(s, _, _)| matches!(s, State::Held | State::Running | State::Failed)),
        "{events:?}"
    );
    // The hour waits for its one quarter not ready: WAITING, not SKIPPED.
    for other in ["01:00", "01:30", "01:45"] {
        let dir = sb.path().join(format!("raw/2026-11-01T{other}-05:00"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("data.csv"), "id\n1\n").unwrap();
        std::fs::write(dir.join("_SUCCESS"), "").unwrap();
    }
    let out = sb.run("r2", &["--partition", "2026-11-01T01-05:00"]);
    sb.check(&out).code(0).stdout("run r2: 5 task instances: 3 published, 2 waiting; 0 retries\n  WAITING     load 2026-11-01T01:15-05:00: external input `raw` is not ready: raw/2026-11-01T01:15-05:00/_SUCCESS does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\n  WAITING     hourly 2026-11-01T01-05:00: upstream `load` 2026-11-01T01:15-05:00 waits for its inputs\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("load 2026-11-01T01:00-05:00 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nload 2026-11-01T01:30-05:00 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\nload 2026-11-01T01:45-05:00 attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n");
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("run r2: 5 task instances: 3 published, 2 waiting; 0 retries\n  WAITING     load {KEY}: external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\n  WAITING     hourly 2026-11-01T01-05:00: upstream `load` {KEY} waits for its inputs\n")),
        "{text}"
    );
    let events = states(&sb, "r2");
    assert!(
        !events
            .iter()
            .any(|(s, _, _)| matches!(s, State::Skipped | State::Held)),
        "{events:?}"
    );
    assert!(sb.warehouse().partitions("hourly").unwrap().is_empty());
    no_markers(&sb);
    // The report's cell says WAITING, and why.
    ok(&sb.weir_out(&["report", "m.toml", "--out", "r.html"]));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    // The hover's lines are kept as newlines, and `/` is written `&#x2f;`
    // (the same text in a browser).
    assert!(
        html.contains(&format!("data-task=\"load\" data-partition=\"{KEY}\" data-state=\"waiting\" title=\"load {KEY} · waiting\nno generation\nexternal input `raw` is not ready: raw&#x2f;{KEY}&#x2f;_SUCCESS does not exist\"")),
        "{html}"
    );
    assert!(html.contains(
        "data-task=\"load\" data-partition=\"2026-11-01T01:00-05:00\" data-state=\"published\""
    ));
}

// A `_SUCCESS` that appears late: WAITING, then published
// within the run's --wait
#[test]
fn a_late_success_marker_is_waited_for_then_published() {
    let sb = sandbox(MANIFEST);
    let started = Instant::now();
    let engine = Engine::spawn(
        sb.weir(&[
            "run",
            "m.toml",
            "--run-id",
            "r1",
            "--task",
            "load",
            "--partition",
            KEY,
            "--wait",
            "30s",
        ]),
        sb.path(),
        "r1",
    );
    let log = weir::events::run_dir(&sb.path().join("wh"), "r1").join("events.jsonl");
    poll_until("the WAITING event", Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"WAITING\""))
    });
    std::thread::sleep(Duration::from_millis(700));
    std::fs::write(sb.path().join("raw").join(KEY).join("_SUCCESS"), "").unwrap();
    let out = engine.finish(Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("run r1: 1 task instance: 1 published; 0 retries\n"),
        "{}",
        stdout(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "rechecked, not waited out"
    );
    let events = states(&sb, "r1");
    let waiting = events
        .iter()
        .position(|e| *e == (State::Waiting, "load".into(), KEY.into()));
    let published = events
        .iter()
        .position(|e| *e == (State::Published, "load".into(), KEY.into()));
    assert!(waiting.is_some() && published > waiting, "{events:?}");
    assert_eq!(
        events
            .iter()
            .filter(|(s, _, _)| *s == State::Waiting)
            .count(),
        1,
        "one WAITING event however many rechecks: {events:?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|(s, _, _)| *s == State::Queued)
            .count(),
        1,
        "a recheck is no new queueing: {events:?}"
    );
    assert_eq!(Visible::of(&sb.store("loaded", KEY)).rows(), [["7"]]);
    no_markers(&sb);
}

// --wait ends: still WAITING, exit 0, after several checks
#[test]
fn a_wait_that_ends_leaves_the_instance_waiting() {
    let sb = sandbox(MANIFEST);
    let started = Instant::now();
    let out = sb.run(
        "r1",
        &["--partition", KEY, "--task", "load", "--wait", "1s"],
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let text = stdout(&out);
    // At least the first look, a doubling backoff, and the last look at the
    // deadline (how many fit in a second depends on the machine's load).
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("  WAITING     load {KEY}: external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist, still after ")))
        .unwrap_or_else(|| panic!("{text}"));
    let checks: u32 = line
        .split("still after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((3..=5).contains(&checks), "{line}");
    assert!(
        line.ends_with(
            " checks when --wait ended; nothing done, no marker: the next run checks again"
        ),
        "{line}"
    );
    assert!(sb.warehouse().partitions("loaded").unwrap().is_empty());
    no_markers(&sb);
}

// A sensor command exiting 2 is a sensor failure, with its
// stderr as evidence; exiting 1 is "not yet"
#[test]
fn a_sensor_exiting_2_fails_with_its_stderr() {
    let manifest = MANIFEST.replace(
        r#"ready = { file = "raw/{partition}/_SUCCESS" }"#,
        r#"ready = { command = ["sh", "check.sh", "{partition}"] }"#,
    );
    let sb = sandbox(&manifest);
    sb.script(
        "check.sh",
        "echo \"feed API for $1: 503 Service Unavailable\" >&2\nexit \"$(cat code)\"\n",
    );
    std::fs::write(sb.path().join("code"), "2").unwrap();
    let out = sb.run("r1", &["--partition", KEY, "--task", "load"]);
    sb.check(&out).code(1).stdout("run r1: 1 task instance: 1 sensor failure; 0 retries\n  SENSOR      load 2026-11-01T01:15-05:00: the sensor of external input `raw` failed: `sh check.sh 2026-11-01T01:15-05:00` exited with 2: feed API for 2026-11-01T01:15-05:00: 503 Service Unavailable; no marker: the next run checks again\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("load 2026-11-01T01:15-05:00: FAILED the sensor of external input `raw` failed: `sh check.sh 2026-11-01T01:15-05:00` exited with 2: feed API for 2026-11-01T01:15-05:00: 503 Service Unavailable; no marker: the next run checks again\n");
    assert_eq!(
        stdout(&out),
        format!(
            "run r1: 1 task instance: 1 sensor failure; 0 retries\n  SENSOR      load {KEY}: the sensor of external input `raw` failed: `sh check.sh {KEY}` exited with 2: feed API for {KEY}: 503 Service Unavailable; no marker: the next run checks again\nevents: {}/wh/_runs/r1/events.jsonl\n",
            sb.path().display()
        )
    );
    let failed = sb
        .events("r1")
        .into_iter()
        .find(|e| e.state == State::Failed)
        .unwrap();
    assert_eq!(failed.data["sensor"]["exit_code"], 2);
    assert_eq!(
        failed.data["sensor"]["stderr"],
        format!("feed API for {KEY}: 503 Service Unavailable\n")
    );
    assert!(sb.warehouse().partitions("loaded").unwrap().is_empty());
    no_markers(&sb);
    // status pages on the failing sensor, as the run found it and when,
    // without asking the sensor itself (a read starts no process); the
    // quarters without their file wait for it.
    std::fs::write(
        sb.path().join("check.sh"),
        "echo \"$1\" >> asked\nexit \"$(cat code)\"\n",
    )
    .unwrap();
    let out = sb.weir_out(&["status", "m.toml", "--check"]);
    let text = sb
        .check(&out)
        .code(4)
        .stderr("check failed: 1 instance needs attention\n")
        .stdout_text();
    let (head, rest) = text.split_once("(checked by run r1 at ").unwrap();
    let (_, tail) = rest.split_once(')').unwrap();
    assert_eq!(format!("{head}(checked by run r1 at $TIME){tail}"), "nothing published yet in $SB/wh\nmissing: hourly: 4 expected partitions without a publication: 2026-11-01T00, 2026-11-01T01-04:00, 2026-11-01T01-05:00, 2026-11-01T02\nmissing: loaded: 17 expected partitions without a publication: 2026-11-01T00:00, 2026-11-01T00:15, 2026-11-01T00:30, 2026-11-01T00:45, 2026-11-01T01:00-04:00, 2026-11-01T01:15-04:00, 2026-11-01T01:30-04:00, 2026-11-01T01:45-04:00, 2026-11-01T01:00-05:00, 2026-11-01T01:15-05:00, …\nSENSOR      load 2026-11-01T01:15-05:00: the sensor of external input `raw` failed: `sh check.sh 2026-11-01T01:15-05:00` exited with 2: feed API for 2026-11-01T01:15-05:00: 503 Service Unavailable (checked by run r1 at $TIME)\nWAITING     load: 11 earlier partitions without their external input too (`weir status --json` lists them)\nWAITING     load 2026-11-01T02:00: external input `raw` (./raw/2026-11-01T02:00/data.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:00`\nWAITING     load 2026-11-01T02:15: external input `raw` (./raw/2026-11-01T02:15/data.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:15`\nWAITING     load 2026-11-01T02:30: external input `raw` (./raw/2026-11-01T02:30/data.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:30`\nWAITING     load 2026-11-01T02:45: external input `raw` (./raw/2026-11-01T02:45/data.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:45`\nWAITING     load 2026-11-01T03:00: external input `raw` (./raw/2026-11-01T03:00/data.csv) does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T03:00`\n");
    assert!(
        !sb.path().join("asked").exists(),
        "status asked the sensor command"
    );
    // Exit 1: not yet. Exit 0: ready.
    std::fs::write(sb.path().join("code"), "1").unwrap();
    let out = sb.run("r2", &["--partition", KEY, "--task", "load"]);
    sb.check(&out).code(0).stdout("run r2: 1 task instance: 1 waiting; 0 retries\n  WAITING     load 2026-11-01T01:15-05:00: external input `raw` is not ready: `sh check.sh 2026-11-01T01:15-05:00` exited with 1; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("");
    assert!(stdout(&out).contains(&format!("  WAITING     load {KEY}: external input `raw` is not ready: `sh check.sh {KEY}` exited with 1;")), "{}", stdout(&out));
    std::fs::write(sb.path().join("code"), "0").unwrap();
    let out = sb.run("r3", &["--partition", KEY, "--task", "load"]);
    assert!(
        ok(&out).starts_with("run r3: 1 task instance: 1 published; 0 retries\n"),
        "{}",
        stdout(&out)
    );
}

// A waiting instance past its task's SLA is LATE in the
// run, in status (and --check pages on it) and in the report
#[test]
fn a_waiting_instance_past_its_sla_is_late() {
    let manifest = MANIFEST.replace(
        "output = { dataset = \"loaded\", grain = [\"id\"] }",
        "output = { dataset = \"loaded\", grain = [\"id\"] }\nsla = \"30m\"",
    );
    let sb = sandbox(&manifest);
    let out = sb.run("r1", &["--partition", KEY, "--task", "load"]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 late; 0 retries\n  LATE        load 2026-11-01T01:15-05:00: past its SLA deadline 2026-11-01T07:00:00Z, waiting: external input `raw` is not ready: raw/2026-11-01T01:15-05:00/_SUCCESS does not exist; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("");
    // The quarter ended at 06:30Z; 30 minutes later it was due.
    assert!(
        stdout(&out).contains(&format!("  LATE        load {KEY}: past its SLA deadline 2026-11-01T07:00:00Z, waiting: external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist;")),
        "{}",
        stdout(&out)
    );
    ok(&sb.weir_out(&["report", "m.toml", "--out", "r.html"]));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    assert!(
        html.contains(&format!(
            "data-task=\"load\" data-partition=\"{KEY}\" data-state=\"late\""
        )),
        "{html}"
    );
    let late = sb
        .events("r1")
        .into_iter()
        .find(|e| e.state == State::Late)
        .unwrap();
    assert_eq!(late.data["deadline"], "2026-11-01T07:00:00Z");
    let out = sb.weir_out(&["status", "m.toml", "--check"]);
    sb.check(&out).code(4).stdout("nothing published yet in $SB/wh\nmissing: hourly: 4 expected partitions without a publication: 2026-11-01T00, 2026-11-01T01-04:00, 2026-11-01T01-05:00, 2026-11-01T02\nmissing: loaded: 17 expected partitions without a publication: 2026-11-01T00:00, 2026-11-01T00:15, 2026-11-01T00:30, 2026-11-01T00:45, 2026-11-01T01:00-04:00, 2026-11-01T01:15-04:00, 2026-11-01T01:30-04:00, 2026-11-01T01:45-04:00, 2026-11-01T01:00-05:00, 2026-11-01T01:15-05:00, …\nLATE        load 2026-11-01T00:00: not published by its SLA deadline 2026-11-01T04:45:00Z\nLATE        load 2026-11-01T00:15: not published by its SLA deadline 2026-11-01T05:00:00Z\nLATE        load 2026-11-01T00:30: not published by its SLA deadline 2026-11-01T05:15:00Z\nLATE        load 2026-11-01T00:45: not published by its SLA deadline 2026-11-01T05:30:00Z\nLATE        load 2026-11-01T01:00-04:00: not published by its SLA deadline 2026-11-01T05:45:00Z\nLATE        load 2026-11-01T01:15-04:00: not published by its SLA deadline 2026-11-01T06:00:00Z\nLATE        load 2026-11-01T01:30-04:00: not published by its SLA deadline 2026-11-01T06:15:00Z\nLATE        load 2026-11-01T01:45-04:00: not published by its SLA deadline 2026-11-01T06:30:00Z\nLATE        load 2026-11-01T01:00-05:00: not published by its SLA deadline 2026-11-01T06:45:00Z\nLATE        load 2026-11-01T01:15-05:00: not published by its SLA deadline 2026-11-01T07:00:00Z\nLATE        load 2026-11-01T01:30-05:00: not published by its SLA deadline 2026-11-01T07:15:00Z\nLATE        load 2026-11-01T01:45-05:00: not published by its SLA deadline 2026-11-01T07:30:00Z\nLATE        load 2026-11-01T02:00: not published by its SLA deadline 2026-11-01T07:45:00Z\nLATE        load 2026-11-01T02:15: not published by its SLA deadline 2026-11-01T08:00:00Z\nLATE        load 2026-11-01T02:30: not published by its SLA deadline 2026-11-01T08:15:00Z\nLATE        load 2026-11-01T02:45: not published by its SLA deadline 2026-11-01T08:30:00Z\nLATE        load 2026-11-01T03:00: not published by its SLA deadline 2026-11-01T08:45:00Z\nWAITING     load: 12 earlier partitions without their external input too (`weir status --json` lists them)\nWAITING     load 2026-11-01T02:00: external input `raw` is not ready: raw/2026-11-01T02:00/_SUCCESS does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:00`\nWAITING     load 2026-11-01T02:15: external input `raw` is not ready: raw/2026-11-01T02:15/_SUCCESS does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:15`\nWAITING     load 2026-11-01T02:30: external input `raw` is not ready: raw/2026-11-01T02:30/_SUCCESS does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:30`\nWAITING     load 2026-11-01T02:45: external input `raw` is not ready: raw/2026-11-01T02:45/_SUCCESS does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T02:45`\nWAITING     load 2026-11-01T03:00: external input `raw` is not ready: raw/2026-11-01T03:00/_SUCCESS does not exist; put it in place, then `weir run m.toml --task load --partition 2026-11-01T03:00`\n").stderr("check failed: 17 instances need attention\n");
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "LATE        load {KEY}: not published by its SLA deadline 2026-11-01T07:00:00Z\n"
        )),
        "{text}"
    );
    let json = sb.status_json();
    let waiting: Vec<&serde_json::Value> = json["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["partition"] == KEY)
        .collect();
    assert_eq!(
        waiting[0]["detail"],
        format!("external input `raw` is not ready: raw/{KEY}/_SUCCESS does not exist"),
        "{json}"
    );
    no_markers(&sb);
}

// An external input corrected after its partition was
// published makes that publication STALE at once, in status and plan
#[test]
fn a_changed_external_input_is_stale_when_status_looks() {
    let sb = sandbox(MANIFEST);
    std::fs::write(sb.path().join("raw").join(KEY).join("_SUCCESS"), "").unwrap();
    ok(&sb.run("r1", &["--partition", KEY, "--task", "load"]));
    let status = ok(&sb.weir_out(&["status", "m.toml"]));
    assert!(!status.contains("STALE"), "{status}");
    std::fs::write(sb.path().join("raw").join(KEY).join("data.csv"), "id\n8\n").unwrap();
    let status = ok(&sb.weir_out(&["status", "m.toml"]));
    assert!(
        status.contains(&format!("STALE       load {KEY}: external input `raw` (raw/{KEY}/data.csv) changed since this publication read it: sha256:")),
        "{status}"
    );
    let json = sb.status_json();
    assert_eq!(json["stale"].as_array().unwrap().len(), 1, "{json}");
    let plan = ok(&sb.weir_out(&["plan", "m.toml", "--task", "load", "--partition", KEY]));
    assert!(
        plan.contains(&format!("load {KEY}: external input `raw` (raw/{KEY}/data.csv) changed since this publication read it")),
        "{plan}"
    );
    // The rerun it names reads the correction.
    ok(&sb.run("r2", &["--partition", KEY, "--task", "load"]));
    assert_eq!(Visible::of(&sb.store("loaded", KEY)).rows(), [["8"]]);
    let status = ok(&sb.weir_out(&["status", "m.toml"]));
    assert!(!status.contains("STALE"), "{status}");
}

// A watermark sensor waits until the source's committed
// position reaches the period's end
#[test]
fn a_watermark_short_of_the_period_end_is_waiting() {
    let manifest = MANIFEST.replace(
        r#"ready = { file = "raw/{partition}/_SUCCESS" }"#,
        "watermark = \"raw/position\"\nready = { watermark_at_least = \"period_end\" }",
    );
    let sb = sandbox(&manifest);
    // The quarter 01:15-05:00 ends at 06:30Z.
    std::fs::write(sb.path().join("raw/position"), "2026-11-01T06:29:00Z\n").unwrap();
    let out = sb.run("r1", &["--partition", KEY, "--task", "load"]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 waiting; 0 retries\n  WAITING     load 2026-11-01T01:15-05:00: external input `raw` is not ready: its watermark is at 2026-11-01T06:29:00Z, short of the period's end 2026-11-01T06:30:00Z; nothing done, no marker: the next run checks again (`--wait DURATION` waits for it)\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("");
    assert!(stdout(&out).contains("external input `raw` is not ready: its watermark is at 2026-11-01T06:29:00Z, short of the period's end 2026-11-01T06:30:00Z;"), "{}", stdout(&out));
    std::fs::write(
        sb.path().join("raw/position"),
        "2026-11-01T01:30:00-05:00\n",
    )
    .unwrap();
    assert!(ok(&sb.run("r2", &["--partition", KEY, "--task", "load"]))
        .starts_with("run r2: 1 task instance: 1 published"));
    // The source moves its committed position on: what was published read
    // the old one, and status says so at once.
    std::fs::write(
        sb.path().join("raw/position"),
        "2026-11-01T02:00:00-05:00\n",
    )
    .unwrap();
    let status = ok(&sb.weir_out(&["status", "m.toml"]));
    assert!(
        status.contains(&format!("STALE       load {KEY}: the watermark of external input `raw` is at 2026-11-01T02:00:00-05:00, this publication read it at 2026-11-01T01:30:00-05:00")),
        "{status}"
    );
}

// `ready` mistakes are located diagnostics
#[test]
fn a_bad_ready_is_a_located_diagnostic() {
    let path = repo().join("tests/fixtures/bad/bad_ready.toml");
    let errors = Manifest::load(&path).unwrap_err();
    let first = &errors.errors[0];
    assert_eq!(first.code, "weir::manifest::bad_ready");
    assert_eq!(first.line_col(), Some((13, 32)));
    let out = run_in(
        &repo().join("tests/fixtures/bad"),
        &["validate", "bad_ready.toml"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_snapshot(
        &repo().join("tests/fixtures/bad/bad_ready.stderr"),
        &stderr(&out),
    );
    let cases = [
        (
            "ready = {}",
            "weir::manifest::bad_ready",
            "`ready` of dataset `raw` names no sensor",
        ),
        (
            "ready = { file = \"a\", command = [\"true\"] }",
            "weir::manifest::bad_ready",
            "`ready` of dataset `raw` names more than one sensor",
        ),
        (
            "ready = { watermark_at_least = \"period_end\" }",
            "weir::manifest::bad_ready",
            "dataset `raw` waits for its watermark but declares none",
        ),
        (
            "ready = { command = [] }",
            "weir::manifest::empty_value",
            "`ready.command` of dataset `raw` has no program",
        ),
        (
            "ready = { file = \" \" }",
            "weir::manifest::empty_value",
            "`ready.file` of dataset `raw` is empty",
        ),
        (
            "ready = { when = \"now\" }",
            "weir::manifest::unknown_key",
            "unknown key `when`",
        ),
    ];
    // A watermark's period end needs a task with a period.
    let sb = Sandbox::new(
        &MANIFEST
            .replace(
                r#"ready = { file = "raw/{partition}/_SUCCESS" }"#,
                "watermark = \"raw/position\"\nready = { watermark_at_least = \"period_end\" }",
            )
            .replace("partitioned_by = \"quarter\"", "partitioned_by = []"),
    );
    let errors = Manifest::load(&sb.path().join("m.toml")).unwrap_err();
    assert_eq!(errors.errors.len(), 1, "{:?}", errors.errors);
    assert_eq!(errors.errors[0].code, "weir::manifest::bad_ready");
    assert_eq!(
        errors.errors[0].message,
        "task `load` reads `raw`, which waits for its watermark to reach the period's end, but the task has no time dimension"
    );
    assert_eq!(errors.errors[0].line_col().map(|(l, _)| l), Some(28));
    for (ready, code, message) in cases {
        let sb = Sandbox::new(
            &MANIFEST.replace(r#"ready = { file = "raw/{partition}/_SUCCESS" }"#, ready),
        );
        let errors = Manifest::load(&sb.path().join("m.toml")).unwrap_err();
        let first = &errors.errors[0];
        assert_eq!(
            (first.code, first.message.as_str()),
            (code, message),
            "{ready}"
        );
        assert!(
            first.line_col().is_some_and(|(line, _)| line == 22),
            "{ready}: {:?}",
            first.line_col()
        );
        assert!(first.help.is_some(), "{ready}");
    }
}
