//! One HTTP/1.1 test server and client, on std's TCP at 127.0.0.1, for the
//! tests of the console, notifications and lineage: a [`Receiver`] keeps
//! every request and answers as its test says; [`get`] asks the console.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `POST /hook HTTP/1.1`, or the absolute form through a proxy.
    pub(crate) line: String,
    /// The header lines as sent, each ending in CRLF.
    pub(crate) head: String,
    /// Header names in lower case.
    pub(crate) headers: BTreeMap<String, String>,
    /// The body as JSON (`Null` when it is not).
    pub(crate) body: Value,
}

/// How a [`Receiver`] answers one request.
pub(crate) enum Reply {
    /// This status, no body, the connection closed.
    Status(u16),
    /// `302 Found` to this location.
    Redirect(String),
    /// No answer: the connection is held open.
    Silent,
}

/// An HTTP server on 127.0.0.1 that keeps every request it reads and
/// answers each as `reply` says; it serves until the test process ends.
pub(crate) struct Receiver {
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Receiver {
    pub(crate) fn start(reply: impl Fn(&Request) -> Reply + Send + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&requests);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&stream) else {
                    continue;
                };
                let answer = match reply(&request) {
                    Reply::Status(code) => format!(
                        "HTTP/1.1 {code} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        reason(code)
                    ),
                    Reply::Redirect(to) => format!(
                        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    ),
                    Reply::Silent => String::new(),
                };
                kept.lock().unwrap().push(request);
                if answer.is_empty() {
                    held.push(stream);
                } else {
                    let _ = stream.write_all(answer.as_bytes());
                }
            }
        });
        Receiver { addr, requests }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far, in the order they came.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let (mut head, mut headers, mut line) = (String::new(), BTreeMap::new(), String::new());
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
        head.push_str(&line);
        line.clear();
    }
    let length = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        line: first.trim_end().to_owned(),
        head,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// A response to [`get`].
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    /// The status line and headers.
    pub(crate) head: String,
    pub(crate) body: String,
}

/// One HTTP/1.1 GET of `path` at `addr` (`HOST:PORT`) with extra headers.
#[track_caller]
pub(crate) fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    try_get(addr, path, headers).expect("an answer")
}

/// One GET, or `None` for a connection closed unanswered (a server past its
/// connection cap).
pub(crate) fn try_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Option<Response> {
    let mut s = TcpStream::connect(addr).expect("the server accepts");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    // The bodies here are small and sent whole with a length.
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some(Response {
        status: head.split(' ').nth(1)?.parse().ok()?,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}
