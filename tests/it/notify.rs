//! Notifications: a local HTTP receiver (`support::http`) and a
//! command target hear each fact once, with a key that names the fact; a
//! receiver that is down gets everything later with the same keys; a kill
//! between the commit and the delivery loses nothing; secrets read through
//! `env:`/`file:` are sent and never written down. A build without the
//! `http` feature runs the command-target tests only.
#![cfg_attr(not(feature = "http"), allow(dead_code, unused_imports))]

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;
use weir::events::State;

use crate::support::http::{self, Reply, Request};
use crate::support::{stderr, stdout, Sandbox};

const TOKEN: &str = "s3cr3t-hook-token-4242";
const FILE_SECRET: &str = "f1le-secret-7777";

/// A receiver at `/hook` that keeps every request; while `down` it answers
/// 503 (and keeps the request, so the keys tried can be compared).
struct Receiver {
    url: String,
    http: http::Receiver,
    down: Arc<AtomicBool>,
}

impl Receiver {
    fn start(down: bool) -> Receiver {
        let down = Arc::new(AtomicBool::new(down));
        let is_down = Arc::clone(&down);
        let http = http::Receiver::start(move |_| {
            Reply::Status(if is_down.load(Ordering::SeqCst) {
                503
            } else {
                200
            })
        });
        Receiver {
            url: http.url("/hook"),
            http,
            down,
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.http.requests()
    }

    /// Requests answered 200: (event, task, partition) → keys.
    fn delivered(&self, since: usize) -> Vec<Request> {
        self.requests()[since..].to_vec()
    }
}

fn facts(requests: &[Request]) -> Vec<(String, String, String)> {
    let mut facts: Vec<(String, String, String)> = requests
        .iter()
        .map(|r| {
            (
                r.body["event"].as_str().unwrap_or("?").to_owned(),
                r.body["task"].as_str().unwrap_or("?").to_owned(),
                r.body["partition"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    facts.sort();
    facts
}

fn keys(requests: &[Request]) -> Vec<String> {
    let mut keys: Vec<String> = requests
        .iter()
        .map(|r| r.body["idempotency_key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

fn fact(event: &str, task: &str, partition: &str) -> (String, String, String) {
    (event.into(), task.into(), partition.into())
}

/// `up` publishes a and b; `flaky` fails its first attempt of each
/// (transient, exit 75) and then publishes; `down` fails deterministically
/// for b while `fail_b` exists.
fn sandbox(notify: &str) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "nt"
code_version = "1"
warehouse = "wh"

[partitions.keys]
kind = "static"
keys = ["a", "b"]

[retry.quick]
max_attempts = 3
backoff = {{ initial = "10ms", max = "20ms", jitter = "none" }}

[tasks.up]
command = ["sh", "up.sh"]
output = {{ dataset = "up_out", format = "csv", grain = ["id"] }}

[tasks.flaky]
command = ["sh", "flaky.sh"]
retry = "quick"
output = {{ dataset = "flaky_out", format = "csv", grain = ["id"] }}

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["up_out"]
output = {{ dataset = "down_out", format = "csv", grain = ["id"] }}

{notify}
"#
    ));
    sb.script(
        "up.sh",
        "printf 'id,v\\n1,x\\n2,y\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "flaky.sh",
        "if [ \"$WEIR_ATTEMPT\" = 1 ]; then echo 'flaky: try again' >&2; exit 75; fi\n\
         printf 'id\\n1\\n' > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    sb.script(
        "down.sh",
        "if [ \"$WEIR_PARTITION\" = b ] && [ -e fail_b ]; then echo 'boom: bad input' >&2; exit 65; fi\n\
         cp \"$WEIR_INPUT_UP_OUT\"/*.csv \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    std::fs::write(sb.path().join("secret"), format!("{FILE_SECRET}\n")).unwrap();
    sb
}

fn http_target(url: &str, on: &str) -> String {
    format!(
        "[notify.hook]\nurl = \"{url}\"\non = {on}\nheaders = {{ Authorization = \"env:HOOK_TOKEN\", X-Extra = \"file:secret\", X-Plain = \"literal\" }}\n"
    )
}

/// `weir ARGS` with the hook's token in the environment and no proxy in
/// the way of 127.0.0.1.
fn cmd(sb: &Sandbox, args: &[&str]) -> std::process::Command {
    let mut cmd = sb.weir(args);
    cmd.env("HOOK_TOKEN", format!("Bearer {TOKEN}"));
    for proxy in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        cmd.env_remove(proxy);
    }
    cmd
}

fn weir(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    cmd(sb, args).output().expect("weir runs")
}

/// The keys pending for `target` in the sandbox's warehouse.
fn pending(sb: &Sandbox, target: &str) -> BTreeSet<String> {
    match std::fs::read_dir(sb.path().join("wh/_notify/pending").join(target)) {
        // The store's own lock and temp files are hidden (`.`).
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with('.'))
            .filter_map(|name| name.strip_suffix(".json").map(str::to_owned))
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

fn run(sb: &Sandbox, run_id: &str) -> std::process::Output {
    weir(sb, &["run", "m.toml", "--run-id", run_id])
}

fn states(sb: &Sandbox, run_id: &str, state: State) -> Vec<weir::events::EventRecord> {
    sb.events(run_id)
        .into_iter()
        .filter(|e| e.state == state)
        .collect()
}

/// Every byte weir wrote under the sandbox (warehouse, logs, reports),
/// as text, with the path of each file that holds `needle`.
fn files_holding(sb: &Sandbox, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![sb.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n != "secret") {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if String::from_utf8_lossy(&bytes).contains(needle) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

// One notification per fact, keys unique and stable; a retried
// attempt that then published announces nothing but its publication; a
// restated quarantine in a later run is not a new fact; secrets from env:
// and file: are sent as headers and never written anywhere.
#[cfg(feature = "http")]
#[test]
fn one_notification_per_fact_and_secrets_stay_secret() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&http_target(&receiver.url, r#"["failed", "published"]"#));
    std::fs::write(sb.path().join("fail_b"), "").unwrap();
    let out = run(&sb, "r1");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let got = receiver.requests();
    assert_eq!(
        facts(&got),
        [
            fact("published", "down", "a"),
            fact("published", "flaky", "a"),
            fact("published", "flaky", "b"),
            fact("published", "up", "a"),
            fact("published", "up", "b"),
            fact("quarantined", "down", "b"),
        ],
        "no `failed` for flaky's retried attempts"
    );
    let unique: BTreeSet<String> = keys(&got).into_iter().collect();
    assert_eq!(unique.len(), got.len(), "one key per fact");
    for r in &got {
        assert_eq!(
            r.headers.get("idempotency-key").map(String::as_str),
            r.body["idempotency_key"].as_str()
        );
        assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}"));
        assert_eq!(r.headers["x-extra"], FILE_SECRET);
        assert_eq!(r.headers["x-plain"], "literal");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.body["pipeline"], "nt");
    }
    let published = got
        .iter()
        .find(|r| r.body["event"] == "published" && r.body["task"] == "up")
        .unwrap();
    assert_eq!(published.body["state"], "PUBLISHED");
    assert_eq!(published.body["generation"], 1);
    assert_eq!(published.body["dataset"], "up_out");
    let quarantined = got
        .iter()
        .find(|r| r.body["event"] == "quarantined")
        .unwrap();
    assert_eq!(quarantined.body["state"], "QUARANTINED");
    assert_eq!(quarantined.body["attempt"], 1);
    // Each delivery is an event naming target and key.
    let notified = states(&sb, "r1", State::Notified);
    assert_eq!(notified.len(), 6, "{notified:?}");
    let logged: BTreeSet<String> = notified
        .iter()
        .map(|e| e.data["idempotency_key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(logged, unique);
    assert!(notified.iter().all(|e| e.data["target"] == "hook"));
    assert!(states(&sb, "r1", State::NotifyFailed).is_empty());

    // A second run: everything current, the quarantine restated: no new fact.
    let out = run(&sb, "r2");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(receiver.requests().len(), 6, "nothing announced twice");
    let out = weir(&sb, &["status", "m.toml"]);
    assert!(!stdout(&out).contains("NOTIFY"), "{}", stdout(&out));
    let report = weir(&sb, &["report", "m.toml", "--out", "report.html"]);
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));

    for secret in [TOKEN, FILE_SECRET] {
        assert_eq!(files_holding(&sb, secret), Vec::<String>::new(), "{secret}");
        for o in [&out, &report] {
            assert!(!stdout(o).contains(secret) && !stderr(o).contains(secret));
        }
    }
}

// A receiver that is down for the run never blocks it; status
// says what is undelivered and --check pages on it; once it is back,
// `weir notify --flush` delivers everything with the keys tried before.
#[cfg(feature = "http")]
#[test]
fn a_down_receiver_gets_everything_later_with_the_same_keys() {
    let receiver = Receiver::start(true);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let started = std::time::Instant::now();
    let out = run(&sb, "r1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the run waited on the target: {:?}",
        started.elapsed()
    );
    assert!(
        stderr(&out).contains("warning: notify: 6 notifications not delivered to `hook`")
            && stderr(&out).contains("HTTP 503"),
        "{}",
        stderr(&out)
    );
    // The first one tried three times, the rest not tried by a process
    // that found the target down.
    let tried = keys(&receiver.requests());
    assert_eq!(tried.len(), 3, "{tried:?}");
    assert!(tried.iter().all(|k| *k == tried[0]));
    let failed = states(&sb, "r1", State::NotifyFailed);
    assert_eq!(failed.len(), 6);
    assert_eq!(states(&sb, "r1", State::Published).len(), 6);
    let outbox = pending(&sb, "hook");
    assert_eq!(outbox.len(), 6);
    assert!(outbox.contains(&tried[0]));
    let failed_keys: BTreeSet<String> = failed
        .iter()
        .map(|e| e.data["idempotency_key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(failed_keys, outbox);

    let status = weir(&sb, &["status", "m.toml"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let line = stdout(&status)
        .lines()
        .find(|l| l.starts_with("NOTIFY"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{}", stdout(&status)));
    assert!(
        line.starts_with("NOTIFY      6 notifications undelivered to hook since 20")
            && line.ends_with("; `weir notify m.toml --flush` delivers them"),
        "{line}"
    );
    let check = weir(&sb, &["status", "m.toml", "--check"]);
    assert_eq!(check.status.code(), Some(4), "{}", stdout(&check));
    // A run while it is still down tries the backlog's first, counts the
    // rest, and logs only what it tried.
    let out = run(&sb, "r-down");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: notify: 6 notifications not delivered to `hook`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(states(&sb, "r-down", State::NotifyFailed).len(), 1);
    assert_eq!(pending(&sb, "hook"), outbox);

    receiver.down.store(false, Ordering::SeqCst);
    let before = receiver.requests().len();
    let flush = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(flush.status.code(), Some(0), "{}", stderr(&flush));
    assert!(
        stdout(&flush).starts_with("hook: 6 delivered, 0 not delivered\nevents: run notify-"),
        "{}",
        stdout(&flush)
    );
    let later = receiver.delivered(before);
    let delivered: BTreeSet<String> = keys(&later).into_iter().collect();
    assert_eq!(later.len(), 6, "each once");
    assert_eq!(delivered, outbox, "the original keys");
    assert!(pending(&sb, "hook").is_empty());
    let check = weir(&sb, &["status", "m.toml", "--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", stdout(&check));
    assert!(!stdout(&check).contains("NOTIFY"));
    // Nothing left: another flush or run sends nothing again.
    let again = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(stdout(&again).lines().next(), Some("nothing to deliver"));
    assert_eq!(run(&sb, "r2").status.code(), Some(0));
    assert_eq!(receiver.requests().len(), before + 6);
}

// Killed (kill -9) after the commit, with the notification in the
// outbox and not yet sent; the next run delivers it with the same key.
#[cfg(feature = "http")]
#[test]
fn kill_between_commit_and_delivery_then_rerun_delivers_same_key() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let out = cmd(
        &sb,
        &[
            "run",
            "m.toml",
            "--run-id",
            "crashed",
            "--task",
            "up",
            "--partition",
            "a",
        ],
    )
    .env("WEIR_FAULT", "notify_deliver@up/a:crash")
    .output()
    .unwrap();
    assert_eq!(out.status.signal(), Some(9), "killed by SIGKILL: {out:?}");
    // The fact is durable (the commit record); its notification is written
    // before its event line, so the crash may come before that line.
    assert_eq!(sb.store("up_out", "a").generations().unwrap().len(), 1);
    assert!(receiver.requests().is_empty(), "nothing was sent");
    let names: Vec<String> = pending(&sb, "hook").into_iter().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let key = names[0].clone();

    let out = weir(
        &sb,
        &[
            "run",
            "m.toml",
            "--run-id",
            "again",
            "--task",
            "up",
            "--partition",
            "b",
        ],
    );
    // The next run delivers what the dead one left, whichever partitions
    // it runs itself.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = receiver.requests();
    assert_eq!(
        facts(&got),
        [fact("published", "up", "a"), fact("published", "up", "b")]
    );
    let a = got.iter().find(|r| r.body["partition"] == "a").unwrap();
    assert_eq!(a.body["idempotency_key"], key.as_str());
    assert_eq!(a.headers["idempotency-key"], key);
    assert_eq!(
        a.body["run_id"], "crashed",
        "the fact's run, not the sender's"
    );
    let notified = states(&sb, "again", State::Notified);
    assert_eq!(notified.len(), 2);
    assert!(notified
        .iter()
        .any(|e| e.data["idempotency_key"] == key.as_str()));
    assert!(pending(&sb, "hook").is_empty());
}

// A quarantined instance that publishes again sends `recovered`,
// once; the command target reads the JSON on stdin with the key in its env.
#[test]
fn recovered_once_after_an_announced_failure_to_a_command() {
    let sb = sandbox(
        "[notify.pager]\ncommand = [\"sh\", \"page.sh\"]\non = [\"quarantined\", \"recovered\"]\ntasks = [\"down\"]\n",
    );
    sb.script(
        "page.sh",
        "cat > \"pages/$WEIR_IDEMPOTENCY_KEY.json\"\necho \"$WEIR_NOTIFY_TARGET\" >> pages/targets\n",
    );
    std::fs::create_dir(sb.path().join("pages")).unwrap();
    let pages = |sb: &Sandbox| -> Vec<(String, Value)> {
        let mut pages: Vec<(String, Value)> = std::fs::read_dir(sb.path().join("pages"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                let key = p.file_stem().unwrap().to_string_lossy().into_owned();
                let body: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                (key, body)
            })
            .collect();
        pages.sort_by(|a, b| a.1["at"].as_str().cmp(&b.1["at"].as_str()));
        pages
    };
    std::fs::write(sb.path().join("fail_b"), "").unwrap();
    assert_eq!(run(&sb, "r1").status.code(), Some(1));
    let first = pages(&sb);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].1["event"], "quarantined");
    assert_eq!(first[0].1["partition"], "b");
    assert_eq!(first[0].0, first[0].1["idempotency_key"].as_str().unwrap());

    std::fs::remove_file(sb.path().join("fail_b")).unwrap();
    let out = weir(
        &sb,
        &[
            "retry",
            "m.toml",
            "down",
            "--partition",
            "b",
            "--note",
            "fixed",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let after = pages(&sb);
    assert_eq!(after.len(), 2, "{after:?}");
    let recovered = &after[1].1;
    assert_eq!(recovered["event"], "recovered");
    assert_eq!(recovered["task"], "down");
    assert_eq!(recovered["partition"], "b");
    assert_eq!(recovered["state"], "PUBLISHED");
    assert_eq!(recovered["generation"], 1);

    // Republished (forced): no alarm is open, no second all-clear.
    let out = weir(&sb, &["run", "m.toml", "--task", "down", "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(pages(&sb).len(), 2);
    // Delivery is at least once, by key: a command that ran but was not
    // seen to succeed (a slow machine) is run again with the same key, so
    // the target is told about each fact once by key, maybe more by count.
    let targets = std::fs::read_to_string(sb.path().join("pages/targets")).unwrap();
    assert!(
        targets.lines().count() >= 2 && targets.lines().all(|t| t == "pager"),
        "{targets}"
    );
}

// A command target that fails leaves the notification pending and
// says why; the flush exits 4 while anything is undelivered.
#[test]
fn a_failing_command_keeps_the_notification_pending() {
    let sb = sandbox("[notify.broken]\ncommand = [\"sh\", \"-c\", \"echo 'no route to pager' >&2; exit 3\"]\non = [\"published\"]\ntasks = [\"up\"]\n");
    let out = run(&sb, "r1");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "warning: notify: 2 notifications not delivered to `broken`: `sh` exit status: 3: no route to pager; they stay in the outbox"
        ),
        "{}",
        stderr(&out)
    );
    let failed = states(&sb, "r1", State::NotifyFailed);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].data["tries"], 3, "retried, then given up");
    assert_eq!(
        failed[1].data["tries"], 0,
        "a target down is not tried again"
    );
    let flush = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(flush.status.code(), Some(4), "{}", stdout(&flush));
    assert!(
        stdout(&flush).contains(
            "broken: 0 delivered, 2 not delivered (`sh` exit status: 3: no route to pager)"
        ) && stdout(&flush).contains("2 notifications undelivered to broken since"),
        "{}",
        stdout(&flush)
    );
}

// `[notify.NAME]` errors point at the key, with a fix.
#[test]
fn notify_targets_are_validated() {
    for (body, code, text) in [
        (
            "[notify.x]\non = [\"published\"]",
            "weir::manifest::notify_sink",
            "`[notify.x]` needs exactly one of `url` and `command`",
        ),
        (
            "[notify.x]\nurl = \"ftp://h/\"\non = [\"published\"]",
            "weir::manifest::notify_url",
            "`notify.x.url`: not an http:// or https:// URL",
        ),
        (
            "[notify.x]\nurl = \"https://h/\"\non = [\"publshed\"]",
            "weir::manifest::notify_on",
            "did you mean `published`?",
        ),
        (
            "[notify.x]\nurl = \"https://h/\"\non = []",
            "weir::manifest::notify_on",
            "`notify.x.on` is empty: nothing would be sent",
        ),
        (
            "[notify.x]\nurl = \"https://h/\"\non = [\"failed\"]\ntasks = [\"dwn\"]",
            "weir::manifest::unknown_task",
            "did you mean `down`?",
        ),
        (
            "[notify.x]\nurl = \"https://h/\"\non = [\"failed\"]\nheaders = { Authorization = \"env:\" }",
            "weir::manifest::header_reference",
            "`env:` names no variable",
        ),
        (
            "[notify.x]\ncommand = [\"sh\"]\non = [\"failed\"]\nheaders = { A = \"b\" }",
            "weir::manifest::notify_headers",
            "are for a `url` target, not a `command`",
        ),
        (
            "[notify.x]\ncommand = [\"sh\"]\non = [\"failed\"]\nbogus = 1",
            "weir::manifest::unknown_key",
            "bogus",
        ),
    ] {
        let sb = sandbox(body);
        let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{body}");
        let err = stderr(&out);
        assert!(err.contains(code) && err.contains(text), "{body}:\n{err}");
    }
    // A build without `http` refuses the URL (the first rows show why).
    if !cfg!(feature = "http") {
        return;
    }
    let sb = sandbox(&http_target(
        "https://hooks.example/x",
        r#"["failed", "late", "missed"]"#,
    ));
    let m = sb.manifest();
    let target = &m.notify["hook"];
    assert_eq!(
        target.on,
        [
            weir::manifest::NotifyKind::Failed,
            weir::manifest::NotifyKind::Late,
            weir::manifest::NotifyKind::Missed
        ]
    );
}

// `[lineage] url` sends its headers (secrets from env:) through
// the same client.
#[cfg(feature = "http")]
#[test]
fn lineage_sends_its_headers() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&format!(
        "[lineage]\nurl = \"{}\"\nheaders = {{ Authorization = \"env:HOOK_TOKEN\" }}\n",
        receiver.url
    ));
    let out = cmd(&sb, &["run", "m.toml", "--run-id", "r1", "--task", "up"])
        .env("HOOK_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = receiver.requests();
    assert_eq!(got.len(), 4, "START and COMPLETE per partition: {got:?}");
    assert!(got.iter().all(|r| r.headers["authorization"] == TOKEN));
    assert_eq!(files_holding(&sb, TOKEN), Vec::<String>::new());
}

// Killed after the commit record and before its notification was
// written (`after_commit`): the next run that reaches the instance finds the
// generation unannounced and sends it, once, with the key the dead run would
// have used.
#[cfg(feature = "http")]
#[test]
fn kill_after_commit_before_the_outbox_is_repaired_by_the_next_run() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let out = cmd(
        &sb,
        &["run", "m.toml", "--run-id", "crashed", "--task", "up"],
    )
    .env("WEIR_FAULT", "after_commit@up/b:crash")
    .output()
    .unwrap();
    assert_eq!(out.status.signal(), Some(9), "killed by SIGKILL: {out:?}");
    assert_eq!(sb.store("up_out", "b").generations().unwrap().len(), 1);
    assert!(
        pending(&sb, "hook").len() <= 1,
        "only up/a's may be written"
    );
    let out = weir(&sb, &["run", "m.toml", "--run-id", "again", "--task", "up"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = receiver.requests();
    assert_eq!(
        facts(&got),
        [fact("published", "up", "a"), fact("published", "up", "b")]
    );
    let b = got.iter().find(|r| r.body["partition"] == "b").unwrap();
    assert_eq!(b.body["run_id"], "crashed");
    assert_eq!(b.body["generation"], 1);
    assert_eq!(b.body["state"], "PUBLISHED");
    assert_eq!(b.body["attempt"], 1);
    let expected = {
        // The key a run that did not die writes for the same fact.
        let other = sandbox(&http_target(&receiver.url, r#"["published"]"#));
        let before = receiver.requests().len();
        assert_eq!(
            weir(&other, &["run", "m.toml", "--task", "up"])
                .status
                .code(),
            Some(0)
        );
        receiver
            .delivered(before)
            .into_iter()
            .find(|r| r.body["partition"] == "b")
            .unwrap()
            .body["idempotency_key"]
            .clone()
    };
    assert_eq!(b.body["idempotency_key"], expected);
    let count = receiver.requests().len();
    assert_eq!(run(&sb, "third").status.code(), Some(0));
    assert_eq!(receiver.requests().len(), count + 4, "flaky and down only");
    assert!(receiver.requests()[count..]
        .iter()
        .all(|r| r.body["task"] != "up"));
}

// Killed after the commit record and before its notification was written,
// with nothing left to run (serve's case: the period is published, so no
// later run reaches the instance): `weir notify --flush` finds the
// publication the dead process meant to announce and delivers it once, with
// the key a process that did not die sends; a second flush sends nothing.
#[cfg(feature = "http")]
#[test]
fn a_publication_killed_before_its_notification_is_delivered_by_the_next_flush() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let out = cmd(
        &sb,
        &[
            "run",
            "m.toml",
            "--run-id",
            "crashed",
            "--task",
            "up",
            "--partition",
            "b",
        ],
    )
    .env("WEIR_FAULT", "after_commit@up/b:crash")
    .output()
    .unwrap();
    assert_eq!(out.status.signal(), Some(9), "killed by SIGKILL: {out:?}");
    assert_eq!(sb.store("up_out", "b").generations().unwrap().len(), 1);
    assert_eq!(receiver.requests().len(), 0);
    let flush = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(flush.status.code(), Some(0), "{}", stderr(&flush));
    assert!(
        stdout(&flush).starts_with("hook: 1 delivered, 0 not delivered\n"),
        "{}",
        stdout(&flush)
    );
    let got = receiver.requests();
    assert_eq!(facts(&got), [fact("published", "up", "b")]);
    assert_eq!(got[0].body["run_id"], "crashed");
    assert_eq!(got[0].body["generation"], 1);
    assert_eq!(got[0].body["attempt"], 1);
    let expected = {
        let other = sandbox(&http_target(&receiver.url, r#"["published"]"#));
        let before = receiver.requests().len();
        let out = weir(
            &other,
            &["run", "m.toml", "--task", "up", "--partition", "b"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        receiver.delivered(before)[0].body["idempotency_key"].clone()
    };
    assert_eq!(got[0].body["idempotency_key"], expected);
    let count = receiver.requests().len();
    let again = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(receiver.requests().len(), count, "announced once");
    assert!(sb
        .path()
        .join("wh/_notify/intents")
        .read_dir()
        .unwrap()
        .all(|e| e.unwrap().file_name().to_string_lossy().starts_with('.')));
}

// The outbox is in the warehouse through the store: on S3 a run
// with the receiver down leaves its notifications in the bucket, status
// (from another staging directory, as another host) names them, and a
// flush delivers them with the keys the bucket holds.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn the_outbox_lives_in_an_s3_warehouse() {
    use weir::store::Backend;
    let Some(bucket) = crate::support::s3::S3::sandbox("wh") else {
        return;
    };
    let receiver = Receiver::start(true);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let s3 = |host: &str, args: &[&str]| {
        let staging = sb.path().join(host);
        let mut cmd = bucket.weir(sb.path(), &staging, args);
        cmd.env("HOOK_TOKEN", format!("Bearer {TOKEN}"));
        cmd.output().expect("weir runs")
    };
    let out = s3("a", &["run", "m.toml", "--run-id", "r1", "--task", "up"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 notifications not delivered to `hook`"),
        "{}",
        stderr(&out)
    );
    let backend = bucket.backend();
    let in_bucket: BTreeSet<String> = backend
        .list("_notify/pending/hook")
        .unwrap()
        .into_iter()
        .map(|n| n.trim_end_matches(".json").to_owned())
        .collect();
    assert_eq!(in_bucket.len(), 2, "{in_bucket:?}");
    assert!(!sb.path().join("wh").exists(), "nothing local");

    let status = s3("b", &["status", "m.toml", "--check"]);
    assert_eq!(status.status.code(), Some(4), "{}", stdout(&status));
    assert!(
        stdout(&status).contains("NOTIFY      2 notifications undelivered to hook since "),
        "{}",
        stdout(&status)
    );
    receiver.down.store(false, Ordering::SeqCst);
    let before = receiver.requests().len();
    let flush = s3("b", &["notify", "m.toml", "--flush"]);
    assert_eq!(flush.status.code(), Some(0), "{}", stderr(&flush));
    let delivered: BTreeSet<String> = keys(&receiver.delivered(before)).into_iter().collect();
    assert_eq!(delivered, in_bucket);
    assert!(backend.list("_notify/pending/hook").unwrap().is_empty());
    assert_eq!(backend.list("_notify/delivered/hook").unwrap().len(), 2);
    assert_eq!(files_holding(&sb, TOKEN), Vec::<String>::new());
}

// The one HTTP client takes its proxy from the environment
// (`HTTP_PROXY`): the receiver here is the proxy, the target a host that
// does not resolve.
#[cfg(feature = "http")]
#[test]
fn notifications_go_through_the_environments_proxy() {
    let proxy = Receiver::start(false);
    let sb = sandbox(&http_target(
        "http://hooks.invalid/weir",
        r#"["published"]"#,
    ));
    let address = proxy.url.trim_end_matches("/hook").to_owned();
    let out = cmd(
        &sb,
        &[
            "run",
            "m.toml",
            "--run-id",
            "r1",
            "--task",
            "up",
            "--partition",
            "a",
        ],
    )
    .env("HTTP_PROXY", &address)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = proxy.requests();
    assert_eq!(facts(&got), [fact("published", "up", "a")]);
    assert_eq!(got[0].line, "POST http://hooks.invalid/weir HTTP/1.1");
    assert_eq!(got[0].headers["host"], "hooks.invalid");
    assert_eq!(states(&sb, "r1", State::Notified).len(), 1);
}

// A header whose secret cannot be read fails the delivery, naming
// the header and its reference, never a value; the notification stays.
#[cfg(feature = "http")]
#[test]
fn an_unreadable_header_secret_is_named_not_shown() {
    let receiver = Receiver::start(false);
    let sb = sandbox(&http_target(&receiver.url, r#"["published"]"#));
    let out = cmd(
        &sb,
        &[
            "run",
            "m.toml",
            "--run-id",
            "r1",
            "--task",
            "up",
            "--partition",
            "a",
        ],
    )
    .env_remove("HOOK_TOKEN")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(receiver.requests().is_empty());
    let failed = states(&sb, "r1", State::NotifyFailed);
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].detail.ends_with(&format!(
            "(key {}): header `Authorization`: `env:HOOK_TOKEN` is not set; it stays in the outbox",
            failed[0].data["idempotency_key"].as_str().unwrap()
        )),
        "{}",
        failed[0].detail
    );
    assert_eq!(failed[0].data["tries"], 1);
    assert_eq!(pending(&sb, "hook").len(), 1);
    assert_eq!(files_holding(&sb, FILE_SECRET), Vec::<String>::new());
    assert!(!stderr(&out).contains(FILE_SECRET));
}

/// A server on 127.0.0.1 that answers every request `302 Found` with
/// `Location: to`.
#[cfg(feature = "http")]
fn redirecting_to(to: &str) -> http::Receiver {
    let to = to.to_owned();
    http::Receiver::start(move |_| Reply::Redirect(to.clone()))
}

// A notification target that answers 302 to another host and port: nothing,
// and certainly no secret header, reaches that port; the notification is
// not delivered and says where the redirect pointed.
#[cfg(feature = "http")]
#[test]
fn a_redirect_is_never_followed_with_secret_headers() {
    let elsewhere = Receiver::start(false);
    let redirecting = redirecting_to(&elsewhere.url);
    let url = redirecting.url("/hook");
    let sb = sandbox(&http_target(&url, r#"["published"]"#));
    let args = [
        "run",
        "m.toml",
        "--run-id",
        "r1",
        "--task",
        "up",
        "--partition",
        "a",
    ];
    let out = weir(&sb, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!redirecting.requests().is_empty(), "the target was tried");
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect was followed: {:?}",
        elsewhere.requests()
    );
    assert!(states(&sb, "r1", State::Notified).is_empty());
    assert_eq!(pending(&sb, "hook").len(), 1);
    let why = format!(
        "HTTP 302: redirected to {}, which is not followed",
        elsewhere.url
    );
    assert!(stderr(&out).contains(&why), "{}", stderr(&out));
    let flush = weir(&sb, &["notify", "m.toml", "--flush"]);
    assert_eq!(flush.status.code(), Some(4), "{}", stdout(&flush));
    assert!(
        stdout(&flush).contains("hook: 0 delivered, 1 not delivered (")
            && stdout(&flush).contains(&why),
        "{}",
        stdout(&flush)
    );
    assert!(elsewhere.requests().is_empty());
    assert_eq!(pending(&sb, "hook").len(), 1);
    let check = weir(&sb, &["status", "m.toml", "--check"]);
    assert_eq!(check.status.code(), Some(4), "{}", stdout(&check));
    assert!(
        stdout(&check).contains("NOTIFY      1 notification undelivered to hook since "),
        "{}",
        stdout(&check)
    );
}
