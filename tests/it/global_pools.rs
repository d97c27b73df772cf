//! A pool's limits hold across every engine sharing the warehouse. Engines
//! are separate `weir` processes; each task records its own start and end
//! (`date +%s%N`), and the limits are measured from those timestamps, not
//! from weir's own account.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::manifest::Pipeline;
use crate::support::{max_overlap, stderr, stdout, Sandbox};

/// Partitions k01..k12 of a task `t` in pool `p` (`pool` is the body of
/// `[pools.p]`); `t` sleeps `$SLEEP` (default 0.3 s) between its start and
/// end lines in `intervals.log`.
fn pipeline(pool: &str) -> Sandbox {
    pipeline_of(pool, 12)
}

/// [`pipeline`] with partitions k01..k`n`.
fn pipeline_of(pool: &str, n: usize) -> Sandbox {
    let keys: Vec<String> = (1..=n).map(|i| format!("k{i:02}")).collect();
    let sb = Pipeline::new("global")
        .static_keys("k", &keys)
        .table(&format!("[pools.p]\n{pool}"))
        .sh_task("t", "out", r#"pool = "p""#)
        .sandbox();
    sb.script(
        "t.sh",
        r#"echo "start $(date +%s%N) $WEIR_PARTITION" >> intervals.log
sleep "${SLEEP:-0.3}"
printf 'id\n1\n' > "$WEIR_OUTPUT_DIR/out.csv"
echo "end $(date +%s%N) $WEIR_PARTITION" >> intervals.log
"#,
    );
    sb
}

/// `weir run` of `keys` as its own process, run id `run`.
fn engine(sb: &Sandbox, run: &str, keys: &[&str], env: &[(&str, &str)]) -> Child {
    let mut args = vec!["run", "m.toml", "--run-id", run];
    for k in keys {
        args.extend(["--partition", k]);
    }
    let mut cmd = sb.weir(&args);
    cmd.envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("weir starts")
}

#[track_caller]
fn finished_ok(child: Child) {
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(&out),
        stderr(&out)
    );
}

/// (start, end) in ns of each partition's run, from `intervals.log`; a
/// partition without an end (its command was killed) has none.
fn intervals(sb: &Sandbox) -> Vec<(String, u128, Option<u128>)> {
    let log = std::fs::read_to_string(sb.path().join("intervals.log")).unwrap_or_default();
    let mut out: Vec<(String, u128, Option<u128>)> = Vec::new();
    for line in log.lines() {
        let mut parts = line.split_whitespace();
        let (what, t, key) = (
            parts.next().unwrap(),
            parts.next().unwrap().parse::<u128>().unwrap(),
            parts.next().unwrap().to_string(),
        );
        match what {
            "start" => out.push((key, t, None)),
            _ => {
                let open = out
                    .iter_mut()
                    .rev()
                    .find(|(k, _, e)| *k == key && e.is_none())
                    .unwrap_or_else(|| panic!("an end without a start:\n{log}"));
                open.2 = Some(t);
            }
        }
    }
    out
}

fn most_at_once(sb: &Sandbox) -> usize {
    let done: Vec<(u128, u128)> = intervals(sb)
        .into_iter()
        .map(|(_, s, e)| (s, e.expect("every command ended")))
        .collect();
    max_overlap(&done)
}

// Two engines on one warehouse and a 2-slot pool ran 4 commands
// at once; three ran 6. The slots are the warehouse's now.
#[test]
fn two_and_three_engines_share_a_pools_slots() {
    let sb = pipeline("slots = 2");
    let a = engine(&sb, "a", &["k01", "k02", "k03", "k04", "k05", "k06"], &[]);
    let b = engine(&sb, "b", &["k07", "k08", "k09", "k10", "k11", "k12"], &[]);
    finished_ok(a);
    finished_ok(b);
    assert_eq!(intervals(&sb).len(), 12);
    assert_eq!(most_at_once(&sb), 2, "{:?}", intervals(&sb));

    let sb = pipeline("slots = 2");
    let engines: Vec<Child> = [
        ("a", ["k01", "k02", "k03", "k04"]),
        ("b", ["k05", "k06", "k07", "k08"]),
        ("c", ["k09", "k10", "k11", "k12"]),
    ]
    .iter()
    .map(|(run, keys)| engine(&sb, run, keys, &[]))
    .collect();
    for e in engines {
        finished_ok(e);
    }
    assert_eq!(intervals(&sb).len(), 12);
    assert_eq!(most_at_once(&sb), 2, "{:?}", intervals(&sb));
    // Every partition published, once.
    for i in 1..=12 {
        let latest = sb.store("out", &format!("k{i:02}")).latest().unwrap();
        assert_eq!(latest.map(|r| r.generation.get()), Some(1), "k{i:02}");
    }
}

// An engine killed (-9) while holding every slot leaks none: an
// engine on the same host sees it gone and takes its slots at once.
#[test]
fn a_killed_engines_slots_are_reclaimed() {
    let sb = pipeline("slots = 2");
    let mut a = engine(&sb, "a", &["k01", "k02"], &[("SLEEP", "60")]);
    let started = Instant::now();
    while intervals(&sb).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a's commands did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Both slots are a's: the slot records name it.
    let held: Vec<String> = (0..2)
        .map(|i| {
            let dir = sb.path().join(format!("wh/_pools/p/slots/{i}"));
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.starts_with('.'))
                .collect();
            names.sort();
            std::fs::read_to_string(dir.join(names.last().unwrap())).unwrap()
        })
        .collect();
    assert!(
        held.iter().all(|r| r.contains("\"state\":\"held\"")),
        "{held:?}"
    );
    a.kill().unwrap();
    a.wait().unwrap();
    let killed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();

    let b_started = Instant::now();
    finished_ok(engine(&sb, "b", &["k03", "k04"], &[("SLEEP", "0.2")]));
    // Without waiting for a heartbeat to time out (15 s): a is certainly
    // dead on this host.
    assert!(
        b_started.elapsed() < Duration::from_secs(10),
        "{:?}",
        b_started.elapsed()
    );
    let runs = intervals(&sb);
    let b_runs: Vec<_> = runs
        .iter()
        .filter(|(k, _, _)| k == "k03" || k == "k04")
        .collect();
    assert_eq!(b_runs.len(), 2, "{runs:?}");
    assert!(b_runs.iter().all(|(_, s, e)| *s > killed && e.is_some()));
    // a's commands died with it: they never wrote their end.
    assert!(runs
        .iter()
        .filter(|(k, _, _)| k == "k01" || k == "k02")
        .all(|(_, _, e)| e.is_none()));
    for key in ["k03", "k04"] {
        assert!(sb.store("out", key).latest().unwrap().is_some(), "{key}");
    }
    // a's heartbeat went with it; b's ended with its run.
    let engines = sb.path().join("wh/_engines");
    assert_eq!(
        std::fs::read_dir(&engines).map(|d| d.count()).unwrap_or(0),
        0,
        "{:?}",
        std::fs::read_dir(&engines).map(|d| d.collect::<Vec<_>>())
    );
    // b gave its slots back: the latest record of each is free.
    for i in 0..2 {
        let dir = sb.path().join(format!("wh/_pools/p/slots/{i}"));
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        let last = std::fs::read_to_string(dir.join(names.last().unwrap())).unwrap();
        assert!(last.contains("\"state\":\"free\""), "{last}");
    }
}

// `rate = "2/1s"` caps launches across engines: in any second at
// most 2 commands start, measured from the commands' own start times.
#[test]
fn a_rate_caps_launches_across_engines() {
    let sb = pipeline("slots = 4\nrate = \"2/1s\"");
    let a = engine(&sb, "a", &["k01", "k02", "k03"], &[("SLEEP", "0.05")]);
    let b = engine(&sb, "b", &["k04", "k05", "k06"], &[("SLEEP", "0.05")]);
    finished_ok(a);
    finished_ok(b);
    let mut starts: Vec<u128> = intervals(&sb).iter().map(|(_, s, _)| *s).collect();
    starts.sort_unstable();
    assert_eq!(starts.len(), 6);
    // The third launch after any launch comes a full second later. The
    // commands' own clocks start after weir launches them, by a few ms idle
    // and by 100 ms or more on a loaded 2-core machine (a late first start
    // shortens the window), so allow 250 ms of that: a limiter letting a
    // third launch through would put it within milliseconds of the first.
    let second = 1_000_000_000u128;
    let slack = 250_000_000u128;
    for w in starts.windows(3) {
        assert!(
            w[2] - w[0] + slack >= second,
            "3 launches within {} ms: {starts:?}",
            (w[2] - w[0]) / 1_000_000
        );
    }
}

// An engine elsewhere (or paused: its pid is alive, so no one can
// call it dead) loses its slots only once its heartbeat has not moved for
// the timeout on the other engine's own clock; a beating one never does.
#[test]
fn a_silent_engine_loses_its_slots_after_the_timeout() {
    let sb = pipeline("slots = 2");
    let timeout = [("WEIR_POOL_TIMEOUT", "2s")];
    let a = engine(&sb, "a", &["k01", "k02"], &[("SLEEP", "4"), timeout[0]]);
    let started = Instant::now();
    while intervals(&sb).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stop = |sig: i32| {
        // SAFETY: kill(2) on the pid of a child this test spawned.
        assert_eq!(unsafe { libc::kill(a.id() as i32, sig) }, 0);
    };
    stop(libc::SIGSTOP);
    let stopped = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let b = engine(&sb, "b", &["k03", "k04"], &[("SLEEP", "0.1"), timeout[0]]);
    let b_out = b.wait_with_output().unwrap();
    stop(libc::SIGCONT);
    assert_eq!(b_out.status.code(), Some(0), "{}", stderr(&b_out));
    let runs = intervals(&sb);
    let first_b = runs
        .iter()
        .filter(|(k, _, _)| k == "k03" || k == "k04")
        .map(|(_, s, _)| *s)
        .min()
        .expect("b ran");
    // Not before a's heartbeat had been still for the timeout.
    assert!(
        first_b >= stopped + 2_000_000_000,
        "b started {} ms after a stopped",
        (first_b.saturating_sub(stopped)) / 1_000_000
    );
    // a wakes: its commands ended while it was stopped; it publishes them,
    // and its releases find the slots already taken over (nothing to do).
    let a_out = a.wait_with_output().unwrap();
    assert_eq!(a_out.status.code(), Some(0), "{}", stderr(&a_out));
    for i in 1..=4 {
        let key = format!("k{i:02}");
        assert!(sb.store("out", &key).latest().unwrap().is_some(), "{key}");
    }
    let records: String = (0..2)
        .flat_map(|i| {
            std::fs::read_dir(sb.path().join(format!("wh/_pools/p/slots/{i}")))
                .unwrap()
                .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(records.contains("\"reclaimed_from\""), "{records}");
}

// An engine waiting for another engine's slots stops waiting on
// SIGINT: exit 130, its instances INTERRUPTED, nothing launched.
#[test]
fn a_wait_for_a_slot_is_interruptible() {
    let sb = pipeline("slots = 1");
    let a = engine(&sb, "a", &["k01"], &[("SLEEP", "60")]);
    let started = Instant::now();
    while intervals(&sb).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = engine(&sb, "b", &["k02"], &[]);
    let b_log = weir::events::run_dir(&sb.path().join("wh"), "b").join("events.jsonl");
    // b has queued its instance and allocated its token: it waits for the slot.
    while !weir::events::read_log(&b_log)
        .is_ok_and(|(r, _)| r.iter().any(|e| e.state == weir::events::State::Queued))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "b did not queue"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on the pid of a child this test spawned.
    assert_eq!(unsafe { libc::kill(b.id() as i32, libc::SIGINT) }, 0);
    let interrupted = Instant::now();
    let out = b.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(interrupted.elapsed() < Duration::from_secs(5));
    let states = crate::support::states(&sb.events("b"), "t", "k02");
    assert_eq!(
        states.last(),
        Some(&weir::events::State::Interrupted),
        "{states:?}"
    );
    assert!(
        !states.contains(&weir::events::State::Running),
        "{states:?}"
    );
    assert_eq!(intervals(&sb).len(), 1, "only a's command ran");
    let mut a = a;
    a.kill().unwrap();
    a.wait().unwrap();
}

/// The records of slot `i` of pool `p`: (generation, text), oldest first.
fn slot_records(sb: &Sandbox, i: u32) -> Vec<(u64, String)> {
    let dir = sb.path().join(format!("wh/_pools/p/slots/{i}"));
    let mut records: Vec<(u64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter_map(|e| {
            let name = e.file_name().into_string().unwrap();
            let generation = name.parse().ok()?;
            Some((
                generation,
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            ))
        })
        .collect();
    records.sort();
    records
}

fn keys(range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    range.map(|i| format!("k{i:02}")).collect()
}

// An engine keeps its warehouse slot from one launch to the next
// instead of giving it back and taking it again. Two engines launching many
// short commands on a 2-slot pool still never run more than 2 at once, by
// the commands' own clocks, and the slots are written far less than twice
// per launch.
#[test]
fn two_engines_launching_many_short_commands_never_exceed_the_slots() {
    let sb = pipeline_of("slots = 2", 60);
    let (a_keys, b_keys) = (keys(1..=30), keys(31..=60));
    let a_refs: Vec<&str> = a_keys.iter().map(String::as_str).collect();
    let b_refs: Vec<&str> = b_keys.iter().map(String::as_str).collect();
    let a = engine(&sb, "a", &a_refs, &[("SLEEP", "0.02")]);
    let b = engine(&sb, "b", &b_refs, &[("SLEEP", "0.02")]);
    finished_ok(a);
    finished_ok(b);
    assert_eq!(intervals(&sb).len(), 60);
    assert_eq!(most_at_once(&sb), 2, "{:?}", intervals(&sb));
    for k in a_keys.iter().chain(&b_keys) {
        assert!(sb.store("out", k).latest().unwrap().is_some(), "{k}");
    }
    // A take and a release per launch would be 120 generations.
    let written: u64 = (0..2)
        .map(|i| slot_records(&sb, i).last().expect("a record").0)
        .sum();
    assert!(written < 60, "{written} slot generations for 60 launches");
    for i in 0..2 {
        let (_, last) = slot_records(&sb, i).pop().unwrap();
        assert!(last.contains("\"state\":\"free\""), "{last}");
    }
}

// An engine killed (-9) in the middle of many short launches,
// with its slots kept between them, leaks none: an engine on the same host
// takes both at once, and never runs more than the slots.
#[test]
fn a_killed_engine_keeping_its_slots_leaks_none() {
    let sb = pipeline_of("slots = 2", 44);
    let a_keys = keys(1..=40);
    let a_refs: Vec<&str> = a_keys.iter().map(String::as_str).collect();
    let mut a = engine(&sb, "a", &a_refs, &[("SLEEP", "0.05")]);
    let started = Instant::now();
    while intervals(&sb)
        .iter()
        .filter(|(_, _, e)| e.is_some())
        .count()
        < 6
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a's commands did not run"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    a.kill().unwrap();
    a.wait().unwrap();
    let killed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let b_started = Instant::now();
    finished_ok(engine(
        &sb,
        "b",
        &["k41", "k42", "k43", "k44"],
        &[("SLEEP", "0.3")],
    ));
    // Without waiting for a heartbeat to time out (15 s).
    assert!(
        b_started.elapsed() < Duration::from_secs(10),
        "{:?}",
        b_started.elapsed()
    );
    let runs = intervals(&sb);
    let b_runs: Vec<(u128, u128)> = runs
        .iter()
        .filter(|(k, _, _)| ["k41", "k42", "k43", "k44"].contains(&k.as_str()))
        .map(|(_, s, e)| (*s, e.expect("b's commands ended")))
        .collect();
    assert_eq!(b_runs.len(), 4, "{runs:?}");
    assert!(b_runs.iter().all(|(s, _)| *s > killed), "{runs:?}");
    // Both slots were b's at once (4 commands of 0.3 s, two at a time).
    assert_eq!(max_overlap(&b_runs), 2, "{runs:?}");
    let done: Vec<(u128, u128)> = runs
        .iter()
        .filter_map(|(_, s, e)| e.map(|e| (*s, e)))
        .collect();
    assert!(max_overlap(&done) <= 2, "{runs:?}");
    for i in 0..2 {
        let (_, last) = slot_records(&sb, i).pop().unwrap();
        assert!(last.contains("\"state\":\"free\""), "{last}");
    }
}
