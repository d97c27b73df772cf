//! The S3 backend against a real S3 protocol server: `ci/moto-up.sh`
//! starts moto's standalone server and exports `WEIR_S3_TEST_ENDPOINT`.
//! Where none is set when the tests are built, every test here is reported
//! as ignored, by name, with what it needs (build.rs); with `CI=true` none is
//! ignored and they fail instead, since CI starts one.
//!
//! moto's conditional checks are not atomic under heavy races, so the
//! protocol's races are proven on the memory and filesystem backends
//! (`store_contract`, which also runs every single-writer promise of the
//! contract here, one test each); here: the bucket's root, the error paths,
//! and a reply lost after a committed write.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weir::store::s3::S3Backend;
use weir::store::{Backend, StoreError};

use crate::support::s3::{backend, random_u64, Fault, Rule, S3};

/// A rule that loses the reply to the first request `fault` matches (the
/// write lands, its acknowledgement is a 503), and counts the matches.
fn lose_first_reply(fault: fn(&str) -> bool) -> (Arc<Rule>, Arc<AtomicUsize>) {
    let matched = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&matched);
    let rule = Arc::new(move |head: &str, _: &[u8]| {
        (fault(head) && counter.fetch_add(1, Ordering::SeqCst) == 0).then_some(Fault::LoseReply)
    });
    (rule, matched)
}

// The S3 backend keeps the backend contract (`store_contract::s3`
// under a key prefix) and at the bucket's root, where the whole warehouse is
// the bucket.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_backend_at_the_bucket_root() {
    let Some(s3) = S3::sandbox("") else { return };
    let b = s3.backend();
    assert!(b.put_if_absent("a/b", b"x").unwrap());
    assert_eq!(b.list("").unwrap(), vec!["a"]);
    assert_eq!(b.list_objects("").unwrap()[0].key, "a/b");
}

// object_store retries a create whose reply was a 503; the retry
// finds the key taken (412) by the first try. The backend rereads, finds
// its own bytes, and reports the create as its own, not as lost.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_create_whose_reply_was_lost_is_ours() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let (rule, matched) = lose_first_reply(|head| {
        head.starts_with("put ") && head.contains("/lost-create") && head.contains("if-none-match")
    });
    let proxy = s3.proxy(rule);
    let b = backend(&proxy.endpoint, &s3.url);
    assert!(b.put_if_absent("d/p/log/lost-create", b"mine").unwrap());
    assert_eq!(
        matched.load(Ordering::SeqCst),
        2,
        "the create was sent, answered 503, and retried"
    );
    assert_eq!(b.get("d/p/log/lost-create").unwrap().unwrap(), b"mine");
    // Another writer's bytes under the key are a lost race, not ours.
    assert!(!b.put_if_absent("d/p/log/lost-create", b"rival").unwrap());
}

// The same for a conditional replace: the retry's 412 after a
// landed first try is our write, with the version now stored.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_replace_whose_reply_was_lost_is_ours() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let (rule, matched) = lose_first_reply(|head| {
        head.starts_with("put ") && head.contains("/lost-replace") && head.contains("if-match")
    });
    let proxy = s3.proxy(rule);
    let b = backend(&proxy.endpoint, &s3.url);
    assert!(b.put_if_absent("lost-replace", b"beat 1").unwrap());
    let v1 = b.get_object("lost-replace").unwrap().unwrap().meta.version;
    let v2 = b
        .put_if_version_matches("lost-replace", b"beat 2", &v1)
        .unwrap()
        .expect("our replace landed");
    assert_eq!(matched.load(Ordering::SeqCst), 2);
    let now = b.get_object("lost-replace").unwrap().unwrap();
    assert_eq!(
        (now.bytes.as_slice(), &now.meta.version),
        (&b"beat 2"[..], &v2)
    );
    assert_eq!(
        b.put_if_version_matches("lost-replace", b"beat 3", &v1)
            .unwrap(),
        None
    );
}

// A bucket that does not exist fails when the warehouse is
// opened, naming it with the server's answer, never a panic and never an
// empty warehouse.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_missing_bucket_is_an_error_with_its_cause() {
    let Some(endpoint) = crate::support::s3::endpoint() else {
        return;
    };
    let url = format!("s3://no-such-bucket-{:08x}/wh", random_u64() as u32);
    let opened = S3Backend::open_with(
        &url,
        &[
            ("aws_endpoint", endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", "x"),
            ("aws_secret_access_key", "x"),
        ],
    );
    match opened {
        Err(e @ StoreError::Remote { .. }) => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            assert!(text.contains(&url), "{text}");
            assert!(text.contains("NoSuchBucket"), "{text}");
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert!(matches!(
        S3Backend::open("file:///tmp/x"),
        Err(StoreError::Remote { .. })
    ));
}

// A run's events on S3 are ordered put-if-absent chunks: a
// durable emit is stored before it returns, a reopened run appends after
// the last chunk, and `read_run` / `read_all_in` merge them in order.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn s3_event_log_in_ordered_chunks() {
    use weir::events::{read_all_in, read_run, Event, EventLog, State};
    use weir::store::events::EventStore;
    let Some(s3) = S3::sandbox("wh") else { return };
    let backend: Arc<dyn Backend> = Arc::new(s3.backend());
    let store = EventStore::objects(Arc::clone(&backend));
    let log = EventLog::open_in(&store, "run-1").unwrap();
    log.emit(State::Queued, Event::instance("t", "p")).unwrap();
    assert!(backend.list("_runs/run-1/events").unwrap().is_empty());
    log.emit_durable(
        State::Running,
        Event::instance("t", "p").attempt(1, Some(1)),
    )
    .unwrap();
    assert_eq!(
        backend.list("_runs/run-1/events").unwrap(),
        vec!["00000000000000000001"]
    );
    drop(log);
    let log = EventLog::open_in(&store, "run-1").unwrap();
    log.emit(State::Published, Event::instance("t", "p"))
        .unwrap();
    drop(log);
    assert_eq!(
        backend.list("_runs/run-1/events").unwrap(),
        vec!["00000000000000000001", "00000000000000000002"]
    );
    let (records, bad) = read_run(&store, "run-1").unwrap().unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    let states: Vec<State> = records.iter().map(|r| r.state).collect();
    assert_eq!(states, [State::Queued, State::Running, State::Published]);
    let (all, _) = read_all_in(&store).unwrap();
    assert_eq!(all, records);
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].last_written.is_some());
}
