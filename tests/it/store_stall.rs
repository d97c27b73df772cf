//! A slow store never stalls the engine. Against moto's S3 server behind a
//! proxy that holds every request for 30 s once both commands run (skipped
//! without a server, failing under `CI=true`, as in s3.rs): a command's
//! timeout still fires on time, SIGINT still stops the other command at
//! once, and the run's events are all stored once the store answers again;
//! and a store that stops answering for 10 minutes ends the run in about
//! two, with an engine error naming it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::s3_evidence::lines_in_state;
use crate::support::s3::{weir_in, FaultProxy, S3};
use crate::support::{ok, poll_until, process_state, stderr, stdout, Engine};

/// How long the proxy holds each request once the stall begins.
const STALL: Duration = Duration::from_secs(30);

/// Two commands side by side, each recording its pid and sleeping: `short`
/// with a 4 s timeout, `long` with none to speak of. A heartbeat every
/// second puts a lease write on the engine's timers while the store stalls.
const MANIFEST: &str = r#"
[pipeline]
name = "stall"
code_version = "1"
warehouse = "unused"

[pools.work]
slots = 2

[tasks.short]
command = ["sh", "-c", "echo $$ > short.pid; exec sleep 120"]
output = { dataset = "short", grain = ["id"] }
partitioned_by = []
pool = "work"
timeout = "4s"
heartbeat = "1s"

[tasks.long]
command = ["sh", "-c", "echo $$ > long.pid; exec sleep 120"]
output = { dataset = "long", grain = ["id"] }
partitioned_by = []
pool = "work"
timeout = "10m"
heartbeat = "1s"
"#;

/// The pid a command wrote to `dir/name`, once written whole.
fn pid_in(dir: &std::path::Path, name: &str) -> (u32, Instant) {
    let file = dir.join(name);
    poll_until(name, Duration::from_secs(60), || {
        std::fs::read_to_string(&file).is_ok_and(|p| p.ends_with('\n'))
    });
    let pid = std::fs::read_to_string(&file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (pid, Instant::now())
}

/// Whether a process is gone (or a zombie: killed, not yet reaped).
fn gone(pid: u32) -> bool {
    matches!(process_state(pid), None | Some('Z'))
}

/// How long until `pid` is gone, polled every 10 ms for at most `limit`.
fn gone_within(pid: u32, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if gone(pid) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// A proxy in front of `endpoint` that passes requests until the returned
/// instant is set, then holds each one until that instant.
fn stalling_proxy(endpoint: &str) -> (FaultProxy, Arc<Mutex<Option<Instant>>>) {
    let until: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let held = Arc::clone(&until);
    let proxy = FaultProxy::start(
        endpoint,
        Arc::new(move |_head: &str, _body: &[u8]| {
            let until = *held.lock().unwrap();
            if let Some(until) = until {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            None
        }),
    );
    (proxy, until)
}

// Heartbeats wrote their lease on the one timer thread that
// also enforces every timeout and stop request, so a store that stalled for
// 30 s froze both: `short` ran on past its 4 s timeout until the store
// answered, and Ctrl-C left `long` running as long. Now the store's timed
// writes have a thread of their own: the timeout fires on time, SIGINT
// stops `long` within a second, and the run, interrupted, stores every one
// of its events once the stall is over.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_stalled_store_never_holds_up_timeouts_or_ctrl_c() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 { endpoint, url, .. } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), MANIFEST).unwrap();
    let (proxy, stall_until) = stalling_proxy(endpoint);
    let engine = Engine::spawn(
        weir_in(
            dir,
            &proxy.endpoint,
            url,
            &["run", "m.toml", "--run-id", "stalled"],
        ),
        dir,
        "engine",
    );
    let (short, short_started) = pid_in(dir, "short.pid");
    let (long, _) = pid_in(dir, "long.pid");
    let stalled_at = Instant::now();
    *stall_until.lock().unwrap() = Some(stalled_at + STALL);

    // The timeout: 4 s after `short` started (a second of slack for a
    // loaded machine), though every heartbeat since hangs on the store.
    let timed_out = gone_within(short, Duration::from_secs(8))
        .map(|_| short_started.elapsed())
        .expect("short is killed by its timeout while the store stalls");
    assert!(
        timed_out < Duration::from_secs(5) + Duration::from_millis(500),
        "short's 4 s timeout fired {timed_out:?} after it started"
    );
    assert!(!gone(long), "long still runs");

    // Ctrl-C: the other command is stopped within a second.
    engine.signal(libc::SIGINT);
    let stopped = gone_within(long, Duration::from_secs(5));
    assert!(
        stopped.is_some_and(|d| d < Duration::from_secs(1)),
        "SIGINT stopped long after {stopped:?}"
    );
    assert!(
        stalled_at.elapsed() < STALL,
        "all of it while the store still stalled"
    );

    // The run ends as interrupted once the store answers again, and
    // nothing is lost: every line of the run is in its event log.
    let out = engine.finish(Duration::from_secs(120));
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(130), "{text}\n{err}");
    assert!(
        err.contains("short all attempt 1 token 1: FAILED timed out")
            && err.contains("long all attempt 1 token 1: INTERRUPTED")
            && err.contains("weir: interrupted by SIGINT: 2 task instances left undone"),
        "{err}"
    );
    let events = ok(&weir_in(
        dir,
        endpoint,
        url,
        &["events", "m.toml", "--run", "stalled"],
    )
    .output()
    .unwrap());
    for (state, count) in [
        ("RUN_STARTED", 1),
        ("RUNNING", 2),
        ("FAILED", 2),
        ("INTERRUPTED", 1),
        ("RUN_FINISHED", 1),
    ] {
        assert_eq!(
            lines_in_state(&events, state).len(),
            count,
            "{state}: {events}"
        );
    }
    assert!(
        lines_in_state(&events, "FAILED")
            .iter()
            .any(|l| l.contains(" short ") && l.ends_with("timed out")),
        "{events}"
    );
}

/// One command that records its pid, waits a little and writes its output.
const DOWN_MANIFEST: &str = r#"
[pipeline]
name = "down"
code_version = "1"
warehouse = "unused"

[tasks.t]
command = ["sh", "-c", "echo $$ > t.pid; sleep 1; printf 'id\n1\n' > \"$WEIR_OUTPUT_DIR/rows.csv\""]
output = { dataset = "out", grain = ["id"] }
partitioned_by = []
"#;

// object_store retried a failed request for up to three
// minutes (30 s a try), so a store that stopped answering held the run for
// many minutes with nothing said. Now a call gives up within about 25 s:
// the run ends long before the store answers again (10 minutes here), exit
// 5, with an engine error naming the store and the key, and says its event
// log is incomplete.
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn a_store_that_stops_answering_ends_the_run_with_an_error_naming_it() {
    let _serial = crate::support::exclusive();
    let Some(s3) = S3::sandbox("wh") else { return };
    let S3 {
        endpoint,
        bucket,
        url,
    } = &s3;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("m.toml"), DOWN_MANIFEST).unwrap();
    let (proxy, down) = stalling_proxy(endpoint);
    let engine = Engine::spawn(
        weir_in(
            dir,
            &proxy.endpoint,
            url,
            &["run", "m.toml", "--run-id", "down"],
        ),
        dir,
        "engine",
    );
    pid_in(dir, "t.pid");
    *down.lock().unwrap() = Some(Instant::now() + Duration::from_secs(600));
    // Each store call the engine makes from here gives up in 10 to 25 s, and
    // it makes a few one after another (the upload, the failed attempt's
    // logs, its lease, the event log, the pool slot and heartbeat going):
    // 160-185 s in all on the 2-core CI machine, a third of the 10 minutes
    // the store stays silent.
    let out = engine.finish(Duration::from_secs(240));
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    assert!(
        text.contains("run down: 1 task instance: 1 engine failure"),
        "{text}"
    );
    let store = format!("object store error on s3://{bucket}/wh/");
    assert!(
        err.contains(&format!(
            "t all: ENGINE_FAILED cannot upload the candidate: {store}out/all/attempts/"
        )) && err.contains("operation timed out"),
        "the engine error names the store and the key: {err}"
    );
    assert!(
        err.contains(&format!(
            "error: the event log is incomplete: cannot sync _runs/down/events: {store}_runs/down/events/"
        )),
        "the lost lines are owned up to: {err}"
    );
}
