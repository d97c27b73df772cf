//! A second engine, a crash at a chosen instant, the engine's own I/O
//! failures and unreliable clocks or pids must never make weir duplicate
//! work, undo an operator, burn a task's retries or report success for data
//! it did not publish.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use weir::events::{EventRecord, State};
use weir::store::{FencingToken, TokenOwner};

use crate::support::{
    assert_exit, exclusive, poll_until, process_state, states, stderr, stdout, Engine, Sandbox,
};

const LIMIT: Duration = Duration::from_secs(60);

/// One task `t` over static keys, writing dataset `out` from `t.sh`.
fn pipeline(keys: &[&str], code_version: &str, task_extra: &str) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    format!(
        r#"
[pipeline]
name = "races"
code_version = "{code_version}"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = [{}]

[retry.quick]
max_attempts = 3
backoff = {{ initial = "1ms", max = "2ms" }}

[datasets.raw]
path = "raw.csv"

[tasks.t]
command = ["sh", "t.sh"]
inputs = ["raw"]
output = {{ dataset = "out", grain = ["id"] }}
retry = "quick"
{task_extra}
"#,
        keys.join(", ")
    )
}

/// Copies `raw.csv` into the output and records the launch in
/// `launches/<partition>` (the task's own side effect, outside the warehouse).
const COPY: &str = r#"mkdir -p launches
echo "$WEIR_RUN_ID $WEIR_TOKEN" >> "launches/$WEIR_PARTITION"
cat "$WEIR_INPUT_RAW" > "$WEIR_OUTPUT_DIR/out.csv"
"#;

fn sandbox(keys: &[&str], task_extra: &str, script: &str) -> Sandbox {
    let sb = Sandbox::new(&pipeline(keys, "1", task_extra));
    sb.script("t.sh", script);
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,a\n2,b\n").unwrap();
    sb
}

fn launches(sb: &Sandbox, partition: &str) -> Vec<String> {
    std::fs::read_to_string(sb.path().join("launches").join(partition))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn of(events: &[EventRecord], state: State) -> Vec<&EventRecord> {
    events.iter().filter(|e| e.state == state).collect()
}

fn no_markers(sb: &Sandbox) {
    let dir = sb.path().join("wh/_instances");
    let markers: Vec<PathBuf> = walk(&dir);
    assert!(markers.is_empty(), "no instance marker: {markers:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

// An unknown commit outcome is settled by rereading the log
#[test]
fn commit_whose_directory_fsync_fails_is_settled_by_rereading_the_log() {
    let sb = sandbox(&["p"], "", COPY);
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "R"])
        .env("WEIR_FAULT", "commit_fsync@t/p:fail")
        .output()
        .unwrap();
    assert_exit(&out, 5);
    let store = sb.store("out", "p");
    assert_eq!(store.generations().unwrap().len(), 1, "one generation");
    assert_eq!(sb.entries("out", "p", "tokens").len(), 1, "one token");
    assert_eq!(launches(&sb, "p").len(), 1, "one launch");
    let events = sb.events("R");
    let published = of(&events, State::Published);
    assert_eq!(published.len(), 1, "{events:#?}");
    assert_eq!(published[0].token, Some(1));
    assert!(
        published[0].detail.contains("found the record"),
        "{}",
        published[0].detail
    );
    assert!(of(&events, State::Retrying).is_empty(), "{events:#?}");
    assert!(of(&events, State::Failed).is_empty(), "{events:#?}");
    assert_eq!(of(&events, State::EngineFailed).len(), 1);
    no_markers(&sb);
    assert!(
        stderr(&out).contains("Input/output error"),
        "{}",
        stderr(&out)
    );
    // The next run finds it current: nothing to redo.
    assert_exit(&sb.run("R2", &[]), 0);
    assert_eq!(
        states(&sb.events("R2"), "t", "p"),
        [State::Queued, State::AlreadyPublished]
    );
}

// A waiting engine applies the same currency test as every ALREADY_PUBLISHED
#[test]
fn waiting_engine_with_newer_code_does_not_report_already_published() {
    let _serial = exclusive();
    let sb = sandbox(
        &["k"],
        "heartbeat = \"1s\"",
        "while [ ! -f release.flag ]; do sleep 0.02; done\nprintf 'id,cv\\n1,%s\\n' \"$WEIR_CODE_VERSION\" > \"$WEIR_OUTPUT_DIR/out.csv\"\n",
    );
    // The old release's manifest shares the warehouse (the deploy overlap).
    std::fs::write(
        sb.path().join("old.toml"),
        pipeline(&["k"], "1", "heartbeat = \"1s\""),
    )
    .unwrap();
    std::fs::write(
        sb.path().join("m.toml"),
        pipeline(&["k"], "2", "heartbeat = \"1s\""),
    )
    .unwrap();
    let store = sb.store("out", "k");
    let a = Engine::spawn(
        sb.weir(&["run", "old.toml", "--run-id", "A"]),
        sb.path(),
        "A",
    );
    poll_until("A's lease", LIMIT, || {
        store
            .attempt_dir(FencingToken::from_raw(1))
            .join("lease.json")
            .is_file()
    });
    let b = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "B"]), sb.path(), "B");
    let b_log = weir::events::run_dir(&sb.path().join("wh"), "B").join("events.jsonl");
    poll_until("B to wait for A", LIMIT, || {
        weir::events::read_log(&b_log)
            .is_ok_and(|(r, _)| r.iter().any(|e| e.state == State::Waiting))
    });
    std::fs::write(sb.path().join("release.flag"), "").unwrap();
    assert_exit(&a.finish(LIMIT), 0);
    assert_exit(&b.finish(LIMIT), 0);
    let b_events = sb.events("B");
    assert!(
        of(&b_events, State::AlreadyPublished).is_empty(),
        "{b_events:#?}"
    );
    let published = of(&b_events, State::Published);
    assert_eq!(published.len(), 1, "{b_events:#?}");
    assert_eq!(published[0].data["generation"], 2);
    assert_eq!(published[0].data["code_version"], "2");
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(
        (latest.generation.get(), latest.code_version.as_str()),
        (2, "2")
    );
    assert_eq!(
        crate::support::Visible::of(&store).rows(),
        [vec!["1".to_string(), "2".to_string()]]
    );
}

const KEYS: [&str; 12] = [
    "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09", "k10", "k11", "k12",
];

/// Starts two engines at once with these run ids over 12 partitions and
/// checks that each partition's task was launched exactly once.
fn two_engines_together(run_ids: [&str; 2]) {
    let _serial = exclusive();
    let sb = sandbox(&KEYS, "", &format!("{COPY}sleep 0.3\n"));
    let engines: Vec<Engine> = run_ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            Engine::spawn(
                sb.weir(&["run", "m.toml", "--run-id", id]),
                sb.path(),
                &format!("engine{i}"),
            )
        })
        .collect();
    for e in engines {
        assert_exit(&e.finish(LIMIT), 0);
    }
    for key in KEYS {
        let launched = launches(&sb, key);
        assert_eq!(launched.len(), 1, "{key} launched {launched:?}");
        let store = sb.store("out", key);
        assert_eq!(
            store.generations().unwrap().len(),
            1,
            "{key}: one generation"
        );
    }
}

// Two engines that start together never launch the same instance
#[test]
fn two_engines_started_together_never_launch_one_instance_twice() {
    two_engines_together(["A", "B"]);
}

// Two engines given the same --run-id still see each other
#[test]
fn two_engines_with_the_same_run_id_see_each_other() {
    two_engines_together(["SAME", "SAME"]);
}

// Rollback is crash-safe: the hold is in place before the commit
#[test]
fn rollback_killed_after_its_commit_is_not_undone_by_the_next_run() {
    let sb = sandbox(&["p"], "", COPY);
    assert_exit(&sb.run("R1", &[]), 0);
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,a\n2,b\n3,c\n").unwrap();
    assert_exit(&sb.run("R2", &[]), 0);
    let store = sb.store("out", "p");
    let gen1 = store.history().unwrap()[0].clone();
    let out = sb
        .weir(&["rollback", "m.toml", "out", "--partition", "p"])
        .env("WEIR_FAULT", "rollback_commit")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGKILL),
        "killed right after the commit: {}",
        stderr(&out)
    );
    let latest = store.latest().unwrap().unwrap();
    assert_eq!(latest.generation.get(), 3);
    assert_eq!(latest.digest, gen1.digest);
    // New data arrives: without the hold the scheduled run would rebuild.
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,a\n2,b\n3,c\n4,d\n").unwrap();
    let out = sb.run("R3", &[]);
    assert_exit(&out, 1);
    assert_eq!(store.generations().unwrap().len(), 3, "nothing rebuilt");
    assert_eq!(store.latest().unwrap().unwrap().digest, gen1.digest);
    assert_eq!(
        states(&sb.events("R3"), "t", "p"),
        [State::Queued, State::Held]
    );
    assert_eq!(launches(&sb, "p").len(), 2);
    // The rollback's event was durable before its commit and names its token.
    let events = sb.all_runs_events();
    let rolled = of(&events, State::RolledBack);
    assert_eq!(rolled.len(), 1);
    assert_eq!(rolled[0].data["token"], latest.token.get());
}

/// Runs `cmd` under strace, tracing fsyncs and unlinks with fd paths;
/// `None` where strace cannot run here.
fn traced(cmd: &Command) -> Option<(Output, String)> {
    let trace = tempfile::NamedTempFile::new().unwrap();
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(ToOwned::to_owned).collect();
    let mut strace = Command::new("strace");
    strace
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,unlink,unlinkat,rmdir",
            "-o",
        ])
        .arg(trace.path())
        .arg(program)
        .args(args);
    if let Some(dir) = cmd.get_current_dir() {
        strace.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            strace.env(k, v);
        }
    }
    let out = strace.output().ok()?;
    let text = std::fs::read_to_string(trace.path()).ok()?;
    if text.is_empty() {
        return None;
    }
    Some((out, text))
}

// gc's GC_DELETED event is durable before the deletion it announces
#[test]
fn gc_event_is_durable_before_the_delete() {
    let sb = sandbox(&["p"], "", COPY);
    assert_exit(&sb.run("R1", &[]), 0);
    assert_exit(&sb.run("R2", &["--force"]), 0);
    let Some((out, trace)) = traced(&sb.weir(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "0",
        "--apply",
    ])) else {
        eprintln!("skipping: strace cannot run here");
        return;
    };
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("deleted 1 candidate directory"),
        "{}",
        stdout(&out)
    );
    let lines: Vec<&str> = trace.lines().collect();
    let first_delete = lines
        .iter()
        .position(|l| l.contains("unlink") && l.contains("attempts/00000000000000000001"))
        .unwrap_or_else(|| panic!("no deletion traced:\n{trace}"));
    let synced = lines[..first_delete]
        .iter()
        .any(|l| (l.contains("fdatasync(") || l.contains("fsync(")) && l.contains("events.jsonl"));
    assert!(
        synced,
        "no fsync of the event log before the first deletion:\n{trace}"
    );
    assert!(!sb
        .store("out", "p")
        .attempt_dir(FencingToken::from_raw(1))
        .exists());
}

// A killed engine's attempt that was taken over becomes collectable
#[test]
fn taken_over_candidates_are_collectable_by_gc() {
    let _serial = exclusive();
    let sb = sandbox(
        &["p"],
        "heartbeat = \"100ms\"",
        &format!("{COPY}sleep 0.5\n"),
    );
    let store = sb.store("out", "p");
    let first = FencingToken::from_raw(1);
    let a = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "A"]), sb.path(), "A");
    poll_until("A's command", LIMIT, || launches(&sb, "p").len() == 1);
    a.kill();
    assert_exit(&sb.run("C", &[]), 0);
    let c_events = sb.events("C");
    assert_eq!(of(&c_events, State::TakenOver).len(), 1, "{c_events:#?}");
    assert_eq!(sb.entries("out", "p", "claims"), [first.key_name()]);
    // Make A's lease look like one from another machine: only the takeover
    // claim says it is over.
    let dir = store.attempt_dir(first);
    let mut lease = weir::store::leases::read_at(&dir).expect("A's lease");
    assert!(!lease.finished);
    lease.host = "elsewhere".into();
    weir::store::leases::write_at(&dir, &lease).unwrap();
    let out = sb.weir_out(&[
        "gc",
        "m.toml",
        "--older-than",
        "0s",
        "--keep-generations",
        "0",
        "--apply",
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.starts_with("delete ")
            && l.contains("00000000000000000001")
            && l.contains("took its attempt over")),
        "{text}"
    );
    assert!(!dir.exists(), "A's candidate is collected:\n{text}");
    assert!(
        store.attempt_dir(first.next()).exists(),
        "C's generation is kept"
    );
}

// ENOSPC on the event log fails the run (exit 5), not silently
#[test]
fn full_disk_under_the_event_log_exits_5_and_launches_nothing() {
    let sb = sandbox(&["p"], "", COPY);
    let run_dir = weir::events::run_dir(&sb.path().join("wh"), "R");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::os::unix::fs::symlink("/dev/full", run_dir.join("events.jsonl")).unwrap();
    let out = sb.run("R", &[]);
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );
    assert!(
        launches(&sb, "p").is_empty(),
        "nothing ran without evidence"
    );
    assert!(sb.entries("out", "p", "tokens").is_empty());
    no_markers(&sb);
    // Space back (a real log): the instance runs at once, nothing was burnt.
    std::fs::remove_file(run_dir.join("events.jsonl")).unwrap();
    assert_exit(&sb.run("R", &[]), 0);
    assert_eq!(launches(&sb, "p").len(), 1);
}

// ENOSPC creating stdout.log is the engine's failure, not a quarantine
#[test]
fn full_disk_creating_stdout_log_exits_5_without_quarantine_or_retries() {
    let sb = sandbox(&["p"], "", COPY);
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "R"])
        .env("WEIR_FAULT", "create_logs@t/p:fail")
        .output()
        .unwrap();
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );
    let events = sb.events("R");
    assert_eq!(
        states(&events, "t", "p"),
        [State::Queued, State::Failed, State::EngineFailed],
        "{events:#?}"
    );
    assert!(launches(&sb, "p").is_empty());
    no_markers(&sb);
    // The next run is a first attempt, not a retry of a quarantined instance.
    assert_exit(&sb.run("R2", &[]), 0);
    let again = sb.events("R2");
    assert_eq!(of(&again, State::Running)[0].attempt, Some(1));
    assert_eq!(launches(&sb, "p").len(), 1);
}

/// `cmd` as an unprivileged user when running as root (root ignores file
/// modes); `None` where that is not possible.
fn unprivileged(sb: &Sandbox, args: &[&str]) -> Option<Command> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(sb.weir(args));
    }
    let setpriv = Command::new("setpriv").arg("--version").output().ok()?;
    if !setpriv.status.success() {
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(sb.path())
        .env("WEIR_TODAY", "2026-11-29")
        .env("COLUMNS", "80");
    Some(cmd)
}

fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path).unwrap();
    if meta.is_symlink() {
        return;
    }
    let mode = if meta.is_dir() { 0o777 } else { 0o666 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    if meta.is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            open_up(&e.path());
        }
    }
}

// An EACCES keeps its OS reason in the message
#[test]
fn permission_denied_keeps_its_os_reason_and_exits_5() {
    use std::os::unix::fs::PermissionsExt;
    let sb = sandbox(&["p"], "", COPY);
    assert_exit(&sb.run("R1", &[]), 0);
    // Every directory up to the sandbox must be traversable by the other user.
    let mut up = sb.path().to_path_buf();
    open_up(&up);
    while let Some(parent) = up.parent() {
        up = parent.to_path_buf();
        if std::fs::metadata(&up).unwrap().permissions().mode() & 0o001 == 0 {
            eprintln!("skipping: {} is not traversable by others", up.display());
            return;
        }
    }
    let log = sb.path().join("wh/out/p/log");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o000)).unwrap();
    for args in [
        &["status", "m.toml"][..],
        &["run", "m.toml", "--run-id", "R2"][..],
    ] {
        let Some(mut cmd) = unprivileged(&sb, args) else {
            eprintln!("skipping: cannot drop privileges here");
            return;
        };
        let out = cmd.output().unwrap();
        assert_exit(&out, 5);
        let err = stderr(&out);
        assert!(err.contains("Permission denied"), "{args:?}: {err}");
        assert!(err.contains("out/p/log"), "{args:?}: {err}");
    }
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// A corrupt commit record is reported for its partition only, and refused by run
#[test]
fn corrupt_record_is_named_while_others_are_listed_and_run_refuses_it() {
    let sb = sandbox(&["a", "b"], "", COPY);
    assert_exit(&sb.run("R1", &[]), 0);
    let record = sb.path().join("wh/out/b/log/00000000000000000001.json");
    std::fs::write(&record, b"{\"generation\": 1, \"tok").unwrap();
    let out = sb.weir_out(&["status", "m.toml"]);
    assert_exit(&out, 5);
    let listed = stdout(&out);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("out") && l.contains(" a ")),
        "partition a is still listed:\n{listed}"
    );
    let err = stderr(&out);
    assert!(err.contains("out b") && err.contains("corrupt"), "{err}");
    // run refuses b before spending a token or launching its task.
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,z\n").unwrap();
    let out = sb.run("R2", &["--partition", "b"]);
    assert_exit(&out, 5);
    assert!(stderr(&out).contains("corrupt"), "{}", stderr(&out));
    assert_eq!(sb.entries("out", "b", "tokens").len(), 1, "no token spent");
    assert_eq!(launches(&sb, "b").len(), 1, "not launched again");
    no_markers(&sb);
}

/// Writes a lease for token `t` (allocated by this test process) as another
/// engine would, and returns the attempt dir.
fn foreign_lease(sb: &Sandbox, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let store = sb.store("out", "p");
    let t = store
        .allocate_token(&TokenOwner {
            run_id: "OTHER".into(),
            task: "t".into(),
            attempt: 1,
        })
        .unwrap();
    let dir = store.prepare_attempt(t).unwrap();
    // This test process's own identity, read from /proc as an engine would.
    let read = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_string();
    let stat = read("/proc/self/stat");
    let pid_start: u64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let mut lease = serde_json::json!({
        "engine_id": "00000000feedface",
        "host": read("/proc/sys/kernel/hostname"),
        "pid": std::process::id(),
        "pid_start": pid_start,
        "boot_id": read("/proc/sys/kernel/random/boot_id"),
        "pid_ns": std::fs::read_link("/proc/self/ns/pid").unwrap().display().to_string(),
        "run_id": "OTHER",
        "task": "t",
        "attempt": 1,
        "token": t.get(),
        "beats": 1,
        "heartbeat_ms": jiff::Timestamp::now().as_millisecond(),
        "heartbeat_at": jiff::Timestamp::now().to_string(),
        "timeout_ms": 300,
        "finished": false,
    });
    edit(&mut lease);
    std::fs::write(dir.join("lease.json"), lease.to_string()).unwrap();
    dir
}

// A lease whose writer's clock runs ahead does not count as live forever
#[test]
fn lease_from_a_clock_ahead_expires_on_the_readers_clock() {
    let _serial = exclusive();
    let sb = sandbox(&["p"], "heartbeat = \"100ms\"\ntimeout = \"30s\"", COPY);
    foreign_lease(&sb, |l| {
        l["host"] = "elsewhere".into();
        // A day ahead, and never renewed.
        l["heartbeat_ms"] = (jiff::Timestamp::now().as_millisecond() + 86_400_000).into();
    });
    let started = Instant::now();
    let out = sb.run("R", &[]);
    let took = started.elapsed();
    assert_exit(&out, 0);
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: it waited for the task timeout"
    );
    let events = sb.events("R");
    let unknown = of(&events, State::Unknown);
    assert_eq!(unknown.len(), 1, "{events:#?}");
    assert!(
        unknown[0].detail.contains("no heartbeat"),
        "{}",
        unknown[0].detail
    );
    assert_eq!(of(&events, State::TakenOver).len(), 1);
    assert_eq!(of(&events, State::Published)[0].token, Some(2));
}

// An engine in another PID namespace of this host is not taken for dead
#[test]
fn same_host_other_pid_namespace_is_not_taken_for_dead() {
    let _serial = exclusive();
    let sb = sandbox(&["p"], "heartbeat = \"100ms\"", COPY);
    // Its pid means nothing here: no such process in this namespace.
    let dir = foreign_lease(&sb, |l| {
        l["pid"] = 0x3fff_fff0_u32.into();
        l["pid_start"] = 1.into();
        l["pid_ns"] = "pid:[4026530000]".into();
        // Renewed every 50 ms; a generous lease timeout keeps a loaded
        // machine from making this test about scheduling delays.
        l["timeout_ms"] = 3000.into();
    });
    // The other engine renews its lease for 1.5 s, then finishes its attempt.
    let renewer = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_millis(1500);
        let mut lease = weir::store::leases::read_at(&dir).unwrap();
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            lease.beat();
            weir::store::leases::write_at(&dir, &lease).unwrap();
        }
        lease.finished = true;
        weir::store::leases::write_at(&dir, &lease).unwrap();
    });
    let started = Instant::now();
    let out = sb.run("R", &[]);
    renewer.join().unwrap();
    assert_exit(&out, 0);
    let events = sb.events("R");
    assert!(of(&events, State::Unknown).is_empty(), "{events:#?}");
    assert!(of(&events, State::TakenOver).is_empty(), "{events:#?}");
    assert_eq!(of(&events, State::Waiting).len(), 1, "{events:#?}");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    assert_eq!(launches(&sb, "p").len(), 1);
}

// An engine paused past the task's timeout does not call a finished task timed out
#[test]
fn engine_paused_past_the_timeout_records_the_success() {
    let _serial = exclusive();
    let sb = sandbox(
        &["p"],
        "timeout = \"1s\"",
        &format!("{COPY}sleep 0.3\ntouch \"done.$WEIR_RUN_ID\"\n"),
    );
    // When the engine wakes, its watchdog and its wait for the child race;
    // eight rounds make a lost race all but certain to show. (The engine is
    // stopped within milliseconds of the command's start, so the 1 s
    // timeout can only pass while it sleeps.)
    for round in 1..=8 {
        let run_id = format!("R{round}");
        let engine = Engine::spawn(
            sb.weir(&["run", "m.toml", "--run-id", &run_id, "--force"]),
            sb.path(),
            &run_id,
        );
        poll_until("the command to start", LIMIT, || {
            launches(&sb, "p").len() == round
        });
        engine.signal(libc::SIGSTOP);
        poll_until("the engine to be stopped", LIMIT, || {
            process_state(engine.pid()) == Some('T')
        });
        poll_until("the command to finish", LIMIT, || {
            sb.path().join(format!("done.{run_id}")).is_file()
        });
        // Well past the 1 s timeout while the engine sleeps.
        std::thread::sleep(Duration::from_millis(1500));
        engine.signal(libc::SIGCONT);
        let out = engine.finish(LIMIT);
        assert_exit(&out, 0);
        let events = sb.events(&run_id);
        assert_eq!(
            states(&events, "t", "p"),
            [
                State::Queued,
                State::Running,
                State::Success,
                State::Audited,
                State::Published
            ],
            "round {round}: {events:#?}"
        );
    }
    assert_eq!(launches(&sb, "p").len(), 8);
}

// A real engine in another PID namespace (a container) of this host is waited for
#[test]
fn engine_in_a_real_other_pid_namespace_is_waited_for() {
    let _serial = exclusive();
    let works = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!("skipping: `unshare --pid --fork` is not permitted here");
        return;
    }
    let sb = sandbox(
        &["p"],
        "heartbeat = \"1s\"",
        &format!(
            "{COPY}i=0\nwhile [ ! -f release.flag ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done\n"
        ),
    );
    let mut inside = Command::new("unshare");
    inside
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_weir"))
        .args(["run", "m.toml", "--run-id", "A"])
        .current_dir(sb.path())
        .env("WEIR_TODAY", "2026-11-29");
    let a = Engine::spawn(inside, sb.path(), "A");
    poll_until("A's command", LIMIT, || launches(&sb, "p").len() == 1);
    let lease =
        weir::store::leases::read_at(&sb.store("out", "p").attempt_dir(FencingToken::from_raw(1)))
            .expect("A's lease");
    assert_eq!(lease.pid, 1, "A is pid 1 of its own namespace");
    let mut b = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "B"]), sb.path(), "B");
    let b_log = weir::events::run_dir(&sb.path().join("wh"), "B").join("events.jsonl");
    poll_until("B to decide about A's attempt", LIMIT, || {
        weir::events::read_log(&b_log).is_ok_and(|(r, _)| {
            r.iter()
                .any(|e| matches!(e.state, State::Waiting | State::Unknown))
        })
    });
    assert_eq!(
        states(&sb.events("B"), "t", "p"),
        [State::Queued, State::Waiting],
        "B waits for A, never takes it for dead"
    );
    // Only A's heartbeats (its pid means nothing here) hold B back.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!b.exited(), "B still waits");
    std::fs::write(sb.path().join("release.flag"), "").unwrap();
    assert_exit(&a.finish(LIMIT), 0);
    assert_exit(&b.finish(LIMIT), 0);
    let b_events = sb.events("B");
    assert!(of(&b_events, State::Unknown).is_empty(), "{b_events:#?}");
    assert!(of(&b_events, State::TakenOver).is_empty(), "{b_events:#?}");
    assert_eq!(
        of(&b_events, State::AlreadyPublished).len(),
        1,
        "{b_events:#?}"
    );
    assert_eq!(launches(&sb, "p").len(), 1, "launched once");
}

// A quarantine that cannot be recorded is the engine's failure (exit 5), not a silent exit 1
#[test]
fn marker_that_cannot_be_written_exits_5() {
    let sb = sandbox(&["p"], "", "exit 65\n");
    // Writing the marker fails (ENOSPC); reading markers still works (a
    // marker that cannot be read is the engine's failure before anything
    // runs: exit_codes.rs).
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "R"])
        .env("WEIR_FAULT", "write_marker:fail")
        .output()
        .unwrap();
    assert_exit(&out, 5);
    assert!(
        stderr(&out).contains("cannot record t p as QUARANTINED"),
        "{}",
        stderr(&out)
    );
    assert_eq!(of(&sb.events("R"), State::Quarantined).len(), 1);
}
