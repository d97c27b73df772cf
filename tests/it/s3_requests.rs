//! Issue 28 item 1: what an instance no longer sends to S3, and that what
//! readers of the store show does not change (see store_budget.rs for the
//! count): each engine or command has its own staging directory, as
//! separate hosts would.

use weir::store::Backend;

use crate::s3::{backend, endpoint, new_bucket};
use crate::s3_warehouse::weir_s3;
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

// issue 28: a published attempt's audit report (`candidate.json`) is not
// uploaded (its commit record carries what readers show), while an attempt
// that audited well but did not publish (here its commit failed) uploads
// it, as before: the report is then what tells another host what it read.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn only_an_attempt_that_did_not_publish_uploads_its_audit_report() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = new_bucket(&endpoint);
    let url = format!("s3://{bucket}/wh");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), MANIFEST).unwrap();
    let out = weir_s3(
        dir,
        &endpoint,
        &dir.join("host-a"),
        &url,
        &["run", "m.toml"],
    )
    .env("WEIR_FAULT", "before_commit@t/b:fail")
    .output()
    .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    let store = backend(&endpoint, &url);
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
        &endpoint,
        &dir.join("host-b"),
        &url,
        &["explain", "m.toml", "t", "--partition", "a"],
    )
    .output()
    .unwrap());
    assert!(explain.contains("published: generation 1"), "{explain}");
}
