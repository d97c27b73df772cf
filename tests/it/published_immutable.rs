//! Published means immutable: no task behaviour can change a published
//! generation's bytes or make weir vouch for bytes it did not verify.
//! Background processes that leave the group, downstream tasks writing into
//! their inputs, links, odd entries in the output, an external input that
//! moves mid-task, an engine killed under a 1-slot pool, big JSON integers,
//! and files that drift after publication.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::events::State;

use crate::support::{
    exclusive, max_overlap, ok, poll_until, stderr, stdout, Engine, Sandbox, Visible,
};

const LIMIT: Duration = Duration::from_secs(60);

fn manifest(body: &str) -> String {
    format!(
        r#"
[pipeline]
name = "boundary"
code_version = "1"
warehouse = "wh"
{body}
"#
    )
}

/// Every published generation's files still have the sizes and hashes
/// their records hold, and their canonical digest.
#[track_caller]
fn intact(sb: &Sandbox, dataset: &str, partition: &str, format: weir::audit::Format) {
    let store = sb.store(dataset, partition);
    for record in store.history().unwrap() {
        assert_eq!(record.file_sums.len(), record.files.len(), "{record:?}");
        store
            .check_files(&record, weir::store::Depth::Hash)
            .unwrap_or_else(|d| panic!("{d}"));
        let (rows, digest) =
            weir::audit::digest_files(&store.visible_files(&record), format).unwrap();
        assert_eq!(
            (rows, digest.as_str()),
            (record.rows, record.digest.as_str())
        );
    }
}

/// Processes whose environment names the sandbox: task processes of it.
fn survivors(sb: &Sandbox) -> Vec<String> {
    let needle = sb.path().to_string_lossy().into_owned();
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if String::from_utf8_lossy(&env).contains(&needle) {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    found
}

// A background child that leaves the process group (setsid,
// Python's start_new_session=True, a double fork) is stopped when the
// command exits; it never writes into the published file.
#[test]
fn background_children_outside_the_group_die_with_the_command() {
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["setsid", "python", "doublefork"]

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
"#,
    ));
    // Each escapee waits until its partition's next generation is committed,
    // then appends a row and leaves a mark.
    sb.script(
        "late.sh",
        r#"log="$(dirname "$WEIR_OUTPUT_DIR")/../../log"
mkdir -p "$log"
n=$(ls "$log" | wc -l)
i=0
while [ "$(ls "$log" | wc -l)" -le "$n" ] && [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); done
echo "9,late" >> "$WEIR_OUTPUT_DIR/rows.csv"
touch "$MARKS/$WEIR_PARTITION"
"#,
    );
    sb.script(
        "late.py",
        r#"import os, subprocess, sys
subprocess.Popen(["sh", "late.sh"], start_new_session=True)
"#,
    );
    sb.script(
        "t.sh",
        r#"printf 'id,v\n1,a\n' > "$WEIR_OUTPUT_DIR/rows.csv"
case "$WEIR_PARTITION" in
  setsid) setsid sh late.sh > /dev/null 2>&1 < /dev/null & ;;
  python) python3 late.py ;;
  doublefork) ( setsid sh -c 'sh late.sh &' > /dev/null 2>&1 < /dev/null & ) ;;
esac
exit 0
"#,
    );
    // With the cgroup where the host has one (v2 first), the v1 freezer
    // alone, and the fallback that finds the processes by their tag.
    for cgroup in ["on", "v1", "off"] {
        let marks = sb.path().join(format!("marks-{cgroup}"));
        std::fs::create_dir(&marks).unwrap();
        let out = sb
            .weir(&["run", "m.toml", "--run-id", cgroup, "--force"])
            .env("MARKS", &marks)
            .env("WEIR_CGROUP", cgroup)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        // Longer than an escapee needs to see the commit and write.
        std::thread::sleep(Duration::from_millis(800));
        for key in ["setsid", "python", "doublefork"] {
            assert!(
                !marks.join(key).exists(),
                "{key}, cgroup {cgroup}: a background child outlived its command"
            );
            let visible = Visible::of(&sb.store("out", key));
            assert_eq!(visible.rows(), [["1", "a"]], "{key}");
            intact(&sb, "out", key, weir::audit::Format::Csv);
        }
        let check = sb.weir_out(&["status", "m.toml", "--check"]);
        assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    }
}

// A downstream task that writes into WEIR_INPUT_<NAME> changes its
// private copy, never the upstream's published generation.
#[test]
fn a_downstream_task_cannot_write_into_its_published_input() {
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["p"]

[datasets.raw]
path = "raw.csv"
format = "csv"

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "upd", grain = ["id"] }

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["upd", "raw"]
output = { dataset = "downd", grain = ["id"] }
"#,
    ));
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,r\n").unwrap();
    sb.script(
        "up.sh",
        "printf 'id,v\\n1,a\\n2,b\\n' > \"$WEIR_OUTPUT_DIR/up.csv\"\n",
    );
    sb.script(
        "down.sh",
        r#"for f in "$WEIR_INPUT_UPD"/*.csv; do
  chmod u+w "$f"; echo "3,EVIL" >> "$f"
done
chmod u+w "$WEIR_INPUT_RAW"; echo "2,EVIL" >> "$WEIR_INPUT_RAW"
echo "$WEIR_INPUT_UPD" > "$WEIR_OUTPUT_DIR/../input-path.txt"
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/down.csv"
"#,
    );
    let upstream_before = {
        let out = sb.run("r1", &["--task", "up"]);
        sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("up p attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:d98be1f46a8221dd289e377e5371f3833752d933795ce1aebc9f34957977e6f3\n");
        Visible::of(&sb.store("upd", "p")).bytes()
    };
    let out = sb.run("r2", &[]);
    sb.check(&out).code(0).stdout("run r2: 2 task instances: 1 published, 1 already published; 0 retries\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("up p: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\ndown p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:0ead588b958bcac06f302c5cc2df9d55363a52b2a75bcff608f661d198034209\n");
    let upstream = Visible::of(&sb.store("upd", "p"));
    assert_eq!(
        upstream.bytes(),
        upstream_before,
        "the published input changed"
    );
    intact(&sb, "upd", "p", weir::audit::Format::Csv);
    assert_eq!(
        std::fs::read_to_string(sb.path().join("raw.csv")).unwrap(),
        "id,v\n1,r\n",
        "the external input changed"
    );
    // The task was handed a copy inside its own attempt, gone after it.
    let down = Visible::of(&sb.store("downd", "p"));
    let attempt = sb.store("downd", "p").attempt_dir(down.record.token);
    let seen = std::fs::read_to_string(attempt.join("input-path.txt")).unwrap();
    assert!(Path::new(seen.trim()).starts_with(&attempt), "{seen}");
    assert_eq!(seen.trim(), attempt.join("input-upd").to_str().unwrap());
    assert!(!attempt.join("input-upd").exists());
    let check = sb.weir_out(&["status", "m.toml", "--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
}

/// What a downstream task finds at `WEIR_INPUT_<NAME>`: a directory of
/// its own right in its attempt's, holding read-only copies whose bytes
/// hash to what the upstream's commit record holds; gone once the attempt
/// ended, leaving no other input directory behind.
#[test]
fn a_downstream_input_is_a_read_only_checked_copy_in_its_attempt_and_gone_after() {
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["p"]

[tasks.up]
command = ["sh", "up.sh"]
output = { dataset = "upd", grain = ["id"] }

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["upd"]
output = { dataset = "downd", grain = ["id"] }
"#,
    ));
    sb.script(
        "up.sh",
        "printf 'id,v\\n1,a\\n' > \"$WEIR_OUTPUT_DIR/a.csv\"\nprintf 'id,v\\n2,b\\n' > \"$WEIR_OUTPUT_DIR/b.csv\"\n",
    );
    sb.script(
        "down.sh",
        r#"echo "$WEIR_INPUT_UPD" > "$WEIR_OUTPUT_DIR/../seen.txt"
for f in "$WEIR_INPUT_UPD"/*; do
  echo "$f $(stat -c '%a' "$f") sha256:$(sha256sum < "$f" | cut -d' ' -f1)" >> "$WEIR_OUTPUT_DIR/../seen.txt"
done
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/down.csv"
"#,
    );
    ok(&sb.run("r1", &[]));
    let up = Visible::of(&sb.store("upd", "p")).record;
    let down = Visible::of(&sb.store("downd", "p")).record;
    let attempt = sb.store("downd", "p").attempt_dir(down.token);
    let copies = attempt.join("input-upd");
    let mut expected = vec![copies.display().to_string()];
    for sum in &up.file_sums {
        expected.push(format!(
            "{} 444 {}",
            copies.join(&sum.name).display(),
            sum.sha256
        ));
    }
    assert_eq!(up.file_sums.len(), 2, "{up:?}");
    let seen = std::fs::read_to_string(attempt.join("seen.txt")).unwrap();
    assert_eq!(seen.lines().collect::<Vec<_>>(), expected);
    let left: Vec<String> = std::fs::read_dir(&attempt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("input"))
        .collect();
    assert!(
        left.is_empty(),
        "input copies left in the attempt: {left:?}"
    );
}

/// A one-task manifest over `keys` whose script is `t.sh`.
fn one_task(keys: &[&str], format: &str) -> Sandbox {
    Sandbox::new(&manifest(&format!(
        r#"
[partitions.k]
kind = "static"
keys = {keys:?}

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "out", format = "{format}", grain = ["id"] }}
"#
    )))
}

/// The GATE_FAILED detail of `t` at `key` in run `run_id`.
#[track_caller]
fn refusal(sb: &Sandbox, run_id: &str, key: &str) -> String {
    let events = sb.events(run_id);
    let found: Vec<&weir::events::EventRecord> = events
        .iter()
        .filter(|e| e.partition.as_deref() == Some(key) && e.state == State::GateFailed)
        .collect();
    assert_eq!(found.len(), 1, "{key}: {events:#?}");
    assert!(
        events
            .iter()
            .any(|e| e.partition.as_deref() == Some(key) && e.state == State::Quarantined),
        "{key}"
    );
    assert!(
        sb.store("out", key).latest().unwrap().is_none(),
        "{key} was published"
    );
    found[0].detail.clone()
}

// Links in the output are refused, naming the file: a symlink to
// a file outside, a hard link to another partition's published file, a
// dangling symlink.
#[test]
fn links_in_the_output_are_refused() {
    let sb = one_task(&["a", "symlink", "hardlink", "dangling"], "csv");
    std::fs::write(sb.path().join("outside.csv"), "id,v\n1,x\n").unwrap();
    sb.script(
        "t.sh",
        r#"d="$WEIR_OUTPUT_DIR"
case "$WEIR_PARTITION" in
  a) printf 'id,v\n1,a\n' > "$d/rows.csv" ;;
  symlink) ln -s "$PWD/outside.csv" "$d/rows.csv" ;;
  hardlink) ln "$(ls "$d"/../../../../a/data-*/rows.csv | head -n 1)" "$d/rows.csv" ;;
  dangling) printf 'id,v\n1,a\n' > "$d/rows.csv"; ln -s "$PWD/nowhere.csv" "$d/more.csv" ;;
esac
"#,
    );
    let out = sb.run("r1", &["--partition", "a"]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t a attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:daec81e5b44abf4f39c6b96e72319f59fd3d1f6bbb2024430843a9846c3e437c\n");
    let out = sb.run("r2", &[]);
    sb.check(&out).code(1).stdout("run r2: 4 task instances: 1 already published, 3 quarantined; 0 retries\n  QUARANTINED t symlink: deterministic failure: the output is not publishable: `rows.csv` is a symbolic link to `$SB/outside.csv`: links are refused, write a regular file\n  QUARANTINED t hardlink: deterministic failure: the output is not publishable: `rows.csv` is a hard link (2 names for one file): links are refused, write a regular file\n  QUARANTINED t dangling: deterministic failure: the output is not publishable: `more.csv` is a symbolic link to `$SB/nowhere.csv` (dangling): links are refused, write a regular file\nevents: $SB/wh/_runs/r2/events.jsonl\n").stderr_unordered("t a: ALREADY_PUBLISHED generation 1 has the same input snapshot (code_version 1): nothing to do\nt dangling attempt 1 token 1: GATE_FAILED the output is not publishable: `more.csv` is a symbolic link to `$SB/nowhere.csv` (dangling): links are refused, write a regular file\nt dangling attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `more.csv` is a symbolic link to `$SB/nowhere.csv` (dangling): links are refused, write a regular file: quarantined, not retried\nt hardlink attempt 1 token 1: GATE_FAILED the output is not publishable: `rows.csv` is a hard link (2 names for one file): links are refused, write a regular file\nt hardlink attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `rows.csv` is a hard link (2 names for one file): links are refused, write a regular file: quarantined, not retried\nt symlink attempt 1 token 1: GATE_FAILED the output is not publishable: `rows.csv` is a symbolic link to `$SB/outside.csv`: links are refused, write a regular file\nt symlink attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `rows.csv` is a symbolic link to `$SB/outside.csv`: links are refused, write a regular file: quarantined, not retried\n");
    let symlink = refusal(&sb, "r2", "symlink");
    assert!(
        symlink.contains("`rows.csv` is a symbolic link to `"),
        "{symlink}"
    );
    assert!(symlink.contains("outside.csv`"), "{symlink}");
    let hard = refusal(&sb, "r2", "hardlink");
    assert!(
        hard.contains("`rows.csv` is a hard link (2 names"),
        "{hard}"
    );
    let dangling = refusal(&sb, "r2", "dangling");
    assert!(
        dangling.contains("`more.csv` is a symbolic link to `")
            && dangling.contains("nowhere.csv` (dangling)"),
        "{dangling}"
    );
    // The other partition's published file is untouched and still the
    // only name of its bytes.
    intact(&sb, "out", "a", weir::audit::Format::Csv);
}

// A sub-directory, another suffix (`.CSV`), a dot-file and a FIFO
// in the output are a gate failure naming the entry, not silently ignored.
#[test]
fn odd_entries_in_the_output_are_named() {
    let sb = one_task(&["subdir", "upper", "dot", "fifo"], "csv");
    sb.script(
        "t.sh",
        r#"d="$WEIR_OUTPUT_DIR"
printf 'id,v\n1,a\n' > "$d/rows.csv"
case "$WEIR_PARTITION" in
  subdir) mkdir "$d/part-2"; printf 'id,v\n2,b\n' > "$d/part-2/rows.csv" ;;
  upper) printf 'id,v\n2,b\n' > "$d/MORE.CSV" ;;
  dot) printf 'id,v\n2,b\n' > "$d/.more.csv" ;;
  fifo) mkfifo "$d/more.csv" ;;
esac
"#,
    );
    let out = sb.run("r1", &[]);
    sb.check(&out).code(1).stdout("run r1: 4 task instances: 4 quarantined; 0 retries\n  QUARANTINED t subdir: deterministic failure: the output is not publishable: `part-2` is a directory: only files directly in WEIR_OUTPUT_DIR are published\n  QUARANTINED t upper: deterministic failure: the output is not publishable: `MORE.CSV` is not named `*.csv` (the output's format is csv)\n  QUARANTINED t dot: deterministic failure: the output is not publishable: `.more.csv` is a dot-file: output files are named `*.csv`\n  QUARANTINED t fifo: deterministic failure: the output is not publishable: `more.csv` is a FIFO, not a regular file\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t dot attempt 1 token 1: GATE_FAILED the output is not publishable: `.more.csv` is a dot-file: output files are named `*.csv`\nt dot attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `.more.csv` is a dot-file: output files are named `*.csv`: quarantined, not retried\nt fifo attempt 1 token 1: GATE_FAILED the output is not publishable: `more.csv` is a FIFO, not a regular file\nt fifo attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `more.csv` is a FIFO, not a regular file: quarantined, not retried\nt subdir attempt 1 token 1: GATE_FAILED the output is not publishable: `part-2` is a directory: only files directly in WEIR_OUTPUT_DIR are published\nt subdir attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `part-2` is a directory: only files directly in WEIR_OUTPUT_DIR are published: quarantined, not retried\nt upper attempt 1 token 1: GATE_FAILED the output is not publishable: `MORE.CSV` is not named `*.csv` (the output's format is csv)\nt upper attempt 1 token 1: QUARANTINED deterministic failure: the output is not publishable: `MORE.CSV` is not named `*.csv` (the output's format is csv): quarantined, not retried\n");
    for (key, needle) in [
        ("subdir", "`part-2` is a directory"),
        ("upper", "`MORE.CSV` is not named `*.csv`"),
        ("dot", "`.more.csv` is a dot-file"),
        ("fifo", "`more.csv` is a FIFO"),
    ] {
        let detail = refusal(&sb, "r1", key);
        assert!(detail.contains(needle), "{key}: {detail}");
    }
}

// The task reads the pinned bytes of an external input, even when
// the live file changes while it runs; the snapshot's hash is what it read.
#[test]
fn an_external_input_changed_mid_task_is_not_read() {
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["p"]

[datasets.raw]
path = "raw.csv"
format = "csv"

[tasks.copy]
command = ["sh", "copy.sh"]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }
"#,
    ));
    let original = "id,v\n1,old\n2,old\n";
    std::fs::write(sb.path().join("raw.csv"), original).unwrap();
    sb.script(
        "copy.sh",
        r#"touch started
while [ ! -f go ]; do sleep 0.01; done
cat "$WEIR_INPUT_RAW" > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    let engine = Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "r1"]),
        sb.path(),
        "r1",
    );
    poll_until("the task to start", LIMIT, || {
        sb.path().join("started").exists()
    });
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,NEW\n").unwrap();
    std::fs::write(sb.path().join("go"), "").unwrap();
    let out = engine.finish(LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let visible = Visible::of(&sb.store("copied", "p"));
    assert_eq!(visible.bytes(), [original.as_bytes()]);
    let pinned = &visible.record.input_snapshot["inputs"][0]["digest"];
    let (_, read) = weir::store::file_sum::hash_file(&visible.files[0]).unwrap();
    assert_eq!(
        pinned.as_str(),
        Some(read.as_str()),
        "the snapshot names what was read"
    );
}

// A killed engine's task does not run beside its retry: with a
// 1-slot pool, kill -9 of the engine mid-command then a restart never has
// two commands running at once (from the commands' own clocks).
#[test]
fn kill_9_then_restart_never_runs_two_commands_in_one_slot() {
    let _serial = exclusive();
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["a", "b"]

[pools.one]
slots = 1

[tasks.t]
command = ["sh", "t.sh"]
output = { dataset = "out", grain = ["id"] }
pool = "one"
heartbeat = "100ms"
"#,
    ));
    // sh runs the ticker as its child: the engine's death kills sh; the
    // ticker is a grandchild only the next engine can stop.
    sb.script(
        "t.sh",
        r#"python3 tick.py "$WEIR_TOKEN-$WEIR_PARTITION"
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    sb.script(
        "tick.py",
        r#"import sys, time
with open("ticks.log", "a") as log:
    for _ in range(40):
        log.write(f"{sys.argv[1]} {time.time_ns()}\n")
        log.flush()
        time.sleep(0.02)
"#,
    );
    let ticks = sb.path().join("ticks.log");
    let first = Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "k1"]),
        sb.path(),
        "k1",
    );
    poll_until("the first command to tick", LIMIT, || {
        std::fs::read_to_string(&ticks).is_ok_and(|t| t.lines().count() >= 5)
    });
    let status = first.kill();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // The command itself dies with its engine (PR_SET_PDEATHSIG), at once.
    let killed_at = Instant::now();
    while survivors(&sb).iter().any(|p| p.contains(" t.sh")) {
        assert!(
            killed_at.elapsed() < Duration::from_millis(300),
            "the command outlived its engine: {:?}",
            survivors(&sb)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "k2"]),
        sb.path(),
        "k2",
    )
    .finish(LIMIT);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Long enough for a surviving ticker to finish its 40 ticks.
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(survivors(&sb), Vec::<String>::new());
    let text = std::fs::read_to_string(&ticks).unwrap();
    let mut spans: std::collections::BTreeMap<&str, (u128, u128)> = Default::default();
    for line in text.lines() {
        let (who, ns) = line.split_once(' ').unwrap();
        let ns: u128 = ns.parse().unwrap();
        let span = spans.entry(who).or_insert((ns, ns));
        span.0 = span.0.min(ns);
        span.1 = span.1.max(ns);
    }
    assert!(
        spans.len() >= 3,
        "killed, retried and the other partition: {spans:?}"
    );
    assert_eq!(
        max_overlap(spans.values()),
        1,
        "two commands overlapped: {spans:?}"
    );
    let events = sb.events("k2");
    assert!(
        events.iter().any(|e| e.state == State::TakenOver),
        "{events:#?}"
    );
}

// JSON Lines numbers are values by their literal text: two keys
// that differ beyond 2^64 are not duplicates, their digests differ, and
// `show` prints them exactly; a CSV value that is not UTF-8 is shown as is.
#[test]
fn big_json_integers_and_raw_bytes_are_values() {
    let sb = one_task(&["p1", "p2"], "jsonl");
    sb.script(
        "t.sh",
        r#"if [ "$WEIR_PARTITION" = p1 ]; then
  printf '{"id":123456789012345678901234567890,"v":1}\n{"id":123456789012345678901234567891,"v":1}\n' > "$WEIR_OUTPUT_DIR/rows.jsonl"
else
  printf '{"id":123456789012345678901234567890,"v":1}\n{"id":123456789012345678901234567892,"v":1}\n' > "$WEIR_OUTPUT_DIR/rows.jsonl"
fi
"#,
    );
    let out = sb.run("r1", &[]);
    sb.check(&out).code(0).stdout("run r1: 2 task instances: 2 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t p1 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:fd85eb59b91bef64f4d575a9ca1a612f3d6e42bb32525b1aa0127c9a3ad8403c\nt p2 attempt 1 token 1: PUBLISHED generation 1: 2 rows, sha256:2f2e6bee0b4f7279b0611579f333287c82e2e79e31c72b7968ed65efcdef1fca\n");
    let p1 = sb.store("out", "p1").latest().unwrap().unwrap();
    let p2 = sb.store("out", "p2").latest().unwrap().unwrap();
    assert_eq!((p1.rows, p2.rows), (2, 2));
    assert_ne!(p1.digest, p2.digest);
    let show = sb.weir_out(&["show", "m.toml", "out", "--partition", "p1"]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert_eq!(
        stdout(&show),
        "id,v\n123456789012345678901234567890,1\n123456789012345678901234567891,1\n"
    );

    let sb = one_task(&["p"], "csv");
    sb.script(
        "t.sh",
        "printf 'id,v\\n1,caf\\351\\n' > \"$WEIR_OUTPUT_DIR/rows.csv\"\n",
    );
    let out = sb.run("r1", &[]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:7984879a73980b64d3b97a1af0959f0c37fcad7f6ade2c08da2d1cbce7161419\n");
    let show = sb.weir_out(&["show", "m.toml", "out", "--partition", "p"]);
    assert_eq!(show.status.code(), Some(0), "{}", stderr(&show));
    assert_eq!(show.stdout, b"id,v\n1,caf\xe9\n");
}

// A published file that drifts (same size, other bytes) or
// vanishes is reported by name with exit 5 by `show`, `verify` and
// `status --check`; plain `status` catches a size change or a vanished file.
#[test]
fn drifted_or_vanished_files_exit_5_naming_the_file() {
    let sb = one_task(&["p"], "csv");
    sb.script(
        "t.sh",
        "printf 'id,v\\n1,a\\n' > \"$WEIR_OUTPUT_DIR/rows.csv\"\n",
    );
    let out = sb.run("r1", &[]);
    sb.check(&out).code(0).stdout("run r1: 1 task instance: 1 published; 0 retries\nevents: $SB/wh/_runs/r1/events.jsonl\n").stderr_unordered("t p attempt 1 token 1: PUBLISHED generation 1: 1 rows, sha256:daec81e5b44abf4f39c6b96e72319f59fd3d1f6bbb2024430843a9846c3e437c\n");
    let file: PathBuf = Visible::of(&sb.store("out", "p")).files.remove(0);
    let shown = file.display().to_string();
    std::fs::write(&file, "id,v\n1,b\n").unwrap();
    for args in [
        &["show", "m.toml", "out", "--partition", "p"][..],
        &["verify", "m.toml", "t", "--partition", "p"],
        &["status", "m.toml", "--check"],
    ] {
        let out = sb.weir_out(args);
        assert_eq!(
            out.status.code(),
            Some(5),
            "{}",
            crate::support::stderr(&out)
        );
        let err = stderr(&out).replace('\n', " ");
        assert!(err.contains("rows.csv"), "{args:?}: {err}");
        assert!(err.contains("changed content"), "{args:?}: {err}");
    }
    assert!(stderr(&sb.weir_out(&["status", "m.toml", "--check"])).contains(&shown));
    std::fs::remove_file(&file).unwrap();
    let out = sb.weir_out(&["status", "m.toml"]);
    sb.check(&out).code(5).stdout("dataset  partition  gen  token  rows  code_version  published_at              digest\nout      p            1      1     1  1             [..]  sha256:daec81e5b44a…\n\nout: 1 partition built by code_version 1\n").stderr("error: published file `$SB/wh/out/p/data-00000000000000000001/rows.csv` of `out` p generation 1 vanished\n1 published file drifted from its commit records\n");
    assert!(stderr(&out).contains("vanished"), "{}", stderr(&out));
    let json = sb.weir_out(&["status", "m.toml", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["drifted"][0]["file"], shown.as_str());
}

/// Published means immutable under any schedule of engines: three engines
/// on one warehouse, paused, continued and killed at random,
/// then restarted until the pipeline is published: every generation any of
/// them published still has the files, sizes and hashes it committed.
#[test]
fn three_engines_under_stop_cont_kill_publish_only_intact_files() {
    let _serial = exclusive();
    let keys: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    let sb = Sandbox::new(&manifest(&format!(
        r#"
[partitions.k]
kind = "static"
keys = {keys:?}

[pools.work]
slots = 2

[tasks.up]
command = ["sh", "up.sh"]
output = {{ dataset = "upd", grain = ["id"] }}
pool = "work"
heartbeat = "100ms"

[tasks.down]
command = ["sh", "down.sh"]
inputs = ["upd"]
output = {{ dataset = "downd", grain = ["id"] }}
pool = "work"
heartbeat = "100ms"
"#
    )));
    // A background writer that would append after the command, and a
    // downstream that writes into its input.
    sb.script(
        "up.sh",
        r#"printf 'id,v\n1,%s\n2,%s\n' "$WEIR_PARTITION" "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/rows.csv"
setsid sh -c 'sleep 0.2; echo "9,late" >> "$0"' "$WEIR_OUTPUT_DIR/rows.csv" > /dev/null 2>&1 < /dev/null &
sleep 0.05
"#,
    );
    sb.script(
        "down.sh",
        r#"for f in "$WEIR_INPUT_UPD"/*.csv; do chmod u+w "$f"; echo "8,evil" >> "$f"; done
printf 'id\n%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/down.csv"
sleep 0.05
"#,
    );
    let mut rng = fastrand::Rng::with_seed(11);
    let started = Instant::now();
    let mut n = 0;
    for _round in 0..3 {
        let mut engines: Vec<Engine> = (0..3)
            .map(|_| {
                n += 1;
                let id = format!("e{n}");
                Engine::spawn(
                    sb.weir(&["run", "m.toml", "--run-id", &id, "--force"]),
                    sb.path(),
                    &id,
                )
            })
            .collect();
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(rng.u64(20..80)));
            let e = rng.usize(..engines.len());
            if engines[e].exited() {
                continue;
            }
            match rng.u8(0..3) {
                0 => engines[e].signal(libc::SIGSTOP),
                1 => engines[e].signal(libc::SIGCONT),
                _ => engines[e].signal(libc::SIGKILL),
            }
        }
        for e in &mut engines {
            if !e.exited() {
                e.signal(libc::SIGCONT);
            }
        }
        for e in engines {
            // Any ending is fine here: killed, refused, or done.
            let _ = e.finish_within(LIMIT);
        }
    }
    // The last engine stops what the killed ones left running first.
    let out = sb.run("final", &[]);
    sb.check(&out).code(0).stdout("run final: 12 task instances: 12 already published; 0 retries\nevents: $SB/wh/_runs/final/events.jsonl\n")
        // How many generations the killed engines published varies.
        .stderr_unordered("down p0: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\ndown p1: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\ndown p2: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\ndown p3: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\ndown p4: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\ndown p5: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p0: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p1: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p2: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p3: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p4: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\nup p5: ALREADY_PUBLISHED generation [..] has the same input snapshot (code_version 1): nothing to do\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        survivors(&sb),
        Vec::<String>::new(),
        "task processes outlived every engine"
    );
    let mut generations = 0;
    for key in &keys {
        for dataset in ["upd", "downd"] {
            intact(&sb, dataset, key, weir::audit::Format::Csv);
            generations += sb.store(dataset, key).history().unwrap().len();
        }
    }
    let check = sb.weir_out(&["status", "m.toml", "--check"]);
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));
    eprintln!(
        "chaos: {n} engines, {generations} generations checked in {:.1?}",
        started.elapsed()
    );
}

// A rollback never republishes files that drifted from the
// generation they belong to.
#[test]
fn rollback_refuses_a_drifted_generation() {
    let sb = one_task(&["p"], "csv");
    sb.script(
        "t.sh",
        "printf 'id,v\\n1,%s\\n' \"$WEIR_TOKEN\" > \"$WEIR_OUTPUT_DIR/rows.csv\"\n",
    );
    for run in ["r1", "r2"] {
        let out = sb.run(run, &["--force"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            crate::support::stderr(&out)
        );
    }
    let store = sb.store("out", "p");
    let first = store
        .record(weir::store::Generation::FIRST)
        .unwrap()
        .unwrap();
    let file = store.visible_files(&first).remove(0);
    std::fs::write(&file, "id,v\n1,X\n").unwrap();
    let out = sb.weir_out(&["rollback", "m.toml", "out", "--partition", "p", "--to", "1"]);
    sb.check(&out).code(3).stdout("").stderr("weir::rollback::bad_target\n\n  × cannot roll back to generation 1: published file `$SB/wh/out/\n  │ p/data-00000000000000000001/rows.csv` of `out` p generation 1 changed\n  │ content:\n  │ sha256:147e0064c2bc8d39851c107073c082eb2de0d4329fee793442e81acef4f0a3c2\n  │ committed,\n  │ sha256:7d9cb3252e60a8e5741c8075af7fd87b1d92f2256c3ce5ba0f540ca5153dbbaf\n  │ now\n  help: `weir history` lists generations; pass `--to` one older than the\n        current\n");
    let err = stderr(&out).replace('\n', " ");
    assert!(
        err.contains("rows.csv") && err.contains("changed") && err.contains("content:"),
        "{err}"
    );
    assert_eq!(store.history().unwrap().len(), 2, "nothing was committed");
}

// An external input that moves between pinning and the attempt's
// copy fails that attempt as transient, and the retry pins it again: the
// record names exactly the bytes the task read.
#[test]
fn an_input_moved_after_pinning_is_pinned_again() {
    let _serial = exclusive();
    let sb = Sandbox::new(&manifest(
        r#"
[partitions.k]
kind = "static"
keys = ["p"]

[datasets.raw]
path = "raw.csv"
format = "csv"

[retry.quick]
max_attempts = 3
backoff = { initial = "10ms", max = "20ms" }

[tasks.copy]
command = ["sh", "copy.sh"]
inputs = ["raw"]
output = { dataset = "copied", grain = ["id"] }
heartbeat = "100ms"
retry = "quick"
"#,
    ));
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,old\n").unwrap();
    sb.script(
        "copy.sh",
        r#"touch "started-$WEIR_RUN_ID"
while [ ! -f go ]; do sleep 0.01; done
cat "$WEIR_INPUT_RAW" > "$WEIR_OUTPUT_DIR/out.csv"
"#,
    );
    // A runs the instance; B, forced, pins the input and waits for A's lease.
    let a = Engine::spawn(sb.weir(&["run", "m.toml", "--run-id", "A"]), sb.path(), "A");
    poll_until("A's task", LIMIT, || sb.path().join("started-A").exists());
    let b = Engine::spawn(
        sb.weir(&["run", "m.toml", "--run-id", "B", "--force"]),
        sb.path(),
        "B",
    );
    poll_until("B to wait for A", LIMIT, || {
        weir::events::read_log(&sb.path().join("wh/_runs/B/events.jsonl"))
            .is_ok_and(|(events, _)| events.iter().any(|e| e.state == State::Waiting))
    });
    std::fs::write(sb.path().join("raw.csv"), "id,v\n1,new\n").unwrap();
    std::fs::write(sb.path().join("go"), "").unwrap();
    let a = a.finish(LIMIT);
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    let b = b.finish(LIMIT);
    assert_eq!(b.status.code(), Some(0), "{}", stderr(&b));
    let events = sb.events("B");
    let moved = events
        .iter()
        .find(|e| e.state == State::Failed)
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(
        moved.detail.contains("changed since it was pinned"),
        "{}",
        moved.detail
    );
    assert!(events.iter().any(|e| e.state == State::Retrying));
    let store = sb.store("copied", "p");
    let history = store.history().unwrap();
    assert_eq!(history.len(), 2, "A's and B's generations");
    for record in &history {
        let files = store.visible_files(record);
        let (_, read) = weir::store::file_sum::hash_file(&files[0]).unwrap();
        assert_eq!(
            record.input_snapshot["inputs"][0]["digest"].as_str(),
            Some(read.as_str()),
            "generation {}: the snapshot names what was read",
            record.generation
        );
    }
    assert_eq!(Visible::of(&store).bytes(), [b"id,v\n1,new\n".to_vec()]);
}
