//! Crashes (SIGKILL of the engine, via WEIR_FAULT) at the points of the
//! publish path: state is either not published or published once, and a
//! rerun converges on exactly what an uninterrupted run publishes.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

use weir::events::State;

use crate::support::{states, stderr, stdout, Sandbox, Visible};

const MANIFEST: &str = r#"
[pipeline]
name = "crash"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["p"]

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
"#;

const SCRIPT: &str = r#"printf 'id,v\n1,a\n2,b\n' > "$WEIR_OUTPUT_DIR/one.csv"
printf 'id,v\n3,c\n' > "$WEIR_OUTPUT_DIR/two.csv"
"#;

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script("t.sh", SCRIPT);
    sb
}

fn crash_at(sb: &Sandbox, point: &str, run_id: &str) -> Output {
    sb.weir(&["run", "m.toml", "--run-id", run_id])
        .env("WEIR_FAULT", format!("{point}@t/p:crash"))
        .output()
        .expect("weir runs")
}

/// What an uninterrupted run publishes, in a sandbox of its own.
fn uninterrupted_digest() -> String {
    let sb = sandbox();
    let out = sb.run("clean", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    Visible::of(&sb.store("out", "p")).record.digest
}

#[test]
fn crash_after_candidate_before_ack_leaves_two_candidates_one_generation() {
    let sb = sandbox();
    let store = sb.store("out", "p");
    let out = crash_at(&sb, "after_candidate", "crashed");
    assert_eq!(out.status.signal(), Some(9), "killed by SIGKILL: {out:?}");
    assert_eq!(store.latest().unwrap(), None, "nothing published");
    assert!(sb.entries("out", "p", "log").is_empty());
    let s = states(&sb.events("crashed"), "t", "p");
    assert_eq!(s.last(), Some(&State::Audited), "{s:?}");
    assert!(!s.contains(&State::Published));

    let out = sb.run("again", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(states(&sb.events("again"), "t", "p").contains(&State::Published));
    assert_eq!(sb.records("out", "p").len(), 1, "exactly one generation");
    let attempts = sb.entries("out", "p", "attempts");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    for a in &attempts {
        let candidate = sb
            .path()
            .join("wh/out/p/attempts")
            .join(a)
            .join("candidate.json");
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&candidate).unwrap()).unwrap();
        assert_eq!(doc["passed"], true, "{a}");
        assert_eq!(doc["rows"], 3, "{a}");
    }
    let visible = Visible::of(&store);
    assert_eq!(
        visible.record.token.get(),
        2,
        "the rerun's attempt published"
    );
    assert_eq!(visible.record.digest, uninterrupted_digest());
    assert_eq!(
        visible.recomputed_digest(),
        (3, visible.record.digest.clone())
    );
}

#[test]
fn crash_after_commit_before_event() {
    let sb = sandbox();
    let store = sb.store("out", "p");
    let out = crash_at(&sb, "after_commit", "crashed");
    assert_eq!(out.status.signal(), Some(9), "killed by SIGKILL: {out:?}");
    assert_eq!(
        store.generations().unwrap().len(),
        1,
        "the record is durable"
    );
    let s = states(&sb.events("crashed"), "t", "p");
    assert!(!s.contains(&State::Published), "never acknowledged: {s:?}");
    assert_eq!(s.last(), Some(&State::Audited), "{s:?}");
    let published = Visible::of(&store);
    assert_eq!(published.record.digest, uninterrupted_digest());

    let out = sb.run("again", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        states(&sb.events("again"), "t", "p"),
        [State::Queued, State::AlreadyPublished]
    );
    assert_eq!(
        store.generations().unwrap().len(),
        1,
        "still one generation"
    );
    assert_eq!(sb.entries("out", "p", "tokens").len(), 1, "no new attempt");
    assert_eq!(Visible::of(&store).record, published.record);
}

#[test]
fn torn_event_line_is_reported_not_fatal() {
    let sb = sandbox();
    assert_eq!(sb.run("r1", &[]).status.code(), Some(0));
    let log = sb.path().join("wh/_runs/r1/events.jsonl");
    let whole = sb.events("r1");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(br#"{"format_version":1,"ts":"2026-11-29T00:00"#)
        .unwrap();

    for args in [
        &["events", "m.toml"][..],
        &["events", "m.toml", "--run", "r1"][..],
    ] {
        let out = sb.weir(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert_eq!(
            text.lines().count(),
            whole.len(),
            "{args:?}: every whole line printed"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("PUBLISHED") && l.contains(" t ")),
            "{args:?}: {text}"
        );
        let err = stderr(&out);
        assert!(
            err.contains("events.jsonl:") && err.contains("torn last line"),
            "{args:?}: {err}"
        );
    }
    let out = sb.weir(&["events", "m.toml", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let parsed: Vec<weir::events::EventRecord> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, whole, "--json prints every whole record as stored");
}

#[test]
fn reusing_a_run_id_after_a_torn_line_loses_no_event() {
    let sb = sandbox();
    assert_eq!(sb.run("r1", &[]).status.code(), Some(0));
    let log = sb.path().join("wh/_runs/r1/events.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(br#"{"format_version":1,"ts":"2026-11-29T00:00"#)
        .unwrap();
    // The same run id again (a scheduler resuming the crashed run).
    let out = sb.run("r1", &["--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (records, bad) = weir::events::read_log(&log).unwrap();
    assert_eq!(bad.len(), 1, "only the fragment is bad: {bad:?}");
    let of = |state: State| records.iter().filter(|r| r.state == state).count();
    assert_eq!(of(State::RunStarted), 2, "each run's RUN_STARTED survives");
    assert_eq!(of(State::RunFinished), 2);
    assert_eq!(of(State::Published), 2);
}
