//! Evidence and leftovers on an `s3://` warehouse, against moto's S3 server
//! (`ci/moto-up.sh`; ignored by name without one, failing under `CI=true`, as in
//! s3.rs): RUNNING and lines pending on a timer survive a kill -9, incomplete
//! multipart uploads are aborted (by the upload that failed, else by gc), and a
//! burst of 503s is reported with its cause.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir::store::Backend;

use crate::support::s3::{backend, weir_in, Fault, FaultProxy, S3};
use crate::support::{ok, poll_until, stderr, stdout, Engine};

/// The lines of `weir events` whose state column is `state`.
pub(crate) fn lines_in_state<'a>(events: &'a str, state: &str) -> Vec<&'a str> {
    events
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some(state))
        .collect()
}

/// A raw request to the S3 server (moto takes unsigned ones); the reply.
fn raw_request(endpoint: &str, method: &str, path: &str, body: &[u8]) -> String {
    let host = endpoint.trim_start_matches("http://");
    let mut conn = TcpStream::connect(host).expect("the S3 server accepts connections");
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    conn.write_all(body).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 200"),
        "{method} {path}: {reply}"
    );
    reply
}

/// Begins a multipart upload of `key` in `bucket`, stores one part of it
/// and leaves it incomplete, as an engine killed mid-upload does; its id.
fn begin_upload(endpoint: &str, bucket: &str, key: &str) -> String {
    let reply = raw_request(endpoint, "POST", &format!("/{bucket}/{key}?uploads"), b"");
    let start = reply.find("<UploadId>").expect("an upload id") + "<UploadId>".len();
    let end = start + reply[start..].find("</UploadId>").unwrap();
    let id = reply[start..end].to_owned();
    raw_request(
        endpoint,
        "PUT",
        &format!("/{bucket}/{key}?partNumber=1&uploadId={id}"),
        &vec![b'x'; 1 << 20],
    );
    id
}

/// The incomplete multipart uploads of `bucket`, as (key, upload id),
/// asked of the server directly.
fn uploads_in(endpoint: &str, bucket: &str) -> Vec<(String, String)> {
    let reply = raw_request(endpoint, "GET", &format!("/{bucket}?uploads"), b"");
    let inner = |text: &str, tag: &str| {
        let open = format!("<{tag}>");
        let start = text.find(&open)? + open.len();
        let end = start + text[start..].find(&format!("</{tag}>"))?;
        Some(text[start..end].to_owned())
    };
    let mut out: Vec<(String, String)> = reply
        .split("<Upload>")
        .skip(1)
        .map(|u| (inner(u, "Key").unwrap(), inner(u, "UploadId").unwrap()))
        .collect();
    out.sort();
    out
}

const GC_MANIFEST: &str = r#"
[pipeline]
name = "s3gc"
code_version = "1"
warehouse = "unused"

[tasks.t]
command = ["sh", "-c", "echo id > \"$WEIR_OUTPUT_DIR/rows.csv\""]
output = { dataset = "out", grain = ["id"] }
partitioned_by = []
"#;

// A multipart upload an engine began and never finished
// (killed mid-upload) is listed by gc's dry run with its age, aborted by
// --apply (with a GC_DELETED event), and one outside the warehouse's prefix
// is never touched.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn gc_aborts_incomplete_uploads_under_the_warehouse() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), GC_MANIFEST).unwrap();
    let key = "out/p/attempts/7/data/big.csv";
    let id = begin_upload(endpoint, bucket, &format!("wh/{key}"));
    let other = begin_upload(endpoint, bucket, "elsewhere/big.csv");
    let gc = |args: &[&str]| {
        let mut all = vec!["gc", "m.toml"];
        all.extend(args);
        weir_in(dir, endpoint, url, &all).output().unwrap()
    };

    // moto dates every upload 2010-11-10T20:48:33Z (real S3 gives the time
    // it began), so here it is always older than the threshold; a young
    // one's "keep" is in ops::gc's unit tests. The dry run names it, with
    // its age, and aborts nothing.
    let dry = ok(&gc(&["--older-than", "1h"]));
    assert!(
        dry.contains(&format!(
            "would abort  upload {id} of {key}: incomplete multipart upload, age "
        )) && dry.contains("> threshold 1h: its parts are stored but are no object"),
        "{dry}"
    );
    assert!(
        dry.contains("dry run: 1 incomplete upload would be aborted, 0 kept"),
        "{dry}"
    );
    assert!(!dry.contains(&other), "outside the warehouse: {dry}");
    let mut both = vec![
        ("elsewhere/big.csv".to_owned(), other.clone()),
        (format!("wh/{key}"), id.clone()),
    ];
    both.sort();
    assert_eq!(
        uploads_in(endpoint, bucket),
        both,
        "a dry run aborts nothing"
    );

    let applied = ok(&gc(&["--older-than", "1h", "--apply"]));
    assert!(
        applied.contains(&format!("abort        upload {id} of {key}: ")),
        "{applied}"
    );
    assert!(
        applied.contains("aborted 1 incomplete upload, 0 kept"),
        "{applied}"
    );
    assert_eq!(
        uploads_in(endpoint, bucket),
        vec![("elsewhere/big.csv".to_owned(), other.clone())]
    );
    // The abort is in the operator log.
    let events = ok(&weir_in(dir, endpoint, url, &["events", "m.toml"])
        .output()
        .unwrap());
    let deleted = lines_in_state(&events, "GC_DELETED");
    assert_eq!(deleted.len(), 1, "{events}");
    assert!(
        deleted[0].contains(&format!("aborting upload {id} of {key}")),
        "{events}"
    );
    // Nothing left under the warehouse: gc lists no upload.
    let after = ok(&gc(&["--older-than", "1h"]));
    assert!(!after.contains("upload"), "{after}");
}

// gc's own S3 requests (listing and aborting incomplete uploads) ride out a
// burst of 503s as every other store request does, instead of failing gc.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn gc_rides_out_503s_while_listing_and_aborting_uploads() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), GC_MANIFEST).unwrap();
    let key = "out/p/attempts/7/data/big.csv";
    let id = begin_upload(endpoint, bucket, &format!("wh/{key}"));
    // The first two listings of uploads and the first two aborts get 503.
    let (lists, aborts) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, a) = (Arc::clone(&lists), Arc::clone(&aborts));
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(move |head: &str, _: &[u8]| {
            let first_line = head.lines().next().unwrap_or_default();
            let counter = if first_line.starts_with("get ") && first_line.contains("?uploads") {
                &l
            } else if first_line.starts_with("delete ") && first_line.contains("uploadid=") {
                &a
            } else {
                return None;
            };
            (counter.fetch_add(1, Ordering::SeqCst) < 2).then_some(Fault::Answer(503))
        }),
    );
    let applied = ok(&weir_in(
        dir,
        &proxy.endpoint,
        url,
        &["gc", "m.toml", "--older-than", "1h", "--apply"],
    )
    .output()
    .unwrap());
    assert!(
        applied.contains(&format!("abort        upload {id} of {key}: ")),
        "{applied}"
    );
    assert!(lists.load(Ordering::SeqCst) >= 3, "the listing was retried");
    assert_eq!(aborts.load(Ordering::SeqCst), 3, "the abort was retried");
    assert_eq!(uploads_in(endpoint, bucket), vec![]);
}

// An upload whose part the store refuses is aborted by
// the writer there and then: no incomplete upload is left behind for gc.
// Six parts, so that the refusal is seen while more parts are still to be
// sent (before, only a failure seen at the end was aborted).
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_failed_multipart_upload_is_aborted() {
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    // Every part upload is refused (400: not retried).
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(|head: &str, _: &[u8]| {
            (head.starts_with("put ") && head.contains("partnumber=")).then_some(Fault::Answer(400))
        }),
    );
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.csv");
    std::fs::write(&big, vec![b'y'; (5 << 24) + 5]).unwrap();
    let through = backend(&proxy.endpoint, url);
    let err = through.put_file("out/p/data/big.csv", &big).unwrap_err();
    let why = weir::store::chain(&err);
    assert!(why.contains("out/p/data/big.csv"), "{why}");
    assert!(why.contains("400"), "{why}");
    assert!(proxy.faulted() >= 1);
    let direct = backend(endpoint, url);
    assert_eq!(uploads_in(endpoint, bucket), vec![]);
    assert_eq!(direct.get("out/p/data/big.csv").unwrap(), None);
}

/// A quick task and a slow one (its command records its pid in `slow.pid`
/// and then sleeps), in a pool of two slots: both start together.
const KILL_MANIFEST: &str = r#"
[pipeline]
name = "s3kill"
code_version = "1"
warehouse = "unused"

[pools.work]
slots = 2

[tasks.quick]
command = ["sh", "-c", "printf 'id\n1\n' > \"$WEIR_OUTPUT_DIR/rows.csv\""]
output = { dataset = "quick", grain = ["id"] }
partitioned_by = []
pool = "work"

[tasks.slow]
command = ["sh", "-c", "echo $$ > slow.pid; exec sleep 120"]
output = { dataset = "slow", grain = ["id"] }
partitioned_by = []
pool = "work"
timeout = "10m"
"#;

// An engine killed -9 while a long command runs on S3
// leaves its evidence: RUNNING was stored before the command started, and
// the quick task's lines written since (PUBLISHED) were stored by the
// timer though nothing else was emitted. Before: no event at all.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn kill9_on_s3_keeps_running_and_the_lines_flushed_since() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), KILL_MANIFEST).unwrap();
    let engine = Engine::spawn(
        weir_in(dir, endpoint, url, &["run", "m.toml", "--run-id", "killed"]),
        dir,
        "engine",
    );
    let pid_file = dir.join("slow.pid");
    poll_until("the slow command to start", Duration::from_secs(60), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    });
    let sleeper: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The quick task publishes; its last lines then wait for the timer.
    let b = backend(endpoint, url);
    poll_until("quick to publish", Duration::from_secs(60), || {
        b.list_objects("quick")
            .unwrap_or_default()
            .iter()
            .any(|o| o.key.contains("/log/"))
    });
    std::thread::sleep(Duration::from_millis(3500));
    let killed = engine.kill();
    // SAFETY: kill(2) on the pid the test's own command wrote.
    unsafe {
        libc::kill(sleeper, libc::SIGKILL);
    }
    assert!(!killed.success());

    let events = ok(
        &weir_in(dir, endpoint, url, &["events", "m.toml", "--run", "killed"])
            .output()
            .unwrap(),
    );
    assert_eq!(lines_in_state(&events, "RUN_STARTED").len(), 1, "{events}");
    let running = lines_in_state(&events, "RUNNING");
    assert!(
        running.iter().any(|l| l.contains(" slow ")),
        "RUNNING of the slow task: {events}"
    );
    let published = lines_in_state(&events, "PUBLISHED");
    assert!(
        published.len() == 1 && published[0].contains(" quick "),
        "PUBLISHED of the quick task, stored by the timer: {events}"
    );
    // The run never ended: nothing claims it did.
    assert!(
        lines_in_state(&events, "RUN_FINISHED").is_empty(),
        "{events}"
    );
}

/// Four partitions of a quick task, one slot.
const BURST_MANIFEST: &str = r#"
[pipeline]
name = "s3burst"
code_version = "1"
warehouse = "unused"

[partitions.k]
kind = "static"
keys = ["k1", "k2", "k3", "k4"]

[pools.work]
slots = 1

[tasks.t]
command = ["sh", "-c", "sleep 0.3; printf 'id\n%s\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/rows.csv\""]
output = { dataset = "out", grain = ["id"] }
partitioned_by = ["k"]
pool = "work"
"#;

// A burst of 503 SlowDown on the event log's prefix,
// long enough that the client's retries give up storing a RUNNING: that
// command is not started and the run admits nothing more (exit 5), and
// every message says what is true: the error names the HTTP status and the
// key, the instances never admitted say why (not "never became ready"),
// and the log, stored in full once the burst is over, is not called
// incomplete.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_503_burst_is_reported_with_its_cause_and_truthfully() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), BURST_MANIFEST).unwrap();
    // From the first chunk holding a RUNNING line, every store of the log
    // is refused for longer than a call retries (15 s from its first try,
    // and a last wait of at most 2 s: store::s3::client), then accepted.
    let refused = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&refused);
    let since = std::sync::Mutex::new(None::<std::time::Instant>);
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(move |head: &str, body: &[u8]| {
            let log = head.starts_with("put ") && head.contains("/_runs/burst/events/");
            let running = log && {
                let needle = br#""state":"RUNNING","#;
                body.windows(needle.len()).any(|w| w == needle)
            };
            let mut since = since.lock().unwrap();
            if running && since.is_none() {
                *since = Some(std::time::Instant::now());
            }
            let burst = since.is_some_and(|t| t.elapsed() < Duration::from_secs(18));
            (log && burst && count.fetch_add(1, Ordering::SeqCst) < usize::MAX)
                .then_some(Fault::Answer(503))
        }),
    );
    let out = weir_in(
        dir,
        &proxy.endpoint,
        url,
        &["run", "m.toml", "--run-id", "burst"],
    )
    .output()
    .unwrap();
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(refused.load(Ordering::SeqCst) > 4, "{text}\n{err}");
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    // The cause: the status, the operation and the key.
    let engine: Vec<&str> = text.lines().filter(|l| l.contains("ENGINE ")).collect();
    assert_eq!(engine.len(), 1, "{text}");
    for shown in [engine[0], err.as_str()] {
        assert!(
            shown.contains("503 Service Unavailable")
                && shown.contains("PUT")
                && shown.contains(&format!(
                    "s3://{bucket}/wh/_runs/burst/events/0000000000000000000"
                )),
            "the cause is named: {shown}"
        );
    }
    assert!(
        engine[0]
            .contains("the command was not started: cannot store RUNNING in _runs/burst/events"),
        "{text}"
    );
    // Instances never admitted: why, truthfully.
    assert!(!text.contains("never became ready"), "{text}");
    let unadmitted: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("not started: the run stopped admitting instances when the event log could not take a line"))
        .collect();
    assert!(!unadmitted.is_empty(), "{text}");
    // The log is complete, and says so.
    assert!(!err.contains("the event log is incomplete"), "{err}");
    assert!(
        err.contains("the log is complete: every line was stored later"),
        "{err}"
    );
    let events = ok(
        &weir_in(dir, endpoint, url, &["events", "m.toml", "--run", "burst"])
            .output()
            .unwrap(),
    );
    assert_eq!(lines_in_state(&events, "RUN_STARTED").len(), 1, "{events}");
    assert_eq!(lines_in_state(&events, "RUN_FINISHED").len(), 1, "{events}");
    let failed = lines_in_state(&events, "FAILED");
    assert!(
        failed.len() == 1 && failed[0].contains("engine error: the command was not started"),
        "{events}"
    );
    // Every RUNNING stored, the refused one included, once each.
    let running = lines_in_state(&events, "RUNNING").len();
    let published = lines_in_state(&events, "PUBLISHED").len();
    assert_eq!(running, published + 1, "{events}");
}

// A burst of 503 SlowDown shorter than a call's retry budget (3.5 s of
// every request, starting at the first commit record's PUT) costs a run
// nothing: each call keeps retrying, with growing waits, through it, and
// every partition publishes. Three retries used to give up within 0.4 s.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_few_seconds_of_503s_are_retried_through_and_the_run_publishes() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), BURST_MANIFEST).unwrap();
    let since = std::sync::Mutex::new(None::<std::time::Instant>);
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(move |head: &str, _: &[u8]| {
            let mut since = since.lock().unwrap();
            if since.is_none() && head.starts_with("put ") && head.contains("/log/") {
                *since = Some(std::time::Instant::now());
            }
            since
                .is_some_and(|t| t.elapsed() < Duration::from_millis(3500))
                .then_some(Fault::Answer(503))
        }),
    );
    let out = weir_in(
        dir,
        &proxy.endpoint,
        url,
        &["run", "m.toml", "--run-id", "slow"],
    )
    .output()
    .unwrap();
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(proxy.faulted() > 4, "the burst happened: {text}\n{err}");
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    let store = backend(endpoint, url);
    for k in ["k1", "k2", "k3", "k4"] {
        let mut records = store.list(&format!("out/{k}/log")).unwrap();
        records.retain(|name| name.ends_with(".json"));
        assert_eq!(records.len(), 1, "{k}: {records:?}\n{text}\n{err}");
    }
}

// The local counterpart of the burst of 503s on S3: a log that lost
// lines for good (the file on a full disk) is still called incomplete, and
// the instances never admitted say why rather than "never became ready".
#[test]
fn a_log_that_lost_lines_is_called_incomplete() {
    let sb = crate::support::Sandbox::new(
        r#"
[pipeline]
name = "full"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["k1", "k2"]

[tasks.t]
command = ["sh", "-c", "printf 'id\n1\n' > \"$WEIR_OUTPUT_DIR/rows.csv\""]
output = { dataset = "out", grain = ["id"] }
partitioned_by = ["k"]
"#,
    );
    let run_dir = weir::events::run_dir(&sb.path().join("wh"), "R");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::os::unix::fs::symlink("/dev/full", run_dir.join("events.jsonl")).unwrap();
    let out = sb.run("R", &[]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    assert!(
        err.contains("error: the event log is incomplete: cannot append RUN_STARTED")
            && err.contains("No space left on device"),
        "{err}"
    );
    assert!(!err.contains("the log is complete"), "{err}");
    assert!(!text.contains("never became ready"), "{text}");
    for k in ["k1", "k2"] {
        assert!(
            text.contains(&format!(
                "SKIPPED     t {k}: not started: the run stopped admitting instances when the event log could not take a line"
            )),
            "{text}"
        );
    }
}
