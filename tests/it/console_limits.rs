//! The console against clients that misbehave: a half-sent request does
//! not keep `weir console` alive after SIGTERM, a crowd of connections
//! neither takes the descriptors `weir serve`'s engine needs nor keeps a
//! later client from a page, and an unknown name is a 404 saying why.

use std::io::Write as _;
use std::net::TcpStream;
use std::time::Duration;

use crate::support::http;
use crate::support::{poll_until, stdout, Engine, Sandbox};

const STATIC: &str = r#"
[pipeline]
name = "lim"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b"]

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "up_out", format = "csv", grain = ["id"] }
"#;

/// The address a console (or serve) printed to `<name>.stdout`.
fn address(sb: &Sandbox, name: &str) -> String {
    let out = sb.path().join(format!("{name}.stdout"));
    let mut addr = String::new();
    poll_until("the console listens", Duration::from_secs(30), || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        match text.split("http://").nth(1) {
            Some(rest) => {
                addr = rest.split('/').next().unwrap_or_default().to_owned();
                true
            }
            None => false,
        }
    });
    addr
}

/// One GET: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path).expect("an answer")
}

/// One GET: (status, body), or `None` for a connection closed unanswered
/// (past the console's cap).
fn try_get(addr: &str, path: &str) -> Option<(u16, String)> {
    http::try_get(addr, path, &[]).map(|r| (r.status, r.body))
}

// A client that sent half a request head kept `weir console` (and
// `weir serve --http`) alive for minutes after SIGTERM: the server waited
// for every connection to finish.
#[test]
fn a_half_sent_request_does_not_keep_the_console_alive_after_sigterm() {
    let sb = Sandbox::new(STATIC);
    let engine = Engine::spawn(
        sb.weir(&["console", "m.toml", "--http", "127.0.0.1:0"]),
        sb.path(),
        "console",
    );
    let addr = address(&sb, "console");
    let mut half = TcpStream::connect(&addr).unwrap();
    write!(half, "GET /api/status HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    // A page load under way is not what holds it either.
    assert_eq!(get(&addr, "/api/status").0, 200);
    engine.signal(libc::SIGTERM);
    let out = engine.finish(Duration::from_secs(8));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout(&out).ends_with("console stopped\n"),
        "{}",
        stdout(&out)
    );
}

const HOURLY: &str = r#"
[pipeline]
name = "crowd"
code_version = "1"
warehouse = "wh"

[partitions.hour]
kind = "hourly"
start = "2026-09-20T00"

[tasks.h]
command = ["sh", "h.sh"]
partitioned_by = "hour"
output = { dataset = "hours", grain = ["hour"] }
"#;

/// Connections a crowd opens: more than the 128 descriptors serve has.
const CROWD: usize = 200;

// 1,100 connections under the usual 1,024 descriptors made serve's own
// store writes fail: the console now holds at most an eighth of the limit
// and closes the rest as they come, so the engine publishes while the
// crowd is connected, and a client after the crowd gets its page.
#[test]
fn a_crowd_of_connections_starves_neither_the_engine_nor_a_later_client() {
    let sb = Sandbox::new(HOURLY);
    sb.script(
        "h.sh",
        "printf 'hour,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    let mut cmd = sb.weir(&["serve", "m.toml", "--http", "127.0.0.1:0"]);
    // Hour 10 ends 6 s after serve's clock starts: the crowd is in by then.
    cmd.env("WEIR_NOW", "2026-09-20T10:59:54Z");
    // SAFETY: setrlimit(2) between fork and exec touches only the child.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let engine = Engine::spawn(cmd, sb.path(), "serve");
    let addr = address(&sb, "serve");
    let crowd: Vec<TcpStream> = (0..CROWD)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(crowd.len() > 128, "only {} connected", crowd.len());
    let out = sb.path().join("serve.stdout");
    poll_until("serve publishes hour 10", Duration::from_secs(60), || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("DONE h 2026-09-20T10 PUBLISHED")
    });
    drop(crowd);
    // The console closes the crowd's connections as it sees them go.
    let mut answer = None;
    poll_until("a page after the crowd", Duration::from_secs(30), || {
        answer = try_get(&addr, "/api/status");
        answer.is_some()
    });
    let (status, body) = answer.unwrap();
    assert_eq!(status, 200, "{body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let published: Vec<&str> = doc["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["partition"].as_str())
        .collect();
    // Hour 9 at start (the newest due), hour 10 with the crowd connected.
    assert_eq!(published, ["2026-09-20T09", "2026-09-20T10"], "{doc}");
    engine.signal(libc::SIGTERM);
    let out = engine.finish(Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(!errors.contains("error"), "{errors}");
}

// An unknown partition was a 500 (the explanation failed); every name a
// page is given that the manifest does not know is a 404 saying which.
#[test]
fn unknown_names_are_404_pages_that_say_which() {
    let sb = Sandbox::new(STATIC);
    let engine = Engine::spawn(
        sb.weir(&["console", "m.toml", "--http", "127.0.0.1:0"]),
        sb.path(),
        "console",
    );
    let addr = address(&sb, "console");
    for (path, status, says) in [
        (
            "/instance?task=up&partition=zz",
            404,
            "partition `zz` is not in the partition scheme of task `up`",
        ),
        (
            "/api/instance?task=up&partition=zz",
            404,
            "partition `zz` is not in the partition scheme of task `up`",
        ),
        (
            "/instance?task=nope&partition=a",
            404,
            "no task `nope` in `lim`",
        ),
        ("/grid?task=nope", 404, "no task `nope` in `lim`"),
        ("/grid?state=bogus", 400, "no state `bogus`"),
        ("/runs/RUN-NONE", 404, "no run `RUN-NONE` in the warehouse"),
        ("/grid?pipeline=other", 404, "no pipeline `other` here"),
    ] {
        let (code, body) = get(&addr, path);
        assert_eq!(code, status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
    // The scheme's keys are named, so the page says what would do.
    let (_, body) = get(&addr, "/instance?task=up&partition=zz");
    assert!(body.contains("a, b") || body.contains("`a`"), "{body}");
    assert_eq!(get(&addr, "/instance?task=up&partition=a").0, 200);
    engine.signal(libc::SIGTERM);
    assert_eq!(
        engine.finish(Duration::from_secs(20)).status.code(),
        Some(0)
    );
}
