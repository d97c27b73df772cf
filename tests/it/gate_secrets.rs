//! A secret a task writes into data that fails a gate: the gate failure
//! quotes the row, and its text travels into the event log, the
//! quarantine marker, `candidate.json`, the run's summary, status,
//! explain, the report and the notification outbox. Every one of them
//! holds it redacted; only the data file itself keeps it. (A header is
//! for a `url` target: the `http` feature.)
#![cfg(feature = "http")]

use std::path::Path;

use weir::events::State;

use crate::support::Sandbox;

/// The value of a notification header read from `env:`, which a task is
/// handed only when its `env` passes it (here, to write it into a row).
const HEADER_SECRET: &str = "hdr-5ecret-90817";
/// A task's own `env.set` value read from `file:`.
const FILE_SECRET: &str = "f1le-5ecret-31337";

const MANIFEST: &str = r#"
[pipeline]
name = "gs"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["p"]

[tasks.inherits]
command = ["sh", "inherits.sh"]
env = { pass = ["PATH", "HOOK_TOKEN"] }
output = { dataset = "inherits", format = "csv", grain = ["id"] }
gates = [{ check = "accepted_values", column = "status", values = ["paid"] }]

[tasks.own]
command = ["sh", "own.sh"]
env = { pass = ["PATH"], set = { API = "file:api.secret" } }
output = { dataset = "own", format = "jsonl", grain = ["id"] }
gates = [{ check = "accepted_values", column = "status", values = ["paid"] }]

[notify.pager]
url = "http://127.0.0.1:9/hook"
on = ["failed"]
headers = { Authorization = "env:HOOK_TOKEN" }
"#;

/// Every file under `dir` (but the candidates' data, which is the task's
/// own output) whose bytes hold `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "data") {
                    dirs.push(path);
                }
            } else if path.file_name().is_some_and(|n| n != "api.secret") {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if String::from_utf8_lossy(&bytes).contains(needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

// A row holding a secret failed its gate, and the gate's message quoted it
// into events, the marker, status, explain, the report and the webhook's
// outbox. The manifest's secrets (task `env:`/`file:` values, notification
// and lineage headers) are now redacted where the failure is built.
#[test]
fn a_secret_in_a_failing_row_is_redacted_everywhere_the_gate_failure_goes() {
    let sb = Sandbox::new(MANIFEST);
    std::fs::write(sb.path().join("api.secret"), format!("{FILE_SECRET}\n")).expect("secret");
    sb.script(
        "inherits.sh",
        "printf 'id,status\\n1,paid\\n2,%s\\n' \"$HOOK_TOKEN\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "own.sh",
        "printf '{\"id\":1,\"status\":\"%s\"}\\n' \"$API\" > \"$WEIR_OUTPUT_DIR/out.jsonl\"\n",
    );
    let weir = |args: &[&str]| {
        let out = sb
            .weir(args)
            .env("HOOK_TOKEN", HEADER_SECRET)
            .output()
            .expect("weir runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, run) = weir(&["run", "m.toml", "--run-id", "R1"]);
    assert_eq!(code, Some(1), "{run}");
    // The failures are told, the secret in them redacted.
    let failed: Vec<(String, String)> = sb
        .events("R1")
        .into_iter()
        .filter(|e| e.state == State::GateFailed)
        .map(|e| (e.task.unwrap_or_default(), e.detail))
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for (task, detail) in &failed {
        assert!(detail.contains("[redacted]"), "{task}: {detail}");
    }
    // The data itself keeps what the task wrote.
    assert_eq!(
        files_holding(sb.path(), HEADER_SECRET),
        Vec::<String>::new()
    );
    let mut shown = vec![("run", run)];
    for args in [
        &["status", "m.toml"][..],
        &["status", "m.toml", "--json"],
        &["explain", "m.toml", "inherits", "--partition", "p"],
        &["explain", "m.toml", "own", "--partition", "p", "--json"],
        &["events", "m.toml"],
        &["report", "m.toml", "--out", "report.html"],
        &["run", "m.toml", "--run-id", "R2"],
    ] {
        let (_, text) = weir(args);
        shown.push((args[0], text));
    }
    for secret in [HEADER_SECRET, FILE_SECRET] {
        assert_eq!(
            files_holding(sb.path(), secret),
            Vec::<String>::new(),
            "{secret}"
        );
        for (what, text) in &shown {
            assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
        }
    }
    // The notification was kept in the outbox (its receiver is down),
    // and it told the failure.
    assert!(
        files_holding(&sb.path().join("wh/_notify"), "[redacted]").len() >= 2,
        "{:?}",
        files_holding(&sb.path().join("wh"), "[redacted]")
    );
}
