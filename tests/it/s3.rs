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

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weir::store::s3::S3Backend;
use weir::store::{Backend, StoreError};

/// The server's endpoint; panics under CI when none is configured.
pub(crate) fn endpoint() -> Option<String> {
    match std::env::var("WEIR_S3_TEST_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no WEIR_S3_TEST_ENDPOINT under CI=true: ci/moto-up.sh must have started moto"
            );
            eprintln!(
                "skipped: no S3 server (set WEIR_S3_TEST_ENDPOINT; ci/moto-up.sh starts moto)"
            );
            None
        }
    }
}

/// A fresh bucket (moto accepts an unsigned CreateBucket).
pub(crate) fn new_bucket(endpoint: &str) -> String {
    let name = format!("weir-{:016x}", fastrand_u64());
    let host = endpoint.trim_start_matches("http://");
    let mut conn = TcpStream::connect(host).expect("the S3 server accepts connections");
    write!(
        conn,
        "PUT /{name} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "CreateBucket: {reply}");
    name
}

fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}

pub(crate) fn backend(endpoint: &str, url: &str) -> S3Backend {
    S3Backend::open_with(
        url,
        &[
            ("aws_endpoint", endpoint),
            ("aws_allow_http", "true"),
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", "weir-test"),
            ("aws_secret_access_key", "weir-test"),
        ],
    )
    .unwrap()
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
    let Some(endpoint) = endpoint() else { return };
    let root = new_bucket(&endpoint);
    let b = backend(&endpoint, &format!("s3://{root}"));
    assert!(b.put_if_absent("a/b", b"x").unwrap());
    assert_eq!(b.list("").unwrap(), vec!["a"]);
    assert_eq!(b.list_objects("").unwrap()[0].key, "a/b");
}

/// A proxy in front of the S3 server that, once, lets a request matching
/// `fault` reach the server and then answers the client 503 instead of the
/// server's reply: a committed write whose acknowledgement was lost.
struct LostReply {
    endpoint: String,
    fired: Arc<AtomicUsize>,
}

impl LostReply {
    fn start(upstream: &str, fault: fn(&str) -> bool) -> LostReply {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let fired = Arc::new(AtomicUsize::new(0));
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let counter = Arc::clone(&fired);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, counter) = (upstream.clone(), Arc::clone(&counter));
                std::thread::spawn(move || serve(client, &upstream, fault, &counter));
            }
        });
        LostReply { endpoint, fired }
    }

    fn fired(&self) -> usize {
        self.fired.load(Ordering::SeqCst)
    }
}

/// One HTTP request read whole from `client`: its head (request line and
/// headers, through the blank line) and its body (`Content-Length` bytes);
/// `None` when the client closes first.
pub(crate) fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf.truncate(head_end + length);
    Some((head, buf.split_off(head_end)))
}

/// One request per connection: forward it (asking the server to close),
/// relay or replace the reply, close.
fn serve(mut client: TcpStream, upstream: &str, fault: fn(&str) -> bool, fired: &AtomicUsize) {
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    let (line, rest) = head.split_once("\r\n").unwrap();
    let headers: String = rest
        .split("\r\n")
        .filter(|h| !h.to_ascii_lowercase().starts_with("connection:"))
        .map(|h| format!("{h}\r\n"))
        .collect();
    let mut server = TcpStream::connect(upstream).unwrap();
    server
        .write_all(
            format!(
                "{line}\r\nConnection: close\r\n{}",
                headers.trim_end_matches("\r\n")
            )
            .as_bytes(),
        )
        .unwrap();
    server.write_all(b"\r\n\r\n").unwrap();
    server.write_all(&body).unwrap();
    let mut reply = Vec::new();
    server.read_to_end(&mut reply).unwrap();
    if fault(&head.to_ascii_lowercase()) && fired.fetch_add(1, Ordering::SeqCst) == 0 {
        reply =
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                .to_vec();
    }
    let _ = client.write_all(&reply);
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
    let Some(endpoint) = endpoint() else { return };
    let bucket = new_bucket(&endpoint);
    let proxy = LostReply::start(&endpoint, |head| {
        head.starts_with("put ") && head.contains("/lost-create") && head.contains("if-none-match")
    });
    let b = backend(&proxy.endpoint, &format!("s3://{bucket}/wh"));
    assert!(b.put_if_absent("d/p/log/lost-create", b"mine").unwrap());
    assert_eq!(
        proxy.fired(),
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
    let Some(endpoint) = endpoint() else { return };
    let bucket = new_bucket(&endpoint);
    let proxy = LostReply::start(&endpoint, |head| {
        head.starts_with("put ") && head.contains("/lost-replace") && head.contains("if-match")
    });
    let b = backend(&proxy.endpoint, &format!("s3://{bucket}/wh"));
    assert!(b.put_if_absent("lost-replace", b"beat 1").unwrap());
    let v1 = b.get_object("lost-replace").unwrap().unwrap().meta.version;
    let v2 = b
        .put_if_version_matches("lost-replace", b"beat 2", &v1)
        .unwrap()
        .expect("our replace landed");
    assert_eq!(proxy.fired(), 2);
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
    let Some(endpoint) = endpoint() else { return };
    let url = format!("s3://no-such-bucket-{:08x}/wh", fastrand_u64() as u32);
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
    let Some(endpoint) = endpoint() else { return };
    let bucket = new_bucket(&endpoint);
    let backend: Arc<dyn Backend> = Arc::new(backend(&endpoint, &format!("s3://{bucket}/wh")));
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
