//! No catch-up, and backfills: their own pool and slots beside current runs,
//! `depends_on_past` order, resumption after a crash, and the two-year
//! Marigold rebuild. Everything goes through the binary.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use weir::events::{EventRecord, State};

use crate::support::{
    copy_tree_without_warehouse, exclusive, max_overlap, poll_until, repo, states, stderr, stdout,
    Engine, Sandbox, Visible,
};

/// A task script that logs `start|end <ns> <partition> <run id>` to
/// `intervals.log` (in the manifest's directory, outside the warehouse)
/// around a sleep of `sleep` seconds.
fn interval_script(sleep: &str) -> String {
    format!(
        r#"echo "start $(date +%s%N) $WEIR_PARTITION $WEIR_RUN_ID" >> intervals.log
sleep {sleep}
printf 'id,day\n1,%s\n' "$WEIR_PARTITION" > "$WEIR_OUTPUT_DIR/out.csv"
echo "end $(date +%s%N) $WEIR_PARTITION $WEIR_RUN_ID" >> intervals.log
"#
    )
}

/// (start, end) in ns per (run id, partition), from `intervals.log`; each
/// instance must have exactly one start and one end (one attempt each).
fn intervals(sb: &Sandbox) -> BTreeMap<(String, String), (u128, u128)> {
    let log = std::fs::read_to_string(sb.path().join("intervals.log")).unwrap_or_default();
    let mut starts: BTreeMap<(String, String), Vec<u128>> = BTreeMap::new();
    let mut ends: BTreeMap<(String, String), Vec<u128>> = BTreeMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.len(), 4, "malformed line {line:?}");
        let key = (parts[3].to_owned(), parts[2].to_owned());
        let t: u128 = parts[1].parse().expect("date +%s%N");
        match parts[0] {
            "start" => starts.entry(key).or_default().push(t),
            "end" => ends.entry(key).or_default().push(t),
            other => panic!("unknown mark {other:?}"),
        }
    }
    assert_eq!(
        starts.keys().collect::<Vec<_>>(),
        ends.keys().collect::<Vec<_>>(),
        "every start has its end:\n{log}"
    );
    starts
        .into_iter()
        .map(|(key, s)| {
            let e = &ends[&key];
            assert!(
                s.len() == 1 && e.len() == 1,
                "one attempt of {key:?}:\n{log}"
            );
            assert!(s[0] < e[0], "{key:?}");
            (key, (s[0], e[0]))
        })
        .collect()
}

/// The most task commands running at once according to the log: a command
/// runs from its attempt's RUNNING to its SUCCESS or FAILED (a pool slot is
/// the command's; auditing and publishing happen outside it).
fn max_running_in_log(events: &[EventRecord]) -> usize {
    let mut open = std::collections::HashSet::new();
    let mut max = 0;
    for e in events {
        let key = (e.task.clone(), e.partition.clone(), e.attempt);
        match e.state {
            State::Running => assert!(open.insert(key), "started twice: {e:?}"),
            State::Success | State::Failed => {
                open.remove(&key);
            }
            _ => {}
        }
        max = max.max(open.len());
    }
    assert!(open.is_empty(), "every command ended: {open:?}");
    max
}

/// Days from `first` to `last` inclusive, as partition keys.
fn days(first: &str, last: &str) -> Vec<String> {
    let mut day: jiff::civil::Date = first.parse().unwrap();
    let last: jiff::civil::Date = last.parse().unwrap();
    let mut out = Vec::new();
    while day <= last {
        out.push(day.to_string());
        day = day.tomorrow().unwrap();
    }
    out
}

fn count(events: &[EventRecord], state: State) -> usize {
    events.iter().filter(|e| e.state == state).count()
}

/// A daily pipeline with no `end`, one task `t` in pool `current` (1 slot),
/// a pool `backfill` and `extra` appended (backfills, task keys).
fn daily(start: &str, backfill_slots: u32, task_extra: &str, extra: &str, script: &str) -> Sandbox {
    let sb = Sandbox::new(&format!(
        r#"
[pipeline]
name = "backfills"
code_version = "1"
warehouse = "wh"

[partitions.daily]
kind = "daily"
start = "{start}"

[pools.current]
slots = 1

[pools.backfill]
slots = {backfill_slots}

[tasks.t]
command = ["sh", "t.sh"]
output = {{ dataset = "out", grain = ["id"] }}
pool = "current"
{task_extra}

{extra}
"#
    ));
    sb.script("t.sh", script);
    sb
}

#[test]
fn no_catch_up() {
    let sb = daily("2026-08-01", 2, "", "", &interval_script("0"));
    let out = sb.run("latest", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let events = sb.events("latest");
    let running: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.state == State::Running)
        .collect();
    assert_eq!(running.len(), 1, "exactly one attempt: {events:?}");
    assert_eq!(running[0].partition.as_deref(), Some("2026-11-28"));
    let published: Vec<&EventRecord> = events
        .iter()
        .filter(|e| e.state == State::Published)
        .collect();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].partition.as_deref(), Some("2026-11-28"));
    assert!(
        stdout(&out).contains("1 task instance: 1 published"),
        "{}",
        stdout(&out)
    );

    // Only yesterday exists in the warehouse; nothing else was even started.
    let partitions: Vec<String> = std::fs::read_dir(sb.path().join("wh/out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(partitions, ["2026-11-28"]);
    assert_eq!(
        Visible::of(&sb.store("out", "2026-11-28")).rows(),
        [["1", "2026-11-28"]]
    );

    // status lists every other expected partition as missing, not run.
    let status = sb.status_json();
    let listed: Vec<&str> = status["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["2026-11-28"]);
    let missing: Vec<String> = status["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["task"], "t");
            assert_eq!(m["dataset"], "out");
            m["partition"].as_str().unwrap().to_owned()
        })
        .collect();
    let expected = days("2026-08-01", "2026-11-27");
    assert_eq!(expected.len(), 119);
    assert_eq!(missing, expected);
}

/// Starts `weir backfill m.toml NAME --run-id RUN_ID` in the background
/// (killed and reaped if the test fails before waiting for it).
fn spawn_backfill(sb: &Sandbox, name: &str, run_id: &str) -> Engine {
    Engine::spawn(
        sb.weir(&["backfill", "m.toml", name, "--run-id", run_id]),
        sb.path(),
        run_id,
    )
}

#[test]
fn backfill_respects_its_slots_while_a_current_run_completes() {
    // Two engines and wall-clock comparisons: not beside other heavy tests.
    let _serial = exclusive();
    // 12 days, 2 at a time, 0.3 s each: at least 1.8 s of backfill.
    let sb = daily(
        "2026-11-01",
        2,
        "",
        r#"
[backfills.history]
from = "2026-11-05"
to = "2026-11-16"
pool = "backfill"
reason = "rebuild twelve days"
"#,
        &interval_script("0.3"),
    );
    let backfill_days = days("2026-11-05", "2026-11-16");
    let started = Instant::now();
    let mut backfill = spawn_backfill(&sb, "history", "bf");
    poll_until(
        "the backfill's first attempt",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(sb.path().join("intervals.log")).is_ok_and(|l| {
                l.lines()
                    .any(|l| l.starts_with("start") && l.ends_with(" bf"))
            })
        },
    );

    // The latest day, outside the backfill's range, in pool `current`.
    let current_started = Instant::now();
    let current = sb.run("cur", &["--partition", "2026-11-28"]);
    let current_wall = current_started.elapsed();
    assert_eq!(current.status.code(), Some(0), "{}", stderr(&current));
    assert!(
        !backfill.exited(),
        "the current run finished while the backfill was still running"
    );
    let out = backfill.finish(Duration::from_secs(60));
    let backfill_wall = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("12 task instances: 12 published"),
        "{}",
        stdout(&out)
    );
    assert!(
        current_wall * 2 < backfill_wall,
        "current {current_wall:?} vs backfill {backfill_wall:?}"
    );

    let all = intervals(&sb);
    let bf: Vec<(u128, u128)> = all
        .iter()
        .filter(|((run, _), _)| run == "bf")
        .map(|(_, i)| *i)
        .collect();
    let bf_days: Vec<&str> = all
        .keys()
        .filter(|(run, _)| run == "bf")
        .map(|(_, day)| day.as_str())
        .collect();
    assert_eq!(bf_days, backfill_days);
    assert_eq!(max_overlap(&bf), 2, "the backfill used exactly its 2 slots");
    let cur = all[&("cur".to_owned(), "2026-11-28".to_owned())];
    let bf_end = bf.iter().map(|i| i.1).max().unwrap();
    assert!(
        cur.1 < bf_end,
        "the current attempt ended before the backfill"
    );
    assert!(
        bf.iter().any(|&(s, e)| s < cur.1 && cur.0 < e),
        "the current attempt ran beside backfill attempts, not after them"
    );
    // Each run's attempts are only its own partitions.
    let cur_events = sb.events("cur");
    assert_eq!(count(&cur_events, State::Running), 1);
    assert_eq!(
        states(&cur_events, "t", "2026-11-28").last(),
        Some(&State::Published)
    );
    let bf_events = sb.events("bf");
    assert_eq!(count(&bf_events, State::Published), 12);
    assert_eq!(max_running_in_log(&bf_events), 2);
}

#[test]
fn depends_on_past_runs_in_order() {
    let sb = daily(
        "2026-11-01",
        4,
        "depends_on_past = true",
        r#"
[backfills.five]
from = "2026-11-10"
to = "2026-11-14"
pool = "backfill"
reason = "five days in order"
"#,
        &interval_script("0.1"),
    );
    let out = sb.weir_out(&["backfill", "m.toml", "five", "--run-id", "bf"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let expected = days("2026-11-10", "2026-11-14");
    let all = intervals(&sb);
    let ordered: Vec<(u128, u128)> = expected
        .iter()
        .map(|d| all[&("bf".to_owned(), d.clone())])
        .collect();
    assert_eq!(all.len(), 5);
    for (i, pair) in ordered.windows(2).enumerate() {
        assert!(
            pair[1].0 > pair[0].1,
            "{} started before {} ended",
            expected[i + 1],
            expected[i]
        );
    }
    assert_eq!(max_overlap(&ordered), 1, "4 slots, yet never two at once");

    // The log agrees: day N+1 is queued only after day N published.
    let events = sb.events("bf");
    let at = |state: State, day: &str| {
        events
            .iter()
            .position(|e| e.state == state && e.partition.as_deref() == Some(day))
            .unwrap_or_else(|| panic!("{state:?} of {day}"))
    };
    for pair in expected.windows(2) {
        assert!(at(State::Queued, &pair[1]) > at(State::Published, &pair[0]));
    }
    // The first day did not wait for 2026-11-09, which is outside the range
    // and was never published.
    assert!(!sb.path().join("wh/out/2026-11-09").exists());
    assert_eq!(
        states(&events, "t", "2026-11-10"),
        [
            State::Queued,
            State::Running,
            State::Success,
            State::Audited,
            State::Published
        ]
    );
    for day in &expected {
        assert_eq!(sb.records("out", day).len(), 1, "{day}");
    }
}

#[test]
fn resume_after_kill_does_not_redo_published() {
    let _serial = exclusive();
    let sb = daily(
        "2026-11-01",
        2,
        "",
        r#"
[backfills.eight]
from = "2026-11-10"
to = "2026-11-17"
pool = "backfill"
reason = "eight days"
"#,
        &interval_script("0.3"),
    );
    let all_days = days("2026-11-10", "2026-11-17");
    let published = |sb: &Sandbox| -> BTreeSet<String> {
        all_days
            .iter()
            .filter(|d| !sb.entries("out", d, "log").is_empty())
            .cloned()
            .collect()
    };
    let first = spawn_backfill(&sb, "eight", "b1");
    poll_until("3 published partitions", Duration::from_secs(30), || {
        published(&sb).len() >= 3
    });
    // SIGKILL, and reaped: its pid is gone, so its leases read as dead.
    let status = first.kill();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );

    let before = published(&sb);
    assert!(
        before.len() >= 3 && before.len() < all_days.len(),
        "killed mid-way: {before:?}"
    );
    let tokens_before: BTreeMap<String, Vec<String>> = before
        .iter()
        .map(|d| (d.clone(), sb.entries("out", d, "tokens")))
        .collect();
    let records_before: BTreeMap<String, weir::store::CommitRecord> = before
        .iter()
        .map(|d| (d.clone(), Visible::of(&sb.store("out", d)).record))
        .collect();

    let out = sb.weir_out(&["backfill", "m.toml", "eight", "--run-id", "b2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = sb.events("b2");
    for day in &all_days {
        let s = states(&events, "t", day);
        assert_eq!(
            sb.records("out", day).len(),
            1,
            "{day}: exactly one generation"
        );
        let record = Visible::of(&sb.store("out", day)).record;
        if before.contains(day) {
            assert_eq!(s, [State::Queued, State::AlreadyPublished], "{day}");
            assert_eq!(
                sb.entries("out", day, "tokens"),
                tokens_before[day],
                "{day}: no new token"
            );
            assert_eq!(record, records_before[day], "{day}");
            assert_eq!(record.run_id, "b1");
        } else {
            assert_eq!(s.last(), Some(&State::Published), "{day}: {s:?}");
            assert_eq!(record.run_id, "b2", "{day}");
        }
    }
    assert_eq!(
        count(&events, State::AlreadyPublished),
        before.len(),
        "only what was published before the kill is skipped"
    );
}

#[test]
fn marigold_backfill_runs_730_partitions_two_at_a_time() {
    // 730 attempts keep both cores busy: not beside timing-sensitive tests.
    let _serial = exclusive();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("pipelines/marigold.toml"),
        tmp.path().join("marigold.toml"),
    )
    .unwrap();
    copy_tree_without_warehouse(
        &repo().join("pipelines/marigold"),
        &tmp.path().join("marigold"),
    );
    let weir = |args: &[&str]| {
        crate::support::weir()
            .current_dir(tmp.path())
            .args(args)
            .output()
            .unwrap()
    };

    let started = Instant::now();
    let out = weir(&[
        "backfill",
        "marigold.toml",
        "rebuild",
        "--run-id",
        "rebuild",
    ]);
    let took = started.elapsed();
    eprintln!("marigold rebuild (730 partitions) took {took:?}");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("730 task instances: 730 published"),
        "{}",
        stdout(&out)
    );

    let log = tmp
        .path()
        .join("marigold/warehouse/_runs/rebuild/events.jsonl");
    let (events, bad) = weir::events::read_log(&log).unwrap();
    assert!(bad.is_empty());
    assert_eq!(count(&events, State::Published), 730);
    assert_eq!(count(&events, State::Running), 730, "one attempt each");
    assert_eq!(
        max_running_in_log(&events),
        2,
        "pool `backfill` has 2 slots, and both were used"
    );

    let out = weir(&["status", "marigold.toml", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let partitions = status["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 730);
    let keys: Vec<&str> = partitions
        .iter()
        .map(|p| {
            assert_eq!(p["code_version"], "2026.11.1", "{p}");
            assert_eq!(p["generation"], 1, "{p}");
            assert_eq!(p["run_id"], "rebuild", "{p}");
            p["partition"].as_str().unwrap()
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, days("2024-01-01", "2025-12-30"));
    assert_eq!(
        status["code_versions"],
        serde_json::json!([
            { "dataset": "clean_readings", "code_version": "2026.11.1", "partitions": 730 }
        ])
    );
    assert_eq!(status["missing"], serde_json::json!([]));
}
