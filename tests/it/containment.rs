//! On a host with a writable cgroup v2 hierarchy each launch gets its own
//! cgroup there, killed whole with `cgroup.kill` when its command exits,
//! times out or the engine is interrupted, then removed.
//!
//! The escapee of these tests leaves the process group (`setsid`) and drops
//! the launch's tag (`env -i`): neither the group kill nor the /proc tag scan
//! can find it, only a cgroup can. `WEIR_CGROUP=v2` keeps the v1 freezer out,
//! and the task records its own `/proc/self/cgroup`, so the v2 hierarchy is
//! what holds it (the v1 freezer passing the test would fail it).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::events::State;

use crate::support::{poll_until, process_state, stderr, stdout, Engine, Sandbox};

/// Where the engines these tests start put their launches' v2 cgroups:
/// `weir` under their own cgroup (this process's, which they inherit) in
/// the unified hierarchy; `None` (with the reason printed) where this host
/// has no writable one with `cgroup.kill`, a failure under `CI=true`.
fn v2_dir() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mount = mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(fields[1]))
    });
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    let dir = mount.map(|m| m.join(own.trim_start_matches('/')).join("weir"));
    let reason = match &dir {
        None => "no cgroup2 mount in /proc/self/mounts".to_string(),
        Some(d) if std::fs::create_dir_all(d).is_err() => {
            format!("{} cannot be made", d.display())
        }
        Some(d) if !d.join("cgroup.kill").exists() => {
            format!("{} has no cgroup.kill (kernel < 5.14)", d.display())
        }
        Some(_) => return dir,
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and no writable cgroup v2 hierarchy: {reason}"
    );
    eprintln!("skipped: no writable cgroup v2 hierarchy on this host: {reason}");
    None
}

/// One task over `exits`, `timeout`, `interrupted` and `orphaned`: it starts
/// an escapee (`setsid env -i`, in its own session, without the tag) that
/// writes `late-<key>` after 2 s (5 s for `orphaned`), waits until the escapee has written its pid to
/// `pid-<key>`, records its cgroups in `cgroup-<key>`, then exits (`exits`)
/// or sleeps past its 1 s timeout.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new(
        r#"
[pipeline]
name = "containment"
code_version = "1"
warehouse = "wh"

[partitions.k]
kind = "static"
keys = ["exits", "timeout", "interrupted", "orphaned"]

[retry.once]
max_attempts = 1

[tasks.t]
command = ["sh", "t.sh"]
retry = "once"
timeout = "1s"
output = { dataset = "out", grain = ["id"] }
"#,
    );
    sb.script(
        "t.sh",
        r#"k=$WEIR_PARTITION
here=$(pwd)
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/rows.csv"
cat /proc/self/cgroup > "cgroup-$k"
late=2
[ "$k" = orphaned ] && late=5
setsid env -i sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; sleep "$3"; touch "$2"' \
  escapee "$here/pid-$k" "$here/late-$k" "$late" > /dev/null 2>&1 < /dev/null &
while [ ! -s "pid-$k" ]; do sleep 0.01; done
case "$k" in
  exits) exit 0 ;;
  *) sleep 30 ;;
esac
"#,
    );
    sb
}

/// The escapee of `key` is dead (gone, or a zombie: PID 1 here does not
/// reap, and a zombie answers `kill -0`), and it never wrote its file after
/// its 2 s; its cgroup was the launch's own in the v2 hierarchy, and is
/// removed. `since`: before the run started; `late`: when the escapee
/// writes.
#[track_caller]
fn contained(sb: &Sandbox, dir: &Path, key: &str, since: Instant, late: Duration) {
    let cgroups = std::fs::read_to_string(sb.path().join(format!("cgroup-{key}"))).unwrap();
    let unified = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("{key}: no cgroup v2 line in {cgroups}"));
    let tag = unified.strip_prefix("/weir/").unwrap_or_else(|| {
        panic!("{key}: the task ran outside a v2 cgroup of its own:\n{cgroups}")
    });
    assert!(
        !cgroups.lines().any(|l| l.contains("freezer:/weir/")),
        "{key}: the v1 freezer held the task, not v2:\n{cgroups}"
    );
    assert!(
        !dir.join(tag).exists(),
        "{key}: its cgroup {tag} was not removed"
    );
    let pid: u32 = std::fs::read_to_string(sb.path().join(format!("pid-{key}")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let state = process_state(pid);
    assert!(
        matches!(state, None | Some('Z') | Some('X')),
        "{key}: the escapee {pid} outlived its command (state {state:?})"
    );
    // Past the time after which a live escapee would have written.
    let until = since + late + Duration::from_secs(1);
    std::thread::sleep(until.saturating_duration_since(Instant::now()));
    assert!(
        !sb.path().join(format!("late-{key}")).exists(),
        "{key}: the escapee wrote after its command ended"
    );
}

// An escapee in its own session without the tag dies when the
// command exits and when it times out; the cgroup is gone after.
#[test]
fn a_v2_cgroup_kills_an_escapee_without_the_tag_on_exit_and_timeout() {
    let Some(dir) = v2_dir() else { return };
    let sb = sandbox();
    let doctor = sb
        .weir(&["doctor", "m.toml"])
        .env("WEIR_CGROUP", "v2")
        .output()
        .unwrap();
    assert_eq!(doctor.status.code(), Some(0), "{}", stderr(&doctor));
    assert_eq!(
        stdout(&doctor).lines().next().unwrap_or(""),
        format!(
            "containment: cgroup v2 at {} (cgroup.kill), then the process group and a /proc scan for WEIR_PROCESS_TAG (WEIR_CGROUP=v2)",
            dir.display()
        ),
        "{}",
        stdout(&doctor)
    );
    let since = Instant::now();
    let out = sb
        .weir(&[
            "run",
            "m.toml",
            "--run-id",
            "r",
            "--partition",
            "exits",
            "--partition",
            "timeout",
        ])
        .env("WEIR_CGROUP", "v2")
        .output()
        .unwrap();
    // `exits` published, `timeout` failed as timed out.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let events = sb.events("r");
    let failed: Vec<_> = events.iter().filter(|e| e.state == State::Failed).collect();
    assert!(
        failed.len() == 1 && failed[0].partition.as_deref() == Some("timeout"),
        "{failed:?}"
    );
    assert!(
        failed[0].detail.contains("timed out"),
        "{}",
        failed[0].detail
    );
    assert!(
        events
            .iter()
            .any(|e| e.state == State::Published && e.partition.as_deref() == Some("exits")),
        "{}",
        stdout(&out)
    );
    contained(&sb, &dir, "exits", since, Duration::from_secs(2));
    contained(&sb, &dir, "timeout", since, Duration::from_secs(2));
}

// SIGINT of the engine kills the running command's whole cgroup,
// the escapee without the tag included.
#[test]
fn a_v2_cgroup_kills_an_escapee_without_the_tag_on_sigint() {
    let Some(dir) = v2_dir() else { return };
    let sb = sandbox();
    let since = Instant::now();
    let mut cmd = sb.weir(&[
        "run",
        "m.toml",
        "--run-id",
        "r",
        "--partition",
        "interrupted",
    ]);
    cmd.env("WEIR_CGROUP", "v2");
    let engine = Engine::spawn(cmd, sb.path(), "r");
    let pid_file = sb.path().join("pid-interrupted");
    poll_until("the escapee started", Duration::from_secs(20), || {
        pid_file.exists()
    });
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        matches!(process_state(pid), Some(s) if s != 'Z'),
        "the escapee {pid} runs before the interrupt"
    );
    engine.signal(libc::SIGINT);
    let out = engine.finish(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("INTERRUPTED t interrupted"),
        "{}",
        stdout(&out)
    );
    contained(&sb, &dir, "interrupted", since, Duration::from_secs(2));
}

// An engine killed with -9 leaves its command's escapee running
// (the command dies with it); the next engine that starts a run on the host
// kills the dead engine's v2 cgroup whole and removes it.
#[test]
fn a_dead_engines_v2_cgroup_is_killed_by_the_next_engine() {
    let Some(dir) = v2_dir() else { return };
    // Every engine on the host sweeps the cgroups of dead engines, so another
    // test's engine may stop the escapee before this test's second engine
    // starts: then nothing shows which engine did, and the scenario runs
    // again (a few times at most).
    for _ in 0..3 {
        let sb = sandbox();
        let since = Instant::now();
        let mut cmd = sb.weir(&["run", "m.toml", "--run-id", "a", "--partition", "orphaned"]);
        cmd.env("WEIR_CGROUP", "v2");
        let engine = Engine::spawn(cmd, sb.path(), "a");
        let pid_file = sb.path().join("pid-orphaned");
        poll_until("the escapee started", Duration::from_secs(20), || {
            pid_file.exists()
        });
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        engine.kill();
        std::thread::sleep(Duration::from_millis(200));
        if !matches!(process_state(pid), Some(s) if s != 'Z') {
            eprintln!("the escapee {pid} was stopped by another engine's sweep; again");
            continue;
        }
        let out = sb
            .weir(&["run", "m.toml", "--run-id", "b", "--partition", "exits"])
            .env("WEIR_CGROUP", "v2")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\n{}",
            stdout(&out),
            stderr(&out)
        );
        contained(&sb, &dir, "orphaned", since, Duration::from_secs(5));
        contained(&sb, &dir, "exits", Instant::now(), Duration::from_secs(2));
        return;
    }
    panic!("the escapee never outlived its dead engine long enough to test the next one");
}

// A `WEIR_CGROUP` the engine does not know is refused before
// anything runs, naming the values it takes.
#[test]
fn an_unknown_weir_cgroup_is_refused() {
    let sb = sandbox();
    let out = sb
        .weir(&["run", "m.toml", "--run-id", "r", "--partition", "exits"])
        .env("WEIR_CGROUP", "yes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("WEIR_CGROUP=yes: expected `on` (the default), `v2`, `v1` or `off`"),
        "{}",
        stderr(&out)
    );
    assert!(!sb.path().join("cgroup-exits").exists(), "the task ran");
}

// `weir doctor` names the containment a launch gets, the tzdb
// version and, given a manifest, its store; with WEIR_CGROUP=off it is the
// process group and the tag scan alone, on any host.
#[test]
fn doctor_names_the_containment_tzdb_and_store() {
    let sb = sandbox();
    let out = sb
        .weir(&["doctor", "m.toml"])
        .env("WEIR_CGROUP", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let warehouse = sb.manifest().pipeline.warehouse;
    assert_eq!(
        stdout(&out),
        format!(
            "containment: the process group and a /proc scan for WEIR_PROCESS_TAG (WEIR_CGROUP=off)\ntzdb: {}\nstore: directory {}\n",
            weir::partition::time::tzdb_version(),
            warehouse.display()
        )
    );
    assert_eq!(stderr(&out), "");
    // Without a manifest: no store line.
    let out = sb
        .weir(&["doctor"])
        .env("WEIR_CGROUP", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2, "{}", stdout(&out));
}
