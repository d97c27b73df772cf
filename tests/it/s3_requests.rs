//! What an instance does not need to send to S3, and that what readers of the
//! store show does not change (see store_budget.rs for the count): each
//! engine or command has its own staging directory, as separate hosts
//! would.

use weir::store::Backend;

use crate::support::s3::{backend, weir_s3, S3};
use std::time::Duration;

use crate::support::{ok, stdout};

const MANIFEST: &str = r#"[pipeline]
name = "evidence"
code_version = "1"
warehouse = "unused"

[partitions.shard]
kind = "static"
keys = ["a", "b"]

[tasks.t]
command = ["sh", "-c", "printf 'id,shard\n1,%s\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/t.csv\""]
output = { dataset = "t", grain = ["id"] }
"#;

// A published attempt's audit report (`candidate.json`) is not
// uploaded (its commit record carries what readers show), while an attempt
// that audited well but did not publish (here its commit failed) uploads
// it, as before: the report is then what tells another host what it read.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn only_an_attempt_that_did_not_publish_uploads_its_audit_report() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), MANIFEST).unwrap();
    let out = weir_s3(dir, endpoint, &dir.join("host-a"), url, &["run", "m.toml"])
        .env("WEIR_FAULT", "before_commit@t/b:fail")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    let store = backend(endpoint, url);
    let key = |p: &str, name: &str| format!("t/{p}/attempts/00000000000000000001/{name}");
    assert!(store.get(&key("a", "data/t.csv")).unwrap().is_some());
    assert_eq!(store.get(&key("a", "candidate.json")).unwrap(), None);
    let report: serde_json::Value = serde_json::from_slice(
        &store
            .get(&key("b", "candidate.json"))
            .unwrap()
            .expect("the unpublished attempt's report is uploaded"),
    )
    .unwrap();
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["partition"], "b", "{report}");
    assert!(store.list("t/b/log").unwrap().is_empty());

    // Another host explains the published one from its record.
    let explain = ok(&weir_s3(
        dir,
        endpoint,
        &dir.join("host-b"),
        url,
        &["explain", "m.toml", "t", "--partition", "a"],
    )
    .output()
    .unwrap());
    assert!(explain.contains("published: generation 1"), "{explain}");
}

// On S3 an attempt writes no lease.json before its first renewal:
// the put-if-absent of its token is the claim, and the token's record
// carries the first lease (holder, process tag, timeout). Another engine
// meeting the attempt waits for it, naming its holder as a written lease
// would, and does not take it over while it lives; once its engine is
// killed -9 on this host, that engine is certainly gone by the record, and
// the other takes over at once, stopping the command it left (its process
// tag is in the record).
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn the_token_record_is_the_first_lease_for_waiting_and_takeover() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let slow = dir.join("slow");
    std::fs::write(&slow, "").unwrap();
    std::fs::write(
        dir.join("m.toml"),
        format!(
            r#"[pipeline]
name = "lease"
code_version = "1"
warehouse = "unused"

[partitions.shard]
kind = "static"
keys = ["a"]

[tasks.t]
# A lease renewed every 60s: none is written while this test runs.
heartbeat = "60s"
command = ["sh", "-c", "if [ -e '{slow}' ]; then sleep 120; fi; printf 'id\n1\n' > \"$WEIR_OUTPUT_DIR/t.csv\""]
output = {{ dataset = "t", grain = ["id"] }}
"#,
            slow = slow.display()
        ),
    )
    .unwrap();
    let first = crate::support::Engine::spawn(
        weir_s3(
            dir,
            endpoint,
            &dir.join("host-a"),
            url,
            &["run", "m.toml", "--run-id", "first"],
        ),
        dir,
        "first",
    );
    crate::support::poll_until(
        "the first engine's command",
        Duration::from_secs(60),
        || crate::support::descendant_named(first.pid(), "sleep"),
    );
    let store = backend(endpoint, url);
    let attempt = "t/a/attempts/00000000000000000001";
    assert_eq!(store.get(&format!("{attempt}/lease.json")).unwrap(), None);
    let record: serde_json::Value = serde_json::from_slice(
        &store
            .get("t/a/tokens/00000000000000000001")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert!(record["process_tag"].is_string(), "{record}");
    assert_eq!(record["lease_timeout_ms"], 180_000, "{record}");

    std::fs::remove_file(&slow).unwrap();
    let second = crate::support::Engine::spawn(
        weir_s3(
            dir,
            endpoint,
            &dir.join("host-b"),
            url,
            &["run", "m.toml", "--run-id", "second"],
        ),
        dir,
        "second",
    );
    let events = || {
        let out = weir_s3(
            dir,
            endpoint,
            &dir.join("host-c"),
            url,
            &["events", "m.toml"],
        )
        .output()
        .unwrap();
        stdout(&out)
    };
    crate::support::poll_until("the second engine waiting", Duration::from_secs(60), || {
        events().contains("WAITING")
    });
    let waiting = events();
    let line = waiting
        .lines()
        .find(|l| l.contains("WAITING"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        line.contains("attempt 1 of run first on ")
            && line.contains(&format!("pid {}", first.pid())),
        "{waiting}"
    );
    assert!(!waiting.contains("TAKEN_OVER"), "{waiting}");
    let pid = first.pid();
    assert!(!first.kill().success());
    let out = second.finish(Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = events();
    assert!(all.contains("TAKEN_OVER"), "{all}");
    assert!(all.contains(&format!("its engine (pid {pid} on ")), "{all}");
    // The first engine's command (sleeping, its engine gone) was stopped.
    assert!(!crate::support::descendant_named(
        std::process::id(),
        "sleep"
    ));
    let records: Vec<String> = store
        .list("t/a/log")
        .unwrap()
        .into_iter()
        .filter(|k| k.ends_with(".json"))
        .collect();
    assert_eq!(records.len(), 1, "published once: {records:?}");
}
