//! Reads have no side effects: `status`, `explain`, `report` and every
//! console page show the answer a run (or serve) last got from a command
//! sensor, with who gave it and when, or "not checked yet"; none of them
//! starts the command.

use std::time::Duration;

use crate::support::http;
use crate::support::{poll_until, stdout, Engine, Sandbox};

/// Two static partitions reading a feed whose sensor is a command; the
/// command leaves a file per question, so a test sees who asked.
const MANIFEST: &str = r#"
[pipeline]
name = "sensed"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b"]

[datasets.feed]
path = "feed/{partition}.csv"
ready = { command = ["sh", "sensor.sh", "{partition}"] }

[tasks.load]
command = ["sh", "-c", "cp \"$WEIR_INPUT_FEED\" \"$WEIR_OUTPUT_DIR/out.csv\""]
inputs = ["feed"]
output = { dataset = "loaded", format = "csv", grain = ["id"] }
"#;

fn sandbox(sensor: &str) -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    std::fs::create_dir(sb.path().join("feed")).unwrap();
    for key in ["a", "b"] {
        std::fs::write(sb.path().join(format!("feed/{key}.csv")), "id\n1\n").unwrap();
    }
    sb.script("sensor.sh", sensor);
    sb
}

/// The questions the sensor was asked so far (a line per question).
fn asked(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.path().join("asked"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `text` with every instant (`2026-12-06T15:40:01.123Z`) as `$TIME`.
fn redact_times(text: &str) -> String {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let fits = bytes.len() - i >= SHAPE.len()
            && SHAPE.iter().zip(&bytes[i..]).all(|(s, b)| match s {
                b'd' => b.is_ascii_digit(),
                other => other == b,
            });
        if fits {
            out.push_str("$TIME");
            i += SHAPE.len();
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

// Before any run, status says the sensor is not checked yet (it used to
// run the command); after a run, it shows the run's answer and when, and
// explain and the report say the same, all without asking the sensor.
#[test]
fn status_shows_not_checked_yet_then_the_answer_a_run_recorded() {
    let sb = sandbox("echo \"$1\" >> asked\nexit 1\n");
    let out = sb.weir_out(&["status", "m.toml"]);
    sb.check(&out).code(0).stdout(
        "nothing published yet in $SB/wh\n\
         missing: loaded: 2 expected partitions without a publication: a, b\n\
         WAITING     load a: external input `feed`: its sensor is not checked yet (status, explain and the console show only what `weir run` and `weir serve` found); `weir run m.toml --task load --partition a` asks it\n\
         WAITING     load b: external input `feed`: its sensor is not checked yet (status, explain and the console show only what `weir run` and `weir serve` found); `weir run m.toml --task load --partition b` asks it\n",
    );
    assert_eq!(asked(&sb), Vec::<String>::new(), "status ran the sensor");
    let out = sb.run("RUN-1", &["--partition", "a"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(asked(&sb), ["a"]);
    let out = sb.weir_out(&["status", "m.toml"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        redact_times(&stdout(&out)).replace(&sb.path().display().to_string(), "$SB"),
        "nothing published yet in $SB/wh\n\
         missing: loaded: 2 expected partitions without a publication: a, b\n\
         WAITING     load a: external input `feed` is not ready: `sh sensor.sh a` exited with 1 (checked by run RUN-1 at $TIME); put it in place, then `weir run m.toml --task load --partition a`\n\
         WAITING     load b: external input `feed`: its sensor is not checked yet (status, explain and the console show only what `weir run` and `weir serve` found); `weir run m.toml --task load --partition b` asks it\n"
    );
    let out = sb.weir_out(&["explain", "m.toml", "load", "--partition", "a"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = redact_times(&stdout(&out));
    assert!(
        text.contains("wait for the input: external input `feed` is not ready: `sh sensor.sh a` exited with 1 (checked by run RUN-1 at $TIME)"),
        "{text}"
    );
    let out = sb.weir_out(&["status", "m.toml", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["waiting"].as_array().unwrap().len(), 2, "{doc}");
    let report = sb.path().join("report.html");
    let out = sb.weir_out(&["report", "m.toml", "--out", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(std::fs::read_to_string(&report)
        .unwrap()
        .contains("`sh sensor.sh a` exited with 1 (checked by run RUN-1 at "));
    // A second run gets the same answer: the record keeps when it began.
    let first = std::fs::read_to_string(sb.path().join("wh/_sensed/load/a.json")).unwrap();
    let out = sb.run("RUN-2", &["--partition", "a"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let second: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.path().join("wh/_sensed/load/a.json")).unwrap(),
    )
    .unwrap();
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(second["since"], first["since"]);
    assert_eq!(second["by"], "RUN-2");
    assert_eq!(asked(&sb), ["a", "a"], "only the runs asked");
}

/// One GET to the console: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let r = http::get(addr, path, &[]);
    (r.status, r.body)
}

// Every console page ran the manifest's sensor commands one after another
// (seconds a page with slow sensors, every few seconds): now no page
// starts one, and each shows what the last run found.
#[cfg(feature = "console")]
#[test]
fn console_pages_never_run_a_sensor_command() {
    let sb = sandbox("echo \"$1\" >> asked\nsleep 5\nexit 1\n");
    let out = sb.run("RUN-1", &["--partition", "b"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(asked(&sb), ["b"]);
    let engine = Engine::spawn(
        sb.weir(&["console", "m.toml", "--http", "127.0.0.1:0"]),
        sb.path(),
        "console",
    );
    let out = sb.path().join("console.stdout");
    let mut addr = String::new();
    poll_until("the console listens", Duration::from_secs(30), || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        text.split("http://")
            .nth(1)
            .map(|rest| addr = rest.split('/').next().unwrap_or_default().to_owned())
            .is_some()
    });
    for path in [
        "/",
        "/api/status",
        "/api/problems",
        "/grid",
        "/instance?task=load&partition=a",
        "/instance?task=load&partition=b",
    ] {
        let (status, _) = get(&addr, path);
        assert_eq!(status, 200, "{path}");
    }
    assert_eq!(asked(&sb), ["b"], "a page ran the sensor");
    let (_, body) = get(&addr, "/api/status");
    assert!(
        body.contains("`sh sensor.sh b` exited with 1 (checked by run RUN-1 at "),
        "{body}"
    );
    assert!(body.contains("its sensor is not checked yet"), "{body}");
    let (_, page) = get(&addr, "/instance?task=load&partition=b");
    assert!(page.contains("checked by run RUN-1 at "), "{page}");
    engine.signal(libc::SIGTERM);
    assert_eq!(
        engine.finish(Duration::from_secs(20)).status.code(),
        Some(0)
    );
}

const HOURLY: &str = r#"
[pipeline]
name = "served"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[datasets.feed]
path = "feed/{partition}.csv"
ready = { command = ["sh", "sensor.sh", "{partition}"] }

[tasks.h]
command = ["sh", "-c", "cp \"$WEIR_INPUT_FEED\" \"$WEIR_OUTPUT_DIR/out.csv\""]
partitioned_by = "hour"
inputs = ["feed"]
output = { dataset = "hours", format = "csv", grain = ["id"] }
"#;

// serve's answers are recorded as a run's are: status shows what serve
// found for the hour it waits on, and when.
#[test]
fn status_shows_the_answer_serve_recorded() {
    let sb = Sandbox::new(HOURLY);
    std::fs::create_dir(sb.path().join("feed")).unwrap();
    std::fs::write(sb.path().join("feed/2026-09-20T10.csv"), "id\n1\n").unwrap();
    sb.script("sensor.sh", "echo \"$1\" >> asked\nexit 1\n");
    let mut cmd = sb.weir(&["serve", "m.toml"]);
    cmd.env("WEIR_NOW", "2026-09-20T11:30:00Z");
    let engine = Engine::spawn(cmd, sb.path(), "serve");
    let out = sb.path().join("serve.stdout");
    poll_until("serve waits on hour 10", Duration::from_secs(60), || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("WAIT h 2026-09-20T10")
    });
    let before = asked(&sb).len();
    let out = sb.weir_out(&["status", "m.toml", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let waiting = doc["waiting"].to_string();
    assert!(
        waiting.contains("`sh sensor.sh 2026-09-20T10` exited with 1 (checked by serve at "),
        "{waiting}"
    );
    engine.signal(libc::SIGTERM);
    assert_eq!(
        engine.finish(Duration::from_secs(30)).status.code(),
        Some(0)
    );
    // Only serve asked (it rechecks as it waits); status did not.
    assert!(before >= 1);
    assert!(
        asked(&sb).iter().all(|k| k == "2026-09-20T10"),
        "{:?}",
        asked(&sb)
    );
}
