//! `weir serve`: partitions run as their periods end, never a
//! catch-up (MISSED instead), one publication per due period across two
//! serves, SIGHUP and SIGTERM. `WEIR_NOW` is where serve's clock starts;
//! it then advances in real time, so a test starts serve two seconds
//! before an hour ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir::events::State;

use crate::support::Sandbox;

const MANIFEST: &str = r#"
[pipeline]
name = "served"
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

const SCRIPT: &str =
    "printf 'hour,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n";

fn sandbox() -> Sandbox {
    let sb = Sandbox::new(MANIFEST);
    sb.script("h.sh", SCRIPT);
    sb
}

/// A running `weir serve` and the lines of its stdout so far.
pub(crate) struct Serve {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    pub(crate) fn start(sb: &Sandbox, now: &str) -> Serve {
        Serve::start_with(sb, now, &["m.toml"])
    }

    fn start_with(sb: &Sandbox, now: &str, manifests: &[&str]) -> Serve {
        let mut args = vec!["serve"];
        args.extend_from_slice(manifests);
        Serve::spawn(sb.weir(&args), now)
    }

    pub(crate) fn spawn(mut cmd: std::process::Command, now: &str) -> Serve {
        let mut child = cmd
            .env("WEIR_NOW", now)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("weir serve starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped");
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = child.stderr.take().expect("piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Serve {
            child,
            lines,
            stderr,
        }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (up to 120 s, for a loaded machine) for a stdout line containing every one of `parts`.
    #[track_caller]
    pub(crate) fn wait_for(&self, parts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(l) = self
                .lines()
                .into_iter()
                .find(|l| parts.iter().all(|p| l.contains(p)))
            {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no line with {parts:?}; stdout:\n{}\nstderr:\n{}",
                self.lines().join("\n"),
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to 120 s) for `part` on stderr.
    #[track_caller]
    pub(crate) fn wait_for_stderr(&self, part: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.stderr.lock().unwrap().contains(part) {
            assert!(
                Instant::now() < deadline,
                "no {part:?} on stderr:\n{}\nstdout:\n{}",
                self.stderr.lock().unwrap(),
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the process is still running.
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub(crate) fn signal(&self, sig: i32) {
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// SIGTERM, and the exit code (within 30 s).
    #[track_caller]
    pub(crate) fn stop(mut self) -> (i32, Vec<String>) {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader threads see EOF.
        std::thread::sleep(Duration::from_millis(100));
        (status.code().expect("exited, not killed"), self.lines())
    }
}

/// Waits (up to 120 s) until one of two serves sharing a warehouse prints a
/// line containing `part`: which of them wins a period is a race.
#[track_caller]
fn wait_for_either(a: &Serve, b: &Serve, part: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while ![a, b]
        .iter()
        .any(|s| s.lines().iter().any(|l| l.contains(part)))
    {
        assert!(
            Instant::now() < deadline,
            "neither serve printed {part:?}:\n{}\n---\n{}",
            a.lines().join("\n"),
            b.lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A test that fails leaves no serve running behind it.
impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The generations of `hours` partition `key`.
fn generations(sb: &Sandbox, key: &str) -> usize {
    sb.store("hours", key).history().unwrap().len()
}

/// Every partition of `hours` with a publication.
fn published(sb: &Sandbox) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(sb.path().join("wh").join("hours"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|k| generations(sb, k) > 0)
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Every event of serve's own logs (`serve-…` runs) in state `state`.
pub(crate) fn serve_events(sb: &Sandbox, state: State) -> Vec<weir::events::EventRecord> {
    let runs = sb.path().join("wh").join("_runs");
    let mut out = Vec::new();
    for e in std::fs::read_dir(runs).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.starts_with("serve-") {
            out.extend(sb.events(&name).into_iter().filter(|r| r.state == state));
        }
    }
    out
}

// A period is due when it ends, not before: serve runs the newest due
// hour at start, then each hour as it ends, and idles in between.
#[test]
fn partitions_publish_once_each_as_their_periods_end() {
    let sb = sandbox();
    let serve = Serve::start(&sb, "2026-09-20T11:59:58Z");
    // At start, the newest due hour; two seconds later, the hour that ends.
    serve.wait_for(&["START h 2026-09-20T10 (period ended, due 2026-09-20T11:00:00Z)"]);
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    serve.wait_for(&["IDLE until 2026-09-20T12:00:00Z (h 2026-09-20T11)"]);
    serve.wait_for(&["START h 2026-09-20T11 (period ended, due 2026-09-20T12:00:00Z)"]);
    serve.wait_for(&["DONE h 2026-09-20T11 PUBLISHED"]);
    serve.wait_for(&["IDLE until 2026-09-20T13:00:00Z (h 2026-09-20T12)"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(published(&sb), ["2026-09-20T10", "2026-09-20T11"]);
    assert_eq!(generations(&sb, "2026-09-20T10"), 1);
    assert_eq!(generations(&sb, "2026-09-20T11"), 1);
    assert_eq!(lines.iter().filter(|l| l.contains(" START ")).count(), 2);
    assert!(
        lines.iter().any(|l| l.contains("STOP on SIGTERM")),
        "{lines:#?}"
    );
    assert!(lines.last().unwrap().ends_with(" EXIT"), "{lines:#?}");
    // Nothing was missed: serve's first start adopts the newest period.
    assert!(serve_events(&sb, State::Missed).is_empty());
    // RUN_STARTED pairs serve's clock (pinned at 11:59:58, a few ms on by
    // then) with the real time of the event, for mapping one onto the other.
    let started = serve_events(&sb, State::RunStarted);
    let clock = started[0].data["clock"].as_str().unwrap_or_default();
    let clock: jiff::Timestamp = clock.parse().expect("an RFC 3339 instant");
    let pinned: jiff::Timestamp = "2026-09-20T11:59:58Z".parse().unwrap();
    let on = clock.as_millisecond() - pinned.as_millisecond();
    assert!((0..60_000).contains(&on), "serve's clock read {clock}");
    assert!(
        !started[0].ts.starts_with("2026-09-20"),
        "{}",
        started[0].ts
    );
}

// Downtime is never caught up in a burst: the periods due while serve was
// down are recorded MISSED (a backfill's job), and only the newest runs.
#[test]
fn a_restart_after_downtime_runs_only_the_newest_period_and_records_the_rest_missed() {
    let sb = sandbox();
    let serve = Serve::start(&sb, "2026-09-20T11:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    assert_eq!(serve.stop().0, 0);
    // Down from 11:30 to 16:30: hours 11 to 14 were due meanwhile.
    let serve = Serve::start(&sb, "2026-09-20T16:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T15 PUBLISHED"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0);
    for h in 11..=14 {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("MISSED h 2026-09-20T{h}")))
            .unwrap_or_else(|| panic!("hour {h} not MISSED: {lines:#?}"));
        assert!(
            line.contains(&format!(
                "fill with `weir run m.toml --task h --partition 2026-09-20T{h}`"
            )),
            "{line}"
        );
    }
    assert_eq!(lines.iter().filter(|l| l.contains(" START ")).count(), 1);
    // None of them launched.
    assert_eq!(published(&sb), ["2026-09-20T10", "2026-09-20T15"]);
    let missed = serve_events(&sb, State::Missed);
    let mut keys: Vec<&str> = missed
        .iter()
        .map(|e| e.partition.as_deref().unwrap())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "2026-09-20T11",
            "2026-09-20T12",
            "2026-09-20T13",
            "2026-09-20T14"
        ]
    );
    // Recorded once: a restart records and runs nothing more.
    let serve = Serve::start(&sb, "2026-09-20T16:40:00Z");
    serve.wait_for(&["IDLE until 2026-09-20T17:00:00Z (h 2026-09-20T16)"]);
    let (_, lines) = serve.stop();
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("MISSED") || l.contains("START")),
        "{lines:#?}"
    );
    assert_eq!(serve_events(&sb, State::Missed).len(), 4);
    // `weir status` names each one with its command, and the next due hour.
    let status = sb
        .weir(&["status", "m.toml"])
        .env("WEIR_NOW", "2026-09-20T16:45:00Z")
        .output()
        .unwrap();
    let text = crate::support::ok(&status);
    assert!(
        text.contains("NEXT        h 2026-09-20T16: due at 2026-09-20T17:00:00Z"),
        "{text}"
    );
    for h in 11..=14 {
        assert!(
            text.contains(&format!("MISSED      h 2026-09-20T{h}: due 2026-09-20T{}:00:00Z, skipped by `weir serve` (no catch-up); fill it with `weir run m.toml --task h --partition 2026-09-20T{h}`", h + 1)),
            "{text}"
        );
    }
    assert!(
        text.contains("4 missed periods; fill them all with `weir run m.toml --task h --from 2026-09-20 --to 2026-09-20`"),
        "{text}"
    );
    let json = sb
        .weir(&["status", "m.toml", "--json"])
        .env("WEIR_NOW", "2026-09-20T16:45:00Z")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&crate::support::ok(&json)).unwrap();
    assert_eq!(doc["serve"]["missed"].as_array().unwrap().len(), 4, "{doc}");
    assert_eq!(doc["serve"]["next"][0]["partition"], "2026-09-20T16");
    assert_eq!(doc["serve"]["next"][0]["due_at"], "2026-09-20T17:00:00Z");
    // Filled by hand: status stops listing it.
    crate::support::ok(
        &sb.weir(&[
            "run",
            "m.toml",
            "--task",
            "h",
            "--partition",
            "2026-09-20T12",
        ])
        .env("WEIR_NOW", "2026-09-20T16:45:00Z")
        .output()
        .unwrap(),
    );
    let text = crate::support::ok(
        &sb.weir(&["status", "m.toml"])
            .env("WEIR_NOW", "2026-09-20T16:45:00Z")
            .output()
            .unwrap(),
    );
    assert!(!text.contains("MISSED      h 2026-09-20T12"), "{text}");
    assert!(text.contains("MISSED      h 2026-09-20T13"), "{text}");
}

// Serves are safe to run twice (a standby): a due period is claimed
// through the store, so each is published by one of them only.
#[test]
fn two_serves_on_one_warehouse_publish_each_partition_once() {
    let sb = sandbox();
    let a = Serve::start(&sb, "2026-09-20T11:59:57Z");
    let b = Serve::start(&sb, "2026-09-20T11:59:57Z");
    for h in ["10", "11"] {
        wait_for_either(&a, &b, &format!("DONE h 2026-09-20T{h} PUBLISHED"));
    }
    let (ca, la) = a.stop();
    let (cb, lb) = b.stop();
    assert_eq!((ca, cb), (0, 0));
    for h in ["10", "11"] {
        let key = format!("2026-09-20T{h}");
        assert_eq!(generations(&sb, &key), 1, "{la:#?}\n{lb:#?}");
        let starts = la
            .iter()
            .chain(&lb)
            .filter(|l| l.contains(&format!("START h {key}")))
            .count();
        assert_eq!(starts, 1, "{la:#?}\n{lb:#?}");
        // The other serve says CLAIMED when it looked while the winner ran;
        // started later (a loaded machine), it finds the period published
        // and says nothing.
        let claimed = la
            .iter()
            .chain(&lb)
            .filter(|l| l.contains(&format!("CLAIMED h {key}: engine")))
            .count();
        assert!(claimed <= 1, "{la:#?}\n{lb:#?}");
    }
}

// A reload never takes a working serve down: an invalid manifest is
// refused, said so, and the one already loaded keeps running.
#[test]
fn sighup_with_a_broken_manifest_keeps_serving() {
    let sb = sandbox();
    let serve = Serve::start(&sb, "2026-09-20T11:59:56Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    std::fs::write(
        sb.path().join("m.toml"),
        MANIFEST.replace("partitioned_by = \"hour\"", "partitioned_by = \"minute\""),
    )
    .unwrap();
    serve.signal(libc::SIGHUP);
    serve.wait_for(&["RELOAD refused: the manifest is invalid"]);
    // The next hour still runs, under the manifest loaded before.
    serve.wait_for(&["DONE h 2026-09-20T11 PUBLISHED"]);
    let stderr = serve.stderr.lock().unwrap().clone();
    assert!(stderr.contains("minute"), "{stderr}");
    // A valid edit is taken.
    std::fs::write(sb.path().join("m.toml"), MANIFEST).unwrap();
    serve.signal(libc::SIGHUP);
    serve.wait_for(&["RELOAD 1 tasks"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(published(&sb), ["2026-09-20T10", "2026-09-20T11"]);
}

// SIGTERM ends serve like Ctrl-C ends a run: the running attempt is
// stopped, its whole process tree with it.
#[test]
fn sigterm_stops_a_running_attempt_and_leaves_no_task_process() {
    let sb = sandbox();
    sb.script(
        "h.sh",
        "echo $$ > \"$WEIR_PARTITION.pid\"\nsleep 300 & echo $! > sleeper.pid\nwait\n",
    );
    let serve = Serve::start(&sb, "2026-09-20T11:30:00Z");
    serve.wait_for(&["START h 2026-09-20T10"]);
    let pid_file = sb.path().join("sleeper.pid");
    let deadline = Instant::now() + Duration::from_secs(120);
    let sleeper: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the task never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let shell: i32 = std::fs::read_to_string(sb.path().join("2026-09-20T10.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let started = Instant::now();
    let (code, lines) = serve.stop();
    assert_eq!(code, 143, "{lines:#?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DONE h 2026-09-20T10 INTERRUPTED")),
        "{lines:#?}"
    );
    assert!(lines
        .last()
        .unwrap()
        .contains("EXIT: running attempts were stopped"));
    for pid in [sleeper, shell] {
        assert_eq!(
            unsafe { libc::kill(pid, 0) },
            -1,
            "task process {pid} outlived serve"
        );
    }
    assert!(published(&sb).is_empty());
}

// A task can wait past its period's end (`delay`) and an unpartitioned
// task is due on a cron `schedule`.
#[test]
fn a_delay_and_a_schedule_make_tasks_due() {
    let sb = Sandbox::new(&format!(
        "{}delay = \"1s\"\n\n[tasks.r]\ncommand = [\"sh\", \"r.sh\"]\npartitioned_by = []\noutput = {{ dataset = \"ticks\", grain = [\"n\"] }}\nschedule = \"* * * * *\"\n",
        MANIFEST
    ));
    sb.script("h.sh", SCRIPT);
    sb.script(
        "r.sh",
        "printf 'n\\n1\\n' > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    let serve = Serve::start(&sb, "2026-09-20T11:59:58Z");
    serve.wait_for(&["IDLE until 2026-09-20T12:00:00Z (r (schedule))"]);
    // The schedule starts counting at serve's start: nothing ran for it.
    assert!(!serve.lines().iter().any(|l| l.contains("START r")));
    serve.wait_for(&["START r @2026-09-20T12:00:00Z (schedule fired at 2026-09-20T12:00:00Z)"]);
    serve.wait_for(&["DONE r all PUBLISHED"]);
    serve.wait_for(&["START h 2026-09-20T11 (period ended, due 2026-09-20T12:00:01Z)"]);
    serve.wait_for(&["DONE h 2026-09-20T11 PUBLISHED"]);
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
    assert_eq!(sb.store("ticks", "all").history().unwrap().len(), 1);
}

// `schedule` belongs to an unpartitioned task and `delay` is a duration:
// each mistake is a located diagnostic.
#[test]
fn schedule_and_delay_are_validated() {
    let sb = Sandbox::new(&MANIFEST.replace(
        "partitioned_by = \"hour\"",
        "partitioned_by = \"hour\"\nschedule = \"0 6 * * *\"\ndelay = \"5q\"",
    ));
    let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("weir::manifest::schedule_on_time_scheme"),
        "{err}"
    );
    assert!(
        err.contains("task `h` sets `schedule` but is partitioned by time scheme `hour`"),
        "{err}"
    );
    assert!(err.contains("m.toml:"), "{err}");
    assert!(err.contains("5q"), "{err}");
    let sb = Sandbox::new(&MANIFEST.replace(
        "partitioned_by = \"hour\"",
        "partitioned_by = []\nschedule = \"0 6 * *\"",
    ));
    let out = sb.weir(&["validate", "m.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = crate::support::stderr(&out);
    assert!(err.contains("weir::manifest::bad_schedule"), "{err}");
    assert!(err.contains("has 4 fields"), "{err}");
}

// One serve can carry several pipelines: each keeps its own warehouse and
// decisions, as if served alone.
#[test]
fn several_manifests_in_one_process_share_nothing_but_the_process() {
    let sb = sandbox();
    std::fs::write(
        sb.path().join("n.toml"),
        MANIFEST
            .replace("name = \"served\"", "name = \"other\"")
            .replace("warehouse = \"wh\"", "warehouse = \"wh2\""),
    )
    .unwrap();
    let serve = Serve::start_with(&sb, "2026-09-20T11:59:58Z", &["m.toml", "n.toml"]);
    for pipeline in ["served", "other"] {
        serve.wait_for(&[pipeline, "DONE h 2026-09-20T11 PUBLISHED"]);
    }
    // One manifest broken on SIGHUP: both keep serving what they had.
    std::fs::write(sb.path().join("n.toml"), "[pipeline]\nname = 1\n").unwrap();
    serve.signal(libc::SIGHUP);
    serve.wait_for(&["other", "RELOAD refused"]);
    serve.wait_for(&["served", "RELOAD 1 tasks"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(lines.iter().filter(|l| l.ends_with(" EXIT")).count(), 2);
    for wh in ["wh", "wh2"] {
        let w = weir::store::Warehouse::open(&sb.path().join(wh)).unwrap();
        for h in ["10", "11"] {
            let key = format!("2026-09-20T{h}");
            assert_eq!(
                w.partition("hours", &key).history().unwrap().len(),
                1,
                "{wh} {key}"
            );
        }
    }
}

// The claims and MISSED records go through the store: two serves on one S3
// warehouse (each with its own staging, as on two hosts) publish each
// partition once, and a restart records what it skipped once.
#[cfg(feature = "s3")]
#[cfg_attr(
    not(any(weir_has_s3, weir_ci)),
    ignore = "needs S3: set WEIR_S3_TEST_ENDPOINT (ci/moto-up.sh starts moto)"
)]
#[test]
fn two_serves_on_one_s3_warehouse_publish_each_partition_once() {
    let Some(s3) = crate::support::s3::S3::sandbox("served") else {
        return;
    };
    let sb = sandbox();
    let staging = tempfile::tempdir().unwrap();
    let (sa, sb_) = (staging.path().join("a"), staging.path().join("b"));
    let a = Serve::spawn(
        s3.weir(sb.path(), &sa, &["serve", "m.toml"]),
        "2026-09-20T11:59:57Z",
    );
    let b = Serve::spawn(
        s3.weir(sb.path(), &sb_, &["serve", "m.toml"]),
        "2026-09-20T11:59:57Z",
    );
    for h in ["10", "11"] {
        wait_for_either(&a, &b, &format!("DONE h 2026-09-20T{h} PUBLISHED"));
    }
    let (_, la) = a.stop();
    let (_, lb) = b.stop();
    for h in ["10", "11"] {
        let all: Vec<&String> = la.iter().chain(&lb).collect();
        let published = all
            .iter()
            .filter(|l| l.contains(&format!("DONE h 2026-09-20T{h} PUBLISHED")))
            .count();
        let claimed = all
            .iter()
            .filter(|l| l.contains(&format!("CLAIMED h 2026-09-20T{h}: engine")))
            .count();
        assert_eq!(published, 1, "{la:#?}\n{lb:#?}");
        assert!(claimed <= 1, "{la:#?}\n{lb:#?}");
    }
    // Down until 14:30: one MISSED record per skipped hour, through the store.
    let c = Serve::spawn(
        s3.weir(sb.path(), &sa, &["serve", "m.toml"]),
        "2026-09-20T14:30:00Z",
    );
    c.wait_for(&["DONE h 2026-09-20T13 PUBLISHED"]);
    let (_, lc) = c.stop();
    assert_eq!(
        lc.iter()
            .filter(|l| l.contains("MISSED h 2026-09-20T12"))
            .count(),
        1,
        "{lc:#?}"
    );
    let status = s3
        .weir(sb.path(), &sa, &["status", "m.toml", "--json"])
        .env("WEIR_NOW", "2026-09-20T14:40:00Z")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&crate::support::ok(&status)).unwrap();
    assert_eq!(
        doc["serve"]["missed"][0]["partition"], "2026-09-20T12",
        "{doc}"
    );
    let generations: Vec<(String, u64)> = doc["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_str().unwrap().to_string(),
                p["generation"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        generations,
        [
            ("2026-09-20T10".to_string(), 1),
            ("2026-09-20T11".to_string(), 1),
            ("2026-09-20T13".to_string(), 1)
        ]
    );
}

// A serve killed mid-attempt does not lose its period: a standby serve
// finds its claimer dead and runs it.
#[test]
fn a_standby_takes_over_the_period_of_a_serve_killed_mid_attempt() {
    let sb = sandbox();
    // The first attempt hangs (its serve is killed); any later one publishes.
    sb.script(
        "h.sh",
        &format!(
            "if [ ! -e first ]; then touch first; sleep 300 & echo $! > sleeper.pid; wait; fi\n{SCRIPT}"
        ),
    );
    let mut a = Serve::start(&sb, "2026-09-20T11:30:00Z");
    a.wait_for(&["START h 2026-09-20T10"]);
    let pid_file = sb.path().join("sleeper.pid");
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&pid_file).map_or(true, |s| s.trim().is_empty()) {
        assert!(Instant::now() < deadline, "the task never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // The standby (started later, the machine's clock on) runs that very
    // period: its claimer is dead and nothing of it is published.
    let b = Serve::start(&sb, "2026-09-20T11:40:00Z");
    b.wait_for(&["TAKEOVER h 2026-09-20T10: engine"]);
    b.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    let (code, lines) = b.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(generations(&sb, "2026-09-20T10"), 1);
    assert!(!lines.iter().any(|l| l.contains("MISSED")), "{lines:#?}");
}

const MINUTELY: &str = r#"
[pipeline]
name = "served"
code_version = "1"
warehouse = "wh"

[partitions.minute]
kind = "minutely"
every = 1
start = "2026-09-20T00:00"

[datasets.raw]
path = "raw/{partition}/rows.csv"
format = "csv"
ready = { file = "raw/{partition}/_SUCCESS" }

[tasks.h]
command = ["sh", "m.sh"]
inputs = ["raw"]
partitioned_by = "minute"
output = { dataset = "hours", grain = ["minute"] }
"#;

// On a minutely scheme: serve waits for a minute's `_SUCCESS` (WAIT, no
// attempt, nothing published), publishes it once the file appears, and
// publishes the next minute when it ends, each once.
#[test]
fn serve_waits_for_a_late_success_file_then_publishes_each_minute_once() {
    let sb = Sandbox::new(MINUTELY);
    sb.script(
        "m.sh",
        "printf 'minute,n\\n%s,1\\n' \"$WEIR_PARTITION\" > \"$WEIR_OUTPUT_DIR/part.csv\"\n",
    );
    for minute in ["2026-09-20T10:00", "2026-09-20T10:01"] {
        let dir = sb.path().join("raw").join(minute);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rows.csv"), "x\n1\n").unwrap();
    }
    let serve = Serve::start(&sb, "2026-09-20T10:01:50Z");
    serve.wait_for(&["WAIT h 2026-09-20T10:00", "_SUCCESS"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        generations(&sb, "2026-09-20T10:00"),
        0,
        "{:#?}",
        serve.lines()
    );
    std::fs::write(sb.path().join("raw/2026-09-20T10:00/_SUCCESS"), "").unwrap();
    serve.wait_for(&["DONE h 2026-09-20T10:00 PUBLISHED"]);
    // The next minute ends at 10:02; its flag is there in time.
    std::fs::write(sb.path().join("raw/2026-09-20T10:01/_SUCCESS"), "").unwrap();
    serve.wait_for(&["DONE h 2026-09-20T10:01 PUBLISHED"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    // Two partitions (their directory names encode the colon), one
    // generation each.
    assert_eq!(
        std::fs::read_dir(sb.path().join("wh/hours"))
            .unwrap()
            .count(),
        2
    );
    assert_eq!(generations(&sb, "2026-09-20T10:00"), 1);
    assert_eq!(generations(&sb, "2026-09-20T10:01"), 1);
    assert_eq!(
        lines.iter().filter(|l| l.contains(" START ")).count(),
        2,
        "{lines:#?}"
    );
    assert!(serve_events(&sb, State::Missed).is_empty());
}

// `weir serve --http`: the live console runs beside the engine, from the
// warehouse serve writes, and stops with it.
#[cfg(feature = "console")]
#[test]
fn serve_with_http_serves_the_console_of_what_it_publishes() {
    use std::io::{Read, Write};
    let sb = sandbox();
    let serve = Serve::spawn(
        sb.weir(&["serve", "m.toml", "--http", "127.0.0.1:0"]),
        "2026-09-20T11:30:00Z",
    );
    let line = serve.wait_for(&["console of `served` on http://127.0.0.1:"]);
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_owned();
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /api/status HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = response.split("\r\n\r\n").nth(1).unwrap();
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(doc["pipeline"], "served");
    assert_eq!(doc["partitions"][0]["partition"], "2026-09-20T10");
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    assert!(std::net::TcpStream::connect(&addr).is_err());
}

// A MISSED period is announced to the targets that asked for `missed`,
// once per period: a second restart records nothing new and sends nothing.
#[test]
fn missed_periods_are_notified_once_each() {
    let sb = Sandbox::new(&format!(
        "{MANIFEST}\n[notify.pager]\ncommand = [\"sh\", \"page.sh\"]\non = [\"missed\"]\n"
    ));
    sb.script("h.sh", SCRIPT);
    sb.script("page.sh", "cat > \"pages/$WEIR_IDEMPOTENCY_KEY.json\"\n");
    std::fs::create_dir(sb.path().join("pages")).unwrap();
    let pages = |sb: &Sandbox| -> Vec<serde_json::Value> {
        let mut out: Vec<serde_json::Value> = std::fs::read_dir(sb.path().join("pages"))
            .unwrap()
            .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
            .collect();
        out.sort_by(|a, b| a["partition"].as_str().cmp(&b["partition"].as_str()));
        out
    };
    let serve = Serve::start(&sb, "2026-09-20T11:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    assert_eq!(serve.stop().0, 0);
    assert!(pages(&sb).is_empty());
    // Down from 11:30 to 14:30: hours 11 and 12 were due meanwhile.
    let serve = Serve::start(&sb, "2026-09-20T14:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T13 PUBLISHED"]);
    assert_eq!(serve.stop().0, 0);
    let sent = pages(&sb);
    let missed: Vec<(&str, &str)> = sent
        .iter()
        .map(|p| {
            (
                p["event"].as_str().unwrap(),
                p["partition"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        missed,
        [("missed", "2026-09-20T11"), ("missed", "2026-09-20T12")]
    );
    let serve = Serve::start(&sb, "2026-09-20T14:40:00Z");
    serve.wait_for(&["IDLE until"]);
    assert_eq!(serve.stop().0, 0);
    assert_eq!(pages(&sb).len(), 2);
}

// A serve batch is a run like `weir run`'s: its publications reach the
// lineage sink (serve used to start runs without the lineage emitter).
#[test]
fn serve_publications_appear_in_the_lineage_file() {
    let sb = Sandbox::new(&format!(
        "{MANIFEST}\n[lineage]\nfile = \"lineage.jsonl\"\n"
    ));
    sb.script("h.sh", SCRIPT);
    let serve = Serve::start(&sb, "2026-09-20T11:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    let text = std::fs::read_to_string(sb.path().join("lineage.jsonl")).unwrap_or_default();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &str| {
        events
            .iter()
            .filter(|e| {
                e["eventType"] == kind
                    && e["job"]["name"] == "served.h"
                    && e["run"]["facets"]["weir"]["partition"] == "2026-09-20T10"
            })
            .count()
    };
    assert_eq!((of("START"), of("COMPLETE")), (1, 1), "{text}");
    let complete = events
        .iter()
        .find(|e| e["eventType"] == "COMPLETE")
        .unwrap();
    let generation = sb
        .store("hours", "2026-09-20T10")
        .latest()
        .unwrap()
        .unwrap();
    assert_eq!(complete["outputs"][0]["name"], "hours");
    assert_eq!(
        complete["outputs"][0]["facets"]["version"]["datasetVersion"],
        format!("1:{}", generation.digest)
    );
}

/// Serve's stderr until its first IDLE, then stopped: (debug lines, the
/// other lines).
fn serve_stderr(verbose: bool) -> (Vec<String>, Vec<String>) {
    let sb = sandbox();
    let args: &[&str] = if verbose {
        &["-v", "serve", "m.toml"]
    } else {
        &["serve", "m.toml"]
    };
    let serve = Serve::spawn(sb.weir(args), "2026-09-20T11:30:00Z");
    serve.wait_for(&["DONE h 2026-09-20T10 PUBLISHED"]);
    serve.wait_for(&["IDLE until 2026-09-20T12:00:00Z (h 2026-09-20T11)"]);
    if verbose {
        serve.wait_for_stderr("next wake-up");
    }
    let stderr = serve.stderr();
    let (code, lines) = serve.stop();
    assert_eq!(code, 0, "{lines:#?}");
    stderr
        .lines()
        .map(str::to_owned)
        .partition(|l| l.starts_with("debug: "))
}

#[test]
fn verbose_serve_says_its_decisions_on_stderr_and_the_default_does_not() {
    let (debug, rest) = serve_stderr(true);
    for line in [
        "debug: weir::serve::machine: occurrence admitted: waits for its inputs to be checked task=h occurrence=",
        "debug: weir::serve::verbose: inputs ready task=h partition=2026-09-20T10",
        "debug: weir::serve::verbose: lane started task=h partition=2026-09-20T10 occurrence=",
        "debug: weir::serve::verbose: next wake-up: due task=h partition=2026-09-20T11 occurrence=",
    ] {
        assert!(
            debug.iter().any(|l| l.starts_with(line)),
            "no line starting {line:?} in\n{}",
            debug.join("\n")
        );
    }
    let wake = debug.iter().find(|l| l.contains("next wake-up")).unwrap();
    assert!(wake.ends_with("until=2026-09-20T12:00:00Z"), "{wake}");
    // Without -v, no decision line, and -v changes none of the others.
    let (quiet_debug, quiet_rest) = serve_stderr(false);
    assert_eq!(quiet_debug, Vec::<String>::new());
    assert_eq!(rest, quiet_rest);
}
