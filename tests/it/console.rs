//! `weir console`: the live console, read in a real headless browser
//! (Debian's `chromium`, installed by .ci/run) and over plain HTTP; and the
//! static report's problems-first order.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{chromium, http};
use crate::support::{poll_until, stderr, stdout, Engine, Sandbox};

/// A task whose partition `c` fails deterministically with hostile stderr:
/// markup that would run if any page put it into HTML unescaped.
const MANIFEST: &str = r#"
[pipeline]
name = "con"
code_version = "<b>v1</b>"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b", "c"]

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "up_out", format = "csv", grain = ["id"] }

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = { dataset = "down_out", format = "csv", grain = ["id"] }
"#;

const HOSTILE: &str = "<script>document.title='PWNED'</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">";

fn pipeline() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script(
        "up.sh",
        &format!(
            "if [ \"$WEIR_PARTITION\" = c ]; then cat >&2 <<'EOF'\n{HOSTILE}\nEOF\nexit 65; fi\n\
             printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n"
        ),
    );
    sb.script(
        "down.sh",
        "cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let out = sb.run("RUN-C1", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    sb
}

/// A running `weir console`, stopped (SIGTERM) when dropped.
struct Console {
    engine: Option<Engine>,
    addr: String,
}

impl Console {
    #[track_caller]
    fn start(sb: &Sandbox, args: &[&str], token: Option<&str>) -> Console {
        let mut cmd = sb.weir(&["console", "m.toml"]);
        cmd.args(args).env_remove("WEIR_CONSOLE_TOKEN");
        if let Some(t) = token {
            cmd.env("WEIR_CONSOLE_TOKEN", t);
        }
        let engine = Engine::spawn(cmd, sb.path(), "console");
        let out = sb.path().join("console.stdout");
        let mut addr = String::new();
        poll_until("the console listens", Duration::from_secs(20), || {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            match text.split("http://").nth(1) {
                Some(rest) => {
                    addr = rest.split('/').next().unwrap_or_default().to_owned();
                    true
                }
                None => false,
            }
        });
        Console {
            engine: Some(engine),
            addr,
        }
    }

    fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port())
    }

    /// SIGTERM, then its exit status and stdout.
    fn stop(mut self) -> std::process::Output {
        let engine = self.engine.take().unwrap();
        engine.signal(libc::SIGTERM);
        engine.finish(Duration::from_secs(20))
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(e) = self.engine.take() {
            e.signal(libc::SIGTERM);
            let _ = e.finish_within(Duration::from_secs(10));
        }
    }
}

/// One HTTP/1.1 GET to the console at 127.0.0.1: (status, headers, body).
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let r = http::get(&format!("127.0.0.1:{port}"), path, headers);
    (r.status, r.head, r.body)
}

/// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
fn dom(browser: &str, url: &str, budget_ms: u32) -> String {
    chromium::load(browser, url, budget_ms).dom
}

// The console opens on what needs a person. In a real
// browser the quarantined instance is on the first screen with its evidence
// and the command `weir explain` recommends; the hostile stderr is text (no
// script ran, no attribute was set); the grid filters by state and task; the
// page refreshed itself without a reload.
#[cfg_attr(
    not(any(weir_has_chromium, weir_ci)),
    ignore = "needs Chromium: `chromium` on the PATH (.ci/run installs it)"
)]
#[test]
fn console_first_screen_and_grid_in_a_headless_browser() {
    let sb = pipeline();
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let Some(browser) = chromium::or_skip() else {
        return;
    };
    let page = dom(browser, &console.url("/"), 7000);
    assert!(
        page.contains(
            "<tr class=\"problem\" data-kind=\"QUARANTINED\" data-task=\"up\" data-partition=\"c\">"
        ),
        "{page}"
    );
    // The command explain gives, exactly.
    let explained = sb
        .weir(&["explain", "m.toml", "up", "--partition", "c", "--json"])
        .output()
        .unwrap();
    let explained: serde_json::Value = serde_json::from_slice(&explained.stdout).unwrap();
    let recommendation = explained["recommendation"].as_str().unwrap().to_owned();
    assert!(recommendation.contains("weir retry m.toml up --partition c --note"));
    let html_text = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    assert!(
        page.contains(&format!(
            "<div class=\"recommendation\">{}</div>",
            html_text(&recommendation)
        )),
        "{page}"
    );
    assert!(page.contains(
        "<code class=\"command\">weir retry m.toml up --partition c --note \"...\"</code>"
    ));
    assert!(page.contains("<code class=\"explain\">weir explain m.toml up --partition c</code>"));
    // The evidence: the attempt's exit code and class, and its stderr as text.
    assert!(page.contains("exit code 65 (deterministic)"), "{page}");
    assert!(page.contains(&html_text(HOSTILE)), "{page}");
    assert!(!page.contains("<script>document.title"));
    assert!(
        !page.contains("data-pwned=\"1\""),
        "the injected handler ran"
    );
    assert!(!page.contains("PWNED</title>"));
    assert!(
        page.contains("&lt;b&gt;v1&lt;/b&gt;"),
        "code_version as text"
    );
    // The refresh ran (and found the page unchanged).
    assert!(page.contains("<body data-updated="), "no refresh ran");

    let quarantined = dom(browser, &console.url("/grid?state=quarantined"), 0);
    assert!(
        quarantined.contains("data-task=\"up\" data-partition=\"c\" data-state=\"quarantined\"")
    );
    assert!(
        !quarantined.contains("data-state=\"published\""),
        "{quarantined}"
    );
    assert!(quarantined.contains("data-matched=\"1\""));
    let down = dom(browser, &console.url("/grid?task=down"), 0);
    assert!(down.contains("data-task=\"down\" data-partition=\"a\" data-state=\"published\""));
    assert!(!down.contains("data-task=\"up\""), "{down}");
    let unfiltered = dom(browser, &console.url("/grid"), 0);
    assert_eq!(unfiltered.matches("data-state=\"published\"").count(), 4);

    // The instance page: attempts, stderr tail as text, input snapshot, generations.
    let instance = dom(browser, &console.url("/instance?task=down&partition=a"), 0);
    assert!(instance.contains("id=\"generations\""));
    assert!(instance.contains("id=\"snapshot\""));
    assert!(instance.contains("up_out"), "{instance}");
    let failed = dom(browser, &console.url("/instance?task=up&partition=c"), 0);
    assert!(failed.contains(&format!(
        "<pre class=\"stderr\" id=\"stderr\">{}",
        html_text(HOSTILE)
    )));
    assert!(!failed.contains("data-pwned=\"1\""));
    // The run's Gantt chart (the report's), its bars placed: the page's
    // policy lets their numeric style attributes apply.
    let shown = chromium::load(browser, &console.url("/runs/RUN-C1"), 0);
    assert!(
        !shown.log.contains("Content Security Policy"),
        "{}",
        shown.log
    );
    let run = shown.dom;
    assert!(run.contains("<h2>Run RUN-C1</h2>"), "{run}");
    assert!(run.contains("class=\"bar failed\""));
    let stopped = console.stop();
    assert_eq!(stopped.status.code(), Some(0), "{}", stderr(&stopped));
    assert!(stdout(&stopped).ends_with("console stopped\n"));
}

// `/api/status` is `weir status --json`, value for value,
// and the other documents are JSON too.
#[test]
fn api_status_is_status_json() {
    let sb = pipeline();
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let (code, head, body) = get(console.port(), "/api/status", &[]);
    assert_eq!(code, 200, "{head}");
    assert!(head
        .to_lowercase()
        .contains("content-type: application/json"));
    let api: serde_json::Value = serde_json::from_str(&body).unwrap();
    let cli = sb.weir(&["status", "m.toml", "--json"]).output().unwrap();
    let cli: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(api, cli);
    assert_eq!(api["attention"][0]["state"], "QUARANTINED");
    let (code, _, body) = get(console.port(), "/api/problems", &[]);
    assert_eq!(code, 200);
    let problems: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problems["problems"][0]["kind"], "QUARANTINED");
    assert_eq!(
        problems["problems"][0]["command"],
        "weir retry m.toml up --partition c --note \"...\""
    );
    let (code, _, body) = get(console.port(), "/api/instance?task=nope&partition=a", &[]);
    assert_eq!(code, 404);
    assert!(body.contains("no task `nope`"));
    // Read-only: nothing but GET.
    let mut s = TcpStream::connect(("127.0.0.1", console.port())).unwrap();
    s.write_all(b"POST /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 405"), "{raw}");
    // A loopback console answers only to loopback names (DNS rebinding).
    let mut s = TcpStream::connect(("127.0.0.1", console.port())).unwrap();
    s.write_all(b"GET /api/status HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 401"), "{raw}");
    drop(console);
    // A task name cannot carry markup at all: its manifest is refused.
    let bad = Sandbox::new(&MANIFEST.replace("[tasks.down]", "[tasks.\"<script>\"]"));
    let out = bad
        .weir(&["console", "m.toml", "--http", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("task `<script>` is not a valid name"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
}

// A console on a non-loopback address starts only with a
// token, and then refuses every request that does not present it.
#[test]
fn non_loopback_console_needs_its_token() {
    let sb = pipeline();
    let refused = sb
        .weir(&["console", "m.toml", "--http", "0.0.0.0:0"])
        .env_remove("WEIR_CONSOLE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("refusing to serve the console on 0.0.0.0:0 without a token"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stdout(&refused), "");

    let token = "t0k-3n_secret";
    let console = Console::start(&sb, &["--http", "0.0.0.0:0"], Some(token));
    let port = console.port();
    for path in ["/", "/api/status", "/grid", "/runs/RUN-C1"] {
        let (code, _, body) = get(port, path, &[]);
        assert_eq!(code, 401, "{path}");
        assert!(body.contains("needs its token"), "{body}");
        assert!(!body.contains("up_out"));
    }
    let (code, _, _) = get(
        port,
        "/api/status",
        &[("Authorization", "Bearer t0k-3n_secreT")],
    );
    assert_eq!(code, 401);
    let (code, _, _) = get(port, "/api/status?token=t0k", &[]);
    assert_eq!(code, 401);
    let (code, _, body) = get(
        port,
        "/api/status",
        &[("Authorization", &format!("Bearer {token}"))],
    );
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["pipeline"],
        "con"
    );
    // The browser's way: `?token=` once, then the cookie it sets.
    let (code, head, _) = get(port, &format!("/?token={token}"), &[]);
    assert_eq!(code, 200);
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert!(head.contains("HttpOnly; SameSite=Strict"));
    let (code, _, _) = get(port, "/grid", &[("Cookie", &cookie)]);
    assert_eq!(code, 200);
    // The script and style hold no data and load without the token.
    let (code, _, _) = get(port, "/static/console.js", &[]);
    assert_eq!(code, 200);
    if let Some(browser) = chromium::or_skip() {
        let page = dom(browser, &console.url(&format!("/?token={token}")), 7000);
        assert!(page.contains("data-kind=\"QUARANTINED\""));
        // The refresh carried the cookie (an unauthorized one would say so).
        assert!(page.contains("<body data-updated="), "{page}");
        assert!(!page.contains("not updating"));
        let denied = dom(browser, &console.url("/"), 0);
        assert!(denied.contains("needs its token"));
        assert!(!denied.contains("QUARANTINED"));
    }
}

#[test]
fn a_token_given_on_the_command_line_is_warned_about() {
    let sb = Sandbox::new(MANIFEST);
    let console = Console::start(&sb, &["--http", "127.0.0.1:0", "--token", "tk-1"], None);
    let (code, _, _) = get(
        console.port(),
        "/api/status",
        &[("Authorization", "Bearer tk-1")],
    );
    assert_eq!(code, 200);
    let out = console.stop();
    assert!(
        stderr(&out).contains(
            "warning: `--token` is readable by every user of this host (ps, /proc/<pid>/cmdline); set WEIR_CONSOLE_TOKEN instead"
        ),
        "{}",
        stderr(&out)
    );
    // Given the safe way, nothing to warn about.
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], Some("tk-2"));
    let out = console.stop();
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// 1,874 daily partitions × 2 tasks, one quarantined cell in the middle
/// (a feed's years of history, where the one problem sits at row 812).
fn wide() -> Sandbox {
    let sb = Sandbox::new(
        "[pipeline]\nname = \"wide\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n\
         [partitions.daily]\nkind = \"daily\"\nstart = \"2020-01-01\"\nend = \"2025-02-16\"\n\n\
         [tasks.load]\ncommand = [\"sh\", \"load.sh\"]\noutput = { dataset = \"loaded\", grain = [\"id\"] }\n\n\
         [tasks.sum]\ncommand = [\"true\"]\ninputs = [\"loaded\"]\noutput = { dataset = \"summed\", grain = [\"id\"] }\n",
    );
    sb.script("load.sh", "echo 'bad row 812' >&2; exit 65\n");
    let out = sb.run("RUN-W1", &["--task", "load", "--partition", "2022-03-10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    sb
}

// The static report opens on the problems, and beyond a
// few hundred partitions draws a summary per task and only the rows with a
// problem, each problem linked to its row.
#[test]
fn report_puts_problems_first_and_summarises_a_large_grid() {
    let sb = wide();
    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    let problems = html
        .find("<h2 id=\"problems\">Needs a person (1)</h2>")
        .expect("problems");
    let grid = html.find("<h2 id=\"partitions\">").expect("grid");
    assert!(problems < grid, "problems come first");
    assert!(html.contains("<a href=\"#p-2022-03-10\">2022-03-10</a>"));
    assert!(html.contains("<tr id=\"p-2022-03-10\"><th>2022-03-10</th>"));
    assert!(html.contains("bad row 812"));
    assert!(html.contains("weir retry m.toml load --partition 2022-03-10 --note"));
    // 1,874 partitions: one row drawn, the rest counted per task.
    assert_eq!(html.matches("<tr id=\"p-").count(), 1);
    assert!(html.contains(
        "<tr data-task=\"load\"><th>load</th><td class=\"count\" data-state=\"published\">0</td>"
    ));
    assert!(html.contains("<td class=\"count\" data-state=\"quarantined\">1</td>"));
    assert!(html.contains("<td class=\"count\" data-state=\"missing\">1873</td>"));
    assert!(html.contains("1874 partitions: the 1 with a held, quarantined or late cell"));
    assert!(html.len() < 200_000, "{} bytes", html.len());
}

// MISSED, FAILING and UNDELIVERED come from the event
// logs, and each leaves the first screen once the logs say it is settled
// (ACCEPTED, a publication, NOTIFIED with the same outbox key).
#[test]
fn first_screen_lists_missed_failing_undelivered_until_settled() {
    use weir::events::{Event, EventLog, State};
    let sb = pipeline();
    let wh = sb.path().join("wh");
    let log = EventLog::open(&wh, "serve-S1").unwrap();
    log.emit(
        State::Missed,
        Event::instance("up", "a")
            .detail("due after downtime; `weir run m.toml --task up --partition a` fills it"),
    )
    .unwrap();
    log.emit(
        State::Missed,
        Event::instance("down", "c").detail("skipped after downtime"),
    )
    .unwrap();
    log.emit(
        State::Failed,
        Event::instance("down", "c")
            .attempt(1, Some(9))
            .detail("exit code 1 <i>transient</i>"),
    )
    .unwrap();
    log.emit(
        State::NotifyFailed,
        Event::instance("up", "c")
            .detail("webhook answered 503")
            .data(serde_json::json!({"key": "up/c/QUARANTINED/1", "target": "oncall"})),
    )
    .unwrap();
    log.sync().unwrap();
    drop(log);
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let problems = |port| {
        let (code, _, body) = get(port, "/api/problems", &[]);
        assert_eq!(code, 200, "{body}");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        doc["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{} {} {}: {}",
                    p["kind"].as_str().unwrap(),
                    p["task"].as_str().unwrap_or("-"),
                    p["partition"].as_str().unwrap_or("-"),
                    p["detail"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let listed = problems(console.port());
    // up a was published by RUN-C1: its MISSED is settled already.
    assert_eq!(listed.len(), 4, "{listed:#?}");
    assert_eq!(
        listed[0],
        "QUARANTINED up c: deterministic failure: exit code 65"
    );
    assert!(
        listed[1].starts_with(
            "FAILING down c: attempt 1 of run serve-S1 ended FAILED: exit code 1 <i>transient</i>"
        ),
        "{listed:#?}"
    );
    assert_eq!(listed[2], "MISSED down c: skipped after downtime");
    assert!(
        listed[3].starts_with("UNDELIVERED up c: webhook answered 503 (run serve-S1, "),
        "{listed:#?}"
    );
    let page = get(console.port(), "/", &[]).2;
    // minijinja escapes `/` too (`&#x2f;`).
    assert!(
        page.contains("exit code 1 &lt;i&gt;transient&lt;"),
        "{page}"
    );
    assert!(!page.contains("<i>"));

    let log = EventLog::open(&wh, "op-S2").unwrap();
    log.emit(
        State::Accepted,
        Event::instance("down", "c").detail("never to be built"),
    )
    .unwrap();
    log.emit(
        State::Notified,
        Event::instance("up", "c")
            .detail("delivered")
            .data(serde_json::json!({"key": "up/c/QUARANTINED/1", "target": "oncall"})),
    )
    .unwrap();
    log.sync().unwrap();
    drop(log);
    let listed = problems(console.port());
    assert_eq!(
        listed,
        [
            "QUARANTINED up c: deterministic failure: exit code 65",
            "FAILING down c: attempt 1 of run serve-S1 ended FAILED: exit code 1 <i>transient</i>"
        ],
        "accepted and delivered are settled; a failure stays until something else is said"
    );
}

// The library handle `weir serve --http` runs the console
// with: it serves from its own thread once `serve` returns, refuses to
// start where it must, and stops listening when dropped.
#[test]
fn console_handle_serves_until_dropped() {
    let sb = pipeline();
    let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    let refused = weir::console::serve("0.0.0.0:0".parse().unwrap(), vec![sb.manifest()], None);
    assert!(matches!(
        refused,
        Err(weir::console::ConsoleError::NoToken { .. })
    ));
    let empty = weir::console::serve(addr, vec![sb.manifest()], Some(""));
    assert!(matches!(
        empty,
        Err(weir::console::ConsoleError::EmptyToken)
    ));
    let console = weir::console::serve(addr, vec![sb.manifest()], None).unwrap();
    let port = console.local_addr().port();
    // Taken: a second console on the same port is refused at once.
    let busy = weir::console::serve(console.local_addr(), vec![sb.manifest()], None);
    assert!(matches!(
        busy,
        Err(weir::console::ConsoleError::Bind { .. })
    ));
    let (code, _, body) = get(port, "/api/status", &[]);
    assert_eq!(code, 200);
    assert!(body.contains("\"pipeline\":\"con\""));
    drop(console);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening after drop"
    );
}

// The console's grid of 1,874 partitions is summarised
// (counts per task, only the problem row drawn), and filters by key range.
#[test]
fn console_grid_of_1874_partitions_is_summarised_and_filters_by_range() {
    let sb = wide();
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let grid = |query: &str| {
        let started = std::time::Instant::now();
        let (code, _, body) = get(console.port(), &format!("/api/grid{query}"), &[]);
        assert_eq!(code, 200, "{body}");
        let elapsed = started.elapsed();
        (
            serde_json::from_str::<serde_json::Value>(&body).unwrap(),
            elapsed,
        )
    };
    let (all, elapsed) = grid("");
    eprintln!("1874 x 2 grid served in {elapsed:?}");
    assert_eq!(all["matched"], 1874);
    assert_eq!(all["summarised"], true);
    let rows = all["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["key"], "2022-03-10");
    assert_eq!(rows[0]["cells"][0]["state"], "quarantined");
    assert_eq!(all["summary"][0]["task"], "load");
    assert_eq!(
        all["summary"][0]["counts"],
        serde_json::json!([
            ["published", 0],
            ["stale", 0],
            ["running", 0],
            ["held", 0],
            ["quarantined", 1],
            ["late", 0],
            ["waiting", 0],
            ["missing", 1873]
        ])
    );
    // A month: drawn whole, newest first.
    let (march, _) = grid("?from=2022-03-01&to=2022-03");
    assert_eq!(march["matched"], 31);
    assert_eq!(march["summarised"], false);
    assert_eq!(march["rows"][0]["key"], "2022-03-31");
    assert_eq!(march["rows"][30]["key"], "2022-03-01");
    // One task, one state: the missing sums, summarised past 300 but drawn
    // as the filter asks (the first 300).
    let (missing, _) = grid("?task=sum&state=missing");
    assert_eq!(missing["matched"], 1874);
    assert_eq!(missing["columns"], serde_json::json!(["sum"]));
    assert_eq!(missing["rows"].as_array().unwrap().len(), 300);
    let started = std::time::Instant::now();
    let (code, _, page) = get(console.port(), "/", &[]);
    eprintln!("first screen of 1874 x 2 served in {:?}", started.elapsed());
    assert_eq!(code, 200);
    assert!(
        page.contains("data-kind=\"QUARANTINED\" data-task=\"load\" data-partition=\"2022-03-10\"")
    );
}

// A feed late for a year is one story: the first
// screen and the report list the first LATE partitions with their commands
// and count the rest with their range, linked to the grid filtered on them.
#[test]
fn a_year_of_late_partitions_is_counted_not_listed() {
    let sb = Sandbox::new(
        "[pipeline]\nname = \"late\"\ncode_version = \"1\"\nwarehouse = \"wh\"\n\n\
         [partitions.daily]\nkind = \"daily\"\nstart = \"2024-01-01\"\nend = \"2024-12-31\"\n\n\
         [tasks.feed]\ncommand = [\"true\"]\noutput = { dataset = \"fed\", grain = [\"id\"] }\nsla = \"6h\"\n",
    );
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let (code, _, body) = get(console.port(), "/api/problems", &[]);
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["total"], 366);
    let listed = doc["problems"].as_array().unwrap();
    assert_eq!(listed.len(), 20);
    assert!(listed.iter().all(|p| p["kind"] == "LATE"));
    assert_eq!(
        listed[0]["command"],
        format!(
            "weir run m.toml --partition {}",
            listed[0]["partition"].as_str().unwrap()
        )
    );
    assert_eq!(
        doc["more"],
        serde_json::json!([{
            "kind": "LATE", "task": "feed", "count": 346,
            "first": "2024-01-21", "last": "2024-12-31"
        }])
    );
    let (_, _, page) = get(console.port(), "/", &[]);
    assert!(page.contains("late: 366 things need a person"), "{page}");
    assert!(page.contains("and 346 more LATE of feed, 2024-01-21 to 2024-12-31"));
    assert!(page.contains("href=\"/grid?pipeline=late&amp;task=feed&amp;state=late\""));
    assert_eq!(page.matches("<tr class=\"problem\"").count(), 20);

    let made = sb
        .weir(&["report", "m.toml", "--out", "r.html"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let html = std::fs::read_to_string(sb.path().join("r.html")).unwrap();
    assert!(html.contains("<h2 id=\"problems\">Needs a person (366)</h2>"));
    assert_eq!(html.matches("<tr class=\"problem\"").count(), 20);
    assert!(html.contains("and 346 more LATE of feed, 2024-01-21 to 2024-12-31"));
    // Late cells are problem rows: all 366 drawn, past the summary.
    assert_eq!(html.matches("<tr id=\"p-").count(), 366);
}

// A published file changed behind weir's back is the
// first thing on the first screen, as `weir status` sees it.
#[test]
fn a_drifted_file_heads_the_first_screen() {
    let sb = pipeline();
    let status = sb.weir(&["status", "m.toml", "--json"]).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let file = status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["dataset"] == "up_out" && p["partition"] == "b")
        .unwrap()["files"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(b"2\n").unwrap();
    drop(f);
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let (_, _, body) = get(console.port(), "/api/problems", &[]);
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let first = &doc["problems"][0];
    assert_eq!(first["kind"], "DRIFTED", "{doc:#}");
    assert_eq!(first["task"], "up");
    assert_eq!(first["partition"], "b");
    assert!(
        first["detail"].as_str().unwrap().contains("changed size"),
        "{first}"
    );
    assert!(first["recommendation"]
        .as_str()
        .unwrap()
        .contains("`weir rollback m.toml up_out --partition b`"));
    assert_eq!(doc["problems"][1]["kind"], "QUARANTINED");
    let (_, _, api) = get(console.port(), "/api/status", &[]);
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["drifted"][0]["partition"], "b");
}

#[test]
fn the_first_screen_shows_a_paused_backfills_progress_eta_and_since_when() {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "bf"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "2026-01-01"
end = "2026-01-31"

[pools.backfill]
slots = 1

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }

[backfills.three]
from = "2026-01-01"
to = "2026-01-03"
pool = "backfill"
reason = "rebuild"
"#,
    );
    sb.script(
        "t.sh",
        "sleep 1\nprintf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    let engine = Engine::spawn(
        sb.weir(&["backfill", "m.toml", "three", "--run-id", "bf1"]),
        sb.path(),
        "engine",
    );
    let started = |sb: &Sandbox| {
        crate::support::all_events(&sb.path().join("wh"))
            .unwrap_or_default()
            .iter()
            .filter(|e| e.state == weir::events::State::Running)
            .count()
    };
    poll_until("the first attempt", Duration::from_secs(20), || {
        started(&sb) == 1
    });
    let out = sb
        .weir(&["backfill", "m.toml", "three", "--pause"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let console = Console::start(&sb, &["--http", "127.0.0.1:0"], None);
    let mut body = String::new();
    poll_until("the first partition done", Duration::from_secs(20), || {
        body = get(console.port(), "/", &[]).2;
        // The template escapes `/` too.
        body.contains("1&#x2f;3 done")
    });
    assert!(
        body.contains("<p class=\"backfill\" data-backfill=\"three\" data-steered=\"paused\">backfill <b>three</b>: <a href=\"/runs/bf1?pipeline=bf\">run bf1</a>: <span class=\"progress\">1&#x2f;3 done, 0 running, ETA "),
        "{body}"
    );
    assert!(
        body.contains("<span class=\"kind paused\">PAUSED</span> since 20"),
        "{body}"
    );
    assert!(body.contains(" (pid "), "{body}");
    assert_eq!(started(&sb), 1, "nothing starts while paused");
    let out = sb
        .weir(&["backfill", "m.toml", "three", "--resume"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = engine.finish(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Finished: the first screen names no backfill.
    let body = get(console.port(), "/", &[]).2;
    assert!(!body.contains("class=\"backfill\""), "{body}");
    drop(console);
}
