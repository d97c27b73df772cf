//! `weir serve` left running on a mixed pipeline: lanes (a slow task never
//! costs a fast one its periods), late data waited for within its bound and
//! given up past it with that reason, a schedule that means a run, a clock
//! that disagrees with the warehouse's, and the decision log as JSON.

use std::time::Duration;

use weir::events::State;

use crate::serve::{serve_events, Serve};
use crate::support::Sandbox;

const MIXED: &str = r#"
[pipeline]
name = "mixed"
code_version = "1"
warehouse = "wh"

[partitions.minute]
kind = "minutely"
every = 1
start = "2026-09-20T00:00"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[pools.slow]
slots = 1

[datasets.late_raw]
path = "late/{partition}/rows.csv"
format = "csv"
ready = { file = "late/{partition}/_SUCCESS" }

[datasets.gone_raw]
path = "gone/{partition}/rows.csv"
format = "csv"
ready = { file = "gone/{partition}/_SUCCESS" }

[tasks.fast]
command = ["sh", "m.sh"]
partitioned_by = "minute"
output = { dataset = "fast", grain = ["minute"] }

[tasks.slow]
command = ["sh", "slow.sh"]
partitioned_by = "hour"
pool = "slow"
timeout = "10m"
output = { dataset = "slow", grain = ["hour"] }

[tasks.late]
command = ["sh", "m.sh"]
inputs = ["late_raw"]
partitioned_by = "minute"
sla = "10m"
output = { dataset = "late", grain = ["minute"] }

[tasks.gone]
command = ["sh", "m.sh"]
inputs = ["gone_raw"]
partitioned_by = "minute"
sla = "30s"
wait = "1m"
output = { dataset = "gone", grain = ["minute"] }

[tasks.snap]
command = ["sh", "snap.sh"]
partitioned_by = []
schedule = "* * * * *"
output = { dataset = "snap", grain = ["n"] }
"#;

const MINUTE: &str =
    "printf 'minute,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n";

fn mixed() -> Sandbox {
    let sb = Sandbox::new(MIXED);
    sb.script("m.sh", MINUTE);
    sb.script(
        "slow.sh",
        "sleep 200\nprintf 'hour,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    // An API snapshot: no inputs, the same rows every time.
    sb.script(
        "snap.sh",
        "printf 'n\\n1\\n' > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    for (dir, minute) in [("late", "2026-09-20T10:58"), ("gone", "2026-09-20T10:58")] {
        let d = sb.path().join(dir).join(minute);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("rows.csv"), "x\n1\n").unwrap();
    }
    sb
}

fn generations(sb: &Sandbox, dataset: &str, key: &str) -> usize {
    sb.store(dataset, key).history().unwrap().len()
}

// A mixed pipeline, in real time (about two minutes): while
// `slow` runs 200 s in its own pool, `fast` publishes every minute; `late`'s
// input comes 70 s after its minute ended and is published (its sla is 10
// minutes); `gone`'s never comes and is MISSED after its 1 minute wait,
// with that reason (LATE first, past its 30 s sla); `snap` (no inputs) makes a generation at every firing.
#[test]
fn a_mixed_pipeline_keeps_every_lane_moving() {
    let sb = mixed();
    let serve = Serve::start(&sb, "2026-09-20T10:59:55Z");
    serve.wait_for(&["START slow 2026-09-20T09"]);
    serve.wait_for(&["WAIT late 2026-09-20T10:58", "_SUCCESS"]);
    // 70 s after the minute 10:58 ended (10:59:00).
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(15));
    std::fs::write(sb.path().join("late/2026-09-20T10:58/_SUCCESS"), "").unwrap();
    serve.wait_for(&["DONE fast 2026-09-20T11:01 PUBLISHED"]);
    serve.wait_for(&["DONE late 2026-09-20T10:58 PUBLISHED"]);
    serve.wait_for(&["MISSED gone 2026-09-20T10:58", "gave up waiting after 1m"]);
    let lines = serve.lines();
    assert!(
        started.elapsed() < Duration::from_secs(180),
        "the test's timeline slipped: {lines:#?}"
    );
    // `slow` is still running: its lane held no one back.
    assert!(!lines.iter().any(|l| l.contains("DONE slow")), "{lines:#?}");
    for minute in ["10:58", "10:59", "11:00", "11:01"] {
        let key = format!("2026-09-20T{minute}");
        assert_eq!(generations(&sb, "fast", &key), 1, "fast {key}: {lines:#?}");
    }
    let missed: Vec<String> = serve_events(&sb, State::Missed)
        .into_iter()
        .map(|e| format!("{} {}", e.task.unwrap(), e.partition.unwrap()))
        .collect();
    assert!(
        !missed.iter().any(|m| !m.starts_with("gone ")),
        "{missed:?}"
    );
    let gone = serve_events(&sb, State::Missed)
        .into_iter()
        .find(|e| e.partition.as_deref() == Some("2026-09-20T10:58"))
        .expect("gone 10:58 is MISSED");
    assert_eq!(gone.data["reason"], "waited", "{:?}", gone.data);
    // Past its 30 s sla while it waited: LATE, before it was given up.
    let mut late: Vec<String> = serve_events(&sb, State::Late)
        .into_iter()
        .filter(|e| e.task.as_deref() == Some("gone"))
        .map(|e| e.partition.unwrap())
        .collect();
    assert!(late.contains(&"2026-09-20T10:58".to_string()), "{late:?}");
    let said = late.len();
    late.dedup();
    assert_eq!(late.len(), said, "LATE once per partition: {late:?}");
    // One WAIT line while the reason stayed the same.
    let waits = lines
        .iter()
        .filter(|l| l.contains("WAIT late 2026-09-20T10:58"))
        .count();
    assert_eq!(waits, 1, "{lines:#?}");
    // A generation per firing (11:00, 11:01), though nothing changed.
    assert!(
        generations(&sb, "snap", "all") >= 2,
        "snap: {} generations: {lines:#?}",
        generations(&sb, "snap", "all")
    );
    let status = sb
        .weir(&["status", "m.toml", "--json"])
        .env("WEIR_NOW", "2026-09-20T11:03:00Z")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&crate::support::ok(&status)).unwrap();
    let recorded = doc["serve"]["missed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["task"] == "gone" && m["partition"] == "2026-09-20T10:58")
        .cloned()
        .unwrap_or_default();
    assert!(
        recorded["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("gave up waiting after 1m")),
        "{}",
        doc["serve"]
    );
    let (code, lines) = serve.stop();
    // SIGTERM stopped `slow`'s attempt.
    assert_eq!(code, 143, "{lines:#?}");
}

// A serve whose clock is ten minutes ahead of the warehouse's decides
// nothing: no period is started or recorded MISSED before it has ended by
// the warehouse's reckoning.
#[test]
fn a_clock_ahead_of_the_warehouse_decides_nothing() {
    let sb = mixed();
    let mut cmd = sb.weir(&["serve", "m.toml"]);
    cmd.env("WEIR_CLOCK_OFFSET", "10m");
    let serve = Serve::spawn(cmd, "");
    serve.wait_for(&["SKEW", "s ahead of the warehouse's"]);
    std::thread::sleep(Duration::from_secs(2));
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains(" START ") || l.contains(" MISSED ")),
        "{lines:#?}"
    );
    assert!(!sb.path().join("wh/_serve/progress").exists());
}

// `--log-format json`: one object a line, each with the decision, task
// and partition, for a log shipper.
#[test]
fn the_decision_log_is_json_lines_on_request() {
    let sb = mixed();
    let serve = Serve::spawn(
        sb.weir(&["serve", "m.toml", "--log-format", "json"]),
        "2026-09-20T10:59:55Z",
    );
    serve.wait_for(&["\"decision\":\"DONE\"", "\"task\":\"fast\""]);
    let (_, lines) = serve.stop();
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(v["pipeline"], "mixed", "{line}");
        assert!(v["decision"].is_string(), "{line}");
    }
    let done = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["decision"] == "DONE" && v["task"] == "fast")
        .unwrap();
    assert_eq!(done["partition"], "2026-09-20T10:58");
    assert!(done["detail"].as_str().unwrap().starts_with("PUBLISHED"));
}

const SLOW_MINUTES: &str = r#"
[pipeline]
name = "mixed"
code_version = "1"
warehouse = "wh"

[partitions.minute]
kind = "minutely"
every = 1
start = "2026-09-20T00:00"

[pools.wide]
slots = 4

[tasks.m]
command = ["sh", "m.sh"]
partitioned_by = "minute"
pool = "wide"
output = { dataset = "minutes", grain = ["minute"] }
"#;

// Killed -9 while two periods run (claimed, unpublished): the restart
// after downtime runs only the newest due period and records every other
// one MISSED, the two that were running included; none is left neither
// run nor recorded.
#[test]
fn periods_running_when_serve_is_killed_are_missed_or_run_after_the_restart() {
    let sb = Sandbox::new(SLOW_MINUTES);
    sb.script("m.sh", &format!("[ -f slow ] && sleep 200\n{MINUTE}"));
    std::fs::write(sb.path().join("slow"), "").unwrap();
    let serve = Serve::start(&sb, "2026-09-20T10:59:58Z");
    // The first start's period, then the next one: both running.
    serve.wait_for(&["START m 2026-09-20T10:58"]);
    serve.wait_for(&["START m 2026-09-20T10:59"]);
    // kill -9 (what dropping a Serve does).
    drop(serve);
    std::fs::remove_file(sb.path().join("slow")).unwrap();
    let serve = Serve::start(&sb, "2026-09-20T11:05:30Z");
    serve.wait_for(&["DONE m 2026-09-20T11:04 PUBLISHED"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let mut missed: Vec<String> = serve_events(&sb, State::Missed)
        .into_iter()
        .map(|e| e.partition.unwrap())
        .collect();
    missed.sort();
    let expected: Vec<String> = ["10:58", "10:59", "11:00", "11:01", "11:02", "11:03"]
        .iter()
        .map(|m| format!("2026-09-20T{m}"))
        .collect();
    assert_eq!(missed, expected, "{lines:#?}");
}
