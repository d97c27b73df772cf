//! The S3 sandbox every S3 test shares: the test server (`ci/moto-up.sh`
//! starts moto and exports `WEIR_S3_TEST_ENDPOINT`), a fresh bucket per test,
//! the environment `weir` reads it through, a backend for looking at the
//! bucket directly, and one fault proxy to put between them.
//!
//! Without a server a test is reported as ignored by name (build.rs sets
//! `weir_has_s3`) and, run anyway, returns early; under `CI=true` it fails,
//! since CI starts one.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weir::store::s3::S3Backend;

/// A fresh bucket on the test server, with the warehouse at `url`.
pub(crate) struct S3 {
    /// `http://host:port` of the server.
    pub(crate) endpoint: String,
    pub(crate) bucket: String,
    /// `s3://BUCKET/PREFIX`: where the test's warehouse lives.
    pub(crate) url: String,
}

impl S3 {
    /// A new bucket with the warehouse under `prefix` (empty: the bucket's
    /// root); `None` (the test returns) when no server is configured.
    pub(crate) fn sandbox(prefix: &str) -> Option<S3> {
        let endpoint = endpoint()?;
        let bucket = new_bucket(&endpoint);
        let url = match prefix {
            "" => format!("s3://{bucket}"),
            _ => format!("s3://{bucket}/{prefix}"),
        };
        Some(S3 {
            endpoint,
            bucket,
            url,
        })
    }

    /// The backend at the warehouse, straight to the server.
    pub(crate) fn backend(&self) -> S3Backend {
        backend(&self.endpoint, &self.url)
    }

    /// `weir --warehouse URL ARGS...` in `dir`, staging in `staging`.
    pub(crate) fn weir(&self, dir: &Path, staging: &Path, args: &[&str]) -> Command {
        weir_s3(dir, &self.endpoint, staging, &self.url, args)
    }

    /// A fault proxy in front of the server (see [`FaultProxy`]).
    pub(crate) fn proxy(&self, rule: Arc<Rule>) -> FaultProxy {
        FaultProxy::start(&self.endpoint, rule)
    }
}

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
    let name = format!("weir-{:016x}", random_u64());
    create_bucket(endpoint, &name);
    name
}

/// Creates bucket `name` on the server at `endpoint`.
pub(crate) fn create_bucket(endpoint: &str, name: &str) {
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
}

/// A number no other test of this run draws (for bucket names).
pub(crate) fn random_u64() -> u64 {
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

/// The options `weir` would take from the sandbox's environment.
pub(crate) fn options(endpoint: &str) -> [(&'static str, &str); 5] {
    [
        ("aws_endpoint", endpoint),
        ("aws_allow_http", "true"),
        ("aws_region", "us-east-1"),
        ("aws_access_key_id", "weir-test"),
        ("aws_secret_access_key", "weir-test"),
    ]
}

/// The backend at `url` on the server at `endpoint` (or a proxy's).
pub(crate) fn backend(endpoint: &str, url: &str) -> S3Backend {
    S3Backend::open_with(url, &options(endpoint)).unwrap()
}

/// `weir --warehouse WAREHOUSE ARGS...` in `dir`, configured for the S3
/// server through the standard `AWS_*` environment, staging in `staging`.
pub(crate) fn weir_s3(
    dir: &Path,
    endpoint: &str,
    staging: &Path,
    warehouse: &str,
    args: &[&str],
) -> Command {
    let mut cmd = super::weir();
    cmd.current_dir(dir)
        .args(["--warehouse", warehouse])
        .args(args)
        .env("AWS_ENDPOINT", endpoint)
        // The one endpoint: the URL variables would take precedence.
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "weir-test")
        .env("AWS_SECRET_ACCESS_KEY", "weir-test")
        .env("WEIR_STAGING", staging)
        .env("COLUMNS", "400");
    cmd
}

/// [`weir_s3`] staging in `dir/staging`.
pub(crate) fn weir_in(dir: &Path, endpoint: &str, warehouse: &str, args: &[&str]) -> Command {
    weir_s3(dir, endpoint, &dir.join("staging"), warehouse, args)
}

/// What the fault proxy does to one request instead of relaying it.
pub(crate) enum Fault {
    /// Answer this status with an S3 error body; the server never sees the
    /// request.
    Answer(u16),
    /// Let the request reach the server, then answer the client 503 instead
    /// of the server's reply: a write that landed and whose acknowledgement
    /// was lost.
    LoseReply,
}

/// What the fault proxy does with one request, given its head (request line
/// and headers, lowercased) and body: a fault, or `None` to relay it. A rule
/// may also sleep, holding the request (a slow or stalled store).
pub(crate) type Rule = dyn Fn(&str, &[u8]) -> Option<Fault> + Send + Sync;

/// A proxy in front of the S3 server that relays each request (one per
/// connection) unless its rule answers with a fault.
pub(crate) struct FaultProxy {
    pub(crate) endpoint: String,
    faulted: Arc<AtomicUsize>,
}

impl FaultProxy {
    pub(crate) fn start(upstream: &str, rule: Arc<Rule>) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let faulted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&faulted);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, rule, counter) =
                    (upstream.clone(), Arc::clone(&rule), Arc::clone(&counter));
                std::thread::spawn(move || relay(client, &upstream, &*rule, &counter));
            }
        });
        FaultProxy { endpoint, faulted }
    }

    /// How many requests got a fault.
    pub(crate) fn faulted(&self) -> usize {
        self.faulted.load(Ordering::SeqCst)
    }
}

const LOST: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

fn relay(mut client: TcpStream, upstream: &str, rule: &Rule, faulted: &AtomicUsize) {
    let Some((head, body)) = read_request(&mut client) else {
        return;
    };
    let fault = rule(&head.to_ascii_lowercase(), &body);
    if fault.is_some() {
        faulted.fetch_add(1, Ordering::SeqCst);
    }
    if let Some(Fault::Answer(status)) = fault {
        let (reason, code) = match status {
            503 => ("Service Unavailable", "SlowDown"),
            _ => ("Bad Request", "InvalidRequest"),
        };
        let body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the test</Message></Error>");
        let _ = write!(
            client,
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let (line, rest) = head.split_once("\r\n").unwrap();
    let headers: String = rest
        .split("\r\n")
        .filter(|h| !h.is_empty() && !h.to_ascii_lowercase().starts_with("connection:"))
        .map(|h| format!("{h}\r\n"))
        .collect();
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let sent = server
        .write_all(format!("{line}\r\nConnection: close\r\n{headers}\r\n").as_bytes())
        .and_then(|()| server.write_all(&body));
    if sent.is_err() {
        return;
    }
    let mut reply = Vec::new();
    if server.read_to_end(&mut reply).is_ok() {
        if matches!(fault, Some(Fault::LoseReply)) {
            reply = LOST.to_vec();
        }
        let _ = client.write_all(&reply);
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
